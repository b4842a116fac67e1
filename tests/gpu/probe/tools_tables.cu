// SPDX-License-Identifier: MIT
// Probe (issue #11): what the slots of the driver's private table 21318c60… that cuBLAS and
// cuFFT call answer (OPENMPS_TRACE_TABLES found slots 4, 39 and 51 called, with a context
// first): slot 4 with and without a context, and slots 51 then 39 for each kind of stream,
// printed beside the stream's cuStreamGetId. Run natively.
#include <cuda.h>
#include <stdio.h>
#include <string.h>

typedef CUresult (*slot_fn)(void *, void *, void *, void *);

int main()
{
    static const unsigned char uuid[16] = {0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48,
                                           0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2};
    const void *const *t = NULL;
    CUdevice dev;
    CUcontext ctx;
    CUstream made[3];
    CUresult rc;

    cuInit(0);
    cuDeviceGet(&dev, 0);
    cuDevicePrimaryCtxRetain(&ctx, dev);
    cuCtxSetCurrent(ctx);
    rc = cuGetExportTable((const void **)&t, (const CUuuid *)uuid);
    printf("table: rc %d, size word %llu\n", (int)rc, t ? (unsigned long long)(size_t)t[0] : 0ull);
    if (rc != CUDA_SUCCESS)
        return 1;
    for (int which = 0; which < 2; which++) {
        unsigned long long v[2] = {0xaaaaaaaaaaaaaaaaull, 0xbbbbbbbbbbbbbbbbull};
        rc = ((slot_fn)t[4])(which ? (void *)ctx : NULL, v, NULL, NULL);
        printf("slot 4 (%s): rc %d, out 0x%llx 0x%llx\n", which ? "ctx" : "NULL", (int)rc, v[0],
               v[1]);
    }
    cuStreamCreate(&made[0], 0);
    cuStreamCreate(&made[1], CU_STREAM_NON_BLOCKING);
    int lo, hi;
    cuCtxGetStreamPriorityRange(&lo, &hi);
    cuStreamCreateWithPriority(&made[2], CU_STREAM_NON_BLOCKING, hi);
    CUstream streams[6] = {NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD, made[0], made[1], made[2]};
    const char *names[6] = {"NULL", "legacy", "per-thread", "created", "non-blocking", "priority"};
    for (int i = 0; i < 6; i++) {
        void *obj[2] = {(void *)0xcccc, (void *)0xdddd};
        unsigned long long v[2] = {0xaaaaaaaaaaaaaaaaull, 0xbbbbbbbbbbbbbbbbull}, id = 0;
        CUresult r51 = ((slot_fn)t[51])(ctx, (void *)streams[i], obj, NULL);
        CUresult r39 = r51 == CUDA_SUCCESS ? ((slot_fn)t[39])(ctx, obj[0], v, NULL) : r51;
        CUresult rid = cuStreamGetId(streams[i], &id);
        printf("%-12s slot 51: rc %d obj %p (%p) | slot 39: rc %d out 0x%llx 0x%llx | "
               "cuStreamGetId rc %d id %llu\n",
               names[i], (int)r51, obj[0], obj[1], (int)r39, v[0], v[1], (int)rid, id);
    }
    return 0;
}
