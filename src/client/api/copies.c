/* SPDX-License-Identifier: MIT */
/* Remote mode, the copies family (api/remote/copies.tsv): 1D copies and sets (pageable ones
 * through staging.c, managed memory's through its shadows), 2D and 3D copies and sets, peer
 * copies, and batches of copies. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "openmps/ops.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "../shim.h"
#include "../gen/calls.h"
#include "graph.h"

/* CUmemorytype values from the driver API documentation. */
enum { MT_HOST = 1, MT_DEVICE = 2, MT_ARRAY = 3, MT_UNIFIED = 4 };

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
         * are refused first and no host byte is read (htod says why). */
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
    /* device to host: not into memory registered read-only to the device (state/pinned.c) */
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
 * reach each other's devices (the server's driver.c's peer access; the driver stages where they
 * cannot). */
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

/* ------------------------------------------------------------------ 1D copies and sets */

/* Pinned host memory of this client is device memory to the driver (unified addressing): its
 * device pointer, which the server takes (the client's mapping is normally at the same
 * address; where it could not be, the pointers differ). */
static void pinned_as_device(CUdeviceptr *p)
{
    CUdeviceptr d;

    if (om_pinned_device_pointer((void *)(uintptr_t)*p, &d) == 0)
        *p = d;
}

/* Waits for one of this client's streams (a synchronous copy from pinned memory). */
static CUresult sync_stream(CUstream s)
{
    return om_rpc_cuStreamSynchronize(s);
}

static CUresult htod(CUdeviceptr dst, const void *src, size_t n, CUstream stream, bool async);
static CUresult dtoh(void *dst, CUdeviceptr src, size_t n, CUstream stream, bool async);

/* An asynchronous 1D copy of pageable memory on a capturing stream: the paths below would copy
 * the bytes now, once; captured, they must move at each launch of the graph. So the capture gets
 * a host function that copies the pageable bytes into a pinned staging buffer held by the
 * capture's graph, then the copy from it (or the copy into it, then the host function that
 * copies it out): api/pagecopy.c. *handled false: the stream is not capturing. */
static CUresult captured_1d(bool to_device, CUdeviceptr dev, const void *host, size_t n, CUstream s,
                            bool *handled)
{
    CUstreamCaptureStatus st;
    cuuint64_t id;
    CUgraph g;
    const CUgraphNode *deps;
    const CUgraphEdgeData *edges;
    size_t nd;
    CUDA_MEMCPY3D m;
    void *staging, *arg;
    bool captured = false;
    CUresult rc;

    *handled = false;
    if (om_capture_none() ||
        OM_CALL(cuStreamGetCaptureInfo_v3)(om_capture_query_stream(s), &st, &id, &g, &deps, &edges,
                                           &nd) != CUDA_SUCCESS ||
        st != 1 /* CU_STREAM_CAPTURE_STATUS_ACTIVE */)
        return CUDA_SUCCESS;
    *handled = true;
    memset(&m, 0, sizeof(m));
    m.srcMemoryType = to_device ? MT_HOST : MT_DEVICE;
    m.dstMemoryType = to_device ? MT_DEVICE : MT_HOST;
    m.srcHost = to_device ? host : NULL;
    m.srcDevice = to_device ? 0 : dev;
    m.dstHost = to_device ? NULL : (void *)(uintptr_t)host;
    m.dstDevice = to_device ? dev : 0;
    m.WidthInBytes = n;
    m.Height = m.Depth = 1;
    rc = om_pgcopy_captured(&m, to_device ? PG_SRC : PG_DST, g, &staging, &arg);
    if (rc == CUDA_SUCCESS && to_device)
        rc = om_hostfunc_capture(s, om_pgcopy_in, arg, &captured);
    if (rc == CUDA_SUCCESS && (captured || !to_device)) /* pinned: captured as a copy */
        rc = to_device ? htod(dev, staging, n, s, true) : dtoh(staging, dev, n, s, true);
    if (rc == CUDA_SUCCESS && !to_device)
        rc = om_hostfunc_capture(s, om_pgcopy_out, arg, &captured);
    return rc == CUDA_SUCCESS && !captured ? 901 /* CUDA_ERROR_STREAM_CAPTURE_INVALIDATED */ : rc;
}

