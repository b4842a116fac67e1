// SPDX-License-Identifier: MIT
// Probe (issue #10): when does cuMemPoolTrimTo give a pool's freed memory back? Natively and
// under openmps the same sequence: a pool with a 64 MiB release threshold, three 4 MiB
// allocations on a non-blocking stream, freed in stream order, then each way of waiting, then
// trim to 0; prints the reserved bytes before and after each trim. Usage: pool_trim
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CU(call)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            fprintf(stderr, "line %d: %s = %d\n", __LINE__, #call, (int)r_);                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static cuuint64_t reserved(CUmemoryPool pool)
{
    cuuint64_t v = 0;
    CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v));
    return v;
}

int main()
{
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    CUmemoryPool pool;
    CUmemPoolProps props;
    const char *ways[] = {"stream-sync", "stream-query", "ctx-sync", "sleep+stream-sync",
                          "trim-twice"};

    CU(cuInit(0));
    CU(cuDeviceGet(&dev, 0));
    CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU(cuCtxSetCurrent(ctx));
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev;
    CU(cuMemPoolCreate(&pool, &props));
    cuuint64_t threshold = 64ull << 20;
    CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    for (int w = 0; w < 5; w++) {
        CUdeviceptr p[3];
        for (int i = 0; i < 3; i++)
            CU(cuMemAllocFromPoolAsync(&p[i], 4u << 20, pool, s));
        CU(cuMemsetD8Async(p[0], 1, 4u << 20, s));
        for (int i = 0; i < 3; i++)
            CU(cuMemFreeAsync(p[i], s));
        if (w == 0 || w == 4)
            CU(cuStreamSynchronize(s));
        else if (w == 1)
            while (cuStreamQuery(s) == CUDA_ERROR_NOT_READY)
                ;
        else if (w == 2)
            CU(cuCtxSynchronize());
        else {
            usleep(100000);
            CU(cuStreamSynchronize(s));
        }
        cuuint64_t before = reserved(pool);
        CU(cuMemPoolTrimTo(pool, 0));
        if (w == 4)
            CU(cuMemPoolTrimTo(pool, 0));
        printf("%-18s reserved %llu -> %llu after trim\n", ways[w], (unsigned long long)before,
               (unsigned long long)reserved(pool));
    }
    CU(cuMemPoolDestroy(pool));
    return 0;
}
