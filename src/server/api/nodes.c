/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of graph nodes: adding them, their parameters and attributes
 * (api/remote/nodes.tsv). */
#include <stdlib.h>
#include <string.h>

#include "../../common/launchattr.h"
#include "../graphstate.h"

/* ------------------------------------------------------------------ checks */

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

/* cuGraphDestroyNode (generated): forgotten first, so that a handle the client holds is never one
 * the driver may have reused. */
CUresult om_release_node(struct call *c, uint64_t h)
{
    om_graph_forget_node(c->s, (CUgraphNode)(uintptr_t)h, 0);
    return CUDA_SUCCESS;
}

/*
 * A child graph node's graph (the driver's clone, owned by the node): the client may add
 * nodes to it, query it, instantiate it, but not destroy it (kind childgraph: no destroy
 * entry; om_arg_handle accepts it where a graph is asked; cuGraphDestroy refuses it).
 */
/* cuGraphChildGraphNodeGetGraph (generated, out:childgraph): the graph the driver answers becomes
 * the client's, as a child graph (usable, not destroyable) unless it is one of its own. */
CUresult om_answer_childgraph(struct call *c, CUgraph *g)
{
    uint64_t gh = (uint64_t)(uintptr_t)*g;
    CUresult rc;

    if (!gh || om_handles_has(&c->s->own[OM_H_GRAPH], gh) ||
        om_handles_has(&c->s->own[OM_H_CHILDGRAPH], gh))
        return CUDA_SUCCESS;
    if ((rc = om_own_room(c->s, OM_H_CHILDGRAPH)) != CUDA_SUCCESS)
        return rc;
    return om_handles_add(&c->s->own[OM_H_CHILDGRAPH], gh) < 0 ? CUDA_ERROR_OUT_OF_MEMORY
                                                               : CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ kernel and memset nodes */

/*
 * Kernel node parameters as the client sends them (src/client/api/nodes.c): the kernel, the
 * grid and block (as a launch sends them), the shared memory size, then the argument bytes laid
 * out as the kernel's parameters, to the end of the request. They reach the driver through
 * `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER), from which it copies them into the node.
 */
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
    k->p.ctx = om_graph_server_context();
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
    CUresult rc = om_graph_read_deps(c, deps, &ndeps);

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
    rc = ((CUresult(*)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS *))REAL(
        cuGraphExecKernelNodeSetParams_v2))((CUgraphExec)(uintptr_t)exec,
                                            (CUgraphNode)(uintptr_t)node, &k.p);
    const struct om_kernel *kern =
        rc == CUDA_SUCCESS ? om_kernel_find(c->s, (uint64_t)(uintptr_t)k.p.kern) : NULL;
    if (kern && kern->prints) /* printf's turns (graphstate.c); never unmarked here */
        om_graph_exec_prints(c->s, exec);
    return rc;
}

/* Custom rather than `in:memset`: the generator reads an `in` struct before declaring it. */
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

/* in:copy3d (the memcpy nodes, generated): both sides are the client's memory; arrays are not
 * taken. */
CUresult om_check_copy3d(struct call *c, CUDA_MEMCPY3D *m)
{
    CUresult rc = check_side(c, m->srcMemoryType, (uint64_t)(uintptr_t)m->srcHost, m->srcDevice,
                             m->srcXInBytes, m->srcY, m->srcZ, m->srcPitch, m->srcHeight, m);

    if (rc == CUDA_SUCCESS)
        rc = check_side(c, m->dstMemoryType, (uint64_t)(uintptr_t)m->dstHost, m->dstDevice,
                        m->dstXInBytes, m->dstY, m->dstZ, m->dstPitch, m->dstHeight, m);
    m->srcArray = m->dstArray = NULL;
    return rc;
}

/* A child graph replaced in an executable graph: one that may print makes it print. */
CUresult om_hook_cuGraphExecChildGraphNodeSetParams(struct call *c, CUgraphExec e, CUgraphNode n,
                                                    CUgraph child)
{
    CUresult rc = ((CUresult(*)(CUgraphExec, CUgraphNode, CUgraph))REAL(
        cuGraphExecChildGraphNodeSetParams))(e, n, child);

    if (rc == CUDA_SUCCESS && om_graph_may_print(c->s, child))
        om_graph_exec_prints(c->s, (uint64_t)(uintptr_t)e);
    return rc;
}

/* ------------------------------------------------------------------ kernel node attributes */

