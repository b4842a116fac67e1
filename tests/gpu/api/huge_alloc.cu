// SPDX-License-Identifier: MIT
// Allocations larger than the GPU (issue #24: PyTorch asking for 800 000 000 GiB got
// CUDA_ERROR_INVALID_VALUE under openmps, CUDA_ERROR_OUT_OF_MEMORY natively, and its
// out-of-memory message and retry-after-freeing logic rely on the code). Every allocation entry
// point is asked for 800 000 000 GiB, the device ones also for twice the device's memory; each
// answer is printed (the runner compares them with native) and cuMemAlloc's must be
// OUT_OF_MEMORY. A small allocation and a synchronisation succeed afterwards.
// openmps-gpu-link: -lcuda
#define PROG "huge_alloc"
#include "api.h"

static void show(const char *what, CUresult r)
{
    const char *name = nullptr;
    cuGetErrorName(r, &name);
    printf("%s: %d %s\n", what, (int)r, name ? name : "?");
}

int main()
{
    RT(cudaFree(0));
    CUdevice dev;
    CU(cuCtxGetDevice(&dev));
    size_t total = 0;
    CU(cuDeviceTotalMem(&total, dev));
    const size_t giant = 800000000ull << 30;
    CUstream s;
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUmemoryPool pool;
    CU(cuDeviceGetDefaultMemPool(&pool, dev));
    CUdeviceptr d = 0;
    void *h = nullptr;
    size_t pitch = 0;

    CUresult r = cuMemAlloc(&d, giant);
    EXPECT_EQ(r, CUDA_ERROR_OUT_OF_MEMORY);
    show("cuMemAlloc giant", r);
    show("cuMemAlloc twice the device", cuMemAlloc(&d, 2 * total));
    show("cuMemAllocManaged giant", cuMemAllocManaged(&d, giant, CU_MEM_ATTACH_GLOBAL));
    show("cuMemAllocAsync giant", cuMemAllocAsync(&d, giant, s));
    show("cuMemAllocAsync twice the device", cuMemAllocAsync(&d, 2 * total, s));
    show("cuMemAllocFromPoolAsync giant", cuMemAllocFromPoolAsync(&d, giant, pool, s));
    show("cuMemAllocPitch giant", cuMemAllocPitch(&d, &pitch, 1 << 16, giant >> 16, 4));
    show("cuMemHostAlloc giant", cuMemHostAlloc(&h, giant, 0));
    show("cuMemAllocHost giant", cuMemAllocHost(&h, giant));
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = (int)dev;
    size_t g = 0;
    CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemGenericAllocationHandle mh;
    show("cuMemCreate giant", cuMemCreate(&mh, giant / g * g, &prop, 0));
    show("cuMemCreate twice the device", cuMemCreate(&mh, (2 * total + g - 1) / g * g, &prop, 0));
    int *small;
    RT(cudaMalloc(&small, 4096));
    RT(cudaFree(small));
    CU(cuStreamSynchronize(s));
    RT(cudaDeviceSynchronize());
    printf("a small allocation still works\n");
    return 0;
}
