/* SPDX-License-Identifier: MIT */
/*
 * Shareable handles through the shim and the server on the driver test double (FAKECUDA_VMM):
 *   shareable-driver pair     forks before either process initialises: the parent (a client)
 *                             exports an allocation handle and a pool as descriptors, a fabric
 *                             handle and a pool pointer, and passes them to the child (another
 *                             client of the same server) over a socketpair (SCM_RIGHTS); the
 *                             child imports them, reads the parent's bytes, is refused the
 *                             parent's objects and bad descriptors, imports past its budget,
 *                             and leaves an imported handle, pool and pointer for its session's
 *                             end; the parent is refused the child's objects.
 * Prints "fabric import rc N" (the child's fabric import), "imported N more" (the budget), and
 * "pair ok" when every check passed; the first failed check otherwise, exit status 1.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

typedef void *CUmemoryPool;
typedef struct {
    unsigned char b[64];
} Blob; /* CUmemFabricHandle, CUmemPoolPtrExportData */

CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
CUresult cuMemPoolCreate(CUmemoryPool *, const CUmemPoolProps *);
CUresult cuMemPoolDestroy(CUmemoryPool);
CUresult cuStreamSynchronize(CUstream);
CUresult cuMemCreate(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                     unsigned long long);
CUresult cuMemRelease(CUmemGenericAllocationHandle);
CUresult cuMemAddressReserve(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
CUresult cuMemMap(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
CUresult cuMemSetAccess(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
CUresult cuMemExportToShareableHandle(void *, CUmemGenericAllocationHandle, int,
                                      unsigned long long);
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *, void *, int);
CUresult cuMemPoolExportToShareableHandle(void *, CUmemoryPool, int, unsigned long long);
CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool *, void *, int, unsigned long long);
CUresult cuMemPoolExportPointer(Blob *, CUdeviceptr);
CUresult cuMemPoolImportPointer(CUdeviceptr *, CUmemoryPool, Blob *);

enum { T_FD = 1, T_WIN32 = 2, T_FABRIC = 8 };
#define G 65536 /* the double's granularity */

static const char *who = "parent";

/* What the parent passes, beside its two descriptors. */
struct offer {
    CUmemGenericAllocationHandle h;
    CUmemoryPool pool;
    CUdeviceptr ptr, other; /* the exported pool memory, and pool memory not exported */
    Blob fabric, data;
};
/* What the child passes back. */
struct answer {
    CUmemGenericAllocationHandle h;
    CUmemoryPool pool;
};

static void put(int sock, const void *p, size_t n, const int *fds, int nfds)
{
    char ctl[CMSG_SPACE(2 * sizeof(int))];
    struct iovec iov = {(void *)p, n};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};

    if (nfds) {
        struct cmsghdr *c;
        memset(ctl, 0, sizeof(ctl));
        m.msg_control = ctl;
        m.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    }
    EXPECT_MSG(sendmsg(sock, &m, 0) == (ssize_t)n, "sendmsg");
}

static void get(int sock, void *p, size_t n, int *fds, int nfds)
{
    char ctl[CMSG_SPACE(2 * sizeof(int))];
    struct iovec iov = {p, n};
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
    struct cmsghdr *c;

    EXPECT_MSG(recvmsg(sock, &m, MSG_CMSG_CLOEXEC) == (ssize_t)n, "recvmsg");
    c = CMSG_FIRSTHDR(&m);
    if (nfds) {
        EXPECT_MSG(c && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(nfds * sizeof(int)),
                   "descriptors came");
        memcpy(fds, CMSG_DATA(c), nfds * sizeof(int));
    }
}

static void setup(void)
{
    CUcontext ctx;

    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
}

static void fill(unsigned char *b, size_t n, unsigned char seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)(i * 13 + seed);
}

/* A mapping of handle h (G bytes) of this client's, readable and writable. */
static CUdeviceptr map(CUmemGenericAllocationHandle h)
{
    CUmemAccessDesc acc = {{1, 0}, 3};
    CUdeviceptr va = 0;

    OK(cuMemAddressReserve(&va, G, 0, 0, 0));
    OK(cuMemMap(va, G, 0, h, 0));
    OK(cuMemSetAccess(va, G, &acc, 1));
    return va;
}

