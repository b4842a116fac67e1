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
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

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
    int handle_types;         /* CUmemPoolProps.handleTypes (fake_shareable.c) */
    struct fake_pool *origin; /* an imported pool: the exporter's (no allocations from it) */
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

/* The pools alive, so that a pointer that comes from elsewhere (a forged fabric handle or
 * descriptor, as the executor's fuzzer sends) is refused without being read. */
#define MAX_POOLS 4096
static struct fake_pool *pools[MAX_POOLS];
static int npools;
static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;

static struct fake_pool *pool_register(struct fake_pool *fp)
{
    pthread_mutex_lock(&pools_lock);
    if (npools < MAX_POOLS)
        pools[npools++] = fp;
    else
        fp = NULL;
    pthread_mutex_unlock(&pools_lock);
    return fp;
}

static void pool_unregister(struct fake_pool *fp)
{
    pthread_mutex_lock(&pools_lock);
    for (int i = 0; i < npools; i++)
        if (pools[i] == fp) {
            pools[i] = pools[--npools];
            break;
        }
    pthread_mutex_unlock(&pools_lock);
}

static struct fake_pool *pool_of(void *p)
{
    struct fake_pool *fp = NULL;

    pthread_mutex_lock(&pools_lock);
    for (int i = 0; i < npools && !fp; i++)
        if (pools[i] == p)
            fp = pools[i];
    pthread_mutex_unlock(&pools_lock);
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
    fp->handle_types = props->handleTypes;
    if (!pool_register(fp)) {
        free(fp);
        return 2;
    }
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
    pool_unregister(fp);
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

int fake_capture_alloc(void *s, dptr_t p, size_t bytes); /* fake_graphmem.c */
int fake_capture_free(void *s, dptr_t p);

EXPORT int cuMemAllocFromPoolAsync(dptr_t *p, size_t bytes, void *pool, void *stream)
{
    struct fake_pool *fp = pool_of(pool);
    int rc;

    if (!fp || !p || !bytes || fp->origin)
        return CUDA_ERROR_INVALID_VALUE;
    rc = cuMemAlloc_v2(p, bytes);
    if (rc == CUDA_SUCCESS)
        fake_capture_alloc(stream, *p, bytes); /* an allocation node (fake_graphmem.c) */
    if (rc == CUDA_SUCCESS) {
        fp->used += bytes;
        if (fp->used > fp->high)
            fp->high = fp->used;
        mlog("poolalloc %p %zu stream %p at %llx", pool, bytes, stream, *p);
    }
    return rc;
}

void fake_dma_flush(void *s); /* fakecuda.c: the late work of FAKECUDA_DMA_LATER, _KERNEL_LATER */
void fake_flush_all(void);

EXPORT int cuMemFreeAsync(dptr_t p, void *stream)
{
    fake_dma_flush(stream);
    int rc = fake_capture_free(stream, p) ? CUDA_SUCCESS : cuMemFree_v2(p);

    mlog("freeasync %llx stream %p rc %d", p, stream, rc);
    return rc;
}

/* ------------------------------------------------------------------ virtual memory management */

/* Only with FAKECUDA_VMM set (then the server's own allocations take this path too,
 * devmem.c); otherwise every entry answers NOT_SUPPORTED and the server uses cuMemAlloc. A
 * handle is a memfd; a reservation is PROT_NONE address space of its own region; a mapping
 * maps the memfd there, so the double's copies (plain memcpy) reach it. */
#define CUDA_ERROR_NOT_SUPPORTED 801
#define VMM_GRAN 65536ull
#define VMM_VA_BASE 0x500000000000ull
#define HANDLE_MAGIC 0x686e646cu

struct fake_handle {
    uint32_t magic;
    int fd;
    size_t size;
    int refs, maps;
    int types; /* requestedHandleTypes (fake_shareable.c) */
};
static dptr_t vmm_next_va = VMM_VA_BASE;
static struct {
    dptr_t base;
    size_t size;
    struct fake_handle *h; /* NULL: a reservation */
} vmm[4096];
static int nvmm;
static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;

static int vmm_on(void)
{
    return getenv("FAKECUDA_VMM") != NULL;
}

static struct fake_handle *handle_of(unsigned long long h)
{
    struct fake_handle *fh = (struct fake_handle *)(uintptr_t)h;

    return fh && fh->magic == HANDLE_MAGIC ? fh : NULL;
}

static void handle_put(struct fake_handle *fh)
{
    if (fh->refs == 0 && fh->maps == 0) {
        close(fh->fd);
        fh->magic = 0;
        free(fh);
    }
}

EXPORT int cuMemGetAllocationGranularity(size_t *g, const void *prop, int option)
{
    if (!vmm_on())
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!g || !prop || option < 0 || option > 1)
        return CUDA_ERROR_INVALID_VALUE;
    /* CUmemAllocationProp's location.type: a device, the host, a host NUMA node, the calling
     * thread's node (CUmemLocationType 1..4); the driver answers for each. */
    if (((const int *)prop)[2] < 1 || ((const int *)prop)[2] > 4)
        return CUDA_ERROR_INVALID_VALUE;
    *g = option ? 2 * VMM_GRAN : VMM_GRAN;
    return CUDA_SUCCESS;
}

