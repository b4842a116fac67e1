/* SPDX-License-Identifier: MIT */
/*
 * The driver test double: green contexts and device resources (api/remote/green.tsv). Each
 * device has FAKECUDA_SMS SMs (default 132); a split by count makes groups of the minimum count
 * rounded up to the partition size and alignment (8 and 8, 2 and 2 with
 * CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING), as cuda.h documents for compute capability
 * 9.0. A resource's hidden bytes are the double's own ("FAKE", device, split, group): a struct
 * the server did not get from the double is refused. FAKECUDA_GREEN_LOG: a file that gets a
 * line per green context created or destroyed and per stream made in one.
 *
 * Which SMs: a resource carries the set of SMs it holds (a bit each, in its hidden bytes); a
 * split hands each group the next SMs of its input in order and the remainder the rest, a
 * descriptor holds the union of its resources (which must not overlap), a green context its
 * descriptor's. The log's "green N owns HEX" line gives that set (SM 0 the lowest bit of the
 * last digit), so a test can tell whether two green contexts share an SM.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_INVALID_DEVICE 101
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_CONTEXT_IS_DESTROYED 709
#define CUDA_ERROR_INVALID_RESOURCE_TYPE 914
#define CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION 915

#define MASK_WORDS 4 /* 256 SMs */
/* Packed, with its padding spelled out: the driver's CUdevResource is 4-byte aligned (the
 * server's arrays of them put `sms` on 4-byte boundaries), so the SM mask is only touched through
 * the struct or memcpy, never through a uint64_t pointer (UBSan: misaligned load). */
struct __attribute__((packed)) res { /* CUdevResource: 144 bytes */
    int type;
    char magic[4]; /* the hidden bytes: the double's own */
    uint32_t dev, split, group, pad;
    uint64_t sms[MASK_WORDS]; /* which SMs */
    unsigned char rest[40];
    unsigned sm_count, min_partition, alignment; /* at 96, as the driver's union */
    unsigned char oversize[36];
};
_Static_assert(sizeof(struct res) == 144, "CUdevResource");

struct desc {
    char magic[4];
    uint32_t dev;
    unsigned sm_count;
    uint64_t sms[MASK_WORDS];
};

struct green {
    char magic[4]; /* "GRN" while live, "DED" once destroyed (kept: a second destroy is seen) */
    uint32_t dev;
    unsigned sm_count;
    unsigned long long id;
    uint64_t sms[MASK_WORDS];
};

EXPORT int cuStreamCreateWithPriority(void **s, unsigned flags, int prio); /* fakecuda.c */

static uint32_t splits;              /* split instances so far (__atomic) */
static unsigned long long green_ids; /* (__atomic) */
/* Never freed, never reused: a pool each (a destroyed green context stays to be recognised). */
static struct desc descs[8192];
static struct green greens[1024];
static unsigned ndescs, ngreens; /* (__atomic) */

int fake_device_count(void); /* fakecuda.c: the devices CUDA_VISIBLE_DEVICES leaves */

static int ndevices(void)
{
    return fake_device_count();
}

static unsigned device_sms(void)
{
    const char *v = getenv("FAKECUDA_SMS");
    return v ? (unsigned)atoi(v) : 132;
}

static void green_log(const char *fmt, unsigned long long a, unsigned long long b)
{
    const char *path = getenv("FAKECUDA_GREEN_LOG");
    FILE *f;

    if (path && (f = fopen(path, "a"))) {
        fprintf(f, fmt, a, b);
        fputc('\n', f);
        fclose(f);
    }
}

/* The first n SMs of `from` (all of them when it holds fewer), taken out of it. */
static void take_sms(uint64_t from[MASK_WORDS], unsigned n, uint64_t out[MASK_WORDS])
{
    memset(out, 0, MASK_WORDS * sizeof(uint64_t));
    for (unsigned i = 0; i < MASK_WORDS * 64 && n; i++)
        if ((from[i / 64] >> (i % 64)) & 1u) {
            from[i / 64] &= ~(1ull << (i % 64));
            out[i / 64] |= 1ull << (i % 64);
            n--;
        }
}

/* SMs 0..n-1 */
static void first_sms(unsigned n, uint64_t out[MASK_WORDS])
{
    memset(out, 0, MASK_WORDS * sizeof(uint64_t));
    for (unsigned i = 0; i < n && i < MASK_WORDS * 64; i++)
        out[i / 64] |= 1ull << (i % 64);
}

/* "green N owns HEX": its SMs, highest word first. */
static void green_log_owns(const struct green *g)
{
    const char *path = getenv("FAKECUDA_GREEN_LOG");
    FILE *f;

    if (path && (f = fopen(path, "a"))) {
        fprintf(f, "green %llu owns ", g->id);
        for (int w = MASK_WORDS - 1; w >= 0; w--)
            fprintf(f, "%016llx", (unsigned long long)g->sms[w]);
        fputc('\n', f);
        fclose(f);
    }
}

static void fill(struct res *r, uint32_t dev, uint32_t split, uint32_t group, unsigned sms,
                 unsigned min_partition, unsigned alignment)
{
    uint64_t mask[MASK_WORDS];

    memset(r, 0, sizeof(*r));
    first_sms(sms, mask);
    memcpy(r->sms, mask, sizeof(mask));
    r->type = 1;
    memcpy(r->magic, "FAKE", 4);
    r->dev = dev;
    r->split = split;
    r->group = group;
    r->sm_count = sms;
    r->min_partition = min_partition;
    r->alignment = alignment;
}

