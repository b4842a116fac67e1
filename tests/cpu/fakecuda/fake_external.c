/* SPDX-License-Identifier: MIT */
/* The driver test double's external memory and semaphores. An import takes a file descriptor
 * (a memfd in the tests) and records its size as fstat reports it; a mapped buffer is the
 * descriptor's bytes mapped here (host memory the double treats as device memory, as its
 * allocations are), so what a copy writes into it appears in the importer's memfd. Every call is
 * recorded in FAKECUDA_EXTERNAL_LOG. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define OK 0
#define INVALID_VALUE 1
#define INVALID_HANDLE 400
#define NOT_SUPPORTED 801

struct mem_desc {
    int type;
    union {
        int fd;
        struct {
            void *handle;
            const void *name;
        } win32;
    } handle;
    unsigned long long size;
    unsigned flags;
    unsigned reserved[16];
};
struct buf_desc {
    unsigned long long offset, size;
    unsigned flags;
    unsigned reserved[16];
};
struct sem_desc {
    int type;
    union {
        int fd;
        struct {
            void *handle;
            const void *name;
        } win32;
    } handle;
    unsigned flags;
    unsigned reserved[16];
};
struct sem_params { /* signal and wait params: the fence value first, the flags at 72 */
    unsigned long long value;
    unsigned char rest[64];
    unsigned flags;
    unsigned reserved[16];
};

struct fext {
    uint32_t magic;
    int fd;
    unsigned long long size;
};
#define EXTMEM_MAGIC 0xe87e3u
#define EXTSEM_MAGIC 0xe85e3u

/* Mapped buffers, for cuMemFree_v2 (fakecuda.c asks fake_external_free). */
struct fbuf {
    unsigned long long dptr;
    void *map;
    size_t len;
};
static struct fbuf bufs[256];
static int nbufs;
static pthread_mutex_t bufs_lock = PTHREAD_MUTEX_INITIALIZER;

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    const char *log = getenv("FAKECUDA_EXTERNAL_LOG");
    FILE *f = log ? fopen(log, "a") : NULL;
    va_list ap;

    if (!f)
        return;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

static struct fext *ext(void *h, uint32_t magic)
{
    struct fext *e = h;
    return e && e->magic == magic ? e : NULL;
}

EXPORT int cuImportExternalMemory(void **ret, const struct mem_desc *d)
{
    struct stat st;
    struct fext *e;

    if (!ret || !d || d->size == 0)
        return INVALID_VALUE;
    if (d->type == 8)
        return NOT_SUPPORTED;
    if ((d->type != 1 && d->type != 9) || fstat(d->handle.fd, &st) < 0 ||
        d->size > (unsigned long long)st.st_size)
        return INVALID_VALUE;
    e = calloc(1, sizeof(*e));
    if (!e)
        return 2;
    *e = (struct fext){EXTMEM_MAGIC, d->handle.fd, d->size};
    *ret = e;
    note("cuImportExternalMemory %p type %d size %llu fdsize %lld", (void *)e, d->type, d->size,
         (long long)st.st_size);
    return OK;
}

EXPORT int cuExternalMemoryGetMappedBuffer(unsigned long long *p, void *h, const struct buf_desc *d)
{
    struct fext *e = ext(h, EXTMEM_MAGIC);
    long page = sysconf(_SC_PAGESIZE);
    size_t skip, len;
    void *m;

    if (!e)
        return INVALID_HANDLE;
    if (!p || !d || !d->size || d->flags || d->offset > e->size || d->size > e->size - d->offset)
        return INVALID_VALUE;
    skip = (size_t)(d->offset % (unsigned long long)page);
    len = skip + (size_t)d->size;
    m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, e->fd, (off_t)(d->offset - skip));
    if (m == MAP_FAILED)
        return 2;
    pthread_mutex_lock(&bufs_lock);
    if (nbufs == 256) {
        pthread_mutex_unlock(&bufs_lock);
        munmap(m, len);
        return 2;
    }
    bufs[nbufs++] = (struct fbuf){(unsigned long long)(uintptr_t)m + skip, m, len};
    pthread_mutex_unlock(&bufs_lock);
    *p = (unsigned long long)(uintptr_t)m + skip;
    note("cuExternalMemoryGetMappedBuffer %p offset %llu size %llu -> 0x%llx", h, d->offset,
         d->size, *p);
    return OK;
}

