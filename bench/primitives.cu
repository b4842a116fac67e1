// SPDX-License-Identifier: MIT
// What the driver's primitives cost, in a context set up as the server's is (blocking sync,
// a non-blocking stream): the floor under B2's launch + synchronize and 4-byte copy when a
// server thread does them for a client (issue #23, docs/benchmarks.md). Each figure is the
// median over 7 rounds of the mean of N iterations (default 2000), in microseconds:
//   query_idle             cuStreamQuery on an idle stream
//   htod4_enqueue          cuMemcpyHtoDAsync of 4 bytes from pinned memory: the call alone
//   htod4_pinned_wait      the same, then cuStreamQuery until done (the server's small copy)
//   htod4_pageable_sync    cuMemcpyHtoD of 4 bytes from pageable memory (what a program does
//                          natively; in a blocking-sync context)
//   htod4_pageable_async   cuMemcpyHtoDAsync of 4 bytes from pageable memory on the stream,
//                          then cuStreamQuery until done
//   write32_wait           cuStreamWriteValue32 into device memory, then query until done (the
//                          value travels in the command: no DMA from host memory)
//   memset32_wait          cuMemsetD32Async of one word, then query until done
//   launch_enqueue         an empty kernel's launch alone
//   launch_query           launch, then cuStreamQuery until done (the server's launch +
//                          synchronize today)
//   launch_sync            launch, then cuStreamSynchronize (asleep in the driver)
//   launch_flag_spin       launch, then cuStreamWriteValue32 into host memory mapped for the
//                          device, then the host spins on that word (completion the client
//                          could see without a round trip)
//   flag_after_launch      the same, the time from the write's enqueue to the word's change
//   event_query_done       cuEventQuery on an event whose work is done (what one poll of an
//                          event costs, against query_idle for a stream)
//   launch_event_query     launch, cuEventRecord behind it, then cuEventQuery until done
//   dtoh4_pinned_wait      cuMemcpyDtoHAsync of 4 bytes into pinned memory, then cuStreamQuery
//                          until done (the server's small device-to-host copy)
//   dtoh4_pageable_sync    cuMemcpyDtoH of 4 bytes into pageable memory (what a program does
//                          natively: CuPy's status reads after each cuSOLVER call)
// Usage: primitives [iterations] [auto]: auto leaves the context's scheduling at the driver's
// default (what a program's context has natively) instead of blocking sync.
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver_check.h"

static CUstream st;
static CUevent ev;
static CUfunction fn;
static CUdeviceptr dword;
static uint32_t *pinned, *mapped_word;
static CUdeviceptr mapped_dev;
static uint32_t pageable[1];
static uint32_t seq;
static double flag_ns_total;

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void query_until_done(void)
{
    CUresult rc;
    while ((rc = cuStreamQuery(st)) == CUDA_ERROR_NOT_READY)
        ;
    CHECK(rc);
}

static void launch(void)
{
    CHECK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, st, NULL, NULL));
}

static void op_query_idle(void)
{
    CHECK(cuStreamQuery(st));
}
static void op_htod4_enqueue(void)
{
    CHECK(cuMemcpyHtoDAsync(dword, pinned, 4, st));
}
static void op_htod4_pinned_wait(void)
{
    CHECK(cuMemcpyHtoDAsync(dword, pinned, 4, st));
    query_until_done();
}
static void op_htod4_pageable_sync(void)
{
    CHECK(cuMemcpyHtoD(dword, pageable, 4));
}
static void op_htod4_pageable_async(void)
{
    CHECK(cuMemcpyHtoDAsync(dword, pageable, 4, st));
    query_until_done();
}
static void op_write32_wait(void)
{
    CHECK(cuStreamWriteValue32(st, dword, ++seq, CU_STREAM_WRITE_VALUE_DEFAULT));
    query_until_done();
}
static void op_memset32_wait(void)
{
    CHECK(cuMemsetD32Async(dword, ++seq, 1, st));
    query_until_done();
}
static void op_launch_enqueue(void)
{
    launch();
}
static void op_launch_query(void)
{
    launch();
    query_until_done();
}
static void op_launch_sync(void)
{
    launch();
    CHECK(cuStreamSynchronize(st));
}
static void op_launch_flag_spin(void)
{
    uint32_t want = ++seq;
    launch();
    CHECK(cuStreamWriteValue32(st, mapped_dev, want, CU_STREAM_WRITE_VALUE_DEFAULT));
    double t = now_ns();
    while (__atomic_load_n(mapped_word, __ATOMIC_ACQUIRE) != want)
        ;
    flag_ns_total += now_ns() - t;
}

