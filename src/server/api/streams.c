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
    int real;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (c->s->own[OM_H_STREAM].n >= om_budget.client_streams)
        return om_budget_refuse(c->s, OM_BUDGET_STREAMS, "cuStreamCreate");
    /* Always non-blocking: a blocking stream would wait for the shared
     * context's NULL stream, that is, for every client. */
    real = om_priority_stream(c->s, (int)(int64_t)prio); /* priority.c */
    rc = fn(&st, (unsigned)flags | CU_STREAM_NON_BLOCKING, real);
    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_stream_adopt(c, st, flags)) == CUDA_SUCCESS)
        om_priority_note(c->s, st, (int)(int64_t)prio, real);
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
    /* An error of its posted calls that no synchronising call took is reported here, its last
     * call, rather than to another stream's caller (errors.c). */
    CUresult pending = om_error_stream_gone(c->s, (CUstream)(uintptr_t)h);
    rc = om_stream_release(c->s, h);
    return rc != CUDA_SUCCESS ? rc : pending;
}

/* Whether the client created stream h blocking, on any of its devices. */
/* stream, 0: the priority the client asked for it (priority.c may have given it another). */
/* out:asked (cuStreamGetPriority): the priority the client asked for; the server's real one
 * may differ (client priorities, priority.c). */
CUresult om_answer_asked(struct call *c, int *priority, CUstream st)
{
    *priority = om_priority_asked(c->s, st, *priority);
    return CUDA_SUCCESS;
}

/* cuStreamSynchronize and cuEventSynchronize (generated, hook): the error of the client's
 * posted calls on the stream (before the event) is reported. */
CUresult om_hook_cuStreamSynchronize(struct call *c, CUstream st)
{
    return om_take_call_error(c, om_wait_stream(st));
}

/*
 * The stream_sync_word operation: a program's cuStreamSynchronize, which may be answered at
 * once with a u64 N, the client then waiting until its completion word holds N
 * (server/syncword.c); answered with nothing, the stream is done, as cuStreamSynchronize's.
 * Deferred where syncword.c allows it (om_syncword_may_defer) and the stream is busy. Request:
 * u64 the stream, as cuStreamSynchronize's.
 */
CUresult om_x_op_stream_sync_word(struct call *c)
{
    struct session *s = c->s;
    uint64_t h = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    uint32_t seq;
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    st = om_arg_stream(c, h, false, &rc);
    if (!st)
        return rc;
    if (!om_syncword_may_defer(s))
        return om_hook_cuStreamSynchronize(c, st); /* counted why */
    if ((rc = ((CUresult(*)(CUstream))REAL(cuStreamQuery))(st)) != CUDA_ERROR_NOT_READY) {
        /* done, or an error the driver's synchronize reports */
        om_syncword_declined(s, rc == CUDA_SUCCESS ? OM_SYNCWORD_IDLE : OM_SYNCWORD_STATE);
        return om_hook_cuStreamSynchronize(c, st);
    }
    if (!(seq = om_syncword_arm(s, st)))
        return om_hook_cuStreamSynchronize(c, st); /* arm counted why */
    om_put_u64(&c->out, seq);
    return CUDA_SUCCESS;
}

CUresult om_hook_cuEventSynchronize(struct call *c, CUevent ev)
{
    return om_take_event_error(c->s, ev, om_wait_event(ev));
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
    if (rc == CUDA_SUCCESS && (om_stream_blocking(c->s, h) || h <= 2))
        flags &= ~CU_STREAM_NON_BLOCKING;
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, flags);
    return rc;
}

/* ------------------------------------------------------------------ batches of memory operations
 */

#define BATCH_OP_BYTES 48 /* CUstreamBatchMemOpParams */
#define BATCH_MAX 256

