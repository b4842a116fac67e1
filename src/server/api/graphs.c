/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of graphs and stream capture (api/remote/graphs.tsv). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../exec.h"

#define CAPTURE_NONE 0
#define CAPTURE_MODE_RELAXED 2
#define STREAM_CAPTURE_UNSUPPORTED 900 /* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */
#define MAX_DEPS 4096                  /* dependencies of one new node (as the table's rows) */
#define MAX_LIST 8192                  /* nodes (or edges) of one answer */
#define MAX_DOT (256u * 1024u)         /* bytes of one DOT description */
#define OS_ERROR 304                   /* CUDA_ERROR_OPERATING_SYSTEM */

/* ------------------------------------------------------------------ checks */

CUresult om_check_nodes(struct call *c, CUgraphNode *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!om_handles_has(&c->s->own[OM_H_NODE], (uint64_t)(uintptr_t)v[i]))
            return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS;
}

CUresult om_check_memset(struct call *c, CUDA_MEMSET_NODE_PARAMS *p)
{
    uint64_t row, span;

    if (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->width == 0 || p->height == 0)
        return CUDA_SUCCESS; /* touches nothing; the driver judges the rest */
    if (__builtin_mul_overflow((uint64_t)p->width, (uint64_t)p->elementSize, &row) ||
        __builtin_mul_overflow((uint64_t)p->height - 1, (uint64_t)p->pitch, &span) ||
        __builtin_add_overflow(span, row, &span))
        return CUDA_ERROR_INVALID_VALUE;
    return om_arg_range(c, p->dst, span) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Handles the driver answered become the client's (nodes of its own graphs). */
static CUresult own_all(struct call *c, enum om_handle_kind kind, const CUgraphNode *v, size_t n)
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

/* ------------------------------------------------------------------ graphs */

#define NODE_TYPE_GRAPH 4 /* CU_GRAPH_NODE_TYPE_GRAPH */
#define MAX_NESTING 16    /* child graphs within child graphs the server follows */

/*
 * A node (or a graph's nodes) goes: it is no longer the client's (the driver may reuse its
 * address), nor is a child graph node's graph the client obtained with
 * cuGraphChildGraphNodeGetGraph, nor anything within that graph. Called before the driver
 * destroys it (afterwards the driver can no longer say what a node held).
 */
static void forget_graph(struct session *s, CUgraph g, int depth);
/* Graph memory and conditional nodes (below): what goes with a node or a graph. */
static void gm_forget(struct session *s, uint64_t holder, uint64_t node);
static void cond_forget_node(struct session *s, uint64_t node, int depth);
static void cond_forget_graph(struct session *s, uint64_t graph);

static void forget_node(struct session *s, CUgraphNode n, int depth)
{
    CUresult (*type)(CUgraphNode, int *) = REAL(cuGraphNodeGetType);
    CUresult (*child)(CUgraphNode, CUgraph *) = REAL(cuGraphChildGraphNodeGetGraph);
    CUgraph g = NULL;
    int t = -1;

    om_own_drop(s, OM_H_NODE, (uint64_t)(uintptr_t)n);
    gm_forget(s, 0, (uint64_t)(uintptr_t)n);
    cond_forget_node(s, (uint64_t)(uintptr_t)n, depth);
    if (depth < MAX_NESTING && type && child && type(n, &t) == CUDA_SUCCESS &&
        t == NODE_TYPE_GRAPH && child(n, &g) == CUDA_SUCCESS && g) {
        om_own_drop(s, OM_H_CHILDGRAPH, (uint64_t)(uintptr_t)g);
        forget_graph(s, g, depth + 1);
    }
}

static void forget_graph(struct session *s, CUgraph g, int depth)
{
    CUresult (*nodes)(CUgraph, CUgraphNode *, size_t *) = REAL(cuGraphGetNodes);
    CUgraphNode *v = NULL;
    size_t n = 0;

    if (nodes(g, NULL, &n) == CUDA_SUCCESS && n && (v = calloc(n, sizeof(*v))) != NULL &&
        nodes(g, v, &n) != CUDA_SUCCESS)
        n = 0;
    for (size_t i = 0; v && i < n; i++)
        forget_node(s, v[i], depth);
    free(v);
    gm_forget(s, (uint64_t)(uintptr_t)g, 0);
    cond_forget_graph(s, (uint64_t)(uintptr_t)g);
}

CUresult om_x_cuGraphDestroy(struct call *c)
{
    uint64_t h = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    /* The client's own graph only: a child graph node's graph goes with its node. */
    if (!h || !om_handles_has(&c->s->own[OM_H_GRAPH], h))
        return CUDA_ERROR_INVALID_HANDLE;
    forget_graph(c->s, (CUgraph)(uintptr_t)h, 0);
    rc = ((CUresult(*)(CUgraph))REAL(cuGraphDestroy))((CUgraph)(uintptr_t)h);
    if (rc == CUDA_SUCCESS)
        om_own_drop(c->s, OM_H_GRAPH, h);
    return rc;
}

CUresult om_x_cuGraphDestroyNode(struct call *c)
{
    uint64_t h = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_arg_handle(c, OM_H_NODE, h, false)) != CUDA_SUCCESS)
        return rc;
    /* Forgotten first: a handle the client holds is never one the driver may have reused. */
    forget_node(c->s, (CUgraphNode)(uintptr_t)h, 0);
    return ((CUresult(*)(CUgraphNode))REAL(cuGraphDestroyNode))((CUgraphNode)(uintptr_t)h);
}

/*
 * A child graph node's graph (the driver's clone, owned by the node): the client may add
 * nodes to it, query it, instantiate it, but not destroy it (kind childgraph: no destroy
 * entry; om_arg_handle accepts it where a graph is asked; cuGraphDestroy refuses it).
 */
CUresult om_x_cuGraphChildGraphNodeGetGraph(struct call *c)
{
    uint64_t h = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    CUgraph g = NULL;
    uint64_t gh;

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_arg_handle(c, OM_H_NODE, h, false)) != CUDA_SUCCESS)
        return rc;
    rc = ((CUresult(*)(CUgraphNode, CUgraph *))REAL(cuGraphChildGraphNodeGetGraph))(
        (CUgraphNode)(uintptr_t)h, &g);
    if (rc != CUDA_SUCCESS)
        return rc;
    gh = (uint64_t)(uintptr_t)g;
    if (gh && !om_handles_has(&c->s->own[OM_H_GRAPH], gh) &&
        !om_handles_has(&c->s->own[OM_H_CHILDGRAPH], gh)) {
        if ((rc = om_own_room(c->s, OM_H_CHILDGRAPH)) != CUDA_SUCCESS)
            return rc;
        if (om_handles_add(&c->s->own[OM_H_CHILDGRAPH], gh) < 0)
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    om_put_u64(&c->out, gh);
    return CUDA_SUCCESS;
}

/*
 * The lists of nodes (cuGraphGetNodes, cuGraphGetRootNodes, a node's dependencies or
 * dependents, a graph's edges). Request: the graph or node, the capacity the client offers
 * (its array may be NULL: then only the count is asked). Answer: the count the driver wrote,
 * then the nodes (for edges: the `from` array, then the `to` array). Every node answered
 * becomes the client's.
 */
enum list_kind { LIST_NODES, LIST_ROOTS, LIST_DEPS, LIST_DEPENDENTS, LIST_EDGES };

static CUresult node_list(struct call *c, enum list_kind kind)
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
    if (want && ((rc = own_all(c, OM_H_NODE, a, n)) != CUDA_SUCCESS ||
                 (b && (rc = own_all(c, OM_H_NODE, b, n)) != CUDA_SUCCESS)))
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

CUresult om_x_cuGraphGetNodes(struct call *c)
{
    return node_list(c, LIST_NODES);
}

CUresult om_x_cuGraphGetRootNodes(struct call *c)
{
    return node_list(c, LIST_ROOTS);
}

CUresult om_x_cuGraphNodeGetDependencies(struct call *c)
{
    return node_list(c, LIST_DEPS);
}

CUresult om_x_cuGraphNodeGetDependentNodes(struct call *c)
{
    return node_list(c, LIST_DEPENDENTS);
}

