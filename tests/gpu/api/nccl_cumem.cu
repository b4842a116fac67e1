// SPDX-License-Identifier: MIT
// The virtual-memory calls NCCL makes (issue #24: under openmps its first all_reduce failed after
// cuMemGetAllocationGranularity answered 1), in NCCL's order, with the driver API:
//   * the host-memory probe: the granularity of pinned host memory of the device's NUMA node,
//     shareable as a POSIX descriptor, must be answered; then cuMemCreate there: where the
//     driver makes it (natively) the memory is mapped, opened to the device and to the host, and
//     written by the CPU then read by a kernel; where it is refused (under openmps, as in
//     containers without NUMA support) the program goes on as NCCL does, with host memory of its
//     own. Either way the line printed is the same.
//   * device memory with gpuDirectRDMACapable and a descriptor handle type: made, reserved,
//     mapped, opened to the device, filled by a kernel; exported as a descriptor that a second
//     process (this program, "import FD SIZE SUM", on the last device) imports, maps, opens to
//     its device and reads back: the same checksum;
//   * a kernel of one 4 KiB parameter launched with cuLaunchKernelEx and an `extra` buffer of
//     the bytes in use, as NCCL launches its kernels: it runs, and the stream's synchronisation
//     answers success (a later cuStreamSynchronize answered 1 in the report);
//   * the memory freed as NCCL frees it (retain the handle, release, address range, unmap,
//     release, free the range).
// openmps-gpu-link: -lcuda
#define PROG "nccl_cumem"
#include "api.h"
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

__global__ void fill(unsigned *p, size_t n, unsigned seed)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = (unsigned)i * 2654435761u + seed;
}

// NCCL's kernels take one 4 KiB parameter, launched with the bytes in use only.
struct args4k {
    unsigned *p;
    unsigned v;
    char rest[4096 - 16];
};

__global__ void store4k(args4k a)
{
    a.p[threadIdx.x] = a.v;
}

__global__ void sum_host(const unsigned *p, size_t n, unsigned long long *out)
{
    unsigned long long s = 0;
    for (size_t i = 0; i < n; i++)
        s += p[i];
    *out = s;
}

// ncclCuMemMapAndSetAccess: a reservation, the handle mapped, read-write for the device.
static CUdeviceptr map_rw(CUmemGenericAllocationHandle h, size_t size, size_t g, int dev)
{
    CUdeviceptr va;
    CU(cuMemAddressReserve(&va, size, g, 0, 0));
    CU(cuMemMap(va, size, 0, h, 0));
    CUmemAccessDesc acc = {};
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = dev;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(cuMemSetAccess(va, size, &acc, 1));
    return va;
}

static void host_probe(CUdevice dev, int ordinal)
{
    int numa = -1;
    CU(cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev));
    if (numa < 0)
        numa = 0;
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    prop.location.id = numa;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t g = 0;
    CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    EXPECT(g > 0);
    CUmemGenericAllocationHandle h;
    if (cuMemCreate(&h, g, &prop, 0) != CUDA_SUCCESS) {
        // NCCL's fallback: host memory of its own, registered
        unsigned *p = (unsigned *)aligned_alloc(4096, g);
        EXPECT(p != nullptr);
        RT(cudaHostRegister(p, g, cudaHostRegisterDefault));
        for (size_t i = 0; i < g / 4; i++)
            p[i] = 3;
        RT(cudaHostUnregister(p));
        free(p);
        printf("host memory: usable\n");
        return;
    }
    CUdeviceptr va = map_rw(h, g, g, ordinal);
    CUmemAccessDesc acc = {};
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    acc.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    acc.location.id = numa;
    CU(cuMemSetAccess(va, g, &acc, 1));
    unsigned *p = (unsigned *)(uintptr_t)va;
    for (size_t i = 0; i < g / 4; i++)
        p[i] = 3;
    unsigned long long *sum;
    RT(cudaMalloc(&sum, sizeof(*sum)));
    sum_host<<<1, 1>>>(p, g / 4, sum);
    unsigned long long s = 0;
    RT(cudaMemcpy(&s, sum, sizeof(s), cudaMemcpyDeviceToHost));
    EXPECT_EQ(s, 3ull * (g / 4));
    RT(cudaFree(sum));
    CU(cuMemUnmap(va, g));
    CU(cuMemRelease(h));
    CU(cuMemAddressFree(va, g));
    printf("host memory: usable\n");
}