CUresult om_x_cuStreamBatchMemOp_v2(struct call *c)
{
    CUresult (*batch)(CUstream, unsigned, void *, unsigned) = REAL(cuStreamBatchMemOp_v2);
    uint64_t sh = om_get_u64(&c->in), count = om_get_u64(&c->in), flags = om_get_u64(&c->in);
    const void *ops = count <= BATCH_MAX ? om_get_bytes(&c->in, count * BATCH_OP_BYTES) : NULL;
    uint8_t copy[BATCH_MAX * BATCH_OP_BYTES];
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (count == 0 || count > BATCH_MAX || !ops || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(copy, ops, count * BATCH_OP_BYTES);
    for (uint64_t i = 0; i < count; i++)
        if ((rc = om_batch_op_check(c, copy + i * BATCH_OP_BYTES)) != CUDA_SUCCESS)
            return rc;
    st = om_arg_stream(c, sh, true, &rc);
    if (!st)
        return rc;
    return batch(st, (unsigned)count, copy, 0);
}

/* ------------------------------------------------------------------ stream attributes */

/* stream, attribute, its 64-byte value. The stream attributes hold no handle: an access policy
 * window's device range must be the client's; priorities, synchronisation policies and memory
 * sync domains are values. Any other attribute: NOT_SUPPORTED. */
CUresult om_x_cuStreamSetAttribute(struct call *c)
{
    CUresult (*set)(CUstream, int, const CUstreamAttrValue *) = REAL(cuStreamSetAttribute);
    uint64_t sh = om_get_u64(&c->in), attr = om_get_u64(&c->in);
    const void *b = om_get_bytes(&c->in, sizeof(CUstreamAttrValue));
    CUstreamAttrValue v;
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    memcpy(&v, b, sizeof(v));
    switch (attr) {
    case 1: /* ACCESS_POLICY_WINDOW */
        if (v.accessPolicyWindow.num_bytes &&
            !om_arg_range(c, (uint64_t)(uintptr_t)v.accessPolicyWindow.base_ptr,
                          v.accessPolicyWindow.num_bytes))
            return CUDA_ERROR_INVALID_VALUE;
        break;
    case 3: /* SYNCHRONIZATION_POLICY */
    case 8: /* PRIORITY */
    case 9: /* MEM_SYNC_DOMAIN_MAP */
    case 10: /* MEM_SYNC_DOMAIN */ break;
    default:
        client_err(c->s, "client %d: stream attribute %d is not supported", (int)c->s->pid,
                   (int)attr);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    st = om_arg_stream(c, sh, false, &rc);
    if (!st)
        return rc;
    return set(st, (int)attr, &v);
}

/* An event shared through an IPC handle is destroyed by its last holder (ipc.c). */
/* cuEventDestroy_v2 (generated): the event is no longer the client's, whatever the driver says;
 * one that other clients opened by IPC stays until its last holder destroys it. */
CUresult om_release_event(struct call *c, uint64_t ev)
{
    om_own_drop(c->s, OM_H_EVENT, ev);
    return om_ipc_event_release(ev) ? CUDA_SUCCESS : OM_RELEASE_KEPT;
}

/*
 * cuLaunchHostFunc. Request: stream, fn, data, whether the client needs the channel. On a
 * capturing stream the driver captures the trampoline (a host node that runs at each launch of
 * the graph); answer 1, then whether the channel's descriptor follows. On any other stream
 * nothing is done here: answer 0 (the client waits for the stream and calls fn itself).
 */
CUresult om_x_cuLaunchHostFunc(struct call *c)
{
    uint64_t sh = om_get_u64(&c->in), fn = om_get_u64(&c->in), data = om_get_u64(&c->in);
    uint64_t want = om_get_u64(&c->in);
    CUDA_HOST_NODE_PARAMS p;
    CUresult rc = ARGS_OK(c);
    CUstream st;
    bool send = false;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    /* Not `enqueue`: a capturing stream gets no legacy ordering or scheduler hold anyway, and
     * on any other stream nothing is enqueued here. */
    st = om_arg_stream(c, sh, false, &rc);
    if (!st)
        return rc;
    if (!om_stream_capturing(c->s, st)) {
        om_put_u64(&c->out, 0);
        return CUDA_SUCCESS;
    }
    if ((rc = om_hostcb_params(c, fn, data, want, &p, &send)) != CUDA_SUCCESS)
        return rc;
    rc = ((CUresult(*)(CUstream, CUhostFn, void *))REAL(cuLaunchHostFunc))(st, p.fn, p.userData);
    if (rc != CUDA_SUCCESS)
        return rc;
    om_put_u64(&c->out, 1);
    om_hostcb_send_channel(c, send);
    return CUDA_SUCCESS;
}
