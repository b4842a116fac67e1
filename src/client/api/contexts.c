/* SPDX-License-Identifier: MIT */
/* Remote mode, the contexts family (api/remote/contexts.tsv): the devices' primary contexts,
 * the calling thread's current context, contexts the client creates (cuCtxCreate and its
 * versions) with their flags, execution affinity and events, the context-wide controls answered
 * in the client, and the private export tables the runtime asks for. The tokens and the
 * current-context stack are the state layer's (state/current.c). */
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdint.h>

#include "../gen/remote_decls.h"
#include "../remote.h"
#include "../shim.h"

/* ------------------------------------------------------------------ primary contexts, the current
 * context */

static unsigned primary_refs[OM_MAX_DEVICES];
static unsigned primary_flags[OM_MAX_DEVICES];

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
    *ctx = om_primary_token(dev);
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
    return om_current_set(ctx);
}

CUresult om_r_cuCtxGetCurrent(CUcontext *ctx)
{
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    om_current_context(ctx);
    return CUDA_SUCCESS;
}

CUresult om_r_cuCtxPushCurrent_v2(CUcontext ctx)
{
    return om_current_push(ctx);
}

CUresult om_r_cuCtxPopCurrent_v2(CUcontext *ctx)
{
    return om_current_pop(ctx);
}

CUresult om_r_cuCtxGetDevice(CUdevice *dev)
{
    return om_ctx_get_device(NULL, dev);
}

CUresult om_r_cuCtxGetDevice_v2(CUdevice *dev, CUcontext ctx)
{
    return om_ctx_get_device(ctx, dev);
}

