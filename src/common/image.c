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

/*
 * Whether the driver may run the entry on a GPU of SM version `gpu` (90 for sm_90): a cubin of
 * the same major version and a minor one no higher (an arch-specific one, sm_90a, of that version
 * alone), PTX of a version no higher (compiled for it; an arch-specific one of that version
 * alone, a family one of the same major version).
 */
static bool runs_on(const struct om_fatbin_entry *e, unsigned gpu)
{
    if (e->arch_specific)
        return e->arch == gpu;
    if (e->kind == 2 || e->family)
        return e->arch / 10 == gpu / 10 && e->arch <= gpu;
    return e->arch <= gpu;
}

/* An image may make the server decompress this much in all to look into it: 64 times its own
 * size and 64 MiB (cuDNN's sm_90 cubins shrink 35 times, cuBLASLt's older ones up to 96), and
 * hold this many entries (nvcc writes one per target: a few dozen). Past either, it is too
 * large to look into. */
#define SCAN_RATIO 64u
#define SCAN_EXTRA (64ull << 20)
#define SCAN_ENTRIES 65536

enum om_print_scan om_image_print_scan(const void *data, size_t len, const unsigned *archs,
                                       int narchs)
{
    struct om_fatbin_entry *e;
    enum om_print_scan found = OM_PRINTS_NONE;
    int n = om_fatbin_entries(data, len, NULL, 0);
    uint64_t budget = (uint64_t)len * SCAN_RATIO + SCAN_EXTRA;
    bool exact[OM_SCAN_ARCHS_MAX] = {false};

    if (n < 0) /* PTX text, an ELF cubin, or no fatbin the driver would take: its bytes */
        return names_vprintf(data, len) ? OM_PRINTS_MAY : OM_PRINTS_NONE;
    if (n > SCAN_ENTRIES || narchs > OM_SCAN_ARCHS_MAX)
        return OM_PRINTS_TOO_LARGE;
    if (n == 0 || !(e = calloc((size_t)n, sizeof(*e))))
        return n == 0 ? OM_PRINTS_NONE : OM_PRINTS_UNKNOWN;
    om_fatbin_entries(data, len, e, n);
    /* The driver compiles the PTX for a GPU unless a cubin of exactly its version is there
     * (CU_JIT_FALLBACK_STRATEGY's default, CU_PREFER_PTX): which GPUs have one. */
    for (int i = 0; i < n; i++)
        for (int a = 0; a < narchs; a++)
            exact[a] |= e[i].kind == 2 && e[i].arch == archs[a];
    for (int i = 0; i < n && found != OM_PRINTS_MAY; i++) {
        bool wanted = narchs == 0 && (e[i].kind == 1 || e[i].kind == 2);
        for (int a = 0; a < narchs && !wanted; a++)
            wanted = (e[i].kind == 2 || (e[i].kind == 1 && !exact[a])) && runs_on(&e[i], archs[a]);
        if (!wanted)
            continue;
        if (e[i].codec != OM_FATBIN_PLAIN) {
            if (e[i].size > budget) {
                found = OM_PRINTS_TOO_LARGE;
                break;
            }
            budget -= e[i].size;
        }
        int has = om_fatbin_find(&e[i], "vprintf", 7);
        found = has > 0 ? OM_PRINTS_MAY : has < 0 ? OM_PRINTS_UNKNOWN : found;
    }
    free(e);
    return found;
}
