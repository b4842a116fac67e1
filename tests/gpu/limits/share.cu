// SPDX-License-Identifier: MIT
// A GPU-filling kernel's throughput, for the SM-share checks of tests/gpu/limits/run.sh (issue
// #12): a fixed grid of 16384 blocks of 128 threads, each spinning for CYCLES clock cycles,
// several times; prints the SM count the process is shown and the best throughput in blocks
// per second: "sms N blocks_per_s X". Usage: share [SECONDS [trace]] — with SECONDS, it repeats
// the kernel for that long (two clients side by side) and prints the mean throughput instead;
// with trace, also each kernel's end (seconds from the start) and throughput: "at T rate R".
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            printf("FAILED %s: %s\n", #x, cudaGetErrorString(e_));                              \
            return 1;                                                                           \
        }                                                                                       \
    } while (0)

__global__ void burn(long long cycles, int *sink)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
    if (threadIdx.x == 0 && cycles < 0)
        *sink = blockIdx.x;
}

int main(int argc, char **argv)
{
    const int blocks = 16384;
    const long long cycles = 100000;
    double seconds = argc > 1 ? atof(argv[1]) : 0;
    bool trace = argc > 2;
    int sms = 0;
    cudaEvent_t a, b;
    cudaStream_t st;

    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    burn<<<blocks, 128, 0, st>>>(cycles, NULL); // warm-up
    CK(cudaStreamSynchronize(st));
    double best = 0, total_ms = 0;
    int runs = 0;
    for (;;) {
        float ms = 0;
        CK(cudaEventRecord(a, st));
        burn<<<blocks, 128, 0, st>>>(cycles, NULL);
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&ms, a, b));
        double r = blocks / (ms * 1e-3);
        best = r > best ? r : best;
        total_ms += ms;
        runs++;
        if (trace)
            printf("at %.3f rate %.0f\n", total_ms * 1e-3, r);
        if (seconds ? total_ms >= seconds * 1e3 : runs >= 5)
            break;
    }
    printf("sms %d blocks_per_s %.0f\n", sms, seconds ? runs * blocks / (total_ms * 1e-3) : best);
    return 0;
}
