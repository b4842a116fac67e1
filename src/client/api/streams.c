/* SPDX-License-Identifier: MIT */
/* Remote mode, the client's hand-written part of the streams family: a stream's context and
 * device, batches of memory operations. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/gen/entries.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "openmps/ops.h"

/* ------------------------------------------------------------------ streams' context */

/* The priority the program asked for (the server's real one may differ: client priorities). */
CUresult om_r_cuStreamGetPriority(CUstream hStream, int *priority)
{
    return om_rpc_cuStreamGetPriority(hStream, priority);
}

/* The context current when each stream of this process was created: the server's streams all
 * live in its one context per device, the program's view is the context it created them in. */
struct sctx {
    CUstream s;
    CUcontext ctx;
    struct sctx *next;
};
static struct sctx *sctxs;
static pthread_mutex_t sctxs_lock = PTHREAD_MUTEX_INITIALIZER;

CUresult om_stream_created(CUresult rc, CUstream *s)
{
    struct sctx *e;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!(e = calloc(1, sizeof(*e))))
        return CUDA_SUCCESS; /* cuStreamGetCtx answers the current context for it */
    e->s = *s;
    om_current_context(&e->ctx);
    pthread_mutex_lock(&sctxs_lock);
    e->next = sctxs;
    sctxs = e;
    pthread_mutex_unlock(&sctxs_lock);
    return CUDA_SUCCESS;
}

void om_stream_forget(CUstream s)
{
    struct sctx **p, *e = NULL;

    pthread_mutex_lock(&sctxs_lock);
    for (p = &sctxs; *p; p = &(*p)->next) {
        if ((*p)->s == s) {
            e = *p;
            *p = e->next;
            break;
        }
    }
    pthread_mutex_unlock(&sctxs_lock);
    free(e);
}

bool om_stream_known(CUstream s)
{
    struct sctx *e;

    if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
        return true;
    pthread_mutex_lock(&sctxs_lock);
    for (e = sctxs; e && e->s != s; e = e->next) {
    }
    pthread_mutex_unlock(&sctxs_lock);
    return e != NULL;
}

/* The stream's context: the one current at its creation; the current one for the NULL,
 * legacy and per-thread streams. A stream the server does not know as this client's:
 * INVALID_HANDLE (asked through cuStreamGetPriority). */
static CUresult stream_ctx(CUstream s, CUcontext *ctx)
{
    struct sctx *e;
    int prio;
    CUresult rc;

    *ctx = NULL;
    if (s != NULL && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD) {
        if ((rc = om_r_cuStreamGetPriority(s, &prio)) != CUDA_SUCCESS)
            return rc;
        pthread_mutex_lock(&sctxs_lock);
        for (e = sctxs; e && e->s != s; e = e->next) {
        }
        if (e)
            *ctx = e->ctx;
        pthread_mutex_unlock(&sctxs_lock);
    }
    if (!*ctx)
        om_current_context(ctx);
    return *ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult om_r_cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    return stream_ctx(hStream, pctx);
}

CUresult om_r_cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    CUresult rc;

    if (!pCtx || !pGreenCtx)
        return CUDA_ERROR_INVALID_VALUE;
    rc = stream_ctx(hStream, pCtx);
    if (rc == CUDA_SUCCESS)
        *pGreenCtx = om_green_of_context(*pCtx); /* api/green.c; NULL for other contexts */
    return rc;
}

CUresult om_r_cuStreamGetDevice(CUstream hStream, CUdevice *device)
{
    CUcontext ctx;
    CUresult rc;

    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = stream_ctx(hStream, &ctx)) != CUDA_SUCCESS)
        return rc;
    return om_ctx_get_device(ctx, device);
}

/* ------------------------------------------------------------------ batches of memory operations
 */

/* CUstreamBatchMemOpParams: 48 bytes each; the server checks each operation's address. */
#define BATCH_OP_BYTES 48
#define BATCH_MAX 256

CUresult om_r_cuStreamBatchMemOp_v2(CUstream stream, unsigned int count,
                                    CUstreamBatchMemOpParams *paramArray, unsigned int flags)
{
    REQ(req, 32 + BATCH_MAX * BATCH_OP_BYTES);

    if (count > BATCH_MAX || (count && !paramArray))
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)stream);
    om_put_u64(&req, count);
    om_put_u64(&req, flags);
    if (count)
        om_put_bytes(&req, paramArray, (size_t)count * BATCH_OP_BYTES);
    return om_rcall(OM_IDX_cuStreamBatchMemOp_v2, &req, NULL, 0, NULL);
}

/* ------------------------------------------------------------------ stream attributes */

CUresult om_r_cuStreamSetAttribute(CUstream hStream, CUstreamAttrID attr,
                                   const CUstreamAttrValue *value)
{
    REQ(req, 16 + sizeof(CUstreamAttrValue));

    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)hStream);
    om_put_u64(&req, (uint64_t)(int64_t)attr);
    om_put_bytes(&req, value, sizeof(*value));
    return om_rcall(OM_IDX_cuStreamSetAttribute, &req, NULL, 0, NULL);
}

/* ------------------------------------------------------------------ managed memory */

#define MEM_ATTACH_GLOBAL 0x1
#define MEM_ATTACH_HOST 0x2
#define MEM_ATTACH_SINGLE 0x4

