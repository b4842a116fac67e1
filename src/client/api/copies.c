/* SPDX-License-Identifier: MIT */
/* Remote mode: pitched memory, 2D copies and sets, pointer queries, peer copies. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "openmps/ops.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "../shim.h"

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

CUresult om_r_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                 unsigned elem)
{
    size_t p;
    CUresult (*alloc)(CUdeviceptr *, size_t) = om_remote_entry(OM_IDX_cuMemAlloc_v2);
    CUresult rc;

    if (!dptr || !pitch || !width || !height || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    p = (width + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
    if (height > SIZE_MAX / p)
        return CUDA_ERROR_INVALID_VALUE;
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
        uint64_t server;
        CUdeviceptr dev;
        if (!om_pinned_lookup((const void *)(uintptr_t)p, 1, &server) ||
            om_pinned_device_pointer((void *)(uintptr_t)p, &dev) != 0)
            return -1;
        switch (attr) { /* pinned host memory */
        case PA_MEMORY_TYPE: *(unsigned *)data = MT_HOST; return 0;
        case PA_DEVICE_POINTER: *(CUdeviceptr *)data = dev; return 0;
        case PA_HOST_POINTER: *(void **)data = (void *)(uintptr_t)p; return 0;
        case PA_IS_MANAGED: *(int *)data = 0; return 0;
        case PA_DEVICE_ORDINAL: *(int *)data = 0; return 0;
        case PA_MAPPED: *(int *)data = 1; return 0;
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

/* ------------------------------------------------------------------ 2D sets */

static CUresult memset_2d(CUdeviceptr dst, size_t pitch, uint64_t value, unsigned elem,
                          size_t width, size_t height, CUstream s, bool wait)
{
    REQ(req, 64);

    om_put_u64(&req, dst);
    om_put_u64(&req, pitch);
    om_put_u64(&req, value);
    om_put_u64(&req, elem);
    om_put_u64(&req, width);
    om_put_u64(&req, height);
    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    om_put_u64(&req, wait);
    return om_rcall(OM_IDX_op_memset_2d, &req, NULL, 0, NULL);
}

CUresult om_r_cuMemsetD2D8_v2(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h)
{
    return memset_2d(d, pitch, v, 1, w, h, NULL, true);
}

CUresult om_r_cuMemsetD2D16_v2(CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h)
{
    return memset_2d(d, pitch, v, 2, w, h, NULL, true);
}

CUresult om_r_cuMemsetD2D32_v2(CUdeviceptr d, size_t pitch, unsigned v, size_t w, size_t h)
{
    return memset_2d(d, pitch, v, 4, w, h, NULL, true);
}

CUresult om_r_cuMemsetD2D8Async(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h,
                                CUstream s)
{
    return memset_2d(d, pitch, v, 1, w, h, s, false);
}

CUresult om_r_cuMemsetD2D16Async(CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h,
                                 CUstream s)
{
    return memset_2d(d, pitch, v, 2, w, h, s, false);
}

CUresult om_r_cuMemsetD2D32Async(CUdeviceptr d, size_t pitch, unsigned v, size_t w, size_t h,
                                 CUstream s)
{
    return memset_2d(d, pitch, v, 4, w, h, s, false);
}

/* ------------------------------------------------------------------ 2D copies */

static int side(int type, const void *host, CUdeviceptr dev)
{
    if (type == MT_UNIFIED) {
        CUdeviceptr b;
        size_t s;
        bool managed;
        return om_devrange_find(dev ? dev : (CUdeviceptr)(uintptr_t)host, &b, &s, &managed) &&
                       !managed
                   ? MT_DEVICE
                   : MT_HOST;
    }
    return type;
}

/*
 * Device to device goes to the server as is; host rows are packed: the rows
 * of a host source are staged back to back, and rows for a host destination
 * come back packed, in pieces, and are spread over its pitch here.
 */
