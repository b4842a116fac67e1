// SPDX-License-Identifier: MIT
// Events with elapsed time, host callbacks in stream order, 8 host threads each on its own
// stream (built with --default-stream per-thread too), and an invalid launch configuration
// reported at the launch, with the error the native run reports.
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

__global__ void scale(float *x, int n, float f)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] *= f;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "streams: %s failed: %s\n", #call, cudaGetErrorString(e_));           \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

__global__ void late_write(int *p, long long cycles, int value)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
    *p = value;
}

static std::vector<int> order;
static void CUDART_CB note(void *tag)
{
    order.push_back((int)(intptr_t)tag);
}

static int worker(int id, std::atomic<int> *bad)
{
    const int n = 1 << 18;
    std::vector<float> h(n, (float)id);
    float *d;
    cudaStream_t s;

    if (cudaStreamCreate(&s) != cudaSuccess || cudaMalloc(&d, n * sizeof(float)) != cudaSuccess)
        return (*bad)++, 1;
    cudaMemcpyAsync(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice, s);
    scale<<<64, 256, 0, s>>>(d, n, 3.0f);
    cudaMemcpyAsync(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost, s);
    if (cudaStreamSynchronize(s) != cudaSuccess)
        return (*bad)++, 1;
    for (int i = 0; i < n; i += 1001)
        if (h[i] != 3.0f * id)
            return (*bad)++, 1;
    cudaFree(d);
    cudaStreamDestroy(s);
    return 0;
}

int main()
{
    cudaEvent_t a, b;
    cudaStream_t s;
    float ms = -1, *d;

    // events and elapsed time
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMalloc(&d, (1 << 20) * sizeof(float)));
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    CHECK(cudaEventRecord(a, s));
    scale<<<256, 256, 0, s>>>(d, 1 << 20, 1.0f);
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaEventElapsedTime(&ms, a, b));
    if (!(ms > 0 && ms < 1000)) {
        fprintf(stderr, "streams: elapsed time %f\n", ms);
        return 1;
    }
    // host callbacks in order, between kernels
    CHECK(cudaLaunchHostFunc(s, note, (void *)1));
    scale<<<1, 1, 0, s>>>(d, 1, 2.0f);
    CHECK(cudaLaunchHostFunc(s, note, (void *)2));
    CHECK(cudaStreamSynchronize(s));
    if (order.size() != 2 || order[0] != 1 || order[1] != 2) {
        fprintf(stderr, "streams: callbacks out of order\n");
        return 1;
    }
#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM
    // the legacy default stream waits for a blocking stream: no explicit sync here
    // (with --default-stream per-thread the copy's stream does not, so neither check)
    int *flag, got = 0;
    CHECK(cudaMalloc(&flag, sizeof(int)));
    CHECK(cudaMemset(flag, 0, sizeof(int)));
    late_write<<<1, 1, 0, s>>>(flag, 100000000, 42); // ~50 ms, on the blocking stream s
    CHECK(cudaMemcpy(&got, flag, sizeof(int), cudaMemcpyDeviceToHost)); // legacy stream
    if (got != 42) {
        fprintf(stderr, "streams: the default stream did not wait for stream s (%d)\n", got);
        return 1;
    }
#endif
    // 8 threads, 8 streams
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; i++)
        threads.emplace_back(worker, i + 1, &bad);
    for (auto &t : threads)
        t.join();
    if (bad) {
        fprintf(stderr, "streams: %d worker(s) failed\n", (int)bad);
        return 1;
    }
    // an invalid configuration fails at the launch
    scale<<<1, 4096, 0, s>>>(d, 1, 1.0f);
    cudaError_t e = cudaGetLastError();
    // (CUDA 13 on an H100 answers cudaErrorInvalidValue natively; openmps must agree.)
    if (e != cudaErrorInvalidValue && e != cudaErrorInvalidConfiguration) {
        fprintf(stderr, "streams: bad configuration gave %s\n", cudaGetErrorString(e));
        return 1;
    }
    CHECK(cudaStreamSynchronize(s)); // and the stream is still usable
    printf("streams ok, bad configuration: %s\n", cudaGetErrorName(e));
    return 0;
}
