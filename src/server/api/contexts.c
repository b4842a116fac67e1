/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of contexts: a client's events recorded after, and waited
 * for by, all of its own streams (never the shared context's). */
#include <stdint.h>

#include "../exec.h"

/* The stream cuCtxRecordEvent records on, in the current device's context: it waits for each
 * of the client's streams there, so the event captures the client's work only, and no stream
 * of the client is made to wait. */
static CUstream joining_stream(struct session *s, CUresult *rc)
{
    CUstream *join = &s->ctx_streams[s->dev];

    if (!*join)
        *rc =
            ((CUresult(*)(CUstream *, unsigned))REAL(cuStreamCreate))(join, CU_STREAM_NON_BLOCKING);
    return *join;
}

void om_ctx_release(struct session *s)
{
    for (int d = 0; d < (int)OM_MAX_DEVICES; d++) {
        if (s->ctx_streams[d])
            ((CUresult(*)(CUstream))REAL(cuStreamDestroy_v2))(s->ctx_streams[d]);
        s->ctx_streams[d] = NULL;
    }
}

/* A stream of the client's on the device its calls run on now (the context the client named:
 * its shim makes it current first). */
static bool here(const struct session *s, uint64_t h)
{
    return om_handle_device(s, h) == s->dev;
}

/* Records the event after everything the client enqueued so far in the context, on any of its
 * streams of that device. */
CUresult om_hook_cuCtxRecordEvent(struct call *c, CUcontext ctx, CUevent ev)
{
    struct session *s = c->s;
    CUresult rc = CUDA_SUCCESS;
    CUstream join;

    join = joining_stream(s, &rc);
    if (rc != CUDA_SUCCESS || !join)
        return rc != CUDA_SUCCESS ? rc : CUDA_ERROR_UNKNOWN;
    if (s->default_stream)
        rc = om_order_after(s, join, s->default_stream, true);
    for (size_t i = 0; i < s->own[OM_H_STREAM].n && rc == CUDA_SUCCESS; i++)
        if (here(s, s->own[OM_H_STREAM].v[i]))
            rc = om_order_after(s, join, (CUstream)(uintptr_t)s->own[OM_H_STREAM].v[i], true);
    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(CUevent, CUstream))REAL(cuEventRecord))(ev, join);
    return rc;
}

/* Later work on every stream of the client on the context's device (its default stream
 * included) waits for the event. Streams the client creates afterwards do not
 * (docs/architecture.md). */
CUresult om_hook_cuCtxWaitEvent(struct call *c, CUcontext ctx, CUevent ev)
{
    struct session *s = c->s;
    CUresult (*wait)(CUstream, CUevent, unsigned) = REAL(cuStreamWaitEvent);
    CUresult rc = CUDA_SUCCESS;
    CUstream st;

    st = om_find_stream(s, 0, true, &rc);
    if (st)
        rc = wait(st, ev, 0);
    for (size_t i = 0; i < s->own[OM_H_STREAM].n && rc == CUDA_SUCCESS; i++) {
        if (!here(s, s->own[OM_H_STREAM].v[i]))
            continue;
        st = om_find_stream(s, s->own[OM_H_STREAM].v[i], true, &rc);
        if (st)
            rc = wait(st, ev, 0);
    }
    return rc;
}

/* Its waits end in the driver's synchronize: the kernels' printf output comes out here, in
 * this client's answer (wait.c). */
CUresult om_hook_cuCtxSynchronize(struct call *c)
{
    CUresult rc;

    om_wait_flush_output(true);
    rc = om_exec_sync_client(c->s);
    om_wait_flush_output(false);
    return om_take_context_errors(c->s, rc);
}
