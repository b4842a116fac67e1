/* SPDX-License-Identifier: MIT */
/* Remote mode, the contexts family's other half (created contexts are api/contexts.c): the
 * devices' primary contexts as tokens, the calling thread's current context and its stack,
 * context queries answered in the client, and the runtime's context-local storage table. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "openmps/ops.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "../shim.h"

/* ------------------------------------------------------------------ contexts */

/*
 * The client holds no real context (DRIVER_FACTS.md): a context handle here is
 * an opaque token per device, and the current-context stack is per thread,
 * as the driver keeps it. The server runs the work in its primary context.
 */
#define CTX_TOKEN_BASE 0x0c7c0000u
#define CTX_STACK_MAX 32

static unsigned primary_refs[OM_MAX_DEVICES];
static unsigned primary_flags[OM_MAX_DEVICES];
static __thread CUcontext ctx_stack[CTX_STACK_MAX];
static __thread int ctx_depth;

static CUcontext ctx_token(int dev)
{
    return (CUcontext)(uintptr_t)(CTX_TOKEN_BASE + 0x100u * (unsigned)(dev + 1));
}

CUcontext om_primary_token(int dev)
{
    return ctx_token(dev);
}

/* Contexts the runtime obtained from the local driver through its private
 * export tables (seen with CUDA 13.0: it retains the primary context that way
 * instead of cuDevicePrimaryCtxRetain). They are accepted as the token of
 * their device; the work still runs in the server. */
static CUcontext real_ctx[OM_MAX_DEVICES];

static int real_ctx_device(CUcontext ctx)
{
    CUresult (*get)(CUdevice *, CUcontext) = om_shim.real_fn[OM_IDX_cuCtxGetDevice_v2];
    CUdevice dev = -1;

    for (int i = 0; i < (int)om_shim.client.ndevices && i < (int)OM_MAX_DEVICES; i++)
        if (real_ctx[i] == ctx)
            return i;
    if (!get || get(&dev, ctx) != CUDA_SUCCESS || dev < 0 || dev >= (int)om_shim.client.ndevices)
        return -1;
    if (!real_ctx[dev]) {
        real_ctx[dev] = ctx;
        om_shim_log("the runtime uses a context of the local driver (%p) for device %d", ctx, dev);
    }
    return dev;
}

/* For the slots of the runtime's tables that take a context (api/tables.c): the local
 * driver's primary context of the device a token of ours stands for (a device's, a created
 * context's, a green context's), retained in the local driver once if the runtime has not
 * obtained it itself; any other context as it is. */
CUcontext om_local_context(CUcontext ctx)
{
    uintptr_t v = (uintptr_t)ctx;
    int dev = om_ctx_created_device(ctx);
    CUresult (*retain)(CUcontext *, CUdevice) = om_shim.real_fn[OM_IDX_cuDevicePrimaryCtxRetain];
    CUcontext local = NULL;

    if (dev == -2)
        dev = om_green_ctx_device(ctx);
    if (dev == -2 && v > CTX_TOKEN_BASE && (v - CTX_TOKEN_BASE) % 0x100u == 0)
        dev = (int)((v - CTX_TOKEN_BASE) / 0x100u) - 1;
    if (dev < 0 || dev >= (int)om_shim.client.ndevices || dev >= (int)OM_MAX_DEVICES)
        return ctx;
    if (!__atomic_load_n(&real_ctx[dev], __ATOMIC_ACQUIRE) && retain &&
        retain(&local, dev) == CUDA_SUCCESS) {
        CUcontext none = NULL;
        void *release = om_shim.real_fn[OM_IDX_cuDevicePrimaryCtxRelease_v2];
        if (!__atomic_compare_exchange_n(&real_ctx[dev], &none, local, false, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE) &&
            release)
            ((CUresult(*)(CUdevice))release)(dev);
        om_shim_log("the runtime's context checks: device %d's context of the local driver is %p",
                    dev, (void *)real_ctx[dev]);
    }
    return real_ctx[dev] ? real_ctx[dev] : ctx;
}

