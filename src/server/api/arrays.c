/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of arrays, texture and surface objects: the creations
 * (their descriptors are read by hand), the destructions that also end what a parent owns
 * (levels, planes), the resource descriptors' checks (copies with an array operand: copies.c). */
#include <stdlib.h>
#include <string.h>

#include "../exec.h"

#define MAX_LEVELS 32
#define MAX_PLANES 3

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
        return om_arg_array(c, (uint64_t)(uintptr_t)d->res.array.hArray)
                   ? CUDA_SUCCESS
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
        elem = om_element_bytes(d->res.pitch2D.format, d->res.pitch2D.numChannels);
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
    uint64_t elem = om_element_bytes(format, channels), sum = 0;

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

    if (om_devmem_release_kept(c->s, rc)) /* the client's kept allocations went: once more */
        rc = ((CUresult(*)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *))REAL(cuArrayCreate_v2))(&a, d);
    *h = (uint64_t)(uintptr_t)a;
    return rc;
}

static CUresult make_array3d(struct call *c, void *d, uint64_t *h)
{
    CUarray a = NULL;
    CUresult rc =
        ((CUresult(*)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *))REAL(cuArray3DCreate_v2))(&a, d);

    if (om_devmem_release_kept(c->s, rc)) /* the client's kept allocations went: once more */
        rc = ((CUresult(*)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *))REAL(cuArray3DCreate_v2))(&a,
                                                                                                 d);
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

/* Texture and surface objects: the resource is the client's (om_check_resdesc). */
