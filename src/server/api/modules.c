/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of module images, kernels and their attributes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/image.h"
#include "../../common/msg.h"
#include "../exec.h"
#include "openmps/ops.h"

/* ------------------------------------------------------------------ modules, kernels */

/*
 * Whether a module image ends within its `size` staged bytes by its own headers: the driver
 * takes no size and reads as far as they say, so an image that claims more would have the
 * driver read past the staging buffer, in the server every client shares.
 */
static bool image_within(const uint8_t *p, uint64_t size)
{
    return om_image_extent(p, size) <= size;
}

CUresult om_x_cuLibraryLoadData(struct call *c)
{
    CUresult (*load)(CUlibrary *, const void *, void *, void **, unsigned, void *, void **,
                     unsigned) = REAL(cuLibraryLoadData);
    uint64_t size = om_get_u64(&c->in), lib = 0, hash;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (size == 0)
        return CUDA_ERROR_INVALID_IMAGE;
    if ((rc = om_staged(c, size, CUDA_ERROR_INVALID_IMAGE)) != CUDA_SUCCESS)
        return rc;
    if (!image_within(c->s->stage, size)) {
        client_err(c->s, "client %d: a module image whose headers reach past its %llu staged bytes",
                   (int)c->s->pid, (unsigned long long)size);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    hash = om_hash64(c->s->stage, size);
    pthread_mutex_lock(om_image_load_lock());
    if (om_image_lookup(c->s->stage, hash, size, &lib) != 0) {
        CUlibrary l = NULL;
        /* A new image: it stays loaded while the server runs, so it counts against the
         * client's budget and the server's (budget.c). */
        if (c->s->image_count >= om_budget.client_image_count ||
            !om_budget_take(&c->s->image_bytes, size, om_budget.client_images)) {
            pthread_mutex_unlock(om_image_load_lock());
            return om_budget_refuse(c->s, OM_BUDGET_IMAGES, "loading a new module image");
        }
        if (!om_image_budget_take(size)) {
            om_budget_give(&c->s->image_bytes, size);
            pthread_mutex_unlock(om_image_load_lock());
            return om_budget_refuse(c->s, OM_BUDGET_IMAGES,
                                    "loading a new module image (the server's own budget, "
                                    "OPENMPS_SERVER_IMAGE_MAX, is spent)");
        }
        rc = load(&l, c->s->stage, NULL, NULL, 0, NULL, NULL, 0);
        if (rc != CUDA_SUCCESS) {
            om_budget_give(&c->s->image_bytes, size);
            om_image_budget_give(size);
        } else {
            c->s->image_count++;
            lib = (uint64_t)(uintptr_t)l;
            om_image_add(c->s->stage, hash, size, lib);
            om_info("client %d: loaded a new module image of %llu bytes", (int)c->s->pid,
                    (unsigned long long)size);
        }
    }
    pthread_mutex_unlock(om_image_load_lock());
    if (rc != CUDA_SUCCESS)
        return rc;
    /* For the servers after this one (imgcache.c); the staging buffer is this session's. */
    om_imgcache_store(c->s->stage, size, hash);
    if (!om_handles_has(&c->s->own[OM_H_LIBRARY], lib) &&
        om_handles_add(&c->s->own[OM_H_LIBRARY], lib) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    om_put_u64(&c->out, lib);
    return CUDA_SUCCESS;
}

CUresult om_x_cuLibraryUnload(struct call *c)
{
    uint64_t lib = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);

    /* The image stays loaded for the next client (unloading waits for every
     * kernel); this client just loses the handle. */
    if (rc == CUDA_SUCCESS && !om_handles_remove(&c->s->own[OM_H_LIBRARY], lib))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, 0);
    return rc;
}

/* name bytes after a u64 owner: copied to a NUL-terminated string. */
static CUresult name_arg(struct call *c, char *name, size_t cap)
{
    size_t len;
    const void *p = om_get_rest(&c->in, &len);

    if (c->in.bad || !p || len == 0 || len >= cap || memchr(p, '\0', len))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(name, p, len);
    name[len] = '\0';
    return CUDA_SUCCESS;
}

