/* SPDX-License-Identifier: MIT */
/* Remote mode: contexts (answered in the client), modules, kernels, launches, export tables. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/image.h"
#include "openmps/ops.h"
#include "gen/remote_decls.h"
#include "remote.h"
#include "shim.h"

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

/* ------------------------------------------------------------------ modules, kernels */

CUresult om_r_cuModuleGetLoadingMode(int *mode)
{
    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    /* What the driver answers by default. The server loads every image
     * eagerly anyway; the runtime takes its usual (measured) path with lazy. */
    *mode = CU_MODULE_LAZY_LOADING;
    return CUDA_SUCCESS;
}

/* The size of a module image from its own headers (common/image.c), a fatbin wrapper followed
 * to its fatbin (DRIVER_FACTS.md). 0: not an image of at most 1 GiB. */
static size_t image_size(const void *code, const void **ret_start)
{
    const uint8_t *p = code;
    uint32_t magic;
    uint64_t n;

    memcpy(&magic, p, 4);
    if (magic == OM_FATBIN_WRAPPER_MAGIC) {
        const void *data;
        memcpy(&data, p + 8, sizeof(data));
        p = data;
    }
    *ret_start = p;
    n = om_image_extent(p, 1u << 30);
    return n == UINT64_MAX ? 0 : (size_t)n;
}

static CUresult load_image(int index, void **handle, const void *code)
{
    const void *start;
    size_t size;
    uint64_t v = 0;
    uint32_t got = 0;
    REQ(req, 8);
    CUresult rc;

    if (!handle || !code)
        return CUDA_ERROR_INVALID_VALUE;
    size = image_size(code, &start);
    if (size == 0 || size > (1u << 30))
        return CUDA_ERROR_INVALID_IMAGE;
    om_put_u64(&req, (uint64_t)size);
    rc = om_rcall_staged(index, start, size, &req, &v, sizeof(v), &got);
    if (rc == CUDA_SUCCESS && got != sizeof(v))
        return CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS)
        *handle = (void *)(uintptr_t)v;
    return rc;
}

CUresult om_r_cuLibraryLoadData(CUlibrary *lib, const void *code, CUjit_option *jo, void **jv,
                                unsigned njo, CUlibraryOption *lo, void **lv, unsigned nlo)
{
    CUresult rc = load_image(OM_IDX_cuLibraryLoadData, lib, code);

    (void)lo, (void)lv, (void)nlo; /* the server loads eagerly */
    om_jit_options_answer(njo, jo, jv);
    return rc;
}

CUresult om_r_cuModuleLoadData(CUmodule *mod, const void *image)
{
    return load_image(OM_IDX_cuLibraryLoadData, mod, image);
}

CUresult om_r_cuModuleLoadDataEx(CUmodule *mod, const void *image, unsigned n, CUjit_option *o,
                                 void **v)
{
    CUresult rc = load_image(OM_IDX_cuLibraryLoadData, mod, image);

    om_jit_options_answer(n, o, v);
    return rc;
}

CUresult om_r_cuModuleLoadFatBinary(CUmodule *mod, const void *image)
{
    return load_image(OM_IDX_cuLibraryLoadData, mod, image);
}

CUresult om_r_cuLibraryUnload(CUlibrary lib)
{
    return om_rcall_u64(OM_IDX_cuLibraryUnload, (uint64_t)(uintptr_t)lib, 0, NULL);
}

CUresult om_r_cuModuleUnload(CUmodule mod)
{
    return om_r_cuLibraryUnload(mod); /* modules are libraries in the server */
}

/* Parameter layouts of the kernels this process obtained, by handle. */
struct layout {
    uint64_t kernel;
    uint32_t nparams;
    uint32_t total;
    uint32_t *offsets; /* nparams pairs of offset, size */
    struct layout *next;
};
#define LAYOUT_BUCKETS 256
static struct layout *layouts[LAYOUT_BUCKETS];
static pthread_mutex_t layout_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned bucket(uint64_t k)
{
    return (unsigned)((k >> 4) ^ (k >> 12)) % LAYOUT_BUCKETS;
}

