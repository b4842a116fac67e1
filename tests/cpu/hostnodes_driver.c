/* SPDX-License-Identifier: MIT */
/* Host nodes, captured host functions and user objects through the shim and the server, on the
 * driver test double (fake_graphs.c runs host nodes in order at a launch). Modes:
 *   hostnodes_driver nodes      a hand-built graph kernel -> host -> kernel, launched 3 times:
 *                               the host function runs here, between the kernels; parameters
 *                               back, set, exec update, the generic node calls; refusals
 *   hostnodes_driver capture    cuLaunchHostFunc captured: runs at each replay, not at capture
 *   hostnodes_driver uobj       user objects: the destructor runs once, when the last reference
 *                               (the caller's, a graph's, a clone's, an exec's) goes
 *   hostnodes_driver hold       prints a graph, a host node and a stream, waits for a line on
 *                               stdin
 *   hostnodes_driver steal G N S  another client's graph, node and stream are refused
 *   hostnodes_driver hang       a host function that never returns (prints "blocked" first)
 * Exit status 0 when every check passed; the first failed check is printed. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

typedef void *CUuserObject;

typedef struct {
    CUfunction func;
    unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    void **kernelParams, **extra;
    void *kern;
    CUcontext ctx;
} KNP;
typedef struct {
    void (*fn)(void *);
    void *data;
} HNP; /* CUDA_HOST_NODE_PARAMS */
typedef struct {
    int type;
    int reserved0[3];
    union {
        long long reserved1[29];
        HNP host;
    } u;
    long long reserved2;
} NODE_PARAMS; /* CUgraphNodeParams: 256 bytes */
_Static_assert(sizeof(NODE_PARAMS) == 256, "node params");

CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxSynchronize(void);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuMemHostAlloc(void **, size_t, unsigned);
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *, void *, unsigned);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamSynchronize(CUstream);
CUresult cuStreamBeginCapture_v2(CUstream, int);
CUresult cuStreamEndCapture(CUstream, CUgraph *);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);
CUresult cuLaunchHostFunc(CUstream, void (*)(void *), void *);
CUresult cuStreamAddCallback(CUstream, void (*)(CUstream, CUresult, void *), void *, unsigned);
CUresult cuGraphCreate(CUgraph *, unsigned);
CUresult cuGraphDestroy(CUgraph);
CUresult cuGraphClone(CUgraph *, CUgraph);
CUresult cuGraphAddKernelNode_v2(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const KNP *);
CUresult cuGraphAddHostNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const HNP *);
CUresult cuGraphHostNodeGetParams(CUgraphNode, HNP *);
CUresult cuGraphHostNodeSetParams(CUgraphNode, const HNP *);
CUresult cuGraphExecHostNodeSetParams(CUgraphExec, CUgraphNode, const HNP *);
CUresult cuGraphAddNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, NODE_PARAMS *);
CUresult cuGraphNodeSetParams(CUgraphNode, NODE_PARAMS *);
CUresult cuGraphExecNodeSetParams(CUgraphExec, CUgraphNode, NODE_PARAMS *);
CUresult cuGraphNodeGetType(CUgraphNode, int *);
CUresult cuGraphInstantiateWithFlags(CUgraphExec *, CUgraph, unsigned long long);
CUresult cuGraphLaunch(CUgraphExec, CUstream);
CUresult cuGraphExecDestroy(CUgraphExec);
typedef struct {
    int result;
    CUgraphNode errorNode, errorFromNode;
} UPD; /* CUgraphExecUpdateResultInfo */
CUresult cuGraphExecUpdate_v2(CUgraphExec, CUgraph, UPD *);
CUresult cuUserObjectCreate(CUuserObject *, void *, void (*)(void *), unsigned, unsigned);
CUresult cuUserObjectRetain(CUuserObject, unsigned);
CUresult cuUserObjectRelease(CUuserObject, unsigned);
CUresult cuGraphRetainUserObject(CUgraph, CUuserObject, unsigned, unsigned);
CUresult cuGraphReleaseUserObject(CUgraph, CUuserObject, unsigned);

