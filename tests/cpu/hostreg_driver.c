/* SPDX-License-Identifier: MIT */
/* cuMemHostRegister keeps what the memory is (CPU tier, through the shim against a server on the
 * driver test double). Each mode prints "MODE ok" when every check passed:
 *   hostreg-driver file PATH   a MAP_SHARED mapping of the file PATH, registered: bytes copied
 *                              into it from the device and written by the program reach the file
 *   hostreg-driver fork        private memory, registered, then fork: parent and child each keep
 *                              their own copy (neither sees the other's later writes)
 *   hostreg-driver shared      MAP_SHARED|MAP_ANONYMOUS memory shared with a child forked before
 *                              the registration stays shared with it
 *   hostreg-driver readonly    a PROT_READ range: refused without CU_MEMHOSTREGISTER_READ_ONLY,
 *                              registered with it, stays read-only (a child's write faults), the
 *                              device may read it and not write it
 *   hostreg-driver threads     private memory registered while another thread runs: left in place
 *                              (not moved onto shared memory), copies still right, its pointer
 *                              attributes those of host memory without a device pointer
 *   hostreg-driver mainexit    the main thread ends (pthread_exit); the thread left registers
 *                              private memory: moved, as in a program of one thread
 * The first failed check is printed; exit status 1. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemsetD8_v2(CUdeviceptr, unsigned char, size_t);
CUresult cuMemHostRegister_v2(void *, size_t, unsigned);
CUresult cuMemHostUnregister(void *);
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *, void *, unsigned);
CUresult cuMemHostGetFlags(unsigned *, void *);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr, const void *, size_t, void *);
CUresult cuMemcpyDtoHAsync_v2(void *, CUdeviceptr, size_t, void *);
CUresult cuStreamSynchronize(void *);
CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *);
CUresult cuPointerGetAttribute(void *, int, CUdeviceptr);
CUresult cuPointerGetAttributes(unsigned, int *, void **, CUdeviceptr);

#define CU_MEMHOSTREGISTER_DEVICEMAP 0x02
#define CU_MEMHOSTREGISTER_IOMEMORY 0x04
#define CU_MEMHOSTREGISTER_READ_ONLY 0x08

/* CUpointer_attribute and CUmemorytype values (cuda.h) */
#define PA_MEMORY_TYPE 2
#define PA_DEVICE_POINTER 3
#define PA_HOST_POINTER 4
#define PA_MAPPED 13
#define MEMORYTYPE_HOST 1

#define PAGE 4096
#define LEN (3 * PAGE)

static void start(void)
{
    CUcontext ctx;

    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
}

/* Whether any mapping of [p, p + n) is a memfd the shim made (its pages moved there). */
static int moved(const void *p, size_t n)
{
    FILE *f = fopen("/proc/thread-self/maps", "r"); /* also once the main thread ended */
    char line[512];
    int found = 0;

    EXPECT(f != NULL);
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo < (uintptr_t)p + n && (uintptr_t)p < hi &&
            strstr(line, "/memfd:openmps"))
            found = 1;
    }
    fclose(f);
    return found;
}

/* The protections /proc/self/maps gives the mapping holding p ("rw-p", ...). */
static void prot_of(const void *p, char out[5])
{
    FILE *f = fopen("/proc/thread-self/maps", "r"); /* also once the main thread ended */
    char line[512];

    EXPECT(f != NULL);
    strcpy(out, "none");
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        char perms[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3 && lo <= (uintptr_t)p &&
            (uintptr_t)p < hi)
            memcpy(out, perms, 5);
    }
    fclose(f);
}

