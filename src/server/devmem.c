/* SPDX-License-Identifier: MIT */
/* Device memory for clients through the virtual-memory API: freeing never waits for other clients.
 */
#include "internal.h"

#include "../common/log.h"

/*
 * cuMemFree waits for every kernel running in the context, and meanwhile
 * blocks every other thread's launches (DRIVER_FACTS.md): one client's free
 * would stall all clients. cuMemCreate + cuMemAddressReserve + cuMemMap, and
 * their inverses, do not wait. The cost: sizes round up to the allocation
 * granularity (2 MiB on an H100); a sub-allocator for small sizes comes later.
 * A driver without the virtual-memory API (the CPU test double) gets cuMemAlloc.
 */

#define R(sym) om_server_real[OM_IDX_##sym]

static bool have_vmm(void)
{
    static const int need[] = {OM_IDX_cuMemCreate,      OM_IDX_cuMemAddressReserve,
                               OM_IDX_cuMemMap,         OM_IDX_cuMemSetAccess,
                               OM_IDX_cuMemUnmap,       OM_IDX_cuMemRelease,
                               OM_IDX_cuMemAddressFree, OM_IDX_cuMemGetAllocationGranularity};

    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
        if (!om_server_has(need[i]))
            return false;
    return true;
}

CUresult om_devmem_alloc(uint64_t bytes, uint64_t *ret_base, uint64_t *ret_size, uint64_t *ret_mem)
{
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemAccessDesc access = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUmemGenericAllocationHandle mem = 0;
    CUdeviceptr base = 0;
    size_t gran = 0, size;
    CUresult rc;

    if (bytes == 0 || bytes > (1ull << 46))
        return CUDA_ERROR_INVALID_VALUE;
    if (!have_vmm()) {
        rc = ((CUresult(*)(CUdeviceptr *, size_t))R(cuMemAlloc_v2))(&base, bytes);
        if (rc == CUDA_SUCCESS) {
            *ret_base = base;
            *ret_size = bytes;
            *ret_mem = 0;
        }
        return rc;
    }
    rc = ((CUresult(*)(size_t *, const CUmemAllocationProp *, int))R(
        cuMemGetAllocationGranularity))(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (rc != CUDA_SUCCESS)
        return rc;
    size = (bytes + gran - 1) / gran * gran;
    rc = ((CUresult(*)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                       unsigned long long))R(cuMemCreate))(&mem, size, &prop, 0);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = ((CUresult(*)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long))R(
        cuMemAddressReserve))(&base, size, 0, 0, 0);
    if (rc != CUDA_SUCCESS)
        goto release;
    rc = ((CUresult(*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                       unsigned long long))R(cuMemMap))(base, size, 0, mem, 0);
    if (rc != CUDA_SUCCESS)
        goto unreserve;
    rc = ((CUresult(*)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t))R(cuMemSetAccess))(
        base, size, &access, 1);
    if (rc != CUDA_SUCCESS)
        goto unmap;
    *ret_base = base;
    *ret_size = size;
    *ret_mem = mem;
    return CUDA_SUCCESS;
unmap:
    ((CUresult(*)(CUdeviceptr, size_t))R(cuMemUnmap))(base, size);
unreserve:
    ((CUresult(*)(CUdeviceptr, size_t))R(cuMemAddressFree))(base, size);
release:
    ((CUresult(*)(CUmemGenericAllocationHandle))R(cuMemRelease))(mem);
    return rc;
}

void om_devmem_free(uint64_t base, uint64_t size, uint64_t mem)
{
    CUresult rc;

    if (!mem) {
        rc = ((CUresult(*)(CUdeviceptr))R(cuMemFree_v2))(base);
    } else {
        rc = ((CUresult(*)(CUdeviceptr, size_t))R(cuMemUnmap))(base, size);
        if (rc == CUDA_SUCCESS)
            rc = ((CUresult(*)(CUmemGenericAllocationHandle))R(cuMemRelease))(mem);
        if (rc == CUDA_SUCCESS)
            rc = ((CUresult(*)(CUdeviceptr, size_t))R(cuMemAddressFree))(base, size);
    }
    if (rc != CUDA_SUCCESS)
        om_warn("freeing device memory at 0x%llx: CUresult %d", (unsigned long long)base, rc);
}