CUresult om_x_cuGraphGetEdges(struct call *c)
{
    return node_list(c, LIST_EDGES);
}

/* ------------------------------------------------------------------ kernel and memset nodes */

/* The dependencies of a new node: a count, then the handles, each the client's. */
static CUresult read_deps(struct call *c, CUgraphNode *deps, uint64_t *n)
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

/*
 * Kernel node parameters as the client sends them (src/client/api/graphs.c): the kernel, the
 * grid and block (as a launch sends them), the shared memory size, then the argument bytes laid
 * out as the kernel's parameters, to the end of the request. They reach the driver through
 * `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER), from which it copies them into the node.
 */
/* The context a node runs in: the server's (the client's CUcontext is a token). */
static CUcontext server_context(void)
{
    CUcontext ctx = NULL;
    ((CUresult(*)(CUcontext *))REAL(cuCtxGetCurrent))(&ctx);
    return ctx;
}

struct kernel_node {
    CUDA_KERNEL_NODE_PARAMS p;
    void *extra[5];
    size_t size;
};

static CUresult read_kernel_params(struct call *c, struct kernel_node *k)
{
    uint64_t f = om_get_u64(&c->in), g = om_get_u64(&c->in), m = om_get_u64(&c->in);
    uint64_t b = om_get_u64(&c->in), smem = om_get_u64(&c->in);
    size_t len = 0;
    const void *args = om_get_rest(&c->in, &len);
    CUresult rc = ARGS_OK(c);
    int64_t total;

    if (rc != CUDA_SUCCESS)
        return rc;
    total = om_kernel_total(c->s, f);
    if (total < 0)
        return CUDA_ERROR_INVALID_HANDLE;
    if ((int64_t)len != total || len > sizeof(c->s->launch_args) || smem > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(c->s->launch_args, args, len);
    memset(k, 0, sizeof(*k));
    k->size = len;
    k->extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
    k->extra[1] = c->s->launch_args;
    k->extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
    k->extra[3] = &k->size;
    k->extra[4] = CU_LAUNCH_PARAM_END;
    /* The server's kernels are CUkernel handles (cuLibraryGetKernel): `kern`, in this context. */
    k->p.func = NULL;
    k->p.kern = (CUkernel)(uintptr_t)f;
    k->p.ctx = server_context();
    k->p.gridDimX = (unsigned)g;
    k->p.gridDimY = (unsigned)(g >> 32);
    k->p.gridDimZ = (unsigned)m;
    k->p.blockDimX = (unsigned)(m >> 32);
    k->p.blockDimY = (unsigned)b;
    k->p.blockDimZ = (unsigned)(b >> 32);
    k->p.sharedMemBytes = (unsigned)smem;
    k->p.extra = len ? k->extra : NULL;
    return CUDA_SUCCESS;
}

CUresult om_x_cuGraphAddKernelNode_v2(struct call *c)
{
    uint64_t g = om_get_u64(&c->in), ndeps;
    CUgraphNode deps[MAX_DEPS], node = NULL;
    struct kernel_node k;
    CUresult rc = read_deps(c, deps, &ndeps);

    if (rc == CUDA_SUCCESS)
        rc = read_kernel_params(c, &k);
    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_GRAPH, g, false);
    if (rc == CUDA_SUCCESS)
        rc = om_own_room(c->s, OM_H_NODE);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = ((CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                       const CUDA_KERNEL_NODE_PARAMS *))REAL(cuGraphAddKernelNode_v2))(
        &node, (CUgraph)(uintptr_t)g, deps, (size_t)ndeps, &k.p);
    if (rc == CUDA_SUCCESS &&
        (rc = om_own_add(c, OM_H_NODE, (uint64_t)(uintptr_t)node)) == CUDA_SUCCESS)
        om_put_u64(&c->out, (uint64_t)(uintptr_t)node);
    return rc;
}

/*
 * A kernel node's parameters back. Request: the node. Answer: the kernel (the client's
 * handle), grid and block as read_kernel_params reads them, shared memory, then the argument
 * bytes. The driver answers the form most recently set (docs), and the server only ever sets
 * `extra` (one buffer): kernelParams back is refused. The client lays the bytes out again.
 */
CUresult om_x_cuGraphKernelNodeGetParams_v2(struct call *c)
{
    uint64_t node = om_get_u64(&c->in), f;
    CUresult rc = ARGS_OK(c);
    CUDA_KERNEL_NODE_PARAMS p;
    const void *args = NULL;
    size_t len = 0;
    int64_t total;

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_arg_handle(c, OM_H_NODE, node, false)) != CUDA_SUCCESS)
        return rc;
    memset(&p, 0, sizeof(p));
    rc = ((CUresult(*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *))REAL(cuGraphKernelNodeGetParams_v2))(
        (CUgraphNode)(uintptr_t)node, &p);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* The client's kernel: the CUkernel the server set, or the function it launched. */
    f = (uint64_t)(uintptr_t)p.kern;
    if (om_kernel_total(c->s, f) < 0)
        f = (uint64_t)(uintptr_t)p.func;
    if ((total = om_kernel_total(c->s, f)) < 0 || p.kernelParams) {
        client_err(c->s,
                   "client %d: a kernel node whose kernel or arguments the server cannot "
                   "answer",
                   (int)c->s->pid);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    for (int i = 0; p.extra && i < 16 && p.extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (p.extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            args = p.extra[i + 1];
        else if (p.extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && p.extra[i + 1])
            len = *(const size_t *)p.extra[i + 1];
    }
    if ((int64_t)len != total || (len && !args))
        return CUDA_ERROR_NOT_SUPPORTED;
    om_put_u64(&c->out, f);
    om_put_u64(&c->out, ((uint64_t)p.gridDimY << 32) | p.gridDimX);
    om_put_u64(&c->out, ((uint64_t)p.blockDimX << 32) | p.gridDimZ);
    om_put_u64(&c->out, ((uint64_t)p.blockDimZ << 32) | p.blockDimY);
    om_put_u64(&c->out, p.sharedMemBytes);
    om_put_bytes(&c->out, args, len);
    return CUDA_SUCCESS;
}

CUresult om_x_cuGraphKernelNodeSetParams_v2(struct call *c)
{
    uint64_t node = om_get_u64(&c->in);
    struct kernel_node k;
    CUresult rc = read_kernel_params(c, &k);

    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_NODE, node, false);
    if (rc != CUDA_SUCCESS)
        return rc;
    return ((CUresult(*)(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS *))REAL(
        cuGraphKernelNodeSetParams_v2))((CUgraphNode)(uintptr_t)node, &k.p);
}

CUresult om_x_cuGraphExecKernelNodeSetParams_v2(struct call *c)
{
    uint64_t exec = om_get_u64(&c->in), node = om_get_u64(&c->in);
    struct kernel_node k;
    CUresult rc = read_kernel_params(c, &k);

    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_EXEC, exec, false);
    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_NODE, node, false);
    if (rc != CUDA_SUCCESS)
        return rc;
    return ((CUresult(*)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS *))REAL(
        cuGraphExecKernelNodeSetParams_v2))((CUgraphExec)(uintptr_t)exec,
                                            (CUgraphNode)(uintptr_t)node, &k.p);
}

static CUresult read_memset(struct call *c, CUDA_MEMSET_NODE_PARAMS *p)
{
    const void *b = om_get_bytes(&c->in, sizeof(*p));
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!b)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(p, b, sizeof(*p));
    return om_check_memset(c, p);
}

CUresult om_x_cuGraphAddMemsetNode(struct call *c)
{
    uint64_t g = om_get_u64(&c->in), ndeps;
    CUgraphNode deps[MAX_DEPS], node = NULL;
    CUDA_MEMSET_NODE_PARAMS p;
    CUresult rc = read_deps(c, deps, &ndeps);

    if (rc == CUDA_SUCCESS)
        rc = read_memset(c, &p);
    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_GRAPH, g, false);
    if (rc == CUDA_SUCCESS)
        rc = om_own_room(c->s, OM_H_NODE);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = ((CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                       const CUDA_MEMSET_NODE_PARAMS *, CUcontext))REAL(cuGraphAddMemsetNode))(
        &node, (CUgraph)(uintptr_t)g, deps, (size_t)ndeps, &p, server_context());
    if (rc == CUDA_SUCCESS &&
        (rc = om_own_add(c, OM_H_NODE, (uint64_t)(uintptr_t)node)) == CUDA_SUCCESS)
        om_put_u64(&c->out, (uint64_t)(uintptr_t)node);
    return rc;
}

