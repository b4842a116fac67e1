/* SPDX-License-Identifier: MIT */
/* The driver test double's modules family: occupancy (a simple model of one H100-like
 * multiprocessor, below), kernels' and libraries' queries, the linker, stream values.
 * FAKECUDA_MODULES_LOG: a file that gets one line per call received, with its arguments, so a
 * test can assert what reached the driver. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
 * (tests/ipc/test_modules.py computes its expectations from this same description.) */
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

void fake_dma_flush(void *s); /* fakecuda.c: FAKECUDA_DMA_LATER's pending copies */

uint64_t fake_stream_busy_until(void *s); /* fakecuda.c: FAKECUDA_KERNEL_MS's kernels */

/*
 * A write behind a kernel still running (FAKECUDA_KERNEL_MS, "sleep") lands when the kernel
 * ends, as the GPU's does: the server's completion word (server/syncword.c) must not say done
 * before. Pending writes wait here; a ticker thread lands those whose time came, and a wait for
 * their stream (fakecuda.c's synchronizes and a query that finds it done) lands them first, so
 * that, as on the GPU, a stream seen done has its writes done.
 */
struct late_write {
    volatile uint32_t *at;
    uint32_t v;
    uint64_t until_us;
    void *s;
};
static struct late_write late[256];
static int nlate;
static pthread_mutex_t late_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t ticker_once = PTHREAD_ONCE_INIT;

static uint64_t now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

/* Lands the pending writes due by now: of stream s, or of every stream (all). */
static void land(void *s, bool all)
{
    uint64_t now = now_us();

    pthread_mutex_lock(&late_lock);
    for (int i = 0; i < nlate;) {
        if (late[i].until_us <= now && (all || late[i].s == s)) {
            __atomic_store_n(late[i].at, late[i].v, __ATOMIC_RELEASE);
            late[i] = late[--nlate];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&late_lock);
}

/* fakecuda.c: stream s (NULL: every stream) was waited for or found done. */
void fake_late_writes_due(void *s)
{
    land(s, s == NULL);
}

static void *ticker(void *arg)
{
    (void)arg;
    for (;;) {
        usleep(500);
        land(NULL, true);
    }
    return NULL;
}

static void start_ticker(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, ticker, NULL) == 0)
        pthread_detach(t);
}

EXPORT int cuStreamWriteValue32_v2(void *s, dptr_t addr, uint32_t v, unsigned flags)
{
    uint64_t until = fake_stream_busy_until(s);

    fake_dma_flush(s);
    if (addr % 4 || flags > 1)
        return CUDA_ERROR_INVALID_VALUE;
    if (until > now_us()) {
        pthread_once(&ticker_once, start_ticker);
        pthread_mutex_lock(&late_lock);
        if (nlate < (int)(sizeof(late) / sizeof(late[0]))) {
            late[nlate++] = (struct late_write){(volatile uint32_t *)(uintptr_t)addr, v, until, s};
            pthread_mutex_unlock(&late_lock);
            note("write32 %u %u", v, flags);
            return CUDA_SUCCESS;
        }
        pthread_mutex_unlock(&late_lock);
        return 2; /* full: CUDA_ERROR_OUT_OF_MEMORY (written now, it would land too early) */
    }
    memcpy((void *)(uintptr_t)addr, &v, 4);
    note("write32 %u %u", v, flags);
    return CUDA_SUCCESS;
}

EXPORT int cuStreamWriteValue64_v2(void *s, dptr_t addr, uint64_t v, unsigned flags)
{
    fake_dma_flush(s);
    if (addr % 8 || flags > 1)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy((void *)(uintptr_t)addr, &v, 8);
    note("write64 %llu %u", (unsigned long long)v, flags);
    return CUDA_SUCCESS;
}

EXPORT int cuStreamWaitValue32_v2(void *s, dptr_t addr, uint32_t v, unsigned flags)
{
    fake_dma_flush(s);
    uint32_t now;

    if (addr % 4)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&now, (void *)(uintptr_t)addr, 4);
    note("wait32 %u %#x now %u", v, flags, now);
    return CUDA_SUCCESS;
}

