/* SPDX-License-Identifier: MIT */
/* remote_driver share: a client under an SM share (server/share.c), driven line by line from
 * stdin so that the test can change its share while it runs. Each round prints the SM count it
 * is shown (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, and the SM resource of the device), then
 * launches a kernel on the NULL stream and on a stream of its own, each followed by a copy of
 * the result, and checks the values; and the device memory's total it is shown (its cap):
 * "round N sms S res R mem T ok". Input: "again" for another
 * round, "end" to finish ("share ok"). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

typedef struct {
    int type;
    unsigned char hidden[92];
    unsigned sm_count, min_partition, alignment;
    unsigned char rest[36];
} res_t;

CUresult cuDeviceGetAttribute(int *, int, int);
CUresult cuDeviceGetDevResource(int, res_t *, int);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);
CUresult cuMemAlloc_v2(unsigned long long *, size_t);
CUresult cuMemcpyDtoH_v2(void *, unsigned long long, size_t);
CUresult cuMemcpyDtoHAsync_v2(void *, unsigned long long, size_t, CUstream);
CUresult cuMemsetD32Async(unsigned long long, unsigned, size_t, CUstream);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamSynchronize(CUstream);
CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned);
CUresult cuCtxSynchronize(void);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuStreamCreateWithPriority(CUstream *, unsigned, int);
CUresult cuStreamGetPriority(CUstream, int *);
CUresult cuCtxGetStreamPriorityRange(int *, int *);
typedef struct {
    int type;
    unsigned val;
} affinity_t; /* CUexecAffinityParam with an SM count */
CUresult cuCtxCreate_v3(CUcontext *, affinity_t *, int, unsigned, int);
CUresult cuCtxPopCurrent_v2(CUcontext *);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxGetCurrent(CUcontext *);

static void fill(CUfunction f, unsigned long long p, unsigned v, unsigned n, CUstream s)
{
    void *args[] = {&p, &v, &n};
    OK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
}

void share_case(void)
{
    static const char image[] = "fakecubin\nfill_u32:8,4,4\n";
    unsigned long long a, b;
    unsigned back[64];
    char line[64];
    CUmodule mod;
    CUfunction f;
    CUstream own;
    CUevent ev;
    res_t r;
    int sms = 0;
    size_t free_b = 0, total_b = 0;

    OK(cuModuleLoadData(&mod, image));
    OK(cuModuleGetFunction(&f, mod, "fill_u32"));
    OK(cuMemAlloc_v2(&a, sizeof(back)));
    OK(cuMemAlloc_v2(&b, sizeof(back)));
    OK(cuStreamCreate(&own, 0));
    OK(cuEventCreate(&ev, 0));
    for (unsigned round = 1;; round++) {
        OK(cuDeviceGetAttribute(&sms, 16, 0)); /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
        OK(cuDeviceGetDevResource(0, &r, 1));
        /* a set, a kernel after it, a copy after the kernel: the stream's order kept across
         * the shadow stream the kernel goes to */
        OK(cuMemsetD32Async(a, 0xdead, 64, NULL));
        fill(f, a, round, 32, NULL);
        OK(cuMemcpyDtoH_v2(back, a, sizeof(back)));
        EXPECT(back[0] == round && back[31] == round && back[32] == 0xdead);
        OK(cuMemsetD32Async(b, 0xbeef, 64, own));
        fill(f, b, round + 100, 16, own);
        fill(f, b + 64, round + 200, 16, own); /* two launches in a row: no join between */
        OK(cuEventRecord(ev, own));
        OK(cuStreamWaitEvent(NULL, ev, 0));
        OK(cuMemcpyDtoHAsync_v2(back, b, sizeof(back), own));
        OK(cuStreamSynchronize(own));
        EXPECT(back[0] == round + 100 && back[16] == round + 200 && back[32] == 0xbeef);
        OK(cuCtxSynchronize());
        OK(cuMemGetInfo_v2(&free_b, &total_b));
        printf("round %u sms %d res %u mem %zu ok\n", round, sms, r.sm_count, total_b);
        fflush(stdout);
        if (!fgets(line, sizeof(line), stdin) || strncmp(line, "again", 5))
            break;
    }
    printf("share ok\n");
}

/* remote_driver priority: streams of priorities 0, -2, -5 and 3 (above the least: clamped),
 * then the NULL stream; per stream "stream HANDLE asked A answered G" (HANDLE: the server's
 * stream, as the double logs it), and the range the client is shown. */
void priority_case(void)
{
    static const int asked[] = {0, -2, -5, 3};
    int least = 7, greatest = 7, got = 7;
    CUstream st;

    OK(cuCtxGetStreamPriorityRange(&least, &greatest));
    printf("range %d %d\n", least, greatest);
    for (unsigned i = 0; i < sizeof(asked) / sizeof(asked[0]); i++) {
        OK(cuStreamCreateWithPriority(&st, 1, asked[i]));
        OK(cuStreamGetPriority(st, &got));
        printf("stream %llu asked %d answered %d\n", (unsigned long long)(uintptr_t)st, asked[i],
               got);
    }
    OK(cuStreamGetPriority(NULL, &got));
    printf("null answered %d\n", got);
    printf("priority ok\n");
}

/* remote_driver partition: a context created with an execution affinity of 16 SMs; a kernel in
 * it, then one back in the primary context ("launched in partition", "launched in primary"). */
void partition_case(void)
{
    static const char image[] = "fakecubin\nfill_u32:8,4,4\n";
    affinity_t a = {0, 16}; /* CU_EXEC_AFFINITY_TYPE_SM_COUNT */
    CUcontext primary, part, popped;
    unsigned long long p;
    unsigned back[32];
    CUmodule mod;
    CUfunction f;

    OK(cuCtxGetCurrent(&primary));
    OK(cuModuleLoadData(&mod, image));
    OK(cuModuleGetFunction(&f, mod, "fill_u32"));
    OK(cuMemAlloc_v2(&p, sizeof(back)));
    OK(cuCtxCreate_v3(&part, &a, 1, 0, 0)); /* current now */
    fill(f, p, 7, 32, NULL);
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH_v2(back, p, sizeof(back)));
    EXPECT(back[0] == 7 && back[31] == 7);
    printf("launched in partition\n");
    fflush(stdout);
    OK(cuCtxPopCurrent_v2(&popped));
    EXPECT(popped == part);
    OK(cuCtxSetCurrent(primary));
    fill(f, p, 8, 32, NULL);
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH_v2(back, p, sizeof(back)));
    EXPECT(back[0] == 8);
    printf("launched in primary\npartition ok\n");
}
