/* SPDX-License-Identifier: MIT */
/* A driver-API program for the CPU tier, run through the shim against a server that drives the
 * driver test double: data round trips, argument bytes, ownership, errors.
 *   remote_driver roundtrip      every copy and set kind, a module, launches, streams, events
 *   remote_driver hold           allocates, prints the address, keeps the session 10 s
 *   remote_driver steal ADDR     tries to read and free memory it does not own
 *   remote_driver copyloop       copies 8 MiB back and forth until killed
 *   remote_driver chain [PAIRS]  [kernel, kernel] pairs (default 2), then an event record, on
 *                                the default stream: work for the server's scheduler
 *   remote_driver streams2       several streams under the scheduler and the staging area
 *   remote_driver cache          the server's cache of a client's freed allocations
 *   remote_driver order          the order between streams the server keeps (remote_order.c)
 *   remote_driver bench N        the ring's cost: N posted launches (enqueue only), then N
 *                                round trips (cuCtxSynchronize); prints microseconds per call
 *   remote_driver printf N [marked]  a kernel that prints N between two lines of the host
 *   remote_driver printf_packed N    the same from a compressed fatbin entry, waiting on stdin
 *   remote_driver printf_stream N [event]  the same on a stream, its synchronize (an event's)
 *   remote_driver flusher        synchronizing calls, nothing launched
 * (and more modes below, each with its comment)
 * Exit status 0 when every check passed; the first failed check is printed. */
#define _GNU_SOURCE /* memmem */
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

CUresult cuInit(unsigned);
CUresult cuDeviceGetCount(int *);
CUresult cuDeviceGetAttribute(int *, int, int);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuDevicePrimaryCtxSetFlags_v2(int, unsigned);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxSynchronize(void);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned);
CUresult cuMemcpy(CUdeviceptr, CUdeviceptr, size_t);
CUresult cuLaunchHostFunc(CUstream, void (*)(void *), void *);
CUresult cuMemAllocPitch_v2(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
CUresult cuMemGetAddressRange_v2(CUdeviceptr *, size_t *, CUdeviceptr);
CUresult cuPointerGetAttribute(void *, int, CUdeviceptr);
CUresult cuMemsetD2D8_v2(CUdeviceptr, size_t, unsigned char, size_t, size_t);
CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *);
CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *);
CUresult cuModuleUnload(CUmodule);
CUresult cuLaunchCooperativeKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, unsigned, CUstream, void **);
CUresult cuStreamGetFlags(CUstream, unsigned *);
CUresult cuStreamGetPriority(CUstream, int *);
CUresult cuMemAllocHost_v2(void **, size_t);
CUresult cuMemFreeHost(void *);
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *, void *, unsigned);
CUresult cuMemHostRegister_v2(void *, size_t, unsigned);
CUresult cuMemHostUnregister(void *);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuMemcpyDtoD_v2(CUdeviceptr, CUdeviceptr, size_t);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr, const void *, size_t, CUstream);
CUresult cuMemcpyDtoHAsync_v2(void *, CUdeviceptr, size_t, CUstream);
CUresult cuMemsetD8_v2(CUdeviceptr, unsigned char, size_t);
CUresult cuMemsetD16_v2(CUdeviceptr, unsigned short, size_t);
CUresult cuMemsetD32Async(CUdeviceptr, unsigned, size_t, CUstream);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamSynchronize(CUstream);
CUresult cuStreamQuery(CUstream);
CUresult cuStreamDestroy_v2(CUstream);
CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuEventSynchronize(CUevent);
CUresult cuEventElapsedTime_v2(float *, CUevent, CUevent);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuMemHostAlloc(void **, size_t, unsigned);
CUresult cuEventRecordWithFlags(CUevent, CUstream, unsigned);
CUresult cuEventDestroy_v2(CUevent);
CUresult cuLaunchKernelEx(const CUlaunchConfig *, CUfunction, void **, void **);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);

void contexts_case(void);     /* remote_contexts.c */
void errors_case(void);       /* remote_errors.c */
void contexts_bus_case(void); /* remote_contexts.c */
void legacy_case(void);       /* remote_legacy.c */
void v1_case(int low);        /* remote_v1.c */
void green_case(void);        /* remote_green.c */
void green_hold_case(void);
void green_steal_case(char **argv);
void share_case(void); /* remote_share.c */
void order_case(void); /* remote_order.c */
void priority_case(void);
void partition_case(void);
void devices_case(void); /* remote_devices.c */
void visible_case(void);
void novisible_case(int init_rc);

static void setup(void)
{
    CUcontext ctx;
    int n = 0;

    OK(cuInit(0));
    OK(cuDeviceGetCount(&n));
    EXPECT(n >= 1);
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
}

static int order[4], norder;

/* Copies of 8 threads at once: each stages its own bytes. */
static void *copier(void *arg)
{
    int id = (int)(intptr_t)arg;
    size_t n = 600000 + (size_t)id * 1000;
    unsigned char *h = malloc(n), *back = malloc(n);
    CUdeviceptr d;
    intptr_t bad = 0;

    if (!h || !back || cuMemAlloc_v2(&d, n) != 0)
        return (void *)1;
    for (int round = 0; round < 20 && !bad; round++) {
        memset(h, id * 16 + round, n);
        bad |= cuMemcpyHtoD_v2(d, h, n) != 0;
        memset(back, 0, n);
        bad |= cuMemcpyDtoH_v2(back, d, n) != 0;
        bad |= memcmp(h, back, n) != 0;
    }
    cuMemFree_v2(d);
    free(h);
    free(back);
    return (void *)bad;
}

static void host_fn(void *tag)
{
    order[norder++] = (int)(intptr_t)tag;
}

/* A 2D copy of w x h bytes from the host into device rows `pitch` apart (set to 0x33 first),
 * read back whole: the rows arrive, the gaps between them stay. The server copies these
 * through a pinned buffer of 512 KiB, in groups of rows or, for wider rows, a row in pieces. */
static void copy2d_check(size_t w, size_t h, size_t pitch)
{
    unsigned char *src = malloc(w * h), *back = malloc(pitch * h);
    CUdeviceptr d;

    EXPECT(src && back && pitch >= w);
    for (size_t i = 0; i < w * h; i++)
        src[i] = (unsigned char)((uint32_t)(i * 2654435761u) >> 24);
    OK(cuMemAlloc_v2(&d, pitch * h));
    OK(cuMemsetD8_v2(d, 0x33, pitch * h));
    CUDA_MEMCPY2D c = {.srcMemoryType = 1,
                       .srcHost = src,
                       .srcPitch = w,
                       .dstMemoryType = 2,
                       .dstDevice = d,
                       .dstPitch = pitch,
                       .WidthInBytes = w,
                       .Height = h};
    OK(cuMemcpy2D_v2(&c));
    OK(cuMemcpyDtoH_v2(back, d, pitch * h));
    for (size_t r = 0; r < h; r++) {
        EXPECT(memcmp(back + r * pitch, src + r * w, w) == 0);
        for (size_t x = w; x < pitch; x++)
            EXPECT(back[r * pitch + x] == 0x33);
    }
    OK(cuMemFree_v2(d));
    free(src);
    free(back);
}

