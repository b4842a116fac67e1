// SPDX-License-Identifier: MIT
// Graphs through the driver API. A graph built by hand with every common node kind (memset,
// kernel, event record and wait, child graph, empty, memcpy, host), its structure queried,
// instantiated both ways, uploaded, launched, its kernel node updated in the executable
// graph, cloned, an executable graph updated from the clone, printed as dot; a second graph
// with memory alloc and free nodes launched three times with a different kernel parameter
// each time; and a graph made by stream capture of runtime kernels and copies, launched five
// times on new input. Every result is checked against the CPU.
// openmps-gpu-link: -lcuda
#define PROG "graphs"
#include "api.h"
#include <cmath>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

__global__ void fill_iota(float *p, float base, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = base + (float)i;
}

__global__ void axpy(float *y, const float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = fmaf(a, x[i], y[i]);
}

__global__ void add_const(float *p, float c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] += c;
}

struct HostState {
    const float *h;
    int n;
    int launches;
    double sum;
};

static void CUDA_CB host_node(void *user)
{
    HostState *st = (HostState *)user;
    double s = 0;
    for (int i = 0; i < st->n; i++)
        s += st->h[i];
    st->sum = s;
    st->launches++;
}

static CUfunction func_of(const void *kernel)
{
    cudaFunction_t f;
    RT(cudaGetFuncBySymbol(&f, kernel));
    return (CUfunction)f;
}

static CUDA_KERNEL_NODE_PARAMS kernel_params(const void *kernel, void **args, int n)
{
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.func = func_of(kernel);
    p.gridDimX = (n + 255) / 256;
    p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 256;
    p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = args;
    return p;
}

static CUDA_MEMCPY3D copy_1d(CUmemorytype dt, void *dh, CUdeviceptr dd, CUmemorytype st,
                             const void *sh, CUdeviceptr sd, size_t bytes)
{
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = st;
    c.srcHost = sh;
    c.srcDevice = sd;
    c.srcPitch = bytes;
    c.srcHeight = 1;
    c.dstMemoryType = dt;
    c.dstHost = dh;
    c.dstDevice = dd;
    c.dstPitch = bytes;
    c.dstHeight = 1;
    c.WidthInBytes = bytes;
    c.Height = 1;
    c.Depth = 1;
    return c;
}

// The hand-built graph's result for the axpy factor a: memset 1, + a * i, + 10.
static void check_hand(const char *what, const float *h, int n, float a, const HostState &st,
                       int launches)
{
    std::vector<float> ref(n);
    double sum = 0;
    for (int i = 0; i < n; i++) {
        ref[i] = fmaf(a, (float)i, 1.0f) + 10.0f;
        sum += ref[i];
    }
    EXPECT_FLOATS(what, h, ref.data(), n, 0.0f);
    EXPECT_EQ(st.launches, launches);
    if (st.sum != sum) {
        fprintf(stderr, "%s: %s: host node saw sum %.1f, expected %.1f\n", PROG, what, st.sum, sum);
        exit(1);
    }
}