static int parent(int sock, pid_t child)
{
    CUmemAllocationProp prop = {.type = 1, .location = {1, 0}};
    CUmemPoolProps props = {.allocType = 1, .location = {1, 0}};
    CUmemGenericAllocationHandle plain = 0, x = 0;
    CUmemoryPool px = NULL;
    struct offer o;
    struct answer a;
    unsigned char want[G], got[G];
    CUdeviceptr va, d = 0;
    Blob junk;
    int fds[2] = {-1, -1}, status = 0, fd = -1;

    memset(&o, 0, sizeof(o));
    setup();
    /* handle types: POSIX and fabric offered; Win32 not on Linux; unknown bits refused */
    prop.requestedHandleTypes = T_WIN32;
    EXPECT_RC(cuMemCreate(&x, G, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
    prop.requestedHandleTypes = 0x10;
    EXPECT_RC(cuMemCreate(&x, G, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    props.handleTypes = T_WIN32;
    EXPECT_RC(cuMemPoolCreate(&px, &props), CUDA_ERROR_NOT_SUPPORTED);
    props.handleTypes = -1;
    EXPECT_RC(cuMemPoolCreate(&px, &props), CUDA_ERROR_INVALID_VALUE);
    /* an allocation made without a shareable type: the driver's refusal */
    prop.requestedHandleTypes = 0;
    OK(cuMemCreate(&plain, G, &prop, 0));
    EXPECT_RC(cuMemExportToShareableHandle(&fd, plain, T_FD, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemExportToShareableHandle(&fd, plain, T_WIN32, 0), CUDA_ERROR_NOT_SUPPORTED);
    /* the shared allocation, with bytes of the parent */
    prop.requestedHandleTypes = T_FD | T_FABRIC;
    OK(cuMemCreate(&o.h, G, &prop, 0));
    EXPECT_RC(cuMemExportToShareableHandle(&fd, o.h, T_FD, 1),
              CUDA_ERROR_INVALID_VALUE); /* flags */
    va = map(o.h);
    fill(want, G, 1);
    OK(cuMemcpyHtoD_v2(va, want, G));
    OK(cuMemExportToShareableHandle(&fds[0], o.h, T_FD, 0));
    /* a working descriptor of this process: here the double's memfd, with the bytes */
    EXPECT_MSG(fds[0] > 2 && fcntl(fds[0], F_GETFD) >= 0, "a descriptor %d", fds[0]);
    EXPECT_MSG(pread(fds[0], got, G, 0) == G && !memcmp(got, want, G), "the descriptor's bytes");
    OK(cuMemExportToShareableHandle(&o.fabric, o.h, T_FABRIC, 0));
    /* a pool with a descriptor type, memory from it with bytes of the parent */
    props.handleTypes = T_FD;
    OK(cuMemPoolCreate(&o.pool, &props));
    OK(cuMemAllocFromPoolAsync(&o.ptr, G, o.pool, NULL));
    OK(cuMemAllocFromPoolAsync(&o.other, G, o.pool, NULL));
    OK(cuStreamSynchronize(NULL));
    fill(want, G, 2);
    OK(cuMemcpyHtoD_v2(o.ptr, want, G));
    OK(cuMemPoolExportToShareableHandle(&fds[1], o.pool, T_FD, 0));
    OK(cuMemPoolExportPointer(&o.data, o.ptr));
    EXPECT_RC(cuMemPoolExportPointer(&junk, va), CUDA_ERROR_INVALID_VALUE); /* not pool memory */
    EXPECT_RC(cuMemPoolExportPointer(&junk, 0x1234), CUDA_ERROR_INVALID_VALUE); /* not its memory */
    put(sock, &o, sizeof(o), fds, 2);
    close(fds[0]); /* the child has its own copies */
    close(fds[1]);
    /* the child's imported objects are not the parent's */
    get(sock, &a, sizeof(a), NULL, 0);
    EXPECT_MSG(a.h != o.h && a.pool != o.pool, "new objects for the importer");
    EXPECT_RC(cuMemExportToShareableHandle(&fd, a.h, T_FD, 0), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuMemRelease(a.h), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuMemPoolImportPointer(&d, a.pool, &o.data), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuMemPoolDestroy(a.pool), CUDA_ERROR_INVALID_HANDLE);
    put(sock, "go", 2, NULL, 0);
    EXPECT_MSG(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0,
               "the child passed (status %d)", status);
    return 0;
}

static int importer(int sock, pid_t parent_pid)
{
    struct offer o;
    struct answer a = {0, NULL};
    CUmemGenericAllocationHandle hf = 0, x = 0, extra[16];
    CUmemoryPool px = NULL;
    unsigned char want[G], got[G];
    CUdeviceptr va, q = 0, q2 = 0;
    int fds[2] = {-1, -1}, p[2], n;
    char go[2];
    CUresult rc;

    (void)parent_pid;
    who = "child";
    setup();
    get(sock, &o, sizeof(o), fds, 2);
    /* the allocation, through the descriptor: a handle of its own, the parent's bytes */
    OK(cuMemImportFromShareableHandle(&a.h, (void *)(intptr_t)fds[0], T_FD));
    EXPECT_MSG(a.h != o.h, "a new handle");
    EXPECT_MSG(fcntl(fds[0], F_GETFD) >= 0, "the program keeps its descriptor");
    va = map(a.h);
    fill(want, G, 1);
    OK(cuMemcpyDtoH_v2(got, va, G));
    EXPECT_MSG(!memcmp(got, want, G), "the parent's bytes through the imported handle");
    /* the parent's handle is not the child's */
    EXPECT_RC(cuMemMap(va, G, 0, o.h, 0), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuMemExportToShareableHandle(&n, o.h, T_FD, 0), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuMemRelease(o.h), CUDA_ERROR_INVALID_HANDLE);
    /* the fabric handle */
    rc = cuMemImportFromShareableHandle(&hf, &o.fabric, T_FABRIC);
    printf("fabric import rc %d\n", rc);
    if (rc == 0) {
        EXPECT_MSG(hf != o.h && hf != a.h, "a new handle");
        OK(cuMemRelease(hf));
    }
    /* bad descriptors: a pipe reaches the driver and is refused; not a descriptor at all */
    EXPECT_MSG(pipe(p) == 0, "pipe");
    EXPECT_RC(cuMemImportFromShareableHandle(&x, (void *)(intptr_t)p[0], T_FD),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemPoolImportFromShareableHandle(&px, (void *)(intptr_t)p[0], T_FD, 0),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemImportFromShareableHandle(&x, (void *)(intptr_t)987654, T_FD),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemImportFromShareableHandle(&x, (void *)(intptr_t)fds[0], T_WIN32),
              CUDA_ERROR_NOT_SUPPORTED);
    EXPECT_RC(cuMemImportFromShareableHandle(&x, (void *)(intptr_t)fds[0], 0x40),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuMemPoolImportFromShareableHandle(&px, (void *)(intptr_t)fds[1], T_FD, 1),
              CUDA_ERROR_INVALID_VALUE);
    close(p[0]);
    close(p[1]);
    /* the pool and its pointer */
    OK(cuMemPoolImportFromShareableHandle(&a.pool, (void *)(intptr_t)fds[1], T_FD, 0));
    EXPECT_MSG(a.pool != o.pool, "a pool of its own");
    EXPECT_RC(cuMemPoolImportPointer(&q, o.pool, &o.data),
              CUDA_ERROR_INVALID_HANDLE); /* the parent's pool */
    EXPECT_RC(cuMemPoolExportToShareableHandle(&n, o.pool, T_FD, 0), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuMemPoolExportPointer((Blob *)got, o.other),
              CUDA_ERROR_INVALID_VALUE); /* the parent's memory */
    OK(cuMemPoolImportPointer(&q, a.pool, &o.data));
    fill(want, G, 2);
    OK(cuMemcpyDtoH_v2(got, q, G));
    EXPECT_MSG(!memcmp(got, want, G), "the parent's bytes through the imported pointer");
    EXPECT_RC(cuMemPoolImportPointer(&q2, a.pool, &o.data),
              CUDA_ERROR_INVALID_VALUE); /* already its memory */
    OK(cuMemFree_v2(q));
    EXPECT_RC(cuMemcpyDtoH_v2(got, q, 8),
              CUDA_ERROR_INVALID_VALUE);             /* freed: no longer its memory */
    OK(cuMemPoolImportPointer(&q, a.pool, &o.data)); /* again, left for the session's end */
    /* the budget of allocation handles (OPENMPS_CLIENT_MAX_HANDLES), then release them */
    for (n = 0; n < 16; n++)
        if ((rc = cuMemImportFromShareableHandle(&extra[n], (void *)(intptr_t)fds[0], T_FD)) != 0)
            break;
    EXPECT_MSG(n == 16 || rc == CUDA_ERROR_OUT_OF_MEMORY, "a refused import: %d", rc);
    printf("imported %d more\n", n);
    for (int i = 0; i < n; i++)
        OK(cuMemRelease(extra[i]));
    OK(cuMemImportFromShareableHandle(&x, (void *)(intptr_t)fds[0], T_FD)); /* the server went on */
    OK(cuMemRelease(x));
    fflush(stdout);
    put(sock, &a, sizeof(a), NULL, 0);
    get(sock, go, 2, NULL, 0);
    /* left for the session's end: the imported handle (mapped), the pool, the pointer */
    return 0;
}

int main(int argc, char **argv)
{
    int sv[2];
    pid_t pid;

    if (argc < 2 || strcmp(argv[1], "pair") != 0) {
        fprintf(stderr, "usage: shareable-driver pair\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 1;
    pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        close(sv[0]);
        return importer(sv[1], getppid());
    }
    close(sv[1]);
    parent(sv[0], pid);
    printf("pair ok\n");
    return 0;
}
