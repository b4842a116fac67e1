/* SPDX-License-Identifier: MIT */
/* Remote mode, the data plane as it was first built: allocations and frees, 1D copies and sets
 * (pageable ones through staging.c), the emulated managed memory and the device ranges of this
 * process (which side a cuMemcpy pointer is on), streams' creation, synchronisation and host
 * functions (the synchronising calls bring managed shadows back). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../../common/wire.h"
#include "openmps/cuda_abi.h"
#include "openmps/ops.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "../shim.h"

static bool managed_forget(CUdeviceptr ptr);

/* Managed allocations: device memory with a host shadow at the same address. */
struct managed {
    CUdeviceptr base;
    size_t size;
};
static struct managed managed[256];
static int nmanaged;
static pthread_mutex_t managed_lock = PTHREAD_MUTEX_INITIALIZER;

/* The device memory this process obtained (allocations, module globals), so a
 * copy with unified addressing (cuMemcpy) knows which side each pointer is on. */
/* 32 bytes (ipc.allocation_the_shim_cannot_record_is_refused fails its growth by that size) */
struct devrange {
    CUdeviceptr base;
    size_t size;
    uint64_t pool; /* the memory pool it came from (stream-ordered allocation), or 0 */
    int dev;       /* the device it was made on: the calling thread's current one */
    bool mapped;   /* a mapping of the virtual-memory API: a copy may go on into the next one */
};
_Static_assert(sizeof(struct devrange) == 32, "the test that fails the table's growth knows it");
static struct devrange *devranges;
static size_t ndevranges, devranges_cap;
static pthread_mutex_t devranges_lock = PTHREAD_MUTEX_INITIALIZER;

int om_devrange_add(CUdeviceptr base, size_t size)
{
    int rc = 0;

    pthread_mutex_lock(&devranges_lock);
    if (ndevranges == devranges_cap) {
        size_t cap = devranges_cap ? devranges_cap * 2 : 64;
        struct devrange *n = realloc(devranges, cap * sizeof(*n));
        if (n) {
            devranges = n;
            devranges_cap = cap;
        }
    }
    if (ndevranges < devranges_cap)
        devranges[ndevranges++] = (struct devrange){base, size, 0, om_current_device(), false};
    else
        rc = -ENOMEM; /* unknown here, the range would pass for host memory in cuMemcpy */
    pthread_mutex_unlock(&devranges_lock);
    return rc;
}

void om_devrange_set_pool(CUdeviceptr base, uint64_t pool)
{
    pthread_mutex_lock(&devranges_lock);
    for (size_t i = 0; i < ndevranges; i++)
        if (devranges[i].base == base)
            devranges[i].pool = pool;
    pthread_mutex_unlock(&devranges_lock);
}

void om_devrange_set_mapped(CUdeviceptr base)
{
    pthread_mutex_lock(&devranges_lock);
    for (size_t i = 0; i < ndevranges; i++)
        if (devranges[i].base == base)
            devranges[i].mapped = true;
    pthread_mutex_unlock(&devranges_lock);
}

uint64_t om_devrange_pool(CUdeviceptr p)
{
    uint64_t pool = 0;

    pthread_mutex_lock(&devranges_lock);
    for (size_t i = 0; i < ndevranges; i++)
        if (p >= devranges[i].base && p - devranges[i].base < devranges[i].size)
            pool = devranges[i].pool;
    pthread_mutex_unlock(&devranges_lock);
    return pool;
}

int om_devrange_device(CUdeviceptr p)
{
    int dev = -1;

    pthread_mutex_lock(&devranges_lock);
    for (size_t i = 0; i < ndevranges; i++)
        if (p >= devranges[i].base && p - devranges[i].base < devranges[i].size)
            dev = devranges[i].dev;
    pthread_mutex_unlock(&devranges_lock);
    return dev;
}

void om_devrange_remove(CUdeviceptr base)
{
    pthread_mutex_lock(&devranges_lock);
    for (size_t i = 0; i < ndevranges; i++) {
        if (devranges[i].base == base) {
            devranges[i] = devranges[--ndevranges];
            break;
        }
    }
    pthread_mutex_unlock(&devranges_lock);
}

