/* SPDX-License-Identifier: MIT */
/* Remote mode: arrays, texture and surface objects (the custom rows of api/remote/arrays.tsv)
 * and every copy with an array operand, sent as one cuMemcpy3D_v2 operation. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "../../common/gen/entries.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "openmps/ops.h"

/* ------------------------------------------------------------------ creations */

static CUresult create(int index, uint64_t *ret, const void *desc, size_t size, uint64_t extra,
                       bool has_extra)
{
    REQ(req, 8 + 256);
    uint8_t reply[8];
    uint32_t got = 0;
    struct om_rbuf in;
    CUresult rc;

    if (!ret || !desc)
        return CUDA_ERROR_INVALID_VALUE;
    if (has_extra)
        om_put_u64(&req, extra);
    om_put_bytes(&req, desc, size);
    rc = om_rcall(index, &req, reply, sizeof(reply), &got);
    if (rc != CUDA_SUCCESS)
        return rc;
    in = (struct om_rbuf){.p = reply, .len = got};
    *ret = om_get_u64(&in);
    return in.bad ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
}

CUresult om_r_cuArrayCreate_v2(CUarray *a, const CUDA_ARRAY_DESCRIPTOR *d)
{
    uint64_t h = 0;
    CUresult rc = create(OM_IDX_cuArrayCreate_v2, a ? &h : NULL, d, sizeof(*d), 0, false);

    if (rc == CUDA_SUCCESS)
        *a = (CUarray)(uintptr_t)h;
    return rc;
}

CUresult om_r_cuArray3DCreate_v2(CUarray *a, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    uint64_t h = 0;
    CUresult rc = create(OM_IDX_cuArray3DCreate_v2, a ? &h : NULL, d, sizeof(*d), 0, false);

    if (rc == CUDA_SUCCESS)
        *a = (CUarray)(uintptr_t)h;
    return rc;
}

CUresult om_r_cuMipmappedArrayCreate(CUmipmappedArray *m, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                     unsigned levels)
{
    uint64_t h = 0;
    CUresult rc = create(OM_IDX_cuMipmappedArrayCreate, m ? &h : NULL, d, sizeof(*d), levels, true);

    if (rc == CUDA_SUCCESS)
        *m = (CUmipmappedArray)(uintptr_t)h;
    return rc;
}

CUresult om_r_cuArrayDestroy(CUarray a)
{
    REQ(req, 8);

    om_put_u64(&req, (uint64_t)(uintptr_t)a);
    return om_rcall(OM_IDX_cuArrayDestroy, &req, NULL, 0, NULL);
}

CUresult om_r_cuMipmappedArrayDestroy(CUmipmappedArray m)
{
    REQ(req, 8);

    om_put_u64(&req, (uint64_t)(uintptr_t)m);
    return om_rcall(OM_IDX_cuMipmappedArrayDestroy, &req, NULL, 0, NULL);
}

/* ------------------------------------------------------------------ copies */

/* A side of a copy for the server: device memory (base, offset, pitch, slice height), an array
 * (handle, offset) or host memory (the bytes, pitch and slice height here). */
struct side {
    int type;
    uint64_t addr;
    size_t x, y, z, pitch, height;
    uint8_t *host;
};

static void put_side(struct om_wbuf *w, const struct side *s, size_t x, size_t y, size_t z)
{
    om_put_u64(w, (uint64_t)s->type);
    om_put_u64(w, s->type == CU_MEMORYTYPE_HOST ? 0 : s->addr);
    om_put_u64(w, x);
    om_put_u64(w, y);
    om_put_u64(w, z);
    om_put_u64(w, s->type == CU_MEMORYTYPE_DEVICE ? s->pitch : 0);
    om_put_u64(w, s->type == CU_MEMORYTYPE_DEVICE ? s->height : 0);
}

static uint8_t *host_at(const struct side *s, size_t x, size_t y, size_t z)
{
    return s->host + z * s->height * s->pitch + y * s->pitch + x;
}

