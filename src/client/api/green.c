/* SPDX-License-Identifier: MIT */
/*
 * Remote mode: green contexts and device resources (api/remote/green.tsv). The server makes real
 * green contexts for this process; a CUdevResource is the server's copy (its hidden bytes name
 * the real struct the server keeps). A green context's CUcontext (cuCtxFromGreenCtx) is a token
 * here, like a created context's (the tokens are state/current.c's): current, it makes
 * cuStreamCreate's streams in the green context.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "../../common/gen/entries.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "../shim.h"
#include "openmps/ops.h"

#define RES_BYTES 144 /* sizeof(CUdevResource) */
#define SPLIT_MAX 256 /* groups one split answers at most (the server's bound) */
#define DESC_RES_MAX 128

/* ------------------------------------------------------------------ resources */

/* A call answered by one resource. */
static CUresult resource_call(int index, uint64_t a, uint64_t type, CUdevResource *res)
{
    REQ(req, 16);
    uint32_t got = 0;
    uint8_t reply[RES_BYTES];
    CUresult rc;

    if (!res)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, a);
    om_put_u64(&req, type);
    rc = om_rcall(index, &req, reply, sizeof(reply), &got);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (got != RES_BYTES)
        return CUDA_ERROR_UNKNOWN;
    memcpy(res, reply, RES_BYTES);
    return CUDA_SUCCESS;
}

