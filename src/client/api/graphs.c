/* SPDX-License-Identifier: MIT */
/* Remote mode, the graphs family (api/remote/graphs.tsv): graphs and executable graphs, their
 * node and edge lists, instantiation, update, launch (the user objects' references they hold
 * are api/hostnodes.c's), and the marshalling helpers the graph families share (graph.h). */
#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/gen/entries.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "graph.h"
#include "../shim.h"

bool om_graph_edges_plain(const CUgraphEdgeData *e, size_t n)
{
    static const CUgraphEdgeData zero;
    for (size_t i = 0; e && i < n; i++)
        if (memcmp(&e[i], &zero, sizeof(zero)) != 0)
            return false;
    return true;
}

/* ------------------------------------------------------------------ edges with data */

/* Edge data other than the default (programmatic ports) is not carried yet. */
CUresult om_r_cuGraphAddDependencies_v2(CUgraph g, const CUgraphNode *from, const CUgraphNode *to,
                                        const CUgraphEdgeData *edges, size_t n)
{
    if (!om_graph_edges_plain(edges, n))
        return CUDA_ERROR_NOT_SUPPORTED;
    return ((CUresult(*)(CUgraph, const CUgraphNode *, const CUgraphNode *, size_t))om_remote_entry(
        OM_IDX_cuGraphAddDependencies))(g, from, to, n);
}

CUresult om_r_cuGraphRemoveDependencies_v2(CUgraph g, const CUgraphNode *from,
                                           const CUgraphNode *to, const CUgraphEdgeData *edges,
                                           size_t n)
{
    if (!om_graph_edges_plain(edges, n))
        return CUDA_ERROR_NOT_SUPPORTED;
    return ((CUresult(*)(CUgraph, const CUgraphNode *, const CUgraphNode *, size_t))om_remote_entry(
        OM_IDX_cuGraphRemoveDependencies))(g, from, to, n);
}

/* ------------------------------------------------------------------ graphs */

CUresult om_r_cuGraphDestroy(CUgraph g)
{
    CUresult rc = om_rpc_cuGraphDestroy(g);

    if (rc == CUDA_SUCCESS) {
        om_uobj_graph_destroyed(g); /* api/hostnodes.c: its user objects' references */
        om_pgcopy_forget(NULL, g);  /* api/pagecopy.c: its pageable copy nodes */
    }
    return rc;
}

/* A list of nodes (or, with `to`, of edges): see om_graph_node_list in the server. */
CUresult om_graph_node_list(int index, uint64_t h, CUgraphNode *from, CUgraphNode *to,
                            size_t *count)
{
    size_t cap, n;
    uint32_t got = 0;
    uint64_t *reply;
    CUresult rc;
    REQ(req, 24);

    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    cap = from ? *count : 0;
    if (from && (cap > MAX_LIST || (index == OM_IDX_cuGraphGetEdges && !to)))
        return from && cap > MAX_LIST ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
    reply = malloc(8 + (to ? 2 : 1) * cap * sizeof(CUgraphNode));
    if (!reply)
        return CUDA_ERROR_OUT_OF_MEMORY;
    om_put_u64(&req, h);
    om_put_u64(&req, cap);
    om_put_u64(&req, from != NULL);
    rc = om_rcall(index, &req, reply, 8 + (to ? 2 : 1) * cap * sizeof(CUgraphNode), &got);
    if (rc == CUDA_SUCCESS) {
        n = (size_t)reply[0];
        if (got < 8 || (from && (n > cap || got != 8 + (to ? 2 : 1) * n * sizeof(CUgraphNode))) ||
            (!from && got != 8)) {
            rc = CUDA_ERROR_UNKNOWN;
        } else {
            if (from) {
                memcpy(from, reply + 1, n * sizeof(CUgraphNode));
                if (to)
                    memcpy(to, reply + 1 + n, n * sizeof(CUgraphNode));
            }
            *count = n;
        }
    }
    free(reply);
    return rc;
}