CUresult om_x_cuGraphExecMemsetNodeSetParams(struct call *c)
{
    uint64_t exec = om_get_u64(&c->in), node = om_get_u64(&c->in);
    CUDA_MEMSET_NODE_PARAMS p;
    CUresult rc = read_memset(c, &p);

    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_EXEC, exec, false);
    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_NODE, node, false);
    if (rc != CUDA_SUCCESS)
        return rc;
    return ((CUresult(*)(CUgraphExec, CUgraphNode, const CUDA_MEMSET_NODE_PARAMS *, CUcontext))REAL(
        cuGraphExecMemsetNodeSetParams))((CUgraphExec)(uintptr_t)exec, (CUgraphNode)(uintptr_t)node,
                                         &p, server_context());
}

/* ------------------------------------------------------------------ launch */

CUresult om_x_cuGraphLaunch(struct call *c)
{
    uint64_t exec = om_get_u64(&c->in), sh = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_arg_handle(c, OM_H_EXEC, exec, false)) != CUDA_SUCCESS)
        return rc;
    st = om_launch_stream(c, sh, &rc); /* under an SM share, its lane's stream (share.c) */
    if (!st)
        return rc;
    rc =
        ((CUresult(*)(CUgraphExec, CUstream))REAL(cuGraphLaunch))((CUgraphExec)(uintptr_t)exec, st);
    /* Scheduled like a kernel: the executable graph is what the scheduler learns the length of. */
    if (rc == CUDA_SUCCESS && !om_stream_capturing(c->s, st))
        om_sched_launched(c->s, st, exec);
    return rc;
}

/* ------------------------------------------------------------------ graph memory */

CUresult om_x_cuDeviceGetGraphMemAttribute(struct call *c)
{
    uint64_t cdev = om_get_u64(&c->in), attr = om_get_u64(&c->in);
    uint64_t v = 0;
    int dev = om_dev_in(c->s, cdev);
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (dev < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    if (attr > 3) /* used/reserved memory, current and high watermark: each a cuuint64_t */
        return CUDA_ERROR_INVALID_VALUE;
    rc = ((CUresult(*)(CUdevice, int, void *))REAL(cuDeviceGetGraphMemAttribute))((CUdevice)dev,
                                                                                  (int)attr, &v);
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, v);
    return rc;
}

CUresult om_x_cuDeviceSetGraphMemAttribute(struct call *c)
{
    uint64_t cdev = om_get_u64(&c->in), attr = om_get_u64(&c->in), v = om_get_u64(&c->in);
    int dev = om_dev_in(c->s, cdev);
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (dev < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    /* Only the high watermarks may be set, and only to 0 (a reset). */
    if ((attr != 1 && attr != 3) || v != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return ((CUresult(*)(CUdevice, int, void *))REAL(cuDeviceSetGraphMemAttribute))((CUdevice)dev,
                                                                                    (int)attr, &v);
}

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
            forget_graph(s, g, 0); /* its allocations' ranges (never instantiated) */
            destroy(g); /* (one captured into a graph of the client's goes with the others) */
        }
    }
    s->captures = 0;
}

static uint64_t capture_graph(CUstream st, uint64_t *last);

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
    cg = was ? capture_graph(st, NULL) : 0;
    rc = ((CUresult(*)(CUstream, CUgraph *))REAL(cuStreamEndCapture))(st, &g);
    if (was && !om_stream_capturing(c->s, st))
        c->s->captures--;
    if (was && rc != CUDA_SUCCESS)
        prune_nodes(c->s);
    /* A failed capture's graph is gone (unless it was the client's, cuStreamBeginCaptureToGraph):
     * so are the ranges of what it allocated (never instantiated: nothing to free). */
    if (was && rc != CUDA_SUCCESS && cg && !om_handles_has(&c->s->own[OM_H_GRAPH], cg) &&
        !om_handles_has(&c->s->own[OM_H_CHILDGRAPH], cg))
        gm_forget(c->s, cg, 0);
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
    st = om_arg_stream(c, sh, false, &rc);
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
    if (n && (rc = own_all(c, OM_H_NODE, deps, n)) != CUDA_SUCCESS)
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

/* Custom rather than `in:memset`: the generator reads an `in` struct before declaring it. */
CUresult om_x_cuGraphMemsetNodeSetParams(struct call *c)
{
    uint64_t node = om_get_u64(&c->in);
    CUDA_MEMSET_NODE_PARAMS p;
    CUresult rc = read_memset(c, &p);

    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_NODE, node, false);
    if (rc != CUDA_SUCCESS)
        return rc;
    return ((CUresult(*)(CUgraphNode, const CUDA_MEMSET_NODE_PARAMS *))REAL(
        cuGraphMemsetNodeSetParams))((CUgraphNode)(uintptr_t)node, &p);
}

CUresult om_x_cuStreamBeginCaptureToGraph(struct call *c)
{
    uint64_t sh = om_get_u64(&c->in), g = om_get_u64(&c->in), mode, ndeps;
    CUgraphNode deps[MAX_DEPS];
    CUresult rc = read_deps(c, deps, &ndeps);
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

static CUresult instantiated(struct call *c, uint64_t g, CUgraphExec e);

/* Answer: the executable graph, the node that failed (if the client's), the result. */
CUresult om_x_cuGraphInstantiateWithParams(struct call *c)
{
    uint64_t g = om_get_u64(&c->in), flags = om_get_u64(&c->in), sh = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    CUDA_GRAPH_INSTANTIATE_PARAMS p;
    CUgraphExec e = NULL;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (flags & ~(uint64_t)0xF)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = om_arg_handle(c, OM_H_GRAPH, g, false)) != CUDA_SUCCESS)
        return rc;
    if ((rc = om_own_room(c->s, OM_H_EXEC)) != CUDA_SUCCESS)
        return rc;
    memset(&p, 0, sizeof(p));
    p.flags = flags;
    if (flags & 2) { /* CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD: on the client's stream */
        p.hUploadStream = om_arg_stream(c, sh, true, &rc);
        if (!p.hUploadStream)
            return rc;
    }
    rc = ((CUresult(*)(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *))REAL(
        cuGraphInstantiateWithParams))(&e, (CUgraph)(uintptr_t)g, &p);
    if (rc == CUDA_SUCCESS && (rc = instantiated(c, g, e)) != CUDA_SUCCESS)
        return rc;
    if (rc == CUDA_SUCCESS) { /* a failure's answer does not travel: the client says why */
        om_put_u64(&c->out, (uint64_t)(uintptr_t)e);
        om_put_u64(&c->out, (uint64_t)(uintptr_t)p.hErrNode_out);
        om_put_u64(&c->out, (uint64_t)(int64_t)p.result_out);
    }
    return rc;
}

/* The driver writes the description into a memory file of the server (by its /proc path);
 * the client writes the text to its own path. */
CUresult om_x_cuGraphDebugDotPrint(struct call *c)
{
    uint64_t g = om_get_u64(&c->in), flags = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    char path[64];
    char *text = NULL;
    off_t len;
    int fd;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (flags & ~(uint64_t)0xFFFF)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = om_arg_handle(c, OM_H_GRAPH, g, false)) != CUDA_SUCCESS)
        return rc;
    fd = memfd_create("openmps-dot", MFD_CLOEXEC);
    if (fd < 0)
        return OS_ERROR;
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    rc = ((CUresult(*)(CUgraph, const char *, unsigned))REAL(cuGraphDebugDotPrint))(
        (CUgraph)(uintptr_t)g, path, (unsigned)flags);
    len = rc == CUDA_SUCCESS ? lseek(fd, 0, SEEK_END) : 0;
    if (rc == CUDA_SUCCESS && (len < 0 || len > (off_t)MAX_DOT)) {
        client_err(c->s, "client %d: a graph description of more than %u bytes is not carried",
                   (int)c->s->pid, MAX_DOT);
        rc = CUDA_ERROR_NOT_SUPPORTED;
    }
    if (rc == CUDA_SUCCESS && len && !(text = malloc((size_t)len)))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS && len && pread(fd, text, (size_t)len, 0) != len)
        rc = OS_ERROR;
    if (rc == CUDA_SUCCESS)
        om_put_bytes(&c->out, text, (size_t)len);
    free(text);
    close(fd);
    return rc;
}