static const struct layout *find_layout(uint64_t k)
{
    const struct layout *l;

    pthread_mutex_lock(&layout_lock);
    for (l = layouts[bucket(k)]; l && l->kernel != k; l = l->next) {
    }
    pthread_mutex_unlock(&layout_lock);
    return l;
}

/* Reply of a kernel lookup: handle, nparams, then offset and size per parameter. */
static CUresult get_kernel(int index, void **out, uint64_t owner, const char *name)
{
    uint64_t reply[2 + 2 * 256];
    uint32_t got = 0;
    REQ(req, 16 + 1024);
    struct layout *l;
    CUresult rc;

    if (!out || !name)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, owner);
    om_put_bytes(&req, name, strlen(name));
    rc = om_rcall(index, &req, reply, sizeof(reply), &got);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (got < 16 || reply[1] > 256 || got != 16 + 16 * reply[1])
        return CUDA_ERROR_UNKNOWN;
    *out = (void *)(uintptr_t)reply[0];
    if (find_layout(reply[0]))
        return CUDA_SUCCESS;
    l = calloc(1, sizeof(*l));
    if (!l)
        return CUDA_ERROR_OUT_OF_MEMORY;
    l->kernel = reply[0];
    l->nparams = (uint32_t)reply[1];
    l->offsets = calloc(2 * (size_t)l->nparams + 1, sizeof(uint32_t));
    if (!l->offsets) {
        free(l);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (uint32_t i = 0; i < l->nparams; i++) {
        uint32_t off = (uint32_t)reply[2 + 2 * i], size = (uint32_t)reply[3 + 2 * i];
        l->offsets[2 * i] = off;
        l->offsets[2 * i + 1] = size;
        if (off + size > l->total)
            l->total = off + size;
    }
    pthread_mutex_lock(&layout_lock);
    l->next = layouts[bucket(l->kernel)];
    layouts[bucket(l->kernel)] = l;
    pthread_mutex_unlock(&layout_lock);
    return CUDA_SUCCESS;
}

CUresult om_r_cuLibraryGetKernel(CUkernel *k, CUlibrary lib, const char *name)
{
    return get_kernel(OM_IDX_cuLibraryGetKernel, k, (uint64_t)(uintptr_t)lib, name);
}

CUresult om_r_cuModuleGetFunction(CUfunction *f, CUmodule mod, const char *name)
{
    return get_kernel(OM_IDX_cuLibraryGetKernel, f, (uint64_t)(uintptr_t)mod, name);
}

CUresult om_kernel_param(uint64_t kernel, size_t index, size_t *ret_offset, size_t *ret_size)
{
    const struct layout *l = find_layout(kernel);

    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    if (index >= l->nparams || !ret_offset || !ret_size)
        return CUDA_ERROR_INVALID_VALUE;
    *ret_offset = l->offsets[2 * index];
    *ret_size = l->offsets[2 * index + 1];
    return CUDA_SUCCESS;
}

CUresult om_r_cuKernelGetFunction(CUfunction *f, CUkernel k)
{
    if (!f)
        return CUDA_ERROR_INVALID_VALUE;
    if (!find_layout((uint64_t)(uintptr_t)k))
        return CUDA_ERROR_INVALID_HANDLE;
    *f = (CUfunction)k; /* the server launches kernels and functions alike */
    return CUDA_SUCCESS;
}

CUresult om_r_cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary lib, const char *name)
{
    uint64_t reply[2];
    uint32_t got = 0;
    REQ(req, 16 + 1024);
    CUresult rc;

    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)lib);
    om_put_bytes(&req, name, strlen(name));
    rc = om_rcall(OM_IDX_cuLibraryGetGlobal, &req, reply, sizeof(reply), &got);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (got != sizeof(reply))
        return CUDA_ERROR_UNKNOWN;
    if (om_devrange_add(reply[0], (size_t)reply[1]) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (dptr)
        *dptr = reply[0];
    if (bytes)
        *bytes = (size_t)reply[1];
    return CUDA_SUCCESS;
}

CUresult om_r_cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule mod, const char *name)
{
    return om_r_cuLibraryGetGlobal(dptr, bytes, mod, name);
}

