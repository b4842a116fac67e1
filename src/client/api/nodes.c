/* SPDX-License-Identifier: MIT */
/* Remote mode, the nodes family (api/remote/nodes.tsv): the nodes of a graph: kernel, memset,
 * memcpy, external semaphore and batch memory operation nodes, a node's dependencies, and the
 * generic cuGraphAddNode / cuGraph(Exec)NodeSetParams. */
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
#include "../gen/calls.h"

/* CUgraphNodeType */
enum {
    NT_KERNEL = 0,
    NT_MEMCPY = 1,
    NT_MEMSET = 2,
    NT_HOST = 3,
    NT_GRAPH = 4,
    NT_EMPTY = 5,
    NT_WAIT_EVENT = 6,
    NT_EVENT_RECORD = 7,
    NT_SEM_SIGNAL = 8,
    NT_SEM_WAIT = 9,
    NT_BATCH = 12,
    NT_MEM_ALLOC = 10,
    NT_MEM_FREE = 11,
    NT_CONDITIONAL = 13
};

static void forget_kernel_copy(CUgraphNode node);
static void forget_sem_copy(CUgraphNode node);

CUresult om_r_cuGraphDestroyNode(CUgraphNode n)
{
    forget_kernel_copy(n);
    forget_sem_copy(n);
    om_pgcopy_forget(n, NULL);
    return om_rpc_cuGraphDestroyNode(n);
}

/* The node's graph (the server's handle; the client may use it, not destroy it). */
/* ------------------------------------------------------------------ kernel nodes */

/* The node's parameters as a launch sends them: kernel, grid and block, shared memory, then
 * the argument bytes laid out for the kernel (src/server/api/graphs.c reads them back). */
static CUresult put_kernel(struct om_wbuf *req, const CUDA_KERNEL_NODE_PARAMS *p)
{
    uint8_t *packed; /* not thread-local: 32 KiB of static TLS in every thread of the program */
    const void *args = NULL;
    size_t len = 0;
    CUfunction f;
    CUresult rc;

    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(packed = malloc(ARGS_MAX)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    f = p->func ? p->func : (CUfunction)p->kern; /* kernels and functions are alike here */
    rc = om_kernel_args(f, p->kernelParams, p->extra, packed, ARGS_MAX, &args, &len);
    if (rc == CUDA_SUCCESS) {
        om_put_u64(req, (uint64_t)(uintptr_t)f);
        om_put_u64(req, ((uint64_t)p->gridDimY << 32) | p->gridDimX);
        om_put_u64(req, ((uint64_t)p->blockDimX << 32) | p->gridDimZ);
        om_put_u64(req, ((uint64_t)p->blockDimZ << 32) | p->blockDimY);
        om_put_u64(req, p->sharedMemBytes);
        om_put_bytes(req, args, len);
    }
    free(packed);
    return rc;
}

/* A kernel node's parameters after `words` words, as one call (on the heap: see put_kernel). */
static CUresult kernel_call(int index, uint64_t w0, uint64_t w1, int words,
                            const CUDA_KERNEL_NODE_PARAMS *p)
{
    uint8_t *buf = malloc(64 + ARGS_MAX);
    CUresult rc;

    if (!buf)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct om_wbuf req = {.p = buf, .cap = 64 + ARGS_MAX};
    om_put_u64(&req, w0);
    if (words > 1)
        om_put_u64(&req, w1);
    rc = put_kernel(&req, p);
    if (rc == CUDA_SUCCESS)
        rc = om_rcall(index, &req, NULL, 0, NULL);
    free(buf);
    return rc;
}

static CUDA_KERNEL_NODE_PARAMS from_v1(const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    CUDA_KERNEL_NODE_PARAMS v;

    memset(&v, 0, sizeof(v));
    memcpy(&v, p, sizeof(*p)); /* v2 begins with v1's fields */
    return v;
}

#define KERNEL_REQ (16 + MAX_DEPS * 8 + 48 + ARGS_MAX)

CUresult om_r_cuGraphAddKernelNode_v2(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                      size_t n, const CUDA_KERNEL_NODE_PARAMS *p)
{
    uint8_t *buf;
    CUresult rc;

    if (!node)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(buf = malloc(KERNEL_REQ)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct om_wbuf req = {.p = buf, .cap = KERNEL_REQ};
    om_put_u64(&req, (uint64_t)(uintptr_t)g);
    rc = om_graph_put_deps(&req, deps, n);
    if (rc == CUDA_SUCCESS)
        rc = put_kernel(&req, p);
    if (rc == CUDA_SUCCESS)
        rc = om_graph_new_node(OM_IDX_cuGraphAddKernelNode_v2, &req, node);
    free(buf);
    return rc;
}

CUresult om_r_cuGraphAddKernelNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                                   const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    CUDA_KERNEL_NODE_PARAMS v;

    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    v = from_v1(p);
    return om_r_cuGraphAddKernelNode_v2(node, g, deps, n, &v);
}

CUresult om_r_cuGraphKernelNodeSetParams_v2(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *p)
{
    return kernel_call(OM_IDX_cuGraphKernelNodeSetParams_v2, (uint64_t)(uintptr_t)node, 0, 1, p);
}

CUresult om_r_cuGraphKernelNodeSetParams(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    CUDA_KERNEL_NODE_PARAMS v;

    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    v = from_v1(p);
    return om_r_cuGraphKernelNodeSetParams_v2(node, &v);
}

CUresult om_r_cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node,
                                                const CUDA_KERNEL_NODE_PARAMS *p)
{
    return kernel_call(OM_IDX_cuGraphExecKernelNodeSetParams_v2, (uint64_t)(uintptr_t)exec,
                       (uint64_t)(uintptr_t)node, 2, p);
}