/* One piece: rows [y, y + rows) of slice z, bytes [x, x + w) of each, through the server. */
static CUresult piece(const struct side *src, const struct side *dst, size_t x, size_t y, size_t z,
                      size_t w, size_t rows, size_t depth, CUstream s, bool wait, uint8_t *buf)
{
    REQ(req, 8 * 19);
    uint32_t got = 0;
    size_t n = w * rows * depth;
    CUresult rc;

    put_side(&req, src, src->x + x, src->y + y, src->z + z);
    put_side(&req, dst, dst->x + x, dst->y + y, dst->z + z);
    om_put_u64(&req, w);
    om_put_u64(&req, rows);
    om_put_u64(&req, depth);
    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    om_put_u64(&req, wait);
    if (src->type == CU_MEMORYTYPE_HOST) {
        for (size_t r = 0; r < rows; r++)
            memcpy(buf + r * w, host_at(src, src->x + x, src->y + y + r, src->z + z), w);
        return om_rcall_staged(OM_IDX_op_copy_3d, buf, n, &req, NULL, 0, NULL);
    }
    if (dst->type != CU_MEMORYTYPE_HOST)
        return om_rcall(OM_IDX_op_copy_3d, &req, NULL, 0, NULL);
    rc = om_rcall(OM_IDX_op_copy_3d, &req, buf, n, &got);
    if (rc == CUDA_SUCCESS && got != n)
        rc = CUDA_ERROR_UNKNOWN;
    for (size_t r = 0; rc == CUDA_SUCCESS && r < rows; r++)
        memcpy(host_at(dst, dst->x + x, dst->y + y + r, dst->z + z), buf + r * w, w);
    return rc;
}

/* The whole copy: device and array sides in one operation; with a host side, in pieces of
 * whole rows of one slice (or parts of one row) that fit one answer. */
static CUresult copy(const struct side *src, const struct side *dst, size_t w, size_t h, size_t d,
                     CUstream s, bool wait)
{
    size_t rows, cols;
    uint8_t *buf;
    CUresult rc = CUDA_SUCCESS;

    if (!w || !h || !d)
        return CUDA_SUCCESS;
    if (src->type != CU_MEMORYTYPE_HOST && dst->type != CU_MEMORYTYPE_HOST)
        return piece(src, dst, 0, 0, 0, w, h, d, s, wait, NULL);
    cols = w < OM_CHUNK_BYTES ? w : OM_CHUNK_BYTES;
    rows = OM_CHUNK_BYTES / cols;
    buf = malloc(OM_CHUNK_BYTES);
    if (!buf)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t z = 0; z < d && rc == CUDA_SUCCESS; z++)
        for (size_t y = 0; y < h && rc == CUDA_SUCCESS; y += rows)
            for (size_t x = 0; x < w && rc == CUDA_SUCCESS; x += cols) {
                size_t n = h - y < rows ? h - y : rows, c = w - x < cols ? w - x : cols;
                rc = piece(src, dst, x, y, z, c, n, 1, s, wait, buf);
            }
    free(buf);
    return rc;
}

/* Unified addresses are device memory when this process allocated them there. */
static int resolve(int type, const void *host, CUdeviceptr dev)
{
    CUdeviceptr b;
    size_t n;
    bool managed;

    if (type != CU_MEMORYTYPE_UNIFIED)
        return type;
    return om_devrange_find(dev ? dev : (CUdeviceptr)(uintptr_t)host, &b, &n, &managed) && !managed
               ? CU_MEMORYTYPE_DEVICE
               : CU_MEMORYTYPE_HOST;
}

static void side_of(struct side *o, int type, const void *host, CUdeviceptr dev, void *arr,
                    size_t x, size_t y, size_t z, size_t pitch, size_t height)
{
    *o = (struct side){
        .type = resolve(type, host, dev), .x = x, .y = y, .z = z, .pitch = pitch, .height = height};
    if (o->type == CU_MEMORYTYPE_ARRAY)
        o->addr = (uint64_t)(uintptr_t)arr;
    else if (o->type == CU_MEMORYTYPE_DEVICE)
        o->addr = dev;
    else
        o->host = (uint8_t *)(host ? host : (const void *)(uintptr_t)dev);
}

CUresult om_arrays_copy3d(const CUDA_MEMCPY3D *c, CUstream s, bool wait)
{
    struct side src, dst;

    if (c->srcLOD || c->dstLOD)
        return CUDA_ERROR_INVALID_VALUE;
    side_of(&src, c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcXInBytes, c->srcY,
            c->srcZ, c->srcPitch, c->srcHeight);
    side_of(&dst, c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstXInBytes, c->dstY,
            c->dstZ, c->dstPitch, c->dstHeight);
    if (src.type < CU_MEMORYTYPE_HOST || src.type > CU_MEMORYTYPE_ARRAY ||
        dst.type < CU_MEMORYTYPE_HOST || dst.type > CU_MEMORYTYPE_ARRAY)
        return CUDA_ERROR_INVALID_VALUE;
    return copy(&src, &dst, c->WidthInBytes, c->Height, c->Depth, s, wait);
}

