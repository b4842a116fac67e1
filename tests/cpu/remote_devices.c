/* SPDX-License-Identifier: MIT */
/* remote_driver devices: a client of a server with two devices (FAKECUDA_DEVICES=2; issue #12).
 * On each device, made current by its primary context: memory, a stream, a kernel filling the
 * memory, a copy back, checked, and the device's memory info; then a copy from device 0's memory
 * to device 1's (cuMemcpyPeer) and peer access enabled and disabled as the driver answers it.
 * Prints "device D memory ADDR stream HANDLE" per device (the test matches them against the
 * double's logs) and "devices ok". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

CUresult cuDeviceGetCount(int *);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxGetDevice(int *);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);
CUresult cuMemAlloc_v2(unsigned long long *, size_t);
CUresult cuMemcpyDtoH_v2(void *, unsigned long long, size_t);
CUresult cuMemcpyPeer(unsigned long long, CUcontext, unsigned long long, CUcontext, size_t);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamSynchronize(CUstream);
CUresult cuCtxSynchronize(void);
CUresult cuMemsetD32Async(unsigned long long, unsigned, size_t, CUstream);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuCtxEnablePeerAccess(CUcontext, unsigned);
CUresult cuCtxDisablePeerAccess(CUcontext);
CUresult cuDeviceCanAccessPeer(int *, int, int);
CUresult cuPointerGetAttribute(void *, int, unsigned long long);
CUresult cuInit(unsigned);
CUresult cuFuncSetAttribute(CUfunction, int, int);
CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuEventSynchronize(CUevent);
CUresult cuCtxRecordEvent(CUcontext, CUevent);
CUresult cuCtxWaitEvent(CUcontext, CUevent);
CUresult cuMemcpyHtoDAsync_v2(unsigned long long, const void *, size_t, CUstream);
CUresult cuMemcpyDtoHAsync_v2(void *, unsigned long long, size_t, CUstream);
CUresult cuDeviceGet(int *, int);
CUresult cuDeviceGetName(char *, int, int);
CUresult cuDeviceGetPCIBusId(char *, int, int);
CUresult cuDeviceGetByPCIBusId(int *, const char *);
CUresult cuDeviceGetAttribute(int *, int, int);
CUresult cuDeviceTotalMem_v2(size_t *, int);
CUresult cuMemCreate(unsigned long long *, size_t, const CUmemAllocationProp *, unsigned long long);
CUresult cuMemRelease(unsigned long long);
typedef void *CUmemoryPool;
CUresult cuMemPoolCreate(CUmemoryPool *, const CUmemPoolProps *);
CUresult cuMemPoolDestroy(CUmemoryPool);
CUresult cuMemAllocFromPoolAsync(unsigned long long *, size_t, CUmemoryPool, CUstream);
CUresult cuMemFreeAsync(unsigned long long, CUstream);
CUresult cuDeviceSetMemPool(int, CUmemoryPool);
CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *, unsigned long long);

void devices_case(void)
{
    static const char image[] = "fakecubin\nfill_u32:8,4,4\n";
    CUcontext ctx[2];
    unsigned long long mem[2];
    unsigned back[256];
    CUmodule mod;
    CUfunction f;
    CUstream st[2];
    int n = 0, cur = -1, can = -1;
    size_t free_b = 0, total = 0;

    OK(cuDeviceGetCount(&n));
    EXPECT(n == 2);
    for (int d = 0; d < 2; d++) {
        unsigned v = 0x100u + (unsigned)d, count = 256;
        void *args[] = {&mem[d], &v, &count};
        OK(cuDevicePrimaryCtxRetain(&ctx[d], d));
        OK(cuCtxSetCurrent(ctx[d]));
        OK(cuCtxGetDevice(&cur));
        EXPECT(cur == d);
        OK(cuModuleLoadData(&mod, image)); /* loaded once by the server, for every device */
        OK(cuModuleGetFunction(&f, mod, "fill_u32"));
        OK(cuMemAlloc_v2(&mem[d], sizeof(back)));
        OK(cuStreamCreate(&st[d], 0));
        OK(cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, st[d], args, NULL));
        OK(cuStreamSynchronize(st[d]));
        OK(cuMemcpyDtoH_v2(back, mem[d], sizeof(back)));
        EXPECT(back[0] == v && back[255] == v);
        OK(cuMemGetInfo_v2(&free_b, &total));
        EXPECT(total == 16ull << 30 && free_b <= total);
        printf("device %d memory %llu stream %llu\n", d, mem[d],
               (unsigned long long)(uintptr_t)st[d]);
    }
    /* each allocation's device and context, asked from device 1 (current) */
    for (int d = 0; d < 2; d++) {
        int ord = -1;
        CUcontext owner = NULL;
        OK(cuPointerGetAttribute(&ord, 9, mem[d]));   /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */
        OK(cuPointerGetAttribute(&owner, 1, mem[d])); /* CU_POINTER_ATTRIBUTE_CONTEXT */
        EXPECT(ord == d && owner == ctx[d]);
    }
    /* device 0's values into device 1's memory, from device 1 (current) */
    OK(cuMemcpyPeer(mem[1], ctx[1], mem[0], ctx[0], sizeof(back)));
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH_v2(back, mem[1], sizeof(back)));
    EXPECT(back[0] == 0x100u && back[255] == 0x100u);
    /* The legacy default stream orders the streams of its own device only (the driver: an
     * event is recorded on a stream of its device): a blocking stream used on device 0, then
     * device 1's NULL stream. */
    {
        CUstream b;
        unsigned v = 5, count = 256;
        void *args[] = {&mem[0], &v, &count};
        OK(cuCtxSetCurrent(ctx[0]));
        OK(cuStreamCreate(&b, 0)); /* blocking */
        OK(cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, b, args, NULL));
        OK(cuStreamSynchronize(b));
        OK(cuCtxSetCurrent(ctx[1]));
        OK(cuMemsetD32Async(mem[1], 9, 256, NULL));
        OK(cuCtxSynchronize());
        OK(cuMemcpyDtoH_v2(back, mem[1], sizeof(back)));
        EXPECT(back[0] == 9 && back[255] == 9);
    }
    /* peer access, as the driver answers it */
    OK(cuDeviceCanAccessPeer(&can, 1, 0));
    EXPECT(can == 1);
    EXPECT_RC(cuCtxEnablePeerAccess(ctx[1], 0),
              CUDA_ERROR_INVALID_CONTEXT); /* its own context: CUDA_ERROR_INVALID_CONTEXT */
    OK(cuCtxEnablePeerAccess(ctx[0], 0));
    EXPECT_RC(cuCtxEnablePeerAccess(ctx[0], 0), 704); /* CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED */
    OK(cuCtxDisablePeerAccess(ctx[0]));
    EXPECT_RC(cuCtxDisablePeerAccess(ctx[0]), 705); /* CUDA_ERROR_PEER_ACCESS_NOT_ENABLED */
    /* a function's attribute is set on the current device (each its own, as the driver) */
    OK(cuCtxSetCurrent(ctx[1]));
    OK(cuFuncSetAttribute(f, 8, 4096)); /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
    OK(cuCtxSetCurrent(ctx[0]));
    OK(cuFuncSetAttribute(f, 8, 4096));
    /* a context's event: its device's streams only (the double, as the driver, refuses an event
     * recorded on another device's stream), also for a context that is not current */
    {
        CUevent ev[2];
        OK(cuCtxSetCurrent(ctx[1]));
        OK(cuEventCreate(&ev[1], 0));
        OK(cuCtxRecordEvent(ctx[1], ev[1]));
        OK(cuCtxWaitEvent(ctx[1], ev[1]));
        OK(cuEventSynchronize(ev[1]));
        OK(cuCtxSetCurrent(ctx[0]));
        OK(cuEventCreate(&ev[0], 0));
        OK(cuCtxSetCurrent(ctx[1]));
        OK(cuCtxRecordEvent(ctx[0], ev[0])); /* device 0's, from device 1 */
        OK(cuCtxWaitEvent(ctx[0], ev[0]));
        OK(cuCtxGetDevice(&cur));
        EXPECT(cur == 1);
        OK(cuEventSynchronize(ev[0]));
    }
    OK(cuCtxSetCurrent(ctx[0]));
    printf("devices ok\n");
    fflush(stdout);
    /* held until told: the test looks at the daemon's view of the client meanwhile */
    char line[8];
    if (fgets(line, sizeof(line), stdin)) {
    }
}

