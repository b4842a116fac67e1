/* SPDX-License-Identifier: MIT */
/*
 * Replaying what repeats (issue #23; docs/architecture.md, "The life of a launch" and "Replaying
 * what repeats"). A framework's loop sends the same run of launches batch after batch: the same
 * kernels, grids, blocks, shared memory and stream, usually the same argument bytes. Every launch
 * the server makes into its one context costs a driver launch, and the driver takes one at a time
 * into a context (3.5 µs alone, 10 at 8 threads, 20 at 16: docs/benchmarks.md); a CUDA graph of
 * 110 kernels costs about what one launch does. So this module learns a session's runs and, once
 * one has recurred, launches it as executable graphs instead of kernel by kernel.
 *
 * The words: a *run* is a session's launches on one stream with no other record between them
 * (any other call, a launch on another stream, a launch that cannot be replayed ends it); a
 * *template* is a run whose shape was seen twice (among the last OM_REPLAY_SIGS shapes), built
 * once as a chain of kernel nodes cut into *chunks* of OPENMPS_REPLAY_CHUNK nodes, each its own
 * executable graph, so that work starts before the run is over.
 *
 * While a run matches a template (same shape record by record: kernel, grid, block, shared
 * memory, argument size, launch attributes, stream; the longest template that begins so), and
 * while at least OPENMPS_REPLAY_MIN_CLIENTS clients are busy (holding only pays where launches
 * contend), its records are held here instead of launched; when a chunk's
 * last record arrives the chunk's graph is launched, after updating the nodes whose argument
 * bytes changed (cuGraphExecKernelNodeSetParams). What is held goes out as ordinary launches, in
 * order, on the first record that differs (the run then continues as ordinary launches, or, at
 * a chunk's start, as another template that matches all of it so far), on any other record of
 * the session (session.c
 * and the launch handlers call om_replay_end first), and when nothing arrives for
 * OPENMPS_REPLAY_IDLE_US (session.c's wait calls om_replay_idle). So:
 *  - the same kernels run in the same order on the same stream (a chunk is a chain);
 *  - a query, event record, copy, synchronize or host function sees everything posted before it,
 *    because it ends the run before its handler runs;
 *  - a launch's error is kept for its stream as a posted launch's is (errors.c); a graph launch
 *    that fails is redone as ordinary launches, so each kernel's own error is what is kept;
 *  - launches on a capturing stream, printing kernels, launches with a priority attribute (a
 *    graph takes its stream's) and launches while an SM share may send them to a shadow stream
 *    never enter a run; other launch attributes are set on the nodes; priorities of streams and
 *    the scheduler's holds were applied by route.c before the record reached here, and the
 *    graph goes to the same stream.
 *
 * Budgets: a run keeps at most OM_REPLAY_MAX_NODES launches and OM_REPLAY_ARG_BYTES of argument
 * bytes (a longer run is launched as it comes and never learnt); a session keeps at most
 * OM_REPLAY_TEMPLATES templates, OM_REPLAY_MAX_NODES nodes and OM_REPLAY_TMPL_BYTES bytes in
 * them, the least recently used replaced; all sessions' templates at most OPENMPS_SERVER_REPLAY_MAX
 * bytes (held_bytes). Three failed builds end replaying for the session.
 * OPENMPS_REPLAY=off turns it all off (read once per server). Only the session's worker thread
 * touches s->replay.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/launchattr.h"
#include "../common/log.h"
#include "exec.h"

#define OM_REPLAY_MAX_NODES 1024         /* launches of one run, and of all a session's templates */
#define OM_REPLAY_ARG_BYTES (256u << 10) /* argument and attribute bytes of one run */
#define OM_REPLAY_TMPL_BYTES (1024u << 10) /* ... and of all a session's templates */
#define OM_REPLAY_TEMPLATES 64
#define OM_REPLAY_SIGS 128     /* recent runs remembered by their shape's hash */
#define OM_REPLAY_MIN_RUN 4    /* shorter runs cost no more launched one by one */
#define OM_REPLAY_MAX_FAILS 3  /* failed builds before a session stops replaying */
#define OM_REPLAY_CHUNK_MAX 64 /* a chunk's changed nodes are a 64-bit mask */

/* One launch as the run keeps it: its argument bytes at `off` in the run's arena, then its
 * launch attributes (nattrs of OM_LAUNCH_ATTR_BYTES), which are part of its shape. */