bool om_devrange_find(CUdeviceptr p, CUdeviceptr *ret_base, size_t *ret_size, bool *ret_managed)
{
    bool found = false;

    pthread_mutex_lock(&devranges_lock);
    for (size_t i = 0; i < ndevranges && !found; i++) {
        if (p >= devranges[i].base && p - devranges[i].base < devranges[i].size) {
            *ret_base = devranges[i].base;
            *ret_size = devranges[i].size;
            *ret_managed = false;
            found = true;
        }
    }
    pthread_mutex_unlock(&devranges_lock);
    if (found)
        return true;
    pthread_mutex_lock(&managed_lock);
    for (int i = 0; i < nmanaged && !found; i++) {
        if (p >= managed[i].base && p - managed[i].base < managed[i].size) {
            *ret_base = managed[i].base;
            *ret_size = managed[i].size;
            *ret_managed = true;
            found = true;
        }
    }
    pthread_mutex_unlock(&managed_lock);
    return found;
}

/* As the server's om_ranges_cover walks a range: the device range holding its start, then, past
 * the end of a mapping, the mapping that holds the next byte. */
static int devranges_fit(CUdeviceptr p, uint64_t n)
{
    uint64_t at = p, end = p + n;
    int fits = -1; /* not known here */

    pthread_mutex_lock(&devranges_lock);
    while (at < end) {
        size_t i;
        for (i = 0; i < ndevranges; i++)
            if (at >= devranges[i].base && at - devranges[i].base < devranges[i].size &&
                (fits < 0 || devranges[i].mapped))
                break;
        if (i == ndevranges) {
            fits = fits < 0 ? -1 : 0;
            break;
        }
        uint64_t stop = devranges[i].base + devranges[i].size;
        fits = 1;
        if (stop >= end)
            break;
        if (!devranges[i].mapped) {
            fits = 0;
            break;
        }
        at = stop;
    }
    pthread_mutex_unlock(&devranges_lock);
    return fits;
}

bool om_devrange_fits(CUdeviceptr p, uint64_t n)
{
    CUdeviceptr base;
    size_t size;
    bool is_managed;
    uint64_t server;
    int fits;

    if (p + n < p)
        return false; /* no memory wraps around */
    if ((fits = devranges_fit(p, n)) >= 0)
        return fits;
    if (om_devrange_find(p, &base, &size, &is_managed)) /* managed memory */
        return n <= size - (p - base);
    if (om_pinned_device_pointer((void *)(uintptr_t)p, &base) == 0) /* pinned host memory */
        return om_pinned_lookup((const void *)(uintptr_t)p, n, &server);
    return true;
}

/* True when [p, p + n) lies in managed memory: between launches its host
 * shadow is the current copy, so copies and sets act on the shadow. */
static bool in_managed(CUdeviceptr p, size_t n)
{
    bool found = false;

    pthread_mutex_lock(&managed_lock);
    for (int i = 0; i < nmanaged && !found; i++)
        found = p >= managed[i].base && n <= managed[i].size &&
                p - managed[i].base <= managed[i].size - n;
    pthread_mutex_unlock(&managed_lock);
    return found;
}

/*
 * Which copy is newer. The pre-Pascal model the program was told about
 * (CONCURRENT_MANAGED_ACCESS = 0) forbids host access while device work is
 * outstanding, so: after a pull the host may write (host_dirty), after a push
 * kernels may write (device_dirty). A launch pushes only if the host may have
 * written; a synchronising call pulls only if kernels may have.
 */
static int device_dirty;
static int host_dirty = 1;

static CUresult managed_pull_if_dirty(void);

/* Pinned host memory of this client is device memory to the driver (unified addressing): its
 * device pointer, which the server takes (the client's mapping is normally at the same
 * address; where it could not be, the pointers differ). */
static void pinned_as_device(CUdeviceptr *p)
{
    CUdeviceptr d;

    if (om_pinned_device_pointer((void *)(uintptr_t)*p, &d) == 0)
        *p = d;
}

static bool on_device(CUdeviceptr p)
{
    bool found = false;

    pthread_mutex_lock(&devranges_lock);
    for (size_t i = 0; i < ndevranges && !found; i++)
        found = p >= devranges[i].base && p - devranges[i].base < devranges[i].size;
    pthread_mutex_unlock(&devranges_lock);
    return found;
}

/* ------------------------------------------------------------------ memory */

