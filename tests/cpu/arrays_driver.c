/* SPDX-License-Identifier: MIT */
/* Arrays, texture and surface objects through the shim and the server on the driver double.
 *   arrays_driver basic       arrays, copies with every kind of side, objects, mipmaps, refusals;
 *                             leaves an object and its array for the session's end
 *   arrays_driver hold        makes an array and a texture object, prints both, waits for stdin
 *   arrays_driver steal A T   uses another client's array A and texture object T: all refused
 * Exit status 0 when every check passed; the first failed check is printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuArrayCreate_v2(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
CUresult cuArray3DCreate_v2(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
CUresult cuArrayDestroy(CUarray);
CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *, CUarray);
CUresult cuMipmappedArrayCreate(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned);
CUresult cuMipmappedArrayGetLevel(CUarray *, CUmipmappedArray, unsigned);
CUresult cuMipmappedArrayDestroy(CUmipmappedArray);
CUresult cuMemcpyHtoA_v2(CUarray, size_t, const void *, size_t);
CUresult cuMemcpyAtoH_v2(void *, CUarray, size_t, size_t);
CUresult cuMemcpyDtoA_v2(CUarray, size_t, CUdeviceptr, size_t);
CUresult cuMemcpyAtoD_v2(CUdeviceptr, CUarray, size_t, size_t);
CUresult cuMemcpyAtoA_v2(CUarray, size_t, CUarray, size_t, size_t);
CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *);
CUresult cuTexObjectCreate(CUtexObject *, const CUDA_RESOURCE_DESC *, const CUDA_TEXTURE_DESC *,
                           const void *);
CUresult cuTexObjectDestroy(CUtexObject);
CUresult cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *, CUtexObject);
CUresult cuSurfObjectCreate(CUsurfObject *, const CUDA_RESOURCE_DESC *);
CUresult cuSurfObjectDestroy(CUsurfObject);

static CUarray array2d(size_t w, size_t h)
{
    CUDA_ARRAY_DESCRIPTOR d = {w, h, 0x20, 1}; /* float, one channel */
    CUarray a = NULL;
    OK(cuArrayCreate_v2(&a, &d));
    return a;
}