EXPORT int cuStreamWaitValue64_v2(void *s, dptr_t addr, uint64_t v, unsigned flags)
{
    fake_dma_flush(s);
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

/* ------------------------------------------------------------------ the linker
 * Inputs are the double's text images ("fakecubin\n" then kernel lines); the linked cubin is
 * one image of every input's kernels. The logs the options name are written as the driver
 * writes them: text within the given size, the filled amount back into the size's slot. */
struct fake_link {
    unsigned n;
    int *opts;
    void **vals;
    char *text;
    size_t len;
    int inputs;
    size_t caps[7]; /* the logs' sizes as given, by size option (4, 6) */
};

static void link_log(struct fake_link *l, int buf_opt, const char *msg)
{
    int size_opt = buf_opt + 1;
    char *buf = NULL;
    size_t cap = 0, used;

    for (unsigned i = 0; i < l->n; i++)
        if (l->opts[i] == buf_opt)
            buf = l->vals[i];
    cap = l->caps[size_opt];
    if (!buf || !cap)
        return;
    used = strnlen(buf, cap);
    if (used >= cap)
        return;
    snprintf(buf + used, cap - used, "%s\n", msg);
}

/* The sizes the driver writes back: the bytes each log holds, with its NUL. */
static void link_sizes(struct fake_link *l)
{
    for (unsigned i = 0; i < l->n; i++) {
        if (l->opts[i] != 3 && l->opts[i] != 5)
            continue;
        for (unsigned j = 0; j < l->n; j++)
            if (l->opts[j] == l->opts[i] + 1 && l->vals[i])
                l->vals[j] = (void *)(uintptr_t)(strlen(l->vals[i]) + 1);
    }
}

EXPORT int cuLinkCreate_v2(unsigned n, int *opts, void **vals, void **out)
{
    struct fake_link *l;

    if (!out || (n && (!opts || !vals)))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++)
        if ((opts[i] == 3 || opts[i] == 5) && vals[i])
            ((char *)vals[i])[0] = '\0';
    if (!(l = calloc(1, sizeof(*l))) || !(l->text = strdup("fakecubin\n"))) {
        free(l);
        return 2;
    }
    l->n = n, l->opts = opts, l->vals = vals;
    l->len = strlen(l->text);
    for (unsigned i = 0; i < n; i++)
        if (opts[i] == 4 || opts[i] == 6)
            l->caps[opts[i]] = (size_t)(uintptr_t)vals[i];
    for (unsigned i = 0; i < n; i++)
        note("linkcreate option %d %llu", opts[i], (unsigned long long)(uintptr_t)vals[i]);
    link_log(l, 3, "fake linker: created");
    link_sizes(l);
    *out = l;
    return CUDA_SUCCESS;
}

EXPORT int cuLinkAddData_v2(void *st, int type, void *data, size_t size, const char *name,
                            unsigned n, int *opts, void **vals)
{
    struct fake_link *l = st;
    const char *p = data;
    char msg[160];
    char *more;
    size_t body;

    if (!l || !data || !size || type < 0 || type > 5 || (n && (!opts || !vals)))
        return CUDA_ERROR_INVALID_VALUE;
    note("linkadd %d %zu %s options %u", type, size, name ? name : "(null)", n);
    if (size < 10 || strncmp(p, "fakecubin\n", 10) != 0) {
        snprintf(msg, sizeof(msg), "fake linker: %.64s is not an image", name ? name : "input");
        link_log(l, 5, msg);
        link_sizes(l);
        return 200; /* CUDA_ERROR_INVALID_IMAGE */
    }
    body = strnlen(p + 10, size - 10); /* a text image ends at its NUL or its size */
    if (!(more = realloc(l->text, l->len + body + 1)))
        return 2;
    l->text = more;
    memcpy(l->text + l->len, p + 10, body);
    l->len += body;
    l->text[l->len] = '\0';
    l->inputs++;
    snprintf(msg, sizeof(msg), "fake linker: added %.64s (%zu bytes)", name ? name : "", size);
    link_log(l, 3, msg);
    link_sizes(l);
    if (n) { /* the input's own logs: what compiling it said */
        struct fake_link input = {.n = n, .opts = opts, .vals = vals};
        for (unsigned i = 0; i < n; i++) {
            if ((opts[i] == 3 || opts[i] == 5) && vals[i])
                ((char *)vals[i])[0] = '\0';
            if (opts[i] == 4 || opts[i] == 6)
                input.caps[opts[i]] = (size_t)(uintptr_t)vals[i];
        }
        snprintf(msg, sizeof(msg), "fake ptxas: compiled %.64s", name ? name : "");
        link_log(&input, 3, msg);
        link_sizes(&input);
    }
    return CUDA_SUCCESS;
}

EXPORT int cuLinkComplete(void *st, void **cubin, size_t *size)
{
    struct fake_link *l = st;
    float ms = 1.5f;

    if (!l || !cubin || !size)
        return CUDA_ERROR_INVALID_VALUE;
    if (!l->inputs) {
        link_log(l, 5, "fake linker: nothing to link");
        link_sizes(l);
        return CUDA_ERROR_INVALID_VALUE;
    }
    link_log(l, 3, "fake linker: complete");
    link_sizes(l);
    for (unsigned i = 0; i < l->n; i++)
        if (l->opts[i] == 2) {
            l->vals[i] = NULL;
            memcpy(&l->vals[i], &ms, sizeof(ms));
        }
    *cubin = l->text;
    *size = l->len + 1;
    note("linkcomplete %zu", l->len + 1);
    return CUDA_SUCCESS;
}

