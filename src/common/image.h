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

/* What om_image_print_scan found. */
enum om_print_scan {
    OM_PRINTS_NONE,      /* no kernel the GPUs may run names vprintf */
    OM_PRINTS_MAY,       /* one does */
    OM_PRINTS_UNKNOWN,   /* an entry that may run could not be read (corrupt, libzstd missing) */
    OM_PRINTS_TOO_LARGE, /* more entries, or more bytes to decompress, than the scan allows */
};

/* The GPU versions om_image_print_scan takes at most. */
#define OM_SCAN_ARCHS_MAX 64

/*
 * Whether kernels of the image may call device-side printf: the image names `vprintf`, the
 * function printf compiles to (an extern of PTX text, a symbol of a cubin's string table). In a
 * fatbin only the entries the driver may pick for one of the `narchs` SM versions in archs (90
 * for sm_90) are looked at, decompressed where they are stored compressed (nvcc compresses
 * every entry with -Xfatbin -compress-all, as PyTorch's wheels are built): a cubin of the same
 * major version and a minor one no higher (of that version alone if arch-specific: sm_90a), and
 * PTX of a version no higher where no cubin of exactly the GPU's version is (the driver prefers
 * compiling PTX to running a cubin of a lower minor version). With narchs 0, every entry. An
 * image may hold 65 536 entries and make the scan decompress 64 times its size and 64 MiB at
 * most: past that it is too large to look into.
 */
enum om_print_scan om_image_print_scan(const void *data, size_t len, const unsigned *archs,
                                       int narchs);

#endif
