/* SPDX-License-Identifier: MIT */
/* The client's hand-written implementations of graphs and stream capture
 * (api/remote/graphs.tsv); the server's side is src/server/api/graphs.c. */
#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/gen/entries.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "../shim.h"

#define MAX_DEPS 4096  /* dependencies of one new node (the server's limit) */
#define MAX_LIST 8192  /* nodes or edges of one answer (the server's limit) */
#define ARGS_MAX 32768 /* a kernel's argument bytes */
#define CAPTURE_MODE_GLOBAL 0
#define CAPTURE_MODE_RELAXED 2
#define CAPTURE_NONE 0 /* CU_STREAM_CAPTURE_STATUS_NONE */

static bool edges_plain(const CUgraphEdgeData *e, size_t n)
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
    if (!edges_plain(edges, n))
        return CUDA_ERROR_NOT_SUPPORTED;
    return ((CUresult(*)(CUgraph, const CUgraphNode *, const CUgraphNode *, size_t))om_remote_entry(
        OM_IDX_cuGraphAddDependencies))(g, from, to, n);
}

CUresult om_r_cuGraphRemoveDependencies_v2(CUgraph g, const CUgraphNode *from,
                                           const CUgraphNode *to, const CUgraphEdgeData *edges,
                                           size_t n)
{
    if (!edges_plain(edges, n))
        return CUDA_ERROR_NOT_SUPPORTED;
    return ((CUresult(*)(CUgraph, const CUgraphNode *, const CUgraphNode *, size_t))om_remote_entry(
        OM_IDX_cuGraphRemoveDependencies))(g, from, to, n);
}

CUresult om_r_cuStreamUpdateCaptureDependencies_v2(CUstream s, CUgraphNode *deps,
                                                   const CUgraphEdgeData *edges, size_t n,
                                                   unsigned flags)
{
    if (!edges_plain(edges, n))
        return CUDA_ERROR_NOT_SUPPORTED;
    return ((CUresult(*)(CUstream, CUgraphNode *, size_t, unsigned))om_remote_entry(
        OM_IDX_cuStreamUpdateCaptureDependencies))(s, deps, n, flags);
}

/* ------------------------------------------------------------------ graphs */

CUresult om_r_cuGraphDestroy(CUgraph g)
{
    CUresult rc = om_rpc_cuGraphDestroy(g);

    if (rc == CUDA_SUCCESS)
        om_uobj_graph_destroyed(g); /* api/hostnodes.c: its user objects' references */
    return rc;
}

static void forget_kernel_copy(CUgraphNode node);
static void forget_sem_copy(CUgraphNode node);

CUresult om_r_cuGraphDestroyNode(CUgraphNode n)
{
    forget_kernel_copy(n);
    forget_sem_copy(n);
    return om_rpc_cuGraphDestroyNode(n);
}

/* The node's graph (the server's handle; the client may use it, not destroy it). */
/* A list of nodes (or, with `to`, of edges): see node_list in the server. */
static CUresult node_list(int index, uint64_t h, CUgraphNode *from, CUgraphNode *to, size_t *count)
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
    return node_list(OM_IDX_cuGraphGetEdges, (uint64_t)(uintptr_t)g, from, to, n);
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

/* ------------------------------------------------------------------ kernel nodes */

/* The node's parameters as a launch sends them: kernel, grid and block, shared memory, then
 * the argument bytes laid out for the kernel (src/server/api/graphs.c reads them back). */
static CUresult put_kernel(struct om_wbuf *req, const CUDA_KERNEL_NODE_PARAMS *p)
{
    static __thread uint8_t packed[ARGS_MAX];
    const void *args = NULL;
    size_t len = 0;
    CUfunction f;
    CUresult rc;

    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    f = p->func ? p->func : (CUfunction)p->kern; /* kernels and functions are alike here */
    rc = om_kernel_args(f, p->kernelParams, p->extra, packed, sizeof(packed), &args, &len);
    if (rc != CUDA_SUCCESS)
        return rc;
    om_put_u64(req, (uint64_t)(uintptr_t)f);
    om_put_u64(req, ((uint64_t)p->gridDimY << 32) | p->gridDimX);
    om_put_u64(req, ((uint64_t)p->blockDimX << 32) | p->gridDimZ);
    om_put_u64(req, ((uint64_t)p->blockDimZ << 32) | p->blockDimY);
    om_put_u64(req, p->sharedMemBytes);
    om_put_bytes(req, args, len);
    return CUDA_SUCCESS;
}