struct rp_rec {
    uint64_t k, g, m, b; /* kernel, then grid and block packed as the request carries them */
    uint32_t smem, len, off, nattrs;
};

struct rp_tmpl {
    CUstream st; /* the stream launched on (a shadow stream under an SM share) */
    uint32_t n, nchunks, bytes;
    uint64_t charged;    /* to held_bytes */
    struct rp_rec *recs; /* the shape, and the argument bytes the nodes hold now */
    uint8_t *args;
    CUgraph *graphs;
    CUgraphExec *execs;
    CUgraphNode *nodes;
    uint64_t last_used; /* the session's run count then: the least recent is replaced */
};

struct om_replay {
    /* The current run: its records and their argument bytes. */
    struct rp_rec *recs;
    uint32_t n, cap;
    uint8_t *args;
    uint32_t used, args_cap;
    bool over;          /* longer or larger than a template may be: not learnt */
    uint64_t handle;    /* the client's stream handle its launches named */
    CUstream st;        /* the stream they go to */
    CUstream call_st;   /* the client's stream, for errors (errors.c) */
    struct rp_tmpl *on; /* the template it matches so far; NULL: launched as it comes */
    uint32_t chunk;     /* the first record of the chunk being held */
    bool broken;        /* part of this chunk went out already: the rest goes out too */
    uint64_t changed;   /* records of this chunk whose argument bytes differ from the nodes' */
    struct rp_tmpl *t[OM_REPLAY_TEMPLATES];
    struct {
        uint64_t hash;
        CUstream st;
        uint32_t n, seen;
    } sig[OM_REPLAY_SIGS];
    uint32_t next_sig;
    uint64_t runs;
    uint32_t nodes;  /* of all its templates (at most OM_REPLAY_MAX_NODES) */
    uint32_t tbytes; /* their argument bytes (at most OM_REPLAY_TMPL_BYTES) */
    unsigned fails, warned;
    /* counted for the session's lines in the log: what it replayed, and what ended its runs
     * (by entry point, then by OM_REPLAY_BY_*; a launch that cannot be replayed counts even
     * with no run open) */
    uint64_t replayed, graph_launches, builds, launched;
    uint32_t by_entry[OM_HANDLER_COUNT], by_kind[OM_REPLAY_BY_KINDS];
};

/* What all sessions' templates hold in the server (their records, bytes and handle arrays;
 * the driver's own graph objects are not visible): at most om_budget.server_replay
 * (OPENMPS_SERVER_REPLAY_MAX, __atomic). */
static uint64_t held_bytes;
static int held_refused; /* the refusal was logged (__atomic) */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool enabled = true;
static uint32_t chunk_nodes = 16;
static uint32_t idle_us = 100;
static int min_clients = 2;

static void init(void)
{
    const char *v = getenv("OPENMPS_REPLAY"), *c = getenv("OPENMPS_REPLAY_CHUNK");
    const char *i = getenv("OPENMPS_REPLAY_IDLE_US"), *m = getenv("OPENMPS_REPLAY_MIN_CLIENTS");

    if (v && !strcmp(v, "off"))
        enabled = false;
    else if (v && *v && strcmp(v, "on"))
        om_warn("OPENMPS_REPLAY=%s is not on or off: replaying is on", v);
    if (c && (atoi(c) < 2 || atoi(c) > OM_REPLAY_CHUNK_MAX))
        om_warn("OPENMPS_REPLAY_CHUNK=%s is not 2-%d: using %u", c, OM_REPLAY_CHUNK_MAX,
                chunk_nodes);
    else if (c)
        chunk_nodes = (uint32_t)atoi(c);
    if (i && (atoi(i) < 1 || atoi(i) > 10000000))
        om_warn("OPENMPS_REPLAY_IDLE_US=%s is not 1-10000000: using %u", i, idle_us);
    else if (i)
        idle_us = (uint32_t)atoi(i);
    if (m && (atoi(m) < 1 || atoi(m) > 100000))
        om_warn("OPENMPS_REPLAY_MIN_CLIENTS=%s is not 1-100000: using %d", m, min_clients);
    else if (m)
        min_clients = atoi(m);
}

bool om_replay_enabled(void)
{
    pthread_once(&once, init);
    return enabled;
}

void om_replay_init(void)
{
    pthread_once(&once, init);
    om_info("replay of repeated launches: %s (chunks of %u, held at most %u us idle, from %d busy "
            "client(s))",
            enabled ? "on" : "off", chunk_nodes, idle_us, min_clients);
}

