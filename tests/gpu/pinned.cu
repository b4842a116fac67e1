// SPDX-License-Identifier: MIT
// Pinned host memory: asynchronous copies from and into it, a kernel reading and writing it
// through its (unified) host pointer, memory registered with cudaHostRegister, and the copy
// bandwidth of 64 MiB both ways (B3).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void twice(const int *in, int *out, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = 2 * in[i];
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "pinned: %s failed: %s\n", #call, cudaGetErrorString(e_));            \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static double gbps(size_t bytes, double ms)
{
    return bytes / ms / 1e6;
}

int main()
{
    const size_t big = 64 << 20;
    const int n = 1 << 20;
    int *h_in, *h_out, *d;
    char *hb, *db;
    cudaStream_t s;
    cudaEvent_t a, b;
    float ms = 0;

    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMallocHost(&h_in, n * sizeof(int)));
    CHECK(cudaHostAlloc(&h_out, n * sizeof(int), cudaHostAllocMapped));
    CHECK(cudaMalloc(&d, n * sizeof(int)));
    for (int i = 0; i < n; i++)
        h_in[i] = i, h_out[i] = -1;
    // device memory through asynchronous copies
    CHECK(cudaMemcpyAsync(d, h_in, n * sizeof(int), cudaMemcpyHostToDevice, s));
    twice<<<256, 256, 0, s>>>(d, d, n);
    CHECK(cudaMemcpyAsync(h_out, d, n * sizeof(int), cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < n; i += 777)
        if (h_out[i] != 2 * i) {
            fprintf(stderr, "pinned: copy path wrong at %d: %d\n", i, h_out[i]);
            return 1;
        }
    // zero-copy: the kernel reads and writes host memory through its pointer
    memset(h_out, 0, n * sizeof(int));
    twice<<<256, 256, 0, s>>>(h_in, h_out, n);
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < n; i += 777)
        if (h_out[i] != 2 * i) {
            fprintf(stderr, "pinned: zero-copy wrong at %d: %d\n", i, h_out[i]);
            return 1;
        }
    // memory the program allocated itself, registered: copies and a kernel through it
    int *mine = (int *)malloc(n * sizeof(int) + 100), *mine_dev = nullptr;
    for (int i = 0; i < n; i++)
        mine[i] = 3 * i;
    CHECK(cudaHostRegister(mine, n * sizeof(int), cudaHostRegisterMapped));
    CHECK(cudaHostGetDevicePointer((void **)&mine_dev, mine, 0));
    twice<<<256, 256, 0, s>>>(mine_dev, d, n);
    CHECK(cudaMemcpyAsync(mine, d, n * sizeof(int), cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < n; i += 777)
        if (mine[i] != 6 * i) {
            fprintf(stderr, "pinned: registered memory wrong at %d: %d\n", i, mine[i]);
            return 1;
        }
    CHECK(cudaHostUnregister(mine));
    free(mine);
    // bandwidth of 64 MiB each way (after a warm-up copy)
    CHECK(cudaMallocHost(&hb, big));
    CHECK(cudaMalloc(&db, big));
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    CHECK(cudaMemcpyAsync(db, hb, big, cudaMemcpyHostToDevice, s));
    CHECK(cudaEventRecord(a, s));
    CHECK(cudaMemcpyAsync(db, hb, big, cudaMemcpyHostToDevice, s));
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaEventElapsedTime(&ms, a, b));
    double h2d = gbps(big, ms);
    CHECK(cudaEventRecord(a, s));
    CHECK(cudaMemcpyAsync(hb, db, big, cudaMemcpyDeviceToHost, s));
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaEventElapsedTime(&ms, a, b));
    printf("pinned ok h2d_GBps %.1f d2h_GBps %.1f\n", h2d, gbps(big, ms));
    CHECK(cudaFreeHost(h_in));
    CHECK(cudaFreeHost(h_out));
    CHECK(cudaFreeHost(hb));
    return 0;
}
