/* SPDX-License-Identifier: MIT */
/* Remote mode, memory family: stream-ordered allocation and pools, IPC memory handles, and the
 * hints of managed memory (the server's side: src/server/api/mempool.c, ipc.c). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/msg.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "../shim.h"
#include "openmps/ops.h"

#define U64(x) ((uint64_t)(uintptr_t)(x))

/* ------------------------------------------------------------------ stream-ordered */

/* An allocation the server made: recorded here too, or freed at once and refused. */
static CUresult got_allocation(CUresult rc, const uint64_t *v2, size_t bytes, CUstream st,
                               CUdeviceptr *dptr)
{
    uint64_t v = v2[0];

    if (rc == CUDA_SUCCESS && om_devrange_add(v, bytes) == 0)
        om_devrange_set_pool(v, v2[1]); /* the pool it came from: MEMPOOL_HANDLE */
    else if (rc == CUDA_SUCCESS) {
        REQ(fr, 16);
        om_put_u64(&fr, v);
        om_put_u64(&fr, U64(st));
        om_rcall(OM_IDX_cuMemFreeAsync, &fr, NULL, 0, NULL);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc == CUDA_SUCCESS)
        *dptr = v;
    return rc;
}

CUresult om_r_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    REQ(req, 16);
    uint64_t v[2] = {0, 0}; /* address, pool */
    uint32_t got = 0;
    CUresult rc;

    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, bytesize);
    om_put_u64(&req, U64(hStream));
    rc = om_rcall(OM_IDX_cuMemAllocAsync, &req, v, sizeof(v), &got);
    if (rc == CUDA_SUCCESS && got != sizeof(v))
        rc = CUDA_ERROR_UNKNOWN;
    return got_allocation(rc, v, bytesize, hStream, dptr);
}

CUresult om_r_cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream)
{
    REQ(req, 24);
    uint64_t v[2] = {0, 0}; /* address, pool */
    uint32_t got = 0;
    CUresult rc;

    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, bytesize);
    om_put_u64(&req, U64(pool));
    om_put_u64(&req, U64(hStream));
    rc = om_rcall(OM_IDX_cuMemAllocFromPoolAsync, &req, v, sizeof(v), &got);
    if (rc == CUDA_SUCCESS && got != sizeof(v))
        rc = CUDA_ERROR_UNKNOWN;
    return got_allocation(rc, v, bytesize, hStream, dptr);
}

CUresult om_r_cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    REQ(req, 16);
    CUresult rc;

    om_put_u64(&req, dptr);
    om_put_u64(&req, U64(hStream));
    rc = om_rcall(OM_IDX_cuMemFreeAsync, &req, NULL, 0, NULL);
    if (rc == CUDA_SUCCESS)
        om_devrange_remove(dptr);
    return rc;
}

/* ------------------------------------------------------------------ pools */

static CUresult call_u64_reply(int index, const struct om_wbuf *req, uint64_t *out)
{
    uint64_t v = 0;
    uint32_t got = 0;
    CUresult rc = om_rcall(index, req, &v, sizeof(v), &got);

    if (rc == CUDA_SUCCESS && got != sizeof(v))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS)
        *out = v;
    return rc;
}

CUresult om_r_cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    REQ(req, sizeof(CUmemPoolProps));
    uint64_t v = 0;
    CUresult rc;

    if (!pool || !poolProps)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_bytes(&req, poolProps, sizeof(*poolProps));
    rc = call_u64_reply(OM_IDX_cuMemPoolCreate, &req, &v);
    if (rc == CUDA_SUCCESS)
        *pool = (CUmemoryPool)(uintptr_t)v;
    return rc;
}

CUresult om_r_cuMemPoolDestroy(CUmemoryPool pool)
{
    REQ(req, 8);

    om_put_u64(&req, U64(pool));
    return om_rcall(OM_IDX_cuMemPoolDestroy, &req, NULL, 0, NULL);
}

/* Attributes 1-3 are ints, 4-8 64-bit counts (cuda.h 13.0); others: no size known. */
static int attr_size(CUmemPool_attribute attr)
{
    int a = (int)attr;

    return a >= 1 && a <= 3 ? (int)sizeof(int) : a >= 4 && a <= 8 ? 8 : 0;
}

CUresult om_r_cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    REQ(req, 24);
    uint64_t v = 0;
    int n = attr_size(attr);

    if (!value || !n)
        return CUDA_ERROR_INVALID_VALUE;
    if (n == (int)sizeof(int))
        v = (uint64_t)(int64_t) * (int *)value;
    else
        memcpy(&v, value, 8);
    om_put_u64(&req, U64(pool));
    om_put_u64(&req, (uint64_t)attr);
    om_put_u64(&req, v);
    return om_rcall(OM_IDX_cuMemPoolSetAttribute, &req, NULL, 0, NULL);
}

CUresult om_r_cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    REQ(req, 16);
    uint64_t v = 0;
    int n = attr_size(attr);
    CUresult rc;

    if (!value || !n)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, U64(pool));
    om_put_u64(&req, (uint64_t)attr);
    rc = call_u64_reply(OM_IDX_cuMemPoolGetAttribute, &req, &v);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (n == (int)sizeof(int))
        *(int *)value = (int)v;
    else
        memcpy(value, &v, 8);
    return CUDA_SUCCESS;
}