#define NODE_TYPE_HOST 3

static CUfunction fill;
static volatile unsigned *pinned; /* shared with the server: the kernels write it */
static CUdeviceptr pinned_dev;

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
    OK(cuMemHostAlloc((void **)&pinned, 4096, 0));
    OK(cuMemHostGetDevicePointer_v2(&pinned_dev, (void *)pinned, 0));
    memset((void *)pinned, 0, 4096);
}

/* A kernel node (or launch) that writes `value` into pinned[0]. */
static KNP fill_params(unsigned *value, void **args)
{
    static unsigned one = 1;
    KNP k;
    memset(&k, 0, sizeof(k));
    args[0] = &pinned_dev, args[1] = value, args[2] = &one;
    k.func = fill;
    k.gridDimX = k.gridDimY = k.gridDimZ = 1;
    k.blockDimX = 32, k.blockDimY = k.blockDimZ = 1;
    k.kernelParams = args;
    return k;
}

/* What the host functions saw: pinned[0] at their call, by call. */
struct seen {
    int calls;
    unsigned v[16];
};

static void host_fn(void *arg)
{
    struct seen *s = arg;
    if (s->calls < 16)
        s->v[s->calls] = pinned[0];
    s->calls++;
}

static void host_fn2(void *arg)
{
    ((struct seen *)arg)->calls += 100;
}

