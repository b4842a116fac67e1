/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of stream capture (api/remote/capture.tsv), and the captures
 * a session left open at its end. */
#include <stdlib.h>
#include <string.h>

#include "../graphstate.h"

#define CAPTURE_MODE_RELAXED 2
#define STREAM_CAPTURE_UNSUPPORTED 900 /* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */

/* ------------------------------------------------------------------ stream capture */

CUresult om_x_cuStreamBeginCapture_v2(struct call *c)
{
    uint64_t sh = om_get_u64(&c->in), mode = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (mode > CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    /* The legacy default stream cannot be captured (the per-thread one can). */
    if (sh == 0 || sh == (uint64_t)(uintptr_t)CU_STREAM_LEGACY)
        return STREAM_CAPTURE_UNSUPPORTED;
    st = om_arg_stream(c, sh, false, &rc);
    if (!st)
        return rc;
    /* Always relaxed in the server: a global or thread-local capture would forbid "unsafe"
     * calls to every thread of the server, that is, to the other clients. The client's mode
     * only changes which of its own calls the driver would refuse meanwhile. */
    rc = ((CUresult(*)(CUstream, int))REAL(cuStreamBeginCapture_v2))(st, CAPTURE_MODE_RELAXED);
    if (rc == CUDA_SUCCESS)
        c->s->captures++;
    return rc;
}

/* After a capture that ended without a graph: the nodes it had answered (its dependencies)
 * went with it. Every node the client holds that is in none of its graphs is dropped (rare:
 * each graph's nodes are listed). */
static void prune_nodes(struct session *s)
{
    CUresult (*nodes)(CUgraph, CUgraphNode *, size_t *) = REAL(cuGraphGetNodes);
    struct om_handles live = {0};
    uint64_t *drop;
    size_t ndrop = 0;

    for (size_t i = 0; i < s->own[OM_H_GRAPH].n; i++) {
        CUgraph g = (CUgraph)(uintptr_t)s->own[OM_H_GRAPH].v[i];
        CUgraphNode *v;
        size_t n = 0;
        if (nodes(g, NULL, &n) != CUDA_SUCCESS || !n || !(v = calloc(n, sizeof(*v))))
            continue;
        if (nodes(g, v, &n) == CUDA_SUCCESS)
            for (size_t k = 0; k < n; k++)
                om_handles_add(&live, (uint64_t)(uintptr_t)v[k]);
        free(v);
    }
    drop = calloc(s->own[OM_H_NODE].n + 1, sizeof(*drop));
    for (size_t i = 0; drop && i < s->own[OM_H_NODE].n; i++)
        if (!om_handles_has(&live, s->own[OM_H_NODE].v[i]))
            drop[ndrop++] = s->own[OM_H_NODE].v[i];
    for (size_t i = 0; i < ndrop; i++)
        om_own_drop(s, OM_H_NODE, drop[i]);
    free(drop);
    om_handles_free(&live);
}

/* The session's end: captures still open are ended (a capturing stream cannot be waited for
 * or destroyed cleanly) and their graphs destroyed. */
void om_graphs_release(struct session *s)
{
    CUresult (*end)(CUstream, CUgraph *) = REAL(cuStreamEndCapture);
    CUresult (*destroy)(CUgraph) = REAL(cuGraphDestroy);

    if (!s->captures || !end || !destroy)
        return;
    for (size_t i = 0; i <= s->own[OM_H_STREAM].n; i++) {
        CUstream st = i < s->own[OM_H_STREAM].n ? (CUstream)(uintptr_t)s->own[OM_H_STREAM].v[i]
                                                : s->default_stream;
        CUgraph g = NULL;
        if (st && om_stream_capturing(s, st) && end(st, &g) == CUDA_SUCCESS && g &&
            !om_handles_has(&s->own[OM_H_GRAPH], (uint64_t)(uintptr_t)g)) {
            om_graph_forget_graph(s, g, 0); /* its allocations' ranges (never instantiated) */
            destroy(g); /* (one captured into a graph of the client's goes with the others) */
        }
    }
    s->captures = 0;
}

CUresult om_x_cuStreamEndCapture(struct call *c)
{
    uint64_t sh = om_get_u64(&c->in), cg;
    CUresult rc = ARGS_OK(c);
    CUgraph g = NULL;
    bool was;
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    st = om_arg_stream(c, sh, false, &rc);
    if (!st)
        return rc;
    if ((rc = om_own_room(c->s, OM_H_GRAPH)) != CUDA_SUCCESS)
        return rc;
    was = om_stream_capturing(c->s, st);
    cg = was ? om_graph_capture_graph(st, NULL) : 0;
    rc = ((CUresult(*)(CUstream, CUgraph *))REAL(cuStreamEndCapture))(st, &g);
    if (was && !om_stream_capturing(c->s, st))
        c->s->captures--;
    if (was && rc != CUDA_SUCCESS)
        prune_nodes(c->s);
    /* A failed capture's graph is gone (unless it was the client's, cuStreamBeginCaptureToGraph):
     * so are the ranges of what it allocated (never instantiated: nothing to free). */
    if (was && rc != CUDA_SUCCESS && cg && !om_handles_has(&c->s->own[OM_H_GRAPH], cg) &&
        !om_handles_has(&c->s->own[OM_H_CHILDGRAPH], cg))
        om_graphmem_forget(c->s, cg, 0);
    if (rc == CUDA_SUCCESS && g) {
        if ((rc = om_own_add(c, OM_H_GRAPH, (uint64_t)(uintptr_t)g)) != CUDA_SUCCESS)
            return rc;
    }
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, (uint64_t)(uintptr_t)g);
    return rc;
}

