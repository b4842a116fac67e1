/* SPDX-License-Identifier: MIT */
/* How far a module image reaches, by its own headers (the driver takes no size). */
#ifndef OM_IMAGE_H
#define OM_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The bytes of the image at p that the driver reads: a fatbin's header and payload, an ELF
 * file's section and program header tables, PTX (any text image) up to and with its NUL
 * (docs/driver-facts.md). Only the first `have` bytes are looked at; UINT64_MAX when the image
 * reaches past them. The shim sizes what it sends with it, the server refuses a staged image
 * that reaches past what was staged.
 */
uint64_t om_image_extent(const uint8_t *p, uint64_t have);

/*
 * The two keys a module image is known by in the server, with its size (server/resources.c,
 * the module cache's file names): two independent 64-bit hashes of its bytes, each mixing 8
 * bytes at a time with its own multipliers and rotations (about 4 GB/s on one core). The shim
 * computes them too, so that an image the server has loaded already needs no bytes sent.
 */
void om_image_keys(const void *data, size_t len, uint64_t *ret_k1, uint64_t *ret_k2);

/*
 * Whether kernels of the image may call device-side printf: the image names `vprintf`, the
 * function printf compiles to (an extern of PTX text, a symbol of a cubin's string table, either
 * inside a fatbin entry stored uncompressed). A compressed fatbin entry is not looked into: its
 * kernels count as printing none (server/output.c says what that costs).
 */
bool om_image_may_print(const void *data, size_t len);

#endif