static CUDA_KERNEL_NODE_PARAMS from_v1(const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    CUDA_KERNEL_NODE_PARAMS v;

    memset(&v, 0, sizeof(v));
    memcpy(&v, p, sizeof(*p)); /* v2 begins with v1's fields */
    return v;
}

static CUresult put_deps(struct om_wbuf *req, const CUgraphNode *deps, size_t n)
{
    if (n > MAX_DEPS || (n && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(req, n);
    om_put_bytes(req, deps, n * sizeof(*deps));
    return CUDA_SUCCESS;
}

static CUresult new_node(int index, const struct om_wbuf *req, CUgraphNode *node)
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
    rc = put_deps(&req, deps, n);
    if (rc == CUDA_SUCCESS)
        rc = put_kernel(&req, p);
    if (rc == CUDA_SUCCESS)
        rc = new_node(OM_IDX_cuGraphAddKernelNode_v2, &req, node);
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
    static __thread uint8_t buf[64 + ARGS_MAX];
    struct om_wbuf req = {.p = buf, .cap = sizeof(buf)};
    CUresult rc;

    om_put_u64(&req, (uint64_t)(uintptr_t)node);
    if ((rc = put_kernel(&req, p)) != CUDA_SUCCESS)
        return rc;
    return om_rcall(OM_IDX_cuGraphKernelNodeSetParams_v2, &req, NULL, 0, NULL);
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
    static __thread uint8_t buf[64 + ARGS_MAX];
    struct om_wbuf req = {.p = buf, .cap = sizeof(buf)};
    CUresult rc;

    om_put_u64(&req, (uint64_t)(uintptr_t)exec);
    om_put_u64(&req, (uint64_t)(uintptr_t)node);
    if ((rc = put_kernel(&req, p)) != CUDA_SUCCESS)
        return rc;
    return om_rcall(OM_IDX_cuGraphExecKernelNodeSetParams_v2, &req, NULL, 0, NULL);
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
/* ------------------------------------------------------------------ graph memory */

CUresult om_r_cuDeviceSetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr, void *value)
{
    uint64_t v;
    REQ(req, 24);

    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&v, value, sizeof(v));
    om_put_u64(&req, (uint64_t)(int64_t)dev);
    om_put_u64(&req, (uint64_t)(int64_t)attr);
    om_put_u64(&req, v);
    return om_rcall(OM_IDX_cuDeviceSetGraphMemAttribute, &req, NULL, 0, NULL);
}

/* ------------------------------------------------------------------ stream capture */

/* The calling thread's capture mode (cuThreadExchangeStreamCaptureMode). The server captures
 * in relaxed mode whatever the client asks (see the server's side), so the mode is kept here
 * for the program to read back; it refuses nothing. */
static __thread int capture_mode = CAPTURE_MODE_GLOBAL;

CUresult om_r_cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    int old;

    if (!mode || (int)*mode < CAPTURE_MODE_GLOBAL || (int)*mode > CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    old = capture_mode;
    capture_mode = (int)*mode;
    *mode = (CUstreamCaptureMode)old;
    return CUDA_SUCCESS;
}

CUresult om_r_cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode)
{
    REQ(req, 16);
    CUresult rc;

    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    om_put_u64(&req, (uint64_t)(int64_t)mode);
    rc = om_rcall(OM_IDX_cuStreamBeginCapture_v2, &req, NULL, 0, NULL);
    om_capture_begun(rc);
    return rc;
}

CUresult om_r_cuStreamBeginCapture(CUstream s)
{
    return om_r_cuStreamBeginCapture_v2(s, (CUstreamCaptureMode)CAPTURE_MODE_GLOBAL);
}