static CUresult device_pool(int index, CUmemoryPool *pool, CUdevice dev)
{
    REQ(req, 8);
    uint64_t v = 0;
    CUresult rc;

    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(int64_t)dev);
    rc = call_u64_reply(index, &req, &v);
    if (rc == CUDA_SUCCESS)
        *pool = (CUmemoryPool)(uintptr_t)v;
    return rc;
}

CUresult om_r_cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    return device_pool(OM_IDX_cuDeviceGetDefaultMemPool, pool_out, dev);
}

CUresult om_r_cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    return device_pool(OM_IDX_cuDeviceGetMemPool, pool, dev);
}

CUresult om_r_cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    REQ(req, 16);

    om_put_u64(&req, (uint64_t)(int64_t)dev);
    om_put_u64(&req, U64(pool));
    return om_rcall(OM_IDX_cuDeviceSetMemPool, &req, NULL, 0, NULL);
}

/* The 13.0 names take a location and an allocation type: device pools of pinned memory are
 * served (the device's); host and NUMA-node pools are not. */
static CUresult device_of(const CUmemLocation *location, CUmemAllocationType type, CUdevice *dev)
{
    if (!location)
        return CUDA_ERROR_INVALID_VALUE;
    if ((int)type != CU_MEM_ALLOCATION_TYPE_PINNED || location->type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_NOT_SUPPORTED;
    *dev = location->id;
    return CUDA_SUCCESS;
}

CUresult om_r_cuMemGetDefaultMemPool(CUmemoryPool *pool_out, CUmemLocation *location,
                                     CUmemAllocationType type)
{
    CUdevice dev = 0;
    CUresult rc = device_of(location, type, &dev);

    return rc != CUDA_SUCCESS ? rc : om_r_cuDeviceGetDefaultMemPool(pool_out, dev);
}

CUresult om_r_cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type)
{
    CUdevice dev = 0;
    CUresult rc = device_of(location, type, &dev);

    return rc != CUDA_SUCCESS ? rc : om_r_cuDeviceGetMemPool(pool, dev);
}

CUresult om_r_cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type, CUmemoryPool pool)
{
    CUdevice dev = 0;
    CUresult rc = device_of(location, type, &dev);

    return rc != CUDA_SUCCESS ? rc : om_r_cuDeviceSetMemPool(dev, pool);
}

/* ------------------------------------------------------------------ IPC */

CUresult om_r_cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    REQ(req, 8);
    uint8_t blob[CU_IPC_HANDLE_SIZE];
    uint32_t got = 0;
    CUresult rc;

    if (!pHandle)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, dptr);
    rc = om_rcall(OM_IDX_cuIpcGetMemHandle, &req, blob, sizeof(blob), &got);
    if (rc == CUDA_SUCCESS && got != sizeof(blob))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS)
        memcpy(pHandle, blob, sizeof(blob));
    return rc;
}

CUresult om_r_cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    REQ(req, CU_IPC_HANDLE_SIZE + 8);
    uint64_t reply[3] = {0};
    uint32_t got = 0;
    CUresult rc;

    if (!pdptr)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_bytes(&req, &handle, sizeof(handle));
    om_put_u64(&req, Flags);
    rc = om_rcall(OM_IDX_cuIpcOpenMemHandle_v2, &req, reply, sizeof(reply), &got);
    if (rc == CUDA_SUCCESS && got != sizeof(reply))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc != CUDA_SUCCESS)
        return rc;
    if (reply[2] && om_devrange_add(reply[0], (size_t)reply[1]) < 0) {
        REQ(cl, 8);
        om_put_u64(&cl, reply[0]);
        om_rcall(OM_IDX_cuIpcCloseMemHandle, &cl, reply, sizeof(reply), &got);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pdptr = reply[0];
    return CUDA_SUCCESS;
}

CUresult om_r_cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    REQ(req, 8);
    uint64_t last = 0;
    uint32_t got = 0;
    CUresult rc;

    om_put_u64(&req, dptr);
    rc = om_rcall(OM_IDX_cuIpcCloseMemHandle, &req, &last, sizeof(last), &got);
    if (got == sizeof(last) && last)
        om_devrange_remove(dptr);
    return rc;
}

/* ------------------------------------------------------------------ managed-memory hints */

/*
 * Managed memory is emulated (device memory with a host shadow, api/dataplane.c), and the device
 * reports no concurrent managed access: prefetches, discards and advice have nothing to move.
 * They are accepted as hints once the range is known to be this client's memory (the driver
 * answers CUDA_ERROR_INVALID_VALUE for a range it does not know). Advice and prefetch
 * locations on managed memory are recorded here, in order, so that cuMemRangeGetAttribute(s)
 * answers what the program asked for (as the driver does: it reports the requested
 * locations, not where the pages are).
 */
static CUresult own_range(CUdeviceptr p, size_t count)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    bool managed = false;

    if (count == 0 || !om_devrange_find(p, &base, &size, &managed) || count > size - (p - base))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* [p, p + count) within one managed allocation (its base in *ret_base). */
static CUresult managed_range(CUdeviceptr p, size_t count, CUdeviceptr *ret_base)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    bool managed = false;

    if (count == 0 || !om_devrange_find(p, &base, &size, &managed) || !managed ||
        count > size - (p - base))
        return CUDA_ERROR_INVALID_VALUE;
    *ret_base = base;
    return CUDA_SUCCESS;
}

