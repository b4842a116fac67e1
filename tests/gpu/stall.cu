// SPDX-License-Identifier: MIT
// No client stalls another (B6 of docs/benchmark-definitions.md). Two roles of one program:
//   stall long ITERATIONS   client A: one long one-thread kernel; prints "launched", then
//                           "a_done_ms <epoch ms>" when it finished
//   stall calls             client B: after a warm-up, 20 rounds of cudaMalloc/cudaFree of 1 MiB,
//                           cudaMallocHost/cudaFreeHost of 1 MiB and a launch + sync of a tiny
//                           kernel of the already loaded module; prints the slowest of each in ms
//                           and "b_done_ms <epoch ms>"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void spin(long long iterations, unsigned long long *out)
{
    unsigned long long x = 1;
    for (long long i = 0; i < iterations; i++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    *out = x;
}

__global__ void tiny(int *p)
{
    *p += 1;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "stall: %s failed: %s\n", #call, cudaGetErrorString(e_));             \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static double now_ms()
{
    return std::chrono::duration<double, std::milli>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "long")) {
        unsigned long long *d;
        CHECK(cudaMalloc(&d, sizeof(*d)));
        spin<<<1, 1>>>(atoll(argv[2]), d);
        CHECK(cudaGetLastError());
        printf("launched\n");
        fflush(stdout);
        CHECK(cudaDeviceSynchronize());
        printf("a_done_ms %.1f\n", now_ms());
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "calls")) {
        double worst[3] = {0, 0, 0};
        int *d;
        void *p, *h;
        CHECK(cudaMalloc(&d, sizeof(int))); // warm-up: the runtime, the module, the first launch
        tiny<<<1, 1>>>(d);
        CHECK(cudaDeviceSynchronize());
        for (int round = 0; round < 20; round++) {
            double t0 = now_ms();
            CHECK(cudaMalloc(&p, 1 << 20));
            CHECK(cudaFree(p));
            double t1 = now_ms();
            CHECK(cudaMallocHost(&h, 1 << 20));
            CHECK(cudaFreeHost(h));
            double t2 = now_ms();
            tiny<<<1, 1>>>(d);
            CHECK(cudaDeviceSynchronize());
            double t3 = now_ms();
            double dt[3] = {(t1 - t0) / 2, (t2 - t1) / 2, t3 - t2};
            for (int i = 0; i < 3; i++)
                if (dt[i] > worst[i])
                    worst[i] = dt[i];
        }
        printf("worst_ms malloc_free %.3f host_alloc_free %.3f launch_sync %.3f\n", worst[0],
               worst[1], worst[2]);
        printf("b_done_ms %.1f\n", now_ms());
        return 0;
    }
    fprintf(stderr, "usage: stall long ITERATIONS | stall calls\n");
    return 2;
}
