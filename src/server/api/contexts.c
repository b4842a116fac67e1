/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of contexts: a client's events recorded after, and waited
 * for by, all of its own streams (never the shared context's). */
#include <stdint.h>

#include "../exec.h"

/* The stream cuCtxRecordEvent records on: it waits for each of the client's streams, so the
 * event captures the client's work only, and no stream of the client is made to wait. */
static CUstream joining_stream(struct session *s, CUresult *rc)
{
    if (!s->ctx_stream)
        *rc = ((CUresult(*)(CUstream *, unsigned))REAL(cuStreamCreate))(&s->ctx_stream,
                                                                        CU_STREAM_NON_BLOCKING);
    return s->ctx_stream;
}

void om_ctx_release(struct session *s)
{
    if (s->ctx_stream)
        ((CUresult(*)(CUstream))REAL(cuStreamDestroy_v2))(s->ctx_stream);
    s->ctx_stream = NULL;
}

static CUresult owned_event(struct call *c, CUevent *ev)
{
    uint64_t h = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_arg_handle(c, OM_H_EVENT, h, false)) != CUDA_SUCCESS)
        return rc;
    *ev = (CUevent)(uintptr_t)h;
    return CUDA_SUCCESS;
}

/* Records the event after everything the client enqueued so far, on any of its streams. */
CUresult om_x_cuCtxRecordEvent(struct call *c)
{
    struct session *s = c->s;
    CUevent ev = NULL;
    CUresult rc = owned_event(c, &ev);
    CUstream join;

    if (rc != CUDA_SUCCESS)
        return rc;
    join = joining_stream(s, &rc);
    if (rc != CUDA_SUCCESS || !join)
        return rc != CUDA_SUCCESS ? rc : CUDA_ERROR_UNKNOWN;
    if (s->default_stream)
        rc = om_order_after(s, join, s->default_stream, true);
    for (size_t i = 0; i < s->own[OM_H_STREAM].n && rc == CUDA_SUCCESS; i++)
        rc = om_order_after(s, join, (CUstream)(uintptr_t)s->own[OM_H_STREAM].v[i], true);
    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(CUevent, CUstream))REAL(cuEventRecord))(ev, join);
    return rc;
}

/* Later work on every stream of the client (its default stream included) waits for the event.
 * Streams the client creates afterwards do not (docs/architecture.md). */
CUresult om_x_cuCtxWaitEvent(struct call *c)
{
    struct session *s = c->s;
    CUresult (*wait)(CUstream, CUevent, unsigned) = REAL(cuStreamWaitEvent);
    CUevent ev = NULL;
    CUresult rc = owned_event(c, &ev);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    st = om_find_stream(s, 0, true, &rc);
    if (st)
        rc = wait(st, ev, 0);
    for (size_t i = 0; i < s->own[OM_H_STREAM].n && rc == CUDA_SUCCESS; i++) {
        st = om_find_stream(s, s->own[OM_H_STREAM].v[i], true, &rc);
        if (st)
            rc = wait(st, ev, 0);
    }
    return rc;
}
