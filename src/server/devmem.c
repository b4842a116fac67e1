/* SPDX-License-Identifier: MIT */
/* Device memory for clients through the virtual-memory API: freeing never waits for other clients.
 */
#include "internal.h"

#include "../common/log.h"

/*
 * cuMemFree waits for every kernel running in the context, and meanwhile
 * blocks every other thread's launches (docs/driver-facts.md): one client's free
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

/* The allocation granularity of the virtual-memory API (0: not available), asked once. */
static size_t granularity(void)
{
    static size_t gran; /* (__atomic) */
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    size_t g = __atomic_load_n(&gran, __ATOMIC_RELAXED);

    if (g || !have_vmm())
        return g;
    if (((CUresult(*)(size_t *, const CUmemAllocationProp *, int))R(cuMemGetAllocationGranularity))(
            &g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS ||
        g == 0)
        return 0;
    __atomic_store_n(&gran, g, __ATOMIC_RELAXED);
    return g;
}

/* The size an allocation of `bytes` gets. */
static uint64_t rounded(uint64_t bytes)
{
    size_t gran = granularity();

    return gran ? (bytes + gran - 1) / gran * gran : bytes;
}

/* On device `dev` (the context current on the calling thread is that device's); readable and
 * writable there and from every device whose context reaches it (peer access, driver.c), as
 * cuMemAlloc's memory is. */
CUresult om_devmem_alloc(int dev, uint64_t bytes, uint64_t *ret_base, uint64_t *ret_size,
                         uint64_t *ret_mem)
{
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev}};
    CUmemAccessDesc access[OM_MAX_DEVICES];
    size_t naccess = 0;
    CUmemGenericAllocationHandle mem = 0;
    CUdeviceptr base = 0;
    size_t gran = 0, size;
    CUresult rc;

    if (bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (bytes > OM_DEVMEM_MAX_BYTES) /* no device holds it: what the driver answers */
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!have_vmm() || granularity() == 0) { /* (the test double without FAKECUDA_VMM) */
        rc = ((CUresult(*)(CUdeviceptr *, size_t))R(cuMemAlloc_v2))(&base, bytes);
        if (rc == CUDA_SUCCESS) {
            *ret_base = base;
            *ret_size = bytes;
            *ret_mem = 0;
        }
        return rc;
    }
    gran = granularity();
    if (gran == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    size = rounded(bytes);
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
    for (int d = 0; d < om_server_ndevices() && d < (int)OM_MAX_DEVICES; d++)
        if (d == dev || om_server_peer(d, dev))
            access[naccess++] =
                (CUmemAccessDesc){.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d},
                                  .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    rc = ((CUresult(*)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t))R(cuMemSetAccess))(
        base, size, access, naccess);
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

/*
 * A client's freed allocations are kept for its next allocation of the same size (at most
 * OM_DEVCACHE_ENTRIES of at most CACHE_MAX_BYTES each): a map through the virtual-memory API costs
 * 80-120 µs (B2: cudaMalloc + cudaFree of 1 MiB, 20-30 times the driver's own, which caches
 * too). Only the same client gets them back (their bytes are its own), freed with the session,
 * or at once when an allocation of the client fails for want of memory. Managed allocations
 * are not kept: the client maps a host shadow at the address, and a fresh reservation lets the
 * driver choose another address when that one was taken on the client's side.
 */
#define CACHE_MAX_BYTES (32ull << 20)

CUresult om_devmem_take(struct session *s, uint64_t bytes, uint64_t *ret_base, uint64_t *ret_size,
                        uint64_t *ret_mem)
{
    uint64_t size;

    if (bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (bytes > OM_DEVMEM_MAX_BYTES) /* before rounding: a huge count must not wrap */
        return CUDA_ERROR_OUT_OF_MEMORY;
    size = rounded(bytes);
    for (size_t i = 0; i < s->ndevcache; i++) {
        struct om_range *r = &s->devcache[i];
        /* what a new allocation of `bytes` on its current device would have been */
        if (r->size == size && r->dev == s->dev) {
            *ret_base = r->base;
            *ret_size = r->size;
            *ret_mem = r->mem;
            *r = s->devcache[--s->ndevcache];
            return CUDA_SUCCESS;
        }
    }
    CUresult rc = om_devmem_alloc(s->dev, bytes, ret_base, ret_size, ret_mem);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY && s->ndevcache) { /* what it keeps must not cost it */
        om_devmem_drop_cache(s);
        rc = om_devmem_alloc(s->dev, bytes, ret_base, ret_size, ret_mem);
    }
    return rc;
}

void om_devmem_give(struct session *s, int dev, uint64_t base, uint64_t size, uint64_t mem)
{
    if (s->ndevcache < OM_DEVCACHE_ENTRIES && size <= CACHE_MAX_BYTES) {
        s->devcache[s->ndevcache++] =
            (struct om_range){.base = base, .size = size, .mem = mem, .owned = true, .dev = dev};
        return;
    }
    om_devmem_free(base, size, mem);
}

/* Bytes of the client's freed allocations on `dev` kept for it: free memory to the client, whose
 * program freed them (cuMemGetInfo adds them: a program that frees and allocates again sees the
 * device's free memory fall by what it allocates, as natively; PyTorch's test_mem_get_info). */
uint64_t om_devmem_cached(const struct session *s, int dev)
{
    uint64_t n = 0;

    for (size_t i = 0; i < s->ndevcache; i++)
        if (s->devcache[i].dev == dev)
            n += s->devcache[i].size;
    return n;
}

/* An allocation of another kind (the virtual-memory API's, managed memory, a pool's, an array)
 * that found no memory may find it in the client's kept allocations, which cuMemGetInfo counts
 * as free to it: true when they were given back (rc: its failure), and the caller tries once
 * more, as om_devmem_take does for its own kind. */
bool om_devmem_release_kept(struct session *s, CUresult rc)
{
    if (rc != CUDA_ERROR_OUT_OF_MEMORY || !s->ndevcache)
        return false;
    om_devmem_drop_cache(s);
    return true;
}

void om_devmem_drop_cache(struct session *s)
{
    for (size_t i = 0; i < s->ndevcache; i++)
        om_devmem_free(s->devcache[i].base, s->devcache[i].size, s->devcache[i].mem);
    s->ndevcache = 0;
}

void om_devmem_session_end(struct session *s)
{
    for (size_t i = 0; i < s->allocs.n; i++)
        if (s->allocs.v[i].owned)
            om_devmem_free(s->allocs.v[i].base, s->allocs.v[i].size, s->allocs.v[i].mem);
    om_devmem_drop_cache(s);
}