/* Host to device: pageable bytes go through the staging buffer and the server
 * copies them on the client's stream and waits for that stream only; pinned
 * pages shared with the server are copied from directly. */
static CUresult htod(CUdeviceptr dst, const void *src, size_t n, CUstream stream, bool async)
{
    REQ(req, 32);
    uint64_t server_src;
    CUdeviceptr asked = dst;
    CUresult rc;

    if (n && !src)
        return CUDA_ERROR_INVALID_VALUE;
    pinned_as_device(&dst); /* into pinned host memory: a device address to the driver */
    if (n == 0)
        return CUDA_SUCCESS;
    if (om_managed_in(dst, n)) {
        rc = om_managed_pull_if_dirty();
        if (rc == CUDA_SUCCESS)
            memmove((void *)(uintptr_t)dst, src, n);
        om_managed_host_wrote();
        return rc;
    }
    if (om_pinned_lookup(src, n, &server_src)) {
        /* Shared pinned pages: DMA from them, asynchronously, as the driver does. */
        om_put_u64(&req, dst);
        om_put_u64(&req, server_src);
        om_put_u64(&req, (uint64_t)n);
        om_put_u64(&req, (uint64_t)(uintptr_t)stream);
        rc = om_rpost(OM_IDX_op_copy_htod_pinned, &req);
        if (rc == CUDA_SUCCESS && !async)
            rc = sync_stream(stream);
        return rc;
    }
    /*
     * Both paths below read the n host bytes before the server sees the copy (into the request,
     * the staging buffer or a staging slot), and the program's buffer may be only as long as
     * the allocation. A range that runs past the device memory it starts in is refused here
     * first, as the driver refuses it, and no host byte is read: the client checks against what
     * it already knows (no round trip on the common, valid path); the server checks every copy
     * again, and judges addresses unknown here.
     */
    if (!om_devrange_fits(asked, n))
        return CUDA_ERROR_INVALID_VALUE;
    bool staged;
    if (async) {
        rc = captured_1d(true, dst, src, n, stream, &staged);
        if (staged)
            return rc;
    }
    rc = om_staging_copy(true, dst, (void *)(uintptr_t)src, n, stream, async, &staged);
    return staged ? rc : om_ring_htod(dst, src, n, stream);
}

/* Device to host: pinned pages directly, large copies through the staging area
 * (staging.c), the rest answered in pieces of at most OM_CHUNK_BYTES. */
static CUresult dtoh(void *dst, CUdeviceptr src, size_t n, CUstream stream, bool async)
{
    uint8_t *out = dst;
    uint64_t server_dst;

    if (n && !dst)
        return CUDA_ERROR_INVALID_VALUE;
    pinned_as_device(&src); /* from pinned host memory (XLA reads its flags so) */
    if (n && om_managed_in(src, n)) {
        CUresult rc = om_managed_pull_if_dirty();
        if (rc == CUDA_SUCCESS)
            memmove(dst, (const void *)(uintptr_t)src, n);
        return rc;
    }
    int pinned = n ? om_pinned_dst(dst, n, &server_dst) : 0;
    if (pinned < 0)
        return CUDA_ERROR_INVALID_VALUE; /* registered read-only to the device */
    if (pinned > 0) {
        REQ(req, 32);
        CUresult rc;
        om_put_u64(&req, server_dst);
        om_put_u64(&req, src);
        om_put_u64(&req, (uint64_t)n);
        om_put_u64(&req, (uint64_t)(uintptr_t)stream);
        rc = om_rpost(OM_IDX_op_copy_dtoh_pinned, &req);
        if (rc == CUDA_SUCCESS && !async)
            rc = sync_stream(stream);
        return rc;
    }
    bool staged;
    if (async) {
        CUresult rc = captured_1d(false, src, dst, n, stream, &staged);
        if (staged)
            return rc;
    }
    CUresult staged_rc = om_staging_copy(false, src, dst, n, stream, async, &staged);
    if (staged)
        return staged_rc;
    while (n > 0) {
        size_t piece = n > OM_CHUNK_BYTES ? OM_CHUNK_BYTES : n;
        uint32_t got = 0;
        REQ(req, 32);
        CUresult rc;
        om_put_u64(&req, src);
        om_put_u64(&req, (uint64_t)piece);
        om_put_u64(&req, (uint64_t)(uintptr_t)stream);
        rc = om_rcall(OM_IDX_op_copy_dtoh, &req, out, piece, &got);
        if (rc != CUDA_SUCCESS)
            return rc;
        if (got != piece)
            return CUDA_ERROR_UNKNOWN;
        out += piece;
        src += piece;
        n -= piece;
    }
    return CUDA_SUCCESS;
}