CUresult om_r_cuGraphGetEdges(CUgraph g, CUgraphNode *from, CUgraphNode *to, size_t *n)
{
    if ((from == NULL) != (to == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    return om_graph_node_list(OM_IDX_cuGraphGetEdges, (uint64_t)(uintptr_t)g, from, to, n);
}

CUresult om_r_cuGraphInstantiate(CUgraphExec *exec, CUgraph g, CUgraphNode *err_node, char *log,
                                 size_t log_size)
{
    CUresult rc = ((CUresult(*)(CUgraphExec *, CUgraph, unsigned long long))om_remote_entry(
        OM_IDX_cuGraphInstantiateWithFlags))(exec, g, 0);

    if (err_node)
        *err_node = NULL; /* the server does not say which node failed */
    if (log && log_size)
        log[0] = '\0';
    return rc;
}

CUresult om_r_cuGraphExecUpdate(CUgraphExec exec, CUgraph g, CUgraphNode *err_node, int *result)
{
    CUgraphExecUpdateResultInfo info;
    CUresult rc;

    memset(&info, 0, sizeof(info));
    rc = ((CUresult(*)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *))om_remote_entry(
        OM_IDX_cuGraphExecUpdate_v2))(exec, g, &info);
    if (err_node)
        *err_node = info.errorNode;
    if (result)
        *result = info.result;
    return rc;
}

CUresult om_r_cuGraphLaunch(CUgraphExec exec, CUstream s)
{
    REQ(req, 16);
    CUresult rc = om_managed_push(s);

    if (rc != CUDA_SUCCESS)
        return rc;
    om_put_u64(&req, (uint64_t)(uintptr_t)exec);
    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    rc = om_rpost(OM_IDX_cuGraphLaunch, &req);
    if (rc == CUDA_SUCCESS)
        om_uobj_exec_launched(exec, s); /* api/hostnodes.c: waited for at its destroy */
    return rc;
}

CUresult om_r_cuGraphInstantiateWithParams(CUgraphExec *exec, CUgraph g,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    uint64_t reply[3] = {0};
    uint32_t got = 0;
    CUresult rc;
    REQ(req, 24);

    if (!exec || !p)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)g);
    om_put_u64(&req, p->flags);
    om_put_u64(&req, (uint64_t)(uintptr_t)p->hUploadStream);
    rc = om_rcall(OM_IDX_cuGraphInstantiateWithParams, &req, reply, sizeof(reply), &got);
    if (rc == CUDA_SUCCESS && got != sizeof(reply))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS) {
        *exec = (CUgraphExec)(uintptr_t)reply[0];
        p->hErrNode_out = (CUgraphNode)(uintptr_t)reply[1];
        p->result_out = (int)reply[2];
        om_uobj_instantiated(g, *exec); /* api/hostnodes.c */
    } else {
        p->hErrNode_out = NULL;
        p->result_out = 1; /* CUDA_GRAPH_INSTANTIATE_ERROR: the server does not say more */
    }
    return rc;
}

/* The server has the driver describe the graph and answers the text; the path is the
 * program's, so it is written here. */
