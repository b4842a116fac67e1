// SPDX-License-Identifier: MIT
// What one launch costs the launching thread when T threads of one process launch at once
// (B7 and B8 in docs/benchmarks.md: the server's cuLaunchKernel took 3.7 us with one client and
// 8.5 us with eight). Each thread launches an empty kernel on a stream of its own, in batches
// of 256 with a synchronize between them (not timed: the queue never fills), and times only its
// launch calls. Three ways to place the threads:
//   one     every stream in the device's primary context (what the server does today)
//   green   each thread's stream in a green context of its own, over all of the SMs
//   ctx     each thread in a context of its own (cuCtxCreate): contexts time-slice, so only
//           the launch cost is meaningful here
//   graphK  as `one`, but each thread launches a graph of K empty kernels in a line (K = 16,
//           110: ResNet-18's launches per batch), built once: what replaying a client's
//           sequence as a graph would cost the server (issue #23's first experiment)
// Prints "MODE T us_per_launch cpu_us_per_launch launches_per_s kernels_per_s" (the wall time
// of a launch call, the thread's CPU time in it: where they differ, the thread slept in the
// driver; a graph is one launch of K kernels).
// Usage: launchers [launches per thread]
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver_check.h"

static CUdevice dev;
static CUcontext primary;
static CUkernel kernel;
static int per_thread = 20000;
static pthread_barrier_t go;

struct worker {
    const char *mode;
    CUcontext ctx;
    CUstream stream;
    CUgraphExec graph; /* graphK modes: launched instead of the kernel */
    int launches;
    double launch_ns, cpu_ns;
};

/* A line of k empty kernels, instantiated (in the calling thread's current context). */
static CUgraphExec kernel_line(int k)
{
    CUgraph g;
    CUgraphNode prev = NULL, node;
    CUfunction f;
    CUDA_KERNEL_NODE_PARAMS p;
    CUgraphExec exec;

    CHECK(cuKernelGetFunction(&f, kernel));
    memset(&p, 0, sizeof(p));
    p.func = f;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 32;
    p.blockDimY = p.blockDimZ = 1;
    CHECK(cuGraphCreate(&g, 0));
    for (int i = 0; i < k; i++) {
        CHECK(cuGraphAddKernelNode(&node, g, prev ? &prev : NULL, prev ? 1 : 0, &p));
        prev = node;
    }
    CHECK(cuGraphInstantiate(&exec, g, 0));
    CHECK(cuGraphDestroy(g));
    return exec;
}

static double clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double now_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

static void *run(void *arg)
{
    struct worker *w = (struct worker *)arg;

    CHECK(cuCtxSetCurrent(w->ctx));
    pthread_barrier_wait(&go);
    int batch = w->graph ? 16 : 256; /* launches between synchronizes: the queue never fills */
    for (int done = 0; done < w->launches; done += batch) {
        double t0 = now_ns(), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        for (int i = 0; i < batch; i++)
            if (w->graph)
                CHECK(cuGraphLaunch(w->graph, w->stream));
            else
                CHECK(cuLaunchKernel((CUfunction)kernel, 1, 1, 1, 32, 1, 1, 0, w->stream, NULL,
                                     NULL));
        w->launch_ns += now_ns() - t0;
        w->cpu_ns += clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
        CHECK(cuStreamSynchronize(w->stream));
    }
    return NULL;
}