CUresult om_r_cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    return htod(dst, src, n, NULL, false);
}

CUresult om_r_cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    /* Pageable memory is copied before this returns, as the driver does;
     * pinned memory is copied asynchronously. */
    return htod(dst, src, n, s, true);
}

CUresult om_r_cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    return dtoh(dst, src, n, NULL, false);
}

CUresult om_r_cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    return dtoh(dst, src, n, s, true);
}

static CUresult memcpy_dd(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, bool wait)
{
    REQ(req, 40);

    if (om_managed_in(dst, n))
        return dtoh((void *)(uintptr_t)dst, src, n, s, false); /* into the shadow */
    if (om_managed_in(src, n))
        return htod(dst, (const void *)(uintptr_t)src, n, s, !wait); /* from the shadow */
    pinned_as_device(&dst);
    pinned_as_device(&src);

    om_put_u64(&req, dst);
    om_put_u64(&req, src);
    om_put_u64(&req, (uint64_t)n);
    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    om_put_u64(&req, wait);
    return om_rcall(OM_IDX_op_copy_dtod, &req, NULL, 0, NULL);
}

CUresult om_r_cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return memcpy_dd(dst, src, n, NULL, true);
}

CUresult om_r_cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    return memcpy_dd(dst, src, n, s, false);
}

/* Unified addressing: each side is device memory of this process or host memory
 * (managed memory counts as host here: its shadow is current between launches). */
static CUresult memcpy_any(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, bool wait)
{
    bool d_dev = om_devrange_holds(dst), s_dev = om_devrange_holds(src);

    if (d_dev && s_dev)
        return memcpy_dd(dst, src, n, s, wait);
    if (d_dev)
        return htod(dst, (const void *)(uintptr_t)src, n, s, !wait);
    if (s_dev)
        return dtoh((void *)(uintptr_t)dst, src, n, s, !wait);
    if (n)
        memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

CUresult om_r_cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return memcpy_any(dst, src, n, NULL, true);
}

CUresult om_r_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    return memcpy_any(dst, src, n, s, false);
}

static CUresult memset_d(CUdeviceptr dst, uint64_t value, unsigned width, size_t count, CUstream s,
                         bool wait)
{
    REQ(req, 48);

    if (count <= SIZE_MAX / width && om_managed_in(dst, count * width)) {
        CUresult rc = om_managed_pull_if_dirty();
        for (size_t i = 0; rc == CUDA_SUCCESS && i < count; i++)
            memcpy((uint8_t *)(uintptr_t)dst + i * width, &value, width); /* little-endian */
        om_managed_host_wrote();
        return rc;
    }

    pinned_as_device(&dst);
    om_put_u64(&req, dst);
    om_put_u64(&req, value);
    om_put_u64(&req, width);
    om_put_u64(&req, (uint64_t)count);
    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    om_put_u64(&req, wait);
    /* An asynchronous set of memory this process allocated is posted, as a launch is: the
     * server cannot refuse its range, and what else may fail (its stream) is kept for the
     * stream's next synchronising call, as a launch's error is. PyTorch sets memory about 4
     * times per ResNet-18 batch, each a round trip otherwise. Only aligned to its width, in
     * plain allocations (om_devrange_plain_holds), on a stream the shim knows (a destroyed one
     * is refused at the call), and not while a capture is open: a set on another stream may then be
     * refused at once (the capture mode's rules). */
    if (!wait && count <= SIZE_MAX / width && !(dst & (width - 1)) && om_capture_none() &&
        om_stream_known(s) && om_devrange_plain_holds(dst, (uint64_t)count * width))
        return om_rpost(OM_IDX_op_memset, &req);
    return om_rcall(OM_IDX_op_memset, &req, NULL, 0, NULL);
}

CUresult om_r_cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n)
{
    return memset_d(d, v, 1, n, NULL, true);
}

