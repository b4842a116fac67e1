// SPDX-License-Identifier: MIT
// The workloads of B2-B6 (docs/benchmark-definitions.md), one program with a role per run;
// bench/run.py runs each role natively, under NVIDIA MPS and under openmps, and reads the "name
// value" lines.
//   calls overheads            B2: empty-kernel launch (asynchronous), launch + stream
//                              synchronize, 4-byte cudaMemcpy host to device, cudaMalloc +
//                              cudaFree of 1 MiB; microseconds, median of 7 rounds after warm-ups
//   calls first SPAWN_NS       B2: prints the time from SPAWN_NS (CLOCK_REALTIME, taken by the
//                              harness right before it started this process) to the end of the
//                              first kernel
//   calls bandwidth            B3: 64 MiB copies each way, pinned (events) and pageable (host
//                              clock); GB/s, median of 10 after 2 warm-ups
//   calls hold                 B4: a context, 1 MiB, one kernel; prints "ready", then waits for
//                              its standard input to close
//   calls fill ITERS START_MS [sync]
//                              B5: from START_MS (epoch ms) 20 launches of a kernel of 4 blocks
//                              of 256 threads per SM, then a sync (sync: a sync after each);
//                              prints start and end (epoch ms)
//   calls fill-calibrate MS    B5: the ITERS that make one such kernel take MS alone
//   calls probe ITERS START_MS B5's priority figure: from START_MS, 30 times a kernel of 8
//                              blocks of 256 threads (the fill kernel's work per thread), each
//                              launched and waited for; prints the median latency (ms)
//   calls long ITERS           B6, client A: one long one-thread kernel; prints "launched"
//   calls isolation            B6, client B: the slowest of 20 cudaMalloc + cudaFree of 1 MiB
//                              and of 20 cudaMallocHost + cudaFreeHost of 1 MiB, and its first
//                              launch + sync (its module: loaded already or never seen, as the
//                              harness arranges); milliseconds
// Built once by the harness, and again for every B6 repeat with -DSALT=n: a module image no
// server has seen, for B6's first load (the server keeps every image it loaded).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#ifndef SALT
#define SALT 0
#endif

__global__ void empty() {}

__global__ void touch(int *p)
{
    *p += 1 + SALT; // SALT changes the module image, not the meaning
}