CUresult om_r_cuGraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                             const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    CUDA_KERNEL_NODE_PARAMS v;

    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    v = from_v1(p);
    return om_r_cuGraphExecKernelNodeSetParams_v2(exec, node, &v);
}

/*
 * cuGraphKernelNodeGetParams: the argument values the program gets back live in the client, one
 * copy per node, laid out as the kernel's parameters with kernelParams pointing into it (extra,
 * one buffer, when the kernel's layout is unknown here). A copy stays while the node's
 * arguments are unchanged (a second call answers the same pointers); it is replaced when they
 * changed (native: the memory is valid until the parameters are modified), freed when the node
 * is destroyed through cuGraphDestroyNode (a destroyed graph's copies stay until a node at the
 * same address is asked for: the memory stays bounded by the nodes ever asked for).
 */
struct got_kernel {
    CUgraphNode node;
    CUfunction f;
    size_t len;
    void *extra[5];
    void **params;
    struct got_kernel *next;
    uint8_t bytes[];
};
static struct got_kernel *got_kernels;
static pthread_mutex_t got_lock = PTHREAD_MUTEX_INITIALIZER;

static void forget_kernel_copy(CUgraphNode node)
{
    pthread_mutex_lock(&got_lock);
    for (struct got_kernel **g = &got_kernels; *g; g = &(*g)->next) {
        if ((*g)->node == node) {
            struct got_kernel *d = *g;
            *g = d->next;
            free(d->params);
            free(d);
            break;
        }
    }
    pthread_mutex_unlock(&got_lock);
}

/* The copy for node holding these bytes (the existing one when unchanged); NULL: no memory. */
static struct got_kernel *kernel_copy(CUgraphNode node, CUfunction f, const void *args, size_t len)
{
    struct got_kernel **g, *k = NULL;
    size_t n = 0, off, size;

    pthread_mutex_lock(&got_lock);
    for (g = &got_kernels; *g && (*g)->node != node; g = &(*g)->next) {
    }
    if (*g && (*g)->f == f && (*g)->len == len && !memcmp((*g)->bytes, args, len)) {
        k = *g;
        goto out;
    }
    if (!(k = calloc(1, sizeof(*k) + len)))
        goto out;
    k->node = node;
    k->f = f;
    k->len = len;
    memcpy(k->bytes, args, len);
    while (om_kernel_param((uint64_t)(uintptr_t)f, n, &off, &size) == CUDA_SUCCESS && n < 4096)
        n++;
    if (n && (k->params = calloc(n, sizeof(*k->params))) != NULL) {
        for (size_t i = 0; i < n; i++) {
            if (om_kernel_param((uint64_t)(uintptr_t)f, i, &off, &size) != CUDA_SUCCESS ||
                off > len || size > len - off) {
                free(k->params);
                k->params = NULL;
                break;
            }
            k->params[i] = k->bytes + off;
        }
    }
    if (!k->params) { /* no layout here: the bytes as one buffer */
        k->extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
        k->extra[1] = k->bytes;
        k->extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
        k->extra[3] = &k->len;
        k->extra[4] = CU_LAUNCH_PARAM_END;
    }
    if (*g) { /* the node's arguments changed: the old copy goes */
        struct got_kernel *old = *g;
        k->next = old->next;
        free(old->params);
        free(old);
    } else {
        k->next = NULL;
    }
    *g = k;
out:
    pthread_mutex_unlock(&got_lock);
    return k;
}

CUresult om_r_cuGraphKernelNodeGetParams_v2(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS *p)
{
    uint8_t *reply;
    uint32_t got = 0;
    uint64_t v[5];
    struct got_kernel *k;
    CUresult rc;
    REQ(req, 8);

    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(reply = malloc(sizeof(v) + ARGS_MAX)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    om_put_u64(&req, (uint64_t)(uintptr_t)node);
    rc = om_rcall(OM_IDX_cuGraphKernelNodeGetParams_v2, &req, reply, sizeof(v) + ARGS_MAX, &got);
    if (rc == CUDA_SUCCESS && got < sizeof(v))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS) {
        memcpy(v, reply, sizeof(v));
        k = kernel_copy(node, (CUfunction)(uintptr_t)v[0], reply + sizeof(v), got - sizeof(v));
        if (!k) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            memset(p, 0, sizeof(*p));
            p->func = k->f;
            p->gridDimX = (unsigned)v[1];
            p->gridDimY = (unsigned)(v[1] >> 32);
            p->gridDimZ = (unsigned)v[2];
            p->blockDimX = (unsigned)(v[2] >> 32);
            p->blockDimY = (unsigned)v[3];
            p->blockDimZ = (unsigned)(v[3] >> 32);
            p->sharedMemBytes = (unsigned)v[4];
            p->kernelParams = k->params;
            p->extra = k->params ? NULL : k->extra;
        }
    }
    free(reply);
    return rc;
}

CUresult om_r_cuGraphKernelNodeGetParams(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    CUDA_KERNEL_NODE_PARAMS v;
    CUresult rc;

    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = om_r_cuGraphKernelNodeGetParams_v2(node, &v)) == CUDA_SUCCESS)
        memcpy(p, &v, sizeof(*p)); /* v2 begins with v1's fields */
    return rc;
}

