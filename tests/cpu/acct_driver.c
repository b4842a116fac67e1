/* SPDX-License-Identifier: MIT */
/* Known work for openmps stats' tests (tests/ipc/test_stats.py): kernels of known duration on
 * the driver double and copies of known sizes, then the session is held until stdin closes.
 *   acct_driver KERNELS US HTOD DTOH DTOD [STREAMS]
 * launches KERNELS "sleep" kernels of US microseconds each (the double's kernel of known
 * duration), spread over STREAMS streams of its own (default 0: the default stream), waits for
 * them, copies HTOD bytes to the device, DTOH back and DTOD within it, prints the GPU time its
 * own events measured around its kernels ("events_ms X") and "ready", then waits for stdin to
 * close before it ends its session. Exit status 0 when every check passed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxSynchronize(void);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuMemcpyDtoD_v2(CUdeviceptr, CUdeviceptr, size_t);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuEventSynchronize(CUevent);
CUresult cuEventElapsedTime_v2(float *, CUevent, CUevent);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);

int main(int argc, char **argv)
{
    static const char image[] = "fakecubin\nsleep:4\n";
    CUcontext ctx;
    CUmodule mod;
    CUfunction sleep_k;
    CUstream streams[8] = {NULL};
    CUevent start[8], stop[8];
    CUdeviceptr a = 0, b = 0;
    char line[16];
    float total_ms = 0;

    if (argc < 6) {
        fprintf(stderr, "usage: acct_driver KERNELS US HTOD DTOH DTOD [STREAMS]\n");
        return 2;
    }
    long kernels = atol(argv[1]), nstreams = argc > 6 ? atol(argv[6]) : 0;
    unsigned us = (unsigned)atol(argv[2]);
    size_t htod = (size_t)atol(argv[3]), dtoh = (size_t)atol(argv[4]), dtod = (size_t)atol(argv[5]);
    size_t big = htod > dtoh ? htod : dtoh;
    void *host = malloc(big ? big : 1);

    EXPECT(host && nstreams >= 0 && nstreams <= 8);
    memset(host, 7, big);
    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
    OK(cuModuleLoadData(&mod, image));
    OK(cuModuleGetFunction(&sleep_k, mod, "sleep"));
    long ns = nstreams ? nstreams : 1;
    for (long i = 0; i < ns; i++) {
        if (nstreams)
            OK(cuStreamCreate(&streams[i], 0));
        OK(cuEventCreate(&start[i], 0));
        OK(cuEventCreate(&stop[i], 0));
        OK(cuEventRecord(start[i], streams[i]));
    }
    for (long k = 0; k < kernels; k++) {
        void *args[] = {&us};
        OK(cuLaunchKernel(sleep_k, 1, 1, 1, 1, 1, 1, 0, streams[k % ns], args, NULL));
    }
    for (long i = 0; i < ns; i++)
        OK(cuEventRecord(stop[i], streams[i]));
    OK(cuCtxSynchronize());
    for (long i = 0; i < ns; i++) {
        float ms = 0;
        OK(cuEventSynchronize(stop[i]));
        OK(cuEventElapsedTime_v2(&ms, start[i], stop[i]));
        total_ms += ms;
    }
    size_t dev_bytes = big > dtod ? big : dtod;
    OK(cuMemAlloc_v2(&a, dev_bytes ? dev_bytes : 1));
    OK(cuMemAlloc_v2(&b, dev_bytes ? dev_bytes : 1));
    if (htod)
        OK(cuMemcpyHtoD_v2(a, host, htod));
    if (dtoh)
        OK(cuMemcpyDtoH_v2(host, a, dtoh));
    if (dtod)
        OK(cuMemcpyDtoD_v2(b, a, dtod));
    OK(cuCtxSynchronize());
    printf("events_ms %.3f\nready\n", (double)total_ms);
    fflush(stdout);
    while (fgets(line, sizeof(line), stdin)) {
    }
    free(host);
    return 0;
}
