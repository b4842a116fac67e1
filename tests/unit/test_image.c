/* SPDX-License-Identifier: MIT */
/* Unit tests: the extent of a module image by its own headers (common/image.c). */
#include <stdint.h>
#include <string.h>

#include "../../src/common/image.h"
#include "test.h"

/* How far a module image reaches by its own headers: what the shim sends, what the server lets
 * the driver read (common/image.c). */
TEST(image_extent)
{
    uint8_t img[128] = {0};
    uint32_t magic = 0xBA55ED50u;
    uint16_t header = 16;
    uint64_t fat = 100, off;
    uint16_t entsize = 8, num = 2;

    memcpy(img, &magic, 4); /* a fatbin: 16 bytes of header, 100 of payload */
    memcpy(img + 6, &header, 2);
    memcpy(img + 8, &fat, 8);
    CHECK_EQ(om_image_extent(img, 128), 116);
    CHECK_EQ(om_image_extent(img, 116), 116);
    CHECK_EQ(om_image_extent(img, 115), UINT64_MAX);
    CHECK_EQ(om_image_extent(img, 10), UINT64_MAX);
    fat = UINT64_MAX - 8; /* a payload that wraps around */
    memcpy(img + 8, &fat, 8);
    CHECK_EQ(om_image_extent(img, 128), UINT64_MAX);

    memset(img, 0, sizeof(img)); /* an ELF file: its tables end at 100 (sections), 80 (program) */
    memcpy(img,
           "\x7f"
           "ELF\x02",
           5);
    off = 64;
    memcpy(img + 32, &off, 8);
    memcpy(img + 54, &entsize, 2);
    memcpy(img + 56, &num, 2);
    off = 84;
    memcpy(img + 40, &off, 8);
    memcpy(img + 58, &entsize, 2);
    memcpy(img + 60, &num, 2);
    CHECK_EQ(om_image_extent(img, 128), 100);
    CHECK_EQ(om_image_extent(img, 99), UINT64_MAX);
    CHECK_EQ(om_image_extent(img, 63), UINT64_MAX);

    CHECK_EQ(om_image_extent((const uint8_t *)".version 8.0\0junk", 18), 13); /* PTX */
    CHECK_EQ(om_image_extent((const uint8_t *)".version 8.0", 12), UINT64_MAX);
}