/* Device bytes to host memory and back: what the program sees equals what was copied. */
static void round_trip(unsigned char *host, size_t n, CUdeviceptr d, unsigned char seed)
{
    unsigned char *want = malloc(n), *back = malloc(n);

    EXPECT(want && back);
    for (size_t i = 0; i < n; i++)
        want[i] = (unsigned char)(i * 7 + seed);
    OK(cuMemcpyHtoD_v2(d, want, n));
    OK(cuMemcpyDtoHAsync_v2(host, d, n, NULL)); /* into the registered memory */
    OK(cuStreamSynchronize(NULL));
    EXPECT(memcmp(host, want, n) == 0);
    for (size_t i = 0; i < n; i++)
        host[i] = (unsigned char)(i * 5 + seed + 1);
    OK(cuMemcpyHtoDAsync_v2(d, host, n, NULL)); /* out of it */
    OK(cuStreamSynchronize(NULL));
    OK(cuMemcpyDtoH_v2(back, d, n));
    EXPECT(memcmp(back, host, n) == 0);
    free(want);
    free(back);
}

static int file_case(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    unsigned char *m, buf[LEN];
    CUdeviceptr d, dp;
    unsigned flags = 0;

    EXPECT(fd >= 0 && ftruncate(fd, LEN) == 0);
    m = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    EXPECT(m != MAP_FAILED);
    memset(m, 0x11, LEN);
    start();
    OK(cuMemAlloc_v2(&d, LEN));
    OK(cuMemHostRegister_v2(m, LEN, 0));
    EXPECT_RC(cuMemHostRegister_v2(m + PAGE, PAGE, 0),
              CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED); /* already registered */
    OK(cuMemHostGetFlags(&flags, m + 5));
    EXPECT(flags == 0);
    /* a device copy into the mapping reaches the file */
    OK(cuMemsetD8_v2(d, 0x5a, LEN));
    OK(cuMemcpyDtoH_v2(m, d, LEN));
    EXPECT(pread(fd, buf, LEN, 0) == LEN);
    EXPECT(buf[0] == 0x5a && buf[LEN - 1] == 0x5a);
    /* and so does the program's own write */
    m[100] = 0xab;
    EXPECT(pread(fd, buf, LEN, 0) == LEN && buf[100] == 0xab);
    /* a write to the file is what the program and a copy from the mapping see */
    unsigned char c = 0xcd;
    EXPECT(pwrite(fd, &c, 1, 200) == 1 && m[200] == 0xcd);
    OK(cuMemcpyHtoD_v2(d, m, LEN));
    OK(cuMemcpyDtoH_v2(buf, d, LEN));
    EXPECT(buf[200] == 0xcd && buf[100] == 0xab && buf[0] == 0x5a);
    round_trip(m, LEN, d, 3);
    EXPECT(pread(fd, buf, LEN, 0) == LEN && memcmp(buf, m, LEN) == 0);
    EXPECT(!moved(m, LEN));
    EXPECT_RC(cuMemHostGetDevicePointer_v2(&dp, m, 0),
              CUDA_ERROR_INVALID_VALUE); /* the server cannot map it */
    OK(cuMemHostUnregister(m));
    m[300] = 0xef; /* still the file's mapping */
    EXPECT(pread(fd, buf, LEN, 0) == LEN && buf[300] == 0xef);
    /* the server cannot map it: no device pointer, as the driver for memory it cannot map */
    EXPECT_RC(cuMemHostRegister_v2(m, LEN, CU_MEMHOSTREGISTER_DEVICEMAP), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemHostRegister_v2(m, LEN, CU_MEMHOSTREGISTER_IOMEMORY),
              CUDA_ERROR_INVALID_VALUE);                                      /* not I/O memory */
    EXPECT_RC(cuMemHostRegister_v2(m, LEN, 0x100), CUDA_ERROR_INVALID_VALUE); /* an unknown flag */
    EXPECT_RC(cuMemHostUnregister(m),
              CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED); /* none of them registered it */
    OK(cuMemFree_v2(d));
    munmap(m, LEN);
    close(fd);
    printf("file ok\n");
    return 0;
}

