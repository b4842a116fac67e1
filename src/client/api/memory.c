/* SPDX-License-Identifier: MIT */
/* Remote mode, the memory family (api/remote/memory.tsv): device allocations and frees, pitched
 * memory, pointer queries and attributes, pinned host memory (its regions: state/pinned.c), and
 * dma-buf handles of a range. */
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

/* CUmemorytype and CUpointer_attribute values from the driver API documentation. */
enum { MT_HOST = 1, MT_DEVICE = 2, MT_ARRAY = 3, MT_UNIFIED = 4 };
enum {
    PA_CONTEXT = 1,
    PA_MEMORY_TYPE = 2,
    PA_DEVICE_POINTER = 3,
    PA_HOST_POINTER = 4,
    PA_SYNC_MEMOPS = 6,
    PA_BUFFER_ID = 7,
    PA_IS_MANAGED = 8,
    PA_DEVICE_ORDINAL = 9,
    PA_RANGE_START_ADDR = 11,
    PA_RANGE_SIZE = 12,
    PA_IS_LEGACY_IPC_CAPABLE = 10,
    PA_ALLOWED_HANDLE_TYPES = 14,
    PA_IS_GPU_DIRECT_RDMA_CAPABLE = 15,
    PA_ACCESS_FLAGS = 16,
    PA_MEMPOOL_HANDLE = 17,
    PA_MAPPING_SIZE = 18,
    PA_MAPPING_BASE_ADDR = 19,
    PA_MEMORY_BLOCK_ID = 20,
    PA_IS_HW_DECOMPRESS_CAPABLE = 21,
    PA_MAPPED = 13,
};

/* The pitch the driver would choose: rows aligned to 512 bytes. */
#define PITCH_ALIGN 512

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

/* ------------------------------------------------------------------ pinned host memory (its
 * regions and exchanges: state/pinned.c) */

CUresult om_r_cuMemHostAlloc(void **pp, size_t bytes, unsigned flags)
{
    return om_pinned_alloc(pp, bytes, flags);
}

CUresult om_r_cuMemAllocHost_v2(void **pp, size_t bytes)
{
    return om_pinned_alloc(pp, bytes, 0);
}

CUresult om_r_cuMemFreeHost(void *p)
{
    return om_pinned_free(p);
}