/* CUmem_advise and CUmem_range_attribute values, CU_DEVICE_CPU / CU_DEVICE_INVALID. */
enum { ADV_SET_RM = 1, ADV_UNSET_RM, ADV_SET_PREF, ADV_UNSET_PREF, ADV_SET_ACC, ADV_UNSET_ACC };
enum {
    RA_READ_MOSTLY = 1,
    RA_PREF,
    RA_ACCESSED_BY,
    RA_LAST_PREFETCH,
    RA_PREF_TYPE,
    RA_PREF_ID,
    RA_PREFETCH_TYPE,
    RA_PREFETCH_ID
};
#define DEVICE_CPU (-1)
#define DEVICE_INVALID (-2)
enum { LOC_DEVICE = 1, LOC_HOST, LOC_HOST_NUMA, LOC_HOST_NUMA_CURRENT };

enum hint_kind { H_READ_MOSTLY, H_PREF, H_ACCESSED_BY, H_PREFETCH };

/* One recorded hint: on [p, p + n) of the managed allocation at base, `set` (false: the
 * advice was unset) with location loc. */
struct hint {
    CUdeviceptr base, p;
    size_t n;
    enum hint_kind kind;
    bool set;
    CUmemLocation loc;
};
#define HINTS_MAX 512
static struct hint hints[HINTS_MAX];
static size_t nhints;
static pthread_mutex_t hints_lock = PTHREAD_MUTEX_INITIALIZER;

static bool same_loc(CUmemLocation a, CUmemLocation b)
{
    return a.type == b.type && (a.type == LOC_HOST || a.id == b.id);
}

/* Records a hint; older hints of the same kind (and device, for accessed-by) that it covers
 * entirely no longer matter and are dropped. Past HINTS_MAX the oldest is dropped. */
static void hint_add(CUdeviceptr base, CUdeviceptr p, size_t n, enum hint_kind kind, bool set,
                     CUmemLocation loc)
{
    size_t j = 0;

    pthread_mutex_lock(&hints_lock);
    for (size_t i = 0; i < nhints; i++) {
        struct hint *h = &hints[i];
        bool covered = h->kind == kind && h->base == base && h->p >= p && h->p - p <= n &&
                       h->n <= n - (h->p - p) && (kind != H_ACCESSED_BY || same_loc(h->loc, loc));
        if (!covered)
            hints[j++] = *h;
    }
    nhints = j;
    if (nhints == HINTS_MAX) {
        memmove(hints, hints + 1, (HINTS_MAX - 1) * sizeof(hints[0]));
        nhints--;
    }
    hints[nhints++] = (struct hint){base, p, n, kind, set, loc};
    pthread_mutex_unlock(&hints_lock);
}

void om_hints_forget(CUdeviceptr base)
{
    size_t j = 0;

    pthread_mutex_lock(&hints_lock);
    for (size_t i = 0; i < nhints; i++)
        if (hints[i].base != base)
            hints[j++] = hints[i];
    nhints = j;
    pthread_mutex_unlock(&hints_lock);
}

/* The latest hint of `kind` (of location `acc` for accessed-by) at address a: its index, or
 * -1 where none applies. Called with hints_lock held. */
static long hint_at(CUdeviceptr a, enum hint_kind kind, const CUmemLocation *acc)
{
    for (size_t i = nhints; i-- > 0;) {
        const struct hint *h = &hints[i];
        if (h->kind == kind && a >= h->p && a - h->p < h->n &&
            (kind != H_ACCESSED_BY || same_loc(h->loc, *acc)))
            return (long)i;
    }
    return -1;
}

/* Whether every byte of [p, p + n) has the hint `kind` set, to one location (*ret_loc). The
 * range is cut at every recorded hint's ends: within a piece one hint applies throughout. */
static bool hint_uniform(CUdeviceptr p, size_t n, enum hint_kind kind, const CUmemLocation *acc,
                         CUmemLocation *ret_loc)
{
    bool uniform = true, first = true;
    CUdeviceptr a = p, end = p + n;

    pthread_mutex_lock(&hints_lock);
    while (a < end && uniform) {
        long i = hint_at(a, kind, acc);
        CUdeviceptr next = end;

        if (i < 0 || !hints[i].set)
            uniform = false;
        else if (first)
            *ret_loc = hints[i].loc;
        else if (!same_loc(*ret_loc, hints[i].loc))
            uniform = false;
        first = false;
        for (size_t k = 0; k < nhints; k++) { /* the next end of any hint after a */
            CUdeviceptr s = hints[k].p, e = hints[k].p + hints[k].n;
            if (s > a && s < next)
                next = s;
            if (e > a && e < next)
                next = e;
        }
        a = next;
    }
    pthread_mutex_unlock(&hints_lock);
    return uniform;
}