/* Answer: status, id, graph, the count of dependencies, the dependencies (each becomes the
 * client's: it may add nodes after them), their edge data. The graph is not the client's
 * until the capture ends. */
CUresult om_x_cuStreamGetCaptureInfo_v3(struct call *c)
{
    uint64_t sh = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    int status = 0;
    uint64_t id = 0;
    CUgraph g = NULL;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    size_t n = 0;
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    st = om_arg_capture_stream(c, sh, &rc); /* route.c: the legacy stream beside a capture */
    if (!st)
        return rc;
    rc = ((CUresult(*)(CUstream, int *, uint64_t *, CUgraph *, const CUgraphNode **,
                       const CUgraphEdgeData **, size_t *))REAL(cuStreamGetCaptureInfo_v3))(
        st, &status, &id, &g, &deps, &edges, &n);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (status == CAPTURE_NONE)
        n = 0;
    if (n > MAX_LIST)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (n && (rc = om_graph_own_all(c, OM_H_NODE, deps, n)) != CUDA_SUCCESS)
        return rc;
    om_put_u64(&c->out, (uint64_t)status);
    om_put_u64(&c->out, id);
    om_put_u64(&c->out, (uint64_t)(uintptr_t)g);
    om_put_u64(&c->out, n);
    if (n) {
        CUgraphEdgeData zero[1] = {{0}};
        om_put_bytes(&c->out, deps, n * sizeof(*deps));
        for (size_t i = 0; i < n; i++)
            om_put_bytes(&c->out, edges ? &edges[i] : zero, sizeof(*edges));
    }
    return CUDA_SUCCESS;
}

CUresult om_x_cuStreamBeginCaptureToGraph(struct call *c)
{
    uint64_t sh = om_get_u64(&c->in), g = om_get_u64(&c->in), mode, ndeps;
    CUgraphNode deps[MAX_DEPS];
    CUresult rc = om_graph_read_deps(c, deps, &ndeps);
    CUstream st;

    mode = om_get_u64(&c->in);
    if (rc == CUDA_SUCCESS)
        rc = ARGS_OK(c);
    if (rc == CUDA_SUCCESS && mode > CAPTURE_MODE_RELAXED)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_GRAPH, g, false);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (sh == 0 || sh == (uint64_t)(uintptr_t)CU_STREAM_LEGACY)
        return STREAM_CAPTURE_UNSUPPORTED;
    st = om_arg_stream(c, sh, false, &rc);
    if (!st)
        return rc;
    /* Relaxed, as cuStreamBeginCapture_v2 (there). */
    rc = ((CUresult(*)(CUstream, CUgraph, const CUgraphNode *, const CUgraphEdgeData *, size_t,
                       int))REAL(cuStreamBeginCaptureToGraph))(
        st, (CUgraph)(uintptr_t)g, deps, NULL, (size_t)ndeps, CAPTURE_MODE_RELAXED);
    if (rc == CUDA_SUCCESS)
        c->s->captures++;
    return rc;
}