/* ------------------------------------------------------------------ memcpy nodes */

/* The bytes one side of a 3D copy spans, from its first to its last: *start (from its base
 * address) and *len. False when the numbers overflow. */
static bool side_span(uint64_t x, uint64_t y, uint64_t z, uint64_t pitch, uint64_t height,
                      uint64_t w, uint64_t h, uint64_t d, uint64_t *start, uint64_t *len)
{
    uint64_t first, last;

    *start = *len = 0;
    if (!w || !h || !d)
        return true;
    if (__builtin_mul_overflow(z, height, &first) || __builtin_add_overflow(first, y, &first) ||
        __builtin_mul_overflow(first, pitch, &first) || __builtin_add_overflow(first, x, &first))
        return false;
    if (__builtin_add_overflow(z, d - 1, &last) || __builtin_mul_overflow(last, height, &last) ||
        __builtin_add_overflow(last, y, &last) || __builtin_add_overflow(last, h - 1, &last) ||
        __builtin_mul_overflow(last, pitch, &last) || __builtin_add_overflow(last, x, &last) ||
        __builtin_add_overflow(last, w, &last))
        return false;
    *start = first;
    *len = last - first;
    return true;
}

/* One side of a copy node: device memory of the client, or pinned memory it shares with the
 * server (the client sent the server's address); arrays are not carried. */
static CUresult check_side(struct call *c, int type, uint64_t host, uint64_t dev, uint64_t x,
                           uint64_t y, uint64_t z, uint64_t pitch, uint64_t height,
                           const CUDA_MEMCPY3D *m)
{
    uint64_t start, len, base = type == CU_MEMORYTYPE_HOST ? host : dev;

    if (!side_span(x, y, z, pitch, height, m->WidthInBytes, m->Height, m->Depth, &start, &len) ||
        base > UINT64_MAX - start)
        return CUDA_ERROR_INVALID_VALUE;
    if (!len)
        return CUDA_SUCCESS;
    switch (type) {
    case CU_MEMORYTYPE_DEVICE:
        return om_arg_range(c, base + start, len) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_MEMORYTYPE_HOST:
        return om_hostmem_find(c->s, base + start, len) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_MEMORYTYPE_UNIFIED:
        return om_arg_range(c, base + start, len) || om_hostmem_find(c->s, base + start, len)
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    default:
        client_err(c->s, "client %d: a copy node of memory type %d is not supported",
                   (int)c->s->pid, type);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

static CUresult read_memcpy(struct call *c, CUDA_MEMCPY3D *m)
{
    const void *b = om_get_bytes(&c->in, sizeof(*m));
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!b)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(m, b, sizeof(*m));
    rc = check_side(c, m->srcMemoryType, (uint64_t)(uintptr_t)m->srcHost, m->srcDevice,
                    m->srcXInBytes, m->srcY, m->srcZ, m->srcPitch, m->srcHeight, m);
    if (rc == CUDA_SUCCESS)
        rc = check_side(c, m->dstMemoryType, (uint64_t)(uintptr_t)m->dstHost, m->dstDevice,
                        m->dstXInBytes, m->dstY, m->dstZ, m->dstPitch, m->dstHeight, m);
    m->srcArray = m->dstArray = NULL;
    return rc;
}

CUresult om_x_cuGraphAddMemcpyNode(struct call *c)
{
    uint64_t g = om_get_u64(&c->in), ndeps;
    CUgraphNode deps[MAX_DEPS], node = NULL;
    CUDA_MEMCPY3D m;
    CUresult rc = read_deps(c, deps, &ndeps);

    if (rc == CUDA_SUCCESS)
        rc = read_memcpy(c, &m);
    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_GRAPH, g, false);
    if (rc == CUDA_SUCCESS)
        rc = om_own_room(c->s, OM_H_NODE);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = ((CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CUDA_MEMCPY3D *,
                       CUcontext))REAL(cuGraphAddMemcpyNode))(&node, (CUgraph)(uintptr_t)g, deps,
                                                              (size_t)ndeps, &m, server_context());
    if (rc == CUDA_SUCCESS &&
        (rc = om_own_add(c, OM_H_NODE, (uint64_t)(uintptr_t)node)) == CUDA_SUCCESS)
        om_put_u64(&c->out, (uint64_t)(uintptr_t)node);
    return rc;
}

CUresult om_x_cuGraphMemcpyNodeSetParams(struct call *c)
{
    uint64_t node = om_get_u64(&c->in);
    CUDA_MEMCPY3D m;
    CUresult rc = read_memcpy(c, &m);

    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_NODE, node, false);
    if (rc != CUDA_SUCCESS)
        return rc;
    return ((CUresult(*)(CUgraphNode, const CUDA_MEMCPY3D *))REAL(cuGraphMemcpyNodeSetParams))(
        (CUgraphNode)(uintptr_t)node, &m);
}

CUresult om_x_cuGraphExecMemcpyNodeSetParams(struct call *c)
{
    uint64_t exec = om_get_u64(&c->in), node = om_get_u64(&c->in);
    CUDA_MEMCPY3D m;
    CUresult rc = read_memcpy(c, &m);

    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_EXEC, exec, false);
    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_NODE, node, false);
    if (rc != CUDA_SUCCESS)
        return rc;
    return ((CUresult(*)(CUgraphExec, CUgraphNode, const CUDA_MEMCPY3D *, CUcontext))REAL(
        cuGraphExecMemcpyNodeSetParams))((CUgraphExec)(uintptr_t)exec, (CUgraphNode)(uintptr_t)node,
                                         &m, server_context());
}

/* ------------------------------------------------------------------ kernel node attributes */

#define ATTR_VALUE_BYTES 64 /* CUkernelNodeAttrValue (CUlaunchAttributeValue) */

/* Attributes whose values hold no handle (events, device-side nodes): they travel as bytes;
 * the others would need translating (as for launches, src/server/api/launch.c). */
static bool node_attribute_allowed(uint64_t id)
{
    switch (id) {
    case 1:  /* access policy window: a device address, a cache hint */
    case 2:  /* cooperative */
    case 3:  /* synchronization policy */
    case 4:  /* cluster dimension */
    case 5:  /* cluster scheduling policy */
    case 6:  /* programmatic stream serialization */
    case 8:  /* priority */
    case 9:  /* memory sync domain map */
    case 10: /* memory sync domain */
    case 11: /* preferred cluster dimension */
    case 14: /* preferred shared memory carveout */ return true;
    default: return false;
    }
}

CUresult om_x_cuGraphKernelNodeGetAttribute(struct call *c)
{
    uint64_t node = om_get_u64(&c->in), attr = om_get_u64(&c->in);
    uint8_t v[ATTR_VALUE_BYTES] = {0};
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_arg_handle(c, OM_H_NODE, node, false)) != CUDA_SUCCESS)
        return rc;
    if (!node_attribute_allowed(attr))
        return CUDA_ERROR_NOT_SUPPORTED;
    rc = ((CUresult(*)(CUgraphNode, int, void *))REAL(cuGraphKernelNodeGetAttribute))(
        (CUgraphNode)(uintptr_t)node, (int)attr, v);
    if (rc == CUDA_SUCCESS)
        om_put_bytes(&c->out, v, sizeof(v));
    return rc;
}