/* A location of the legacy API (a device ordinal or CU_DEVICE_CPU). */
static CUresult legacy_loc(CUdevice dev, CUmemLocation *loc)
{
    if (dev == DEVICE_CPU) {
        *loc = (CUmemLocation){LOC_HOST, 0};
        return CUDA_SUCCESS;
    }
    if (dev < 0 || dev >= (int)om_shim.client.ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    *loc = (CUmemLocation){LOC_DEVICE, dev};
    return CUDA_SUCCESS;
}

static int loc_legacy(CUmemLocation loc)
{
    return loc.type == LOC_DEVICE ? loc.id : DEVICE_CPU;
}

/* A location of the _v2 API: a device of this client or the host. */
static CUresult check_loc(CUmemLocation loc)
{
    if (loc.type == LOC_DEVICE)
        return loc.id >= 0 && loc.id < (int)om_shim.client.ndevices ? CUDA_SUCCESS
                                                                    : CUDA_ERROR_INVALID_DEVICE;
    return loc.type >= LOC_HOST && loc.type <= LOC_HOST_NUMA_CURRENT ? CUDA_SUCCESS
                                                                     : CUDA_ERROR_INVALID_VALUE;
}

static CUresult prefetch(CUdeviceptr p, size_t count, CUmemLocation loc)
{
    CUdeviceptr base = 0;
    CUresult rc = check_loc(loc);

    if (rc == CUDA_SUCCESS && (rc = own_range(p, count)) == CUDA_SUCCESS &&
        managed_range(p, count, &base) == CUDA_SUCCESS)
        hint_add(base, p, count, H_PREFETCH, true, loc);
    return rc;
}

static CUresult advise(CUdeviceptr p, size_t count, int advice, CUmemLocation loc)
{
    static const enum hint_kind kinds[] = {H_READ_MOSTLY, H_READ_MOSTLY, H_PREF,
                                           H_PREF,        H_ACCESSED_BY, H_ACCESSED_BY};
    CUdeviceptr base = 0;
    CUresult rc;

    if (advice < ADV_SET_RM || advice > ADV_UNSET_ACC)
        return CUDA_ERROR_INVALID_VALUE;
    if (advice != ADV_SET_RM && advice != ADV_UNSET_RM && advice != ADV_UNSET_PREF &&
        (rc = check_loc(loc)) != CUDA_SUCCESS)
        return rc;
    if ((rc = own_range(p, count)) == CUDA_SUCCESS &&
        managed_range(p, count, &base) == CUDA_SUCCESS)
        hint_add(base, p, count, kinds[advice - 1], advice % 2 == 1, loc);
    return rc;
}

CUresult om_r_cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                 CUstream hStream)
{
    CUmemLocation loc;
    CUresult rc = legacy_loc(dstDevice, &loc);

    (void)hStream;
    return rc == CUDA_SUCCESS ? prefetch(devPtr, count, loc) : rc;
}

CUresult om_r_cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                    unsigned int flags, CUstream hStream)
{
    (void)hStream;
    if (flags)
        return CUDA_ERROR_INVALID_VALUE;
    return prefetch(devPtr, count, location);
}

/* CUmem_advise: 1..6 (set/unset read-mostly, preferred location, accessed-by). */
CUresult om_r_cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device)
{
    CUmemLocation loc = {LOC_HOST, 0};
    CUresult rc = CUDA_SUCCESS;

    if ((int)advice >= ADV_SET_PREF && (int)advice <= ADV_UNSET_ACC &&
        (int)advice != ADV_UNSET_PREF)
        rc = legacy_loc(device, &loc);
    return rc == CUDA_SUCCESS ? advise(devPtr, count, (int)advice, loc) : rc;
}

CUresult om_r_cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                             CUmemLocation location)
{
    return advise(devPtr, count, (int)advice, location);
}

/* One attribute of a managed range, from the hints recorded (a range the program never
 * advised reads as the driver's defaults: not read-mostly, no preferred or prefetch
 * location, accessed by no device). */
CUresult om_r_cuMemRangeGetAttribute(void *data, size_t dataSize, CUmem_range_attribute attribute,
                                     CUdeviceptr devPtr, size_t count)
{
    CUdeviceptr base = 0;
    CUmemLocation loc = {0, 0};
    int *out = data;
    bool uniform;
    CUresult rc;

    if (!data || attribute < RA_READ_MOSTLY || attribute > RA_PREFETCH_ID ||
        (attribute == RA_ACCESSED_BY ? dataSize == 0 || dataSize % 4 : dataSize != 4))
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = managed_range(devPtr, count, &base)) != CUDA_SUCCESS)
        return rc;
    switch (attribute) {
    case RA_READ_MOSTLY:
        *out = hint_uniform(devPtr, count, H_READ_MOSTLY, NULL, &loc);
        return CUDA_SUCCESS;
    case RA_ACCESSED_BY: {
        size_t k = 0, cap = dataSize / 4;
        for (int d = -1; d < (int)om_shim.client.ndevices && k < cap; d++) {
            CUmemLocation want =
                d < 0 ? (CUmemLocation){LOC_HOST, 0} : (CUmemLocation){LOC_DEVICE, d};
            if (hint_uniform(devPtr, count, H_ACCESSED_BY, &want, &loc))
                out[k++] = loc_legacy(want);
        }
        while (k < cap)
            out[k++] = DEVICE_INVALID;
        return CUDA_SUCCESS;
    }
    default: break;
    }
    uniform = hint_uniform(
        devPtr, count,
        attribute == RA_PREF || attribute == RA_PREF_TYPE || attribute == RA_PREF_ID ? H_PREF
                                                                                     : H_PREFETCH,
        NULL, &loc);
    switch (attribute) {
    case RA_PREF:
    case RA_LAST_PREFETCH: *out = uniform ? loc_legacy(loc) : DEVICE_INVALID; break;
    case RA_PREF_TYPE:
    case RA_PREFETCH_TYPE: *out = uniform ? loc.type : 0; break;
    default: *out = uniform ? loc.id : DEVICE_INVALID; break;
    }
    return CUDA_SUCCESS;
}

