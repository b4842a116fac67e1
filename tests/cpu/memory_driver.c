/* SPDX-License-Identifier: MIT */
/* The memory family's driver-API program for the CPU tier (through the shim, against a server
 * on the driver test double):
 *   memory-driver pools              pools and stream-ordered allocation, hints; prints its
 *                                    default pool's handle, leaves one allocation and one pool
 *                                    for the session's end
 *   memory-driver export             allocates 1 MiB (bytes i & 0xff), prints "handle HEX POOL";
 *                                    then per stdin line: "free" frees it ("freed"), "exit"
 *   memory-driver vmm                the virtual memory management API; prints "vmm HANDLE VA
 *                                    GRANULARITY" of what it keeps, waits for "exit" on stdin
 *   memory-driver vmmforeign H VA G  is refused another client's handle and range
 *   memory-driver hints              managed-memory hints and cuMemRangeGetAttribute(s),
 *                                    cuPointerSetAttribute, cuMemcpy3DPeer(Async), batches
 *                                    of copies, cuMemGetHandleForAddressRange
 *   memory-driver memfree            cuMemGetInfo's free memory falls by an allocation, and
 *                                    comes back when it is freed (and kept by the server)
 *   memory-driver memkept            (a 64 MiB device) what the server keeps of freed memory
 *                                    goes to an allocation of another kind that needs it
 *   memory-driver import HEX POOL    opens the handle, checks the bytes, is refused what is not
 *                                    its own; waits for a stdin line, checks the bytes again,
 *                                    closes it
 * Exit status 0 when every check passed ("MODE ok"); the first failed check is printed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

typedef void *CUmemoryPool;

CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxGetCurrent(CUcontext *);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamSynchronize(CUstream);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, CUstream);
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned);
CUresult cuMemAllocPitch_v2(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
CUresult cuMemAllocHost_v2(void **, size_t);
CUresult cuMemHostAlloc(void **, size_t, unsigned);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuArrayCreate_v2(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
CUresult cuArrayDestroy(CUarray);
CUresult cuDeviceTotalMem_v2(size_t *, int);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemPoolCreate(CUmemoryPool *, const CUmemPoolProps *);
CUresult cuMemPoolDestroy(CUmemoryPool);
CUresult cuMemPoolSetAttribute(CUmemoryPool, int, void *);
CUresult cuMemPoolGetAttribute(CUmemoryPool, int, void *);
CUresult cuMemPoolSetAccess(CUmemoryPool, const CUmemAccessDesc *, size_t);
CUresult cuMemPoolGetAccess(int *, CUmemoryPool, CUmemLocation *);
CUresult cuMemPoolTrimTo(CUmemoryPool, size_t);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *, int);
CUresult cuDeviceGetMemPool(CUmemoryPool *, int);
CUresult cuDeviceSetMemPool(int, CUmemoryPool);
CUresult cuMemGetDefaultMemPool(CUmemoryPool *, CUmemLocation *, int);
CUresult cuMemGetMemPool(CUmemoryPool *, CUmemLocation *, int);
CUresult cuMemSetMemPool(CUmemLocation *, int, CUmemoryPool);
CUresult cuMemPrefetchAsync(CUdeviceptr, size_t, int, CUstream);
CUresult cuMemPrefetchAsync_v2(CUdeviceptr, size_t, CUmemLocation, unsigned, CUstream);
CUresult cuMemAdvise(CUdeviceptr, size_t, int, int);
CUresult cuMemAdvise_v2(CUdeviceptr, size_t, int, CUmemLocation);
CUresult cuIpcGetMemHandle(CUipcMemHandle *, CUdeviceptr);
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *, CUipcMemHandle, unsigned);
CUresult cuIpcCloseMemHandle(CUdeviceptr);
CUresult cuPointerGetAttribute(void *, int, CUdeviceptr);
CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuEventQuery(CUevent);
CUresult cuEventSynchronize(CUevent);
CUresult cuEventDestroy_v2(CUevent);
CUresult cuIpcGetEventHandle(CUipcMemHandle *, CUevent); /* the same 64 bytes as a memory one */
CUresult cuIpcOpenEventHandle(CUevent *, CUipcMemHandle);
CUresult cuMemGetAllocationGranularity(size_t *, const CUmemAllocationProp *, int);
CUresult cuMemCreate(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                     unsigned long long);
CUresult cuMemRelease(CUmemGenericAllocationHandle);
CUresult cuMemAddressReserve(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
CUresult cuMemAddressFree(CUdeviceptr, size_t);
CUresult cuMemMap(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
CUresult cuMemsetD8_v2(CUdeviceptr, unsigned char, size_t);
CUresult cuMemsetD32_v2(CUdeviceptr, unsigned, size_t);
CUresult cuMemUnmap(CUdeviceptr, size_t);
CUresult cuMemSetAccess(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
CUresult cuMemGetAccess(unsigned long long *, const CUmemLocation *, CUdeviceptr);
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *, void *);
CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *,
                                                CUmemGenericAllocationHandle);

static void setup(void)
{
    CUcontext ctx;

    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
}

static void round_trip(CUdeviceptr d, size_t n, unsigned char seed)
{
    unsigned char *a = malloc(n), *b = malloc(n);

    for (size_t i = 0; i < n; i++)
        a[i] = (unsigned char)(i * 7 + seed);
    OK(cuMemcpyHtoD_v2(d, a, n));
    OK(cuMemcpyDtoH_v2(b, d, n));
    EXPECT_MSG(!memcmp(a, b, n), "bytes came back");
    free(a);
    free(b);
}

/* More memory than the device holds, from every allocation entry point: OUT_OF_MEMORY, as the
 * driver answers (PyTorch's out-of-memory message and its retry after freeing rely on it), both
 * past what the server takes to the driver (800 000 000 GiB) and below it (1 TiB, refused by
 * the driver); nothing is left behind (the next allocation and synchronisation succeed). */
static void huge_sizes(CUstream st, CUmemoryPool pool)
{
    const size_t sizes[] = {800000000ull << 30, 1ull << 40};
    CUdeviceptr d = 0;
    size_t pitch = 0;
    void *h = NULL;

    for (int i = 0; i < 2; i++) {
        size_t n = sizes[i];
        EXPECT_RC(cuMemAlloc_v2(&d, n), CUDA_ERROR_OUT_OF_MEMORY);
        EXPECT_RC(cuMemAllocManaged(&d, n, 1), CUDA_ERROR_OUT_OF_MEMORY);
        EXPECT_RC(cuMemAllocAsync(&d, n, st), CUDA_ERROR_OUT_OF_MEMORY);
        EXPECT_RC(cuMemAllocFromPoolAsync(&d, n, pool, st), CUDA_ERROR_OUT_OF_MEMORY);
        EXPECT_RC(cuMemAllocPitch_v2(&d, &pitch, n / 4096, 4096, 4), CUDA_ERROR_OUT_OF_MEMORY);
        EXPECT_RC(cuMemHostAlloc(&h, n, 0), CUDA_ERROR_OUT_OF_MEMORY);
        EXPECT_RC(cuMemAllocHost_v2(&h, n), CUDA_ERROR_OUT_OF_MEMORY);
    }
    EXPECT_RC(cuMemAllocPitch_v2(&d, &pitch, SIZE_MAX / 2, 4, 4), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_MSG(d == 0 && h == NULL, "nothing answered");
    OK(cuStreamSynchronize(st));
    OK(cuMemAlloc_v2(&d, 4096));
    OK(cuMemFree_v2(d));
}

static int pools(void)
{
    CUmemoryPool def = NULL, cur = NULL, p1 = NULL, p2 = NULL, extra[8];
    CUmemLocation dev0 = {1, 0}, host = {2, 0};
    CUmemPoolProps props = {.allocType = 1, .location = {1, 0}};
    CUmemAccessDesc acc = {{1, 0}, 3};
    CUdeviceptr a = 0, b = 0, c = 0, keep = 0;
    CUstream st;
    unsigned long long v = 0;
    int iv = 0, flags = 0, n;
    CUresult rc;

    setup();
    OK(cuStreamCreate(&st, 1));
    OK(cuDeviceGetDefaultMemPool(&def, 0));
    huge_sizes(st, def);
    EXPECT_MSG(def != NULL, "a default pool");
    OK(cuDeviceGetMemPool(&cur, 0));
    EXPECT_MSG(cur == def, "the current pool is the default one");
    OK(cuMemGetDefaultMemPool(&cur, &dev0, 1));
    EXPECT_MSG(cur == def, "the 13.0 name answers the same pool");
    EXPECT_RC(cuMemGetDefaultMemPool(&cur, &host, 1), CUDA_ERROR_NOT_SUPPORTED);
    EXPECT_RC(cuDeviceGetDefaultMemPool(&cur, 7), CUDA_ERROR_INVALID_DEVICE);
    v = 12345;
    OK(cuMemPoolSetAttribute(def, 4, &v)); /* release threshold */
    v = 0;
    OK(cuMemPoolGetAttribute(def, 4, &v));
    EXPECT_MSG(v == 12345, "release threshold %llu", v);
    iv = 1;
    OK(cuMemPoolSetAttribute(def, 2, &iv));
    EXPECT_RC(cuMemPoolSetAttribute(def, 5, &v),
              CUDA_ERROR_INVALID_VALUE); /* reserved-current: read only */
    EXPECT_RC(cuMemPoolGetAttribute(def, 99, &v), CUDA_ERROR_INVALID_VALUE);

    /* stream-ordered memory, usable by copies, freed both ways */
    OK(cuMemAllocAsync(&a, 3000, st));
    OK(cuStreamSynchronize(st));
    round_trip(a, 3000, 1);
    OK(cuMemFreeAsync(a, st));
    EXPECT_RC(cuMemcpyHtoD_v2(a, &v, 8), CUDA_ERROR_INVALID_VALUE); /* gone */
    EXPECT_RC(cuMemFreeAsync(a, st), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemAllocAsync(&b, 5000, NULL));
    round_trip(b, 5000, 2);
    CUmemoryPool got_pool = NULL;
    OK(cuPointerGetAttribute(&got_pool, 17, b + 100)); /* CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE */
    EXPECT_MSG(got_pool == def, "stream-ordered memory names its pool (the client's default)");
    OK(cuMemFree_v2(b)); /* the driver allows cuMemFree of stream-ordered memory */
    EXPECT_RC(cuMemAllocAsync(&c, 0, st), CUDA_ERROR_INVALID_VALUE);

    /* a pool of its own */
    OK(cuMemPoolCreate(&p1, &props));
    props.handleTypes = 2; /* a Win32 handle: not on Linux (a POSIX one: shareable_driver.c) */
    EXPECT_RC(cuMemPoolCreate(&p2, &props), CUDA_ERROR_NOT_SUPPORTED);
    props.handleTypes = 0;
    OK(cuMemPoolSetAccess(p1, &acc, 1));
    EXPECT_RC(cuMemPoolSetAccess(p1, &acc, 65),
              CUDA_ERROR_INVALID_VALUE); /* past the row's maximum */
    OK(cuMemPoolGetAccess(&flags, p1, &dev0));
    EXPECT_MSG(flags == 3, "access flags %d", flags);
    OK(cuMemAllocFromPoolAsync(&c, 4096, p1, st));
    round_trip(c, 4096, 3);
    OK(cuPointerGetAttribute(&got_pool, 17, c));
    EXPECT_MSG(got_pool == p1, "memory from a pool names that pool");
    OK(cuMemPoolTrimTo(p1, 777));
    OK(cuMemSetMemPool(&dev0, 1, p1));
    OK(cuDeviceGetMemPool(&cur, 0));
    EXPECT_MSG(cur == p1, "the current pool is set");
    OK(cuMemAllocAsync(&keep, 100, st)); /* from p1, left for the session's end */
    OK(cuMemFreeAsync(c, st));
    EXPECT_RC(cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE); /* the default pool stays */
    OK(cuMemPoolCreate(&p2, &props));
    OK(cuMemPoolDestroy(p2));
    EXPECT_RC(cuMemPoolTrimTo(p2, 0), CUDA_ERROR_INVALID_HANDLE); /* destroyed: no longer its own */
    OK(cuMemGetMemPool(&cur, &dev0, 1));
    EXPECT_MSG(cur == p1, "still p1");

    /* handles that are not pools of its own */
    EXPECT_RC(cuMemPoolTrimTo((CUmemoryPool)(uintptr_t)0x1234, 0), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuMemAllocFromPoolAsync(&c, 64, (CUmemoryPool)(uintptr_t)0x1234, st),
              CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuDeviceSetMemPool(0, (CUmemoryPool)(uintptr_t)0x1234), CUDA_ERROR_INVALID_HANDLE);

    /* hints: its own range only */
    OK(cuMemAlloc_v2(&a, 1 << 20));
    OK(cuMemPrefetchAsync(a, 4096, 0, st));
    OK(cuMemPrefetchAsync_v2(a + 100, 1000, dev0, 0, st));
    OK(cuMemAdvise(a, 1 << 20, 1, 0));
    OK(cuMemAdvise_v2(a, 64, 3, dev0));
    EXPECT_RC(cuMemAdvise(a, 64, 99, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemPrefetchAsync(a, (1 << 20) + 1, 0, st), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemPrefetchAsync(0x1000, 16, 0, st), CUDA_ERROR_INVALID_VALUE);

    /* the budget of pools (OPENMPS_CLIENT_MAX_HANDLES when the test sets it) */
    for (n = 0; n < 8; n++)
        if ((rc = cuMemPoolCreate(&extra[n], &props)) != 0)
            break;
    EXPECT_MSG(n == 8 || rc == CUDA_ERROR_OUT_OF_MEMORY, "a refused pool: %d", rc);
    printf("created %d more pool(s)\n", n);
    OK(cuStreamSynchronize(st));
    printf("pool %llu\n", (unsigned long long)(uintptr_t)def);
    printf("pools ok\n");
    fflush(stdout);
    return 0;
}

static int export(void)
{
    CUdeviceptr d = 0;
    CUipcMemHandle h, h2;
    CUmemoryPool def = NULL;
    CUstream st;
    unsigned char *bytes = malloc(1 << 20);
    char line[64];

    setup();
    OK(cuStreamCreate(&st, 1));
    OK(cuDeviceGetDefaultMemPool(&def, 0));
    huge_sizes(st, def);
    OK(cuMemAlloc_v2(&d, 1 << 20));
    for (int i = 0; i < 1 << 20; i++)
        bytes[i] = (unsigned char)i;
    OK(cuMemcpyHtoD_v2(d, bytes, 1 << 20));
    OK(cuIpcGetMemHandle(&h, d));
    OK(cuIpcGetMemHandle(&h2, d + 4096)); /* within: the same allocation, the same handle */
    EXPECT_MSG(!memcmp(&h, &h2, sizeof(h)), "one handle per allocation");
    EXPECT_RC(cuIpcOpenMemHandle_v2(&d, h, 1),
              CUDA_ERROR_INVALID_CONTEXT); /* its own handle: CUDA_ERROR_INVALID_CONTEXT */
    EXPECT_RC(cuIpcGetMemHandle(&h2, 0x1000), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr pa = 0;
    OK(cuMemAllocAsync(&pa, 4096, st));
    EXPECT_RC(cuIpcGetMemHandle(&h2, pa),
              CUDA_ERROR_INVALID_VALUE); /* pool memory: cuMemPoolExportPointer */
    CUevent ev;
    CUipcMemHandle eh, eh2;
    OK(cuEventCreate(&ev, 0x6)); /* CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING */
    OK(cuIpcGetEventHandle(&eh, ev));
    OK(cuIpcGetEventHandle(&eh2, ev));
    EXPECT_MSG(!memcmp(&eh, &eh2, sizeof(eh)), "one handle per event");
    EXPECT_RC(cuIpcGetEventHandle(&eh2, (CUevent)(uintptr_t)0x1234),
              CUDA_ERROR_INVALID_HANDLE); /* not its event */
    printf("handle ");
    for (size_t i = 0; i < sizeof(h); i++)
        printf("%02x", (unsigned char)h.reserved[i]);
    printf(" %llu ", (unsigned long long)(uintptr_t)def);
    for (size_t i = 0; i < sizeof(eh); i++)
        printf("%02x", (unsigned char)eh.reserved[i]);
    printf("\n");
    fflush(stdout);
    while (fgets(line, sizeof(line), stdin)) {
        if (!strncmp(line, "free", 4)) {
            OK(cuMemFree_v2(d));
            printf("freed\n");
            fflush(stdout);
        } else if (!strncmp(line, "event", 5)) {
            /* the importer destroyed its hold of the event: it is still this client's */
            OK(cuEventRecord(ev, st));
            OK(cuEventSynchronize(ev));
            OK(cuEventDestroy_v2(ev));
            EXPECT_RC(cuEventQuery(ev), CUDA_ERROR_INVALID_HANDLE); /* gone for this client */
            printf("event ok\n");
            fflush(stdout);
        } else if (!strncmp(line, "exit", 4)) {
            break;
        }
    }
    printf("export ok\n");
    return 0;
}

static void unhex(const char *hex, CUipcMemHandle *h)
{
    for (int i = 0; i < 64; i++) {
        unsigned x;
        sscanf(hex + 2 * i, "%2x", &x);
        h->reserved[i] = (char)x;
    }
}

/* The exporter's event through its IPC handle: the same event, held here until destroyed. */
static int import_event(const char *hex)
{
    CUipcMemHandle h, bad;
    CUevent ev = NULL, ev2 = NULL;

    EXPECT_MSG(strlen(hex) == 128, "a 64-byte event handle");
    unhex(hex, &h);
    bad = h;
    bad.reserved[20] ^= 0x5a; /* another id */
    EXPECT_RC(cuIpcOpenEventHandle(&ev, bad), CUDA_ERROR_INVALID_VALUE);
    memset(&bad, 0, sizeof(bad));
    EXPECT_RC(cuIpcOpenEventHandle(&ev, bad), CUDA_ERROR_INVALID_VALUE);
    OK(cuIpcOpenEventHandle(&ev, h));
    OK(cuIpcOpenEventHandle(&ev2, h));
    EXPECT_MSG(ev == ev2, "the same event each time");
    OK(cuEventQuery(ev));
    OK(cuEventDestroy_v2(ev)); /* its hold only: the exporter's event lives on */
    EXPECT_RC(cuEventQuery(ev), CUDA_ERROR_INVALID_HANDLE);
    return 0;
}

static int import(const char *hex, const char *pool)
{
    CUipcMemHandle h, bad;
    CUdeviceptr d = 0, d2 = 0;
    CUmemoryPool foreign = (CUmemoryPool)(uintptr_t)strtoull(pool, NULL, 10);
    unsigned char *bytes = malloc(1 << 20);
    char line[64];
    unsigned long long v = 1;

    setup();
    EXPECT_MSG(strlen(hex) == 128, "a 64-byte handle");
    for (int i = 0; i < 64; i++) {
        unsigned x;
        sscanf(hex + 2 * i, "%2x", &x);
        h.reserved[i] = (char)x;
    }
    bad = h;
    bad.reserved[20] ^= 0x5a; /* another id */
    EXPECT_RC(cuIpcOpenMemHandle_v2(&d, bad, 1), CUDA_ERROR_INVALID_VALUE);
    memset(&bad, 0, sizeof(bad));
    EXPECT_RC(cuIpcOpenMemHandle_v2(&d, bad, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuIpcOpenMemHandle_v2(&d, h, 0x10), CUDA_ERROR_INVALID_VALUE); /* unknown flags */
    OK(cuIpcOpenMemHandle_v2(&d, h, 1));
    OK(cuIpcOpenMemHandle_v2(&d2, h, 1));
    EXPECT_MSG(d == d2, "the same address each time");
    OK(cuIpcCloseMemHandle(d2));
    OK(cuMemcpyDtoH_v2(bytes, d, 1 << 20));
    for (int i = 0; i < 1 << 20; i++)
        EXPECT_MSG(bytes[i] == (unsigned char)i, "byte %d of the exporter", i);
    EXPECT_RC(cuMemFree_v2(d), CUDA_ERROR_INVALID_VALUE); /* opened, not its own to free */
    /* the exporter's pool is not its own */
    EXPECT_RC(cuMemPoolTrimTo(foreign, 0), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuMemPoolSetAttribute(foreign, 4, &v), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuDeviceSetMemPool(0, foreign), CUDA_ERROR_INVALID_HANDLE);
    printf("opened\n");
    fflush(stdout);
    if (!fgets(line, sizeof(line), stdin))
        return 1;
    /* the exporter freed it meanwhile: it stays while open here */
    memset(bytes, 0, 1 << 20);
    OK(cuMemcpyDtoH_v2(bytes, d + 4096, 4096));
    for (int i = 0; i < 4096; i++)
        EXPECT_MSG(bytes[i] == (unsigned char)(i + 4096), "byte %d after the exporter's free", i);
    OK(cuIpcCloseMemHandle(d));
    EXPECT_RC(cuMemcpyDtoH_v2(bytes, d, 16),
              CUDA_ERROR_INVALID_VALUE); /* closed: no longer its memory */
    EXPECT_RC(cuIpcCloseMemHandle(d), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuIpcOpenMemHandle_v2(&d, h, 1),
              CUDA_ERROR_INVALID_VALUE); /* freed by its exporter */
    printf("import ok\n");
    return 0;
}

/* What NCCL asks at its start (ncclCuMemHostEnable, ncclCuMemAlloc): the granularity of host
 * memory of a NUMA node, shareable as a descriptor, then a probe of cuMemCreate there, refused
 * (the server's host memory is not the client's: NCCL falls back to shared memory of its own);
 * device memory with gpuDirectRDMACapable and a descriptor handle type is made, mapped and
 * opened to the device. */
static void nccl_like(size_t g)
{
    CUmemAllocationProp host = {.type = 1, .requestedHandleTypes = 1, .location = {3, 0}};
    CUmemAllocationProp dev = {.type = 1, .requestedHandleTypes = 1, .location = {1, 0}};
    CUmemAccessDesc acc = {{1, 0}, 3};
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr va = 0;
    size_t hg = 0, dg = 0;

    OK(cuMemGetAllocationGranularity(&hg, &host, 0));
    EXPECT_MSG(hg > 0, "a host granularity");
    host.location.type = 4; /* the calling thread's NUMA node */
    OK(cuMemGetAllocationGranularity(&hg, &host, 1));
    host.location.type = 2; /* the host */
    OK(cuMemGetAllocationGranularity(&hg, &host, 0));
    host.location.type = 3;
    EXPECT_RC(cuMemCreate(&h, hg, &host, 0), CUDA_ERROR_NOT_SUPPORTED);
    host.location.type = 9; /* no such location */
    EXPECT_RC(cuMemGetAllocationGranularity(&hg, &host, 0), CUDA_ERROR_INVALID_VALUE);
    dev.allocFlags.gpuDirectRDMACapable = 1;
    OK(cuMemGetAllocationGranularity(&dg, &dev, 0));
    EXPECT_MSG(dg == g, "the device's granularity %zu", dg);
    OK(cuMemCreate(&h, dg, &dev, 0));
    OK(cuMemAddressReserve(&va, dg, dg, 0, 0));
    OK(cuMemMap(va, dg, 0, h, 0));
    OK(cuMemSetAccess(va, dg, &acc, 1));
    round_trip(va, dg, 3);
    OK(cuMemUnmap(va, dg));
    OK(cuMemRelease(h));
    OK(cuMemAddressFree(va, dg));
}

static int vmm(void)
{
    CUmemAllocationProp prop = {.type = 1, .location = {1, 0}}, got;
    CUmemAccessDesc acc = {{1, 0}, 3};
    CUmemLocation dev0 = {1, 0};
    CUmemGenericAllocationHandle h = 0, h2 = 0, h3 = 0, r = 0;
    CUdeviceptr va = 0, va2 = 0, extra[8], d = 0;
    unsigned long long flags = 0;
    size_t g = 0;
    char line[64];
    int n;
    CUresult rc;

    setup();
    OK(cuMemGetAllocationGranularity(&g, &prop, 0));
    EXPECT_MSG(g > 0, "a granularity");
    EXPECT_RC(cuMemGetAllocationGranularity(&g, &prop, 7), CUDA_ERROR_INVALID_VALUE);
    nccl_like(g);
    OK(cuMemCreate(&h, 2 * g, &prop, 0));
    prop.requestedHandleTypes = 2; /* a Win32 handle: not on Linux (POSIX: shareable_driver.c) */
    EXPECT_RC(cuMemCreate(&h2, 2 * g, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
    prop.requestedHandleTypes = 0;
    EXPECT_RC(cuMemCreate(&h2, 800000000ull << 30, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_RC(cuMemCreate(&h2, (1ull << 40) / g * g, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    prop.requestedHandleTypes = 0;
    OK(cuMemAddressReserve(&va, 4 * g, 0, 0, 0));
    OK(cuMemMap(va, 2 * g, 0, h, 0));
    EXPECT_RC(cuMemMap(va + g, 2 * g, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* over a mapping */
    EXPECT_RC(cuMemMap(va + 3 * g, 2 * g, 0, h, 0),
              CUDA_ERROR_INVALID_VALUE); /* past its reservation */
    EXPECT_RC(cuMemMap(va + 2 * g, g, 0, (CUmemGenericAllocationHandle)0x1234, 0),
              CUDA_ERROR_INVALID_HANDLE);
    OK(cuMemSetAccess(va, 2 * g, &acc, 1));
    EXPECT_RC(cuMemSetAccess(va, 2 * g, &acc, 17),
              CUDA_ERROR_INVALID_VALUE); /* past the row's maximum */
    EXPECT_RC(cuMemSetAccess(va + 2 * g, g, &acc, 1),
              CUDA_ERROR_INVALID_VALUE); /* reserved, not mapped */
    OK(cuMemGetAccess(&flags, &dev0, va));
    EXPECT_MSG(flags == 3, "access %llu", flags);
    EXPECT_RC(cuMemGetAccess(&flags, &dev0, va + 2 * g),
              CUDA_ERROR_INVALID_VALUE); /* reserved, not mapped */
    round_trip(va, 2 * g, 4);
    /* A second handle mapped right after the first: one buffer to the program (PyTorch's
     * expandable segments, XLA), so copies and memsets may span both; past them, refused. */
    OK(cuMemCreate(&h3, g, &prop, 0));
    OK(cuMemMap(va + 2 * g, g, 0, h3, 0));
    OK(cuMemSetAccess(va + 2 * g, g, &acc, 1));
    round_trip(va + g, 2 * g, 8);
    OK(cuMemsetD32_v2(va + g - 64, 0x01020304u, (g + 128) / 4));
    EXPECT_RC(cuMemsetD8_v2(va + 2 * g, 0, 2 * g),
              CUDA_ERROR_INVALID_VALUE); /* into the unmapped quarter */
    unsigned char past[16] = {0};
    EXPECT_RC(cuMemcpyHtoD_v2(va + 3 * g - 8, past, sizeof(past)), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemUnmap(va + 2 * g, g));
    OK(cuMemRelease(h3));
    OK(cuMemGetAllocationPropertiesFromHandle(&got, h));
    EXPECT_MSG(got.type == 1 && got.location.type == 1, "properties");
    OK(cuMemRetainAllocationHandle(&r, (void *)(uintptr_t)(va + 100)));
    EXPECT_MSG(r == h, "the mapped handle");
    EXPECT_RC(cuMemFree_v2(va), CUDA_ERROR_INVALID_VALUE); /* mapped memory is not cuMemAlloc's */
    EXPECT_RC(cuMemAddressFree(va, 4 * g), CUDA_ERROR_INVALID_VALUE); /* still mapped */
    OK(cuMemUnmap(va, 2 * g));
    EXPECT_RC(cuMemcpyHtoD_v2(va, &flags, 8),
              CUDA_ERROR_INVALID_VALUE); /* unmapped: not its memory */
    OK(cuMemRelease(r)); /* the retained reference (the same value: as the driver, 2 needed) */
    OK(cuMemRelease(h));
    EXPECT_RC(cuMemRelease(h), CUDA_ERROR_INVALID_HANDLE);
    OK(cuMemAddressFree(va, 4 * g));
    /* cuMemAlloc through the server's own virtual memory path still works */
    OK(cuMemAlloc_v2(&d, 1000));
    round_trip(d, 1000, 5);
    EXPECT_RC(cuMemSetAccess(d, 1000, &acc, 1),
              CUDA_ERROR_INVALID_VALUE); /* not a mapping of its own */
    OK(cuMemFree_v2(d));
    /* left for the session's end: a handle, a reservation, a mapping */
    OK(cuMemCreate(&h2, g, &prop, 0));
    OK(cuMemAddressReserve(&va2, g, 0, 0, 0));
    OK(cuMemMap(va2, g, 0, h2, 0));
    OK(cuMemSetAccess(va2, g, &acc, 1));
    /* the budget of reservations (OPENMPS_CLIENT_MAX_HANDLES when the test sets it) */
    for (n = 0; n < 8; n++)
        if ((rc = cuMemAddressReserve(&extra[n], g, 0, 0, 0)) != 0)
            break;
    EXPECT_MSG(n == 8 || rc == CUDA_ERROR_OUT_OF_MEMORY, "a refused reservation: %d", rc);
    printf("reserved %d more\n", n);
    printf("vmm %llu %llu %llu\n", (unsigned long long)h2, (unsigned long long)va2,
           (unsigned long long)g);
    fflush(stdout);
    while (fgets(line, sizeof(line), stdin))
        if (!strncmp(line, "exit", 4))
            break;
    round_trip(va2, g, 6); /* the other client changed nothing */
    printf("vmm ok\n");
    return 0;
}

/* Another client's handle and ranges: refused. */
static int vmm_foreign(unsigned long long h, CUdeviceptr va, size_t g)
{
    CUmemAllocationProp prop = {.type = 1, .location = {1, 0}};
    CUmemAccessDesc acc = {{1, 0}, 3};
    CUmemGenericAllocationHandle r = 0;
    CUdeviceptr mine = 0;
    unsigned long long v = 0;

    setup();
    OK(cuMemAddressReserve(&mine, g, 0, 0, 0));
    EXPECT_RC(cuMemMap(mine, g, 0, h, 0), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuMemMap(va, g, 0, h, 0), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuMemRelease(h), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuMemGetAllocationPropertiesFromHandle((CUmemAllocationProp *)&prop, h),
              CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuMemUnmap(va, g), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemAddressFree(va, g), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemSetAccess(va, g, &acc, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemRetainAllocationHandle(&r, (void *)(uintptr_t)va), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemcpyHtoD_v2(va, &v, 8), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemAddressFree(mine, g));
    printf("foreign ok\n");
    return 0;
}

/* Hints and queries on managed memory (recorded in the client), cuPointerSetAttribute, 3D
 * peer copies through cuMemcpy3D's path. */
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned);
CUresult cuMemRangeGetAttribute(void *, size_t, int, CUdeviceptr, size_t);
CUresult cuMemRangeGetAttributes(void **, size_t *, int *, size_t, CUdeviceptr, size_t);
CUresult cuMemPrefetchBatchAsync(CUdeviceptr *, size_t *, size_t, CUmemLocation *, size_t *, size_t,
                                 unsigned long long, CUstream);
CUresult cuMemDiscardBatchAsync(CUdeviceptr *, size_t *, size_t, unsigned long long, CUstream);
CUresult cuMemDiscardAndPrefetchBatchAsync(CUdeviceptr *, size_t *, size_t, CUmemLocation *,
                                           size_t *, size_t, unsigned long long, CUstream);
CUresult cuPointerSetAttribute(const void *, int, CUdeviceptr);
CUresult cuPointerGetAttribute(void *, int, CUdeviceptr);
CUresult cuMemFreeHost(void *);
CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *);
CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *, CUstream);
CUresult cuMemcpyBatchAsync(CUdeviceptr *, CUdeviceptr *, size_t *, size_t, CUmemcpyAttributes *,
                            size_t *, size_t, size_t *, CUstream);
CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *, CUdeviceptr *, size_t *, size_t, CUmemcpyAttributes *,
                               size_t *, size_t, CUstream);
typedef struct {
    int type;
    union {
        struct {
            CUdeviceptr ptr;
            size_t rowLength, layerHeight;
            CUmemLocation locHint;
        } ptr;
        struct {
            void *array;
            size_t x, y, z;
        } array;
    } op;
} Operand3D;
CUresult cuMemcpy3DBatchAsync(size_t, CUDA_MEMCPY3D_BATCH_OP *, size_t *, unsigned long long,
                              CUstream);
CUresult cuMemcpy3DBatchAsync_v2(size_t, CUDA_MEMCPY3D_BATCH_OP *, unsigned long long, CUstream);
CUresult cuMemGetHandleForAddressRange(void *, CUdeviceptr, size_t, int, unsigned long long);

/* A dma-buf descriptor of the client's range, made by the server (the double's: a memfd with
 * the range's bytes), arrives here; other ranges, types and flags are refused. */
static void dma_buf(CUdeviceptr d)
{
    unsigned char in[4096], got[4096];
    int fd = -1;

    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (unsigned char)(i * 11 + 7);
    OK(cuMemcpyHtoD_v2(d, in, sizeof(in)));
    OK(cuMemGetHandleForAddressRange(&fd, d, 4096, 1, 1));
    EXPECT_MSG(fd >= 0 && pread(fd, got, sizeof(got), 0) == (ssize_t)sizeof(got) &&
                   !memcmp(in, got, sizeof(in)),
               "the dma-buf descriptor holds the range's bytes (fd %d)", fd);
    close(fd);
    EXPECT_RC(cuMemGetHandleForAddressRange(&fd, d, 8192, 1, 0),
              CUDA_ERROR_INVALID_VALUE); /* past it */
    EXPECT_RC(cuMemGetHandleForAddressRange(&fd, 0x1000, 16, 1, 0),
              CUDA_ERROR_INVALID_VALUE); /* nobody's */
    EXPECT_RC(cuMemGetHandleForAddressRange(&fd, d, 4096, 2, 0),
              CUDA_ERROR_INVALID_VALUE); /* type */
    EXPECT_RC(cuMemGetHandleForAddressRange(&fd, d, 4096, 1, 2),
              CUDA_ERROR_INVALID_VALUE); /* flags */
    EXPECT_RC(cuMemGetHandleForAddressRange(NULL, d, 4096, 1, 0), CUDA_ERROR_INVALID_VALUE);
}

/* cuMemcpy3DBatchAsync: pointer operands, each footprint checked. */
static void copy_3d_batches(CUstream st, unsigned char *pin, unsigned char *back, CUdeviceptr d1)
{
    CUDA_MEMCPY3D_BATCH_OP op[2] = {0};
    size_t fail = 7;

    /* 64 x 4 x 2 from a host layout of rows of 128 and layers of 5 rows into packed device
     * memory, then back to packed host memory */
    op[0].src.type = 1;
    op[0].src.op.ptr.ptr = (CUdeviceptr)(uintptr_t)pin;
    op[0].src.op.ptr.rowLength = 128;
    op[0].src.op.ptr.layerHeight = 5;
    op[0].dst.type = 1;
    op[0].dst.op.ptr.ptr = d1;
    op[0].width = 64, op[0].height = 4, op[0].depth = 2;
    op[0].srcAccessOrder = 1;
    OK(cuMemcpy3DBatchAsync_v2(1, op, 0, st));
    op[1] = op[0];
    op[1].src = op[0].dst;
    op[1].dst.op.ptr.ptr = (CUdeviceptr)(uintptr_t)back;
    op[1].srcAccessOrder = 2; /* during the call: waits */
    memset(back, 0, 4096);
    OK(cuMemcpy3DBatchAsync(1, &op[1], &fail, 0, st));
    for (int z = 0; z < 2; z++)
        for (int y = 0; y < 4; y++)
            EXPECT_MSG(!memcmp(back + (z * 4 + y) * 64, pin + (z * 5 + y) * 128, 64),
                       "3D batch row %d of layer %d", y, z);
    /* refusals: nothing of a refused batch runs (op 0 would write d1) */
    memset(back, 0, 4096);
    OK(cuMemcpyHtoD_v2(d1, back, 4096));
    op[1].dst.op.ptr.rowLength = 4096; /* the footprint leaves the pinned buffer */
    EXPECT_RC(cuMemcpy3DBatchAsync(2, op, &fail, 0, st), CUDA_ERROR_INVALID_VALUE);
    EXPECT_MSG(fail == 1, "footprint past the pinned memory at op 1: %zu", fail);
    op[1].dst.op.ptr.rowLength = 0;
    op[1].src.op.ptr.rowLength = 32; /* shorter than the width */
    EXPECT_RC(cuMemcpy3DBatchAsync(2, op, &fail, 0, st), CUDA_ERROR_INVALID_VALUE);
    op[1].src.op.ptr.rowLength = 0;
    op[1].src.op.ptr.layerHeight = 4096; /* past the device allocation */
    EXPECT_RC(cuMemcpy3DBatchAsync(2, op, &fail, 0, st), CUDA_ERROR_INVALID_VALUE);
    EXPECT_MSG(fail == 1, "device footprint at op 1: %zu", fail);
    op[1].src.op.ptr.layerHeight = 0;
    op[0].depth = 0;
    EXPECT_RC(cuMemcpy3DBatchAsync(2, op, &fail, 0, st), CUDA_ERROR_INVALID_VALUE);
    EXPECT_MSG(fail == 0, "a zero extent at op 0: %zu", fail);
    op[0].depth = 2;
    op[0].src.type = 2; /* an array operand */
    EXPECT_RC(cuMemcpy3DBatchAsync_v2(2, op, 0, st), CUDA_ERROR_NOT_SUPPORTED);
    op[0].src.type = 3;
    EXPECT_RC(cuMemcpy3DBatchAsync_v2(2, op, 0, st), CUDA_ERROR_INVALID_VALUE);
    op[0].src.type = 1;
    EXPECT_RC(cuMemcpy3DBatchAsync_v2(2, op, 1, st), CUDA_ERROR_INVALID_VALUE); /* flags */
    EXPECT_RC(cuMemcpy3DBatchAsync_v2(2, op, 0, NULL),
              CUDA_ERROR_INVALID_VALUE); /* legacy stream */
    op[1].srcAccessOrder = 0;
    EXPECT_RC(cuMemcpy3DBatchAsync_v2(2, op, 0, st), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamSynchronize(st));
    OK(cuMemcpyDtoH_v2(back, d1, 4096));
    for (int i = 0; i < 4096; i++)
        EXPECT_MSG(back[i] == 0, "a refused batch copied (byte %d)", i);
}

/* cuMemcpyBatchAsync: pinned host and device sides, every range checked before any copy. */
static void copy_batches(CUstream st)
{
    CUmemcpyAttributes at[2] = {{1, {0, 0}, {0, 0}, 0}, {2, {0, 0}, {0, 0}, 1}};
    CUdeviceptr d1, d2, dst[3], src[3];
    size_t sizes[3] = {4096, 4096, 100}, idx[2] = {0, 1}, fail = 7;
    unsigned char *pin, *back, *pageable = malloc(4096);

    OK(cuMemHostAlloc((void **)&pin, 3 * 4096, 0));
    back = pin + 4096;
    for (int i = 0; i < 4096; i++)
        pin[i] = (unsigned char)(i * 5 + 3);
    memset(back, 0, 4096);
    OK(cuMemAlloc_v2(&d1, 4096));
    OK(cuMemAlloc_v2(&d2, 4096));
    /* host to d1, d1 to d2 would depend on each other: two batches */
    dst[0] = d1, src[0] = (CUdeviceptr)(uintptr_t)pin;
    OK(cuMemcpyBatchAsync_v2(dst, src, sizes, 1, at, idx, 1, st));
    dst[0] = d2, src[0] = d1;
    dst[1] = (CUdeviceptr)(uintptr_t)back, src[1] = d1;
    dst[2] = (CUdeviceptr)(uintptr_t)(back + 8192 - 4096), src[2] = d1 + 4096 - 100;
    OK(cuMemcpyBatchAsync(dst, src, sizes, 3, at, idx, 2, &fail, st)); /* the 2nd waits */
    EXPECT_MSG(!memcmp(pin, back, 4096), "a batch moved the bytes");
    EXPECT_MSG(!memcmp(back + 4096, pin + 4096 - 100, 100), "the third copy");
    memset(back, 0, 4096);
    OK(cuMemcpyDtoH_v2(back, d2, 4096));
    EXPECT_MSG(!memcmp(pin, back, 4096), "device to device in a batch");
    /* refusals: failIdx names the copy */
    src[1] = (CUdeviceptr)(uintptr_t)pageable;
    EXPECT_RC(cuMemcpyBatchAsync(dst, src, sizes, 3, at, idx, 2, &fail, st),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_MSG(fail == 1, "pageable host memory refused at copy 1: %zu", fail);
    src[1] = d1 + 1; /* past the allocation by one */
    EXPECT_RC(cuMemcpyBatchAsync(dst, src, sizes, 3, at, idx, 2, &fail, st),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_MSG(fail == 1, "a range past its allocation at copy 1: %zu", fail);
    src[1] = d1;
    dst[2] = (CUdeviceptr)(uintptr_t)pin; /* host to host */
    src[2] = (CUdeviceptr)(uintptr_t)back;
    EXPECT_RC(cuMemcpyBatchAsync(dst, src, sizes, 3, at, idx, 2, &fail, st),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_MSG(fail == 2, "host to host refused at copy 2: %zu", fail);
    dst[2] = 0x1000; /* nobody's */
    src[2] = d1;
    EXPECT_RC(cuMemcpyBatchAsync_v2(dst, src, sizes, 3, at, idx, 2, st), CUDA_ERROR_INVALID_VALUE);
    dst[2] = d2;
    EXPECT_RC(cuMemcpyBatchAsync(dst, src, sizes, 3, at, (size_t[]){0, 3}, 2, &fail, st),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_MSG(fail == SIZE_MAX, "not a copy's error: %zu", fail);
    EXPECT_RC(cuMemcpyBatchAsync_v2(dst, src, sizes, 3, at, (size_t[]){1, 2}, 2, st),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemcpyBatchAsync_v2(dst, src, sizes, 1, at, idx, 2, st), CUDA_ERROR_INVALID_VALUE);
    at[1].srcAccessOrder = 0;
    EXPECT_RC(cuMemcpyBatchAsync_v2(dst, src, sizes, 3, at, idx, 2, st), CUDA_ERROR_INVALID_VALUE);
    at[1].srcAccessOrder = 3;
    at[1].flags = 2;
    EXPECT_RC(cuMemcpyBatchAsync_v2(dst, src, sizes, 3, at, idx, 2, st), CUDA_ERROR_INVALID_VALUE);
    at[1].flags = 0;
    EXPECT_RC(cuMemcpyBatchAsync_v2(dst, src, sizes, 3, at, idx, 2, NULL),
              CUDA_ERROR_INVALID_VALUE); /* legacy */
    OK(cuMemcpyBatchAsync_v2(dst, src, sizes, 3, at, idx, 2, st));
    OK(cuStreamSynchronize(st));
    copy_3d_batches(st, pin, back, d1);
    OK(cuMemFree_v2(d1));
    OK(cuMemFree_v2(d2));
    OK(cuMemFreeHost(pin));
    free(pageable);
}

static int attr1(int attr, CUdeviceptr p, size_t n)
{
    int v = 12345;

    OK(cuMemRangeGetAttribute(&v, 4, attr, p, n));
    return v;
}

static int hints(void)
{
    enum { RM = 1, PREF, ACC, LAST, PREF_TYPE, PREF_ID, LAST_TYPE, LAST_ID };
    CUdeviceptr m, m2, d, ptrs[3];
    size_t sizes[3] = {4096, 4096, 8192}, idxs[2] = {0, 2}, sz[3];
    CUmemLocation locs[2] = {{1, 0}, {2, 0}}, dev0 = {1, 0}, bad = {1, 99};
    CUcontext ctx;
    CUstream st;
    int v = 0, acc[3], type = 0, id = 0, attrs[3] = {PREF_TYPE, PREF_ID, RM};
    void *data[3] = {&type, &id, &v};
    unsigned one = 1;
    void *pinned;

    setup();
    OK(cuStreamCreate(&st, 0));
    OK(cuMemAllocManaged(&m, 1 << 16, 1));
    OK(cuMemAlloc_v2(&d, 4096));
    /* defaults: nothing asked for yet */
    EXPECT_MSG(attr1(RM, m, 4096) == 0, "read-mostly by default");
    EXPECT_MSG(attr1(PREF, m, 4096) == -2, "no preferred location by default");
    EXPECT_MSG(attr1(LAST, m, 4096) == -2, "never prefetched");
    EXPECT_MSG(attr1(PREF_TYPE, m, 4096) == 0, "preferred location type invalid");
    /* advice on part of the range */
    OK(cuMemAdvise(m, 8192, 1, 0));
    EXPECT_MSG(attr1(RM, m, 8192) == 1, "read-mostly where advised");
    EXPECT_MSG(attr1(RM, m + 4096, 4096) == 1, "read-mostly inside what was advised");
    EXPECT_MSG(attr1(RM, m, 8193) == 0, "read-mostly not past what was advised");
    OK(cuMemAdvise(m + 4096, 100, 2, 0));
    EXPECT_MSG(attr1(RM, m, 8192) == 0, "read-mostly unset on a part");
    EXPECT_MSG(attr1(RM, m, 4096) == 1, "read-mostly still on the rest");
    OK(cuMemAdvise(m, 1 << 16, 3, 0)); /* preferred: device 0 */
    EXPECT_MSG(attr1(PREF, m, 1 << 16) == 0, "preferred location device 0");
    OK(cuMemAdvise_v2(m + 4096, 4096, 3, (CUmemLocation){2, 0})); /* the host, on a part */
    EXPECT_MSG(attr1(PREF, m + 4096, 4096) == -1, "preferred location the CPU on that part");
    EXPECT_MSG(attr1(PREF, m, 1 << 16) == -2, "no single preferred location");
    OK(cuMemRangeGetAttributes(data, (size_t[]){4, 4, 4}, attrs, 3, m + 8192, 4096));
    EXPECT_MSG(type == 1 && id == 0 && v == 0, "attributes: %d %d %d", type, id, v);
    EXPECT_RC(cuMemAdvise_v2(m, 4096, 3, bad), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_RC(cuMemAdvise(m, 4096, 7, 0), CUDA_ERROR_INVALID_VALUE);
    /* accessed-by: devices with the advice on the whole range, then CU_DEVICE_INVALID */
    OK(cuMemAdvise(m, 1 << 16, 5, 0));
    OK(cuMemAdvise(m, 4096, 5, -1));
    OK(cuMemRangeGetAttribute(acc, sizeof(acc), ACC, m, 4096));
    EXPECT_MSG(acc[0] == -1 && acc[1] == 0 && acc[2] == -2, "accessed by %d %d %d", acc[0], acc[1],
               acc[2]);
    OK(cuMemRangeGetAttribute(acc, sizeof(acc), ACC, m, 8192));
    EXPECT_MSG(acc[0] == 0 && acc[1] == -2, "accessed by on 8192: %d %d", acc[0], acc[1]);
    OK(cuMemAdvise(m, 4096, 6, 0));
    OK(cuMemRangeGetAttribute(acc, 4, ACC, m, 8192));
    EXPECT_MSG(acc[0] == -2, "accessed-by unset on a part: %d", acc[0]);
    /* prefetches, single and batched */
    OK(cuMemPrefetchAsync(m, 4096, 0, st));
    EXPECT_MSG(attr1(LAST, m, 4096) == 0, "prefetched to device 0");
    ptrs[0] = m;
    ptrs[1] = m + 4096;
    ptrs[2] = m + 8192;
    OK(cuMemPrefetchBatchAsync(ptrs, sizes, 3, locs, idxs, 2, 0, st));
    EXPECT_MSG(attr1(LAST, m, 8192) == 0 && attr1(LAST, m + 8192, 8192) == -1,
               "batched prefetch locations: %d %d", attr1(LAST, m, 8192),
               attr1(LAST, m + 8192, 8192));
    EXPECT_MSG(attr1(LAST_TYPE, m + 8192, 100) == 2, "host prefetch type");
    EXPECT_MSG(attr1(LAST, m, 1 << 16) == -2, "part never prefetched");
    OK(cuMemDiscardBatchAsync(ptrs, sizes, 3, 0, st));
    OK(cuMemDiscardAndPrefetchBatchAsync(ptrs, sizes, 3, &dev0, idxs, 1, 0, st));
    EXPECT_MSG(attr1(LAST, m, 16384) == 0, "discard and prefetch to device 0");
    EXPECT_RC(cuMemPrefetchBatchAsync(ptrs, sizes, 3, locs, (size_t[]){1, 2}, 2, 0, st),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemPrefetchBatchAsync(ptrs, sizes, 3, locs, (size_t[]){0, 3}, 2, 0, st),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemPrefetchBatchAsync(ptrs, sizes, 3, locs, (size_t[]){0, 0}, 2, 0, st),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemPrefetchBatchAsync(ptrs, sizes, 1, locs, idxs, 2, 0, st),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemPrefetchBatchAsync(ptrs, sizes, 3, &bad, idxs, 1, 0, st),
              CUDA_ERROR_INVALID_DEVICE);
    EXPECT_RC(cuMemDiscardBatchAsync(ptrs, sizes, 3, 1, st), CUDA_ERROR_INVALID_VALUE); /* flags */
    memcpy(sz, sizes, sizeof(sz));
    sz[2] = 1 << 20; /* past the allocation */
    EXPECT_RC(cuMemDiscardBatchAsync(ptrs, sz, 3, 0, st), CUDA_ERROR_INVALID_VALUE);
    ptrs[1] = d; /* device memory, not managed */
    EXPECT_RC(cuMemDiscardBatchAsync(ptrs, sizes, 3, 0, st), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemDiscardAndPrefetchBatchAsync(ptrs, sizes, 3, &dev0, idxs, 1, 0, st),
              CUDA_ERROR_INVALID_VALUE);
    ptrs[1] = 0x1000; /* nobody's */
    EXPECT_RC(cuMemPrefetchBatchAsync(ptrs, sizes, 3, &dev0, idxs, 1, 0, st),
              CUDA_ERROR_INVALID_VALUE);
    /* queries: managed memory of this client only, sizes as documented */
    EXPECT_RC(cuMemRangeGetAttribute(&v, 4, RM, d, 4096), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemRangeGetAttribute(&v, 4, RM, 0x1000, 4096), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemRangeGetAttribute(&v, 4, RM, m, (1 << 16) + 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemRangeGetAttribute(&v, 4, 9, m, 4096), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemRangeGetAttribute(&v, 8, RM, m, 4096), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemRangeGetAttribute(acc, 6, ACC, m, 4096), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemRangeGetAttributes(data, (size_t[]){4, 4, 4}, attrs, 0, m, 4096),
              CUDA_ERROR_INVALID_VALUE);
    /* a freed range forgets its hints */
    OK(cuMemFree_v2(m));
    EXPECT_RC(cuMemRangeGetAttribute(&v, 4, RM, m, 4096), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemAllocManaged(&m2, 1 << 16, 1));
    EXPECT_MSG(attr1(RM, m2, 4096) == 0 && attr1(LAST, m2, 4096) == -2, "a new range has none");
    /* cuPointerSetAttribute: SYNC_MEMOPS on this client's memory */
    OK(cuPointerSetAttribute(&one, 6, d + 10));
    OK(cuPointerSetAttribute(&one, 6, m2));
    OK(cuMemHostAlloc(&pinned, 4096, 0));
    OK(cuPointerSetAttribute(&one, 6, (CUdeviceptr)(uintptr_t)pinned + 8));
    OK(cuPointerGetAttribute(&v, 6, d));
    EXPECT_MSG(v == 1, "sync memops reads 1");
    EXPECT_RC(cuPointerSetAttribute(&one, 6, 0x1000), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuPointerSetAttribute(&one, 1, d), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuPointerSetAttribute(NULL, 6, d), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFreeHost(pinned));
    /* 3D peer copies on one device: cuMemcpy3D's path with its checks */
    OK(cuCtxGetCurrent(&ctx));
    {
        unsigned char in[4096], out[4096];
        CUDA_MEMCPY3D_PEER c = {0};
        CUdeviceptr d2;
        for (size_t i = 0; i < sizeof(in); i++)
            in[i] = (unsigned char)(i * 13 + 1);
        OK(cuMemAlloc_v2(&d2, 4096));
        c.srcMemoryType = 1; /* host */
        c.srcHost = in;
        c.srcContext = ctx;
        c.srcPitch = 1024;
        c.srcHeight = 4;
        c.dstMemoryType = 2; /* device */
        c.dstDevice = d;
        c.dstContext = ctx;
        c.dstPitch = 1024;
        c.dstHeight = 4;
        c.WidthInBytes = 1024;
        c.Height = 4;
        c.Depth = 1;
        OK(cuMemcpy3DPeer(&c));
        c.srcMemoryType = 2;
        c.srcHost = NULL;
        c.srcDevice = d;
        c.dstDevice = d2;
        OK(cuMemcpy3DPeerAsync(&c, st));
        OK(cuStreamSynchronize(st));
        OK(cuMemcpyDtoH_v2(out, d2, sizeof(out)));
        EXPECT_MSG(!memcmp(in, out, sizeof(in)), "3D peer copies moved the bytes");
        c.dstDevice = 0x1000; /* nobody's */
        EXPECT_RC(cuMemcpy3DPeer(&c), CUDA_ERROR_INVALID_VALUE);
        c.dstDevice = d2;
        c.dstContext = (CUcontext)(uintptr_t)0x5;
        EXPECT_RC(cuMemcpy3DPeer(&c), 201 /* INVALID_CONTEXT */);
        OK(cuMemFree_v2(d2));
    }
    copy_batches(st);
    dma_buf(d);
    OK(cuMemFree_v2(d));
    OK(cuMemFree_v2(m2));
    printf("hints ok\n");
    return 0;
}

/*
 * Under a device-memory cap of 64 MiB (the test sets it): what the client is told of the
 * device's memory, and which allocations fit, each line "what value".
 */
static int memcap(void)
{
    CUdeviceptr a = 0, b = 0, c = 0, m = 0, p = 0;
    size_t fr = 0, total = 0;
    CUstream st;

    setup();
    OK(cuStreamCreate(&st, 1));
    OK(cuDeviceTotalMem_v2(&total, 0));
    printf("totalmem %zu\n", total);
    OK(cuMemGetInfo_v2(&fr, &total));
    printf("start %zu %zu\n", fr, total);
    OK(cuMemAlloc_v2(&a, 32u << 20));
    OK(cuMemGetInfo_v2(&fr, &total));
    printf("after32 %zu %zu\n", fr, total);
    printf("alloc40 %d\n", (int)cuMemAlloc_v2(&b, 40u << 20));
    printf("managed40 %d\n", (int)cuMemAllocManaged(&m, 40u << 20, 1));
    printf("async40 %d\n", (int)cuMemAllocAsync(&p, 40u << 20, st));
    OK(cuMemAllocAsync(&p, 16u << 20, st));
    OK(cuMemGetInfo_v2(&fr, &total));
    printf("after48 %zu %zu\n", fr, total);
    printf("alloc17 %d\n", (int)cuMemAlloc_v2(&c, 17u << 20));
    OK(cuMemFreeAsync(p, st));
    OK(cuStreamSynchronize(st));
    OK(cuMemFree_v2(a));
    OK(cuMemGetInfo_v2(&fr, &total));
    printf("freed %zu %zu\n", fr, total);
    printf("alloc40again %d\n", (int)cuMemAlloc_v2(&b, 40u << 20));
    OK(cuMemFree_v2(b));
    {
        /* the virtual-memory API's physical memory counts from its creation to its release */
        CUmemAllocationProp prop = {.type = 1, .location = {1, 0}};
        CUmemGenericAllocationHandle h = 0, h2 = 0;
        OK(cuMemCreate(&h, 48u << 20, &prop, 0));
        OK(cuMemGetInfo_v2(&fr, &total));
        printf("created48 %zu %zu\n", fr, total);
        printf("alloc32 %d\n", (int)cuMemAlloc_v2(&a, 32u << 20));
        printf("create32 %d\n", (int)cuMemCreate(&h2, 32u << 20, &prop, 0));
        OK(cuMemRelease(h));
        printf("released32 %d\n", (int)cuMemAlloc_v2(&a, 32u << 20));
        OK(cuMemFree_v2(a));
    }
    {
        /* arrays by their elements: 2048 x 2048 of float4 is 64 MiB, 1024 x 1024 floats 4 */
        CUDA_ARRAY_DESCRIPTOR big = {2048, 2048, 0x20, 4}, small = {1024, 1024, 0x20, 1};
        CUarray arr = NULL;
        OK(cuMemAlloc_v2(&a, 2u << 20));
        printf("array64 %d\n", (int)cuArrayCreate_v2(&arr, &big));
        OK(cuArrayCreate_v2(&arr, &small));
        OK(cuMemGetInfo_v2(&fr, &total));
        printf("array4 %zu %zu\n", fr, total);
        OK(cuArrayDestroy(arr));
        OK(cuMemFree_v2(a));
        OK(cuMemGetInfo_v2(&fr, &total));
        printf("arraygone %zu %zu\n", fr, total);
    }
    printf("memcap ok\n");
    return 0;
}

/* Memory the program freed is free again to it, also when the server keeps it for the
 * program's next allocation of that size (devmem.c), and taking it back makes free fall. */
static int memfree(void)
{
    size_t f0 = 0, f1 = 0, f2 = 0, f3 = 0, total = 0;
    CUdeviceptr a = 0;

    setup();
    OK(cuMemGetInfo_v2(&f0, &total));
    OK(cuMemAlloc_v2(&a, 8u << 20));
    OK(cuMemGetInfo_v2(&f1, &total));
    OK(cuMemFree_v2(a));
    OK(cuMemGetInfo_v2(&f2, &total));
    OK(cuMemAlloc_v2(&a, 8u << 20)); /* the same size again */
    OK(cuMemGetInfo_v2(&f3, &total));
    OK(cuMemFree_v2(a));
    printf("free %zu %zu %zu %zu of %zu\n", f0, f1, f2, f3, total);
    EXPECT(f1 < f0 && f2 == f0 && f3 == f1 && f0 <= total);
    printf("memfree ok\n");
    return 0;
}

/* On a device of 64 MiB (FAKECUDA_TOTAL_MEM): a freed 32 MiB allocation the server keeps counts
 * as free, and an allocation of another kind (managed) that needs it gets it. */
static int memkept(void)
{
    size_t fr = 0, total = 0;
    CUdeviceptr a = 0, m = 0;

    setup();
    OK(cuMemAlloc_v2(&a, 32u << 20));
    OK(cuMemFree_v2(a)); /* kept by the server for the next 32 MiB */
    OK(cuMemGetInfo_v2(&fr, &total));
    printf("kept free %zu of %zu\n", fr, total);
    EXPECT(fr >= (48u << 20) && fr <= total);
    OK(cuMemAllocManaged(&m, 48u << 20, 1));
    OK(cuMemFree_v2(m));
    printf("memkept ok\n");
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 1 && !strcmp(argv[1], "pools"))
        return pools();
    if (argc > 1 && !strcmp(argv[1], "export"))
        return export();
    if (argc > 1 && !strcmp(argv[1], "vmm"))
        return vmm();
    if (argc > 1 && !strcmp(argv[1], "hints"))
        return hints();
    if (argc > 1 && !strcmp(argv[1], "memcap"))
        return memcap();
    if (argc > 1 && !strcmp(argv[1], "memfree"))
        return memfree();
    if (argc > 1 && !strcmp(argv[1], "memkept"))
        return memkept();
    if (argc > 2 && !strcmp(argv[1], "hold")) { /* BYTES: held until a line on stdin */
        CUdeviceptr p = 0;
        char line[8];
        setup();
        OK(cuMemAlloc_v2(&p, (size_t)strtoull(argv[2], NULL, 10)));
        printf("held\n");
        if (fgets(line, sizeof(line), stdin))
            OK(cuMemFree_v2(p));
        return 0;
    }
    if (argc > 4 && !strcmp(argv[1], "vmmforeign"))
        return vmm_foreign(strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10),
                           (size_t)strtoull(argv[4], NULL, 10));
    if (argc > 3 && !strcmp(argv[1], "import")) /* HEX POOL [EVENT_HEX] */
        return import(argv[2], argv[3]) || (argc > 4 && import_event(argv[4]));
    fprintf(stderr, "usage: memory-driver pools|export|import HEX POOL\n");
    return 2;
}