static void roundtrip(void)
{
    const size_t big = 3 * 1024 * 1024 + 17; /* several staging pieces, odd size */
    unsigned char *h = malloc(big), *back = malloc(big);
    CUdeviceptr a, b;
    CUstream s;
    CUevent e0, e1;
    float ms = -1;
    int sms = 0;

    EXPECT(h && back);
    OK(cuDeviceGetAttribute(&sms, 16, 0));
    EXPECT(sms == 132);
    OK(cuMemAlloc_v2(&a, big));
    OK(cuMemAlloc_v2(&b, big));
    for (size_t i = 0; i < big; i++)
        h[i] = (unsigned char)((uint32_t)(i * 2654435761u) >> 24); /* no short period */
    /* HtoD, DtoH */
    OK(cuMemcpyHtoD_v2(a, h, big));
    memset(back, 0, big);
    OK(cuMemcpyDtoH_v2(back, a, big));
    EXPECT(memcmp(h, back, big) == 0);
    /* Tiny copies (inline in the call, through the server's pinned reply buffer) at aligned and
     * unaligned offsets, between bytes they must leave alone */
    {
        const unsigned char v[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
        unsigned char got[48];
        OK(cuMemcpyHtoD_v2(a + 4, v, 4));
        OK(cuMemcpyHtoD_v2(a + 8, v + 4, 8));
        OK(cuMemcpyHtoD_v2(a + 20, v, 8));
        OK(cuMemcpyHtoD_v2(a + 32, v, 12));
        OK(cuMemcpyDtoH_v2(got, a, 48));
        EXPECT(memcmp(got, h, 4) == 0 && memcmp(got + 4, v, 4) == 0 &&
               memcmp(got + 8, v + 4, 8) == 0 && memcmp(got + 16, h + 16, 4) == 0 &&
               memcmp(got + 20, v, 8) == 0 && memcmp(got + 28, h + 28, 4) == 0 &&
               memcmp(got + 32, v, 12) == 0 && memcmp(got + 44, h + 44, 4) == 0);
        OK(cuMemcpyHtoD_v2(a, h, 48)); /* as before, for what follows */
    }
    /* Larger pageable copies: the staging area's pieces wrap around its slots; odd sizes and
     * unaligned host pointers; an asynchronous pageable copy has taken its bytes on return */
    {
        const size_t n2 = 9 * 1024 * 1024 + 5;
        unsigned char *h2 = malloc(n2 + 3), *b2 = malloc(n2 + 3), *want = malloc(n2);
        CUdeviceptr d2;
        EXPECT(h2 && b2 && want);
        for (size_t i = 0; i < n2; i++)
            h2[i + 3] = (unsigned char)((uint32_t)(i * 2246822519u) >> 23);
        OK(cuMemAlloc_v2(&d2, n2));
        OK(cuMemcpyHtoD_v2(d2, h2 + 3, n2));
        memset(b2, 0, n2 + 3);
        OK(cuMemcpyDtoH_v2(b2 + 1, d2, n2));
        EXPECT(memcmp(h2 + 3, b2 + 1, n2) == 0);
        for (size_t i = 0; i < n2; i++)
            want[i] = h2[i + 3] ^= 0x5a;
        OK(cuMemcpyHtoDAsync_v2(d2, h2 + 3, n2, NULL));
        memset(h2, 0xee, n2 + 3); /* the source may change once the call returned */
        memset(b2, 0, n2 + 3);
        OK(cuMemcpyDtoHAsync_v2(b2, d2, n2, NULL));
        OK(cuCtxSynchronize());
        EXPECT(memcmp(want, b2, n2) == 0);
        OK(cuMemFree_v2(d2));
        free(h2);
        free(b2);
        free(want);
    }
    /* DtoD */
    OK(cuMemcpyDtoD_v2(b, a, big));
    memset(back, 0, big);
    OK(cuMemcpyDtoH_v2(back, b, big));
    EXPECT(memcmp(h, back, big) == 0);
    /* memsets of 8, 16 and 32 bits */
    OK(cuMemsetD8_v2(a, 0xab, 100));
    OK(cuMemcpyDtoH_v2(back, a, 101));
    EXPECT(back[0] == 0xab && back[99] == 0xab && back[100] == h[100]);
    OK(cuMemsetD16_v2(a, 0x1234, 50));
    OK(cuMemcpyDtoH_v2(back, a, 100));
    EXPECT(((unsigned short *)back)[0] == 0x1234 && ((unsigned short *)back)[49] == 0x1234);
    /* streams, async copies, events */
    OK(cuStreamCreate(&s, 0));
    OK(cuEventCreate(&e0, 0));
    OK(cuEventCreate(&e1, 0));
    OK(cuEventRecord(e0, s));
    OK(cuMemsetD32Async(b, 0xdeadbeef, 1000, s));
    OK(cuMemcpyHtoDAsync_v2(a + 4096, h, 4096, s));
    OK(cuEventRecord(e1, s));
    OK(cuStreamSynchronize(s));
    OK(cuEventSynchronize(e1));
    OK(cuEventElapsedTime_v2(&ms, e0, e1));
    /* the test double's answer travelled back: no kernel between them, so about nothing */
    EXPECT_MSG(ms >= 0.0f && ms < 1000.0f, "%f ms", (double)ms);
    OK(cuMemcpyDtoHAsync_v2(back, b, 4000, s));
    EXPECT(((unsigned *)back)[0] == 0xdeadbeef && ((unsigned *)back)[999] == 0xdeadbeef);
    OK(cuMemcpyDtoHAsync_v2(back, a + 4096, 4096, s));
    EXPECT(memcmp(back, h, 4096) == 0);
    /* a module and launches: argument bytes as laid out by the kernel's parameters */
    static const char image[] = "fakecubin\nfill_u32:8,4,4\nmix:1,8,2\nfail:4\n";
    CUmodule mod;
    CUfunction fill, mix;
    OK(cuModuleLoadData(&mod, image));
    OK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    OK(cuModuleGetFunction(&mix, mod, "mix"));
    EXPECT_RC(cuModuleGetFunction(&mix, mod, "nope"), CUDA_ERROR_NOT_FOUND);
    unsigned value = 0x01020304, count = 256;
    void *fill_args[] = {&b, &value, &count};
    OK(cuLaunchKernel(fill, 2, 1, 1, 128, 1, 1, 0, s, fill_args, NULL));
    unsigned char c8 = 0x7f;
    unsigned long long u64 = 0x1122334455667788ull;
    unsigned short u16 = 0xbeef;
    void *mix_args[] = {&c8, &u64, &u16};
    OK(cuLaunchKernel(mix, 1, 2, 3, 4, 5, 6, 0, NULL, mix_args, NULL));
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH_v2(back, b, 4 * 257));
    EXPECT(((unsigned *)back)[0] == value && ((unsigned *)back)[255] == value &&
           ((unsigned *)back)[256] == 0xdeadbeef);
    /* cuMemcpy with unified addressing: the side of each pointer is known */
    unsigned char small[64], small2[64];
    for (int i = 0; i < 64; i++)
        small[i] = (unsigned char)(200 - i);
    OK(cuMemcpy(a, (CUdeviceptr)(uintptr_t)small, 64));       /* host to device */
    OK(cuMemcpy(a + 64, a, 64));                              /* device to device */
    OK(cuMemcpy((CUdeviceptr)(uintptr_t)small2, a + 64, 64)); /* device to host */
    EXPECT(memcmp(small, small2, 64) == 0);
    memset(small2, 0, 64);
    OK(cuMemcpy((CUdeviceptr)(uintptr_t)small2, (CUdeviceptr)(uintptr_t)small, 64)); /* host */
    EXPECT(memcmp(small, small2, 64) == 0);
    /* host functions run in stream order, in this process */
    OK(cuLaunchHostFunc(s, host_fn, (void *)1));
    OK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, fill_args, NULL));
    OK(cuLaunchHostFunc(s, host_fn, (void *)2));
    OK(cuStreamSynchronize(s));
    EXPECT(norder == 2 && order[0] == 1 && order[1] == 2);
    /* a cooperative launch travels as an extended launch with its attribute */
    OK(cuLaunchCooperativeKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, fill_args));
    OK(cuStreamSynchronize(s));
    unsigned sflags = 9;
    int sprio = 9;
    OK(cuStreamGetFlags(s, &sflags));
    EXPECT(sflags == 0); /* created blocking: that is what the client sees */
    OK(cuStreamGetPriority(s, &sprio));
    EXPECT(sprio == 0); /* what it asked for (cuStreamCreate: 0), whatever the server made */
    /* pinned memory shared with the server: asynchronous copies straight from and into it */
    unsigned char *pin_in, *pin_out;
    CUdeviceptr pin_dev = 0;
    OK(cuMemAllocHost_v2((void **)&pin_in, 1 << 20));
    OK(cuMemAllocHost_v2((void **)&pin_out, 1 << 20));
    for (int i = 0; i < 1 << 20; i++)
        pin_in[i] = (unsigned char)(i * 13);
    memset(pin_out, 0, 1 << 20);
    OK(cuMemcpyHtoDAsync_v2(b, pin_in, 1 << 20, s));
    OK(cuMemcpyDtoHAsync_v2(pin_out, b, 1 << 20, s));
    OK(cuStreamSynchronize(s));
    EXPECT(memcmp(pin_in, pin_out, 1 << 20) == 0);
    unsigned ptype = 0;
    OK(cuPointerGetAttribute(&ptype, 2, (CUdeviceptr)(uintptr_t)(pin_in + 3)));
    EXPECT(ptype == 1); /* host memory, pinned */
    OK(cuMemHostGetDevicePointer_v2(&pin_dev, pin_in + 16, 0));
    EXPECT(pin_dev == (CUdeviceptr)(uintptr_t)(pin_in + 16)); /* one pointer on both sides */
    OK(cuMemcpyHtoD_v2(b, pin_in + 5, 1000));                 /* synchronous, from pinned */
    OK(cuMemcpyDtoH_v2(back, b, 1000));
    EXPECT(memcmp(back, pin_in + 5, 1000) == 0);
    /* pinned memory is device memory to memsets and device-to-device copies (XLA memsets its
     * pinned buffers), an allocation's worth and no further */
    OK(cuMemsetD32Async((CUdeviceptr)(uintptr_t)(pin_out + 8), 0x5a5a5a5au, 4, s));
    OK(cuMemcpyDtoD_v2((CUdeviceptr)(uintptr_t)(pin_out + 100), b, 16));
    OK(cuStreamSynchronize(s));
    EXPECT(pin_out[8] == 0x5a && pin_out[23] == 0x5a && pin_out[24] == pin_in[24]);
    EXPECT(memcmp(pin_out + 100, pin_in + 5, 16) == 0);
    EXPECT_RC(cuMemsetD8_v2((CUdeviceptr)(uintptr_t)(pin_out + (1 << 20) - 8), 0, 16),
              CUDA_ERROR_INVALID_VALUE);
    /* and to copies between host and device memory (XLA reads 8-byte flags so) */
    uint64_t flag8 = 0;
    OK(cuMemcpyDtoH_v2(&flag8, (CUdeviceptr)(uintptr_t)(pin_out + 8), 8));
    EXPECT(flag8 == 0x5a5a5a5a5a5a5a5aull);
    flag8 = 0x0102030405060708ull;
    OK(cuMemcpyHtoD_v2((CUdeviceptr)(uintptr_t)(pin_out + 200), &flag8, 8));
    EXPECT(memcmp(pin_out + 200, &flag8, 8) == 0);
    EXPECT_RC(cuMemcpyDtoH_v2(&flag8, (CUdeviceptr)(uintptr_t)(pin_out + (1 << 20) - 4), 8),
              CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFreeHost(pin_in));
    OK(cuMemFreeHost(pin_out));
    EXPECT_RC(cuMemFreeHost(pin_in), CUDA_ERROR_INVALID_VALUE);
    /* memory the program registers itself: shared in place, same pointer, same bytes */
    unsigned char *mine = malloc(3 * 4096 + 100);
    EXPECT(mine != NULL);
    for (int i = 0; i < 3 * 4096 + 100; i++)
        mine[i] = (unsigned char)(i * 11);
    OK(cuMemHostRegister_v2(mine + 50, 3 * 4096, 0));
    for (int i = 0; i < 3 * 4096 + 100; i++)
        EXPECT(mine[i] == (unsigned char)(i * 11)); /* the program's bytes are intact */
    /* a kernel writes the pages through their device pointer (the same as the host
     * pointer when the server could map them at the program's address) */
    OK(cuMemHostGetDevicePointer_v2(&pin_dev, mine + 64, 0));
    unsigned four = 4, mark2 = 0x0badf00d;
    void *reg_args[] = {&pin_dev, &mark2, &four};
    OK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, reg_args, NULL));
    OK(cuStreamSynchronize(s));
    EXPECT(((unsigned *)(mine + 64))[0] == 0x0badf00d &&
           ((unsigned *)(mine + 64))[3] == 0x0badf00d);
    for (int i = 64; i < 80; i++)
        mine[i] = (unsigned char)(i * 11);
    OK(cuMemcpyHtoDAsync_v2(b, mine + 50, 3 * 4096, s)); /* straight from the pages */
    OK(cuMemsetD8_v2(b, 0x77, 10));
    OK(cuMemcpyDtoHAsync_v2(mine + 50, b, 3 * 4096, s));
    OK(cuStreamSynchronize(s));
    EXPECT(mine[50] == 0x77 && mine[59] == 0x77 && mine[60] == (unsigned char)(60 * 11));
    OK(cuMemHostUnregister(mine + 50));
    EXPECT_RC(cuMemHostUnregister(mine + 50), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    mine[0] = 1; /* still the program's memory */
    free(mine);
    /* pitched memory, 2D sets and copies, pointer queries */
    CUdeviceptr img, img2, base = 0;
    size_t pitch = 0, range = 0;
    unsigned mtype = 0;
    static unsigned char host2d[100 * 37], back2d[100 * 37];
    OK(cuMemAllocPitch_v2(&img, &pitch, 100, 37, 4));
    EXPECT(pitch == 512);
    OK(cuMemAllocPitch_v2(&img2, &pitch, 100, 37, 4));
    OK(cuMemGetAddressRange_v2(&base, &range, img + 700));
    EXPECT(base == img && range == 512 * 37);
    OK(cuPointerGetAttribute(&mtype, 2, img + 5));
    EXPECT(mtype == 2);
    EXPECT_RC(cuPointerGetAttribute(&mtype, 2, (CUdeviceptr)(uintptr_t)host2d),
              CUDA_ERROR_INVALID_VALUE);
    OK(cuMemsetD2D8_v2(img, pitch, 0x11, 100, 37));
    for (int i = 0; i < 100 * 37; i++)
        host2d[i] = (unsigned char)(i * 7);
    CUDA_MEMCPY2D c2 = {.srcMemoryType = 1,
                        .srcHost = host2d,
                        .srcPitch = 100,
                        .dstMemoryType = 2,
                        .dstDevice = img,
                        .dstPitch = pitch,
                        .dstXInBytes = 8,
                        .dstY = 2,
                        .WidthInBytes = 90,
                        .Height = 30};
    OK(cuMemcpy2D_v2(&c2)); /* host to device, into a window of the image */
    CUDA_MEMCPY2D d2 = {.srcMemoryType = 2,
                        .srcDevice = img,
                        .srcPitch = pitch,
                        .dstMemoryType = 2,
                        .dstDevice = img2,
                        .dstPitch = pitch,
                        .WidthInBytes = 100,
                        .Height = 37};
    OK(cuMemcpy2D_v2(&d2)); /* device to device, whole */
    CUDA_MEMCPY2D h2 = {.srcMemoryType = 2,
                        .srcDevice = img2,
                        .srcPitch = pitch,
                        .dstMemoryType = 1,
                        .dstHost = back2d,
                        .dstPitch = 100,
                        .WidthInBytes = 100,
                        .Height = 37};
    OK(cuMemcpy2D_v2(&h2)); /* device to host */
    EXPECT(back2d[0] == 0x11 && back2d[2 * 100 + 7] == 0x11);
    EXPECT(back2d[2 * 100 + 8] == host2d[0] && back2d[31 * 100 + 97] == host2d[29 * 100 + 89]);
    EXPECT(back2d[32 * 100 + 8] == 0x11);
    copy2d_check(4096, 200, 8192);          /* 800 KiB: two groups of rows */
    copy2d_check(600 * 1024, 2, 700 << 10); /* rows wider than the server's buffer */
    c2.Height = 36; /* rows 2..37 of a 37-row image: one past the allocation */
    EXPECT_RC(cuMemcpy2D_v2(&c2), CUDA_ERROR_INVALID_VALUE);
    /* 3D: host box 60x5x4 into a device volume of pitch 512, height 8, and back */
    CUdeviceptr vol;
    static unsigned char box[60 * 5 * 6], box2[60 * 5 * 4]; /* box: room for the bad copy */
    OK(cuMemAlloc_v2(&vol, 512 * 8 * 6));
    for (int i = 0; i < 60 * 5 * 6; i++)
        box[i] = (unsigned char)(i * 3 + 1);
    CUDA_MEMCPY3D in3 = {.srcMemoryType = 1,
                         .srcHost = box,
                         .srcPitch = 60,
                         .srcHeight = 5,
                         .dstMemoryType = 2,
                         .dstDevice = vol,
                         .dstPitch = 512,
                         .dstHeight = 8,
                         .dstXInBytes = 4,
                         .dstY = 1,
                         .dstZ = 1,
                         .WidthInBytes = 60,
                         .Height = 5,
                         .Depth = 4};
    OK(cuMemcpy3D_v2(&in3));
    CUDA_MEMCPY3D out3 = {.srcMemoryType = 2,
                          .srcDevice = vol,
                          .srcPitch = 512,
                          .srcHeight = 8,
                          .srcXInBytes = 4,
                          .srcY = 1,
                          .srcZ = 1,
                          .dstMemoryType = 1,
                          .dstHost = box2,
                          .dstPitch = 60,
                          .dstHeight = 5,
                          .WidthInBytes = 60,
                          .Height = 5,
                          .Depth = 4};
    OK(cuMemcpy3D_v2(&out3));
    EXPECT(memcmp(box, box2, sizeof(box2)) == 0);
    in3.Depth = 6; /* slices 1..6 of a 6-slice volume: one past */
    EXPECT_RC(cuMemcpy3D_v2(&in3), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree_v2(vol));
    OK(cuMemFree_v2(img));
    OK(cuMemFree_v2(img2));
    /* managed memory: one pointer for the host and the kernels */
    CUdeviceptr m;
    OK(cuMemAllocManaged(&m, 1 << 20, 1));
    unsigned *mh = (unsigned *)(uintptr_t)m;
    for (int i = 0; i < 1024; i++)
        mh[i] = (unsigned)i;
    unsigned half = 512, mark = 0xcafe;
    void *managed_args[] = {&m, &mark, &half};
    OK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, managed_args, NULL));
    OK(cuCtxSynchronize());
    EXPECT(mh[0] == 0xcafe && mh[511] == 0xcafe && mh[512] == 512 && mh[1023] == 1023);
    /* a host write after a sync survives the next sync */
    mh[700] = 4242;
    OK(cuCtxSynchronize());
    EXPECT(mh[700] == 4242);
    /* a device-side set of managed memory, then a launch, then a sync: both kept */
    OK(cuMemsetD32Async(m + 4 * 800, 0x11111111, 8, s));
    unsigned one = 1, mark3 = 0x33;
    CUdeviceptr m0 = m;
    void *m_args[] = {&m0, &mark3, &one};
    OK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, m_args, NULL));
    OK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, m_args, NULL)); /* twice: no undo */
    OK(cuCtxSynchronize());
    EXPECT(mh[0] == 0x33 && mh[800] == 0x11111111 && mh[807] == 0x11111111 && mh[700] == 4242);
    OK(cuMemFree_v2(m));
    /* errors: a launch error comes at the next sync; bad handles; other memory */
    /* a bad configuration fails at the launch, as natively */
    EXPECT_RC(cuLaunchKernel(fill, 0, 1, 1, 1, 1, 1, 0, s, fill_args, NULL),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuLaunchKernel(fill, 1, 1, 1, 1025, 1, 1, 0, s, fill_args, NULL),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 65, 0, s, fill_args, NULL),
              CUDA_ERROR_INVALID_VALUE);
    /* an error of the launched work comes at the next synchronising call, once */
    CUfunction failing;
    OK(cuModuleGetFunction(&failing, mod, "fail"));
    void *fail_args[] = {&count};
    OK(cuLaunchKernel(failing, 1, 1, 1, 1, 1, 1, 0, s, fail_args, NULL)); /* posted */
    EXPECT_RC(cuStreamSynchronize(s), CUDA_ERROR_OUT_OF_RESOURCES);       /* reported here */
    OK(cuStreamSynchronize(s));
    EXPECT_RC(cuLaunchKernel((CUfunction)0x1234, 1, 1, 1, 1, 1, 1, 0, s, fill_args, NULL),
              CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuStreamSynchronize((CUstream)0x4321), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuMemcpyDtoH_v2(back, a + big, 1),
              CUDA_ERROR_INVALID_VALUE); /* one byte past the allocation */
    EXPECT_RC(cuMemcpyHtoD_v2(0x1000, h, 16), CUDA_ERROR_INVALID_VALUE); /* nobody's memory */
    EXPECT_RC(cuMemFree_v2(a + 8), CUDA_ERROR_INVALID_VALUE); /* not the start of an allocation */
    OK(cuMemFree_v2(a));
    EXPECT_RC(cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE); /* freed already */
    EXPECT_RC(cuMemcpyDtoH_v2(back, a, 16), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamDestroy_v2(s));
    OK(cuModuleUnload(mod));
    EXPECT_RC(cuModuleGetFunction(&mix, mod, "mix"),
              CUDA_ERROR_INVALID_HANDLE); /* its handle is gone */
    OK(cuMemFree_v2(b));
    free(h);
    free(back);
    printf("roundtrip ok\n");
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The ring's two costs as a program sees them, against the driver test double
 * (so the server's side is cheap and the figure is the transport's). A launch
 * is posted: it returns once its record is in the ring. A cuCtxSynchronize is a
 * round trip: record, server, completion. Timings are printed, never judged. */
