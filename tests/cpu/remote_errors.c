/* SPDX-License-Identifier: MIT */
/* remote_driver errors: an error of posted work reaches the stream it belongs to, and no other
 * stream's caller (server/errors.c). The double's kernel "fail" answers its launch with 701. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

CUresult cuCtxGetCurrent(CUcontext *);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamDestroy_v2(CUstream);
CUresult cuStreamSynchronize(CUstream);
CUresult cuCtxSynchronize(void);
CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuEventSynchronize(CUevent);
CUresult cuEventDestroy_v2(CUevent);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);
CUresult cuMemAlloc_v2(unsigned long long *, size_t);
CUresult cuMemFree_v2(unsigned long long);
CUresult cuMemcpyHtoD_v2(unsigned long long, const void *, size_t);
CUresult cuMemcpyDtoH_v2(void *, unsigned long long, size_t);
CUresult cuMemsetD8_v2(unsigned long long, unsigned char, size_t);
CUresult cuMemsetD32Async(unsigned long long, unsigned, size_t, CUstream);

static CUfunction failing;
static CUcontext ctx;
static unsigned count = 1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int step;

static void wait_step(int n)
{
    pthread_mutex_lock(&lock);
    while (step < n)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
}

static void set_step(int n)
{
    pthread_mutex_lock(&lock);
    step = n;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

static void launch_failing(CUstream s)
{
    void *args[] = {&count};
    OK(cuLaunchKernel(failing, 1, 1, 1, 1, 1, 1, 0, s, args, NULL)); /* posted: success now */
}

/* Thread B: once A's launch failed in the server, B's own copies, sets and synchronizes on its
 * own streams all succeed — the error is not B's. */
static void *thread_b(void *arg)
{
    unsigned long long p;
    unsigned char buf[256], back[256];
    CUstream sb;

    (void)arg;
    OK(cuCtxSetCurrent(ctx));
    wait_step(1);
    OK(cuStreamCreate(&sb, 1));
    OK(cuMemAlloc_v2(&p, sizeof(buf)));
    for (int i = 0; i < 50; i++) {
        memset(buf, i, sizeof(buf));
        OK(cuMemcpyHtoD_v2(p, buf, sizeof(buf))); /* the default stream's synchronous copy */
        OK(cuMemcpyDtoH_v2(back, p, sizeof(back)));
        EXPECT(memcmp(buf, back, sizeof(buf)) == 0);
        OK(cuMemsetD8_v2(p, 0, 16));
        OK(cuStreamSynchronize(sb));
    }
    OK(cuMemFree_v2(p)); /* waits for every stream of the client, reports none's error */
    OK(cuStreamDestroy_v2(sb));
    set_step(2);
    return NULL;
}

void errors_case(void)
{
    static const char image[] = "fakecubin\nfail:4\n";
    CUmodule mod;
    CUstream sa, sc;
    CUevent ev;
    pthread_t b;

    OK(cuCtxGetCurrent(&ctx));
    OK(cuModuleLoadData(&mod, image));
    OK(cuModuleGetFunction(&failing, mod, "fail"));
    OK(cuStreamCreate(&sa, 1));

    /* Two threads: A's failed launch goes to A's stream's synchronize, never to B. */
    EXPECT(pthread_create(&b, NULL, thread_b, NULL) == 0);
    launch_failing(sa);
    set_step(1);
    wait_step(2);
    EXPECT(pthread_join(b, NULL) == 0);
    EXPECT_RC(cuStreamSynchronize(sa),
              CUDA_ERROR_OUT_OF_RESOURCES); /* A's, still there after B's calls */
    OK(cuStreamSynchronize(sa));            /* once */

    /* The default stream's error goes to its synchronous copy, not to a created stream. */
    unsigned long long p;
    unsigned char byte = 7;
    OK(cuMemAlloc_v2(&p, 64));
    launch_failing(NULL);
    OK(cuStreamSynchronize(sa));
    EXPECT_RC(cuMemcpyHtoD_v2(p, &byte, 1), CUDA_ERROR_OUT_OF_RESOURCES);
    OK(cuMemcpyHtoD_v2(p, &byte, 1));

    /* An event recorded behind the error reports it; the stream then has none. */
    OK(cuEventCreate(&ev, 0));
    launch_failing(sa);
    OK(cuEventRecord(ev, sa));
    EXPECT_RC(cuEventSynchronize(ev), CUDA_ERROR_OUT_OF_RESOURCES);
    OK(cuStreamSynchronize(sa));
    OK(cuEventSynchronize(ev));
    /* ... also with an asynchronous set behind the event (posted: it takes no error) */
    launch_failing(sa);
    OK(cuEventRecord(ev, sa));
    OK(cuMemsetD32Async(p, 5, 16, sa));
    EXPECT_RC(cuEventSynchronize(ev), CUDA_ERROR_OUT_OF_RESOURCES);
    OK(cuStreamSynchronize(sa));
    /* ... and a set on another stream leaves the first stream's error where it is */
    launch_failing(sa);
    OK(cuStreamCreate(&sc, 1));
    OK(cuMemsetD32Async(p, 6, 16, sc));
    OK(cuStreamSynchronize(sc));
    EXPECT_RC(cuStreamSynchronize(sa), CUDA_ERROR_OUT_OF_RESOURCES);
    OK(cuStreamDestroy_v2(sc));
    /* ... an event recorded on another stream does not */
    OK(cuStreamCreate(&sc, 1));
    launch_failing(sa);
    OK(cuEventRecord(ev, sc));
    OK(cuEventSynchronize(ev));
    EXPECT_RC(cuStreamSynchronize(sa), CUDA_ERROR_OUT_OF_RESOURCES);

    /* The context's synchronize reports any stream's, once; a destroyed stream's last call
     * reports what no synchronize took. */
    launch_failing(sc);
    EXPECT_RC(cuCtxSynchronize(), CUDA_ERROR_OUT_OF_RESOURCES);
    OK(cuStreamSynchronize(sc));
    OK(cuCtxSynchronize());
    launch_failing(sc);
    OK(cuStreamSynchronize(sa));
    EXPECT_RC(cuStreamDestroy_v2(sc), CUDA_ERROR_OUT_OF_RESOURCES);
    OK(cuCtxSynchronize());

    OK(cuEventDestroy_v2(ev));
    OK(cuStreamDestroy_v2(sa));
    OK(cuMemFree_v2(p));
    printf("errors ok\n");
}