EXPORT int cuMemCreate(unsigned long long *h, size_t size, const int *prop,
                       unsigned long long flags)
{
    struct fake_handle *fh;
    int fd;

    if (!vmm_on())
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!h || !prop || prop[0] != 1 || size == 0 || size % VMM_GRAN || flags)
        return CUDA_ERROR_INVALID_VALUE;
    if (size > (16ull << 30)) /* more than the device holds (cuDeviceTotalMem) */
        return 2;
    fd = memfd_create("fake-vmm", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0 || !(fh = calloc(1, sizeof(*fh)))) {
        if (fd >= 0)
            close(fd);
        return 2;
    }
    *fh = (struct fake_handle){HANDLE_MAGIC, fd, size, 1, 0, prop[1]};
    *h = (unsigned long long)(uintptr_t)fh;
    mlog("vmmcreate %zu device %d", size, prop[3]); /* CUmemAllocationProp's location.id */
    return CUDA_SUCCESS;
}

/* For fake_shareable.c: a handle's memfd (a new descriptor), size and handle types; a new
 * handle on a descriptor (taken) of an exported one. -1 / 0 when vmm is off or h unknown. */
int fake_vmm_handle_dup(unsigned long long h, size_t *size, int *types)
{
    struct fake_handle *fh;
    int fd = -1;

    pthread_mutex_lock(&vmm_lock);
    fh = vmm_on() ? handle_of(h) : NULL;
    if (fh && fh->refs > 0) {
        fd = fcntl(fh->fd, F_DUPFD_CLOEXEC, 0);
        *size = fh->size;
        *types = fh->types;
    }
    pthread_mutex_unlock(&vmm_lock);
    return fd;
}

unsigned long long fake_vmm_handle_adopt(int fd, size_t size, int types)
{
    struct fake_handle *fh = vmm_on() ? calloc(1, sizeof(*fh)) : NULL;

    if (!fh)
        return 0;
    *fh = (struct fake_handle){HANDLE_MAGIC, fd, size, 1, 0, types};
    return (unsigned long long)(uintptr_t)fh;
}

/* For fake_shareable.c: a pool's handle types and origin (-1: not a pool); a new pool imported
 * from `origin`. */
int fake_pool_types(void *pool, void **origin)
{
    struct fake_pool *fp = pool_of(pool);

    if (!fp)
        return -1;
    *origin = fp->origin;
    return fp->handle_types;
}

void *fake_pool_adopt(void *origin)
{
    struct fake_pool *fp = calloc(1, sizeof(*fp));

    if (!fp)
        return NULL;
    fp->magic = POOL_MAGIC;
    fp->origin = origin;
    if (!pool_register(fp)) {
        free(fp);
        return NULL;
    }
    return fp;
}

EXPORT int cuMemRelease(unsigned long long h)
{
    struct fake_handle *fh;

    if (!vmm_on())
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&vmm_lock);
    fh = handle_of(h);
    if (!fh || fh->refs == 0) {
        pthread_mutex_unlock(&vmm_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    fh->refs--;
    mlog("vmmrelease %zu", fh->size);
    handle_put(fh);
    pthread_mutex_unlock(&vmm_lock);
    return CUDA_SUCCESS;
}

EXPORT int cuMemAddressReserve(dptr_t *p, size_t size, size_t align, dptr_t addr,
                               unsigned long long flags)
{
    void *m;

    (void)align;
    (void)addr;
    if (!vmm_on())
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!p || size == 0 || size % VMM_GRAN)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&vmm_lock);
    m = nvmm == 4096 ? MAP_FAILED
                     : mmap((void *)(uintptr_t)vmm_next_va, size, PROT_NONE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (m == MAP_FAILED) {
        pthread_mutex_unlock(&vmm_lock);
        return 2;
    }
    vmm_next_va += size + VMM_GRAN;
    vmm[nvmm].base = (dptr_t)(uintptr_t)m;
    vmm[nvmm].size = size;
    vmm[nvmm++].h = NULL;
    *p = (dptr_t)(uintptr_t)m;
    pthread_mutex_unlock(&vmm_lock);
    mlog("reserve %llx %zu", *p, size);
    return CUDA_SUCCESS;
}

EXPORT int cuMemAddressFree(dptr_t p, size_t size)
{
    int rc = CUDA_ERROR_INVALID_VALUE;

    if (!vmm_on())
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&vmm_lock);
    for (int i = 0; i < nvmm; i++) {
        if (!vmm[i].h && vmm[i].base == p && vmm[i].size == size) {
            munmap((void *)(uintptr_t)p, size);
            vmm[i] = vmm[--nvmm];
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&vmm_lock);
    mlog("addrfree %llx %zu rc %d", p, size, rc);
    return rc;
}

