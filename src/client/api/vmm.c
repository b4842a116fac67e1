/* SPDX-License-Identifier: MIT */
/* Remote mode, the vmm family (api/remote/vmm.tsv): the virtual-memory API: physical allocations,
 * address reservations, mappings, access. */
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

/* ------------------------------------------------------------------ virtual memory management */

CUresult om_r_cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                            CUmemAllocationGranularity_flags option)
{
    REQ(req, sizeof(CUmemAllocationProp) + 8);
    uint64_t v = 0;
    CUresult rc;

    if (!granularity || !prop)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_bytes(&req, prop, sizeof(*prop));
    om_put_u64(&req, (uint64_t)option);
    rc = om_rcall_u64_reply(OM_IDX_cuMemGetAllocationGranularity, &req, &v);
    if (rc == CUDA_SUCCESS)
        *granularity = (size_t)v;
    return rc;
}

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
    rc = om_rcall_u64_reply(OM_IDX_cuMemCreate, &req, &v);
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
    rc = om_rcall_u64_reply(OM_IDX_cuMemAddressReserve, &req, &v);
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

CUresult om_r_cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location,
                             CUdeviceptr ptr)
{
    REQ(req, sizeof(CUmemLocation) + 8);
    uint64_t v = 0;
    CUresult rc;

    if (!flags || !location)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_bytes(&req, location, sizeof(*location));
    om_put_u64(&req, ptr);
    rc = om_rcall_u64_reply(OM_IDX_cuMemGetAccess, &req, &v);
    if (rc == CUDA_SUCCESS)
        *flags = v;
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
    rc = om_rcall_u64_reply(OM_IDX_cuMemRetainAllocationHandle, &req, &v);
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
