/* SPDX-License-Identifier: MIT */
/* remote_driver v1 [low]: the 32-bit (v1) entry points of api/remote/v1.tsv through the shim.
 * Without `low` the double's device addresses lie above 4 GiB: every v1 allocation is refused
 * (CUDA_ERROR_OUT_OF_MEMORY, the memory freed again). With `low` (the server run with
 * FAKECUDA_LOW_VA) they lie below: the v1 calls round trip data through the server. The aliases
 * (cuEventDestroy, cuMemHostRegister) are checked in both. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

typedef unsigned int dptr32;
typedef struct {
    unsigned Width, Height;
    int Format;
    unsigned NumChannels;
} desc_v1;
typedef struct { /* CUDA_MEMCPY2D_v1 */
    unsigned srcXInBytes, srcY;
    int srcMemoryType;
    const void *srcHost;
    dptr32 srcDevice;
    CUarray srcArray;
    unsigned srcPitch;
    unsigned dstXInBytes, dstY;
    int dstMemoryType;
    void *dstHost;
    dptr32 dstDevice;
    CUarray dstArray;
    unsigned dstPitch;
    unsigned WidthInBytes, Height;
} copy2d_v1;
typedef struct { /* CUDA_MEMCPY3D_v1 */
    unsigned srcXInBytes, srcY, srcZ, srcLOD;
    int srcMemoryType;
    const void *srcHost;
    dptr32 srcDevice;
    CUarray srcArray;
    void *reserved0;
    unsigned srcPitch, srcHeight;
    unsigned dstXInBytes, dstY, dstZ, dstLOD;
    int dstMemoryType;
    void *dstHost;
    dptr32 dstDevice;
    CUarray dstArray;
    void *reserved1;
    unsigned dstPitch, dstHeight;
    unsigned WidthInBytes, Height, Depth;
} copy3d_v1;

CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuEventDestroy(CUevent);
CUresult cuEventSynchronize(CUevent);
CUresult cuMemHostRegister(void *, size_t, unsigned);
CUresult cuMemHostUnregister(void *);
CUresult cuMemGetInfo(unsigned *, unsigned *);
CUresult cuMemAlloc(dptr32 *, unsigned);
CUresult cuMemAllocPitch(dptr32 *, unsigned *, unsigned, unsigned, unsigned);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemFree(dptr32);
CUresult cuMemGetAddressRange(dptr32 *, unsigned *, dptr32);
CUresult cuMemsetD8(dptr32, unsigned char, unsigned);
CUresult cuMemsetD16(dptr32, unsigned short, unsigned);
CUresult cuMemsetD32(dptr32, unsigned, unsigned);
CUresult cuMemsetD2D8(dptr32, unsigned, unsigned char, unsigned, unsigned);
CUresult cuMemsetD2D32(dptr32, unsigned, unsigned, unsigned, unsigned);
CUresult cuMemcpyHtoD(dptr32, const void *, unsigned);
CUresult cuMemcpyDtoH(void *, dptr32, unsigned);
CUresult cuMemcpyDtoD(dptr32, dptr32, unsigned);
CUresult cuMemcpyHtoDAsync(dptr32, const void *, unsigned, CUstream);
CUresult cuMemcpyDtoHAsync(void *, dptr32, unsigned, CUstream);
CUresult cuMemcpyDtoDAsync(dptr32, dptr32, unsigned, CUstream);
CUresult cuMemcpy2D(const copy2d_v1 *);
CUresult cuMemcpy2DUnaligned(const copy2d_v1 *);
CUresult cuMemcpy3D(const copy3d_v1 *);
CUresult cuArrayCreate(CUarray *, const desc_v1 *);
CUresult cuArrayDestroy(CUarray);
CUresult cuMemcpyHtoA(CUarray, unsigned, const void *, unsigned);
CUresult cuMemcpyAtoH(void *, CUarray, unsigned, unsigned);
CUresult cuMemcpyDtoA(CUarray, unsigned, dptr32, unsigned);
CUresult cuMemcpyAtoD(dptr32, CUarray, unsigned, unsigned);
CUresult cuMemcpyAtoA(CUarray, unsigned, CUarray, unsigned, unsigned);
CUresult cuCtxSynchronize(void);
CUresult cuMemAllocHost(void **, unsigned);
CUresult cuMemFreeHost(void *);
CUresult cuMemHostGetDevicePointer(dptr32 *, void *, unsigned);
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *, void *, unsigned);
CUresult cuMemcpy2DAsync(const copy2d_v1 *, CUstream);
CUresult cuMemcpy3DAsync(const copy3d_v1 *, CUstream);
CUresult cuMemcpyHtoAAsync(CUarray, unsigned, const void *, unsigned, CUstream);
CUresult cuMemcpyAtoHAsync(void *, CUarray, unsigned, unsigned, CUstream);
CUresult cuMemsetD2D16(dptr32, unsigned, unsigned short, unsigned, unsigned);

