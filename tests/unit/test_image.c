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

/* The shim and the server key an image alike (om_image_keys): fixed values (the fuzz corpus's
 * tests/fuzz/make_corpus.py computes the same in Python), and a changed byte changes both. */
TEST(image_keys)
{
    static const struct {
        size_t len;
        uint64_t k1, k2;
    } want[] = {{0, 0x9341ca22e4ac1dc6ull, 0xddffea49fb1dc586ull},
                {3, 0x46ef4ed4b14f0015ull, 0xe49195749ab48238ull},
                {17, 0xe5545bfa59ec142bull, 0xbec318f628a9ff0full}};
    uint8_t data[17];
    uint64_t k1, k2, c1, c2;

    for (int i = 0; i < 17; i++)
        data[i] = (uint8_t)i;
    om_image_keys("abc", 3, &k1, &k2);
    CHECK_EQ(k1, want[1].k1);
    CHECK_EQ(k2, want[1].k2);
    om_image_keys(data, 0, &k1, &k2);
    CHECK_EQ(k1, want[0].k1);
    CHECK_EQ(k2, want[0].k2);
    om_image_keys(data, 17, &k1, &k2);
    CHECK_EQ(k1, want[2].k1);
    CHECK_EQ(k2, want[2].k2);
    data[16] ^= 1; /* the tail */
    om_image_keys(data, 17, &c1, &c2);
    CHECK(c1 != k1 && c2 != k2);
    data[16] ^= 1;
    data[3] ^= 0x80; /* a word */
    om_image_keys(data, 17, &c1, &c2);
    CHECK(c1 != k1 && c2 != k2);
}