static int fork_case(void)
{
    unsigned char *m = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int to_child[2], to_parent[2], status = 0;
    CUdeviceptr d;
    char x;

    EXPECT(m != MAP_FAILED && pipe(to_child) == 0 && pipe(to_parent) == 0);
    memset(m, 0x22, LEN);
    start();
    OK(cuMemAlloc_v2(&d, LEN));
    OK(cuMemHostRegister_v2(m, LEN, 0));
    EXPECT(moved(m, LEN)); /* alone, private: moved onto shared memory the server maps */
    round_trip(m, LEN, d, 9);
    memset(m, 0x22, LEN);
    pid_t child = fork();
    EXPECT(child >= 0);
    if (child == 0) {
        close(to_child[1]); /* a parent that died is an end of file */
        close(to_parent[0]);
        /* the child's copy is the memory as it was at the fork */
        if (m[0] != 0x22 || m[LEN - 1] != 0x22 || moved(m, LEN))
            _exit(2);
        memset(m, 0xcc, LEN); /* must not reach the parent */
        if (write(to_parent[1], "w", 1) != 1 || read(to_child[0], &x, 1) != 1)
            _exit(3);
        /* the parent wrote 0x33 since: not here */
        _exit(m[0] == 0xcc && m[PAGE] == 0xcc ? 0 : 4);
    }
    close(to_child[0]);
    close(to_parent[1]);
    EXPECT(read(to_parent[0], &x, 1) == 1);
    EXPECT(m[0] == 0x22 && m[PAGE] == 0x22 &&
           m[LEN - 1] == 0x22); /* the child's writes: not here */
    memset(m, 0x33, LEN);
    EXPECT(write(to_child[1], "g", 1) == 1);
    EXPECT(waitpid(child, &status, 0) == child);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT(m[0] == 0x33);
    round_trip(m, LEN, d, 17); /* the parent's registration goes on */
    OK(cuMemHostUnregister(m));
    OK(cuMemFree_v2(d));
    printf("fork ok\n");
    return 0;
}

