/* SPDX-License-Identifier: MIT */
/* Remote mode: contexts the client creates (cuCtxCreate and its versions), their flags,
 * execution affinity and events, and the context-wide controls answered in the client. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "../gen/remote_decls.h"
#include "../remote.h"
#include "../shim.h"

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
    unsigned refs;     /* cuCtxAttach / cuCtxDetach; under lock */
    unsigned sm_count; /* its execution affinity; 0: the whole device */
    unsigned long long id;
};
static struct created created[CREATED_MAX];
static unsigned long long next_id = 0x1000; /* primary contexts' ids are device + 1 */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static CUcontext token(unsigned slot, uint64_t gen)
{
    return (CUcontext)(uintptr_t)(CREATED_TAG | (gen & 0xffffffull) << 20 | (uint64_t)slot << 4);
}

/* The slot of a live created context; -1: destroyed (or a forged token); -2: not a token of
 * a created context. */
static int slot_of(CUcontext ctx)
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
    int slot = slot_of(ctx);

    if (slot < 0)
        return slot;
    return (int)(__atomic_load_n(&created[slot].state, __ATOMIC_ACQUIRE) & 0xff) - 1;
}

static bool partitions_made; /* a context with an execution affinity was created (__atomic) */

bool om_ctx_partitions_made(void)
{
    return __atomic_load_n(&partitions_made, __ATOMIC_RELAXED);
}

/* The SM count a created context was given (cuCtxCreate_v3's execution affinity), 0 for none or
 * for another kind of context. */
unsigned om_ctx_created_sms(CUcontext ctx)
{
    int slot = slot_of(ctx);

    return slot < 0 ? 0 : __atomic_load_n(&created[slot].sm_count, __ATOMIC_RELAXED);
}

bool om_ctx_created_flags(CUcontext ctx, unsigned *flags)
{
    int slot = slot_of(ctx);

    if (slot < 0)
        return false;
    *flags = __atomic_load_n(&created[slot].flags, __ATOMIC_RELAXED);
    return true;
}

bool om_ctx_created_id(CUcontext ctx, unsigned long long *id)
{
    int slot = slot_of(ctx);

    if (slot < 0)
        return false;
    *id = created[slot].id;
    return true;
}

/* Flags a context may have: one scheduling policy (auto, spin, yield, blocking sync) and the
 * other bits of CU_CTX_FLAGS_MASK. */
static bool valid_flags(unsigned flags)
{
    unsigned sched = flags & CU_CTX_SCHED_MASK;

    return !(flags & ~CU_CTX_FLAGS_MASK) &&
           (sched == 0 || sched == CU_CTX_SCHED_SPIN || sched == CU_CTX_SCHED_YIELD ||
            sched == CU_CTX_SCHED_BLOCKING_SYNC);
}

/* The execution affinity asked for: the last SM count of the array (later ones override). */
static CUresult affinity(const CUexecAffinityParam *p, int n, unsigned *sm_count)
{
    *sm_count = 0;
    if (n < 0 || (n > 0 && !p))
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < n; i++) {
        if (p[i].type != 0 || p[i].param.smCount.val == 0) /* CU_EXEC_AFFINITY_TYPE_SM_COUNT */
            return CUDA_ERROR_INVALID_VALUE;
        *sm_count = p[i].param.smCount.val;
    }
    return CUDA_SUCCESS;
}