CUresult om_r_cuMemRangeGetAttributes(void **data, size_t *dataSizes,
                                      CUmem_range_attribute *attributes, size_t numAttributes,
                                      CUdeviceptr devPtr, size_t count)
{
    CUresult rc = CUDA_SUCCESS;

    if (!data || !dataSizes || !attributes || numAttributes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < numAttributes && rc == CUDA_SUCCESS; i++)
        rc = om_r_cuMemRangeGetAttribute(data[i], dataSizes[i], attributes[i], devPtr, count);
    return rc;
}

/* The ranges of a batch (13.0): every one managed memory of this client. */
static CUresult batch_ranges(const CUdeviceptr *dptrs, const size_t *sizes, size_t count,
                             unsigned long long flags)
{
    CUdeviceptr base;

    if (!dptrs || !sizes || count == 0 || flags)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++)
        if (managed_range(dptrs[i], sizes[i], &base) != CUDA_SUCCESS)
            return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* The locations of a batch: idxs[0] == 0, increasing, below count; each location valid. Then
 * the prefetches are recorded (the location of operation i: the last k with idxs[k] <= i). */
static CUresult batch_prefetch(const CUdeviceptr *dptrs, const size_t *sizes, size_t count,
                               const CUmemLocation *locs, const size_t *idxs, size_t nlocs)
{
    CUresult rc;

    if (!locs || !idxs || nlocs == 0 || nlocs > count || idxs[0] != 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; k < nlocs; k++) {
        if ((k > 0 && idxs[k] <= idxs[k - 1]) || idxs[k] >= count)
            return CUDA_ERROR_INVALID_VALUE;
        if ((rc = check_loc(locs[k])) != CUDA_SUCCESS)
            return rc;
    }
    for (size_t k = 0, i = 0; i < count; i++) {
        CUdeviceptr base = 0;
        if (k + 1 < nlocs && idxs[k + 1] == i)
            k++;
        managed_range(dptrs[i], sizes[i], &base);
        hint_add(base, dptrs[i], sizes[i], H_PREFETCH, true, locs[k]);
    }
    return CUDA_SUCCESS;
}

CUresult om_r_cuMemPrefetchBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                      CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs,
                                      size_t numPrefetchLocs, unsigned long long flags,
                                      CUstream hStream)
{
    CUresult rc = batch_ranges(dptrs, sizes, count, flags);

    (void)hStream;
    return rc == CUDA_SUCCESS
               ? batch_prefetch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs)
               : rc;
}

/* A discard: the contents become indeterminate; the emulation keeps them (a valid choice). */
CUresult om_r_cuMemDiscardBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                     unsigned long long flags, CUstream hStream)
{
    (void)hStream;
    return batch_ranges(dptrs, sizes, count, flags);
}

CUresult om_r_cuMemDiscardAndPrefetchBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                                CUmemLocation *prefetchLocs,
                                                size_t *prefetchLocIdxs, size_t numPrefetchLocs,
                                                unsigned long long flags, CUstream hStream)
{
    return om_r_cuMemPrefetchBatchAsync(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs,
                                        numPrefetchLocs, flags, hStream);
}

/* CU_POINTER_ATTRIBUTE_SYNC_MEMOPS on this client's memory: every synchronous copy and set
 * of remote mode already waits for its work (the server's copy on the client's stream, then
 * a wait on that stream), so the attribute holds whatever is set and reads 1. */
CUresult om_r_cuPointerSetAttribute(const void *value, CUpointer_attribute attribute,
                                    CUdeviceptr ptr)
{
    CUdeviceptr base;
    size_t size;
    bool managed;
    uint64_t server;

    if (!value || attribute != 6 /* CU_POINTER_ATTRIBUTE_SYNC_MEMOPS */)
        return CUDA_ERROR_INVALID_VALUE;
    if (!om_devrange_find(ptr, &base, &size, &managed) &&
        !om_pinned_lookup((const void *)(uintptr_t)ptr, 1, &server))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ virtual memory management */

CUresult om_r_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                          const CUmemAllocationProp *prop, unsigned long long flags)
{
    REQ(req, 16 + sizeof(CUmemAllocationProp));
    uint64_t v = 0;
    CUresult rc;

    if (!handle || !prop)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, size);
    om_put_bytes(&req, prop, sizeof(*prop));
    om_put_u64(&req, flags);
    rc = call_u64_reply(OM_IDX_cuMemCreate, &req, &v);
    if (rc == CUDA_SUCCESS)
        *handle = (CUmemGenericAllocationHandle)v;
    return rc;
}

CUresult om_r_cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                  unsigned long long flags)
{
    REQ(req, 32);
    uint64_t v = 0;
    CUresult rc;

    if (!ptr)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, size);
    om_put_u64(&req, alignment);
    om_put_u64(&req, addr);
    om_put_u64(&req, flags);
    rc = call_u64_reply(OM_IDX_cuMemAddressReserve, &req, &v);
    if (rc == CUDA_SUCCESS)
        *ptr = v;
    return rc;
}

CUresult om_r_cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    REQ(req, 16);

    om_put_u64(&req, ptr);
    om_put_u64(&req, size);
    return om_rcall(OM_IDX_cuMemAddressFree, &req, NULL, 0, NULL);
}

CUresult om_r_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                       CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    REQ(req, 40);
    CUresult rc;

    om_put_u64(&req, ptr);
    om_put_u64(&req, size);
    om_put_u64(&req, offset);
    om_put_u64(&req, (uint64_t)handle);
    om_put_u64(&req, flags);
    rc = om_rcall(OM_IDX_cuMemMap, &req, NULL, 0, NULL);
    if (rc == CUDA_SUCCESS && om_devrange_add(ptr, size) < 0) {
        /* A mapping this process could not tell from host memory is not kept. */
        om_r_cuMemUnmap(ptr, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc == CUDA_SUCCESS)
        om_devrange_set_mapped(ptr);
    return rc;
}

