/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of arrays, texture and surface objects: the creations
 * (their descriptors are read by hand), the destructions that also end what a parent owns
 * (levels, planes), the resource descriptors' checks and copies with an array operand. */
#include <stdlib.h>
#include <string.h>

#include "../exec.h"

#define MAX_LEVELS 32
#define MAX_PLANES 3

/* Bytes of one element of a format with `channels` channels; 0: a format whose elements are
 * not addressed by bytes here (block-compressed, planar video). */
static uint64_t element_bytes(int format, unsigned channels)
{
    uint64_t one;

    switch (format) {
    case 0x01:
    case 0x08: one = 1; break; /* 8-bit integers */
    case 0x02:
    case 0x09:
    case 0x10: one = 2; break; /* 16-bit integers, half */
    case 0x03:
    case 0x0a:
    case 0x20: one = 4; break; /* 32-bit integers, float */
    default: return 0;
    }
    return channels == 1 || channels == 2 || channels == 4 ? one * channels : 0;
}

/* An array the client may use: its own, or a level or plane of one of its own. */
static bool array_owned(struct call *c, uint64_t h)
{
    return h && (om_arg_handle(c, OM_H_ARRAY, h, false) == CUDA_SUCCESS ||
                 om_arg_handle(c, OM_H_SUBARRAY, h, false) == CUDA_SUCCESS);
}

/* [p, p + (height - 1) * pitch + width) within the client's memory, without overflow. */
static bool pitched_ok(struct call *c, uint64_t p, uint64_t pitch, uint64_t width, uint64_t height)
{
    if (!width || !height)
        return true;
    if (height > 1 && (width > pitch || height - 1 > (UINT64_MAX - width) / pitch))
        return false;
    return om_arg_range(c, p, (height - 1) * pitch + width);
}

CUresult om_check_resdesc(struct call *c, CUDA_RESOURCE_DESC *d)
{
    uint64_t elem;

    switch (d->resType) {
    case CU_RESOURCE_TYPE_ARRAY:
        return array_owned(c, (uint64_t)(uintptr_t)d->res.array.hArray) ? CUDA_SUCCESS
                                                                        : CUDA_ERROR_INVALID_HANDLE;
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
        return om_arg_handle(c, OM_H_MIPMAPPED_ARRAY,
                             (uint64_t)(uintptr_t)d->res.mipmap.hMipmappedArray, false);
    case CU_RESOURCE_TYPE_LINEAR:
        return d->res.linear.sizeInBytes &&
                       om_arg_range(c, d->res.linear.devPtr, d->res.linear.sizeInBytes)
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    case CU_RESOURCE_TYPE_PITCH2D:
        elem = element_bytes(d->res.pitch2D.format, d->res.pitch2D.numChannels);
        if (!elem || !d->res.pitch2D.width || d->res.pitch2D.width > UINT64_MAX / elem)
            return CUDA_ERROR_INVALID_VALUE;
        return pitched_ok(c, d->res.pitch2D.devPtr, d->res.pitch2D.pitchInBytes,
                          d->res.pitch2D.width * elem, d->res.pitch2D.height)
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

/* a * b, or UINT64_MAX past it (an array that large fits no cap). */
static uint64_t times(uint64_t a, uint64_t b)
{
    return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/* The bytes an array of these dimensions holds, as the client's device-memory cap counts them
 * (memcap.c): its elements, `levels` mipmap levels of them, each dimension halved per level
 * (at least 1); the driver's padding is not known here. */
static uint64_t array_bytes(size_t w, size_t h, size_t d, int format, unsigned channels,
                            uint64_t levels)
{
    uint64_t elem = element_bytes(format, channels), sum = 0;

    if (!elem)
        elem = 4 * (channels ? channels : 1); /* block-compressed, planar: an upper guess */
    for (uint64_t l = 0; l < levels && l < 64; l++) {
        uint64_t n = times(times(w >> l ? w >> l : 1, h >> l ? h >> l : 1), d >> l ? d >> l : 1);
        uint64_t b = times(n, elem);
        sum = b > UINT64_MAX - sum ? UINT64_MAX : sum + b;
    }
    return sum;
}

/* A creation from one descriptor of `size` bytes holding `bytes` of device memory: room under
 * the budget and the cap, the call, owned and counted. */
static CUresult create(struct call *c, enum om_handle_kind kind, void *desc, size_t size,
                       uint64_t (*bytes_of)(const void *),
                       CUresult (*make)(struct call *, void *, uint64_t *))
{
    const void *b = om_get_bytes(&c->in, size);
    uint64_t h = 0, bytes;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_own_room(c->s, kind)) != CUDA_SUCCESS)
        return rc;
    memcpy(desc, b, size);
    bytes = bytes_of(desc);
    if ((rc = om_memcap_check(c->s, c->s->dev, bytes)) != CUDA_SUCCESS)
        return rc;
    if ((rc = make(c, desc, &h)) != CUDA_SUCCESS)
        return rc;
    if ((rc = om_own_add(c, kind, h)) != CUDA_SUCCESS)
        return rc;
    if ((rc = om_memcap_hold(c->s, c->s->dev, h, bytes)) != CUDA_SUCCESS) {
        ((CUresult(*)(CUarray))REAL(cuArrayDestroy))((CUarray)(uintptr_t)h);
        om_own_drop(c->s, kind, h);
        return rc;
    }
    om_put_u64(&c->out, h);
    return CUDA_SUCCESS;
}

static uint64_t bytes_2d(const void *p)
{
    const CUDA_ARRAY_DESCRIPTOR *d = p;
    return array_bytes(d->Width, d->Height, 1, (int)d->Format, d->NumChannels, 1);
}

/* A sparse array, or one whose memory is mapped later, holds none of its own: what backs it
 * is mapped from cuMemCreate allocations, counted there. */
#define ARRAY_NO_MEMORY (0x40u | 0x80u) /* CUDA_ARRAY3D_SPARSE, CUDA_ARRAY3D_DEFERRED_MAPPING */

static uint64_t bytes_3d(const void *p)
{
    const CUDA_ARRAY3D_DESCRIPTOR *d = p;
    if (d->Flags & ARRAY_NO_MEMORY)
        return 0;
    return array_bytes(d->Width, d->Height, d->Depth, (int)d->Format, d->NumChannels, 1);
}

static CUresult make_array(struct call *c, void *d, uint64_t *h)
{
    CUarray a = NULL;
    CUresult rc =
        ((CUresult(*)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *))REAL(cuArrayCreate_v2))(&a, d);

    (void)c;
    *h = (uint64_t)(uintptr_t)a;
    return rc;
}