/* ------------------------------------------------------------------ memset nodes */

/* The client's context is its own (the server runs the node in its context). */
/* ------------------------------------------------------------------ memcpy nodes */

/* The offset and length of one side's bytes (as the server computes them); false: overflow. */
static bool side_span(size_t x, size_t y, size_t z, size_t pitch, size_t height,
                      const CUDA_MEMCPY3D *m, uint64_t *start, uint64_t *len)
{
    uint64_t first, last;

    *start = *len = 0;
    if (!m->WidthInBytes || !m->Height || !m->Depth)
        return true;
    if (__builtin_mul_overflow((uint64_t)z, (uint64_t)height, &first) ||
        __builtin_add_overflow(first, (uint64_t)y, &first) ||
        __builtin_mul_overflow(first, (uint64_t)pitch, &first) ||
        __builtin_add_overflow(first, (uint64_t)x, &first) ||
        __builtin_add_overflow((uint64_t)z, (uint64_t)m->Depth - 1, &last) ||
        __builtin_mul_overflow(last, (uint64_t)height, &last) ||
        __builtin_add_overflow(last, (uint64_t)y, &last) ||
        __builtin_add_overflow(last, (uint64_t)m->Height - 1, &last) ||
        __builtin_mul_overflow(last, (uint64_t)pitch, &last) ||
        __builtin_add_overflow(last, (uint64_t)x, &last) ||
        __builtin_add_overflow(last, (uint64_t)m->WidthInBytes, &last))
        return false;
    *start = first;
    *len = last - first;
    return true;
}

/* A host side in pinned memory shared with the server: its address there replaces the
 * program's. Pageable memory (another process's copy node cannot reach it) is left as it is and
 * *pageable set: api/pagecopy.c makes such a node. Arrays are not carried: NOT_SUPPORTED. */
static CUresult host_side(int type, const void **host, CUdeviceptr dev, size_t x, size_t y,
                          size_t z, size_t pitch, size_t height, const CUDA_MEMCPY3D *m,
                          bool *pageable)
{
    uint64_t start, len, srv;
    CUdeviceptr base;
    size_t size;
    bool managed;

    if (type == CU_MEMORYTYPE_ARRAY)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (type == CU_MEMORYTYPE_DEVICE)
        return CUDA_SUCCESS;
    if (!side_span(x, y, z, pitch, height, m, &start, &len))
        return CUDA_ERROR_INVALID_VALUE;
    if (!len)
        return CUDA_SUCCESS;
    if (type == CU_MEMORYTYPE_UNIFIED) {
        if (om_devrange_find(dev + start, &base, &size, &managed))
            return CUDA_SUCCESS;
        *host = (const void *)(uintptr_t)dev;
    }
    if (!om_pinned_lookup((const uint8_t *)*host + start, (size_t)len, &srv)) {
        *pageable = true;
        return CUDA_SUCCESS;
    }
    *host = (const void *)(uintptr_t)(srv - start);
    return CUDA_SUCCESS;
}

/* The parameters the server gets (*ret), and which sides are pageable host memory (*pageable:
 * PG_SRC, PG_DST; then *ret is no use to the server). */
static CUresult host_memcpy(const CUDA_MEMCPY3D *p, CUDA_MEMCPY3D *ret, unsigned *pageable)
{
    CUDA_MEMCPY3D m;
    const void *dst;
    CUresult rc;
    bool src_pg = false, dst_pg = false;

    *pageable = 0;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    m = *p;
    rc = host_side(m.srcMemoryType, &m.srcHost, m.srcDevice, m.srcXInBytes, m.srcY, m.srcZ,
                   m.srcPitch, m.srcHeight, &m, &src_pg);
    if (rc == CUDA_SUCCESS && m.srcMemoryType == CU_MEMORYTYPE_UNIFIED &&
        m.srcHost != (const void *)(uintptr_t)p->srcDevice)
        m.srcDevice = (CUdeviceptr)(uintptr_t)m.srcHost;
    dst = m.dstHost;
    if (rc == CUDA_SUCCESS)
        rc = host_side(m.dstMemoryType, &dst, m.dstDevice, m.dstXInBytes, m.dstY, m.dstZ,
                       m.dstPitch, m.dstHeight, &m, &dst_pg);
    m.dstHost = (void *)(uintptr_t)dst;
    if (rc == CUDA_SUCCESS && m.dstMemoryType == CU_MEMORYTYPE_UNIFIED &&
        dst != (const void *)(uintptr_t)p->dstDevice)
        m.dstDevice = (CUdeviceptr)(uintptr_t)dst;
    if (rc == CUDA_SUCCESS)
        *ret = m;
    *pageable = (src_pg ? PG_SRC : 0) | (dst_pg ? PG_DST : 0);
    return rc;
}

unsigned om_graph_pageable_sides(const CUDA_MEMCPY3D *p)
{
    CUDA_MEMCPY3D m;
    unsigned pageable;

    return host_memcpy(p, &m, &pageable) == CUDA_SUCCESS ? pageable : 0;
}

/* The memcpy nodes (generated rows, wrapped): pinned host memory becomes the server's address
 * of it (host_side); a copy of pageable host memory is api/pagecopy.c's node, which the
 * node's queries recognise. */
CUresult om_r_cuGraphAddMemcpyNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                                   const CUDA_MEMCPY3D *p, CUcontext ctx)
{
    CUDA_MEMCPY3D m;
    unsigned pageable;
    CUresult rc = host_memcpy(p, &m, &pageable);

    if (rc == CUDA_SUCCESS && pageable)
        return om_pgcopy_add(node, g, deps, n, p, ctx, pageable);
    return rc != CUDA_SUCCESS ? rc : om_rpc_cuGraphAddMemcpyNode(node, g, deps, n, &m, ctx);
}

/* A node made of a plain copy takes no pageable memory (NOT_SUPPORTED: its kind cannot change);
 * one of api/pagecopy.c's takes any. */
CUresult om_r_cuGraphMemcpyNodeSetParams(CUgraphNode node, const CUDA_MEMCPY3D *p)
{
    CUDA_MEMCPY3D m;
    unsigned pageable;
    bool handled;
    CUresult rc = host_memcpy(p, &m, &pageable), pg_rc;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pageable && (rc = om_rpc_cuGraphMemcpyNodeSetParams(node, &m)) == CUDA_SUCCESS)
        return rc;
    pg_rc = om_pgcopy_set(node, p, pageable, &handled);
    return handled ? pg_rc : pageable ? CUDA_ERROR_NOT_SUPPORTED : rc;
}

CUresult om_r_cuGraphExecMemcpyNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                             const CUDA_MEMCPY3D *p, CUcontext ctx)
{
    CUDA_MEMCPY3D m;
    unsigned pageable;
    bool handled;
    CUresult rc = host_memcpy(p, &m, &pageable), pg_rc;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!pageable &&
        (rc = om_rpc_cuGraphExecMemcpyNodeSetParams(exec, node, &m, ctx)) == CUDA_SUCCESS)
        return rc;
    pg_rc = om_pgcopy_exec_set(exec, node, p, ctx, pageable, &handled);
    return handled ? pg_rc : pageable ? CUDA_ERROR_NOT_SUPPORTED : rc;
}

/* What the program set, for api/pagecopy.c's nodes too (the server's answer is a child graph's). */
CUresult om_r_cuGraphMemcpyNodeGetParams(CUgraphNode node, CUDA_MEMCPY3D *p)
{
    CUresult rc = om_rpc_cuGraphMemcpyNodeGetParams(node, p);

    if (rc != CUDA_SUCCESS && p && om_pgcopy_params(node, p))
        rc = CUDA_SUCCESS;
    return rc;
}

/* api/pagecopy.c's nodes are copy nodes to the program, child graph nodes to the server. */
CUresult om_r_cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType *type)
{
    CUresult rc = om_rpc_cuGraphNodeGetType(node, type);

    if (rc == CUDA_SUCCESS && *type == NT_GRAPH && om_pgcopy_is(node))
        *type = NT_MEMCPY;
    return rc;
}

CUresult om_r_cuGraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph *g)
{
    if (om_pgcopy_is(node)) /* a copy node, as the program sees it */
        return CUDA_ERROR_INVALID_VALUE;
    return om_rpc_cuGraphChildGraphNodeGetGraph(node, g);
}

/* The graph a child graph node is made of holds user objects' references (api/hostnodes.c):
 * g gets copies, as the driver's copy of the graph needs what it needed (pagecopy.c's records
 * live so). */
CUresult om_r_cuGraphAddChildGraphNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                       size_t n, CUgraph child)
{
    CUresult rc = om_rpc_cuGraphAddChildGraphNode(node, g, deps, n, child);

    if (rc == CUDA_SUCCESS)
        om_uobj_child_added(child, g);
    return rc;
}

CUresult om_r_cuGraphExecChildGraphNodeSetParams(CUgraphExec e, CUgraphNode node, CUgraph child)
{
    CUresult rc = om_rpc_cuGraphExecChildGraphNodeSetParams(e, node, child);

    if (rc == CUDA_SUCCESS)
        om_uobj_exec_child_set(e, child);
    return rc;
}

CUresult om_r_cuGraphNodeGetDependencies_v2(CUgraphNode node, CUgraphNode *deps,
                                            CUgraphEdgeData *edges, size_t *n)
{
    if (edges && !deps)
        return CUDA_ERROR_INVALID_VALUE;
    return om_graph_plain_edges(om_rpc_cuGraphNodeGetDependencies(node, deps, n), edges, deps, n);
}

CUresult om_r_cuGraphNodeGetDependentNodes_v2(CUgraphNode node, CUgraphNode *deps,
                                              CUgraphEdgeData *edges, size_t *n)
{
    if (edges && !deps)
        return CUDA_ERROR_INVALID_VALUE;
    return om_graph_plain_edges(om_rpc_cuGraphNodeGetDependentNodes(node, deps, n), edges, deps, n);
}

/* ------------------------------------------------------------------ external semaphore nodes */

#define MAX_SEMS 128 /* semaphores of one node (the server's limit) */
#define SEM_PARAMS_BYTES sizeof(CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS)
#define SEM_REQ (24 + MAX_DEPS * 8 + 8 + MAX_SEMS * (8 + SEM_PARAMS_BYTES))

