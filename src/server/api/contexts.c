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

/* The sync_word operation: the session's completion word, its page sent read-only after the
 * answer (syncword.c); NOT_SUPPORTED while OPENMPS_SYNC_WORD is off. Request: nothing. */
CUresult om_x_op_sync_word(struct call *c)
{
    CUresult rc = ARGS_OK(c);
    int fd;

    if (rc != CUDA_SUCCESS)
        return rc;
    rc = om_syncword_take(c->s, &fd);
    if (rc == CUDA_SUCCESS) {
        c->s->send_fd_after = fd; /* serve() sends it once the answer is out */
        c->s->send_fd_close = true;
    }
    return rc;
}

/* Whether st has work not done yet: 1 yes, 0 no, -1 the query failed (an error to report as
 * the driver's synchronize would). */
static int busy(CUstream st)
{
    CUresult rc = ((CUresult(*)(CUstream))REAL(cuStreamQuery))(st);
    return rc == CUDA_ERROR_NOT_READY ? 1 : rc == CUDA_SUCCESS ? 0 : -1;
}

/* The synchronize asked with the word, answered after the work, the reason counted. */
static CUresult declined(struct call *c, enum om_syncword_why why)
{
    om_syncword_declined(c->s, why);
    return om_hook_cuCtxSynchronize(c);
}

/*
 * The ctx_sync_word operation: a program's cuCtxSynchronize, which may be answered at once
 * (syncword.c). Answered with a u64 N, the client waits until its word holds N; answered with
 * nothing, the synchronize is done, as cuCtxSynchronize's. Deferred where syncword.c allows it
 * (om_syncword_may_defer) and one of the client's streams is busy (several would need a join).
 * Request: nothing.
 */
CUresult om_x_op_ctx_sync_word(struct call *c)
{
    struct session *s = c->s;
    CUstream one = NULL;
    int n = 0, b;
    uint32_t seq;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!om_syncword_may_defer(s))
        return om_hook_cuCtxSynchronize(c); /* counted why */
    if (om_streams_touched_only(s)) {
        /* Only the streams calls were resolved to since they were last seen idle (route.c):
         * a PyTorch process owns 16 streams and uses one, and each query of an idle stream
         * costs a turn of the context's lock (B7 profile: 76 µs a synchronize with all). */
        for (size_t i = s->touched.n; i-- > 0 && n < 2;) {
            CUstream st = (CUstream)(uintptr_t)s->touched.v[i];
            if ((b = busy(st)) < 0)
                return declined(c, OM_SYNCWORD_STATE);
            if (b)
                one = st, n++;
            else
                om_stream_idle_seen(s, st);
        }
        goto counted;
    }
    if (s->default_stream && (b = busy(s->default_stream)) != 0) {
        if (b < 0)
            return declined(c, OM_SYNCWORD_STATE);
        one = s->default_stream, n++;
    }
    for (int d = 0; d < (int)OM_MAX_DEVICES && n < 2; d++)
        if (s->default_streams[d] && s->default_streams[d] != s->default_stream &&
            (b = busy(s->default_streams[d])) != 0) {
            if (b < 0)
                return declined(c, OM_SYNCWORD_STATE);
            one = s->default_streams[d], n++;
        }
    for (size_t i = 0; i < s->own[OM_H_STREAM].n && n < 2; i++) {
        CUstream st = (CUstream)(uintptr_t)s->own[OM_H_STREAM].v[i];
        if ((b = busy(st)) != 0) {
            if (b < 0)
                return declined(c, OM_SYNCWORD_STATE);
            one = st, n++;
        }
    }
counted:
    if (n != 1)
        return declined(c, n ? OM_SYNCWORD_STREAMS : OM_SYNCWORD_IDLE);
    if (!(seq = om_syncword_arm(s, one)))
        return om_hook_cuCtxSynchronize(c); /* arm counted why */
    om_put_u64(&c->out, seq);
    return CUDA_SUCCESS;
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