CUresult om_r_cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    REQ(req, 16);
    CUresult rc;

    om_put_u64(&req, ptr);
    om_put_u64(&req, size);
    rc = om_rcall(OM_IDX_cuMemUnmap, &req, NULL, 0, NULL);
    if (rc != CUDA_ERROR_INVALID_VALUE)
        om_devrange_remove(ptr);
    return rc;
}

CUresult om_r_cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    REQ(req, 8);
    uint64_t v = 0;
    CUresult rc;

    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, U64(addr));
    rc = call_u64_reply(OM_IDX_cuMemRetainAllocationHandle, &req, &v);
    if (rc == CUDA_SUCCESS)
        *handle = (CUmemGenericAllocationHandle)v;
    return rc;
}

/* Custom on the server's side only (it counts the extra references of retained handles). */
CUresult om_r_cuMemRelease(CUmemGenericAllocationHandle handle)
{
    REQ(req, 8);

    om_put_u64(&req, (uint64_t)handle);
    return om_rcall(OM_IDX_cuMemRelease, &req, NULL, 0, NULL);
}

CUresult om_r_cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                             size_t count)
{
    REQ(req, 24 + 16 * sizeof(CUmemAccessDesc));

    if (!desc || count == 0 || count > 16)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, ptr);
    om_put_u64(&req, size);
    om_put_u64(&req, count);
    om_put_bytes(&req, desc, count * sizeof(*desc));
    return om_rcall(OM_IDX_cuMemSetAccess, &req, NULL, 0, NULL);
}

/* IPC event handles (src/server/api/ipc.c): the handle is the server's blob, the opened event
 * the same server event, now this client's too. */
CUresult om_r_cuIpcGetEventHandle(CUipcEventHandle *pHandle, CUevent event)
{
    REQ(req, 8);
    uint32_t got = 0;
    CUresult rc;

    if (!pHandle)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)event);
    rc = om_rcall(OM_IDX_cuIpcGetEventHandle, &req, pHandle, sizeof(*pHandle), &got);
    return rc == CUDA_SUCCESS && got != sizeof(*pHandle) ? CUDA_ERROR_UNKNOWN : rc;
}

CUresult om_r_cuIpcOpenEventHandle(CUevent *phEvent, CUipcEventHandle handle)
{
    REQ(req, CU_IPC_HANDLE_SIZE);
    uint64_t ev = 0;
    uint32_t got = 0;
    CUresult rc;

    if (!phEvent)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_bytes(&req, &handle, sizeof(handle));
    rc = om_rcall(OM_IDX_cuIpcOpenEventHandle, &req, &ev, sizeof(ev), &got);
    if (rc == CUDA_SUCCESS && got != sizeof(ev))
        return CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS)
        *phEvent = (CUevent)(uintptr_t)ev;
    return rc;
}

/* An event's handle goes to the server as it is: the server decides (an IPC-shared event is
 * destroyed by its last holder). */

/* ------------------------------------------------------------------ 3D peer copies */

/* CUDA_MEMCPY3D_PEER is CUDA_MEMCPY3D with each side's context where CUDA_MEMCPY3D has a
 * reserved pointer. Each context must be one of this client's (the server holds every
 * device's memory in one address space); the copy is cuMemcpy3D's on one device. Two
 * different devices are refused (CUDA_ERROR_NOT_SUPPORTED): not done through the server. */
static CUresult peer_to_3d(const CUDA_MEMCPY3D_PEER *p, CUDA_MEMCPY3D *c)
{
    CUdevice sdev = -1, ddev = -1;

    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(c, p, sizeof(*c));
    if (p->srcMemoryType != CU_MEMORYTYPE_ARRAY &&
        om_r_cuCtxGetDevice_v2(&sdev, p->srcContext) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (p->dstMemoryType != CU_MEMORYTYPE_ARRAY &&
        om_r_cuCtxGetDevice_v2(&ddev, p->dstContext) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (sdev >= 0 && ddev >= 0 && sdev != ddev)
        return CUDA_ERROR_NOT_SUPPORTED;
    c->reserved0 = NULL;
    c->reserved1 = NULL;
    return CUDA_SUCCESS;
}

CUresult om_r_cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *pCopy)
{
    CUresult (*copy)(const CUDA_MEMCPY3D *) = om_remote_entry(OM_IDX_cuMemcpy3D_v2);
    CUDA_MEMCPY3D c;
    CUresult rc = peer_to_3d(pCopy, &c);

    return rc == CUDA_SUCCESS ? copy(&c) : rc;
}

CUresult om_r_cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{
    CUresult (*copy)(const CUDA_MEMCPY3D *, CUstream) = om_remote_entry(OM_IDX_cuMemcpy3DAsync_v2);
    CUDA_MEMCPY3D c;
    CUresult rc = peer_to_3d(pCopy, &c);

    return rc == CUDA_SUCCESS ? copy(&c, hStream) : rc;
}

/* ------------------------------------------------------------------ batches of copies */

/*
 * cuMemcpyBatchAsync (13.0: _v2; the 12.8 form has failIdx): every copy checked before any is
 * issued: each side is this client's device or managed memory within one allocation, or
 * pinned host memory shared with the server (pageable host memory and host-to-host copies
 * are refused: a copy of the batch runs in stream order, which pageable memory, staged by the
 * client, would not keep). Then each copy is cuMemcpyAsync's on the stream; a source access
 * order of "during the call" waits for that stream before returning. Location hints apply to
 * managed memory with concurrent access only, which the emulation does not report: ignored.
 */
#define BATCH_NOT_A_COPY SIZE_MAX

static bool batch_side(CUdeviceptr p, size_t n, bool *on_device)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    bool managed = false;
    uint64_t server;

    if (om_devrange_find(p, &base, &size, &managed)) {
        *on_device = true;
        return n <= size - (p - base);
    }
    *on_device = false;
    return om_pinned_lookup((const void *)(uintptr_t)p, n, &server);
}