/* remote_driver visible: a client whose CUDA_VISIBLE_DEVICES is "2,GPU-f0f1" on a server of
 * three devices (FAKECUDA_DEVICES=3), and whose CUDA_MPS_PINNED_DEVICE_MEM_LIMIT is
 * "0=64M,GPU-f0f1=32M,GPU-99=1G": it
 * sees two devices, the server's 2 then 0, renumbered; every ordinal it passes or gets back is
 * its own. Prints "visible memory D ADDR" per device and "visible ok". */
void visible_case(void)
{
    char name[64], bus[32];
    CUcontext ctx[2];
    unsigned long long mem[2], h = 0;
    int n = 0, d = -1, v = 0, can = 0;
    size_t free_b = 0, total = 0;

    OK(cuDeviceGetCount(&n));
    EXPECT(n == 2);
    EXPECT_RC(cuDeviceGet(&d, 2),
              CUDA_ERROR_INVALID_DEVICE); /* CUDA_ERROR_INVALID_DEVICE: it has two */
    OK(cuDeviceGetName(name, sizeof(name), 0));
    EXPECT(!strcmp(name, "openmps fake GPU 2"));
    OK(cuDeviceGetName(name, sizeof(name), 1));
    EXPECT(!strcmp(name, "openmps fake GPU 0"));
    EXPECT_RC(cuDeviceGetName(name, sizeof(name), 2), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_RC(cuDeviceGetAttribute(&v, 16, 2), CUDA_ERROR_INVALID_DEVICE);
    OK(cuDeviceGetPCIBusId(bus, sizeof(bus), 0));
    EXPECT(!strcmp(bus, "0000:12:00.0"));
    OK(cuDeviceGetByPCIBusId(&d, "0000:10:00.0")); /* the server's device 0: its 1 */
    EXPECT(d == 1);
    EXPECT_RC(cuDeviceGetByPCIBusId(&d, "0000:11:00.0"),
              CUDA_ERROR_INVALID_DEVICE); /* a device it does not see */
    OK(cuDeviceCanAccessPeer(&can, 0, 1));
    EXPECT(can == 1);
    /* its cap is on its device 0, the server's 2 */
    OK(cuMemGetInfo_v2(&free_b, &total));
    EXPECT(total == 64ull << 20);
    OK(cuDeviceTotalMem_v2(&total, 1)); /* "GPU-f0f1=32M": the server's 0, its 1 */
    EXPECT(total == 32ull << 20);
    for (int i = 0; i < 2; i++) {
        int ord = -1;
        OK(cuDevicePrimaryCtxRetain(&ctx[i], i));
        OK(cuCtxSetCurrent(ctx[i]));
        OK(cuMemAlloc_v2(&mem[i], 1 << 20));
        OK(cuMemsetD32Async(mem[i], 7u + (unsigned)i, 256, NULL));
        OK(cuCtxSynchronize());
        { /* pageable memory through the legacy stream, as PyTorch's first tensor goes */
            static unsigned host[65536], back[65536];
            for (int k = 0; k < 65536; k++)
                host[k] = (unsigned)(k * 3 + i);
            OK(cuMemcpyHtoDAsync_v2(mem[i], host, sizeof(host), NULL));
            OK(cuStreamSynchronize(NULL));
            OK(cuMemcpyDtoHAsync_v2(back, mem[i], sizeof(back), NULL));
            OK(cuStreamSynchronize(NULL));
            EXPECT(back[65535] == host[65535] && back[0] == host[0]);
        }
        OK(cuPointerGetAttribute(&ord, 9, mem[i])); /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */
        EXPECT(ord == i);
        printf("visible memory %d %llu\n", i, mem[i]);
    }
    OK(cuCtxGetDevice(&d));
    EXPECT(d == 1);
    /* a physical allocation on its device 1 (the server's 0): its properties say 1 */
    {
        CUmemAllocationProp p = {.type = 1, .location = {1, 1}}, got;
        memset(&got, 0, sizeof(got));
        OK(cuMemCreate(&h, 2 << 20, &p, 0));
        OK(cuMemGetAllocationPropertiesFromHandle(&got, h));
        EXPECT(got.location.type == 1 && got.location.id == 1);
        OK(cuMemRelease(h));
        p.location.id = 2; /* a device it does not have */
        EXPECT_RC(cuMemCreate(&h, 2 << 20, &p, 0), CUDA_ERROR_INVALID_VALUE);
    }
    /* a pool of its device 1 (cap 32M) used while device 0 (cap 64M) is current: its
     * allocations count on device 1; device 0 cannot take it as its pool */
    {
        CUmemPoolProps pp;
        CUmemoryPool pool;
        unsigned long long a = 0, b = 0;
        memset(&pp, 0, sizeof(pp));
        pp.allocType = 1; /* PINNED */
        pp.location.type = 1;
        pp.location.id = 1;
        OK(cuCtxSetCurrent(ctx[0]));
        OK(cuMemPoolCreate(&pool, &pp));
        EXPECT_RC(cuMemAllocFromPoolAsync(&a, 40u << 20, pool, NULL),
                  CUDA_ERROR_OUT_OF_MEMORY); /* past device 1's 32M */
        OK(cuMemAllocFromPoolAsync(&b, 16u << 20, pool, NULL));
        EXPECT_RC(cuDeviceSetMemPool(0, pool), CUDA_ERROR_INVALID_VALUE);
        OK(cuDeviceSetMemPool(1, pool));
        OK(cuMemFreeAsync(b, NULL));
        OK(cuCtxSynchronize());
        OK(cuMemPoolDestroy(pool));
    }
    printf("visible ok\n");
    fflush(stdout);
}

/* remote_driver novisible RC: CUDA_VISIBLE_DEVICES names none of the server's devices: cuInit
 * answers RC and every later call CUDA_ERROR_NO_DEVICE, as for a process without devices; the
 * driver's version is still answered (the runtime asks it first). */
CUresult cuDriverGetVersion(int *);
void novisible_case(int init_rc)
{
    int n = -1, v = 0;

    OK(cuDriverGetVersion(&v));
    EXPECT(v > 0);
    EXPECT_RC(cuInit(0), init_rc); /* 100, or 101 for a device named twice */
    EXPECT_RC(cuDeviceGetCount(&n), CUDA_ERROR_NO_DEVICE);
    printf("novisible ok\n");
    fflush(stdout);
}
