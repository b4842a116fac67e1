/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of host nodes (api/remote/hostnodes.tsv): the client's
 * function reaches the driver as a trampoline of hostcb.c's. */
#include <stdlib.h>
#include <string.h>

#include "../exec.h"

#define MAX_DEPS 4096 /* dependencies of one new node (as graphstate.h's) */

/* Request: graph, dependency count, dependencies, fn, data, whether the client needs the
 * channel. Answer: the node, whether the channel's descriptor follows. */
CUresult om_x_cuGraphAddHostNode(struct call *c)
{
    uint64_t g = om_get_u64(&c->in), n = om_get_u64(&c->in), fn, data, want;
    CUgraphNode *deps = NULL, node = NULL;
    const void *b = n <= MAX_DEPS ? om_get_bytes(&c->in, n * sizeof(CUgraphNode)) : NULL;
    CUDA_HOST_NODE_PARAMS p;
    CUresult rc;
    bool send = false;

    fn = om_get_u64(&c->in);
    data = om_get_u64(&c->in);
    want = om_get_u64(&c->in);
    if ((rc = ARGS_OK(c)) != CUDA_SUCCESS)
        return rc;
    if (n > MAX_DEPS || !b)
        return CUDA_ERROR_INVALID_VALUE;
    if (n && !(deps = malloc(n * sizeof(*deps))))
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (n)
        memcpy(deps, b, n * sizeof(*deps));
    rc = om_check_nodes(c, deps, (size_t)n);
    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_GRAPH, g, false);
    if (rc == CUDA_SUCCESS)
        rc = om_own_room(c->s, OM_H_NODE);
    if (rc == CUDA_SUCCESS)
        rc = om_hostcb_params(c, fn, data, want, &p, &send);
    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                           const CUDA_HOST_NODE_PARAMS *))REAL(cuGraphAddHostNode))(
            &node, (CUgraph)(uintptr_t)g, deps, (size_t)n, &p);
    free(deps);
    if (rc == CUDA_SUCCESS &&
        (rc = om_own_add(c, OM_H_NODE, (uint64_t)(uintptr_t)node)) == CUDA_SUCCESS) {
        om_put_u64(&c->out, (uint64_t)(uintptr_t)node);
        om_hostcb_send_channel(c, send);
    }
    return rc;
}

/* Request: the node. Answer: the client's own function and argument. */
CUresult om_x_cuGraphHostNodeGetParams(struct call *c)
{
    uint64_t h = om_get_u64(&c->in), fn = 0, data = 0;
    CUDA_HOST_NODE_PARAMS p = {0};
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_NODE, h, false);
    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(CUgraphNode, CUDA_HOST_NODE_PARAMS *))REAL(cuGraphHostNodeGetParams))(
            (CUgraphNode)(uintptr_t)h, &p);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!om_hostcb_lookup(c->s, &p, &fn, &data))
        return CUDA_ERROR_INVALID_VALUE; /* not a host node the server made (never expected) */
    om_put_u64(&c->out, fn);
    om_put_u64(&c->out, data);
    return CUDA_SUCCESS;
}

/* Request: [the executable graph,] the node, fn, data. */
static CUresult set_params(struct call *c, bool exec)
{
    uint64_t e = exec ? om_get_u64(&c->in) : 0, h = om_get_u64(&c->in);
    uint64_t fn = om_get_u64(&c->in), data = om_get_u64(&c->in);
    CUDA_HOST_NODE_PARAMS p;
    CUresult rc = ARGS_OK(c);
    bool send;

    if (rc == CUDA_SUCCESS && exec)
        rc = om_arg_handle(c, OM_H_EXEC, e, false);
    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_NODE, h, false);
    /* A host node exists, so the channel does: the client never needs it sent here. */
    if (rc == CUDA_SUCCESS && !__atomic_load_n(&c->s->hostch, __ATOMIC_ACQUIRE))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = om_hostcb_params(c, fn, data, 0, &p, &send);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (exec)
        return ((CUresult(*)(CUgraphExec, CUgraphNode, const CUDA_HOST_NODE_PARAMS *))REAL(
            cuGraphExecHostNodeSetParams))((CUgraphExec)(uintptr_t)e, (CUgraphNode)(uintptr_t)h,
                                           &p);
    return ((CUresult(*)(CUgraphNode, const CUDA_HOST_NODE_PARAMS *))REAL(
        cuGraphHostNodeSetParams))((CUgraphNode)(uintptr_t)h, &p);
}

CUresult om_x_cuGraphHostNodeSetParams(struct call *c)
{
    return set_params(c, false);
}

CUresult om_x_cuGraphExecHostNodeSetParams(struct call *c)
{
    return set_params(c, true);
}