static CUresult copy_batch(const CUdeviceptr *dsts, const CUdeviceptr *srcs, const size_t *sizes,
                           size_t count, const CUmemcpyAttributes *attrs, const size_t *idxs,
                           size_t nattrs, CUstream s, bool per_thread, size_t *fail)
{
    CUresult (*copy)(CUdeviceptr, CUdeviceptr, size_t, CUstream) =
        om_remote_entry(OM_IDX_cuMemcpyAsync);
    CUresult (*sync)(CUstream) = om_remote_entry(OM_IDX_cuStreamSynchronize);
    bool wait = false;
    CUresult rc = CUDA_SUCCESS;

    *fail = BATCH_NOT_A_COPY;
    if (!dsts || !srcs || !sizes || count == 0 || !attrs || !idxs || nattrs == 0 ||
        nattrs > count || idxs[0] != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((uintptr_t)s == 1 || (!s && !per_thread)) /* the legacy NULL stream */
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; k < nattrs; k++) {
        if ((k > 0 && idxs[k] <= idxs[k - 1]) || idxs[k] >= count || attrs[k].srcAccessOrder < 1 ||
            attrs[k].srcAccessOrder > 3 || (attrs[k].flags & ~1u))
            return CUDA_ERROR_INVALID_VALUE;
        wait |= attrs[k].srcAccessOrder == 2;
    }
    for (size_t i = 0; i < count; i++) {
        bool ddev = false, sdev = false;
        if (!batch_side(dsts[i], sizes[i], &ddev) || !batch_side(srcs[i], sizes[i], &sdev) ||
            (!ddev && !sdev)) {
            *fail = i;
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    for (size_t i = 0; i < count && rc == CUDA_SUCCESS; i++)
        if ((rc = copy(dsts[i], srcs[i], sizes[i], s)) != CUDA_SUCCESS)
            *fail = i;
    if (rc == CUDA_SUCCESS && wait)
        rc = sync(s);
    return rc;
}

CUresult om_r_cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                    size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
                                    size_t numAttrs, CUstream hStream)
{
    size_t fail;

    return copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream, false, &fail);
}

CUresult om_r_cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                         size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
                                         size_t numAttrs, CUstream hStream)
{
    size_t fail;

    return copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream, true, &fail);
}

CUresult om_r_cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                 CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                 size_t *failIdx, CUstream hStream)
{
    size_t fail;
    CUresult rc =
        copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream, false, &fail);

    if (rc != CUDA_SUCCESS && failIdx)
        *failIdx = fail;
    return rc;
}

CUresult om_r_cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                      size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
                                      size_t numAttrs, size_t *failIdx, CUstream hStream)
{
    size_t fail;
    CUresult rc =
        copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream, true, &fail);

    if (rc != CUDA_SUCCESS && failIdx)
        *failIdx = fail;
    return rc;
}

/*
 * cuMemcpy3DBatchAsync: pointer-to-pointer operations (element size 1), each one's whole 3D
 * footprint checked as cuMemcpyBatchAsync's sides are, before any is issued; then each is a
 * cuMemcpy3DAsync on the stream. Array operands and managed memory are refused
 * (CUDA_ERROR_NOT_SUPPORTED): not done yet.
 */
static CUresult batch3d_side(const om_memcpy3d_operand *o, const CUDA_MEMCPY3D_BATCH_OP *op,
                             int *ret_type, size_t *ret_pitch, size_t *ret_layer)
{
    size_t row = o->op.ptr.rowLength ? o->op.ptr.rowLength : op->width;
    size_t layer = o->op.ptr.layerHeight ? o->op.ptr.layerHeight : op->height;
    size_t span, t;
    CUdeviceptr base = 0;
    size_t size = 0;
    bool managed = false;
    uint64_t server;

    if (o->type == 2)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (o->type != 1 || row < op->width || layer < op->height)
        return CUDA_ERROR_INVALID_VALUE;
    /* the last byte: (depth - 1) layers, (height - 1) rows, then width */
    if (__builtin_mul_overflow(op->depth - 1, layer, &t) || __builtin_mul_overflow(t, row, &t) ||
        __builtin_mul_overflow(op->height - 1, row, &span) ||
        __builtin_add_overflow(span, t, &span) || __builtin_add_overflow(span, op->width, &span))
        return CUDA_ERROR_INVALID_VALUE;
    *ret_pitch = row;
    *ret_layer = layer;
    if (om_devrange_find(o->op.ptr.ptr, &base, &size, &managed)) {
        if (span > size - (o->op.ptr.ptr - base))
            return CUDA_ERROR_INVALID_VALUE;
        *ret_type = CU_MEMORYTYPE_DEVICE;
        return managed ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS;
    }
    *ret_type = CU_MEMORYTYPE_HOST;
    return om_pinned_lookup((const void *)(uintptr_t)o->op.ptr.ptr, span, &server)
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_VALUE;
}

