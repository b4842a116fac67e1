/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of kernel launches. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/image.h"
#include "../../common/launchattr.h"
#include "../../common/msg.h"
#include "../exec.h"
#include "openmps/ops.h"

/* ------------------------------------------------------------------ launches */

/*
 * Launches go to replay.c (held and launched as graphs when they repeat) unless it is off, the
 * stream captures (the client's own graph), the kernel may print (its printf turn, output.c) or
 * the launch went to an SM share's shadow stream (a kernel node carries the server's context,
 * not the share's green one). Any other launch ends the session's run first, so that what is
 * held goes out before it: not_replayable says why (0: it is replayable).
 */
static int not_replayable(struct call *c, CUstream st, bool prints)
{
    if (!om_replay_enabled())
        return OM_REPLAY_BY_END; /* never counted: no replay state exists */
    if (prints)
        return OM_REPLAY_BY_PRINTS;
    if (om_stream_capturing(c->s, st))
        return OM_REPLAY_BY_CAPTURE;
    return st != c->s->call_stream || om_share_active(c->s) ? OM_REPLAY_BY_SHARE : 0;
}

/* Before a launch's stream is resolved: a run on another stream ends (so that the legacy
 * stream's ordering route.c enqueues, events recorded on the client's other streams, stands
 * behind what that run holds), and so does any run while a share may send the launch to a
 * shadow stream (share.c orders the shadow after the client's stream as it routes). */
static void before_route(struct call *c, uint64_t handle)
{
    if (om_share_active(c->s))
        om_replay_end(c->s, OM_REPLAY_BY_SHARE);
    else
        om_replay_next_stream(c->s, handle);
}

static CUresult launch_kernel(struct call *c)
{
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       unsigned, CUstream, void **, void **) = REAL(cuLaunchKernel);
    uint64_t k = om_get_u64(&c->in), g = om_get_u64(&c->in), m = om_get_u64(&c->in);
    uint64_t b = om_get_u64(&c->in), smem = om_get_u64(&c->in), sh = om_get_u64(&c->in);
    size_t args_len = 0;
    const void *args = om_get_rest(&c->in, &args_len);
    const struct om_kernel *kern;
    bool prints;
    int64_t total;
    void *extra[5];
    size_t size;
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    kern = om_kernel_find(c->s, k);
    if (!kern)
        return CUDA_ERROR_INVALID_HANDLE;
    total = kern->args_size;
    if ((int64_t)args_len != total || args_len > sizeof(c->s->launch_args) || smem > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    before_route(c, sh);
    st = om_launch_stream(c, sh, &rc);
    if (!st)
        return rc;
    /* Its lines must reach this client only (output.c); a captured launch runs nothing now, and
     * a fence recorded on a capturing stream would join the client's graph. */
    prints = kern->prints && !om_stream_capturing(c->s, st);
    int why = not_replayable(c, st, prints);
    if (!why) {
        struct om_replay_rec rr = {k, g, m, b, (uint32_t)smem, (uint32_t)args_len, 0, args, NULL};
        return om_replay_launch(c->s, sh, st, &rr);
    }
    om_replay_end(c->s, why);
    /* The argument bytes are already laid out as the kernel expects them. */
    size = args_len;
    memcpy(c->s->launch_args, args, args_len);
    extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
    extra[1] = c->s->launch_args;
    extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
    extra[3] = &size;
    extra[4] = CU_LAUNCH_PARAM_END;
    /* Before the launch: a line it prints that another thread's call flushes at once (no
     * session's) must find this session as the last launcher, not the one before it. */
    om_output_launched(c->s);
    if (prints)
        om_output_print_begin(c->s);
    rc = launch((CUfunction)(uintptr_t)k, (unsigned)g, (unsigned)(g >> 32), (unsigned)m,
                (unsigned)(m >> 32), (unsigned)b, (unsigned)(b >> 32), (unsigned)smem, st, NULL,
                args_len ? extra : NULL);
    if (prints)
        om_output_print_end(c->s, st, rc == CUDA_SUCCESS);
    if (rc == CUDA_SUCCESS)
        om_sched_launched(c->s, st, om_sched_key(k, g, (unsigned)m));
    return rc;
}

/* CUlaunchConfig; its attributes are OM_LAUNCH_ATTR_BYTES each (src/common/launchattr.h). */
struct launch_config {
    unsigned gx, gy, gz, bx, by, bz, smem;
    CUstream stream;
    void *attrs;
    unsigned nattrs;
};

