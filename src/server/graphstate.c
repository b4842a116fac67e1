/* SPDX-License-Identifier: MIT */
/* What the server keeps of a client's graphs, below the graph families (api/graphs.c, nodes.c,
 * capture.c, graphmem.c): the handles their nodes and child graphs make the client's, what a
 * destroyed graph or node takes with it, the graph allocations and conditional handles they
 * hold, and the helpers of requests several of them read. */
#include <stdlib.h>
#include <string.h>

#include "graphstate.h"

#include "../common/log.h"

/* ------------------------------------------------------------------ nodes and graphs */

/* in:CHECK of node arrays (the node rows of api/remote/nodes.tsv, host nodes): each one the
 * client's. */
CUresult om_check_nodes(struct call *c, CUgraphNode *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!om_handles_has(&c->s->own[OM_H_NODE], (uint64_t)(uintptr_t)v[i]))
            return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS;
}

/* Handles the driver answered become the client's (nodes of its own graphs). */
CUresult om_graph_own_all(struct call *c, enum om_handle_kind kind, const CUgraphNode *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t h = (uint64_t)(uintptr_t)v[i];
        CUresult rc;
        if (!h || om_handles_has(&c->s->own[kind], h))
            continue;
        if ((rc = om_own_room(c->s, kind)) != CUDA_SUCCESS)
            return rc;
        if (om_handles_add(&c->s->own[kind], h) < 0)
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

void om_graph_forget_node(struct session *s, CUgraphNode n, int depth)
{
    CUresult (*type)(CUgraphNode, int *) = REAL(cuGraphNodeGetType);
    CUresult (*child)(CUgraphNode, CUgraph *) = REAL(cuGraphChildGraphNodeGetGraph);
    CUgraph g = NULL;
    int t = -1;

    om_own_drop(s, OM_H_NODE, (uint64_t)(uintptr_t)n);
    om_graphmem_forget(s, 0, (uint64_t)(uintptr_t)n);
    om_cond_forget_node(s, (uint64_t)(uintptr_t)n, depth);
    if (depth < MAX_NESTING && type && child && type(n, &t) == CUDA_SUCCESS &&
        t == NODE_TYPE_GRAPH && child(n, &g) == CUDA_SUCCESS && g) {
        om_own_drop(s, OM_H_CHILDGRAPH, (uint64_t)(uintptr_t)g);
        om_graph_forget_graph(s, g, depth + 1);
    }
}

void om_graph_forget_graph(struct session *s, CUgraph g, int depth)
{
    CUresult (*nodes)(CUgraph, CUgraphNode *, size_t *) = REAL(cuGraphGetNodes);
    CUgraphNode *v = NULL;
    size_t n = 0;

    if (nodes(g, NULL, &n) == CUDA_SUCCESS && n && (v = calloc(n, sizeof(*v))) != NULL &&
        nodes(g, v, &n) != CUDA_SUCCESS)
        n = 0;
    for (size_t i = 0; v && i < n; i++)
        om_graph_forget_node(s, v[i], depth);
    free(v);
    om_graphmem_forget(s, (uint64_t)(uintptr_t)g, 0);
    om_cond_forget_graph(s, (uint64_t)(uintptr_t)g);
}

/* ------------------------------------------------------------------ kernels that may print */

/*
 * Kernel printf's turns (output.c) hold for graphs too: an executable graph whose kernels may
 * print is launched as a printing kernel is, taking the print turn first and leaving a fence
 * after it. Whether it may is decided when it is made (its graph walked, child graphs and the
 * conditional bodies the server recorded to MAX_NESTING) and when one of its kernels or child
 * graphs is replaced. A kernel node whose kernel the session does not know by its handle (the
 * driver may keep a captured launch's function rather than the kernel it was given) counts as
 * printing when any kernel of the session may print; a session none of whose kernels may print
 * walks nothing.
 */
static bool session_prints(const struct session *s)
{
    for (size_t i = 0; i < s->nkernels; i++)
        if (s->kernels[i].prints)
            return true;
    return false;
}

/* A conditional node's bodies, as the server recorded them when the node was added. */
static const struct gm_condnode *cond_node(const struct session *s, uint64_t node)
{
    const struct om_graphmem *m = s->graphmem;

    for (size_t i = 0; m && i < m->ncn; i++)
        if (m->cn[i].node == node)
            return &m->cn[i];
    return NULL;
}

static bool walk_prints(struct session *s, CUgraph g, int depth)
{
    CUresult (*nodes)(CUgraph, CUgraphNode *, size_t *) = REAL(cuGraphGetNodes);
    CUresult (*type)(CUgraphNode, int *) = REAL(cuGraphNodeGetType);
    CUresult (*child)(CUgraphNode, CUgraph *) = REAL(cuGraphChildGraphNodeGetGraph);
    CUresult (*kparams)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *) =
        (CUresult(*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *))REAL(cuGraphKernelNodeGetParams_v2);
    CUgraphNode *v = NULL;
    size_t n = 0;
    bool prints = false;

    if (depth >= MAX_NESTING || !nodes || !type || nodes(g, NULL, &n) != CUDA_SUCCESS)
        return true; /* cannot tell: as printing */
    if (n && (!(v = calloc(n, sizeof(*v))) || nodes(g, v, &n) != CUDA_SUCCESS)) {
        free(v);
        return true;
    }
    for (size_t i = 0; i < n && !prints; i++) {
        int t = -1;
        if (type(v[i], &t) != CUDA_SUCCESS) {
            prints = true;
        } else if (t == NODE_TYPE_KERNEL) {
            CUDA_KERNEL_NODE_PARAMS p;
            memset(&p, 0, sizeof(p));
            const struct om_kernel *k = NULL;
            if (kparams && kparams(v[i], &p) == CUDA_SUCCESS) { /* the kernel, else the function */
                k = p.kern ? om_kernel_find(s, (uint64_t)(uintptr_t)p.kern) : NULL;
                if (!k && p.func)
                    k = om_kernel_find(s, (uint64_t)(uintptr_t)p.func);
            }
            prints = k ? k->prints : true;
        } else if (t == NODE_TYPE_GRAPH) {
            CUgraph cg = NULL;
            prints =
                !child || child(v[i], &cg) != CUDA_SUCCESS || !cg || walk_prints(s, cg, depth + 1);
        } else if (t == NODE_TYPE_CONDITIONAL) {
            const struct gm_condnode *cn = cond_node(s, (uint64_t)(uintptr_t)v[i]);
            prints = !cn;
            for (unsigned b = 0; cn && b < cn->n && !prints; b++)
                prints = walk_prints(s, (CUgraph)(uintptr_t)cn->body[b], depth + 1);
        }
    }
    free(v);
    return prints;
}