static void aliases(void)
{
    static unsigned char host[8192] __attribute__((aligned(4096)));
    CUevent ev;

    OK(cuEventCreate(&ev, 0));
    OK(cuEventRecord(ev, NULL));
    OK(cuEventDestroy(ev));
    EXPECT_RC(cuEventSynchronize(ev),
              CUDA_ERROR_INVALID_HANDLE); /* the server destroyed it: no longer the client's */
    OK(cuMemHostRegister(host, sizeof(host), 0));
    OK(cuMemHostUnregister(host));
    EXPECT_RC(cuMemHostUnregister(host),
              CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED); /* it was registered once */
}

static void refused(void)
{
    dptr32 d = 0x1234;
    unsigned pitch = 77;
    CUdeviceptr big;

    EXPECT_RC(cuMemAlloc(&d, 4096), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT(d == 0x1234);
    EXPECT_RC(cuMemAllocPitch(&d, &pitch, 64, 4, 4), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT(d == 0x1234 && pitch == 77);
    /* each refused allocation is freed again: more of them than the double holds at once
     * (4096) leave room for the next */
    for (int i = 0; i < 4200; i++)
        EXPECT_RC(cuMemAlloc(&d, 4096), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemAlloc_v2(&big, 4096));
    EXPECT(big > UINT_MAX);
    /* an address of the 32-bit interface that is not the client's memory */
    EXPECT_RC(cuMemsetD8((dptr32)big, 1, 16), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree_v2(big));
}

static void round_trips(void)
{
    unsigned char in[4096], out[4096];
    unsigned pitch = 0, size = 0;
    dptr32 d, e, p, base = 0;
    CUarray a, b;
    desc_v1 ad = {256, 0, 0x01, 1}; /* 1D: the offsets are into row 0 */

    for (unsigned i = 0; i < sizeof(in); i++)
        in[i] = (unsigned char)(i * 7 + 3);
    OK(cuMemAlloc(&d, 4096));
    OK(cuMemAlloc(&e, 4096));
    EXPECT(d != 0 && e != 0 && d != e);
    OK(cuMemGetAddressRange(&base, &size, d + 100));
    EXPECT(base == d && size >= 4096);
    OK(cuMemsetD8(d, 0x5a, 4096));
    OK(cuMemcpyDtoH(out, d, 4096));
    EXPECT(out[0] == 0x5a && out[4095] == 0x5a);
    OK(cuMemsetD16(d + 16, 0xbeef, 2));
    OK(cuMemsetD32(d + 32, 0x01020304u, 1));
    OK(cuMemcpyDtoH(out, d, 64));
    EXPECT(out[16] == 0xef && out[17] == 0xbe && out[19] == 0xbe && out[20] == 0x5a);
    EXPECT(out[32] == 4 && out[35] == 1 && out[36] == 0x5a);
    OK(cuMemcpyHtoD(d, in, 4096));
    OK(cuMemcpyDtoD(e, d, 4096));
    memset(out, 0, sizeof(out));
    OK(cuMemcpyDtoH(out, e, 4096));
    EXPECT(!memcmp(in, out, 4096));
    OK(cuMemcpyHtoDAsync(d, in + 1, 1024, NULL));
    OK(cuMemcpyDtoDAsync(e, d, 1024, NULL));
    OK(cuMemcpyDtoHAsync(out, e, 1024, NULL));
    OK(cuCtxSynchronize());
    EXPECT(!memcmp(in + 1, out, 1024));

    OK(cuMemAllocPitch(&p, &pitch, 100, 8, 4));
    EXPECT(pitch >= 100);
    OK(cuMemsetD2D8(p, pitch, 0x11, 100, 8));
    OK(cuMemsetD2D32(p, pitch, 0x22222222u, 4, 2));
    {
        copy2d_v1 c = {.srcMemoryType = 2,
                       .srcDevice = p,
                       .srcPitch = pitch,
                       .dstMemoryType = 1,
                       .dstHost = out,
                       .dstPitch = 100,
                       .WidthInBytes = 100,
                       .Height = 8};
        memset(out, 0, sizeof(out));
        OK(cuMemcpy2D(&c));
        EXPECT(out[0] == 0x22 && out[15] == 0x22 && out[16] == 0x11 && out[100] == 0x22 &&
               out[116] == 0x11 && out[200] == 0x11 && out[799] == 0x11);
        /* host to device with offsets: rows of `in` into the pitched allocation */
        c = (copy2d_v1){.srcMemoryType = 1,
                        .srcHost = in,
                        .srcPitch = 50,
                        .srcXInBytes = 2,
                        .srcY = 1,
                        .dstMemoryType = 2,
                        .dstDevice = p,
                        .dstPitch = pitch,
                        .dstY = 1,
                        .WidthInBytes = 40,
                        .Height = 3};
        OK(cuMemcpy2DUnaligned(&c));
        OK(cuMemcpyDtoH(out, p + pitch, 40));
        EXPECT(!memcmp(out, in + 52, 40));
        OK(cuMemcpyDtoH(out, p + 3 * pitch, 40));
        EXPECT(!memcmp(out, in + 152, 40));
    }
    {
        copy3d_v1 c = {.srcMemoryType = 2,
                       .srcDevice = d,
                       .srcPitch = 64,
                       .srcHeight = 4,
                       .dstMemoryType = 1,
                       .dstHost = out,
                       .dstPitch = 32,
                       .dstHeight = 2,
                       .srcZ = 1,
                       .WidthInBytes = 32,
                       .Height = 2,
                       .Depth = 2};
        OK(cuMemcpyHtoD(d, in, 4096));
        memset(out, 0, sizeof(out));
        OK(cuMemcpy3D(&c));
        EXPECT(!memcmp(out, in + 256, 32) && !memcmp(out + 32, in + 320, 32));
        EXPECT(!memcmp(out + 64, in + 512, 32) && !memcmp(out + 96, in + 576, 32));
    }

    OK(cuArrayCreate(&a, &ad));
    OK(cuArrayCreate(&b, &ad));
    OK(cuMemcpyHtoA(a, 0, in, 256));
    OK(cuMemcpyAtoA(b, 0, a, 0, 256));
    memset(out, 0, sizeof(out));
    OK(cuMemcpyAtoH(out, b, 0, 256));
    EXPECT(!memcmp(out, in, 256));
    OK(cuMemcpyDtoA(a, 64, e + 2000, 64));
    OK(cuMemcpyAtoD(d, a, 64, 64));
    OK(cuMemcpyDtoH(out, d, 64));
    EXPECT(!memcmp(out, in + 2000, 64));
    OK(cuMemcpyHtoAAsync(b, 8, in + 3000, 100, NULL));
    memset(out, 0, sizeof(out));
    OK(cuMemcpyAtoHAsync(out, b, 8, 100, NULL));
    OK(cuCtxSynchronize());
    EXPECT(!memcmp(out, in + 3000, 100));
    OK(cuArrayDestroy(a));
    OK(cuArrayDestroy(b));

    OK(cuMemsetD2D16(p, pitch, 0x4455, 8, 2));
    {
        copy2d_v1 c = {.srcMemoryType = 2,
                       .srcDevice = p,
                       .srcPitch = pitch,
                       .srcY = 1,
                       .dstMemoryType = 1,
                       .dstHost = out,
                       .dstPitch = 20,
                       .WidthInBytes = 20,
                       .Height = 1};
        copy3d_v1 c3 = {.srcMemoryType = 1,
                        .srcHost = in,
                        .srcPitch = 16,
                        .srcHeight = 2,
                        .dstMemoryType = 2,
                        .dstDevice = e,
                        .dstPitch = 16,
                        .dstHeight = 2,
                        .dstZ = 1,
                        .WidthInBytes = 16,
                        .Height = 2,
                        .Depth = 2};
        memset(out, 0, sizeof(out));
        OK(cuMemcpy2DAsync(&c, NULL));
        OK(cuMemcpy3DAsync(&c3, NULL));
        OK(cuCtxSynchronize());
        EXPECT(out[0] == 0x55 && out[1] == 0x44 && out[15] == 0x44 &&
               out[16] == in[68]); /* row 1 past the set: cuMemcpy2DUnaligned above */
        OK(cuMemcpyDtoH(out, e + 32, 64));
        EXPECT(!memcmp(out, in, 64));
    }

    /* a range past the allocation is refused by the server as for the _v2 call */
    EXPECT_RC(cuMemcpyHtoD(d + 4000, in, 4096), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree(d));
    OK(cuMemFree(e));
    OK(cuMemFree(p));
    EXPECT_RC(cuMemFree(d), CUDA_ERROR_INVALID_VALUE);
}

/* pinned host memory: its device address is the host address (unified addressing), which a
 * 32-bit CUdeviceptr holds only below 4 GiB */
static void host_memory(void)
{
    void *h = NULL;
    dptr32 d = 0;
    CUdeviceptr d64 = 0;
    CUresult rc;

    OK(cuMemAllocHost(&h, 4096));
    EXPECT(h != NULL);
    memset(h, 0x33, 4096);
    OK(cuMemHostGetDevicePointer_v2(&d64, h, 0));
    rc = cuMemHostGetDevicePointer(&d, h, 0);
    if (d64 > UINT_MAX)
        EXPECT(rc == 801 && d == 0);
    else
        EXPECT(rc == 0 && d == d64);
    OK(cuMemFreeHost(h));
}

void v1_case(int low)
{
    unsigned free_b = 0, total = 0;

    aliases();
    OK(cuMemGetInfo(&free_b, &total));
    /* the double reports 16 GiB: more than 32 bits, reported as the largest value */
    EXPECT(free_b == UINT_MAX && total == UINT_MAX);
    EXPECT_RC(cuMemGetInfo(NULL, &total), CUDA_ERROR_INVALID_VALUE);
    host_memory();
    if (low)
        round_trips();
    else
        refused();
    printf("v1 ok\n");
}
