/* SPDX-License-Identifier: MIT */
/* The driver test double's modules family: occupancy (a simple model of one H100-like
 * multiprocessor, below), kernels' and libraries' queries, the linker, stream values.
 * FAKECUDA_MODULES_LOG: a file that gets one line per call received, with its arguments, so a
 * test can assert what reached the driver. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_INVALID_HANDLE 400

#define EXPORT __attribute__((visibility("default")))

static void note(const char *fmt, ...)
{
    const char *log = getenv("FAKECUDA_MODULES_LOG");
    FILE *f;
    va_list ap;

    if (!log || !(f = fopen(log, "a")))
        return;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

/* ------------------------------------------------------------------ occupancy
 * The model: a multiprocessor holds at most 32 blocks, 2048 threads and 232448 bytes of shared
 * memory; a block of b threads with s dynamic bytes: min(32, 2048 / b, 232448 / s) resident.
 * (tests/ipc/run.py computes its expectations from this same description.) */
#define SM_BLOCKS 32
#define SM_THREADS 2048
#define SM_SMEM 232448

static int resident(int b, size_t smem)
{
    int n = SM_THREADS / b;

    if (n > SM_BLOCKS)
        n = SM_BLOCKS;
    if (smem && (size_t)n > SM_SMEM / smem)
        n = (int)(SM_SMEM / smem);
    return n;
}

EXPORT int cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *num, void *f, int b,
                                                                size_t smem, unsigned flags)
{
    if (!num || !f || b <= 0 || b > 1024 || flags > 1)
        return CUDA_ERROR_INVALID_VALUE;
    *num = resident(b, smem);
    note("occupancy %d %zu %u", b, smem, flags);
    return CUDA_SUCCESS;
}

EXPORT int cuOccupancyMaxActiveBlocksPerMultiprocessor(int *num, void *f, int b, size_t smem)
{
    return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(num, f, b, smem, 0);
}

/* What is left to each of numBlocks blocks of blockSize threads (0 when they do not fit). */
EXPORT int cuOccupancyAvailableDynamicSMemPerBlock(size_t *size, void *f, int num, int b)
{
    if (!size || !f || num <= 0 || b <= 0 || b > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    *size = num > SM_BLOCKS || num * b > SM_THREADS ? 0 : (size_t)(SM_SMEM / num) / 128 * 128;
    note("available %d %d", num, b);
    return CUDA_SUCCESS;
}

/* CUlaunchConfig as the server passes it. */
struct fake_occ_config {
    unsigned gx, gy, gz, bx, by, bz, smem;
    void *stream;
    unsigned char *attrs;
    unsigned nattrs;
};

/* The cluster dimension attribute (4), 1 without one. */
static unsigned cluster_of(const struct fake_occ_config *c)
{
    for (unsigned i = 0; i < c->nattrs; i++) {
        int id;
        unsigned d[3];
        memcpy(&id, c->attrs + 72 * i, 4);
        memcpy(d, c->attrs + 72 * i + 8, sizeof(d));
        if (id == 4)
            return d[0] * d[1] * d[2];
    }
    return 1;
}

/* Clusters of up to 8 blocks (16 for blocks of at most 128 threads); 132 multiprocessors. */
EXPORT int cuOccupancyMaxPotentialClusterSize(int *size, void *f, const struct fake_occ_config *c)
{
    unsigned threads;

    if (!size || !f || !c || !c->stream)
        return CUDA_ERROR_INVALID_VALUE;
    threads = c->bx * c->by * c->bz;
    if (!threads || threads > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    *size = threads <= 128 ? 16 : 8;
    note("clustersize %u,%u,%u %u attrs %u", c->bx, c->by, c->bz, c->smem, c->nattrs);
    return CUDA_SUCCESS;
}

EXPORT int cuOccupancyMaxActiveClusters(int *num, void *f, const struct fake_occ_config *c)
{
    unsigned threads, cluster;

    if (!num || !f || !c || !c->stream)
        return CUDA_ERROR_INVALID_VALUE;
    threads = c->bx * c->by * c->bz;
    cluster = cluster_of(c);
    if (!threads || threads > 1024 || !cluster || cluster > 16)
        return CUDA_ERROR_INVALID_VALUE;
    *num = 132 * resident((int)threads, c->smem) / (int)cluster;
    note("clusters %u,%u,%u %u cluster %u", c->bx, c->by, c->bz, c->smem, cluster);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ stream memory values
 * Device memory is host memory here: a write is done at once, a wait is recorded (its
 * condition is not evaluated). */
typedef unsigned long long dptr_t;

EXPORT int cuStreamWriteValue32_v2(void *s, dptr_t addr, uint32_t v, unsigned flags)
{
    if (addr % 4 || flags > 1)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy((void *)(uintptr_t)addr, &v, 4);
    note("write32 %u %u", v, flags);
    return CUDA_SUCCESS;
}

EXPORT int cuStreamWriteValue64_v2(void *s, dptr_t addr, uint64_t v, unsigned flags)
{
    if (addr % 8 || flags > 1)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy((void *)(uintptr_t)addr, &v, 8);
    note("write64 %llu %u", (unsigned long long)v, flags);
    return CUDA_SUCCESS;
}

EXPORT int cuStreamWaitValue32_v2(void *s, dptr_t addr, uint32_t v, unsigned flags)
{
    uint32_t now;

    if (addr % 4)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&now, (void *)(uintptr_t)addr, 4);
    note("wait32 %u %#x now %u", v, flags, now);
    return CUDA_SUCCESS;
}

EXPORT int cuStreamWaitValue64_v2(void *s, dptr_t addr, uint64_t v, unsigned flags)
{
    uint64_t now;

    if (addr % 8)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&now, (void *)(uintptr_t)addr, 8);
    note("wait64 %llu %#x now %llu", (unsigned long long)v, flags, (unsigned long long)now);
    return CUDA_SUCCESS;
}

EXPORT int cuStreamGetId(void *s, unsigned long long *id)
{
    if (!id)
        return CUDA_ERROR_INVALID_VALUE;
    *id = 0x1000 + (unsigned long long)((uintptr_t)s & 0xffff);
    return CUDA_SUCCESS;
}