CUresult om_r_cuStreamEndCapture(CUstream s, CUgraph *graph)
{
    uint64_t reply = 0;
    uint32_t got = 0;
    CUresult rc;
    REQ(req, 8);

    if (!graph)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    rc = om_rcall(OM_IDX_cuStreamEndCapture, &req, &reply, sizeof(reply), &got);
    om_capture_ended(rc);
    if (rc == CUDA_SUCCESS && got != sizeof(reply))
        rc = CUDA_ERROR_UNKNOWN;
    *graph = rc == CUDA_SUCCESS ? (CUgraph)(uintptr_t)reply : NULL;
    return rc;
}

/* The dependencies answered last on this thread: valid until its next call, as the driver's
 * own array is valid until the stream's next capture operation. */
static __thread CUgraphNode capture_deps[MAX_LIST];
static __thread CUgraphEdgeData capture_edges[MAX_LIST];

/*
 * Capture queries without a capture: PyTorch asks cuStreamIsCapturing before copies and
 * allocations, cuDNN and cuBLAS before their launches (a round trip each, 7.4 µs measured on
 * the H100 under openmps). While no capture of this process is open, no stream of it can be
 * capturing (captures are per process: other clients' captures never include its streams), so
 * a stream this process knows is answered here; anything else still asks the server, which
 * also refuses a stream that is not the client's.
 */
static bool surely_not_capturing(CUstream s)
{
    return om_capture_none() && om_stream_known(s);
}

CUresult om_r_cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status)
{
    if (status && surely_not_capturing(s))
        return om_r_cuStreamGetCaptureInfo_v3(s, status, NULL, NULL, NULL, NULL, NULL);
    return om_rpc_cuStreamIsCapturing(s, status);
}

CUresult om_r_cuStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id)
{
    if (status && surely_not_capturing(s))
        return om_r_cuStreamGetCaptureInfo_v3(s, status, id, NULL, NULL, NULL, NULL);
    return om_rpc_cuStreamGetCaptureInfo(s, status, id);
}

CUresult om_r_cuStreamGetCaptureInfo_v3(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                                        CUgraph *graph, const CUgraphNode **deps,
                                        const CUgraphEdgeData **edges, size_t *ndeps)
{
    static __thread uint64_t reply[4 + MAX_LIST * 2];
    uint32_t got = 0;
    uint64_t n;
    CUresult rc;
    REQ(req, 8);

    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    if (surely_not_capturing(s)) { /* what the server answers for a stream not capturing */
        *status = (CUstreamCaptureStatus)CAPTURE_NONE;
        if (id)
            *id = 0;
        if (graph)
            *graph = NULL;
        if (deps)
            *deps = NULL;
        if (edges)
            *edges = NULL;
        if (ndeps)
            *ndeps = 0;
        return CUDA_SUCCESS;
    }
    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    rc = om_rcall(OM_IDX_cuStreamGetCaptureInfo_v3, &req, reply, sizeof(reply), &got);
    if (rc != CUDA_SUCCESS)
        return rc;
    n = got >= 32 ? reply[3] : 0;
    if (got < 32 || n > MAX_LIST || got != 32 + n * (sizeof(CUgraphNode) + sizeof(CUgraphEdgeData)))
        return CUDA_ERROR_UNKNOWN;
    memcpy(capture_deps, reply + 4, n * sizeof(CUgraphNode));
    memcpy(capture_edges, reply + 4 + n, n * sizeof(CUgraphEdgeData));
    if (!edges && !edges_plain(capture_edges, (size_t)n))
        return 214; /* CUDA_ERROR_LOSSY_QUERY: edges other than the default, not asked for */
    *status = (CUstreamCaptureStatus)reply[0];
    if (id)
        *id = reply[1];
    if (graph)
        *graph = (CUgraph)(uintptr_t)reply[2];
    if (deps)
        *deps = n ? capture_deps : NULL;
    if (edges)
        *edges = n ? capture_edges : NULL;
    if (ndeps)
        *ndeps = (size_t)n;
    return CUDA_SUCCESS;
}

CUresult om_r_cuStreamGetCaptureInfo_v2(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                                        CUgraph *graph, const CUgraphNode **deps, size_t *ndeps)
{
    return om_r_cuStreamGetCaptureInfo_v3(s, status, id, graph, deps, NULL, ndeps);
}

