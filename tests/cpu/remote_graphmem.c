/* SPDX-License-Identifier: MIT */
/* Graph memory and conditional nodes through the shim and the server, on the driver test double
 * (fake_graphmem.c). Modes:
 *   remote_graphmem build         allocation/free nodes, their ranges while graphs and executable
 *                                 graphs hold them, a captured cuMemAllocAsync/cuMemFreeAsync,
 *                                 conditional handles and bodies; refusals
 *   remote_graphmem hold          prints a graph, an allocation's address, a conditional handle
 *                                 and a body graph, then waits for a line on stdin
 *   remote_graphmem steal G D H B uses another client's graph, allocation, handle and body
 * Exit status 0 when every check passed; the first failed check is printed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

typedef struct {
    int allocType, handleTypes;
    int locType, locId;
    void *win32;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
} PROPS;
typedef struct {
    int locType, locId, flags;
} DESC;
typedef struct {
    PROPS props;
    const DESC *descs;
    size_t ndescs, bytes;
    CUdeviceptr dptr;
} ALLOC;
typedef struct {
    CUdeviceptr dst;
    size_t pitch;
    unsigned value, elementSize;
    size_t width, height;
} MSP;
typedef struct {
    int type, reserved0[3];
    union {
        long long reserved1[29];
        struct {
            unsigned long long handle;
            int type;
            unsigned size;
            CUgraph *bodies;
            CUcontext ctx;
        } cond;
        ALLOC alloc;
        struct {
            CUdeviceptr dptr;
        } free;
    } u;
    long long reserved2;
} NODE_PARAMS;
_Static_assert(sizeof(NODE_PARAMS) == 256 && sizeof(ALLOC) == 120, "layouts");

CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, CUstream);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamSynchronize(CUstream);
CUresult cuStreamBeginCapture_v2(CUstream, int);
CUresult cuStreamEndCapture(CUstream, CUgraph *);
CUresult cuGraphCreate(CUgraph *, unsigned);
CUresult cuGraphDestroy(CUgraph);
CUresult cuGraphAddMemAllocNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, ALLOC *);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuGraphMemAllocNodeGetParams(CUgraphNode, ALLOC *);
CUresult cuGraphAddMemFreeNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUdeviceptr);
CUresult cuGraphMemFreeNodeGetParams(CUgraphNode, CUdeviceptr *);
CUresult cuGraphAddMemsetNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const MSP *,
                              CUcontext);
CUresult cuGraphAddEmptyNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t);
CUresult cuGraphConditionalHandleCreate(unsigned long long *, CUgraph, CUcontext, unsigned,
                                        unsigned);
CUresult cuGraphAddNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, NODE_PARAMS *);
CUresult cuGraphDestroyNode(CUgraphNode);
CUresult cuGraphInstantiateWithFlags(CUgraphExec *, CUgraph, unsigned long long);
CUresult cuGraphExecDestroy(CUgraphExec);
CUresult cuGraphLaunch(CUgraphExec, CUstream);
CUresult cuDeviceGraphMemTrim(int);
CUresult cuDeviceGetGraphMemAttribute(int, int, void *);
CUresult cuDeviceSetGraphMemAttribute(int, int, void *);

static CUcontext ctx;

static void setup(void)
{
    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
}

static ALLOC alloc_params(size_t bytes, const DESC *d, size_t nd)
{
    ALLOC a;
    memset(&a, 0, sizeof(a));
    a.props.allocType = 1; /* pinned */
    a.props.locType = 1;   /* device 0 */
    a.descs = d;
    a.ndescs = nd;
    a.bytes = bytes;
    return a;
}

/* A memset node on [p, p + n) in a graph of its own: whether the server takes the range. */
static CUresult touch(CUdeviceptr p, size_t n)
{
    CUgraph g;
    CUgraphNode m;
    MSP s = {p, 0, 5, 1, n, 1};
    CUresult rc;

    OK(cuGraphCreate(&g, 0));
    rc = cuGraphAddMemsetNode(&m, g, NULL, 0, &s, ctx);
    OK(cuGraphDestroy(g));
    return rc;
}

static NODE_PARAMS cond_params(unsigned long long h, int type, unsigned size)
{
    NODE_PARAMS p;
    memset(&p, 0, sizeof(p));
    p.type = 13;
    p.u.cond.handle = h;
    p.u.cond.type = type;
    p.u.cond.size = size;
    p.u.cond.ctx = ctx;
    return p;
}

