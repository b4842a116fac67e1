/* SPDX-License-Identifier: MIT */
/* How far a module image reaches, by its own headers. */
#include "image.h"

#include <string.h>

#include "openmps/cuda_abi.h"

uint64_t om_image_extent(const uint8_t *p, uint64_t have)
{
    uint32_t magic = 0;

    if (have >= 4)
        memcpy(&magic, p, 4);
    if (magic == OM_FATBIN_MAGIC) {
        uint16_t header;
        uint64_t fat;
        if (have < 16)
            return UINT64_MAX;
        memcpy(&header, p + 6, 2);
        memcpy(&fat, p + 8, 8);
        return fat <= have && header <= have - fat ? header + fat : UINT64_MAX;
    }
    if (have >= 5 && p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F' && p[4] == 2) {
        uint64_t shoff, phoff;
        uint16_t phentsize, phnum, shentsize, shnum;
        if (have < 64)
            return UINT64_MAX;
        memcpy(&phoff, p + 32, 8);
        memcpy(&shoff, p + 40, 8);
        memcpy(&phentsize, p + 54, 2);
        memcpy(&phnum, p + 56, 2);
        memcpy(&shentsize, p + 58, 2);
        memcpy(&shnum, p + 60, 2);
        uint64_t a = (uint64_t)shentsize * shnum, b = (uint64_t)phentsize * phnum;
        if (shoff > have || a > have - shoff || phoff > have || b > have - phoff)
            return UINT64_MAX;
        return shoff + a > phoff + b ? shoff + a : phoff + b;
    }
    /* text: strnlen stops at the NUL, so nothing past it is read */
    size_t n = strnlen((const char *)p, have > SIZE_MAX ? SIZE_MAX : (size_t)have);
    return n < have ? n + 1 : UINT64_MAX;
}