/* The count, the semaphores, their parameters (src/server/api/nodes.c read_sems). */
static CUresult put_sems(struct om_wbuf *req, const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *p)
{
    if (!p || p->numExtSems > MAX_SEMS || (p->numExtSems && (!p->extSemArray || !p->paramsArray)))
        return !p || p->numExtSems <= MAX_SEMS ? CUDA_ERROR_INVALID_VALUE
                                               : CUDA_ERROR_NOT_SUPPORTED;
    om_put_u64(req, p->numExtSems);
    om_put_bytes(req, p->extSemArray, p->numExtSems * sizeof(CUexternalSemaphore));
    om_put_bytes(req, p->paramsArray, p->numExtSems * SEM_PARAMS_BYTES);
    return CUDA_SUCCESS;
}

static CUresult sem_call(int index, uint64_t a, uint64_t b, bool deps_too, const CUgraphNode *deps,
                         size_t n, const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *p, CUgraphNode *node)
{
    uint8_t *buf = malloc(SEM_REQ);
    CUresult rc;

    if (!buf)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct om_wbuf req = {.p = buf, .cap = SEM_REQ};
    om_put_u64(&req, a);
    if (b || !deps_too)
        om_put_u64(&req, b);
    rc = deps_too ? om_graph_put_deps(&req, deps, n) : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS)
        rc = put_sems(&req, p);
    if (rc == CUDA_SUCCESS)
        rc = node ? om_graph_new_node(index, &req, node) : om_rcall(index, &req, NULL, 0, NULL);
    free(buf);
    return rc;
}

CUresult om_r_cuGraphAddExternalSemaphoresSignalNode(CUgraphNode *node, CUgraph g,
                                                     const CUgraphNode *deps, size_t n,
                                                     const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *p)
{
    if (!node)
        return CUDA_ERROR_INVALID_VALUE;
    return sem_call(OM_IDX_cuGraphAddExternalSemaphoresSignalNode, (uint64_t)(uintptr_t)g, 0, true,
                    deps, n, p, node);
}

CUresult om_r_cuGraphAddExternalSemaphoresWaitNode(CUgraphNode *node, CUgraph g,
                                                   const CUgraphNode *deps, size_t n,
                                                   const CUDA_EXT_SEM_WAIT_NODE_PARAMS *p)
{
    if (!node)
        return CUDA_ERROR_INVALID_VALUE;
    return sem_call(OM_IDX_cuGraphAddExternalSemaphoresWaitNode, (uint64_t)(uintptr_t)g, 0, true,
                    deps, n, (const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *)(const void *)p, node);
}

/* Set: the node alone (a = node, no second word); exec set: the exec, then the node. */
CUresult om_r_cuGraphExternalSemaphoresSignalNodeSetParams(CUgraphNode node,
                                                           const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *p)
{
    uint8_t *buf = malloc(SEM_REQ);
    CUresult rc;

    if (!buf)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct om_wbuf req = {.p = buf, .cap = SEM_REQ};
    om_put_u64(&req, (uint64_t)(uintptr_t)node);
    if ((rc = put_sems(&req, p)) == CUDA_SUCCESS)
        rc = om_rcall(OM_IDX_cuGraphExternalSemaphoresSignalNodeSetParams, &req, NULL, 0, NULL);
    free(buf);
    return rc;
}

CUresult om_r_cuGraphExternalSemaphoresWaitNodeSetParams(CUgraphNode node,
                                                         const CUDA_EXT_SEM_WAIT_NODE_PARAMS *p)
{
    uint8_t *buf = malloc(SEM_REQ);
    CUresult rc;

    if (!buf)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct om_wbuf req = {.p = buf, .cap = SEM_REQ};
    om_put_u64(&req, (uint64_t)(uintptr_t)node);
    if ((rc = put_sems(&req, (const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *)(const void *)p)) ==
        CUDA_SUCCESS)
        rc = om_rcall(OM_IDX_cuGraphExternalSemaphoresWaitNodeSetParams, &req, NULL, 0, NULL);
    free(buf);
    return rc;
}

CUresult
om_r_cuGraphExecExternalSemaphoresSignalNodeSetParams(CUgraphExec e, CUgraphNode node,
                                                      const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *p)
{
    return sem_call(OM_IDX_cuGraphExecExternalSemaphoresSignalNodeSetParams, (uint64_t)(uintptr_t)e,
                    (uint64_t)(uintptr_t)node, false, NULL, 0, p, NULL);
}

CUresult om_r_cuGraphExecExternalSemaphoresWaitNodeSetParams(CUgraphExec e, CUgraphNode node,
                                                             const CUDA_EXT_SEM_WAIT_NODE_PARAMS *p)
{
    return sem_call(OM_IDX_cuGraphExecExternalSemaphoresWaitNodeSetParams, (uint64_t)(uintptr_t)e,
                    (uint64_t)(uintptr_t)node, false, NULL, 0,
                    (const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *)(const void *)p, NULL);
}

/*
 * Get: the arrays the program gets back live in the client, one copy per node (the driver's
 * own are owned by the node): kept while unchanged, replaced when changed, freed by
 * cuGraphDestroyNode (as the kernel nodes' copies above).
 */
struct got_sems {
    CUgraphNode node;
    size_t len;
    struct got_sems *next;
    uint8_t bytes[]; /* the semaphores, then their parameters */
};
static struct got_sems *got_sems;

static void forget_sem_copy(CUgraphNode node)
{
    pthread_mutex_lock(&got_lock);
    for (struct got_sems **g = &got_sems; *g; g = &(*g)->next) {
        if ((*g)->node == node) {
            struct got_sems *d = *g;
            *g = d->next;
            free(d);
            break;
        }
    }
    pthread_mutex_unlock(&got_lock);
}

