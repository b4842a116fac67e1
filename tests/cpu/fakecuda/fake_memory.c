/* SPDX-License-Identifier: MIT */
/* The driver test double, memory family: stream-ordered pools. Pool memory is the double's
 * device memory (cuMemAlloc_v2 of fakecuda.c). With FAKECUDA_MEMORY_LOG set, every call
 * appends a line (what it received) to that file, for the tests to assert. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1

typedef unsigned long long dptr_t;
int cuMemAlloc_v2(dptr_t *p, size_t bytes);
int cuMemFree_v2(dptr_t p);

struct fake_pool {
    uint32_t magic;
    int threshold_set;
    unsigned long long threshold, used, high;
    int reuse[4];
    int access[8];
};
#define POOL_MAGIC 0x706f6f6cu

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void mlog(const char *fmt, ...)
{
    const char *path = getenv("FAKECUDA_MEMORY_LOG");
    va_list ap;
    FILE *f;

    if (!path)
        return;
    pthread_mutex_lock(&lock);
    f = fopen(path, "a");
    if (f) {
        va_start(ap, fmt);
        vfprintf(f, fmt, ap);
        va_end(ap);
        fputc('\n', f);
        fclose(f);
    }
    pthread_mutex_unlock(&lock);
}

static struct fake_pool *pool_of(void *p)
{
    struct fake_pool *fp = p;

    return fp && fp->magic == POOL_MAGIC ? fp : NULL;
}

struct fake_props {
    int allocType, handleTypes;
    int loc_type, loc_id;
    void *win32;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
};

EXPORT int cuMemPoolCreate(void **pool, const struct fake_props *props)
{
    struct fake_pool *fp;

    if (!pool || !props || props->allocType != 1 || props->loc_type != 1)
        return CUDA_ERROR_INVALID_VALUE;
    fp = calloc(1, sizeof(*fp));
    if (!fp)
        return 2;
    fp->magic = POOL_MAGIC;
    *pool = fp;
    mlog("poolcreate %p dev %d", (void *)fp, props->loc_id);
    return CUDA_SUCCESS;
}

EXPORT int cuMemPoolDestroy(void *pool)
{
    struct fake_pool *fp = pool_of(pool);

    if (!fp)
        return CUDA_ERROR_INVALID_VALUE;
    mlog("pooldestroy %p", pool);
    fp->magic = 0;
    free(fp);
    return CUDA_SUCCESS;
}

EXPORT int cuMemPoolSetAttribute(void *pool, int attr, void *value)
{
    struct fake_pool *fp = pool_of(pool);

    if (!fp || !value || attr < 1 || attr > 8)
        return CUDA_ERROR_INVALID_VALUE;
    if (attr <= 3) {
        fp->reuse[attr] = *(int *)value;
        mlog("setattr %p %d %d", pool, attr, *(int *)value);
    } else {
        if (attr == 4)
            fp->threshold = *(unsigned long long *)value;
        mlog("setattr %p %d %llu", pool, attr, *(unsigned long long *)value);
    }
    return CUDA_SUCCESS;
}

EXPORT int cuMemPoolGetAttribute(void *pool, int attr, void *value)
{
    struct fake_pool *fp = pool_of(pool);

    if (!fp || !value || attr < 1 || attr > 8)
        return CUDA_ERROR_INVALID_VALUE;
    if (attr <= 3)
        *(int *)value = fp->reuse[attr];
    else
        *(unsigned long long *)value = attr == 4 ? fp->threshold : attr == 7 ? fp->used : fp->high;
    return CUDA_SUCCESS;
}

struct fake_access {
    int loc_type, loc_id, flags;
};

EXPORT int cuMemPoolSetAccess(void *pool, const struct fake_access *map, size_t count)
{
    struct fake_pool *fp = pool_of(pool);

    if (!fp || !map || count == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        if (map[i].loc_id < 0 || map[i].loc_id >= 8)
            return CUDA_ERROR_INVALID_VALUE;
        fp->access[map[i].loc_id] = map[i].flags;
    }
    mlog("setaccess %p %zu %d", pool, count, map[0].flags);
    return CUDA_SUCCESS;
}

EXPORT int cuMemPoolGetAccess(int *flags, void *pool, const int *location)
{
    struct fake_pool *fp = pool_of(pool);

    if (!fp || !flags || !location || location[1] < 0 || location[1] >= 8)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = fp->access[location[1]] ? fp->access[location[1]] : 3; /* its own device: rw */
    return CUDA_SUCCESS;
}

EXPORT int cuMemPoolTrimTo(void *pool, size_t keep)
{
    if (!pool_of(pool))
        return CUDA_ERROR_INVALID_VALUE;
    mlog("trim %p %zu", pool, keep);
    return CUDA_SUCCESS;
}

EXPORT int cuMemAllocFromPoolAsync(dptr_t *p, size_t bytes, void *pool, void *stream)
{
    struct fake_pool *fp = pool_of(pool);
    int rc;

    if (!fp || !p || !bytes)
        return CUDA_ERROR_INVALID_VALUE;
    rc = cuMemAlloc_v2(p, bytes);
    if (rc == CUDA_SUCCESS) {
        fp->used += bytes;
        if (fp->used > fp->high)
            fp->high = fp->used;
        mlog("poolalloc %p %zu stream %p at %llx", pool, bytes, stream, *p);
    }
    return rc;
}

EXPORT int cuMemFreeAsync(dptr_t p, void *stream)
{
    int rc = cuMemFree_v2(p);

    mlog("freeasync %llx stream %p rc %d", p, stream, rc);
    return rc;
}