/*
 * Managed memory is emulated in this process (state/shadows.c: a shadow copied to and from the
 * device around work): there is no driver association to change. The call is checked as the
 * driver checks it, then accepted: the range is managed memory of this process, the whole
 * allocation (length 0, or its exact extent), one attach flag, a stream the client owns.
 */
CUresult om_r_cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr, size_t length,
                                     unsigned int flags)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    bool managed = false;
    int prio;

    if (flags != MEM_ATTACH_GLOBAL && flags != MEM_ATTACH_HOST && flags != MEM_ATTACH_SINGLE)
        return CUDA_ERROR_INVALID_VALUE;
    if (!om_devrange_find(dptr, &base, &size, &managed) || !managed)
        return CUDA_ERROR_INVALID_VALUE;
    if (length != 0 && (dptr != base || length != size))
        return CUDA_ERROR_INVALID_VALUE;
    if (hStream != NULL && hStream != CU_STREAM_LEGACY && hStream != CU_STREAM_PER_THREAD)
        return om_r_cuStreamGetPriority(hStream, &prio);
    return CUDA_SUCCESS;
}

static CUresult handle_call(int index, const void *h, uint64_t b);

/* ------------------------------------------------------------------ streams, events */

static CUresult create_handle(int index, uint64_t a, uint64_t b, void **out)
{
    uint64_t v;
    CUresult rc;

    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    rc = om_rcall_u64(index, a, b, &v);
    if (rc == CUDA_SUCCESS)
        *out = (void *)(uintptr_t)v;
    return rc;
}

/* A call on one handle whose answer is only its status. */
static CUresult handle_call(int index, const void *h, uint64_t b)
{
    REQ(req, 16);

    om_put_u64(&req, (uint64_t)(uintptr_t)h);
    om_put_u64(&req, b);
    return om_rcall(index, &req, NULL, 0, NULL);
}

CUresult om_r_cuStreamCreate(CUstream *s, unsigned flags)
{
    CUgreenCtx g;

    if (om_green_current(&g)) /* a green context's token is current: a stream of it */
        return om_green_stream_create(s, g, flags, 0);
    return om_stream_created(create_handle(OM_IDX_cuStreamCreate, flags, 0, s), s);
}

CUresult om_r_cuStreamCreateWithPriority(CUstream *s, unsigned flags, int priority)
{
    CUgreenCtx g;

    if (om_green_current(&g))
        return om_green_stream_create(s, g, flags, priority);
    return om_stream_created(
        create_handle(OM_IDX_cuStreamCreate, flags, (uint64_t)(int64_t)priority, s), s);
}

CUresult om_r_cuStreamDestroy_v2(CUstream s)
{
    CUresult rc = handle_call(OM_IDX_cuStreamDestroy_v2, s, 0);

    if (rc == CUDA_SUCCESS)
        om_stream_forget(s);
    return rc;
}

CUresult om_r_cuStreamSynchronize(CUstream s)
{
    REQ(req, 8);
    bool done;
    CUresult rc;

    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    rc = om_word_sync(OM_IDX_op_stream_sync_word, &req, &done); /* api/contexts.c */
    return om_managed_pull(done ? rc : om_rpc_cuStreamSynchronize(s));
}

/* Host functions run in this process, in stream order: the stream's work is
 * waited for, the function runs, and only then does the caller go on to
 * submit later work. (The driver runs them on a thread of its own and does not
 * block the caller; the order the program sees is the same.) */
CUresult om_r_cuLaunchHostFunc(CUstream s, void (*fn)(void *), void *data)
{
    CUresult rc;
    bool captured = false;

    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    /* On a capturing stream: a host node of the capture, run at each launch (api/hostnodes.c). */
    rc = om_hostfunc_capture(s, fn, data, &captured);
    if (rc != CUDA_SUCCESS || captured)
        return rc;
    rc = om_r_cuStreamSynchronize(s);
    if (rc == CUDA_SUCCESS)
        fn(data);
    return rc;
}

CUresult om_r_cuStreamAddCallback(CUstream s, void (*cb)(CUstream, CUresult, void *), void *data,
                                  unsigned flags)
{
    CUresult rc;

    if (!cb || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = om_callback_capture_check(s)) != CUDA_SUCCESS)
        return rc; /* not capturable, as with the driver */
    rc = om_r_cuStreamSynchronize(s);
    cb(s, rc, data); /* called with the stream's error, as the driver does */
    return CUDA_SUCCESS;
}

static CUresult stream_query(int index, CUstream s, uint64_t *out)
{
    uint64_t v = 0;
    uint32_t got = 0;
    REQ(req, 8);
    CUresult rc;

    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    rc = om_rcall(index, &req, &v, sizeof(v), &got);
    if (rc == CUDA_SUCCESS && got != sizeof(v))
        rc = CUDA_ERROR_UNKNOWN;
    *out = v;
    return rc;
}

CUresult om_r_cuStreamGetFlags(CUstream s, unsigned *flags)
{
    uint64_t v;
    CUresult rc;

    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    rc = stream_query(OM_IDX_cuStreamGetFlags, s, &v);
    if (rc == CUDA_SUCCESS)
        *flags = (unsigned)v;
    return rc;
}

CUresult om_r_cuEventSynchronize(CUevent e)
{
    return om_managed_pull(om_rpc_cuEventSynchronize(e));
}

/* An event's handle goes to the server as it is: the server decides (an IPC-shared event is
 * destroyed by its last holder). */
