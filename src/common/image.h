/* SPDX-License-Identifier: MIT */
/* How far a module image reaches, by its own headers (the driver takes no size). */
#ifndef OM_IMAGE_H
#define OM_IMAGE_H

#include <stdint.h>

/*
 * The bytes of the image at p that the driver reads: a fatbin's header and payload, an ELF
 * file's section and program header tables, PTX (any text image) up to and with its NUL
 * (DRIVER_FACTS.md). Only the first `have` bytes are looked at; UINT64_MAX when the image
 * reaches past them. The shim sizes what it sends with it, the server refuses a staged image
 * that reaches past what was staged.
 */
uint64_t om_image_extent(const uint8_t *p, uint64_t have);

#endif
