/* SPDX-License-Identifier: MIT */
/* Graphs and stream capture through the shim and the server, on the driver test double
 * (fake_graphs.c). Modes:
 *   remote_graphs build        a graph of every kind the double runs, instantiated, launched,
 *                              updated; the effects read back; lists, clones, refusals
 *   remote_graphs capture      stream capture on a blocking stream while the default stream
 *                              works (the server's hidden ordering must not join or break it)
 *   remote_graphs hold         prints a graph, a node and an executable graph, keeps them 10 s
 *   remote_graphs steal G N E  uses another client's graph, node and executable graph
 *   remote_graphs leak         creates graphs and executable graphs and ends without freeing
 *   remote_graphs child        a child graph node's graph: used, not destroyable, forgotten
 *   remote_graphs kernelparams a kernel node's parameters back, in the client's memory
 *   remote_graphs semnodes [S N]  external semaphore nodes; with another client's semaphore S
 *                              and node N: every call refuses them (without: prints its own,
 *                              then waits for a line on stdin)
 *   remote_graphs batchnodes   batch memory op nodes: addresses checked, operations back
 *   remote_graphs addnode      cuGraphAddNode / cuGraph(Exec)NodeSetParams, by node type
 *   remote_graphs printgraph N BASE  executable graphs whose kernel prints: made, with a child
 *                              graph, captured, their argument set; and one that does not
 *   remote_graphs pageable     copy nodes of pageable host memory, both ways: the bytes move at
 *                              each launch; the nodes answer as copy nodes; parameters set on
 *                              the graph and on the executable graph; clones; captured copies
 * Exit status 0 when every check passed; the first failed check is printed. */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

typedef struct {
    CUfunction func;
    unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    void **kernelParams, **extra;
    void *kern;
    CUcontext ctx;
} KNP;
typedef struct {
    CUdeviceptr dst;
    size_t pitch;
    unsigned value, elementSize;
    size_t width, height;
} MSP;
typedef struct {
    int result;
    CUgraphNode errorNode, errorFromNode;
} UPD;

CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxSynchronize(void);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuMemsetD8_v2(CUdeviceptr, unsigned char, size_t);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamSynchronize(CUstream);
CUresult cuStreamQuery(CUstream);
CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);
CUresult cuGraphCreate(CUgraph *, unsigned);
CUresult cuGraphDestroy(CUgraph);
CUresult cuGraphClone(CUgraph *, CUgraph);
CUresult cuGraphNodeFindInClone(CUgraphNode *, CUgraphNode, CUgraph);
CUresult cuGraphAddEmptyNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t);
CUresult cuGraphAddChildGraphNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraph);
CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode, CUgraph *);
CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode, KNP *);
typedef struct CUextSem_st *CUexternalSemaphore;
typedef struct {
    int type;
    union {
        int fd;
        struct {
            void *handle;
            const void *name;
        } win32;
    } handle;
    unsigned flags;
    unsigned reserved[16];
} SEM_DESC;
typedef struct {
    unsigned long long value; /* params.fence.value */
    unsigned char rest[64];
    unsigned flags;
    unsigned reserved[16];
} SEM_PARAMS; /* signal and wait params alike: 144 bytes */
typedef struct {
    CUexternalSemaphore *sems;
    const SEM_PARAMS *params;
    unsigned n;
} SEM_NODE;
typedef struct {
    int kind; /* CUstreamBatchMemOpType */
    unsigned flags_small;
    CUdeviceptr address;
    unsigned long long value;
    unsigned flags;
    unsigned pad;
    unsigned long long alias, unused;
} BATCH_OP; /* CUstreamBatchMemOpParams' wait/write form: 48 bytes */
_Static_assert(sizeof(BATCH_OP) == 48, "one operation");
typedef struct {
    CUcontext ctx;
    unsigned count;
    BATCH_OP *ops;
    unsigned flags;
} BATCH_NODE;
CUresult cuGraphAddBatchMemOpNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                                  const BATCH_NODE *);
CUresult cuGraphBatchMemOpNodeGetParams(CUgraphNode, BATCH_NODE *);
CUresult cuCtxGetCurrent(CUcontext *);
CUresult cuGraphBatchMemOpNodeSetParams(CUgraphNode, const BATCH_NODE *);
CUresult cuGraphExecBatchMemOpNodeSetParams(CUgraphExec, CUgraphNode, const BATCH_NODE *);
typedef struct {
    int type;
    int reserved0[3];
    union {
        long long reserved1[29];
        KNP kernel;
        struct {
            CUevent event;
        } event;
        BATCH_NODE memOp;
    } u;
    long long reserved2;
} NODE_PARAMS; /* CUgraphNodeParams: 256 bytes */
_Static_assert(sizeof(NODE_PARAMS) == 256, "node params");
CUresult cuGraphAddNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, NODE_PARAMS *);
CUresult cuGraphNodeSetParams(CUgraphNode, NODE_PARAMS *);
CUresult cuGraphExecNodeSetParams(CUgraphExec, CUgraphNode, NODE_PARAMS *);
CUresult cuImportExternalSemaphore(CUexternalSemaphore *, const SEM_DESC *);
CUresult cuDestroyExternalSemaphore(CUexternalSemaphore);
CUresult cuGraphAddExternalSemaphoresSignalNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                                                const SEM_NODE *);
CUresult cuGraphAddExternalSemaphoresWaitNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                                              const SEM_NODE *);
CUresult cuGraphExternalSemaphoresSignalNodeGetParams(CUgraphNode, SEM_NODE *);
CUresult cuGraphExternalSemaphoresWaitNodeGetParams(CUgraphNode, SEM_NODE *);
CUresult cuGraphExternalSemaphoresSignalNodeSetParams(CUgraphNode, const SEM_NODE *);
CUresult cuGraphExternalSemaphoresWaitNodeSetParams(CUgraphNode, const SEM_NODE *);
CUresult cuGraphExecExternalSemaphoresSignalNodeSetParams(CUgraphExec, CUgraphNode,
                                                          const SEM_NODE *);
CUresult cuGraphExecExternalSemaphoresWaitNodeSetParams(CUgraphExec, CUgraphNode, const SEM_NODE *);
CUresult cuGraphKernelNodeGetParams(CUgraphNode, void *);
CUresult cuGraphAddKernelNode_v2(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const KNP *);
CUresult cuGraphAddMemsetNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const MSP *,
                              CUcontext);
CUresult cuGraphAddEventRecordNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUevent);
CUresult cuGraphAddDependencies(CUgraph, const CUgraphNode *, const CUgraphNode *, size_t);
CUresult cuGraphRemoveDependencies(CUgraph, const CUgraphNode *, const CUgraphNode *, size_t);
CUresult cuGraphGetNodes(CUgraph, CUgraphNode *, size_t *);
CUresult cuGraphGetRootNodes(CUgraph, CUgraphNode *, size_t *);
CUresult cuGraphGetEdges(CUgraph, CUgraphNode *, CUgraphNode *, size_t *);
CUresult cuGraphNodeGetDependencies(CUgraphNode, CUgraphNode *, size_t *);
CUresult cuGraphNodeGetDependentNodes(CUgraphNode, CUgraphNode *, size_t *);
CUresult cuGraphNodeGetType(CUgraphNode, int *);
CUresult cuGraphDestroyNode(CUgraphNode);
CUresult cuGraphEventRecordNodeGetEvent(CUgraphNode, CUevent *);
CUresult cuGraphMemsetNodeGetParams(CUgraphNode, MSP *);
CUresult cuGraphMemsetNodeSetParams(CUgraphNode, const MSP *);
CUresult cuGraphInstantiateWithFlags(CUgraphExec *, CUgraph, unsigned long long);
CUresult cuGraphInstantiate_v2(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
CUresult cuGraphExecGetFlags(CUgraphExec, unsigned long long *);
CUresult cuGraphLaunch(CUgraphExec, CUstream);
CUresult cuGraphUpload(CUgraphExec, CUstream);
CUresult cuGraphExecDestroy(CUgraphExec);
CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec, CUgraphNode, const KNP *);
CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode, const KNP *);
CUresult cuGraphExecUpdate_v2(CUgraphExec, CUgraph, UPD *);
CUresult cuGraphNodeSetEnabled(CUgraphExec, CUgraphNode, unsigned);
CUresult cuGraphNodeGetEnabled(CUgraphExec, CUgraphNode, unsigned *);
CUresult cuDeviceGetGraphMemAttribute(int, int, void *);
CUresult cuDeviceSetGraphMemAttribute(int, int, void *);
CUresult cuDeviceGraphMemTrim(int);
CUresult cuStreamBeginCapture_v2(CUstream, int);
CUresult cuStreamBeginCapture_v2_ptsz(CUstream, int);
CUresult cuStreamBeginCapture(CUstream);
CUresult cuStreamBeginCapture_ptsz(CUstream);
CUresult cuStreamEndCapture_ptsz(CUstream, CUgraph *);
CUresult cuStreamIsCapturing_ptsz(CUstream, int *);
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream, CUgraph, const CUgraphNode *, const void *,
                                          size_t, int);