CUresult om_x_cuGraphKernelNodeSetAttribute(struct call *c)
{
    uint64_t node = om_get_u64(&c->in), attr = om_get_u64(&c->in);
    const void *b = om_get_bytes(&c->in, ATTR_VALUE_BYTES);
    uint8_t v[ATTR_VALUE_BYTES];
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_arg_handle(c, OM_H_NODE, node, false)) != CUDA_SUCCESS)
        return rc;
    if (!node_attribute_allowed(attr)) {
        client_err(c->s, "client %d: kernel node attribute %d is not supported", (int)c->s->pid,
                   (int)attr);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    memcpy(v, b, sizeof(v));
    return ((CUresult(*)(CUgraphNode, int, const void *))REAL(cuGraphKernelNodeSetAttribute))(
        (CUgraphNode)(uintptr_t)node, (int)attr, v);
}

/* ------------------------------------------------------------------ external semaphore nodes */

/*
 * An external semaphore node's parameters as the client sends them: the count, the semaphores,
 * then the count's parameter structs (signal and wait ones have one size). Every semaphore
 * must be the client's; at most MAX_SEMS (as cuSignalExternalSemaphoresAsync's row).
 */
#define MAX_SEMS 128
#define SEM_PARAMS_BYTES sizeof(CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS)
_Static_assert(sizeof(CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS) ==
                   sizeof(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS),
               "signal and wait parameters travel alike");

struct sem_node {
    CUexternalSemaphore sems[MAX_SEMS];
    uint8_t params[MAX_SEMS * SEM_PARAMS_BYTES];
    CUDA_EXT_SEM_SIGNAL_NODE_PARAMS p; /* the wait form has the same layout */
};

static CUresult read_sems(struct call *c, struct sem_node *k)
{
    uint64_t n = om_get_u64(&c->in);
    const void *h, *v;
    CUresult rc;

    if (n > MAX_SEMS)
        return CUDA_ERROR_INVALID_VALUE;
    h = om_get_bytes(&c->in, n * sizeof(CUexternalSemaphore));
    v = om_get_bytes(&c->in, n * SEM_PARAMS_BYTES);
    if ((rc = ARGS_OK(c)) != CUDA_SUCCESS)
        return rc;
    if (n && (!h || !v))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(k->sems, h, n * sizeof(CUexternalSemaphore));
    memcpy(k->params, v, n * SEM_PARAMS_BYTES);
    for (uint64_t i = 0; i < n; i++)
        if ((rc = om_arg_handle(c, OM_H_EXTSEM, (uint64_t)(uintptr_t)k->sems[i], false)) !=
            CUDA_SUCCESS)
            return rc;
    k->p.extSemArray = k->sems;
    k->p.paramsArray = (const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *)(void *)k->params;
    k->p.numExtSems = (unsigned)n;
    return CUDA_SUCCESS;
}

typedef CUresult (*sem_add_fn)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const void *);
typedef CUresult (*sem_set_fn)(CUgraphNode, const void *);
typedef CUresult (*sem_exec_set_fn)(CUgraphExec, CUgraphNode, const void *);
typedef CUresult (*sem_get_fn)(CUgraphNode, CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *);

static CUresult sem_add(struct call *c, sem_add_fn add)
{
    uint64_t g = om_get_u64(&c->in), ndeps;
    CUgraphNode deps[MAX_DEPS], node = NULL;
    struct sem_node *k = malloc(sizeof(*k));
    CUresult rc = k ? read_deps(c, deps, &ndeps) : CUDA_ERROR_OUT_OF_MEMORY;

    if (rc == CUDA_SUCCESS)
        rc = read_sems(c, k);
    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_GRAPH, g, false);
    if (rc == CUDA_SUCCESS)
        rc = om_own_room(c->s, OM_H_NODE);
    if (rc == CUDA_SUCCESS)
        rc = add(&node, (CUgraph)(uintptr_t)g, deps, (size_t)ndeps, &k->p);
    if (rc == CUDA_SUCCESS &&
        (rc = om_own_add(c, OM_H_NODE, (uint64_t)(uintptr_t)node)) == CUDA_SUCCESS)
        om_put_u64(&c->out, (uint64_t)(uintptr_t)node);
    free(k);
    return rc;
}

static CUresult sem_set(struct call *c, sem_set_fn set, sem_exec_set_fn exec_set)
{
    uint64_t e = exec_set ? om_get_u64(&c->in) : 0, node = om_get_u64(&c->in);
    struct sem_node *k = malloc(sizeof(*k));
    CUresult rc = k ? read_sems(c, k) : CUDA_ERROR_OUT_OF_MEMORY;

    if (rc == CUDA_SUCCESS && exec_set)
        rc = om_arg_handle(c, OM_H_EXEC, e, false);
    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_NODE, node, false);
    if (rc == CUDA_SUCCESS)
        rc = exec_set ? exec_set((CUgraphExec)(uintptr_t)e, (CUgraphNode)(uintptr_t)node, &k->p)
                      : set((CUgraphNode)(uintptr_t)node, &k->p);
    free(k);
    return rc;
}

/* Answer: the count, the semaphores (the client's: checked), their parameters. */
static CUresult sem_get(struct call *c, sem_get_fn get)
{
    uint64_t node = om_get_u64(&c->in);
    CUDA_EXT_SEM_SIGNAL_NODE_PARAMS p;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_arg_handle(c, OM_H_NODE, node, false)) != CUDA_SUCCESS)
        return rc;
    memset(&p, 0, sizeof(p));
    if ((rc = get((CUgraphNode)(uintptr_t)node, &p)) != CUDA_SUCCESS)
        return rc;
    if (p.numExtSems > MAX_SEMS || (p.numExtSems && (!p.extSemArray || !p.paramsArray)))
        return CUDA_ERROR_NOT_SUPPORTED;
    for (unsigned i = 0; i < p.numExtSems; i++)
        if (om_arg_handle(c, OM_H_EXTSEM, (uint64_t)(uintptr_t)p.extSemArray[i], false) !=
            CUDA_SUCCESS)
            return CUDA_ERROR_NOT_SUPPORTED; /* (a semaphore the client destroyed since) */
    om_put_u64(&c->out, p.numExtSems);
    om_put_bytes(&c->out, p.extSemArray, p.numExtSems * sizeof(CUexternalSemaphore));
    om_put_bytes(&c->out, p.paramsArray, p.numExtSems * SEM_PARAMS_BYTES);
    return CUDA_SUCCESS;
}

CUresult om_x_cuGraphAddExternalSemaphoresSignalNode(struct call *c)
{
    return sem_add(c, (sem_add_fn)REAL(cuGraphAddExternalSemaphoresSignalNode));
}

CUresult om_x_cuGraphAddExternalSemaphoresWaitNode(struct call *c)
{
    return sem_add(c, (sem_add_fn)REAL(cuGraphAddExternalSemaphoresWaitNode));
}

CUresult om_x_cuGraphExternalSemaphoresSignalNodeSetParams(struct call *c)
{
    return sem_set(c, (sem_set_fn)REAL(cuGraphExternalSemaphoresSignalNodeSetParams), NULL);
}

CUresult om_x_cuGraphExternalSemaphoresWaitNodeSetParams(struct call *c)
{
    return sem_set(c, (sem_set_fn)REAL(cuGraphExternalSemaphoresWaitNodeSetParams), NULL);
}

CUresult om_x_cuGraphExecExternalSemaphoresSignalNodeSetParams(struct call *c)
{
    return sem_set(c, NULL,
                   (sem_exec_set_fn)REAL(cuGraphExecExternalSemaphoresSignalNodeSetParams));
}

CUresult om_x_cuGraphExecExternalSemaphoresWaitNodeSetParams(struct call *c)
{
    return sem_set(c, NULL, (sem_exec_set_fn)REAL(cuGraphExecExternalSemaphoresWaitNodeSetParams));
}

CUresult om_x_cuGraphExternalSemaphoresSignalNodeGetParams(struct call *c)
{
    return sem_get(c, (sem_get_fn)REAL(cuGraphExternalSemaphoresSignalNodeGetParams));
}

CUresult om_x_cuGraphExternalSemaphoresWaitNodeGetParams(struct call *c)
{
    return sem_get(c, (sem_get_fn)REAL(cuGraphExternalSemaphoresWaitNodeGetParams));
}

/* ------------------------------------------------------------------ batch memory op nodes */

