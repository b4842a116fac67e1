/* SPDX-License-Identifier: MIT */
/* Fuzz target: a module image's bytes as a client sends them, read by what the server looks at
 * before the driver does: its extent, its fatbin entries, their decompression, whether it may
 * print (common/image.c, common/fatbin.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/common/fatbin.h"
#include "../../src/common/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const unsigned archs[] = {90, 80};
    struct om_fatbin_entry e[16];
    uint8_t *copy = malloc(size ? size : 1); /* exactly its bytes: a read past them is caught */

    if (!copy)
        return 0;
    memcpy(copy, data, size);
    (void)om_image_extent(copy, size);
    (void)om_image_print_scan(copy, size, archs, 2);
    (void)om_image_print_scan(copy, size, archs, 1);
    int n = om_fatbin_entries(copy, size, e, 16);
    for (int i = 0; i < n && i < 16; i++) {
        if (e[i].size > (1u << 24))
            continue;
        uint8_t *buf = malloc(e[i].size ? e[i].size : 1);
        if (buf) {
            (void)om_fatbin_inflate(&e[i], buf, e[i].size);
            free(buf);
        }
    }
    if (size)
        (void)om_lz4_block_decode(copy, size, (uint8_t[256]){0}, 256);
    free(copy);
    return 0;
}