static CUresult memcpy_2d(const CUDA_MEMCPY2D *c, CUstream s, bool wait)
{
    int st, dt;
    size_t w, h;

    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    st = side(c->srcMemoryType, c->srcHost, c->srcDevice);
    dt = side(c->dstMemoryType, c->dstHost, c->dstDevice);
    w = c->WidthInBytes;
    h = c->Height;
    if (st == MT_ARRAY || dt == MT_ARRAY)
        return om_arrays_copy2d(c, s, wait);
    if (!w || !h)
        return CUDA_SUCCESS;
    const uint8_t *src =
        st == MT_HOST
            ? (const uint8_t *)(c->srcHost ? c->srcHost : (const void *)(uintptr_t)c->srcDevice)
            : NULL;
    uint8_t *dst = dt == MT_HOST
                       ? (uint8_t *)(c->dstHost ? c->dstHost : (void *)(uintptr_t)c->dstDevice)
                       : NULL;
    CUdeviceptr sdev = st == MT_DEVICE ? c->srcDevice + c->srcY * c->srcPitch + c->srcXInBytes : 0;
    CUdeviceptr ddev = dt == MT_DEVICE ? c->dstDevice + c->dstY * c->dstPitch + c->dstXInBytes : 0;
    if (src)
        src += c->srcY * c->srcPitch + c->srcXInBytes;
    if (dst)
        dst += c->dstY * c->dstPitch + c->dstXInBytes;
    if (st == MT_HOST && dt == MT_HOST) {
        for (size_t r = 0; r < h; r++)
            memmove(dst + r * c->dstPitch, src + r * c->srcPitch, w);
        return CUDA_SUCCESS;
    }
    REQ(req, 80);
    om_put_u64(&req, st);
    om_put_u64(&req, dt);
    om_put_u64(&req, sdev);
    om_put_u64(&req, c->srcPitch);
    om_put_u64(&req, ddev);
    om_put_u64(&req, c->dstPitch);
    om_put_u64(&req, w);
    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    if (st == MT_DEVICE && dt == MT_DEVICE) {
        om_put_u64(&req, h);
        om_put_u64(&req, wait);
        return om_rcall(OM_IDX_op_copy_2d, &req, NULL, 0, NULL);
    }
    if (st == MT_HOST) { /* host to device: all rows packed in one staging */
        /* The rows are read before the server sees the region: one that runs past the device
         * memory it starts in, or rows wider than their pitch (which the server refuses too),
         * are refused first and no host byte is read (dataplane.c's htod says why). */
        if (h > 1 && (c->dstPitch < w || h - 1 > (UINT64_MAX - w) / c->dstPitch))
            return CUDA_ERROR_INVALID_VALUE;
        if (w > SIZE_MAX / h || !om_devrange_fits(ddev, (uint64_t)(h - 1) * c->dstPitch + w))
            return CUDA_ERROR_INVALID_VALUE;
        uint8_t *packed = malloc(w * h);
        CUresult rc;
        if (!packed)
            return CUDA_ERROR_OUT_OF_MEMORY;
        for (size_t r = 0; r < h; r++)
            memcpy(packed + r * w, src + r * c->srcPitch, w);
        om_put_u64(&req, h);
        om_put_u64(&req, 1);
        rc = om_rcall_staged(OM_IDX_op_copy_2d, packed, w * h, &req, NULL, 0, NULL);
        free(packed);
        return rc;
    }
    /* device to host: not into memory registered read-only to the device (hostmem.c) */
    size_t span;
    uint64_t server;
    if (!__builtin_mul_overflow(h - 1, c->dstPitch, &span) &&
        !__builtin_add_overflow(span, w, &span) && om_pinned_dst(dst, span, &server) < 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* as many rows per call as fit one answer */
    size_t rows = OM_CHUNK_BYTES / w ? OM_CHUNK_BYTES / w : 0;
    if (rows == 0) {
        CUresult (*dtoh)(void *, CUdeviceptr, size_t) = om_remote_entry(OM_IDX_cuMemcpyDtoH_v2);
        for (size_t r = 0; r < h; r++) {
            CUresult rc = dtoh(dst + r * c->dstPitch, sdev + r * c->srcPitch, w);
            if (rc != CUDA_SUCCESS)
                return rc;
        }
        return CUDA_SUCCESS;
    }
    uint8_t *packed = malloc(rows * w);
    CUresult rc = packed ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t r = 0; r < h && rc == CUDA_SUCCESS; r += rows) {
        size_t n = h - r < rows ? h - r : rows;
        uint32_t got = 0;
        REQ(piece, 80);
        om_put_u64(&piece, st);
        om_put_u64(&piece, dt);
        om_put_u64(&piece, sdev + r * c->srcPitch);
        om_put_u64(&piece, c->srcPitch);
        om_put_u64(&piece, 0);
        om_put_u64(&piece, w);
        om_put_u64(&piece, w);
        om_put_u64(&piece, (uint64_t)(uintptr_t)s);
        om_put_u64(&piece, n);
        om_put_u64(&piece, 1);
        rc = om_rcall(OM_IDX_op_copy_2d, &piece, packed, n * w, &got);
        if (rc == CUDA_SUCCESS && got != n * w)
            rc = CUDA_ERROR_UNKNOWN;
        for (size_t k = 0; rc == CUDA_SUCCESS && k < n; k++)
            memcpy(dst + (r + k) * c->dstPitch, packed + k * w, w);
    }
    free(packed);
    return rc;
}

