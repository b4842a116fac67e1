// SPDX-License-Identifier: MIT
// What loading a module costs while another stream's kernel runs in the same context (the fact
// behind B6's never-seen module in docs/benchmarks.md). One process: image P is loaded before a
// long kernel starts; while the kernel runs, (1) a kernel of P never launched before is
// launched and synchronized, then (2) image N is loaded, (3) a kernel of N is launched and
// synchronized. Each step prints its time and whether the long kernel was still running after
// it (1: yes). Run with CUDA_MODULE_LOADING=LAZY (the default) or EAGER.
//   loads P.fatbin N.fatbin KERNEL_MS      (bench/loads.sh builds the images and runs it)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda.h>
#include <thread>
#include <vector>

__global__ void spin(long long iterations, unsigned long long *out)
{
    unsigned long long x = 1;
    for (long long i = 0; i < iterations; i++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    *out = x;
}

#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            fprintf(stderr, "loads: %s failed: %d\n", #call, (int)r_);                             \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static double now_ms()
{
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

static std::vector<char> slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    std::vector<char> v;
    if (!f) {
        perror(path);
        exit(1);
    }
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        v.insert(v.end(), buf, buf + n);
    fclose(f);
    return v;
}

static double launch_and_sync(CUlibrary lib, CUstream st, CUdeviceptr out)
{
    CUkernel k;
    void *args[] = {&out};
    double t = now_ms();
    CK(cuLibraryGetKernel(&k, lib, "touch"));
    CK(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, st, args, nullptr));
    CK(cuStreamSynchronize(st));
    return now_ms() - t;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: loads P.fatbin N.fatbin KERNEL_MS\n");
        return 2;
    }
    std::vector<char> p = slurp(argv[1]), n = slurp(argv[2]);
    double kernel_ms = atof(argv[3]);
    unsigned long long *d;
    CUlibrary lp, ln;
    CUstream s2;
    cudaStream_t s1;

    cudaFree(0); // the primary context, current
    cudaMalloc(&d, 64);
    cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
    CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    // calibrate: one short spin, then the iterations for kernel_ms
    long long probe = 1 << 22;
    spin<<<1, 1, 0, s1>>>(probe, d);
    cudaStreamSynchronize(s1);
    double t = now_ms();
    spin<<<1, 1, 0, s1>>>(probe, d);
    cudaStreamSynchronize(s1);
    long long iters = (long long)(probe * kernel_ms / (now_ms() - t));

    t = now_ms();
    CK(cuLibraryLoadData(&lp, p.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    printf("load P, GPU idle: %.3f ms\n", now_ms() - t);

    spin<<<1, 1, 0, s1>>>(iters, d);
    double k0 = now_ms();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    double x = launch_and_sync(lp, s2, (CUdeviceptr)(d + 1));
    printf("first launch + sync of P's kernel while the long kernel runs: %.3f ms (still "
           "running after: %d)\n",
           x, cudaStreamQuery(s1) == cudaErrorNotReady);
    t = now_ms();
    CK(cuLibraryLoadData(&ln, n.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    printf("load N while the long kernel runs: %.3f ms (still running after: %d)\n",
           now_ms() - t, cudaStreamQuery(s1) == cudaErrorNotReady);
    x = launch_and_sync(ln, s2, (CUdeviceptr)(d + 2));
    printf("first launch + sync of N's kernel: %.3f ms (still running after: %d)\n", x,
           cudaStreamQuery(s1) == cudaErrorNotReady);
    cudaStreamSynchronize(s1);
    printf("the long kernel: %.1f ms from its launch\n", now_ms() - k0);
    return 0;
}