static int ctx_device(CUcontext ctx)
{
    uintptr_t v = (uintptr_t)ctx;
    int created = om_ctx_created_device(ctx); /* api/contexts.c */
    int green = om_green_ctx_device(ctx);     /* api/green.c */

    if (!ctx)
        return -1;
    if (created != -2)
        return created;
    if (green != -2)
        return green;
    if (v <= CTX_TOKEN_BASE || (v - CTX_TOKEN_BASE) % 0x100u)
        return real_ctx_device(ctx);
    v = (v - CTX_TOKEN_BASE) / 0x100u - 1;
    return v < om_shim.client.ndevices ? (int)v : real_ctx_device(ctx);
}

static bool valid_device(CUdevice dev)
{
    return dev >= 0 && dev < (int)om_shim.client.ndevices;
}

CUresult om_r_cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    __atomic_fetch_add(&primary_refs[dev], 1, __ATOMIC_RELAXED);
    *ctx = ctx_token(dev);
    return CUDA_SUCCESS;
}

CUresult om_r_cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (__atomic_load_n(&primary_refs[dev], __ATOMIC_RELAXED) == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    __atomic_fetch_sub(&primary_refs[dev], 1, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

CUresult om_r_cuDevicePrimaryCtxGetState(CUdevice dev, unsigned *flags, int *active)
{
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *flags = primary_flags[dev];
    *active = __atomic_load_n(&primary_refs[dev], __ATOMIC_RELAXED) > 0;
    return CUDA_SUCCESS;
}

CUresult om_r_cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned flags)
{
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    primary_flags[dev] = flags;
    return CUDA_SUCCESS;
}

CUresult om_r_cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    __atomic_store_n(&primary_refs[dev], 0, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

CUresult om_r_cuCtxSetCurrent(CUcontext ctx)
{
    if (ctx && ctx_device(ctx) < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == 0) {
        if (ctx)
            ctx_stack[ctx_depth++] = ctx;
    } else if (ctx) {
        ctx_stack[ctx_depth - 1] = ctx;
    } else {
        ctx_depth--;
    }
    return CUDA_SUCCESS;
}

void om_current_context(CUcontext *ret)
{
    *ret = ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
}

int om_current_device(void)
{
    int dev = ctx_depth ? ctx_device(ctx_stack[ctx_depth - 1]) : 0;

    return dev < 0 ? 0 : dev;
}

unsigned om_current_sm_partition(void)
{
    static int enabled = -1; /* the variable, read once */

    if (enabled < 0) {
        const char *v = getenv("CUDA_MPS_ENABLE_PER_CTX_DEVICE_MULTIPROCESSOR_PARTITIONING");
        enabled = v && !strcmp(v, "1");
    }
    return enabled && ctx_depth ? om_ctx_created_sms(ctx_stack[ctx_depth - 1]) : 0;
}

CUresult om_r_cuCtxGetCurrent(CUcontext *ctx)
{
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    *ctx = ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
    return CUDA_SUCCESS;
}

CUresult om_r_cuCtxPushCurrent_v2(CUcontext ctx)
{
    if (ctx_device(ctx) < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == CTX_STACK_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    ctx_stack[ctx_depth++] = ctx;
    return CUDA_SUCCESS;
}

CUresult om_r_cuCtxPopCurrent_v2(CUcontext *ctx)
{
    if (ctx_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    ctx_depth--;
    if (ctx)
        *ctx = ctx_stack[ctx_depth];
    return CUDA_SUCCESS;
}

CUresult om_r_cuCtxGetDevice(CUdevice *dev)
{
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    if (ctx_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = ctx_device(ctx_stack[ctx_depth - 1]);
    return *dev < 0 ? CUDA_ERROR_CONTEXT_IS_DESTROYED : CUDA_SUCCESS;
}

CUresult om_r_cuCtxGetDevice_v2(CUdevice *dev, CUcontext ctx)
{
    if (!ctx)
        return om_r_cuCtxGetDevice(dev);
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    if (ctx_device(ctx) < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = ctx_device(ctx);
    return CUDA_SUCCESS;
}

CUresult om_r_cuCtxGetApiVersion(CUcontext ctx, unsigned *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    if (ctx && ctx_device(ctx) < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    *version = 3020; /* the context API of every driver since CUDA 3.2 */
    return CUDA_SUCCESS;
}

CUresult om_r_cuCtxGetFlags(unsigned *flags)
{
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    if (ctx_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (om_ctx_created_flags(ctx_stack[ctx_depth - 1], flags))
        return CUDA_SUCCESS;
    if (ctx_device(ctx_stack[ctx_depth - 1]) < 0)
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *flags = primary_flags[ctx_device(ctx_stack[ctx_depth - 1])];
    return CUDA_SUCCESS;
}

CUresult om_r_cuCtxGetId(CUcontext ctx, unsigned long long *id)
{
    int dev;

    if (!id)
        return CUDA_ERROR_INVALID_VALUE;
    if (!ctx && ctx_depth)
        ctx = ctx_stack[ctx_depth - 1];
    dev = ctx_device(ctx);
    if (dev < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (om_ctx_created_id(ctx, id) || om_green_ctx_id(ctx, id))
        return CUDA_SUCCESS;
    *id = (unsigned long long)dev + 1;
    return CUDA_SUCCESS;
}

static int cache_config;

CUresult om_r_cuCtxGetCacheConfig(int *config)
{
    if (!config)
        return CUDA_ERROR_INVALID_VALUE;
    *config = cache_config;
    return CUDA_SUCCESS;
}

CUresult om_r_cuCtxSetCacheConfig(int config)
{
    cache_config = config; /* a preference; the shared context keeps its own */
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ context-local storage (the
 * runtime's table c693336e) */

/*
 * Context-local storage (export table c693336e…, DRIVER_FACTS.md): the runtime
 * keeps its per-context state here, keyed by our context tokens, which the
 * real driver does not know. So the shim serves this one table; the others
 * come from the real driver unmodified (the runtime's integrity check covers
 * two of them).
 */
static const uint8_t cls_uuid[16] = {0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11,
                                     0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93};

struct cls_entry {
    CUcontext ctx;
    void *key, *value;
    void (*dtor)(CUcontext, void *, void *);
};
static struct cls_entry cls[256];
static int ncls;
static pthread_mutex_t cls_lock = PTHREAD_MUTEX_INITIALIZER;

static CUcontext current_or(CUcontext ctx)
{
    return ctx ? ctx : ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
}

static CUresult cls_put(CUcontext ctx, void *key, void *value,
                        void (*dtor)(CUcontext, void *, void *))
{
    CUresult rc = CUDA_SUCCESS;

    om_shim_log("context storage put(ctx %p, key %p, value %p)", ctx, key, value);
    ctx = current_or(ctx);
    pthread_mutex_lock(&cls_lock);
    int i = 0;
    while (i < ncls && !(cls[i].ctx == ctx && cls[i].key == key))
        i++;
    if (i == ncls && ncls == (int)(sizeof(cls) / sizeof(cls[0])))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    else {
        if (i == ncls)
            ncls++;
        cls[i] = (struct cls_entry){ctx, key, value, dtor};
    }
    pthread_mutex_unlock(&cls_lock);
    return rc;
}

static CUresult cls_remove(CUcontext ctx, void *key)
{
    om_shim_log("context storage remove(ctx %p, key %p)", ctx, key);
    ctx = current_or(ctx);
    pthread_mutex_lock(&cls_lock);
    for (int i = 0; i < ncls; i++) {
        if (cls[i].ctx == ctx && cls[i].key == key) {
            cls[i] = cls[--ncls];
            break;
        }
    }
    pthread_mutex_unlock(&cls_lock);
    return CUDA_SUCCESS;
}

static CUresult cls_get(void **value, CUcontext ctx, void *key)
{
    CUresult rc = CUDA_ERROR_INVALID_HANDLE;

    ctx = current_or(ctx);
    pthread_mutex_lock(&cls_lock);
    for (int i = 0; i < ncls; i++) {
        if (cls[i].ctx == ctx && cls[i].key == key) {
            *value = cls[i].value;
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&cls_lock);
    om_shim_log("context storage get(ctx %p, key %p) = %d", ctx, key, rc);
    return rc;
}

static CUresult cls_unknown_slot(void)
{
    om_shim_log("an unknown slot of the context-local storage table was called");
    return CUDA_ERROR_NOT_SUPPORTED;
}

static void *const cls_table[] = {(void *)cls_put,          (void *)cls_remove,
                                  (void *)cls_get,          (void *)cls_unknown_slot,
                                  (void *)cls_unknown_slot, (void *)cls_unknown_slot,
                                  (void *)cls_unknown_slot, (void *)cls_unknown_slot};

/* The runtime's context-local storage table (api/tables.c serves it in remote mode). */
const void *om_cls_table(const void *uuid)
{
    return memcmp(uuid, cls_uuid, 16) == 0 ? (const void *)cls_table : NULL;
}