// The second process: imports the descriptor on its device, reads the bytes back.
static int import_side(int fd, size_t size, unsigned long long want)
{
    int n = 0;
    CUdevice dev;
    CUcontext ctx;
    CU(cuInit(0));
    CU(cuDeviceGetCount(&n));
    CU(cuDeviceGet(&dev, n - 1));
    CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU(cuCtxSetCurrent(ctx));
    CUmemGenericAllocationHandle h;
    CU(cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)fd,
                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    close(fd);
    CUmemAllocationProp prop = {};
    CU(cuMemGetAllocationPropertiesFromHandle(&prop, h));
    size_t g = 0;
    CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    EXPECT(size % g == 0);
    CUdeviceptr va = map_rw(h, size, g, (int)dev);
    unsigned char *b = (unsigned char *)malloc(size);
    CU(cuMemcpyDtoH(b, va, size));
    EXPECT_EQ(api_fnv(b, size), want);
    free(b);
    CU(cuMemUnmap(va, size));
    CU(cuMemRelease(h));
    CU(cuMemAddressFree(va, size));
    printf("imported: the same bytes\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "import"))
        return import_side(atoi(argv[2]), strtoull(argv[3], nullptr, 10),
                           strtoull(argv[4], nullptr, 10));
    int ordinal = 0, flag = 0;
    CUdevice dev;
    RT(cudaSetDevice(0));
    RT(cudaFree(0));
    CU(cuDeviceGet(&dev, ordinal));
    CU(cuDeviceGetAttribute(&flag, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
    EXPECT(flag == 1);
    host_probe(dev, ordinal);

    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = (int)dev;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CU(cuDeviceGetAttribute(&flag, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
                            dev));
    if (flag)
        prop.allocFlags.gpuDirectRDMACapable = 1;
    size_t g = 0, size = 4u << 20;
    CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    size = (size + g - 1) / g * g;
    CUmemGenericAllocationHandle h;
    CU(cuMemCreate(&h, size, &prop, 0));
    CUdeviceptr va = map_rw(h, size, g, (int)dev);
    size_t n = size / 4;
    fill<<<(unsigned)((n + 255) / 256), 256>>>((unsigned *)(uintptr_t)va, n, 7);
    RT(cudaDeviceSynchronize());
    unsigned char *b = (unsigned char *)malloc(size);
    CU(cuMemcpyDtoH(b, va, size));
    unsigned long long sum = api_fnv(b, size);
    free(b);
    printf("device memory: mapped and filled\n");

    int fd = -1;
    CU(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    int inherit = dup(fd); // without close-on-exec, for the second process
    EXPECT(inherit >= 0);
    close(fd);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char sfd[16], ssize[32], ssum[32];
        snprintf(sfd, sizeof(sfd), "%d", inherit);
        snprintf(ssize, sizeof(ssize), "%zu", size);
        snprintf(ssum, sizeof(ssum), "%llu", sum);
        execl("/proc/self/exe", argv[0], "import", sfd, ssize, ssum, (char *)nullptr);
        _exit(127);
    }
    close(inherit);
    int st = 0;
    EXPECT(pid > 0 && waitpid(pid, &st, 0) == pid);
    EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);

    CUstream s;
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    fill<<<1, 32, 0, s>>>((unsigned *)(uintptr_t)va, 32, 1);
    CU(cuStreamSynchronize(s));
    // as ncclLaunchKernel: cuLaunchKernelEx with CU_LAUNCH_PARAM_BUFFER_SIZE the bytes in use
    {
        CUfunction fn;
        RT(cudaGetFuncBySymbol(&fn, (const void *)store4k));
        unsigned char used[16];
        unsigned *dst = (unsigned *)(uintptr_t)va, v = 77;
        memcpy(used, &dst, 8);
        memcpy(used + 8, &v, 4);
        memset(used + 12, 0, 4);
        size_t n_used = sizeof(used);
        void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, used, CU_LAUNCH_PARAM_BUFFER_SIZE, &n_used,
                         CU_LAUNCH_PARAM_END};
        CUlaunchConfig cfg = {};
        cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = 32, cfg.blockDimY = cfg.blockDimZ = 1;
        cfg.hStream = s;
        CU(cuLaunchKernelEx(&cfg, fn, nullptr, extra));
        CU(cuStreamSynchronize(s));
        unsigned back[32];
        CU(cuMemcpyDtoH(back, va, sizeof(back)));
        EXPECT_EQ(back[31], 77);
        printf("a 4 KiB parameter launched by its bytes in use: ran\n");
    }
    CU(cuStreamDestroy(s));

    // freed as NCCL frees it
    CUmemGenericAllocationHandle r;
    CU(cuMemRetainAllocationHandle(&r, (void *)(uintptr_t)va));
    CU(cuMemRelease(r));
    size_t range = 0;
    CU(cuMemGetAddressRange(nullptr, &range, va));
    EXPECT_EQ(range, size);
    CU(cuMemUnmap(va, range));
    CU(cuMemRelease(r));
    CU(cuMemAddressFree(va, range));
    printf("freed as NCCL frees\n");
    return 0;
}
