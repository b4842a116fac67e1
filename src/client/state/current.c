/* SPDX-License-Identifier: MIT */
/*
 * The client state layer: the context tokens of this process (the devices' primary contexts,
 * contexts made by cuCtxCreate, green contexts' contexts, the local driver's contexts the
 * runtime obtained), what each stands for, and the calling thread's current context, whose
 * per-call preamble (device, SM partition, green context) it keeps in the transport's
 * thread-local om_preamble as the current context changes. The contexts and green families
 * (api/contexts.c, api/green.c) call these; nothing here talks to the server.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "openmps/cuda_abi.h"
#include "../remote.h"
#include "../shim.h"

/* ------------------------------------------------------------------ primary contexts */

/*
 * The client holds no real context (docs/architecture.md): a context handle here is an opaque
 * token per device, and the current-context stack is per thread, as the driver keeps it. The
 * server runs the work in its primary context.
 */
#define CTX_TOKEN_BASE 0x0c7c0000u
#define CTX_STACK_MAX 32

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

/* ------------------------------------------------------------------ created contexts */

/*
 * A created context is the client's own namespace inside the server's one context per device
 * (docs/architecture.md): a token of its own here, with its device, flags and execution
 * affinity; the work made while it is current still runs in the server's context, beside
 * every other client's. A token is (tag | generation | slot): a destroyed context's token is
 * never valid again, even once its slot is reused.
 */
#define CREATED_MAX 1024u
#define CREATED_TAG 0x7c7d000000000000ull
#define CREATED_TAG_MASK 0xffff00000000000full

struct created {
    uint64_t state;    /* generation << 8 | (device + 1); low byte 0: free (__atomic) */
    unsigned flags;    /* __atomic */
    unsigned refs;     /* cuCtxAttach / cuCtxDetach; under created_lock */
    unsigned sm_count; /* its execution affinity; 0: the whole device */
    unsigned long long id;
};
static struct created created[CREATED_MAX];
static unsigned long long next_created_id = 0x1000; /* primary contexts' ids are device + 1 */
static pthread_mutex_t created_lock = PTHREAD_MUTEX_INITIALIZER;

static CUcontext created_token(unsigned slot, uint64_t gen)
{
    return (CUcontext)(uintptr_t)(CREATED_TAG | (gen & 0xffffffull) << 20 | (uint64_t)slot << 4);
}

/* The slot of a live created context; -1: destroyed (or a forged token); -2: not a token of
 * a created context. */
static int created_slot(CUcontext ctx)
{
    uint64_t v = (uint64_t)(uintptr_t)ctx, slot = (v >> 4) & 0xffff, state;

    if ((v & CREATED_TAG_MASK) != CREATED_TAG)
        return -2;
    if (slot >= CREATED_MAX)
        return -1;
    state = __atomic_load_n(&created[slot].state, __ATOMIC_ACQUIRE);
    if (!(state & 0xff) || ((state >> 8) & 0xffffff) != ((v >> 20) & 0xffffff))
        return -1;
    return (int)slot;
}

int om_ctx_created_device(CUcontext ctx)
{
    int slot = created_slot(ctx);

    if (slot < 0)
        return slot;
    return (int)(__atomic_load_n(&created[slot].state, __ATOMIC_ACQUIRE) & 0xff) - 1;
}

/* The SM count a created context was given (cuCtxCreate_v3's execution affinity), 0 for none or
 * for another kind of context. */
unsigned om_ctx_created_sms(CUcontext ctx)
{
    int slot = created_slot(ctx);

    return slot < 0 ? 0 : __atomic_load_n(&created[slot].sm_count, __ATOMIC_RELAXED);
}

bool om_ctx_created_flags(CUcontext ctx, unsigned *flags)
{
    int slot = created_slot(ctx);

    if (slot < 0)
        return false;
    *flags = __atomic_load_n(&created[slot].flags, __ATOMIC_RELAXED);
    return true;
}

bool om_ctx_created_set_flags(CUcontext ctx, unsigned flags)
{
    int slot = created_slot(ctx);

    if (slot < 0)
        return false;
    __atomic_store_n(&created[slot].flags, flags, __ATOMIC_RELAXED);
    return true;
}

bool om_ctx_created_id(CUcontext ctx, unsigned long long *id)
{
    int slot = created_slot(ctx);

    if (slot < 0)
        return false;
    *id = created[slot].id;
    return true;
}