CUresult om_x_cuLibraryGetKernel(struct call *c)
{
    CUresult (*get)(CUkernel *, CUlibrary, const char *) = REAL(cuLibraryGetKernel);
    CUresult (*info)(CUkernel, size_t, size_t *, size_t *) = REAL(cuKernelGetParamInfo);
    uint64_t lib = om_get_u64(&c->in);
    char name[1024];
    CUkernel k = NULL;
    uint64_t params[2 * 256];
    uint32_t n = 0, total = 0;
    CUresult rc = name_arg(c, name, sizeof(name));

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!om_handles_has(&c->s->own[OM_H_LIBRARY], lib))
        return CUDA_ERROR_INVALID_HANDLE;
    rc = get(&k, (CUlibrary)(uintptr_t)lib, name);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* The layout answered with the handle: the client caches it, so a launch
     * is one flat buffer (ARCHITECTURE.md). */
    for (; n < 256; n++) {
        size_t off = 0, size = 0;
        if (info(k, n, &off, &size) != CUDA_SUCCESS)
            break;
        params[2 * n] = off;
        params[2 * n + 1] = size;
        if (off + size > total)
            total = (uint32_t)(off + size);
    }
    if (n == 256) {
        size_t off = 0, size = 0;
        if (info(k, n, &off, &size) == CUDA_SUCCESS) {
            /* Forwarding part of the parameters would run the kernel with
             * garbage: refuse the kernel instead, by name. */
            client_err(c->s, "client %d: kernel %s has more than 256 parameters: not supported",
                       (int)c->s->pid, name);
            return CUDA_ERROR_NOT_SUPPORTED;
        }
    }
    if (om_kernel_note(c->s, (uint64_t)(uintptr_t)k, total) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    om_put_u64(&c->out, (uint64_t)(uintptr_t)k);
    om_put_u64(&c->out, n);
    om_put_bytes(&c->out, params, 16 * (size_t)n);
    return CUDA_SUCCESS;
}

CUresult om_x_cuLibraryGetGlobal(struct call *c)
{
    CUresult (*get)(CUdeviceptr *, size_t *, CUlibrary, const char *) = REAL(cuLibraryGetGlobal);
    uint64_t lib = om_get_u64(&c->in);
    char name[1024];
    CUdeviceptr p = 0;
    size_t size = 0;
    CUresult rc = name_arg(c, name, sizeof(name));

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!om_handles_has(&c->s->own[OM_H_LIBRARY], lib))
        return CUDA_ERROR_INVALID_HANDLE;
    rc = get(&p, &size, (CUlibrary)(uintptr_t)lib, name);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* The module's globals are shared by every client of the image (as in
     * one process); the client may copy to and from them. */
    if (!om_ranges_cover(&c->s->allocs, p, size))
        om_ranges_add(&c->s->allocs, p, size, 0, false);
    om_put_u64(&c->out, p);
    om_put_u64(&c->out, size);
    return CUDA_SUCCESS;
}

static CUresult owned_kernel(struct call *c, uint64_t h)
{
    return om_kernel_total(c->s, h) >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult om_x_cuFuncGetAttribute(struct call *c)
{
    uint64_t attrib = om_get_u64(&c->in), k = om_get_u64(&c->in), dev = om_get_u64(&c->in);
    int v = 0;
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS)
        rc = owned_kernel(c, k);
    if (rc == CUDA_SUCCESS && dev >= (uint64_t)om_server_ndevices())
        rc = CUDA_ERROR_INVALID_DEVICE;
    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(int *, int, CUkernel, CUdevice))REAL(cuKernelGetAttribute))(
            &v, (int)attrib, (CUkernel)(uintptr_t)k, (CUdevice)dev);
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, (uint64_t)(int64_t)v);
    return rc;
}