unsigned om_replay_idle_us(void)
{
    return idle_us;
}

bool om_replay_holding(const struct session *s)
{
    const struct om_replay *r = s->replay;
    return r && r->on && !r->broken && r->n > r->chunk;
}

/* ------------------------------------------------------------------ launching */

/* Whether two records (each with the arena its bytes are in) launch the same kernel the same
 * way: only their argument bytes may differ. */
static bool same_shape(const struct rp_rec *a, const uint8_t *aa, const struct rp_rec *b,
                       const uint8_t *ba)
{
    return a->k == b->k && a->g == b->g && a->m == b->m && a->b == b->b && a->smem == b->smem &&
           a->len == b->len && a->nattrs == b->nattrs &&
           (!a->nattrs || !memcmp(aa + a->off + a->len, ba + b->off + b->len,
                                  (size_t)a->nattrs * OM_LAUNCH_ATTR_BYTES));
}

/* Attributes a kernel node holds (cuGraphKernelNodeSetAttribute) as a launch does; the two a
 * node has no place for ask nothing a chain of nodes does not give: the stream's
 * synchronization policy (3: how a host waits) and programmatic stream serialization (6: a
 * permission to overlap the kernel before, which a full dependency never uses). */
static bool node_attr(int id)
{
    return om_launch_attr_plain(id) && id != 3 && id != 6;
}

/* A launch's error, kept for the run's stream whatever call is being served now. */
static void post_error(struct session *s, const struct om_replay *r, CUresult rc)
{
    CUstream saved = s->call_stream;

    if (om_server_fatal(rc)) {
        om_err("client %d: a launch failed with CUresult %d, a fatal GPU fault", (int)s->pid, rc);
        om_server_fault(rc, s->pid);
    }
    s->call_stream = r->call_st;
    om_error_post(s, rc);
    s->call_stream = saved;
}

/* One launch as the launch handler would have made it (attrs: nattrs of them, any alignment). */
static CUresult launch_one(struct session *s, CUstream st, const struct rp_rec *x, const void *args,
                           const void *attrs)
{
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       unsigned, CUstream, void **, void **) = REAL(cuLaunchKernel);
    CUresult (*launch_ex)(const CUlaunchConfig *, CUfunction, void **, void **) =
        REAL(cuLaunchKernelEx);
    size_t size = x->len;
    void *extra[5] = {CU_LAUNCH_PARAM_BUFFER_POINTER, (void *)args, CU_LAUNCH_PARAM_BUFFER_SIZE,
                      &size, CU_LAUNCH_PARAM_END};
    CUlaunchAttribute a[OM_LAUNCH_ATTRS_MAX];
    CUresult rc;

    om_output_launched(s); /* before the launch: api/launch.c says why */
    if (x->nattrs) {
        CUlaunchConfig cfg = {(unsigned)x->g,
                              (unsigned)(x->g >> 32),
                              (unsigned)x->m,
                              (unsigned)(x->m >> 32),
                              (unsigned)x->b,
                              (unsigned)(x->b >> 32),
                              x->smem,
                              st,
                              a,
                              x->nattrs};
        memcpy(a, attrs, (size_t)x->nattrs * OM_LAUNCH_ATTR_BYTES);
        rc = launch_ex(&cfg, (CUfunction)(uintptr_t)x->k, NULL, x->len ? extra : NULL);
    } else {
        rc = launch((CUfunction)(uintptr_t)x->k, (unsigned)x->g, (unsigned)(x->g >> 32),
                    (unsigned)x->m, (unsigned)(x->m >> 32), (unsigned)x->b, (unsigned)(x->b >> 32),
                    x->smem, st, NULL, x->len ? extra : NULL);
    }
    if (rc == CUDA_SUCCESS)
        om_sched_launched(s, st, om_sched_key(x->k, x->g, (unsigned)x->m));
    return rc;
}

/* Record i of the run, launched. */
static CUresult launch_rec(struct session *s, struct om_replay *r, uint32_t i)
{
    const struct rp_rec *x = &r->recs[i];
    return launch_one(s, r->st, x, r->args + x->off, r->args + x->off + x->len);
}

/* The records [from, to) of the run as ordinary launches; the first error is kept. */
static void launch_records(struct session *s, struct om_replay *r, uint32_t from, uint32_t to)
{
    for (uint32_t i = from; i < to; i++) {
        CUresult rc = launch_rec(s, r, i);
        if (rc != CUDA_SUCCESS)
            post_error(s, r, rc);
    }
}