static void build(void)
{
    DESC d = {1, 0, 3};
    ALLOC a = alloc_params(4096, &d, 1), got;
    CUgraph g, cg, body;
    CUgraphNode an, fn, n2, cn;
    CUgraphExec e;
    CUstream s;
    CUdeviceptr plain, p, cap;
    unsigned long long h, h2, v = 0;
    NODE_PARAMS np;

    OK(cuMemAlloc_v2(&plain, 256));
    OK(cuGraphCreate(&g, 0));
    OK(cuGraphAddMemAllocNode(&an, g, NULL, 0, &a));
    EXPECT(a.dptr != 0);
    p = a.dptr;
    OK(cuGraphMemAllocNodeGetParams(an, &got));
    EXPECT(got.bytes == 4096 && got.dptr == p && got.ndescs == 1 && got.descs &&
           got.descs[0].flags == 3);
    OK(touch(p, 4096));                                 /* the client's range now */
    EXPECT(touch(p, 4097) == CUDA_ERROR_INVALID_VALUE); /* and no further */
    ALLOC bad = alloc_params(64, NULL, 0);
    bad.props.locId = 99; /* no such device */
    EXPECT_RC(cuGraphAddMemAllocNode(&n2, g, NULL, 0, &bad), CUDA_ERROR_INVALID_VALUE);
    bad = alloc_params(64, NULL, 0);
    bad.props.handleTypes = 1; /* a shareable handle */
    EXPECT_RC(cuGraphAddMemAllocNode(&n2, g, NULL, 0, &bad), CUDA_ERROR_INVALID_VALUE);
    DESC many[9];
    for (int i = 0; i < 9; i++)
        many[i] = d;
    bad = alloc_params(64, many, 9); /* more descriptors than devices */
    EXPECT_RC(cuGraphAddMemAllocNode(&n2, g, NULL, 0, &bad), CUDA_ERROR_INVALID_VALUE);
    DESC far = {1, 42, 3};
    bad = alloc_params(64, &far, 1);
    EXPECT_RC(cuGraphAddMemAllocNode(&n2, g, NULL, 0, &bad), CUDA_ERROR_INVALID_VALUE);
    /* free nodes: a graph allocation of the client's only */
    EXPECT_RC(cuGraphAddMemFreeNode(&fn, g, &an, 1, plain), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuGraphAddMemFreeNode(&fn, g, &an, 1, p + 8), CUDA_ERROR_INVALID_VALUE);
    OK(cuGraphAddMemFreeNode(&fn, g, &an, 1, p));
    OK(cuGraphMemFreeNodeGetParams(fn, &cap));
    EXPECT(cap == p);
    /* the generic entry: the same paths */
    memset(&np, 0, sizeof(np));
    np.type = 10;
    np.u.alloc = alloc_params(512, NULL, 0);
    OK(cuGraphAddNode(&n2, g, NULL, 0, &np));
    EXPECT(np.u.alloc.dptr != 0);
    OK(touch(np.u.alloc.dptr, 512));
    memset(&np.u, 0, sizeof(np.u));
    np.type = 11;
    np.u.free.dptr = plain;
    EXPECT_RC(cuGraphAddNode(&n2, g, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE);
    /* an executable graph holds the allocation after its graph goes */
    OK(cuGraphInstantiateWithFlags(&e, g, 0));
    OK(cuGraphDestroy(g));
    OK(touch(p, 4096));
    OK(cuGraphExecDestroy(e));
    EXPECT(touch(p, 4096) == CUDA_ERROR_INVALID_VALUE);
    /* a graph without an executable graph: its range goes with it */
    OK(cuGraphCreate(&g, 0));
    a = alloc_params(128, NULL, 0);
    OK(cuGraphAddMemAllocNode(&an, g, NULL, 0, &a));
    OK(touch(a.dptr, 128));
    OK(cuGraphDestroyNode(an)); /* with its node */
    EXPECT(touch(a.dptr, 128) == CUDA_ERROR_INVALID_VALUE);
    OK(cuGraphDestroy(g));
    /* stream capture: cuMemAllocAsync makes a graph allocation of the capture's graph */
    OK(cuStreamCreate(&s, 1));
    OK(cuStreamBeginCapture_v2(s, 2));
    OK(cuMemAllocAsync(&cap, 256, s));
    OK(touch(cap, 256));
    EXPECT_RC(cuMemFreeAsync(plain, s), CUDA_ERROR_INVALID_VALUE); /* not a graph allocation */
    OK(cuMemFreeAsync(cap, s));
    OK(touch(cap, 256)); /* its graph still holds it */
    OK(cuStreamEndCapture(s, &cg));
    OK(touch(cap, 256));
    OK(cuGraphDestroy(cg));
    EXPECT(touch(cap, 256) == CUDA_ERROR_INVALID_VALUE);
    /* conditional nodes */
    OK(cuGraphCreate(&g, 0));
    OK(cuGraphCreate(&cg, 0));
    OK(cuGraphConditionalHandleCreate(&h, g, ctx, 3, 1));
    OK(cuGraphConditionalHandleCreate(&h2, cg, ctx, 0, 0));
    EXPECT_RC(cuGraphConditionalHandleCreate(&h2, cg, ctx, 0, 2),
              CUDA_ERROR_INVALID_VALUE); /* flags */
    np = cond_params(h2, 1, 1);          /* another graph's handle */
    EXPECT_RC(cuGraphAddNode(&cn, g, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE);
    np = cond_params(h, 0, 3); /* if: one or two bodies */
    EXPECT_RC(cuGraphAddNode(&cn, g, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE);
    np = cond_params(h, 1, 2); /* while: one */
    EXPECT_RC(cuGraphAddNode(&cn, g, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE);
    np = cond_params(h, 2, 65); /* switch: the server's maximum */
    EXPECT_RC(cuGraphAddNode(&cn, g, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE);
    np = cond_params(h, 3, 1); /* no such type */
    EXPECT_RC(cuGraphAddNode(&cn, g, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE);
    np = cond_params(h, 1, 1);
    OK(cuGraphAddNode(&cn, g, NULL, 0, &np));
    EXPECT(np.u.cond.bodies && np.u.cond.bodies[0]);
    body = np.u.cond.bodies[0];
    OK(cuGraphAddEmptyNode(&n2, body, NULL, 0));                /* the client's graph */
    OK(cuGraphConditionalHandleCreate(&h2, body, ctx, 0, 0));   /* nested */
    EXPECT_RC(cuGraphDestroy(body), CUDA_ERROR_INVALID_HANDLE); /* the node's */
    np = cond_params(h, 2, 4);
    OK(cuGraphAddNode(&n2, g, &cn, 1, &np));
    EXPECT(np.u.cond.bodies[3] != NULL);
    OK(cuGraphDestroyNode(cn));
    EXPECT_RC(cuGraphAddEmptyNode(&n2, body, NULL, 0),
              CUDA_ERROR_INVALID_HANDLE); /* gone with its node */
    OK(cuGraphDestroy(g));
    np = cond_params(h, 1, 1); /* the handle went with its graph */
    EXPECT_RC(cuGraphAddNode(&cn, cg, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE);
    OK(cuGraphDestroy(cg));
    /* conditional bodies nest 15 deep at most (MAX_NESTING, what the server follows when a
     * graph goes): the 15th body's own conditional node is refused */
    {
        CUgraph top, in;
        int depth = 0;
        OK(cuGraphCreate(&top, 0));
        in = top;
        for (;;) {
            OK(cuGraphConditionalHandleCreate(&h2, in, ctx, 0, 0));
            np = cond_params(h2, 1, 1);
            CUresult r = cuGraphAddNode(&cn, in, NULL, 0, &np);
            if (r != 0) {
                EXPECT(r == CUDA_ERROR_NOT_SUPPORTED && depth == 15);
                break;
            }
            EXPECT(depth < 15);
            in = np.u.cond.bodies[0];
            depth++;
        }
        OK(cuGraphDestroy(top));
        EXPECT_RC(cuGraphAddEmptyNode(&n2, in, NULL, 0),
                  CUDA_ERROR_INVALID_HANDLE); /* the deepest went */
    }
    /* graph memory attributes and trim */
    OK(cuDeviceGraphMemTrim(0));
    OK(cuDeviceGetGraphMemAttribute(0, 0, &v));
    OK(cuDeviceSetGraphMemAttribute(0, 1, &(unsigned long long){0}));
    EXPECT_RC(cuDeviceSetGraphMemAttribute(0, 0, &(unsigned long long){0}),
              CUDA_ERROR_INVALID_VALUE);
    /* a graph left with an allocation and an executable graph: the session's end frees it */
    OK(cuGraphCreate(&g, 0));
    a = alloc_params(64, NULL, 0);
    OK(cuGraphAddMemAllocNode(&an, g, NULL, 0, &a));
    OK(cuGraphInstantiateWithFlags(&e, g, 0));
    printf("left %llx\n", (unsigned long long)a.dptr);
    printf("build ok\n");
}

int main(int argc, char **argv)
{
    setup();
    if (argc == 2 && !strcmp(argv[1], "build")) {
        build();
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "capped")) {
        /* under a 2 MiB device-memory cap (the test's): a graph allocation counts while the
         * client holds it */
        CUgraph g;
        CUgraphNode an;
        CUdeviceptr plain;
        ALLOC big = alloc_params(1536u << 10, NULL, 0), small = alloc_params(512u << 10, NULL, 0);
        size_t fr = 0, total = 0;
        OK(cuMemAlloc_v2(&plain, 1u << 20));
        OK(cuGraphCreate(&g, 0));
        printf("graph1536k %d\n", (int)cuGraphAddMemAllocNode(&an, g, NULL, 0, &big));
        OK(cuGraphAddMemAllocNode(&an, g, NULL, 0, &small));
        OK(cuMemGetInfo_v2(&fr, &total));
        printf("held %zu %zu\n", fr, total);
        OK(cuGraphDestroy(g));
        OK(cuMemGetInfo_v2(&fr, &total));
        printf("destroyed %zu %zu\n", fr, total);
        printf("capped ok\n");
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "hold")) {
        CUgraph g;
        CUgraphNode an, cn;
        ALLOC a = alloc_params(1024, NULL, 0);
        unsigned long long h;
        char line[16];
        OK(cuGraphCreate(&g, 0));
        OK(cuGraphAddMemAllocNode(&an, g, NULL, 0, &a));
        OK(cuGraphConditionalHandleCreate(&h, g, ctx, 0, 0));
        NODE_PARAMS np = cond_params(h, 0, 1);
        OK(cuGraphAddNode(&cn, g, NULL, 0, &np));
        printf("%p %llx %llx %p\n", g, (unsigned long long)a.dptr, h, np.u.cond.bodies[0]);
        fflush(stdout);
        if (!fgets(line, sizeof(line), stdin))
            return 0;
        OK(touch(a.dptr, 1024)); /* still its own */
        printf("hold ok\n");
        return 0;
    }
    if (argc == 6 && !strcmp(argv[1], "steal")) {
        CUgraph g = (CUgraph)(uintptr_t)strtoull(argv[2], NULL, 16), mine, body;
        CUdeviceptr p = strtoull(argv[3], NULL, 16);
        unsigned long long h = strtoull(argv[4], NULL, 16), h2;
        CUgraphNode n;
        body = (CUgraph)(uintptr_t)strtoull(argv[5], NULL, 16);
        OK(cuGraphCreate(&mine, 0));
        EXPECT(touch(p, 1024) == CUDA_ERROR_INVALID_VALUE);
        EXPECT(touch(p, 1) == CUDA_ERROR_INVALID_VALUE);
        EXPECT_RC(cuGraphAddMemFreeNode(&n, mine, NULL, 0, p), CUDA_ERROR_INVALID_VALUE);
        NODE_PARAMS np = cond_params(h, 0, 1);
        EXPECT_RC(cuGraphAddNode(&n, mine, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE);
        EXPECT_RC(cuGraphAddNode(&n, g, NULL, 0, &np), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuGraphConditionalHandleCreate(&h2, g, ctx, 0, 0), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuGraphConditionalHandleCreate(&h2, body, ctx, 0, 0), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuGraphAddEmptyNode(&n, body, NULL, 0), CUDA_ERROR_INVALID_HANDLE);
        ALLOC a = alloc_params(64, NULL, 0);
        EXPECT_RC(cuGraphAddMemAllocNode(&n, g, NULL, 0, &a), CUDA_ERROR_INVALID_HANDLE);
        printf("steal refused\n");
        return 0;
    }
    fprintf(stderr, "usage: remote_graphmem build|hold|steal G D H B\n");
    return 2;
}