CUresult om_r_cuGraphDebugDotPrint(CUgraph g, const char *path, unsigned flags)
{
    static const size_t cap = 256u * 1024u;
    uint32_t got = 0;
    char *text;
    CUresult rc;
    FILE *f;
    REQ(req, 16);

    if (!path)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(text = malloc(cap)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    om_put_u64(&req, (uint64_t)(uintptr_t)g);
    om_put_u64(&req, flags);
    rc = om_rcall(OM_IDX_cuGraphDebugDotPrint, &req, text, cap, &got);
    if (rc == CUDA_SUCCESS) {
        f = fopen(path, "w");
        if (!f || fwrite(text, 1, got, f) != got)
            rc = 304; /* CUDA_ERROR_OPERATING_SYSTEM */
        if (f && fclose(f) != 0)
            rc = 304;
    }
    free(text);
    return rc;
}

/* ------------------------------------------------------------------ edge data, attributes */

/* The _v2 lists through the first versions: every edge they answer is a default one (the
 * driver refuses the first versions, CUDA_ERROR_LOSSY_QUERY, when a graph has others). */
CUresult om_graph_plain_edges(CUresult rc, CUgraphEdgeData *edges, const CUgraphNode *nodes,
                              const size_t *n)
{
    if (rc == CUDA_SUCCESS && edges && nodes && n)
        memset(edges, 0, *n * sizeof(*edges));
    return rc;
}

CUresult om_r_cuGraphGetEdges_v2(CUgraph g, CUgraphNode *from, CUgraphNode *to,
                                 CUgraphEdgeData *edges, size_t *n)
{
    if (edges && !from)
        return CUDA_ERROR_INVALID_VALUE;
    return om_graph_plain_edges(om_r_cuGraphGetEdges(g, from, to, n), edges, from, n);
}

/* ------------------------------------------------------------------ instantiation, destruction */

/* Custom on the server (it records what an executable graph holds), as they were generated; the
 * installed functions below add the user objects' references (api/hostnodes.c keeps them). */
static CUresult instantiate_call(CUgraphExec *exec, CUgraph g, unsigned long long flags)
{
    REQ(req, 16);
    uint64_t v = 0;
    uint32_t got = 0;
    CUresult rc;

    if (!exec)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)g);
    om_put_u64(&req, flags);
    rc = om_rcall(OM_IDX_cuGraphInstantiateWithFlags, &req, &v, sizeof(v), &got);
    if (rc == CUDA_SUCCESS && got != sizeof(v))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS)
        *exec = (CUgraphExec)(uintptr_t)v;
    return rc;
}

CUresult om_r_cuGraphClone(CUgraph *out, CUgraph g)
{
    CUresult rc = om_rpc_cuGraphClone(out, g);

    if (rc == CUDA_SUCCESS)
        om_uobj_graph_cloned(g, *out); /* api/hostnodes.c: the user objects' references */
    return rc;
}

CUresult om_r_cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long flags)
{
    CUresult rc = instantiate_call(e, g, flags);

    if (rc == CUDA_SUCCESS)
        om_uobj_instantiated(g, *e);
    return rc;
}

/* The executable graph's references go once the work it launched is done. */
CUresult om_r_cuGraphExecDestroy(CUgraphExec e)
{
    CUresult rc = om_rpc_cuGraphExecDestroy(e);

    if (rc == CUDA_SUCCESS)
        om_uobj_exec_destroyed(e);
    return rc;
}

/* An update replaces the executable graph's references by copies of the new graph's; its old
 * ones go once the work it launched before is done. */
CUresult om_r_cuGraphExecUpdate_v2(CUgraphExec e, CUgraph g, CUgraphExecUpdateResultInfo *info)
{
    CUresult rc = om_rpc_cuGraphExecUpdate_v2(e, g, info);

    if (rc == CUDA_SUCCESS)
        om_uobj_exec_updated(e, g);
    return rc;
}

CUresult om_graph_put_deps(struct om_wbuf *req, const CUgraphNode *deps, size_t n)
{
    if (n > MAX_DEPS || (n && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(req, n);
    om_put_bytes(req, deps, n * sizeof(*deps));
    return CUDA_SUCCESS;
}

CUresult om_graph_new_node(int index, const struct om_wbuf *req, CUgraphNode *node)
{
    uint64_t reply = 0;
    uint32_t got = 0;
    CUresult rc = om_rcall(index, req, &reply, sizeof(reply), &got);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (got != sizeof(reply))
        return CUDA_ERROR_UNKNOWN;
    *node = (CUgraphNode)(uintptr_t)reply;
    return CUDA_SUCCESS;
}
