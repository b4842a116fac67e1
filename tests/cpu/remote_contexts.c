/* SPDX-License-Identifier: MIT */
/* remote_driver contexts: created contexts, the current context per thread, events through
 * contexts, the device queries of api/remote/devices.tsv and their refusals (run under
 * FAKECUDA_KERNEL_MS and FAKECUDA_WAITS_PROPAGATE: a stream that waits stays busy). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

typedef struct {
    int type;
    unsigned val;
} affinity_t;
typedef struct {
    affinity_t *aff;
    int naff;
    void *cig;
} ctx_params_t;

CUresult cuCtxCreate_v2(CUcontext *, unsigned, int);
CUresult cuCtxCreate_v3(CUcontext *, affinity_t *, int, unsigned, int);
CUresult cuCtxCreate_v4(CUcontext *, ctx_params_t *, unsigned, int);
CUresult cuCtxDestroy_v2(CUcontext);
CUresult cuCtxPushCurrent_v2(CUcontext);
CUresult cuCtxPopCurrent_v2(CUcontext *);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxGetCurrent(CUcontext *);
CUresult cuCtxGetDevice(int *);
CUresult cuCtxGetDevice_v2(int *, CUcontext);
CUresult cuCtxGetId(CUcontext, unsigned long long *);
CUresult cuCtxGetFlags(unsigned *);
CUresult cuCtxSetFlags(unsigned);
CUresult cuCtxGetApiVersion(CUcontext, unsigned *);
CUresult cuCtxGetExecAffinity(affinity_t *, int);
CUresult cuCtxAttach(CUcontext *, unsigned);
CUresult cuCtxDetach(CUcontext);
CUresult cuCtxGetSharedMemConfig(int *);
CUresult cuCtxSetSharedMemConfig(int);
CUresult cuCtxResetPersistingL2Cache(void);
CUresult cuCtxRecordEvent(CUcontext, CUevent);
CUresult cuCtxWaitEvent(CUcontext, CUevent);
CUresult cuProfilerInitialize(const char *, const char *, int);
CUresult cuProfilerStart(void);
CUresult cuProfilerStop(void);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuDeviceCanAccessPeer(int *, int, int);
CUresult cuDeviceComputeCapability(int *, int *, int);
CUresult cuDeviceGetByPCIBusId(int *, const char *);
CUresult cuDeviceGetExecAffinitySupport(int *, int, int);
CUresult cuDeviceGetLuid(char *, unsigned *, int);
CUresult cuDeviceGetP2PAttribute(int *, int, int, int);
CUresult cuDeviceGetProperties(int *, int);
CUresult cuDeviceGetTexture1DLinearMaxWidth(size_t *, int, unsigned, int);
CUresult cuDeviceTotalMem(unsigned *, int);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamQuery(CUstream);
CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuEventSynchronize(CUevent);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);
CUresult cuMemAlloc_v2(unsigned long long *, size_t);

static CUcontext shared_ctx;
static pthread_barrier_t phase;

/* A thread of its own: no current context at first; one it makes current stays its own; a
 * context destroyed by another thread is reported destroyed here. */
