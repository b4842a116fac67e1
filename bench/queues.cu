// SPDX-License-Identifier: MIT
// What one context's shared hardware queues do to operations after a long kernel (the facts
// behind the server's scheduler, src/server/sched.c). One process, S streams (more than the
// CUDA_DEVICE_MAX_CONNECTIONS queues), on each: event a, one long one-thread kernel, event b.
// The host launches the streams' work STAGGER_US apart (like clients that start a little
// apart). Variants:
//   eager   event b enqueued right after the kernel (what a naive server does)
//   held    event b enqueued only once cuStreamQuery says the stream's kernel is done (what
//           the scheduler does)
//   none    no event b: the host notes when cuStreamQuery first says done
// Prints, per variant, the slowest stream's b - a (or launch-to-done) over one stream alone.
//   queues STREAMS KERNEL_MS STAGGER_US
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

__global__ void spin(long long iterations, unsigned long long *out)
{
    unsigned long long x = 1;
    for (long long i = 0; i < iterations; i++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    *out = x;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "queues: %s failed: %s\n", #call, cudaGetErrorString(e_));            \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static double now_ms()
{
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Returns the slowest stream's time in ms.
static double run(int nstreams, long long iters, int stagger_us, const char *variant,
                  unsigned long long *d)
{
    std::vector<cudaStream_t> s(nstreams);
    std::vector<cudaEvent_t> a(nstreams), b(nstreams);
    std::vector<double> launched(nstreams), done(nstreams, 0);
    std::vector<bool> finished(nstreams, false);
    bool eager = !strcmp(variant, "eager"), none = !strcmp(variant, "none");

    for (int i = 0; i < nstreams; i++) {
        CHECK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
        CHECK(cudaEventCreate(&a[i]));
        CHECK(cudaEventCreate(&b[i]));
    }
    CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < nstreams; i++) {
        if (!none)
            CHECK(cudaEventRecord(a[i], s[i]));
        spin<<<1, 1, 0, s[i]>>>(iters, d + i);
        launched[i] = now_ms();
        if (eager)
            CHECK(cudaEventRecord(b[i], s[i]));
        if (stagger_us)
            std::this_thread::sleep_for(std::chrono::microseconds(stagger_us));
    }
    for (int left = nstreams; left;) {
        for (int i = 0; i < nstreams; i++) {
            if (finished[i] || cudaStreamQuery(s[i]) != cudaSuccess)
                continue;
            finished[i] = true;
            left--;
            done[i] = now_ms();
            if (!eager && !none)
                CHECK(cudaEventRecord(b[i], s[i]));
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    CHECK(cudaDeviceSynchronize());
    double worst = 0;
    for (int i = 0; i < nstreams; i++) {
        float ms = 0;
        if (none)
            ms = (float)(done[i] - launched[i]);
        else
            CHECK(cudaEventElapsedTime(&ms, a[i], b[i]));
        worst = ms > worst ? ms : worst;
        cudaStreamDestroy(s[i]);
        cudaEventDestroy(a[i]);
        cudaEventDestroy(b[i]);
    }
    return worst;
}

int main(int argc, char **argv)
{
    int nstreams = argc > 1 ? atoi(argv[1]) : 128;
    double kernel_ms = argc > 2 ? atof(argv[2]) : 200;
    int stagger = argc > 3 ? atoi(argv[3]) : 0;
    unsigned long long *d;
    CHECK(cudaMalloc(&d, 1024 * sizeof(*d)));
    // calibrate one stream alone
    long long probe = 1 << 22;
    double t = run(1, probe, 0, "eager", d);
    t = run(1, probe, 0, "eager", d);
    long long iters = (long long)(kernel_ms / t * probe);
    for (const char *v : {"eager", "held", "none"}) {
        double one = run(1, iters, 0, v, d);
        double all = run(nstreams, iters, stagger, v, d);
        printf("%-6s streams %d stagger_us %d: one %.1f ms, slowest %.1f ms, %.2fx\n", v,
               nstreams, stagger, one, all, all / one);
        fflush(stdout);
    }
    return 0;
}
