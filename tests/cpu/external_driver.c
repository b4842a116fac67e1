/* SPDX-License-Identifier: MIT */
/* External memory and semaphores through the shim and the server on the driver double.
 *   external_driver basic      imports a memfd, maps buffers, copies, signals and waits,
 *                              refusals; leaves an external memory, a semaphore and a buffer
 *                              for the session's end (prints them: keep MEM SEM BUF)
 *   external_driver hold       imports and maps, prints MEM SEM BUF, waits for stdin
 *   external_driver steal M S B  uses another client's memory, semaphore and buffer: refused
 * Exit status 0 when every check passed; the first failed check is printed. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"

typedef void *CUexternalMemory, *CUexternalSemaphore;
typedef struct {
    int type;
    union {
        int fd;
        struct {
            void *handle;
            const void *name;
        } win32;
    } handle;
    unsigned long long size;
    unsigned flags;
    unsigned reserved[16];
} MEM_DESC;
typedef struct {
    unsigned long long offset, size;
    unsigned flags;
    unsigned reserved[16];
} BUF_DESC;
typedef struct {
    int type;
    union {
        int fd;
        struct {
            void *handle;
            const void *name;
        } win32;
    } handle;
    unsigned flags;
    unsigned reserved[16];
} SEM_DESC;
typedef struct {
    unsigned long long value; /* params.fence.value */
    unsigned char rest[64];
    unsigned flags;
    unsigned reserved[16];
} SEM_PARAMS; /* the signal and the wait params: 144 bytes both */

CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamSynchronize(CUstream);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuMemcpy(CUdeviceptr, CUdeviceptr, size_t);
CUresult cuCtxSynchronize(void);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuImportExternalMemory(CUexternalMemory *, const MEM_DESC *);
CUresult cuExternalMemoryGetMappedBuffer(CUdeviceptr *, CUexternalMemory, const BUF_DESC *);
CUresult cuDestroyExternalMemory(CUexternalMemory);
CUresult cuImportExternalSemaphore(CUexternalSemaphore *, const SEM_DESC *);
CUresult cuSignalExternalSemaphoresAsync(const CUexternalSemaphore *, const SEM_PARAMS *, unsigned,
                                         CUstream);
CUresult cuWaitExternalSemaphoresAsync(const CUexternalSemaphore *, const SEM_PARAMS *, unsigned,
                                       CUstream);
CUresult cuDestroyExternalSemaphore(CUexternalSemaphore);

#define MEMFD_BYTES (1u << 20)

static int new_memfd(void)
{
    int fd = memfd_create("external", 0);

    EXPECT_MSG(fd >= 0 && ftruncate(fd, MEMFD_BYTES) == 0, "memfd");
    return fd;
}

static bool is_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0;
}

static CUexternalMemory import_mem(int fd, int *keep)
{
    MEM_DESC d = {.type = 1, .handle.fd = fd, .size = MEMFD_BYTES};
    CUexternalMemory m = NULL;

    *keep = dup(fd); /* our own view of the bytes: the imported descriptor goes */
    OK(cuImportExternalMemory(&m, &d));
    EXPECT_MSG(!is_open(fd) && errno == EBADF, "the imported descriptor is closed here");
    return m;
}

static CUexternalSemaphore import_sem(void)
{
    SEM_DESC d = {.type = 1, .handle.fd = memfd_create("sem", 0)};
    CUexternalSemaphore s = NULL;

    OK(cuImportExternalSemaphore(&s, &d));
    return s;
}

static CUdeviceptr map(CUexternalMemory m, unsigned long long offset, unsigned long long size)
{
    BUF_DESC b = {.offset = offset, .size = size};
    CUdeviceptr p = 0;

    OK(cuExternalMemoryGetMappedBuffer(&p, m, &b));
    return p;
}