CUresult om_r_cuCtxGetApiVersion(CUcontext ctx, unsigned *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    if (ctx && om_ctx_device(ctx) < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    *version = 3020; /* the context API of every driver since CUDA 3.2 */
    return CUDA_SUCCESS;
}

CUresult om_r_cuCtxGetFlags(unsigned *flags)
{
    CUcontext cur;

    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    om_current_context(&cur);
    if (!cur)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (om_ctx_created_flags(cur, flags))
        return CUDA_SUCCESS;
    if (om_ctx_device(cur) < 0)
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *flags = primary_flags[om_ctx_device(cur)];
    return CUDA_SUCCESS;
}

CUresult om_r_cuCtxGetId(CUcontext ctx, unsigned long long *id)
{
    int dev;

    if (!id)
        return CUDA_ERROR_INVALID_VALUE;
    if (!ctx)
        om_current_context(&ctx);
    dev = om_ctx_device(ctx);
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

/* ------------------------------------------------------------------ created contexts */

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
    if ((rc = om_ctx_created_new(dev, flags, sm_count, &ctx)) != CUDA_SUCCESS)
        return rc;
    rc = om_current_push(ctx); /* current to the calling thread, as the driver does */
    if (rc != CUDA_SUCCESS) {
        om_ctx_created_forget(ctx, false);
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
    CUcontext cur = NULL;
    int gone = om_ctx_created_forget(ctx, detach);

    if (gone < 0)
        return CUDA_ERROR_INVALID_CONTEXT; /* destroyed, a primary context's, or no context */
    if (gone == 0)
        return CUDA_SUCCESS; /* still attached */
    om_current_context(&cur);
    if (cur == ctx)
        om_current_pop(NULL);
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

    if (!pctx || flags)
        return CUDA_ERROR_INVALID_VALUE;
    om_current_context(&cur);
    if (!cur || om_r_cuCtxGetDevice_v2(&dev, cur) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    om_ctx_created_attach(cur);
    *pctx = cur;
    return CUDA_SUCCESS;
}

CUresult om_r_cuCtxDetach(CUcontext ctx)
{
    CUdevice dev;

    if (om_ctx_created_device(ctx) ==
        -2) /* a primary context: its usage is cuDevicePrimaryCtxRelease's */
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

    if (!valid_flags(flags))
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = current(&ctx, &dev)) != CUDA_SUCCESS)
        return rc;
    /* The client's own record: the server's context keeps its scheduling (it is shared). */
    if (om_ctx_created_set_flags(ctx, flags))
        return CUDA_SUCCESS;
    return om_r_cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

CUresult om_r_cuCtxGetExecAffinity(CUexecAffinityParam *p, int type)
{
    CUcontext ctx;
    CUdevice dev;
    CUresult rc;
    int sms = 0;

    if (!p || type != 0) /* CU_EXEC_AFFINITY_TYPE_SM_COUNT, the only type */
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = current(&ctx, &dev)) != CUDA_SUCCESS)
        return rc;
    if (om_ctx_created_sms(ctx))
        sms = (int)om_ctx_created_sms(ctx);
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
static CUresult ctx_event(CUresult (*call)(CUcontext, CUevent), CUcontext ctx, CUevent ev)
{
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
    if (dev == om_current_device())
        return call(ctx, ev);
    /* Another device's context: current for the call, so that the server runs it there (the
     * streams it joins or holds are that device's). */
    if ((rc = om_current_push(ctx)) != CUDA_SUCCESS)
        return rc;
    rc = call(ctx, ev);
    om_current_pop(&ctx);
    return rc;
}

CUresult om_r_cuCtxRecordEvent(CUcontext ctx, CUevent ev)
{
    return ctx_event(om_rpc_cuCtxRecordEvent, ctx, ev);
}

CUresult om_r_cuCtxWaitEvent(CUcontext ctx, CUevent ev)
{
    return ctx_event(om_rpc_cuCtxWaitEvent, ctx, ev);
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

/* ------------------------------------------------------------------ synchronisation */

/*
 * The session's completion word (src/server/syncword.c; on unless the server has
 * OPENMPS_SYNC_WORD=off): a page of pinned memory the GPU writes and this process maps
 * read-only. A program's cuCtxSynchronize then asks with ctx_sync_word; the server answers at
 * once with the number the word will hold once this client's work is done, or with nothing
 * when it waited itself (several busy streams, an error kept, printing kernels, no core to
 * spare, a long kernel in a shared queue, ...). The thread
 * spins on the word, as a native program's synchronize spins on the driver's semaphore, for at
 * most WORD_SPIN_NS; past that (work that long, or a server that ended: a fault stops the GPU
 * before the write), it synchronizes through the server as before, which answers the fault.
 */
#define WORD_SPIN_NS 50000000ll /* 50 ms */

static int word_state; /* 0: not asked yet, 1: mapped, -1: none (__atomic) */
static const volatile uint32_t *word;
static pthread_mutex_t word_lock = PTHREAD_MUTEX_INITIALIZER;

static bool word_mapped(void)
{
    int st = __atomic_load_n(&word_state, __ATOMIC_ACQUIRE);

    if (st)
        return st > 0;
    pthread_mutex_lock(&word_lock);
    if (!__atomic_load_n(&word_state, __ATOMIC_ACQUIRE)) {
        REQ(req, 8);
        void *p = MAP_FAILED;
        int fd = -1;
        CUresult rc;
        om_ring_lock();
        rc = om_rcall_locked(OM_IDX_op_sync_word, &req, NULL, 0, NULL);
        if (rc == CUDA_SUCCESS)
            fd = om_recv_fd_locked();
        om_ring_unlock();
        if (fd >= 0) {
            p = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ, MAP_SHARED, fd, 0);
            close(fd);
        }
        if (p != MAP_FAILED)
            word = p;
        __atomic_store_n(&word_state, p != MAP_FAILED ? 1 : -1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&word_lock);
    return __atomic_load_n(&word_state, __ATOMIC_ACQUIRE) > 0;
}

static int64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/*
 * OPENMPS_WORD_NAP_US (0 to 10 000; 0, the default: spin): past the first WORD_NAP_AFTER_NS of a
 * wait, the thread sleeps this long between looks at the word instead of spinning. A spinning
 * client holds its core for its whole batch, as a native one does; beside a burst of another
 * process (B8's newcomer) that is a core the burst waits for, and the client's own turn, once
 * taken from it, comes back a time slice later. Sleeping keeps its claim on the CPU (a thread
 * that slept runs soon after it wakes) at the cost of up to the nap's length per synchronize.
 * For measuring the choice (bench mode openmps-nap).
 */
#define WORD_NAP_AFTER_NS 100000ll /* 100 µs */

static unsigned word_nap_us(void)
{
    static unsigned us = ~0u;

    return om_client_env_us(&us, "OPENMPS_WORD_NAP_US", 0, 10000);
}

/* Whether the word reached seq within WORD_SPIN_NS (numbers wrap: compared as a distance);
 * yield: the thread gives its core away between looks (CU_CTX_SCHED_YIELD). */
static bool word_reached(uint32_t seq, bool yield)
{
    int64_t start = mono_ns(), now;
    unsigned nap = word_nap_us();

    for (unsigned i = 0;; i++) {
        if ((int32_t)(__atomic_load_n(word, __ATOMIC_ACQUIRE) - seq) >= 0)
            return true;
        /* each yield or nap may last a time slice: the clock is read after each */
        if ((i & 255) == 255 || yield || nap) {
            if ((now = mono_ns()) - start > WORD_SPIN_NS)
                return false;
            if (nap && now - start > WORD_NAP_AFTER_NS) {
                struct timespec t = {0, (long)nap * 1000};
                nanosleep(&t, NULL);
                continue;
            }
        }
        if (yield)
            sched_yield();
#if defined(__x86_64__) || defined(__i386__)
        else
            __builtin_ia32_pause();
#elif defined(__aarch64__)
        else
            __asm__ volatile("yield");
#endif
    }
}

/* The scheduling policy of the calling thread's context (CU_CTX_SCHED_*; 0: automatic). */
static unsigned current_sched(void)
{
    CUcontext cur;
    unsigned flags = 0;

    om_current_context(&cur);
    if (cur && !om_ctx_created_flags(cur, &flags) && om_ctx_device(cur) >= 0)
        flags = primary_flags[om_ctx_device(cur)];
    return flags & CU_CTX_SCHED_MASK;
}

CUresult om_word_sync(int index, const struct om_wbuf *req, bool *done)
{
    unsigned sched = current_sched();
    uint64_t seq = 0;
    uint32_t got = 0;
    CUresult rc;

    *done = false;
    /* A context made to sleep in its synchronizes (cudaDeviceScheduleBlockingSync) sleeps
     * here too: in its ring, while the server waits. */
    if (sched == CU_CTX_SCHED_BLOCKING_SYNC || !word_mapped())
        return CUDA_SUCCESS;
    rc = om_rcall(index, req, &seq, sizeof(seq), &got);
    /* an answer, or a number the word reached; else the server waits (and answers a fault) */
    *done = rc != CUDA_SUCCESS || got != sizeof(seq) ||
            word_reached((uint32_t)seq, sched == CU_CTX_SCHED_YIELD);
    return rc;
}

/* Waits for this client's streams only, never for the shared context. */
CUresult om_r_cuCtxSynchronize(void)
{
    REQ(req, 8);
    bool done;
    CUresult rc = om_word_sync(OM_IDX_op_ctx_sync_word, &req, &done);

    return om_managed_pull(done ? rc : om_rpc_cuCtxSynchronize());
}

CUresult om_r_cuCtxSynchronize_v2(CUcontext ctx)
{
    (void)ctx; /* one context per device; the client's streams are all its work */
    return om_r_cuCtxSynchronize();
}

/* ------------------------------------------------------------------ private export tables */

/* The tables the runtime and libraries ask for: served, forwarded or refused (state/tables.c). */
CUresult om_r_cuGetExportTable(const void **table, const CUuuid *uuid)
{
    return om_export_table(table, uuid);
}