static void bench(long n)
{
    static const char image[] = "fakecubin\nfill_u32:8,4,4\n";
    CUdeviceptr p;
    CUstream s;
    CUmodule mod;
    CUfunction fill;
    unsigned v = 7, count = 1;
    void *args[] = {&p, &v, &count};
    double t0, t1, t2;

    EXPECT(n > 0);
    OK(cuMemAlloc_v2(&p, 4096));
    OK(cuStreamCreate(&s, 1)); /* non-blocking: no legacy-stream ordering in the figure */
    OK(cuModuleLoadData(&mod, image));
    OK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    for (int i = 0; i < 1000; i++) /* warm-up: layout cached, both sides awake */
        OK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    OK(cuStreamSynchronize(s));
    t0 = now_us();
    for (long i = 0; i < n; i++)
        OK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    t1 = now_us();
    OK(cuStreamSynchronize(s));
    t2 = now_us();
    printf("bench launches %ld enqueue_us %.3f drained_us %.3f\n", n, (t1 - t0) / (double)n,
           (t2 - t0) / (double)n);
    t0 = now_us();
    for (long i = 0; i < n; i++)
        OK(cuCtxSynchronize());
    t1 = now_us();
    printf("bench round_trips %ld round_trip_us %.3f\n", n, (t1 - t0) / (double)n);
    /* B2's two round trips as the runtime makes them: a launch on the legacy stream and its
     * synchronize; a 4-byte copy from pageable memory */
    t0 = now_us();
    for (long i = 0; i < n; i++) {
        OK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        OK(cuStreamSynchronize(NULL));
    }
    t1 = now_us();
    for (long i = 0; i < n; i++)
        OK(cuMemcpyHtoD_v2(p, &v, sizeof(v)));
    t2 = now_us();
    printf("bench launch_sync_us %.3f copy4_us %.3f\n", (t1 - t0) / (double)n,
           (t2 - t1) / (double)n);
    OK(cuStreamDestroy_v2(s));
    OK(cuMemFree_v2(p));
    printf("bench ok\n");
}