bool om_graph_may_print(struct session *s, CUgraph g)
{
    return session_prints(s) && walk_prints(s, g, 0);
}

void om_graph_exec_note(struct session *s, uint64_t exec, CUgraph g)
{
    if (om_graph_may_print(s, g))
        om_graph_exec_prints(s, exec);
    else
        om_handles_remove(&s->print_execs, exec);
}

void om_graph_exec_prints(struct session *s, uint64_t exec)
{
    if (om_handles_has(&s->print_execs, exec))
        return;
    if (om_handles_add(&s->print_execs, exec) < 0)
        om_warn("client %d: out of memory noting a graph that prints: its lines may cross "
                "another client's",
                (int)s->pid);
    else
        om_debug("client %d: executable graph %#llx may print: its launches take printf's turn",
                 (int)s->pid, (unsigned long long)exec);
}

CUresult om_graph_node_list(struct call *c, enum list_kind kind)
{
    uint64_t h = om_get_u64(&c->in), cap = om_get_u64(&c->in), want = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    CUgraphNode *a = NULL, *b = NULL;
    size_t n = (size_t)cap;
    int arrays = kind == LIST_EDGES ? 2 : 1;

    if (rc != CUDA_SUCCESS)
        return rc;
    rc = om_arg_handle(c, kind == LIST_DEPS || kind == LIST_DEPENDENTS ? OM_H_NODE : OM_H_GRAPH, h,
                       false);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (want && cap > MAX_LIST) {
        client_err(c->s, "client %d: a graph list of more than %d entries is not supported",
                   (int)c->s->pid, MAX_LIST);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (want && cap &&
        (!(a = calloc(n, sizeof(*a))) || (arrays == 2 && !(b = calloc(n, sizeof(*b)))))) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    switch (kind) {
    case LIST_NODES:
        rc = ((CUresult(*)(CUgraph, CUgraphNode *, size_t *))REAL(cuGraphGetNodes))(
            (CUgraph)(uintptr_t)h, want ? a : NULL, &n);
        break;
    case LIST_ROOTS:
        rc = ((CUresult(*)(CUgraph, CUgraphNode *, size_t *))REAL(cuGraphGetRootNodes))(
            (CUgraph)(uintptr_t)h, want ? a : NULL, &n);
        break;
    case LIST_DEPS:
        rc = ((CUresult(*)(CUgraphNode, CUgraphNode *, size_t *))REAL(cuGraphNodeGetDependencies))(
            (CUgraphNode)(uintptr_t)h, want ? a : NULL, &n);
        break;
    case LIST_DEPENDENTS:
        rc = ((CUresult(*)(CUgraphNode, CUgraphNode *, size_t *))REAL(
            cuGraphNodeGetDependentNodes))((CUgraphNode)(uintptr_t)h, want ? a : NULL, &n);
        break;
    case LIST_EDGES:
        rc = ((CUresult(*)(CUgraph, CUgraphNode *, CUgraphNode *, size_t *))REAL(cuGraphGetEdges))(
            (CUgraph)(uintptr_t)h, want ? a : NULL, want ? b : NULL, &n);
        break;
    }
    if (rc != CUDA_SUCCESS)
        goto out;
    if (want && n > cap)
        n = (size_t)cap; /* the driver fills at most the capacity */
    if (want && ((rc = om_graph_own_all(c, OM_H_NODE, a, n)) != CUDA_SUCCESS ||
                 (b && (rc = om_graph_own_all(c, OM_H_NODE, b, n)) != CUDA_SUCCESS)))
        goto out;
    om_put_u64(&c->out, n);
    if (want && n) {
        om_put_bytes(&c->out, a, n * sizeof(*a));
        if (b)
            om_put_bytes(&c->out, b, n * sizeof(*b));
    }
out:
    free(a);
    free(b);
    return rc;
}

/* The dependencies of a new node: a count, then the handles, each the client's. */
CUresult om_graph_read_deps(struct call *c, CUgraphNode *deps, uint64_t *n)
{
    const void *b;

    *n = om_get_u64(&c->in);
    if (*n > MAX_DEPS)
        return CUDA_ERROR_INVALID_VALUE;
    b = om_get_bytes(&c->in, *n * sizeof(CUgraphNode));
    if (!b)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(deps, b, *n * sizeof(CUgraphNode));
    return om_check_nodes(c, deps, (size_t)*n);
}

/* The context a node runs in: the server's (the client's CUcontext is a token). */
CUcontext om_graph_server_context(void)
{
    CUcontext ctx = NULL;
    ((CUresult(*)(CUcontext *))REAL(cuCtxGetCurrent))(&ctx);
    return ctx;
}

/* ------------------------------------------------------------------ graph allocations and
 * conditional handles */

/*
 * A graph allocation (an allocation node's, or cuMemAllocAsync's while capturing) has an
 * address the driver reserves when the node is made, fixed while a graph or an executable graph
 * holds the node. The range is the client's (s->allocs, marked `graph`) while anything holds it:
 * the graph the node is in (until the node or the graph goes) and every executable graph
 * instantiated from that graph (until it is destroyed). When the last holder goes, the range is
 * no longer the client's, before the driver may give the address to another client; if an
 * executable graph was ever made from it, the allocation may still be allocated (a graph that
 * does not free it): it is freed then, after the client's own work (best effort: the driver
 * refuses to free one that is not allocated).
 */
struct om_graphmem *om_graphmem_of(struct session *s)
{
    if (!s->graphmem)
        s->graphmem = calloc(1, sizeof(*s->graphmem));
    return s->graphmem;
}

/* Room for one more element in *v (cap elements of el bytes, n used). */
bool om_graphmem_grow(void **v, size_t *cap, size_t n, size_t el)
{
    size_t c = *cap ? *cap * 2 : 16;
    void *p;

    if (n < *cap)
        return true;
    if (!(p = realloc(*v, c * el)))
        return false;
    *v = p;
    *cap = c;
    return true;
}

bool om_graphmem_held(struct session *s, uint64_t base)
{
    struct om_graphmem *m = s->graphmem;

    for (size_t i = 0; m && i < m->nh; i++)
        if (m->h[i].base == base)
            return true;
    return false;
}

/* Room for n more holds under the client's handle budget. */
CUresult om_graphmem_room(struct session *s, size_t n)
{
    struct om_graphmem *m = om_graphmem_of(s);

    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (m->nh + n > om_budget.client_handles)
        return om_budget_refuse(s, OM_BUDGET_HANDLES, "graph allocation");
    return CUDA_SUCCESS;
}

/* dev: where the allocation is (its cap counts it there), for a range not held yet. */
CUresult om_graphmem_add(struct session *s, uint64_t base, uint64_t size, uint64_t holder,
                         uint64_t node, bool inst, uint64_t pool, int dev)
{
    struct om_graphmem *m = om_graphmem_of(s);
    CUresult rc = om_graphmem_room(s, 1);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!om_graphmem_grow((void **)&m->h, &m->caph, m->nh, sizeof(*m->h)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!om_graphmem_held(s, base)) {
        /* counted against the device-memory cap while the client holds it (memcap.c) */
        if ((rc = om_memcap_check(s, dev, size)) != CUDA_SUCCESS)
            return rc;
        if (om_ranges_add(&s->allocs, base, size, 0, true) < 0)
            return CUDA_ERROR_OUT_OF_MEMORY;
        s->allocs.v[s->allocs.n - 1].graph = true;
        s->allocs.v[s->allocs.n - 1].pool = pool;
        om_memcap_charge_on(s, &s->allocs.v[s->allocs.n - 1], dev);
    }
    m->h[m->nh++] = (struct gm_hold){base, size, holder, node, inst};
    return CUDA_SUCCESS;
}

/* The range goes from the client's memory (the last hold of it went). */
void om_graphmem_release(struct session *s, uint64_t base, bool inst)
{
    struct om_range *r = om_ranges_find_base(&s->allocs, base);
    CUresult rc;

    if (inst) { /* it may be allocated still: freed after the client's own work */
        CUstream st;
        om_exec_sync_client(s);
        st = om_find_stream(s, 0, true, &rc);
        if (st &&
            ((CUresult(*)(CUdeviceptr, CUstream))REAL(cuMemFreeAsync))(base, st) == CUDA_SUCCESS)
            ((CUresult(*)(CUstream))REAL(cuStreamSynchronize))(st);
    }
    if (r && r->graph)
        om_allocs_remove(s, r);
}

/* Drops the holds of `holder` (a graph or an executable graph) or of `node` (an allocation
 * node); releases each range nothing holds any longer. Called before the driver destroys it. */
void om_graphmem_forget(struct session *s, uint64_t holder, uint64_t node)
{
    struct om_graphmem *m = s->graphmem;

    for (size_t i = 0; m && i < m->nh;) {
        struct gm_hold d = m->h[i];
        if (!((holder && d.holder == holder) || (node && d.node == node))) {
            i++;
            continue;
        }
        m->h[i] = m->h[--m->nh];
        if (!om_graphmem_held(s, d.base))
            om_graphmem_release(s, d.base, d.inst);
    }
}

/* An executable graph made from graph g holds g's allocations too. */
CUresult om_graphmem_copy(struct session *s, uint64_t g, uint64_t e)
{
    struct om_graphmem *m = s->graphmem;
    size_t n = m ? m->nh : 0;
    CUresult rc = CUDA_SUCCESS;

    for (size_t i = 0; i < n && rc == CUDA_SUCCESS; i++) {
        if (m->h[i].holder != g)
            continue;
        for (size_t k = 0; k < m->nh; k++)
            if (m->h[k].base == m->h[i].base)
                m->h[k].inst = true;
        rc = om_graphmem_add(s, m->h[i].base, m->h[i].size, e, 0, true, 0,
                             s->dev); /* held already */
    }
    return rc;
}

/* The graph a stream captures into (0: none), and the node it captured last (*last). */
uint64_t om_graph_capture_graph(CUstream st, uint64_t *last)
{
    CUresult (*info)(CUstream, int *, uint64_t *, CUgraph *, const CUgraphNode **,
                     const CUgraphEdgeData **, size_t *) = REAL(cuStreamGetCaptureInfo_v3);
    int status = CAPTURE_NONE;
    uint64_t id = 0;
    CUgraph g = NULL;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    size_t n = 0;

    if (last)
        *last = 0;
    if (!info || info(st, &status, &id, &g, &deps, &edges, &n) != CUDA_SUCCESS ||
        status == CAPTURE_NONE)
        return 0;
    if (last && n == 1 && deps)
        *last = (uint64_t)(uintptr_t)deps[0];
    return (uint64_t)(uintptr_t)g;
}

bool om_graphmem_captured(struct session *s, CUstream st, uint64_t base, uint64_t size,
                          uint64_t pool)
{
    uint64_t node = 0, g;

    if (!om_stream_capturing(s, st) || !(g = om_graph_capture_graph(st, &node)))
        return false;
    /* The node cuMemAllocAsync made is the capture's last one (the driver's dependencies). */
    return om_graphmem_add(s, base, size, g, node, false, pool, om_handle_device(s, pool)) ==
           CUDA_SUCCESS;
}

void om_graphmem_session_end(struct session *s)
{
    struct om_graphmem *m = s->graphmem;
    CUstream st = NULL;
    CUresult rc;

    if (!m)
        return;
    /* Its work is done (om_route_session_wait waited): what an executable graph may have left
     * allocated is freed while the graphs still reserve the addresses. */
    for (size_t i = 0; i < m->nh; i++) {
        struct om_range *r;
        if (m->h[i].inst && (st || (st = om_find_stream(s, 0, true, &rc))))
            ((CUresult(*)(CUdeviceptr, CUstream))REAL(cuMemFreeAsync))(m->h[i].base, st);
        for (size_t k = i + 1; k < m->nh; k++)
            if (m->h[k].base == m->h[i].base)
                m->h[k].inst = false; /* once */
        if ((r = om_ranges_find_base(&s->allocs, m->h[i].base)) && r->graph)
            om_allocs_remove(s, r);
    }
    if (st)
        ((CUresult(*)(CUstream))REAL(cuStreamSynchronize))(st);
    free(m->h);
    free(m->c);
    free(m->cn);
    free(m);
    s->graphmem = NULL;
}

void om_cond_forget_graph(struct session *s, uint64_t graph)
{
    struct om_graphmem *m = s->graphmem;

    for (size_t i = 0; m && i < m->nc;)
        if (m->c[i].graph == graph)
            m->c[i] = m->c[--m->nc];
        else
            i++;
}

/* A conditional node goes: its bodies (and what is in them) are no longer the client's. */
void om_cond_forget_node(struct session *s, uint64_t node, int depth)
{
    struct om_graphmem *m = s->graphmem;
    struct gm_condnode d;

    for (size_t i = 0; m && i < m->ncn; i++) {
        if (m->cn[i].node != node)
            continue;
        d = m->cn[i];
        m->cn[i] = m->cn[--m->ncn];
        for (unsigned b = 0; b < d.n; b++) {
            om_own_drop(s, OM_H_CHILDGRAPH, d.body[b]);
            if (depth < MAX_NESTING)
                om_graph_forget_graph(s, (CUgraph)(uintptr_t)d.body[b], depth + 1);
        }
        return;
    }
}