/* The copy for node holding these bytes (the existing one when unchanged); NULL: no memory. */
static struct got_sems *node_copy(CUgraphNode node, const void *bytes, size_t len)
{
    struct got_sems **g, *k;

    pthread_mutex_lock(&got_lock);
    for (g = &got_sems; *g && (*g)->node != node; g = &(*g)->next) {
    }
    if (*g && (*g)->len == len && !memcmp((*g)->bytes, bytes, len)) {
        k = *g;
    } else if ((k = malloc(sizeof(*k) + len)) != NULL) {
        k->node = node;
        k->len = len;
        memcpy(k->bytes, bytes, len);
        k->next = *g ? (*g)->next : NULL;
        free(*g);
        *g = k;
    }
    pthread_mutex_unlock(&got_lock);
    return k;
}

const uint8_t *om_graph_node_bytes(CUgraphNode node, const void *bytes, size_t len)
{
    struct got_sems *k = node_copy(node, bytes, len);

    return k ? k->bytes : NULL;
}

static CUresult sem_get(int index, CUgraphNode node, CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *p)
{
    size_t cap = 8 + MAX_SEMS * (8 + SEM_PARAMS_BYTES), len;
    uint8_t *reply;
    uint32_t got = 0;
    uint64_t n = 0;
    struct got_sems *k = NULL;
    CUresult rc;
    REQ(req, 8);

    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(reply = malloc(cap)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    om_put_u64(&req, (uint64_t)(uintptr_t)node);
    rc = om_rcall(index, &req, reply, (uint32_t)cap, &got);
    if (rc == CUDA_SUCCESS) {
        if (got >= 8)
            memcpy(&n, reply, 8);
        len = (size_t)n * (8 + SEM_PARAMS_BYTES);
        if (got < 8 || n > MAX_SEMS || got != 8 + len)
            rc = CUDA_ERROR_UNKNOWN;
    }
    if (rc == CUDA_SUCCESS) {
        k = node_copy(node, reply + 8, len);
        if (!k) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            p->numExtSems = (unsigned)n;
            p->extSemArray = n ? (CUexternalSemaphore *)(void *)k->bytes : NULL;
            p->paramsArray =
                n ? (const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *)(void *)(k->bytes + n * 8)
                  : NULL;
        }
    }
    free(reply);
    return rc;
}

CUresult om_r_cuGraphExternalSemaphoresSignalNodeGetParams(CUgraphNode node,
                                                           CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *p)
{
    return sem_get(OM_IDX_cuGraphExternalSemaphoresSignalNodeGetParams, node, p);
}

CUresult om_r_cuGraphExternalSemaphoresWaitNodeGetParams(CUgraphNode node,
                                                         CUDA_EXT_SEM_WAIT_NODE_PARAMS *p)
{
    return sem_get(OM_IDX_cuGraphExternalSemaphoresWaitNodeGetParams, node,
                   (CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *)(void *)p);
}

/* ------------------------------------------------------------------ batch memory op nodes */

#define BATCH_OP_BYTES 48 /* CUstreamBatchMemOpParams */
#define BATCH_MAX 256     /* operations of one node (the server's limit) */
#define BATCH_REQ (24 + MAX_DEPS * 8 + 16 + BATCH_MAX * BATCH_OP_BYTES)

/* The count, the node's flags, the operations (the server checks each; the context is its). */
static CUresult put_batch(struct om_wbuf *req, const CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    if (!p || p->count == 0 || p->count > BATCH_MAX || !p->paramArray)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(req, p->count);
    om_put_u64(req, p->flags);
    om_put_bytes(req, p->paramArray, (size_t)p->count * BATCH_OP_BYTES);
    return CUDA_SUCCESS;
}

static CUresult batch_call(int index, int words, uint64_t a, uint64_t b, const CUgraphNode *deps,
                           size_t n, const CUDA_BATCH_MEM_OP_NODE_PARAMS *p, CUgraphNode *node)
{
    uint8_t *buf = malloc(BATCH_REQ);
    CUresult rc = CUDA_SUCCESS;

    if (!buf)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct om_wbuf req = {.p = buf, .cap = BATCH_REQ};
    om_put_u64(&req, a);
    if (words == 2)
        om_put_u64(&req, b);
    if (node)
        rc = om_graph_put_deps(&req, deps, n);
    if (rc == CUDA_SUCCESS)
        rc = put_batch(&req, p);
    if (rc == CUDA_SUCCESS)
        rc = node ? om_graph_new_node(index, &req, node) : om_rcall(index, &req, NULL, 0, NULL);
    free(buf);
    return rc;
}

CUresult om_r_cuGraphAddBatchMemOpNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                       size_t n, const CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    if (!node)
        return CUDA_ERROR_INVALID_VALUE;
    return batch_call(OM_IDX_cuGraphAddBatchMemOpNode, 1, (uint64_t)(uintptr_t)g, 0, deps, n, p,
                      node);
}

CUresult om_r_cuGraphBatchMemOpNodeSetParams(CUgraphNode node,
                                             const CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    return batch_call(OM_IDX_cuGraphBatchMemOpNodeSetParams, 1, (uint64_t)(uintptr_t)node, 0, NULL,
                      0, p, NULL);
}

