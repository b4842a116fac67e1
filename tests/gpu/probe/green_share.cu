// SPDX-License-Identifier: MIT
// Probe for issue #12's SM share (scripts/gpu.sh probe-green): what green contexts give a server
// that shares one context among clients.
//  1. the SM resource (count, granularity);
//  2. a GPU-filling kernel's throughput on a green context of 25 %, 50 %, 100 % of the SMs
//     (a CUkernel of the runtime, launched on the green context's stream while the primary
//     context is current, as the server launches), and two 50 % ones side by side;
//  3. launch cost from T threads at once (1, 4, 8, 16), each on its own stream: all streams in
//     the primary context, or each thread's stream in a green context of its own (all SMs).
// Prints one line per figure.
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x)                                                                                   \
    do {                                                                                        \
        CUresult r_ = (x);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                               \
            const char *s_ = "?";                                                               \
            cuGetErrorName(r_, &s_);                                                            \
            printf("FAILED %s: %s (line %d)\n", #x, s_, __LINE__);                              \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

__global__ void burn(long long cycles, int *sink)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
    if (threadIdx.x == 0 && cycles < 0)
        *sink = 1;
}

__global__ void nop() {}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static CUkernel kburn, knop;
static CUdevResource whole;

static CUgreenCtx green_of(unsigned sms, CUdevResource *input, CUdevResource *got)
{
    CUdevResource rest;
    unsigned n = 1;
    CUdevResourceDesc desc;
    CUgreenCtx g;

    if (sms >= input->sm.smCount) {
        *got = *input;
    } else {
        CK(cuDevSmResourceSplitByCount(got, &n, input, &rest, 0, sms));
        *input = rest;
    }
    CK(cuDevResourceGenerateDesc(&desc, got, 1));
    CK(cuGreenCtxCreate(&g, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM));
    return g;
}

// blocks of `cycles` each on every stream at once; answers blocks per second (all streams)
static double throughput(CUstream *st, int nst, int blocks, long long cycles)
{
    void *args[2];
    int *sink = NULL;
    args[0] = &cycles;
    args[1] = &sink;
    for (int i = 0; i < nst; i++)
        CK(cuLaunchKernel((CUfunction)kburn, blocks, 1, 1, 128, 1, 1, 0, st[i], args, NULL));
    for (int i = 0; i < nst; i++)
        CK(cuStreamSynchronize(st[i]));
    double t0 = now();
    for (int i = 0; i < nst; i++)
        CK(cuLaunchKernel((CUfunction)kburn, blocks, 1, 1, 128, 1, 1, 0, st[i], args, NULL));
    for (int i = 0; i < nst; i++)
        CK(cuStreamSynchronize(st[i]));
    return nst * blocks / (now() - t0);
}

struct th {
    CUcontext ctx;
    CUstream st;
    int n;
    double us;
    pthread_barrier_t *bar;
};

static void *launcher(void *p)
{
    struct th *t = (struct th *)p;
    CK(cuCtxSetCurrent(t->ctx));
    pthread_barrier_wait(t->bar);
    double t0 = now();
    for (int i = 0; i < t->n; i++) {
        CK(cuLaunchKernel((CUfunction)knop, 1, 1, 1, 32, 1, 1, 0, t->st, NULL, NULL));
        if (i % 512 == 511)
            CK(cuStreamSynchronize(t->st));
    }
    CK(cuStreamSynchronize(t->st));
    t->us = (now() - t0) * 1e6 / t->n;
    return NULL;
}

int main(void)
{
    CUdevice dev;
    CUcontext primary;
    int sms;

    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&primary, dev));
    CK(cuCtxSetCurrent(primary));
    if (cudaGetKernel((cudaKernel_t *)&kburn, (const void *)burn) != cudaSuccess ||
        cudaGetKernel((cudaKernel_t *)&knop, (const void *)nop) != cudaSuccess) {
        printf("FAILED cudaGetKernel\n");
        return 1;
    }
    CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    CK(cuDeviceGetDevResource(dev, &whole, CU_DEV_RESOURCE_TYPE_SM));
    printf("sm resource: %u SMs (device attribute %d), min partition %u, alignment %u\n",
           whole.sm.smCount, sms, whole.sm.minSmPartitionSize, whole.sm.smCoscheduledAlignment);

    // 2. throughput at a share; the kernel fills every SM many times over (8 waves of 16
    // blocks of 128 threads per SM on the whole GPU)
    int blocks = sms * 16 * 8;
    long long cycles = 200000;
    CUstream pst;
    CK(cuStreamCreate(&pst, CU_STREAM_NON_BLOCKING));
    double full = throughput(&pst, 1, blocks, cycles);
    printf("primary context: %.0f blocks/s\n", full);
    const int pct[] = {10, 25, 50, 100};
    for (int i = 0; i < 4; i++) {
        CUdevResource in = whole, got;
        unsigned want = (unsigned)(sms * pct[i] / 100);
        CUgreenCtx g = green_of(want, &in, &got);
        CUstream st;
        CK(cuGreenCtxStreamCreate(&st, g, CU_STREAM_NON_BLOCKING, 0));
        double t = throughput(&st, 1, blocks, cycles);
        printf("green %d%%: asked %u SMs, got %u: %.0f blocks/s = %.3f of the primary's "
               "(SM fraction %.3f)\n",
               pct[i], want, got.sm.smCount, t, t / full, got.sm.smCount / (double)sms);
        CK(cuStreamDestroy(st));
        CK(cuGreenCtxDestroy(g));
    }
    {   // two disjoint halves of one split side by side (a split's remainder cannot be split
        // again: the driver answered CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION), a primary
        // stream beside a half
        CUdevResource halves[2], rest;
        unsigned n = 2;
        CUdevResourceDesc desc;
        CUgreenCtx g[2];
        CUstream st[2];
        CK(cuDevSmResourceSplitByCount(halves, &n, &whole, &rest, 0, sms / 2 / 8 * 8));
        for (int i = 0; i < 2; i++) {
            CK(cuDevResourceGenerateDesc(&desc, &halves[i], 1));
            CK(cuGreenCtxCreate(&g[i], desc, 0, CU_GREEN_CTX_DEFAULT_STREAM));
            CK(cuGreenCtxStreamCreate(&st[i], g[i], CU_STREAM_NON_BLOCKING, 0));
        }
        double one = throughput(&st[0], 1, blocks, cycles);
        double two = throughput(st, 2, blocks, cycles);
        printf("two disjoint green contexts of %u and %u SMs (one split): one alone %.0f, both "
               "%.0f blocks/s (%.2f x one)\n", halves[0].sm.smCount, halves[1].sm.smCount, one,
               two, two / one);
        CUstream mix[2] = {st[0], pst};
        double m = throughput(mix, 2, blocks, cycles);
        printf("green half + primary beside: %.0f blocks/s (%.2f x the primary alone)\n", m,
               m / full);
        // a split of a split's group (what a capped client's own green contexts do)
        CUdevResource sub[2], subrest;
        unsigned ns = 2;
        CUresult r = cuDevSmResourceSplitByCount(sub, &ns, &halves[1], &subrest, 0, 16);
        const char *nm = "?";
        cuGetErrorName(r, &nm);
        printf("a group of a split split again into 16s: %s, %u groups\n", nm,
               r == CUDA_SUCCESS ? ns : 0);
        for (int i = 0; i < 2; i++) {
            CK(cuStreamDestroy(st[i]));
            CK(cuGreenCtxDestroy(g[i]));
        }
    }
    // 3. launch cost from T threads
    const int ts[] = {1, 4, 8, 16};
    for (int k = 0; k < 4; k++) {
        int T = ts[k];
        for (int mode = 0; mode < 2; mode++) {
            struct th th[16];
            pthread_t tid[16];
            CUgreenCtx g[16];
            pthread_barrier_t bar;
            pthread_barrier_init(&bar, NULL, T);
            for (int i = 0; i < T; i++) {
                th[i].n = 20000;
                th[i].bar = &bar;
                if (mode == 0) {
                    th[i].ctx = primary;
                    CK(cuStreamCreate(&th[i].st, CU_STREAM_NON_BLOCKING));
                } else {
                    CUdevResource in = whole, got;
                    g[i] = green_of(sms, &in, &got);
                    CK(cuCtxFromGreenCtx(&th[i].ctx, g[i]));
                    CK(cuGreenCtxStreamCreate(&th[i].st, g[i], CU_STREAM_NON_BLOCKING, 0));
                }
            }
            for (int i = 0; i < T; i++)
                pthread_create(&tid[i], NULL, launcher, &th[i]);
            double sum = 0, worst = 0;
            for (int i = 0; i < T; i++) {
                pthread_join(tid[i], NULL);
                sum += th[i].us;
                worst = th[i].us > worst ? th[i].us : worst;
            }
            printf("launch from %2d threads, %s: mean %.2f us per launch per thread, worst %.2f\n",
                   T, mode ? "a green context each" : "one primary context ", sum / T, worst);
            for (int i = 0; i < T; i++) {
                CK(cuStreamDestroy(th[i].st));
                if (mode)
                    CK(cuGreenCtxDestroy(g[i]));
            }
            pthread_barrier_destroy(&bar);
        }
    }
    CK(cuCtxSetCurrent(primary));
    return 0;
}