EXPORT int cuLinkDestroy(void *st)
{
    struct fake_link *l = st;

    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    note("linkdestroy");
    free(l->text);
    free(l);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ kernels of a library */
int fake_library_kernels(void *lib, void **out, int max);
const char *fake_kernel_name(void *k, void **lib);

EXPORT int cuLibraryGetKernelCount(unsigned *count, void *lib)
{
    if (!count || !lib)
        return CUDA_ERROR_INVALID_VALUE;
    *count = (unsigned)fake_library_kernels(lib, NULL, 0);
    return CUDA_SUCCESS;
}

EXPORT int cuLibraryEnumerateKernels(void **ks, unsigned n, void *lib)
{
    if (!ks || !lib || n == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((unsigned)fake_library_kernels(lib, NULL, 0) < n)
        return CUDA_ERROR_INVALID_VALUE;
    fake_library_kernels(lib, ks, (int)n);
    note("enumerate %u", n);
    return CUDA_SUCCESS;
}

EXPORT int cuKernelGetName(const char **name, void *k)
{
    const char *n = fake_kernel_name(k, NULL);

    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!n)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = n;
    return CUDA_SUCCESS;
}

EXPORT int cuKernelGetLibrary(void **lib, void *k)
{
    if (!lib)
        return CUDA_ERROR_INVALID_VALUE;
    if (!fake_kernel_name(k, lib))
        return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS;
}

/* A batch: writes done at once, waits recorded, as the single calls above. */
EXPORT int cuStreamBatchMemOp_v2(void *s, unsigned count, unsigned char *ops, unsigned flags)
{
    fake_dma_flush(s);
    if (!ops || !count || flags)
        return CUDA_ERROR_INVALID_VALUE;
    note("batch %u", count);
    for (unsigned i = 0; i < count; i++) {
        unsigned char *op = ops + 48 * i;
        int kind;
        dptr_t addr;
        uint64_t v64 = 0, alias;
        uint32_t v32 = 0;
        unsigned fl;
        memcpy(&kind, op, 4);
        memcpy(&addr, op + 8, 8);
        memcpy(&v32, op + 16, 4);
        memcpy(&v64, op + 16, 8);
        memcpy(&fl, op + 24, 4);
        memcpy(&alias, op + 32, 8);
        if (alias)
            return CUDA_ERROR_INVALID_VALUE; /* the server clears the driver's field */
        if (kind == 2)
            cuStreamWriteValue32_v2(s, addr, v32, fl);
        else if (kind == 5)
            cuStreamWriteValue64_v2(s, addr, v64, fl);
        else if (kind == 1)
            cuStreamWaitValue32_v2(s, addr, v32, fl);
        else if (kind == 4)
            cuStreamWaitValue64_v2(s, addr, v64, fl);
        else
            note("op %d", kind);
    }
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ stream attributes
 * Kept per stream (the last 64 streams touched), 64-byte values by attribute id. */
static struct {
    void *s;
    unsigned char v[16][64];
} sattrs[64];
static int nsattrs;

static unsigned char *sattr(void *s, int attr)
{
    int i;

    if (attr < 0 || attr >= 16)
        return NULL;
    for (i = 0; i < nsattrs && sattrs[i].s != s; i++) {
    }
    if (i == nsattrs) {
        i = nsattrs < 64 ? nsattrs++ : 63;
        memset(&sattrs[i], 0, sizeof(sattrs[i]));
        sattrs[i].s = s;
    }
    return sattrs[i].v[attr];
}

EXPORT int cuStreamSetAttribute(void *s, int attr, const void *v)
{
    unsigned char *slot = sattr(s, attr);

    if (!slot || !v || (attr != 1 && attr != 3 && attr != 8 && attr != 9 && attr != 10))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(slot, v, 64);
    note("setattr %d", attr);
    return CUDA_SUCCESS;
}

EXPORT int cuStreamGetAttribute(void *s, int attr, void *v)
{
    unsigned char *slot = sattr(s, attr);

    if (!slot || !v)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(v, slot, 64);
    return CUDA_SUCCESS;
}

EXPORT int cuStreamCopyAttributes(void *dst, void *src)
{
    for (int a = 0; a < 16; a++)
        memcpy(sattr(dst, a), sattr(src, a), 64);
    note("copyattrs");
    return CUDA_SUCCESS;
}