static void basic(void)
{
    static SEM_PARAMS many[129];
    CUexternalSemaphore sems[129];
    int fd = new_memfd(), keep, bad;
    char buf[32] = {0};
    CUexternalMemory m, gone;
    CUexternalSemaphore s;
    CUdeviceptr p, q, other;
    CUstream st;
    SEM_PARAMS sp = {.value = 7};
    MEM_DESC md = {.type = 1};
    SEM_DESC sd = {.type = 1};
    BUF_DESC bd = {.offset = MEMFD_BYTES - 4096, .size = 8192};

    EXPECT_MSG(pwrite(fd, "hello external", 15, 4096) == 15, "pwrite");
    m = import_mem(fd, &keep);
    /* A buffer at 4 KiB: the memfd's bytes, both ways. */
    p = map(m, 4096, 65536);
    OK(cuMemcpyDtoH_v2(buf, p, 15));
    EXPECT_MSG(strcmp(buf, "hello external") == 0, "the buffer reads the memfd: %s", buf);
    OK(cuMemcpyHtoD_v2(p + 100, "written", 8));
    /* The driver documents that a synchronous copy into device memory may return before its DMA
     * ends (from pageable memory: once the bytes are staged), and a device-to-device one before
     * it is done: read through the memfd once synchronised (with the double's late DMA,
     * make test-loaded, the bytes land only then). */
    OK(cuCtxSynchronize());
    EXPECT_MSG(pread(keep, buf, 8, 4096 + 100) == 8 && strcmp(buf, "written") == 0,
               "the copy reached the memfd: %s", buf);
    /* A device-to-device copy with unified addressing: the buffer is device memory here. */
    other = map(m, 131072, 4096); /* apart from the first: past its end is nobody's memory */
    OK(cuMemcpy(other, p, 15));
    OK(cuCtxSynchronize());
    EXPECT_MSG(pread(keep, buf, 15, 131072) == 15 && strcmp(buf, "hello external") == 0,
               "cuMemcpy between buffers: %s", buf);
    /* Past the buffer's end: refused. */
    EXPECT_RC(cuMemcpyHtoD_v2(p + 65536 - 4, "12345678", 8),
              CUDA_ERROR_INVALID_VALUE); /* a copy past the buffer refused */
    /* Across its end (what lies past it may be another allocation of this client's, as the
     * allocator places them: under ASan one was there; a copy never spans two). */
    EXPECT_RC(cuMemcpyDtoH_v2(buf, other + 4096 - 4, 8),
              CUDA_ERROR_INVALID_VALUE); /* a copy past the second buffer refused */
    /* Past the external memory's end: the driver refuses. */
    q = 0;
    EXPECT_MSG(cuExternalMemoryGetMappedBuffer(&q, m, &bd) == CUDA_ERROR_INVALID_VALUE && q == 0,
               "a buffer past the memory refused");
    bd = (BUF_DESC){.offset = ~0ull - 10, .size = 100};
    EXPECT_MSG(cuExternalMemoryGetMappedBuffer(&q, m, &bd) == CUDA_ERROR_INVALID_VALUE,
               "a wrapping range");
    bd = (BUF_DESC){.offset = 0, .size = 0};
    EXPECT_MSG(cuExternalMemoryGetMappedBuffer(&q, m, &bd) == CUDA_ERROR_INVALID_VALUE,
               "an empty buffer");
    OK(cuMemFree_v2(other));
    EXPECT_MSG(cuMemFree_v2(other) == CUDA_ERROR_INVALID_VALUE, "a freed buffer is freed once");
    EXPECT_RC(cuMemcpyHtoD_v2(other, "x", 1),
              CUDA_ERROR_INVALID_VALUE); /* a freed buffer is not the client's any more */

    /* Handle types: a Windows handle, an NvSciBuf object, an unknown type, a bad descriptor. */
    bad = new_memfd();
    md = (MEM_DESC){.type = 2, .size = 4096};
    EXPECT_MSG(cuImportExternalMemory(&gone, &md) == CUDA_ERROR_INVALID_VALUE,
               "a Win32 handle refused");
    md.type = 4;
    EXPECT_MSG(cuImportExternalMemory(&gone, &md) == CUDA_ERROR_INVALID_VALUE,
               "a D3D12 heap refused");
    md.type = 8;
    EXPECT_MSG(cuImportExternalMemory(&gone, &md) == CUDA_ERROR_NOT_SUPPORTED,
               "an NvSciBuf object refused");
    md = (MEM_DESC){.type = 0, .handle.fd = bad, .size = 4096};
    EXPECT_MSG(cuImportExternalMemory(&gone, &md) == CUDA_ERROR_INVALID_VALUE, "type 0 refused");
    md = (MEM_DESC){.type = 1, .handle.fd = 1000, .size = 4096};
    EXPECT_MSG(cuImportExternalMemory(&gone, &md) == CUDA_ERROR_INVALID_VALUE,
               "a closed descriptor refused");
    md = (MEM_DESC){.type = 1, .handle.fd = bad, .size = 4096, .flags = 2};
    EXPECT_MSG(cuImportExternalMemory(&gone, &md) == CUDA_ERROR_INVALID_VALUE,
               "unknown flags refused");
    /* The driver refuses (larger than the memfd): the descriptor stays ours. */
    md = (MEM_DESC){.type = 1, .handle.fd = bad, .size = 2 * MEMFD_BYTES};
    EXPECT_MSG(cuImportExternalMemory(&gone, &md) == CUDA_ERROR_INVALID_VALUE,
               "a size past the memfd refused");
    EXPECT_MSG(is_open(bad), "a failed import leaves the descriptor open");
    sd = (SEM_DESC){.type = 6};
    EXPECT_MSG(cuImportExternalSemaphore(&s, &sd) == CUDA_ERROR_NOT_SUPPORTED,
               "an NvSciSync object refused");
    sd = (SEM_DESC){.type = 2};
    EXPECT_MSG(cuImportExternalSemaphore(&s, &sd) == CUDA_ERROR_INVALID_VALUE,
               "a Win32 semaphore refused");
    sd = (SEM_DESC){.type = 1, .handle.fd = bad, .flags = 1};
    EXPECT_MSG(cuImportExternalSemaphore(&s, &sd) == CUDA_ERROR_INVALID_VALUE,
               "semaphore flags refused");
    EXPECT_MSG(is_open(bad), "still open");
    /* After the refusals, an import still pairs with its own descriptor. */
    gone = import_mem(bad, &bad);
    OK(cuDestroyExternalMemory(gone));
    EXPECT_MSG(cuDestroyExternalMemory(gone) == CUDA_ERROR_INVALID_HANDLE, "destroyed once");
    close(bad);

    /* Semaphores, on a stream of the client's and on its default stream. */
    s = import_sem();
    OK(cuStreamCreate(&st, 1));
    OK(cuSignalExternalSemaphoresAsync(&s, &sp, 1, st));
    sp.value = 9;
    OK(cuWaitExternalSemaphoresAsync(&s, &sp, 1, NULL));
    OK(cuStreamSynchronize(st));
    for (int i = 0; i < 129; i++)
        sems[i] = s;
    EXPECT_MSG(cuSignalExternalSemaphoresAsync(sems, many, 129, st) == CUDA_ERROR_INVALID_VALUE,
               "129 semaphores refused");
    OK(cuWaitExternalSemaphoresAsync(sems, many, 128, st));
    sems[5] = (CUexternalSemaphore)m; /* not a semaphore */
    EXPECT_MSG(cuWaitExternalSemaphoresAsync(sems, many, 6, st) == CUDA_ERROR_INVALID_HANDLE,
               "an external memory is not a semaphore");
    EXPECT_MSG(cuSignalExternalSemaphoresAsync(&s, &sp, 1, (CUstream)0x1234) ==
                   CUDA_ERROR_INVALID_HANDLE,
               "a stream that is not the client's");
    printf("stream %p\n", st);
    printf("keep %p %p 0x%llx\n", m, s, (unsigned long long)p);
    printf("basic ok\n");
}

