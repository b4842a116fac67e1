/* SPDX-License-Identifier: MIT */
/* Unit tests: fatbin entries, their decompression, and which images may print
 * (common/fatbin.c, common/image.c), on fatbins nvcc made (tests/unit/data/README.md). */
#define _GNU_SOURCE /* memmem */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/common/fatbin.h"
#include "../../src/common/image.h"
#include "test.h"

static uint8_t *slurp(const char *name, size_t *len)
{
    char path[512];
    FILE *f;
    uint8_t *b;
    long n;

    snprintf(path, sizeof(path), "%s/%s", OM_UNIT_DATA, name);
    f = fopen(path, "rb");
    CHECK(f != NULL);
    CHECK(fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0);
    b = malloc((size_t)n);
    CHECK(b && fread(b, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* The entries nvcc wrote, in each of its compressions: the same PTX and cubin once decompressed
 * (the LZ4 block decoder here, Zstandard through the system's libzstd.so.1). */
TEST(fatbin_entries_and_their_bytes)
{
    static const char *files[] = {"printf_plain.fatbin", "printf_lz4.fatbin", "printf_zstd.fatbin"};
    static const enum om_fatbin_codec codecs[] = {OM_FATBIN_PLAIN, OM_FATBIN_LZ4, OM_FATBIN_ZSTD};
    struct om_fatbin_entry plain[2], e[2];
    size_t plen;
    uint8_t *pimg = slurp(files[0], &plen);

    CHECK_EQ(om_fatbin_entries(pimg, plen, plain, 2), 2);
    CHECK_EQ(plain[0].kind, 1); /* PTX first, then the sm_90 cubin */
    CHECK_EQ(plain[1].kind, 2);
    CHECK_EQ(plain[0].arch, 90);
    CHECK_EQ(plain[1].arch, 90);
    CHECK(memmem(plain[0].data, plain[0].size, ".entry", 6) != NULL);
    CHECK(memcmp(plain[1].data,
                 "\x7f"
                 "ELF",
                 4) == 0);
    for (int f = 1; f < 3; f++) {
        size_t len;
        uint8_t *img = slurp(files[f], &len);
        CHECK_EQ(om_fatbin_entries(img, len, e, 2), 2);
        for (int i = 0; i < 2; i++) {
            CHECK_EQ(e[i].codec, codecs[f]);
            CHECK_EQ(e[i].kind, plain[i].kind);
            CHECK_EQ(e[i].size, plain[i].size);
            CHECK(e[i].stored < e[i].size);
            uint8_t *buf = malloc(e[i].size);
            CHECK_EQ(om_fatbin_inflate(&e[i], buf, e[i].size), 0);
            CHECK(memcmp(buf, plain[i].data, e[i].size) == 0);
            CHECK_EQ(om_fatbin_inflate(&e[i], buf, e[i].size - 1), -1); /* no room */
            free(buf);
        }
        free(img);
    }
    free(pimg);
}

/* Headers that reach past the image, or past their container, are refused, whatever the bytes. */
TEST(fatbin_headers_are_checked)
{
    size_t len;
    uint8_t *img = slurp("printf_zstd.fatbin", &len), *copy = malloc(len);
    struct om_fatbin_entry e[2];
    uint32_t v32;
    uint64_t v64;

    for (size_t cut = 0; cut < len; cut++) /* truncated anywhere */
        CHECK_EQ(om_fatbin_entries(img, cut, e, 2), -1);
    memcpy(copy, img, len);
    v32 = 32; /* an entry header shorter than the 64 bytes read */
    memcpy(copy + 16 + 4, &v32, 4);
    CHECK_EQ(om_fatbin_entries(copy, len, e, 2), -1);
    memcpy(copy, img, len);
    v64 = UINT64_MAX - 8; /* a stored size that wraps around */
    memcpy(copy + 16 + 8, &v64, 8);
    CHECK_EQ(om_fatbin_entries(copy, len, e, 2), -1);
    memcpy(copy, img, len);
    v32 = 0; /* compressed, but of no size */
    memcpy(copy + 16 + 16, &v32, 4);
    CHECK_EQ(om_fatbin_entries(copy, len, e, 2), -1);
    memcpy(copy, img, len);
    v64 = len; /* the container's size past the image */
    memcpy(copy + 8, &v64, 8);
    CHECK_EQ(om_fatbin_entries(copy, len, e, 2), -1);
    CHECK_EQ(om_fatbin_entries((const uint8_t *)".version 8.0", 13, e, 2), -1); /* no fatbin */
    /* A corrupt compressed stream: the entry cannot be read, said as unknown, not as none. */
    memcpy(copy, img, len);
    CHECK_EQ(om_fatbin_entries(copy, len, e, 2), 2);
    memset((uint8_t *)e[1].data + 4, 0xa5, e[1].stored - 4);
    uint8_t *buf = malloc(e[1].size);
    CHECK_EQ(om_fatbin_inflate(&e[1], buf, e[1].size), -1);
    free(buf);
    free(copy);
    free(img);
}

/* The LZ4 block format: literals, matches that overlap what they write, extended lengths, and
 * every malformed sequence refused (an offset of 0 or past the start, a truncated length). */
TEST(lz4_block_decoder)
{
    /* "abcabcabcabcabc" + "xyz": 3 literals, a match of 12 at offset 3, then 3 literals */
    static const uint8_t ok[] = {0x38, 'a', 'b', 'c', 0x03, 0x00, 0x30, 'x', 'y', 'z'};
    uint8_t out[64], big[600], src[16];
    long n;

    n = om_lz4_block_decode(ok, sizeof(ok), out, sizeof(out));
    CHECK_EQ(n, 18);
    CHECK(memcmp(out, "abcabcabcabcabcxyz", 18) == 0);
    CHECK_EQ(om_lz4_block_decode(ok, sizeof(ok), out, 17), -1); /* no room */
    static const uint8_t zero_off[] = {0x10, 'a', 0x00, 0x00, 0x00};
    CHECK_EQ(om_lz4_block_decode(zero_off, sizeof(zero_off), out, sizeof(out)), -1);
    static const uint8_t far_off[] = {0x10, 'a', 0x02, 0x00, 0x00};
    CHECK_EQ(om_lz4_block_decode(far_off, sizeof(far_off), out, sizeof(out)), -1);
    static const uint8_t short_lits[] = {0x50, 'a', 'b'};
    CHECK_EQ(om_lz4_block_decode(short_lits, sizeof(short_lits), out, sizeof(out)), -1);
    static const uint8_t open_len[] = {0xf0, 0xff};
    CHECK_EQ(om_lz4_block_decode(open_len, sizeof(open_len), out, sizeof(out)), -1);
    /* a match of 4 + 15 + 255 + 255 + 1 = 530 bytes of one literal */
    memcpy(src, (const uint8_t[]){0x1f, 'q', 0x01, 0x00, 0xff, 0xff, 0x01, 0x00}, 8);
    n = om_lz4_block_decode(src, 8, big, sizeof(big));
    CHECK_EQ(n, 531);
    for (int i = 0; i < 531; i++)
        CHECK_EQ(big[i], 'q');
}

/* One entry at `at` of a fatbin being made (kind, SM version, flags, its stored bytes; for a
 * compressed one, the flag and its size decompressed): where the next one goes. */
static size_t add_entry(uint8_t *out, size_t at, unsigned kind, unsigned arch, uint64_t flags,
                        const void *data, size_t n, uint64_t size)
{
    uint16_t k = (uint16_t)kind;
    uint32_t eh = 64, packed = flags & 0xa000u ? (uint32_t)n : 0;
    uint64_t stored = (n + 7) & ~7ull;

    memset(out + at, 0, 64 + stored);
    memcpy(out + at, &k, 2);
    memcpy(out + at + 4, &eh, 4);
    memcpy(out + at + 8, &stored, 8);
    memcpy(out + at + 16, &packed, 4);
    memcpy(out + at + 28, &arch, 4);
    memcpy(out + at + 40, &flags, 8);
    if (packed)
        memcpy(out + at + 56, &size, 8);
    memcpy(out + at + 64, data, n);
    return at + 64 + stored;
}

/* The container's header, once its entries end at `end`: its length. */
static size_t close_fatbin(uint8_t *out, size_t end)
{
    uint32_t magic = 0xBA55ED50u;
    uint16_t version = 1, hsize = 16;
    uint64_t body = end - 16;

    memcpy(out, &magic, 4);
    memcpy(out + 4, &version, 2);
    memcpy(out + 6, &hsize, 2);
    memcpy(out + 8, &body, 8);
    return end;
}

/* A fatbin of plain entries (kind, SM version, text), as nvcc lays them out: n at most 4. */
static size_t make_fatbin(uint8_t *out, const unsigned *kinds, const unsigned *archs,
                          const char *const *texts, int n)
{
    size_t at = 16;

    for (int i = 0; i < n; i++)
        at = add_entry(out, at, kinds[i], archs[i], 0, texts[i], strlen(texts[i]) + 1, 0);
    return close_fatbin(out, at);
}

#define ARCH_SPECIFIC 0x100000u
#define FAMILY 0x200000u

/* Arch-specific targets run on their version alone (an sm_100a cubin not on an sm_103, whose
 * driver compiles the PTX), family ones on their major version; the driver compiles PTX where no
 * cubin of exactly the GPU's version is, even beside one of a lower minor version. */
TEST(image_print_scan_knows_targets_and_the_drivers_preference)
{
    static const char quiet[] = "quiet", loud[] = "names vprintf";
    const unsigned sm100[] = {100}, sm103[] = {103}, sm80[] = {80}, sm86[] = {86}, sm90[] = {90};
    uint8_t img[1024];
    size_t at;

    at = add_entry(img, 16, 2, 100, ARCH_SPECIFIC, quiet, sizeof(quiet), 0);      /* sm_100a */
    at = close_fatbin(img, add_entry(img, at, 1, 100, 0, loud, sizeof(loud), 0)); /* compute_100 */
    CHECK_EQ(om_image_print_scan(img, at, sm100, 1), OM_PRINTS_NONE);             /* the cubin */
    CHECK_EQ(om_image_print_scan(img, at, sm103, 1), OM_PRINTS_MAY);              /* the PTX */
    at = add_entry(img, 16, 2, 100, ARCH_SPECIFIC, loud, sizeof(loud), 0);        /* sm_100a */
    at = close_fatbin(img, add_entry(img, at, 1, 100, 0, quiet, sizeof(quiet), 0));
    CHECK_EQ(om_image_print_scan(img, at, sm100, 1), OM_PRINTS_MAY);
    CHECK_EQ(om_image_print_scan(img, at, sm103, 1), OM_PRINTS_NONE);
    at = close_fatbin(img, add_entry(img, 16, 1, 100, ARCH_SPECIFIC, loud, sizeof(loud), 0));
    CHECK_EQ(om_image_print_scan(img, at, sm100, 1), OM_PRINTS_MAY); /* compute_100a */
    CHECK_EQ(om_image_print_scan(img, at, sm103, 1), OM_PRINTS_NONE);
    at = add_entry(img, 16, 2, 100, FAMILY, loud, sizeof(loud), 0); /* sm_100f */
    at = close_fatbin(img, add_entry(img, at, 1, 100, ARCH_SPECIFIC, quiet, sizeof(quiet), 0));
    CHECK_EQ(om_image_print_scan(img, at, sm103, 1), OM_PRINTS_MAY); /* the family cubin */
    CHECK_EQ(om_image_print_scan(img, at, sm90, 1), OM_PRINTS_NONE); /* neither */
    at = add_entry(img, 16, 2, 80, 0, quiet, sizeof(quiet), 0);      /* sm_80 */
    at = close_fatbin(img, add_entry(img, at, 1, 86, 0, loud, sizeof(loud), 0)); /* compute_86 */
    CHECK_EQ(om_image_print_scan(img, at, sm86, 1), OM_PRINTS_MAY);              /* compiled */
    CHECK_EQ(om_image_print_scan(img, at, sm80, 1), OM_PRINTS_NONE); /* the exact cubin */
}

/* What an image may make the scan do: 65 536 entries, and 64 times its size and 64 MiB
 * decompressed in all (an entry that shrank 20 000 times is read: cuDNN's shrink 35 times);
 * past either it is too large, not "none". */
TEST(image_print_scan_has_a_budget)
{
    void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL);
    size_t (*compress)(void *, size_t, const void *, size_t, int) =
        (size_t(*)(void *, size_t, const void *, size_t, int))dlsym(h, "ZSTD_compress");
    const unsigned sm90[] = {90};
    const size_t big = 40u << 20, bigger = 80u << 20;
    uint8_t *plain = calloc(1, bigger), *packed = malloc(1u << 20), *img = malloc(6u << 20);
    size_t n, at;

    CHECK(compress && plain && packed && img);
    memcpy(plain + big - 7, "vprintf", 7);
    n = compress(packed, 1u << 20, plain, big, 3);
    CHECK(n > 0 && n < 65536);
    at = close_fatbin(img, add_entry(img, 16, 2, 90, 0x8000, packed, n, big));
    CHECK_EQ(om_image_print_scan(img, at, sm90, 1), OM_PRINTS_MAY);
    memset(plain + big - 7, 0, 7);
    n = compress(packed, 1u << 20, plain, bigger, 3);
    CHECK(n > 0 && n < 65536);
    at = close_fatbin(img, add_entry(img, 16, 2, 90, 0x8000, packed, n, bigger));
    CHECK_EQ(om_image_print_scan(img, at, sm90, 1), OM_PRINTS_TOO_LARGE);
    /* the same bytes in two entries of 40 MiB each: the second passes the budget */
    n = compress(packed, 1u << 20, plain, big, 3);
    at = add_entry(img, 16, 2, 90, 0x8000, packed, n, big);
    at = close_fatbin(img, add_entry(img, at, 2, 90, 0x8000, packed, n, big));
    CHECK_EQ(om_image_print_scan(img, at, sm90, 1), OM_PRINTS_TOO_LARGE);
    at = 16; /* 65 537 entries of nothing to read */
    for (int i = 0; i < 65537; i++)
        at = add_entry(img, at, 8, 90, 0, "", 0, 0);
    CHECK_EQ(om_image_print_scan(img, close_fatbin(img, at), sm90, 1), OM_PRINTS_TOO_LARGE);
    at = 16;
    for (int i = 0; i < 65536; i++)
        at = add_entry(img, at, 8, 90, 0, "", 0, 0);
    CHECK_EQ(om_image_print_scan(img, close_fatbin(img, at), sm90, 1), OM_PRINTS_NONE);
    free(plain);
    free(packed);
    free(img);
    dlclose(h);
}

/* Which entries the driver may pick: a cubin of the GPU's major version and a minor one no
 * higher, PTX (of a version no higher) only where no cubin runs. */
TEST(image_print_scan_picks_the_entries_a_gpu_runs)
{
    static const unsigned kinds[] = {2, 1}, archs[] = {80, 80};
    static const char *const texts[] = {"cubin naming vprintf", ".version 8.0 (quiet)"};
    const unsigned sm86[] = {86}, sm100[] = {100}, sm75[] = {75}, sm80_100[] = {80, 100};
    uint8_t img[1024];
    size_t len = make_fatbin(img, kinds, archs, texts, 2);

    CHECK_EQ(om_image_print_scan(img, len, sm86, 1), OM_PRINTS_MAY);     /* the cubin */
    CHECK_EQ(om_image_print_scan(img, len, sm100, 1), OM_PRINTS_NONE);   /* the PTX */
    CHECK_EQ(om_image_print_scan(img, len, sm75, 1), OM_PRINTS_NONE);    /* nothing */
    CHECK_EQ(om_image_print_scan(img, len, sm80_100, 2), OM_PRINTS_MAY); /* both */
    CHECK_EQ(om_image_print_scan(img, len, NULL, 0), OM_PRINTS_MAY);     /* every entry */
    /* two containers one after the other: the second is looked into too */
    static const unsigned k2[] = {1}, a2[] = {80};
    static const char *const t2[] = {".extern .func vprintf"};
    uint8_t two[2048];
    size_t first = make_fatbin(two, kinds + 1, archs + 1, texts + 1, 1);
    size_t second = make_fatbin(two + first, k2, a2, t2, 1);
    CHECK_EQ(om_image_print_scan(two, first, sm100, 1), OM_PRINTS_NONE);
    CHECK_EQ(om_image_print_scan(two, first + second, sm100, 1), OM_PRINTS_MAY);
}

/* Whether an image may print: found in every compression, only in the entries the driver may pick
 * for the GPUs named, and "unknown" (not "none") for an entry that cannot be read. */
TEST(image_print_scan)
{
    static const char *printing[] = {"printf_plain.fatbin", "printf_lz4.fatbin",
                                     "printf_zstd.fatbin"};
    const unsigned h100[] = {90}, a100_like[] = {86}, turing[] = {75}, both[] = {75, 90};
    size_t len;
    uint8_t *img;

    for (int f = 0; f < 3; f++) {
        img = slurp(printing[f], &len);
        CHECK_EQ(om_image_print_scan(img, len, h100, 1), OM_PRINTS_MAY);
        CHECK_EQ(om_image_print_scan(img, len, NULL, 0), OM_PRINTS_MAY);
        free(img);
    }
    img = slurp("quiet_zstd.fatbin", &len);
    CHECK_EQ(om_image_print_scan(img, len, h100, 1), OM_PRINTS_NONE);
    CHECK_EQ(om_image_print_scan(img, len, NULL, 0), OM_PRINTS_NONE);
    free(img);
    /* sm_90a and sm_80 cubins and compute_80 PTX: an sm_86 GPU runs the sm_80 cubin, an sm_75
     * none of them (the PTX is newer than it) */
    img = slurp("printf_sm90a_sm80.fatbin", &len);
    CHECK_EQ(om_image_print_scan(img, len, h100, 1), OM_PRINTS_MAY);
    CHECK_EQ(om_image_print_scan(img, len, a100_like, 1), OM_PRINTS_MAY);
    CHECK_EQ(om_image_print_scan(img, len, turing, 1), OM_PRINTS_NONE);
    CHECK_EQ(om_image_print_scan(img, len, both, 2), OM_PRINTS_MAY);
    free(img);
    /* the sm_90 cubin corrupt: unknown for an H100; an sm_75 looks at nothing */
    img = slurp("printf_zstd.fatbin", &len);
    struct om_fatbin_entry e[2];
    CHECK_EQ(om_fatbin_entries(img, len, e, 2), 2);
    memset((uint8_t *)e[1].data + 4, 0xa5, e[1].stored - 4);
    CHECK_EQ(om_image_print_scan(img, len, h100, 1), OM_PRINTS_UNKNOWN);
    CHECK_EQ(om_image_print_scan(img, len, turing, 1), OM_PRINTS_NONE);
    free(img);
    /* not a fatbin: PTX text and a cubin are looked into whole */
    static const char ptx[] = ".version 8.0\n.extern .func (.param .b32 r) vprintf\n";
    CHECK_EQ(om_image_print_scan(ptx, sizeof(ptx), h100, 1), OM_PRINTS_MAY);
    CHECK_EQ(om_image_print_scan(".version 8.0\n", 14, h100, 1), OM_PRINTS_NONE);
}

/* Looking into a Zstandard frame piece by piece (256 KiB each): a needle across two pieces is
 * found, one absent is not, and a frame longer or shorter than its entry says is unreadable.
 * The frames are made here with the system's libzstd.so.1 (ZSTD_compress). */
TEST(fatbin_find_across_pieces)
{
    void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL);
    size_t (*compress)(void *, size_t, const void *, size_t, int) =
        (size_t(*)(void *, size_t, const void *, size_t, int))dlsym(h, "ZSTD_compress");
    CHECK(compress != NULL);
    const size_t n = 600u << 10, piece = 256u << 10;
    uint8_t *plain = malloc(n), *packed = malloc(n);
    size_t at[] = {piece - 3, 0, n - 7, 2 * piece - 6};

    for (size_t i = 0; i < n; i++)
        plain[i] = (uint8_t)("abcdefgh"[i % 8] + (i / 4096) % 7);
    for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++) {
        memcpy(plain + at[k], "vprintf", 7);
        size_t len = compress(packed, n, plain, n, 3);
        CHECK(len > 0 && len < n);
        struct om_fatbin_entry e = {.kind = 2,
                                    .arch = 90,
                                    .codec = OM_FATBIN_ZSTD,
                                    .data = packed,
                                    .stored = len,
                                    .size = n};
        CHECK_EQ(om_fatbin_find(&e, "vprintf", 7), 1);
        CHECK_EQ(om_fatbin_find(&e, "vprintg", 7), 0);
        e.size = n - 1; /* the frame holds more than its entry says */
        CHECK_EQ(om_fatbin_find(&e, "vprintg", 7), -1);
        e.size = n + 1; /* or less */
        CHECK_EQ(om_fatbin_find(&e, "vprintg", 7), -1);
        e.size = n;
        e.stored = len / 2; /* cut */
        CHECK_EQ(om_fatbin_find(&e, "vprintg", 7), -1);
        memcpy(plain + at[k], "xxxxxxx", 7);
    }
    free(plain);
    free(packed);
    dlclose(h);
}
