// SPDX-License-Identifier: MIT
// B1 of BENCHMARKS.md: one thread spins for about half a second; the kernel time is printed.
// With --managed, the kernel also adds two arrays in managed memory the host filled.
#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void spin(long long cycles, unsigned long long *out)
{
    long long start = clock64();
    unsigned long long x = 1;
    while (clock64() - start < cycles)
        x = x * 6364136223846793005ull + 1442695040888963407ull; // a dependent chain
    *out = x;
}

__global__ void add(const float *a, const float *b, float *c, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        c[i] = a[i] + b[i];
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "spin: %s failed: %s\n", #call, cudaGetErrorString(e_));              \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 0.5;
    bool managed = argc > 2 && !strcmp(argv[2], "--managed");
    int clock_khz = 0, n = 1 << 20;
    unsigned long long *d_out, h_out = 0;
    cudaEvent_t a, b;
    float ms = 0;

    CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    CHECK(cudaMalloc(&d_out, sizeof(*d_out)));
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    CHECK(cudaEventRecord(a));
    spin<<<1, 1>>>((long long)(seconds * clock_khz * 1000.0), d_out);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaEventElapsedTime(&ms, a, b));
    CHECK(cudaMemcpy(&h_out, d_out, sizeof(h_out), cudaMemcpyDeviceToHost));
    if (h_out == 0) {
        fprintf(stderr, "spin: the kernel wrote nothing\n");
        return 1;
    }
    if (managed) {
        float *x, *y, *z;
        CHECK(cudaMallocManaged(&x, n * sizeof(float)));
        CHECK(cudaMallocManaged(&y, n * sizeof(float)));
        CHECK(cudaMallocManaged(&z, n * sizeof(float)));
        for (int i = 0; i < n; i++)
            x[i] = 1.0f * i, y[i] = 2.0f;
        add<<<256, 256>>>(x, y, z, n);
        CHECK(cudaDeviceSynchronize());
        for (int i = 0; i < n; i++)
            if (z[i] != x[i] + 2.0f) {
                fprintf(stderr, "spin: managed add wrong at %d: %f\n", i, z[i]);
                return 1;
            }
    }
    printf("kernel_ms %.3f\n", ms);
    return 0;
}