CUresult om_arrays_copy2d(const CUDA_MEMCPY2D *c, CUstream s, bool wait)
{
    struct side src, dst;

    side_of(&src, c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcXInBytes, c->srcY,
            0, c->srcPitch, c->Height + c->srcY);
    side_of(&dst, c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstXInBytes, c->dstY,
            0, c->dstPitch, c->Height + c->dstY);
    if (src.type < CU_MEMORYTYPE_HOST || src.type > CU_MEMORYTYPE_ARRAY ||
        dst.type < CU_MEMORYTYPE_HOST || dst.type > CU_MEMORYTYPE_ARRAY)
        return CUDA_ERROR_INVALID_VALUE;
    return copy(&src, &dst, c->WidthInBytes, c->Height, 1, s, wait);
}

/* 1D copies: offsets in bytes into row 0 of the array. */
static CUresult copy_1d(int stype, uint64_t saddr, size_t soff, int dtype, uint64_t daddr,
                        size_t doff, size_t n, CUstream s, bool wait)
{
    struct side src = {.type = stype, .x = soff}, dst = {.type = dtype, .x = doff};

    if (stype == CU_MEMORYTYPE_HOST)
        src.host = (uint8_t *)(uintptr_t)saddr, src.x = 0;
    else
        src.addr = saddr;
    if (dtype == CU_MEMORYTYPE_HOST)
        dst.host = (uint8_t *)(uintptr_t)daddr, dst.x = 0;
    else
        dst.addr = daddr;
    if (stype == CU_MEMORYTYPE_DEVICE)
        src.pitch = n, src.height = 1;
    if (dtype == CU_MEMORYTYPE_DEVICE)
        dst.pitch = n, dst.height = 1;
    if ((stype == CU_MEMORYTYPE_HOST && !saddr) || (dtype == CU_MEMORYTYPE_HOST && !daddr))
        return CUDA_ERROR_INVALID_VALUE;
    return copy(&src, &dst, n, 1, 1, s, wait);
}

#define A(x) ((uint64_t)(uintptr_t)(x))
#define MT_H CU_MEMORYTYPE_HOST
#define MT_D CU_MEMORYTYPE_DEVICE
#define MT_A CU_MEMORYTYPE_ARRAY

CUresult om_r_cuMemcpyHtoA_v2(CUarray a, size_t off, const void *src, size_t n)
{
    return copy_1d(MT_H, A(src), 0, MT_A, A(a), off, n, NULL, true);
}

CUresult om_r_cuMemcpyHtoAAsync_v2(CUarray a, size_t off, const void *src, size_t n, CUstream s)
{
    return copy_1d(MT_H, A(src), 0, MT_A, A(a), off, n, s, false);
}

CUresult om_r_cuMemcpyAtoH_v2(void *dst, CUarray a, size_t off, size_t n)
{
    return copy_1d(MT_A, A(a), off, MT_H, A(dst), 0, n, NULL, true);
}

CUresult om_r_cuMemcpyAtoHAsync_v2(void *dst, CUarray a, size_t off, size_t n, CUstream s)
{
    return copy_1d(MT_A, A(a), off, MT_H, A(dst), 0, n, s, false);
}

CUresult om_r_cuMemcpyAtoD_v2(CUdeviceptr dst, CUarray a, size_t off, size_t n)
{
    return copy_1d(MT_A, A(a), off, MT_D, dst, 0, n, NULL, true);
}

CUresult om_r_cuMemcpyDtoA_v2(CUarray a, size_t off, CUdeviceptr src, size_t n)
{
    return copy_1d(MT_D, src, 0, MT_A, A(a), off, n, NULL, true);
}

CUresult om_r_cuMemcpyAtoA_v2(CUarray dst, size_t doff, CUarray src, size_t soff, size_t n)
{
    return copy_1d(MT_A, A(src), soff, MT_A, A(dst), doff, n, NULL, true);
}