static void nodes(void)
{
    static struct seen a, b, c, d;
    unsigned seven = 7, nine = 9;
    void *args1[3], *args2[3];
    KNP k1 = fill_params(&seven, args1), k2 = fill_params(&nine, args2);
    CUgraph g;
    CUgraphNode n1, h, n2, x, gh;
    CUgraphExec e;
    CUstream s;
    HNP p = {host_fn, &a}, back;
    NODE_PARAMS np;
    int type;

    OK(cuStreamCreate(&s, 1));
    OK(cuGraphCreate(&g, 0));
    OK(cuGraphAddKernelNode_v2(&n1, g, NULL, 0, &k1));
    OK(cuGraphAddHostNode(&h, g, &n1, 1, &p));
    OK(cuGraphAddKernelNode_v2(&n2, g, &h, 1, &k2));
    OK(cuGraphNodeGetType(h, &type));
    EXPECT(type == NODE_TYPE_HOST);
    /* the client's own function and argument back */
    OK(cuGraphHostNodeGetParams(h, &back));
    EXPECT(back.fn == host_fn && back.data == &a);
    OK(cuGraphInstantiateWithFlags(&e, g, 0));
    EXPECT(a.calls == 0);
    for (int i = 0; i < 3; i++) {
        pinned[0] = 0;
        OK(cuGraphLaunch(e, s));
        OK(cuStreamSynchronize(s));
        EXPECT(pinned[0] == 9); /* the second kernel ran after the host node */
    }
    EXPECT(a.calls == 3);
    for (int i = 0; i < 3; i++)
        EXPECT(a.v[i] == 7); /* after the first kernel, before the second */
    /* The graph's node set: a new instantiation gets it, the existing one keeps its own. */
    p.data = &b;
    OK(cuGraphHostNodeSetParams(h, &p));
    OK(cuGraphHostNodeGetParams(h, &back));
    EXPECT(back.fn == host_fn && back.data == &b);
    OK(cuGraphLaunch(e, s));
    OK(cuStreamSynchronize(s));
    EXPECT(a.calls == 4 && b.calls == 0);
    /* The executable graph's node updated */
    p.fn = host_fn2;
    p.data = &c;
    OK(cuGraphExecHostNodeSetParams(e, h, &p));
    OK(cuGraphLaunch(e, s));
    OK(cuStreamSynchronize(s));
    EXPECT(a.calls == 4 && c.calls == 100);
    OK(cuGraphExecDestroy(e));
    /* The generic calls: a host node added, set, and set in an executable graph */
    memset(&np, 0, sizeof(np));
    np.type = NODE_TYPE_HOST;
    np.u.host.fn = host_fn;
    np.u.host.data = &d;
    OK(cuGraphAddNode(&gh, g, &n2, 1, &np));
    OK(cuGraphInstantiateWithFlags(&e, g, 0));
    OK(cuGraphLaunch(e, s));
    OK(cuStreamSynchronize(s));
    EXPECT(b.calls == 1 && d.calls == 1 && d.v[0] == 9); /* after the second kernel */
    np.u.host.data = &c;
    OK(cuGraphExecNodeSetParams(e, gh, &np));
    OK(cuGraphLaunch(e, s));
    OK(cuStreamSynchronize(s));
    EXPECT(b.calls == 2 && d.calls == 1 && c.calls == 101);
    np.u.host.fn = host_fn2;
    OK(cuGraphNodeSetParams(gh, &np));
    OK(cuGraphHostNodeGetParams(gh, &back));
    EXPECT(back.fn == host_fn2 && back.data == &c);
    /* refusals */
    p.fn = NULL;
    EXPECT_RC(cuGraphAddHostNode(&x, g, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuGraphHostNodeSetParams(h, &p), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuGraphAddHostNode(&x, g, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    p.fn = host_fn;
    EXPECT_RC(cuGraphAddHostNode(&x, g, &n1, 5000, &p), CUDA_ERROR_INVALID_VALUE); /* past 4096 */
    EXPECT_RC(cuGraphHostNodeGetParams(n1, &back), CUDA_ERROR_INVALID_VALUE); /* a kernel node */
    /* The server keeps a record per distinct (function, argument): 4096 per client at most */
    {
        static char many[5000];
        int made = 0;
        CUresult rc = 0;
        p.fn = host_fn2;
        for (int i = 0; i < 5000 && rc == 0; i++) {
            p.data = &many[i];
            rc = cuGraphHostNodeSetParams(h, &p);
            made += rc == 0;
        }
        EXPECT(rc == 2 /* OUT_OF_MEMORY */ && made > 4000 && made < 4096);
        p.data = &many[0]; /* a pair it has a record of still works */
        OK(cuGraphHostNodeSetParams(h, &p));
        p.fn = host_fn;
    }
    OK(cuGraphExecDestroy(e));
    OK(cuGraphDestroy(g));
    printf("nodes ok\n");
}

static void callback(CUstream s, CUresult rc, void *arg)
{
    (void)s, (void)rc;
    ((struct seen *)arg)->calls++;
}

static void capture(void)
{
    static struct seen a, now, cb;
    unsigned five = 5, six = 6;
    void *args1[3], *args2[3];
    CUgraph g;
    CUgraphExec e;
    CUstream s;

    OK(cuStreamCreate(&s, 1));
    /* Not capturing: the function runs once the stream's work is done. */
    OK(cuLaunchHostFunc(s, host_fn, &now));
    EXPECT(now.calls == 1);
    OK(cuStreamBeginCapture_v2(s, 0));
    OK(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, s, (fill_params(&five, args1), args1), NULL));
    OK(cuLaunchHostFunc(s, host_fn, &a));
    OK(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, s, (fill_params(&six, args2), args2), NULL));
    EXPECT_RC(cuStreamAddCallback(s, callback, &cb, 0), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    OK(cuStreamEndCapture(s, &g));
    EXPECT(a.calls == 0 && cb.calls == 0); /* not at capture */
    OK(cuGraphInstantiateWithFlags(&e, g, 0));
    for (int i = 0; i < 4; i++) {
        pinned[0] = 0;
        OK(cuGraphLaunch(e, s));
        OK(cuStreamSynchronize(s));
        EXPECT(pinned[0] == 6);
    }
    EXPECT(a.calls == 4);
    for (int i = 0; i < 4; i++)
        EXPECT(a.v[i] == 5);
    /* After the capture, a callback runs again */
    OK(cuStreamAddCallback(s, callback, &cb, 0));
    EXPECT(cb.calls == 1);
    OK(cuLaunchHostFunc(s, host_fn, &now));
    EXPECT(now.calls == 2 && a.calls == 4);
    OK(cuGraphExecDestroy(e));
    OK(cuGraphDestroy(g));
    printf("capture ok\n");
}

static int destroyed[5];

static void destructor(void *p)
{
    destroyed[(int *)p - destroyed]++;
}

static void uobj(void)
{
    CUuserObject o, o2, o3;
    CUgraph g, clone, g2;
    CUgraphNode h;
    CUgraphExec e;
    CUstream s;
    static struct seen a;
    HNP p = {host_fn, &a};

    OK(cuStreamCreate(&s, 1));
    EXPECT_RC(cuUserObjectCreate(&o, &destroyed[0], destructor, 1, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuUserObjectCreate(&o, &destroyed[0], destructor, 0, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuUserObjectCreate(&o, &destroyed[0], NULL, 1, 1), CUDA_ERROR_INVALID_VALUE);
    OK(cuUserObjectCreate(&o, &destroyed[0], destructor, 1, 1));
    EXPECT_RC(cuUserObjectRetain(o, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuGraphCreate(&g, 0));
    OK(cuGraphAddHostNode(&h, g, NULL, 0, &p));
    EXPECT_RC(cuGraphRetainUserObject(g, o, 1, 2), CUDA_ERROR_INVALID_VALUE); /* unknown flag */
    OK(cuGraphRetainUserObject(g, o, 1, 0));
    OK(cuGraphClone(&clone, g));
    OK(cuGraphInstantiateWithFlags(&e, g, 0));
    EXPECT_RC(cuGraphReleaseUserObject(g, o, 2),
              CUDA_ERROR_INVALID_VALUE); /* more than the graph holds */
    OK(cuUserObjectRelease(o, 1));       /* the caller's */
    OK(cuGraphDestroy(g));
    OK(cuGraphDestroy(clone));
    EXPECT(destroyed[0] == 0); /* the executable graph holds one */
    OK(cuGraphLaunch(e, s));
    OK(cuGraphLaunch(e, s));
    OK(cuGraphExecDestroy(e));
    EXPECT(destroyed[0] == 1 && a.calls == 2); /* after the work it launched */
    /* Moved references: the caller's become the graph's */
    OK(cuUserObjectCreate(&o2, &destroyed[1], destructor, 2, 1));
    OK(cuGraphCreate(&g2, 0));
    EXPECT_RC(cuGraphRetainUserObject(g2, o2, 3, 1),
              CUDA_ERROR_INVALID_VALUE); /* more than the caller has */
    OK(cuGraphRetainUserObject(g2, o2, 2, 1));
    OK(cuGraphReleaseUserObject(g2, o2, 1));
    EXPECT(destroyed[1] == 0);
    OK(cuGraphDestroy(g2));
    EXPECT(destroyed[1] == 1);
    /* The caller's own references */
    OK(cuUserObjectCreate(&o3, &destroyed[2], destructor, 1, 1));
    OK(cuUserObjectRetain(o3, 2));
    OK(cuUserObjectRelease(o3, 2));
    EXPECT(destroyed[2] == 0);
    OK(cuUserObjectRelease(o3, 1));
    EXPECT(destroyed[0] == 1 && destroyed[1] == 1 && destroyed[2] == 1);
    /* An update: the executable graph's references become copies of the new graph's */
    {
        CUuserObject o4, o5;
        CUgraph ga, gb;
        CUgraphNode ha, hb;
        CUgraphExec ea;
        UPD info;
        OK(cuUserObjectCreate(&o4, &destroyed[3], destructor, 1, 1));
        OK(cuUserObjectCreate(&o5, &destroyed[4], destructor, 1, 1));
        OK(cuGraphCreate(&ga, 0));
        OK(cuGraphAddHostNode(&ha, ga, NULL, 0, &p));
        OK(cuGraphRetainUserObject(ga, o4, 1, 1));
        OK(cuGraphInstantiateWithFlags(&ea, ga, 0));
        OK(cuGraphCreate(&gb, 0));
        OK(cuGraphAddHostNode(&hb, gb, NULL, 0, &p));
        OK(cuGraphRetainUserObject(gb, o5, 1, 1));
        OK(cuGraphLaunch(ea, s));
        OK(cuGraphExecUpdate_v2(ea, gb, &info));
        OK(cuGraphDestroy(ga));
        EXPECT(destroyed[3] == 1); /* the executable graph's copy went with the update */
        OK(cuGraphDestroy(gb));
        EXPECT(destroyed[4] == 0); /* it holds the new graph's now */
        OK(cuGraphExecDestroy(ea));
        EXPECT(destroyed[3] == 1 && destroyed[4] == 1);
    }
    printf("uobj ok\n");
}

static void blocked(void *arg)
{
    (void)arg;
    printf("blocked\n");
    fflush(stdout);
    for (;;)
        pause();
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";

    setup();
    if (!strcmp(mode, "nodes")) {
        nodes();
    } else if (!strcmp(mode, "capture")) {
        capture();
    } else if (!strcmp(mode, "uobj")) {
        uobj();
    } else if (!strcmp(mode, "hold")) {
        static struct seen a;
        HNP p = {host_fn, &a};
        CUgraph g;
        CUgraphNode h;
        CUstream s;
        char line[16];
        OK(cuStreamCreate(&s, 1));
        OK(cuGraphCreate(&g, 0));
        OK(cuGraphAddHostNode(&h, g, NULL, 0, &p));
        printf("%p %p %p\n", g, h, s);
        fflush(stdout);
        if (!fgets(line, sizeof(line), stdin))
            return 1;
        OK(cuGraphDestroy(g));
        printf("hold ok\n");
    } else if (!strcmp(mode, "steal") && argc > 4) {
        CUgraph g = (CUgraph)strtoull(argv[2], NULL, 16), mine;
        CUgraphNode n = (CUgraphNode)strtoull(argv[3], NULL, 16), x, own;
        CUstream theirs = (CUstream)strtoull(argv[4], NULL, 16), s;
        CUgraphExec e;
        static struct seen a;
        HNP p = {host_fn, &a}, back;
        OK(cuGraphCreate(&mine, 0));
        OK(cuGraphAddHostNode(&own, mine, NULL, 0, &p));
        EXPECT_RC(cuGraphAddHostNode(&x, g, NULL, 0, &p), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuGraphAddHostNode(&x, mine, &n, 1, &p), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuGraphHostNodeGetParams(n, &back), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuGraphHostNodeSetParams(n, &p), CUDA_ERROR_INVALID_HANDLE);
        OK(cuGraphInstantiateWithFlags(&e, mine, 0));
        EXPECT_RC(cuGraphExecHostNodeSetParams(e, n, &p), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuGraphExecHostNodeSetParams((CUgraphExec)g, own, &p), CUDA_ERROR_INVALID_HANDLE);
        /* a capture of its own open, so that the server is asked about the other's stream */
        OK(cuStreamCreate(&s, 1));
        OK(cuStreamBeginCapture_v2(s, 0));
        EXPECT_RC(cuLaunchHostFunc(theirs, host_fn, &a), CUDA_ERROR_INVALID_HANDLE);
        OK(cuLaunchHostFunc(s, host_fn, &a));
        OK(cuStreamEndCapture(s, &mine));
        EXPECT(a.calls == 0);
        printf("steal refused\n");
    } else if (!strcmp(mode, "hang")) {
        HNP p = {blocked, NULL};
        CUgraph g;
        CUgraphNode h;
        CUgraphExec e;
        CUstream s;
        OK(cuStreamCreate(&s, 1));
        OK(cuGraphCreate(&g, 0));
        OK(cuGraphAddHostNode(&h, g, NULL, 0, &p));
        OK(cuGraphInstantiateWithFlags(&e, g, 0));
        OK(cuGraphLaunch(e, s));
        cuStreamSynchronize(s); /* never returns: the test kills this process */
        return 1;
    } else {
        fprintf(stderr, "hostnodes_driver: unknown mode %s\n", mode);
        return 2;
    }
    return 0;
}
