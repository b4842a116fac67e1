// SPDX-License-Identifier: MIT
// Host nodes and user objects. A hand-built graph kernel -> host node -> kernel, replayed
// several times: the host function runs in this process, after the first kernel's write and
// before the second's, once per replay; its parameters read back and replaced in the
// executable graph. A captured graph with cudaLaunchHostFunc between two kernels: the function
// does not run at capture, it runs at each replay. User objects: the destructor runs once,
// after the last reference (a graph's moved in, its clone's, an executable graph's) went.
// openmps-gpu-link: -lcuda
#define PROG "graph_host"
#include "api.h"
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

__global__ void set_value(volatile int *p, int v)
{
    *p = v;
}

struct Seen {
    volatile int *flag; // pinned, written by the kernels
    int calls;
    int values[16];
};

static void CUDART_CB record(void *arg)
{
    Seen *s = (Seen *)arg;
    if (s->calls < 16)
        s->values[s->calls] = *s->flag;
    s->calls++;
}

static void CUDART_CB record_twice(void *arg)
{
    ((Seen *)arg)->calls += 100;
}

static std::atomic<int> destroyed{0};

static void CUDART_CB destructor(void *p)
{
    destroyed.fetch_add(*(int *)p);
}

static cudaGraphNode_t add_set(cudaGraph_t g, const cudaGraphNode_t *dep, size_t ndep,
                               int *dev_flag, int *value)
{
    cudaKernelNodeParams k;
    void *args[2] = {&dev_flag, value};
    cudaGraphNode_t n;
    memset(&k, 0, sizeof(k));
    k.func = (void *)set_value;
    k.gridDim = dim3(1);
    k.blockDim = dim3(1);
    k.kernelParams = args;
    RT(cudaGraphAddKernelNode(&n, g, dep, ndep, &k));
    return n;
}

