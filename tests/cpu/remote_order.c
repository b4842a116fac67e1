/* SPDX-License-Identifier: MIT */
/* remote_driver order: the order between streams that the server keeps for a client, read back
 * where the driver double does a kernel's writes late (FAKECUDA_KERNEL_LATER, which
 * tests/ipc/test_order.py sets): a kernel's result read through another stream is there only
 * where the driver orders the two (an event waited for; the legacy stream and the blocking
 * streams, the per-thread stream, each after the other; a context synchronize). One line per
 * step, "NAME VALUE" (the first word of the buffer read back); a step whose order the driver
 * guarantees is checked here, and one it does not ("unordered ...", a race natively) is printed
 * for the test: under the double's late writes it reads the old value, which shows that the
 * writes were late. Ends with "order ok". */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);
CUresult cuMemAlloc_v2(unsigned long long *, size_t);
CUresult cuMemcpyDtoH_v2(void *, unsigned long long, size_t);
CUresult cuMemcpyDtoHAsync_v2(void *, unsigned long long, size_t, CUstream);
CUresult cuMemsetD32_v2(unsigned long long, unsigned, size_t);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamSynchronize(CUstream);
CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned);
CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuCtxSynchronize(void);

#define WORDS 64u
#define PER_THREAD ((CUstream)0x2) /* CU_STREAM_PER_THREAD */

static CUfunction fill_fn;
static unsigned long long buf;

static void fill(unsigned v, CUstream s)
{
    unsigned n = WORDS;
    void *args[] = {&buf, &v, &n};
    OK(cuLaunchKernel(fill_fn, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
}

/* The first word, read with an asynchronous copy on s and s synchronized. */
static unsigned read_on(CUstream s)
{
    unsigned back[WORDS];

    OK(cuMemcpyDtoHAsync_v2(back, buf, sizeof(back), s));
    OK(cuStreamSynchronize(s));
    return back[0];
}

/* The first word, read with a synchronous copy (the legacy stream's). */
static unsigned read_sync(void)
{
    unsigned back[WORDS];

    OK(cuMemcpyDtoH_v2(back, buf, sizeof(back)));
    return back[0];
}

static void step(const char *name, unsigned got, unsigned want)
{
    printf("%s %u\n", name, got);
    fflush(stdout);
    EXPECT_MSG(!want || got == want, "%s: read %u, want %u", name, got, want);
}

void order_case(void)
{
    static const char image[] = "fakecubin\nfill_u32:8,4,4\n";
    CUstream a, b, blk;
    CUevent ev;
    CUmodule mod;

    OK(cuModuleLoadData(&mod, image));
    OK(cuModuleGetFunction(&fill_fn, mod, "fill_u32"));
    OK(cuMemAlloc_v2(&buf, WORDS * 4));
    OK(cuMemsetD32_v2(buf, 0, WORDS));
    OK(cuStreamCreate(&a, 1)); /* CU_STREAM_NON_BLOCKING */
    OK(cuStreamCreate(&b, 1));
    OK(cuStreamCreate(&blk, 0)); /* blocking: ordered with the legacy stream */
    OK(cuEventCreate(&ev, 0));

    /* a race natively: nothing orders b's copy after a's kernel */
    fill(1, a);
    step("unordered-streams", read_on(b), 0);
    OK(cuStreamSynchronize(a));

    /* an event recorded after the kernel, waited for by the reading stream */
    fill(2, a);
    OK(cuEventRecord(ev, a));
    OK(cuStreamWaitEvent(b, ev, 0));
    step("event", read_on(b), 2);

    /* a blocking stream's kernel, then the legacy stream's synchronous copy */
    fill(3, blk);
    step("blocking-then-legacy", read_sync(), 3);

    /* the legacy stream's kernel, then a blocking stream's copy */
    fill(4, NULL);
    step("legacy-then-blocking", read_on(blk), 4);

    /* the per-thread stream's kernel, then the legacy stream's copy, and back */
    fill(5, PER_THREAD);
    step("per-thread-then-legacy", read_sync(), 5);
    fill(6, NULL);
    step("legacy-then-per-thread", read_on(PER_THREAD), 6);

    /* a race natively: the legacy stream does not wait for a non-blocking stream */
    fill(7, a);
    step("unordered-legacy", read_sync(), 0);

    /* a context synchronize orders everything */
    fill(8, a);
    OK(cuCtxSynchronize());
    step("ctx-synchronize", read_on(b), 8);

    /* the same stream: in order */
    fill(9, b);
    step("same-stream", read_on(b), 9);
    printf("order ok\n");
}