/* Work for the server's scheduler (sched.c), with the test double's kernels keeping their
 * stream busy (FAKECUDA_KERNEL_MS): [kernel -> kernel] pairs and an event record on the
 * default stream. A stream query right after the first launch must answer at once
 * (CUDA_ERROR_NOT_READY): only enqueued operations wait for the scheduler. */
static void chain(int pairs)
{
    static const char image[] = "fakecubin\nlong:4\ntiny:4\n";
    CUmodule mod;
    CUfunction lng, tiny;
    CUevent ev;
    unsigned v = 1;
    void *args[] = {&v};
    double t0;
    CUresult q;

    OK(cuModuleLoadData(&mod, image));
    OK(cuModuleGetFunction(&lng, mod, "long"));
    OK(cuModuleGetFunction(&tiny, mod, "tiny"));
    OK(cuEventCreate(&ev, 0));
    OK(cuLaunchKernel(lng, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    t0 = now_us();
    q = cuStreamQuery(NULL);
    printf("chain query %d in %.0f us\n", q, now_us() - t0);
    OK(cuLaunchKernel(tiny, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    for (int i = 1; i < pairs; i++) {
        OK(cuLaunchKernel(lng, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        OK(cuLaunchKernel(tiny, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    }
    OK(cuEventRecord(ev, NULL));
    OK(cuEventSynchronize(ev));
    OK(cuCtxSynchronize());
    printf("chain ok\n");
}

/* Fair share (FAKECUDA_KERNEL_MS): one long kernel on the default stream, "launched", then on a
 * line of stdin n - 1 more back to back, a synchronize, "fair ok". */
static void fair(int n)
{
    static const char image[] = "fakecubin\nlong:4\n";
    CUmodule mod;
    CUfunction lng;
    unsigned v = 1;
    void *args[] = {&v};
    char line[16];

    OK(cuModuleLoadData(&mod, image));
    OK(cuModuleGetFunction(&lng, mod, "long"));
    OK(cuLaunchKernel(lng, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    printf("launched\n");
    fflush(stdout);
    EXPECT(fgets(line, sizeof(line), stdin));
    for (int i = 1; i < n; i++)
        OK(cuLaunchKernel(lng, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    OK(cuCtxSynchronize());
    printf("fair ok\n");
}

/* Several streams under the scheduler (FAKECUDA_KERNEL_MS, OPENMPS_SCHED=always): a client
 * with streams of its own is never held (a kernel on s2 goes while s1's kernel runs and s1 has
 * an event record after it); a query on a blocking stream answers at once while the default
 * stream runs a kernel; a pageable copy on an idle stream does not wait for the staging slots an
 * asynchronous copy on s1 still uses behind s1's kernel. Prints the two times, and whether s1
 * was still busy once the copy on s3 was staged (and when, from s1's launch). */
static void streams2(void)
{
    static const char image[] = "fakecubin\nlong:4\ntiny:4\n";
    const size_t n = 9 * 1024 * 1024 + 3;
    unsigned char *h1 = malloc(n), *h2 = malloc(n), *back = malloc(n);
    CUstream s1, s2, s3, sb;
    CUmodule mod;
    CUfunction lng, tiny;
    CUevent ev;
    CUdeviceptr d1, d2;
    unsigned v = 1;
    void *args[] = {&v};
    double t0, t_long, query_us, staged_ms, s1_ms;
    int s1_busy;

    EXPECT(h1 && h2 && back);
    for (size_t i = 0; i < n; i++) {
        h1[i] = (unsigned char)((uint32_t)(i * 2654435761u) >> 24);
        h2[i] = (unsigned char)~h1[i];
    }
    OK(cuStreamCreate(&s1, 1));
    OK(cuStreamCreate(&s2, 1));
    OK(cuStreamCreate(&s3, 1));
    OK(cuStreamCreate(&sb, 0));
    OK(cuMemAlloc_v2(&d1, n));
    OK(cuMemAlloc_v2(&d2, n));
    OK(cuModuleLoadData(&mod, image));
    OK(cuModuleGetFunction(&lng, mod, "long"));
    OK(cuModuleGetFunction(&tiny, mod, "tiny"));
    OK(cuEventCreate(&ev, 0));
    t_long = now_us();
    OK(cuLaunchKernel(lng, 1, 1, 1, 1, 1, 1, 0, s1, args, NULL));
    OK(cuEventRecord(ev, s1));
    OK(cuLaunchKernel(tiny, 1, 1, 1, 1, 1, 1, 0, s2, args, NULL));
    OK(cuLaunchKernel(lng, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    t0 = now_us();
    OK(cuStreamQuery(sb));
    query_us = now_us() - t0;
    OK(cuMemcpyHtoDAsync_v2(d1, h1, n, s1)); /* behind s1's kernel */
    t0 = now_us();
    OK(cuMemcpyHtoDAsync_v2(d2, h2, n, s3)); /* s3 is idle: nothing to wait for */
    staged_ms = (now_us() - t0) / 1000;
    /* s1 still busy (its kernel, then its copy) once the copy on s3 is staged: that copy did
     * not wait for s1's slots, whatever the time the machine took to stage it */
    s1_busy = cuStreamQuery(s1) == 600;
    s1_ms = (now_us() - t_long) / 1000;
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH_v2(back, d1, n));
    EXPECT(memcmp(back, h1, n) == 0);
    OK(cuMemcpyDtoH_v2(back, d2, n));
    EXPECT(memcmp(back, h2, n) == 0);
    free(h1);
    free(h2);
    free(back);
    printf("streams2 query_us %.0f staged_ms %.1f s1_busy %d s1_query_at_ms %.1f\n", query_us,
           staged_ms, s1_busy, s1_ms);
    printf("streams2 ok\n");
}

/* The server keeps a client's freed allocation for its next one of that size; what it keeps
 * is freed with the session (the free memory at start is printed, to compare across clients). */
static void cache(void)
{
    size_t free0 = 0, total = 0;
    CUdeviceptr a, b, c;

    OK(cuMemGetInfo_v2(&free0, &total));
    OK(cuMemAlloc_v2(&a, 1 << 20));
    OK(cuMemFree_v2(a));
    OK(cuMemAlloc_v2(&b, 1 << 20));
    EXPECT(b == a); /* the freed allocation came back */
    OK(cuMemAlloc_v2(&c, 1 << 20));
    EXPECT(c != a);
    OK(cuMemsetD8_v2(c, 1, 1 << 20));
    OK(cuMemFree_v2(b));
    OK(cuMemFree_v2(c));
    /* managed memory neither takes kept allocations nor is kept: its address is also the
     * client's shadow */
    CUdeviceptr m1, m2;
    OK(cuMemAllocManaged(&m1, 1 << 20, 1));
    EXPECT(m1 != b && m1 != c);
    OK(cuMemFree_v2(m1));
    OK(cuMemAllocManaged(&m2, 1 << 20, 1));
    EXPECT(m2 != m1 && m2 != b && m2 != c);
    OK(cuMemFree_v2(m2));
    CUdeviceptr plain[3];
    for (int i = 0; i < 3; i++) { /* b and c come back, never the managed m1 or m2 */
        OK(cuMemAlloc_v2(&plain[i], 1 << 20));
        EXPECT(plain[i] != m1 && plain[i] != m2);
    }
    for (int i = 0; i < 3; i++)
        OK(cuMemFree_v2(plain[i]));
    printf("cache free_at_start %zu\n", free0);
    printf("cache ok\n");
}

/* Every budget of the server (budget.c), set small by the test's environment: past each the
 * call fails with CUDA_ERROR_OUT_OF_MEMORY (2) and the session goes on. */
static void budgets(void)
{
    static unsigned char buf[4096];
    CUstream st[8];
    CUevent ev[8];
    CUdeviceptr p;
    CUmodule mod;
    void *h, *h2;
    int ns = 0, ne = 0;

    /* pinned: OPENMPS_CLIENT_PINNED_MAX=1M */
    EXPECT_RC(cuMemHostAlloc(&h, 2 << 20, 0), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemHostAlloc(&h, 768 << 10, 0));
    EXPECT_RC(cuMemHostAlloc(&h2, 512 << 10, 0), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemFreeHost(h));
    OK(cuMemHostAlloc(&h2, 512 << 10, 0)); /* freed bytes count no more */
    OK(cuMemFreeHost(h2));
    /* streams and events: OPENMPS_CLIENT_MAX_STREAMS=4, OPENMPS_CLIENT_MAX_EVENTS=4 */
    while (ns < 8 && cuStreamCreate(&st[ns], 1) == 0)
        ns++;
    EXPECT(ns == 4);
    EXPECT_RC(cuStreamCreate(&st[ns], 1), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuStreamDestroy_v2(st[--ns]));
    OK(cuStreamCreate(&st[ns++], 1));
    while (ne < 8 && cuEventCreate(&ev[ne], 0) == 0)
        ne++;
    EXPECT(ne == 4);
    OK(cuEventDestroy_v2(ev[--ne]));
    OK(cuEventCreate(&ev[ne++], 0));
    EXPECT_RC(cuEventCreate(&ev[ne], 0), CUDA_ERROR_OUT_OF_MEMORY);
    /* module images new to the server: OPENMPS_CLIENT_MAX_IMAGES=2 */
    OK(cuModuleLoadData(&mod, "fakecubin\nbudget_a:8\n"));
    OK(cuModuleLoadData(&mod, "fakecubin\nbudget_b:8\n"));
    EXPECT_RC(cuModuleLoadData(&mod, "fakecubin\nbudget_c:8\n"), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuModuleLoadData(&mod, "fakecubin\nbudget_a:8\n")); /* loaded already: free */
    /* and the session goes on */
    OK(cuMemAlloc_v2(&p, sizeof(buf)));
    memset(buf, 0x3c, sizeof(buf));
    OK(cuMemcpyHtoD_v2(p, buf, sizeof(buf)));
    memset(buf, 0, sizeof(buf));
    OK(cuMemcpyDtoH_v2(buf, p, sizeof(buf)));
    EXPECT(buf[0] == 0x3c && buf[sizeof(buf) - 1] == 0x3c);
    printf("budgets ok\n");
}

static int big_image(size_t bytes);

/* A hostile client: takes all it can of every budget, says how much, then holds it. */
static void hostile(void)
{
    static CUstream st[100000];
    static CUevent ev[100000];
    int npinned = 0, ns = 0, ne = 0, nimg = 0, rc;
    void *h;
    CUmodule mod;
    char img[64];

    while (npinned < 100000 && cuMemHostAlloc(&h, 1 << 20, 0) == 0) {
        memset(h, 0x5a, 1 << 20);
        npinned++;
    }
    while (ns < 100000 && cuStreamCreate(&st[ns], 1) == 0)
        ns++;
    while (ne < 100000 && cuEventCreate(&ev[ne], 0) == 0)
        ne++;
    for (; nimg < 100000; nimg++) {
        snprintf(img, sizeof(img), "fakecubin\nk%d_%d:8\n", (int)getpid(), nimg);
        if (cuModuleLoadData(&mod, img) != 0)
            break;
    }
    rc = big_image(64u << 20);
    printf("hostile pinned_mib %d streams %d events %d images %d big_image %d\n", npinned, ns, ne,
           nimg, rc);
    fflush(stdout);
    sleep(60);
}

/* A module image of `bytes` bytes (one kernel, then lines the test double skips). */
static int big_image(size_t bytes)
{
    char *img = malloc(bytes + 1);
    CUmodule mod;
    int rc;

    EXPECT(img != NULL && bytes > 64);
    memset(img, 0, bytes + 1);
    strcpy(img, "fakecubin\nbig:8\n");
    for (size_t i = strlen(img); i + 4 <= bytes; i += 4)
        memcpy(img + i, "x:8\n", 4);
    rc = cuModuleLoadData(&mod, img);
    free(img);
    return rc;
}

/* syncthreads mode: a kernel of US microseconds on stream st, then cuStreamSynchronize of
 * that stream; returns the synchronize's milliseconds. */
static CUmodule sync_mod;
static CUfunction sync_sleep;
static CUstream sync_streams[2]; /* made first: a stream's creation may wait for kernels */

static long sleep_and_sync(unsigned us, CUstream st)
{
    void *args[] = {&us};
    struct timespec a, b;
    OK(cuLaunchKernel(sync_sleep, 1, 1, 1, 1, 1, 1, 0, st, args, NULL));
    clock_gettime(CLOCK_MONOTONIC, &a);
    OK(cuStreamSynchronize(st));
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (long)((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000);
}

static void *sync_second(void *arg)
{
    (void)arg;
    usleep(10000);
    printf("second_ms %ld\n", sleep_and_sync(1000, sync_streams[1]));
    fflush(stdout);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "roundtrip";
    CUdeviceptr p;
    static unsigned char buf[8 << 20];

    if (!strcmp(mode, "novisible")) { /* before setup: its cuInit fails */
        novisible_case(argc > 2 ? atoi(argv[2]) : 100);
        return 0;
    }
    setup();
    if (!strcmp(mode, "roundtrip")) {
        roundtrip();
    } else if (!strcmp(mode, "image") && argc > 2) { /* loads a module of one kernel, NAME */
        char image[128];
        CUmodule mod;
        CUfunction f;
        snprintf(image, sizeof(image), "fakecubin\n%.64s:8\n", argv[2]);
        OK(cuModuleLoadData(&mod, image));
        OK(cuModuleGetFunction(&f, mod, argv[2]));
        printf("image ok\n");
    } else if (!strcmp(mode, "hold")) {
        OK(cuMemAlloc_v2(&p, 4096));
        OK(cuMemsetD8_v2(p, 0x5a, 4096));
        printf("%llu\n", (unsigned long long)p);
        fflush(stdout);
        sleep(10);
    } else if (!strcmp(mode, "steal") && argc > 2) {
        p = strtoull(argv[2], NULL, 10);
        EXPECT_RC(cuMemcpyDtoH_v2(buf, p, 16), CUDA_ERROR_INVALID_VALUE);
        EXPECT_RC(cuMemcpyHtoD_v2(p, buf, 16), CUDA_ERROR_INVALID_VALUE);
        EXPECT_RC(cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE);
        printf("steal refused\n");
    } else if (!strcmp(mode, "legacy") && argc > 2) {
        /* a launch on a created stream, then a memset on the legacy default stream */
        static const char image[] = "fakecubin\nfill_u32:8,4,4\n";
        unsigned v = 1, n = 1;
        CUstream s;
        CUmodule mod;
        CUfunction fill;
        OK(cuMemAlloc_v2(&p, 4096));
        OK(cuStreamCreate(&s, (unsigned)atoi(argv[2]))); /* 0 blocking, 1 non-blocking */
        OK(cuModuleLoadData(&mod, image));
        OK(cuModuleGetFunction(&fill, mod, "fill_u32"));
        void *args[] = {&p, &v, &n};
        OK(cuMemsetD8_v2(p, 0, 16));
        OK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        OK(cuMemsetD8_v2(p, 0, 16));
        OK(cuCtxSynchronize());
        printf("legacy ok\n");
    } else if (!strcmp(mode, "fault")) {
        /* a kernel that faults: the error reaches this client at its next sync */
        static const char image[] = "fakecubin\nfault:4\n";
        unsigned n = 1;
        CUmodule mod;
        CUfunction f;
        OK(cuModuleLoadData(&mod, image));
        OK(cuModuleGetFunction(&f, mod, "fault"));
        void *args[] = {&n};
        OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        CUresult rc = cuCtxSynchronize();
        printf("fault %d\n", rc);
        return rc == 700 ? 0 : 1;
    } else if (!strcmp(mode, "shortargs")) {
        /* NCCL's launches: a kernel whose last parameter is large, given by the bytes in use
         * (CU_LAUNCH_PARAM_BUFFER_SIZE shorter than its parameters), by cuLaunchKernel and
         * cuLaunchKernelEx: they run, and the synchronisation after them succeeds */
        static const char image[] = "fakecubin\nfill_u32:8,4,4,4096\n";
        unsigned char args[16];
        unsigned v = 7, n = 64, got[64];
        size_t used = sizeof(args);
        CUmodule mod;
        CUfunction fill;
        OK(cuMemAlloc_v2(&p, 4096));
        OK(cuModuleLoadData(&mod, image));
        OK(cuModuleGetFunction(&fill, mod, "fill_u32"));
        memcpy(args, &p, 8), memcpy(args + 8, &v, 4), memcpy(args + 12, &n, 4);
        void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, args, CU_LAUNCH_PARAM_BUFFER_SIZE, &used,
                         CU_LAUNCH_PARAM_END};
        OK(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, extra));
        OK(cuCtxSynchronize());
        OK(cuMemcpyDtoH_v2(got, p, sizeof(got)));
        EXPECT(got[0] == 7 && got[63] == 7);
        v = 9, memcpy(args + 8, &v, 4);
        CUlaunchConfig cfg = {.gridDimX = 1,
                              .gridDimY = 1,
                              .gridDimZ = 1,
                              .blockDimX = 32,
                              .blockDimY = 1,
                              .blockDimZ = 1};
        OK(cuLaunchKernelEx(&cfg, fill, NULL, extra));
        OK(cuCtxSynchronize());
        OK(cuMemcpyDtoH_v2(got, p, sizeof(got)));
        EXPECT(got[0] == 9 && got[63] == 9);
        printf("shortargs ok\n");
    } else if (!strcmp(mode, "assert")) {
        /* a kernel whose assert fails, after one that prints: the synchronisation answers
         * CUDA_ERROR_ASSERT, the printf line is on stdout and the driver's assert message on
         * stderr, before the call returns */
        static const char image[] = "fakecubin\n.extern .func vprintf\nprintf:4\nassert:4\n";
        unsigned v = 12345, n = 7;
        CUmodule mod;
        CUfunction fp, fa;
        OK(cuModuleLoadData(&mod, image));
        OK(cuModuleGetFunction(&fp, mod, "printf"));
        OK(cuModuleGetFunction(&fa, mod, "assert"));
        void *pargs[] = {&n}, *aargs[] = {&v};
        printf("host before\n");
        OK(cuLaunchKernel(fp, 1, 1, 1, 1, 1, 1, 0, NULL, pargs, NULL));
        OK(cuLaunchKernel(fa, 16, 1, 1, 256, 1, 1, 0, NULL, aargs, NULL));
        CUresult rc = cuCtxSynchronize();
        fprintf(stderr, "host after\n");
        printf("assert %d\n", rc);
        return rc == 710 ? 0 : 1;
    } else if (!strcmp(mode, "printf") && argc > 2) {
        /* a kernel that prints ARG: its line comes between the two of the host; "marked": its
         * image names vprintf (the server orders its lines), else it does not (not looked into) */
        static const char image[] = "fakecubin\nprintf:4\n";
        static const char marked[] = "fakecubin\n.extern .func vprintf\nprintf:4\n";
        unsigned n = (unsigned)atoi(argv[2]);
        CUmodule mod;
        CUfunction f;
        OK(cuModuleLoadData(&mod, argc > 3 && !strcmp(argv[3], "marked") ? marked : image));
        OK(cuModuleGetFunction(&f, mod, "printf"));
        void *args[] = {&n};
        printf("host before\n");
        OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        OK(cuCtxSynchronize());
        printf("host after\n");
        return 0;
    } else if (!strcmp(mode, "printf_stream") && argc > 2) {
        /* a printing kernel on a created stream, then that stream's synchronize (and, with "event",
         * an event's after another): its line comes between the two of the host, as natively */
        static const char image[] = "fakecubin\n.extern .func vprintf\nprintf:4\n";
        unsigned n = (unsigned)atoi(argv[2]);
        int event = argc > 3 && !strcmp(argv[3], "event");
        CUmodule mod;
        CUfunction f;
        CUstream st;
        CUevent ev;
        OK(cuModuleLoadData(&mod, image));
        OK(cuModuleGetFunction(&f, mod, "printf"));
        OK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
        OK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
        for (unsigned i = 0; i < 3; i++) {
            unsigned v = n + i;
            void *args[] = {&v};
            printf("host before %u\n", i);
            fflush(stdout);
            OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, st, args, NULL));
            if (event) {
                OK(cuEventRecord(ev, st));
                OK(cuEventSynchronize(ev));
            } else {
                OK(cuStreamSynchronize(st));
            }
            printf("host after %u\n", i);
            fflush(stdout);
        }
        return 0;
    } else if (!strcmp(mode, "printf_packed") && argc > 2) {
        /* a kernel that prints ARG, from a fatbin whose entry nvcc's way compresses (an LZ4 block:
         * "vprintf" is not in its bytes, "print" comes from a match); once the launch is in the
         * server (an answered call after it) it says "launched" and waits for a line on stdin
         * before it synchronizes: another client's synchronizing calls come in between */
        static const char text1[] = "fakecubin\nprintf:4\n.extern .func v";
        static uint8_t fat[16 + 64 + 64];
        uint8_t block[64];
        size_t b = 0, lits = sizeof(text1) - 1;
        block[b++] = 0xf2; /* 15+ literals, a match of 4 + 2 */
        block[b++] = (uint8_t)(lits - 15);
        memcpy(block + b, text1, lits);
        b += lits;
        uint16_t off = (uint16_t)(lits - 10); /* back to the "printf" of the kernel's line */
        memcpy(block + b, &off, 2);
        b += 2;
        block[b++] = 0x20; /* the last literals: "\n" and the NUL */
        block[b++] = '\n';
        block[b++] = 0;
        uint32_t magic = 0xBA55ED50u, eh = 64, packed = (uint32_t)b, arch = 90;
        uint16_t version = 1, hsize = 16, kind = 1;
        uint64_t stored = (b + 7) & ~(size_t)7, body = 64 + stored, flags = 0x2011,
                 size = lits + 6 + 2;
        memcpy(fat, &magic, 4);
        memcpy(fat + 4, &version, 2);
        memcpy(fat + 6, &hsize, 2);
        memcpy(fat + 8, &body, 8);
        memcpy(fat + 16, &kind, 2);
        memcpy(fat + 16 + 4, &eh, 4);
        memcpy(fat + 16 + 8, &stored, 8);
        memcpy(fat + 16 + 16, &packed, 4);
        memcpy(fat + 16 + 28, &arch, 4);
        memcpy(fat + 16 + 40, &flags, 8);
        memcpy(fat + 16 + 56, &size, 8);
        memcpy(fat + 16 + 64, block, b);
        if (memmem(fat, sizeof(fat), "vprintf", 7) != NULL)
            return 1;
        unsigned n = (unsigned)atoi(argv[2]);
        char line[16];
        CUmodule mod;
        CUfunction f;
        OK(cuModuleLoadData(&mod, fat));
        OK(cuModuleGetFunction(&f, mod, "printf"));
        void *args[] = {&n};
        OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        OK(cuMemAlloc_v2(&p, 4096));
        printf("launched\n");
        fflush(stdout);
        if (!fgets(line, sizeof(line), stdin))
            return 1;
        OK(cuCtxSynchronize());
        printf("host after\n");
        return 0;
    } else if (!strcmp(mode, "flusher")) {
        /* a client whose synchronizing calls make the driver print what is in its buffer */
        OK(cuMemAlloc_v2(&p, 4096));
        OK(cuMemsetD8_v2(p, 0, 4096));
        OK(cuCtxSynchronize());
        printf("flushed\n");
        return 0;
    } else if (!strcmp(mode, "printmany") && argc > 3) {
        /* N rounds of a printing kernel (BASE + i) and a synchronize: every line this client's */
        static const char image[] = "fakecubin\n.extern .func vprintf\nprintf:4\n";
        unsigned rounds = (unsigned)atoi(argv[2]), base = (unsigned)atoi(argv[3]);
        CUmodule mod;
        CUfunction f;
        OK(cuModuleLoadData(&mod, image));
        OK(cuModuleGetFunction(&f, mod, "printf"));
        for (unsigned i = 0; i < rounds; i++) {
            unsigned v = base + i;
            void *args[] = {&v};
            OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
            OK(cuCtxSynchronize());
        }
        printf("printmany ok\n");
        return 0;
    } else if (!strcmp(mode, "fork")) {
        /* a child cannot use its parent's session: CUDA_ERROR_NOT_INITIALIZED, as natively
         * (tests/cpu/fork_driver.c looks closer); the parent goes on */
        OK(cuMemAlloc_v2(&p, 4096));
        pid_t child = fork();
        if (child == 0) {
            CUdeviceptr q;
            _exit(cuMemAlloc_v2(&q, 4096) == CUDA_ERROR_NOT_INITIALIZED ? 0 : 1);
        }
        int status = 0;
        EXPECT(waitpid(child, &status, 0) == child && WIFEXITED(status) &&
               WEXITSTATUS(status) == 0);
        OK(cuMemsetD8_v2(p, 0x42, 4096));
        OK(cuMemcpyDtoH_v2(buf, p, 4096));
        EXPECT(buf[4095] == 0x42);
        printf("fork ok\n");
    } else if (!strcmp(mode, "threads")) {
        pthread_t t[8];
        void *bad;
        int failed = 0;
        for (int i = 0; i < 8; i++)
            EXPECT(pthread_create(&t[i], NULL, copier, (void *)(intptr_t)i) == 0);
        for (int i = 0; i < 8; i++) {
            pthread_join(t[i], &bad);
            failed += bad != NULL;
        }
        EXPECT(failed == 0);
        printf("threads ok\n");
    } else if (!strcmp(mode, "cache")) {
        cache();
    } else if (!strcmp(mode, "streams2")) {
        streams2();
    } else if (!strcmp(mode, "fair") && argc > 2) {
        fair(atoi(argv[2]));
    } else if (!strcmp(mode, "chain")) {
        chain(argc > 2 ? atoi(argv[2]) : 2);
    } else if (!strcmp(mode, "bench") && argc > 2) {
        bench(atol(argv[2]));
    } else if (!strcmp(mode, "hostile")) {
        hostile();
    } else if (!strcmp(mode, "budgets")) {
        budgets();
    } else if (!strcmp(mode, "bigimage") && argc > 2) {
        printf("bigimage %d\n", big_image(strtoull(argv[2], NULL, 10)));
    } else if (!strcmp(mode, "pinned") && argc > 2) {
        /* pinned memory, written, then kept until the process ends (argv[3] "hold": 10 s) */
        void *h;
        size_t n = strtoull(argv[2], NULL, 10);
        OK(cuMemHostAlloc(&h, n, 0));
        memset(h, 0x77, n);
        printf("pinned\n");
        fflush(stdout);
        if (argc > 3 && !strcmp(argv[3], "hold"))
            sleep(10);
    } else if (!strcmp(mode, "pinned_nomap") && argc > 2) {
        /* pinned memory the server makes but this process cannot map (its address space capped
         * 64 MiB above what it uses): OUT_OF_MEMORY; then it holds its session until stdin ends */
        void *h;
        size_t n = strtoull(argv[2], NULL, 10);
        unsigned long long vm_kib = 0;
        char line[256];
        FILE *st = fopen("/proc/self/status", "r");
        while (st && fgets(line, sizeof(line), st))
            if (sscanf(line, "VmSize: %llu kB", &vm_kib) == 1)
                break;
        if (st)
            fclose(st);
        struct rlimit as = {(rlim_t)(vm_kib << 10) + (64u << 20), RLIM_INFINITY};
        EXPECT(vm_kib > 0 && setrlimit(RLIMIT_AS, &as) == 0);
        EXPECT_RC(cuMemHostAlloc(&h, n, 0), CUDA_ERROR_OUT_OF_MEMORY);
        printf("refused\n");
        fflush(stdout);
        while (fgets(line, sizeof(line), stdin))
            ;
    } else if (!strcmp(mode, "smallcopy")) {
        /* Small synchronous host-to-device copies (answered before their DMA ends, api/copies.c)
         * each followed by a device-to-host copy on another stream and a read back: each value
         * must arrive whole. Then a copy behind a kernel (FAKECUDA_KERNEL_MS) returns only after
         * the kernel: "waited MS"; a small copy just before the launch makes that check the
         * launch's own wait for the copies in flight (exec.c), without which the copy after it
         * would skip the wait for the stream. */
        static const char image[] = "fakecubin\nlong:4\n";
        unsigned v, t, r, bad = 0, one = 1;
        void *args[] = {&one};
        CUdeviceptr x, y;
        CUstream s2;
        CUmodule mod;
        CUfunction lng;
        struct timespec a, b;
        OK(cuMemAlloc_v2(&x, 4));
        OK(cuMemAlloc_v2(&y, 4));
        OK(cuMemsetD16_v2(y, 0x5555, 2));
        OK(cuStreamCreate(&s2, 1 /* non-blocking */));
        for (unsigned i = 0; i < 200; i++) {
            v = 0xa0000000u + i;
            OK(cuMemcpyHtoD_v2(x, &v, 4));
            OK(cuMemcpyDtoHAsync_v2(&t, y, 4, s2));
            OK(cuStreamSynchronize(s2));
            OK(cuMemcpyDtoH_v2(&r, x, 4));
            bad += t != 0x55555555u || r != v;
        }
        printf("smallcopy bad %u\n", bad);
        OK(cuModuleLoadData(&mod, image));
        OK(cuModuleGetFunction(&lng, mod, "long"));
        v = 6;
        OK(cuMemcpyHtoD_v2(x, &v, 4)); /* in flight when the launch comes */
        clock_gettime(CLOCK_MONOTONIC, &a);
        OK(cuLaunchKernel(lng, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        v = 7;
        OK(cuMemcpyHtoD_v2(x, &v, 4));
        clock_gettime(CLOCK_MONOTONIC, &b);
        OK(cuMemcpyDtoH_v2(&r, x, 4));
        printf("waited %ld value %u\n",
               (long)((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000), r);
    } else if (!strcmp(mode, "onecopy")) {
        /* One small synchronous copy, timed (with FAKECUDA_DMA_MS its DMA keeps the stream busy:
         * answered early, the call returns before the DMA ends), then read back. */
        unsigned v = 0x1234abcd, r = 0;
        CUdeviceptr x;
        struct timespec a, b;
        OK(cuMemAlloc_v2(&x, 4));
        clock_gettime(CLOCK_MONOTONIC, &a);
        OK(cuMemcpyHtoD_v2(x, &v, 4));
        clock_gettime(CLOCK_MONOTONIC, &b);
        OK(cuMemcpyDtoH_v2(&r, x, 4));
        printf("copy_ms %ld value_ok %d\n",
               (long)((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000), r == v);
    } else if (!strcmp(mode, "copyburst")) {
        /* 20 small synchronous copies in a row into one allocation, when each returned, then
         * read back whole: "burst_ms A B C ..." and "burst ok|bad". With FAKECUDA_DMA_MS each DMA
         * keeps the stream busy: copies in a row are answered without waiting for each other's
         * DMA (api/copies.c's slots), but for every OM_COPY_SLOTS (8)-th, which waits for the
         * slots to come free. */
        unsigned v[20], r[20];
        CUdeviceptr x;
        struct timespec a, b;
        OK(cuMemAlloc_v2(&x, sizeof(v)));
        printf("burst_ms"); /* each copy's return, ms after the first began */
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (unsigned i = 0; i < 20; i++) {
            v[i] = 0xb0000000u + i * 7;
            OK(cuMemcpyHtoD_v2(x + 4 * i, &v[i], 4));
            clock_gettime(CLOCK_MONOTONIC, &b);
            printf(" %ld",
                   (long)((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000));
        }
        printf("\n");
        OK(cuMemcpyDtoH_v2(r, x, sizeof(r)));
        printf("burst %s\n", memcmp(r, v, sizeof(v)) ? "bad" : "ok");
    } else if (!strcmp(mode, "syncword") || !strcmp(mode, "syncwait") ||
               !strcmp(mode, "syncheld")) {
        /* Each "NAME_ms MS rc RC cpu_us US", MS from before the launches to the synchronize's
         * return, US the calling thread's CPU time in it:
         * cuCtxSynchronize behind a kernel (FAKECUDA_KERNEL_MS) on one stream ("one"), with
         * nothing to wait for ("idle"), cuStreamSynchronize behind one ("stream"), cuCtxSynchronize
         * behind kernels on two streams ("two") and behind a kernel that failed and one after it
         * ("failed": the failure is the answer). syncwait: says "waiting" first and does "one"
         * only (another client may end the server meanwhile). syncheld: "one" only, by a client
         * with no stream of its own (one the scheduler may hold: server/sched.c). With the
         * completion word on "one" and "stream" are deferred to it (server/syncword.c), unless
         * SYNC_SCHED=blocking gives the primary context CU_CTX_SCHED_BLOCKING_SYNC (=yield:
         * CU_CTX_SCHED_YIELD). */
        static const char image[] = "fakecubin\nlong:4\nfail:4\nsleep:4\n";
        unsigned one = 1, ms1 = 1000;
        void *args[] = {&one}, *sargs[] = {&ms1};
        CUmodule mod;
        CUfunction lng, fail, slp;
        CUstream s2;
        struct timespec a, b, ca, cb; /* wall clock, the thread's CPU time */
        CUresult rc;
/* from here: the wall clock and the thread's CPU time; SYNC_LINE reads both again and says */
#define SYNC_START() clock_gettime(CLOCK_MONOTONIC, &a), clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ca)
#define SYNC_LINE(name)                                                                            \
    clock_gettime(CLOCK_MONOTONIC, &b), clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cb),               \
        printf(name "_ms %ld rc %d cpu_us %ld\n",                                                  \
               (long)((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000), (int)rc,  \
               (long)((cb.tv_sec - ca.tv_sec) * 1000000 + (cb.tv_nsec - ca.tv_nsec) / 1000))
        OK(cuModuleLoadData(&mod, image));
        OK(cuModuleGetFunction(&lng, mod, "long"));
        OK(cuModuleGetFunction(&fail, mod, "fail"));
        OK(cuModuleGetFunction(&slp, mod, "sleep"));
        const char *sched = getenv("SYNC_SCHED");
        if (sched) /* CU_CTX_SCHED_BLOCKING_SYNC 4, CU_CTX_SCHED_YIELD 2 */
            OK(cuDevicePrimaryCtxSetFlags_v2(0, !strcmp(sched, "blocking") ? 4 : 2));
        if (strcmp(mode, "syncheld"))
            OK(cuStreamCreate(&s2, 1 /* non-blocking */));
        OK(cuCtxSynchronize());
        if (!strcmp(mode, "syncwait")) {
            printf("waiting\n");
            fflush(stdout);
        }
        SYNC_START();
        OK(cuLaunchKernel(lng, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        rc = cuCtxSynchronize();
        SYNC_LINE("one");
        if (!strcmp(mode, "syncword")) {
            SYNC_START();
            rc = cuCtxSynchronize();
            SYNC_LINE("idle");
            SYNC_START();
            OK(cuLaunchKernel(lng, 1, 1, 1, 1, 1, 1, 0, s2, args, NULL));
            rc = cuStreamSynchronize(s2);
            SYNC_LINE("stream");
            SYNC_START();
            OK(cuLaunchKernel(lng, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
            OK(cuLaunchKernel(lng, 1, 1, 1, 1, 1, 1, 0, s2, args, NULL));
            rc = cuCtxSynchronize();
            SYNC_LINE("two");
            SYNC_START();
            OK(cuLaunchKernel(fail, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL)); /* posted: 701 later */
            OK(cuLaunchKernel(lng, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
            rc = cuCtxSynchronize();
            SYNC_LINE("failed");
            /* "again": s2, the last stream a call named, found idle by a synchronize, then a
             * kernel on it and a 1 ms one on the NULL stream: the synchronize waits for both
             * (the server queries only streams calls named since they were idle: route.c) */
            OK(cuStreamSynchronize(s2));
            OK(cuCtxSynchronize());
            SYNC_START();
            OK(cuLaunchKernel(lng, 1, 1, 1, 1, 1, 1, 0, s2, args, NULL));
            OK(cuLaunchKernel(slp, 1, 1, 1, 1, 1, 1, 0, NULL, sargs, NULL));
            rc = cuCtxSynchronize();
            SYNC_LINE("again");
        }
#undef SYNC_LINE
#undef SYNC_START
    } else if (!strcmp(mode, "syncthreads")) {
        /* Two threads, one word: the first synchronizes a stream behind a kernel of 40 ms (within
         * the client's 50 ms of spinning), the second, 10 ms later, another stream behind one of
         * 1 ms. The second's word would land first; the first must still wait for its own kernel
         * ("first_ms MS", "second_ms MS"). */
        static const char image[] = "fakecubin\nsleep:4\n";
        pthread_t t;
        OK(cuModuleLoadData(&sync_mod, image));
        OK(cuModuleGetFunction(&sync_sleep, sync_mod, "sleep"));
        OK(cuStreamCreate(&sync_streams[0], 1 /* non-blocking */));
        OK(cuStreamCreate(&sync_streams[1], 1));
        OK(cuCtxSynchronize()); /* the word is mapped (asked once) */
        EXPECT(pthread_create(&t, NULL, sync_second, NULL) == 0);
        printf("first_ms %ld\n", sleep_and_sync(40000, sync_streams[0]));
        pthread_join(t, NULL);
    } else if (!strcmp(mode, "faultnow")) {
        /* A kernel that faults (the double's fill_u32 of 0xdeadbeef): the server ends. */
        static const char image[] = "fakecubin\nfill_u32:8,4,4\n";
        unsigned v = 0xdeadbeefu, n = 1;
        CUdeviceptr x;
        CUmodule mod;
        CUfunction fill;
        OK(cuMemAlloc_v2(&x, 64));
        OK(cuModuleLoadData(&mod, image));
        OK(cuModuleGetFunction(&fill, mod, "fill_u32"));
        void *args[] = {&x, &v, &n};
        OK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        printf("fault rc %d\n", (int)cuCtxSynchronize());
    } else if (!strcmp(mode, "busy")) {
        /* says "ready", and at a line on stdin launches one kernel on its stream
         * (FAKECUDA_KERNEL_MS keeps the stream busy), says "busy", and holds its session until
         * stdin ends */
        static const char image[] = "fakecubin\nlong:4\n";
        unsigned v = 1;
        void *args[] = {&v};
        CUmodule mod;
        CUfunction lng;
        OK(cuModuleLoadData(&mod, image));
        OK(cuModuleGetFunction(&lng, mod, "long"));
        printf("ready\n");
        fflush(stdout);
        for (int ch = getchar(); ch != EOF && ch != '\n'; ch = getchar())
            ;
        OK(cuLaunchKernel(lng, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        printf("busy\n");
        fflush(stdout);
        while (getchar() != EOF)
            ;
    } else if (!strcmp(mode, "pinmany") && argc > 3) {
        /* pinned regions of SIZE until COUNT or the first refusal, each written and one copied
         * from; says how many and the refusal's CUresult (0: none), then holds them until stdin
         * ends (the test kills it or closes it) */
        int want = atoi(argv[2]), n = 0, rc = 0;
        size_t size = strtoull(argv[3], NULL, 10);
        struct timespec t0, t1;
        void *h;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (n < want && (rc = cuMemHostAlloc(&h, size, 0)) == 0) {
            memset(h, 0x6b, size);
            n++;
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        OK(cuMemAlloc_v2(&p, 4096)); /* the session goes on */
        if (n > 0) {
            OK(cuMemcpyHtoD_v2(p, h, 16));
            OK(cuMemcpyDtoH_v2(buf, p, 16));
            EXPECT(buf[0] == 0x6b && buf[15] == 0x6b);
        }
        printf("pinmany %d rc %d ms %ld\n", n, rc,
               (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000));
        fflush(stdout);
        while (getchar() != EOF)
            ;
    } else if (!strcmp(mode, "manyallocs") && argc > 2) {
        /* allocations, each checked through cuMemcpy (unified addressing: the shim must know
         * it is device memory); one the shim cannot record must be refused, not handed out */
        int n = atoi(argv[2]), refused = 0;
        static unsigned char in[256], out[256];
        for (int i = 0; i < n; i++) {
            CUresult rc = cuMemAlloc_v2(&p, sizeof(in));
            EXPECT(rc == 0 || rc == 2);
            if (rc) {
                refused++;
                continue;
            }
            memset(in, i & 0xff, sizeof(in));
            OK(cuMemcpy(p, (CUdeviceptr)(uintptr_t)in, sizeof(in)));
            OK(cuMemcpy((CUdeviceptr)(uintptr_t)out, p, sizeof(out)));
            EXPECT(!memcmp(in, out, sizeof(in)));
        }
        printf("manyallocs ok refused %d\n", refused);
    } else if (!strcmp(mode, "register") && argc > 2) {
        /* the program's own pages, registered, used, unregistered, N times */
        int n = atoi(argv[2]);
        for (int i = 0; i < n; i++) {
            void *m = NULL;
            EXPECT(posix_memalign(&m, 4096, 1 << 20) == 0);
            memset(m, i & 0xff, 1 << 20);
            OK(cuMemHostRegister_v2(m, 1 << 20, 0));
            OK(cuMemAlloc_v2(&p, 1 << 20));
            OK(cuMemcpyHtoD_v2(p, m, 1 << 20));
            OK(cuMemHostUnregister(m));
            OK(cuMemFree_v2(p));
            free(m);
        }
        printf("register ok\n");
    } else if (!strcmp(mode, "roundtrips") && argc > 2) {
        /* N asynchronous sets of its own memory on a stream and N SM-count queries, which need
         * no answer (the server's log counts the calls it answered), then the sets' result;
         * a set past the allocation's end and one of pinned host memory, which are answered */
        enum { WORDS = 1024 };
        int n = atoi(argv[2]), sms = 0, first = -1;
        EXPECT(n >= 1 && n <= WORDS);
        static unsigned back[WORDS];
        unsigned *host;
        CUdeviceptr hp;
        CUstream st;
        OK(cuMemAlloc_v2(&p, WORDS * 4));
        OK(cuStreamCreate(&st, 1)); /* CU_STREAM_NON_BLOCKING */
        for (int i = 0; i < n; i++) {
            OK(cuMemsetD32Async(p + (i % WORDS) * 4, 1000 + i, WORDS - i % WORDS, st));
            OK(cuDeviceGetAttribute(&sms, 16, 0));
            EXPECT(first < 0 || sms == first);
            first = sms;
        }
        EXPECT(cuMemsetD32Async(p + 4, 5, WORDS, st) == 1); /* CUDA_ERROR_INVALID_VALUE */
        OK(cuStreamSynchronize(st));
        OK(cuMemcpyDtoH_v2(back, p, sizeof(back)));
        for (int w = 0; w < WORDS; w++) /* the last set that reached word w, in order */
            EXPECT(back[w] == 1000u + (unsigned)(w < n ? w : n - 1));
        OK(cuMemHostAlloc((void **)&host, 64, 0x2)); /* CU_MEMHOSTALLOC_DEVICEMAP */
        OK(cuMemHostGetDevicePointer_v2(&hp, host, 0));
        OK(cuMemsetD32Async(hp, 7, 16, st));
        OK(cuStreamSynchronize(st));
        EXPECT(host[0] == 7 && host[15] == 7);
        printf("roundtrips ok sms %d\n", sms);
    } else if (!strcmp(mode, "managed_taken")) {
        /* The address the server will answer for the next managed allocation, taken in this
         * process (the double's reserves follow each other: FAKECUDA_VMM=1): the shim asks for
         * another, and the memory works on both sides. Says "predicted" when the next answer
         * was the one blocked (the test then expects the shim's line about it). */
        CUdeviceptr m1, m2, m3;
        size_t stride;
        void *block;
        OK(cuMemAllocManaged(&m1, 1 << 20, 1));
        OK(cuMemAllocManaged(&m2, 1 << 20, 1));
        EXPECT(m2 > m1);
        stride = (size_t)(m2 - m1);
        block = mmap((void *)(uintptr_t)(m2 + stride), 3 * stride, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        EXPECT(block == (void *)(uintptr_t)(m2 + stride));
        OK(cuMemAllocManaged(&m3, 1 << 20, 1));
        EXPECT(m3 < m2 + stride || m3 >= m2 + 4 * stride);   /* not in the block */
        ((volatile unsigned char *)(uintptr_t)m3)[0] = 0x5a; /* its shadow */
        OK(cuMemsetD8_v2(m3 + 1, 0x33, 1));
        OK(cuCtxSynchronize());
        EXPECT(((unsigned char *)(uintptr_t)m3)[0] == 0x5a &&
               ((unsigned char *)(uintptr_t)m3)[1] == 0x33);
        OK(cuMemFree_v2(m3));
        OK(cuMemFree_v2(m2));
        OK(cuMemFree_v2(m1));
        munmap(block, 3 * stride);
        printf("managed_taken ok%s\n", m3 >= m2 + 4 * stride ? " predicted" : "");
    } else if (!strcmp(mode, "eventflags")) {
        CUevent e;
        OK(cuEventCreate(&e, 0));
        OK(cuEventRecordWithFlags(e, NULL, 1)); /* CU_EVENT_RECORD_EXTERNAL */
        OK(cuEventSynchronize(e));
        printf("eventflags ok\n");
    } else if (!strcmp(mode, "until_ended")) {
        /* reports the error that ends the session (terminate_client, the server's end) */
        CUresult rc;
        OK(cuMemAlloc_v2(&p, 4096));
        printf("ready\n");
        fflush(stdout);
        for (int i = 0; i < 3000 && (rc = cuCtxSynchronize()) == 0; i++)
            usleep(10000);
        printf("ended %d\n", rc);
    } else if (!strcmp(mode, "errors")) { /* remote_errors.c */
        errors_case();
    } else if (!strcmp(mode, "contexts")) { /* remote_contexts.c */
        contexts_case();
    } else if (!strcmp(mode, "contexts_bus")) {
        contexts_bus_case();
    } else if (!strcmp(mode, "share")) { /* remote_share.c */
        share_case();
    } else if (!strcmp(mode, "order")) { /* remote_order.c */
        order_case();
    } else if (!strcmp(mode, "devices")) {
        devices_case();
    } else if (!strcmp(mode, "visible")) {
        visible_case();
    } else if (!strcmp(mode, "partition")) {
        partition_case();
    } else if (!strcmp(mode, "priority")) {
        priority_case();
    } else if (!strcmp(mode, "green")) { /* remote_green.c */
        green_case();
    } else if (!strcmp(mode, "green_hold")) {
        green_hold_case();
    } else if (!strcmp(mode, "green_steal") && argc > 6) {
        green_steal_case(argv + 2);
    } else if (!strcmp(mode, "legacy")) { /* remote_legacy.c */
        legacy_case();
    } else if (!strcmp(mode, "v1")) { /* remote_v1.c */
        v1_case(argc > 2 && !strcmp(argv[2], "low"));
    } else if (!strcmp(mode, "copyloop")) {
        OK(cuMemAlloc_v2(&p, sizeof(buf)));
        printf("copying\n");
        fflush(stdout);
        for (;;) {
            OK(cuMemcpyHtoD_v2(p, buf, sizeof(buf)));
            OK(cuMemcpyDtoH_v2(buf, p, sizeof(buf)));
        }
    } else {
        fprintf(stderr,
                "usage: remote_driver roundtrip|hold|steal ADDR|legacy "
                "FLAGS|fault|assert|fork|threads|chain [PAIRS]|streams2|cache|bench N|copyloop\n");
        return 2;
    }
    return 0;
}