__global__ void spin(long long iterations, unsigned long long *out)
{
    unsigned long long x = 1;
    for (long long i = 0; i < iterations; i++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    *out = x;
}

// B5: every thread spins; the grid fills every SM (4 blocks of 256 threads per SM).
__global__ void fill(long long iterations, unsigned long long *out)
{
    unsigned long long x = threadIdx.x;
    for (long long i = 0; i < iterations; i++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    if (x == 42)
        *out = x; // keeps the loop; practically never true
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "calls: %s failed: %s\n", #call, cudaGetErrorString(e_));             \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static double now_us()
{
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

static long long epoch_ms()
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

template <class F> static double median_us(int rounds, int per_round, F f)
{
    std::vector<double> v;
    for (int r = 0; r < rounds; r++) {
        double t0 = now_us();
        for (int i = 0; i < per_round; i++)
            f();
        v.push_back((now_us() - t0) / per_round);
    }
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

static int overheads()
{
    int *d, h = 7;
    CHECK(cudaMalloc(&d, sizeof(int)));
    for (int i = 0; i < 2000; i++) // warm-up: context, module, both sides awake
        empty<<<1, 1>>>();
    CHECK(cudaDeviceSynchronize());
    double launch = median_us(7, 1, [] {
        for (int i = 0; i < 20000; i++)
            empty<<<1, 1>>>();
        CHECK(cudaStreamSynchronize(0));
    }) / 20000;
    double launch_sync = median_us(7, 2000, [] {
        empty<<<1, 1>>>();
        CHECK(cudaStreamSynchronize(0));
    });
    double copy4 = median_us(7, 2000, [&] { CHECK(cudaMemcpy(d, &h, 4, cudaMemcpyHostToDevice)); });
    double alloc_free = median_us(7, 100, [] {
        void *p;
        CHECK(cudaMalloc(&p, 1 << 20));
        CHECK(cudaFree(p));
    });
    printf("launch_us %.3f\nlaunch_sync_us %.3f\ncopy4_us %.3f\nalloc_free_us %.3f\n", launch,
           launch_sync, copy4, alloc_free);
    return 0;
}

static int first(long long spawn_ns)
{
    empty<<<1, 1>>>();
    CHECK(cudaDeviceSynchronize());
    long long now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
    printf("first_kernel_s %.4f\n", (now - spawn_ns) / 1e9);
    return 0;
}

static int bandwidth()
{
    const size_t n = 64u << 20;
    void *d, *pinned, *pageable = malloc(n);
    cudaEvent_t a, b;
    CHECK(cudaMalloc(&d, n));
    CHECK(cudaMallocHost(&pinned, n));
    memset(pageable, 1, n); // its pages exist before it is copied
    memset(pinned, 1, n);
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    struct {
        const char *name;
        bool pin, h2d;
    } kinds[] = {{"h2d_pinned_gbs", true, true},
                 {"d2h_pinned_gbs", true, false},
                 {"h2d_pageable_gbs", false, true},
                 {"d2h_pageable_gbs", false, false}};
    for (auto &k : kinds) {
        void *h = k.pin ? pinned : pageable;
        std::vector<double> gbs;
        for (int r = 0; r < 12; r++) {
            double t0 = now_us();
            float ms = 0;
            if (k.pin) {
                CHECK(cudaEventRecord(a));
                CHECK(k.h2d ? cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice)
                            : cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost));
                CHECK(cudaEventRecord(b));
                CHECK(cudaEventSynchronize(b));
                CHECK(cudaEventElapsedTime(&ms, a, b));
            } else {
                CHECK(k.h2d ? cudaMemcpy(d, h, n, cudaMemcpyHostToDevice)
                            : cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
                ms = (float)((now_us() - t0) / 1000);
            }
            if (r >= 2)
                gbs.push_back(n / (ms / 1000.0) / 1e9);
        }
        std::sort(gbs.begin(), gbs.end());
        printf("%s %.2f\n", k.name, gbs[gbs.size() / 2]);
    }
    return 0;
}

static int hold()
{
    int *d;
    CHECK(cudaMalloc(&d, 1 << 20));
    touch<<<1, 1>>>(d);
    CHECK(cudaDeviceSynchronize());
    printf("ready\n");
    fflush(stdout);
    char buf[64];
    while (fread(buf, 1, sizeof(buf), stdin) > 0) {
    }
    return 0;
}

static int fill_grid()
{
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    return 4 * sms;
}

static int fill_run(long long iters, long long start_ms, bool each)
{
    unsigned long long *d;
    CHECK(cudaMalloc(&d, sizeof(*d)));
    fill<<<fill_grid(), 256>>>(1, d); // warm-up
    CHECK(cudaDeviceSynchronize());
    long long now = epoch_ms();
    if (start_ms > now)
        std::this_thread::sleep_for(std::chrono::milliseconds(start_ms - now));
    long long t0 = epoch_ms();
    for (int i = 0; i < 20; i++) {
        fill<<<fill_grid(), 256>>>(iters, d);
        if (each)
            CHECK(cudaDeviceSynchronize());
    }
    CHECK(cudaDeviceSynchronize());
    printf("fill_start_ms %lld fill_end_ms %lld\n", t0, epoch_ms());
    return 0;
}

static int fill_calibrate(double ms_wanted)
{
    unsigned long long *d;
    cudaEvent_t a, b;
    float ms = 0;
    long long probe = 1 << 14;
    CHECK(cudaMalloc(&d, sizeof(*d)));
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    for (int r = 0; r < 2; r++) { // the second is warm
        CHECK(cudaEventRecord(a));
        fill<<<fill_grid(), 256>>>(probe, d);
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        CHECK(cudaEventElapsedTime(&ms, a, b));
    }
    printf("%lld\n", (long long)(ms_wanted / ms * probe));
    return 0;
}

static int probe_run(long long iters, long long start_ms)
{
    unsigned long long *d;
    std::vector<double> ms;
    CHECK(cudaMalloc(&d, sizeof(*d)));
    fill<<<8, 256>>>(1, d); // warm-up
    CHECK(cudaDeviceSynchronize());
    long long now = epoch_ms();
    if (start_ms > now)
        std::this_thread::sleep_for(std::chrono::milliseconds(start_ms - now));
    for (int i = 0; i < 30; i++) {
        double t0 = now_us();
        fill<<<8, 256>>>(iters, d);
        CHECK(cudaDeviceSynchronize());
        ms.push_back((now_us() - t0) / 1000);
    }
    std::sort(ms.begin(), ms.end());
    printf("probe_median_ms %.3f\n", ms[ms.size() / 2]);
    return 0;
}

static int long_kernel(long long iters)
{
    unsigned long long *d;
    CHECK(cudaMalloc(&d, sizeof(*d)));
    spin<<<1, 1>>>(iters, d);
    CHECK(cudaGetLastError());
    printf("launched\n");
    fflush(stdout);
    CHECK(cudaDeviceSynchronize());
    printf("a_done_ms %lld\n", epoch_ms());
    return 0;
}

static int isolation()
{
    int *d;
    double t0 = now_us(), first_launch, worst_alloc = 0, worst_host = 0;
    CHECK(cudaMalloc(&d, sizeof(int))); // the context (or the session) first
    t0 = now_us();
    touch<<<1, 1>>>(d); // the first launch of this module: its load happens here (or before)
    CHECK(cudaStreamSynchronize(0));
    first_launch = (now_us() - t0) / 1000;
    for (int i = 0; i < 20; i++) {
        void *p;
        t0 = now_us();
        CHECK(cudaMalloc(&p, 1 << 20));
        CHECK(cudaFree(p));
        worst_alloc = std::max(worst_alloc, (now_us() - t0) / 1000);
        t0 = now_us();
        CHECK(cudaMallocHost(&p, 1 << 20));
        CHECK(cudaFreeHost(p));
        worst_host = std::max(worst_host, (now_us() - t0) / 1000);
    }
    printf("first_launch_sync_ms %.3f\nalloc_free_worst_ms %.3f\nhost_alloc_free_worst_ms %.3f\n"
           "b_done_ms %lld\n",
           first_launch, worst_alloc, worst_host, epoch_ms());
    return 0;
}

int main(int argc, char **argv)
{
    const char *role = argc > 1 ? argv[1] : "";
    if (!strcmp(role, "overheads"))
        return overheads();
    if (!strcmp(role, "first") && argc > 2)
        return first(atoll(argv[2]));
    if (!strcmp(role, "bandwidth"))
        return bandwidth();
    if (!strcmp(role, "hold"))
        return hold();
    if (!strcmp(role, "fill") && argc > 3)
        return fill_run(atoll(argv[2]), atoll(argv[3]), argc > 4 && !strcmp(argv[4], "sync"));
    if (!strcmp(role, "fill-calibrate") && argc > 2)
        return fill_calibrate(atof(argv[2]));
    if (!strcmp(role, "probe") && argc > 3)
        return probe_run(atoll(argv[2]), atoll(argv[3]));
    if (!strcmp(role, "long") && argc > 2)
        return long_kernel(atoll(argv[2]));
    if (!strcmp(role, "isolation"))
        return isolation();
    fprintf(stderr, "usage: calls overheads|first SPAWN_NS|bandwidth|hold|fill ITERS START_MS|"
                    "fill-calibrate MS|probe ITERS START_MS|long ITERS|isolation\n");
    return 2;
}
