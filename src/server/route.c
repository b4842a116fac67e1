/* SPDX-License-Identifier: MIT */
/*
 * The stream routing: the server stream a client's stream handle goes to (its own default
 * stream for the NULL, legacy and per-thread handles, never the shared context's NULL stream),
 * with the legacy default stream's ordering rebuilt within the client, the scheduler's hold and
 * the SM share's shadow (share.c) on the way; a client's streams made and destroyed. Families
 * call down into it; it calls the scheduling layer (share.c, sched.c) and the stream state below.
 */
#include <stdlib.h>

#include "exec.h"

/* ------------------------------------------------------------------ ordering */

/* The event a stream's later readers wait on (one per stream, reused: a wait
 * takes the event's state when it is enqueued). */
static CUevent sync_event(struct session *s, CUstream st, CUresult *rc)
{
    CUresult (*create)(CUevent *, unsigned) = REAL(cuEventCreate);

    for (size_t i = 0; i < s->nsync_events; i++)
        if (s->sync_events[i].stream == st)
            return s->sync_events[i].event;
    if (s->nsync_events == s->sync_events_cap) {
        size_t cap = s->sync_events_cap ? s->sync_events_cap * 2 : 8;
        struct om_sync_event *n = realloc(s->sync_events, cap * sizeof(*n));
        if (!n) {
            *rc = CUDA_ERROR_OUT_OF_MEMORY;
            return NULL;
        }
        s->sync_events = n;
        s->sync_events_cap = cap;
    }
    CUevent ev = NULL;
    *rc = create(&ev, CU_EVENT_DISABLE_TIMING);
    if (*rc != CUDA_SUCCESS)
        return NULL;
    s->sync_events[s->nsync_events++] = (struct om_sync_event){st, ev};
    return ev;
}

/* `later` waits for everything enqueued on `first` so far. `enqueue`: the caller enqueues an
 * operation on `later` next (else it only queries or waits, and must not be held). */
static CUresult order_after(struct session *s, CUstream later, CUstream first, bool enqueue)
{
    CUresult rc = CUDA_SUCCESS;
    CUevent ev;

    if (om_stream_capturing(s, later) || om_stream_capturing(s, first))
        return CUDA_SUCCESS; /* a record or wait would join or break the capture */
    if (s->nshares && (rc = om_share_settle(s, first, false)) != CUDA_SUCCESS)
        return rc; /* `first`'s kernels in its shadow (share.c) are part of it */
    ev = sync_event(s, first, &rc);
    if (!ev)
        return rc;
    if (enqueue)
        om_sched_before(s, first); /* the record is an operation on `first` */
    rc = ((CUresult(*)(CUevent, CUstream))REAL(cuEventRecord))(ev, first);
    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(CUstream, CUevent, unsigned))REAL(cuStreamWaitEvent))(later, ev, 0);
    return rc;
}

void om_stream_forget_sync(struct session *s, CUstream st)
{
    for (size_t i = 0; i < s->nsync_events; i++)
        if (s->sync_events[i].stream == st) {
            ((CUresult(*)(CUevent))REAL(cuEventDestroy_v2))(s->sync_events[i].event);
            s->sync_events[i] = s->sync_events[--s->nsync_events];
            return;
        }
}

CUresult om_order_after(struct session *s, CUstream later, CUstream first, bool enqueue)
{
    return order_after(s, later, first, enqueue);
}

/*
 * The client's stream for a handle it passed: its own default stream for the
 * NULL, legacy and per-thread handles (never the shared context's NULL
 * stream), or a stream it created. NULL when it does not own the handle.
 *
 * The legacy default stream's semantics inside one client are rebuilt with
 * events (docs/architecture.md, "Concurrency rules in the server"): work on it waits for the
 * client's blocking streams, and work on a blocking stream waits for it. Streams created
 * non-blocking and clients using only the default stream pay nothing.
 */