static CUresult launch_kernel_ex(struct call *c)
{
    CUresult (*launch)(const struct launch_config *, CUfunction, void **, void **) =
        REAL(cuLaunchKernelEx);
    uint64_t k = om_get_u64(&c->in), g = om_get_u64(&c->in), m = om_get_u64(&c->in);
    uint64_t b = om_get_u64(&c->in), smem = om_get_u64(&c->in), sh = om_get_u64(&c->in);
    uint64_t nattrs = om_get_u64(&c->in);
    uint8_t attrs[OM_LAUNCH_ATTRS_MAX * OM_LAUNCH_ATTR_BYTES];
    const void *ap =
        nattrs <= OM_LAUNCH_ATTRS_MAX ? om_get_bytes(&c->in, nattrs * OM_LAUNCH_ATTR_BYTES) : NULL;
    size_t args_len = 0;
    const void *args = om_get_rest(&c->in, &args_len);
    const struct om_kernel *kern;
    bool prints;
    struct launch_config cfg;
    void *extra[5];
    size_t size;
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (nattrs > OM_LAUNCH_ATTRS_MAX || !ap)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(attrs, ap, nattrs * OM_LAUNCH_ATTR_BYTES);
    for (uint64_t i = 0; i < nattrs; i++) {
        int id;
        memcpy(&id, attrs + i * OM_LAUNCH_ATTR_BYTES, sizeof(id));
        if (id != OM_LAUNCH_ATTR_IGNORE && !om_launch_attr_plain(id)) {
            client_err(c->s, "client %d: launch attribute %d is not supported", (int)c->s->pid, id);
            return CUDA_ERROR_NOT_SUPPORTED;
        }
    }
    kern = om_kernel_find(c->s, k);
    if (!kern)
        return CUDA_ERROR_INVALID_HANDLE;
    if (kern->args_size != args_len || args_len > sizeof(c->s->launch_args) || smem > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    before_route(c, sh);
    st = om_launch_stream(c, sh, &rc);
    if (!st)
        return rc;
    prints = kern->prints && !om_stream_capturing(c->s, st); /* as cuLaunchKernel's */
    /* A graph takes its launch stream's priority, not its nodes' (unless instantiated to use
     * theirs): a launch with its own priority is launched as it comes. */
    bool priority = false;
    for (uint64_t i = 0; i < nattrs; i++) {
        int id;
        memcpy(&id, attrs + i * OM_LAUNCH_ATTR_BYTES, sizeof(id));
        priority = priority || id == OM_LAUNCH_ATTR_PRIORITY;
    }
    int why = priority ? OM_REPLAY_BY_ATTRS : not_replayable(c, st, prints);
    if (!why) { /* its attributes are all plain (checked above) */
        struct om_replay_rec rr = {
            k, g, m, b, (uint32_t)smem, (uint32_t)args_len, (uint32_t)nattrs, args, attrs};
        return om_replay_launch(c->s, sh, st, &rr);
    }
    om_replay_end(c->s, why);
    size = args_len;
    memcpy(c->s->launch_args, args, args_len);
    extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
    extra[1] = c->s->launch_args;
    extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
    extra[3] = &size;
    extra[4] = CU_LAUNCH_PARAM_END;
    cfg = (struct launch_config){
        (unsigned)g, (unsigned)(g >> 32), (unsigned)m,    (unsigned)(m >> 32),
        (unsigned)b, (unsigned)(b >> 32), (unsigned)smem, st,
        attrs,       (unsigned)nattrs};
    om_output_launched(c->s); /* before the launch, as above */
    if (prints)
        om_output_print_begin(c->s);
    rc = launch(&cfg, (CUfunction)(uintptr_t)k, NULL, args_len ? extra : NULL);
    if (prints)
        om_output_print_end(c->s, st, rc == CUDA_SUCCESS);
    if (rc == CUDA_SUCCESS)
        om_sched_launched(c->s, st, om_sched_key(k, g, (unsigned)m));
    return rc;
}

/* A launch refused here ends the session's run first: launches it holds were posted before this
 * one, so their errors come first (errors.c keeps a stream's first). */
CUresult om_x_cuLaunchKernel(struct call *c)
{
    CUresult rc = launch_kernel(c);

    if (rc == CUDA_SUCCESS && !om_stream_capturing(c->s, c->s->call_stream))
        om_account_launch(c->s, c->s->call_stream, false); /* account.c: kernels, busy time */
    if (rc != CUDA_SUCCESS)
        om_replay_end(c->s, OM_IDX_cuLaunchKernel);
    return rc;
}

CUresult om_x_cuLaunchKernelEx(struct call *c)
{
    CUresult rc = launch_kernel_ex(c);

    if (rc == CUDA_SUCCESS && !om_stream_capturing(c->s, c->s->call_stream))
        om_account_launch(c->s, c->s->call_stream, false); /* account.c: kernels, busy time */
    if (rc != CUDA_SUCCESS)
        om_replay_end(c->s, OM_IDX_cuLaunchKernelEx);
    return rc;
}