CUresult om_r_cuDeviceGetDevResource(CUdevice dev, CUdevResource *res, CUdevResourceType type)
{
    if (dev < 0 || dev >= (int)om_shim.client.ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    return resource_call(OM_IDX_cuDeviceGetDevResource, (uint64_t)dev, (uint64_t)(int64_t)type,
                         res);
}

CUresult om_r_cuGreenCtxGetDevResource(CUgreenCtx g, CUdevResource *res, CUdevResourceType type)
{
    if (!g)
        return CUDA_ERROR_INVALID_CONTEXT;
    return resource_call(OM_IDX_cuGreenCtxGetDevResource, (uint64_t)(uintptr_t)g,
                         (uint64_t)(int64_t)type, res);
}

/* A green context's token: its resource; any other context: its device's. */
CUresult om_r_cuCtxGetDevResource(CUcontext ctx, CUdevResource *res, CUdevResourceType type)
{
    CUgreenCtx g;
    CUdevice dev;

    if (!ctx)
        om_current_context(&ctx);
    if (!ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    if ((g = om_green_of_context(ctx)))
        return om_r_cuGreenCtxGetDevResource(g, res, type);
    if (om_ctx_get_device(ctx, &dev) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    return om_r_cuDeviceGetDevResource(dev, res, type);
}

CUresult om_r_cuDevSmResourceSplitByCount(CUdevResource *result, unsigned *nbGroups,
                                          const CUdevResource *input, CUdevResource *remaining,
                                          unsigned useFlags, unsigned minCount)
{
    static uint8_t reply[8 + (SPLIT_MAX + 1) * RES_BYTES];
    static pthread_mutex_t reply_lock = PTHREAD_MUTEX_INITIALIZER;
    REQ(req, 40 + RES_BYTES);
    uint32_t got = 0;
    struct om_rbuf in;
    unsigned cap;
    uint64_t n;
    CUresult rc;

    if (!nbGroups || !input)
        return CUDA_ERROR_INVALID_VALUE;
    /* No device has more groups than SPLIT_MAX: a larger array is only partly used. */
    cap = result ? (*nbGroups > SPLIT_MAX ? SPLIT_MAX : *nbGroups) : 0;
    om_put_u64(&req, cap);
    om_put_u64(&req, result != NULL);
    om_put_u64(&req, remaining != NULL);
    om_put_u64(&req, useFlags);
    om_put_u64(&req, minCount);
    om_put_bytes(&req, input, RES_BYTES);
    pthread_mutex_lock(&reply_lock);
    rc = om_rcall(OM_IDX_cuDevSmResourceSplitByCount, &req, reply, sizeof(reply), &got);
    if (rc == CUDA_SUCCESS) {
        in = (struct om_rbuf){.p = reply, .len = got};
        n = om_get_u64(&in);
        if (in.bad || (result && n > cap) || n > UINT32_MAX) {
            rc = CUDA_ERROR_UNKNOWN;
        } else {
            const void *v;
            for (uint64_t i = 0; result && i < n; i++)
                if ((v = om_get_bytes(&in, RES_BYTES)))
                    memcpy(&result[i], v, RES_BYTES);
            if (remaining && (v = om_get_bytes(&in, RES_BYTES)))
                memcpy(remaining, v, RES_BYTES);
            if (in.bad)
                rc = CUDA_ERROR_UNKNOWN;
            else
                *nbGroups = (unsigned)n;
        }
    }
    pthread_mutex_unlock(&reply_lock);
    return rc;
}

CUresult om_r_cuDevResourceGenerateDesc(CUdevResourceDesc *desc, CUdevResource *res, unsigned n)
{
    static uint8_t req_buf[8 + DESC_RES_MAX * RES_BYTES];
    static pthread_mutex_t req_lock = PTHREAD_MUTEX_INITIALIZER;
    struct om_wbuf req = {.p = req_buf, .cap = sizeof(req_buf)};
    uint64_t h = 0;
    uint8_t reply[8];
    uint32_t got = 0;
    struct om_rbuf in;
    CUresult rc;

    if (!desc || !res || n == 0 || n > DESC_RES_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&req_lock);
    om_put_u64(&req, n);
    om_put_bytes(&req, res, (size_t)n * RES_BYTES);
    rc = om_rcall(OM_IDX_cuDevResourceGenerateDesc, &req, reply, sizeof(reply), &got);
    pthread_mutex_unlock(&req_lock);
    if (rc != CUDA_SUCCESS)
        return rc;
    in = (struct om_rbuf){.p = reply, .len = got};
    h = om_get_u64(&in);
    if (in.bad)
        return CUDA_ERROR_UNKNOWN;
    *desc = (CUdevResourceDesc)(uintptr_t)h;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ green contexts */

static CUresult call3(int index, uint64_t a, uint64_t b, uint64_t c, uint64_t *ret)
{
    REQ(req, 24);
    uint8_t reply[8];
    uint32_t got = 0;
    struct om_rbuf in;
    CUresult rc;

    om_put_u64(&req, a);
    om_put_u64(&req, b);
    om_put_u64(&req, c);
    rc = om_rcall(index, &req, reply, sizeof(reply), &got);
    if (rc != CUDA_SUCCESS || !ret)
        return rc;
    in = (struct om_rbuf){.p = reply, .len = got};
    *ret = om_get_u64(&in);
    return in.bad ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
}

CUresult om_r_cuGreenCtxCreate(CUgreenCtx *pctx, CUdevResourceDesc desc, CUdevice dev,
                               unsigned flags)
{
    uint64_t h = 0;
    CUresult rc;

    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= (int)om_shim.client.ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    rc = call3(OM_IDX_cuGreenCtxCreate, (uint64_t)(uintptr_t)desc, (uint64_t)dev, flags, &h);
    if (rc != CUDA_SUCCESS)
        return rc;
    om_green_register(h, dev);
    /* The server holds fewer than state/current.c's slots for one client: one is always free. */
    *pctx = (CUgreenCtx)(uintptr_t)h;
    return CUDA_SUCCESS;
}

CUresult om_r_cuGreenCtxDestroy(CUgreenCtx g)
{
    CUresult rc;

    if (!g)
        return CUDA_ERROR_INVALID_CONTEXT;
    rc = call3(OM_IDX_cuGreenCtxDestroy, (uint64_t)(uintptr_t)g, 0, 0, NULL);
    if (rc != CUDA_SUCCESS)
        return rc;
    om_green_unregister((uint64_t)(uintptr_t)g);
    /* the server has none current now (a new one may get the same handle) */
    om_transport_green_gone((uint64_t)(uintptr_t)g);
    return CUDA_SUCCESS;
}

CUresult om_r_cuCtxFromGreenCtx(CUcontext *pctx, CUgreenCtx g)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    return om_green_token(g, pctx) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

/* NULL: the current context's green context. */
CUresult om_r_cuGreenCtxGetId(CUgreenCtx g, unsigned long long *id)
{
    if (!g && !om_green_current(&g))
        return CUDA_ERROR_INVALID_CONTEXT;
    return om_rpc_cuGreenCtxGetId(g, id);
}

CUresult om_r_cuGreenCtxRecordEvent(CUgreenCtx g, CUevent ev)
{
    if (!g)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    return call3(OM_IDX_cuGreenCtxRecordEvent, (uint64_t)(uintptr_t)g, (uint64_t)(uintptr_t)ev, 0,
                 NULL);
}

CUresult om_r_cuGreenCtxWaitEvent(CUgreenCtx g, CUevent ev)
{
    if (!g)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    return call3(OM_IDX_cuGreenCtxWaitEvent, (uint64_t)(uintptr_t)g, (uint64_t)(uintptr_t)ev, 0,
                 NULL);
}

/* A stream in green context g (flags 0: blocking, as cuStreamCreate may ask), seen by
 * cuStreamGetCtx as made in the green context's token. */
CUresult om_green_stream_create(CUstream *s, CUgreenCtx g, unsigned flags, int priority)
{
    uint64_t h = 0;
    CUcontext ctx = NULL;
    CUresult rc;

    if (!s)
        return CUDA_ERROR_INVALID_VALUE;
    if (!g)
        return CUDA_ERROR_INVALID_CONTEXT;
    rc = call3(OM_IDX_cuGreenCtxStreamCreate, (uint64_t)(uintptr_t)g, flags,
               (uint64_t)(int64_t)priority, &h);
    if (rc != CUDA_SUCCESS)
        return rc;
    *s = (CUstream)(uintptr_t)h;
    /* om_stream_created records the current context: the green context's for this call. */
    if (om_green_token(g, &ctx) && om_current_push(ctx) == CUDA_SUCCESS) {
        rc = om_stream_created(CUDA_SUCCESS, s);
        om_current_pop(NULL);
        return rc;
    }
    return om_stream_created(CUDA_SUCCESS, s);
}

CUresult om_r_cuGreenCtxStreamCreate(CUstream *s, CUgreenCtx g, unsigned flags, int priority)
{
    if (flags != CU_STREAM_NON_BLOCKING) /* required */
        return CUDA_ERROR_INVALID_VALUE;
    return om_green_stream_create(s, g, flags, priority);
}

/* The NULL, legacy and per-thread streams: the current context's green context. */
CUresult om_r_cuStreamGetGreenCtx(CUstream s, CUgreenCtx *pg)
{
    uint64_t h = 0;
    CUresult rc;

    if (!pg)
        return CUDA_ERROR_INVALID_VALUE;
    if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
        om_green_current(pg);
        return CUDA_SUCCESS;
    }
    rc = call3(OM_IDX_cuStreamGetGreenCtx, (uint64_t)(uintptr_t)s, 0, 0, &h);
    if (rc == CUDA_SUCCESS)
        *pg = (CUgreenCtx)(uintptr_t)h;
    return rc;
}
