/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of streams, events and synchronisation. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/image.h"
#include "../../common/msg.h"
#include "../exec.h"
#include "openmps/ops.h"

/* ------------------------------------------------------------------ streams, events */

CUresult om_x_cuStreamCreate(struct call *c)
{
    CUresult (*fn)(CUstream *, unsigned, int) = REAL(cuStreamCreateWithPriority);
    uint64_t flags = om_get_u64(&c->in), prio = om_get_u64(&c->in);
    CUstream st = NULL;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (c->s->own[OM_H_STREAM].n >= om_budget.client_streams)
        return om_budget_refuse(c->s, OM_BUDGET_STREAMS, "cuStreamCreate");
    /* Always non-blocking: a blocking stream would wait for the shared
     * context's NULL stream, that is, for every client. */
    rc = fn(&st, (unsigned)flags | CU_STREAM_NON_BLOCKING, (int)(int64_t)prio);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (om_idle_track(st) < 0) {
        ((CUresult(*)(CUstream))REAL(cuStreamDestroy_v2))(st);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (om_handles_add(&c->s->own[OM_H_STREAM], (uint64_t)(uintptr_t)st) < 0 ||
        (!(flags & CU_STREAM_NON_BLOCKING) &&
         om_handles_add(&c->s->blocking, (uint64_t)(uintptr_t)st) < 0)) {
        om_handles_remove(&c->s->own[OM_H_STREAM], (uint64_t)(uintptr_t)st);
        om_idle_stream_destroy(st);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    om_sched_stream_created();
    om_put_u64(&c->out, (uint64_t)(uintptr_t)st);
    return CUDA_SUCCESS;
}

/* A stream argument; `enqueue`: the call puts an operation on it (see client_stream). */
static CUresult owned_stream(struct call *c, bool enqueue, CUstream *st)
{
    uint64_t h = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    *st = om_find_stream(c->s, h, enqueue, &rc);
    return rc;
}

CUresult om_x_cuStreamDestroy_v2(struct call *c)
{
    uint64_t h = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!om_handles_has(&c->s->own[OM_H_STREAM], h))
        return CUDA_ERROR_INVALID_HANDLE;
    /* Its work must be done before the stream is forgotten: later frees and the
     * session's end wait only for streams they know. */
    rc = om_wait_stream((CUstream)(uintptr_t)h);
    if (rc != CUDA_SUCCESS && c->s->async_error == CUDA_SUCCESS)
        c->s->async_error = rc;
    om_handles_remove(&c->s->own[OM_H_STREAM], h);
    om_handles_remove(&c->s->blocking, h);
    om_sched_stream_destroyed(c->s, (CUstream)(uintptr_t)h);
    for (size_t i = 0; i < c->s->nsync_events; i++) {
        if (c->s->sync_events[i].stream == (CUstream)(uintptr_t)h) {
            ((CUresult(*)(CUevent))REAL(cuEventDestroy_v2))(c->s->sync_events[i].event);
            c->s->sync_events[i] = c->s->sync_events[--c->s->nsync_events];
            break;
        }
    }
    return om_idle_stream_destroy((CUstream)(uintptr_t)h);
}

CUresult om_x_cuStreamSynchronize(struct call *c)
{
    CUstream st;
    CUresult rc = owned_stream(c, false, &st);

    if (rc == CUDA_SUCCESS)
        rc = om_wait_stream(st);
    return om_take_async_error(c->s, rc);
}

static CUresult owned_event(struct call *c, CUevent *ev)
{
    uint64_t h = om_get_u64(&c->in);

    if (c->in.bad)
        return om_bad_request(c);
    if (!om_handles_has(&c->s->own[OM_H_EVENT], h))
        return CUDA_ERROR_INVALID_HANDLE;
    *ev = (CUevent)(uintptr_t)h;
    return CUDA_SUCCESS;
}

CUresult om_x_cuEventSynchronize(struct call *c)
{
    CUevent ev = NULL;
    CUresult rc = owned_event(c, &ev);

    if (rc == CUDA_SUCCESS)
        rc = om_wait_event(ev);
    return om_take_async_error(c->s, rc);
}

CUresult om_x_cuCtxSynchronize(struct call *c)
{
    return om_take_async_error(c->s, om_exec_sync_client(c->s));
}

CUresult om_x_cuStreamGetFlags(struct call *c)
{
    uint64_t h = om_get_u64(&c->in);
    unsigned flags = 0;
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    st = om_find_stream(c->s, h, false, &rc);
    if (st)
        rc = ((CUresult(*)(CUstream, unsigned *))REAL(cuStreamGetFlags))(st, &flags);
    /* What the client asked for: its blocking streams are non-blocking on the server. */
    if (rc == CUDA_SUCCESS && (om_handles_has(&c->s->blocking, h) || h <= 2))
        flags &= ~CU_STREAM_NON_BLOCKING;
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, flags);
    return rc;
}

/* ------------------------------------------------------------------ dispatch */

/* An event shared through an IPC handle is destroyed by its last holder (ipc.c). */
CUresult om_x_cuEventDestroy_v2(struct call *c)
{
    uint64_t ev = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_arg_handle(c, OM_H_EVENT, ev, false)) != CUDA_SUCCESS)
        return rc;
    om_own_drop(c->s, OM_H_EVENT, ev);
    if (!om_ipc_event_release(ev))
        return CUDA_SUCCESS;
    return ((CUresult(*)(CUevent))REAL(cuEventDestroy_v2))((CUevent)(uintptr_t)ev);
}
