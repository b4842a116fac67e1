/* SPDX-License-Identifier: MIT */
/* Remote mode, the managed family (api/remote/managed.tsv): managed allocations (their shadows
 * are state/shadows.c's), and the advice, prefetches and range attributes recorded for them. */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "../../common/wire.h"
#include "openmps/cuda_abi.h"
#include "openmps/ops.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "../shim.h"

static void free_device(uint64_t base)
{
    REQ(fr, 8);
    om_put_u64(&fr, base);
    om_rcall(OM_IDX_cuMemFree_v2, &fr, NULL, 0, NULL);
}

/*
 * Managed memory is device memory at an address D of the server's, shadowed at the same D here.
 * The server chooses D in its own address space, which may already be taken in this one (a
 * library, a heap mapping: the GPU tier met it once in about 50 runs). Then the allocation is
 * kept aside, so that the server cannot answer the same D again, and another is asked for, up to
 * MANAGED_TRIES times; those kept aside are freed at the end. Only when every try is taken here
 * is the answer OUT_OF_MEMORY.
 */
#define MANAGED_TRIES 8

CUresult om_r_cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned flags)
{
    uint64_t reply[2], taken[MANAGED_TRIES];
    unsigned ntaken = 0;
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    void *shadow = MAP_FAILED;

    (void)flags;
    if (!dptr || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    while (ntaken < MANAGED_TRIES) {
        uint32_t got = 0;
        REQ(req, 16);
        om_put_u64(&req, bytes);
        rc = om_rcall(OM_IDX_cuMemAllocManaged, &req, reply, sizeof(reply), &got);
        if (rc != CUDA_SUCCESS)
            break;
        if (got != sizeof(reply)) { /* an answer cut short: what it allocated, if it says */
            if (got >= sizeof(reply[0]))
                free_device(reply[0]);
            rc = CUDA_ERROR_UNKNOWN;
            break;
        }
        shadow = mmap((void *)(uintptr_t)reply[0], (size_t)reply[1], PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (shadow == (void *)(uintptr_t)reply[0])
            break;
        om_shim_log("managed memory: the address 0x%llx is taken in this process; asking for "
                    "another",
                    (unsigned long long)reply[0]);
        if (shadow != MAP_FAILED) /* an old kernel's hint taken elsewhere */
            munmap(shadow, (size_t)reply[1]);
        shadow = MAP_FAILED;
        taken[ntaken++] = reply[0];
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (unsigned i = 0; i < ntaken; i++)
        free_device(taken[i]);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!om_managed_add(reply[0], (size_t)reply[1])) { /* state/shadows.c */
        munmap(shadow, (size_t)reply[1]);
        free_device(reply[0]);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dptr = reply[0];
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ managed-memory hints */

/*
 * Managed memory is emulated (device memory with a host shadow, state/shadows.c), and the device
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