CUresult om_r_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
    uint64_t v;
    CUresult rc;

    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    rc = om_rcall_u64(OM_IDX_cuMemAlloc_v2, (uint64_t)bytes, 0, &v);
    if (rc == CUDA_SUCCESS && om_devrange_add(v, bytes) < 0) {
        /* An allocation this process could not tell from host memory is not handed out. */
        REQ(fr, 8);
        om_put_u64(&fr, v);
        om_rcall(OM_IDX_cuMemFree_v2, &fr, NULL, 0, NULL);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc == CUDA_SUCCESS)
        *dptr = v;
    return rc;
}

CUresult om_r_cuMemFree_v2(CUdeviceptr dptr)
{
    REQ(req, 8);

    CUresult rc;

    if (dptr == 0)
        return CUDA_SUCCESS;
    om_put_u64(&req, dptr);
    rc = om_rcall(OM_IDX_cuMemFree_v2, &req, NULL, 0, NULL);
    /* The server frees the memory whenever it knew it, also when it reports an earlier
     * asynchronous error with the answer; only INVALID_VALUE means it kept nothing. */
    if (rc != CUDA_ERROR_INVALID_VALUE && !managed_forget(dptr))
        om_devrange_remove(dptr);
    else if (rc != CUDA_ERROR_INVALID_VALUE)
        om_hints_forget(dptr); /* api/memory.c: its advice and prefetches */
    return rc;
}

static CUresult handle_call(int index, const void *h, uint64_t b);

/* Waits for one of this client's streams (a synchronous copy from pinned memory). */
static CUresult sync_stream(CUstream s)
{
    return handle_call(OM_IDX_cuStreamSynchronize, s, 0);
}

/* Pageable bytes to the device: inline in the call up to OM_INLINE_COPY_MAX, otherwise
 * staged in pieces of OM_STAGE_PIECE: a copy of any size, and the server keeps no huge
 * buffer. */