/* 0: p was a mapped buffer, now unmapped; -1: it was not one. */
int fake_external_free(unsigned long long p)
{
    int rc = -1;

    pthread_mutex_lock(&bufs_lock);
    for (int i = 0; i < nbufs; i++) {
        if (bufs[i].dptr == p) {
            munmap(bufs[i].map, bufs[i].len);
            bufs[i] = bufs[--nbufs];
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&bufs_lock);
    if (rc == 0)
        note("cuMemFree_v2 buffer 0x%llx", p);
    return rc;
}

EXPORT int cuExternalMemoryGetMappedMipmappedArray(void **ret, void *h, const void *d)
{
    (void)ret;
    (void)d;
    if (!ext(h, EXTMEM_MAGIC))
        return INVALID_HANDLE;
    note("cuExternalMemoryGetMappedMipmappedArray %p", h);
    return NOT_SUPPORTED; /* no arrays on external memory in the double */
}

EXPORT int cuDestroyExternalMemory(void *h)
{
    struct fext *e = ext(h, EXTMEM_MAGIC);

    if (!e)
        return INVALID_HANDLE;
    note("cuDestroyExternalMemory %p", h);
    close(e->fd);
    e->magic = 0;
    free(e);
    return OK;
}

EXPORT int cuImportExternalSemaphore(void **ret, const struct sem_desc *d)
{
    struct stat st;
    struct fext *e;

    if (!ret || !d || d->flags)
        return INVALID_VALUE;
    if (d->type == 6)
        return NOT_SUPPORTED;
    if ((d->type != 1 && d->type != 9) || fstat(d->handle.fd, &st) < 0)
        return INVALID_VALUE;
    e = calloc(1, sizeof(*e));
    if (!e)
        return 2;
    *e = (struct fext){EXTSEM_MAGIC, d->handle.fd, 0};
    *ret = e;
    note("cuImportExternalSemaphore %p type %d", (void *)e, d->type);
    return OK;
}

static int semaphores(const char *what, void *const *sems, const struct sem_params *params,
                      unsigned n, void *stream)
{
    if (n && (!sems || !params))
        return INVALID_VALUE;
    for (unsigned i = 0; i < n; i++)
        if (!ext(sems[i], EXTSEM_MAGIC))
            return INVALID_HANDLE;
    for (unsigned i = 0; i < n; i++)
        note("%s %p value %llu stream %p", what, sems[i], params[i].value, stream);
    return OK;
}

void fake_dma_flush(void *s); /* fakecuda.c: the late work of its stream, first */

EXPORT int cuSignalExternalSemaphoresAsync(void *const *sems, const struct sem_params *params,
                                           unsigned n, void *stream)
{
    fake_dma_flush(stream);
    return semaphores("cuSignalExternalSemaphoresAsync", sems, params, n, stream);
}

EXPORT int cuWaitExternalSemaphoresAsync(void *const *sems, const struct sem_params *params,
                                         unsigned n, void *stream)
{
    fake_dma_flush(stream);
    return semaphores("cuWaitExternalSemaphoresAsync", sems, params, n, stream);
}

EXPORT int cuDestroyExternalSemaphore(void *h)
{
    struct fext *e = ext(h, EXTSEM_MAGIC);

    if (!e)
        return INVALID_HANDLE;
    note("cuDestroyExternalSemaphore %p", h);
    close(e->fd);
    e->magic = 0;
    free(e);
    return OK;
}
