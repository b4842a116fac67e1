/* SPDX-License-Identifier: MIT */
/*
 * The virtual memory management API for clients. Allocation handles are a handle kind
 * (`memhandle`, released at the session's end); address reservations and mappings are kept per
 * client (s->vmm_reserved, s->vmm_mapped): a client maps only its own handles, only into its own
 * reservations, and a mapped range is its device memory (s->allocs, not owned: cuMemFree of it
 * is refused, as the driver refuses it) while mapped. None of these calls waits for other
 * clients' kernels (docs/driver-facts.md); cuMemUnmap and cuMemAddressFree first wait for the
 * client's own streams, as its cuMemFree does (devmem.c).
 */
#include <stdlib.h>
#include <string.h>

#include "../exec.h"

#define VMM_MAX_BYTES (1ull << 46)

/* A location of host memory (a NUMA node's, the calling thread's node, or any): its id names
 * no device, so it goes to the driver as the client gave it. */
static bool host_location(int type)
{
    return type == CU_MEM_LOCATION_TYPE_HOST || type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
           type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

/* An allocation's properties the server answers for: pinned memory of one of the client's
 * devices (made the server's ordinal, in place) or of the host, shareable as a POSIX file
 * descriptor or a fabric handle (api/shareable.c), not Win32; allocFlags (gpuDirectRDMACapable,
 * compression, usage) are the driver's to judge. cuMemGetAllocationGranularity answers for
 * both locations, as natively (NCCL asks it of host memory before it probes cuMemCreate there);
 * cuMemCreate refuses host memory (its hook). */
static CUresult check_prop(struct session *s, CUmemAllocationProp *p)
{
    if (p->type != CU_MEM_ALLOCATION_TYPE_PINNED || p->win32HandleMetaData)
        return CUDA_ERROR_INVALID_VALUE;
    if (!host_location(p->location.type) && (p->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
                                             om_loc_in(s, &p->location) != CUDA_SUCCESS))
        return CUDA_ERROR_INVALID_VALUE;
    return om_shareable_types((uint32_t)p->requestedHandleTypes);
}

/* cuMemGetAllocationGranularity (generated, in:prop): properties of device memory the client may
 * have, their device the server's. */
CUresult om_check_prop(struct call *c, CUmemAllocationProp *p)
{
    return check_prop(c->s, p);
}

/* in:loc (cuMemPoolGetAccess, cuMemGetAccess): the client's device, as the server's. */
CUresult om_check_loc(struct call *c, CUmemLocation *loc)
{
    return om_loc_in(c->s, loc);
}

/* The device a physical allocation is made on (its cap counts it there): the server's ordinal,
 * after check_prop. */
static int prop_device(const struct session *s, const CUmemAllocationProp *p)
{
    return p->location.type == CU_MEM_LOCATION_TYPE_DEVICE && p->location.id >= 0 &&
                   p->location.id < om_server_ndevices()
               ? p->location.id
               : s->dev;
}

/* cuMemCreate (generated, hook): its properties checked by in:prop; counted against the
 * handles' budget and the device-memory cap. */
CUresult om_hook_cuMemCreate(struct call *c, CUmemGenericAllocationHandle *handle, size_t size,
                             const CUmemAllocationProp *prop, unsigned long long flags)
{
    CUresult rc;

    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (size > OM_DEVMEM_MAX_BYTES) /* more than any device holds, as the driver answers */
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* Host memory the server made would be mapped in the server's process, where the client
     * cannot read it: refused as a driver refuses host allocations it cannot make (NCCL then
     * keeps its host buffers in shared memory of its own, as it does in such containers). */
    if (host_location(prop->location.type))
        return CUDA_ERROR_NOT_SUPPORTED;
    if ((rc = om_own_room(c->s, OM_H_MEMHANDLE)) != CUDA_SUCCESS ||
        (rc = om_memcap_check(c->s, prop_device(c->s, prop), size)) != CUDA_SUCCESS)
        return rc;
    for (int again = 0; again < 2; again++) { /* again: after the kept allocations went */
        rc = ((CUresult(*)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                           unsigned long long))REAL(cuMemCreate))(handle, size, prop, flags);
        if (!om_devmem_release_kept(c->s, rc))
            break;
    }
    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_own_add(c, OM_H_MEMHANDLE, *handle)) != CUDA_SUCCESS)
        return rc;
    if ((rc = om_memcap_hold(c->s, prop_device(c->s, prop), *handle, size)) != CUDA_SUCCESS) {
        ((CUresult(*)(CUmemGenericAllocationHandle))REAL(cuMemRelease))(*handle);
        om_own_drop(c->s, OM_H_MEMHANDLE, *handle);
        return rc;
    }
    return CUDA_SUCCESS;
}