static void fill_params(CUDA_KERNEL_NODE_PARAMS *p, const struct rp_rec *x, CUcontext ctx,
                        void **extra, size_t *size, const void *args)
{
    memset(p, 0, sizeof(*p));
    *size = x->len;
    extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
    extra[1] = (void *)args;
    extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
    extra[3] = size;
    extra[4] = CU_LAUNCH_PARAM_END;
    p->func = NULL; /* the server's kernels are CUkernel handles, valid in this context */
    p->kern = (CUkernel)(uintptr_t)x->k;
    p->ctx = ctx;
    p->gridDimX = (unsigned)x->g;
    p->gridDimY = (unsigned)(x->g >> 32);
    p->gridDimZ = (unsigned)x->m;
    p->blockDimX = (unsigned)(x->m >> 32);
    p->blockDimY = (unsigned)x->b;
    p->blockDimZ = (unsigned)(x->b >> 32);
    p->sharedMemBytes = x->smem;
    p->extra = x->len ? extra : NULL;
}

static void tmpl_free(struct rp_tmpl *t)
{
    if (!t)
        return;
    for (uint32_t c = 0; c < t->nchunks; c++) {
        /* An executable graph still running is freed by the driver once it is done. */
        if (t->execs && t->execs[c])
            ((CUresult(*)(CUgraphExec))REAL(cuGraphExecDestroy))(t->execs[c]);
        if (t->graphs && t->graphs[c])
            ((CUresult(*)(CUgraph))REAL(cuGraphDestroy))(t->graphs[c]);
    }
    free(t->graphs);
    free(t->execs);
    free(t->nodes);
    free(t->recs);
    free(t->args);
    om_budget_give(&held_bytes, t->charged);
    free(t);
}

/* What a template of the current run would hold in the server. */
static uint64_t tmpl_cost(const struct om_replay *r)
{
    uint32_t chunks = (r->n + chunk_nodes - 1) / chunk_nodes;
    return sizeof(struct rp_tmpl) + (uint64_t)r->n * (sizeof(struct rp_rec) + sizeof(CUgraphNode)) +
           r->used + (uint64_t)chunks * (sizeof(CUgraph) + sizeof(CUgraphExec));
}

/* The current run, built as a template of chained kernel nodes, a graph per chunk. */
static struct rp_tmpl *build(struct session *s, struct om_replay *r)
{
    CUresult (*create)(CUgraph *, unsigned) = REAL(cuGraphCreate);
    CUresult (*add)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                    const CUDA_KERNEL_NODE_PARAMS *) = REAL(cuGraphAddKernelNode_v2);
    CUresult (*inst)(CUgraphExec *, CUgraph, unsigned long long) =
        REAL(cuGraphInstantiateWithFlags);
    CUresult (*set_attr)(CUgraphNode, int, const void *) = REAL(cuGraphKernelNodeSetAttribute);
    struct rp_tmpl *t = calloc(1, sizeof(*t));
    CUcontext ctx = NULL;
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;

    /* The nodes run in the stream's context (a stream of another device than the current one's
     * has its own); the current one where the driver cannot say. */
    if (((CUresult(*)(CUstream, CUcontext *))REAL(cuStreamGetCtx))(r->st, &ctx) != CUDA_SUCCESS ||
        !ctx)
        ((CUresult(*)(CUcontext *))REAL(cuCtxGetCurrent))(&ctx);
    if (!t)
        return NULL;
    t->st = r->st;
    t->n = r->n;
    t->nchunks = (r->n + chunk_nodes - 1) / chunk_nodes;
    t->recs = malloc(r->n * sizeof(*t->recs));
    t->args = malloc(r->used ? r->used : 1);
    t->graphs = calloc(t->nchunks, sizeof(*t->graphs));
    t->execs = calloc(t->nchunks, sizeof(*t->execs));
    t->nodes = calloc(r->n, sizeof(*t->nodes));
    if (t->recs && t->args && t->graphs && t->execs && t->nodes) {
        memcpy(t->recs, r->recs, r->n * sizeof(*t->recs));
        memcpy(t->args, r->args, r->used);
        t->bytes = r->used;
        rc = CUDA_SUCCESS;
    }
    for (uint32_t c = 0; c < t->nchunks && rc == CUDA_SUCCESS; c++) {
        uint32_t end = (c + 1) * chunk_nodes < t->n ? (c + 1) * chunk_nodes : t->n;
        rc = create(&t->graphs[c], 0);
        for (uint32_t i = c * chunk_nodes; i < end && rc == CUDA_SUCCESS; i++) {
            CUDA_KERNEL_NODE_PARAMS p;
            void *extra[5];
            size_t size;
            fill_params(&p, &t->recs[i], ctx, extra, &size, t->args + t->recs[i].off);
            rc = add(&t->nodes[i], t->graphs[c], i > c * chunk_nodes ? &t->nodes[i - 1] : NULL,
                     i > c * chunk_nodes ? 1 : 0, &p);
            for (uint32_t j = 0; j < t->recs[i].nattrs && rc == CUDA_SUCCESS; j++) {
                CUlaunchAttribute a;
                memcpy(&a, t->args + t->recs[i].off + t->recs[i].len + j * OM_LAUNCH_ATTR_BYTES,
                       sizeof(a));
                if (node_attr(a.id))
                    rc = set_attr(t->nodes[i], a.id, &a.value);
            }
        }
        if (rc == CUDA_SUCCESS)
            rc = inst(&t->execs[c], t->graphs[c], 0);
    }
    if (rc != CUDA_SUCCESS) {
        if (++r->fails == OM_REPLAY_MAX_FAILS)
            om_warn("client %d: %u runs of launches could not be built as graphs (CUresult %d): "
                    "its launches are no longer replayed",
                    (int)s->pid, r->fails, rc);
        tmpl_free(t);
        return NULL;
    }
    r->builds++;
    return t;
}

