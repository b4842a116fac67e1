/* SPDX-License-Identifier: MIT */
/*
 * The server's hand-written handlers of green contexts and device resources (api/remote/green.tsv).
 *
 * A CUdevResource has 92 bytes the driver keeps to itself: the server never passes a client's
 * bytes there to the driver. It keeps the real structs it was answered (a table per client) and
 * answers copies whose type and SM fields are the real ones and whose hidden bytes name an entry
 * of that table; a struct coming back must name a live entry and carry its fields unchanged.
 *
 * The green contexts are real ones (cuGreenCtxCreate), the client's own: their streams are the
 * client's streams (route.c treats them as any other), destroyed before the green context.
 */
#include <stdlib.h>
#include <string.h>

#include "../exec.h"

#define RES_MAX 320      /* real resources one client's copies may name; the oldest are reused */
#define SPLIT_MAX 256    /* groups one split answers at most (with the rest: < RES_MAX) */
#define DESC_RES_MAX 128 /* resources one descriptor takes */
#define DESC_MAX 1024    /* descriptors a client may make (the driver has no way to destroy one) */
#define GREEN_MAX 64     /* green contexts a client may hold at once */
#define RES_MAGIC 0x73657230u /* "0res": a copy the server answered */

struct res {
    uint64_t serial; /* 0: free */
    struct om_CUdevResource real;
};

struct om_green {
    struct res res[RES_MAX];
    uint64_t serial; /* the last one given */
    unsigned next;   /* the entry reused next when none is free */
    struct {
        uint64_t h;   /* its green contexts, destroyed at the session's end */
        CUstream def; /* the NULL stream of the client while it is current (made at first use) */
        int dev;      /* the (server) device it was made on */
    } greens[GREEN_MAX];
    unsigned ngreens;
    uint64_t current;         /* the green context current to the client's last call (0: none) */
    CUstream primary_default; /* the session's own default stream, while a green one stands in */
    CUstream join; /* the stream cuGreenCtxRecordEvent joins a green context's streams on */
};

static struct om_green *state(struct session *s)
{
    if (!s->green && (s->green = calloc(1, sizeof(*s->green))))
        s->green->serial = (uint64_t)s->id << 32;
    return s->green;
}

/* ------------------------------------------------------------------ resources */

/* The SM resource a client is given on a device: the device's own, or under an SM share its
 * lane's (share.c); every resource it splits descends from this one. */
static CUresult client_sm_resource(struct session *s, int dev, struct om_CUdevResource *real)
{
    return om_share_resource(s, dev, real); /* share.c: its lane's under a share */
}

/* Keeps a real resource and writes the client's copy of it. */
static CUresult res_put(struct call *c, const struct om_CUdevResource *real)
{
    struct om_green *g = state(c->s);
    struct om_CUdevResource copy;
    uint32_t magic = RES_MAGIC, slot = RES_MAX;

    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (uint32_t i = 0; i < RES_MAX && slot == RES_MAX; i++) /* the same struct: one entry */
        if (g->res[i].serial && !memcmp(&g->res[i].real, real, sizeof(*real)))
            slot = i;
    for (uint32_t i = 0; i < RES_MAX && slot == RES_MAX; i++)
        if (!g->res[i].serial)
            slot = i;
    if (slot == RES_MAX) {
        slot = g->next;
        g->next = (g->next + 1) % RES_MAX;
    }
    if (!g->res[slot].serial || memcmp(&g->res[slot].real, real, sizeof(*real))) {
        g->res[slot].serial = ++g->serial;
        g->res[slot].real = *real;
    }
    memset(&copy, 0, sizeof(copy));
    copy.type = real->type;
    memcpy(copy._oversize, real->_oversize, sizeof(copy._oversize));
    memcpy(copy._internal_padding, &magic, 4);
    memcpy(copy._internal_padding + 4, &slot, 4);
    memcpy(copy._internal_padding + 8, &g->res[slot].serial, 8);
    om_put_bytes(&c->out, &copy, sizeof(copy));
    return CUDA_SUCCESS;
}

