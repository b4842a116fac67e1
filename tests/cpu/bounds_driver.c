/* SPDX-License-Identifier: MIT */
/* Range checks of copies and sets, through the shim against a server on the driver test double:
 *   bounds-driver htod       host-to-device copies whose device range runs past its allocation,
 *                            from a host buffer of exactly the allocation's size that ends at a
 *                            guard page (PROT_NONE): each is refused with
 *                            CUDA_ERROR_INVALID_VALUE, as natively, and reads no host byte past
 *                            the buffer (that would be SIGSEGV); the same buffer copied within
 *                            range arrives whole
 *   bounds-driver memset2d   2D sets: the pitch of a single row is unused (as the driver
 *                            documents), rows of no element set nothing however many rows
 *                            (the server does not walk 2^40 of them), overlapping rows are
 *                            refused
 *   bounds-driver time N     N host-to-device copies of 64 bytes; prints nanoseconds per copy
 * Exit status 0 and "MODE ok" when every check passed; the first failed check is printed. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxSynchronize(void);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemcpy(CUdeviceptr, CUdeviceptr, size_t);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr, const void *, size_t, CUstream);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *);
CUresult cuMemsetD2D8_v2(CUdeviceptr, size_t, unsigned char, size_t, size_t);
CUresult cuMemsetD2D16_v2(CUdeviceptr, size_t, unsigned short, size_t, size_t);
CUresult cuMemsetD2D32_v2(CUdeviceptr, size_t, unsigned, size_t, size_t);

/* n bytes (i * 13 + 5) that end where a PROT_NONE page begins. */
static unsigned char *guarded(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), span = (n + page - 1) / page * page;
    unsigned char *m =
        mmap(NULL, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    EXPECT(m != MAP_FAILED);
    EXPECT(mprotect(m + span, page, PROT_NONE) == 0);
    unsigned char *buf = m + span - n;
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)(i * 13 + 5);
    return buf;
}

/* One size: an allocation of n bytes and a guarded host buffer of n bytes. */
static void htod_size(size_t n)
{
    unsigned char *buf = guarded(n), *back = malloc(n);
    CUdeviceptr d;
    size_t off = 512;

    EXPECT(back);
    OK(cuMemAlloc_v2(&d, n));
    /* Past the end by a page, then by one byte: refused, the host bytes never read. */
    EXPECT_RC(cuMemcpyHtoD_v2(d, buf, n + 4096), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemcpyHtoD_v2(d, buf, n + 1), CUDA_ERROR_INVALID_VALUE);
    /* From inside the allocation, the buffer's length: past its end by `off`. */
    EXPECT_RC(cuMemcpyHtoD_v2(d + off, buf, n), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemcpyHtoDAsync_v2(d + off, buf, n, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemcpy(d + off, (CUdeviceptr)(uintptr_t)buf, n), CUDA_ERROR_INVALID_VALUE);
    /* A 2D copy of 4 rows from the second row on: its last row runs past the allocation, and
     * past the host buffer into the guard page. */
    CUDA_MEMCPY2D c2 = {.srcMemoryType = 1, /* host */
                        .srcHost = buf,
                        .srcY = 1,
                        .srcPitch = n / 4,
                        .dstMemoryType = 2, /* device */
                        .dstDevice = d,
                        .dstY = 1,
                        .dstPitch = n / 4,
                        .WidthInBytes = n / 4,
                        .Height = 4};
    EXPECT_RC(cuMemcpy2D_v2(&c2), CUDA_ERROR_INVALID_VALUE);
    /* Nothing was written by the refused copies; the whole buffer in range arrives whole. */
    OK(cuMemcpyHtoD_v2(d, buf, n));
    OK(cuMemcpyDtoH_v2(back, d, n));
    EXPECT(memcmp(back, buf, n) == 0);
    OK(cuMemFree_v2(d));
    free(back);
}

static void htod(void)
{
    /* the copy's bytes inline in the request, through the ring in pieces, through the staging
     * area */
    size_t sizes[] = {1000, 4096, 64 << 10, 1 << 20, 9 << 20};

    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        htod_size(sizes[i]);
    OK(cuCtxSynchronize());
}

static void memset2d(void)
{
    CUdeviceptr d;
    unsigned char back[256];

    OK(cuMemAlloc_v2(&d, 4096));
    OK(cuMemsetD2D8_v2(d, 4096, 0, 4096, 1));
    /* One row: its pitch is unused, even 0. */
    OK(cuMemsetD2D8_v2(d, 0, 0x5A, 100, 1));
    OK(cuMemsetD2D16_v2(d + 100, 0, 0x7B7B, 10, 1));
    OK(cuMemcpyDtoH_v2(back, d, sizeof(back)));
    for (int i = 0; i < 256; i++)
        EXPECT(back[i] == (i < 100 ? 0x5A : i < 120 ? 0x7B : 0));
    /* Rows of no element set nothing, however many rows; no row sets nothing. */
    OK(cuMemsetD2D8_v2(d, 0, 1, 0, (size_t)1 << 40));
    OK(cuMemsetD2D16_v2(d, 2, 1, 0, (size_t)1 << 40));
    OK(cuMemsetD2D32_v2(d, 4, 1, 0, SIZE_MAX));
    OK(cuMemsetD2D32_v2(d, 4, 1, 16, 0));
    OK(cuMemcpyDtoH_v2(back, d, sizeof(back)));
    for (int i = 0; i < 256; i++)
        EXPECT(back[i] == (i < 100 ? 0x5A : i < 120 ? 0x7B : 0));
    /* Several rows wider than their pitch overlap; past the allocation: refused. */
    EXPECT_RC(cuMemsetD2D8_v2(d, 16, 1, 32, 2), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemsetD2D8_v2(d, 4096, 1, 16, 2), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemsetD2D8_v2(d, 0, 1, 4097, 1), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree_v2(d));
}

static void timed(long n)
{
    unsigned char buf[64] = {1};
    CUdeviceptr d;
    struct timespec a, b;

    OK(cuMemAlloc_v2(&d, 4096));
    OK(cuMemcpyHtoD_v2(d, buf, sizeof(buf)));
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++)
        OK(cuMemcpyHtoD_v2(d + (uint64_t)(i % 64) * 64, buf, sizeof(buf)));
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.0f ns per copy\n",
           ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)n);
    OK(cuMemFree_v2(d));
}

int main(int argc, char **argv)
{
    CUcontext ctx;

    if (argc < 2) {
        fprintf(stderr, "usage: bounds-driver htod|memset2d|time N\n");
        return 2;
    }
    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
    if (!strcmp(argv[1], "htod"))
        htod();
    else if (!strcmp(argv[1], "memset2d"))
        memset2d();
    else if (!strcmp(argv[1], "time") && argc > 2)
        timed(atol(argv[2]));
    else
        return 2;
    printf("%s ok\n", argv[1]);
    return 0;
}