/*
 * A batch memory op node's parameters as the client sends them: the count (1 to BATCH_MAX),
 * the node's flags (0), then the operations (48 bytes each), every one checked as
 * cuStreamBatchMemOp's (streams.c: its kind and flags known, its address within the client's
 * memory). The context is the server's.
 */
#define BATCH_OP_BYTES 48
#define BATCH_MAX 256

struct batch_node {
    uint8_t ops[BATCH_MAX * BATCH_OP_BYTES];
    CUDA_BATCH_MEM_OP_NODE_PARAMS p;
};

static CUresult read_batch(struct call *c, struct batch_node *k)
{
    uint64_t n = om_get_u64(&c->in), flags = om_get_u64(&c->in);
    const void *v = n <= BATCH_MAX ? om_get_bytes(&c->in, n * BATCH_OP_BYTES) : NULL;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (n == 0 || n > BATCH_MAX || !v || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(k->ops, v, n * BATCH_OP_BYTES);
    for (uint64_t i = 0; i < n; i++)
        if ((rc = om_batch_op_check(c, k->ops + i * BATCH_OP_BYTES)) != CUDA_SUCCESS)
            return rc;
    memset(&k->p, 0, sizeof(k->p));
    k->p.ctx = server_context();
    k->p.count = (unsigned)n;
    k->p.paramArray = (union om_CUstreamBatchMemOpParams *)(void *)k->ops;
    return CUDA_SUCCESS;
}

CUresult om_x_cuGraphAddBatchMemOpNode(struct call *c)
{
    uint64_t g = om_get_u64(&c->in), ndeps;
    CUgraphNode deps[MAX_DEPS], node = NULL;
    struct batch_node *k = malloc(sizeof(*k));
    CUresult rc = k ? read_deps(c, deps, &ndeps) : CUDA_ERROR_OUT_OF_MEMORY;

    if (rc == CUDA_SUCCESS)
        rc = read_batch(c, k);
    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_GRAPH, g, false);
    if (rc == CUDA_SUCCESS)
        rc = om_own_room(c->s, OM_H_NODE);
    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                           const CUDA_BATCH_MEM_OP_NODE_PARAMS *))REAL(cuGraphAddBatchMemOpNode))(
            &node, (CUgraph)(uintptr_t)g, deps, (size_t)ndeps, &k->p);
    if (rc == CUDA_SUCCESS &&
        (rc = om_own_add(c, OM_H_NODE, (uint64_t)(uintptr_t)node)) == CUDA_SUCCESS)
        om_put_u64(&c->out, (uint64_t)(uintptr_t)node);
    free(k);
    return rc;
}

static CUresult batch_set(struct call *c, bool exec)
{
    uint64_t e = exec ? om_get_u64(&c->in) : 0, node = om_get_u64(&c->in);
    struct batch_node *k = malloc(sizeof(*k));
    CUresult rc = k ? read_batch(c, k) : CUDA_ERROR_OUT_OF_MEMORY;

    if (rc == CUDA_SUCCESS && exec)
        rc = om_arg_handle(c, OM_H_EXEC, e, false);
    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_NODE, node, false);
    if (rc == CUDA_SUCCESS && exec)
        rc = ((CUresult(*)(CUgraphExec, CUgraphNode, const CUDA_BATCH_MEM_OP_NODE_PARAMS *))REAL(
            cuGraphExecBatchMemOpNodeSetParams))((CUgraphExec)(uintptr_t)e,
                                                 (CUgraphNode)(uintptr_t)node, &k->p);
    else if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(CUgraphNode, const CUDA_BATCH_MEM_OP_NODE_PARAMS *))REAL(
            cuGraphBatchMemOpNodeSetParams))((CUgraphNode)(uintptr_t)node, &k->p);
    free(k);
    return rc;
}

CUresult om_x_cuGraphBatchMemOpNodeSetParams(struct call *c)
{
    return batch_set(c, false);
}

CUresult om_x_cuGraphExecBatchMemOpNodeSetParams(struct call *c)
{
    return batch_set(c, true);
}

/* Answer: the count, the flags, the operations. */
CUresult om_x_cuGraphBatchMemOpNodeGetParams(struct call *c)
{
    uint64_t node = om_get_u64(&c->in);
    CUDA_BATCH_MEM_OP_NODE_PARAMS p;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_arg_handle(c, OM_H_NODE, node, false)) != CUDA_SUCCESS)
        return rc;
    memset(&p, 0, sizeof(p));
    rc = ((CUresult(*)(CUgraphNode, CUDA_BATCH_MEM_OP_NODE_PARAMS *))REAL(
        cuGraphBatchMemOpNodeGetParams))((CUgraphNode)(uintptr_t)node, &p);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (p.count > BATCH_MAX || (p.count && !p.paramArray))
        return CUDA_ERROR_NOT_SUPPORTED;
    om_put_u64(&c->out, p.count);
    om_put_u64(&c->out, p.flags);
    om_put_bytes(&c->out, p.paramArray, (size_t)p.count * BATCH_OP_BYTES);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ graph memory nodes */

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
#define NODE_TYPE_CONDITIONAL 13 /* CU_GRAPH_NODE_TYPE_CONDITIONAL */
#define GRAPH_ALLOC_MAX (1ull << 46)
#define COND_SWITCH_MAX 64 /* bodies of a switch node the server accepts */
#define COND_ASSIGN_DEFAULT 0x1

struct gm_hold {
    uint64_t base, size;
    uint64_t holder; /* a graph or an executable graph */
    uint64_t node;   /* the allocation node, for a graph holder (0: unknown) */
    bool inst;       /* an executable graph was made with it */
};
struct gm_cond {
    uint64_t handle, graph; /* a conditional handle the client made, for that graph */
};
struct gm_condnode {
    uint64_t node;
    unsigned n;
    unsigned depth; /* its bodies' nesting: 1 in a top-level graph, 2 in a body's body… */
    uint64_t body[COND_SWITCH_MAX]; /* the node's body graphs (childgraph kind) */
};
struct om_graphmem {
    struct gm_hold *h;
    size_t nh, caph;
    struct gm_cond *c;
    size_t nc, capc;
    struct gm_condnode *cn;
    size_t ncn, capcn;
};

static struct om_graphmem *gm_of(struct session *s)
{
    if (!s->graphmem)
        s->graphmem = calloc(1, sizeof(*s->graphmem));
    return s->graphmem;
}

/* Room for one more element in *v (cap elements of el bytes, n used). */
static bool gm_grow(void **v, size_t *cap, size_t n, size_t el)
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

static bool gm_held(struct session *s, uint64_t base)
{
    struct om_graphmem *m = s->graphmem;

    for (size_t i = 0; m && i < m->nh; i++)
        if (m->h[i].base == base)
            return true;
    return false;
}

/* Room for n more holds under the client's handle budget. */
static CUresult gm_room(struct session *s, size_t n)
{
    struct om_graphmem *m = gm_of(s);

    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (m->nh + n > om_budget.client_handles)
        return om_budget_refuse(s, OM_BUDGET_HANDLES, "graph allocation");
    return CUDA_SUCCESS;
}

/* dev: where the allocation is (its cap counts it there), for a range not held yet. */
static CUresult gm_add(struct session *s, uint64_t base, uint64_t size, uint64_t holder,
                       uint64_t node, bool inst, uint64_t pool, int dev)
{
    struct om_graphmem *m = gm_of(s);
    CUresult rc = gm_room(s, 1);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!gm_grow((void **)&m->h, &m->caph, m->nh, sizeof(*m->h)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!gm_held(s, base)) {
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
static void gm_release(struct session *s, uint64_t base, bool inst)
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
static void gm_forget(struct session *s, uint64_t holder, uint64_t node)
{
    struct om_graphmem *m = s->graphmem;

    for (size_t i = 0; m && i < m->nh;) {
        struct gm_hold d = m->h[i];
        if (!((holder && d.holder == holder) || (node && d.node == node))) {
            i++;
            continue;
        }
        m->h[i] = m->h[--m->nh];
        if (!gm_held(s, d.base))
            gm_release(s, d.base, d.inst);
    }
}

/* An executable graph made from graph g holds g's allocations too. */
static CUresult gm_copy(struct session *s, uint64_t g, uint64_t e)
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
        rc = gm_add(s, m->h[i].base, m->h[i].size, e, 0, true, 0, s->dev); /* held already */
    }
    return rc;
}