CUresult cuStreamEndCapture(CUstream, CUgraph *);
CUresult cuStreamIsCapturing(CUstream, int *);
CUresult cuStreamGetCaptureInfo(CUstream, int *, unsigned long long *);
CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream, int *, unsigned long long *, CUgraph *,
                                        const CUgraphNode **, const void **, size_t *);
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
CUresult cuStreamGetCaptureInfo_v3(CUstream, int *, unsigned long long *, CUgraph *,
                                   const CUgraphNode **, const void **, size_t *);
CUresult cuThreadExchangeStreamCaptureMode(int *);
typedef struct {
    unsigned long long flags;
    CUstream hUploadStream;
    CUgraphNode hErrNode_out;
    int result_out;
} GIP;
typedef struct {
    size_t srcXInBytes, srcY, srcZ, srcLOD;
    int srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    void *srcArray, *reserved0;
    size_t srcPitch, srcHeight;
    size_t dstXInBytes, dstY, dstZ, dstLOD;
    int dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    void *dstArray, *reserved1;
    size_t dstPitch, dstHeight;
    size_t WidthInBytes, Height, Depth;
} M3D;
CUresult cuMemHostAlloc(void **, size_t, unsigned);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuGraphAddMemcpyNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const M3D *,
                              CUcontext);
CUresult cuGraphMemcpyNodeSetParams(CUgraphNode, const M3D *);
CUresult cuGraphMemcpyNodeGetParams(CUgraphNode, M3D *);
CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec, CUgraphNode, const M3D *, CUcontext);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr, const void *, size_t, CUstream);
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr, const void *, size_t, CUstream);
CUresult cuStreamAddCallback(CUstream, void (*)(CUstream, CUresult, void *), void *, unsigned);
CUresult cuMemcpyDtoHAsync_v2(void *, CUdeviceptr, size_t, CUstream);
CUresult cuGraphKernelNodeGetAttribute(CUgraphNode, int, void *);
CUresult cuGraphKernelNodeSetAttribute(CUgraphNode, int, const void *);
CUresult cuGraphGetEdges_v2(CUgraph, CUgraphNode *, CUgraphNode *, void *, size_t *);
CUresult cuGraphInstantiateWithParams(CUgraphExec *, CUgraph, GIP *);
CUresult cuGraphDebugDotPrint(CUgraph, const char *, unsigned);
CUresult cuStreamBeginCaptureToGraph(CUstream, CUgraph, const CUgraphNode *, const void *, size_t,
                                     int);

static CUfunction fill;

static void setup(void)
{
    static const char image[] = "fakecubin\nfill_u32:8,4,4\n";
    CUcontext ctx;
    CUmodule mod;

    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
    OK(cuModuleLoadData(&mod, image));
    OK(cuModuleGetFunction(&fill, mod, "fill_u32"));
}

/* fill_u32(p, value, count) as a kernel node's parameters */
static KNP fill_params(CUdeviceptr *p, unsigned *value, unsigned *count, void **args)
{
    KNP k;
    memset(&k, 0, sizeof(k));
    args[0] = p, args[1] = value, args[2] = count;
    k.func = fill;
    k.gridDimX = k.gridDimY = k.gridDimZ = 1;
    k.blockDimX = 32, k.blockDimY = k.blockDimZ = 1;
    k.kernelParams = args;
    return k;
}

static void count_callback(CUstream s, CUresult rc, void *data)
{
    (void)s;
    if (rc == CUDA_SUCCESS)
        ++*(int *)data;
}

/* The legacy default stream cannot be captured, by any entry point or handle that names it
 * (NULL in the plain forms, CU_STREAM_LEGACY in all): refused with STREAM_CAPTURE_UNSUPPORTED,
 * nothing left capturing; NULL in a _ptsz form is the per-thread stream, which can. */