static CUresult create(CUcontext *pctx, unsigned flags, CUdevice dev, unsigned sm_count)
{
    unsigned slot;
    int sms = 0;
    CUcontext ctx;
    CUresult rc;

    if (!pctx || !valid_flags(flags))
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= (int)om_shim.client.ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    /* The driver rounds a count up to what the hardware supports; the device has no more. */
    if (sm_count && om_device_attribute(dev, 16, &sms) == CUDA_SUCCESS && sms > 0 &&
        sm_count > (unsigned)sms)
        sm_count = (unsigned)sms; /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
    pthread_mutex_lock(&lock);
    for (slot = 0; slot < CREATED_MAX && (created[slot].state & 0xff); slot++) {
    }
    if (slot == CREATED_MAX) {
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    uint64_t gen = ((created[slot].state >> 8) + 1) & 0xffffff;
    created[slot].flags = flags;
    created[slot].refs = 1;
    created[slot].sm_count = sm_count;
    if (sm_count)
        __atomic_store_n(&partitions_made, true, __ATOMIC_RELAXED);
    created[slot].id = next_id++;
    __atomic_store_n(&created[slot].state, gen << 8 | (uint64_t)(dev + 1), __ATOMIC_RELEASE);
    pthread_mutex_unlock(&lock);
    ctx = token(slot, gen);
    rc = om_r_cuCtxPushCurrent_v2(ctx); /* current to the calling thread, as the driver does */
    if (rc != CUDA_SUCCESS) {
        __atomic_store_n(&created[slot].state, gen << 8, __ATOMIC_RELEASE);
        return rc;
    }
    *pctx = ctx;
    return CUDA_SUCCESS;
}

CUresult om_r_cuCtxCreate_v2(CUcontext *pctx, unsigned flags, CUdevice dev)
{
    return create(pctx, flags, dev, 0);
}

CUresult om_r_cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int n, unsigned flags,
                             CUdevice dev)
{
    unsigned sm_count;
    CUresult rc = affinity(params, n, &sm_count);

    return rc != CUDA_SUCCESS ? rc : create(pctx, flags, dev, sm_count);
}

CUresult om_r_cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned flags,
                             CUdevice dev)
{
    unsigned sm_count = 0;
    CUresult rc;

    if (params) {
        if (params->cigParams) /* CUDA in graphics: a graphics client's queue, not served */
            return CUDA_ERROR_NOT_SUPPORTED;
        rc = affinity(params->execAffinityParams, params->numExecAffinityParams, &sm_count);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return create(pctx, flags, dev, sm_count);
}

/* Forgets a created context; popped when current to the calling thread. Other threads that
 * have it current get CUDA_ERROR_CONTEXT_IS_DESTROYED from then on. */
static CUresult forget(CUcontext ctx, bool detach)
{
    int slot;
    CUcontext cur = NULL;

    pthread_mutex_lock(&lock);
    slot = slot_of(ctx);
    if (slot < 0) {
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_INVALID_CONTEXT; /* destroyed, a primary context's, or no context */
    }
    if (detach && --created[slot].refs > 0) {
        pthread_mutex_unlock(&lock);
        return CUDA_SUCCESS;
    }
    __atomic_store_n(&created[slot].state, created[slot].state & ~(uint64_t)0xff, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&lock);
    om_current_context(&cur);
    if (cur == ctx)
        om_r_cuCtxPopCurrent_v2(NULL);
    return CUDA_SUCCESS;
}

CUresult om_r_cuCtxDestroy_v2(CUcontext ctx)
{
    return forget(ctx, false);
}

CUresult om_r_cuCtxAttach(CUcontext *pctx, unsigned flags)
{
    CUcontext cur = NULL;
    CUdevice dev;
    int slot;

    if (!pctx || flags)
        return CUDA_ERROR_INVALID_VALUE;
    om_current_context(&cur);
    if (!cur || om_r_cuCtxGetDevice_v2(&dev, cur) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&lock);
    if ((slot = slot_of(cur)) >= 0)
        created[slot].refs++;
    pthread_mutex_unlock(&lock);
    *pctx = cur;
    return CUDA_SUCCESS;
}

CUresult om_r_cuCtxDetach(CUcontext ctx)
{
    CUdevice dev;

    if (slot_of(ctx) == -2) /* a primary context: its usage is cuDevicePrimaryCtxRelease's */
        return om_r_cuCtxGetDevice_v2(&dev, ctx) == CUDA_SUCCESS && ctx
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_CONTEXT;
    return forget(ctx, true);
}

/* The calling thread's current context and its device; INVALID_CONTEXT: none,
 * CONTEXT_IS_DESTROYED: another thread destroyed it. */
static CUresult current(CUcontext *ctx, CUdevice *dev)
{
    om_current_context(ctx);
    if (!*ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    return om_r_cuCtxGetDevice(dev);
}

CUresult om_r_cuCtxSetFlags(unsigned flags)
{
    CUcontext ctx;
    CUdevice dev;
    CUresult rc;
    int slot;

    if (!valid_flags(flags))
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = current(&ctx, &dev)) != CUDA_SUCCESS)
        return rc;
    /* The client's own record: the server's context keeps its scheduling (it is shared). */
    if ((slot = slot_of(ctx)) >= 0) {
        __atomic_store_n(&created[slot].flags, flags, __ATOMIC_RELAXED);
        return CUDA_SUCCESS;
    }
    return om_r_cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

CUresult om_r_cuCtxGetExecAffinity(CUexecAffinityParam *p, int type)
{
    CUcontext ctx;
    CUdevice dev;
    CUresult rc;
    int slot, sms = 0;

    if (!p || type != 0) /* CU_EXEC_AFFINITY_TYPE_SM_COUNT, the only type */
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = current(&ctx, &dev)) != CUDA_SUCCESS)
        return rc;
    if ((slot = slot_of(ctx)) >= 0 && created[slot].sm_count)
        sms = (int)created[slot].sm_count;
    else if ((rc = om_device_attribute(dev, 16, &sms)) != CUDA_SUCCESS)
        return rc; /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
    p->type = 0;
    p->param.smCount.val = (unsigned)sms;
    return CUDA_SUCCESS;
}