static int shared_case(void)
{
    unsigned char *m = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int to_child[2], to_parent[2], status = 0;
    CUdeviceptr d;
    char x;

    EXPECT(m != MAP_FAILED && pipe(to_child) == 0 && pipe(to_parent) == 0);
    memset(m, 0x44, LEN);
    pid_t child = fork(); /* shares m with this process */
    EXPECT(child >= 0);
    if (child == 0) {
        close(to_child[1]);
        close(to_parent[0]);
        if (read(to_child[0], &x, 1) != 1)
            _exit(2);
        /* the parent's device copy into m after its registration: seen here */
        if (m[0] != 0x5a || m[LEN - 1] != 0x5a || m[7] != 0x66)
            _exit(3);
        memset(m + PAGE, 0x77, PAGE);
        _exit(write(to_parent[1], "w", 1) == 1 ? 0 : 4);
    }
    close(to_child[0]);
    close(to_parent[1]);
    start();
    OK(cuMemAlloc_v2(&d, LEN));
    OK(cuMemHostRegister_v2(m, LEN, 0));
    EXPECT(m[0] == 0x44);
    OK(cuMemsetD8_v2(d, 0x5a, LEN));
    OK(cuMemcpyDtoH_v2(m, d, LEN));
    m[7] = 0x66;
    EXPECT(write(to_child[1], "g", 1) == 1);
    EXPECT(read(to_parent[0], &x, 1) == 1);
    EXPECT(m[PAGE] == 0x77 && m[2 * PAGE - 1] == 0x77); /* the child's write: seen here */
    unsigned char back[LEN];
    OK(cuMemcpyHtoD_v2(d, m, LEN)); /* and by a copy out of the registered memory */
    OK(cuMemcpyDtoH_v2(back, d, LEN));
    EXPECT(back[PAGE] == 0x77 && back[0] == 0x5a && back[7] == 0x66);
    EXPECT(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT(!moved(m, LEN));
    round_trip(m, LEN, d, 21);
    OK(cuMemHostUnregister(m));
    OK(cuMemFree_v2(d));
    printf("shared ok\n");
    return 0;
}

static int readonly_case(void)
{
    unsigned char *m = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char back[LEN];
    int status = 0;
    CUdeviceptr d;
    char prot[5];

    EXPECT(m != MAP_FAILED);
    for (int i = 0; i < LEN; i++)
        m[i] = (unsigned char)(i * 3);
    EXPECT(mprotect(m, LEN, PROT_READ) == 0);
    start();
    OK(cuMemAlloc_v2(&d, LEN));
    /* the driver needs CU_MEMHOSTREGISTER_READ_ONLY for memory the CPU maps read-only */
    EXPECT_RC(cuMemHostRegister_v2(m, LEN, 0), CUDA_ERROR_INVALID_VALUE);
    prot_of(m, prot);
    EXPECT(!strcmp(prot, "r--p"));
    OK(cuMemHostRegister_v2(m, LEN, CU_MEMHOSTREGISTER_READ_ONLY));
    prot_of(m, prot);
    EXPECT(!strcmp(prot, "r--p")); /* still read-only */
    pid_t child = fork();
    EXPECT(child >= 0);
    if (child == 0) {
        signal(SIGSEGV, SIG_DFL);
        m[10] = 1; /* faults */
        _exit(0);
    }
    EXPECT(waitpid(child, &status, 0) == child);
    EXPECT(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);
    /* the device reads it */
    OK(cuMemcpyHtoD_v2(d, m, LEN));
    OK(cuMemcpyDtoH_v2(back, d, LEN));
    EXPECT(memcmp(back, m, LEN) == 0);
    /* and may not write it: refused, the memory unchanged */
    OK(cuMemsetD8_v2(d, 0x99, LEN));
    EXPECT_RC(cuMemcpyDtoH_v2(m, d, LEN), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemcpyDtoHAsync_v2(m + PAGE, d, 16, NULL), CUDA_ERROR_INVALID_VALUE);
    CUDA_MEMCPY2D c2 = {.srcMemoryType = 2,
                        .srcDevice = d,
                        .srcPitch = 64,
                        .dstMemoryType = 1,
                        .dstHost = m + 2 * PAGE,
                        .dstPitch = 128,
                        .WidthInBytes = 64,
                        .Height = 4};
    EXPECT_RC(cuMemcpy2D_v2(&c2), CUDA_ERROR_INVALID_VALUE);
    EXPECT(m[0] == 0 && m[PAGE] == (unsigned char)(PAGE * 3) &&
           m[2 * PAGE] == (unsigned char)(2 * PAGE * 3));
    OK(cuMemHostUnregister(m));
    prot_of(m, prot);
    EXPECT(!strcmp(prot, "r--p"));
    OK(cuMemFree_v2(d));
    printf("readonly ok\n");
    return 0;
}

/* What the runtime's cudaPointerGetAttributes asks (PyTorch's is_pinned): registered memory is
 * host memory, with a device pointer when it was moved (dp, else 0: registered in place). */
static void host_attributes(unsigned char *p, CUdeviceptr dp)
{
    unsigned type = 0;
    int mapped = -1;
    void *host = NULL;
    CUdeviceptr got = 1;
    int attrs[2] = {PA_MEMORY_TYPE, PA_DEVICE_POINTER};
    void *data[2] = {&type, &got};

    OK(cuPointerGetAttribute(&type, PA_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p));
    EXPECT(type == MEMORYTYPE_HOST);
    OK(cuPointerGetAttribute(&host, PA_HOST_POINTER, (CUdeviceptr)(uintptr_t)p));
    EXPECT(host == p);
    OK(cuPointerGetAttribute(&mapped, PA_MAPPED, (CUdeviceptr)(uintptr_t)p));
    EXPECT(mapped == (dp != 0));
    if (dp) {
        OK(cuPointerGetAttribute(&got, PA_DEVICE_POINTER, (CUdeviceptr)(uintptr_t)p));
        EXPECT(got == dp);
    } else {
        EXPECT_RC(cuPointerGetAttribute(&got, PA_DEVICE_POINTER, (CUdeviceptr)(uintptr_t)p),
                  CUDA_ERROR_INVALID_VALUE);
    }
    type = 0;
    got = 1;
    OK(cuPointerGetAttributes(2, attrs, data, (CUdeviceptr)(uintptr_t)p));
    EXPECT(type == MEMORYTYPE_HOST && got == dp);
}

static int wake[2];

static void *other_thread(void *arg)
{
    char x;

    (void)arg;
    return read(wake[0], &x, 1) == 1 ? NULL : (void *)1;
}

static int threads_case(void)
{
    unsigned char *m = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CUdeviceptr d, dp;
    pthread_t t;

    EXPECT(m != MAP_FAILED && pipe(wake) == 0);
    memset(m, 0x55, LEN);
    start();
    OK(cuMemAlloc_v2(&d, LEN));
    EXPECT(pthread_create(&t, NULL, other_thread, NULL) == 0);
    /* another thread may be writing these pages: they are not moved, and cannot be mapped */
    EXPECT_RC(cuMemHostRegister_v2(m, LEN, CU_MEMHOSTREGISTER_DEVICEMAP), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemHostRegister_v2(m, LEN, 0));
    EXPECT(!moved(m, LEN));
    EXPECT_RC(cuMemHostGetDevicePointer_v2(&dp, m, 0), CUDA_ERROR_INVALID_VALUE);
    host_attributes(m + 8, 0);
    round_trip(m, LEN, d, 29);
    OK(cuMemHostUnregister(m));
    EXPECT_RC(cuMemHostUnregister(m), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    {
        unsigned type = 0;
        EXPECT_RC(cuPointerGetAttribute(&type, PA_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)m),
                  CUDA_ERROR_INVALID_VALUE); /* pageable again */
    }
    EXPECT(write(wake[1], "x", 1) == 1 && pthread_join(t, NULL) == 0);
    /* alone again: the same pages are moved, and mapped for the device */
    OK(cuMemHostRegister_v2(m, LEN, CU_MEMHOSTREGISTER_DEVICEMAP));
    EXPECT(moved(m, LEN));
    OK(cuMemHostGetDevicePointer_v2(&dp, m + 8, 0));
    host_attributes(m + 8, dp);
    round_trip(m, LEN, d, 31);
    OK(cuMemHostUnregister(m));
    EXPECT(!moved(m, LEN)); /* given back to private memory */
    EXPECT(m[0] == (unsigned char)(31 + 1));
    OK(cuMemFree_v2(d));
    printf("threads ok\n");
    return 0;
}

/* The main thread ends (pthread_exit) and stays listed as a zombie while the process lives: it
 * writes nothing any more, so the one thread left registers as a program of one thread. */
static pid_t main_tid;

static void *survivor(void *arg)
{
    unsigned char *m = arg;
    char path[64], stat[256];
    CUdeviceptr d;

    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)main_tid);
    for (;;) { /* until the main thread has exited: its state Z */
        FILE *f = fopen(path, "r");
        char *p = NULL;
        if (f && fgets(stat, sizeof(stat), f))
            p = strrchr(stat, ')');
        if (f)
            fclose(f);
        if (!p || p[2] == 'Z' || p[2] == 'X')
            break;
        usleep(1000);
    }
    OK(cuMemAlloc_v2(&d, LEN));
    OK(cuMemHostRegister_v2(m, LEN, CU_MEMHOSTREGISTER_DEVICEMAP));
    EXPECT(moved(m, LEN));
    round_trip(m, LEN, d, 41);
    OK(cuMemHostUnregister(m));
    EXPECT(!moved(m, LEN));
    printf("mainexit ok\n");
    exit(0);
}

static int mainexit_case(void)
{
    unsigned char *m = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    pthread_t t;

    EXPECT(m != MAP_FAILED);
    start();
    main_tid = getpid();
    EXPECT(pthread_create(&t, NULL, survivor, m) == 0);
    pthread_exit(NULL);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";

    setvbuf(stdout, NULL, _IONBF, 0);
    if (!strcmp(mode, "file") && argc > 2)
        return file_case(argv[2]);
    if (!strcmp(mode, "fork"))
        return fork_case();
    if (!strcmp(mode, "shared"))
        return shared_case();
    if (!strcmp(mode, "readonly"))
        return readonly_case();
    if (!strcmp(mode, "threads"))
        return threads_case();
    if (!strcmp(mode, "mainexit"))
        return mainexit_case();
    fprintf(stderr, "usage: hostreg-driver file PATH|fork|shared|readonly|threads|mainexit\n");
    return 2;
}