CUresult om_r_cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode *deps,
                                          const CUgraphEdgeData *edges, size_t n,
                                          CUstreamCaptureMode mode)
{
    uint8_t *buf;
    CUresult rc;

    if (!edges_plain(edges, n))
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!(buf = malloc(32 + MAX_DEPS * 8)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct om_wbuf req = {.p = buf, .cap = 32 + MAX_DEPS * 8};
    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    om_put_u64(&req, (uint64_t)(uintptr_t)g);
    rc = put_deps(&req, deps, n);
    if (rc == CUDA_SUCCESS) {
        om_put_u64(&req, (uint64_t)(int64_t)mode);
        rc = om_rcall(OM_IDX_cuStreamBeginCaptureToGraph, &req, NULL, 0, NULL);
        om_capture_begun(rc);
    }
    free(buf);
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

/* A host side must be pinned memory shared with the server: its address there replaces the
 * program's. Pageable memory cannot be read by another process's copy node, and arrays are not
 * carried: NOT_SUPPORTED. */
static CUresult host_side(int type, const void **host, CUdeviceptr dev, size_t x, size_t y,
                          size_t z, size_t pitch, size_t height, const CUDA_MEMCPY3D *m)
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
    if (!om_pinned_lookup((const uint8_t *)*host + start, (size_t)len, &srv))
        return CUDA_ERROR_NOT_SUPPORTED;
    *host = (const void *)(uintptr_t)(srv - start);
    return CUDA_SUCCESS;
}

static CUresult host_memcpy(const CUDA_MEMCPY3D *p, CUDA_MEMCPY3D *ret)
{
    CUDA_MEMCPY3D m;
    const void *dst;
    CUresult rc;

    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    m = *p;
    rc = host_side(m.srcMemoryType, &m.srcHost, m.srcDevice, m.srcXInBytes, m.srcY, m.srcZ,
                   m.srcPitch, m.srcHeight, &m);
    if (rc == CUDA_SUCCESS && m.srcMemoryType == CU_MEMORYTYPE_UNIFIED &&
        m.srcHost != (const void *)(uintptr_t)p->srcDevice)
        m.srcDevice = (CUdeviceptr)(uintptr_t)m.srcHost;
    dst = m.dstHost;
    if (rc == CUDA_SUCCESS)
        rc = host_side(m.dstMemoryType, &dst, m.dstDevice, m.dstXInBytes, m.dstY, m.dstZ,
                       m.dstPitch, m.dstHeight, &m);
    m.dstHost = (void *)(uintptr_t)dst;
    if (rc == CUDA_SUCCESS && m.dstMemoryType == CU_MEMORYTYPE_UNIFIED &&
        dst != (const void *)(uintptr_t)p->dstDevice)
        m.dstDevice = (CUdeviceptr)(uintptr_t)dst;
    if (rc == CUDA_SUCCESS)
        *ret = m;
    return rc;
}

/* The memcpy nodes (generated rows, wrapped): host memory the server cannot read becomes its
 * device address first (host_side). */
CUresult om_r_cuGraphAddMemcpyNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                                   const CUDA_MEMCPY3D *p, CUcontext ctx)
{
    CUDA_MEMCPY3D m;
    CUresult rc = host_memcpy(p, &m);

    return rc != CUDA_SUCCESS ? rc : om_rpc_cuGraphAddMemcpyNode(node, g, deps, n, &m, ctx);
}

CUresult om_r_cuGraphMemcpyNodeSetParams(CUgraphNode node, const CUDA_MEMCPY3D *p)
{
    CUDA_MEMCPY3D m;
    CUresult rc = host_memcpy(p, &m);

    return rc != CUDA_SUCCESS ? rc : om_rpc_cuGraphMemcpyNodeSetParams(node, &m);
}

CUresult om_r_cuGraphExecMemcpyNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                             const CUDA_MEMCPY3D *p, CUcontext ctx)
{
    CUDA_MEMCPY3D m;
    CUresult rc = host_memcpy(p, &m);

    return rc != CUDA_SUCCESS ? rc : om_rpc_cuGraphExecMemcpyNodeSetParams(exec, node, &m, ctx);
}