static CUresult staged_htod(CUdeviceptr dst, const void *src, size_t n, CUstream stream)
{
    if (n <= OM_INLINE_COPY_MAX) { /* the bytes ride in the call: one record, not three */
        REQ(req, 24 + OM_INLINE_COPY_MAX);
        om_put_u64(&req, dst);
        om_put_u64(&req, (uint64_t)n);
        om_put_u64(&req, (uint64_t)(uintptr_t)stream);
        om_put_bytes(&req, src, n);
        return om_rcall(OM_IDX_op_copy_htod, &req, NULL, 0, NULL);
    }
    for (size_t off = 0; off < n; off += OM_STAGE_PIECE) {
        size_t piece = n - off < OM_STAGE_PIECE ? n - off : OM_STAGE_PIECE;
        REQ(one, 32);
        om_put_u64(&one, dst + off);
        om_put_u64(&one, (uint64_t)piece);
        om_put_u64(&one, (uint64_t)(uintptr_t)stream);
        CUresult rc = om_rcall_staged(OM_IDX_op_copy_htod, (const uint8_t *)src + off, piece, &one,
                                      NULL, 0, NULL);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return CUDA_SUCCESS;
}

/* Host to device: pageable bytes go through the staging buffer and the server
 * copies them on the client's stream and waits for that stream only; pinned
 * pages shared with the server are copied from directly. */
static CUresult htod(CUdeviceptr dst, const void *src, size_t n, CUstream stream, bool async)
{
    REQ(req, 32);
    uint64_t server_src;
    CUdeviceptr asked = dst;
    CUresult rc;

    if (n && !src)
        return CUDA_ERROR_INVALID_VALUE;
    pinned_as_device(&dst); /* into pinned host memory: a device address to the driver */
    if (n == 0)
        return CUDA_SUCCESS;
    if (in_managed(dst, n)) {
        rc = managed_pull_if_dirty();
        if (rc == CUDA_SUCCESS)
            memmove((void *)(uintptr_t)dst, src, n);
        __atomic_store_n(&host_dirty, 1, __ATOMIC_RELEASE);
        return rc;
    }
    if (om_pinned_lookup(src, n, &server_src)) {
        /* Shared pinned pages: DMA from them, asynchronously, as the driver does. */
        om_put_u64(&req, dst);
        om_put_u64(&req, server_src);
        om_put_u64(&req, (uint64_t)n);
        om_put_u64(&req, (uint64_t)(uintptr_t)stream);
        rc = om_rpost(OM_IDX_op_copy_htod_pinned, &req);
        if (rc == CUDA_SUCCESS && !async)
            rc = sync_stream(stream);
        return rc;
    }
    /*
     * Both paths below read the n host bytes before the server sees the copy (into the request,
     * the staging buffer or a staging slot), and the program's buffer may be only as long as
     * the allocation. A range that runs past the device memory it starts in is refused here
     * first, as the driver refuses it, and no host byte is read: the client checks against what
     * it already knows (no round trip on the common, valid path); the server checks every copy
     * again, and judges addresses unknown here.
     */
    if (!om_devrange_fits(asked, n))
        return CUDA_ERROR_INVALID_VALUE;
    bool staged;
    rc = om_staging_copy(true, dst, (void *)(uintptr_t)src, n, stream, async, &staged);
    return staged ? rc : staged_htod(dst, src, n, stream);
}

/* Device to host: pinned pages directly, large copies through the staging area
 * (staging.c), the rest answered in pieces of at most OM_CHUNK_BYTES. */
static CUresult dtoh(void *dst, CUdeviceptr src, size_t n, CUstream stream, bool async)
{
    uint8_t *out = dst;
    uint64_t server_dst;

    if (n && !dst)
        return CUDA_ERROR_INVALID_VALUE;
    pinned_as_device(&src); /* from pinned host memory (XLA reads its flags so) */
    if (n && in_managed(src, n)) {
        CUresult rc = managed_pull_if_dirty();
        if (rc == CUDA_SUCCESS)
            memmove(dst, (const void *)(uintptr_t)src, n);
        return rc;
    }
    int pinned = n ? om_pinned_dst(dst, n, &server_dst) : 0;
    if (pinned < 0)
        return CUDA_ERROR_INVALID_VALUE; /* registered read-only to the device */
    if (pinned > 0) {
        REQ(req, 32);
        CUresult rc;
        om_put_u64(&req, server_dst);
        om_put_u64(&req, src);
        om_put_u64(&req, (uint64_t)n);
        om_put_u64(&req, (uint64_t)(uintptr_t)stream);
        rc = om_rpost(OM_IDX_op_copy_dtoh_pinned, &req);
        if (rc == CUDA_SUCCESS && !async)
            rc = sync_stream(stream);
        return rc;
    }
    bool staged;
    CUresult staged_rc = om_staging_copy(false, src, dst, n, stream, async, &staged);
    if (staged)
        return staged_rc;
    while (n > 0) {
        size_t piece = n > OM_CHUNK_BYTES ? OM_CHUNK_BYTES : n;
        uint32_t got = 0;
        REQ(req, 32);
        CUresult rc;
        om_put_u64(&req, src);
        om_put_u64(&req, (uint64_t)piece);
        om_put_u64(&req, (uint64_t)(uintptr_t)stream);
        rc = om_rcall(OM_IDX_op_copy_dtoh, &req, out, piece, &got);
        if (rc != CUDA_SUCCESS)
            return rc;
        if (got != piece)
            return CUDA_ERROR_UNKNOWN;
        out += piece;
        src += piece;
        n -= piece;
    }
    return CUDA_SUCCESS;
}

CUresult om_r_cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    return htod(dst, src, n, NULL, false);
}

CUresult om_r_cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    /* Pageable memory is copied before this returns, as the driver does;
     * pinned memory is copied asynchronously. */
    return htod(dst, src, n, s, true);
}

CUresult om_r_cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    return dtoh(dst, src, n, NULL, false);
}

CUresult om_r_cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    return dtoh(dst, src, n, s, true);
}

static CUresult memcpy_dd(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, bool wait)
{
    REQ(req, 40);

    if (in_managed(dst, n))
        return dtoh((void *)(uintptr_t)dst, src, n, s, false); /* into the shadow */
    if (in_managed(src, n))
        return htod(dst, (const void *)(uintptr_t)src, n, s, !wait); /* from the shadow */
    pinned_as_device(&dst);
    pinned_as_device(&src);

    om_put_u64(&req, dst);
    om_put_u64(&req, src);
    om_put_u64(&req, (uint64_t)n);
    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    om_put_u64(&req, wait);
    return om_rcall(OM_IDX_op_copy_dtod, &req, NULL, 0, NULL);
}

CUresult om_r_cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return memcpy_dd(dst, src, n, NULL, true);
}