/* The real resource a client's copy names: one the server answered it, unchanged. */
static CUresult res_get(struct call *c, const void *bytes, struct om_CUdevResource *real)
{
    struct om_CUdevResource copy;
    uint32_t magic, slot;
    uint64_t serial;

    if (!bytes)
        return om_bad_request(c);
    memcpy(&copy, bytes, sizeof(copy));
    if (copy.type != CU_DEV_RESOURCE_TYPE_SM)
        return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    memcpy(&magic, copy._internal_padding, 4);
    memcpy(&slot, copy._internal_padding + 4, 4);
    memcpy(&serial, copy._internal_padding + 8, 8);
    if (!c->s->green || magic != RES_MAGIC || slot >= RES_MAX || !serial ||
        c->s->green->res[slot].serial != serial || c->s->green->res[slot].real.type != copy.type ||
        memcmp(c->s->green->res[slot].real._oversize, copy._oversize, sizeof(copy._oversize))) {
        client_err(c->s, "client %d: a device resource the server did not answer it",
                   (int)c->s->pid);
        return CUDA_ERROR_INVALID_VALUE;
    }
    *real = c->s->green->res[slot].real;
    return CUDA_SUCCESS;
}

/* dev, type */
CUresult om_x_cuDeviceGetDevResource(struct call *c)
{
    uint64_t cdev = om_get_u64(&c->in), type = om_get_u64(&c->in);
    int dev = om_dev_in(c->s, cdev);
    struct om_CUdevResource real;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (dev < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    if (type != CU_DEV_RESOURCE_TYPE_SM)
        return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    memset(&real, 0, sizeof(real));
    if ((rc = client_sm_resource(c->s, dev, &real)) != CUDA_SUCCESS)
        return rc;
    return res_put(c, &real);
}

/* green context, type */
CUresult om_x_cuGreenCtxGetDevResource(struct call *c)
{
    uint64_t h = om_get_u64(&c->in), type = om_get_u64(&c->in);
    struct om_CUdevResource real;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (om_arg_handle(c, OM_H_GREENCTX, h, false) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (type != CU_DEV_RESOURCE_TYPE_SM)
        return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    memset(&real, 0, sizeof(real));
    rc = ((CUresult(*)(CUgreenCtx, struct om_CUdevResource *, int))REAL(cuGreenCtxGetDevResource))(
        (CUgreenCtx)(uintptr_t)h, &real, CU_DEV_RESOURCE_TYPE_SM);
    return rc != CUDA_SUCCESS ? rc : res_put(c, &real);
}

/* groups (the capacity; with results), results wanted, remaining wanted, flags, minimum count,
 * the input resource. Answers the count, the groups, the remaining resource. */
CUresult om_x_cuDevSmResourceSplitByCount(struct call *c)
{
    CUresult (*split)(struct om_CUdevResource *, unsigned *, const struct om_CUdevResource *,
                      struct om_CUdevResource *, unsigned, unsigned) =
        REAL(cuDevSmResourceSplitByCount);
    uint64_t nb = om_get_u64(&c->in), want = om_get_u64(&c->in), want_rem = om_get_u64(&c->in);
    uint64_t flags = om_get_u64(&c->in), min = om_get_u64(&c->in);
    const void *bytes = om_get_bytes(&c->in, sizeof(struct om_CUdevResource));
    struct om_CUdevResource input, rem, *out = NULL;
    unsigned n = (unsigned)nb;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((want && (nb == 0 || nb > SPLIT_MAX)) || want > 1 || want_rem > 1 || min > UINT32_MAX ||
        (flags & ~(uint64_t)(CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING |
                             CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE)))
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = res_get(c, bytes, &input)) != CUDA_SUCCESS)
        return rc;
    if (want && !(out = calloc(nb, sizeof(*out))))
        return CUDA_ERROR_OUT_OF_MEMORY;
    memset(&rem, 0, sizeof(rem));
    rc = split(out, &n, &input, want_rem ? &rem : NULL, (unsigned)flags, (unsigned)min);
    if (rc == CUDA_SUCCESS && want && n > nb)
        rc = CUDA_ERROR_UNKNOWN; /* more groups than room: never from the driver */
    if (rc == CUDA_SUCCESS) {
        om_put_u64(&c->out, n);
        for (unsigned i = 0; want && i < n && rc == CUDA_SUCCESS; i++)
            rc = res_put(c, &out[i]);
        if (rc == CUDA_SUCCESS && want_rem)
            rc = res_put(c, &rem);
    }
    free(out);
    return rc;
}

