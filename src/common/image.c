/* SPDX-License-Identifier: MIT */
/* How far a module image reaches, by its own headers. */
#define _GNU_SOURCE /* memmem */
#include "image.h"

#include <stdlib.h>
#include <string.h>

#include "fatbin.h"

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

static inline uint64_t rotl(uint64_t v, int r)
{
    return (v << r) | (v >> (64 - r));
}

void om_image_keys(const void *data, size_t len, uint64_t *ret_k1, uint64_t *ret_k2)
{
    const uint8_t *p = data;
    uint64_t h1 = 0x9e3779b97f4a7c15ull ^ len, h2 = 0x6a09e667f3bcc908ull ^ (len * 3), w;
    size_t i = 0;

    for (; i + 8 <= len; i += 8) { /* two chains side by side: they cost about one */
        memcpy(&w, p + i, 8);
        h1 ^= rotl(w * 0xff51afd7ed558ccdull, 31);
        h1 = rotl(h1, 27) * 5 + 0x52dce729;
        h2 ^= rotl(w * 0xc2b2ae3d27d4eb4full, 29);
        h2 = rotl(h2, 33) * 0x9e3779b97f4a7c15ull + 0x165667b19e3779f9ull;
    }
    w = 0;
    memcpy(&w, p + i, len - i);
    h1 ^= w * 0xc4ceb9fe1a85ec53ull;
    h2 ^= w * 0x94d049bb133111ebull;
    h1 ^= h1 >> 33;
    h1 *= 0xff51afd7ed558ccdull;
    h2 ^= h2 >> 31;
    h2 *= 0xbf58476d1ce4e5b9ull;
    *ret_k1 = h1 ^ (h1 >> 29);
    *ret_k2 = h2 ^ (h2 >> 32);
}

static bool names_vprintf(const void *p, size_t n)
{
    return p && memmem(p, n, "vprintf", 7) != NULL;
}

/* A cubin of version `have` runs on a GPU of version `gpu`: same major version, minor no higher. */
static bool cubin_runs(unsigned have, unsigned gpu)
{
    return have / 10 == gpu / 10 && have <= gpu;
}

static bool wanted(const struct om_fatbin_entry *e, const struct om_fatbin_entry *all, int n,
                   const unsigned *archs, int narchs)
{
    if (narchs == 0)
        return e->kind == 1 || e->kind == 2;
    for (int a = 0; a < narchs; a++) {
        if (e->kind == 2 && cubin_runs(e->arch, archs[a]))
            return true;
        if (e->kind != 1 || e->arch > archs[a])
            continue;
        bool cubin = false; /* the driver compiles PTX only where no cubin runs */
        for (int i = 0; i < n && !cubin; i++)
            cubin = all[i].kind == 2 && cubin_runs(all[i].arch, archs[a]);
        if (!cubin)
            return true;
    }
    return false;
}

enum om_print_scan om_image_print_scan(const void *data, size_t len, const unsigned *archs,
                                       int narchs)
{
    struct om_fatbin_entry *e;
    enum om_print_scan found = OM_PRINTS_NONE;
    int n = om_fatbin_entries(data, len, NULL, 0);

    if (n < 0) /* PTX text, an ELF cubin, or no fatbin the driver would take: its bytes */
        return names_vprintf(data, len) ? OM_PRINTS_MAY : OM_PRINTS_NONE;
    if (n == 0 || !(e = calloc((size_t)n, sizeof(*e))))
        return n == 0 ? OM_PRINTS_NONE : OM_PRINTS_UNKNOWN;
    om_fatbin_entries(data, len, e, n);
    for (int i = 0; i < n && found != OM_PRINTS_MAY; i++) {
        if (!wanted(&e[i], e, n, archs, narchs))
            continue;
        int has = om_fatbin_find(&e[i], "vprintf", 7);
        found = has > 0 ? OM_PRINTS_MAY : has < 0 ? OM_PRINTS_UNKNOWN : found;
    }
    free(e);
    return found;
}
