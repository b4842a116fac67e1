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

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext, *CUstream, *CUexternalMemory, *CUexternalSemaphore;
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

#define INVALID_VALUE 1
#define INVALID_HANDLE 400
#define NOT_SUPPORTED 801
#define MEMFD_BYTES (1u << 20)

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL line %d: ", __LINE__);                                                    \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define OKC(call)                                                                                  \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        CHECK(rc_ == 0, "%s: %d", #call, rc_);                                                     \
    } while (0)

static int new_memfd(void)
{
    int fd = memfd_create("external", 0);

    CHECK(fd >= 0 && ftruncate(fd, MEMFD_BYTES) == 0, "memfd");
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
    OKC(cuImportExternalMemory(&m, &d));
    CHECK(!is_open(fd) && errno == EBADF, "the imported descriptor is closed here");
    return m;
}

static CUexternalSemaphore import_sem(void)
{
    SEM_DESC d = {.type = 1, .handle.fd = memfd_create("sem", 0)};
    CUexternalSemaphore s = NULL;

    OKC(cuImportExternalSemaphore(&s, &d));
    return s;
}

static CUdeviceptr map(CUexternalMemory m, unsigned long long offset, unsigned long long size)
{
    BUF_DESC b = {.offset = offset, .size = size};
    CUdeviceptr p = 0;

    OKC(cuExternalMemoryGetMappedBuffer(&p, m, &b));
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

    CHECK(pwrite(fd, "hello external", 15, 4096) == 15, "pwrite");
    m = import_mem(fd, &keep);
    /* A buffer at 4 KiB: the memfd's bytes, both ways. */
    p = map(m, 4096, 65536);
    OKC(cuMemcpyDtoH_v2(buf, p, 15));
    CHECK(strcmp(buf, "hello external") == 0, "the buffer reads the memfd: %s", buf);
    OKC(cuMemcpyHtoD_v2(p + 100, "written", 8));
    CHECK(pread(keep, buf, 8, 4096 + 100) == 8 && strcmp(buf, "written") == 0,
          "the copy reached the memfd: %s", buf);
    /* A device-to-device copy with unified addressing: the buffer is device memory here. */
    other = map(m, 131072, 4096); /* apart from the first: past its end is nobody's memory */
    OKC(cuMemcpy(other, p, 15));
    CHECK(pread(keep, buf, 15, 131072) == 15 && strcmp(buf, "hello external") == 0,
          "cuMemcpy between buffers: %s", buf);
    /* Past the buffer's end: refused. */
    CHECK(cuMemcpyHtoD_v2(p + 65536 - 4, "12345678", 8) != 0, "a copy past the buffer refused");
    /* Across its end (what lies past it may be another allocation of this client's, as the
     * allocator places them: under ASan one was there; a copy never spans two). */
    CHECK(cuMemcpyDtoH_v2(buf, other + 4096 - 4, 8) != 0, "a copy past the second buffer refused");
    /* Past the external memory's end: the driver refuses. */
    q = 0;
    CHECK(cuExternalMemoryGetMappedBuffer(&q, m, &bd) == INVALID_VALUE && q == 0,
          "a buffer past the memory refused");
    bd = (BUF_DESC){.offset = ~0ull - 10, .size = 100};
    CHECK(cuExternalMemoryGetMappedBuffer(&q, m, &bd) == INVALID_VALUE, "a wrapping range");
    bd = (BUF_DESC){.offset = 0, .size = 0};
    CHECK(cuExternalMemoryGetMappedBuffer(&q, m, &bd) == INVALID_VALUE, "an empty buffer");
    OKC(cuMemFree_v2(other));
    CHECK(cuMemFree_v2(other) == INVALID_VALUE, "a freed buffer is freed once");
    CHECK(cuMemcpyHtoD_v2(other, "x", 1) != 0, "a freed buffer is not the client's any more");

    /* Handle types: a Windows handle, an NvSciBuf object, an unknown type, a bad descriptor. */
    bad = new_memfd();
    md = (MEM_DESC){.type = 2, .size = 4096};
    CHECK(cuImportExternalMemory(&gone, &md) == INVALID_VALUE, "a Win32 handle refused");
    md.type = 4;
    CHECK(cuImportExternalMemory(&gone, &md) == INVALID_VALUE, "a D3D12 heap refused");
    md.type = 8;
    CHECK(cuImportExternalMemory(&gone, &md) == NOT_SUPPORTED, "an NvSciBuf object refused");
    md = (MEM_DESC){.type = 0, .handle.fd = bad, .size = 4096};
    CHECK(cuImportExternalMemory(&gone, &md) == INVALID_VALUE, "type 0 refused");
    md = (MEM_DESC){.type = 1, .handle.fd = 1000, .size = 4096};
    CHECK(cuImportExternalMemory(&gone, &md) == INVALID_VALUE, "a closed descriptor refused");
    md = (MEM_DESC){.type = 1, .handle.fd = bad, .size = 4096, .flags = 2};
    CHECK(cuImportExternalMemory(&gone, &md) == INVALID_VALUE, "unknown flags refused");
    /* The driver refuses (larger than the memfd): the descriptor stays ours. */
    md = (MEM_DESC){.type = 1, .handle.fd = bad, .size = 2 * MEMFD_BYTES};
    CHECK(cuImportExternalMemory(&gone, &md) == INVALID_VALUE, "a size past the memfd refused");
    CHECK(is_open(bad), "a failed import leaves the descriptor open");
    sd = (SEM_DESC){.type = 6};
    CHECK(cuImportExternalSemaphore(&s, &sd) == NOT_SUPPORTED, "an NvSciSync object refused");
    sd = (SEM_DESC){.type = 2};
    CHECK(cuImportExternalSemaphore(&s, &sd) == INVALID_VALUE, "a Win32 semaphore refused");
    sd = (SEM_DESC){.type = 1, .handle.fd = bad, .flags = 1};
    CHECK(cuImportExternalSemaphore(&s, &sd) == INVALID_VALUE, "semaphore flags refused");
    CHECK(is_open(bad), "still open");
    /* After the refusals, an import still pairs with its own descriptor. */
    gone = import_mem(bad, &bad);
    OKC(cuDestroyExternalMemory(gone));
    CHECK(cuDestroyExternalMemory(gone) == INVALID_HANDLE, "destroyed once");
    close(bad);

    /* Semaphores, on a stream of the client's and on its default stream. */
    s = import_sem();
    OKC(cuStreamCreate(&st, 1));
    OKC(cuSignalExternalSemaphoresAsync(&s, &sp, 1, st));
    sp.value = 9;
    OKC(cuWaitExternalSemaphoresAsync(&s, &sp, 1, NULL));
    OKC(cuStreamSynchronize(st));
    for (int i = 0; i < 129; i++)
        sems[i] = s;
    CHECK(cuSignalExternalSemaphoresAsync(sems, many, 129, st) == INVALID_VALUE,
          "129 semaphores refused");
    OKC(cuWaitExternalSemaphoresAsync(sems, many, 128, st));
    sems[5] = (CUexternalSemaphore)m; /* not a semaphore */
    CHECK(cuWaitExternalSemaphoresAsync(sems, many, 6, st) == INVALID_HANDLE,
          "an external memory is not a semaphore");
    CHECK(cuSignalExternalSemaphoresAsync(&s, &sp, 1, (CUstream)0x1234) == INVALID_HANDLE,
          "a stream that is not the client's");
    printf("stream %p\n", st);
    printf("keep %p %p 0x%llx\n", m, s, p);
    printf("basic ok\n");
}

