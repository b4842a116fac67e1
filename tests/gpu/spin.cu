// SPDX-License-Identifier: MIT
// B1 of docs/benchmark-definitions.md: one thread runs a fixed chain of dependent
// multiply-adds (a fixed amount of work, so time-slicing stretches it); the kernel time is printed.
//   spin ITERATIONS [START_AT_EPOCH_MS [--managed|--chain]]  runs the chain, launching no
//        earlier than START_AT (START_AT "stdin": print "ready" once the context exists, then
//        read START_AT from standard input); with --managed the same thread first adds two arrays of managed
//        memory that the host filled, and the host checks the sums afterwards (the tutorial's
//        variant); with --chain the work is split in 4 kernels, each followed by a dependent
//        tiny kernel, on the default stream (B1c); the time printed covers the whole chain
//   spin --calibrate SECONDS              prints the iterations that take SECONDS alone
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unistd.h>

// The GPU's global clock (ns): when a kernel really started and ended, printed next to the
// event time, so the harness can tell a late start from a slow run.
__device__ unsigned long long global_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void add_then_spin(int n, const float *x, float *y, long long iterations,
                              unsigned long long *out)
{
    out[2] = global_ns();
    for (int i = 0; i < n; i++)
        y[i] = x[i] + y[i];
    unsigned long long v = 1;
    for (long long i = 0; i < iterations; i++)
        v = v * 6364136223846793005ull + 1442695040888963407ull;
    *out = v;
    out[3] = global_ns();
}

__global__ void spin(long long iterations, unsigned long long *out)
{
    out[2] = global_ns();
    unsigned long long x = 1;
    for (long long i = 0; i < iterations; i++)
        x = x * 6364136223846793005ull + 1442695040888963407ull; // each step needs the last
    *out = x;
    out[3] = global_ns();
}

// B1c: one quarter of the chain, continuing from the state the previous kernel left.
// state[1] counts the tiny kernels, state[2..3] are the chain's start and end times.
__global__ void spin_from(long long iterations, unsigned long long *state)
{
    if (state[1] == 0)
        state[2] = global_ns();
    unsigned long long x = *state;
    for (long long i = 0; i < iterations; i++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    *state = x;
    state[3] = global_ns();
}

// B1c: the tiny kernel that depends on the one before it.
__global__ void count_step(unsigned long long *steps) { *steps += 1; }

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "spin: %s failed: %s\n", #call, cudaGetErrorString(e_));              \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static const int managed_n = 1 << 16;
static float *mx, *my; // managed arrays when --managed
static bool chain;      // --chain: 4 x [quarter kernel -> tiny kernel]

static unsigned long long gpu_times[2]; // the kernel's (or chain's) start and end, global ns
static long long host_a_ns, host_launched_ns; // before the first event, after the launch call

static long long realtime_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

static int run(long long iterations, float *ms, unsigned long long *result)
{
    unsigned long long *d_out, steps = 0, one = 1;
    cudaEvent_t a, b;

    CHECK(cudaMalloc(&d_out, 4 * sizeof(*d_out)));
    CHECK(cudaMemcpy(d_out, &one, sizeof(one), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(d_out + 1, 0, 3 * sizeof(*d_out)));
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    host_a_ns = realtime_ns();
    CHECK(cudaEventRecord(a));
    if (mx) {
        add_then_spin<<<1, 1>>>(managed_n, mx, my, iterations, d_out);
    } else if (chain) {
        for (int i = 0; i < 4; i++) {
            spin_from<<<1, 1>>>(iterations / 4, d_out);
            count_step<<<1, 1>>>(d_out + 1);
        }
    } else
        spin<<<1, 1>>>(iterations, d_out);
    host_launched_ns = realtime_ns();
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaEventElapsedTime(ms, a, b));
    CHECK(cudaMemcpy(result, d_out, sizeof(*result), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(&steps, d_out + 1, sizeof(steps), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(gpu_times, d_out + 2, sizeof(gpu_times), cudaMemcpyDeviceToHost));
    CHECK(cudaFree(d_out));
    if (chain && steps != 4) {
        fprintf(stderr, "spin: the chain ran %llu tiny kernels, not 4\n", steps);
        return 1;
    }
    return 0;
}

static unsigned long long reference(long long iterations)
{
    unsigned long long x = 1;
    for (long long i = 0; i < iterations; i++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x;
}

int main(int argc, char **argv)
{
    unsigned long long result = 0;
    float ms = 0;

    if (argc == 3 && !strcmp(argv[1], "--calibrate")) {
        long long probe = 1 << 22;
        if (run(probe, &ms, &result) || run(probe, &ms, &result)) // the second is warm
            return 1;
        printf("%lld\n", (long long)(atof(argv[2]) * 1000.0 / ms * probe));
        return 0;
    }
    long long iterations = argc > 1 ? atoll(argv[1]) : 1 << 24;
    chain = argc > 3 && !strcmp(argv[3], "--chain");
    if (chain)
        iterations -= iterations % 4; // four equal quarters
    if (argc > 3 && !strcmp(argv[3], "--managed")) {
        CHECK(cudaMallocManaged(&mx, managed_n * sizeof(float)));
        CHECK(cudaMallocManaged(&my, managed_n * sizeof(float)));
        for (int i = 0; i < managed_n; i++)
            mx[i] = (float)i, my[i] = 2.0f;
    }
    if (argc > 2) {
        CHECK(cudaFree(0)); // create the context first, then wait for the common start
        long long at = atoll(argv[2]);
        if (!strcmp(argv[2], "stdin")) { // the harness: say so, then read the start time
            printf("ready\n");
            fflush(stdout);
            if (scanf("%lld", &at) != 1) {
                fprintf(stderr, "spin: no start time on standard input\n");
                return 1;
            }
        }
        long long now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
        if (at > now)
            std::this_thread::sleep_for(std::chrono::milliseconds(at - now));
    }
    if (run(iterations, &ms, &result))
        return 1;
    if (iterations <= (1ll << 28) && result != reference(iterations)) {
        fprintf(stderr, "spin: wrong result %llx\n", result);
        return 1;
    }
    for (int i = 0; mx && i < managed_n; i++) {
        if (my[i] != (float)i + 2.0f) {
            fprintf(stderr, "spin: managed sum wrong at %d: %f\n", i, my[i]);
            return 1;
        }
    }
    printf("kernel_ms %.3f\n", ms);
    printf("gpu_start_ns %llu gpu_end_ns %llu\n", gpu_times[0], gpu_times[1]);
    printf("host_a_ns %lld host_launched_ns %lld pid %d\n", host_a_ns, host_launched_ns,
           (int)getpid());
    return 0;
}
