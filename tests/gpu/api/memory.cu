// SPDX-License-Identifier: MIT
// Memory through the driver API, each kind written by a kernel and read back: stream-ordered
// allocation from the device's current pool, from a created pool and from the default pool
// (pool attributes, trim, set and get of the current pool); the virtual memory management API
// (granularity, create, reserve, map, access, retain, properties, unmap, free, release);
// pointer attributes and address ranges; managed memory advised and prefetched both ways with
// its range attributes; mapped and registered host memory with its flags and device pointer.
// openmps-gpu-link: -lcuda
#define PROG "memory"
#include "api.h"
#include <cstring>
#include <vector>

__global__ void pattern(unsigned *p, unsigned seed, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = (unsigned)i * 2654435761u ^ seed;
}

__global__ void add_one(unsigned *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] += 1;
}

static void launch_pattern(CUdeviceptr p, unsigned seed, int n, CUstream s)
{
    pattern<<<(n + 255) / 256, 256, 0, (cudaStream_t)s>>>((unsigned *)p, seed, n);
    RT(cudaGetLastError());
}

// Checks host words against the pattern (+ add), naming what; returns their checksum.
static unsigned long long check_pattern(const char *what, const unsigned *h, int n, unsigned seed,
                                        unsigned add = 0)
{
    for (int i = 0; i < n; i++) {
        unsigned want = ((unsigned)i * 2654435761u ^ seed) + add;
        if (h[i] != want) {
            fprintf(stderr, "%s: %s: word %d is %08x, expected %08x\n", PROG, what, i, h[i], want);
            exit(1);
        }
    }
    return api_fnv(h, n * sizeof(unsigned));
}