CUresult om_r_cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n)
{
    return memset_d(d, v, 2, n, NULL, true);
}

CUresult om_r_cuMemsetD32_v2(CUdeviceptr d, unsigned v, size_t n)
{
    return memset_d(d, v, 4, n, NULL, true);
}

CUresult om_r_cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s)
{
    return memset_d(d, v, 1, n, s, false);
}

CUresult om_r_cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s)
{
    return memset_d(d, v, 2, n, s, false);
}

CUresult om_r_cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, CUstream s)
{
    return memset_d(d, v, 4, n, s, false);
}

/* ------------------------------------------------------------------ 3D peer copies */

/* CUDA_MEMCPY3D_PEER is CUDA_MEMCPY3D with each side's context where CUDA_MEMCPY3D has a
 * reserved pointer. Each context must be one of this client's (the server holds every
 * device's memory in one address space); the copy is cuMemcpy3D's on one device. Two
 * different devices are refused (CUDA_ERROR_NOT_SUPPORTED): not done through the server. */
static CUresult peer_to_3d(const CUDA_MEMCPY3D_PEER *p, CUDA_MEMCPY3D *c)
{
    CUdevice sdev = -1, ddev = -1;

    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(c, p, sizeof(*c));
    if (p->srcMemoryType != CU_MEMORYTYPE_ARRAY &&
        om_ctx_get_device(p->srcContext, &sdev) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (p->dstMemoryType != CU_MEMORYTYPE_ARRAY &&
        om_ctx_get_device(p->dstContext, &ddev) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (sdev >= 0 && ddev >= 0 && sdev != ddev)
        return CUDA_ERROR_NOT_SUPPORTED;
    c->reserved0 = NULL;
    c->reserved1 = NULL;
    return CUDA_SUCCESS;
}

CUresult om_r_cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *pCopy)
{
    CUresult (*copy)(const CUDA_MEMCPY3D *) = om_remote_entry(OM_IDX_cuMemcpy3D_v2);
    CUDA_MEMCPY3D c;
    CUresult rc = peer_to_3d(pCopy, &c);

    return rc == CUDA_SUCCESS ? copy(&c) : rc;
}

CUresult om_r_cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{
    CUresult (*copy)(const CUDA_MEMCPY3D *, CUstream) = om_remote_entry(OM_IDX_cuMemcpy3DAsync_v2);
    CUDA_MEMCPY3D c;
    CUresult rc = peer_to_3d(pCopy, &c);

    return rc == CUDA_SUCCESS ? copy(&c, hStream) : rc;
}

/* ------------------------------------------------------------------ batches of copies */

/*
 * cuMemcpyBatchAsync (13.0: _v2; the 12.8 form has failIdx): every copy checked before any is
 * issued: each side is this client's device or managed memory within one allocation, or
 * pinned host memory shared with the server (pageable host memory and host-to-host copies
 * are refused: a copy of the batch runs in stream order, which pageable memory, staged by the
 * client, would not keep). Then each copy is cuMemcpyAsync's on the stream; a source access
 * order of "during the call" waits for that stream before returning. Location hints apply to
 * managed memory with concurrent access only, which the emulation does not report: ignored.
 */
#define BATCH_NOT_A_COPY SIZE_MAX

static bool batch_side(CUdeviceptr p, size_t n, bool *on_device)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    bool managed = false;
    uint64_t server;

    if (om_devrange_find(p, &base, &size, &managed)) {
        *on_device = true;
        return n <= size - (p - base);
    }
    *on_device = false;
    return om_pinned_lookup((const void *)(uintptr_t)p, n, &server);
}