/* The chunk [r->chunk, end) of template t, as its graph: nodes whose bytes changed updated. */
static void launch_chunk(struct session *s, struct om_replay *r, struct rp_tmpl *t, uint32_t end)
{
    CUresult (*set)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS *) =
        REAL(cuGraphExecKernelNodeSetParams_v2);
    CUresult (*glaunch)(CUgraphExec, CUstream) = REAL(cuGraphLaunch);
    uint32_t c = r->chunk / chunk_nodes;
    CUcontext ctx = NULL;
    CUresult rc = CUDA_SUCCESS;

    if (r->changed &&
        (((CUresult(*)(CUstream, CUcontext *))REAL(cuStreamGetCtx))(r->st, &ctx) != CUDA_SUCCESS ||
         !ctx))
        ((CUresult(*)(CUcontext *))REAL(cuCtxGetCurrent))(&ctx);
    for (uint32_t i = r->chunk; i < end && rc == CUDA_SUCCESS; i++) {
        if (!(r->changed >> (i - r->chunk) & 1))
            continue;
        CUDA_KERNEL_NODE_PARAMS p;
        void *extra[5];
        size_t size;
        fill_params(&p, &r->recs[i], ctx, extra, &size, r->args + r->recs[i].off);
        rc = set(t->execs[c], t->nodes[i], &p);
        if (rc == CUDA_SUCCESS) /* what the node holds now */
            memcpy(t->args + t->recs[i].off, r->args + r->recs[i].off, r->recs[i].len);
    }
    om_output_launched(s); /* before the launch: api/launch.c says why */
    if (rc == CUDA_SUCCESS)
        rc = glaunch(t->execs[c], r->st);
    if (rc == CUDA_SUCCESS) {
        const struct rp_rec *last = &r->recs[end - 1];
        om_sched_launched(s, r->st, om_sched_key(last->k, last->g, (unsigned)last->m));
        r->replayed += end - r->chunk;
        r->graph_launches++;
    } else if (om_server_fatal(rc)) {
        post_error(s, r, rc); /* the context is lost: every client hears of it (driver.c) */
    } else {
        /* Redone one by one, so that each kernel's own error is the one its stream keeps. */
        if (!r->warned++)
            om_warn("client %d: a replayed graph failed (CUresult %d); its launches go out one by "
                    "one (said once per session)",
                    (int)s->pid, rc);
        launch_records(s, r, r->chunk, end);
    }
    r->changed = 0;
}

/* ------------------------------------------------------------------ runs */

static uint64_t run_hash(const struct om_replay *r)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)(uintptr_t)r->st;

    for (uint32_t i = 0; i < r->n; i++) {
        const struct rp_rec *x = &r->recs[i];
        uint64_t v[6] = {x->k, x->g, x->m, x->b, ((uint64_t)x->smem << 32) | x->len, x->nattrs};
        const uint8_t *a = r->args + x->off + x->len;
        for (int j = 0; j < 6; j++)
            h = (h ^ v[j]) * 1099511628211ull;
        for (size_t j = 0; j < (size_t)x->nattrs * OM_LAUNCH_ATTR_BYTES; j++)
            h = (h ^ a[j]) * 1099511628211ull;
    }
    return h;
}

