/* SPDX-License-Identifier: MIT */
/*
 * Stream-ordered allocation (cuMemAllocAsync and pools) for clients. The device's default pool
 * is the whole server's: one client setting its release threshold or trimming it would do so
 * for every client. So each client gets a pool of its own, made at its first use, which it sees
 * as the device's default (and current) pool; cuDeviceSetMemPool changes only the client's
 * current pool. Memory from a pool is the client's (s->allocs, marked with its pool) until
 * freed: cuMemFreeAsync on the client's stream, or cuMemFree, which waits for the client's own
 * streams only and then frees on its default stream (the driver's cuMemFree would wait for
 * every client's kernels).
 */
#include <string.h>

#include "../exec.h"

#define POOL_ATTR_MAX 8 /* CU_MEMPOOL_ATTR_USED_MEM_HIGH, the last one (cuda.h 13.0) */

static CUresult make_pool(const CUmemPoolProps *props, uint64_t *ret)
{
    CUmemoryPool pool = NULL;
    CUresult rc =
        ((CUresult(*)(CUmemoryPool *, const CUmemPoolProps *))REAL(cuMemPoolCreate))(&pool, props);

    *ret = (uint64_t)(uintptr_t)pool;
    return rc;
}

static void destroy_pool(uint64_t pool)
{
    ((CUresult(*)(CUmemoryPool))REAL(cuMemPoolDestroy))((CUmemoryPool)(uintptr_t)pool);
}

/* The client's default pool of (server) device dev, made at its first use (not counted
 * against its handle budget: every client has one per device it allocates on). */
static CUresult default_pool(struct session *s, int dev, uint64_t *ret)
{
    CUmemPoolProps props;
    uint64_t pool = 0;
    CUresult rc;

    if (!s->pool_default[dev]) {
        memset(&props, 0, sizeof(props));
        props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        props.location.id = dev;
        rc = make_pool(&props, &pool);
        if (rc != CUDA_SUCCESS)
            return rc;
        if (!om_note_device(s, pool, dev) || om_handles_add(&s->own[OM_H_MEMPOOL], pool) < 0) {
            om_forget_device(s, pool);
            destroy_pool(pool);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        s->pool_default[dev] = pool;
        if (!s->pool_current[dev])
            s->pool_current[dev] = pool;
    }
    *ret = s->pool_default[dev];
    return CUDA_SUCCESS;
}

/* The session's pools of a device (generated rows with the option hook, their device the
 * server's ordinal, dev): the default one, owned by the client, and the current one. */
CUresult om_hook_cuDeviceGetDefaultMemPool(struct call *c, CUmemoryPool *pool_out, CUdevice dev)
{
    uint64_t pool = 0;
    CUresult rc = default_pool(c->s, dev, &pool);

    if (rc == CUDA_SUCCESS)
        *pool_out = (CUmemoryPool)(uintptr_t)pool;
    return rc;
}

CUresult om_hook_cuDeviceGetMemPool(struct call *c, CUmemoryPool *pool_out, CUdevice dev)
{
    uint64_t pool = 0;
    CUresult rc = default_pool(c->s, dev, &pool);

    if (rc == CUDA_SUCCESS)
        *pool_out = (CUmemoryPool)(uintptr_t)c->s->pool_current[dev];
    return rc;
}

CUresult om_hook_cuDeviceSetMemPool(struct call *c, CUdevice dev, CUmemoryPool hpool)
{
    uint64_t pool = (uint64_t)(uintptr_t)hpool, def = 0;
    CUresult rc = CUDA_SUCCESS;

    if (om_handle_device(c->s, pool) != dev)
        rc = CUDA_ERROR_INVALID_VALUE; /* a pool of another device, as the driver refuses it */
    if (rc == CUDA_SUCCESS)            /* so that destroying `pool` later falls back to it */
        rc = default_pool(c->s, dev, &def);
    if (rc == CUDA_SUCCESS)
        c->s->pool_current[dev] = pool;
    return rc;
}

CUresult om_x_cuMemPoolCreate(struct call *c)
{
    const CUmemPoolProps *in = om_get_bytes(&c->in, sizeof(CUmemPoolProps));
    CUmemPoolProps props;
    uint64_t pool = 0;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!in)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&props, in, sizeof(props));
    if (props.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        props.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        om_loc_in(c->s, &props.location) != CUDA_SUCCESS || props.win32SecurityAttributes)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = om_shareable_types((uint32_t)props.handleTypes)) != CUDA_SUCCESS)
        return rc; /* a descriptor or a fabric handle (api/shareable.c), not Win32 */
    if ((rc = om_own_room(c->s, OM_H_MEMPOOL)) != CUDA_SUCCESS)
        return rc;
    if ((rc = make_pool(&props, &pool)) != CUDA_SUCCESS)
        return rc;
    if (!om_note_device(c->s, pool, props.location.id)) { /* its allocations count there */
        destroy_pool(pool);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if ((rc = om_own_add(c, OM_H_MEMPOOL, pool)) != CUDA_SUCCESS) {
        om_forget_device(c->s, pool);
        return rc;
    }
    om_put_u64(&c->out, pool);
    return CUDA_SUCCESS;
}