static CUresult copy_batch(const CUdeviceptr *dsts, const CUdeviceptr *srcs, const size_t *sizes,
                           size_t count, const CUmemcpyAttributes *attrs, const size_t *idxs,
                           size_t nattrs, CUstream s, bool per_thread, size_t *fail)
{
    CUresult (*copy)(CUdeviceptr, CUdeviceptr, size_t, CUstream) =
        om_remote_entry(OM_IDX_cuMemcpyAsync);
    CUresult (*sync)(CUstream) = om_remote_entry(OM_IDX_cuStreamSynchronize);
    bool wait = false;
    CUresult rc = CUDA_SUCCESS;

    *fail = BATCH_NOT_A_COPY;
    if (!dsts || !srcs || !sizes || count == 0 || !attrs || !idxs || nattrs == 0 ||
        nattrs > count || idxs[0] != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((uintptr_t)s == 1 || (!s && !per_thread)) /* the legacy NULL stream */
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; k < nattrs; k++) {
        if ((k > 0 && idxs[k] <= idxs[k - 1]) || idxs[k] >= count || attrs[k].srcAccessOrder < 1 ||
            attrs[k].srcAccessOrder > 3 || (attrs[k].flags & ~1u))
            return CUDA_ERROR_INVALID_VALUE;
        wait |= attrs[k].srcAccessOrder == 2;
    }
    for (size_t i = 0; i < count; i++) {
        bool ddev = false, sdev = false;
        if (!batch_side(dsts[i], sizes[i], &ddev) || !batch_side(srcs[i], sizes[i], &sdev) ||
            (!ddev && !sdev)) {
            *fail = i;
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    for (size_t i = 0; i < count && rc == CUDA_SUCCESS; i++)
        if ((rc = copy(dsts[i], srcs[i], sizes[i], s)) != CUDA_SUCCESS)
            *fail = i;
    if (rc == CUDA_SUCCESS && wait)
        rc = sync(s);
    return rc;
}

CUresult om_r_cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                    size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
                                    size_t numAttrs, CUstream hStream)
{
    size_t fail;

    return copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream, false, &fail);
}

CUresult om_r_cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                         size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
                                         size_t numAttrs, CUstream hStream)
{
    size_t fail;

    return copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream, true, &fail);
}

CUresult om_r_cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                 CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                 size_t *failIdx, CUstream hStream)
{
    size_t fail;
    CUresult rc =
        copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream, false, &fail);

    if (rc != CUDA_SUCCESS && failIdx)
        *failIdx = fail;
    return rc;
}

CUresult om_r_cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                      size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
                                      size_t numAttrs, size_t *failIdx, CUstream hStream)
{
    size_t fail;
    CUresult rc =
        copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream, true, &fail);

    if (rc != CUDA_SUCCESS && failIdx)
        *failIdx = fail;
    return rc;
}

/*
 * cuMemcpy3DBatchAsync: pointer-to-pointer operations (element size 1), each one's whole 3D
 * footprint checked as cuMemcpyBatchAsync's sides are, before any is issued; then each is a
 * cuMemcpy3DAsync on the stream. Array operands and managed memory are refused
 * (CUDA_ERROR_NOT_SUPPORTED): not done yet.
 */
static CUresult batch3d_side(const om_memcpy3d_operand *o, const CUDA_MEMCPY3D_BATCH_OP *op,
                             int *ret_type, size_t *ret_pitch, size_t *ret_layer)
{
    size_t row = o->op.ptr.rowLength ? o->op.ptr.rowLength : op->width;
    size_t layer = o->op.ptr.layerHeight ? o->op.ptr.layerHeight : op->height;
    size_t span, t;
    CUdeviceptr base = 0;
    size_t size = 0;
    bool managed = false;
    uint64_t server;

    if (o->type == 2)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (o->type != 1 || row < op->width || layer < op->height)
        return CUDA_ERROR_INVALID_VALUE;
    /* the last byte: (depth - 1) layers, (height - 1) rows, then width */
    if (__builtin_mul_overflow(op->depth - 1, layer, &t) || __builtin_mul_overflow(t, row, &t) ||
        __builtin_mul_overflow(op->height - 1, row, &span) ||
        __builtin_add_overflow(span, t, &span) || __builtin_add_overflow(span, op->width, &span))
        return CUDA_ERROR_INVALID_VALUE;
    *ret_pitch = row;
    *ret_layer = layer;
    if (om_devrange_find(o->op.ptr.ptr, &base, &size, &managed)) {
        if (span > size - (o->op.ptr.ptr - base))
            return CUDA_ERROR_INVALID_VALUE;
        *ret_type = CU_MEMORYTYPE_DEVICE;
        return managed ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS;
    }
    *ret_type = CU_MEMORYTYPE_HOST;
    return om_pinned_lookup((const void *)(uintptr_t)o->op.ptr.ptr, span, &server)
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_VALUE;
}