static CUresult attr_call(int index, int *value, int attrib, uint64_t handle, uint64_t dev)
{
    uint64_t v = 0;
    uint32_t got = 0;
    REQ(req, 24);
    CUresult rc;

    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uint32_t)attrib);
    om_put_u64(&req, handle);
    om_put_u64(&req, dev);
    rc = om_rcall(index, &req, &v, sizeof(v), &got);
    if (rc == CUDA_SUCCESS)
        *value = (int)(int64_t)v;
    return rc;
}

CUresult om_r_cuFuncGetAttribute(int *value, int attrib, CUfunction f)
{
    return attr_call(OM_IDX_cuFuncGetAttribute, value, attrib, (uint64_t)(uintptr_t)f, 0);
}

CUresult om_r_cuKernelGetAttribute(int *value, int attrib, CUkernel k, CUdevice dev)
{
    return attr_call(OM_IDX_cuFuncGetAttribute, value, attrib, (uint64_t)(uintptr_t)k,
                     (uint64_t)dev);
}

CUresult om_r_cuFuncSetAttribute(CUfunction f, int attrib, int value)
{
    REQ(req, 24);

    om_put_u64(&req, (uint64_t)(uintptr_t)f);
    om_put_u64(&req, (uint64_t)(uint32_t)attrib);
    om_put_u64(&req, (uint64_t)(int64_t)value);
    return om_rcall(OM_IDX_cuFuncSetAttribute, &req, NULL, 0, NULL);
}

CUresult om_r_cuKernelSetAttribute(int attrib, int value, CUkernel k, CUdevice dev)
{
    (void)dev;
    return om_r_cuFuncSetAttribute((CUfunction)k, attrib, value);
}

CUresult om_r_cuFuncSetCacheConfig(CUfunction f, int config)
{
    (void)f, (void)config; /* a preference the shared context may ignore */
    return CUDA_SUCCESS;
}