EXPORT int cuMemMap(dptr_t p, size_t size, size_t off, unsigned long long h,
                    unsigned long long flags)
{
    struct fake_handle *fh;
    int rc = CUDA_SUCCESS;

    if (!vmm_on())
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&vmm_lock);
    fh = handle_of(h);
    if (!fh || flags || size == 0 || off + size > fh->size || nvmm == 4096 ||
        mmap((void *)(uintptr_t)p, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fh->fd,
             (off_t)off) == MAP_FAILED) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else {
        fh->maps++;
        vmm[nvmm].base = p;
        vmm[nvmm].size = size;
        vmm[nvmm++].h = fh;
    }
    pthread_mutex_unlock(&vmm_lock);
    mlog("map %llx %zu rc %d", p, size, rc);
    return rc;
}

EXPORT int cuMemUnmap(dptr_t p, size_t size)
{
    int rc = CUDA_ERROR_INVALID_VALUE;

    fake_flush_all(); /* nothing late writes into a range gone (the driver synchronises too) */
    if (!vmm_on())
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&vmm_lock);
    for (int i = 0; i < nvmm; i++) {
        if (vmm[i].h && vmm[i].base == p && vmm[i].size == size) {
            struct fake_handle *fh = vmm[i].h;
            mmap((void *)(uintptr_t)p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
                 0);
            vmm[i] = vmm[--nvmm];
            fh->maps--;
            handle_put(fh);
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&vmm_lock);
    mlog("unmap %llx %zu rc %d", p, size, rc);
    return rc;
}

static int mapping_at(dptr_t p)
{
    for (int i = 0; i < nvmm; i++)
        if (vmm[i].h && p >= vmm[i].base && p - vmm[i].base < vmm[i].size)
            return i;
    return -1;
}

EXPORT int cuMemSetAccess(dptr_t p, size_t size, const struct fake_access *desc, size_t count)
{
    int i;

    if (!vmm_on())
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&vmm_lock);
    i = mapping_at(p);
    pthread_mutex_unlock(&vmm_lock);
    if (i < 0 || !desc || count == 0)
        return CUDA_ERROR_INVALID_VALUE;
    mlog("setaccess %llx %zu %zu %d", p, size, count, desc[0].flags);
    return CUDA_SUCCESS;
}

EXPORT int cuMemGetAccess(unsigned long long *flags, const int *location, dptr_t p)
{
    int i;

    if (!vmm_on())
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&vmm_lock);
    i = mapping_at(p);
    pthread_mutex_unlock(&vmm_lock);
    if (i < 0 || !flags || !location)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = 3;
    return CUDA_SUCCESS;
}

EXPORT int cuMemRetainAllocationHandle(unsigned long long *h, void *addr)
{
    int i;

    if (!vmm_on())
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&vmm_lock);
    i = mapping_at((dptr_t)(uintptr_t)addr);
    if (i >= 0 && h) {
        vmm[i].h->refs++;
        *h = (unsigned long long)(uintptr_t)vmm[i].h;
        mlog("vmmretain %zu", vmm[i].h->size);
    }
    pthread_mutex_unlock(&vmm_lock);
    return i >= 0 && h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT int cuMemGetAllocationPropertiesFromHandle(int *prop, unsigned long long h)
{
    if (!vmm_on())
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!prop || !handle_of(h))
        return CUDA_ERROR_INVALID_VALUE;
    memset(prop, 0, 32);
    prop[0] = 1; /* pinned */
    prop[2] = 1; /* on device 0 */
    return CUDA_SUCCESS;
}

/* An event's IPC handle: the driver's own bytes (the server only asks whether it may share). */
EXPORT int cuIpcGetEventHandle(void *handle, void *event)
{
    if (!handle || !event)
        return CUDA_ERROR_INVALID_VALUE;
    memset(handle, 0x45, 64);
    return CUDA_SUCCESS;
}

/* A dma-buf descriptor of device memory: here a memfd holding a copy of the range's bytes
 * (the double's device memory is the server's own), so a client can read what it wrote. */
EXPORT int cuMemGetHandleForAddressRange(void *handle, dptr_t p, size_t size, int type,
                                         unsigned long long flags)
{
    int fd;

    if (!handle || !p || !size || type != 1 || (flags & ~1ull))
        return CUDA_ERROR_INVALID_VALUE;
    fd = memfd_create("fake-dmabuf", MFD_CLOEXEC);
    if (fd < 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (write(fd, (const void *)(uintptr_t)p, size) != (ssize_t)size) {
        close(fd);
        return CUDA_ERROR_INVALID_VALUE;
    }
    mlog("dmabuf %llx %zu flags %llu", p, size, flags);
    *(int *)handle = fd;
    return CUDA_SUCCESS;
}