/* Whether t's first `n` records have the shape of the run's. */
static bool prefix_matches(const struct rp_tmpl *t, const struct om_replay *r, uint32_t n)
{
    if (t->st != r->st || t->n < n)
        return false;
    for (uint32_t i = 0; i < n; i++)
        if (!same_shape(&t->recs[i], t->args, &r->recs[i], r->args))
            return false;
    return true;
}

/* A run that did not match a template all through: remembered by its shape, built the second
 * time in a row it is seen. */
static void learn(struct session *s, struct om_replay *r)
{
    uint64_t h;
    int slot = -1, free_at = -1;

    if (r->over || r->n < OM_REPLAY_MIN_RUN || r->fails >= OM_REPLAY_MAX_FAILS)
        return;
    h = run_hash(r);
    for (int i = 0; i < OM_REPLAY_SIGS; i++)
        if (r->sig[i].n == r->n && r->sig[i].st == r->st && r->sig[i].hash == h)
            slot = i;
    if (slot < 0) {
        free_at = (int)(r->next_sig++ % OM_REPLAY_SIGS);
        r->sig[free_at].hash = h;
        r->sig[free_at].st = r->st;
        r->sig[free_at].n = r->n;
        r->sig[free_at].seen = 1;
        return;
    }
    if (++r->sig[slot].seen < 2)
        return;
    for (int i = 0; i < OM_REPLAY_TEMPLATES; i++)
        if (r->t[i] && r->t[i]->n == r->n && prefix_matches(r->t[i], r, r->n))
            return; /* built already (the run began matching another template) */
    /* Room: the least recently used templates go until a slot is free and the nodes fit. */
    int empty = -1;
    for (;;) {
        int victim = -1;
        empty = -1;
        for (int i = 0; i < OM_REPLAY_TEMPLATES; i++) {
            if (!r->t[i])
                empty = empty < 0 ? i : empty;
            else if (victim < 0 || r->t[i]->last_used < r->t[victim]->last_used)
                victim = i;
        }
        if ((empty >= 0 && r->nodes + r->n <= OM_REPLAY_MAX_NODES &&
             r->tbytes + r->used <= OM_REPLAY_TMPL_BYTES) ||
            victim < 0)
            break;
        r->nodes -= r->t[victim]->n;
        r->tbytes -= r->t[victim]->bytes;
        tmpl_free(r->t[victim]);
        r->t[victim] = NULL;
    }
    uint64_t cost = tmpl_cost(r);
    if (empty >= 0 && !om_budget_take(&held_bytes, cost, om_budget.server_replay)) {
        if (!__atomic_exchange_n(&held_refused, 1, __ATOMIC_RELAXED))
            om_warn("replay: the templates of all clients reached OPENMPS_SERVER_REPLAY_MAX; "
                    "runs past it are launched one by one (said once)");
        return;
    }
    struct rp_tmpl *t = empty >= 0 ? build(s, r) : NULL;
    if (!t) {
        if (empty >= 0)
            om_budget_give(&held_bytes, cost);
        return;
    }
    t->charged = cost;
    t->last_used = r->runs;
    r->t[empty] = t;
    r->nodes += t->n;
    r->tbytes += t->bytes;
    r->sig[slot].seen = 0; /* it is a template now */
}

void om_replay_end(struct session *s, int by)
{
    struct om_replay *r = s->replay;
    bool launch = by == OM_REPLAY_BY_PRINTS || by == OM_REPLAY_BY_ATTRS ||
                  by == OM_REPLAY_BY_SHARE || by == OM_REPLAY_BY_CAPTURE;

    if (launch && !r && om_replay_enabled())
        r = s->replay = calloc(1, sizeof(*r)); /* counted from the first launch */
    if (r && launch)
        r->launched++;
    if (r && (r->n || launch)) {
        if (by >= 0 && by < OM_HANDLER_COUNT)
            r->by_entry[by]++;
        else if (by < 0 && -by <= OM_REPLAY_BY_KINDS)
            r->by_kind[-by - 1]++;
    }
    if (!r || !r->n)
        return;
    if (r->on && !r->broken && r->n > r->chunk)
        launch_records(s, r, r->chunk, r->n); /* what is held goes out */
    if (r->on && r->n == r->on->n)
        r->on->last_used = r->runs; /* a whole template's run */
    else
        learn(s, r);
    r->runs++;
    r->n = 0;
    r->used = 0;
    r->over = false;
    r->on = NULL;
    r->broken = false;
    r->changed = 0;
}