static CUstream find_stream(struct session *s, uint64_t h, bool enqueue, bool *ordered,
                            CUresult *rc)
{
    CUstream st;

    *rc = CUDA_SUCCESS;
    if (h == 0 || h == (uint64_t)(uintptr_t)CU_STREAM_LEGACY ||
        h == (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD) {
        if (!s->default_stream) {
            CUresult (*create)(CUstream *, unsigned, int) = REAL(cuStreamCreateWithPriority);
            int real = om_priority_stream(s, 0); /* priority.c: natively the least, 0 */
            *rc = create(&s->default_stream, CU_STREAM_NON_BLOCKING, real);
            if (*rc != CUDA_SUCCESS)
                return NULL;
            om_priority_note(s, s->default_stream, 0, real);
            if (om_idle_track(s->default_stream) < 0) {
                ((CUresult(*)(CUstream))REAL(cuStreamDestroy_v2))(s->default_stream);
                s->default_stream = NULL;
                *rc = CUDA_ERROR_OUT_OF_MEMORY;
                return NULL;
            }
        }
        st = s->default_stream;
        if (enqueue && !om_stream_capturing(s, st))
            om_sched_before(s, st);
        for (size_t i = 0; i < s->blocking.n && *rc == CUDA_SUCCESS; i++)
            *rc = order_after(s, st, (CUstream)(uintptr_t)s->blocking.v[i], enqueue);
        *ordered = s->blocking.n != 0;
        return *rc == CUDA_SUCCESS ? st : NULL;
    }
    if (!om_handles_has(&s->own[OM_H_STREAM], h)) {
        *rc = CUDA_ERROR_INVALID_HANDLE;
        return NULL;
    }
    st = (CUstream)(uintptr_t)h;
    if (enqueue && !om_stream_capturing(s, st))
        om_sched_before(s, st); /* its stream query would invalidate a capture */
    if (s->default_stream && om_handles_has(&s->blocking, h)) {
        *rc = order_after(s, st, s->default_stream, enqueue);
        *ordered = true;
    }
    return *rc == CUDA_SUCCESS ? st : NULL;
}

/* st may have work from now on (session.touched). Every path that puts work on a client's
 * stream resolves it here first; the SM share's joins and green contexts' streams do not, and
 * the scan falls back to every stream for those clients (om_streams_touched_only). */
static void touched(struct session *s, CUstream st)
{
    if (st == s->last_touched)
        return; /* a run of calls on one stream: once */
    if (om_handles_add(&s->touched, (uint64_t)(uintptr_t)st) < 0)
        s->touched_lost = true;
    s->last_touched = st;
}

bool om_streams_touched_only(const struct session *s)
{
    return !s->touched_lost && !s->nshares && !s->green && !s->ngstreams;
}

void om_stream_idle_seen(struct session *s, CUstream st)
{
    om_handles_remove(&s->touched, (uint64_t)(uintptr_t)st);
    if (s->last_touched == st)
        s->last_touched = NULL;
}

CUstream om_find_stream(struct session *s, uint64_t h, bool enqueue, CUresult *rc)
{
    bool ordered = false;
    CUstream st = find_stream(s, h, enqueue, &ordered, rc);

    if (st)
        touched(s, st);

    if (st && !s->call_stream)
        s->call_stream = st; /* the call's stream: its errors are this stream's (errors.c) */

    if (st && s->nshares && (*rc = om_share_settle(s, st, enqueue)) != CUDA_SUCCESS)
        return NULL; /* its shadow's kernels come first (share.c) */
    return st;
}

CUstream om_launch_stream(struct call *c, uint64_t h, CUresult *rc)
{
    bool ordered = false;
    CUstream st = find_stream(c->s, h, true, &ordered, rc);

    if (st)
        touched(c->s, st);
    if (st && !c->s->call_stream)
        c->s->call_stream = st;             /* errors.c */
    c->s->worked_mask |= 1ull << c->s->dev; /* session.c: a device it used */
    return st ? om_share_launch(c->s, st, ordered, rc) : NULL;
}

/* The stream an operation is about to be enqueued on: it may wait for the scheduler first. */
CUstream om_arg_stream(struct call *c, uint64_t h, bool enqueue, CUresult *rc)
{
    return om_find_stream(c->s, h, enqueue, rc);
}

#define STREAM_CAPTURE_IMPLICIT 906 /* CUDA_ERROR_STREAM_CAPTURE_IMPLICIT */

/* Whether the legacy stream would depend on a capture: natively it waits for every blocking
 * stream, so while one of them (or the per-thread default stream, which waits for it; here the
 * client's default stream) captures, using it fails with STREAM_CAPTURE_IMPLICIT. */
static bool legacy_in_capture(struct session *s)
{
    if (!s->captures)
        return false;
    if (om_stream_capturing(s, s->default_stream))
        return true;
    for (size_t i = 0; i < s->blocking.n; i++)
        if (om_stream_capturing(s, (CUstream)(uintptr_t)s->blocking.v[i]))
            return true;
    return false;
}

/* The stream whose capture state a call asks (stream.capture: cuStreamIsCapturing, the
 * cuStreamGetCaptureInfo forms): the legacy stream (NULL, CU_STREAM_LEGACY; the shim sends a
 * _ptsz form's NULL as CU_STREAM_PER_THREAD) is refused with STREAM_CAPTURE_IMPLICIT while a
 * blocking or the per-thread stream of the client captures, as natively (CuPy's test suite asks
 * it, and its capture goes on). Only those queries: the other uses of the legacy stream while
 * a blocking stream captures run on the client's default stream, outside the capture (the
 * server's and the shim's own uses of handle 0 mean that stream too); docs/compatibility.md. */
CUstream om_arg_capture_stream(struct call *c, uint64_t h, CUresult *rc)
{
    if ((h == 0 || h == (uint64_t)(uintptr_t)CU_STREAM_LEGACY) && legacy_in_capture(c->s)) {
        *rc = STREAM_CAPTURE_IMPLICIT;
        return NULL;
    }
    return om_find_stream(c->s, h, false, rc);
}

/* Waits for this client's streams (and reports a posted call's error). */
CUresult om_exec_sync_client(struct session *s)
{
    CUresult (*sync)(CUstream) = om_wait_stream;
    CUresult rc = CUDA_SUCCESS, r;

    if (s->default_stream && (r = sync(s->default_stream)) != CUDA_SUCCESS)
        rc = r;
    for (int d = 0; d < (int)OM_MAX_DEVICES; d++) /* its default streams on other devices */
        if (s->default_streams[d] && (r = sync(s->default_streams[d])) != CUDA_SUCCESS && !rc)
            rc = r;
    for (size_t i = 0; i < s->own[OM_H_STREAM].n; i++)
        if ((r = sync((CUstream)(uintptr_t)s->own[OM_H_STREAM].v[i])) != CUDA_SUCCESS && !rc)
            rc = r;
    if (s->nshares && (r = om_share_wait(s)) != CUDA_SUCCESS && !rc)
        rc = r; /* kernels on its shadow streams (share.c) */
    return rc;
}

/* ------------------------------------------------------------------ made and destroyed */

CUresult om_stream_adopt(struct call *c, CUstream st, uint64_t flags)
{
    if (om_idle_track(st) < 0) {
        ((CUresult(*)(CUstream))REAL(cuStreamDestroy_v2))(st);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (!om_note_device(c->s, (uint64_t)(uintptr_t)st, c->s->dev) ||
        om_handles_add(&c->s->own[OM_H_STREAM], (uint64_t)(uintptr_t)st) < 0 ||
        (!(flags & CU_STREAM_NON_BLOCKING) &&
         om_handles_add(&c->s->blocking, (uint64_t)(uintptr_t)st) < 0)) {
        om_forget_device(c->s, (uint64_t)(uintptr_t)st);
        om_handles_remove(&c->s->own[OM_H_STREAM], (uint64_t)(uintptr_t)st);
        om_idle_stream_destroy(st);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    om_sched_stream_created();
    om_put_u64(&c->out, (uint64_t)(uintptr_t)st);
    return CUDA_SUCCESS;
}

/* Destroys a stream of the client's (cuStreamDestroy, cuGreenCtxDestroy). */
CUresult om_stream_release(struct session *s, uint64_t h)
{
    CUresult rc, pending;

    om_green_stream_gone(s, h);                      /* streamstate.c */
    om_share_stream_gone(s, (CUstream)(uintptr_t)h); /* share.c: its shadow, after its work */
    om_priority_forget(s, (CUstream)(uintptr_t)h);   /* priority.c */
    /* Its work must be done before the stream is forgotten: later frees and the
     * session's end wait only for streams they know. */
    rc = om_wait_stream((CUstream)(uintptr_t)h);
    pending = om_error_stream_gone(s, (CUstream)(uintptr_t)h); /* not to a later stream */
    if (rc == CUDA_SUCCESS) /* an error its calls did not take yet: the context's now */
        rc = pending;
    if (rc != CUDA_SUCCESS && s->async_error == CUDA_SUCCESS)
        s->async_error = rc;
    om_handles_remove(&s->own[OM_H_STREAM], h);
    om_stream_idle_seen(s, (CUstream)(uintptr_t)h); /* gone: never queried again */
    om_forget_device(s, h);
    om_handles_remove(&s->blocking, h);
    for (unsigned d = 0; d < OM_MAX_DEVICES; d++) /* one of another device's */
        if (s->blockings[d].n)
            om_handles_remove(&s->blockings[d], h);
    om_sched_stream_destroyed(s, (CUstream)(uintptr_t)h);
    om_stream_forget_sync(s, (CUstream)(uintptr_t)h);
    return om_idle_stream_destroy((CUstream)(uintptr_t)h);
}

/* ------------------------------------------------------------------ the session's end */

/* Its ordering events and blocking sets; its streams no longer counted by the scheduler and the
 * idle tracker (own.c destroyed them). */
void om_route_session_end(struct session *s)
{
    for (size_t i = 0; i < s->nsync_events; i++)
        ((CUresult(*)(CUevent))REAL(cuEventDestroy_v2))(s->sync_events[i].event);
    free(s->sync_events);
    s->sync_events = NULL;
    s->nsync_events = s->sync_events_cap = 0;
    om_handles_free(&s->blocking);
    for (unsigned d = 0; d < OM_MAX_DEVICES; d++)
        om_handles_free(&s->blockings[d]);
    for (size_t i = 0; i < s->own[OM_H_STREAM].n; i++) {
        om_sched_stream_destroyed(s, (CUstream)(uintptr_t)s->own[OM_H_STREAM].v[i]);
        om_idle_stream_destroy((CUstream)(uintptr_t)s->own[OM_H_STREAM].v[i]);
    }
}

/* Its default streams, on every device (after its green contexts gave its own back). */
void om_route_defaults_end(struct session *s)
{
    om_sched_stream_destroyed(s, s->default_stream); /* counted at the session's start */
    if (s->default_stream)
        om_idle_stream_destroy(s->default_stream);
    for (int d = 0; d < (int)OM_MAX_DEVICES; d++) { /* its default streams on other devices */
        if (s->default_streams[d]) {
            om_priority_forget(s, s->default_streams[d]);
            om_idle_stream_destroy(s->default_streams[d]);
        }
        s->default_streams[d] = NULL;
    }
}

/* Waits for its streams' work, where it made any (a default stream of another device too). */
void om_route_session_wait(struct session *s)
{
    bool any = s->default_stream || s->own[OM_H_STREAM].n;

    for (int d = 0; d < (int)OM_MAX_DEVICES && !any; d++)
        any = s->default_streams[d] != NULL;
    if (any)
        om_exec_sync_client(s);
}
