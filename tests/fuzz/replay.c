/* SPDX-License-Identifier: MIT */
/* Runs a fuzz target over every file of a corpus directory, without libFuzzer. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    int files = 0;

    for (int a = 1; a < argc; a++) {
        struct dirent **names;
        /* In name order: a target may keep state from one input to the next (fuzz_exec's
         * server caches), and a replay must be the same every time. */
        int n = scandir(argv[a], &names, NULL, alphasort);
        if (n < 0) {
            fprintf(stderr, "cannot open corpus %s\n", argv[a]);
            return 1;
        }
        for (int i = 0; i < n; i++) {
            char path[4096];
            FILE *f = NULL;
            uint8_t *buf;
            long len;
            if (names[i]->d_name[0] != '.') {
                snprintf(path, sizeof(path), "%s/%s", argv[a], names[i]->d_name);
                f = fopen(path, "rb");
            }
            free(names[i]);
            if (!f)
                continue;
            fseek(f, 0, SEEK_END);
            len = ftell(f);
            fseek(f, 0, SEEK_SET);
            buf = malloc(len > 0 ? (size_t)len : 1);
            if (buf && fread(buf, 1, (size_t)len, f) == (size_t)len) {
                LLVMFuzzerTestOneInput(buf, (size_t)len);
                files++;
            }
            free(buf);
            fclose(f);
        }
        free(names);
    }
    printf("replayed %d inputs\n", files);
    return files > 0 ? 0 : 1;
}