/* Before a launch's stream is resolved: a run on another stream ends first, so that the legacy
 * stream's ordering route.c enqueues (events recorded on the client's other streams) stands
 * behind what that run holds. */
void om_replay_next_stream(struct session *s, uint64_t handle)
{
    if (s->replay && s->replay->n && s->replay->handle != handle)
        om_replay_end(s, OM_REPLAY_BY_STREAM);
}

void om_replay_idle(struct session *s)
{
    struct om_replay *r = s->replay;

    if (!om_replay_holding(s))
        return;
    launch_records(s, r, r->chunk, r->n);
    r->broken = true; /* the rest of this chunk follows as it comes */
    r->changed = 0;
}

/* Room for one more record and its argument bytes in the run. */
static bool room(struct om_replay *r, uint32_t len)
{
    if (r->n >= OM_REPLAY_MAX_NODES || r->used + (uint64_t)len > OM_REPLAY_ARG_BYTES)
        return false;
    if (r->n == r->cap) {
        uint32_t cap = r->cap ? r->cap * 2 : 64;
        struct rp_rec *n = realloc(r->recs, cap * sizeof(*n));
        if (!n)
            return false;
        r->recs = n;
        r->cap = cap;
    }
    if (!r->args || r->used + len > r->args_cap) { /* never NULL once a record is in */
        uint32_t cap = r->args_cap ? r->args_cap : 4096;
        while (cap < r->used + len)
            cap *= 2;
        uint8_t *n = realloc(r->args, cap);
        if (!n)
            return false;
        r->args = n;
        r->args_cap = cap;
    }
    return true;
}

static uint32_t chunk_end(const struct om_replay *r, const struct rp_tmpl *t)
{
    return r->chunk + chunk_nodes < t->n ? r->chunk + chunk_nodes : t->n;
}

/* After the record at i matched t: held, and the chunk's graph launched when it is complete. */
static void held(struct session *s, struct om_replay *r, struct rp_tmpl *t, uint32_t i)
{
    uint32_t end = chunk_end(r, t);

    if (memcmp(t->args + t->recs[i].off, r->args + r->recs[i].off, r->recs[i].len))
        r->changed |= 1ull << (i - r->chunk);
    if (i + 1 < end)
        return;
    launch_chunk(s, r, t, end);
    r->chunk = end;
}