CUresult om_r_cuMemHostGetDevicePointer_v2(CUdeviceptr *dptr, void *p, unsigned flags)
{
    if (!dptr || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return om_pinned_device_pointer(p, dptr) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult om_r_cuMemHostGetFlags(unsigned *flags, void *p)
{
    return om_pinned_flags(flags, p);
}

CUresult om_r_cuMemHostRegister_v2(void *p, size_t bytes, unsigned flags)
{
    return om_pinned_register(p, bytes, flags);
}

CUresult om_r_cuMemHostUnregister(void *p)
{
    return om_pinned_unregister(p);
}

/* ------------------------------------------------------------------ allocations */

CUresult om_r_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
    uint64_t v;
    CUresult rc;

    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    rc = om_rcall_u64(OM_IDX_cuMemAlloc_v2, (uint64_t)bytes, 0, &v);
    if (rc == CUDA_SUCCESS && om_devrange_add_plain(v, bytes) < 0) {
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
    if (rc != CUDA_ERROR_INVALID_VALUE && !om_managed_forget(dptr))
        om_devrange_remove(dptr);
    else if (rc != CUDA_ERROR_INVALID_VALUE)
        om_hints_forget(dptr); /* api/managed.c: its advice and prefetches */
    return rc;
}

/* ------------------------------------------------------------------ the memory a client may use */

/* The device's memory as this client may use it: under a device-memory cap the server answers
 * the cap as the total and what the client does not hold of it as free (src/server/memcap.c). */
CUresult om_r_cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    return om_rpc_cuMemGetInfo_v2(free_bytes, total);
}

CUresult om_r_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                 unsigned elem)
{
    size_t p;
    CUresult (*alloc)(CUdeviceptr *, size_t) = om_remote_entry(OM_IDX_cuMemAlloc_v2);
    CUresult rc;

    if (!dptr || !pitch || !width || !height || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    p = (width + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
    if (height > SIZE_MAX / p) /* more than any device holds, as the driver answers */
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = alloc(dptr, p * height);
    if (rc == CUDA_SUCCESS)
        *pitch = p;
    return rc;
}

CUresult om_r_cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
    CUdeviceptr b;
    size_t s;
    bool managed;

    if (!om_devrange_find(p, &b, &s, &managed))
        return CUDA_ERROR_NOT_FOUND;
    if (base)
        *base = b;
    if (size)
        *size = s;
    return CUDA_SUCCESS;
}

/* One attribute of a pointer this process knows; -1 for an unknown pointer. */
static int pointer_attribute(void *data, int attr, CUdeviceptr p)
{
    CUdeviceptr base;
    size_t size;
    bool managed;
    CUcontext ctx = NULL;

    if (!om_devrange_find(p, &base, &size, &managed)) {
        CUdeviceptr dev;
        bool mapped;
        /* Pinned host memory, allocated or registered: host memory to the runtime
         * (cudaPointerGetAttributes' type, PyTorch's is_pinned), also where it was registered in
         * place (state/pinned.c), which has no device pointer (cuMemHostGetDevicePointer). */
        if (!om_pinned_find((const void *)(uintptr_t)p, &dev, &mapped))
            return -1;
        switch (attr) {
        case PA_MEMORY_TYPE: *(unsigned *)data = MT_HOST; return 0;
        case PA_DEVICE_POINTER:
            if (!mapped)
                return 1;
            *(CUdeviceptr *)data = dev;
            return 0;
        case PA_HOST_POINTER: *(void **)data = (void *)(uintptr_t)p; return 0;
        case PA_IS_MANAGED: *(int *)data = 0; return 0;
        case PA_DEVICE_ORDINAL: *(int *)data = 0; return 0;
        case PA_MAPPED: *(int *)data = mapped; return 0;
        default: return 2;
        }
    }
    int dev = om_devrange_device(p);

    switch (attr) {
    case PA_CONTEXT: /* the current one on its device; another device's primary context */
        om_current_context(&ctx);
        if (dev >= 0 && dev != om_current_device())
            ctx = om_primary_token(dev);
        *(CUcontext *)data = ctx;
        return 0;
    case PA_MEMORY_TYPE: *(unsigned *)data = MT_DEVICE; return 0;
    case PA_DEVICE_POINTER: *(CUdeviceptr *)data = p; return 0;
    case PA_HOST_POINTER:
        if (!managed)
            return 1;
        *(void **)data = (void *)(uintptr_t)p;
        return 0;
    case PA_SYNC_MEMOPS:
    case PA_MAPPED: *(int *)data = 1; return 0;
    case PA_BUFFER_ID: *(unsigned long long *)data = base; return 0;
    case PA_IS_MANAGED: *(int *)data = managed; return 0;
    case PA_DEVICE_ORDINAL: *(int *)data = dev >= 0 ? dev : 0; return 0;
    case PA_RANGE_START_ADDR: *(CUdeviceptr *)data = base; return 0;
    case PA_RANGE_SIZE: *(size_t *)data = size; return 0;
    /* The pool it came from (stream-ordered allocation), NULL otherwise: as the driver says. */
    case PA_MEMPOOL_HANDLE: *(void **)data = (void *)(uintptr_t)om_devrange_pool(p); return 0;
    /* What this process knows of the mapping is the allocation itself. */
    case PA_MAPPING_SIZE: *(size_t *)data = size; return 0;
    case PA_MAPPING_BASE_ADDR: *(CUdeviceptr *)data = base; return 0;
    case PA_MEMORY_BLOCK_ID: *(unsigned long long *)data = base; return 0;
    /* cuIpcGetMemHandle takes plain allocations (api/ipc.c), not pool or managed memory. */
    case PA_IS_LEGACY_IPC_CAPABLE: *(int *)data = !managed && !om_devrange_pool(p); return 0;
    case PA_ACCESS_FLAGS: *(unsigned *)data = 0x3; return 0; /* read-write, its own device */
    case PA_ALLOWED_HANDLE_TYPES: *(unsigned long long *)data = 0; return 0;
    case PA_IS_GPU_DIRECT_RDMA_CAPABLE:
    case PA_IS_HW_DECOMPRESS_CAPABLE: *(int *)data = 0; return 0;
    default: return 2;
    }
}

CUresult om_r_cuPointerGetAttribute(void *data, int attr, CUdeviceptr p)
{
    int rc;

    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    rc = pointer_attribute(data, attr, p);
    if (rc == 2) {
        om_shim_log("cuPointerGetAttribute: attribute %d is not supported in remote mode", attr);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return rc == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Unknown pointers are not an error here: their attributes read as zero. */
CUresult om_r_cuPointerGetAttributes(unsigned n, int *attrs, void **data, CUdeviceptr p)
{
    if (!attrs || !data)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++) {
        if (!data[i])
            continue;
        if (pointer_attribute(data[i], attrs[i], p) != 0) {
            size_t width = attrs[i] == PA_MEMORY_TYPE || attrs[i] == PA_SYNC_MEMOPS ||
                                   attrs[i] == PA_IS_MANAGED || attrs[i] == PA_DEVICE_ORDINAL ||
                                   attrs[i] == PA_MAPPED
                               ? sizeof(int)
                               : sizeof(void *);
            memset(data[i], 0, width);
            if (attrs[i] == PA_DEVICE_ORDINAL)
                *(int *)data[i] = -2; /* no device, as the driver says */
        }
    }
    return CUDA_SUCCESS;
}