/* A resource the double made (the server passed the real struct, not a client's copy). */
static int real(const struct res *r)
{
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    if (r->type != 1)
        return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    return memcmp(r->magic, "FAKE", 4) ? CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION : CUDA_SUCCESS;
}

static struct green *live_green(void *g)
{
    struct green *x = g;
    return x && !memcmp(x->magic, "GRN", 4) ? x : NULL;
}

EXPORT int cuDeviceGetDevResource(int dev, struct res *r, int type)
{
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= ndevices())
        return CUDA_ERROR_INVALID_DEVICE;
    if (type != 1)
        return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    fill(r, (uint32_t)dev, 0, 0, device_sms(), 8, 8);
    return CUDA_SUCCESS;
}

EXPORT int cuGreenCtxGetDevResource(void *g, struct res *r, int type)
{
    struct green *x = live_green(g);

    if (!x)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    if (type != 1)
        return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    fill(r, x->dev, 0, 0, x->sm_count, 8, 8);
    memcpy(r->sms, x->sms, sizeof(r->sms));
    return CUDA_SUCCESS;
}

EXPORT int cuDevSmResourceSplitByCount(struct res *result, unsigned *nb, const struct res *input,
                                       struct res *remaining, unsigned flags, unsigned min)
{
    unsigned part = (flags & 1) ? 2 : 8, size, groups, n;
    uint32_t split;
    int rc = real(input);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!nb || (flags & ~3u) || min > input->sm_count || (result && *nb == 0))
        return CUDA_ERROR_INVALID_VALUE;
    size = min < part ? part : (min + part - 1) / part * part;
    groups = input->sm_count / size;
    if (!result) {
        *nb = groups;
        return CUDA_SUCCESS;
    }
    n = *nb < groups ? *nb : groups;
    split = __atomic_add_fetch(&splits, 1, __ATOMIC_RELAXED);
    uint64_t left[MASK_WORDS];
    memcpy(left, input->sms, sizeof(left));
    for (unsigned i = 0; i < n; i++) {
        fill(&result[i], input->dev, split, i + 1, size, part, part);
        uint64_t mask[MASK_WORDS];
        take_sms(left, size, mask);
        memcpy(result[i].sms, mask, sizeof(mask));
    }
    if (remaining) {
        fill(remaining, input->dev, split, 0, input->sm_count - n * size, part, part);
        memcpy(remaining->sms, left, sizeof(left));
    }
    *nb = n;
    return CUDA_SUCCESS;
}

EXPORT int cuDevResourceGenerateDesc(struct desc **d, const struct res *r, unsigned n)
{
    unsigned sms = 0, slot;
    uint64_t all[MASK_WORDS] = {0};
    int rc;

    if (!d || !r || n == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++) {
        if ((rc = real(&r[i])) != CUDA_SUCCESS)
            return rc;
        if (n > 1 && (r[i].split != r[0].split || !r[i].split || r[i].dev != r[0].dev))
            return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION; /* one split's outputs only */
        for (unsigned w = 0; w < MASK_WORDS; w++) {
            if (all[w] & r[i].sms[w])
                return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION; /* an SM twice */
            all[w] |= r[i].sms[w];
        }
        sms += r[i].sm_count;
    }
    slot = __atomic_fetch_add(&ndescs, 1, __ATOMIC_RELAXED);
    if (slot >= sizeof(descs) / sizeof(descs[0]))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *d = &descs[slot];
    memcpy((*d)->magic, "DSC", 4);
    (*d)->dev = r[0].dev;
    (*d)->sm_count = sms;
    memcpy((*d)->sms, all, sizeof(all));
    return CUDA_SUCCESS;
}

EXPORT int cuGreenCtxCreate(struct green **g, struct desc *d, int dev, unsigned flags)
{
    unsigned n;

    if (!g || !d || memcmp(d->magic, "DSC", 4) || flags != 1)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= ndevices() || (uint32_t)dev != d->dev)
        return CUDA_ERROR_INVALID_DEVICE;
    n = __atomic_fetch_add(&ngreens, 1, __ATOMIC_RELAXED);
    if (n >= sizeof(greens) / sizeof(greens[0]))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *g = &greens[n];
    memcpy((*g)->magic, "GRN", 4);
    (*g)->dev = (uint32_t)dev;
    (*g)->sm_count = d->sm_count;
    memcpy((*g)->sms, d->sms, sizeof(d->sms));
    (*g)->id = __atomic_add_fetch(&green_ids, 1, __ATOMIC_RELAXED);
    green_log("green %llu created sms %llu", (*g)->id, d->sm_count);
    green_log_owns(*g);
    return CUDA_SUCCESS;
}

EXPORT int cuGreenCtxDestroy(struct green *g)
{
    if (!g)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!live_green(g))
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    memcpy(g->magic, "DED", 4);
    green_log("green %llu destroyed sms %llu", g->id, g->sm_count);
    return CUDA_SUCCESS;
}

EXPORT int cuGreenCtxGetId(void *g, unsigned long long *id)
{
    struct green *x = live_green(g);

    if (!x)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!id)
        return CUDA_ERROR_INVALID_VALUE;
    *id = 0x6000 + x->id;
    return CUDA_SUCCESS;
}

EXPORT int cuGreenCtxStreamCreate(void **s, void *g, unsigned flags, int prio)
{
    struct green *x = live_green(g);
    int rc;

    if (!x)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!s || flags != 1) /* CU_STREAM_NON_BLOCKING, required */
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = cuStreamCreateWithPriority(s, flags, prio)) == CUDA_SUCCESS)
        green_log("green %llu stream %llu", x->id, (unsigned long long)(uintptr_t)*s);
    return rc;
}
