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
// Prints "MODE T us_per_launch cpu_us_per_launch launches_per_s" (the wall time of a launch
// call, the thread's CPU time in it: where they differ, the thread slept in the driver).
// Usage: launchers [launches per thread]
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        CUresult rc_ = (x);                                                                        \
        if (rc_ != CUDA_SUCCESS) {                                                                 \
            const char *s_ = "?";                                                                  \
            cuGetErrorName(rc_, &s_);                                                              \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, s_);                        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static const char ptx[] = ".version 7.0\n.target sm_70\n.address_size 64\n"
                          ".visible .entry empty()\n{\n ret;\n}\n";

static CUdevice dev;
static CUcontext primary;
static CUkernel kernel;
static int per_thread = 20000;
static pthread_barrier_t go;

struct worker {
    const char *mode;
    CUcontext ctx;
    CUstream stream;
    double launch_ns, cpu_ns;
};

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
    for (int done = 0; done < per_thread; done += 256) {
        double t0 = now_ns(), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        for (int i = 0; i < 256; i++)
            CHECK(cuLaunchKernel((CUfunction)kernel, 1, 1, 1, 32, 1, 1, 0, w->stream, NULL, NULL));
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

    memset(w, 0, sizeof(w));
    for (int i = 0; i < nthreads; i++) {
        w[i].mode = mode;
        if (!strcmp(mode, "one")) {
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
    for (int i = 0; i < nthreads; i++) {
        sum += w[i].launch_ns;
        cpu += w[i].cpu_ns;
        CHECK(cuStreamDestroy(w[i].stream));
        if (!strcmp(mode, "green"))
            CHECK(cuGreenCtxDestroy(green[i]));
        else if (!strcmp(mode, "ctx"))
            CHECK(cuCtxDestroy(w[i].ctx));
    }
    printf("%s %d %.2f %.2f %.0f\n", mode, nthreads, sum / nthreads / per_thread / 1e3,
           cpu / nthreads / per_thread / 1e3, (double)nthreads * per_thread / ((t1 - t0) / 1e9));
    fflush(stdout);
}

int main(int argc, char **argv)
{
    static const int counts[] = {1, 2, 4, 8, 16};
    static const char *modes[] = {"one", "green", "ctx"};

    if (argc > 1)
        per_thread = atoi(argv[1]) > 0 ? atoi(argv[1]) : per_thread;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&primary, dev));
    CHECK(cuCtxSetCurrent(primary));
    CUlibrary lib;
    CHECK(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
    CHECK(cuLibraryGetKernel(&kernel, lib, "empty"));
    for (int m = 0; m < 3; m++)
        for (int c = 0; c < 5; c++)
            measure(modes[m], counts[c]);
    return 0;
}
