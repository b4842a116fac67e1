/* SPDX-License-Identifier: MIT */
/* A process that forks after CUDA is initialised (tests/ipc/test_fork.py; issue #24: Python's
 * multiprocessing with the fork start method): the parent initialises, allocates, copies and
 * launches (a staged pageable copy too, which starts the staging helpers) from several
 * threads, then forks children while its threads keep working. Each child calls the driver as
 * a child of an initialised CUDA process does natively, every call failing with
 * CUDA_ERROR_NOT_INITIALIZED (cuInit, device and context queries, an allocation; the version
 * needs no initialisation), and exits
 * with exit() (destructors run) or _exit(). The parent then starts new threads (one with a
 * 128 KiB stack) and goes on: its copies come back right, its session is whole.
 *   fork-driver [ROUNDS]   prints "fork ok" when every check passed
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxGetDevice(int *);
CUresult cuDeviceGetCount(int *);
CUresult cuCtxSynchronize(void);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuMemsetD32_v2(CUdeviceptr, unsigned, size_t);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamDestroy_v2(CUstream);
CUresult cuStreamSynchronize(CUstream);
CUresult cuDriverGetVersion(int *);

static CUcontext ctx;
static volatile int stop;

/* A thread's work: set, copy in, copy back on a stream of its own, checked. */
static void *worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    size_t n = (size_t)(64u << 10);
    unsigned *a = malloc(n), *b = malloc(n);
    CUdeviceptr d;
    CUstream s;

    EXPECT(a && b);
    OK(cuCtxSetCurrent(ctx));
    OK(cuStreamCreate(&s, 1));
    OK(cuMemAlloc_v2(&d, n));
    do {
        for (size_t i = 0; i < n / 4; i++)
            a[i] = (unsigned)i * 31u + seed;
        OK(cuMemcpyHtoD_v2(d, a, n));
        OK(cuMemcpyDtoH_v2(b, d, n));
        EXPECT(!memcmp(a, b, n));
        OK(cuMemsetD32_v2(d, seed, n / 4));
        OK(cuStreamSynchronize(s));
        seed++;
    } while (!stop);
    OK(cuMemFree_v2(d));
    OK(cuStreamDestroy_v2(s));
    free(a);
    free(b);
    return NULL;
}

/* The child: every call that needs the driver initialised fails as natively; the version needs
 * none. */
static void child(int round)
{
    int n = -1, dev = -1, v = 0;
    CUdeviceptr d = 0;

    EXPECT_RC(cuInit(0), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuCtxGetDevice(&dev), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuMemAlloc_v2(&d, 4096), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuCtxSynchronize(), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_RC(cuInit(0), CUDA_ERROR_NOT_INITIALIZED);
    OK(cuDriverGetVersion(&v));
    EXPECT(n == -1 && dev == -1 && d == 0 && v > 0);
    if (round % 2)
        exit(0); /* destructors and atexit handlers run */
    _exit(0);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 4;
    pthread_t t[4];
    size_t big = 8u << 20; /* a pageable copy large enough to be staged (helper threads) */
    unsigned char *a = malloc(big), *b = malloc(big);
    CUdeviceptr d;

    setvbuf(stdout, NULL, _IONBF, 0);
    EXPECT(a && b);
    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
    OK(cuMemAlloc_v2(&d, big));
    memset(a, 7, big);
    OK(cuMemcpyHtoD_v2(d, a, big));
    for (int r = 0; r < rounds; r++) {
        int st = 0;
        pid_t pid;
        stop = 0;
        for (int i = 0; i < 4; i++)
            EXPECT(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(r * 16 + i)) == 0);
        pid = fork();
        EXPECT(pid >= 0);
        if (pid == 0)
            child(r);
        EXPECT(waitpid(pid, &st, 0) == pid);
        EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        stop = 1;
        for (int i = 0; i < 4; i++)
            EXPECT(pthread_join(t[i], NULL) == 0);
        /* a thread with a small stack of its own size: the shim's thread-local storage is
         * part of it (it was 360 KiB, and such a thread could not start) */
        {
            pthread_attr_t attr;
            pthread_t small;
            EXPECT(pthread_attr_init(&attr) == 0);
            EXPECT(pthread_attr_setstacksize(&attr, 128u << 10) == 0);
            stop = 1;
            EXPECT(pthread_create(&small, &attr, worker, (void *)(uintptr_t)r) == 0);
            EXPECT(pthread_join(small, NULL) == 0);
            pthread_attr_destroy(&attr);
        }
        /* the parent after its child: new threads, a staged copy both ways */
        memset(a, r + 1, big);
        OK(cuMemcpyHtoD_v2(d, a, big));
        memset(b, 0, big);
        OK(cuMemcpyDtoH_v2(b, d, big));
        EXPECT(!memcmp(a, b, big));
        OK(cuCtxSynchronize());
    }
    OK(cuMemFree_v2(d));
    free(a);
    free(b);
    printf("fork ok\n");
    return 0;
}
