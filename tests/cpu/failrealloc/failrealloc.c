/* SPDX-License-Identifier: MIT */
/* Preloaded by a test: realloc fails for one size (FAILREALLOC_BYTES), so a caller's handling of
 * a failed growth can be checked (the shim's table of device ranges, issue #9). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

__attribute__((visibility("default"))) void *realloc(void *p, size_t n)
{
    static void *(*real)(void *, size_t);
    static size_t fail_at = (size_t)-1;

    if (!real) {
        const char *v = getenv("FAILREALLOC_BYTES");
        fail_at = v ? strtoull(v, NULL, 10) : (size_t)-1;
        real = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    }
    if (n == fail_at)
        return NULL;
    return real(p, n);
}