CUresult om_r_cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    return memcpy_dd(dst, src, n, s, false);
}

/* Unified addressing: each side is device memory of this process or host memory
 * (managed memory counts as host here: its shadow is current between launches). */
static CUresult memcpy_any(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, bool wait)
{
    bool d_dev = on_device(dst), s_dev = on_device(src);

    if (d_dev && s_dev)
        return memcpy_dd(dst, src, n, s, wait);
    if (d_dev)
        return htod(dst, (const void *)(uintptr_t)src, n, s, !wait);
    if (s_dev)
        return dtoh((void *)(uintptr_t)dst, src, n, s, !wait);
    if (n)
        memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

CUresult om_r_cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return memcpy_any(dst, src, n, NULL, true);
}

CUresult om_r_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    return memcpy_any(dst, src, n, s, false);
}

static CUresult memset_d(CUdeviceptr dst, uint64_t value, unsigned width, size_t count, CUstream s,
                         bool wait)
{
    REQ(req, 48);

    if (count <= SIZE_MAX / width && in_managed(dst, count * width)) {
        CUresult rc = managed_pull_if_dirty();
        for (size_t i = 0; rc == CUDA_SUCCESS && i < count; i++)
            memcpy((uint8_t *)(uintptr_t)dst + i * width, &value, width); /* little-endian */
        __atomic_store_n(&host_dirty, 1, __ATOMIC_RELEASE);
        return rc;
    }

    pinned_as_device(&dst);
    om_put_u64(&req, dst);
    om_put_u64(&req, value);
    om_put_u64(&req, width);
    om_put_u64(&req, (uint64_t)count);
    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    om_put_u64(&req, wait);
    return om_rcall(OM_IDX_op_memset, &req, NULL, 0, NULL);
}

CUresult om_r_cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n)
{
    return memset_d(d, v, 1, n, NULL, true);
}

CUresult om_r_cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n)
{
    return memset_d(d, v, 2, n, NULL, true);
}

CUresult om_r_cuMemsetD32_v2(CUdeviceptr d, unsigned v, size_t n)
{
    return memset_d(d, v, 4, n, NULL, true);
}

CUresult om_r_cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s)
{
    return memset_d(d, v, 1, n, s, false);
}

CUresult om_r_cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s)
{
    return memset_d(d, v, 2, n, s, false);
}

CUresult om_r_cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, CUstream s)
{
    return memset_d(d, v, 4, n, s, false);
}

/* ------------------------------------------------------------------ managed memory */

/*
 * Managed memory, emulated as the pre-Pascal model (ARCHITECTURE.md): the
 * server allocates device memory at an address D; the client maps a host
 * shadow at the same D, so one pointer is valid on both sides. The shadow goes
 * to the device before each launch and comes back after each synchronising
 * call. The program is told CONCURRENT_MANAGED_ACCESS = 0, as on such GPUs.
 * (Every managed byte moves at each launch and sync: dirty-page tracking is
 * the next refinement.)
 */

static CUresult htod(CUdeviceptr dst, const void *src, size_t n, CUstream stream, bool async);
static CUresult dtoh(void *dst, CUdeviceptr src, size_t n, CUstream stream, bool async);