int main()
{
    const int n = 4096;
    const size_t bytes = n * sizeof(float);
    CUcontext ctx;
    CUstream s;
    CUevent ev;
    CUdeviceptr x, y;
    float *h;

    RT(cudaSetDevice(0));
    RT(cudaFree(0));
    CU(cuCtxGetCurrent(&ctx));
    EXPECT(ctx != nullptr);
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CU(cuMemAlloc(&x, bytes));
    CU(cuMemAlloc(&y, bytes));
    CU(cuMemAllocHost((void **)&h, bytes));

    // ---- The hand-built graph.
    CUgraph g, child;
    CUgraphNode nset, niota, naxpy, nrec, nwait, nchild, nempty, ncopy, nhost, nadd;
    CU(cuGraphCreate(&g, 0));
    CU(cuGraphCreate(&child, 0));
    CUDA_MEMSET_NODE_PARAMS ms;
    memset(&ms, 0, sizeof ms);
    ms.dst = y;
    ms.value = 0x3f800000u; // 1.0f
    ms.elementSize = 4;
    ms.width = n;
    ms.height = 1;
    CU(cuGraphAddMemsetNode(&nset, g, nullptr, 0, &ms, ctx));
    float zero = 0.0f, a = 2.0f, ten = 10.0f;
    int nn = n;
    void *iota_args[] = {&x, &zero, &nn};
    CUDA_KERNEL_NODE_PARAMS kp = kernel_params((const void *)fill_iota, iota_args, n);
    CU(cuGraphAddKernelNode(&niota, g, nullptr, 0, &kp));
    void *axpy_args[] = {&y, &x, &a, &nn};
    CUDA_KERNEL_NODE_PARAMS kaxpy = kernel_params((const void *)axpy, axpy_args, n);
    CUgraphNode two[] = {nset, niota};
    CU(cuGraphAddKernelNode(&naxpy, g, two, 2, &kaxpy));
    CU(cuGraphAddEventRecordNode(&nrec, g, &naxpy, 1, ev));
    CU(cuGraphAddEventWaitNode(&nwait, g, &nrec, 1, ev));
    void *add_args[] = {&y, &ten, &nn};
    CUDA_KERNEL_NODE_PARAMS kadd = kernel_params((const void *)add_const, add_args, n);
    CU(cuGraphAddKernelNode(&nadd, child, nullptr, 0, &kadd));
    CU(cuGraphAddChildGraphNode(&nchild, g, &nwait, 1, child));
    CU(cuGraphAddEmptyNode(&nempty, g, &nchild, 1));
    CUDA_MEMCPY3D cp = copy_1d(CU_MEMORYTYPE_HOST, h, 0, CU_MEMORYTYPE_DEVICE, nullptr, y, bytes);
    CU(cuGraphAddMemcpyNode(&ncopy, g, &nempty, 1, &cp, ctx));
    HostState st = {h, n, 0, 0};
    CUDA_HOST_NODE_PARAMS hp = {host_node, &st};
    CU(cuGraphAddHostNode(&nhost, g, &ncopy, 1, &hp));

    // Its structure.
    size_t count = 0, roots = 0, edges = 0, deps = 0;
    CU(cuGraphGetNodes(g, nullptr, &count));
    CU(cuGraphGetRootNodes(g, nullptr, &roots));
    CU(cuGraphGetEdges(g, nullptr, nullptr, nullptr, &edges));
    CU(cuGraphNodeGetDependencies(naxpy, nullptr, nullptr, &deps));
    EXPECT_EQ(count, 9);
    EXPECT_EQ(roots, 2);
    EXPECT_EQ(edges, 8);
    EXPECT_EQ(deps, 2);
    std::vector<CUgraphNode> from(edges), to(edges), dep(deps);
    CU(cuGraphGetEdges(g, from.data(), to.data(), nullptr, &edges));
    CU(cuGraphNodeGetDependencies(naxpy, dep.data(), nullptr, &deps));
    EXPECT((dep[0] == nset && dep[1] == niota) || (dep[0] == niota && dep[1] == nset));
    int found = 0;
    for (size_t i = 0; i < edges; i++)
        found += (from[i] == ncopy && to[i] == nhost) + (from[i] == nchild && to[i] == nempty);
    EXPECT_EQ(found, 2);
    CUgraphNodeType type;
    CU(cuGraphNodeGetType(nchild, &type));
    EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_GRAPH);
    CU(cuGraphNodeGetType(nwait, &type));
    EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
    printf("hand graph: %zu nodes, %zu roots, %zu edges, axpy has %zu dependencies\n", count, roots,
           edges, deps);

    // Instantiate, upload, launch; then the kernel node changed in the executable graph.
    CUgraphExec e1;
    CU(cuGraphInstantiate(&e1, g, 0));
    CU(cuGraphUpload(e1, s));
    CU(cuGraphLaunch(e1, s));
    CU(cuStreamSynchronize(s));
    check_hand("hand graph launch 1", h, n, 2.0f, st, 1);
    printf("hand graph launch 1: correct, sum %.1f\n", st.sum);
    a = 3.0f;
    kaxpy = kernel_params((const void *)axpy, axpy_args, n);
    CU(cuGraphExecKernelNodeSetParams(e1, naxpy, &kaxpy));
    CU(cuGraphLaunch(e1, s));
    CU(cuStreamSynchronize(s));
    check_hand("hand graph after exec node update", h, n, 3.0f, st, 2);
    printf("hand graph with axpy factor 3: correct, sum %.1f\n", st.sum);

    // A clone (still with factor 2), instantiated with parameters; then factor 5 set in the
    // clone and the first executable graph updated from it.
    CUgraph gc;
    CUgraphNode naxpy_c;
    CU(cuGraphClone(&gc, g));
    CU(cuGraphNodeFindInClone(&naxpy_c, naxpy, gc));
    CUgraphExec e2;
    CUDA_GRAPH_INSTANTIATE_PARAMS ip;
    memset(&ip, 0, sizeof ip);
    ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
    ip.hUploadStream = s;
    CU(cuGraphInstantiateWithParams(&e2, gc, &ip));
    EXPECT_EQ(ip.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
    CU(cuGraphLaunch(e2, s));
    CU(cuStreamSynchronize(s));
    check_hand("cloned graph", h, n, 2.0f, st, 3);
    a = 5.0f;
    kaxpy = kernel_params((const void *)axpy, axpy_args, n);
    CU(cuGraphKernelNodeSetParams(naxpy_c, &kaxpy));
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    CU(cuGraphExecUpdate(e1, gc, &info));
    EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    CU(cuGraphLaunch(e1, s));
    CU(cuStreamSynchronize(s));
    check_hand("executable graph updated from the clone", h, n, 5.0f, st, 4);
    printf("clone launched (factor 2), executable graph updated to factor 5: correct, sum %.1f\n",
           st.sum);

    // Dot print, to a file of this process.
    char path[64];
    snprintf(path, sizeof path, "/tmp/openmps-graphs-%d.dot", (int)getpid());
    CU(cuGraphDebugDotPrint(g, path, CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE));
    FILE *f = fopen(path, "r");
    EXPECT(f != nullptr);
    std::string dot;
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0)
        dot.append(buf, got);
    fclose(f);
    unlink(path);
    EXPECT(dot.find("digraph") != std::string::npos);
    printf("dot print: a digraph written\n");

    // ---- Memory alloc and free nodes: alloc, iota from base into it, copy out, free.
    CUgraph gm;
    CUgraphNode nalloc, nfill, nout, nfree;
    CUdeviceptr out;
    CU(cuMemAlloc(&out, bytes));
    CU(cuGraphCreate(&gm, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS ap;
    memset(&ap, 0, sizeof ap);
    ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ap.poolProps.location.id = 0;
    ap.bytesize = bytes;
    CU(cuGraphAddMemAllocNode(&nalloc, gm, nullptr, 0, &ap));
    EXPECT(ap.dptr != 0);
    CUdeviceptr tmp = ap.dptr;
    float base = 7.0f;
    void *fill_args[] = {&tmp, &base, &nn};
    CUDA_KERNEL_NODE_PARAMS kfill = kernel_params((const void *)fill_iota, fill_args, n);
    CU(cuGraphAddKernelNode(&nfill, gm, &nalloc, 1, &kfill));
    CUDA_MEMCPY3D cpo =
        copy_1d(CU_MEMORYTYPE_DEVICE, nullptr, out, CU_MEMORYTYPE_DEVICE, nullptr, tmp, bytes);
    CU(cuGraphAddMemcpyNode(&nout, gm, &nfill, 1, &cpo, ctx));
    CU(cuGraphAddMemFreeNode(&nfree, gm, &nout, 1, tmp));
    CUgraphExec em;
    CU(cuGraphInstantiate(&em, gm, 0));
    std::vector<float> hm(n), ref(n);
    unsigned long long mem_sum = 0;
    for (int launch = 0; launch < 3; launch++) {
        base = 7.0f + 1000.0f * launch;
        kfill = kernel_params((const void *)fill_iota, fill_args, n);
        CU(cuGraphExecKernelNodeSetParams(em, nfill, &kfill));
        CU(cuGraphLaunch(em, s));
        CU(cuStreamSynchronize(s));
        CU(cuMemcpyDtoH(hm.data(), out, bytes));
        for (int i = 0; i < n; i++)
            ref[i] = base + (float)i;
        EXPECT_FLOATS("memory-node graph", hm.data(), ref.data(), n, 0.0f);
        mem_sum ^= api_fnv(hm.data(), bytes);
    }
    printf("memory-node graph: 3 launches with bases 7, 1007, 2007 correct, checksum %016llx\n",
           mem_sum);

    // ---- Stream capture of runtime work: in -> x, iota(100) -> y, y += 0.5 x, y -> out.
    float *hin, *hout;
    CU(cuMemAllocHost((void **)&hin, bytes));
    CU(cuMemAllocHost((void **)&hout, bytes));
    cudaStream_t rs = (cudaStream_t)s;
    CUstreamCaptureStatus cs;
    CU(cuStreamIsCapturing(s, &cs));
    EXPECT_EQ(cs, CU_STREAM_CAPTURE_STATUS_NONE);
    CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    RT(cudaMemcpyAsync((void *)x, hin, bytes, cudaMemcpyHostToDevice, rs));
    fill_iota<<<(n + 255) / 256, 256, 0, rs>>>((float *)y, 100.0f, n);
    CU(cuStreamIsCapturing(s, &cs));
    EXPECT_EQ(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    axpy<<<(n + 255) / 256, 256, 0, rs>>>((float *)y, (const float *)x, 0.5f, n);
    cuuint64_t capture_id = 0;
    CUgraph capturing = nullptr;
    const CUgraphNode *cdeps = nullptr;
    const CUgraphEdgeData *cedges = nullptr;
    size_t ncdeps = 0;
    CU(cuStreamGetCaptureInfo(s, &cs, &capture_id, &capturing, &cdeps, &cedges, &ncdeps));
    EXPECT_EQ(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    EXPECT(capture_id != 0 && capturing != nullptr);
    EXPECT_EQ(ncdeps, 1);
    CUgraphNodeType last;
    CU(cuGraphNodeGetType(cdeps[0], &last));
    EXPECT_EQ(last, CU_GRAPH_NODE_TYPE_KERNEL);
    RT(cudaMemcpyAsync(hout, (void *)y, bytes, cudaMemcpyDeviceToHost, rs));
    CUgraph captured;
    CU(cuStreamEndCapture(s, &captured));
    EXPECT(captured == capturing);
    CU(cuStreamIsCapturing(s, &cs));
    EXPECT_EQ(cs, CU_STREAM_CAPTURE_STATUS_NONE);
    CU(cuGraphGetNodes(captured, nullptr, &count));
    CU(cuGraphGetEdges(captured, nullptr, nullptr, nullptr, &edges));
    EXPECT_EQ(count, 4);
    printf("capture: %zu nodes, %zu edges, the last node before the copy back a kernel\n", count,
           edges);
    CUgraphExec ec;
    CU(cuGraphInstantiate(&ec, captured, 0));
    unsigned long long cap_sum = 0;
    for (int launch = 0; launch < 5; launch++) {
        for (int i = 0; i < n; i++)
            hin[i] = (float)((i * 13 + launch * 101) % 977) - 300.0f;
        CU(cuGraphLaunch(ec, s));
        CU(cuStreamSynchronize(s));
        for (int i = 0; i < n; i++)
            ref[i] = fmaf(0.5f, hin[i], 100.0f + (float)i);
        EXPECT_FLOATS("captured graph", hout, ref.data(), n, 0.0f);
        cap_sum ^= api_fnv(hout, bytes);
    }
    printf("captured graph: 5 launches on new input correct, checksum %016llx\n", cap_sum);

    CU(cuGraphExecDestroy(ec));
    CU(cuGraphDestroy(captured));
    CU(cuGraphExecDestroy(em));
    CU(cuGraphDestroy(gm));
    CU(cuGraphExecDestroy(e2));
    CU(cuGraphExecDestroy(e1));
    CU(cuGraphDestroy(gc));
    CU(cuGraphDestroy(g));
    CU(cuGraphDestroy(child));
    CU(cuMemFreeHost(hin));
    CU(cuMemFreeHost(hout));
    CU(cuMemFreeHost(h));
    CU(cuMemFree(out));
    CU(cuMemFree(x));
    CU(cuMemFree(y));
    CU(cuEventDestroy(ev));
    CU(cuStreamDestroy(s));
    printf("graphs done\n");
    return 0;
}