/* cuMemPoolDestroy (generated, hook: the pool is the client's): a default pool refused, the
 * device's current pool falls back to the default. */
CUresult om_hook_cuMemPoolDestroy(struct call *c, CUmemoryPool hpool)
{
    uint64_t pool = (uint64_t)(uintptr_t)hpool;

    for (int d = 0; d < (int)OM_MAX_DEVICES; d++)
        if (pool == c->s->pool_default[d]) /* the driver refuses to destroy a default pool */
            return CUDA_ERROR_INVALID_VALUE;
    /* Allocations still out of it stay valid (the driver releases the pool after them). */
    destroy_pool(pool);
    om_own_drop(c->s, OM_H_MEMPOOL, pool);
    om_forget_device(c->s, pool);
    for (int d = 0; d < (int)OM_MAX_DEVICES; d++)
        if (c->s->pool_current[d] == pool)
            c->s->pool_current[d] = c->s->pool_default[d];
    return CUDA_SUCCESS;
}

/* Attributes 1-3 are ints, 4-8 64-bit counts (cuda.h). */
static bool attr_is_int(uint64_t attr)
{
    return attr <= CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES;
}

CUresult om_x_cuMemPoolSetAttribute(struct call *c)
{
    uint64_t pool = om_get_u64(&c->in), attr = om_get_u64(&c->in), value = om_get_u64(&c->in);
    int iv = (int)value;
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_MEMPOOL, pool, false);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* Settable: the reuse policies, the release threshold, and the two high marks (reset). */
    if (attr < 1 || attr > POOL_ATTR_MAX ||
        (!attr_is_int(attr) && attr != CU_MEMPOOL_ATTR_RELEASE_THRESHOLD &&
         attr != CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH && attr != CU_MEMPOOL_ATTR_USED_MEM_HIGH))
        return CUDA_ERROR_INVALID_VALUE;
    return ((CUresult(*)(CUmemoryPool, CUmemPool_attribute, void *))REAL(cuMemPoolSetAttribute))(
        (CUmemoryPool)(uintptr_t)pool, (CUmemPool_attribute)attr,
        attr_is_int(attr) ? (void *)&iv : (void *)&value);
}

CUresult om_x_cuMemPoolGetAttribute(struct call *c)
{
    uint64_t pool = om_get_u64(&c->in), attr = om_get_u64(&c->in), value = 0;
    int iv = 0;
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_MEMPOOL, pool, false);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (attr < 1 || attr > POOL_ATTR_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    rc = ((CUresult(*)(CUmemoryPool, CUmemPool_attribute, void *))REAL(cuMemPoolGetAttribute))(
        (CUmemoryPool)(uintptr_t)pool, (CUmemPool_attribute)attr,
        attr_is_int(attr) ? (void *)&iv : (void *)&value);
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, attr_is_int(attr) ? (uint64_t)(int64_t)iv : value);
    return rc;
}

/* bytes from `pool` on the client's stream `h`, recorded as the client's, counted on the pool's
 * device. */
