/* SPDX-License-Identifier: MIT */
/* Remote mode, memory family: stream-ordered allocation and pools, IPC memory handles, and the
 * hints of managed memory (the server's side: src/server/api/mempool.c, ipc.c). */
#define _GNU_SOURCE
#include <string.h>

#include "../gen/remote_decls.h"
#include "../remote.h"
#include "../shim.h"
#include "openmps/ops.h"

#define REQ(name, size)                                                                            \
    uint8_t name##_buf[size];                                                                      \
    struct om_wbuf name = {.p = name##_buf, .cap = sizeof(name##_buf)}

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
 * Managed memory is emulated (device memory with a host shadow, remote_api.c), and the device
 * reports no concurrent managed access: prefetches and advice have nothing to move. They are
 * accepted as hints once the range is known to be this client's memory (the driver answers
 * CUDA_ERROR_INVALID_VALUE for a range it does not know).
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

CUresult om_r_cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                 CUstream hStream)
{
    (void)hStream;
    (void)dstDevice; /* a device ordinal or CU_DEVICE_CPU: either is a hint here */
    return own_range(devPtr, count);
}

CUresult om_r_cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                    unsigned int flags, CUstream hStream)
{
    (void)hStream;
    (void)location;
    if (flags)
        return CUDA_ERROR_INVALID_VALUE;
    return own_range(devPtr, count);
}

/* CUmem_advise: 1..6 (set/unset read-mostly, preferred location, accessed-by). */
CUresult om_r_cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device)
{
    (void)device;
    if ((int)advice < 1 || (int)advice > 6)
        return CUDA_ERROR_INVALID_VALUE;
    return own_range(devPtr, count);
}

CUresult om_r_cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                             CUmemLocation location)
{
    (void)location;
    if ((int)advice < 1 || (int)advice > 6)
        return CUDA_ERROR_INVALID_VALUE;
    return own_range(devPtr, count);
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
    rc = call_u64_reply(OM_IDX_cuMemPoolGetAccess, &req, &v);
    if (rc == CUDA_SUCCESS)
        *flags = (CUmemAccess_flags)v;
    return rc;
}

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
    rc = call_u64_reply(OM_IDX_cuMemGetAllocationGranularity, &req, &v);
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
    rc = call_u64_reply(OM_IDX_cuMemGetAccess, &req, &v);
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
    rc = call_u64_reply(OM_IDX_cuMemRetainAllocationHandle, &req, &v);
    if (rc == CUDA_SUCCESS)
        *handle = (CUmemGenericAllocationHandle)v;
    return rc;
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
CUresult om_r_cuEventDestroy_v2(CUevent hEvent)
{
    REQ(req, 8);

    om_put_u64(&req, (uint64_t)(uintptr_t)hEvent);
    return om_rcall(OM_IDX_cuEventDestroy_v2, &req, NULL, 0, NULL);
}