static void hold(void)
{
    int keep;
    CUexternalMemory m = import_mem(new_memfd(), &keep);
    CUexternalSemaphore s = import_sem();
    CUdeviceptr p = map(m, 0, 4096);
    char line[16];

    printf("%p %p 0x%llx\n", m, s, (unsigned long long)p);
    fflush(stdout);
    if (!fgets(line, sizeof(line), stdin))
        exit(1);
}

static void steal(const char *ms, const char *ss, const char *ps)
{
    CUexternalMemory m = (CUexternalMemory)strtoull(ms, NULL, 16);
    CUexternalSemaphore s = (CUexternalSemaphore)strtoull(ss, NULL, 16);
    CUdeviceptr p = strtoull(ps, NULL, 16), q = 0;
    BUF_DESC b = {.offset = 0, .size = 4096};
    SEM_PARAMS sp = {.value = 1};
    char buf[8];

    EXPECT_MSG(cuExternalMemoryGetMappedBuffer(&q, m, &b) == CUDA_ERROR_INVALID_HANDLE,
               "map another's memory");
    EXPECT_MSG(cuDestroyExternalMemory(m) == CUDA_ERROR_INVALID_HANDLE, "destroy another's memory");
    EXPECT_MSG(cuSignalExternalSemaphoresAsync(&s, &sp, 1, NULL) == CUDA_ERROR_INVALID_HANDLE,
               "signal another's");
    EXPECT_MSG(cuWaitExternalSemaphoresAsync(&s, &sp, 1, NULL) == CUDA_ERROR_INVALID_HANDLE,
               "wait another's");
    EXPECT_MSG(cuDestroyExternalSemaphore(s) == CUDA_ERROR_INVALID_HANDLE,
               "destroy another's semaphore");
    EXPECT_RC(cuMemcpyHtoD_v2(p, "x", 1), CUDA_ERROR_INVALID_VALUE); /* write another's buffer */
    EXPECT_RC(cuMemcpyDtoH_v2(buf, p, 1), CUDA_ERROR_INVALID_VALUE); /* read another's buffer */
    EXPECT_MSG(cuMemFree_v2(p) == CUDA_ERROR_INVALID_VALUE, "free another's buffer");
    printf("steal refused\n");
}

int main(int argc, char **argv)
{
    CUcontext ctx;

    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
    if (argc == 2 && strcmp(argv[1], "basic") == 0)
        basic();
    else if (argc == 2 && strcmp(argv[1], "hold") == 0)
        hold();
    else if (argc == 5 && strcmp(argv[1], "steal") == 0)
        steal(argv[2], argv[3], argv[4]);
    else
        return 2;
    return 0;
}