static CUresult alloc_from(struct call *c, uint64_t bytes, uint64_t pool, uint64_t h)
{
    int dev = om_handle_device(c->s, pool);
    CUdeviceptr p = 0;
    CUstream st;
    CUresult rc;

    if (bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (bytes > OM_DEVMEM_MAX_BYTES) /* more than any device holds, as the driver answers */
        return CUDA_ERROR_OUT_OF_MEMORY;
    if ((rc = om_memcap_check(c->s, dev, bytes)) != CUDA_SUCCESS)
        return rc;
    st = om_arg_stream(c, h, true, &rc);
    if (!st)
        return rc;
    for (int again = 0; again < 2; again++) { /* again: after the kept allocations went */
        rc = ((CUresult(*)(CUdeviceptr *, size_t, CUmemoryPool, CUstream))REAL(
            cuMemAllocFromPoolAsync))(&p, (size_t)bytes, (CUmemoryPool)(uintptr_t)pool, st);
        if (!om_devmem_release_kept(c->s, rc))
            break;
    }
    if (rc != CUDA_SUCCESS)
        return rc;
    /* While capturing, the driver made an allocation node: a graph allocation (graphstate.c),
     * the capture graph's, as an allocation node's own. */
    if (om_graphmem_captured(c->s, st, p, bytes, pool)) {
        om_put_u64(&c->out, p);
        om_put_u64(&c->out, pool);
        return CUDA_SUCCESS;
    }
    if (om_stream_capturing(c->s, st))
        return CUDA_ERROR_OUT_OF_MEMORY; /* (could not be recorded; the capture is left so) */
    if (om_ranges_add(&c->s->allocs, p, bytes, 0, true) < 0) {
        ((CUresult(*)(CUdeviceptr, CUstream))REAL(cuMemFreeAsync))(p, st);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->s->allocs.v[c->s->allocs.n - 1].pool = pool;
    om_memcap_charge_on(c->s, &c->s->allocs.v[c->s->allocs.n - 1], dev);
    om_put_u64(&c->out, p);
    om_put_u64(&c->out, pool); /* for the client's pointer attributes (MEMPOOL_HANDLE) */
    return CUDA_SUCCESS;
}

CUresult om_x_cuMemAllocAsync(struct call *c)
{
    uint64_t bytes = om_get_u64(&c->in), h = om_get_u64(&c->in), pool = 0;
    CUresult rc = ARGS_OK(c);

    /* the current pool of the stream's device (a created stream's, else the current one) */
    int dev = h && h != (uint64_t)(uintptr_t)CU_STREAM_LEGACY &&
                      h != (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD
                  ? om_handle_device(c->s, h)
                  : c->s->dev;

    if (rc == CUDA_SUCCESS)
        rc = default_pool(c->s, dev, &pool);
    return rc == CUDA_SUCCESS ? alloc_from(c, bytes, c->s->pool_current[dev], h) : rc;
}

CUresult om_x_cuMemAllocFromPoolAsync(struct call *c)
{
    uint64_t bytes = om_get_u64(&c->in), pool = om_get_u64(&c->in), h = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_MEMPOOL, pool, false);
    return rc == CUDA_SUCCESS ? alloc_from(c, bytes, pool, h) : rc;
}

CUresult om_x_cuMemFreeAsync(struct call *c)
{
    uint64_t base = om_get_u64(&c->in), h = om_get_u64(&c->in);
    struct om_range *r;
    CUstream st;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    r = om_ranges_find_base(&c->s->allocs, base);
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    st = om_arg_stream(c, h, true, &rc);
    if (!st)
        return rc;
    /* A graph allocation: freed in stream order (while capturing: a free node), its range kept
     * while its graphs hold it (graphstate.c). While capturing, only such one may be freed (a
     * free node frees graph allocations). */
    if (r->graph)
        return ((CUresult(*)(CUdeviceptr, CUstream))REAL(cuMemFreeAsync))(base, st);
    if (om_stream_capturing(c->s, st))
        return CUDA_ERROR_INVALID_VALUE;
    if (r->pool) {
        om_wait_settle_pools();
        rc = ((CUresult(*)(CUdeviceptr, CUstream))REAL(cuMemFreeAsync))(base, st);
        if (rc == CUDA_SUCCESS)
            om_allocs_remove(c->s, r);
        return rc;
    }
    /* Memory of cuMemAlloc freed in stream order: after that stream's work (the client's own),
     * then as cuMemFree frees it, never waiting for other clients. */
    rc = ((CUresult(*)(CUstream))REAL(cuStreamSynchronize))(st);
    if (!om_ipc_keep(c->s, r)) {
        if (r->managed)
            om_devmem_free(r->base, r->size, r->mem);
        else
            om_devmem_give(c->s, r->dev, r->base, r->size, r->mem);
    }
    om_allocs_remove(c->s, r);
    return rc;
}

/* Custom only because the generated decoder of an `in` struct parameter does not compile
 * (api/remote.py sizes it before declaring it). */
