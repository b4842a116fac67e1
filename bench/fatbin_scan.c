/* SPDX-License-Identifier: MIT */
/* What the server's look into module images costs (om_image_print_scan: which kernels may print,
 * src/server/output.c), on the fatbins of a real library: every container of its .nv_fatbin
 * section, as the server would see them loaded one by one.
 *
 *   objcopy -O binary --only-section=.nv_fatbin /usr/local/cuda/lib64/libcublasLt.so.13 lt.bin
 *   cc -O2 -Iinclude -o fatbin-scan bench/fatbin_scan.c src/common/fatbin.c src/common/image.c
 *   ./fatbin-scan lt.bin [SM]      (SM: 90 by default; 0 looks at every entry)
 *
 * Prints the containers and entries by codec, their bytes stored and decompressed, what the
 * scan found (none, may print, unreadable) and its time on this core. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/common/fatbin.h"
#include "../src/common/image.h"

static double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    FILE *f = argc > 1 ? fopen(argv[1], "rb") : NULL;
    unsigned arch = argc > 2 ? (unsigned)atoi(argv[2]) : 90;
    long n, containers = 0, found[4] = {0}, entries = 0, codecs[3] = {0};
    double took = 0;
    uint64_t stored = 0, unpacked = 0;
    uint8_t *b;

    if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) != 0 ||
        !(b = malloc((size_t)n)) || fread(b, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "usage: fatbin-scan SECTION.bin [SM]\n");
        return 2;
    }
    fclose(f);
    for (long at = 0; at + 16 <= n;) {
        uint32_t magic;
        uint16_t head;
        uint64_t body;
        memcpy(&magic, b + at, 4);
        memcpy(&head, b + at + 6, 2);
        memcpy(&body, b + at + 8, 8);
        if (magic != 0xBA55ED50u || head > n - at || body > (uint64_t)(n - at) - head) {
            at += 8; /* containers are 8-byte aligned in the section */
            continue;
        }
        size_t len = head + body;
        int k = om_fatbin_entries(b + at, len, NULL, 0);
        if (k < 0) {
            fprintf(stderr, "a container at %ld the server would refuse\n", at);
            at += 8;
            continue;
        }
        struct om_fatbin_entry *e = k > 0 ? calloc((size_t)k, sizeof(*e)) : NULL;
        if (e) {
            om_fatbin_entries(b + at, len, e, k);
            for (int i = 0; i < k; i++) {
                codecs[e[i].codec]++;
                unpacked += e[i].size;
            }
            free(e);
        }
        entries += k > 0 ? k : 0;
        double t0 = now();
        found[om_image_print_scan(b + at, len, &arch, arch ? 1 : 0)]++;
        took += now() - t0;
        containers++;
        stored += len;
        at += (long)len;
    }
    printf("%ld containers, %ld entries (plain %ld, LZ4 %ld, Zstandard %ld), %.1f MB stored, %.1f "
           "MB decompressed; may print %ld, none %ld, unreadable %ld, too large %ld; scan %.3f s "
           "(%s)\n",
           containers, entries, codecs[0], codecs[1], codecs[2], (double)stored / 1e6,
           (double)unpacked / 1e6, found[OM_PRINTS_MAY], found[OM_PRINTS_NONE],
           found[OM_PRINTS_UNKNOWN], found[OM_PRINTS_TOO_LARGE], took,
           arch ? "the entries an SM of that version runs" : "every entry");
    free(b);
    return 0;
}