static void hold(void)
{
    int keep;
    CUexternalMemory m = import_mem(new_memfd(), &keep);
    CUexternalSemaphore s = import_sem();
    CUdeviceptr p = map(m, 0, 4096);
    char line[16];

    printf("%p %p 0x%llx\n", m, s, p);
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

    CHECK(cuExternalMemoryGetMappedBuffer(&q, m, &b) == INVALID_HANDLE, "map another's memory");
    CHECK(cuDestroyExternalMemory(m) == INVALID_HANDLE, "destroy another's memory");
    CHECK(cuSignalExternalSemaphoresAsync(&s, &sp, 1, NULL) == INVALID_HANDLE, "signal another's");
    CHECK(cuWaitExternalSemaphoresAsync(&s, &sp, 1, NULL) == INVALID_HANDLE, "wait another's");
    CHECK(cuDestroyExternalSemaphore(s) == INVALID_HANDLE, "destroy another's semaphore");
    CHECK(cuMemcpyHtoD_v2(p, "x", 1) != 0, "write another's buffer");
    CHECK(cuMemcpyDtoH_v2(buf, p, 1) != 0, "read another's buffer");
    CHECK(cuMemFree_v2(p) == INVALID_VALUE, "free another's buffer");
    printf("steal refused\n");
}

int main(int argc, char **argv)
{
    CUcontext ctx;

    OKC(cuInit(0));
    OKC(cuDevicePrimaryCtxRetain(&ctx, 0));
    OKC(cuCtxSetCurrent(ctx));
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