static struct om_range *find_exact(struct om_ranges *r, uint64_t base, uint64_t size)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].base == base && r->v[i].size == size)
            return &r->v[i];
    return NULL;
}

static bool overlaps(const struct om_ranges *r, uint64_t base, uint64_t size)
{
    for (size_t i = 0; i < r->n; i++)
        if (base < r->v[i].base + r->v[i].size && r->v[i].base < base + size)
            return true;
    return false;
}

/* cuMemAddressReserve (generated, hook): the reservation is kept per client, within the
 * handles' budget. */
CUresult om_hook_cuMemAddressReserve(struct call *c, CUdeviceptr *ptr, size_t size,
                                     size_t alignment, CUdeviceptr addr, unsigned long long flags)
{
    CUresult rc;

    if (size == 0 || size > VMM_MAX_BYTES) /* flags: val(0..1), CU_MEM_ADDRESS_RESERVE_... */
        return CUDA_ERROR_INVALID_VALUE;
    if (c->s->vmm_reserved.n >= om_budget.client_handles)
        return om_budget_refuse(c->s, OM_BUDGET_HANDLES, "cuMemAddressReserve");
    /* addr is a hint: the driver never answers an address already reserved (another
     * client's included). */
    rc = ((CUresult(*)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long))REAL(
        cuMemAddressReserve))(ptr, size, alignment, addr, flags);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (om_ranges_add(&c->s->vmm_reserved, *ptr, size, 0, true) < 0) {
        ((CUresult(*)(CUdeviceptr, size_t))REAL(cuMemAddressFree))(*ptr, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

/* cuMemAddressFree (generated, hook): only a range the client reserved, unmapped first. */
CUresult om_hook_cuMemAddressFree(struct call *c, CUdeviceptr ptr, size_t size)
{
    struct om_range *r = find_exact(&c->s->vmm_reserved, ptr, size);
    CUresult rc;

    if (!r || overlaps(&c->s->vmm_mapped, ptr, size))
        return CUDA_ERROR_INVALID_VALUE;
    rc = ((CUresult(*)(CUdeviceptr, size_t))REAL(cuMemAddressFree))(ptr, size);
    if (rc == CUDA_SUCCESS)
        om_ranges_remove(&c->s->vmm_reserved, r);
    return rc;
}

/* cuMemMap (generated, hook): the client's own handle (memhandle) into its own reservation,
 * flags 0 (zero); the mapped range becomes its device memory. */
CUresult om_hook_cuMemMap(struct call *c, CUdeviceptr ptr, size_t size, size_t offset,
                          CUmemGenericAllocationHandle h, unsigned long long flags)
{
    bool inside = false;
    CUresult rc;

    if (size == 0 || size > VMM_MAX_BYTES || ptr + size < ptr)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < c->s->vmm_reserved.n && !inside; i++) {
        const struct om_range *r = &c->s->vmm_reserved.v[i];
        inside = ptr >= r->base && ptr - r->base <= r->size && size <= r->size - (ptr - r->base);
    }
    if (!inside || overlaps(&c->s->vmm_mapped, ptr, size))
        return CUDA_ERROR_INVALID_VALUE;
    rc = ((CUresult(*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                       unsigned long long))REAL(cuMemMap))(ptr, size, offset, h, flags);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (om_ranges_add(&c->s->vmm_mapped, ptr, size, h, true) < 0 ||
        om_ranges_add(&c->s->allocs, ptr, size, 0, false) < 0) {
        struct om_range *m = find_exact(&c->s->vmm_mapped, ptr, size);
        if (m)
            om_ranges_remove(&c->s->vmm_mapped, m);
        ((CUresult(*)(CUdeviceptr, size_t))REAL(cuMemUnmap))(ptr, (size_t)size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->s->allocs.v[c->s->allocs.n - 1].mapped = true; /* the range just added */
    return CUDA_SUCCESS;
}

/* The mapping leaves the client's device memory. */
static void forget_mapping(struct session *s, struct om_range *m)
{
    for (size_t i = 0; i < s->allocs.n; i++) {
        if (!s->allocs.v[i].owned && s->allocs.v[i].base == m->base &&
            s->allocs.v[i].size == m->size) {
            om_allocs_remove(s, &s->allocs.v[i]);
            break;
        }
    }
    om_ranges_remove(&s->vmm_mapped, m);
}

/* cuMemUnmap (generated, hook): a mapping of the client's, its work waited for first. */
CUresult om_hook_cuMemUnmap(struct call *c, CUdeviceptr ptr, size_t size)
{
    struct om_range *m;
    CUresult rc, wrc;

    m = find_exact(&c->s->vmm_mapped, ptr, size);
    if (!m)
        return CUDA_ERROR_INVALID_VALUE;
    wrc = om_exec_sync_client(c->s); /* its own work on the memory first, nobody else's */
    rc = ((CUresult(*)(CUdeviceptr, size_t))REAL(cuMemUnmap))(ptr, (size_t)size);
    if (rc == CUDA_SUCCESS)
        forget_mapping(c->s, m);
    return om_take_call_error(c, rc != CUDA_SUCCESS ? rc : wrc);
}

static bool mapped_by(const struct session *s, uint64_t ptr, uint64_t size);

/* cuMemGetAccess (generated, val:mapped): the access of an address the client mapped itself (as
 * cuMemSetAccess: its other memory, the server's own mappings, pinned host memory in the server's
 * reserved range, is not the client's virtual-memory API's; found by fuzz_exec). */
CUresult om_check_mapped(struct call *c, uint64_t ptr)
{
    return mapped_by(c->s, ptr, 1) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/*
 * The handle mapped at an address of the client's mappings. The driver counts a reference
 * for each retain, released by cuMemRelease; the session keeps one reference per handle, so a
 * handle the client still holds does not get a second one (its first cuMemRelease then
 * releases it: a difference from the driver, where the memory stays until the second).
 */
CUresult om_hook_cuMemRetainAllocationHandle(struct call *c, CUmemGenericAllocationHandle *handle,
                                             void *addrp)
{
    uint64_t addr = (uint64_t)(uintptr_t)addrp;
    CUmemGenericAllocationHandle h = 0;
    bool inside = false;
    CUresult rc;

    for (size_t i = 0; i < c->s->vmm_mapped.n && !inside; i++)
        inside = addr >= c->s->vmm_mapped.v[i].base &&
                 addr - c->s->vmm_mapped.v[i].base < c->s->vmm_mapped.v[i].size;
    if (!inside)
        return CUDA_ERROR_INVALID_VALUE;
    rc = ((CUresult(*)(CUmemGenericAllocationHandle *, void *))REAL(cuMemRetainAllocationHandle))(
        &h, (void *)(uintptr_t)addr);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (om_handles_has(&c->s->own[OM_H_MEMHANDLE], h)) {
        /* The handle it owns again (the driver gives the same value with one more reference):
         * the reference is the client's, released by one more cuMemRelease, as natively. */
        struct session *s = c->s;
        if (s->vmm_extra_n >= om_budget.client_handles || s->vmm_extra_n == s->vmm_extra_cap) {
            size_t cap = s->vmm_extra_cap ? s->vmm_extra_cap * 2 : 8;
            uint64_t *v = s->vmm_extra_n < om_budget.client_handles
                              ? realloc(s->vmm_extra, cap * sizeof(*v))
                              : NULL;
            if (!v) {
                ((CUresult(*)(CUmemGenericAllocationHandle))REAL(cuMemRelease))(h);
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
            s->vmm_extra = v;
            s->vmm_extra_cap = cap;
        }
        s->vmm_extra[s->vmm_extra_n++] = h;
    } else if ((rc = om_own_add(c, OM_H_MEMHANDLE, h)) != CUDA_SUCCESS)
        return rc;
    *handle = h;
    return CUDA_SUCCESS;
}

void om_vmm_session_end(struct session *s)
{
    /* Its streams are done (the teardown's om_route_session_wait waited for them). */
    while (s->vmm_mapped.n) {
        struct om_range *m = &s->vmm_mapped.v[s->vmm_mapped.n - 1];
        ((CUresult(*)(CUdeviceptr, size_t))REAL(cuMemUnmap))(m->base, (size_t)m->size);
        forget_mapping(s, m);
    }
    for (size_t i = 0; i < s->vmm_reserved.n; i++)
        ((CUresult(*)(CUdeviceptr, size_t))REAL(cuMemAddressFree))(
            s->vmm_reserved.v[i].base, (size_t)s->vmm_reserved.v[i].size);
    om_ranges_free(&s->vmm_reserved);
    om_ranges_free(&s->vmm_mapped);
    for (size_t i = 0; i < s->vmm_extra_n; i++) /* its extra references */
        ((CUresult(*)(CUmemGenericAllocationHandle))REAL(cuMemRelease))(s->vmm_extra[i]);
    free(s->vmm_extra);
    s->vmm_extra = NULL;
    s->vmm_extra_n = s->vmm_extra_cap = 0;
    /* The handles go with the kinds of api/handles.tsv (own.c: cuMemRelease). */
}

/* [ptr, ptr + size) lies within the client's mappings (several adjacent ones allowed). */
static bool mapped_by(const struct session *s, uint64_t ptr, uint64_t size)
{
    uint64_t pos = ptr, end = ptr + size;

    if (size == 0 || end < ptr)
        return false;
    while (pos < end) {
        bool found = false;
        for (size_t i = 0; i < s->vmm_mapped.n && !found; i++) {
            const struct om_range *m = &s->vmm_mapped.v[i];
            if (pos >= m->base && pos - m->base < m->size) {
                pos = m->base + m->size;
                found = true;
            }
        }
        if (!found)
            return false;
    }
    return true;
}

/*
 * Custom, not a generated row: `ptr(size)` would accept any of the client's device memory,
 * and its cuMemAlloc memory, module globals and memory opened by an IPC handle are the
 * server's own mappings (devmem.c), some shared with other clients: a client may change the
 * access of what it mapped itself only.
 */
#define ACCESS_DESC_MAX 16
CUresult om_x_cuMemSetAccess(struct call *c)
{
    uint64_t ptr = om_get_u64(&c->in), size = om_get_u64(&c->in), count = om_get_u64(&c->in);
    const void *b = count <= ACCESS_DESC_MAX
                        ? om_get_bytes(&c->in, (size_t)count * sizeof(CUmemAccessDesc))
                        : NULL;
    CUmemAccessDesc desc[ACCESS_DESC_MAX];
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (count == 0 || count > ACCESS_DESC_MAX || !b || !mapped_by(c->s, ptr, size))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(desc, b, (size_t)count * sizeof(CUmemAccessDesc));
    for (uint64_t i = 0; i < count; i++) /* host access would be the server's process */
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
            om_loc_in(c->s, &desc[i].location) != CUDA_SUCCESS)
            return CUDA_ERROR_INVALID_VALUE;
    return ((CUresult(*)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t))REAL(
        cuMemSetAccess))(ptr, (size_t)size, desc, (size_t)count);
}

/* cuMemRelease (generated, hook: the handle is the client's, memhandle): one of the client's extra
 * references if it holds one, else the handle itself. */
CUresult om_hook_cuMemRelease(struct call *c, CUmemGenericAllocationHandle h)
{
    CUresult rc;
    struct session *s = c->s;

    for (size_t i = 0; i < s->vmm_extra_n; i++)
        if (s->vmm_extra[i] == h) {
            rc = ((CUresult(*)(CUmemGenericAllocationHandle))REAL(cuMemRelease))(h);
            if (rc == CUDA_SUCCESS)
                s->vmm_extra[i] = s->vmm_extra[--s->vmm_extra_n];
            return rc;
        }
    rc = ((CUresult(*)(CUmemGenericAllocationHandle))REAL(cuMemRelease))(h);
    if (rc == CUDA_SUCCESS) {
        om_own_drop(s, OM_H_MEMHANDLE, h);
        om_memcap_drop(s, h);
    }
    return rc;
}