/* ------------------------------------------------------------------ edge data, attributes */

/* The _v2 lists through the first versions: every edge they answer is a default one (the
 * driver refuses the first versions, CUDA_ERROR_LOSSY_QUERY, when a graph has others). */
static CUresult plain_edges(CUresult rc, CUgraphEdgeData *edges, const CUgraphNode *nodes,
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
    return plain_edges(om_r_cuGraphGetEdges(g, from, to, n), edges, from, n);
}

CUresult om_r_cuGraphNodeGetDependencies_v2(CUgraphNode node, CUgraphNode *deps,
                                            CUgraphEdgeData *edges, size_t *n)
{
    if (edges && !deps)
        return CUDA_ERROR_INVALID_VALUE;
    return plain_edges(om_rpc_cuGraphNodeGetDependencies(node, deps, n), edges, deps, n);
}

CUresult om_r_cuGraphNodeGetDependentNodes_v2(CUgraphNode node, CUgraphNode *deps,
                                              CUgraphEdgeData *edges, size_t *n)
{
    if (edges && !deps)
        return CUDA_ERROR_INVALID_VALUE;
    return plain_edges(om_rpc_cuGraphNodeGetDependentNodes(node, deps, n), edges, deps, n);
}

/* ------------------------------------------------------------------ external semaphore nodes */

#define MAX_SEMS 128 /* semaphores of one node (the server's limit) */
#define SEM_PARAMS_BYTES sizeof(CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS)
#define SEM_REQ (24 + MAX_DEPS * 8 + 8 + MAX_SEMS * (8 + SEM_PARAMS_BYTES))

/* The count, the semaphores, their parameters (src/server/api/graphs.c read_sems). */
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
    rc = deps_too ? put_deps(&req, deps, n) : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS)
        rc = put_sems(&req, p);
    if (rc == CUDA_SUCCESS)
        rc = node ? new_node(index, &req, node) : om_rcall(index, &req, NULL, 0, NULL);
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
        rc = put_deps(&req, deps, n);
    if (rc == CUDA_SUCCESS)
        rc = put_batch(&req, p);
    if (rc == CUDA_SUCCESS)
        rc = node ? new_node(index, &req, node) : om_rcall(index, &req, NULL, 0, NULL);
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
#define ENTRY(sym, type) ((type)om_remote_entry(OM_IDX_##sym))

/* ------------------------------------------------------------------ graph memory, conditionals */

/* Custom on the server (it records what an executable graph holds), as they were generated;
 * the installed functions are hostnodes.c's, which add the user objects' references. */
CUresult om_rpc_cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph g, unsigned long long flags)
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

#define COND_SWITCH_MAX 64 /* bodies of a switch node (the server's limit) */

/* Request: graph, dependencies, pool properties, count and access descriptors, size. Answer:
 * the node and the address (written into the caller's parameters, as the driver does). */
CUresult om_r_cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                     size_t n, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    size_t cap = 32 + MAX_DEPS * 8 + sizeof(p->poolProps) + OM_MAX_DEVICES * 12;
    uint64_t reply[2] = {0, 0};
    uint32_t got = 0;
    uint8_t *buf;
    CUresult rc;

    if (!node || !p || p->accessDescCount > OM_MAX_DEVICES ||
        (p->accessDescCount && !p->accessDescs))
        return CUDA_ERROR_INVALID_VALUE;
    if (!(buf = malloc(cap)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct om_wbuf req = {.p = buf, .cap = cap};
    om_put_u64(&req, (uint64_t)(uintptr_t)g);
    rc = put_deps(&req, deps, n);
    if (rc == CUDA_SUCCESS) {
        om_put_bytes(&req, &p->poolProps, sizeof(p->poolProps));
        om_put_u64(&req, p->accessDescCount);
        om_put_bytes(&req, p->accessDescs, p->accessDescCount * sizeof(CUmemAccessDesc));
        om_put_u64(&req, p->bytesize);
        rc = om_rcall(OM_IDX_cuGraphAddMemAllocNode, &req, reply, sizeof(reply), &got);
    }
    free(buf);
    if (rc == CUDA_SUCCESS && got != sizeof(reply))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc != CUDA_SUCCESS)
        return rc;
    *node = (CUgraphNode)(uintptr_t)reply[0];
    p->dptr = reply[1];
    CUdeviceptr b;
    size_t sz;
    bool managed;
    if (!om_devrange_find(reply[1], &b, &sz, &managed)) /* copies then know it is device memory */
        om_devrange_add(reply[1], p->bytesize);
    return CUDA_SUCCESS;
}