static CUresult make_array3d(struct call *c, void *d, uint64_t *h)
{
    CUarray a = NULL;
    CUresult rc =
        ((CUresult(*)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *))REAL(cuArray3DCreate_v2))(&a, d);

    (void)c;
    *h = (uint64_t)(uintptr_t)a;
    return rc;
}

CUresult om_x_cuArrayCreate_v2(struct call *c)
{
    CUDA_ARRAY_DESCRIPTOR d;
    return create(c, OM_H_ARRAY, &d, sizeof(d), bytes_2d, make_array);
}

CUresult om_x_cuArray3DCreate_v2(struct call *c)
{
    CUDA_ARRAY3D_DESCRIPTOR d;
    return create(c, OM_H_ARRAY, &d, sizeof(d), bytes_3d, make_array3d);
}

CUresult om_x_cuMipmappedArrayCreate(struct call *c)
{
    uint64_t levels = om_get_u64(&c->in);
    const void *b = om_get_bytes(&c->in, sizeof(CUDA_ARRAY3D_DESCRIPTOR));
    CUDA_ARRAY3D_DESCRIPTOR d;
    CUmipmappedArray m = NULL;
    uint64_t bytes;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (levels < 1 || levels > MAX_LEVELS)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = om_own_room(c->s, OM_H_MIPMAPPED_ARRAY)) != CUDA_SUCCESS)
        return rc;
    memcpy(&d, b, sizeof(d));
    bytes = d.Flags & ARRAY_NO_MEMORY
                ? 0
                : array_bytes(d.Width, d.Height, d.Depth, (int)d.Format, d.NumChannels, levels);
    if ((rc = om_memcap_check(c->s, c->s->dev, bytes)) != CUDA_SUCCESS)
        return rc;
    rc = ((CUresult(*)(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned))REAL(
        cuMipmappedArrayCreate))(&m, &d, (unsigned)levels);
    if (rc != CUDA_SUCCESS ||
        (rc = om_own_add(c, OM_H_MIPMAPPED_ARRAY, (uint64_t)(uintptr_t)m)) != CUDA_SUCCESS)
        return rc;
    if ((rc = om_memcap_hold(c->s, c->s->dev, (uint64_t)(uintptr_t)m, bytes)) != CUDA_SUCCESS) {
        ((CUresult(*)(CUmipmappedArray))REAL(cuMipmappedArrayDestroy))(m);
        om_own_drop(c->s, OM_H_MIPMAPPED_ARRAY, (uint64_t)(uintptr_t)m);
        return rc;
    }
    om_put_u64(&c->out, (uint64_t)(uintptr_t)m);
    return CUDA_SUCCESS;
}