CUresult om_r_cuGraphExecBatchMemOpNodeSetParams(CUgraphExec e, CUgraphNode node,
                                                 const CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    return batch_call(OM_IDX_cuGraphExecBatchMemOpNodeSetParams, 2, (uint64_t)(uintptr_t)e,
                      (uint64_t)(uintptr_t)node, NULL, 0, p, NULL);
}

/* The operations back in the client's per-node copy (as external semaphore nodes'); ctx NULL. */
CUresult om_r_cuGraphBatchMemOpNodeGetParams(CUgraphNode node, CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    size_t cap = 16 + BATCH_MAX * BATCH_OP_BYTES;
    uint8_t *reply;
    uint32_t got = 0;
    uint64_t v[2] = {0, 0};
    struct got_sems *k;
    CUresult rc;
    REQ(req, 8);

    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(reply = malloc(cap)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    om_put_u64(&req, (uint64_t)(uintptr_t)node);
    rc = om_rcall(OM_IDX_cuGraphBatchMemOpNodeGetParams, &req, reply, (uint32_t)cap, &got);
    if (rc == CUDA_SUCCESS) {
        if (got >= 16)
            memcpy(v, reply, 16);
        if (got < 16 || v[0] > BATCH_MAX || got != 16 + v[0] * BATCH_OP_BYTES)
            rc = CUDA_ERROR_UNKNOWN;
    }
    if (rc == CUDA_SUCCESS) {
        if (!(k = node_copy(node, reply + 16, (size_t)v[0] * BATCH_OP_BYTES))) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            memset(p, 0, sizeof(*p));
            p->count = (unsigned)v[0];
            p->flags = (unsigned)v[1];
            p->paramArray = v[0] ? (CUstreamBatchMemOpParams *)(void *)k->bytes : NULL;
        }
    }
    free(reply);
    return rc;
}

/* ------------------------------------------------------------------ generic node parameters */

/*
 * cuGraphAddNode and cuGraph(Exec)NodeSetParams: dispatched by the node type to each kind's own
 * (checked) path. Memory alloc/free and conditional nodes are not supported (their own
 * entry points are not: api/unsupported.tsv), nor a child graph moved into the node.
 */
#define ENTRY(sym, type) ((type)om_remote_entry(OM_IDX_##sym))

/* A conditional node: its body graphs come back into an array the node owns here (the
 * driver's phGraph_out is its own array too). */
static CUresult add_conditional(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                                CUDA_CONDITIONAL_NODE_PARAMS *c)
{
    uint64_t reply[2 + COND_SWITCH_MAX];
    uint32_t got = 0;
    uint8_t *buf;
    struct got_sems *k;
    CUresult rc;

    if (!node || c->size == 0 || c->size > COND_SWITCH_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(buf = malloc(48 + MAX_DEPS * 8)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct om_wbuf req = {.p = buf, .cap = 48 + MAX_DEPS * 8};
    om_put_u64(&req, (uint64_t)(uintptr_t)g);
    rc = om_graph_put_deps(&req, deps, n);
    if (rc == CUDA_SUCCESS) {
        om_put_u64(&req, NT_CONDITIONAL);
        om_put_u64(&req, c->handle);
        om_put_u64(&req, (uint64_t)(int64_t)c->type);
        om_put_u64(&req, c->size);
        rc = om_rcall(OM_IDX_cuGraphAddNode, &req, reply, sizeof(reply), &got);
    }
    free(buf);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (got < 16 || reply[1] != c->size || got != 16 + reply[1] * 8)
        return CUDA_ERROR_UNKNOWN;
    *node = (CUgraphNode)(uintptr_t)reply[0];
    if (!(k = node_copy(*node, &reply[2], c->size * sizeof(CUgraph))))
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->phGraph_out = (CUgraph *)(void *)k->bytes;
    return CUDA_SUCCESS;
}

static bool node_params_ok(const CUgraphNodeParams *p)
{
    return p && !p->reserved0[0] && !p->reserved0[1] && !p->reserved0[2] && !p->reserved2;
}

static CUresult add_node(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                         CUgraphNodeParams *p)
{
    if (!node_params_ok(p))
        return CUDA_ERROR_INVALID_VALUE;
    switch (p->type) {
    case NT_KERNEL: return om_r_cuGraphAddKernelNode_v2(node, g, deps, n, &p->u.kernel);
    case NT_MEMCPY:
        return om_r_cuGraphAddMemcpyNode(node, g, deps, n, &p->u.memcpy.copyParams,
                                         p->u.memcpy.copyCtx);
    case NT_MEMSET:
        return om_rpc_cuGraphAddMemsetNode(node, g, deps, n, &p->u.memset.p, p->u.memset.ctx);
    case NT_HOST:
        return OM_CALL(cuGraphAddHostNode)(node, g, deps, n,
                                           (const CUDA_HOST_NODE_PARAMS *)(const void *)&p->u);
    case NT_GRAPH:
        if (p->u.graph.ownership != 0) /* CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE only */
            return CUDA_ERROR_NOT_SUPPORTED;
        return ENTRY(cuGraphAddChildGraphNode,
                     CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraph))(
            node, g, deps, n, p->u.graph.graph);
    case NT_EMPTY:
        return ENTRY(cuGraphAddEmptyNode, CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *,
                                                      size_t))(node, g, deps, n);
    case NT_WAIT_EVENT:
        return ENTRY(cuGraphAddEventWaitNode,
                     CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUevent))(
            node, g, deps, n, p->u.event.event);
    case NT_EVENT_RECORD:
        return ENTRY(cuGraphAddEventRecordNode,
                     CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUevent))(
            node, g, deps, n, p->u.event.event);
    case NT_SEM_SIGNAL:
        return om_r_cuGraphAddExternalSemaphoresSignalNode(node, g, deps, n, &p->u.extSem);
    case NT_SEM_WAIT:
        return om_r_cuGraphAddExternalSemaphoresWaitNode(
            node, g, deps, n, (const CUDA_EXT_SEM_WAIT_NODE_PARAMS *)(const void *)&p->u.extSem);
    case NT_BATCH: return om_r_cuGraphAddBatchMemOpNode(node, g, deps, n, &p->u.memOp);
    case NT_MEM_ALLOC: return OM_CALL(cuGraphAddMemAllocNode)(node, g, deps, n, &p->u.alloc);
    case NT_MEM_FREE: return om_rpc_cuGraphAddMemFreeNode(node, g, deps, n, p->u.free.dptr);
    case NT_CONDITIONAL: return add_conditional(node, g, deps, n, &p->u.conditional);
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
}