static CUresult instantiated(struct call *c, uint64_t g, CUgraphExec e)
{
    uint64_t eh = (uint64_t)(uintptr_t)e;
    CUresult rc = om_own_add(c, OM_H_EXEC, eh);

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = gm_copy(c->s, g, eh)) != CUDA_SUCCESS) { /* not recorded: it goes */
        gm_forget(c->s, eh, 0);
        ((CUresult(*)(CUgraphExec))REAL(cuGraphExecDestroy))(e);
        om_own_drop(c->s, OM_H_EXEC, eh);
    }
    return rc;
}

CUresult om_x_cuGraphInstantiateWithFlags(struct call *c)
{
    uint64_t g = om_get_u64(&c->in), flags = om_get_u64(&c->in);
    CUgraphExec e = NULL;
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS)
        rc = om_own_room(c->s, OM_H_EXEC);
    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_GRAPH, g, false);
    if (rc == CUDA_SUCCESS && (flags & ~(uint64_t)0xF))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = ((CUresult(*)(CUgraphExec *, CUgraph, unsigned long long))REAL(
        cuGraphInstantiateWithFlags))(&e, (CUgraph)(uintptr_t)g, flags);
    if (rc == CUDA_SUCCESS && (rc = instantiated(c, g, e)) == CUDA_SUCCESS)
        om_put_u64(&c->out, (uint64_t)(uintptr_t)e);
    return rc;
}

CUresult om_x_cuGraphExecDestroy(struct call *c)
{
    uint64_t e = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_EXEC, e, false);
    if (rc != CUDA_SUCCESS)
        return rc;
    gm_forget(c->s, e, 0); /* before the driver may reuse the addresses */
    rc = ((CUresult(*)(CUgraphExec))REAL(cuGraphExecDestroy))((CUgraphExec)(uintptr_t)e);
    if (rc == CUDA_SUCCESS)
        om_own_drop(c->s, OM_H_EXEC, e);
    return rc;
}

/* The graph a stream captures into (0: none), and the node it captured last (*last). */
static uint64_t capture_graph(CUstream st, uint64_t *last)
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

    if (!om_stream_capturing(s, st) || !(g = capture_graph(st, &node)))
        return false;
    /* The node cuMemAllocAsync made is the capture's last one (the driver's dependencies). */
    return gm_add(s, base, size, g, node, false, pool, om_handle_device(s, pool)) == CUDA_SUCCESS;
}

void om_graphmem_session_end(struct session *s)
{
    struct om_graphmem *m = s->graphmem;
    CUstream st = NULL;
    CUresult rc;

    if (!m)
        return;
    /* Its work is done (session.c waited): what an executable graph may have left allocated is
     * freed while the graphs still reserve the addresses. */
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

/* An allocation node's pool properties and access descriptors (descs: p's, ours to change):
 * device memory of one of the client's devices, no shareable handle; its devices become the
 * server's (devmap.c). */
static CUresult check_alloc(struct session *s, CUDA_MEM_ALLOC_NODE_PARAMS *p,
                            CUmemAccessDesc *descs)
{
    if (p->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        om_loc_in(s, &p->poolProps.location) != CUDA_SUCCESS ||
        p->poolProps.win32SecurityAttributes || p->poolProps.handleTypes)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->bytesize == 0 || p->bytesize > GRAPH_ALLOC_MAX ||
        p->accessDescCount > (size_t)s->devmap.count)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < p->accessDescCount; i++) {
        CUmemAccessDesc *d = &descs[i];
        if (d->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
            om_loc_in(s, &d->location) != CUDA_SUCCESS ||
            (d->flags != 0 && d->flags != 1 && d->flags != 3))
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/*
 * Request: the graph, the dependencies, the pool properties, the count of access descriptors,
 * the descriptors, the size. Answer: the node, the allocation's address (its range is the
 * client's from now on).
 */
CUresult om_x_cuGraphAddMemAllocNode(struct call *c)
{
    uint64_t g = om_get_u64(&c->in), ndeps, count, nh;
    CUgraphNode deps[MAX_DEPS], node = NULL;
    CUmemAccessDesc descs[OM_MAX_DEVICES];
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    const void *props, *d = NULL;
    CUresult rc = read_deps(c, deps, &ndeps);

    props = om_get_bytes(&c->in, sizeof(p.poolProps));
    count = om_get_u64(&c->in);
    if (count <= OM_MAX_DEVICES)
        d = om_get_bytes(&c->in, count * sizeof(CUmemAccessDesc));
    memset(&p, 0, sizeof(p));
    p.bytesize = om_get_u64(&c->in);
    if (rc == CUDA_SUCCESS)
        rc = ARGS_OK(c);
    if (rc == CUDA_SUCCESS && (!props || count > OM_MAX_DEVICES || (count && !d)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    memcpy(&p.poolProps, props, sizeof(p.poolProps));
    memcpy(descs, d, count * sizeof(*descs));
    p.accessDescs = count ? descs : NULL;
    p.accessDescCount = count;
    if ((rc = check_alloc(c->s, &p, descs)) == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_GRAPH, g, false);
    if (rc == CUDA_SUCCESS)
        rc = om_own_room(c->s, OM_H_NODE);
    if (rc == CUDA_SUCCESS)
        rc = gm_room(c->s, 1);
    if (rc == CUDA_SUCCESS) /* before the driver makes the node (gm_add counts it) */
        rc = om_memcap_check(c->s, p.poolProps.location.id, p.bytesize); /* where it will be */
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = ((CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                       CUDA_MEM_ALLOC_NODE_PARAMS *))REAL(cuGraphAddMemAllocNode))(
        &node, (CUgraph)(uintptr_t)g, deps, (size_t)ndeps, &p);
    if (rc != CUDA_SUCCESS)
        return rc;
    nh = (uint64_t)(uintptr_t)node;
    if ((rc = om_own_add(c, OM_H_NODE, nh)) == CUDA_SUCCESS &&
        (rc = gm_add(c->s, p.dptr, p.bytesize, g, nh, false, 0, p.poolProps.location.id)) !=
            CUDA_SUCCESS) {
        forget_node(c->s, node, 0);
        ((CUresult(*)(CUgraphNode))REAL(cuGraphDestroyNode))(node);
    }
    if (rc == CUDA_SUCCESS) {
        om_put_u64(&c->out, nh);
        om_put_u64(&c->out, p.dptr);
    }
    return rc;
}

/* Answer: the pool properties, the count of access descriptors, the descriptors, the size and
 * the address. */
CUresult om_x_cuGraphMemAllocNodeGetParams(struct call *c)
{
    uint64_t node = om_get_u64(&c->in);
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_NODE, node, false);
    if (rc != CUDA_SUCCESS)
        return rc;
    memset(&p, 0, sizeof(p));
    rc = ((CUresult(*)(CUgraphNode, CUDA_MEM_ALLOC_NODE_PARAMS *))REAL(
        cuGraphMemAllocNodeGetParams))((CUgraphNode)(uintptr_t)node, &p);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (p.accessDescCount > OM_MAX_DEVICES || (p.accessDescCount && !p.accessDescs))
        return CUDA_ERROR_NOT_SUPPORTED;
    p.poolProps.win32SecurityAttributes = NULL;
    om_loc_out(c->s, &p.poolProps.location); /* the client's device ordinals */
    om_put_bytes(&c->out, &p.poolProps, sizeof(p.poolProps));
    om_put_u64(&c->out, p.accessDescCount);
    for (size_t i = 0; i < p.accessDescCount; i++) {
        CUmemAccessDesc d = p.accessDescs[i];
        om_loc_out(c->s, &d.location);
        om_put_bytes(&c->out, &d, sizeof(d));
    }
    om_put_u64(&c->out, p.bytesize);
    om_put_u64(&c->out, p.dptr);
    return CUDA_SUCCESS;
}

/* Request: the graph, the dependencies, the address: a graph allocation of the client's. */
CUresult om_x_cuGraphAddMemFreeNode(struct call *c)
{
    uint64_t g = om_get_u64(&c->in), ndeps, dptr;
    CUgraphNode deps[MAX_DEPS], node = NULL;
    CUresult rc = read_deps(c, deps, &ndeps);

    dptr = om_get_u64(&c->in);
    if (rc == CUDA_SUCCESS)
        rc = ARGS_OK(c);
    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_GRAPH, g, false);
    if (rc == CUDA_SUCCESS && !gm_held(c->s, dptr))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = om_own_room(c->s, OM_H_NODE);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = ((CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUdeviceptr))REAL(
        cuGraphAddMemFreeNode))(&node, (CUgraph)(uintptr_t)g, deps, (size_t)ndeps, dptr);
    if (rc == CUDA_SUCCESS &&
        (rc = om_own_add(c, OM_H_NODE, (uint64_t)(uintptr_t)node)) == CUDA_SUCCESS)
        om_put_u64(&c->out, (uint64_t)(uintptr_t)node);
    return rc;
}