/* An array's planes stop being the client's with it (the driver owns them through it). */
CUresult om_x_cuArrayDestroy(struct call *c)
{
    uint64_t h = om_get_u64(&c->in);
    CUarray planes[MAX_PLANES] = {0};
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    /* Its own arrays only: a level or a plane (usable as an array elsewhere) is not destroyed
     * by itself. */
    if (!om_handles_has(&c->s->own[OM_H_ARRAY], h))
        return CUDA_ERROR_INVALID_HANDLE;
    for (unsigned i = 0; i < MAX_PLANES; i++)
        if (((CUresult(*)(CUarray *, CUarray, unsigned))REAL(cuArrayGetPlane))(
                &planes[i], (CUarray)(uintptr_t)h, i) != CUDA_SUCCESS)
            planes[i] = NULL;
    rc = ((CUresult(*)(CUarray))REAL(cuArrayDestroy))((CUarray)(uintptr_t)h);
    if (rc == CUDA_SUCCESS) {
        om_own_drop(c->s, OM_H_ARRAY, h);
        om_memcap_drop(c->s, h);
        for (unsigned i = 0; i < MAX_PLANES; i++)
            if (planes[i])
                om_own_drop(c->s, OM_H_SUBARRAY, (uint64_t)(uintptr_t)planes[i]);
    }
    return rc;
}

/* A mipmapped array's levels stop being the client's with it. */
CUresult om_x_cuMipmappedArrayDestroy(struct call *c)
{
    uint64_t h = om_get_u64(&c->in);
    CUarray levels[MAX_LEVELS] = {0};
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_arg_handle(c, OM_H_MIPMAPPED_ARRAY, h, false)) != CUDA_SUCCESS)
        return rc;
    for (unsigned i = 0; i < MAX_LEVELS; i++)
        if (((CUresult(*)(CUarray *, CUmipmappedArray, unsigned))REAL(cuMipmappedArrayGetLevel))(
                &levels[i], (CUmipmappedArray)(uintptr_t)h, i) != CUDA_SUCCESS)
            break;
    rc = ((CUresult(*)(CUmipmappedArray))REAL(cuMipmappedArrayDestroy))(
        (CUmipmappedArray)(uintptr_t)h);
    if (rc == CUDA_SUCCESS) {
        om_own_drop(c->s, OM_H_MIPMAPPED_ARRAY, h);
        om_memcap_drop(c->s, h);
        for (unsigned i = 0; i < MAX_LEVELS && levels[i]; i++)
            om_own_drop(c->s, OM_H_SUBARRAY, (uint64_t)(uintptr_t)levels[i]);
    }
    return rc;
}

/* ------------------------------------------------------------------ copies with arrays */

/* One side of a copy as the client sent it: its memory type, the device address or array
 * handle, the offset (x in bytes, y, z) and for device memory the pitch and slice height. */
struct side {
    uint64_t type, addr, x, y, z, pitch, height;
};

static void get_side(struct call *c, struct side *s)
{
    s->type = om_get_u64(&c->in);
    s->addr = om_get_u64(&c->in);
    s->x = om_get_u64(&c->in);
    s->y = om_get_u64(&c->in);
    s->z = om_get_u64(&c->in);
    s->pitch = om_get_u64(&c->in);
    s->height = om_get_u64(&c->in);
}

