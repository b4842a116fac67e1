// SPDX-License-Identifier: MIT
// Graph copy nodes of pageable host memory (issue #24): a hand-built graph copy in (1D) ->
// kernel -> copy out (1D), and a 2D copy in with pitched pageable rows, replayed with new input
// each time: the bytes move at each launch; the nodes' types and parameters read back as set;
// the copy out redirected in the executable graph; a graph's node set to new memory after an
// executable graph was made leaves that one alone. A captured graph of cudaMemcpyAsync of
// pageable memory around a kernel: nothing moves at capture, everything at each replay.
// Natively and under openmps the output must be the same.
// openmps-gpu-link: -lcuda
#define PROG "graph_pageable"
#include "api.h"
#include <cstring>
#include <vector>

__global__ void twice(int *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] *= 2;
}

static long long sum(const int *p, int n)
{
    long long s = 0;
    for (int i = 0; i < n; i++)
        s += (long long)p[i] * (i % 7 + 1);
    return s;
}

int main()
{
    const int n = 1 << 20; // 4 MiB each way
    std::vector<int> in(n), out(n, 0), out2(n, 0), in2(n);
    int *d;
    cudaStream_t s;
    RT(cudaMalloc(&d, n * sizeof(int)));
    RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    // ---- hand-built: copy in -> kernel -> copy out
    cudaGraph_t g;
    cudaGraphNode_t cin, kern, cout;
    RT(cudaGraphCreate(&g, 0));
    RT(cudaGraphAddMemcpyNode1D(&cin, g, nullptr, 0, d, in.data(), n * sizeof(int),
                                cudaMemcpyHostToDevice));
    cudaKernelNodeParams k;
    int count = n;
    void *args[2] = {&d, &count};
    memset(&k, 0, sizeof(k));
    k.func = (void *)twice;
    k.gridDim = dim3((n + 255) / 256);
    k.blockDim = dim3(256);
    k.kernelParams = args;
    RT(cudaGraphAddKernelNode(&kern, g, &cin, 1, &k));
    RT(cudaGraphAddMemcpyNode1D(&cout, g, &kern, 1, out.data(), d, n * sizeof(int),
                                cudaMemcpyDeviceToHost));
    cudaGraphNodeType t;
    RT(cudaGraphNodeGetType(cin, &t));
    printf("copy in node type %d\n", (int)t);
    RT(cudaGraphNodeGetType(cout, &t));
    printf("copy out node type %d\n", (int)t);
    cudaMemcpy3DParms p;
    RT(cudaGraphMemcpyNodeGetParams(cout, &p));
    printf("copy out params as set: %s\n",
           p.dstPtr.ptr == out.data() && p.srcPtr.ptr == d && p.extent.width == n * sizeof(int)
               ? "yes"
               : "no");
    size_t nodes = 0;
    RT(cudaGraphGetNodes(g, nullptr, &nodes));
    printf("nodes %zu\n", nodes);

    cudaGraphExec_t e;
    RT(cudaGraphInstantiate(&e, g, 0));
    for (int round = 1; round <= 3; round++) {
        for (int i = 0; i < n; i++)
            in[i] = i * round + 1;
        RT(cudaGraphLaunch(e, s));
        RT(cudaStreamSynchronize(s));
        printf("round %d: out %lld\n", round, sum(out.data(), n));
    }
    // the executable graph's copy out goes to out2; the graph's still names out
    RT(cudaGraphExecMemcpyNodeSetParams1D(e, cout, out2.data(), d, n * sizeof(int),
                                          cudaMemcpyDeviceToHost));
    RT(cudaGraphLaunch(e, s));
    RT(cudaStreamSynchronize(s));
    printf("exec set: out2 %lld\n", sum(out2.data(), n));
    RT(cudaGraphMemcpyNodeGetParams(cout, &p));
    printf("graph's copy out unchanged: %s\n", p.dstPtr.ptr == out.data() ? "yes" : "no");
    // the graph's copy in now reads in2; e keeps reading in
    for (int i = 0; i < n; i++)
        in2[i] = 5;
    RT(cudaGraphMemcpyNodeSetParams1D(cin, d, in2.data(), n * sizeof(int),
                                      cudaMemcpyHostToDevice));
    cudaGraphExec_t e2;
    RT(cudaGraphInstantiate(&e2, g, 0));
    RT(cudaGraphLaunch(e2, s));
    RT(cudaStreamSynchronize(s));
    printf("graph set, new exec: out %lld\n", sum(out.data(), n));
    RT(cudaGraphLaunch(e, s));
    RT(cudaStreamSynchronize(s));
    printf("graph set, old exec: out2 %lld\n", sum(out2.data(), n));
    RT(cudaGraphExecDestroy(e2));
    RT(cudaGraphExecDestroy(e));
    RT(cudaGraphDestroy(g));

    // ---- 2D: 64 rows of 1000 bytes, 1024 apart in pageable memory, into a pitched allocation
    std::vector<unsigned char> rows(64 * 1024, 0), back(64 * 1000, 0);
    unsigned char *pitched;
    size_t pitch;
    RT(cudaMallocPitch((void **)&pitched, &pitch, 1000, 64));
    cudaGraph_t g2;
    cudaGraphNode_t c2, c3;
    RT(cudaGraphCreate(&g2, 0));
    memset(&p, 0, sizeof(p));
    p.srcPtr = make_cudaPitchedPtr(rows.data(), 1024, 1000, 64);
    p.dstPtr = make_cudaPitchedPtr(pitched, pitch, 1000, 64);
    p.extent = make_cudaExtent(1000, 64, 1);
    p.kind = cudaMemcpyHostToDevice;
    RT(cudaGraphAddMemcpyNode(&c2, g2, nullptr, 0, &p));
    memset(&p, 0, sizeof(p));
    p.srcPtr = make_cudaPitchedPtr(pitched, pitch, 1000, 64);
    p.dstPtr = make_cudaPitchedPtr(back.data(), 1000, 1000, 64);
    p.extent = make_cudaExtent(1000, 64, 1);
    p.kind = cudaMemcpyDeviceToHost;
    RT(cudaGraphAddMemcpyNode(&c3, g2, &c2, 1, &p));
    RT(cudaGraphInstantiate(&e, g2, 0));
    for (int round = 1; round <= 2; round++) {
        for (int r = 0; r < 64; r++)
            for (int i = 0; i < 1024; i++)
                rows[r * 1024 + i] = (unsigned char)(i < 1000 ? r + i * round : 0xee);
        RT(cudaGraphLaunch(e, s));
        RT(cudaStreamSynchronize(s));
        long long t2 = 0;
        bool gap = false;
        for (int i = 0; i < 64 * 1000; i++) {
            t2 += back[i] * (i % 13 + 1);
            gap = gap || back[i] == 0xee;
        }
        printf("2D round %d: %lld%s\n", round, t2, gap ? " (row gaps copied!)" : "");
    }
    RT(cudaGraphExecDestroy(e));
    RT(cudaGraphDestroy(g2));

    // ---- captured: cudaMemcpyAsync of pageable memory around a kernel
    std::vector<int> cin_h(n, 3), cout_h(n, 0);
    cudaGraph_t cg;
    RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    RT(cudaMemcpyAsync(d, cin_h.data(), n * sizeof(int), cudaMemcpyHostToDevice, s));
    twice<<<(n + 255) / 256, 256, 0, s>>>(d, n);
    RT(cudaMemcpyAsync(cout_h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost, s));
    RT(cudaStreamEndCapture(s, &cg));
    printf("captured, before a launch: %lld\n", sum(cout_h.data(), n));
    RT(cudaGraphInstantiate(&e, cg, 0));
    for (int round = 1; round <= 2; round++) {
        for (int i = 0; i < n; i++)
            cin_h[i] = i % 100 + round;
        RT(cudaGraphLaunch(e, s));
        RT(cudaStreamSynchronize(s));
        printf("captured round %d: %lld\n", round, sum(cout_h.data(), n));
    }
    RT(cudaGraphExecDestroy(e));
    RT(cudaGraphDestroy(cg));
    RT(cudaFree(pitched));
    RT(cudaFree(d));
    RT(cudaStreamDestroy(s));
    printf("graph_pageable ok\n");
    return 0;
}
