/* SPDX-License-Identifier: MIT */
/* The executor: runs a client's driver calls on the real driver, inside the rules of
 * ARCHITECTURE.md. */
#include <errno.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "../common/image.h"
#include "../common/log.h"
#include "../common/msg.h"
#include "../common/wire.h"
#include "exec.h"
#include "openmps/ops.h"

/*
 * Every handler takes the request (untrusted bytes, read through om_rbuf),
 * checks every handle and address range against what this client owns, and
 * returns a CUresult; answers go into `out`. The rules that keep clients
 * independent: never the context's NULL stream (each client gets its own
 * non-blocking streams), synchronous calls become asynchronous ones on the
 * client's stream followed by a wait on that stream only, and nothing that
 * waits for every kernel (cuMemFree, module unload) is issued for a client.
 */

__attribute__((noinline, cold)) static void log_bad_request(struct session *s)
{
    client_err(s, "client %d: malformed request", (int)s->pid);
}

CUresult om_bad_request(struct call *c)
{
    log_bad_request(c->s);
    return CUDA_ERROR_INVALID_VALUE;
}

/* The bytes the client staged for this call (session.c): exactly n of them, or why not (a
 * budget refused some, or the client staged another length: `mismatch`). */
CUresult om_staged(struct call *c, uint64_t n, CUresult mismatch)
{
    if (c->s->stage_error != CUDA_SUCCESS)
        return c->s->stage_error;
    return n == c->s->stage_len ? CUDA_SUCCESS : mismatch;
}

/* The client's stream for a handle it passed: its own default stream for the
 * NULL, legacy and per-thread handles (never the shared context's NULL
 * stream), or a stream it created. NULL when it does not own the handle. */
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
 * events (ARCHITECTURE.md): work on it waits for the client's blocking streams,
 * and work on a blocking stream waits for it. Streams created non-blocking and
 * clients using only the default stream pay nothing.
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

CUstream om_find_stream(struct session *s, uint64_t h, bool enqueue, CUresult *rc)
{
    bool ordered = false;
    CUstream st = find_stream(s, h, enqueue, &ordered, rc);

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

CUresult om_exec(struct session *s, int index, const void *in, size_t in_len, void *out,
                 size_t out_cap, size_t *ret_out_len, bool posted)
{
    struct call c = {.s = s, .in = {.p = in, .len = in_len}, .out = {.p = out, .cap = out_cap}};
    om_handler h = index >= 0 && index < OM_HANDLER_COUNT ? om_handlers[index] : NULL;
    CUresult rc;

    s->call_stream = NULL;
    if (!h) {
        client_err(s, "client %d asked for %s, which the server does not execute", (int)s->pid,
                   index >= 0 && index < OM_HANDLER_COUNT ? om_server_entry_name(index) : "?");
        rc = CUDA_ERROR_NOT_SUPPORTED;
    } else {
        rc = h(&c);
    }
    if (c.out.overflow)
        rc = CUDA_ERROR_UNKNOWN;
    if (om_server_fatal(rc)) {
        om_err("client %d: %s failed with CUresult %d, a fatal GPU fault", (int)s->pid,
               om_server_entry_name(index), rc);
        om_server_fault(rc, s->pid);
    }
    if (posted && rc != CUDA_SUCCESS)
        om_error_post(s, rc); /* its stream's synchronising calls report it (errors.c) */
    else if (rc == CUDA_SUCCESS && s->nperr &&
             (index == OM_IDX_cuEventRecord || index == OM_IDX_cuEventRecordWithFlags)) {
        uint64_t ev; /* the event, first in both requests (api/remote/streams.tsv), checked */
        memcpy(&ev, in, sizeof(ev));
        om_error_event_recorded(s, (CUevent)(uintptr_t)ev); /* it stands behind the error */
    }
    if (posted && s->send_fd_close && s->send_fd_after >= 0)
        close(s->send_fd_after);
    if (posted) {
        s->send_fd_after = -1; /* a descriptor only ever follows an answer */
        s->send_fd_close = false;
    }
    *ret_out_len = rc == CUDA_SUCCESS ? c.out.len : 0;
    return rc;
}