/* Answer: pool properties, count, descriptors, size, address; the descriptors live in a copy
 * owned by the node here (as the driver's own). */
CUresult om_r_cuGraphMemAllocNodeGetParams(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    size_t props = sizeof(p->poolProps), cap = props + 24 + OM_MAX_DEVICES * 12;
    uint8_t reply[sizeof(CUmemPoolProps) + 24 + OM_MAX_DEVICES * 12];
    uint32_t got = 0;
    uint64_t count;
    struct got_sems *k;
    CUresult rc;
    REQ(req, 8);

    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)node);
    rc = om_rcall(OM_IDX_cuGraphMemAllocNodeGetParams, &req, reply, (uint32_t)cap, &got);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (got < props + 8)
        return CUDA_ERROR_UNKNOWN;
    memcpy(&count, reply + props, 8);
    if (count > OM_MAX_DEVICES || got != props + 24 + count * 12)
        return CUDA_ERROR_UNKNOWN;
    if (!(k = node_copy(node, reply + props + 8, count * 12)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    memset(p, 0, sizeof(*p));
    memcpy(&p->poolProps, reply, props);
    p->accessDescs = count ? (const CUmemAccessDesc *)(void *)k->bytes : NULL;
    p->accessDescCount = count;
    memcpy(&p->bytesize, reply + props + 8 + count * 12, 8);
    memcpy(&p->dptr, reply + props + 16 + count * 12, 8);
    return CUDA_SUCCESS;
}

CUresult om_r_cuGraphAddMemFreeNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                                    CUdeviceptr dptr)
{
    uint8_t *buf;
    CUresult rc;

    if (!node)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(buf = malloc(24 + MAX_DEPS * 8)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct om_wbuf req = {.p = buf, .cap = 24 + MAX_DEPS * 8};
    om_put_u64(&req, (uint64_t)(uintptr_t)g);
    rc = put_deps(&req, deps, n);
    if (rc == CUDA_SUCCESS) {
        om_put_u64(&req, dptr);
        rc = new_node(OM_IDX_cuGraphAddMemFreeNode, &req, node);
    }
    free(buf);
    return rc;
}

/* The context is the client's token: the server runs the node in its own. */
CUresult om_r_cuGraphConditionalHandleCreate(CUgraphConditionalHandle *h, CUgraph g, CUcontext ctx,
                                             unsigned value, unsigned flags)
{
    REQ(req, 24);
    uint64_t v = 0;
    uint32_t got = 0;
    CUresult rc;

    (void)ctx;
    if (!h)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)g);
    om_put_u64(&req, value);
    om_put_u64(&req, flags);
    rc = om_rcall(OM_IDX_cuGraphConditionalHandleCreate, &req, &v, sizeof(v), &got);
    if (rc == CUDA_SUCCESS && got != sizeof(v))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS)
        *h = v;
    return rc;
}

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
    rc = put_deps(&req, deps, n);
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
        return om_r_cuGraphAddHostNode(node, g, deps, n,
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
    case NT_MEM_ALLOC: return om_r_cuGraphAddMemAllocNode(node, g, deps, n, &p->u.alloc);
    case NT_MEM_FREE: return om_r_cuGraphAddMemFreeNode(node, g, deps, n, p->u.free.dptr);
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
    if (!edges_plain(edges, n))
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
        return om_r_cuGraphHostNodeSetParams(node,
                                             (const CUDA_HOST_NODE_PARAMS *)(const void *)&p->u);
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
        return om_r_cuGraphExecHostNodeSetParams(
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