/* The shared-memory bank size (deprecated; no effect on devices since Volta). */
static int shared_config; /* CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE */

CUresult om_r_cuCtxGetSharedMemConfig(int *config)
{
    CUcontext ctx;
    CUdevice dev;
    CUresult rc;

    if (!config)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = current(&ctx, &dev)) != CUDA_SUCCESS)
        return rc;
    *config = __atomic_load_n(&shared_config, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

CUresult om_r_cuCtxSetSharedMemConfig(int config)
{
    CUcontext ctx;
    CUdevice dev;
    CUresult rc;

    if (config < 0 || config > 2) /* default, four-byte, eight-byte banks */
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = current(&ctx, &dev)) != CUDA_SUCCESS)
        return rc;
    __atomic_store_n(&shared_config, config, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

/* The persisting lines of the L2 cache belong to the shared context, that is, to every
 * client: one client's reset must not take the others', so it is answered here. */
CUresult om_r_cuCtxResetPersistingL2Cache(void)
{
    CUcontext ctx;
    CUdevice dev;

    return current(&ctx, &dev);
}

/* ------------------------------------------------------------------ context events */

/* The event (the client's) records all of the client's work so far, on every stream of the
 * client; the server never records or waits on the shared context as a whole. */
static CUresult ctx_event(int index, CUcontext ctx, CUevent ev)
{
    uint8_t buf[8];
    struct om_wbuf req = {.p = buf, .cap = sizeof(buf)};
    CUdevice dev;
    CUresult rc;

    if (!ctx)
        om_current_context(&ctx);
    if (!ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    if ((rc = om_r_cuCtxGetDevice_v2(&dev, ctx)) != CUDA_SUCCESS)
        return rc;
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    om_put_u64(&req, (uint64_t)(uintptr_t)ev);
    if (dev == om_current_device())
        return om_rcall(index, &req, NULL, 0, NULL);
    /* Another device's context: current for the call, so that the server runs it there (the
     * streams it joins or holds are that device's). */
    if ((rc = om_r_cuCtxPushCurrent_v2(ctx)) != CUDA_SUCCESS)
        return rc;
    rc = om_rcall(index, &req, NULL, 0, NULL);
    om_r_cuCtxPopCurrent_v2(&ctx);
    return rc;
}

CUresult om_r_cuCtxRecordEvent(CUcontext ctx, CUevent ev)
{
    return ctx_event(OM_IDX_cuCtxRecordEvent, ctx, ev);
}

CUresult om_r_cuCtxWaitEvent(CUcontext ctx, CUevent ev)
{
    return ctx_event(OM_IDX_cuCtxWaitEvent, ctx, ev);
}

/* ------------------------------------------------------------------ profiler */

/* A profiler attaches to the process that runs the work, the server, which every client
 * shares: its start and stop are process-wide, so a client's are answered here. */
CUresult om_r_cuProfilerInitialize(const char *config, const char *output, int mode)
{
    if (!config || !output || mode < 0 || mode > 1) /* CU_OUT_KEY_VALUE_PAIR, CU_OUT_CSV */
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult om_r_cuProfilerStart(void)
{
    return CUDA_SUCCESS;
}

CUresult om_r_cuProfilerStop(void)
{
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ devices */

/* The server's ordinal for a bus id: a device this client sees, or none. */
CUresult om_r_cuDeviceGetByPCIBusId(CUdevice *dev, const char *bus)
{
    CUdevice d = -1;
    CUresult rc = om_rpc_cuDeviceGetByPCIBusId(&d, bus);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (d < 0 || d >= (int)om_shim.client.ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = d;
    return CUDA_SUCCESS;
}