static CUresult copy3d_batch(size_t n, const CUDA_MEMCPY3D_BATCH_OP *ops, unsigned long long flags,
                             CUstream s, bool per_thread, size_t *fail)
{
    CUresult (*copy)(const CUDA_MEMCPY3D *, CUstream) = om_remote_entry(OM_IDX_cuMemcpy3DAsync_v2);
    CUresult (*sync)(CUstream) = om_remote_entry(OM_IDX_cuStreamSynchronize);
    bool wait = false;
    CUresult rc = CUDA_SUCCESS;

    *fail = BATCH_NOT_A_COPY;
    if (n == 0 || !ops || flags || (uintptr_t)s == 1 || (!s && !per_thread))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        const CUDA_MEMCPY3D_BATCH_OP *op = &ops[i];
        int st = 0, dt = 0;
        size_t sp, sl, dp, dl;

        *fail = i;
        if (!op->width || !op->height || !op->depth || op->srcAccessOrder < 1 ||
            op->srcAccessOrder > 3 || (op->flags & ~1u))
            return CUDA_ERROR_INVALID_VALUE;
        if ((rc = batch3d_side(&op->src, op, &st, &sp, &sl)) != CUDA_SUCCESS ||
            (rc = batch3d_side(&op->dst, op, &dt, &dp, &dl)) != CUDA_SUCCESS)
            return rc;
        if (st == CU_MEMORYTYPE_HOST && dt == CU_MEMORYTYPE_HOST)
            return CUDA_ERROR_INVALID_VALUE;
        wait |= op->srcAccessOrder == 2;
    }
    *fail = BATCH_NOT_A_COPY;
    for (size_t i = 0; i < n && rc == CUDA_SUCCESS; i++) {
        const CUDA_MEMCPY3D_BATCH_OP *op = &ops[i];
        CUDA_MEMCPY3D c = {0};
        int st = 0, dt = 0;
        size_t sp, sl, dp, dl;

        batch3d_side(&op->src, op, &st, &sp, &sl);
        batch3d_side(&op->dst, op, &dt, &dp, &dl);
        c.srcMemoryType = st;
        if (st == CU_MEMORYTYPE_HOST)
            c.srcHost = (const void *)(uintptr_t)op->src.op.ptr.ptr;
        else
            c.srcDevice = op->src.op.ptr.ptr;
        c.srcPitch = sp;
        c.srcHeight = sl;
        c.dstMemoryType = dt;
        if (dt == CU_MEMORYTYPE_HOST)
            c.dstHost = (void *)(uintptr_t)op->dst.op.ptr.ptr;
        else
            c.dstDevice = op->dst.op.ptr.ptr;
        c.dstPitch = dp;
        c.dstHeight = dl;
        c.WidthInBytes = op->width;
        c.Height = op->height;
        c.Depth = op->depth;
        if ((rc = copy(&c, s)) != CUDA_SUCCESS)
            *fail = i;
    }
    if (rc == CUDA_SUCCESS && wait)
        rc = sync(s);
    return rc;
}

CUresult om_r_cuMemcpy3DBatchAsync_v2(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                      unsigned long long flags, CUstream hStream)
{
    size_t fail;

    return copy3d_batch(numOps, opList, flags, hStream, false, &fail);
}

CUresult om_r_cuMemcpy3DBatchAsync_v2_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                           unsigned long long flags, CUstream hStream)
{
    size_t fail;

    return copy3d_batch(numOps, opList, flags, hStream, true, &fail);
}

CUresult om_r_cuMemcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx,
                                   unsigned long long flags, CUstream hStream)
{
    size_t fail;
    CUresult rc = copy3d_batch(numOps, opList, flags, hStream, false, &fail);

    if (rc != CUDA_SUCCESS && failIdx)
        *failIdx = fail;
    return rc;
}

CUresult om_r_cuMemcpy3DBatchAsync_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                        size_t *failIdx, unsigned long long flags, CUstream hStream)
{
    size_t fail;
    CUresult rc = copy3d_batch(numOps, opList, flags, hStream, true, &fail);

    if (rc != CUDA_SUCCESS && failIdx)
        *failIdx = fail;
    return rc;
}

/* ------------------------------------------------------------------ dma-buf of a range */

/* The server asks the driver for a dma-buf descriptor of the client's range (checked there)
 * and sends it after its answer on the session socket: the answer and the descriptor are one
 * exchange, so no other call of this process comes between. */
CUresult om_r_cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size,
                                            CUmemRangeHandleType handleType,
                                            unsigned long long flags)
{
    REQ(req, 32);
    CUresult rc;
    int fd = -1;

    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, dptr);
    om_put_u64(&req, size);
    om_put_u64(&req, (uint64_t)handleType);
    om_put_u64(&req, flags);
    om_ring_lock();
    rc = om_rcall_locked(OM_IDX_cuMemGetHandleForAddressRange, &req, NULL, 0, NULL);
    if (rc == CUDA_SUCCESS && (fd = om_recv_fd_locked()) < 0)
        rc = CUDA_ERROR_UNKNOWN;
    om_ring_unlock();
    if (rc != CUDA_SUCCESS)
        return rc;
    *(int *)handle = fd;
    return CUDA_SUCCESS;
}