CUresult om_r_cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned flags)
{
    uint64_t reply[2];
    uint32_t got = 0;
    REQ(req, 16);
    CUresult rc;
    void *shadow;

    (void)flags;
    if (!dptr || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, bytes);
    rc = om_rcall(OM_IDX_cuMemAllocManaged, &req, reply, sizeof(reply), &got);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (got != sizeof(reply))
        return CUDA_ERROR_UNKNOWN;
    shadow = mmap((void *)(uintptr_t)reply[0], (size_t)reply[1], PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (shadow != (void *)(uintptr_t)reply[0]) {
        om_shim_log("managed memory: the address 0x%llx is taken in this process",
                    (unsigned long long)reply[0]);
        if (shadow != MAP_FAILED)
            munmap(shadow, (size_t)reply[1]);
        REQ(fr, 8);
        om_put_u64(&fr, reply[0]);
        om_rcall(OM_IDX_cuMemFree_v2, &fr, NULL, 0, NULL);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&managed_lock);
    bool room = nmanaged < (int)(sizeof(managed) / sizeof(managed[0]));
    if (room) {
        managed[nmanaged++] = (struct managed){reply[0], (size_t)reply[1]};
        __atomic_store_n(&host_dirty, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&managed_lock);
    if (!room) {
        munmap(shadow, (size_t)reply[1]);
        REQ(fr, 8);
        om_put_u64(&fr, reply[0]);
        om_rcall(OM_IDX_cuMemFree_v2, &fr, NULL, 0, NULL);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dptr = reply[0];
    return CUDA_SUCCESS;
}

/* The shadow's bytes to the device: a staged copy of the range itself (htod
 * would take the shadow's own path). */
static CUresult push_range(CUdeviceptr base, size_t size, CUstream s)
{
    return staged_htod(base, (const void *)(uintptr_t)base, size, s);
}

/* Before work is submitted: every shadow to the device, on the work's stream;
 * afterwards the device's copy is the newer one until the next pull. */
CUresult om_managed_push(CUstream s)
{
    CUresult rc = CUDA_SUCCESS;

    if (!__atomic_load_n(&nmanaged, __ATOMIC_ACQUIRE))
        return CUDA_SUCCESS;
    pthread_mutex_lock(&managed_lock);
    if (__atomic_load_n(&host_dirty, __ATOMIC_ACQUIRE)) {
        for (int i = 0; i < nmanaged && rc == CUDA_SUCCESS; i++)
            rc = push_range(managed[i].base, managed[i].size, s);
        if (rc == CUDA_SUCCESS)
            __atomic_store_n(&host_dirty, 0, __ATOMIC_RELEASE);
    }
    if (nmanaged)
        __atomic_store_n(&device_dirty, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&managed_lock);
    return rc;
}

/* The device's view back into the shadows, when kernels may have changed it:
 * host writes made since the last pull are kept otherwise. */
static CUresult managed_pull_if_dirty(void)
{
    CUresult rc = CUDA_SUCCESS;

    if (!__atomic_load_n(&device_dirty, __ATOMIC_ACQUIRE))
        return CUDA_SUCCESS;
    /* The device copy is read after this client's work finished. */
    {
        REQ(sync, 8);
        rc = om_rcall(OM_IDX_cuCtxSynchronize, &sync, NULL, 0, NULL);
    }
    pthread_mutex_lock(&managed_lock);
    for (int i = 0; i < nmanaged && rc == CUDA_SUCCESS; i++) {
        CUdeviceptr base = managed[i].base;
        for (size_t off = 0; off < managed[i].size && rc == CUDA_SUCCESS; off += OM_CHUNK_BYTES) {
            size_t piece =
                managed[i].size - off < OM_CHUNK_BYTES ? managed[i].size - off : OM_CHUNK_BYTES;
            uint32_t got = 0;
            REQ(req, 32);
            om_put_u64(&req, base + off);
            om_put_u64(&req, (uint64_t)piece);
            om_put_u64(&req, 0);
            rc = om_rcall(OM_IDX_op_copy_dtoh, &req, (void *)(uintptr_t)(base + off), piece, &got);
            if (rc == CUDA_SUCCESS && got != piece)
                rc = CUDA_ERROR_UNKNOWN;
        }
    }
    if (rc == CUDA_SUCCESS) {
        __atomic_store_n(&device_dirty, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&host_dirty, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&managed_lock);
    return rc;
}

/* After a synchronising call. */
static CUresult managed_pull(CUresult rc)
{
    return rc == CUDA_SUCCESS ? managed_pull_if_dirty() : rc;
}

/* Forgets a managed range being freed; true when ptr was one. */
static bool managed_forget(CUdeviceptr ptr)
{
    bool found = false;

    pthread_mutex_lock(&managed_lock);
    for (int i = 0; i < nmanaged; i++) {
        if (managed[i].base == ptr) {
            munmap((void *)(uintptr_t)ptr, managed[i].size);
            managed[i] = managed[--nmanaged];
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&managed_lock);
    return found;
}

/* ------------------------------------------------------------------ streams, events */

static CUresult create_handle(int index, uint64_t a, uint64_t b, void **out)
{
    uint64_t v;
    CUresult rc;

    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    rc = om_rcall_u64(index, a, b, &v);
    if (rc == CUDA_SUCCESS)
        *out = (void *)(uintptr_t)v;
    return rc;
}

/* A call on one handle whose answer is only its status. */
static CUresult handle_call(int index, const void *h, uint64_t b)
{
    REQ(req, 16);

    om_put_u64(&req, (uint64_t)(uintptr_t)h);
    om_put_u64(&req, b);
    return om_rcall(index, &req, NULL, 0, NULL);
}

CUresult om_r_cuStreamCreate(CUstream *s, unsigned flags)
{
    CUgreenCtx g;

    if (om_green_current(&g)) /* a green context's token is current: a stream of it */
        return om_green_stream_create(s, g, flags, 0);
    return om_stream_created(create_handle(OM_IDX_cuStreamCreate, flags, 0, s), s);
}

CUresult om_r_cuStreamCreateWithPriority(CUstream *s, unsigned flags, int priority)
{
    CUgreenCtx g;

    if (om_green_current(&g))
        return om_green_stream_create(s, g, flags, priority);
    return om_stream_created(
        create_handle(OM_IDX_cuStreamCreate, flags, (uint64_t)(int64_t)priority, s), s);
}

CUresult om_r_cuStreamDestroy_v2(CUstream s)
{
    CUresult rc = handle_call(OM_IDX_cuStreamDestroy_v2, s, 0);

    if (rc == CUDA_SUCCESS)
        om_stream_forget(s);
    return rc;
}

CUresult om_r_cuStreamSynchronize(CUstream s)
{
    return managed_pull(handle_call(OM_IDX_cuStreamSynchronize, s, 0));
}

/* Host functions run in this process, in stream order: the stream's work is
 * waited for, the function runs, and only then does the caller go on to
 * submit later work. (The driver runs them on a thread of its own and does not
 * block the caller; the order the program sees is the same.) */
CUresult om_r_cuLaunchHostFunc(CUstream s, void (*fn)(void *), void *data)
{
    CUresult rc;
    bool captured = false;

    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    /* On a capturing stream: a host node of the capture, run at each launch (api/hostnodes.c). */
    rc = om_hostfunc_capture(s, fn, data, &captured);
    if (rc != CUDA_SUCCESS || captured)
        return rc;
    rc = om_r_cuStreamSynchronize(s);
    if (rc == CUDA_SUCCESS)
        fn(data);
    return rc;
}

CUresult om_r_cuStreamAddCallback(CUstream s, void (*cb)(CUstream, CUresult, void *), void *data,
                                  unsigned flags)
{
    CUresult rc;

    if (!cb || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = om_callback_capture_check(s)) != CUDA_SUCCESS)
        return rc; /* not capturable, as with the driver */
    rc = om_r_cuStreamSynchronize(s);
    cb(s, rc, data); /* called with the stream's error, as the driver does */
    return CUDA_SUCCESS;
}

static CUresult stream_query(int index, CUstream s, uint64_t *out)
{
    uint64_t v = 0;
    uint32_t got = 0;
    REQ(req, 8);
    CUresult rc;

    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    rc = om_rcall(index, &req, &v, sizeof(v), &got);
    if (rc == CUDA_SUCCESS && got != sizeof(v))
        rc = CUDA_ERROR_UNKNOWN;
    *out = v;
    return rc;
}

CUresult om_r_cuStreamGetFlags(CUstream s, unsigned *flags)
{
    uint64_t v;
    CUresult rc;

    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    rc = stream_query(OM_IDX_cuStreamGetFlags, s, &v);
    if (rc == CUDA_SUCCESS)
        *flags = (unsigned)v;
    return rc;
}

CUresult om_r_cuEventSynchronize(CUevent e)
{
    return managed_pull(handle_call(OM_IDX_cuEventSynchronize, e, 0));
}

/* Waits for this client's streams only, never for the shared context. */
CUresult om_r_cuCtxSynchronize(void)
{
    REQ(req, 8);

    return managed_pull(om_rcall(OM_IDX_cuCtxSynchronize, &req, NULL, 0, NULL));
}

CUresult om_r_cuCtxSynchronize_v2(CUcontext ctx)
{
    (void)ctx; /* one context per device; the client's streams are all its work */
    return om_r_cuCtxSynchronize();
}

/* ------------------------------------------------------------------ table */

/* The device's memory as this client may use it: under a device-memory cap the server answers
 * the cap as the total and what the client does not hold of it as free (src/server/memcap.c). */
CUresult om_r_cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    return om_rpc_cuMemGetInfo_v2(free_bytes, total);
}