/* The box [x, x + w) x [y, y + h) x [z, z + d) lies within the side's memory. */
static CUresult side_ok(struct call *c, const struct side *s, uint64_t w, uint64_t h, uint64_t d)
{
    if (s->type == CU_MEMORYTYPE_ARRAY) {
        CUDA_ARRAY3D_DESCRIPTOR a;
        uint64_t elem, bytes, rows, slices;
        if (!array_owned(c, s->addr))
            return CUDA_ERROR_INVALID_HANDLE;
        if (((CUresult(*)(CUDA_ARRAY3D_DESCRIPTOR *, CUarray))REAL(cuArray3DGetDescriptor_v2))(
                &a, (CUarray)(uintptr_t)s->addr) != CUDA_SUCCESS)
            return CUDA_ERROR_INVALID_HANDLE;
        elem = element_bytes(a.Format, a.NumChannels);
        if (!elem || a.Width > UINT64_MAX / elem)
            return CUDA_ERROR_NOT_SUPPORTED;
        bytes = a.Width * elem;
        rows = a.Height ? a.Height : 1;
        slices = a.Depth ? a.Depth : 1;
        if (s->x > bytes || w > bytes - s->x || s->y > rows || h > rows - s->y || s->z > slices ||
            d > slices - s->z)
            return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
    }
    if (s->type == CU_MEMORYTYPE_DEVICE) {
        /* slice z + k starts at (z + k) * height * pitch, row y + r at (y + r) * pitch */
        unsigned __int128 slice = (unsigned __int128)s->height * s->pitch;
        if (slice > ((unsigned __int128)1 << 64))
            return CUDA_ERROR_INVALID_VALUE;
        unsigned __int128 first = s->z * slice + (unsigned __int128)s->y * s->pitch + s->x;
        unsigned __int128 span = (d - 1) * slice + (unsigned __int128)(h - 1) * s->pitch + w;
        if ((h > 1 || d > 1) && w > s->pitch)
            return CUDA_ERROR_INVALID_VALUE;
        if (s->addr + first + span > ((unsigned __int128)1 << 64))
            return CUDA_ERROR_INVALID_VALUE;
        return om_arg_range(c, s->addr + (uint64_t)first, (uint64_t)span)
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    }
    return s->type == CU_MEMORYTYPE_HOST ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static void fill(const struct side *s, size_t *x, size_t *y, size_t *z, int *type, CUdeviceptr *dev,
                 void **arr, size_t *pitch, size_t *height)
{
    *type = (int)s->type;
    *x = s->x, *y = s->y, *z = s->z;
    if (s->type == CU_MEMORYTYPE_ARRAY)
        *arr = (void *)(uintptr_t)s->addr;
    else if (s->type == CU_MEMORYTYPE_DEVICE) {
        *dev = s->addr;
        *pitch = s->pitch;
        *height = s->height;
    }
}

/*
 * A copy with at least one array operand (the client sends the others as 2D copies): the
 * source's side, the destination's, the extent, the stream, whether to wait. A host source is
 * the staging buffer, a host destination the answer, both packed (pitch = width, height =
 * rows) and at most one reply buffer long (the client sends pieces); the driver copies through
 * the pinned reply buffer and the call waits for its stream before it returns.
 */
CUresult om_x_op_copy_3d(struct call *c)
{
    struct side src, dst;
    uint64_t w, h, d, sh, wait, total;
    CUDA_MEMCPY3D m;
    CUstream st;
    CUresult rc;

    get_side(c, &src);
    get_side(c, &dst);
    w = om_get_u64(&c->in), h = om_get_u64(&c->in), d = om_get_u64(&c->in);
    sh = om_get_u64(&c->in), wait = om_get_u64(&c->in);
    if ((rc = ARGS_OK(c)) != CUDA_SUCCESS)
        return rc;
    if ((src.type != CU_MEMORYTYPE_ARRAY && dst.type != CU_MEMORYTYPE_ARRAY) ||
        (src.type == CU_MEMORYTYPE_HOST && dst.type == CU_MEMORYTYPE_HOST) || !w || !h || !d ||
        __builtin_mul_overflow(w, h, &total) || __builtin_mul_overflow(total, d, &total))
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = side_ok(c, &src, w, h, d)) != CUDA_SUCCESS ||
        (rc = side_ok(c, &dst, w, h, d)) != CUDA_SUCCESS)
        return rc;
    memset(&m, 0, sizeof(m));
    fill(&src, &m.srcXInBytes, &m.srcY, &m.srcZ, &m.srcMemoryType, &m.srcDevice, &m.srcArray,
         &m.srcPitch, &m.srcHeight);
    fill(&dst, &m.dstXInBytes, &m.dstY, &m.dstZ, &m.dstMemoryType, &m.dstDevice, &m.dstArray,
         &m.dstPitch, &m.dstHeight);
    m.WidthInBytes = w, m.Height = h, m.Depth = d;
    if (src.type == CU_MEMORYTYPE_HOST || dst.type == CU_MEMORYTYPE_HOST) {
        if (total > c->out.cap)
            return CUDA_ERROR_INVALID_VALUE;
        wait = 1; /* the reply buffer is reused (or read) when the call returns */
    }
    if (src.type == CU_MEMORYTYPE_HOST) {
        if ((rc = om_staged(c, total, CUDA_ERROR_INVALID_VALUE)) != CUDA_SUCCESS)
            return rc;
        memcpy(c->out.p, c->s->stage, total);
        m.srcHost = c->out.p;
        m.srcXInBytes = m.srcY = m.srcZ = 0;
        m.srcPitch = w, m.srcHeight = h;
    }
    if (dst.type == CU_MEMORYTYPE_HOST) {
        m.dstHost = c->out.p;
        m.dstXInBytes = m.dstY = m.dstZ = 0;
        m.dstPitch = w, m.dstHeight = h;
    }
    st = om_arg_stream(c, sh, true, &rc);
    if (!st)
        return rc;
    rc = ((CUresult(*)(const CUDA_MEMCPY3D *, CUstream))REAL(cuMemcpy3DAsync_v2))(&m, st);
    if (rc == CUDA_SUCCESS && wait)
        rc = om_wait_stream(st);
    if (rc == CUDA_SUCCESS && dst.type == CU_MEMORYTYPE_HOST)
        c->out.len = total;
    return om_take_call_error(c, rc);
}