CUresult om_replay_launch(struct session *s, uint64_t handle, CUstream st,
                          const struct om_replay_rec *l)
{
    struct om_replay *r = s->replay;
    struct rp_rec x = {l->k, l->g, l->m, l->b, l->smem, l->len, 0, l->nattrs};
    size_t abytes = (size_t)l->nattrs * OM_LAUNCH_ATTR_BYTES;
    uint32_t i;

    if (!r && !(r = s->replay = calloc(1, sizeof(*r))))
        return launch_one(s, st, &x, l->args, l->attrs);
    r->launched++;
    if (r->n && (r->handle != handle || r->st != st))
        om_replay_end(s, OM_REPLAY_BY_STREAM); /* another stream: another run */
    if (!r->n) {
        r->handle = handle;
        r->st = st;
        r->call_st = s->call_stream;
        r->chunk = 0;
        r->on = NULL;
    }
    if (r->over || !room(r, l->len + (uint32_t)abytes)) {
        /* Past what a run may keep: what is held goes out, and this run is not learnt. */
        if (om_replay_holding(s))
            launch_records(s, r, r->chunk, r->n);
        r->on = NULL;
        r->over = true;
        return launch_one(s, st, &x, l->args, l->attrs);
    }
    i = r->n++;
    x.off = r->used;
    r->recs[i] = x;
    if (l->len)
        memcpy(r->args + r->used, l->args, l->len);
    if (abytes)
        memcpy(r->args + r->used + l->len, l->attrs, abytes);
    r->used += l->len + (uint32_t)abytes;
    if (i == 0) {
        /* The longest template that begins so: a shorter one is often its prefix (a forward
         * pass and a forward and backward one), and a run switches templates only at the start
         * of a chunk (below). */
        for (int t = 0; t < OM_REPLAY_TEMPLATES; t++)
            if (r->t[t] && r->t[t]->st == st && (!r->on || r->t[t]->n > r->on->n) &&
                same_shape(&r->t[t]->recs[0], r->t[t]->args, &r->recs[0], r->args))
                r->on = r->t[t];
    } else if (r->on &&
               !(i < r->on->n && same_shape(&r->on->recs[i], r->on->args, &r->recs[i], r->args))) {
        /* It differs: another template with the whole run so far, or out as it comes. Only at
         * a chunk's start in every template: after a template of 20 the run stands at 20,
         * inside another's second chunk, whose graph also holds launches 16-19. */
        struct rp_tmpl *next = NULL;
        for (int t = 0; t < OM_REPLAY_TEMPLATES && r->chunk % chunk_nodes == 0; t++)
            if (r->t[t] && r->t[t] != r->on && (!next || r->t[t]->n > next->n) &&
                prefix_matches(r->t[t], r, i + 1))
                next = r->t[t];
        if (next) {
            r->changed = 0;
            for (uint32_t j = r->chunk; j < i; j++)
                if (memcmp(next->args + next->recs[j].off, r->args + r->recs[j].off,
                           r->recs[j].len))
                    r->changed |= 1ull << (j - r->chunk);
        } else if (om_replay_holding(s)) {
            launch_records(s, r, r->chunk, i);
        }
        r->on = next;
    }
    if (!r->on)
        return launch_rec(s, r, i);
    /* Holding a chunk delays its kernels until its last record; that pays only where launches
     * contend (measured: one PyTorch client alone ran 24 % slower held, 32 ran 10 % faster). So
     * with fewer busy clients than OPENMPS_REPLAY_MIN_CLIENTS the chunk goes out as it comes. */
    if (i == r->chunk && om_busy_clients() < min_clients)
        r->broken = true;
    if (r->broken) {
        /* Part of this chunk went out already: the rest follows it, one by one. */
        CUresult rc = launch_rec(s, r, i);
        if (i + 1 == chunk_end(r, r->on)) {
            r->chunk = i + 1;
            r->broken = false;
            r->changed = 0;
        }
        return rc;
    }
    held(s, r, r->on, i);
    return CUDA_SUCCESS;
}

/* The log's line of what ended a session's runs most often (a framework's loop that is not
 * replayed says here which call of it breaks its runs). */
static void report_ends(const struct session *s, const struct om_replay *r)
{
    static const char *const kinds[OM_REPLAY_BY_KINDS] = {
        "a printing kernel", "a priority attribute", "a capture",
        "another stream",    "a private operation",  "the end",
        "an SM share"};
    char line[512];
    size_t len = 0;
    int done[6];

    for (int k = 0; k < 6; k++) {
        uint32_t best = 0;
        int at = 0;
        for (int i = -OM_REPLAY_BY_KINDS; i < OM_HANDLER_COUNT; i++) {
            uint32_t v = i < 0 ? r->by_kind[-i - 1] : r->by_entry[i];
            bool seen = false;
            for (int j = 0; j < k; j++)
                seen = seen || done[j] == i;
            if (v > best && !seen) {
                best = v;
                at = i;
            }
        }
        if (!best)
            break;
        done[k] = at;
        int n = snprintf(line + len, sizeof(line) - len, "%s%s %u", k ? ", " : "",
                         at < 0 ? kinds[-at - 1] : om_server_entry_name(at), best);
        if (n < 0 || (size_t)n >= sizeof(line) - len)
            break;
        len += (size_t)n;
    }
    if (len)
        om_info("client %d: of %llu launches, runs ended most by: %s", (int)s->pid,
                (unsigned long long)r->launched, line);
}

/* The session's end: what is held goes out (its streams are then waited for, teardown.c). */
void om_replay_session_flush(struct session *s)
{
    om_replay_end(s, OM_REPLAY_BY_END);
}

/* The session's end, after its streams' work: its templates' graphs, its run. */
void om_replay_session_end(struct session *s)
{
    struct om_replay *r = s->replay;

    if (!r)
        return;
    if (r->replayed)
        om_info("client %d: %llu launches replayed in %llu graph launches (%llu runs built)",
                (int)s->pid, (unsigned long long)r->replayed, (unsigned long long)r->graph_launches,
                (unsigned long long)r->builds);
    if (r->launched >= 1000)
        report_ends(s, r);
    for (int t = 0; t < OM_REPLAY_TEMPLATES; t++)
        tmpl_free(r->t[t]);
    free(r->recs);
    free(r->args);
    free(r);
    s->replay = NULL;
}
