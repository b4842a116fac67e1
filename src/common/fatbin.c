/* SPDX-License-Identifier: MIT */
/* The entries of a fatbin container, and their bytes decompressed. */
#define _GNU_SOURCE /* memmem */
#include "fatbin.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "openmps/cuda_abi.h"

/*
 * The layout, as nvcc 13.0 writes it (measured on fatbins it made of one kernel with each
 * --compress-mode; tests/unit/data/ keeps them): a container is a 16-byte header (u32 magic
 * 0xBA55ED50, u16 version, u16 header size, u64 size of what follows) and then its entries, each
 * a header (u16 kind at 0: 1 PTX, 2 ELF; u32 header size at 4, 64 or more; u64 stored size at 8,
 * padded to 8 bytes; u32 compressed size at 16; u32 SM version at 28; u64 flags at 40; u64 size
 * decompressed at 56) and its bytes right after it. Flag 0x2000 marks an LZ4 block (the "speed"
 * mode), 0x8000 a Zstandard frame (balance, size, and CUDA 13's default); a plain entry has
 * neither, and its compressed and decompressed sizes are 0. Flag 0x100000 marks an
 * arch-specific target (sm_90a), 0x200000 a family one (sm_100f).
 */
#define CONTAINER_HEADER 16u
#define ENTRY_HEADER_MIN 64u
#define FLAG_LZ4 0x2000u
#define FLAG_ZSTD 0x8000u
#define FLAG_ARCH_SPECIFIC 0x100000u /* sm_90a, compute_100a */
#define FLAG_FAMILY 0x200000u        /* sm_100f, compute_100f */

static uint64_t rd(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;

    memcpy(&v, p, n); /* little-endian, as every machine the driver runs on */
    return v;
}

int om_fatbin_entries(const uint8_t *p, size_t len, struct om_fatbin_entry *out, int max)
{
    size_t at = 0;
    int n = 0;

    if (len < CONTAINER_HEADER || rd(p, 4) != OM_FATBIN_MAGIC)
        return -1;
    while (at < len) {
        if (len - at < CONTAINER_HEADER || rd(p + at, 4) != OM_FATBIN_MAGIC)
            return at ? n : -1; /* what follows the containers is not looked at */
        uint64_t hsize = rd(p + at + 6, 2), body = rd(p + at + 8, 8);
        if (hsize < CONTAINER_HEADER || hsize > len - at || body > len - at - hsize)
            return -1;
        size_t e = at + hsize, end = at + hsize + body;
        while (e < end) {
            if (end - e < ENTRY_HEADER_MIN)
                return -1;
            uint64_t eh = rd(p + e + 4, 4), stored = rd(p + e + 8, 8), packed = rd(p + e + 16, 4);
            uint64_t flags = rd(p + e + 40, 8), size = rd(p + e + 56, 8);
            if (eh < ENTRY_HEADER_MIN || eh > end - e || stored > end - e - eh)
                return -1;
            struct om_fatbin_entry f = {.kind = (unsigned)rd(p + e, 2),
                                        .arch = (unsigned)rd(p + e + 28, 4),
                                        .arch_specific = (flags & FLAG_ARCH_SPECIFIC) != 0,
                                        .family = (flags & FLAG_FAMILY) != 0,
                                        .codec = OM_FATBIN_PLAIN,
                                        .data = p + e + eh,
                                        .stored = stored,
                                        .size = stored};
            if (flags & (FLAG_LZ4 | FLAG_ZSTD)) {
                if (packed == 0 || packed > stored)
                    return -1;
                f.codec = flags & FLAG_ZSTD ? OM_FATBIN_ZSTD : OM_FATBIN_LZ4;
                f.stored = packed;
                f.size = size;
            }
            if (n < max)
                out[n] = f;
            if (n == INT32_MAX)
                return -1;
            n++;
            e += eh + stored;
        }
        at = end;
    }
    return n;
}

/* A length of 15 goes on in the bytes after, each adding up to 255 (the last one less). */
static bool longer(const uint8_t *src, size_t n, size_t *i, size_t *len)
{
    unsigned b;

    do {
        if (*i >= n)
            return false;
        *len += (b = src[(*i)++]);
    } while (b == 255);
    return true;
}

long om_lz4_block_decode(const uint8_t *src, size_t n, uint8_t *dst, size_t cap)
{
    size_t i = 0, o = 0;

    /* Sequences: a token (literal length in its high half, match length - 4 in its low half; 15
     * continues in the bytes after, each adding up to 255), the literals, a 2-byte offset back
     * into what was written, the match. The last sequence has literals only. */
    while (i < n) {
        unsigned token = src[i++];
        size_t lit = token >> 4, m = token & 15u;
        if (lit == 15 && !longer(src, n, &i, &lit))
            return -1;
        if (lit > n - i || lit > cap - o)
            return -1;
        memcpy(dst + o, src + i, lit);
        i += lit;
        o += lit;
        if (i == n)
            break;
        if (n - i < 2)
            return -1;
        size_t off = (size_t)src[i] | (size_t)src[i + 1] << 8;
        i += 2;
        if (off == 0 || off > o)
            return -1;
        if (m == 15 && !longer(src, n, &i, &m))
            return -1;
        m += 4;
        if (m > cap - o)
            return -1;
        if (off >= m) {
            memcpy(dst + o, dst + o - off, m);
        } else { /* the match overlaps what it writes: a repeated pattern */
            for (size_t k = 0; k < m; k++)
                dst[o + k] = dst[o - off + k];
        }
        o += m;
        if (o > (size_t)INT64_MAX)
            return -1;
    }
    return (long)o;
}