/* ------------------------------------------------------------------ conditional nodes */

/*
 * A conditional handle is device data the driver made for one graph; the client may use the
 * handles it made, each for its own graph only (kept here, counted against its handle budget,
 * forgotten with the graph). Request: the graph, the default launch value, the flags.
 */
CUresult om_x_cuGraphConditionalHandleCreate(struct call *c)
{
    uint64_t g = om_get_u64(&c->in), value = om_get_u64(&c->in), flags = om_get_u64(&c->in);
    struct om_graphmem *m = gm_of(c->s);
    CUgraphConditionalHandle h = 0;
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_GRAPH, g, false);
    if (rc == CUDA_SUCCESS && ((flags & ~(uint64_t)COND_ASSIGN_DEFAULT) || value > UINT32_MAX))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && !m)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS && m->nc >= om_budget.client_handles)
        rc = om_budget_refuse(c->s, OM_BUDGET_HANDLES, "conditional handle");
    if (rc == CUDA_SUCCESS && !gm_grow((void **)&m->c, &m->capc, m->nc, sizeof(*m->c)))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = ((CUresult(*)(CUgraphConditionalHandle *, CUgraph, CUcontext, unsigned, unsigned))REAL(
        cuGraphConditionalHandleCreate))(&h, (CUgraph)(uintptr_t)g, server_context(),
                                         (unsigned)value, (unsigned)flags);
    if (rc != CUDA_SUCCESS)
        return rc;
    m->c[m->nc++] = (struct gm_cond){h, g};
    om_put_u64(&c->out, h);
    return CUDA_SUCCESS;
}

static void cond_forget_graph(struct session *s, uint64_t graph)
{
    struct om_graphmem *m = s->graphmem;

    for (size_t i = 0; m && i < m->nc;)
        if (m->c[i].graph == graph)
            m->c[i] = m->c[--m->nc];
        else
            i++;
}

/* A conditional node goes: its bodies (and what is in them) are no longer the client's. */
static void cond_forget_node(struct session *s, uint64_t node, int depth)
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
                forget_graph(s, (CUgraph)(uintptr_t)d.body[b], depth + 1);
        }
        return;
    }
}

/* How deep graph g lies in conditional bodies (0: not a body). */
static unsigned cond_depth(struct session *s, uint64_t g)
{
    struct om_graphmem *m = s->graphmem;

    for (size_t i = 0; m && i < m->ncn; i++)
        for (unsigned b = 0; b < m->cn[i].n; b++)
            if (m->cn[i].body[b] == g)
                return m->cn[i].depth;
    return 0;
}

static bool cond_known(struct session *s, uint64_t handle, uint64_t graph)
{
    struct om_graphmem *m = s->graphmem;

    for (size_t i = 0; m && i < m->nc; i++)
        if (m->c[i].handle == handle && m->c[i].graph == graph)
            return true;
    return false;
}

/*
 * cuGraphAddNode for a conditional node (the client sends the other types to their own entry
 * points). Request: the graph, the dependencies, the type, then the handle, the conditional
 * type and the count of bodies. Answer: the node, the count, the body graphs (the driver's,
 * owned by the node: the client's as child graphs are, never destroyed by it).
 */
CUresult om_x_cuGraphAddNode(struct call *c)
{
    uint64_t g = om_get_u64(&c->in), ndeps, type, handle, ctype, size;
    CUgraphNode deps[MAX_DEPS], node = NULL;
    struct om_graphmem *m = gm_of(c->s);
    CUgraphNodeParams p;
    CUresult rc = read_deps(c, deps, &ndeps);
    uint64_t nh;

    type = om_get_u64(&c->in);
    handle = om_get_u64(&c->in);
    ctype = om_get_u64(&c->in);
    size = om_get_u64(&c->in);
    if (rc == CUDA_SUCCESS)
        rc = ARGS_OK(c);
    if (rc == CUDA_SUCCESS && type != NODE_TYPE_CONDITIONAL)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS &&
        !((ctype == 0 && (size == 1 || size == 2)) || (ctype == 1 && size == 1) ||
          (ctype == 2 && size >= 1 && size <= COND_SWITCH_MAX)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_GRAPH, g, false);
    if (rc == CUDA_SUCCESS && !cond_known(c->s, handle, g))
        rc = CUDA_ERROR_INVALID_VALUE;
    /* Bodies deeper than the server follows when a graph goes (forget_graph) would leave the
     * client handles to nodes the driver destroyed: refused. */
    if (rc == CUDA_SUCCESS && cond_depth(c->s, g) + 1 >= MAX_NESTING)
        rc = CUDA_ERROR_NOT_SUPPORTED;
    if (rc == CUDA_SUCCESS)
        rc = om_own_room(c->s, OM_H_NODE);
    if (rc == CUDA_SUCCESS && c->s->own[OM_H_CHILDGRAPH].n + size > om_budget.client_handles)
        rc = om_budget_refuse(c->s, OM_BUDGET_HANDLES, "conditional body graph");
    if (rc == CUDA_SUCCESS && (!m || !gm_grow((void **)&m->cn, &m->capcn, m->ncn, sizeof(*m->cn))))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS)
        return rc;
    memset(&p, 0, sizeof(p));
    p.type = NODE_TYPE_CONDITIONAL;
    p.u.conditional.handle = handle;
    p.u.conditional.type = (int)ctype;
    p.u.conditional.size = (unsigned)size;
    p.u.conditional.ctx = server_context();
    rc = ((CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                       CUgraphNodeParams *))REAL(cuGraphAddNode))(&node, (CUgraph)(uintptr_t)g,
                                                                  deps, (size_t)ndeps, &p);
    if (rc != CUDA_SUCCESS)
        return rc;
    nh = (uint64_t)(uintptr_t)node;
    if ((rc = om_own_add(c, OM_H_NODE, nh)) != CUDA_SUCCESS)
        return rc;
    if (!p.u.conditional.phGraph_out) {
        forget_node(c->s, node, 0);
        ((CUresult(*)(CUgraphNode))REAL(cuGraphDestroyNode))(node);
        return CUDA_ERROR_UNKNOWN;
    }
    m->cn[m->ncn] =
        (struct gm_condnode){.node = nh, .n = (unsigned)size, .depth = cond_depth(c->s, g) + 1};
    for (uint64_t i = 0; i < size; i++) {
        uint64_t b = (uint64_t)(uintptr_t)p.u.conditional.phGraph_out[i];
        m->cn[m->ncn].body[i] = b;
        if (b && om_handles_add(&c->s->own[OM_H_CHILDGRAPH], b) < 0)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->ncn++;
    if (rc != CUDA_SUCCESS) {
        forget_node(c->s, node, 0);
        ((CUresult(*)(CUgraphNode))REAL(cuGraphDestroyNode))(node);
        return rc;
    }
    om_put_u64(&c->out, nh);
    om_put_u64(&c->out, size);
    for (uint64_t i = 0; i < size; i++)
        om_put_u64(&c->out, m->cn[m->ncn - 1].body[i]);
    return CUDA_SUCCESS;
}
