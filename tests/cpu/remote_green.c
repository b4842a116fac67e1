/* SPDX-License-Identifier: MIT */
/* remote_driver green contexts and device resources (api/remote/green.tsv) on the double's
 * device of 132 SMs (fake_green.c): every entry point through the server, refusals, the
 * context token of a green context, streams in green contexts, events of green contexts
 * (run under FAKECUDA_KERNEL_MS and FAKECUDA_WAITS_PROPAGATE: a stream that waits stays busy);
 * green_hold / green_steal: another client's descriptor, green context, stream, event and
 * resource are refused. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

typedef void *CUgreenCtx, *CUdesc;
typedef struct {
    int type;
    unsigned char hidden[92];
    unsigned sm_count, min_partition, alignment;
    unsigned char rest[36];
} res_t;

CUresult cuDeviceGetDevResource(int, res_t *, int);
CUresult cuCtxGetDevResource(CUcontext, res_t *, int);
CUresult cuGreenCtxGetDevResource(CUgreenCtx, res_t *, int);
CUresult cuDevSmResourceSplitByCount(res_t *, unsigned *, const res_t *, res_t *, unsigned,
                                     unsigned);
CUresult cuDevResourceGenerateDesc(CUdesc *, res_t *, unsigned);
CUresult cuGreenCtxCreate(CUgreenCtx *, CUdesc, int, unsigned);
CUresult cuGreenCtxDestroy(CUgreenCtx);
CUresult cuGreenCtxGetId(CUgreenCtx, unsigned long long *);
CUresult cuGreenCtxRecordEvent(CUgreenCtx, CUevent);
CUresult cuGreenCtxWaitEvent(CUgreenCtx, CUevent);
CUresult cuGreenCtxStreamCreate(CUstream *, CUgreenCtx, unsigned, int);
CUresult cuStreamGetGreenCtx(CUstream, CUgreenCtx *);
CUresult cuCtxFromGreenCtx(CUcontext *, CUgreenCtx);
CUresult cuStreamGetCtx(CUstream, CUcontext *);
CUresult cuStreamGetCtx_v2(CUstream, CUcontext *, CUgreenCtx *);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxGetCurrent(CUcontext *);
CUresult cuCtxGetDevice(int *);
CUresult cuCtxGetId(CUcontext, unsigned long long *);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamCreateWithPriority(CUstream *, unsigned, int);
CUresult cuStreamDestroy_v2(CUstream);
CUresult cuStreamQuery(CUstream);
CUresult cuStreamSynchronize(CUstream);
CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuEventSynchronize(CUevent);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);
CUresult cuMemAlloc_v2(unsigned long long *, size_t);
CUresult cuMemcpyDtoH_v2(void *, unsigned long long, size_t);

enum { SM = 1, NON_BLOCKING = 1, DEFAULT_STREAM = 1 };

/* Two groups of 64 SMs (a minimum of 60 rounded up to the alignment of 8), 4 remaining. */
static void split_two(const res_t *dev, res_t *groups, res_t *rem)
{
    unsigned nb = 4;

    OK(cuDevSmResourceSplitByCount(groups, &nb, dev, rem, 0, 60));
    EXPECT(nb == 2 && groups[0].type == SM && groups[0].sm_count == 64 &&
           groups[1].sm_count == 64 && rem->sm_count == 4);
}