CUresult om_r_cuGraphAddNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                             CUgraphNodeParams *p)
{
    return add_node(node, g, deps, n, p);
}

CUresult om_r_cuGraphAddNode_v2(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                const CUgraphEdgeData *edges, size_t n, CUgraphNodeParams *p)
{
    if (!om_graph_edges_plain(edges, n))
        return CUDA_ERROR_NOT_SUPPORTED;
    return add_node(node, g, deps, n, p);
}

CUresult om_r_cuGraphNodeSetParams(CUgraphNode node, CUgraphNodeParams *p)
{
    if (!node_params_ok(p))
        return CUDA_ERROR_INVALID_VALUE;
    switch (p->type) {
    case NT_KERNEL: return om_r_cuGraphKernelNodeSetParams_v2(node, &p->u.kernel);
    case NT_MEMCPY: return om_r_cuGraphMemcpyNodeSetParams(node, &p->u.memcpy.copyParams);
    case NT_MEMSET: return om_rpc_cuGraphMemsetNodeSetParams(node, &p->u.memset.p);
    case NT_HOST:
        return OM_CALL(cuGraphHostNodeSetParams)(
            node, (const CUDA_HOST_NODE_PARAMS *)(const void *)&p->u);
    case NT_WAIT_EVENT:
        return ENTRY(cuGraphEventWaitNodeSetEvent,
                     CUresult(*)(CUgraphNode, CUevent))(node, p->u.event.event);
    case NT_EVENT_RECORD:
        return ENTRY(cuGraphEventRecordNodeSetEvent,
                     CUresult(*)(CUgraphNode, CUevent))(node, p->u.event.event);
    case NT_SEM_SIGNAL:
        return om_r_cuGraphExternalSemaphoresSignalNodeSetParams(node, &p->u.extSem);
    case NT_SEM_WAIT:
        return om_r_cuGraphExternalSemaphoresWaitNodeSetParams(
            node, (const CUDA_EXT_SEM_WAIT_NODE_PARAMS *)(const void *)&p->u.extSem);
    case NT_BATCH: return om_r_cuGraphBatchMemOpNodeSetParams(node, &p->u.memOp);
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
}

CUresult om_r_cuGraphExecNodeSetParams(CUgraphExec e, CUgraphNode node, CUgraphNodeParams *p)
{
    if (!node_params_ok(p))
        return CUDA_ERROR_INVALID_VALUE;
    switch (p->type) {
    case NT_KERNEL: return om_r_cuGraphExecKernelNodeSetParams_v2(e, node, &p->u.kernel);
    case NT_MEMCPY:
        return om_r_cuGraphExecMemcpyNodeSetParams(e, node, &p->u.memcpy.copyParams,
                                                   p->u.memcpy.copyCtx);
    case NT_MEMSET:
        return om_rpc_cuGraphExecMemsetNodeSetParams(e, node, &p->u.memset.p, p->u.memset.ctx);
    case NT_HOST:
        return OM_CALL(cuGraphExecHostNodeSetParams)(
            e, node, (const CUDA_HOST_NODE_PARAMS *)(const void *)&p->u);
    case NT_GRAPH:
        return ENTRY(cuGraphExecChildGraphNodeSetParams,
                     CUresult(*)(CUgraphExec, CUgraphNode, CUgraph))(e, node, p->u.graph.graph);
    case NT_WAIT_EVENT:
        return ENTRY(cuGraphExecEventWaitNodeSetEvent,
                     CUresult(*)(CUgraphExec, CUgraphNode, CUevent))(e, node, p->u.event.event);
    case NT_EVENT_RECORD:
        return ENTRY(cuGraphExecEventRecordNodeSetEvent,
                     CUresult(*)(CUgraphExec, CUgraphNode, CUevent))(e, node, p->u.event.event);
    case NT_SEM_SIGNAL:
        return om_r_cuGraphExecExternalSemaphoresSignalNodeSetParams(e, node, &p->u.extSem);
    case NT_SEM_WAIT:
        return om_r_cuGraphExecExternalSemaphoresWaitNodeSetParams(
            e, node, (const CUDA_EXT_SEM_WAIT_NODE_PARAMS *)(const void *)&p->u.extSem);
    case NT_BATCH: return om_r_cuGraphExecBatchMemOpNodeSetParams(e, node, &p->u.memOp);
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
}