int main()
{
    const int n = 1 << 18;
    const size_t bytes = n * sizeof(unsigned);
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    std::vector<unsigned> h(n);

    RT(cudaSetDevice(0));
    RT(cudaFree(0));
    CU(cuCtxGetCurrent(&ctx));
    CU(cuCtxGetDevice(&dev));
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

    // ---- Stream-ordered allocation and pools.
    CUmemoryPool defpool, current, pool, got_pool;
    CU(cuDeviceGetDefaultMemPool(&defpool, dev));
    CU(cuDeviceGetMemPool(&current, dev));
    EXPECT(current == defpool);
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev;
    CU(cuMemPoolCreate(&pool, &props));
    cuuint64_t threshold = 64ull << 20, value = 0;
    CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &value));
    EXPECT_EQ(value, threshold);
    int reuse = 0;
    CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, &reuse));
    EXPECT_EQ(reuse, 1);
    CU(cuDeviceSetMemPool(dev, pool));
    CU(cuDeviceGetMemPool(&current, dev));
    EXPECT(current == pool);

    CUdeviceptr p1, p2, p3;
    CU(cuMemAllocAsync(&p1, bytes, s)); // from the current pool: the created one
    CU(cuMemAllocFromPoolAsync(&p2, bytes, defpool, s));
    CU(cuMemAllocFromPoolAsync(&p3, bytes, pool, s));
    CU(cuPointerGetAttribute(&got_pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p1));
    EXPECT(got_pool == pool);
    CU(cuPointerGetAttribute(&got_pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p2));
    EXPECT(got_pool == defpool);
    launch_pattern(p1, 0x1111u, n, s);
    CU(cuMemcpyDtoDAsync(p2, p1, bytes, s));
    add_one<<<(n + 255) / 256, 256, 0, (cudaStream_t)s>>>((unsigned *)p2, n);
    CU(cuMemcpyDtoDAsync(p3, p2, bytes, s));
    CU(cuMemcpyDtoHAsync(h.data(), p3, bytes, s));
    CU(cuStreamSynchronize(s));
    unsigned long long sum = check_pattern("pool allocations", h.data(), n, 0x1111u, 1);
    cuuint64_t used = 0, reserved = 0, reserved_after = 1;
    CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
    EXPECT(used >= 2 * bytes);
    CU(cuMemFreeAsync(p1, s));
    CU(cuMemFreeAsync(p2, s));
    CU(cuMemFreeAsync(p3, s));
    CU(cuStreamSynchronize(s));
    CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
    EXPECT_EQ(used, 0);
    CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
    EXPECT(reserved >= 2 * bytes); // kept: below the release threshold
    CU(cuMemPoolTrimTo(pool, 0));
    CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved_after));
    EXPECT(reserved_after < reserved);
    CU(cuDeviceSetMemPool(dev, defpool));
    CU(cuDeviceGetMemPool(&current, dev));
    EXPECT(current == defpool);
    CU(cuMemPoolDestroy(pool));
    printf("pools: current pool set and restored, 3 allocations correct (checksum %016llx), "
           "used 0 after frees, trimmed to %llu bytes reserved\n",
           sum, (unsigned long long)reserved_after);

    // ---- Virtual memory management.
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t gran = 0, rec = 0;
    CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CU(cuMemGetAllocationGranularity(&rec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    EXPECT(gran > 0 && rec >= gran && rec % gran == 0);
    size_t vsize = ((bytes + gran - 1) / gran) * gran * 2;
    CUmemGenericAllocationHandle handle, retained;
    CUdeviceptr va;
    CU(cuMemCreate(&handle, vsize, &prop, 0));
    CU(cuMemAddressReserve(&va, vsize, 0, 0, 0));
    CU(cuMemMap(va, vsize, 0, handle, 0));
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(cuMemSetAccess(va, vsize, &access, 1));
    unsigned long long flags = 0;
    CU(cuMemGetAccess(&flags, &prop.location, va));
    EXPECT_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CU(cuMemRetainAllocationHandle(&retained, (void *)(va + vsize / 2)));
    CUmemAllocationProp prop2;
    memset(&prop2, 0, sizeof prop2);
    CU(cuMemGetAllocationPropertiesFromHandle(&prop2, retained));
    EXPECT_EQ(prop2.type, CU_MEM_ALLOCATION_TYPE_PINNED);
    EXPECT_EQ(prop2.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
    EXPECT_EQ(prop2.location.id, dev);
    CU(cuMemRelease(retained));
    // The mapping used by a kernel at its second half.
    CUdeviceptr second = va + vsize / 2;
    launch_pattern(second, 0x2222u, n, s);
    CU(cuStreamSynchronize(s));
    CU(cuMemcpyDtoH(h.data(), second, bytes));
    sum = check_pattern("VMM mapping", h.data(), n, 0x2222u);
    CU(cuMemUnmap(va, vsize));
    CU(cuMemAddressFree(va, vsize));
    CU(cuMemRelease(handle));
    printf("vmm: granularity %zu (recommended %zu), %zu bytes mapped read-write, retained handle "
           "pinned on device %d, kernel output correct (checksum %016llx)\n",
           gran, rec, vsize, (int)prop2.location.id, sum);

    // ---- Pointer attributes and address ranges of ordinary device memory.
    CUdeviceptr d, base;
    size_t range = 0;
    CU(cuMemAlloc(&d, bytes));
    CU(cuMemGetAddressRange(&base, &range, d + 1000));
    EXPECT(base == d);
    EXPECT(range >= bytes);
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_CONTEXT,
                                   CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                   CU_POINTER_ATTRIBUTE_MAPPED};
    CUcontext actx = nullptr;
    unsigned mtype = 0, managed = 0; // booleans: written as 1 byte or 4, both read right from 0
    int ordinal = -1;
    CUdeviceptr start = 0;
    unsigned long long buffer_id = 0;
    int mapped = 0;
    void *data[] = {&actx, &mtype, &ordinal, &managed, &start, &buffer_id, &mapped};
    CU(cuPointerGetAttributes(7, attrs, data, d + 64));
    EXPECT(actx == ctx);
    EXPECT_EQ(mtype, CU_MEMORYTYPE_DEVICE);
    EXPECT_EQ(ordinal, dev);
    EXPECT_EQ(managed, 0);
    EXPECT(start == d);
    EXPECT(buffer_id != 0);
    EXPECT_EQ(mapped, 1);
    launch_pattern(d, 0x3333u, n, s);
    CU(cuStreamSynchronize(s));
    CU(cuMemcpyDtoH(h.data(), d, bytes));
    sum = check_pattern("device memory", h.data(), n, 0x3333u);
    printf("pointer attributes: device memory type %u on device %d, not managed, range start "
           "found; kernel output correct (checksum %016llx)\n",
           mtype, ordinal, sum);

    // ---- Managed memory: advised and prefetched to the device, used, prefetched back.
    CUdeviceptr m;
    CU(cuMemAllocManaged(&m, bytes, CU_MEM_ATTACH_GLOBAL));
    CU(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m));
    EXPECT_EQ(managed, 1);
    unsigned *hm = (unsigned *)m;
    for (int i = 0; i < n; i++)
        hm[i] = ((unsigned)i * 2654435761u ^ 0x4444u);
    CUmemLocation on_dev, on_host;
    on_dev.type = CU_MEM_LOCATION_TYPE_DEVICE;
    on_dev.id = dev;
    on_host.type = CU_MEM_LOCATION_TYPE_HOST;
    on_host.id = 0;
    CU(cuMemAdvise(m, bytes, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, on_dev));
    CU(cuMemAdvise(m, bytes, CU_MEM_ADVISE_SET_ACCESSED_BY, on_dev));
    CU(cuMemPrefetchAsync(m, bytes, on_dev, 0, s));
    add_one<<<(n + 255) / 256, 256, 0, (cudaStream_t)s>>>((unsigned *)m, n);
    int preferred = -7, last = -7;
    CU(cuMemRangeGetAttribute(&preferred, sizeof preferred,
                              CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, m, bytes));
    EXPECT_EQ(preferred, dev);
    CU(cuStreamSynchronize(s));
    CU(cuMemRangeGetAttribute(&last, sizeof last, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, m,
                              bytes));
    EXPECT_EQ(last, dev);
    CU(cuMemPrefetchAsync(m, bytes, on_host, 0, s));
    CU(cuStreamSynchronize(s));
    int last_type = -7, read_mostly = -7;
    void *rdata[] = {&last, &last_type, &read_mostly};
    size_t rsizes[] = {sizeof last, sizeof last_type, sizeof read_mostly};
    CUmem_range_attribute rattrs[] = {CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION,
                                      CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE,
                                      CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY};
    CU(cuMemRangeGetAttributes(rdata, rsizes, rattrs, 3, m, bytes));
    EXPECT_EQ(last, CU_DEVICE_CPU);
    EXPECT_EQ(last_type, CU_MEM_LOCATION_TYPE_HOST);
    EXPECT_EQ(read_mostly, 0);
    sum = check_pattern("managed memory", hm, n, 0x4444u, 1);
    CU(cuMemFree(m));
    printf("managed: preferred device %d, prefetched to device then host (last %d, type %d), "
           "kernel output correct (checksum %016llx)\n",
           preferred, last, last_type, sum);

    // ---- Mapped host memory, and registered host memory.
    void *hp;
    CU(cuMemHostAlloc(&hp, bytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
    unsigned hflags = 0;
    CU(cuMemHostGetFlags(&hflags, hp));
    EXPECT_EQ(hflags & (CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
              CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    CUdeviceptr hdev;
    CU(cuMemHostGetDevicePointer(&hdev, hp, 0));
    CU(cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)hp));
    EXPECT_EQ(mtype, CU_MEMORYTYPE_HOST);
    launch_pattern(hdev, 0x5555u, n, s);
    CU(cuStreamSynchronize(s));
    sum = check_pattern("mapped host memory", (const unsigned *)hp, n, 0x5555u);
    CU(cuMemFreeHost(hp));
    unsigned *rp = (unsigned *)aligned_alloc(4096, bytes);
    EXPECT(rp != nullptr);
    CU(cuMemHostRegister(rp, bytes, CU_MEMHOSTREGISTER_DEVICEMAP));
    CU(cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)rp));
    EXPECT_EQ(mtype, CU_MEMORYTYPE_HOST);
    CUdeviceptr rdev;
    CU(cuMemHostGetDevicePointer(&rdev, rp, 0));
    launch_pattern(rdev, 0x6666u, n, s);
    CU(cuStreamSynchronize(s));
    unsigned long long rsum = check_pattern("registered host memory", rp, n, 0x6666u);
    CU(cuMemHostUnregister(rp));
    free(rp);
    printf("host memory: mapped (flags devicemap|portable, checksum %016llx) and registered "
           "(host memory type, checksum %016llx) written by kernels, correct\n",
           sum, rsum);

    CU(cuMemFree(d));
    CU(cuStreamDestroy(s));
    printf("memory done\n");
    return 0;
}
