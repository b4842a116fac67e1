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
//   queues STREAMS KERNEL_MS 0 vmm   the virtual-memory probe (vmm_probe)
#include <chrono>
#include <cuda.h>
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

// While STREAMS-1 long kernels run: map fresh device memory through the virtual-memory API
// (what the server's cudaMalloc does), or unmap some ("free"), then time event a, a short
// kernel writing that memory (or other memory), event b on a stream of its own.
static void vmm_probe(int nstreams, long long iters, unsigned long long *d, bool free_first)
{
    std::vector<cudaStream_t> s(nstreams);
    for (int i = 0; i < nstreams; i++)
        CHECK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemAccessDesc access = {};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    size_t gran = 0;
    cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    CUmemGenericAllocationHandle old_mem;
    CUdeviceptr old_base;
    if (free_first) { // mapped before the kernels start, unmapped while they run
        cuMemCreate(&old_mem, gran, &prop, 0);
        cuMemAddressReserve(&old_base, gran, 0, 0, 0);
        cuMemMap(old_base, gran, 0, old_mem, 0);
        cuMemSetAccess(old_base, gran, &access, 1);
    }
    CHECK(cudaDeviceSynchronize());
    for (int i = 1; i < nstreams; i++)
        spin<<<1, 1, 0, s[i]>>>(iters, d + i);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    double t0 = now_ms();
    CUmemGenericAllocationHandle mem;
    CUdeviceptr base;
    if (free_first) {
        cuMemUnmap(old_base, gran);
        cuMemRelease(old_mem);
        cuMemAddressFree(old_base, gran);
        base = (CUdeviceptr)d;
    } else {
        cuMemCreate(&mem, gran, &prop, 0);
        cuMemAddressReserve(&base, gran, 0, 0, 0);
        cuMemMap(base, gran, 0, mem, 0);
        cuMemSetAccess(base, gran, &access, 1);
    }
    double t1 = now_ms();
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    CHECK(cudaEventRecord(a, s[0]));
    spin<<<1, 1, 0, s[0]>>>(1, (unsigned long long *)base);
    CHECK(cudaEventRecord(b, s[0]));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    printf("vmm %s with %d kernels running: host calls %.3f ms, short kernel a->b %.3f ms\n",
           free_first ? "unmap" : "map", nstreams - 1, t1 - t0, ms);
    CHECK(cudaDeviceSynchronize());
    if (!free_first) {
        cuMemUnmap(base, gran);
        cuMemRelease(mem);
        cuMemAddressFree(base, gran);
    }
    for (int i = 0; i < nstreams; i++)
        cudaStreamDestroy(s[i]);
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
    if (argc > 4 && !strcmp(argv[4], "vmm")) {
        vmm_probe(nstreams, iters, d, false);
        vmm_probe(nstreams, iters, d, true);
        vmm_probe(2, iters, d, false);
        return 0;
    }
    for (const char *v : {"eager", "held", "none"}) {
        double one = run(1, iters, 0, v, d);
        double all = run(nstreams, iters, stagger, v, d);
        printf("%-6s streams %d stagger_us %d: one %.1f ms, slowest %.1f ms, %.2fx\n", v,
               nstreams, stagger, one, all, all / one);
        fflush(stdout);
    }
    return 0;
}