// The destructor ran, or 20 s passed (the driver runs it on its own thread, later).
static void wait_destroyed(int want)
{
    for (int i = 0; i < 2000 && destroyed.load() < want; i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

int main()
{
    int *host_flag = nullptr, *dev_flag = nullptr;
    cudaStream_t s;
    RT(cudaSetDevice(0));
    RT(cudaHostAlloc((void **)&host_flag, sizeof(int), cudaHostAllocMapped));
    RT(cudaHostGetDevicePointer((void **)&dev_flag, host_flag, 0));
    RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    // A hand-built graph: set 7 -> host node -> set 9.
    static Seen a, b;
    a.flag = b.flag = host_flag;
    int seven = 7, nine = 9;
    cudaGraph_t g;
    RT(cudaGraphCreate(&g, 0));
    cudaGraphNode_t k1 = add_set(g, nullptr, 0, dev_flag, &seven);
    cudaHostNodeParams hp = {record, &a};
    cudaGraphNode_t h;
    RT(cudaGraphAddHostNode(&h, g, &k1, 1, &hp));
    add_set(g, &h, 1, dev_flag, &nine);
    cudaHostNodeParams rback;
    RT(cudaGraphHostNodeGetParams(h, &rback));
    EXPECT(rback.fn == record && rback.userData == &a);
    cudaGraphExec_t e;
    RT(cudaGraphInstantiate(&e, g, 0));
    EXPECT_EQ(a.calls, 0);
    for (int i = 0; i < 5; i++) {
        *host_flag = 0;
        RT(cudaGraphLaunch(e, s));
        RT(cudaStreamSynchronize(s));
        EXPECT_EQ(*host_flag, 9);
    }
    EXPECT_EQ(a.calls, 5);
    for (int i = 0; i < 5; i++)
        EXPECT_EQ(a.values[i], 7);
    printf("hand-built graph: host node ran %d times between the kernels\n", a.calls);
    // The executable graph's host node replaced; the graph's own node unchanged.
    CUDA_HOST_NODE_PARAMS other = {(CUhostFn)record_twice, &b};
    CU(cuGraphExecHostNodeSetParams((CUgraphExec)e, (CUgraphNode)h, &other));
    RT(cudaGraphLaunch(e, s));
    RT(cudaGraphLaunch(e, s));
    RT(cudaStreamSynchronize(s));
    EXPECT_EQ(a.calls, 5);
    EXPECT_EQ(b.calls, 200);
    RT(cudaGraphHostNodeGetParams(h, &rback));
    EXPECT(rback.fn == record && rback.userData == &a);
    printf("executable graph's host node replaced: %d\n", b.calls);
    RT(cudaGraphExecDestroy(e));
    RT(cudaGraphDestroy(g));

    // A captured host function: set 5, host function, set 6.
    static Seen c, now;
    c.flag = now.flag = host_flag;
    int five = 5, six = 6;
    RT(cudaLaunchHostFunc(s, record, &now)); // not capturing: runs after the stream's work
    RT(cudaStreamSynchronize(s));
    EXPECT_EQ(now.calls, 1);
    RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    set_value<<<1, 1, 0, s>>>(dev_flag, five);
    RT(cudaLaunchHostFunc(s, record, &c));
    set_value<<<1, 1, 0, s>>>(dev_flag, six);
    RT(cudaStreamEndCapture(s, &g));
    EXPECT_EQ(c.calls, 0);
    RT(cudaGraphInstantiate(&e, g, 0));
    for (int i = 0; i < 4; i++) {
        *host_flag = 0;
        RT(cudaGraphLaunch(e, s));
        RT(cudaStreamSynchronize(s));
        EXPECT_EQ(*host_flag, 6);
    }
    EXPECT_EQ(c.calls, 4);
    for (int i = 0; i < 4; i++)
        EXPECT_EQ(c.values[i], 5);
    EXPECT_EQ(now.calls, 1);
    printf("captured host function: 0 calls at capture, %d at replay\n", c.calls);
    RT(cudaGraphExecDestroy(e));
    RT(cudaGraphDestroy(g));

    // User objects: the graph's reference moved in; a clone and an executable graph hold
    // their own; the destructor runs once, after the last.
    static int one = 1;
    static Seen d;
    d.flag = host_flag;
    CUuserObject o;
    CU(cuUserObjectCreate(&o, &one, (CUhostFn)destructor, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    RT(cudaGraphCreate(&g, 0));
    CUDA_HOST_NODE_PARAMS dp = {(CUhostFn)record, &d}, back;
    CUgraphNode dh;
    CU(cuGraphAddHostNode(&dh, (CUgraph)g, nullptr, 0, &dp));
    CU(cuGraphHostNodeGetParams(dh, &back));
    EXPECT(back.fn == (CUhostFn)record && back.userData == &d);
    CU(cuGraphRetainUserObject((CUgraph)g, o, 1, CU_GRAPH_USER_OBJECT_MOVE));
    cudaGraph_t clone;
    RT(cudaGraphClone(&clone, g));
    RT(cudaGraphInstantiate(&e, g, 0));
    RT(cudaGraphDestroy(g));
    RT(cudaGraphDestroy(clone));
    for (int i = 0; i < 3; i++)
        RT(cudaGraphLaunch(e, s));
    EXPECT_EQ(destroyed.load(), 0); // the executable graph still holds one
    RT(cudaGraphExecDestroy(e));
    RT(cudaStreamSynchronize(s));
    RT(cudaDeviceSynchronize());
    wait_destroyed(1);
    EXPECT_EQ(destroyed.load(), 1);
    EXPECT_EQ(d.calls, 3);
    // The caller's own references.
    CUuserObject o2;
    CU(cuUserObjectCreate(&o2, &one, (CUhostFn)destructor, 2, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    CU(cuUserObjectRetain(o2, 1));
    CU(cuUserObjectRelease(o2, 2));
    RT(cudaDeviceSynchronize());
    EXPECT_EQ(destroyed.load(), 1);
    CU(cuUserObjectRelease(o2, 1));
    wait_destroyed(2);
    std::this_thread::sleep_for(std::chrono::milliseconds(100)); // a second run would show
    EXPECT_EQ(destroyed.load(), 2);
    printf("user objects: each destructor ran once, after its last reference\n");

    RT(cudaStreamDestroy(s));
    RT(cudaFreeHost(host_flag));
    printf("graph_host ok\n");
    return 0;
}