CUresult om_r_cuMemcpy2D_v2(const CUDA_MEMCPY2D *c)
{
    return memcpy_2d(c, NULL, true);
}

CUresult om_r_cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *c, CUstream s)
{
    return memcpy_2d(c, s, false);
}

/* A 3D copy without arrays is Depth 2D copies, one per slice. */
static CUresult memcpy_3d(const CUDA_MEMCPY3D *c, CUstream s, bool wait)
{
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    if (c->srcMemoryType == MT_ARRAY || c->dstMemoryType == MT_ARRAY || c->srcLOD || c->dstLOD)
        return om_arrays_copy3d(c, s, wait);
    for (size_t z = 0; z < c->Depth; z++) {
        size_t sslice = (c->srcZ + z) * c->srcHeight * c->srcPitch;
        size_t dslice = (c->dstZ + z) * c->dstHeight * c->dstPitch;
        CUDA_MEMCPY2D p = {
            .srcXInBytes = c->srcXInBytes,
            .srcY = c->srcY,
            .srcMemoryType = c->srcMemoryType,
            .srcHost = c->srcHost ? (const uint8_t *)c->srcHost + sslice : NULL,
            .srcDevice = c->srcDevice ? c->srcDevice + sslice : 0,
            .srcPitch = c->srcPitch,
            .dstXInBytes = c->dstXInBytes,
            .dstY = c->dstY,
            .dstMemoryType = c->dstMemoryType,
            .dstHost = c->dstHost ? (uint8_t *)c->dstHost + dslice : NULL,
            .dstDevice = c->dstDevice ? c->dstDevice + dslice : 0,
            .dstPitch = c->dstPitch,
            .WidthInBytes = c->WidthInBytes,
            .Height = c->Height,
        };
        CUresult rc = memcpy_2d(&p, s, wait);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return CUDA_SUCCESS;
}

CUresult om_r_cuMemcpy3D_v2(const CUDA_MEMCPY3D *c)
{
    return memcpy_3d(c, NULL, true);
}

CUresult om_r_cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *c, CUstream s)
{
    return memcpy_3d(c, s, false);
}

/* Peer copies are device-to-device copies: the server's contexts share one address space and
 * reach each other's devices (main.c's peer access; the driver stages where they cannot). */
CUresult om_r_cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                           size_t n)
{
    CUresult (*dd)(CUdeviceptr, CUdeviceptr, size_t) = om_remote_entry(OM_IDX_cuMemcpyDtoD_v2);

    (void)dctx, (void)sctx;
    return dd(dst, src, n);
}

CUresult om_r_cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                                size_t n, CUstream s)
{
    CUresult (*dd)(CUdeviceptr, CUdeviceptr, size_t, CUstream) =
        om_remote_entry(OM_IDX_cuMemcpyDtoDAsync_v2);

    (void)dctx, (void)sctx;
    return dd(dst, src, n, s);
}