/* count, resources. Answers the descriptor. */
CUresult om_x_cuDevResourceGenerateDesc(struct call *c)
{
    CUresult (*gen)(CUdevResourceDesc *, struct om_CUdevResource *, unsigned) =
        REAL(cuDevResourceGenerateDesc);
    uint64_t n = om_get_u64(&c->in);
    struct om_CUdevResource real[DESC_RES_MAX];
    CUdevResourceDesc desc = NULL;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (n == 0 || n > DESC_RES_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    for (uint64_t i = 0; i < n; i++)
        if ((rc = res_get(c, om_get_bytes(&c->in, sizeof(real[0])), &real[i])) != CUDA_SUCCESS)
            return rc;
    if (c->s->own[OM_H_DEVRESDESC].n >= DESC_MAX)
        return om_budget_refuse(c->s, OM_BUDGET_HANDLES, "cuDevResourceGenerateDesc");
    if ((rc = om_own_room(c->s, OM_H_DEVRESDESC)) != CUDA_SUCCESS)
        return rc;
    if ((rc = gen(&desc, real, (unsigned)n)) != CUDA_SUCCESS)
        return rc;
    if ((rc = om_own_add(c, OM_H_DEVRESDESC, (uint64_t)(uintptr_t)desc)) != CUDA_SUCCESS)
        return rc;
    om_put_u64(&c->out, (uint64_t)(uintptr_t)desc);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ green contexts */

static CUresult green_destroy(uint64_t h)
{
    return ((CUresult(*)(CUgreenCtx))REAL(cuGreenCtxDestroy))((CUgreenCtx)(uintptr_t)h);
}

/* descriptor, device, flags. Answers the green context. */
CUresult om_x_cuGreenCtxCreate(struct call *c)
{
    uint64_t desc = om_get_u64(&c->in), cdev = om_get_u64(&c->in), flags = om_get_u64(&c->in);
    int dev = om_dev_in(c->s, cdev);
    struct om_green *g;
    CUgreenCtx h = NULL;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_arg_handle(c, OM_H_DEVRESDESC, desc, false)) != CUDA_SUCCESS)
        return rc;
    if (dev < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    if (flags != CU_GREEN_CTX_DEFAULT_STREAM) /* the one flag, required */
        return CUDA_ERROR_INVALID_VALUE;
    if (!(g = state(c->s)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (g->ngreens >= GREEN_MAX)
        return om_budget_refuse(c->s, OM_BUDGET_HANDLES, "cuGreenCtxCreate");
    if ((rc = om_own_room(c->s, OM_H_GREENCTX)) != CUDA_SUCCESS)
        return rc;
    rc = ((CUresult(*)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned))REAL(cuGreenCtxCreate))(
        &h, (CUdevResourceDesc)(uintptr_t)desc, (CUdevice)dev, (unsigned)flags);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (om_own_add(c, OM_H_GREENCTX, (uint64_t)(uintptr_t)h) != CUDA_SUCCESS) {
        green_destroy((uint64_t)(uintptr_t)h);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    g->greens[g->ngreens].h = (uint64_t)(uintptr_t)h;
    g->greens[g->ngreens].dev = dev;
    g->greens[g->ngreens++].def = NULL;
    om_put_u64(&c->out, (uint64_t)(uintptr_t)h);
    return CUDA_SUCCESS;
}

/* The green context of stream h (0: none). */
/* A green context's stand-in default stream, at its end. */
static void drop_default(struct session *s, CUstream def)
{
    if (!def)
        return;
    om_wait_stream(def); /* its work goes on to its end: nothing else waits for it after this */
    om_stream_forget_sync(s, def); /* route.c's ordering event of the stream */
    om_sched_stream_destroyed(s, def);
    om_priority_forget(s, def);
    om_idle_stream_destroy(def);
}

/* The client's NULL, legacy and per-thread stream (route.c's s->default_stream) while `green`
 * is current to its calls: that green context's own default stream (a real stream of it,
 * made at first use), or the session's default stream for 0. The new one waits for the one
 * before, so the client's NULL-stream work keeps its order across the change. */
static CUresult switch_default(struct session *s, struct om_green *g, uint64_t green)
{
    CUstream before = s->default_stream, def = NULL;
    CUresult rc = CUDA_SUCCESS;
    unsigned i;

    if (green == g->current)
        return CUDA_SUCCESS;
    if (green) {
        for (i = 0; i < g->ngreens && g->greens[i].h != green; i++) {
        }
        if (i == g->ngreens)
            return CUDA_ERROR_INVALID_CONTEXT;
        if (!g->greens[i].def) {
            rc = ((CUresult(*)(CUstream *, CUgreenCtx, unsigned, int))REAL(cuGreenCtxStreamCreate))(
                &def, (CUgreenCtx)(uintptr_t)green, CU_STREAM_NON_BLOCKING,
                om_priority_stream(s, 0)); /* as the client's own default stream (route.c) */
            if (rc != CUDA_SUCCESS)
                return rc;
            om_priority_note(s, def, 0, om_priority_stream(s, 0));
            if (om_idle_track(def) < 0) {
                ((CUresult(*)(CUstream))REAL(cuStreamDestroy_v2))(def);
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
            om_sched_stream_created();
            g->greens[i].def = def;
        }
        def = g->greens[i].def;
    }
    if (!g->current)
        g->primary_default = s->default_stream;
    g->current = green;
    s->default_stream = green ? def : g->primary_default;
    if (!s->default_stream && !om_find_stream(s, 0, false, &rc)) /* made now, to follow */
        return rc;
    if (before && before != s->default_stream)
        rc = om_order_after(s, s->default_stream, before, true);
    return rc;
}

/* green context (0: none): the one current to the client's next calls (the client sends it
 * before a call when its thread's current context changed). */
CUresult om_x_cuCtxFromGreenCtx(struct call *c)
{
    uint64_t h = om_get_u64(&c->in);
    struct om_green *g;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (h && om_arg_handle(c, OM_H_GREENCTX, h, false) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!(g = state(c->s)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    return switch_default(c->s, g, h);
}

/* The green context; the client's streams made in it are destroyed first (the driver would
 * leave them unusable and leak them; their handles are no longer the client's). */
CUresult om_x_cuGreenCtxDestroy(struct call *c)
{
    uint64_t h = om_get_u64(&c->in);
    struct om_green *g = c->s->green;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (om_arg_handle(c, OM_H_GREENCTX, h, false) != CUDA_SUCCESS || !g)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (g->current == h && (rc = switch_default(c->s, g, 0)) != CUDA_SUCCESS)
        return rc;
    for (size_t i = c->s->ngstreams; i-- > 0;) /* streamstate.c's list of green streams */
        if (i < c->s->ngstreams && c->s->gstreams[i].green == h)
            om_stream_release(c->s, c->s->gstreams[i].stream);
    for (unsigned i = 0; i < g->ngreens; i++)
        if (g->greens[i].h == h) {
            drop_default(c->s, g->greens[i].def);
            g->greens[i] = g->greens[--g->ngreens];
            break;
        }
    rc = green_destroy(h);
    om_own_drop(c->s, OM_H_GREENCTX, h);
    return rc;
}

/* green context, flags (0 or non-blocking), priority. Answers the stream. */
CUresult om_x_cuGreenCtxStreamCreate(struct call *c)
{
    uint64_t h = om_get_u64(&c->in), flags = om_get_u64(&c->in), prio = om_get_u64(&c->in);
    struct om_green *g = c->s->green;
    CUstream st = NULL;
    CUresult rc = ARGS_OK(c);
    int real;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (om_arg_handle(c, OM_H_GREENCTX, h, false) != CUDA_SUCCESS || !g)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (flags & ~(uint64_t)CU_STREAM_NON_BLOCKING)
        return CUDA_ERROR_INVALID_VALUE;
    if (c->s->own[OM_H_STREAM].n >= om_budget.client_streams)
        return om_budget_refuse(c->s, OM_BUDGET_STREAMS, "cuGreenCtxStreamCreate");
    if (om_green_stream_room(c->s) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* Non-blocking, as every stream of the server (route.c); a blocking one's ordering is
     * rebuilt within the client. */
    real = om_priority_stream(c->s, (int)(int64_t)prio); /* priority.c */
    rc = ((CUresult(*)(CUstream *, CUgreenCtx, unsigned, int))REAL(cuGreenCtxStreamCreate))(
        &st, (CUgreenCtx)(uintptr_t)h, CU_STREAM_NON_BLOCKING, real);
    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_stream_adopt(c, st, flags)) == CUDA_SUCCESS) {
        /* on the green context's device, whatever the client's current one (devmap.c) */
        om_forget_device(c->s, (uint64_t)(uintptr_t)st);
        for (size_t i = 0; i < g->ngreens; i++)
            if (g->greens[i].h == h &&
                !om_note_device(c->s, (uint64_t)(uintptr_t)st, g->greens[i].dev)) {
                om_stream_release(c->s, (uint64_t)(uintptr_t)st);
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
        om_green_stream_add(c->s, (uint64_t)(uintptr_t)st, h);
        om_priority_note(c->s, st, (int)(int64_t)prio, real);
    }
    return rc;
}

/* stream (one the client made). Answers its green context, 0 for none. */
CUresult om_x_cuStreamGetGreenCtx(struct call *c)
{
    uint64_t h = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!om_handles_has(&c->s->own[OM_H_STREAM], h))
        return CUDA_ERROR_INVALID_HANDLE;
    om_put_u64(&c->out, om_green_of(c->s, h));
    return CUDA_SUCCESS;
}

static CUresult green_event(struct call *c, uint64_t *h, CUevent *ev)
{
    uint64_t e;

    *h = om_get_u64(&c->in);
    e = om_get_u64(&c->in);
    if (c->in.bad)
        return om_bad_request(c);
    if (om_arg_handle(c, OM_H_GREENCTX, *h, false) != CUDA_SUCCESS || !c->s->green)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (om_arg_handle(c, OM_H_EVENT, e, false) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_HANDLE;
    *ev = (CUevent)(uintptr_t)e;
    return CUDA_SUCCESS;
}

/* The event records the work of the client's streams in the green context so far: they are
 * joined on a stream of the session's, where the event is recorded (no stream waits). */
CUresult om_x_cuGreenCtxRecordEvent(struct call *c)
{
    struct om_green *g;
    uint64_t h;
    CUevent ev;
    CUresult rc = green_event(c, &h, &ev);

    if (rc != CUDA_SUCCESS)
        return rc;
    g = c->s->green;
    if (!g->join && (rc = ((CUresult(*)(CUstream *, unsigned))REAL(cuStreamCreate))(
                         &g->join, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
        return rc;
    for (size_t i = 0; i < c->s->ngstreams && rc == CUDA_SUCCESS; i++)
        if (c->s->gstreams[i].green == h)
            rc = om_order_after(c->s, g->join, (CUstream)(uintptr_t)c->s->gstreams[i].stream, true);
    for (unsigned i = 0; i < g->ngreens && rc == CUDA_SUCCESS; i++) /* its NULL stream's work */
        if (g->greens[i].h == h && g->greens[i].def)
            rc = om_order_after(c->s, g->join, g->greens[i].def, true);
    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(CUevent, CUstream))REAL(cuEventRecord))(ev, g->join);
    return rc;
}

/* Later work on the client's streams in the green context waits for the event (streams made
 * in it afterwards do not). */
CUresult om_x_cuGreenCtxWaitEvent(struct call *c)
{
    CUresult (*wait)(CUstream, CUevent, unsigned) = REAL(cuStreamWaitEvent);
    struct om_green *g;
    uint64_t h;
    CUevent ev;
    CUresult rc = green_event(c, &h, &ev);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    g = c->s->green;
    for (size_t i = 0; i < c->s->ngstreams && rc == CUDA_SUCCESS; i++) {
        if (c->s->gstreams[i].green != h)
            continue;
        st = om_find_stream(c->s, c->s->gstreams[i].stream, true, &rc);
        if (st)
            rc = wait(st, ev, 0);
    }
    for (unsigned i = 0; i < g->ngreens && rc == CUDA_SUCCESS; i++) /* its NULL stream */
        if (g->greens[i].h == h && g->greens[i].def)
            rc = wait(g->greens[i].def, ev, 0);
    return rc;
}

void om_green_release(struct session *s)
{
    struct om_green *g = s->green;

    if (!g)
        return;
    if (g->join)
        ((CUresult(*)(CUstream))REAL(cuStreamDestroy_v2))(g->join);
    if (g->current) /* route.c destroys the session's own default stream */
        s->default_stream = g->primary_default;
    for (unsigned i = g->ngreens; i-- > 0;) { /* their streams are gone (route.c) */
        drop_default(s, g->greens[i].def);
        green_destroy(g->greens[i].h);
    }
    if (g->ngreens)
        om_info("client %d: destroyed %u green context(s)", (int)s->pid, g->ngreens);
    om_green_streams_free(s);
    free(g);
    s->green = NULL;
}