static CUresult copy3d_batch(size_t n, const CUDA_MEMCPY3D_BATCH_OP *ops, unsigned long long flags,
                             CUstream s, bool per_thread, size_t *fail)
{
    CUresult (*copy)(const CUDA_MEMCPY3D *, CUstream) = om_remote_entry(OM_IDX_cuMemcpy3DAsync_v2);
    CUresult (*sync)(CUstream) = om_remote_entry(OM_IDX_cuStreamSynchronize);
    bool wait = false;
    CUresult rc = CUDA_SUCCESS;

    *fail = BATCH_NOT_A_COPY;
    if (n == 0 || !ops || flags || (uintptr_t)s == 1 || (!s && !per_thread))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        const CUDA_MEMCPY3D_BATCH_OP *op = &ops[i];
        int st = 0, dt = 0;
        size_t sp, sl, dp, dl;

        *fail = i;
        if (!op->width || !op->height || !op->depth || op->srcAccessOrder < 1 ||
            op->srcAccessOrder > 3 || (op->flags & ~1u))
            return CUDA_ERROR_INVALID_VALUE;
        if ((rc = batch3d_side(&op->src, op, &st, &sp, &sl)) != CUDA_SUCCESS ||
            (rc = batch3d_side(&op->dst, op, &dt, &dp, &dl)) != CUDA_SUCCESS)
            return rc;
        if (st == CU_MEMORYTYPE_HOST && dt == CU_MEMORYTYPE_HOST)
            return CUDA_ERROR_INVALID_VALUE;
        wait |= op->srcAccessOrder == 2;
    }
    *fail = BATCH_NOT_A_COPY;
    for (size_t i = 0; i < n && rc == CUDA_SUCCESS; i++) {
        const CUDA_MEMCPY3D_BATCH_OP *op = &ops[i];
        CUDA_MEMCPY3D c = {0};
        int st = 0, dt = 0;
        size_t sp, sl, dp, dl;

        batch3d_side(&op->src, op, &st, &sp, &sl);
        batch3d_side(&op->dst, op, &dt, &dp, &dl);
        c.srcMemoryType = st;
        if (st == CU_MEMORYTYPE_HOST)
            c.srcHost = (const void *)(uintptr_t)op->src.op.ptr.ptr;
        else
            c.srcDevice = op->src.op.ptr.ptr;
        c.srcPitch = sp;
        c.srcHeight = sl;
        c.dstMemoryType = dt;
        if (dt == CU_MEMORYTYPE_HOST)
            c.dstHost = (void *)(uintptr_t)op->dst.op.ptr.ptr;
        else
            c.dstDevice = op->dst.op.ptr.ptr;
        c.dstPitch = dp;
        c.dstHeight = dl;
        c.WidthInBytes = op->width;
        c.Height = op->height;
        c.Depth = op->depth;
        if ((rc = copy(&c, s)) != CUDA_SUCCESS)
            *fail = i;
    }
    if (rc == CUDA_SUCCESS && wait)
        rc = sync(s);
    return rc;
}

CUresult om_r_cuMemcpy3DBatchAsync_v2(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                      unsigned long long flags, CUstream hStream)
{
    size_t fail;

    return copy3d_batch(numOps, opList, flags, hStream, false, &fail);
}

CUresult om_r_cuMemcpy3DBatchAsync_v2_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                           unsigned long long flags, CUstream hStream)
{
    size_t fail;

    return copy3d_batch(numOps, opList, flags, hStream, true, &fail);
}

CUresult om_r_cuMemcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx,
                                   unsigned long long flags, CUstream hStream)
{
    size_t fail;
    CUresult rc = copy3d_batch(numOps, opList, flags, hStream, false, &fail);

    if (rc != CUDA_SUCCESS && failIdx)
        *failIdx = fail;
    return rc;
}

CUresult om_r_cuMemcpy3DBatchAsync_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                        size_t *failIdx, unsigned long long flags, CUstream hStream)
{
    size_t fail;
    CUresult rc = copy3d_batch(numOps, opList, flags, hStream, true, &fail);

    if (rc != CUDA_SUCCESS && failIdx)
        *failIdx = fail;
    return rc;
}