static void basic(void)
{
    float in[64], out[64];
    CUdeviceptr dev;
    CUDA_ARRAY_DESCRIPTOR got;
    CUarray a = array2d(16, 4), b = array2d(16, 4), level, keep;
    CUmipmappedArray m;
    CUDA_ARRAY3D_DESCRIPTOR md = {8, 8, 0, 0x20, 1, 0};
    CUDA_RESOURCE_DESC res = {0}, back;
    CUDA_TEXTURE_DESC tex = {0};
    CUtexObject t, tl;
    CUsurfObject so;

    for (int i = 0; i < 64; i++)
        in[i] = (float)i * 1.5f;
    OK(cuArrayGetDescriptor_v2(&got, a));
    EXPECT(got.Width == 16 && got.Height == 4 && got.Format == 0x20 && got.NumChannels == 1);
    /* 1D: row 0 of the array */
    OK(cuMemcpyHtoA_v2(a, 8, in, 32));
    memset(out, 0, sizeof(out));
    OK(cuMemcpyAtoH_v2(out, a, 8, 32));
    EXPECT(!memcmp(out, in, 32));
    /* 2D: host rows into rows 1..3, columns 2..9 (bytes 8..39) */
    CUDA_MEMCPY2D c = {.srcMemoryType = 1,
                       .srcHost = in,
                       .srcPitch = 64,
                       .dstXInBytes = 8,
                       .dstY = 1,
                       .dstMemoryType = 3,
                       .dstArray = a,
                       .WidthInBytes = 32,
                       .Height = 3};
    OK(cuMemcpy2D_v2(&c));
    CUDA_MEMCPY2D r = {.srcXInBytes = 8,
                       .srcY = 1,
                       .srcMemoryType = 3,
                       .srcArray = a,
                       .dstMemoryType = 1,
                       .dstHost = out,
                       .dstPitch = 32,
                       .WidthInBytes = 32,
                       .Height = 3};
    memset(out, 0, sizeof(out));
    OK(cuMemcpy2D_v2(&r));
    for (int row = 0; row < 3; row++)
        EXPECT(!memcmp(out + row * 8, in + row * 16, 32));
    /* device memory and array to array */
    OK(cuMemAlloc_v2(&dev, 256));
    OK(cuMemcpyHtoD_v2(dev, in + 16, 64));
    OK(cuMemcpyDtoA_v2(b, 0, dev, 64));
    OK(cuMemcpyAtoA_v2(a, 0, b, 0, 64));
    OK(cuMemcpyAtoD_v2(dev + 128, a, 0, 64));
    memset(out, 0, sizeof(out));
    OK(cuMemcpyDtoH_v2(out, dev + 128, 64));
    EXPECT(!memcmp(out, in + 16, 64));
    /* outside the array: past row 0's end, past the last row; outside device memory */
    EXPECT_RC(cuMemcpyHtoA_v2(a, 60, in, 8), CUDA_ERROR_INVALID_VALUE);
    c.dstY = 2;
    EXPECT_RC(cuMemcpy2D_v2(&c), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemcpyDtoA_v2(b, 0, dev + 224, 64), CUDA_ERROR_INVALID_VALUE);
    /* texture and surface objects over the array and over linear memory */
    res.resType = 0;
    res.res.array.hArray = a;
    OK(cuTexObjectCreate(&t, &res, &tex, NULL));
    OK(cuTexObjectGetResourceDesc(&back, t));
    EXPECT(back.resType == 0 && back.res.array.hArray == a);
    OK(cuSurfObjectCreate(&so, &res));
    OK(cuSurfObjectDestroy(so));
    EXPECT_RC(cuSurfObjectDestroy(so), CUDA_ERROR_INVALID_HANDLE);
    res.resType = 2;
    res.res.linear.devPtr = dev;
    res.res.linear.format = 0x20;
    res.res.linear.numChannels = 1;
    res.res.linear.sizeInBytes = 256;
    OK(cuTexObjectCreate(&tl, &res, &tex, NULL));
    OK(cuTexObjectDestroy(tl));
    res.res.linear.sizeInBytes = 4096; /* past the allocation */
    EXPECT_RC(cuTexObjectCreate(&tl, &res, &tex, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuTexObjectDestroy(t));
    EXPECT_RC(cuTexObjectDestroy(t), CUDA_ERROR_INVALID_HANDLE);
    /* a mipmapped array: a level is usable, not destroyable by itself, gone with its parent */
    OK(cuMipmappedArrayCreate(&m, &md, 3));
    OK(cuMipmappedArrayGetLevel(&level, m, 1));
    OK(cuMemcpyHtoA_v2(level, 0, in, 16));
    EXPECT_RC(cuMemcpyHtoA_v2(level, 0, in, 32),
              CUDA_ERROR_INVALID_VALUE); /* level 1 is 4 floats wide */
    EXPECT_RC(cuMipmappedArrayGetLevel(&level, m, 40), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuArrayDestroy(level), CUDA_ERROR_INVALID_HANDLE);
    OK(cuMipmappedArrayDestroy(m));
    EXPECT_RC(cuMemcpyHtoA_v2(level, 0, in, 16), CUDA_ERROR_INVALID_HANDLE);
    OK(cuArrayDestroy(b));
    EXPECT_RC(cuArrayDestroy(b), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuMemcpyAtoH_v2(out, b, 0, 4), CUDA_ERROR_INVALID_HANDLE);
    /* left for the session's end: an object over an array */
    keep = array2d(4, 4);
    res.resType = 0;
    res.res.array.hArray = keep;
    OK(cuTexObjectCreate(&t, &res, &tex, NULL));
    printf("keep %p %llu\n", keep, t);
    printf("basic ok\n");
}

int main(int argc, char **argv)
{
    CUcontext ctx;

    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
    if (argc > 1 && !strcmp(argv[1], "basic")) {
        basic();
    } else if (argc > 1 && !strcmp(argv[1], "hold")) {
        CUarray a = array2d(16, 4);
        CUDA_RESOURCE_DESC res = {0};
        CUDA_TEXTURE_DESC tex = {0};
        CUtexObject t;
        char line[16];
        res.res.array.hArray = a;
        OK(cuTexObjectCreate(&t, &res, &tex, NULL));
        printf("%llu %llu\n", (unsigned long long)(size_t)a, t);
        fflush(stdout);
        if (!fgets(line, sizeof(line), stdin))
            return 0;
    } else if (argc > 3 && !strcmp(argv[1], "steal")) {
        CUarray a = (CUarray)(size_t)strtoull(argv[2], NULL, 10);
        CUtexObject t = strtoull(argv[3], NULL, 10), mine;
        CUDA_RESOURCE_DESC res = {0}, back;
        CUDA_TEXTURE_DESC tex = {0};
        float buf[4] = {0};
        res.res.array.hArray = a;
        EXPECT_RC(cuMemcpyAtoH_v2(buf, a, 0, 16), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuMemcpyHtoA_v2(a, 0, buf, 16), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuTexObjectCreate(&mine, &res, &tex, NULL), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuSurfObjectCreate(&mine, &res), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuTexObjectGetResourceDesc(&back, t), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuTexObjectDestroy(t), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuArrayDestroy(a), CUDA_ERROR_INVALID_HANDLE);
        printf("steal refused\n");
    } else {
        fprintf(stderr, "usage: arrays_driver basic|hold|steal A T\n");
        return 2;
    }
    return 0;
}
