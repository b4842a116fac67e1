/* SPDX-License-Identifier: MIT */
/* Remote mode, the mempool family (api/remote/mempool.tsv): stream-ordered allocation and memory
 * pools (the server's side: src/server/api/mempool.c). */
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

CUresult om_r_cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    REQ(req, sizeof(CUmemPoolProps));
    uint64_t v = 0;
    CUresult rc;

    if (!pool || !poolProps)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_bytes(&req, poolProps, sizeof(*poolProps));
    rc = om_rcall_u64_reply(OM_IDX_cuMemPoolCreate, &req, &v);
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
    rc = om_rcall_u64_reply(OM_IDX_cuMemPoolGetAttribute, &req, &v);
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
    rc = om_rcall_u64_reply(index, &req, &v);
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

CUresult om_r_cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool,
                                 CUmemLocation *location)
{
    REQ(req, 8 + sizeof(CUmemLocation));
    uint64_t v = 0;
    CUresult rc;

    if (!flags || !location)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, U64(memPool));
    om_put_bytes(&req, location, sizeof(*location));
    rc = om_rcall_u64_reply(OM_IDX_cuMemPoolGetAccess, &req, &v);
    if (rc == CUDA_SUCCESS)
        *flags = (CUmemAccess_flags)v;
    return rc;
}
