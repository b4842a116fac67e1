// SPDX-License-Identifier: MIT
// Several GPUs (issue #12), for tests/gpu/multi/run.sh; natively and under openmps alike.
//   multi peer           both devices: memory on each, device 0's values copied to device 1
//                        (cudaMemcpyPeer), a kernel on device 1 reading device 0's memory
//                        directly where peer access is possible, results checked against the
//                        CPU; deterministic lines only
//   multi rate DEV SECS  a GPU-filling kernel on device DEV, repeated for SECS seconds: "rate
//                        DEV BLOCKS_PER_S"
//   multi spin DEV MS    one one-thread kernel of about MS ms on device DEV (B1's kernel):
//                        "spin DEV MS_TAKEN"
//   multi visible        what CUDA_VISIBLE_DEVICES lets the program see: the device count (or
//                        the runtime's error), each device's name, UUID and PCI bus, and on
//                        each a kernel's result checked with the device a pointer says; the
//                        same lines natively and under openmps for the same variable
//   multi uuid DEV       the UUID of device DEV as CUDA_VISIBLE_DEVICES takes it
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <vector>

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "multi: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

__global__ void burn(long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

__global__ void fill(float *p, int n, float base)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = base + (float)(i % 1000) * 0.5f;
}

// out[i] = a[i] (on this device) * 2 + b[i] (another device's memory, read through peer access)
__global__ void combine(float *out, const float *a, const float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = a[i] * 2.0f + b[i];
}

static int peer()
{
    int n = 0;
    const int N = 1 << 20;
    CK(cudaGetDeviceCount(&n));
    printf("devices: %d\n", n);
    if (n < 2) {
        fprintf(stderr, "multi peer: needs two devices\n");
        return 77;
    }
    float *d0, *d1, *d1b;
    CK(cudaSetDevice(0));
    CK(cudaMalloc(&d0, N * sizeof(float)));
    fill<<<N / 256, 256>>>(d0, N, 1.0f);
    CK(cudaDeviceSynchronize());
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&d1, N * sizeof(float)));
    CK(cudaMalloc(&d1b, N * sizeof(float)));
    fill<<<N / 256, 256>>>(d1b, N, 3.0f);
    CK(cudaMemcpyPeer(d1, 1, d0, 0, N * sizeof(float)));
    std::vector<float> h(N);
    CK(cudaMemcpy(h.data(), d1, N * sizeof(float), cudaMemcpyDeviceToHost));
    bool same = true;
    for (int i = 0; i < N; i++)
        same &= h[i] == 1.0f + (float)(i % 1000) * 0.5f;
    printf("device 0's values copied to device 1 (cudaMemcpyPeer): %s\n", same ? "exact" : "WRONG");
    int can10 = 0, can01 = 0;
    CK(cudaDeviceCanAccessPeer(&can10, 1, 0));
    CK(cudaDeviceCanAccessPeer(&can01, 0, 1));
    printf("peer access possible 1->0: %d, 0->1: %d\n", can10, can01);
    if (can10) {
        cudaError_t e = cudaDeviceEnablePeerAccess(0, 0);
        printf("enable peer access 1->0: %s\n", cudaGetErrorName(e));
        e = cudaDeviceEnablePeerAccess(0, 0);
        printf("enable it again: %s\n", cudaGetErrorName(e));
        (void)cudaGetLastError();
        // a kernel on device 1 reads device 0's memory directly
        combine<<<N / 256, 256>>>(d1, d1b, d0, N);
        CK(cudaMemcpy(h.data(), d1, N * sizeof(float), cudaMemcpyDeviceToHost));
        bool ok = true;
        for (int i = 0; i < N; i++)
            ok &= h[i] == (3.0f + (float)(i % 1000) * 0.5f) * 2.0f + 1.0f + (float)(i % 1000) * 0.5f;
        printf("kernel on device 1 reading device 0's memory: %s\n", ok ? "exact" : "WRONG");
    }
    int cur = -1;
    CK(cudaGetDevice(&cur));
    printf("current device: %d\n", cur);
    CK(cudaFree(d1));
    CK(cudaFree(d1b));
    CK(cudaSetDevice(0));
    CK(cudaFree(d0));
    return same ? 0 : 1;
}

static int rate(int dev, double secs)
{
    int sms = 0;
    CK(cudaSetDevice(dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    const int blocks = 16384;
    burn<<<blocks, 128>>>(100000);
    CK(cudaDeviceSynchronize());
    double total = 0;
    long runs = 0;
    CK(cudaEventRecord(a));
    while (total < secs * 1e3) {
        for (int i = 0; i < 10; i++)
            burn<<<blocks, 128>>>(100000);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        total = ms;
        runs += 10;
    }
    printf("rate %d %.0f\n", dev, runs * blocks / (total * 1e-3));
    return 0;
}

static int spin(int dev, double ms)
{
    int khz = 0;
    CK(cudaSetDevice(dev));
    CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    burn<<<1, 1>>>(1000);
    CK(cudaDeviceSynchronize());
    CK(cudaEventRecord(a));
    burn<<<1, 1>>>((long long)(ms * khz));
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float took = 0;
    CK(cudaEventElapsedTime(&took, a, b));
    printf("spin %d %.1f\n", dev, took);
    return 0;
}

static void uuid_text(const cudaUUID_t &u, char *buf)
{
    const unsigned char *b = (const unsigned char *)u.bytes;
    sprintf(buf, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
            b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
            b[15]);
}

static int visible()
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        printf("count error %s\n", cudaGetErrorName(e));
        return 0;
    }
    printf("count %d\n", n);
    for (int d = 0; d < n; d++) {
        cudaDeviceProp p;
        char uuid[64];
        CK(cudaGetDeviceProperties(&p, d));
        uuid_text(p.uuid, uuid);
        CK(cudaSetDevice(d));
        float *m, back[4];
        cudaPointerAttributes a;
        CK(cudaMalloc(&m, 1024 * sizeof(float)));
        fill<<<4, 256>>>(m, 1024, (float)d);
        CK(cudaMemcpy(back, m + 1020, sizeof(back), cudaMemcpyDeviceToHost));
        CK(cudaPointerGetAttributes(&a, m));
        printf("device %d %s %s bus %04x:%02x:%02x kernel %s pointer on %d\n", d, p.name, uuid,
               p.pciDomainID, p.pciBusID, p.pciDeviceID,
               back[3] == (float)d + 1023 % 1000 * 0.5f ? "ok" : "WRONG", a.device);
        CK(cudaFree(m));
    }
    return 0;
}

static int uuid_of(int dev)
{
    cudaDeviceProp p;
    char uuid[64];
    CK(cudaGetDeviceProperties(&p, dev));
    uuid_text(p.uuid, uuid);
    printf("%s\n", uuid);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "visible"))
        return visible();
    if (argc > 2 && !strcmp(argv[1], "uuid"))
        return uuid_of(atoi(argv[2]));
    if (argc > 1 && !strcmp(argv[1], "peer"))
        return peer();
    if (argc > 3 && !strcmp(argv[1], "rate"))
        return rate(atoi(argv[2]), atof(argv[3]));
    if (argc > 3 && !strcmp(argv[1], "spin"))
        return spin(atoi(argv[2]), atof(argv[3]));
    fprintf(stderr, "usage: multi peer | rate DEV SECS | spin DEV MS | visible | uuid DEV\n");
    return 2;
}