/* Zstandard from the system's library (its stable API: zstd.h's ZSTD_decompress,
 * ZSTD_decompressStream and their buffers), found once. */
struct zstd_in {
    const void *src;
    size_t size, pos;
};
struct zstd_out {
    void *dst;
    size_t size, pos;
};
static size_t (*zstd_decompress)(void *, size_t, const void *, size_t);
static unsigned (*zstd_is_error)(size_t);
static void *(*zstd_create)(void);
static size_t (*zstd_free)(void *);
static size_t (*zstd_stream)(void *, struct zstd_out *, struct zstd_in *);
static pthread_once_t zstd_once = PTHREAD_ONCE_INIT;

static void zstd_open(void)
{
    void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);

    if (!h)
        return;
    zstd_is_error = (unsigned (*)(size_t))dlsym(h, "ZSTD_isError");
    zstd_decompress = (size_t(*)(void *, size_t, const void *, size_t))dlsym(h, "ZSTD_decompress");
    zstd_create = (void *(*)(void))dlsym(h, "ZSTD_createDCtx");
    zstd_free = (size_t(*)(void *))dlsym(h, "ZSTD_freeDCtx");
    zstd_stream =
        (size_t(*)(void *, struct zstd_out *, struct zstd_in *))dlsym(h, "ZSTD_decompressStream");
    if (!zstd_is_error || !zstd_create || !zstd_free || !zstd_stream)
        zstd_decompress = NULL;
}

/* A Zstandard frame the library can read. */
static bool zstd_frame(const struct om_fatbin_entry *e)
{
    pthread_once(&zstd_once, zstd_open);
    return zstd_decompress && e->stored >= 4 && rd(e->data, 4) == 0xFD2FB528u;
}

int om_fatbin_inflate(const struct om_fatbin_entry *e, uint8_t *buf, size_t cap)
{
    if (e->size > cap)
        return -1;
    switch (e->codec) {
    case OM_FATBIN_PLAIN: memcpy(buf, e->data, e->size); return 0;
    case OM_FATBIN_LZ4:
        return om_lz4_block_decode(e->data, e->stored, buf, e->size) == (long)e->size ? 0 : -1;
    case OM_FATBIN_ZSTD: {
        if (!zstd_frame(e))
            return -1;
        size_t got = zstd_decompress(buf, e->size, e->data, e->stored);
        return !zstd_is_error(got) && got == e->size ? 0 : -1;
    }
    }
    return -1;
}

#define FIND_MAX (1ull << 30)
#define PIECE (256u << 10)

/* A Zstandard frame read piece by piece, the last nlen - 1 bytes of each kept before the next. */
static int zstd_find(const struct om_fatbin_entry *e, const void *needle, size_t nlen)
{
    uint8_t *buf = malloc(PIECE + 64);
    void *dctx = buf ? zstd_create() : NULL;
    struct zstd_in in = {e->data, e->stored, 0};
    size_t keep = 0;
    uint64_t total = 0;
    int found = -1;

    while (dctx) {
        struct zstd_out out = {buf + keep, PIECE, 0};
        size_t left = zstd_stream(dctx, &out, &in);
        if (zstd_is_error(left) || (total += out.pos) > e->size)
            break;
        if (memmem(buf, keep + out.pos, needle, nlen)) {
            found = 1;
            break;
        }
        if (left == 0 || (out.pos == 0 && in.pos == in.size)) { /* the frame's end, or cut */
            found = left == 0 && total == e->size ? 0 : -1;
            break;
        }
        size_t have = keep + out.pos, tail = have < nlen - 1 ? have : nlen - 1;
        memmove(buf, buf + have - tail, tail);
        keep = tail;
    }
    if (dctx)
        zstd_free(dctx);
    free(buf);
    return found;
}

int om_fatbin_find(const struct om_fatbin_entry *e, const void *needle, size_t nlen)
{
    if (nlen == 0 || nlen > 64)
        return -1;
    if (e->codec == OM_FATBIN_PLAIN)
        return memmem(e->data, e->size, needle, nlen) != NULL;
    if (e->size > FIND_MAX)
        return -1;
    if (e->codec == OM_FATBIN_ZSTD)
        return zstd_frame(e) ? zstd_find(e, needle, nlen) : -1;
    uint8_t *buf = malloc(e->size ? e->size : 1); /* LZ4 matches reach back 64 KiB: all of it */
    int found = buf && om_fatbin_inflate(e, buf, e->size) == 0
                    ? memmem(buf, e->size, needle, nlen) != NULL
                    : -1;
    free(buf);
    return found;
}