static void *other_thread(void *arg)
{
    CUcontext cur = (CUcontext)1;
    int dev = -1;

    (void)arg;
    OK(cuCtxGetCurrent(&cur));
    EXPECT(cur == NULL);
    EXPECT_RC(cuCtxGetDevice(&dev), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuCtxSetCurrent(shared_ctx));
    OK(cuCtxGetDevice(&dev));
    EXPECT(dev == 0);
    pthread_barrier_wait(&phase); /* the main thread destroys shared_ctx */
    pthread_barrier_wait(&phase);
    OK(cuCtxGetCurrent(&cur));
    EXPECT(cur == shared_ctx);
    EXPECT_RC(cuCtxGetDevice(&dev), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    EXPECT_RC(cuCtxPushCurrent_v2(shared_ctx), CUDA_ERROR_INVALID_CONTEXT);
    return NULL;
}

static void created_contexts(void)
{
    CUcontext primary, cur, c1, c2, c3, x;
    unsigned long long id0, id1, id2;
    unsigned flags, version;
    int dev = -1, config = -1;
    pthread_t t;

    OK(cuDevicePrimaryCtxRetain(&primary, 0));
    OK(cuCtxGetCurrent(&cur));
    EXPECT(cur == primary);
    OK(cuCtxCreate_v2(&c1, 0, 0));
    OK(cuCtxGetCurrent(&cur));
    EXPECT(cur == c1 && c1 != primary);
    OK(cuCtxGetDevice(&dev));
    EXPECT(dev == 0);
    OK(cuCtxGetId(primary, &id0));
    OK(cuCtxGetId(c1, &id1));
    OK(cuCtxGetFlags(&flags));
    EXPECT(flags == 0);
    OK(cuCtxCreate_v2(&c2, 2, 0)); /* CU_CTX_SCHED_YIELD */
    OK(cuCtxGetId(NULL, &id2));
    EXPECT(id0 != id1 && id1 != id2 && id0 != id2);
    OK(cuCtxGetFlags(&flags));
    EXPECT(flags == 2);
    OK(cuCtxSetFlags(4));
    OK(cuCtxGetFlags(&flags));
    EXPECT(flags == 4);
    EXPECT_RC(cuCtxSetFlags(3), CUDA_ERROR_INVALID_VALUE); /* two scheduling policies */
    EXPECT_RC(cuCtxCreate_v2(&x, 0x100, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuCtxCreate_v2(&x, 0, 5), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_RC(cuCtxCreate_v2(&x, 0, -1), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_RC(cuCtxCreate_v2(NULL, 0, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuCtxGetApiVersion(c2, &version));
    EXPECT(version >= 3020);

    /* the stack: pop, push, destroy pops the current one */
    OK(cuCtxPopCurrent_v2(&x));
    EXPECT(x == c2);
    OK(cuCtxGetCurrent(&cur));
    EXPECT(cur == c1);
    OK(cuCtxPushCurrent_v2(c2));
    OK(cuCtxDestroy_v2(c2));
    OK(cuCtxGetCurrent(&cur));
    EXPECT(cur == c1);
    EXPECT_RC(cuCtxPushCurrent_v2(c2), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(cuCtxSetCurrent(c2), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(cuCtxGetDevice_v2(&dev, c2), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(cuCtxGetId(c2, &id2), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(cuCtxGetApiVersion(c2, &version), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(cuCtxDestroy_v2(c2), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(cuCtxDestroy_v2(primary), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(cuCtxDestroy_v2(NULL), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuCtxCreate_v2(&c3, 0, 0)); /* a new one is never the destroyed one's token */
    EXPECT(c3 != c2);
    OK(cuCtxDestroy_v2(c3));

    /* threads: the current context is per thread */
    shared_ctx = c1;
    pthread_barrier_init(&phase, NULL, 2);
    EXPECT(pthread_create(&t, NULL, other_thread, NULL) == 0);
    pthread_barrier_wait(&phase);
    OK(cuCtxDestroy_v2(c1)); /* current here too: popped here, left there */
    OK(cuCtxGetCurrent(&cur));
    EXPECT(cur == primary);
    pthread_barrier_wait(&phase);
    EXPECT(pthread_join(t, NULL) == 0);

    /* execution affinity, v3 and v4 */
    affinity_t aff[2] = {{0, 100000}, {0, 8}};
    affinity_t a = {7, 7};
    ctx_params_t params = {aff, 2, NULL};
    OK(cuCtxGetExecAffinity(&a, 0));
    EXPECT(a.type == 0 && a.val == 132); /* the double's SM count: the whole device */
    OK(cuCtxCreate_v3(&c1, aff, 2, 0, 0));
    OK(cuCtxGetExecAffinity(&a, 0));
    EXPECT(a.val == 8); /* the later parameter overrides */
    OK(cuCtxDestroy_v2(c1));
    OK(cuCtxCreate_v3(&c1, aff, 1, 0, 0));
    OK(cuCtxGetExecAffinity(&a, 0));
    EXPECT(a.val == 132); /* no more than the device has */
    EXPECT_RC(cuCtxGetExecAffinity(&a, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuCtxGetExecAffinity(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuCtxDestroy_v2(c1));
    aff[0].type = 1;
    EXPECT_RC(cuCtxCreate_v3(&c1, aff, 1, 0, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuCtxCreate_v3(&c1, NULL, 1, 0, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuCtxCreate_v3(&c1, aff, -1, 0, 0), CUDA_ERROR_INVALID_VALUE);
    aff[0].type = 0;
    params.aff = aff + 1;
    params.naff = 1;
    OK(cuCtxCreate_v4(&c1, &params, 1, 0));
    OK(cuCtxGetExecAffinity(&a, 0));
    EXPECT(a.val == 8);
    OK(cuCtxGetFlags(&flags));
    EXPECT(flags == 1);
    OK(cuCtxDestroy_v2(c1));
    OK(cuCtxCreate_v4(&c1, NULL, 0, 0));
    OK(cuCtxDestroy_v2(c1));
    params.cig = &params;
    EXPECT_RC(cuCtxCreate_v4(&c1, &params, 0, 0), CUDA_ERROR_NOT_SUPPORTED);
    OK(cuCtxGetCurrent(&cur));
    EXPECT(cur == primary);

    /* attach and detach count uses of a created context */
    OK(cuCtxCreate_v2(&c1, 0, 0));
    OK(cuCtxAttach(&x, 0));
    EXPECT(x == c1);
    EXPECT_RC(cuCtxAttach(&x, 1), CUDA_ERROR_INVALID_VALUE);
    OK(cuCtxDetach(c1));
    OK(cuCtxGetDevice_v2(&dev, c1));
    OK(cuCtxDetach(c1));
    EXPECT_RC(cuCtxGetDevice_v2(&dev, c1), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(cuCtxDetach(c1), CUDA_ERROR_INVALID_CONTEXT);

    /* context-wide controls answered in the client */
    OK(cuCtxSetSharedMemConfig(1));
    OK(cuCtxGetSharedMemConfig(&config));
    EXPECT(config == 1);
    EXPECT_RC(cuCtxSetSharedMemConfig(3), CUDA_ERROR_INVALID_VALUE);
    OK(cuCtxResetPersistingL2Cache());
    OK(cuProfilerStart());
    OK(cuProfilerStop());
    EXPECT_RC(cuProfilerInitialize(NULL, "out", 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuProfilerInitialize("cfg", "out", 1));
}

/* Events through a context: the record waits for every stream of the client, the wait holds
 * every stream of the client (the double keeps a stream busy FAKECUDA_KERNEL_MS per launch,
 * and a waiting stream busy until its event is done). */
static void context_events(void)
{
    static const char image[] = "fakecubin\nfill_u32:8,4,4\n";
    unsigned long long p;
    unsigned v = 1, n = 1;
    void *args[] = {&p, &v, &n};
    CUstream a, b;
    CUevent ev, ev2, ev3;
    CUcontext c, gone;
    CUmodule mod;
    CUfunction fill;

    OK(cuCtxCreate_v2(&c, 0, 0));
    OK(cuCtxCreate_v2(&gone, 0, 0));
    OK(cuCtxDestroy_v2(gone));
    OK(cuMemAlloc_v2(&p, 4096));
    OK(cuModuleLoadData(&mod, image));
    OK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    OK(cuStreamCreate(&a, 1));
    OK(cuStreamCreate(&b, 1));
    OK(cuEventCreate(&ev, 0));
    OK(cuEventCreate(&ev2, 0));
    OK(cuEventCreate(&ev3, 0));

    /* record: done only when the kernel on stream a is */
    OK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, a, args, NULL));
    OK(cuCtxRecordEvent(c, ev));
    OK(cuEventSynchronize(ev));
    OK(cuStreamQuery(a));

    /* wait: stream b (and the default stream) wait for an event of stream a */
    OK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, a, args, NULL));
    OK(cuEventRecord(ev, a));
    OK(cuCtxWaitEvent(c, ev));
    OK(cuEventRecord(ev2, b));
    OK(cuEventSynchronize(ev2));
    OK(cuStreamQuery(a));
    OK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, a, args, NULL));
    OK(cuEventRecord(ev, a));
    OK(cuCtxWaitEvent(NULL, ev)); /* the current context */
    OK(cuEventRecord(ev3, NULL));
    OK(cuEventSynchronize(ev3));
    OK(cuStreamQuery(a));

    /* refusals */
    EXPECT_RC(cuCtxRecordEvent(gone, ev), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(cuCtxWaitEvent(gone, ev), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(cuCtxRecordEvent(c, NULL), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuCtxRecordEvent(c, (CUevent)((char *)ev + 4096)),
              CUDA_ERROR_INVALID_HANDLE); /* not the client's */
    EXPECT_RC(cuCtxWaitEvent(c, (CUevent)(uintptr_t)0x1234), CUDA_ERROR_INVALID_HANDLE);
    OK(cuCtxDestroy_v2(c));
}

static void device_queries(void)
{
    char luid[8];
    unsigned mask = 0, small = 0;
    int v = -1, major = -1, minor = -1, prop[14];
    size_t w = 0;

    OK(cuDeviceGetLuid(luid, &mask, 0));
    EXPECT(!memcmp(luid, "LUID@@@@", 8) && mask == 1);
    EXPECT_RC(cuDeviceGetLuid(luid, &mask, 1), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_RC(cuDeviceGetLuid(NULL, &mask, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuDeviceGetByPCIBusId(&v, "0000:10:00.0"));
    EXPECT(v == 0);
    EXPECT_RC(cuDeviceGetByPCIBusId(&v, "no bus"), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuDeviceGetByPCIBusId(&v, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuDeviceGetP2PAttribute(&v, 2, 0, 0));
    EXPECT(v == 200);
    EXPECT_RC(cuDeviceGetP2PAttribute(&v, 6, 0, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuDeviceGetP2PAttribute(&v, 1, 0, 3), CUDA_ERROR_INVALID_DEVICE);
    OK(cuDeviceCanAccessPeer(&v, 0, 0));
    EXPECT(v == 0);
    EXPECT_RC(cuDeviceCanAccessPeer(&v, 0, -1), CUDA_ERROR_INVALID_DEVICE);
    OK(cuDeviceGetTexture1DLinearMaxWidth(&w, 0x20, 2, 0));
    EXPECT(w == ((size_t)1 << 28) + 0x200 + 2);
    EXPECT_RC(cuDeviceGetTexture1DLinearMaxWidth(&w, 0x20, 5, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuDeviceGetExecAffinitySupport(&v, 0, 0));
    EXPECT(v == 1);
    EXPECT_RC(cuDeviceGetExecAffinitySupport(&v, 1, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuDeviceGetProperties(prop, 0));
    EXPECT(prop[0] == 1000 && prop[13] == 1013);
    EXPECT_RC(cuDeviceGetProperties(prop, 2), CUDA_ERROR_INVALID_DEVICE);
    OK(cuDeviceComputeCapability(&major, &minor, 0));
    EXPECT(major == 9 && minor == 0);
    EXPECT_RC(cuDeviceComputeCapability(NULL, &minor, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuDeviceTotalMem(&small, 0));
    EXPECT(small == 0xffffffffu); /* the double's 16 GiB through the 64-bit call, clamped */
    EXPECT_RC(cuDeviceTotalMem(&small, 7), CUDA_ERROR_INVALID_DEVICE);
}

void contexts_case(void)
{
    created_contexts();
    context_events();
    device_queries();
    printf("contexts ok\n");
}

/* A server with more devices than the client sees: a bus id of another device is refused. */
void contexts_bus_case(void)
{
    int v = -1;

    OK(cuDeviceGetByPCIBusId(&v, "0000:10:00.0"));
    EXPECT(v == 0);
    OK(cuDeviceGetByPCIBusId(&v, "0000:12:00.0")); /* every device of the server */
    EXPECT(v == 2);
    EXPECT_RC(cuDeviceGetByPCIBusId(&v, "0000:13:00.0"),
              CUDA_ERROR_INVALID_DEVICE); /* no fourth one */
    printf("contexts_bus ok\n");
}
