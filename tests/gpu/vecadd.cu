// SPDX-License-Identifier: MIT
// A correctness check through the common runtime calls: malloc, copies both ways, memset,
// streams, events, a grid-stride kernel, device-to-device copy, free; compared with the CPU.
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void axpy(float a, const float *x, float *y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i] + y[i];
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "vecadd: %s failed: %s\n", #call, cudaGetErrorString(e_));            \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main()
{
    const int n = 3 << 20; // 12 MiB per array: several staging pieces
    std::vector<float> x(n), y(n), out(n);
    float *dx, *dy, *dz;
    cudaStream_t s;

    for (int i = 0; i < n; i++)
        x[i] = (float)(i % 1000), y[i] = (float)(i % 7);
    CHECK(cudaMalloc(&dx, n * sizeof(float)));
    CHECK(cudaMalloc(&dy, n * sizeof(float)));
    CHECK(cudaMalloc(&dz, n * sizeof(float)));
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpyAsync(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice, s));
    CHECK(cudaMemsetAsync(dz, 0, n * sizeof(float), s));
    axpy<<<512, 256, 0, s>>>(2.0f, dx, dy, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(dz, dy, n * sizeof(float), cudaMemcpyDeviceToDevice, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(out.data(), dz, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        float want = 2.0f * x[i] + y[i];
        if (out[i] != want) {
            fprintf(stderr, "vecadd: wrong at %d: %f, want %f\n", i, out[i], want);
            return 1;
        }
    }
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dy));
    CHECK(cudaFree(dz));
    CHECK(cudaStreamDestroy(s));
    printf("vecadd ok %d\n", n);
    return 0;
}