static void op_event_query_done(void)
{
    CHECK(cuEventQuery(ev));
}
static void op_launch_event_query(void)
{
    CUresult rc;
    launch();
    CHECK(cuEventRecord(ev, st));
    while ((rc = cuEventQuery(ev)) == CUDA_ERROR_NOT_READY)
        ;
    CHECK(rc);
}
static void op_dtoh4_pinned_wait(void)
{
    CHECK(cuMemcpyDtoHAsync(pinned + 1, dword, 4, st));
    query_until_done();
}
static void op_dtoh4_pageable_sync(void)
{
    CHECK(cuMemcpyDtoH(pageable, dword, 4));
}

struct op {
    const char *name;
    void (*fn)(void);
    bool drain; /* an enqueue alone: synchronize every 64, untimed */
};

static double median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    return v[n / 2];
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 2000;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    const struct op ops[] = {
        {"query_idle", op_query_idle, false},
        {"htod4_enqueue", op_htod4_enqueue, true},
        {"htod4_pinned_wait", op_htod4_pinned_wait, false},
        {"htod4_pageable_sync", op_htod4_pageable_sync, false},
        {"htod4_pageable_async", op_htod4_pageable_async, false},
        {"write32_wait", op_write32_wait, false},
        {"memset32_wait", op_memset32_wait, false},
        {"launch_enqueue", op_launch_enqueue, true},
        {"launch_query", op_launch_query, false},
        {"launch_sync", op_launch_sync, false},
        {"launch_flag_spin", op_launch_flag_spin, false},
        {"event_query_done", op_event_query_done, false},
        {"launch_event_query", op_launch_event_query, false},
        {"dtoh4_pinned_wait", op_dtoh4_pinned_wait, false},
        {"dtoh4_pageable_sync", op_dtoh4_pageable_sync, false},
    };

    if (iters < 64)
        iters = 64;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    if (!(argc > 2 && !strcmp(argv[2], "auto")))
        CHECK(cuDevicePrimaryCtxSetFlags(dev, CU_CTX_SCHED_BLOCKING_SYNC)); /* as the server's */
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventRecord(ev, st)); /* done at once: event_query_done's event */
    CHECK(cuModuleLoadData(&mod, empty_kernel_ptx));
    CHECK(cuModuleGetFunction(&fn, mod, "empty"));
    CHECK(cuMemAlloc(&dword, 4096));
    CHECK(cuMemAllocHost((void **)&pinned, 4096));
    mapped_word = (uint32_t *)aligned_alloc(4096, 4096);
    memset(mapped_word, 0, 4096);
    CHECK(cuMemHostRegister(mapped_word, 4096, CU_MEMHOSTREGISTER_DEVICEMAP));
    CHECK(cuMemHostGetDevicePointer(&mapped_dev, mapped_word, 0));

    for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
        double rounds[7], flag[7];
        for (int r = 0; r < 7; r++) {
            double busy = 0;
            flag_ns_total = 0;
            for (int w = 0; w < 50; w++) /* warm: not timed */
                ops[k].fn();
            CHECK(cuStreamSynchronize(st));
            for (int i = 0; i < iters; i++) {
                double t = now_ns();
                ops[k].fn();
                busy += now_ns() - t;
                if (ops[k].drain && i % 64 == 63)
                    CHECK(cuStreamSynchronize(st));
            }
            CHECK(cuStreamSynchronize(st));
            rounds[r] = busy / iters / 1e3;
            flag[r] = flag_ns_total / iters / 1e3;
        }
        printf("%-22s %8.3f us\n", ops[k].name, median(rounds, 7));
        if (ops[k].fn == op_launch_flag_spin)
            printf("%-22s %8.3f us\n", "flag_after_launch", median(flag, 7));
    }
    return 0;
}