/* A kernel node attribute's value: a CUkernelNodeAttrValue (OM_LAUNCH_ATTR_VALUE_BYTES); the
 * attributes allowed are those whose values travel as bytes (src/common/launchattr.h, as for
 * launches). */
/* cuGraphKernelNodeGetAttribute (generated, val:kattr): the attributes the server lets through. */
CUresult om_check_kattr(struct call *c, uint64_t attr)
{
    return om_launch_attr_plain((int64_t)attr) ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
}

/* cuGraphKernelNodeSetAttribute (generated, val:kattr_set): as om_check_kattr, said in the log. */
CUresult om_check_kattr_set(struct call *c, uint64_t attr)
{
    if (om_launch_attr_plain((int64_t)attr))
        return CUDA_SUCCESS;
    client_err(c->s, "client %d: kernel node attribute %d is not supported", (int)c->s->pid,
               (int)attr);
    return CUDA_ERROR_NOT_SUPPORTED;
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
    CUresult rc = k ? om_graph_read_deps(c, deps, &ndeps) : CUDA_ERROR_OUT_OF_MEMORY;

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
 * cuStreamBatchMemOp's (args.c: its kind and flags known, its address within the client's
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
    k->p.ctx = om_graph_server_context();
    k->p.count = (unsigned)n;
    k->p.paramArray = (union om_CUstreamBatchMemOpParams *)(void *)k->ops;
    return CUDA_SUCCESS;
}

CUresult om_x_cuGraphAddBatchMemOpNode(struct call *c)
{
    uint64_t g = om_get_u64(&c->in), ndeps;
    CUgraphNode deps[MAX_DEPS], node = NULL;
    struct batch_node *k = malloc(sizeof(*k));
    CUresult rc = k ? om_graph_read_deps(c, deps, &ndeps) : CUDA_ERROR_OUT_OF_MEMORY;

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

/* ------------------------------------------------------------------ generic nodes */

#define NODE_TYPE_CONDITIONAL 13 /* CU_GRAPH_NODE_TYPE_CONDITIONAL */

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
    struct om_graphmem *m = om_graphmem_of(c->s);
    CUgraphNodeParams p;
    CUresult rc = om_graph_read_deps(c, deps, &ndeps);
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
    /* Bodies deeper than the server follows when a graph goes (om_graph_forget_graph) would leave
     * the client handles to nodes the driver destroyed: refused. */
    if (rc == CUDA_SUCCESS && cond_depth(c->s, g) + 1 >= MAX_NESTING)
        rc = CUDA_ERROR_NOT_SUPPORTED;
    if (rc == CUDA_SUCCESS)
        rc = om_own_room(c->s, OM_H_NODE);
    if (rc == CUDA_SUCCESS && c->s->own[OM_H_CHILDGRAPH].n + size > om_budget.client_handles)
        rc = om_budget_refuse(c->s, OM_BUDGET_HANDLES, "conditional body graph");
    if (rc == CUDA_SUCCESS &&
        (!m || !om_graphmem_grow((void **)&m->cn, &m->capcn, m->ncn, sizeof(*m->cn))))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS)
        return rc;
    memset(&p, 0, sizeof(p));
    p.type = NODE_TYPE_CONDITIONAL;
    p.u.conditional.handle = handle;
    p.u.conditional.type = (int)ctype;
    p.u.conditional.size = (unsigned)size;
    p.u.conditional.ctx = om_graph_server_context();
    rc = ((CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                       CUgraphNodeParams *))REAL(cuGraphAddNode))(&node, (CUgraph)(uintptr_t)g,
                                                                  deps, (size_t)ndeps, &p);
    if (rc != CUDA_SUCCESS)
        return rc;
    nh = (uint64_t)(uintptr_t)node;
    if ((rc = om_own_add(c, OM_H_NODE, nh)) != CUDA_SUCCESS)
        return rc;
    if (!p.u.conditional.phGraph_out) {
        om_graph_forget_node(c->s, node, 0);
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
        om_graph_forget_node(c->s, node, 0);
        ((CUresult(*)(CUgraphNode))REAL(cuGraphDestroyNode))(node);
        return rc;
    }
    om_put_u64(&c->out, nh);
    om_put_u64(&c->out, size);
    for (uint64_t i = 0; i < size; i++)
        om_put_u64(&c->out, m->cn[m->ncn - 1].body[i]);
    return CUDA_SUCCESS;
}