static void legacy_not_captured(CUstream blocking)
{
    CUstream legacy[] = {NULL, CU_STREAM_LEGACY};
    CUgraph g = NULL, g2 = NULL;
    int status = 7;

    OK(cuGraphCreate(&g2, 0));
    for (int i = 0; i < 2; i++) {
        EXPECT_RC(cuStreamBeginCapture_v2(legacy[i], 0), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        EXPECT_RC(cuStreamBeginCapture_v2(legacy[i], 2), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        EXPECT_RC(cuStreamBeginCapture(legacy[i]), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        EXPECT_RC(cuStreamBeginCaptureToGraph(legacy[i], g2, NULL, NULL, 0, 0),
                  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    }
    EXPECT_RC(cuStreamBeginCapture_v2_ptsz(CU_STREAM_LEGACY, 0),
              CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    EXPECT_RC(cuStreamBeginCapture_ptsz(CU_STREAM_LEGACY), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    EXPECT_RC(cuStreamBeginCaptureToGraph_ptsz(CU_STREAM_LEGACY, g2, NULL, NULL, 0, 0),
              CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    /* nothing capturing: the legacy stream's work runs, its capture queries say none */
    OK(cuStreamIsCapturing(NULL, &status));
    EXPECT(status == 0);
    OK(cuStreamIsCapturing(CU_STREAM_LEGACY, &status));
    EXPECT(status == 0);
    OK(cuStreamIsCapturing(blocking, &status));
    EXPECT(status == 0);
    OK(cuCtxSynchronize());
    /* the per-thread stream can be captured: NULL of a _ptsz form and the per-thread handle;
     * the legacy stream, which it waits for, cannot be asked meanwhile; a pageable copy of a
     * _ptsz form's NULL joins the capture (a host node and a staging copy: the capture stays
     * valid, and each launch copies the bytes) */
    static unsigned char bytes[64];
    CUdeviceptr d = 0;
    CUgraphExec ge = NULL;
    size_t nodes = 0;
    OK(cuMemAlloc_v2(&d, sizeof(bytes)));
    OK(cuStreamBeginCapture_v2_ptsz(NULL, 2));
    OK(cuStreamIsCapturing_ptsz(NULL, &status));
    EXPECT(status == 1);
    EXPECT_RC(cuStreamIsCapturing(NULL, &status), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    OK(cuMemcpyHtoDAsync_v2_ptsz(d, bytes, sizeof(bytes), NULL));
    OK(cuStreamEndCapture_ptsz(NULL, &g));
    EXPECT(g != NULL);
    OK(cuGraphGetNodes(g, NULL, &nodes));
    EXPECT(nodes >= 1);
    OK(cuGraphInstantiateWithFlags(&ge, g, 0));
    for (int round = 1; round <= 2; round++) {
        unsigned char back[sizeof(bytes)];
        memset(bytes, 0x40 + round, sizeof(bytes));
        OK(cuGraphLaunch(ge, CU_STREAM_PER_THREAD));
        OK(cuCtxSynchronize());
        OK(cuMemcpyDtoH_v2(back, d, sizeof(back)));
        EXPECT(memcmp(back, bytes, sizeof(back)) == 0);
    }
    OK(cuGraphExecDestroy(ge));
    OK(cuGraphDestroy(g));
    OK(cuStreamBeginCapture_v2(CU_STREAM_PER_THREAD, 2));
    OK(cuStreamEndCapture(CU_STREAM_PER_THREAD, &g));
    OK(cuGraphDestroy(g));
    OK(cuGraphDestroy(g2));
    OK(cuCtxSynchronize());
}

static int all(const unsigned *v, size_t n, unsigned want)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] != want)
            return 0;
    return 1;
}

static void build(void)
{
    CUdeviceptr a;
    CUstream s;
    CUevent ev, got_ev;
    CUgraph g, clone;
    CUgraphNode empty, kern, mset, rec, nodes[8], to[8], cn;
    CUgraphExec exec;
    unsigned value = 7, count = 16, host[32], on;
    unsigned long long flags;
    void *args[3];
    size_t n;
    int type;
    UPD upd;

    OK(cuMemAlloc_v2(&a, sizeof(host)));
    OK(cuMemsetD8_v2(a, 0, sizeof(host)));
    OK(cuStreamCreate(&s, 1));
    OK(cuEventCreate(&ev, 0));
    OK(cuGraphCreate(&g, 0));
    EXPECT_RC(cuGraphCreate(&clone, 1), CUDA_ERROR_INVALID_VALUE); /* flags must be 0 */
    OK(cuGraphAddEmptyNode(&empty, g, NULL, 0));
    KNP k = fill_params(&a, &value, &count, args);
    OK(cuGraphAddKernelNode_v2(&kern, g, &empty, 1, &k));
    MSP m = {a + 64, 0, 9, 4, 16, 1};
    OK(cuGraphAddMemsetNode(&mset, g, &kern, 1, &m, NULL));
    OK(cuGraphAddEventRecordNode(&rec, g, &mset, 1, ev));
    OK(cuGraphEventRecordNodeGetEvent(rec, &got_ev));
    EXPECT(got_ev == ev);
    MSP outside = {a + 64, 0, 9, 4, 17, 1}; /* one element past the allocation */
    EXPECT_RC(cuGraphAddMemsetNode(&cn, g, NULL, 0, &outside, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuGraphMemsetNodeSetParams(mset, &outside), CUDA_ERROR_INVALID_VALUE);
    MSP back;
    OK(cuGraphMemsetNodeGetParams(mset, &back));
    EXPECT(back.value == 9 && back.width == 16 && back.dst == a + 64);
    EXPECT_RC(cuGraphAddEmptyNode(&cn, g, nodes, 5000),
              CUDA_ERROR_INVALID_VALUE); /* past the maximum */

    /* lists: every node, the root, the edges, a node's neighbours */
    OK(cuGraphGetNodes(g, NULL, &n));
    EXPECT(n == 4);
    n = 8;
    OK(cuGraphGetNodes(g, nodes, &n));
    EXPECT(n == 4 && nodes[0] == empty && nodes[1] == kern && nodes[3] == rec);
    n = 2;
    OK(cuGraphGetNodes(g, nodes, &n)); /* at most the capacity */
    EXPECT(n == 2);
    n = 8;
    OK(cuGraphGetRootNodes(g, nodes, &n));
    EXPECT(n == 1 && nodes[0] == empty);
    n = 8;
    OK(cuGraphGetEdges(g, nodes, to, &n));
    EXPECT(n == 3 && nodes[0] == empty && to[0] == kern);
    n = 8;
    OK(cuGraphNodeGetDependencies(mset, nodes, &n));
    EXPECT(n == 1 && nodes[0] == kern);
    n = 8;
    OK(cuGraphNodeGetDependentNodes(kern, nodes, &n));
    EXPECT(n == 1 && nodes[0] == mset);
    OK(cuGraphNodeGetType(kern, &type));
    EXPECT(type == 0);
    unsigned char attr[64] = {0}, attr_back[64] = {1};
    attr[0] = 3; /* priority 3 */
    OK(cuGraphKernelNodeSetAttribute(kern, 8, attr));
    OK(cuGraphKernelNodeGetAttribute(kern, 8, attr_back));
    EXPECT(!memcmp(attr, attr_back, sizeof(attr)));
    EXPECT_RC(cuGraphKernelNodeSetAttribute(kern, 7, attr),
              CUDA_ERROR_NOT_SUPPORTED); /* holds an event */
    unsigned char edata[8 * 8];
    memset(edata, 0xff, sizeof(edata));
    n = 8;
    OK(cuGraphGetEdges_v2(g, nodes, to, edata, &n));
    EXPECT(n == 3 && edata[0] == 0 && edata[23] == 0 && edata[24] == 0xff);
    OK(cuGraphNodeGetType(mset, &type));
    EXPECT(type == 2);
    OK(cuGraphRemoveDependencies(g, &mset, &rec, 1));
    OK(cuGraphAddDependencies(g, &mset, &rec, 1));

    /* the description, written by the client to its own path */
    char dot[] = "/tmp/om-graphs-dot-XXXXXX", text[256] = {0};
    int fd = mkstemp(dot);
    EXPECT(fd >= 0);
    close(fd);
    OK(cuGraphDebugDotPrint(g, dot, 4));
    FILE *f = fopen(dot, "r");
    EXPECT(f && fread(text, 1, sizeof(text) - 1, f) > 0);
    fclose(f);
    unlink(dot);
    EXPECT(strstr(text, "4 nodes, flags 4") != NULL);
    EXPECT_RC(cuGraphDebugDotPrint(g, "/nonexistent-dir/x.dot", 0), CUDA_ERROR_OPERATING_SYSTEM);

    /* with parameters: uploaded on the client's stream */
    GIP gip = {2, s, (CUgraphNode)1, 7};
    CUgraphExec exec3;
    OK(cuGraphInstantiateWithParams(&exec3, g, &gip));
    EXPECT(gip.result_out == 0 && gip.hErrNode_out == NULL);
    OK(cuGraphExecDestroy(exec3));
    gip.flags = 0x100;
    EXPECT_RC(cuGraphInstantiateWithParams(&exec3, g, &gip), CUDA_ERROR_INVALID_VALUE);
    EXPECT(gip.result_out == 1);

    /* instantiate, launch: the kernel node fills with 7, the memset node with 9 */
    EXPECT_RC(cuGraphInstantiateWithFlags(&exec, g, 0x100), CUDA_ERROR_INVALID_VALUE);
    OK(cuGraphInstantiateWithFlags(&exec, g, 1));
    OK(cuGraphExecGetFlags(exec, &flags));
    EXPECT(flags == 1);
    OK(cuGraphUpload(exec, s));
    OK(cuGraphLaunch(exec, s));
    OK(cuStreamSynchronize(s));
    OK(cuMemcpyDtoH_v2(host, a, sizeof(host)));
    EXPECT(all(host, 16, 7) && all(host + 16, 16, 9));

    /* the executable graph's kernel node updated: 11, the graph's own node unchanged */
    value = 11;
    OK(cuGraphExecKernelNodeSetParams_v2(exec, kern, &k));
    OK(cuGraphLaunch(exec, NULL));
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH_v2(host, a, sizeof(host)));
    EXPECT(all(host, 16, 11));
    EXPECT_RC(cuGraphNodeSetEnabled(exec, mset, 2), CUDA_ERROR_INVALID_VALUE);
    OK(cuGraphNodeSetEnabled(exec, mset, 0));
    OK(cuGraphNodeGetEnabled(exec, mset, &on));
    EXPECT(on == 0);

    /* the graph's node set to 5, taken by a whole update */
    value = 5;
    OK(cuGraphKernelNodeSetParams_v2(kern, &k));
    OK(cuGraphExecUpdate_v2(exec, g, &upd));
    OK(cuGraphLaunch(exec, s));
    OK(cuStreamSynchronize(s));
    OK(cuMemcpyDtoH_v2(host, a, sizeof(host)));
    EXPECT(all(host, 16, 5));

    /* the old entry point, clones */
    CUgraphExec exec2;
    CUgraphNode err = (CUgraphNode)1;
    char logbuf[8] = "x";
    OK(cuGraphInstantiate_v2(&exec2, g, &err, logbuf, sizeof(logbuf)));
    EXPECT(err == NULL && logbuf[0] == 0);
    OK(cuGraphExecDestroy(exec2));
    EXPECT_RC(cuGraphExecDestroy(exec2), CUDA_ERROR_INVALID_HANDLE); /* no longer its */
    OK(cuGraphClone(&clone, g));
    OK(cuGraphNodeFindInClone(&cn, kern, clone));
    OK(cuGraphNodeGetType(cn, &type));
    EXPECT(type == 0 && cn != kern);
    OK(cuGraphDestroy(clone));
    EXPECT_RC(cuGraphNodeGetType(cn, &type),
              CUDA_ERROR_INVALID_HANDLE); /* its nodes went with it */
    OK(cuGraphDestroyNode(rec));
    EXPECT_RC(cuGraphNodeGetType(rec, &type), CUDA_ERROR_INVALID_HANDLE);

    /* graph memory */
    unsigned long long v = 1;
    OK(cuDeviceGetGraphMemAttribute(0, 0, &v));
    EXPECT(v == 4096);
    EXPECT_RC(cuDeviceGetGraphMemAttribute(0, 9, &v), CUDA_ERROR_INVALID_VALUE);
    v = 0;
    OK(cuDeviceSetGraphMemAttribute(0, 1, &v));
    v = 5;
    EXPECT_RC(cuDeviceSetGraphMemAttribute(0, 1, &v), CUDA_ERROR_INVALID_VALUE);
    OK(cuDeviceGraphMemTrim(0));
    EXPECT_RC(cuDeviceGraphMemTrim(7), CUDA_ERROR_INVALID_DEVICE);

    OK(cuGraphExecDestroy(exec));
    OK(cuGraphDestroy(g));
    EXPECT_RC(cuGraphDestroy(g), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuGraphNodeGetType(kern, &type), CUDA_ERROR_INVALID_HANDLE);
    printf("build ok\n");
}

/* Copy nodes: device to device, device to pinned memory shared with the server; pageable host
 * memory and ranges outside the client's memory refused. */
static void copies(void)
{
    CUdeviceptr a, b;
    unsigned char src[256], *pinned, pageable[256];
    CUgraph g;
    CUgraphNode d2d, d2h, x;
    CUgraphExec exec;
    CUstream s;
    M3D m;

    for (int i = 0; i < 256; i++)
        src[i] = (unsigned char)i;
    OK(cuMemAlloc_v2(&a, 256));
    OK(cuMemAlloc_v2(&b, 256));
    OK(cuMemHostAlloc((void **)&pinned, 256, 0));
    memset(pinned, 0, 256);
    OK(cuMemcpyHtoD_v2(a, src, 256));
    OK(cuMemsetD8_v2(b, 0, 256));
    OK(cuStreamCreate(&s, 1));
    OK(cuGraphCreate(&g, 0));
    memset(&m, 0, sizeof(m));
    m.srcMemoryType = m.dstMemoryType = 2;
    m.srcDevice = a + 16, m.dstDevice = b;
    m.srcPitch = m.dstPitch = 64, m.srcHeight = m.dstHeight = 4;
    m.WidthInBytes = 32, m.Height = 3, m.Depth = 1; /* rows of 32 bytes, 64 apart */
    OK(cuGraphAddMemcpyNode(&d2d, g, NULL, 0, &m, NULL));
    M3D bad = m;
    bad.srcDevice = a + 48, bad.Height = 4; /* ends at a + 48 + 3 * 64 + 32: past a's 256 */
    EXPECT_RC(cuGraphAddMemcpyNode(&x, g, NULL, 0, &bad, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuGraphMemcpyNodeSetParams(d2d, &bad), CUDA_ERROR_INVALID_VALUE);
    M3D back;
    OK(cuGraphMemcpyNodeGetParams(d2d, &back));
    EXPECT(back.srcDevice == a + 16 && back.Height == 3);
    memset(&m, 0, sizeof(m));
    m.srcMemoryType = 2, m.dstMemoryType = 1;
    m.srcDevice = b, m.dstHost = pinned;
    m.WidthInBytes = 256, m.Height = m.Depth = 1;
    OK(cuGraphAddMemcpyNode(&d2h, g, &d2d, 1, &m, NULL));
    OK(cuGraphInstantiateWithFlags(&exec, g, 0));
    OK(cuGraphLaunch(exec, s));
    OK(cuStreamSynchronize(s));
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 32; i++)
            EXPECT(pinned[r * 64 + i] == (unsigned char)(16 + r * 64 + i));
    EXPECT(pinned[32] == 0 && pinned[255] == 0);
    m.WidthInBytes = 16; /* the executable graph's copy: 16 bytes into the pinned page's end */
    m.dstHost = pinned + 240;
    OK(cuGraphExecMemcpyNodeSetParams(exec, d2h, &m, NULL));
    m.dstHost = pageable; /* a plain copy node cannot become pageable_copies()'s kind */
    EXPECT_RC(cuGraphExecMemcpyNodeSetParams(exec, d2h, &m, NULL), CUDA_ERROR_NOT_SUPPORTED);
    EXPECT_RC(cuGraphMemcpyNodeSetParams(d2h, &m), CUDA_ERROR_NOT_SUPPORTED);
    (void)x;
    OK(cuGraphLaunch(exec, s));
    OK(cuStreamSynchronize(s));
    EXPECT(pinned[240] == 16 && pinned[255] == 31);
    OK(cuGraphExecDestroy(exec));
    OK(cuGraphDestroy(g));
    printf("copies ok\n");
}

static void capture(void)
{
    CUdeviceptr a, b;
    CUstream sb;
    CUgraph g;
    CUgraphExec exec;
    unsigned va = 3, vb = 4, count = 16, host[16];
    void *aa[] = {&a, &va, &count}, *ab[] = {&b, &vb, &count};
    int status, mode = 2;
    unsigned long long id = 0;
    const CUgraphNode *deps = NULL;
    size_t ndeps = 9;

    OK(cuMemAlloc_v2(&a, sizeof(host)));
    OK(cuMemAlloc_v2(&b, sizeof(host)));
    OK(cuMemsetD8_v2(a, 0, sizeof(host)));
    OK(cuMemsetD8_v2(b, 0, sizeof(host)));
    OK(cuStreamCreate(&sb, 0)); /* blocking: ordered with the default stream */
    OK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, ab, NULL));
    OK(cuCtxSynchronize());
    legacy_not_captured(sb);
    OK(cuThreadExchangeStreamCaptureMode(&mode));
    EXPECT(mode == 0);
    OK(cuThreadExchangeStreamCaptureMode(&mode));
    EXPECT(mode == 2);
    OK(cuStreamBeginCapture_v2(sb, 0));
    OK(cuStreamIsCapturing(sb, &status));
    EXPECT(status == 1);
    OK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, sb, aa, NULL)); /* captured */
    /* the legacy stream waits for every blocking stream: while sb captures, asking whether it
     * captures fails, and the capture goes on (CuPy's test suite checks both); the per-thread
     * stream (NULL of a _ptsz form, the per-thread handle) waits for none of them */
    EXPECT_RC(cuStreamIsCapturing(NULL, &status), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    EXPECT_RC(cuStreamIsCapturing(CU_STREAM_LEGACY, &status), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    EXPECT_RC(cuStreamGetCaptureInfo_v3(NULL, &status, &id, NULL, &deps, NULL, &ndeps),
              CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    EXPECT_RC(cuStreamGetCaptureInfo(CU_STREAM_LEGACY, &status, &id),
              CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    status = 7;
    OK(cuStreamIsCapturing_ptsz(NULL, &status));
    EXPECT(status == 0);
    status = 7;
    OK(cuStreamGetCaptureInfo_v3_ptsz(NULL, &status, &id, NULL, &deps, NULL, &ndeps));
    EXPECT(status == 0);
    OK(cuStreamIsCapturing(CU_STREAM_PER_THREAD, &status));
    EXPECT(status == 0);
    vb = 6;
    /* other uses of the default streams run outside the capture (natively the legacy stream's
     * would fail: docs/compatibility.md), a callback on NULL included */
    OK(cuLaunchKernel_ptsz(fill, 1, 1, 1, 1, 1, 1, 0, NULL, ab, NULL));
    CUresult q = cuStreamQuery(NULL);
    EXPECT(q == CUDA_SUCCESS || q == CUDA_ERROR_NOT_READY);
    int calls = 0;
    OK(cuStreamAddCallback(NULL, count_callback, &calls, 0));
    EXPECT(calls == 1);
    OK(cuStreamGetCaptureInfo_v3(sb, &status, &id, NULL, &deps, NULL, &ndeps));
    EXPECT(status == 1 && id != 0 && ndeps == 1 && deps && deps[0]);
    OK(cuStreamEndCapture(sb, &g));
    OK(cuStreamIsCapturing(sb, &status));
    EXPECT(status == 0);
    /* no capture open: answered in the client for its own streams, the server still refuses
     * a stream that is not the client's */
    status = 7;
    OK(cuStreamIsCapturing(NULL, &status));
    EXPECT(status == 0);
    status = 7, id = 9;
    OK(cuStreamGetCaptureInfo_v3(sb, &status, &id, NULL, &deps, NULL, &ndeps));
    EXPECT(status == 0 && ndeps == 0 && deps == NULL);
    EXPECT_RC(cuStreamIsCapturing((CUstream)(uintptr_t)0x7777, &status), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuStreamIsCapturing(sb, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH_v2(host, b, sizeof(host)));
    EXPECT(all(host, 16, 6)); /* the default stream's kernel ran, not captured */
    OK(cuMemcpyDtoH_v2(host, a, sizeof(host)));
    EXPECT(all(host, 16, 0)); /* the captured one did not */
    size_t n = 0;
    OK(cuGraphGetNodes(g, NULL, &n));
    EXPECT(n == 1);
    OK(cuGraphInstantiateWithFlags(&exec, g, 0));
    OK(cuGraphLaunch(exec, sb));
    OK(cuStreamSynchronize(sb));
    OK(cuMemcpyDtoH_v2(host, a, sizeof(host)));
    EXPECT(all(host, 16, 3));
    OK(cuGraphExecDestroy(exec));

    /* into an existing graph, after its node */
    CUgraphNode first = NULL;
    n = 1;
    OK(cuGraphGetNodes(g, &first, &n));
    CUgraph g2 = NULL;
    OK(cuStreamBeginCaptureToGraph(sb, g, &first, NULL, 1, 0));
    OK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, sb, aa, NULL));
    OK(cuStreamEndCapture(sb, &g2));
    EXPECT(g2 == g);
    n = 0;
    OK(cuGraphGetNodes(g, NULL, &n));
    EXPECT(n == 2);
    OK(cuGraphDestroy(g));

    /* a capture the program breaks (a query of the capturing stream): the dependency node it
     * was answered is no longer its own once the capture ends without a graph */
    OK(cuStreamBeginCapture_v2(sb, 2));
    OK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, sb, aa, NULL));
    OK(cuStreamGetCaptureInfo_v3(sb, &status, &id, NULL, &deps, NULL, &ndeps));
    EXPECT(ndeps == 1);
    CUgraphNode dep = deps[0];
    int type;
    OK(cuGraphNodeGetType(dep, &type));
    EXPECT_RC(cuStreamQuery(sb), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    EXPECT_RC(cuStreamEndCapture(sb, &g2), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    EXPECT(g2 == NULL);
    EXPECT_RC(cuGraphNodeGetType(dep, &type), CUDA_ERROR_INVALID_HANDLE);
    printf("capture ok\n");
}

/* Copy nodes of pageable host memory (src/client/api/pagecopy.c): a host node of the client
 * moves the bytes through a pinned staging buffer at each launch. */
static void pageable_copies(void)
{
    enum { PITCH = 48, W = 32, H = 3 };
    static unsigned char src[PITCH * H], src2[PITCH * H], out[256], out2[256], back[256];
    unsigned char *pinned;
    CUdeviceptr a;
    CUgraph g, clone;
    CUgraphNode in, outn, list[4];
    CUgraphExec e1, e2, ec;
    CUstream s;
    M3D m, got;
    size_t n = 4;
    int type;

    OK(cuMemAlloc_v2(&a, 256));
    OK(cuMemsetD8_v2(a, 0, 256));
    OK(cuStreamCreate(&s, 1));
    OK(cuMemHostAlloc((void **)&pinned, 256, 0));
    OK(cuGraphCreate(&g, 0));
    /* in: 3 rows of 32 bytes, 48 apart in pageable memory, to a + 0, 64, 128 */
    memset(&m, 0, sizeof(m));
    m.srcMemoryType = 1, m.srcHost = src, m.srcPitch = PITCH, m.srcHeight = H;
    m.dstMemoryType = 2, m.dstDevice = a, m.dstPitch = 64, m.dstHeight = 4;
    m.WidthInBytes = W, m.Height = H, m.Depth = 1;
    OK(cuGraphAddMemcpyNode(&in, g, NULL, 0, &m, NULL));
    /* out: the device's 256 bytes into pageable memory (unified addressing names the host) */
    M3D o;
    memset(&o, 0, sizeof(o));
    o.srcMemoryType = 2, o.srcDevice = a;
    o.dstMemoryType = 4, o.dstDevice = (CUdeviceptr)(uintptr_t)out;
    o.WidthInBytes = 256, o.Height = o.Depth = 1;
    OK(cuGraphAddMemcpyNode(&outn, g, &in, 1, &o, NULL));
    /* they answer as the copy nodes the program made */
    OK(cuGraphNodeGetType(in, &type));
    EXPECT_MSG(type == 1, "type %d", type);
    OK(cuGraphMemcpyNodeGetParams(in, &got));
    EXPECT(got.srcHost == src && got.srcPitch == PITCH && got.dstDevice == a &&
           got.dstPitch == 64 && got.WidthInBytes == W && got.Height == H);
    OK(cuGraphMemcpyNodeGetParams(outn, &got));
    EXPECT(got.dstMemoryType == 4 && got.dstDevice == (CUdeviceptr)(uintptr_t)out);
    OK(cuGraphGetNodes(g, list, &n));
    EXPECT_MSG(n == 2, "%zu nodes", n);
    CUgraph child;
    EXPECT_RC(cuGraphChildGraphNodeGetGraph(in, &child), CUDA_ERROR_INVALID_VALUE);
    M3D bad = m;
    bad.srcPitch = 16; /* rows wider than their pitch */
    CUgraphNode x;
    EXPECT_RC(cuGraphAddMemcpyNode(&x, g, NULL, 0, &bad, NULL), CUDA_ERROR_INVALID_VALUE);

    /* the bytes move at each launch, not at the node's making */
    OK(cuGraphInstantiateWithFlags(&e1, g, 0));
    for (int round = 1; round <= 3; round++) {
        for (int i = 0; i < PITCH * H; i++)
            src[i] = (unsigned char)(round * 50 + i);
        memset(out, 0, sizeof(out));
        OK(cuGraphLaunch(e1, s));
        OK(cuStreamSynchronize(s));
        OK(cuMemcpyDtoH_v2(back, a, 256));
        for (int r = 0; r < H; r++)
            for (int i = 0; i < W; i++) {
                unsigned char want = (unsigned char)(round * 50 + r * PITCH + i);
                EXPECT_MSG(back[r * 64 + i] == want, "round %d row %d byte %d: %d", round, r, i,
                           back[r * 64 + i]);
                EXPECT_MSG(out[r * 64 + i] == want, "out, round %d row %d byte %d", round, r, i);
            }
        EXPECT(out[W] == 0 && back[64 + W] == 0);
    }

    /* set on the graph: a new source; the executable graph made before keeps the old one */
    for (int i = 0; i < PITCH * H; i++)
        src2[i] = (unsigned char)(200 + i);
    M3D m2 = m;
    m2.srcHost = src2;
    OK(cuGraphMemcpyNodeSetParams(in, &m2));
    OK(cuGraphMemcpyNodeGetParams(in, &got));
    EXPECT(got.srcHost == src2);
    /* set again and again with no executable graph made in between: set in place */
    for (int i = 0; i < 2100; i++)
        OK(cuGraphMemcpyNodeSetParams(in, i % 2 ? &m2 : &m));
    OK(cuGraphInstantiateWithFlags(&e2, g, 0));
    OK(cuGraphLaunch(e2, s));
    OK(cuStreamSynchronize(s));
    EXPECT(out[0] == 200 && out[64] == (unsigned char)(200 + PITCH));
    OK(cuGraphLaunch(e1, s));
    OK(cuStreamSynchronize(s));
    EXPECT(out[0] == (unsigned char)150); /* round 3's source, still e1's */

    /* set on an executable graph: its copy out lands elsewhere; the graph's is unchanged */
    M3D o2 = o;
    o2.dstMemoryType = 1, o2.dstHost = out2, o2.dstDevice = 0;
    OK(cuGraphExecMemcpyNodeSetParams(e2, outn, &o2, NULL));
    memset(out, 0, sizeof(out));
    OK(cuGraphLaunch(e2, s));
    OK(cuStreamSynchronize(s));
    EXPECT(out2[0] == 200 && out[0] == 0);
    OK(cuGraphMemcpyNodeGetParams(outn, &got));
    EXPECT(got.dstDevice == (CUdeviceptr)(uintptr_t)out);
    /* set again and again: the executable graph's record is reused, not one more each time
     * (the server keeps 4096 host-function records a session: two per record) */
    for (int i = 0; i < 2100; i++) {
        o2.dstHost = i % 2 ? out2 : out;
        OK(cuGraphExecMemcpyNodeSetParams(e2, outn, &o2, NULL));
    }
    memset(out, 0, sizeof(out));
    memset(out2, 0, sizeof(out2));
    OK(cuGraphLaunch(e2, s));
    OK(cuStreamSynchronize(s));
    EXPECT(out2[0] == 200 && out[0] == 0); /* the last set (i = 2099) names out2 */

    /* a pageable node set to pinned memory, and back */
    M3D pin = m;
    pin.srcHost = pinned, pin.srcPitch = 64, pin.srcHeight = 4;
    memset(pinned, 9, 256);
    OK(cuGraphMemcpyNodeSetParams(in, &pin));
    OK(cuGraphNodeGetType(in, &type));
    EXPECT(type == 1);
    OK(cuGraphInstantiateWithFlags(&ec, g, 0));
    OK(cuGraphLaunch(ec, s));
    OK(cuStreamSynchronize(s));
    EXPECT(out[0] == 9 && out[64 + W - 1] == 9);
    OK(cuGraphExecDestroy(ec));
    OK(cuGraphMemcpyNodeSetParams(in, &m));

    /* a clone outlives its graph: its records are its own references */
    OK(cuGraphClone(&clone, g));
    OK(cuGraphExecDestroy(e1));
    OK(cuGraphExecDestroy(e2));
    OK(cuGraphDestroy(g));
    n = 4;
    OK(cuGraphGetNodes(clone, list, &n));
    EXPECT(n == 2);
    OK(cuGraphNodeGetType(list[0], &type));
    EXPECT(type == 1);
    for (int i = 0; i < PITCH * H; i++)
        src[i] = (unsigned char)(7 + i);
    OK(cuGraphInstantiateWithFlags(&ec, clone, 0));
    OK(cuGraphLaunch(ec, s));
    OK(cuStreamSynchronize(s));
    EXPECT(out[0] == 7 && out[64] == (unsigned char)(7 + PITCH));
    OK(cuGraphExecDestroy(ec));
    OK(cuGraphDestroy(clone));

    /* captured: cuMemcpy{HtoD,DtoH}Async of pageable memory move the bytes at each launch */
    static unsigned char host_in[64], host_out[64];
    CUgraph cg;
    CUgraphExec ce;
    memset(host_in, 1, sizeof(host_in));
    memset(host_out, 0, sizeof(host_out));
    OK(cuStreamBeginCapture_v2(s, 2));
    OK(cuMemcpyHtoDAsync_v2(a + 128, host_in, 64, s));
    OK(cuMemcpyDtoHAsync_v2(host_out, a + 128, 64, s));
    OK(cuStreamEndCapture(s, &cg));
    EXPECT(host_out[0] == 0); /* nothing moved yet */
    OK(cuGraphInstantiateWithFlags(&ce, cg, 0));
    for (int round = 1; round <= 2; round++) {
        memset(host_in, 10 + round, sizeof(host_in));
        OK(cuGraphLaunch(ce, s));
        OK(cuStreamSynchronize(s));
        EXPECT_MSG(host_out[0] == 10 + round && host_out[63] == 10 + round, "captured %d: %d",
                   round, host_out[0]);
    }
    OK(cuGraphExecDestroy(ce));
    OK(cuGraphDestroy(cg));
    printf("pageable ok\n");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";

    setup();
    if (!strcmp(mode, "build")) {
        build();
        copies();
    } else if (!strcmp(mode, "capture")) {
        capture();
    } else if (!strcmp(mode, "pageable")) {
        pageable_copies();
    } else if (!strcmp(mode, "hold")) {
        CUgraph g;
        CUgraphNode n;
        CUgraphExec e;
        OK(cuGraphCreate(&g, 0));
        OK(cuGraphAddEmptyNode(&n, g, NULL, 0));
        OK(cuGraphInstantiateWithFlags(&e, g, 0));
        printf("%p %p %p\n", g, n, e);
        fflush(stdout);
        sleep(10);
    } else if (!strcmp(mode, "steal") && argc > 4) {
        CUgraph g = (CUgraph)strtoull(argv[2], NULL, 16), mine;
        CUgraphNode n = (CUgraphNode)strtoull(argv[3], NULL, 16), own, got;
        CUgraphExec e = (CUgraphExec)strtoull(argv[4], NULL, 16);
        int type;
        size_t cnt = 4;
        OK(cuGraphCreate(&mine, 0));
        OK(cuGraphAddEmptyNode(&own, mine, NULL, 0));
        EXPECT_RC(cuGraphAddEmptyNode(&got, g, NULL, 0), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuGraphGetNodes(g, &got, &cnt), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuGraphNodeGetType(n, &type), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuGraphAddEmptyNode(&got, mine, &n, 1),
                  CUDA_ERROR_INVALID_HANDLE); /* in an array */
        EXPECT_RC(cuGraphAddDependencies(mine, &n, &own, 1), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_ERROR_INVALID_HANDLE);
        OK(cuGraphLaunch(e, NULL)); /* posted: refused at the next synchronisation */
        EXPECT_RC(cuCtxSynchronize(), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuGraphExecDestroy(e), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuGraphDestroyNode(n), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuGraphDestroy(g), CUDA_ERROR_INVALID_HANDLE);
        printf("steal refused\n");
    } else if (!strcmp(mode, "leak")) {
        CUgraph g[3];
        CUgraphNode n;
        CUgraphExec e;
        for (int i = 0; i < 3; i++) {
            OK(cuGraphCreate(&g[i], 0));
            OK(cuGraphAddEmptyNode(&n, g[i], NULL, 0));
        }
        OK(cuGraphInstantiateWithFlags(&e, g[1], 0));
        /* and a capture left open */
        CUstream s;
        CUdeviceptr p;
        unsigned v = 1, count = 1;
        void *args[] = {&p, &v, &count};
        OK(cuMemAlloc_v2(&p, 4));
        OK(cuStreamCreate(&s, 1));
        OK(cuStreamBeginCapture_v2(s, 0));
        OK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        OK(cuStreamIsCapturing(s, (int *)&v));
        EXPECT(v == 1);
        printf("leak ok\n");
    } else if (!strcmp(mode, "child")) {
        /* A child graph node's graph: the node's copy, usable, not destroyable, gone with
         * the node. The parent graph is left to the session's end. */
        CUgraph c, g, cg = NULL, cg2 = NULL;
        CUgraphNode n, cn, in, nodes[4];
        size_t count = 4;
        OK(cuGraphCreate(&c, 0));
        OK(cuGraphAddEmptyNode(&n, c, NULL, 0));
        OK(cuGraphCreate(&g, 0));
        OK(cuGraphAddChildGraphNode(&cn, g, NULL, 0, c));
        OK(cuGraphChildGraphNodeGetGraph(cn, &cg));
        EXPECT(cg && cg != c);
        OK(cuGraphChildGraphNodeGetGraph(cn, &cg2));
        EXPECT(cg2 == cg);
        EXPECT_RC(cuGraphChildGraphNodeGetGraph(n, &cg2),
                  CUDA_ERROR_INVALID_VALUE); /* not a child node */
        EXPECT_RC(cuGraphChildGraphNodeGetGraph(cn, NULL), CUDA_ERROR_INVALID_VALUE);
        OK(cuGraphGetNodes(cg, nodes, &count));
        EXPECT(count == 1 && nodes[0] != n);
        OK(cuGraphAddEmptyNode(&in, cg, nodes, 1));
        EXPECT_RC(cuGraphDestroy(cg), CUDA_ERROR_INVALID_HANDLE);
        OK(cuGraphDestroy(c));
        OK(cuGraphDestroyNode(cn));
        EXPECT_RC(cuGraphAddEmptyNode(&n, cg, NULL, 0), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuGraphDestroyNode(in), CUDA_ERROR_INVALID_HANDLE);
        OK(cuGraphCreate(&c, 0)); /* a child left with its parent for the session's end */
        OK(cuGraphAddChildGraphNode(&cn, g, NULL, 0, c));
        OK(cuGraphChildGraphNodeGetGraph(cn, &cg2));
        printf("child ok %p\n", (void *)cg);
    } else if (!strcmp(mode, "kernelparams")) {
        /* A kernel node's parameters back: kernelParams point into the client's own copy of
         * the bytes it packed (fill_u32: p at 0, value at 8, count at 12). */
        CUdeviceptr a;
        CUgraph g;
        CUgraphNode kn, en;
        unsigned value = 7, count = 16;
        void *args[3];
        KNP k, back, again;
        KNP v1;
        OK(cuMemAlloc_v2(&a, 64));
        OK(cuGraphCreate(&g, 0));
        k = fill_params(&a, &value, &count, args);
        k.gridDimX = 3, k.blockDimY = 2, k.sharedMemBytes = 128;
        OK(cuGraphAddKernelNode_v2(&kn, g, NULL, 0, &k));
        OK(cuGraphAddEmptyNode(&en, g, NULL, 0));
        memset(&back, 0xff, sizeof(back));
        OK(cuGraphKernelNodeGetParams_v2(kn, &back));
        EXPECT(back.func == fill && back.gridDimX == 3 && back.gridDimY == 1 &&
               back.blockDimX == 32 && back.blockDimY == 2 && back.sharedMemBytes == 128);
        EXPECT(back.kernelParams && !back.extra);
        EXPECT(*(CUdeviceptr *)back.kernelParams[0] == a);
        EXPECT(*(unsigned *)back.kernelParams[1] == 7 && *(unsigned *)back.kernelParams[2] == 16);
        EXPECT(back.kernelParams[1] != (void *)&value);
        OK(cuGraphKernelNodeGetParams_v2(kn, &again)); /* unchanged: the same memory */
        EXPECT(again.kernelParams == back.kernelParams);
        value = 9; /* the program's variable is not the node's */
        EXPECT(*(unsigned *)back.kernelParams[1] == 7);
        OK(cuGraphKernelNodeSetParams_v2(kn, &k));
        OK(cuGraphKernelNodeGetParams_v2(kn, &again));
        EXPECT(*(unsigned *)again.kernelParams[1] == 9);
        *(unsigned *)args[2] = 4; /* the answer passed back as it is, one value changed */
        again.kernelParams[2] = &count;
        OK(cuGraphKernelNodeSetParams_v2(kn, &again));
        OK(cuGraphKernelNodeGetParams(kn, &v1)); /* v1: the same fields first */
        EXPECT(v1.func == fill && *(unsigned *)v1.kernelParams[2] == 4);
        EXPECT_RC(cuGraphKernelNodeGetParams_v2(en, &back), CUDA_ERROR_INVALID_VALUE);
        EXPECT_RC(cuGraphKernelNodeGetParams_v2(kn, NULL), CUDA_ERROR_INVALID_VALUE);
        EXPECT_RC(cuGraphKernelNodeGetParams_v2((CUgraphNode)(uintptr_t)0x7000, &back),
                  CUDA_ERROR_INVALID_HANDLE);
        OK(cuGraphDestroyNode(kn));
        EXPECT_RC(cuGraphKernelNodeGetParams_v2(kn, &back), CUDA_ERROR_INVALID_HANDLE);
        printf("kernelparams ok\n");
    } else if (!strcmp(mode, "semnodes")) {
        /* External semaphore nodes: the client's semaphores only; parameters back in client
         * memory. argv[2], argv[3]: another client's semaphore and node, or "-". */
        CUexternalSemaphore sem[2], foreign = NULL;
        CUgraphNode foreign_node = NULL;
        CUgraph g;
        CUgraphNode sn, wn, en;
        CUgraphExec ex;
        SEM_PARAMS sp[2];
        SEM_NODE np, back, again;
        char line[64];
        for (int i = 0; i < 2; i++) {
            SEM_DESC d = {.type = 1, .handle.fd = memfd_create("sem", 0)};
            OK(cuImportExternalSemaphore(&sem[i], &d));
        }
        if (argc > 3 && strcmp(argv[2], "-")) {
            foreign = (CUexternalSemaphore)(uintptr_t)strtoull(argv[2], NULL, 16);
            foreign_node = (CUgraphNode)(uintptr_t)strtoull(argv[3], NULL, 16);
        }
        memset(sp, 0, sizeof(sp));
        sp[0].value = 5, sp[1].value = 6;
        np = (SEM_NODE){sem, sp, 2};
        OK(cuGraphCreate(&g, 0));
        OK(cuGraphAddEmptyNode(&en, g, NULL, 0));
        OK(cuGraphAddExternalSemaphoresSignalNode(&sn, g, &en, 1, &np));
        OK(cuGraphAddExternalSemaphoresWaitNode(&wn, g, &sn, 1, &np));
        OK(cuGraphExternalSemaphoresSignalNodeGetParams(sn, &back));
        EXPECT(back.n == 2 && back.sems[0] == sem[0] && back.sems[1] == sem[1]);
        EXPECT(back.params[0].value == 5 && back.params[1].value == 6);
        EXPECT(back.sems != sem && back.params != sp);
        OK(cuGraphExternalSemaphoresSignalNodeGetParams(sn, &again));
        EXPECT(again.sems == back.sems && again.params == back.params);
        sp[0].value = 9;
        np.n = 1;
        OK(cuGraphExternalSemaphoresWaitNodeSetParams(wn, &np));
        OK(cuGraphExternalSemaphoresWaitNodeGetParams(wn, &back));
        EXPECT(back.n == 1 && back.sems[0] == sem[0] && back.params[0].value == 9);
        EXPECT_RC(cuGraphExternalSemaphoresWaitNodeGetParams(sn, &back), CUDA_ERROR_INVALID_VALUE);
        OK(cuGraphInstantiateWithFlags(&ex, g, 0));
        OK(cuGraphExecExternalSemaphoresSignalNodeSetParams(ex, sn, &np));
        OK(cuGraphExecExternalSemaphoresWaitNodeSetParams(ex, wn, &np));
        np.n = 129; /* past the most one node may carry */
        EXPECT_RC(cuGraphExternalSemaphoresSignalNodeSetParams(sn, &np), CUDA_ERROR_NOT_SUPPORTED);
        if (foreign) { /* another client's semaphore, in every call */
            CUexternalSemaphore mixed[2] = {sem[0], foreign};
            SEM_NODE fp = {mixed, sp, 2};
            CUgraphNode x;
            EXPECT_RC(cuGraphAddExternalSemaphoresSignalNode(&x, g, NULL, 0, &fp),
                      CUDA_ERROR_INVALID_HANDLE);
            EXPECT_RC(cuGraphAddExternalSemaphoresWaitNode(&x, g, NULL, 0, &fp),
                      CUDA_ERROR_INVALID_HANDLE);
            EXPECT_RC(cuGraphExternalSemaphoresSignalNodeSetParams(sn, &fp),
                      CUDA_ERROR_INVALID_HANDLE);
            EXPECT_RC(cuGraphExecExternalSemaphoresWaitNodeSetParams(ex, wn, &fp),
                      CUDA_ERROR_INVALID_HANDLE);
            EXPECT_RC(cuGraphExternalSemaphoresSignalNodeGetParams(foreign_node, &back),
                      CUDA_ERROR_INVALID_HANDLE);
            np.n = 1;
            EXPECT_RC(cuGraphExternalSemaphoresSignalNodeSetParams(foreign_node, &np),
                      CUDA_ERROR_INVALID_HANDLE);
            printf("semnodes foreign refused\n");
        } else {
            printf("%p %p\n", (void *)sem[0], (void *)sn);
            fflush(stdout);
            if (!fgets(line, sizeof(line), stdin)) /* held until the other client is done */
                return 0;
        }
        printf("semnodes ok\n");
    } else if (!strcmp(mode, "batchnodes")) {
        /* Batch memory op nodes: every operation's address within the client's memory for its
         * width, kinds and flags known; the operations back in client memory. */
        CUdeviceptr a;
        CUgraph g;
        CUgraphNode bn, en;
        CUgraphExec ex;
        CUcontext ctx;
        BATCH_OP ops[3];
        BATCH_NODE np, back, again;
        OK(cuCtxGetCurrent(&ctx));
        OK(cuMemAlloc_v2(&a, 64));
        memset(ops, 0, sizeof(ops));
        ops[0] = (BATCH_OP){.kind = 2, .address = a, .value = 7};      /* write 32 */
        ops[1] = (BATCH_OP){.kind = 1, .address = a + 60, .value = 1}; /* wait 32, last word */
        ops[2] = (BATCH_OP){.kind = 5, .address = a + 8, .value = 9};  /* write 64 */
        np = (BATCH_NODE){ctx, 3, ops, 0};
        OK(cuGraphCreate(&g, 0));
        OK(cuGraphAddEmptyNode(&en, g, NULL, 0));
        OK(cuGraphAddBatchMemOpNode(&bn, g, &en, 1, &np));
        OK(cuGraphBatchMemOpNodeGetParams(bn, &back));
        EXPECT(back.count == 3 && back.ops && back.ops != ops && back.flags == 0);
        EXPECT(back.ops[0].kind == 2 && back.ops[0].address == a && back.ops[0].value == 7);
        EXPECT(back.ops[2].kind == 5 && back.ops[2].address == a + 8);
        OK(cuGraphBatchMemOpNodeGetParams(bn, &again));
        EXPECT(again.ops == back.ops);
        np.count = 1;
        OK(cuGraphBatchMemOpNodeSetParams(bn, &np));
        OK(cuGraphBatchMemOpNodeGetParams(bn, &back));
        EXPECT(back.count == 1);
        OK(cuGraphInstantiateWithFlags(&ex, g, 0));
        OK(cuGraphExecBatchMemOpNodeSetParams(ex, bn, &np));
        /* refusals, in every call */
        BATCH_OP bad[4];
        bad[0] = (BATCH_OP){.kind = 1, .address = a + 61};        /* 32-bit wait past the end */
        bad[1] = (BATCH_OP){.kind = 5, .address = a + 60};        /* 64-bit write past the end */
        bad[2] = (BATCH_OP){.kind = 99, .address = a};            /* no such kind */
        bad[3] = (BATCH_OP){.kind = 2, .address = a, .flags = 2}; /* unknown write flag */
        for (int i = 0; i < 4; i++) {
            BATCH_OP two[2] = {ops[0], bad[i]};
            BATCH_NODE bp = {ctx, 2, two, 0};
            CUgraphNode x;
            EXPECT_RC(cuGraphAddBatchMemOpNode(&x, g, NULL, 0, &bp), CUDA_ERROR_INVALID_VALUE);
            EXPECT_RC(cuGraphBatchMemOpNodeSetParams(bn, &bp), CUDA_ERROR_INVALID_VALUE);
            EXPECT_RC(cuGraphExecBatchMemOpNodeSetParams(ex, bn, &bp), CUDA_ERROR_INVALID_VALUE);
        }
        np.count = 257; /* past the most one node may carry */
        EXPECT_RC(cuGraphBatchMemOpNodeSetParams(bn, &np), CUDA_ERROR_INVALID_VALUE);
        np.count = 1, np.flags = 1;
        EXPECT_RC(cuGraphBatchMemOpNodeSetParams(bn, &np), CUDA_ERROR_INVALID_VALUE);
        EXPECT_RC(cuGraphBatchMemOpNodeGetParams(en, &back), CUDA_ERROR_INVALID_VALUE);
        EXPECT_RC(cuGraphBatchMemOpNodeGetParams((CUgraphNode)(uintptr_t)0x7000, &back),
                  CUDA_ERROR_INVALID_HANDLE);
        printf("batchnodes ok\n");
    } else if (!strcmp(mode, "addnode")) {
        /* The generic node parameters: each type to its kind's own path. */
        CUdeviceptr a;
        CUgraph g;
        CUgraphNode en, kn, rn, x;
        CUgraphExec ex;
        CUevent ev, ev2, got;
        unsigned value = 7, count = 16;
        void *args[3];
        int type;
        NODE_PARAMS np;
        KNP back;
        OK(cuMemAlloc_v2(&a, 64));
        OK(cuEventCreate(&ev, 0));
        OK(cuEventCreate(&ev2, 0));
        OK(cuGraphCreate(&g, 0));
        memset(&np, 0, sizeof(np));
        np.type = 5;
        OK(cuGraphAddNode(&en, g, NULL, 0, &np));
        OK(cuGraphNodeGetType(en, &type));
        EXPECT(type == 5);
        memset(&np, 0, sizeof(np));
        np.type = 0;
        np.u.kernel = fill_params(&a, &value, &count, args);
        OK(cuGraphAddNode(&kn, g, &en, 1, &np));
        OK(cuGraphKernelNodeGetParams_v2(kn, &back));
        EXPECT(*(unsigned *)back.kernelParams[1] == 7);
        memset(&np, 0, sizeof(np));
        np.type = 7;
        np.u.event.event = ev;
        OK(cuGraphAddNode(&rn, g, &kn, 1, &np));
        OK(cuGraphEventRecordNodeGetEvent(rn, &got));
        EXPECT(got == ev);
        np.u.event.event = ev2;
        OK(cuGraphNodeSetParams(rn, &np));
        OK(cuGraphEventRecordNodeGetEvent(rn, &got));
        EXPECT(got == ev2);
        memset(&np, 0, sizeof(np));
        np.type = 0;
        value = 11;
        np.u.kernel = fill_params(&a, &value, &count, args);
        OK(cuGraphNodeSetParams(kn, &np));
        OK(cuGraphKernelNodeGetParams_v2(kn, &back));
        EXPECT(*(unsigned *)back.kernelParams[1] == 11);
        OK(cuGraphInstantiateWithFlags(&ex, g, 0));
        OK(cuGraphExecNodeSetParams(ex, kn, &np));
        np.type = 3; /* host parameters for a kernel node: the driver refuses them */
        EXPECT_RC(cuGraphExecNodeSetParams(ex, kn, &np), CUDA_ERROR_INVALID_VALUE);
        EXPECT_RC(cuGraphNodeSetParams(kn, &np), CUDA_ERROR_INVALID_VALUE);
        memset(&np, 0, sizeof(np));
        np.type = 3; /* host without a function (hostnodes_driver.c adds real ones) */
        EXPECT_RC(cuGraphAddNode(&x, g, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE);
        np.type = 10; /* memory alloc (remote_graphmem.c): zeroed pool properties refused */
        EXPECT_RC(cuGraphAddNode(&x, g, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE);
        np.type = 5;
        np.reserved0[1] = 1;
        EXPECT_RC(cuGraphAddNode(&x, g, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE);
        np.reserved0[1] = 0;
        np.type = 7;
        np.u.event.event = (CUevent)(uintptr_t)0x7000; /* not the client's */
        EXPECT_RC(cuGraphAddNode(&x, g, NULL, 0, &np), CUDA_ERROR_INVALID_HANDLE);
        printf("addnode ok\n");
    } else if (!strcmp(mode, "printgraph") && argc > 3) {
        /* Executable graphs whose kernel prints, launched unchanged: one made by hand (BASE), one
         * whose child graph prints (BASE + 1), one captured from a printing launch (BASE + 2),
         * in turn for N rounds, each with a graph that prints nothing (fill_u32 of an image
         * without vprintf) after it, each launch followed by its stream's synchronize; then N
         * rounds of the first with its argument set on the executable graph (BASE + 1000 + i).
         * Every line this client's, in order. */
        static const char image[] = "fakecubin\n.extern .func vprintf\nprintf:4\n";
        static const char quiet[] = "fakecubin\nfill_u32:8,4,4\n";
        unsigned rounds = (unsigned)atoi(argv[2]), base = (unsigned)atoi(argv[3]);
        unsigned v0 = base, v1 = base + 1, v2 = base + 2, value = 1, count = 4;
        CUmodule mod, qmod;
        CUfunction pf, quietfn;
        CUstream st;
        CUdeviceptr a;
        CUgraph g[3], child, q;
        CUgraphNode kn, cn, qn;
        CUgraphExec ex[3], qx;
        void *a0[] = {&v0}, *a1[] = {&v1}, *a2[] = {&v2}, *qa[] = {&a, &value, &count};
        KNP k;
        OK(cuModuleLoadData(&mod, image));
        OK(cuModuleGetFunction(&pf, mod, "printf"));
        OK(cuModuleLoadData(&qmod, quiet));
        OK(cuModuleGetFunction(&quietfn, qmod, "fill_u32"));
        OK(cuMemAlloc_v2(&a, 64));
        OK(cuStreamCreate(&st, 1));
        memset(&k, 0, sizeof(k));
        k.func = pf;
        k.gridDimX = k.gridDimY = k.gridDimZ = k.blockDimX = k.blockDimY = k.blockDimZ = 1;
        k.kernelParams = a0;
        OK(cuGraphCreate(&g[0], 0));
        OK(cuGraphAddKernelNode_v2(&kn, g[0], NULL, 0, &k));
        OK(cuGraphCreate(&child, 0));
        k.kernelParams = a1;
        OK(cuGraphAddKernelNode_v2(&cn, child, NULL, 0, &k));
        OK(cuGraphCreate(&g[1], 0));
        OK(cuGraphAddChildGraphNode(&cn, g[1], NULL, 0, child));
        OK(cuStreamBeginCapture_v2(st, 2)); /* relaxed */
        OK(cuLaunchKernel(pf, 1, 1, 1, 1, 1, 1, 0, st, a2, NULL));
        OK(cuStreamEndCapture(st, &g[2]));
        k.func = quietfn;
        k.kernelParams = qa;
        OK(cuGraphCreate(&q, 0));
        OK(cuGraphAddKernelNode_v2(&qn, q, NULL, 0, &k));
        for (int i = 0; i < 3; i++)
            OK(cuGraphInstantiateWithFlags(&ex[i], g[i], 0));
        OK(cuGraphInstantiateWithFlags(&qx, q, 0));
        for (unsigned i = 0; i < rounds; i++) {
            OK(cuGraphLaunch(ex[i % 3], st));
            OK(cuStreamSynchronize(st));
            OK(cuGraphLaunch(qx, st));
            OK(cuStreamSynchronize(st));
        }
        k.func = pf;
        k.kernelParams = a0;
        for (unsigned i = 0; i < rounds; i++) {
            v0 = base + 1000 + i;
            OK(cuGraphExecKernelNodeSetParams_v2(ex[0], kn, &k));
            OK(cuGraphLaunch(ex[0], st));
            OK(cuStreamSynchronize(st));
        }
        printf("printgraph ok\n");
    } else {
        fprintf(stderr, "usage: remote_graphs build|capture|hold|steal G N "
                        "E|leak|child|kernelparams|semnodes|batchnodes|addnode\n");
        return 2;
    }
    return 0;
}