static void measure(const char *mode, int nthreads)
{
    struct worker w[64];
    pthread_t t[64];
    CUgreenCtx green[64];
    double sum = 0, cpu = 0, t0, t1;

    int k = !strncmp(mode, "graph", 5) ? atoi(mode + 5) : 1; /* kernels per launch */

    memset(w, 0, sizeof(w));
    for (int i = 0; i < nthreads; i++) {
        w[i].mode = mode;
        int batch = k > 1 ? 16 : 256; /* as run() batches them */
        w[i].launches =
            per_thread / k / batch * batch > batch ? per_thread / k / batch * batch : batch;
        if (!strcmp(mode, "one") || k > 1) {
            w[i].ctx = primary;
            CHECK(cuCtxSetCurrent(primary));
            CHECK(cuStreamCreate(&w[i].stream, CU_STREAM_NON_BLOCKING));
        } else if (!strcmp(mode, "green")) {
            CUdevResource res;
            CUdevResourceDesc desc;
            CHECK(cuDeviceGetDevResource(dev, &res, CU_DEV_RESOURCE_TYPE_SM));
            CHECK(cuDevResourceGenerateDesc(&desc, &res, 1));
            CHECK(cuGreenCtxCreate(&green[i], desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
            CHECK(cuCtxFromGreenCtx(&w[i].ctx, green[i]));
            CHECK(cuGreenCtxStreamCreate(&w[i].stream, green[i], CU_STREAM_NON_BLOCKING, 0));
        } else {
#if CUDA_VERSION >= 12050
            CHECK(cuCtxCreate(&w[i].ctx, NULL, 0, dev));
#else
            CHECK(cuCtxCreate(&w[i].ctx, 0, dev));
#endif
            CHECK(cuStreamCreate(&w[i].stream, CU_STREAM_NON_BLOCKING));
        }
        // one launch outside the timing: the kernel's first use in this context loads it
        CHECK(cuCtxSetCurrent(w[i].ctx));
        if (k > 1) {
            w[i].graph = kernel_line(k);
            CHECK(cuGraphUpload(w[i].graph, w[i].stream));
            CHECK(cuGraphLaunch(w[i].graph, w[i].stream));
        }
        CHECK(cuLaunchKernel((CUfunction)kernel, 1, 1, 1, 32, 1, 1, 0, w[i].stream, NULL, NULL));
        CHECK(cuStreamSynchronize(w[i].stream));
    }
    pthread_barrier_init(&go, NULL, nthreads + 1);
    for (int i = 0; i < nthreads; i++)
        pthread_create(&t[i], NULL, run, &w[i]);
    pthread_barrier_wait(&go);
    t0 = now_ns();
    for (int i = 0; i < nthreads; i++)
        pthread_join(t[i], NULL);
    t1 = now_ns();
    pthread_barrier_destroy(&go);
    double launches = 0;
    for (int i = 0; i < nthreads; i++) {
        sum += w[i].launch_ns / w[i].launches;
        cpu += w[i].cpu_ns / w[i].launches;
        launches += w[i].launches;
        if (w[i].graph)
            CHECK(cuGraphExecDestroy(w[i].graph));
        CHECK(cuStreamDestroy(w[i].stream));
        if (!strcmp(mode, "green"))
            CHECK(cuGreenCtxDestroy(green[i]));
        else if (!strcmp(mode, "ctx"))
            CHECK(cuCtxDestroy(w[i].ctx));
    }
    printf("%s %d %.2f %.2f %.0f %.0f\n", mode, nthreads, sum / nthreads / 1e3,
           cpu / nthreads / 1e3, launches / ((t1 - t0) / 1e9), launches * k / ((t1 - t0) / 1e9));
    fflush(stdout);
}

int main(int argc, char **argv)
{
    static const int counts[] = {1, 2, 4, 8, 16, 32};
    static const char *modes[] = {"one", "graph16", "graph110", "green", "ctx"};

    if (argc > 1)
        per_thread = atoi(argv[1]) > 0 ? atoi(argv[1]) : per_thread;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&primary, dev));
    CHECK(cuCtxSetCurrent(primary));
    CUlibrary lib;
    CHECK(cuLibraryLoadData(&lib, empty_kernel_ptx, NULL, NULL, 0, NULL, NULL, 0));
    CHECK(cuLibraryGetKernel(&kernel, lib, "empty"));
    for (int m = 0; m < 5; m++)
        for (int c = 0; c < 6; c++)
            measure(modes[m], counts[c]);
    return 0;
}