CUresult om_ctx_created_new(int dev, unsigned flags, unsigned sm_count, CUcontext *ret)
{
    unsigned slot;

    pthread_mutex_lock(&created_lock);
    for (slot = 0; slot < CREATED_MAX && (created[slot].state & 0xff); slot++) {
    }
    if (slot == CREATED_MAX) {
        pthread_mutex_unlock(&created_lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    uint64_t gen = ((created[slot].state >> 8) + 1) & 0xffffff;
    created[slot].flags = flags;
    created[slot].refs = 1;
    created[slot].sm_count = sm_count;
    created[slot].id = next_created_id++;
    __atomic_store_n(&created[slot].state, gen << 8 | (uint64_t)(dev + 1), __ATOMIC_RELEASE);
    pthread_mutex_unlock(&created_lock);
    *ret = created_token(slot, gen);
    return CUDA_SUCCESS;
}

int om_ctx_created_forget(CUcontext ctx, bool detach)
{
    int slot;

    pthread_mutex_lock(&created_lock);
    slot = created_slot(ctx);
    if (slot < 0) {
        pthread_mutex_unlock(&created_lock);
        return -1;
    }
    if (detach && --created[slot].refs > 0) {
        pthread_mutex_unlock(&created_lock);
        return 0;
    }
    __atomic_store_n(&created[slot].state, created[slot].state & ~(uint64_t)0xff, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&created_lock);
    return 1;
}

void om_ctx_created_attach(CUcontext ctx)
{
    int slot;

    pthread_mutex_lock(&created_lock);
    if ((slot = created_slot(ctx)) >= 0)
        created[slot].refs++;
    pthread_mutex_unlock(&created_lock);
}

/* ------------------------------------------------------------------ green contexts' tokens */

#define GREEN_SLOTS 256
#define GREEN_TAG 0x6e67000000000000ull
#define GREEN_TAG_MASK 0xffff00000000000full

/* The green contexts of this process, by slot: their CUcontext token is (tag | gen | slot). */
static struct {
    uint64_t handle; /* the server's green context; 0: free */
    uint64_t live;   /* gen << 1 | 1 while the green context lives, gen << 1 after (__atomic) */
    int dev;
    uint32_t gen;
    unsigned long long id; /* its context's id (cuCtxGetId), unique in the process */
} greens[GREEN_SLOTS];
static unsigned long long next_green_id = 0x100000; /* apart from created contexts' */
static pthread_mutex_t green_lock = PTHREAD_MUTEX_INITIALIZER;

static CUcontext green_token(unsigned slot, uint32_t gen)
{
    return (CUcontext)(uintptr_t)(GREEN_TAG | (uint64_t)(gen & 0xffffff) << 20 |
                                  (uint64_t)slot << 4);
}

/* The slot of a live green context's token; -1: destroyed (or forged); -2: no such token. */
static int green_slot(CUcontext ctx)
{
    uint64_t v = (uint64_t)(uintptr_t)ctx, slot = (v >> 4) & 0xffff;

    if ((v & GREEN_TAG_MASK) != GREEN_TAG)
        return -2;
    if (slot >= GREEN_SLOTS || !__atomic_load_n(&greens[slot].handle, __ATOMIC_ACQUIRE) ||
        (greens[slot].gen & 0xffffff) != ((v >> 20) & 0xffffff))
        return -1;
    return (int)slot;
}

int om_green_ctx_device(CUcontext ctx)
{
    int slot = green_slot(ctx);

    return slot < 0 ? slot : greens[slot].dev;
}

bool om_green_ctx_id(CUcontext ctx, unsigned long long *id)
{
    int slot = green_slot(ctx);

    if (slot < 0)
        return false;
    *id = greens[slot].id;
    return true;
}

/* The green context a context token stands for; NULL for any other context. */
struct CUgreenCtx_st *om_green_of_context(CUcontext ctx)
{
    int slot = green_slot(ctx);

    return slot < 0 ? NULL
                    : (struct CUgreenCtx_st *)(uintptr_t)__atomic_load_n(&greens[slot].handle,
                                                                         __ATOMIC_ACQUIRE);
}

bool om_green_current(struct CUgreenCtx_st **g)
{
    CUcontext ctx = NULL;

    om_current_context(&ctx);
    *g = om_green_of_context(ctx);
    return *g != NULL;
}

void om_green_register(uint64_t handle, int dev)
{
    unsigned slot;

    pthread_mutex_lock(&green_lock);
    for (slot = 0; slot < GREEN_SLOTS && greens[slot].handle; slot++) {
    }
    if (slot < GREEN_SLOTS) {
        greens[slot].dev = dev;
        greens[slot].gen++;
        greens[slot].id = next_green_id++;
        __atomic_store_n(&greens[slot].handle, handle, __ATOMIC_RELEASE);
        __atomic_store_n(&greens[slot].live, (uint64_t)greens[slot].gen << 1 | 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&green_lock);
}

void om_green_unregister(uint64_t handle)
{
    pthread_mutex_lock(&green_lock);
    for (unsigned slot = 0; slot < GREEN_SLOTS; slot++) {
        if (greens[slot].handle == handle) {
            __atomic_store_n(&greens[slot].live, (uint64_t)greens[slot].gen << 1, __ATOMIC_RELEASE);
            __atomic_store_n(&greens[slot].handle, 0, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&green_lock);
}

bool om_green_token(struct CUgreenCtx_st *g, CUcontext *ret)
{
    for (unsigned slot = 0; g && slot < GREEN_SLOTS; slot++) {
        if (__atomic_load_n(&greens[slot].handle, __ATOMIC_ACQUIRE) == (uint64_t)(uintptr_t)g) {
            *ret = green_token(slot, greens[slot].gen);
            return true;
        }
    }
    return false;
}

/* ------------------------------------------------------------------ the local driver's contexts */

/* Contexts the runtime obtained from the local driver through its private export tables (seen
 * with CUDA 13.0: it retains the primary context that way instead of
 * cuDevicePrimaryCtxRetain). They are accepted as the token of their device; the work still
 * runs in the server. */
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

/* For the slots of the runtime's tables that take a context (state/tables.c): the local
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

/* ------------------------------------------------------------------ what a token stands for */

int om_ctx_device(CUcontext ctx)
{
    uintptr_t v = (uintptr_t)ctx;
    int created_dev = om_ctx_created_device(ctx);
    int green_dev = om_green_ctx_device(ctx);

    if (!ctx)
        return -1;
    if (created_dev != -2)
        return created_dev;
    if (green_dev != -2)
        return green_dev;
    if (v <= CTX_TOKEN_BASE || (v - CTX_TOKEN_BASE) % 0x100u)
        return real_ctx_device(ctx);
    v = (v - CTX_TOKEN_BASE) / 0x100u - 1;
    return v < om_shim.client.ndevices ? (int)v : real_ctx_device(ctx);
}

/* cuCtxGetDevice(_v2)'s answer (the families ask it of a context the program passed). */
CUresult om_ctx_get_device(CUcontext ctx, CUdevice *dev)
{
    if (!ctx) {
        if (!dev)
            return CUDA_ERROR_INVALID_VALUE;
        om_current_context(&ctx);
        if (!ctx)
            return CUDA_ERROR_INVALID_CONTEXT;
        *dev = om_ctx_device(ctx);
        return *dev < 0 ? CUDA_ERROR_CONTEXT_IS_DESTROYED : CUDA_SUCCESS;
    }
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    if (om_ctx_device(ctx) < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = om_ctx_device(ctx);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ the calling thread's */

/* Whether a created context's SM count partitions its work
 * (CUDA_MPS_ENABLE_PER_CTX_DEVICE_MULTIPROCESSOR_PARTITIONING=1; the variable read once). */
static bool partitioning(void)
{
    static int enabled = -1;

    if (enabled < 0) {
        const char *v = getenv("CUDA_MPS_ENABLE_PER_CTX_DEVICE_MULTIPROCESSOR_PARTITIONING");
        enabled = v && !strcmp(v, "1");
    }
    return enabled;
}

/*
 * The per-call preamble of the calling thread, made again whenever its current context changes
 * (here only): the device the server must run its calls on, the SM partition and the green
 * context they run in (transport.c posts them ahead of a call when they differ from what the
 * server has). A created or green context another thread destroys is seen by the transport
 * through the liveness word: its preamble is then the empty one, as a destroyed context's
 * device was 0 before. The first preamble that is not the empty one turns the transport's
 * check on (om_preamble_used): a process of one device, without partitions and green
 * contexts, never pays more than that one load.
 */
static const uint64_t always_live = 1;

static void preamble_update(void)
{
    CUcontext ctx = ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
    struct om_preamble p = {0, 0, 0, NULL, 0};
    int dev = ctx ? om_ctx_device(ctx) : -1, slot;

    if (dev >= 0) {
        p.device = (uint64_t)dev;
        p.live = &always_live;
        p.want = 1;
        if ((slot = created_slot(ctx)) >= 0) {
            p.live = &created[slot].state;
            p.want = __atomic_load_n(&created[slot].state, __ATOMIC_ACQUIRE);
            if (partitioning())
                p.sms = __atomic_load_n(&created[slot].sm_count, __ATOMIC_RELAXED);
        } else if ((slot = green_slot(ctx)) >= 0) {
            p.live = &greens[slot].live;
            p.want = __atomic_load_n(&greens[slot].live, __ATOMIC_ACQUIRE);
            p.green = __atomic_load_n(&greens[slot].handle, __ATOMIC_ACQUIRE);
        }
    }
    om_preamble = p;
    if (p.device || p.sms || p.green)
        __atomic_store_n(&om_preamble_used, 1, __ATOMIC_RELAXED);
}

void om_current_context(CUcontext *ret)
{
    *ret = ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
}

int om_current_device(void)
{
    int dev = ctx_depth ? om_ctx_device(ctx_stack[ctx_depth - 1]) : 0;

    return dev < 0 ? 0 : dev;
}

CUresult om_current_set(CUcontext ctx)
{
    if (ctx && om_ctx_device(ctx) < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == 0) {
        if (ctx)
            ctx_stack[ctx_depth++] = ctx;
    } else if (ctx) {
        ctx_stack[ctx_depth - 1] = ctx;
    } else {
        ctx_depth--;
    }
    preamble_update();
    return CUDA_SUCCESS;
}

CUresult om_current_push(CUcontext ctx)
{
    if (om_ctx_device(ctx) < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == CTX_STACK_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    ctx_stack[ctx_depth++] = ctx;
    preamble_update();
    return CUDA_SUCCESS;
}

CUresult om_current_pop(CUcontext *ctx)
{
    if (ctx_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    ctx_depth--;
    if (ctx)
        *ctx = ctx_stack[ctx_depth];
    preamble_update();
    return CUDA_SUCCESS;
}