static void resources(res_t *dev)
{
    res_t r, groups[4], rem, other[4], bad;
    unsigned nb = 0;
    CUdesc d;

    OK(cuDeviceGetDevResource(0, dev, SM));
    EXPECT(dev->type == SM && dev->sm_count == 132 && dev->min_partition == 8 &&
           dev->alignment == 8);
    EXPECT_RC(cuDeviceGetDevResource(0, &r, 2), CUDA_ERROR_INVALID_RESOURCE_TYPE);
    EXPECT_RC(cuDeviceGetDevResource(0, &r, 0), CUDA_ERROR_INVALID_RESOURCE_TYPE);
    EXPECT_RC(cuDeviceGetDevResource(4, &r, SM), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_RC(cuDeviceGetDevResource(0, NULL, SM), CUDA_ERROR_INVALID_VALUE);
    OK(cuCtxGetDevResource(NULL, &r, SM)); /* the current (primary) context: the device's */
    EXPECT(r.sm_count == 132);

    /* split: the count alone, then the groups */
    OK(cuDevSmResourceSplitByCount(NULL, &nb, dev, NULL, 0, 60));
    EXPECT(nb == 2);
    OK(cuDevSmResourceSplitByCount(NULL, &nb, dev, NULL, 1, 3)); /* ignore co-scheduling */
    EXPECT(nb == 33);
    split_two(dev, groups, &rem);
    nb = 1000000; /* more room than any device has groups: only what exists is written */
    OK(cuDevSmResourceSplitByCount(other, &nb, dev, NULL, 0, 64));
    EXPECT(nb == 2 && other[1].sm_count == 64);

    /* refusals: flags, counts, types, structs the server did not answer */
    nb = 4;
    EXPECT_RC(cuDevSmResourceSplitByCount(other, &nb, dev, NULL, 4, 8), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuDevSmResourceSplitByCount(other, &nb, dev, NULL, 0, 200),
              CUDA_ERROR_INVALID_VALUE); /* > 132 SMs */
    nb = 0;
    EXPECT_RC(cuDevSmResourceSplitByCount(other, &nb, dev, NULL, 0, 8), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuDevSmResourceSplitByCount(NULL, NULL, dev, NULL, 0, 8), CUDA_ERROR_INVALID_VALUE);
    nb = 4;
    bad = *dev;
    bad.type = 0;
    EXPECT_RC(cuDevSmResourceSplitByCount(other, &nb, &bad, NULL, 0, 8),
              CUDA_ERROR_INVALID_RESOURCE_TYPE);
    bad = *dev;
    bad.sm_count = 1024; /* a copy changed by the client */
    EXPECT_RC(cuDevSmResourceSplitByCount(other, &nb, &bad, NULL, 0, 8), CUDA_ERROR_INVALID_VALUE);
    bad = *dev;
    memcpy(bad.hidden, "FAKE", 4); /* the double's own bytes, forged: never reach it */
    memset(bad.hidden + 4, 0, 12);
    EXPECT_RC(cuDevSmResourceSplitByCount(other, &nb, &bad, NULL, 0, 8), CUDA_ERROR_INVALID_VALUE);
    memset(&bad, 0, sizeof(bad));
    bad.type = SM;
    bad.sm_count = 132;
    EXPECT_RC(cuDevSmResourceSplitByCount(other, &nb, &bad, NULL, 0, 8), CUDA_ERROR_INVALID_VALUE);

    /* descriptors */
    OK(cuDevResourceGenerateDesc(&d, &groups[0], 1));
    EXPECT(d != NULL);
    OK(cuDevResourceGenerateDesc(&d, groups, 2)); /* one split's groups together */
    res_t mixed[2] = {groups[0], other[0]};
    EXPECT_RC(cuDevResourceGenerateDesc(&d, mixed, 2),
              CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION); /* two splits': the double refuses */
    EXPECT_RC(cuDevResourceGenerateDesc(&d, groups, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuDevResourceGenerateDesc(&d, groups, 129), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuDevResourceGenerateDesc(NULL, groups, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuDevResourceGenerateDesc(&d, &bad, 1), CUDA_ERROR_INVALID_VALUE);
}

static CUgreenCtx make_green(const res_t *group)
{
    res_t r = *group;
    CUgreenCtx g = NULL;
    CUdesc d;

    OK(cuDevResourceGenerateDesc(&d, &r, 1));
    OK(cuGreenCtxCreate(&g, d, 0, DEFAULT_STREAM));
    return g;
}

static const char image[] = "fakecubin\nfill_u32:8,4,4\n";

static void fill(CUfunction f, unsigned long long p, unsigned v, CUstream s)
{
    unsigned n = 4;
    void *args[] = {&p, &v, &n};

    OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
}

static void green_contexts(const res_t *dev)
{
    res_t groups[4], rem, r;
    CUgreenCtx g0, g1, g = NULL;
    CUcontext c0, c1, primary, cur = NULL;
    CUstream s0, s1, s2, plain;
    CUevent ev, ev2, ev3;
    unsigned out8[8];
    CUmodule mod;
    CUfunction f;
    CUdesc d;
    unsigned long long id0 = 0, id1 = 0, id = 0, p;
    unsigned out[4];
    int devno = -1;

    OK(cuCtxGetCurrent(&primary));
    split_two(dev, groups, &rem);
    g0 = make_green(&groups[0]);
    g1 = make_green(&groups[1]);
    EXPECT(g0 && g1 && g0 != g1);
    OK(cuDevResourceGenerateDesc(&d, &groups[0], 1));
    EXPECT_RC(cuGreenCtxCreate(&g, d, 0, 0),
              CUDA_ERROR_INVALID_VALUE); /* CU_GREEN_CTX_DEFAULT_STREAM is required */
    EXPECT_RC(cuGreenCtxCreate(&g, d, 0, 3), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuGreenCtxCreate(&g, d, 3, DEFAULT_STREAM), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_RC(cuGreenCtxCreate(&g, (CUdesc)(uintptr_t)0x1234, 0, DEFAULT_STREAM),
              CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuGreenCtxCreate(NULL, d, 0, DEFAULT_STREAM), CUDA_ERROR_INVALID_VALUE);

    OK(cuGreenCtxGetDevResource(g0, &r, SM));
    EXPECT(r.type == SM && r.sm_count == 64);
    EXPECT_RC(cuGreenCtxGetDevResource(g0, &r, 2), CUDA_ERROR_INVALID_RESOURCE_TYPE);
    EXPECT_RC(cuGreenCtxGetDevResource((CUgreenCtx)(uintptr_t)0x1234, &r, SM),
              CUDA_ERROR_INVALID_CONTEXT);
    OK(cuGreenCtxGetId(g0, &id0));
    OK(cuGreenCtxGetId(g1, &id1));
    EXPECT(id0 > 0x6000 && id1 > 0x6000 && id0 != id1);
    EXPECT_RC(cuGreenCtxGetId(NULL, &id),
              CUDA_ERROR_INVALID_CONTEXT); /* no green context current */
    EXPECT_RC(cuGreenCtxGetId((CUgreenCtx)(uintptr_t)0x1234, &id), CUDA_ERROR_INVALID_HANDLE);

    /* streams of green contexts: the driver's own (the double logs them) */
    OK(cuGreenCtxStreamCreate(&s0, g0, NON_BLOCKING, 0));
    EXPECT_RC(cuGreenCtxStreamCreate(&s2, g0, 0, 0),
              CUDA_ERROR_INVALID_VALUE); /* non-blocking is required */
    EXPECT_RC(cuGreenCtxStreamCreate(&s2, (CUgreenCtx)(uintptr_t)0x1234, NON_BLOCKING, 0),
              CUDA_ERROR_INVALID_CONTEXT);
    OK(cuStreamGetGreenCtx(s0, &g));
    EXPECT(g == g0);
    OK(cuStreamCreate(&plain, NON_BLOCKING)); /* the primary context current: none */
    OK(cuStreamGetGreenCtx(plain, &g));
    EXPECT(g == NULL);
    OK(cuStreamGetGreenCtx(NULL, &g));
    EXPECT(g == NULL);
    EXPECT_RC(cuStreamGetGreenCtx((CUstream)(uintptr_t)0x1234, &g), CUDA_ERROR_INVALID_HANDLE);

    /* the context token of a green context: current, it makes streams in the green context */
    OK(cuCtxFromGreenCtx(&c1, g1));
    EXPECT_RC(cuCtxFromGreenCtx(&c0, (CUgreenCtx)(uintptr_t)0x1234), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuCtxFromGreenCtx(&c0, g0));
    EXPECT(c0 != c1 && c0 != primary);
    OK(cuCtxSetCurrent(c1));
    OK(cuCtxGetCurrent(&cur));
    EXPECT(cur == c1);
    OK(cuCtxGetDevice(&devno));
    EXPECT(devno == 0);
    OK(cuCtxGetId(c1, &id));
    OK(cuCtxGetId(primary, &id0));
    EXPECT(id != id0 && id != 0);
    OK(cuCtxGetId(c0, &id0));
    EXPECT(id != id0);
    OK(cuGreenCtxGetId(g0, &id0));                         /* again: the green context's own */
    OK(cuStreamCreateWithPriority(&s2, NON_BLOCKING, -1)); /* in green context 1 too */
    OK(cuStreamGetGreenCtx(s2, &g));
    EXPECT(g == g1);
    OK(cuStreamDestroy_v2(s2));
    OK(cuStreamCreate(&s1, 0)); /* blocking, in green context 1 */
    OK(cuStreamGetGreenCtx(s1, &g));
    EXPECT(g == g1);
    OK(cuStreamGetGreenCtx(NULL, &g));
    EXPECT(g == g1);
    OK(cuStreamGetCtx(s1, &cur));
    EXPECT(cur == c1);
    OK(cuStreamGetCtx_v2(s1, &cur, &g));
    EXPECT(g == g1);
    OK(cuGreenCtxGetId(NULL, &id));
    EXPECT(id == id1);
    OK(cuCtxGetDevResource(NULL, &r, SM)); /* the green context's share */
    EXPECT(r.sm_count == 64);

    /* kernels in both green contexts' streams */
    OK(cuModuleLoadData(&mod, image));
    OK(cuModuleGetFunction(&f, mod, "fill_u32"));
    OK(cuMemAlloc_v2(&p, 32));
    fill(f, p, 7, s0);
    fill(f, p + 16, 9, s1);
    OK(cuStreamSynchronize(s0));
    OK(cuStreamSynchronize(s1));
    OK(cuMemcpyDtoH_v2(out, p, 16));
    EXPECT(out[0] == 7 && out[3] == 7);
    OK(cuMemcpyDtoH_v2(out, p + 16, 16));
    EXPECT(out[0] == 9 && out[3] == 9);
    OK(cuCtxSetCurrent(primary));
    OK(cuStreamCreate(&s2, NON_BLOCKING));
    OK(cuStreamGetGreenCtx(s2, &g));
    EXPECT(g == NULL);

    /* the NULL stream while a green context's token is current: a stream of the green context
     * (the double logs it), after the NULL-stream work made before (the primary context's) */
    OK(cuEventCreate(&ev3, 0));
    fill(f, p, 5, NULL);
    OK(cuCtxSetCurrent(c1));
    OK(cuEventRecord(ev3, NULL)); /* ... done only once the kernel before is */
    OK(cuEventSynchronize(ev3));
    OK(cuCtxSetCurrent(primary));
    OK(cuStreamQuery(NULL));
    OK(cuCtxSetCurrent(c1));
    fill(f, p + 16, 6, NULL);
    OK(cuStreamSynchronize(NULL));
    OK(cuMemcpyDtoH_v2(out8, p, 32));
    EXPECT(out8[0] == 5 && out8[3] == 5 && out8[4] == 6 && out8[7] == 6);
    OK(cuCtxSetCurrent(primary));

    /* events: the record waits for the green context's streams; the wait holds them */
    OK(cuEventCreate(&ev, 0));
    OK(cuEventCreate(&ev2, 0));
    fill(f, p, 1, s0);
    OK(cuGreenCtxRecordEvent(g0, ev));
    OK(cuEventSynchronize(ev));
    OK(cuStreamQuery(s0)); /* done: the event waited for it */
    OK(cuGreenCtxStreamCreate(&s2, g1, NON_BLOCKING, 0));
    fill(f, p, 2, s0);
    OK(cuEventRecord(ev, s0));
    OK(cuGreenCtxWaitEvent(g1, ev)); /* s1 and s2 wait for s0's kernel */
    OK(cuEventRecord(ev2, s2));
    OK(cuEventSynchronize(ev2));
    OK(cuStreamQuery(s0));
    EXPECT_RC(cuGreenCtxRecordEvent(g0, NULL), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuGreenCtxRecordEvent(g0, (CUevent)((char *)ev + 4096)), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuGreenCtxWaitEvent((CUgreenCtx)(uintptr_t)0x1234, ev), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(cuGreenCtxRecordEvent(NULL, ev), CUDA_ERROR_INVALID_CONTEXT);

    /* destroyed: its streams go with it, its token is no context any more */
    OK(cuGreenCtxDestroy(g0));
    EXPECT_RC(cuStreamQuery(s0), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuGreenCtxDestroy(g0), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(cuCtxSetCurrent(c0), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(cuGreenCtxStreamCreate(&s2, g0, NON_BLOCKING, 0), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(cuGreenCtxGetId(g0, &id), CUDA_ERROR_INVALID_HANDLE);
    /* g1 and its streams are left for the session's end */
}

void green_case(void)
{
    res_t dev;

    resources(&dev);
    green_contexts(&dev);
    printf("green ok\n");
}

/* Holds a descriptor, a green context, a stream of it, an event and a resource; prints them
 * (the resource in hex) and keeps them until a line on stdin. */
void green_hold_case(void)
{
    res_t dev, groups[4], rem;
    CUdesc d;
    CUgreenCtx g;
    CUstream s;
    CUevent ev;
    char line[16];

    OK(cuDeviceGetDevResource(0, &dev, SM));
    split_two(&dev, groups, &rem);
    OK(cuDevResourceGenerateDesc(&d, &groups[0], 1));
    OK(cuGreenCtxCreate(&g, d, 0, DEFAULT_STREAM));
    OK(cuGreenCtxStreamCreate(&s, g, NON_BLOCKING, 0));
    OK(cuEventCreate(&ev, 0));
    printf("%p %p %p %p ", d, g, s, ev);
    for (size_t i = 0; i < sizeof(res_t); i++)
        printf("%02x", ((unsigned char *)&groups[1])[i]);
    printf("\n");
    fflush(stdout);
    if (!fgets(line, sizeof(line), stdin))
        exit(1);
    printf("held ok\n");
}

void green_steal_case(char **argv)
{
    CUdesc d = (CUdesc)(uintptr_t)strtoull(argv[0], NULL, 16);
    CUgreenCtx g = (CUgreenCtx)(uintptr_t)strtoull(argv[1], NULL, 16), own, out;
    CUstream s = (CUstream)(uintptr_t)strtoull(argv[2], NULL, 16), s2;
    CUevent ev = (CUevent)(uintptr_t)strtoull(argv[3], NULL, 16), own_ev;
    res_t theirs, dev, groups[4], rem, r;
    unsigned long long id;
    unsigned nb = 4;
    CUdesc dd;

    for (size_t i = 0; i < sizeof(res_t); i++) {
        unsigned v;
        EXPECT(sscanf(argv[4] + 2 * i, "%2x", &v) == 1);
        ((unsigned char *)&theirs)[i] = (unsigned char)v;
    }
    OK(cuDeviceGetDevResource(0, &dev, SM));
    split_two(&dev, groups, &rem);
    own = make_green(&groups[0]);
    OK(cuEventCreate(&own_ev, 0));

    EXPECT_RC(cuGreenCtxCreate(&out, d, 0, DEFAULT_STREAM), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuGreenCtxStreamCreate(&s2, g, NON_BLOCKING, 0), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(cuGreenCtxGetDevResource(g, &r, SM), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(cuGreenCtxGetId(g, &id), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuGreenCtxRecordEvent(g, own_ev), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(cuGreenCtxWaitEvent(g, own_ev), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_RC(cuGreenCtxRecordEvent(own, ev), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuGreenCtxWaitEvent(own, ev), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuStreamGetGreenCtx(s, &out), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuDevSmResourceSplitByCount(groups, &nb, &theirs, NULL, 0, 8),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuDevResourceGenerateDesc(&dd, &theirs, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuGreenCtxDestroy(g), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuGreenCtxDestroy(own));
    printf("steal refused\n");
}