CUresult om_r_cuKernelSetCacheConfig(CUkernel k, int config, CUdevice dev)
{
    (void)k, (void)config, (void)dev;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ launches */

/* The launch limits of the device, checked before a launch is posted so that a
 * bad configuration fails at the launch, as it does natively. */
static CUresult check_config(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned smem)
{
    /* CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK (1), MAX_BLOCK_DIM_X..Z (2-4),
     * MAX_GRID_DIM_X..Z (5-7), MAX_SHARED_MEMORY_PER_BLOCK_OPTIN (97) */
    int lim[8] = {0}, smem_max = 0;
    int dev = ctx_depth ? ctx_device(ctx_stack[ctx_depth - 1]) : 0;

    if (dev < 0)
        dev = 0;
    for (int a = 1; a <= 7; a++)
        if (om_device_attribute(dev, a, &lim[a]) != CUDA_SUCCESS)
            return CUDA_SUCCESS; /* unknown limits: let the server's driver judge */
    if (om_device_attribute(dev, 97, &smem_max) != CUDA_SUCCESS)
        smem_max = 0;
    if (!gx || !gy || !gz || !bx || !by || !bz)
        return CUDA_ERROR_INVALID_VALUE;
    if ((uint64_t)bx * by * bz > (uint64_t)lim[1] || bx > (unsigned)lim[2] ||
        by > (unsigned)lim[3] || bz > (unsigned)lim[4] || gx > (unsigned)lim[5] ||
        gy > (unsigned)lim[6] || gz > (unsigned)lim[7])
        return CUDA_ERROR_INVALID_VALUE;
    if (smem_max > 0 && smem > (unsigned)smem_max)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/*
 * A launch is posted, not waited for: one record with the configuration and
 * the argument bytes laid out as the kernel's parameter layout says, so the
 * server launches from that buffer as is. Its errors come at the next sync.
 */
/* A launch attribute (CUlaunchAttribute): an id, padding, a 64-byte value. */
#define LAUNCH_ATTR_BYTES 72
#define MAX_LAUNCH_ATTRS 16

/* The argument bytes of a launch of f (or a kernel node) laid out as its parameters say, from
 * kernelParams or from extra's buffer: into out (cap bytes) or, for extra, pointed to. */
CUresult om_kernel_args(CUfunction f, void **params, void **extra, void *out, size_t cap,
                        const void **ret_args, size_t *ret_len)
{
    const struct layout *l = find_layout((uint64_t)(uintptr_t)f);
    const void *args = NULL;
    size_t args_len = 0;
    uint8_t *packed = out;

    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    if (extra) {
        for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                args = extra[i + 1];
            else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
                args_len = *(size_t *)extra[i + 1];
            else
                return CUDA_ERROR_INVALID_VALUE;
        }
    } else {
        if (l->total > cap)
            return CUDA_ERROR_INVALID_VALUE;
        memset(packed, 0, l->total);
        for (uint32_t i = 0; i < l->nparams; i++) {
            if (!params || !params[i])
                return CUDA_ERROR_INVALID_VALUE;
            memcpy(packed + l->offsets[2 * i], params[i], l->offsets[2 * i + 1]);
        }
        args = packed;
        args_len = l->total;
    }
    if (args_len > 32768 || (args_len && !args))
        return CUDA_ERROR_INVALID_VALUE;
    *ret_args = args;
    *ret_len = args_len;
    return CUDA_SUCCESS;
}

static CUresult post_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
                            void **extra, const void *attrs, unsigned nattrs)
{
    uint8_t buf[128 + MAX_LAUNCH_ATTRS * LAUNCH_ATTR_BYTES + 32768];
    struct om_wbuf req = {.p = buf, .cap = sizeof(buf)};
    const void *args = NULL;
    size_t args_len = 0;
    uint8_t packed[32768];

    if (nattrs > MAX_LAUNCH_ATTRS || (nattrs && !attrs))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult cfg = check_config(gx, gy, gz, bx, by, bz, smem);
    if (cfg != CUDA_SUCCESS)
        return cfg; /* synchronously, as the driver reports a bad configuration */
    cfg = om_kernel_args(f, params, extra, packed, sizeof(packed), &args, &args_len);
    if (cfg != CUDA_SUCCESS)
        return cfg;
    CUresult rc = om_managed_push(s);
    if (rc != CUDA_SUCCESS)
        return rc;
    om_put_u64(&req, (uint64_t)(uintptr_t)f);
    om_put_u64(&req, ((uint64_t)gy << 32) | gx);
    om_put_u64(&req, ((uint64_t)bx << 32) | gz);
    om_put_u64(&req, ((uint64_t)bz << 32) | by);
    om_put_u64(&req, smem);
    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    if (!nattrs) {
        om_put_bytes(&req, args, args_len);
        return om_rpost(OM_IDX_cuLaunchKernel, &req);
    }
    om_put_u64(&req, nattrs);
    om_put_bytes(&req, attrs, (size_t)nattrs * LAUNCH_ATTR_BYTES);
    om_put_bytes(&req, args, args_len);
    return om_rpost(OM_IDX_cuLaunchKernelEx, &req);
}

CUresult om_r_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
                             void **extra)
{
    return post_launch(f, gx, gy, gz, bx, by, bz, smem, s, params, extra, NULL, 0);
}

CUresult om_r_cuLaunchKernelEx(const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra)
{
    if (!cfg)
        return CUDA_ERROR_INVALID_VALUE;
    return post_launch(f, cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ, cfg->blockDimX,
                       cfg->blockDimY, cfg->blockDimZ, cfg->sharedMemBytes, cfg->hStream, params,
                       extra, cfg->attrs, cfg->numAttrs);
}

CUresult om_r_cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                        unsigned bx, unsigned by, unsigned bz, unsigned smem,
                                        CUstream s, void **params)
{
    uint8_t attr[LAUNCH_ATTR_BYTES] = {0};
    int one = 1, id = 2; /* CU_LAUNCH_ATTRIBUTE_COOPERATIVE */

    memcpy(attr, &id, sizeof(id));
    memcpy(attr + 8, &one, sizeof(one));
    return post_launch(f, gx, gy, gz, bx, by, bz, smem, s, params, NULL, attr, 1);
}

/* ------------------------------------------------------------------ export tables */

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

/* ------------------------------------------------------------------ table */