CUresult om_x_cuFuncSetAttribute(struct call *c)
{
    uint64_t k = om_get_u64(&c->in), attrib = om_get_u64(&c->in), v = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS)
        rc = owned_kernel(c, k);
    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(int, int, CUkernel, CUdevice))REAL(cuKernelSetAttribute))(
            (int)attrib, (int)(int64_t)v, (CUkernel)(uintptr_t)k, 0);
    return rc;
}

/* ------------------------------------------------------------------ occupancy of clusters */

/* CUlaunchConfig as the driver reads it; its attributes are 72 bytes each (an id, padding, a
 * 64-byte value), at most 16 travel. */
struct occ_config {
    unsigned gx, gy, gz, bx, by, bz, smem;
    CUstream stream;
    void *attrs;
    unsigned nattrs;
};
#define OCC_ATTR_BYTES 72
#define OCC_MAX_ATTRS 16

/* The attributes a cluster query may carry: values without handles (a cluster dimension,
 * scheduling policies, priorities, carveouts). An access policy window names a device address
 * of the client; the others name events or graph nodes, which would need translating. */
static bool occ_attribute_allowed(int id)
{
    switch (id) {
    case 0:  /* ignore */
    case 2:  /* cooperative */
    case 3:  /* synchronization policy */
    case 4:  /* cluster dimension */
    case 5:  /* cluster scheduling policy */
    case 6:  /* programmatic stream serialization */
    case 8:  /* priority */
    case 9:  /* memory sync domain map */
    case 10: /* memory sync domain */
    case 11: /* preferred cluster dimension */
    case 14: /* preferred shared memory carveout */ return true;
    default: return false;
    }
}

/* The function, the configuration with its stream (the client's, only queried) and checked
 * attributes, then the driver's one int. */
static CUresult cluster_query(struct call *c,
                              CUresult (*query)(int *, CUfunction, const struct occ_config *))
{
    uint64_t k = om_get_u64(&c->in), g = om_get_u64(&c->in), m = om_get_u64(&c->in);
    uint64_t b = om_get_u64(&c->in), smem = om_get_u64(&c->in), sh = om_get_u64(&c->in);
    uint64_t nattrs = om_get_u64(&c->in);
    const void *ap = nattrs <= OCC_MAX_ATTRS ? om_get_bytes(&c->in, nattrs * OCC_ATTR_BYTES) : NULL;
    uint8_t attrs[OCC_MAX_ATTRS * OCC_ATTR_BYTES];
    struct occ_config cfg;
    CUresult rc = ARGS_OK(c);
    CUstream st;
    int v = 0;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (nattrs > OCC_MAX_ATTRS || (nattrs && !ap) || smem > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (nattrs)
        memcpy(attrs, ap, nattrs * OCC_ATTR_BYTES);
    for (uint64_t i = 0; i < nattrs; i++) {
        int id;
        memcpy(&id, attrs + i * OCC_ATTR_BYTES, sizeof(id));
        if (!occ_attribute_allowed(id)) {
            client_err(c->s,
                       "client %d: launch attribute %d in an occupancy query is not supported",
                       (int)c->s->pid, id);
            return CUDA_ERROR_NOT_SUPPORTED;
        }
    }
    if ((rc = om_arg_handle(c, OM_H_FUNCTION, k, false)) != CUDA_SUCCESS)
        return rc;
    st = om_arg_stream(c, sh, false, &rc);
    if (!st)
        return rc;
    cfg = (struct occ_config){
        (unsigned)g,           (unsigned)(g >> 32), (unsigned)m,    (unsigned)(m >> 32),
        (unsigned)b,           (unsigned)(b >> 32), (unsigned)smem, st,
        nattrs ? attrs : NULL, (unsigned)nattrs};
    rc = query(&v, (CUfunction)(uintptr_t)k, &cfg);
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, (uint64_t)(int64_t)v);
    return rc;
}

CUresult om_x_cuOccupancyMaxPotentialClusterSize(struct call *c)
{
    return cluster_query(c, REAL(cuOccupancyMaxPotentialClusterSize));
}

CUresult om_x_cuOccupancyMaxActiveClusters(struct call *c)
{
    return cluster_query(c, REAL(cuOccupancyMaxActiveClusters));
}
