/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the server's executor (src/server/exec.c's om_exec and everything it calls) on
 * the driver test double (tests/cpu/fakecuda, loaded through OPENMPS_DRIVER as the server loads
 * a driver), with a check layer between the two.
 *
 * A victim session first makes streams, events, allocations, a library, a kernel and pinned
 * memory through ordinary calls. Each input is then a fresh session's requests: records of
 *
 *     u16 index (| 0x8000: posted), u16 length, length bytes of payload
 *
 * where index is a driver entry's OM_IDX_ (om_exec's argument), or STAGE_APPEND / STAGE_RESET
 * for the staging buffer. An aligned u64 of the payload whose top 24 bits are 0xF0F0F0 is
 * replaced by a value of the table below (its low byte picks it) plus a signed 32-bit offset
 * (its bits 8-39): the victim's handles and addresses, then every u64 the fuzzed session was
 * answered so far, so that handles of both sessions are in reach of the mutations.
 *
 * While the fuzzed session's calls run, every driver call is checked: each stream, event,
 * library, kernel, device range and host range it receives must be the fuzzed session's (made
 * by the driver during its calls, or answered to it), and the calls that wait for every client
 * are not made at all. Anything else aborts, naming the entry point and whose the handle was.
 * At the end of the input the session is released by session.c's own code, under the same
 * checks. Not checked: the bytes of kernel arguments (a kernel may touch any memory of the
 * context, as in one process; see kernel_faults), and ranges of 0 bytes, which touch nothing.
 * OM_FUZZ_TRACE=1 prints a line per call, OM_FUZZ_LOG=1 the server's log.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/common/gen/types.h"
#include "../../src/common/log.h"
#include "../../src/common/visible.h"
#include "../../src/server/internal.h"
#include "gen/kinds.h"
#include "openmps/ops.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int om_fuzz_server_init(char *err, size_t errlen);
void om_fuzz_session_release(struct session *s);
int om_fuzz_stage(struct session *s, uint32_t op, const uint8_t *payload, uint32_t len);

#define STAGE_APPEND 0x7fff
#define STAGE_RESET 0x7ffe
#define SET_DEVICE 0x7ffd /* OM_OP_SET_DEVICE: u64, the device the session's calls run on */
#define POSTED 0x8000
#define MAX_RECORDS 64
/* Device and pinned memory the double gives at most: it is host memory, and a fuzzer's. */
#define MEM_CAP (1u << 20)

/* ------------------------------------------------------------------ who owns what */

/* The handle kinds of api/handles.tsv beyond these come from the generated gen/kinds.h. */
#define GEN_KIND_ENUM(k, name) k,
#define GEN_KIND_NAME(k, name) name,
enum kind {
    K_STREAM,
    K_EVENT,
    K_LIBRARY,
    K_KERNEL,
    K_DEVICE,
    K_HOST,
    K_VA, /* an address range reserved with cuMemAddressReserve */
    OM_FUZZ_GEN_KINDS(GEN_KIND_ENUM)
};
enum owner { O_SERVER, O_VICTIM, O_FUZZED };
static const char *const kind_name[] = {"stream",
                                        "event",
                                        "library",
                                        "kernel",
                                        "device range",
                                        "host range",
                                        "reserved address range",
                                        OM_FUZZ_GEN_KINDS(GEN_KIND_NAME)};
__extension__ typedef unsigned __int128 om_u128; /* gen/checks.c's lengths */

struct obj {
    uint64_t base, size;
    uint8_t kind, owner;
    bool alloc; /* device memory the driver allocated (may be freed) */
};
static struct obj objs[16384];
static size_t nobjs;
static int phase = O_SERVER;   /* whose calls run now */
static const char *entry;      /* the driver entry being checked, for the message */
static struct session *fuzzed; /* the session of the input */
static uint8_t *reply;         /* om_exec's answer buffer: the server's own, pinned */
static uint8_t *copy_slots;    /* after it: the sessions' small copies' slots (api/copies.c) */

static void note(int kind, uint64_t base, uint64_t size, bool alloc)
{
    for (size_t i = 0; i < nobjs; i++)
        if (objs[i].kind == kind && objs[i].base == base && objs[i].owner == phase)
            return;
    if (nobjs == sizeof(objs) / sizeof(objs[0])) {
        fprintf(stderr, "fuzz_exec: the check layer's table is full\n");
        abort();
    }
    objs[nobjs++] = (struct obj){base, size ? size : 1, (uint8_t)kind, (uint8_t)phase, alloc};
}

static void forget(int kind, uint64_t base)
{
    for (size_t i = 0; i < nobjs;) {
        if (objs[i].kind == kind && objs[i].base == base && objs[i].owner == O_FUZZED)
            objs[i] = objs[--nobjs];
        else
            i++;
    }
}

static void forget_fuzzed(void)
{
    for (size_t i = 0; i < nobjs;) {
        if (objs[i].owner == O_FUZZED)
            objs[i] = objs[--nobjs];
        else
            i++;
    }
}

static bool covers(const struct obj *o, uint64_t addr, uint64_t len)
{
    return addr >= o->base && addr - o->base <= o->size && len <= o->size - (addr - o->base);
}

static _Noreturn void violation(const char *what, int kind, uint64_t addr, uint64_t len)
{
    fprintf(stderr,
            "fuzz_exec: %s received %s 0x%llx (+%llu) %s while the fuzzed session's request "
            "ran\n",
            entry, kind_name[kind], (unsigned long long)addr, (unsigned long long)len, what);
    abort();
}

static _Noreturn void blame(int kind, uint64_t addr, uint64_t len);

/* [addr, addr + len) of this kind is the fuzzed session's; aborts otherwise. */
static void check(int kind, uint64_t addr, uint64_t len)
{
    if (phase != O_FUZZED)
        return;
    if ((kind == K_DEVICE || kind == K_HOST) && len == 0)
        return; /* no byte is touched (om_arg_range lets any address through with a count of 0) */
    if (kind == K_HOST && addr >= (uint64_t)(uintptr_t)reply &&
        addr - (uint64_t)(uintptr_t)reply <= OM_REPLY_MAX &&
        len <= OM_REPLY_MAX - (addr - (uint64_t)(uintptr_t)reply))
        return;
    /* one of the copy slots after it, within the slot (api/copies.c) */
    if (kind == K_HOST && copy_slots && addr >= (uint64_t)(uintptr_t)copy_slots &&
        addr - (uint64_t)(uintptr_t)copy_slots < OM_COPY_SLOTS * OM_INLINE_COPY_MAX &&
        (addr - (uint64_t)(uintptr_t)copy_slots) % OM_INLINE_COPY_MAX + len <= OM_INLINE_COPY_MAX)
        return;
    for (size_t i = 0; i < nobjs; i++)
        if (objs[i].kind == kind && objs[i].owner == O_FUZZED && covers(&objs[i], addr, len))
            return;
    /* The streams the server made for itself at its start (output.c's flush streams), which its
     * own machinery uses in any session's request; no client is ever given one. */
    for (size_t i = 0; kind == K_STREAM && i < nobjs; i++)
        if (objs[i].kind == kind && objs[i].owner == O_SERVER && objs[i].base == addr)
            return;
    blame(kind, addr, len);
}

/* Not the fuzzed session's: says whose it is, and aborts. */
static _Noreturn void blame(int kind, uint64_t addr, uint64_t len)
{
    for (size_t i = 0; i < nobjs; i++)
        if (objs[i].kind == kind && objs[i].owner == O_VICTIM &&
            addr < objs[i].base + objs[i].size && objs[i].base < addr + (len ? len : 1))
            violation("which is the victim session's", kind, addr, len);
    violation("which the fuzzed session was never given", kind, addr, len);
}

#define H(p) ((uint64_t)(uintptr_t)(p))

/* rows of w bytes, pitch apart: the bytes from the first row's start to the last row's end */
static uint64_t extent(uint64_t pitch, uint64_t w, uint64_t h)
{
    if (!h || !w)
        return 0;
    if (h - 1 > (UINT64_MAX - w) / (pitch ? pitch : 1)) {
        fprintf(stderr, "fuzz_exec: %s received a region that wraps around\n", entry);
        abort();
    }
    return (h - 1) * pitch + w;
}

/* ------------------------------------------------------------------ the check layer */

static void *orig[OM_ENTRY_COUNT];
#define ORIG(sym, type) ((type)orig[OM_IDX_##sym])
#define ENTER(sym) entry = #sym

/* The double hands out stream and event tokens once each (16384 in all); a driver reuses
 * handles, and a long run would run out: destroyed ones are handed out again. */
static void *spare[16384];
static size_t nspare;

static CUresult w_cuStreamCreateWithPriority(CUstream *s, unsigned f, int prio)
{
    CUresult rc = CUDA_SUCCESS;

    ENTER(cuStreamCreateWithPriority);
    if (nspare)
        *s = spare[--nspare];
    else
        rc = ORIG(cuStreamCreateWithPriority, CUresult(*)(CUstream *, unsigned, int))(s, f, prio);
    if (rc == CUDA_SUCCESS)
        note(K_STREAM, H(*s), 1, false);
    return rc;
}

static CUresult w_cuStreamCreate(CUstream *s, unsigned f)
{
    return w_cuStreamCreateWithPriority(s, f, 0);
}

static CUresult w_cuStreamDestroy_v2(CUstream s)
{
    ENTER(cuStreamDestroy_v2);
    check(K_STREAM, H(s), 1);
    forget(K_STREAM, H(s));
    if (nspare < sizeof(spare) / sizeof(spare[0]))
        spare[nspare++] = s;
    return CUDA_SUCCESS;
}

#define STREAM_CALL(sym)                                                                           \
    static CUresult w_##sym(CUstream s)                                                            \
    {                                                                                              \
        ENTER(sym);                                                                                \
        check(K_STREAM, H(s), 1);                                                                  \
        return ORIG(sym, CUresult(*)(CUstream))(s);                                                \
    }
STREAM_CALL(cuStreamSynchronize)

static CUresult w_cuStreamGetFlags(CUstream s, unsigned *f)
{
    ENTER(cuStreamGetFlags);
    check(K_STREAM, H(s), 1);
    return ORIG(cuStreamGetFlags, CUresult(*)(CUstream, unsigned *))(s, f);
}

static CUresult w_cuStreamGetPriority(CUstream s, int *prio)
{
    ENTER(cuStreamGetPriority);
    check(K_STREAM, H(s), 1);
    return ORIG(cuStreamGetPriority, CUresult(*)(CUstream, int *))(s, prio);
}

static CUresult w_cuEventCreate(CUevent *e, unsigned f)
{
    CUresult rc = CUDA_SUCCESS;

    ENTER(cuEventCreate);
    if (nspare)
        *e = spare[--nspare];
    else
        rc = ORIG(cuEventCreate, CUresult(*)(CUevent *, unsigned))(e, f);
    if (rc == CUDA_SUCCESS)
        note(K_EVENT, H(*e), 1, false);
    return rc;
}

static CUresult w_cuEventDestroy_v2(CUevent e)
{
    ENTER(cuEventDestroy_v2);
    check(K_EVENT, H(e), 1);
    forget(K_EVENT, H(e));
    if (nspare < sizeof(spare) / sizeof(spare[0]))
        spare[nspare++] = e;
    return CUDA_SUCCESS;
}

#define EVENT_CALL(sym)                                                                            \
    static CUresult w_##sym(CUevent e)                                                             \
    {                                                                                              \
        ENTER(sym);                                                                                \
        check(K_EVENT, H(e), 1);                                                                   \
        return ORIG(sym, CUresult(*)(CUevent))(e);                                                 \
    }
EVENT_CALL(cuEventSynchronize)

static CUresult w_cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    CUresult rc;

    ENTER(cuMemAlloc_v2);
    if (n > MEM_CAP)
        return CUDA_ERROR_OUT_OF_MEMORY; /* as a full GPU would */
    rc = ORIG(cuMemAlloc_v2, CUresult(*)(CUdeviceptr *, size_t))(p, n);
    if (rc == CUDA_SUCCESS)
        note(K_DEVICE, *p, n, true);
    return rc;
}

static CUresult w_cuMemFree_v2(CUdeviceptr p)
{
    ENTER(cuMemFree_v2);
    if (phase == O_FUZZED) {
        bool mine = false;
        for (size_t i = 0; i < nobjs && !mine; i++)
            mine = objs[i].kind == K_DEVICE && objs[i].owner == O_FUZZED && objs[i].alloc &&
                   objs[i].base == p;
        if (!mine)
            blame(K_DEVICE, p, 1);
        forget(K_DEVICE, p);
    }
    return ORIG(cuMemFree_v2, CUresult(*)(CUdeviceptr))(p);
}

static CUresult w_cuMemHostRegister_v2(void *p, size_t n, unsigned f)
{
    CUresult rc;

    ENTER(cuMemHostRegister_v2);
    if (n > MEM_CAP)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = ORIG(cuMemHostRegister_v2, CUresult(*)(void *, size_t, unsigned))(p, n, f);
    if (rc == CUDA_SUCCESS)
        note(K_HOST, H(p), n, false);
    return rc;
}

static CUresult w_cuMemHostAlloc(void **pp, size_t n, unsigned f)
{
    CUresult rc;

    ENTER(cuMemHostAlloc);
    if (n > MEM_CAP)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = ORIG(cuMemHostAlloc, CUresult(*)(void **, size_t, unsigned))(pp, n, f);
    if (rc == CUDA_SUCCESS)
        note(K_HOST, H(*pp), n, false);
    return rc;
}

static CUresult w_cuMemFreeHost(void *p)
{
    ENTER(cuMemFreeHost);
    check(K_HOST, H(p), 1);
    forget(K_HOST, H(p));
    return ORIG(cuMemFreeHost, CUresult(*)(void *))(p);
}

static CUresult w_cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned f)
{
    ENTER(cuMemHostGetDevicePointer_v2);
    check(K_HOST, H(p), 1);
    return ORIG(cuMemHostGetDevicePointer_v2, CUresult(*)(CUdeviceptr *, void *, unsigned))(d, p,
                                                                                            f);
}

/* A dma-buf of a range: the range must be the client's device memory. */
static CUresult w_cuMemGetHandleForAddressRange(void *h, CUdeviceptr p, size_t n, int type,
                                                unsigned long long flags)
{
    ENTER(cuMemGetHandleForAddressRange);
    check(K_DEVICE, p, n);
    return ORIG(cuMemGetHandleForAddressRange,
                CUresult(*)(void *, CUdeviceptr, size_t, int, unsigned long long))(h, p, n, type,
                                                                                   flags);
}

static CUresult w_cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    ENTER(cuMemcpyHtoDAsync_v2);
    check(K_DEVICE, dst, n);
    check(K_HOST, H(src), n);
    check(K_STREAM, H(s), 1);
    return ORIG(cuMemcpyHtoDAsync_v2,
                CUresult(*)(CUdeviceptr, const void *, size_t, CUstream))(dst, src, n, s);
}

static CUresult w_cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    ENTER(cuMemcpyDtoHAsync_v2);
    check(K_HOST, H(dst), n);
    check(K_DEVICE, src, n);
    check(K_STREAM, H(s), 1);
    return ORIG(cuMemcpyDtoHAsync_v2, CUresult(*)(void *, CUdeviceptr, size_t, CUstream))(dst, src,
                                                                                          n, s);
}

static CUresult w_cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    ENTER(cuMemcpyDtoDAsync_v2);
    check(K_DEVICE, dst, n);
    check(K_DEVICE, src, n);
    check(K_STREAM, H(s), 1);
    return ORIG(cuMemcpyDtoDAsync_v2,
                CUresult(*)(CUdeviceptr, CUdeviceptr, size_t, CUstream))(dst, src, n, s);
}

#define MEMSET(sym, type, width)                                                                   \
    static CUresult w_##sym(CUdeviceptr d, type v, size_t n, CUstream s)                           \
    {                                                                                              \
        ENTER(sym);                                                                                \
        if (n > UINT64_MAX / (width))                                                              \
            check(K_DEVICE, d, UINT64_MAX);                                                        \
        check(K_DEVICE, d, (uint64_t)n *(width));                                                  \
        check(K_STREAM, H(s), 1);                                                                  \
        return ORIG(sym, CUresult(*)(CUdeviceptr, type, size_t, CUstream))(d, v, n, s);            \
    }
MEMSET(cuMemsetD8Async, unsigned char, 1)
MEMSET(cuMemsetD16Async, unsigned short, 2)
MEMSET(cuMemsetD32Async, unsigned, 4)

#define MEMSET2D(sym, type, width)                                                                 \
    static CUresult w_##sym(CUdeviceptr d, size_t pitch, type v, size_t w, size_t h, CUstream s)   \
    {                                                                                              \
        ENTER(sym);                                                                                \
        if (w > UINT64_MAX / (width))                                                              \
            check(K_DEVICE, d, UINT64_MAX);                                                        \
        check(K_DEVICE, d, extent(pitch, (uint64_t)w *(width), h));                                \
        check(K_STREAM, H(s), 1);                                                                  \
        return ORIG(sym, CUresult(*)(CUdeviceptr, size_t, type, size_t, size_t, CUstream))(        \
            d, pitch, v, w, h, s);                                                                 \
    }
MEMSET2D(cuMemsetD2D8Async, unsigned char, 1)
MEMSET2D(cuMemsetD2D16Async, unsigned short, 2)
MEMSET2D(cuMemsetD2D32Async, unsigned, 4)

static void check_side(int type, uint64_t host, uint64_t dev, uint64_t x, uint64_t y,
                       uint64_t pitch, uint64_t w, uint64_t h)
{
    uint64_t at = (type == CU_MEMORYTYPE_HOST ? host : dev) + y * pitch + x;

    if (type == CU_MEMORYTYPE_HOST)
        check(K_HOST, at, extent(pitch, w, h));
    else if (type == CU_MEMORYTYPE_DEVICE)
        check(K_DEVICE, at, extent(pitch, w, h));
    else if (phase == O_FUZZED) {
        fprintf(stderr, "fuzz_exec: %s received memory type %d\n", entry, type);
        abort();
    }
}

static CUresult w_cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *m, CUstream s)
{
    ENTER(cuMemcpy2DAsync_v2);
    check_side(m->srcMemoryType, H(m->srcHost), m->srcDevice, m->srcXInBytes, m->srcY, m->srcPitch,
               m->WidthInBytes, m->Height);
    check_side(m->dstMemoryType, H(m->dstHost), m->dstDevice, m->dstXInBytes, m->dstY, m->dstPitch,
               m->WidthInBytes, m->Height);
    check(K_STREAM, H(s), 1);
    return ORIG(cuMemcpy2DAsync_v2, CUresult(*)(const CUDA_MEMCPY2D *, CUstream))(m, s);
}

/*
 * The double's fill_u32 kernel writes where its arguments point, as a GPU kernel would. Kernel
 * arguments are the client's own bytes, never checked (a kernel may touch any memory of the
 * context, as in one process); on a GPU a kernel that writes outside every allocation faults
 * the context (CUDA_ERROR_ILLEGAL_ADDRESS), which the double cannot tell, so it is answered
 * here instead of writing outside the client's memory of this process.
 */
static bool kernel_faults(CUfunction f, void **extra)
{
    const uint8_t *args = NULL;
    size_t len = 0;
    uint64_t p;
    uint32_t n;

    if (phase != O_FUZZED || strcmp((const char *)f, "fill_u32") != 0) /* its name comes first */
        return false;
    for (int i = 0; extra && extra[i]; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            args = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
            len = *(size_t *)extra[i + 1];
    }
    if (!args || len < 16)
        return false;
    memcpy(&p, args, 8);
    memcpy(&n, args + 12, 4);
    if (p % 4)
        return true; /* a GPU faults on it too (CUDA_ERROR_MISALIGNED_ADDRESS) */
    for (size_t i = 0; i < nobjs; i++)
        if (objs[i].kind == K_DEVICE && objs[i].owner == O_FUZZED && covers(&objs[i], p, 4ull * n))
            return false;
    return true;
}

static CUresult w_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
                                 void **extra)
{
    ENTER(cuLaunchKernel);
    check(K_KERNEL, H(f), 1);
    check(K_STREAM, H(s), 1);
    if (kernel_faults(f, extra))
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    return ORIG(cuLaunchKernel,
                CUresult(*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, CUstream, void **, void **))(f, gx, gy, gz, bx, by, bz, smem,
                                                                   s, params, extra);
}

/* CUlaunchConfig, as api/launch.c lays it out */
struct launch_config {
    unsigned gx, gy, gz, bx, by, bz, smem;
    CUstream stream;
    void *attrs;
    unsigned nattrs;
};

static CUresult w_cuLaunchKernelEx(const struct launch_config *cfg, CUfunction f, void **params,
                                   void **extra)
{
    ENTER(cuLaunchKernelEx);
    check(K_KERNEL, H(f), 1);
    check(K_STREAM, H(cfg->stream), 1);
    if (kernel_faults(f, extra))
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    return ORIG(cuLaunchKernelEx, CUresult(*)(const struct launch_config *, CUfunction, void **,
                                              void **))(cfg, f, params, extra);
}

/* The modules family (fake_modules.c): occupancy of one kernel, alone or in clusters. */
static CUresult w_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, CUfunction f, int b,
                                                                       size_t smem, unsigned fl)
{
    ENTER(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags);
    check(K_KERNEL, H(f), 1);
    return ORIG(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
                CUresult(*)(int *, CUfunction, int, size_t, unsigned))(n, f, b, smem, fl);
}

static CUresult w_cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction f, int b,
                                                              size_t smem)
{
    ENTER(cuOccupancyMaxActiveBlocksPerMultiprocessor);
    check(K_KERNEL, H(f), 1);
    return ORIG(cuOccupancyMaxActiveBlocksPerMultiprocessor,
                CUresult(*)(int *, CUfunction, int, size_t))(n, f, b, smem);
}

static CUresult w_cuOccupancyAvailableDynamicSMemPerBlock(size_t *size, CUfunction f, int n, int b)
{
    ENTER(cuOccupancyAvailableDynamicSMemPerBlock);
    check(K_KERNEL, H(f), 1);
    return ORIG(cuOccupancyAvailableDynamicSMemPerBlock,
                CUresult(*)(size_t *, CUfunction, int, int))(size, f, n, b);
}

static CUresult w_cuOccupancyMaxPotentialClusterSize(int *v, CUfunction f,
                                                     const struct launch_config *cfg)
{
    ENTER(cuOccupancyMaxPotentialClusterSize);
    check(K_KERNEL, H(f), 1);
    check(K_STREAM, H(cfg->stream), 1);
    return ORIG(cuOccupancyMaxPotentialClusterSize,
                CUresult(*)(int *, CUfunction, const struct launch_config *))(v, f, cfg);
}

static CUresult w_cuOccupancyMaxActiveClusters(int *v, CUfunction f,
                                               const struct launch_config *cfg)
{
    ENTER(cuOccupancyMaxActiveClusters);
    check(K_KERNEL, H(f), 1);
    check(K_STREAM, H(cfg->stream), 1);
    return ORIG(cuOccupancyMaxActiveClusters,
                CUresult(*)(int *, CUfunction, const struct launch_config *))(v, f, cfg);
}

/* Stream memory values: an address of the client's, 4 or 8 bytes, on its stream. */
#define STREAM_VALUE(sym, type, width)                                                             \
    static CUresult w_##sym(CUstream s, CUdeviceptr addr, type v, unsigned flags)                  \
    {                                                                                              \
        ENTER(sym);                                                                                \
        check(K_DEVICE, addr, width);                                                              \
        check(K_STREAM, H(s), 1);                                                                  \
        return ORIG(sym, CUresult(*)(CUstream, CUdeviceptr, type, unsigned))(s, addr, v, flags);   \
    }
STREAM_VALUE(cuStreamWriteValue32_v2, cuuint32_t, 4)
STREAM_VALUE(cuStreamWriteValue64_v2, cuuint64_t, 8)
STREAM_VALUE(cuStreamWaitValue32_v2, cuuint32_t, 4)
STREAM_VALUE(cuStreamWaitValue64_v2, cuuint64_t, 8)

/* A batch of memory operations: each address the client's, for its width. */
static CUresult w_cuStreamBatchMemOp_v2(CUstream s, unsigned count, void *ops, unsigned flags)
{
    ENTER(cuStreamBatchMemOp_v2);
    check(K_STREAM, H(s), 1);
    for (unsigned i = 0; i < count; i++) {
        const uint8_t *op = (const uint8_t *)ops + 48 * i;
        int kind;
        uint64_t addr;
        memcpy(&kind, op, 4);
        memcpy(&addr, op + 8, 8);
        if (kind == 1 || kind == 2)
            check(K_DEVICE, addr, 4);
        else if (kind == 4 || kind == 5)
            check(K_DEVICE, addr, 8);
    }
    return ORIG(cuStreamBatchMemOp_v2,
                CUresult(*)(CUstream, unsigned, void *, unsigned))(s, count, ops, flags);
}

/* Stream attributes: the client's streams; an access policy window in its memory. */
static CUresult w_cuStreamSetAttribute(CUstream s, int attr, const void *v)
{
    ENTER(cuStreamSetAttribute);
    check(K_STREAM, H(s), 1);
    if (attr == 1) { /* CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: base_ptr, num_bytes */
        uint64_t base, n;
        memcpy(&base, v, 8);
        memcpy(&n, (const uint8_t *)v + 8, 8);
        check(K_DEVICE, base, n);
    }
    return ORIG(cuStreamSetAttribute, CUresult(*)(CUstream, int, const void *))(s, attr, v);
}

static CUresult w_cuStreamGetAttribute(CUstream s, int attr, void *v)
{
    ENTER(cuStreamGetAttribute);
    check(K_STREAM, H(s), 1);
    return ORIG(cuStreamGetAttribute, CUresult(*)(CUstream, int, void *))(s, attr, v);
}

static CUresult w_cuStreamCopyAttributes(CUstream dst, CUstream src)
{
    ENTER(cuStreamCopyAttributes);
    check(K_STREAM, H(dst), 1);
    check(K_STREAM, H(src), 1);
    return ORIG(cuStreamCopyAttributes, CUresult(*)(CUstream, CUstream))(dst, src);
}

static CUresult w_cuStreamGetId(CUstream s, unsigned long long *id)
{
    ENTER(cuStreamGetId);
    check(K_STREAM, H(s), 1);
    return ORIG(cuStreamGetId, CUresult(*)(CUstream, unsigned long long *))(s, id);
}

/* The linker: link states are the session's, an input's bytes its staged ones. */
static CUresult w_cuLinkCreate_v2(unsigned n, int *o, void **v, void **st)
{
    CUresult rc;

    ENTER(cuLinkCreate_v2);
    rc = ORIG(cuLinkCreate_v2, CUresult(*)(unsigned, int *, void **, void **))(n, o, v, st);
    if (rc == CUDA_SUCCESS)
        note(K_H_LINKSTATE, H(*st), 1, false);
    return rc;
}

static CUresult w_cuLinkAddData_v2(void *st, int type, void *data, size_t size, const char *name,
                                   unsigned n, int *o, void **v)
{
    ENTER(cuLinkAddData_v2);
    check(K_H_LINKSTATE, H(st), 1);
    if (phase == O_FUZZED && (data != fuzzed->stage || size > fuzzed->stage_len)) {
        fprintf(stderr, "fuzz_exec: %s received bytes past the %zu byte(s) the client staged\n",
                entry, fuzzed->stage_len);
        abort();
    }
    return ORIG(cuLinkAddData_v2, CUresult(*)(void *, int, void *, size_t, const char *, unsigned,
                                              int *, void **))(st, type, data, size, name, n, o, v);
}

static CUresult w_cuLinkComplete(void *st, void **cubin, size_t *size)
{
    ENTER(cuLinkComplete);
    check(K_H_LINKSTATE, H(st), 1);
    return ORIG(cuLinkComplete, CUresult(*)(void *, void **, size_t *))(st, cubin, size);
}

static CUresult w_cuLinkDestroy(void *st)
{
    ENTER(cuLinkDestroy);
    check(K_H_LINKSTATE, H(st), 1);
    forget(K_H_LINKSTATE, H(st));
    return ORIG(cuLinkDestroy, CUresult(*)(void *))(st);
}

/* The bytes of an image the driver reads, by the image's own headers (the driver takes no
 * size): a fatbin's header and payload, an ELF file's header tables, PTX (and the double's
 * text images) to its NUL. UINT64_MAX: it runs past the `have` bytes there are. Written apart
 * from the server's src/common/image.c on purpose: an oracle that shares the code under test
 * shares its mistakes. */
static uint64_t image_extent(const uint8_t *p, uint64_t have)
{
    uint32_t magic = 0;

    if (have >= 4)
        memcpy(&magic, p, 4);
    if (magic == OM_FATBIN_MAGIC) {
        uint16_t header;
        uint64_t fat;
        if (have < 16)
            return UINT64_MAX;
        memcpy(&header, p + 6, 2);
        memcpy(&fat, p + 8, 8);
        return fat > UINT64_MAX - header ? UINT64_MAX : header + fat;
    }
    if (have >= 5 && !memcmp(p,
                             "\x7f"
                             "ELF\x02",
                             5)) {
        uint64_t shoff, phoff;
        uint16_t phentsize, phnum, shentsize, shnum;
        if (have < 64)
            return UINT64_MAX;
        memcpy(&phoff, p + 32, 8);
        memcpy(&shoff, p + 40, 8);
        memcpy(&phentsize, p + 54, 2);
        memcpy(&phnum, p + 56, 2);
        memcpy(&shentsize, p + 58, 2);
        memcpy(&shnum, p + 60, 2);
        uint64_t a = (uint64_t)shentsize * shnum, b = (uint64_t)phentsize * phnum;
        if (shoff > UINT64_MAX - a || phoff > UINT64_MAX - b)
            return UINT64_MAX;
        return shoff + a > phoff + b ? shoff + a : phoff + b;
    }
    const uint8_t *nul = memchr(p, 0, have);
    return nul ? (uint64_t)(nul - p) + 1 : UINT64_MAX;
}

static CUresult w_cuLibraryLoadData(CUlibrary *lib, const void *code, void *jo, void **jv,
                                    unsigned nj, void *lo, void **lv, unsigned nl)
{
    CUresult rc;

    ENTER(cuLibraryLoadData);
    /* The image is the client's staged bytes, and the driver reads none past them. */
    if (phase == O_FUZZED &&
        (code != fuzzed->stage || image_extent(code, fuzzed->stage_len) > fuzzed->stage_len)) {
        fprintf(stderr,
                "fuzz_exec: %s received an image whose headers reach past the %zu byte(s) the "
                "client staged\n",
                entry, fuzzed->stage_len);
        abort();
    }
    rc = ORIG(cuLibraryLoadData, CUresult(*)(CUlibrary *, const void *, void *, void **, unsigned,
                                             void *, void **, unsigned))(lib, code, jo, jv, nj, lo,
                                                                         lv, nl);
    if (rc == CUDA_SUCCESS)
        note(K_LIBRARY, H(*lib), 1, false);
    return rc;
}

/* A new image whose library load wrote an error log is loaded again as a module (api/modules.c,
 * load_as_module_too): the same staged bytes, the module the server's own, unloaded at once. */
static CUresult w_cuModuleLoadDataEx(CUmodule *mod, const void *code, unsigned nj, void *jo,
                                     void **jv)
{
    ENTER(cuModuleLoadDataEx);
    if (phase == O_FUZZED &&
        (code != fuzzed->stage || image_extent(code, fuzzed->stage_len) > fuzzed->stage_len)) {
        fprintf(stderr, "fuzz_exec: %s received an image other than the client's staged one\n",
                entry);
        abort();
    }
    return ORIG(cuModuleLoadDataEx, CUresult(*)(CUmodule *, const void *, unsigned, void *,
                                                void **))(mod, code, nj, jo, jv);
}

/* ... and if that fails, the library goes: one the server loaded. */
static CUresult w_cuLibraryUnload(CUlibrary lib)
{
    ENTER(cuLibraryUnload);
    check(K_LIBRARY, H(lib), 1);
    return ORIG(cuLibraryUnload, CUresult(*)(CUlibrary))(lib);
}

static CUresult w_cuLibraryGetKernel(CUkernel *k, CUlibrary lib, const char *name)
{
    CUresult rc;

    ENTER(cuLibraryGetKernel);
    check(K_LIBRARY, H(lib), 1);
    rc = ORIG(cuLibraryGetKernel, CUresult(*)(CUkernel *, CUlibrary, const char *))(k, lib, name);
    if (rc == CUDA_SUCCESS)
        note(K_KERNEL, H(*k), 1, false);
    return rc;
}

/* The modules family's queries of libraries and kernels (fake_modules.c). */
static CUresult w_cuLibraryGetKernelCount(unsigned *n, CUlibrary lib)
{
    ENTER(cuLibraryGetKernelCount);
    check(K_LIBRARY, H(lib), 1);
    return ORIG(cuLibraryGetKernelCount, CUresult(*)(unsigned *, CUlibrary))(n, lib);
}

static CUresult w_cuLibraryEnumerateKernels(CUkernel *ks, unsigned n, CUlibrary lib)
{
    CUresult rc;

    ENTER(cuLibraryEnumerateKernels);
    check(K_LIBRARY, H(lib), 1);
    rc = ORIG(cuLibraryEnumerateKernels, CUresult(*)(CUkernel *, unsigned, CUlibrary))(ks, n, lib);
    for (unsigned i = 0; rc == CUDA_SUCCESS && i < n; i++)
        note(K_KERNEL, H(ks[i]), 1, false);
    return rc;
}

static CUresult w_cuKernelGetName(const char **name, CUkernel k)
{
    ENTER(cuKernelGetName);
    check(K_KERNEL, H(k), 1);
    return ORIG(cuKernelGetName, CUresult(*)(const char **, CUkernel))(name, k);
}

static CUresult w_cuKernelGetLibrary(CUlibrary *lib, CUkernel k)
{
    ENTER(cuKernelGetLibrary);
    check(K_KERNEL, H(k), 1);
    return ORIG(cuKernelGetLibrary, CUresult(*)(CUlibrary *, CUkernel))(lib, k);
}

static CUresult w_cuKernelGetParamInfo(CUkernel k, size_t i, size_t *off, size_t *size)
{
    ENTER(cuKernelGetParamInfo);
    check(K_KERNEL, H(k), 1);
    return ORIG(cuKernelGetParamInfo, CUresult(*)(CUkernel, size_t, size_t *, size_t *))(k, i, off,
                                                                                         size);
}

static CUresult w_cuKernelGetAttribute(int *v, int a, CUkernel k, CUdevice d)
{
    ENTER(cuKernelGetAttribute);
    check(K_KERNEL, H(k), 1);
    return ORIG(cuKernelGetAttribute, CUresult(*)(int *, int, CUkernel, CUdevice))(v, a, k, d);
}

static CUresult w_cuKernelSetAttribute(int a, int v, CUkernel k, CUdevice d)
{
    ENTER(cuKernelSetAttribute);
    check(K_KERNEL, H(k), 1);
    return ORIG(cuKernelSetAttribute, CUresult(*)(int, int, CUkernel, CUdevice))(a, v, k, d);
}

/* Arrays, mipmapped arrays (their levels are arrays), texture and surface objects. */
static CUresult noted(CUresult rc, int kind, uint64_t h)
{
    if (rc == CUDA_SUCCESS)
        note(kind, h, 1, false);
    return rc;
}

static CUresult w_cuArrayCreate_v2(CUarray *a, const CUDA_ARRAY_DESCRIPTOR *d)
{
    ENTER(cuArrayCreate_v2);
    CUresult rc =
        ORIG(cuArrayCreate_v2, CUresult(*)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *))(a, d);
    return noted(rc, K_H_ARRAY, rc == CUDA_SUCCESS ? H(*a) : 0);
}

static CUresult w_cuArray3DCreate_v2(CUarray *a, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    ENTER(cuArray3DCreate_v2);
    CUresult rc =
        ORIG(cuArray3DCreate_v2, CUresult(*)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *))(a, d);
    return noted(rc, K_H_ARRAY, rc == CUDA_SUCCESS ? H(*a) : 0);
}

static CUresult w_cuMipmappedArrayCreate(CUmipmappedArray *m, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                         unsigned n)
{
    ENTER(cuMipmappedArrayCreate);
    CUresult rc =
        ORIG(cuMipmappedArrayCreate,
             CUresult(*)(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned))(m, d, n);
    return noted(rc, K_H_MIPMAPPED_ARRAY, rc == CUDA_SUCCESS ? H(*m) : 0);
}

static CUresult w_cuMipmappedArrayGetLevel(CUarray *a, CUmipmappedArray m, unsigned l)
{
    ENTER(cuMipmappedArrayGetLevel);
    check(K_H_MIPMAPPED_ARRAY, H(m), 1);
    CUresult rc =
        ORIG(cuMipmappedArrayGetLevel, CUresult(*)(CUarray *, CUmipmappedArray, unsigned))(a, m, l);
    return noted(rc, K_H_ARRAY, rc == CUDA_SUCCESS ? H(*a) : 0);
}

static CUresult w_cuArrayGetPlane(CUarray *a, CUarray p, unsigned i)
{
    ENTER(cuArrayGetPlane);
    check(K_H_ARRAY, H(p), 1);
    CUresult rc = ORIG(cuArrayGetPlane, CUresult(*)(CUarray *, CUarray, unsigned))(a, p, i);
    return noted(rc, K_H_ARRAY, rc == CUDA_SUCCESS ? H(*a) : 0);
}

static CUresult w_cuArrayDestroy(CUarray a)
{
    ENTER(cuArrayDestroy);
    check(K_H_ARRAY, H(a), 1);
    forget(K_H_ARRAY, H(a));
    return ORIG(cuArrayDestroy, CUresult(*)(CUarray))(a);
}

static CUresult w_cuMipmappedArrayDestroy(CUmipmappedArray m)
{
    CUarray l;

    ENTER(cuMipmappedArrayDestroy);
    check(K_H_MIPMAPPED_ARRAY, H(m), 1);
    for (unsigned i = 0; i < 32; i++)
        if (ORIG(cuMipmappedArrayGetLevel,
                 CUresult(*)(CUarray *, CUmipmappedArray, unsigned))(&l, m, i) == CUDA_SUCCESS)
            forget(K_H_ARRAY, H(l));
    forget(K_H_MIPMAPPED_ARRAY, H(m));
    return ORIG(cuMipmappedArrayDestroy, CUresult(*)(CUmipmappedArray))(m);
}

/* api/remote/texrefs.tsv's custom row: the texture reference and the rows it views. */
static CUresult w_cuTexRefSetAddress2D_v3(CUtexref t, const CUDA_ARRAY_DESCRIPTOR *d, CUdeviceptr p,
                                          size_t pitch)
{
    ENTER(cuTexRefSetAddress2D_v3);
    check(K_H_TEXREF, H(t), 1);
    check(K_DEVICE, (uint64_t)p, (uint64_t)pitch * d->Height);
    return ORIG(cuTexRefSetAddress2D_v3, CUresult(*)(CUtexref, const CUDA_ARRAY_DESCRIPTOR *,
                                                     CUdeviceptr, size_t))(t, d, p, pitch);
}

#define ARRAY_GETTER(sym, T)                                                                       \
    static CUresult w_##sym(T *out, CUarray a)                                                     \
    {                                                                                              \
        ENTER(sym);                                                                                \
        check(K_H_ARRAY, H(a), 1);                                                                 \
        return ORIG(sym, CUresult(*)(T *, CUarray))(out, a);                                       \
    }
ARRAY_GETTER(cuArrayGetDescriptor_v2, CUDA_ARRAY_DESCRIPTOR)
ARRAY_GETTER(cuArray3DGetDescriptor_v2, CUDA_ARRAY3D_DESCRIPTOR)
ARRAY_GETTER(cuArrayGetSparseProperties, CUDA_ARRAY_SPARSE_PROPERTIES)

static CUresult w_cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *r, CUarray a,
                                               CUdevice d)
{
    ENTER(cuArrayGetMemoryRequirements);
    check(K_H_ARRAY, H(a), 1);
    return ORIG(cuArrayGetMemoryRequirements,
                CUresult(*)(CUDA_ARRAY_MEMORY_REQUIREMENTS *, CUarray, CUdevice))(r, a, d);
}

static CUresult w_cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *r,
                                                        CUmipmappedArray m, CUdevice d)
{
    ENTER(cuMipmappedArrayGetMemoryRequirements);
    check(K_H_MIPMAPPED_ARRAY, H(m), 1);
    return ORIG(cuMipmappedArrayGetMemoryRequirements,
                CUresult(*)(CUDA_ARRAY_MEMORY_REQUIREMENTS *, CUmipmappedArray, CUdevice))(r, m, d);
}

static CUresult w_cuMipmappedArrayGetSparseProperties(CUDA_ARRAY_SPARSE_PROPERTIES *p,
                                                      CUmipmappedArray m)
{
    ENTER(cuMipmappedArrayGetSparseProperties);
    check(K_H_MIPMAPPED_ARRAY, H(m), 1);
    return ORIG(cuMipmappedArrayGetSparseProperties,
                CUresult(*)(CUDA_ARRAY_SPARSE_PROPERTIES *, CUmipmappedArray))(p, m);
}

static void check_side3(int type, uint64_t host, uint64_t dev, void *arr, uint64_t x, uint64_t y,
                        uint64_t z, uint64_t pitch, uint64_t height, uint64_t w, uint64_t h,
                        uint64_t d)
{
    if (type == CU_MEMORYTYPE_ARRAY) {
        check(K_H_ARRAY, H(arr), 1);
        return;
    }
    if (!w || !h || !d)
        return;
    uint64_t slice = pitch * height,
             at = (type == CU_MEMORYTYPE_HOST ? host : dev) + z * slice + y * pitch + x;
    check(type == CU_MEMORYTYPE_HOST ? K_HOST : K_DEVICE, at,
          (d - 1) * slice + extent(pitch, w, h));
}

static CUresult w_cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *m, CUstream s)
{
    ENTER(cuMemcpy3DAsync_v2);
    check_side3(m->srcMemoryType, H(m->srcHost), m->srcDevice, m->srcArray, m->srcXInBytes, m->srcY,
                m->srcZ, m->srcPitch, m->srcHeight, m->WidthInBytes, m->Height, m->Depth);
    check_side3(m->dstMemoryType, H(m->dstHost), m->dstDevice, m->dstArray, m->dstXInBytes, m->dstY,
                m->dstZ, m->dstPitch, m->dstHeight, m->WidthInBytes, m->Height, m->Depth);
    check(K_STREAM, H(s), 1);
    return ORIG(cuMemcpy3DAsync_v2, CUresult(*)(const CUDA_MEMCPY3D *, CUstream))(m, s);
}

static void check_resource(const CUDA_RESOURCE_DESC *r)
{
    if (r->resType == CU_RESOURCE_TYPE_ARRAY)
        check(K_H_ARRAY, H(r->res.array.hArray), 1);
    else if (r->resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY)
        check(K_H_MIPMAPPED_ARRAY, H(r->res.mipmap.hMipmappedArray), 1);
    else if (r->resType == CU_RESOURCE_TYPE_LINEAR)
        check(K_DEVICE, r->res.linear.devPtr, r->res.linear.sizeInBytes);
    else if (r->resType == CU_RESOURCE_TYPE_PITCH2D)
        check(K_DEVICE, r->res.pitch2D.devPtr,
              extent(r->res.pitch2D.pitchInBytes, r->res.pitch2D.width, r->res.pitch2D.height));
}

static CUresult w_cuTexObjectCreate(CUtexObject *o, const CUDA_RESOURCE_DESC *r,
                                    const CUDA_TEXTURE_DESC *t, const CUDA_RESOURCE_VIEW_DESC *v)
{
    ENTER(cuTexObjectCreate);
    check_resource(r);
    CUresult rc = ORIG(cuTexObjectCreate, CUresult(*)(CUtexObject *, const CUDA_RESOURCE_DESC *,
                                                      const CUDA_TEXTURE_DESC *,
                                                      const CUDA_RESOURCE_VIEW_DESC *))(o, r, t, v);
    return noted(rc, K_H_TEXOBJ, rc == CUDA_SUCCESS ? *o : 0);
}

static CUresult w_cuSurfObjectCreate(CUsurfObject *o, const CUDA_RESOURCE_DESC *r)
{
    ENTER(cuSurfObjectCreate);
    check_resource(r);
    CUresult rc =
        ORIG(cuSurfObjectCreate, CUresult(*)(CUsurfObject *, const CUDA_RESOURCE_DESC *))(o, r);
    return noted(rc, K_H_SURFOBJ, rc == CUDA_SUCCESS ? *o : 0);
}

#define OBJECT_CALL(sym, T, kind)                                                                  \
    static CUresult w_##sym(T *out, unsigned long long o)                                          \
    {                                                                                              \
        ENTER(sym);                                                                                \
        check(kind, o, 1);                                                                         \
        return ORIG(sym, CUresult(*)(T *, unsigned long long))(out, o);                            \
    }
OBJECT_CALL(cuTexObjectGetResourceDesc, CUDA_RESOURCE_DESC, K_H_TEXOBJ)
OBJECT_CALL(cuTexObjectGetTextureDesc, CUDA_TEXTURE_DESC, K_H_TEXOBJ)
OBJECT_CALL(cuTexObjectGetResourceViewDesc, CUDA_RESOURCE_VIEW_DESC, K_H_TEXOBJ)
OBJECT_CALL(cuSurfObjectGetResourceDesc, CUDA_RESOURCE_DESC, K_H_SURFOBJ)

static CUresult w_cuTexObjectDestroy(CUtexObject o)
{
    ENTER(cuTexObjectDestroy);
    check(K_H_TEXOBJ, o, 1);
    forget(K_H_TEXOBJ, o);
    return ORIG(cuTexObjectDestroy, CUresult(*)(CUtexObject))(o);
}

static CUresult w_cuSurfObjectDestroy(CUsurfObject o)
{
    ENTER(cuSurfObjectDestroy);
    check(K_H_SURFOBJ, o, 1);
    forget(K_H_SURFOBJ, o);
    return ORIG(cuSurfObjectDestroy, CUresult(*)(CUsurfObject))(o);
}

/* ------------------------------------------------------------------ graphs (fake_graphs.c) */

/* The kernel node parameters api/nodes.c passes (CUDA_KERNEL_NODE_PARAMS). */
struct kernel_node_params {
    CUfunction func;
    unsigned gx, gy, gz, bx, by, bz, smem;
    void **params, **extra;
    void *kern, *ctx;
};

static void check_nodes(const CUgraphNode *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        check(K_H_NODE, H(v[i]), 1);
}

static void note_nodes(CUresult rc, CUgraphNode *v, const size_t *n)
{
    for (size_t i = 0; rc == CUDA_SUCCESS && v && n && i < *n; i++)
        note(K_H_NODE, H(v[i]), 1, false);
}

static bool kernel_node_faults(const struct kernel_node_params *p)
{
    if (!p)
        return false;
    CUfunction f = p->func ? p->func : (CUfunction)p->kern;
    check(K_KERNEL, H(f), 1);
    return kernel_faults(f, p->extra);
}

static void check_memset_node(const CUDA_MEMSET_NODE_PARAMS *p)
{
    if (p && p->width <= UINT64_MAX / (p->elementSize ? p->elementSize : 1))
        check(K_DEVICE, p->dst, extent(p->pitch, (uint64_t)p->width * p->elementSize, p->height));
    else if (p)
        check(K_DEVICE, p->dst, UINT64_MAX);
}

static CUresult w_cuGraphCreate(CUgraph *g, unsigned f)
{
    CUresult rc;
    ENTER(cuGraphCreate);
    rc = ORIG(cuGraphCreate, CUresult(*)(CUgraph *, unsigned))(g, f);
    if (rc == CUDA_SUCCESS)
        note(K_H_GRAPH, H(*g), 1, false);
    return rc;
}

static CUresult w_cuGraphClone(CUgraph *g, CUgraph o)
{
    CUresult rc;
    ENTER(cuGraphClone);
    check(K_H_GRAPH, H(o), 1);
    rc = ORIG(cuGraphClone, CUresult(*)(CUgraph *, CUgraph))(g, o);
    if (rc == CUDA_SUCCESS)
        note(K_H_GRAPH, H(*g), 1, false);
    return rc;
}

static CUresult w_cuGraphDestroy(CUgraph g)
{
    ENTER(cuGraphDestroy);
    check(K_H_GRAPH, H(g), 1);
    forget(K_H_GRAPH, H(g));
    return ORIG(cuGraphDestroy, CUresult(*)(CUgraph))(g);
}

static CUresult w_cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long f)
{
    CUresult rc;
    ENTER(cuGraphInstantiateWithFlags);
    check(K_H_GRAPH, H(g), 1);
    rc = ORIG(cuGraphInstantiateWithFlags,
              CUresult(*)(CUgraphExec *, CUgraph, unsigned long long))(e, g, f);
    if (rc == CUDA_SUCCESS)
        note(K_H_EXEC, H(*e), 1, false);
    return rc;
}

static CUresult w_cuGraphExecDestroy(CUgraphExec e)
{
    ENTER(cuGraphExecDestroy);
    check(K_H_EXEC, H(e), 1);
    forget(K_H_EXEC, H(e));
    return ORIG(cuGraphExecDestroy, CUresult(*)(CUgraphExec))(e);
}

static CUresult w_cuGraphDestroyNode(CUgraphNode n)
{
    ENTER(cuGraphDestroyNode);
    check(K_H_NODE, H(n), 1);
    forget(K_H_NODE, H(n));
    return ORIG(cuGraphDestroyNode, CUresult(*)(CUgraphNode))(n);
}

/* A child graph node's graph is usable as a graph (the server's kind childgraph). */
static CUresult w_cuGraphChildGraphNodeGetGraph(CUgraphNode n, CUgraph *g)
{
    CUresult rc;
    ENTER(cuGraphChildGraphNodeGetGraph);
    check(K_H_NODE, H(n), 1);
    rc = ORIG(cuGraphChildGraphNodeGetGraph, CUresult(*)(CUgraphNode, CUgraph *))(n, g);
    if (rc == CUDA_SUCCESS)
        note(K_H_GRAPH, H(*g), 1, false);
    return rc;
}

static CUresult w_cuGraphKernelNodeGetParams_v2(CUgraphNode n, CUDA_KERNEL_NODE_PARAMS *p)
{
    ENTER(cuGraphKernelNodeGetParams_v2);
    check(K_H_NODE, H(n), 1);
    return ORIG(cuGraphKernelNodeGetParams_v2,
                CUresult(*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *))(n, p);
}

/* External semaphore nodes: every semaphore the fuzzed session's. */
static void check_sems(const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *p)
{
    for (unsigned i = 0; p && i < p->numExtSems; i++)
        check(K_H_EXTSEM, H(p->extSemArray[i]), 1);
}

#define SEM_NODE(kind, P)                                                                          \
    static CUresult w_cuGraphAddExternalSemaphores##kind##Node(                                    \
        CUgraphNode *n, CUgraph g, const CUgraphNode *d, size_t nd, const P *p)                    \
    {                                                                                              \
        CUresult rc;                                                                               \
        ENTER(cuGraphAddExternalSemaphores##kind##Node);                                           \
        check(K_H_GRAPH, H(g), 1);                                                                 \
        check_nodes(d, nd);                                                                        \
        check_sems((const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *)(const void *)p);                      \
        rc = ORIG(cuGraphAddExternalSemaphores##kind##Node,                                        \
                  CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const P *))(    \
            n, g, d, nd, p);                                                                       \
        if (rc == CUDA_SUCCESS)                                                                    \
            note(K_H_NODE, H(*n), 1, false);                                                       \
        return rc;                                                                                 \
    }                                                                                              \
    static CUresult w_cuGraphExternalSemaphores##kind##NodeSetParams(CUgraphNode n, const P *p)    \
    {                                                                                              \
        ENTER(cuGraphExternalSemaphores##kind##NodeSetParams);                                     \
        check(K_H_NODE, H(n), 1);                                                                  \
        check_sems((const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *)(const void *)p);                      \
        return ORIG(cuGraphExternalSemaphores##kind##NodeSetParams,                                \
                    CUresult(*)(CUgraphNode, const P *))(n, p);                                    \
    }                                                                                              \
    static CUresult w_cuGraphExecExternalSemaphores##kind##NodeSetParams(                          \
        CUgraphExec e, CUgraphNode n, const P *p)                                                  \
    {                                                                                              \
        ENTER(cuGraphExecExternalSemaphores##kind##NodeSetParams);                                 \
        check(K_H_EXEC, H(e), 1);                                                                  \
        check(K_H_NODE, H(n), 1);                                                                  \
        check_sems((const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *)(const void *)p);                      \
        return ORIG(cuGraphExecExternalSemaphores##kind##NodeSetParams,                            \
                    CUresult(*)(CUgraphExec, CUgraphNode, const P *))(e, n, p);                    \
    }                                                                                              \
    static CUresult w_cuGraphExternalSemaphores##kind##NodeGetParams(CUgraphNode n, P *p)          \
    {                                                                                              \
        ENTER(cuGraphExternalSemaphores##kind##NodeGetParams);                                     \
        check(K_H_NODE, H(n), 1);                                                                  \
        return ORIG(cuGraphExternalSemaphores##kind##NodeGetParams,                                \
                    CUresult(*)(CUgraphNode, P *))(n, p);                                          \
    }
SEM_NODE(Signal, CUDA_EXT_SEM_SIGNAL_NODE_PARAMS)
SEM_NODE(Wait, CUDA_EXT_SEM_WAIT_NODE_PARAMS)

/* Batch memory op nodes: each operation's address the fuzzed session's, for its width. */
static void check_batch(const CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    for (unsigned i = 0; p && p->paramArray && i < p->count; i++) {
        const uint8_t *op = (const uint8_t *)p->paramArray + (size_t)i * 48;
        int kind;
        uint64_t addr;
        memcpy(&kind, op, 4);
        memcpy(&addr, op + 8, 8);
        if (kind == 1 || kind == 2)
            check(K_DEVICE, addr, 4);
        else if (kind == 4 || kind == 5)
            check(K_DEVICE, addr, 8);
    }
}

static CUresult w_cuGraphAddBatchMemOpNode(CUgraphNode *n, CUgraph g, const CUgraphNode *d,
                                           size_t nd, const CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    CUresult rc;
    ENTER(cuGraphAddBatchMemOpNode);
    check(K_H_GRAPH, H(g), 1);
    check_nodes(d, nd);
    check_batch(p);
    rc = ORIG(cuGraphAddBatchMemOpNode,
              CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                          const CUDA_BATCH_MEM_OP_NODE_PARAMS *))(n, g, d, nd, p);
    if (rc == CUDA_SUCCESS)
        note(K_H_NODE, H(*n), 1, false);
    return rc;
}

static CUresult w_cuGraphBatchMemOpNodeSetParams(CUgraphNode n,
                                                 const CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    ENTER(cuGraphBatchMemOpNodeSetParams);
    check(K_H_NODE, H(n), 1);
    check_batch(p);
    return ORIG(cuGraphBatchMemOpNodeSetParams,
                CUresult(*)(CUgraphNode, const CUDA_BATCH_MEM_OP_NODE_PARAMS *))(n, p);
}

static CUresult w_cuGraphExecBatchMemOpNodeSetParams(CUgraphExec e, CUgraphNode n,
                                                     const CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    ENTER(cuGraphExecBatchMemOpNodeSetParams);
    check(K_H_EXEC, H(e), 1);
    check(K_H_NODE, H(n), 1);
    check_batch(p);
    return ORIG(cuGraphExecBatchMemOpNodeSetParams,
                CUresult(*)(CUgraphExec, CUgraphNode, const CUDA_BATCH_MEM_OP_NODE_PARAMS *))(e, n,
                                                                                              p);
}

static CUresult w_cuGraphBatchMemOpNodeGetParams(CUgraphNode n, CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    ENTER(cuGraphBatchMemOpNodeGetParams);
    check(K_H_NODE, H(n), 1);
    return ORIG(cuGraphBatchMemOpNodeGetParams,
                CUresult(*)(CUgraphNode, CUDA_BATCH_MEM_OP_NODE_PARAMS *))(n, p);
}

#define NEW_NODE(sym, extra_t, check_extra)                                                        \
    static CUresult w_##sym(CUgraphNode *n, CUgraph g, const CUgraphNode *d, size_t nd, extra_t x) \
    {                                                                                              \
        CUresult rc;                                                                               \
        ENTER(sym);                                                                                \
        check(K_H_GRAPH, H(g), 1);                                                                 \
        check_nodes(d, nd);                                                                        \
        check_extra;                                                                               \
        rc = ORIG(sym, CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, extra_t))( \
            n, g, d, nd, x);                                                                       \
        if (rc == CUDA_SUCCESS)                                                                    \
            note(K_H_NODE, H(*n), 1, false);                                                       \
        return rc;                                                                                 \
    }
NEW_NODE(cuGraphAddEventRecordNode, CUevent, check(K_EVENT, H(x), 1))
NEW_NODE(cuGraphAddEventWaitNode, CUevent, check(K_EVENT, H(x), 1))
NEW_NODE(cuGraphAddChildGraphNode, CUgraph, check(K_H_GRAPH, H(x), 1))

static CUresult w_cuGraphAddEmptyNode(CUgraphNode *n, CUgraph g, const CUgraphNode *d, size_t nd)
{
    CUresult rc;
    ENTER(cuGraphAddEmptyNode);
    check(K_H_GRAPH, H(g), 1);
    check_nodes(d, nd);
    rc = ORIG(cuGraphAddEmptyNode,
              CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t))(n, g, d, nd);
    if (rc == CUDA_SUCCESS)
        note(K_H_NODE, H(*n), 1, false);
    return rc;
}

static CUresult w_cuGraphAddKernelNode_v2(CUgraphNode *n, CUgraph g, const CUgraphNode *d,
                                          size_t nd, const struct kernel_node_params *p)
{
    CUresult rc;
    ENTER(cuGraphAddKernelNode_v2);
    check(K_H_GRAPH, H(g), 1);
    check_nodes(d, nd);
    if (kernel_node_faults(p))
        return CUDA_ERROR_ILLEGAL_ADDRESS; /* its launches would write outside the client's */
    rc = ORIG(cuGraphAddKernelNode_v2,
              CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                          const struct kernel_node_params *))(n, g, d, nd, p);
    if (rc == CUDA_SUCCESS)
        note(K_H_NODE, H(*n), 1, false);
    return rc;
}

static CUresult w_cuGraphAddMemsetNode(CUgraphNode *n, CUgraph g, const CUgraphNode *d, size_t nd,
                                       const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx)
{
    CUresult rc;
    ENTER(cuGraphAddMemsetNode);
    check(K_H_GRAPH, H(g), 1);
    check_nodes(d, nd);
    check_memset_node(p);
    rc = ORIG(cuGraphAddMemsetNode,
              CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                          const CUDA_MEMSET_NODE_PARAMS *, CUcontext))(n, g, d, nd, p, ctx);
    if (rc == CUDA_SUCCESS)
        note(K_H_NODE, H(*n), 1, false);
    return rc;
}

#define EDGES(sym)                                                                                 \
    static CUresult w_##sym(CUgraph g, const CUgraphNode *f, const CUgraphNode *t, size_t n)       \
    {                                                                                              \
        ENTER(sym);                                                                                \
        check(K_H_GRAPH, H(g), 1);                                                                 \
        check_nodes(f, n);                                                                         \
        check_nodes(t, n);                                                                         \
        return ORIG(sym, CUresult(*)(CUgraph, const CUgraphNode *, const CUgraphNode *, size_t))(  \
            g, f, t, n);                                                                           \
    }
EDGES(cuGraphAddDependencies)
EDGES(cuGraphRemoveDependencies)

/* Lists of nodes of the caller's graph (or node): what they answer becomes the caller's. */
#define LIST(sym, kind, T)                                                                         \
    static CUresult w_##sym(T h, CUgraphNode *v, size_t *n)                                        \
    {                                                                                              \
        CUresult rc;                                                                               \
        ENTER(sym);                                                                                \
        check(kind, H(h), 1);                                                                      \
        rc = ORIG(sym, CUresult(*)(T, CUgraphNode *, size_t *))(h, v, n);                          \
        note_nodes(rc, v, n);                                                                      \
        return rc;                                                                                 \
    }
LIST(cuGraphGetNodes, K_H_GRAPH, CUgraph)
LIST(cuGraphGetRootNodes, K_H_GRAPH, CUgraph)
LIST(cuGraphNodeGetDependencies, K_H_NODE, CUgraphNode)
LIST(cuGraphNodeGetDependentNodes, K_H_NODE, CUgraphNode)

static CUresult w_cuGraphGetEdges(CUgraph g, CUgraphNode *f, CUgraphNode *t, size_t *n)
{
    CUresult rc;
    ENTER(cuGraphGetEdges);
    check(K_H_GRAPH, H(g), 1);
    rc = ORIG(cuGraphGetEdges, CUresult(*)(CUgraph, CUgraphNode *, CUgraphNode *, size_t *))(g, f,
                                                                                             t, n);
    note_nodes(rc, f, n);
    note_nodes(rc, t, n);
    return rc;
}

static CUresult w_cuGraphNodeFindInClone(CUgraphNode *n, CUgraphNode o, CUgraph g)
{
    CUresult rc;
    ENTER(cuGraphNodeFindInClone);
    check(K_H_NODE, H(o), 1);
    check(K_H_GRAPH, H(g), 1);
    rc = ORIG(cuGraphNodeFindInClone, CUresult(*)(CUgraphNode *, CUgraphNode, CUgraph))(n, o, g);
    if (rc == CUDA_SUCCESS)
        note(K_H_NODE, H(*n), 1, false);
    return rc;
}

static CUresult w_cuGraphNodeGetType(CUgraphNode n, int *t)
{
    ENTER(cuGraphNodeGetType);
    check(K_H_NODE, H(n), 1);
    return ORIG(cuGraphNodeGetType, CUresult(*)(CUgraphNode, int *))(n, t);
}

static CUresult w_cuGraphKernelNodeCopyAttributes(CUgraphNode a, CUgraphNode b)
{
    ENTER(cuGraphKernelNodeCopyAttributes);
    check(K_H_NODE, H(a), 1);
    check(K_H_NODE, H(b), 1);
    return ORIG(cuGraphKernelNodeCopyAttributes, CUresult(*)(CUgraphNode, CUgraphNode))(a, b);
}

static CUresult w_cuGraphKernelNodeSetParams_v2(CUgraphNode n, const struct kernel_node_params *p)
{
    ENTER(cuGraphKernelNodeSetParams_v2);
    check(K_H_NODE, H(n), 1);
    if (kernel_node_faults(p))
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    return ORIG(cuGraphKernelNodeSetParams_v2,
                CUresult(*)(CUgraphNode, const struct kernel_node_params *))(n, p);
}

static CUresult w_cuGraphExecKernelNodeSetParams_v2(CUgraphExec e, CUgraphNode n,
                                                    const struct kernel_node_params *p)
{
    ENTER(cuGraphExecKernelNodeSetParams_v2);
    check(K_H_EXEC, H(e), 1);
    check(K_H_NODE, H(n), 1);
    if (kernel_node_faults(p))
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    return ORIG(cuGraphExecKernelNodeSetParams_v2,
                CUresult(*)(CUgraphExec, CUgraphNode, const struct kernel_node_params *))(e, n, p);
}

static CUresult w_cuGraphMemsetNodeGetParams(CUgraphNode n, CUDA_MEMSET_NODE_PARAMS *p)
{
    ENTER(cuGraphMemsetNodeGetParams);
    check(K_H_NODE, H(n), 1);
    return ORIG(cuGraphMemsetNodeGetParams, CUresult(*)(CUgraphNode, CUDA_MEMSET_NODE_PARAMS *))(n,
                                                                                                 p);
}

static CUresult w_cuGraphMemsetNodeSetParams(CUgraphNode n, const CUDA_MEMSET_NODE_PARAMS *p)
{
    ENTER(cuGraphMemsetNodeSetParams);
    check(K_H_NODE, H(n), 1);
    check_memset_node(p);
    return ORIG(cuGraphMemsetNodeSetParams,
                CUresult(*)(CUgraphNode, const CUDA_MEMSET_NODE_PARAMS *))(n, p);
}

static CUresult w_cuGraphExecMemsetNodeSetParams(CUgraphExec e, CUgraphNode n,
                                                 const CUDA_MEMSET_NODE_PARAMS *p, CUcontext c)
{
    ENTER(cuGraphExecMemsetNodeSetParams);
    check(K_H_EXEC, H(e), 1);
    check(K_H_NODE, H(n), 1);
    check_memset_node(p);
    return ORIG(cuGraphExecMemsetNodeSetParams,
                CUresult(*)(CUgraphExec, CUgraphNode, const CUDA_MEMSET_NODE_PARAMS *, CUcontext))(
        e, n, p, c);
}

static CUresult w_cuGraphEventRecordNodeGetEvent(CUgraphNode n, CUevent *e)
{
    ENTER(cuGraphEventRecordNodeGetEvent);
    check(K_H_NODE, H(n), 1);
    return ORIG(cuGraphEventRecordNodeGetEvent, CUresult(*)(CUgraphNode, CUevent *))(n, e);
}

static CUresult w_cuGraphEventWaitNodeGetEvent(CUgraphNode n, CUevent *e)
{
    ENTER(cuGraphEventWaitNodeGetEvent);
    check(K_H_NODE, H(n), 1);
    return ORIG(cuGraphEventWaitNodeGetEvent, CUresult(*)(CUgraphNode, CUevent *))(n, e);
}

#define SET_EVENT(sym)                                                                             \
    static CUresult w_##sym(CUgraphNode n, CUevent e)                                              \
    {                                                                                              \
        ENTER(sym);                                                                                \
        check(K_H_NODE, H(n), 1);                                                                  \
        check(K_EVENT, H(e), 1);                                                                   \
        return ORIG(sym, CUresult(*)(CUgraphNode, CUevent))(n, e);                                 \
    }
SET_EVENT(cuGraphEventRecordNodeSetEvent)
SET_EVENT(cuGraphEventWaitNodeSetEvent)

#define EXEC_NODE(sym, T, kind)                                                                    \
    static CUresult w_##sym(CUgraphExec x, CUgraphNode n, T v)                                     \
    {                                                                                              \
        ENTER(sym);                                                                                \
        check(K_H_EXEC, H(x), 1);                                                                  \
        check(K_H_NODE, H(n), 1);                                                                  \
        if ((kind) >= 0)                                                                           \
            check(kind, (uint64_t)(uintptr_t)v, 1);                                                \
        return ORIG(sym, CUresult(*)(CUgraphExec, CUgraphNode, T))(x, n, v);                       \
    }
EXEC_NODE(cuGraphExecEventRecordNodeSetEvent, CUevent, K_EVENT)
EXEC_NODE(cuGraphExecEventWaitNodeSetEvent, CUevent, K_EVENT)
EXEC_NODE(cuGraphExecChildGraphNodeSetParams, CUgraph, K_H_GRAPH)
EXEC_NODE(cuGraphNodeSetEnabled, unsigned, -1)
EXEC_NODE(cuGraphNodeGetEnabled, unsigned *, -1)

static CUresult w_cuGraphExecGetFlags(CUgraphExec x, unsigned long long *f)
{
    ENTER(cuGraphExecGetFlags);
    check(K_H_EXEC, H(x), 1);
    return ORIG(cuGraphExecGetFlags, CUresult(*)(CUgraphExec, unsigned long long *))(x, f);
}

static CUresult w_cuGraphExecUpdate_v2(CUgraphExec x, CUgraph g, void *info)
{
    ENTER(cuGraphExecUpdate_v2);
    check(K_H_EXEC, H(x), 1);
    check(K_H_GRAPH, H(g), 1);
    return ORIG(cuGraphExecUpdate_v2, CUresult(*)(CUgraphExec, CUgraph, void *))(x, g, info);
}

#define EXEC_STREAM(sym)                                                                           \
    static CUresult w_##sym(CUgraphExec x, CUstream s)                                             \
    {                                                                                              \
        ENTER(sym);                                                                                \
        check(K_H_EXEC, H(x), 1);                                                                  \
        check(K_STREAM, H(s), 1);                                                                  \
        return ORIG(sym, CUresult(*)(CUgraphExec, CUstream))(x, s);                                \
    }
EXEC_STREAM(cuGraphLaunch)
EXEC_STREAM(cuGraphUpload)

static CUresult w_cuStreamBeginCapture_v2(CUstream s, int mode)
{
    ENTER(cuStreamBeginCapture_v2);
    check(K_STREAM, H(s), 1);
    return ORIG(cuStreamBeginCapture_v2, CUresult(*)(CUstream, int))(s, mode);
}

static CUresult w_cuStreamEndCapture(CUstream s, CUgraph *g)
{
    CUresult rc;
    ENTER(cuStreamEndCapture);
    check(K_STREAM, H(s), 1);
    rc = ORIG(cuStreamEndCapture, CUresult(*)(CUstream, CUgraph *))(s, g);
    if (rc == CUDA_SUCCESS && *g)
        note(K_H_GRAPH, H(*g), 1, false);
    return rc;
}

static CUresult w_cuStreamIsCapturing(CUstream s, int *status)
{
    ENTER(cuStreamIsCapturing);
    check(K_STREAM, H(s), 1);
    return ORIG(cuStreamIsCapturing, CUresult(*)(CUstream, int *))(s, status);
}

static CUresult w_cuStreamGetCaptureInfo(CUstream s, int *status, uint64_t *id)
{
    ENTER(cuStreamGetCaptureInfo);
    check(K_STREAM, H(s), 1);
    return ORIG(cuStreamGetCaptureInfo, CUresult(*)(CUstream, int *, uint64_t *))(s, status, id);
}

static CUresult w_cuStreamGetCaptureInfo_v3(CUstream s, int *status, uint64_t *id, CUgraph *g,
                                            CUgraphNode **d, const void **e, size_t *n)
{
    CUresult rc;
    ENTER(cuStreamGetCaptureInfo_v3);
    check(K_STREAM, H(s), 1);
    rc = ORIG(cuStreamGetCaptureInfo_v3,
              CUresult(*)(CUstream, int *, uint64_t *, CUgraph *, CUgraphNode **, const void **,
                          size_t *))(s, status, id, g, d, e, n);
    if (rc == CUDA_SUCCESS && d)
        note_nodes(rc, *d, n);
    return rc;
}

static CUresult w_cuStreamUpdateCaptureDependencies(CUstream s, CUgraphNode *d, size_t n,
                                                    unsigned f)
{
    ENTER(cuStreamUpdateCaptureDependencies);
    check(K_STREAM, H(s), 1);
    check_nodes(d, n);
    return ORIG(cuStreamUpdateCaptureDependencies,
                CUresult(*)(CUstream, CUgraphNode *, size_t, unsigned))(s, d, n, f);
}

static void check_side3d(int type, uint64_t host, uint64_t dev, uint64_t x, uint64_t y, uint64_t z,
                         uint64_t pitch, uint64_t height, const CUDA_MEMCPY3D *m)
{
    uint64_t base = type == CU_MEMORYTYPE_HOST ? host : dev, first, last;

    if (!m->WidthInBytes || !m->Height || !m->Depth)
        return;
    if (__builtin_mul_overflow(z, height, &first) || __builtin_add_overflow(first, y, &first) ||
        __builtin_mul_overflow(first, pitch, &first) || __builtin_add_overflow(first, x, &first) ||
        __builtin_add_overflow(z, m->Depth - 1, &last) ||
        __builtin_mul_overflow(last, height, &last) || __builtin_add_overflow(last, y, &last) ||
        __builtin_add_overflow(last, m->Height - 1, &last) ||
        __builtin_mul_overflow(last, pitch, &last) || __builtin_add_overflow(last, x, &last) ||
        __builtin_add_overflow(last, m->WidthInBytes, &last)) {
        if (phase == O_FUZZED) {
            fprintf(stderr, "fuzz_exec: %s received a copy whose extent overflows\n", entry);
            abort();
        }
        return;
    }
    if (type == CU_MEMORYTYPE_HOST) {
        check(K_HOST, base + first, last - first);
    } else if (type == CU_MEMORYTYPE_DEVICE) {
        check(K_DEVICE, base + first, last - first);
    } else if (type == CU_MEMORYTYPE_UNIFIED && phase == O_FUZZED) {
        for (size_t i = 0; i < nobjs; i++)
            if ((objs[i].kind == K_DEVICE || objs[i].kind == K_HOST) && objs[i].owner == O_FUZZED &&
                covers(&objs[i], base + first, last - first))
                return;
        blame(K_DEVICE, base + first, last - first);
    } else if (phase == O_FUZZED) {
        fprintf(stderr, "fuzz_exec: %s received memory type %d\n", entry, type);
        abort();
    }
}

static void check_copy3d(const CUDA_MEMCPY3D *m)
{
    if (!m)
        return;
    check_side3d(m->srcMemoryType, H(m->srcHost), m->srcDevice, m->srcXInBytes, m->srcY, m->srcZ,
                 m->srcPitch, m->srcHeight, m);
    check_side3d(m->dstMemoryType, H(m->dstHost), m->dstDevice, m->dstXInBytes, m->dstY, m->dstZ,
                 m->dstPitch, m->dstHeight, m);
}

static CUresult w_cuGraphAddMemcpyNode(CUgraphNode *n, CUgraph g, const CUgraphNode *d, size_t nd,
                                       const CUDA_MEMCPY3D *p, CUcontext ctx)
{
    CUresult rc;
    ENTER(cuGraphAddMemcpyNode);
    check(K_H_GRAPH, H(g), 1);
    check_nodes(d, nd);
    check_copy3d(p);
    rc = ORIG(cuGraphAddMemcpyNode, CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                                                const CUDA_MEMCPY3D *, CUcontext))(n, g, d, nd, p,
                                                                                   ctx);
    if (rc == CUDA_SUCCESS)
        note(K_H_NODE, H(*n), 1, false);
    return rc;
}

static CUresult w_cuGraphMemcpyNodeGetParams(CUgraphNode n, CUDA_MEMCPY3D *p)
{
    ENTER(cuGraphMemcpyNodeGetParams);
    check(K_H_NODE, H(n), 1);
    return ORIG(cuGraphMemcpyNodeGetParams, CUresult(*)(CUgraphNode, CUDA_MEMCPY3D *))(n, p);
}

static CUresult w_cuGraphMemcpyNodeSetParams(CUgraphNode n, const CUDA_MEMCPY3D *p)
{
    ENTER(cuGraphMemcpyNodeSetParams);
    check(K_H_NODE, H(n), 1);
    check_copy3d(p);
    return ORIG(cuGraphMemcpyNodeSetParams, CUresult(*)(CUgraphNode, const CUDA_MEMCPY3D *))(n, p);
}

static CUresult w_cuGraphExecMemcpyNodeSetParams(CUgraphExec e, CUgraphNode n,
                                                 const CUDA_MEMCPY3D *p, CUcontext ctx)
{
    ENTER(cuGraphExecMemcpyNodeSetParams);
    check(K_H_EXEC, H(e), 1);
    check(K_H_NODE, H(n), 1);
    check_copy3d(p);
    return ORIG(cuGraphExecMemcpyNodeSetParams,
                CUresult(*)(CUgraphExec, CUgraphNode, const CUDA_MEMCPY3D *, CUcontext))(e, n, p,
                                                                                         ctx);
}

static CUresult w_cuGraphKernelNodeGetAttribute(CUgraphNode n, int id, void *v)
{
    ENTER(cuGraphKernelNodeGetAttribute);
    check(K_H_NODE, H(n), 1);
    return ORIG(cuGraphKernelNodeGetAttribute, CUresult(*)(CUgraphNode, int, void *))(n, id, v);
}

static CUresult w_cuGraphKernelNodeSetAttribute(CUgraphNode n, int id, const void *v)
{
    ENTER(cuGraphKernelNodeSetAttribute);
    check(K_H_NODE, H(n), 1);
    return ORIG(cuGraphKernelNodeSetAttribute, CUresult(*)(CUgraphNode, int, const void *))(n, id,
                                                                                            v);
}

/* CUDA_GRAPH_INSTANTIATE_PARAMS */
struct instantiate_params {
    uint64_t flags;
    CUstream upload;
    CUgraphNode err;
    int result;
};

static CUresult w_cuGraphInstantiateWithParams(CUgraphExec *e, CUgraph g,
                                               struct instantiate_params *p)
{
    CUresult rc;
    ENTER(cuGraphInstantiateWithParams);
    check(K_H_GRAPH, H(g), 1);
    if (p && p->upload)
        check(K_STREAM, H(p->upload), 1);
    rc = ORIG(cuGraphInstantiateWithParams,
              CUresult(*)(CUgraphExec *, CUgraph, struct instantiate_params *))(e, g, p);
    if (rc == CUDA_SUCCESS)
        note(K_H_EXEC, H(*e), 1, false);
    return rc;
}

static CUresult w_cuGraphDebugDotPrint(CUgraph g, const char *path, unsigned flags)
{
    ENTER(cuGraphDebugDotPrint);
    check(K_H_GRAPH, H(g), 1);
    if (phase == O_FUZZED && strncmp(path, "/proc/self/fd/", 14) != 0) {
        fprintf(stderr, "fuzz_exec: %s received the path %s\n", entry, path);
        abort();
    }
    return ORIG(cuGraphDebugDotPrint, CUresult(*)(CUgraph, const char *, unsigned))(g, path, flags);
}

static CUresult w_cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode *d,
                                              const void *e, size_t n, int mode)
{
    ENTER(cuStreamBeginCaptureToGraph);
    check(K_STREAM, H(s), 1);
    check(K_H_GRAPH, H(g), 1);
    check_nodes(d, n);
    return ORIG(cuStreamBeginCaptureToGraph,
                CUresult(*)(CUstream, CUgraph, const CUgraphNode *, const void *, size_t, int))(
        s, g, d, e, n, mode);
}

/* External memory and semaphores (api/external.c): the imports need a descriptor, which the
 * fuzzed client never sends; a mapped buffer is device memory of the client. */
static CUresult w_cuImportExternalMemory(CUexternalMemory *m,
                                         const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *d)
{
    ENTER(cuImportExternalMemory);
    CUresult rc =
        ORIG(cuImportExternalMemory,
             CUresult(*)(CUexternalMemory *, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *))(m, d);
    return noted(rc, K_H_EXTMEM, rc == CUDA_SUCCESS ? H(*m) : 0);
}

static CUresult w_cuImportExternalSemaphore(CUexternalSemaphore *sem,
                                            const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC *d)
{
    ENTER(cuImportExternalSemaphore);
    CUresult rc = ORIG(
        cuImportExternalSemaphore,
        CUresult(*)(CUexternalSemaphore *, const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC *))(sem, d);
    return noted(rc, K_H_EXTSEM, rc == CUDA_SUCCESS ? H(*sem) : 0);
}

static CUresult w_cuExternalMemoryGetMappedBuffer(CUdeviceptr *p, CUexternalMemory m,
                                                  const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *d)
{
    CUresult rc;

    ENTER(cuExternalMemoryGetMappedBuffer);
    check(K_H_EXTMEM, H(m), 1);
    rc = ORIG(cuExternalMemoryGetMappedBuffer,
              CUresult(*)(CUdeviceptr *, CUexternalMemory,
                          const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *))(p, m, d);
    if (rc == CUDA_SUCCESS)
        note(K_DEVICE, *p, d->size, true);
    return rc;
}

/* Context-wide waits: never for one client (exec.c's rules). */
static CUresult w_cuCtxSynchronize(void)
{
    ENTER(cuCtxSynchronize);
    if (phase == O_FUZZED) {
        fprintf(stderr, "fuzz_exec: %s (waits for every client) ran for a client\n", entry);
        abort();
    }
    return ORIG(cuCtxSynchronize, CUresult(*)(void))();
}

static CUresult w_cuMemHostUnregister(void *p)
{
    ENTER(cuMemHostUnregister);
    if (phase == O_FUZZED) {
        fprintf(stderr, "fuzz_exec: %s (waits for every client) ran for a client\n", entry);
        abort();
    }
    return ORIG(cuMemHostUnregister, CUresult(*)(void *))(p);
}

/* IPC event handles: the server asks the driver whether the client's event may be shared. */
static CUresult w_cuIpcGetEventHandle(CUipcEventHandle *h, CUevent e)
{
    ENTER(cuIpcGetEventHandle);
    check(K_EVENT, H(e), 1);
    return ORIG(cuIpcGetEventHandle, CUresult(*)(CUipcEventHandle *, CUevent))(h, e);
}

/* Memory family: stream-ordered pools (fake_memory.c). */
static CUresult w_cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    CUresult rc;

    ENTER(cuMemPoolCreate);
    rc = ORIG(cuMemPoolCreate, CUresult(*)(CUmemoryPool *, const CUmemPoolProps *))(pool, props);
    if (rc == CUDA_SUCCESS)
        note(K_H_MEMPOOL, H(*pool), 1, false);
    return rc;
}

static CUresult w_cuMemPoolDestroy(CUmemoryPool pool)
{
    ENTER(cuMemPoolDestroy);
    check(K_H_MEMPOOL, H(pool), 1);
    forget(K_H_MEMPOOL, H(pool));
    return ORIG(cuMemPoolDestroy, CUresult(*)(CUmemoryPool))(pool);
}

static CUresult w_cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute a, void *v)
{
    ENTER(cuMemPoolSetAttribute);
    check(K_H_MEMPOOL, H(pool), 1);
    return ORIG(cuMemPoolSetAttribute,
                CUresult(*)(CUmemoryPool, CUmemPool_attribute, void *))(pool, a, v);
}

static CUresult w_cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute a, void *v)
{
    ENTER(cuMemPoolGetAttribute);
    check(K_H_MEMPOOL, H(pool), 1);
    return ORIG(cuMemPoolGetAttribute,
                CUresult(*)(CUmemoryPool, CUmemPool_attribute, void *))(pool, a, v);
}

static CUresult w_cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *m, size_t n)
{
    ENTER(cuMemPoolSetAccess);
    check(K_H_MEMPOOL, H(pool), 1);
    return ORIG(cuMemPoolSetAccess,
                CUresult(*)(CUmemoryPool, const CUmemAccessDesc *, size_t))(pool, m, n);
}

static CUresult w_cuMemPoolGetAccess(CUmemAccess_flags *f, CUmemoryPool pool, CUmemLocation *l)
{
    ENTER(cuMemPoolGetAccess);
    check(K_H_MEMPOOL, H(pool), 1);
    return ORIG(cuMemPoolGetAccess,
                CUresult(*)(CUmemAccess_flags *, CUmemoryPool, CUmemLocation *))(f, pool, l);
}

static CUresult w_cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
    ENTER(cuMemPoolTrimTo);
    check(K_H_MEMPOOL, H(pool), 1);
    return ORIG(cuMemPoolTrimTo, CUresult(*)(CUmemoryPool, size_t))(pool, keep);
}

static CUresult w_cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s)
{
    CUresult rc;

    ENTER(cuMemAllocFromPoolAsync);
    check(K_H_MEMPOOL, H(pool), 1);
    check(K_STREAM, H(s), 1);
    if (n > MEM_CAP)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = ORIG(cuMemAllocFromPoolAsync,
              CUresult(*)(CUdeviceptr *, size_t, CUmemoryPool, CUstream))(p, n, pool, s);
    if (rc == CUDA_SUCCESS)
        note(K_DEVICE, *p, n, true);
    return rc;
}

/* Pool pointers the fuzzed session imported at an address it already had (api/shareable.c
 * refuses the import and frees it again): that free gives back the extra reference only. */
static struct {
    uint64_t p;
    unsigned n;
} extra_refs[64];

static bool drop_extra_ref(uint64_t p)
{
    for (size_t i = 0; i < sizeof(extra_refs) / sizeof(extra_refs[0]); i++)
        if (extra_refs[i].n && extra_refs[i].p == p) {
            extra_refs[i].n--;
            return true;
        }
    return false;
}

static CUresult w_cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
    ENTER(cuMemFreeAsync);
    check(K_STREAM, H(s), 1);
    if (phase == O_FUZZED && drop_extra_ref(p)) {
        check(K_DEVICE, p, 1);
    } else if (phase == O_FUZZED) {
        bool mine = false;
        for (size_t i = 0; i < nobjs && !mine; i++)
            mine = objs[i].kind == K_DEVICE && objs[i].owner == O_FUZZED && objs[i].alloc &&
                   objs[i].base == p;
        if (!mine)
            blame(K_DEVICE, p, 1);
        forget(K_DEVICE, p);
    }
    return ORIG(cuMemFreeAsync, CUresult(*)(CUdeviceptr, CUstream))(p, s);
}

/* The virtual memory management API (fake_memory.c; NOT_SUPPORTED unless FAKECUDA_VMM). The
 * server's own allocations (devmem.c) run in the fuzzed phase too: what it creates is noted. */
static CUresult w_cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *p, int o)
{
    ENTER(cuMemGetAllocationGranularity);
    return ORIG(cuMemGetAllocationGranularity,
                CUresult(*)(size_t *, const CUmemAllocationProp *, int))(g, p, o);
}

static CUresult w_cuMemCreate(CUmemGenericAllocationHandle *h, size_t n,
                              const CUmemAllocationProp *p, unsigned long long f)
{
    CUresult rc;

    ENTER(cuMemCreate);
    rc =
        ORIG(cuMemCreate, CUresult(*)(CUmemGenericAllocationHandle *, size_t,
                                      const CUmemAllocationProp *, unsigned long long))(h, n, p, f);
    if (rc == CUDA_SUCCESS)
        note(K_H_MEMHANDLE, *h, 1, false);
    return rc;
}

static CUresult w_cuMemRelease(CUmemGenericAllocationHandle h)
{
    ENTER(cuMemRelease);
    check(K_H_MEMHANDLE, h, 1);
    return ORIG(cuMemRelease, CUresult(*)(CUmemGenericAllocationHandle))(h);
}

static CUresult w_cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t a, CUdeviceptr addr,
                                      unsigned long long f)
{
    CUresult rc;

    ENTER(cuMemAddressReserve);
    rc = ORIG(cuMemAddressReserve, CUresult(*)(CUdeviceptr *, size_t, size_t, CUdeviceptr,
                                               unsigned long long))(p, n, a, addr, f);
    if (rc == CUDA_SUCCESS)
        note(K_VA, *p, n, false);
    return rc;
}

static CUresult w_cuMemAddressFree(CUdeviceptr p, size_t n)
{
    ENTER(cuMemAddressFree);
    check(K_VA, p, n);
    return ORIG(cuMemAddressFree, CUresult(*)(CUdeviceptr, size_t))(p, n);
}

static CUresult w_cuMemMap(CUdeviceptr p, size_t n, size_t off, CUmemGenericAllocationHandle h,
                           unsigned long long f)
{
    CUresult rc;

    ENTER(cuMemMap);
    check(K_VA, p, n);
    check(K_H_MEMHANDLE, h, 1);
    rc = ORIG(cuMemMap, CUresult(*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                                    unsigned long long))(p, n, off, h, f);
    if (rc == CUDA_SUCCESS)
        note(K_DEVICE, p, n, false);
    return rc;
}

static CUresult w_cuMemUnmap(CUdeviceptr p, size_t n)
{
    ENTER(cuMemUnmap);
    check(K_VA, p, n);
    return ORIG(cuMemUnmap, CUresult(*)(CUdeviceptr, size_t))(p, n);
}

static CUresult w_cuMemSetAccess(CUdeviceptr p, size_t n, const CUmemAccessDesc *d, size_t c)
{
    ENTER(cuMemSetAccess);
    check(K_VA, p, n);
    return ORIG(cuMemSetAccess,
                CUresult(*)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t))(p, n, d, c);
}

static CUresult w_cuMemGetAccess(unsigned long long *f, const CUmemLocation *l, CUdeviceptr p)
{
    ENTER(cuMemGetAccess);
    check(K_VA, p, 1);
    return ORIG(cuMemGetAccess,
                CUresult(*)(unsigned long long *, const CUmemLocation *, CUdeviceptr))(f, l, p);
}

static CUresult w_cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *addr)
{
    ENTER(cuMemRetainAllocationHandle);
    check(K_VA, H(addr), 1);
    return ORIG(cuMemRetainAllocationHandle,
                CUresult(*)(CUmemGenericAllocationHandle *, void *))(h, addr);
}

static CUresult w_cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *p,
                                                         CUmemGenericAllocationHandle h)
{
    ENTER(cuMemGetAllocationPropertiesFromHandle);
    check(K_H_MEMHANDLE, h, 1);
    return ORIG(cuMemGetAllocationPropertiesFromHandle,
                CUresult(*)(CUmemAllocationProp *, CUmemGenericAllocationHandle))(p, h);
}

/* Graph memory and conditional nodes (api/graphmem.c, api/nodes.c). */
static CUresult w_cuGraphAddMemAllocNode(CUgraphNode *n, CUgraph g, const CUgraphNode *d, size_t nd,
                                         CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    CUresult rc;
    ENTER(cuGraphAddMemAllocNode);
    check(K_H_GRAPH, H(g), 1);
    check_nodes(d, nd);
    rc = ORIG(cuGraphAddMemAllocNode, CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *,
                                                  size_t, CUDA_MEM_ALLOC_NODE_PARAMS *))(n, g, d,
                                                                                         nd, p);
    if (rc == CUDA_SUCCESS) {
        note(K_H_NODE, H(*n), 1, false);
        note(K_DEVICE, p->dptr, p->bytesize, false);
    }
    return rc;
}

static CUresult w_cuGraphMemAllocNodeGetParams(CUgraphNode n, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    ENTER(cuGraphMemAllocNodeGetParams);
    check(K_H_NODE, H(n), 1);
    return ORIG(cuGraphMemAllocNodeGetParams,
                CUresult(*)(CUgraphNode, CUDA_MEM_ALLOC_NODE_PARAMS *))(n, p);
}

static CUresult w_cuGraphAddMemFreeNode(CUgraphNode *n, CUgraph g, const CUgraphNode *d, size_t nd,
                                        CUdeviceptr p)
{
    CUresult rc;
    ENTER(cuGraphAddMemFreeNode);
    check(K_H_GRAPH, H(g), 1);
    check_nodes(d, nd);
    check(K_DEVICE, p, 1);
    rc = ORIG(cuGraphAddMemFreeNode, CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *,
                                                 size_t, CUdeviceptr))(n, g, d, nd, p);
    if (rc == CUDA_SUCCESS)
        note(K_H_NODE, H(*n), 1, false);
    return rc;
}

static CUresult w_cuGraphConditionalHandleCreate(CUgraphConditionalHandle *h, CUgraph g,
                                                 CUcontext c, unsigned v, unsigned f)
{
    ENTER(cuGraphConditionalHandleCreate);
    check(K_H_GRAPH, H(g), 1);
    return ORIG(cuGraphConditionalHandleCreate,
                CUresult(*)(CUgraphConditionalHandle *, CUgraph, CUcontext, unsigned, unsigned))(
        h, g, c, v, f);
}

static CUresult w_cuGraphAddNode(CUgraphNode *n, CUgraph g, const CUgraphNode *d, size_t nd,
                                 CUgraphNodeParams *p)
{
    CUresult rc;
    ENTER(cuGraphAddNode);
    check(K_H_GRAPH, H(g), 1);
    check_nodes(d, nd);
    rc = ORIG(cuGraphAddNode, CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                                          CUgraphNodeParams *))(n, g, d, nd, p);
    if (rc == CUDA_SUCCESS) {
        note(K_H_NODE, H(*n), 1, false);
        for (unsigned i = 0; p->u.conditional.phGraph_out && i < p->u.conditional.size; i++)
            note(K_H_GRAPH, H(p->u.conditional.phGraph_out[i]), 1, false);
    }
    return rc;
}

/* The arraymap family (fake_arraymap.c): each element's array or mipmapped array and, for a
 * map, its allocation handle. A module's texture and surface references: a module's texture
 * reference is noted as a texref too (the texref rows take it) but must never be destroyed. */
static CUresult w_cuMemMapArrayAsync(CUarrayMapInfo *m, unsigned n, CUstream st)
{
    ENTER(cuMemMapArrayAsync);
    for (unsigned i = 0; m && i < n; i++) {
        if (m[i].resourceType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY)
            check(K_H_MIPMAPPED_ARRAY, H(m[i].resource.mipmap), 1);
        else
            check(K_H_ARRAY, H(m[i].resource.array), 1);
        if (m[i].memOperationType == CU_MEM_OPERATION_TYPE_MAP)
            check(K_H_MEMHANDLE, m[i].memHandle.memHandle, 1);
    }
    return ORIG(cuMemMapArrayAsync, CUresult(*)(CUarrayMapInfo *, unsigned, CUstream))(m, n, st);
}

static CUresult w_cuLibraryGetModule(CUmodule *mod, CUlibrary lib)
{
    ENTER(cuLibraryGetModule);
    check(K_LIBRARY, H(lib), 1);
    return ORIG(cuLibraryGetModule, CUresult(*)(CUmodule *, CUlibrary))(mod, lib);
}

static CUresult w_cuModuleGetTexRef(CUtexref *t, CUmodule mod, const char *name)
{
    ENTER(cuModuleGetTexRef);
    check(K_LIBRARY, H(mod), 1); /* the double's module is its library */
    CUresult rc =
        ORIG(cuModuleGetTexRef, CUresult(*)(CUtexref *, CUmodule, const char *))(t, mod, name);
    if (rc == CUDA_SUCCESS) {
        note(K_H_TEXREF, H(*t), 1, false);
        note(K_H_MODTEXREF, H(*t), 1, false);
    }
    return rc;
}

static CUresult w_cuModuleGetSurfRef(CUsurfref *sr, CUmodule mod, const char *name)
{
    ENTER(cuModuleGetSurfRef);
    check(K_LIBRARY, H(mod), 1);
    CUresult rc =
        ORIG(cuModuleGetSurfRef, CUresult(*)(CUsurfref *, CUmodule, const char *))(sr, mod, name);
    return noted(rc, K_H_MODSURFREF, rc == CUDA_SUCCESS ? H(*sr) : 0);
}

static CUresult w_cuTexRefDestroy(CUtexref t)
{
    ENTER(cuTexRefDestroy);
    check(K_H_TEXREF, H(t), 1);
    for (size_t i = 0; phase == O_FUZZED && i < nobjs; i++)
        if (objs[i].kind == K_H_MODTEXREF && objs[i].base == H(t))
            violation("which is a module's texture reference", K_H_MODTEXREF, H(t), 1);
    CUresult rc = ORIG(cuTexRefDestroy, CUresult(*)(CUtexref))(t);
    if (rc == CUDA_SUCCESS)
        forget(K_H_TEXREF, H(t));
    return rc;
}

static CUresult w_cuSurfRefGetArray(CUarray *a, CUsurfref sr)
{
    ENTER(cuSurfRefGetArray);
    check(K_H_MODSURFREF, H(sr), 1);
    return ORIG(cuSurfRefGetArray, CUresult(*)(CUarray *, CUsurfref))(a, sr);
}

/* Shareable handles (api/shareable.c): the exported handle or pool and the pool memory of an
 * exported pointer are the fuzzed session's; what an import makes is its own. The imports of a
 * descriptor need one the fuzzed client never sends; fabric handles and pointer data travel. */
static CUresult w_cuMemExportToShareableHandle(void *out, CUmemGenericAllocationHandle h,
                                               CUmemAllocationHandleType t, unsigned long long f)
{
    ENTER(cuMemExportToShareableHandle);
    check(K_H_MEMHANDLE, h, 1);
    return ORIG(cuMemExportToShareableHandle,
                CUresult(*)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                            unsigned long long))(out, h, t, f);
}

static CUresult w_cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h, void *os,
                                                 CUmemAllocationHandleType t)
{
    ENTER(cuMemImportFromShareableHandle);
    CUresult rc =
        ORIG(cuMemImportFromShareableHandle, CUresult(*)(CUmemGenericAllocationHandle *, void *,
                                                         CUmemAllocationHandleType))(h, os, t);
    return noted(rc, K_H_MEMHANDLE, rc == CUDA_SUCCESS ? *h : 0);
}

static CUresult w_cuMemPoolExportToShareableHandle(void *out, CUmemoryPool pool,
                                                   CUmemAllocationHandleType t,
                                                   unsigned long long f)
{
    ENTER(cuMemPoolExportToShareableHandle);
    check(K_H_MEMPOOL, H(pool), 1);
    return ORIG(cuMemPoolExportToShareableHandle,
                CUresult(*)(void *, CUmemoryPool, CUmemAllocationHandleType, unsigned long long))(
        out, pool, t, f);
}

static CUresult w_cuMemPoolImportFromShareableHandle(CUmemoryPool *pool, void *os,
                                                     CUmemAllocationHandleType t,
                                                     unsigned long long f)
{
    ENTER(cuMemPoolImportFromShareableHandle);
    CUresult rc = ORIG(cuMemPoolImportFromShareableHandle,
                       CUresult(*)(CUmemoryPool *, void *, CUmemAllocationHandleType,
                                   unsigned long long))(pool, os, t, f);
    return noted(rc, K_H_MEMPOOL, rc == CUDA_SUCCESS ? H(*pool) : 0);
}

static CUresult w_cuMemPoolExportPointer(CUmemPoolPtrExportData *d, CUdeviceptr p)
{
    ENTER(cuMemPoolExportPointer);
    check(K_DEVICE, p, 1);
    return ORIG(cuMemPoolExportPointer, CUresult(*)(CUmemPoolPtrExportData *, CUdeviceptr))(d, p);
}

static CUresult w_cuMemPoolImportPointer(CUdeviceptr *p, CUmemoryPool pool,
                                         CUmemPoolPtrExportData *d)
{
    CUresult rc;
    size_t n = 0;
    CUdeviceptr base = 0;

    CUresult (*range)(CUdeviceptr *, size_t *, CUdeviceptr) =
        ORIG(cuMemGetAddressRange_v2, CUresult(*)(CUdeviceptr *, size_t *, CUdeviceptr));

    ENTER(cuMemPoolImportPointer);
    check(K_H_MEMPOOL, H(pool), 1);
    rc = ORIG(cuMemPoolImportPointer,
              CUresult(*)(CUdeviceptr *, CUmemoryPool, CUmemPoolPtrExportData *))(p, pool, d);
    if (rc != CUDA_SUCCESS || range(&base, &n, *p) != CUDA_SUCCESS)
        return rc;
    if (phase == O_FUZZED) {
        bool had = false;
        for (size_t i = 0; i < nobjs && !had; i++)
            had = objs[i].kind == K_DEVICE && objs[i].owner == O_FUZZED && objs[i].base == *p;
        for (size_t i = 0; had && i < sizeof(extra_refs) / sizeof(extra_refs[0]); i++)
            if (!extra_refs[i].n || extra_refs[i].p == *p) {
                extra_refs[i].p = *p;
                extra_refs[i].n++;
                break;
            }
    }
    note(K_DEVICE, *p, n, true);
    return rc;
}

static CUresult w_cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *n, CUdeviceptr p)
{
    ENTER(cuMemGetAddressRange_v2);
    check(K_DEVICE, p, 1);
    return ORIG(cuMemGetAddressRange_v2, CUresult(*)(CUdeviceptr *, size_t *, CUdeviceptr))(base, n,
                                                                                            p);
}

/* Host nodes (api/remote/hostnodes.tsv): the server's trampoline never reaches the double (a
 * launch would call it, and it would wait for a client this harness does not have); a no-op
 * stands in, the token kept as its argument, and the trampoline is given back on the way out. */
static void (*host_trampoline)(void *);
static void host_noop(void *token)
{
    (void)token;
}

static CUDA_HOST_NODE_PARAMS host_in(const CUDA_HOST_NODE_PARAMS *p)
{
    CUDA_HOST_NODE_PARAMS q = {0};
    if (p) {
        host_trampoline = p->fn;
        q.fn = host_noop;
        q.userData = p->userData;
    }
    return q;
}

static CUresult w_cuGraphAddHostNode(CUgraphNode *n, CUgraph g, const CUgraphNode *d, size_t nd,
                                     const CUDA_HOST_NODE_PARAMS *p)
{
    CUDA_HOST_NODE_PARAMS q = host_in(p);
    CUresult rc;
    ENTER(cuGraphAddHostNode);
    check(K_H_GRAPH, H(g), 1);
    check_nodes(d, nd);
    rc = ORIG(cuGraphAddHostNode, CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                                              const CUDA_HOST_NODE_PARAMS *))(n, g, d, nd,
                                                                              p ? &q : NULL);
    if (rc == CUDA_SUCCESS)
        note(K_H_NODE, H(*n), 1, false);
    return rc;
}

static CUresult w_cuGraphHostNodeGetParams(CUgraphNode n, CUDA_HOST_NODE_PARAMS *p)
{
    CUresult rc;
    ENTER(cuGraphHostNodeGetParams);
    check(K_H_NODE, H(n), 1);
    rc = ORIG(cuGraphHostNodeGetParams, CUresult(*)(CUgraphNode, CUDA_HOST_NODE_PARAMS *))(n, p);
    if (rc == CUDA_SUCCESS && p && p->fn == host_noop)
        p->fn = host_trampoline;
    return rc;
}

static CUresult w_cuGraphHostNodeSetParams(CUgraphNode n, const CUDA_HOST_NODE_PARAMS *p)
{
    CUDA_HOST_NODE_PARAMS q = host_in(p);
    ENTER(cuGraphHostNodeSetParams);
    check(K_H_NODE, H(n), 1);
    return ORIG(cuGraphHostNodeSetParams,
                CUresult(*)(CUgraphNode, const CUDA_HOST_NODE_PARAMS *))(n, p ? &q : NULL);
}

static CUresult w_cuGraphExecHostNodeSetParams(CUgraphExec e, CUgraphNode n,
                                               const CUDA_HOST_NODE_PARAMS *p)
{
    CUDA_HOST_NODE_PARAMS q = host_in(p);
    ENTER(cuGraphExecHostNodeSetParams);
    check(K_H_EXEC, H(e), 1);
    check(K_H_NODE, H(n), 1);
    return ORIG(cuGraphExecHostNodeSetParams,
                CUresult(*)(CUgraphExec, CUgraphNode, const CUDA_HOST_NODE_PARAMS *))(
        e, n, p ? &q : NULL);
}

static CUresult w_cuLaunchHostFunc(CUstream s, CUhostFn fn, void *data)
{
    ENTER(cuLaunchHostFunc);
    check(K_STREAM, H(s), 1);
    host_trampoline = fn;
    return ORIG(cuLaunchHostFunc, CUresult(*)(CUstream, CUhostFn, void *))(s, host_noop, data);
}

/* Green contexts and device resources (api/green.c): a resource the driver gets is one the
 * driver made (the double's hidden bytes "FAKE" at offset 4), never a client's copy; the
 * descriptors and green contexts are the fuzzed session's. */
static void check_smres(const CUdevResource *r)
{
    if (r && r->type == CU_DEV_RESOURCE_TYPE_SM && memcmp(r->_internal_padding, "FAKE", 4)) {
        fprintf(stderr, "fuzz_exec: %s got a device resource the driver did not make\n", entry);
        abort();
    }
}

static CUresult w_cuDeviceGetDevResource(CUdevice dev, CUdevResource *r, CUdevResourceType type)
{
    ENTER(cuDeviceGetDevResource);
    return ORIG(cuDeviceGetDevResource, CUresult(*)(CUdevice, CUdevResource *, int))(dev, r, type);
}

static CUresult w_cuGreenCtxGetDevResource(CUgreenCtx g, CUdevResource *r, CUdevResourceType type)
{
    ENTER(cuGreenCtxGetDevResource);
    check(K_H_GREENCTX, H(g), 1);
    return ORIG(cuGreenCtxGetDevResource, CUresult(*)(CUgreenCtx, CUdevResource *, int))(g, r,
                                                                                         type);
}

static CUresult w_cuDevSmResourceSplitByCount(CUdevResource *res, unsigned *nb,
                                              const CUdevResource *in, CUdevResource *rem,
                                              unsigned flags, unsigned min)
{
    ENTER(cuDevSmResourceSplitByCount);
    check_smres(in);
    return ORIG(cuDevSmResourceSplitByCount,
                CUresult(*)(CUdevResource *, unsigned *, const CUdevResource *, CUdevResource *,
                            unsigned, unsigned))(res, nb, in, rem, flags, min);
}

static CUresult w_cuDevResourceGenerateDesc(CUdevResourceDesc *d, CUdevResource *r, unsigned n)
{
    CUresult rc;

    ENTER(cuDevResourceGenerateDesc);
    for (unsigned i = 0; r && i < n; i++)
        check_smres(&r[i]);
    rc = ORIG(cuDevResourceGenerateDesc,
              CUresult(*)(CUdevResourceDesc *, CUdevResource *, unsigned))(d, r, n);
    return noted(rc, K_H_DEVRESDESC, rc == CUDA_SUCCESS ? H(*d) : 0);
}

static CUresult w_cuGreenCtxCreate(CUgreenCtx *g, CUdevResourceDesc d, CUdevice dev, unsigned f)
{
    CUresult rc;

    ENTER(cuGreenCtxCreate);
    check(K_H_DEVRESDESC, H(d), 1);
    rc = ORIG(cuGreenCtxCreate,
              CUresult(*)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned))(g, d, dev, f);
    return noted(rc, K_H_GREENCTX, rc == CUDA_SUCCESS ? H(*g) : 0);
}

static CUresult w_cuGreenCtxDestroy(CUgreenCtx g)
{
    ENTER(cuGreenCtxDestroy);
    check(K_H_GREENCTX, H(g), 1);
    forget(K_H_GREENCTX, H(g));
    return ORIG(cuGreenCtxDestroy, CUresult(*)(CUgreenCtx))(g);
}

static CUresult w_cuGreenCtxStreamCreate(CUstream *s, CUgreenCtx g, unsigned f, int prio)
{
    CUresult rc;

    ENTER(cuGreenCtxStreamCreate);
    check(K_H_GREENCTX, H(g), 1);
    rc = ORIG(cuGreenCtxStreamCreate, CUresult(*)(CUstream *, CUgreenCtx, unsigned, int))(s, g, f,
                                                                                          prio);
    return noted(rc, K_STREAM, rc == CUDA_SUCCESS ? H(*s) : 0);
}

static const struct {
    int index;
    void *wrapper;
} wrappers[] = {
#define W(sym)                                                                                     \
    {                                                                                              \
        OM_IDX_##sym, (void *)w_##sym                                                              \
    }
    W(cuStreamCreateWithPriority),
    W(cuStreamCreate),
    W(cuStreamDestroy_v2),
    W(cuStreamSynchronize),
    W(cuStreamGetFlags),
    W(cuStreamGetPriority),
    W(cuEventCreate),
    W(cuEventDestroy_v2),
    W(cuEventSynchronize),
    W(cuMemAlloc_v2),
    W(cuMemFree_v2),
    W(cuMemHostRegister_v2),
    W(cuMemHostAlloc),
    W(cuMemFreeHost),
    W(cuMemHostGetDevicePointer_v2),
    W(cuMemGetHandleForAddressRange),
    W(cuMemcpyHtoDAsync_v2),
    W(cuMemcpyDtoHAsync_v2),
    W(cuMemcpyDtoDAsync_v2),
    W(cuMemsetD8Async),
    W(cuMemsetD16Async),
    W(cuMemsetD32Async),
    W(cuMemsetD2D8Async),
    W(cuMemsetD2D16Async),
    W(cuMemsetD2D32Async),
    W(cuMemcpy2DAsync_v2),
    W(cuLaunchKernel),
    W(cuLaunchKernelEx),
    W(cuLibraryLoadData),
    W(cuModuleLoadDataEx),
    W(cuLibraryUnload),
    W(cuLibraryGetKernel),
    W(cuKernelGetParamInfo),
    W(cuKernelGetAttribute),
    W(cuKernelSetAttribute),
    W(cuCtxSynchronize),
    W(cuMemHostUnregister),
    W(cuImportExternalMemory),
    W(cuMemExportToShareableHandle),
    W(cuMemImportFromShareableHandle),
    W(cuMemPoolExportToShareableHandle),
    W(cuMemPoolImportFromShareableHandle),
    W(cuMemPoolExportPointer),
    W(cuMemPoolImportPointer),
    W(cuMemGetAddressRange_v2),
    W(cuImportExternalSemaphore),
    W(cuExternalMemoryGetMappedBuffer),
    W(cuArrayCreate_v2),
    W(cuArray3DCreate_v2),
    W(cuMipmappedArrayCreate),
    W(cuMipmappedArrayGetLevel),
    W(cuArrayGetPlane),
    W(cuArrayDestroy),
    W(cuMipmappedArrayDestroy),
    W(cuArrayGetDescriptor_v2),
    W(cuArray3DGetDescriptor_v2),
    W(cuArrayGetSparseProperties),
    W(cuArrayGetMemoryRequirements),
    W(cuMipmappedArrayGetMemoryRequirements),
    W(cuMipmappedArrayGetSparseProperties),
    W(cuMemcpy3DAsync_v2),
    W(cuTexObjectCreate),
    W(cuSurfObjectCreate),
    W(cuTexObjectGetResourceDesc),
    W(cuTexObjectGetTextureDesc),
    W(cuTexObjectGetResourceViewDesc),
    W(cuSurfObjectGetResourceDesc),
    W(cuTexObjectDestroy),
    W(cuSurfObjectDestroy),
    W(cuIpcGetEventHandle),
    W(cuMemPoolCreate),
    W(cuMemPoolDestroy),
    W(cuMemPoolSetAttribute),
    W(cuMemPoolGetAttribute),
    W(cuMemPoolSetAccess),
    W(cuMemPoolGetAccess),
    W(cuMemPoolTrimTo),
    W(cuMemAllocFromPoolAsync),
    W(cuMemFreeAsync),
    W(cuMemGetAllocationGranularity),
    W(cuMemCreate),
    W(cuMemRelease),
    W(cuMemAddressReserve),
    W(cuMemAddressFree),
    W(cuMemMap),
    W(cuMemUnmap),
    W(cuMemSetAccess),
    W(cuMemGetAccess),
    W(cuMemRetainAllocationHandle),
    W(cuMemGetAllocationPropertiesFromHandle),
    W(cuMemMapArrayAsync),
    W(cuLibraryGetModule),
    W(cuModuleGetTexRef),
    W(cuModuleGetSurfRef),
    W(cuTexRefDestroy),
    W(cuSurfRefGetArray),
    W(cuGraphCreate),
    W(cuGraphClone),
    W(cuGraphDestroy),
    W(cuGraphInstantiateWithFlags),
    W(cuGraphExecDestroy),
    W(cuGraphDestroyNode),
    W(cuGraphChildGraphNodeGetGraph),
    W(cuGraphKernelNodeGetParams_v2),
    W(cuGraphAddBatchMemOpNode),
    W(cuGraphAddMemAllocNode),
    W(cuGraphMemAllocNodeGetParams),
    W(cuGraphAddMemFreeNode),
    W(cuGraphConditionalHandleCreate),
    W(cuGraphAddNode),
    W(cuGraphBatchMemOpNodeSetParams),
    W(cuGraphExecBatchMemOpNodeSetParams),
    W(cuGraphBatchMemOpNodeGetParams),
    W(cuGraphAddExternalSemaphoresSignalNode),
    W(cuGraphExternalSemaphoresSignalNodeSetParams),
    W(cuGraphExecExternalSemaphoresSignalNodeSetParams),
    W(cuGraphExternalSemaphoresSignalNodeGetParams),
    W(cuGraphAddExternalSemaphoresWaitNode),
    W(cuGraphExternalSemaphoresWaitNodeSetParams),
    W(cuGraphExecExternalSemaphoresWaitNodeSetParams),
    W(cuGraphExternalSemaphoresWaitNodeGetParams),
    W(cuGraphAddEventRecordNode),
    W(cuGraphAddEventWaitNode),
    W(cuGraphAddChildGraphNode),
    W(cuGraphAddEmptyNode),
    W(cuGraphAddKernelNode_v2),
    W(cuGraphAddMemsetNode),
    W(cuGraphAddHostNode),
    W(cuGraphHostNodeGetParams),
    W(cuGraphHostNodeSetParams),
    W(cuGraphExecHostNodeSetParams),
    W(cuLaunchHostFunc),
    W(cuGraphAddDependencies),
    W(cuGraphRemoveDependencies),
    W(cuGraphGetNodes),
    W(cuGraphGetRootNodes),
    W(cuGraphNodeGetDependencies),
    W(cuGraphNodeGetDependentNodes),
    W(cuGraphGetEdges),
    W(cuGraphNodeFindInClone),
    W(cuGraphNodeGetType),
    W(cuGraphKernelNodeCopyAttributes),
    W(cuGraphKernelNodeSetParams_v2),
    W(cuGraphExecKernelNodeSetParams_v2),
    W(cuGraphMemsetNodeGetParams),
    W(cuGraphMemsetNodeSetParams),
    W(cuGraphExecMemsetNodeSetParams),
    W(cuGraphEventRecordNodeGetEvent),
    W(cuGraphEventWaitNodeGetEvent),
    W(cuGraphEventRecordNodeSetEvent),
    W(cuGraphEventWaitNodeSetEvent),
    W(cuGraphExecEventRecordNodeSetEvent),
    W(cuGraphExecEventWaitNodeSetEvent),
    W(cuGraphExecChildGraphNodeSetParams),
    W(cuGraphNodeSetEnabled),
    W(cuGraphNodeGetEnabled),
    W(cuGraphExecGetFlags),
    W(cuGraphExecUpdate_v2),
    W(cuGraphLaunch),
    W(cuGraphUpload),
    W(cuStreamBeginCapture_v2),
    W(cuStreamEndCapture),
    W(cuStreamIsCapturing),
    W(cuStreamGetCaptureInfo),
    W(cuStreamGetCaptureInfo_v3),
    W(cuStreamUpdateCaptureDependencies),
    W(cuGraphInstantiateWithParams),
    W(cuGraphKernelNodeGetAttribute),
    W(cuGraphKernelNodeSetAttribute),
    W(cuGraphAddMemcpyNode),
    W(cuGraphMemcpyNodeGetParams),
    W(cuGraphMemcpyNodeSetParams),
    W(cuGraphExecMemcpyNodeSetParams),
    W(cuGraphDebugDotPrint),
    W(cuStreamBeginCaptureToGraph),
    W(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags),
    W(cuOccupancyMaxActiveBlocksPerMultiprocessor),
    W(cuOccupancyAvailableDynamicSMemPerBlock),
    W(cuOccupancyMaxPotentialClusterSize),
    W(cuOccupancyMaxActiveClusters),
    W(cuStreamWriteValue32_v2),
    W(cuStreamWriteValue64_v2),
    W(cuStreamWaitValue32_v2),
    W(cuStreamWaitValue64_v2),
    W(cuStreamGetId),
    W(cuStreamBatchMemOp_v2),
    W(cuStreamSetAttribute),
    W(cuStreamGetAttribute),
    W(cuStreamCopyAttributes),
    W(cuLinkCreate_v2),
    W(cuLinkAddData_v2),
    W(cuLinkComplete),
    W(cuLinkDestroy),
    W(cuLibraryGetKernelCount),
    W(cuLibraryEnumerateKernels),
    W(cuKernelGetName),
    W(cuKernelGetLibrary),
    W(cuTexRefSetAddress2D_v3),
    W(cuDeviceGetDevResource),
    W(cuGreenCtxGetDevResource),
    W(cuDevSmResourceSplitByCount),
    W(cuDevResourceGenerateDesc),
    W(cuGreenCtxCreate),
    W(cuGreenCtxDestroy),
    W(cuGreenCtxStreamCreate),
#undef W
};

/* The generated rows' wrappers (api/remote.py writes them from the tables): g_<symbol>, in front
 * of the hand-written wrapper where there is one (cuEventCreate's token reuse). */
#include "gen/checks.c"

/* Entry points of the double that take no handle and no address (or only the server's own). */
static const int handle_free[] = {
    OM_IDX_cuInit, OM_IDX_cuDriverGetVersion, OM_IDX_cuDeviceGetCount, OM_IDX_cuDeviceGet,
    OM_IDX_cuDeviceGetName, OM_IDX_cuDeviceGetUuid, OM_IDX_cuDeviceGetUuid_v2,
    OM_IDX_cuDeviceGetPCIBusId, OM_IDX_cuDevicePrimaryCtxRetain, OM_IDX_cuDevicePrimaryCtxRelease,
    OM_IDX_cuDevicePrimaryCtxSetFlags_v2, OM_IDX_cuGetProcAddress_v2, OM_IDX_cuCtxSetCurrent,
    OM_IDX_cuDeviceTotalMem_v2, OM_IDX_cuDeviceGetAttribute, OM_IDX_cuMemGetInfo_v2,
    OM_IDX_cuCtxGetStreamPriorityRange, /* priority.c: the range, once */
    OM_IDX_cuCtxEnablePeerAccess,       /* driver.c: between the server's own contexts, at start */
    /* api/remote/devices.tsv's device queries */
    OM_IDX_cuDeviceCanAccessPeer, OM_IDX_cuDeviceComputeCapability, OM_IDX_cuDeviceGetByPCIBusId,
    OM_IDX_cuDeviceGetExecAffinitySupport, OM_IDX_cuDeviceGetLuid, OM_IDX_cuDeviceGetP2PAttribute,
    OM_IDX_cuDeviceGetProperties, OM_IDX_cuDeviceGetTexture1DLinearMaxWidth,
    OM_IDX_cuDeviceTotalMem, OM_IDX_cuCtxGetCurrent, /* the server's context */
    OM_IDX_cuDeviceGraphMemTrim, OM_IDX_cuDeviceGetGraphMemAttribute,
    OM_IDX_cuDeviceSetGraphMemAttribute,
    /* api/remote/legacy.tsv's passthrough entries: the client's driver, never the server's */
    OM_IDX_cuTensorMapEncodeTiled, OM_IDX_cuTensorMapReplaceAddress, OM_IDX_cuLogsCurrent,
    OM_IDX_cuGetExportTable, /* the client's driver (tables for the tracer's test), never the
                                server's */
    OM_IDX_cuModuleUnload,   /* api/modules.c: the module it loaded itself a moment before */
};

/* Puts the check layer in front of every entry point the double has. An entry it has that is
 * neither checked nor known to take no handle stops the target: add it above. */
static void install_checks(void)
{
    bool known[OM_ENTRY_COUNT] = {false};

    for (size_t i = 0; i < sizeof(wrappers) / sizeof(wrappers[0]); i++) {
        int x = wrappers[i].index;
        known[x] = true;
        orig[x] = om_server_real[x];
        if (om_server_has(x))
            om_server_real[x] = wrappers[i].wrapper;
    }
    for (size_t i = 0; i < sizeof(gen_wrappers) / sizeof(gen_wrappers[0]); i++) {
        int x = gen_wrappers[i].index;
        if (x < 0)
            continue;
        known[x] = true;
        gen_next[x] = om_server_real[x];
        if (om_server_has(x))
            om_server_real[x] = gen_wrappers[i].wrapper;
    }
    for (size_t i = 0; i < sizeof(handle_free) / sizeof(handle_free[0]); i++)
        known[handle_free[i]] = true;
    for (int x = 0; x < OM_ENTRY_COUNT; x++) {
        if (om_server_has(x) && !known[x]) {
            fprintf(stderr,
                    "fuzz_exec: the driver double has %s, which the check layer does not "
                    "check: add it to tests/fuzz/fuzz_exec.c\n",
                    om_server_entry_name(x));
            abort();
        }
    }
}

/* ------------------------------------------------------------------ sessions */

/* Pinned regions the fuzzed session was answered: host address and device pointer, so that
 * both are forgotten when it frees the region. */
struct pinned_seen {
    uint64_t host, device;
};
static struct pinned_seen pinned_seen[1024];
static size_t npinned_seen;

static void note_pinned(uint64_t host, uint64_t len, uint64_t device)
{
    note(K_HOST, host, len, false);
    note(K_DEVICE, device, len, false);
    if (npinned_seen < sizeof(pinned_seen) / sizeof(pinned_seen[0]))
        pinned_seen[npinned_seen++] = (struct pinned_seen){host, device};
}

static void forget_pinned(uint64_t host)
{
    for (size_t i = 0; i < npinned_seen; i++) {
        if (pinned_seen[i].host != host)
            continue;
        forget(K_HOST, host);
        forget(K_DEVICE, pinned_seen[i].device);
        pinned_seen[i] = pinned_seen[--npinned_seen];
        return;
    }
}

static uint64_t vals[256]; /* what a 0xF0F0F0 word may stand for */
static size_t nvictim_vals, nvals;
static int fuzz_sock = -1; /* a socket whose peer is gone: a registration finds no descriptor */
static pid_t gone_pid;     /* a process that exited: the session's pinned pages are reused */
static bool trace;         /* OM_FUZZ_TRACE: a line per call */

static struct session *session_new(void)
{
    struct session *s = calloc(1, sizeof(*s));

    if (!s)
        abort();
    s->pid = gone_pid;
    s->uid = getuid();
    s->sock = fuzz_sock;
    s->ring_fd = -1;
    s->send_fd_after = -1;
    s->copy_slots = copy_slots; /* one session at a time: the victim's are settled by then */
    om_visible_all((uint32_t)om_server_ndevices(), &s->devmap); /* every device, in order */
    om_sched_stream_created(); /* its default stream, as the worker counts it at its start */
    return s;
}

static void add_val(uint64_t v)
{
    if (nvals < sizeof(vals) / sizeof(vals[0]))
        vals[nvals++] = v;
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* One call of the session; the answer's u64s become values the input can name. */
static CUresult call(struct session *s, int index, const void *in, size_t len, bool posted,
                     size_t *ret_len)
{
    size_t n = 0;
    CUresult rc = om_exec(s, index, in, len, reply, OM_REPLY_MAX, &n, posted);

    if (s->send_fd_close && s->send_fd_after >= 0)
        close(s->send_fd_after); /* made for the client: serve() closes it once sent */
    s->send_fd_after = -1; /* the descriptor stays with its region, as after serve() sends it */
    s->send_fd_close = false;
    if (trace)
        fprintf(stderr, "fuzz_exec: %s %s%s: CUresult %d, %zu byte(s)\n",
                phase == O_VICTIM ? "victim" : "fuzzed",
                index >= 0 && index < OM_HANDLER_COUNT ? om_server_entry_name(index) : "?",
                posted ? " (posted)" : "", (int)rc, n);
    if (rc != CUDA_SUCCESS || posted)
        n = 0;
    if (phase == O_FUZZED && index == OM_IDX_cuMemFreeHost && rc == CUDA_SUCCESS && len >= 8)
        forget_pinned(get_u64(in)); /* back to the server's pool: no longer the session's */
    if (ret_len)
        *ret_len = n;
    if (phase == O_FUZZED && n >= 8) {
        /* What the client was given is the client's to use. */
        /* With JIT options (a request of 5 words or more) the answer is the load's result, then
         * the library (api/modules.c); without, the library alone. */
        if (index == OM_IDX_cuLibraryLoadData)
            note(K_LIBRARY, len >= 40 && n >= 16 ? get_u64(reply + 8) : get_u64(reply), 1, false);
        /* Pinned memory: its address, length and device pointer (api/memory.c). The device
         * pointer is device memory of the session's to the driver, as with unified addressing
         * (copies, sets and kernels may use it); a region taken from the server's pool is never
         * seen by the driver's wrappers, so both are noted from the answer. */
        if (index == OM_IDX_cuMemHostAlloc && n >= 24)
            note_pinned(get_u64(reply), get_u64(reply + 8), get_u64(reply + 16));
        if (index == OM_IDX_cuLibraryGetGlobal && n >= 16)
            note(K_DEVICE, get_u64(reply), get_u64(reply + 8), false);
    }
    /* The first 8 words of an answer may be named; a device resource's (144 bytes, api/green.c)
     * all, as the input must hand it back whole (tests/fuzz/make_corpus.py's green seed). */
    size_t named = index == OM_IDX_cuDeviceGetDevResource ||
                           index == OM_IDX_cuGreenCtxGetDevResource ||
                           index == OM_IDX_cuDevSmResourceSplitByCount
                       ? n
                       : 64;
    for (size_t i = 0; i + 8 <= n && i < named; i += 8)
        add_val(get_u64(reply + i));
    return rc;
}

/* A victim call that must succeed; its answer's first u64. */
static uint64_t victim_call(struct session *s, int index, const uint64_t *args, size_t nargs,
                            const void *tail, size_t tail_len)
{
    uint8_t in[256];
    size_t n = 0;

    memcpy(in, args, nargs * 8);
    if (tail_len)
        memcpy(in + nargs * 8, tail, tail_len);
    if (call(s, index, in, nargs * 8 + tail_len, false, &n) != CUDA_SUCCESS) {
        fprintf(stderr, "fuzz_exec: the victim's %s failed\n", om_server_entry_name(index));
        abort();
    }
    return n >= 8 ? get_u64(reply) : 0;
}

#define VICTIM(idx, tail, tail_len, ...)                                                           \
    victim_call(victim, OM_IDX_##idx, (const uint64_t[]){__VA_ARGS__},                             \
                sizeof((const uint64_t[]){__VA_ARGS__}) / 8, tail, tail_len)

static const char victim_image[] = "fakecubin\nvictim_fill:8,4,4\nvictim_other:8\n";

/* The victim owns one of everything, made the ordinary way, and lives as long as the target. */
static struct session *victim; /* reachable: it is never released */

static void make_victim(void)
{
    victim = session_new();
    uint64_t a1, a2, s1, s2, e1, e2, lib, k, h;
    uint8_t args[16] = {0};

    phase = O_VICTIM;
    a1 = VICTIM(cuMemAlloc_v2, NULL, 0, 4096);
    a2 = VICTIM(cuMemAlloc_v2, NULL, 0, 65536);
    s1 = VICTIM(cuStreamCreate, NULL, 0, 0, 0); /* blocking */
    s2 = VICTIM(cuStreamCreate, NULL, 0, 1, 0);
    e1 = VICTIM(cuEventCreate, NULL, 0, 0);
    e2 = VICTIM(cuEventCreate, NULL, 0, 2);
    om_fuzz_stage(victim, OM_OP_STAGE_RESET, NULL, 0);
    om_fuzz_stage(victim, OM_OP_STAGE_APPEND, (const uint8_t *)victim_image,
                  sizeof(victim_image)); /* with its NUL, as the shim sends a text image */
    lib = VICTIM(cuLibraryLoadData, NULL, 0, sizeof(victim_image), 0, 0, 1); /* staged */
    k = VICTIM(cuLibraryGetKernel, "victim_fill", 11, lib);
    h = VICTIM(cuMemHostAlloc, NULL, 0, 8192);
    memcpy(args, &a1, 8);
    /* grid 1x1x1, block 32x1x1 (api/launch.c reads two dimensions from each u64) */
    VICTIM(cuLaunchKernel, args, 16, k, 1ull | 1ull << 32, 1ull | 32ull << 32, 1ull | 1ull << 32, 0,
           s2);
    VICTIM(op_memset, NULL, 0, a2, 7, 1, 100, 0, 1); /* makes its default stream */
    VICTIM(cuEventRecord, NULL, 0, e1, s1);
    uint64_t v[] = {a1, a2, a1 + 64, s1, s2, e1, e2, lib, k, h, H(victim->default_stream)};
    nvals = 0; /* the victim's answers: only these of them */
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        add_val(v[i]);
    nvictim_vals = nvals;
    phase = O_SERVER;
}

static void init(void)
{
    char err[512];
    int sv[2];
    pid_t child;

    /* Quiet: a malformed request is logged, and the fuzzer makes millions. */
    om_log_level_current = getenv("OM_FUZZ_LOG") ? OM_LOG_DEBUG : -1;
    trace = getenv("OM_FUZZ_TRACE") != NULL;
    setenv("OPENMPS_DRIVER", OM_FAKECUDA_PATH, 0);
    setenv("OPENMPS_SCHED", "off", 0);
    setenv("OPENMPS_SYNC_WORD", "on", 0); /* its handlers too (server/syncword.c) */
    setenv("FAKECUDA_DEVICES", "1", 1);
    unsetenv("FAKECUDA_KERNEL_MS");
    unsetenv("FAKECUDA_LAUNCH_LOG");
    unsetenv("FAKECUDA_TIME_LOG");
    unsetenv("FAKECUDA_PAGEABLE_LOG");
    unsetenv("FAKECUDA_FAIL_HOST_ALLOC");
    if (om_fuzz_server_init(err, sizeof(err)) < 0) {
        fprintf(stderr, "fuzz_exec: %s\n", err);
        abort();
    }
    install_checks();
    om_output_init(); /* the server's own streams, as main() makes them: noted as the server's */
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        abort();
    close(sv[1]);
    fuzz_sock = sv[0];
    child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    gone_pid = child;
    struct om_replybuf rb = om_replybuf_get(true); /* pinned through the driver, as a worker's */
    if (!(reply = rb.p))
        abort();
    if (rb.pinned) /* its small copies' slots, as a worker's (api/copies.c) */
        copy_slots = reply + OM_REPLY_MAX;
    make_victim();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    static uint8_t in[65536];
    struct session *s;

    if (!ready) {
        init();
        ready = true;
    }
    fuzzed = s = session_new();
    nvals = nvictim_vals;
    phase = O_FUZZED;
    for (int r = 0; r < MAX_RECORDS && size >= 4; r++) {
        uint16_t op = (uint16_t)(data[0] | data[1] << 8), len = (uint16_t)(data[2] | data[3] << 8);
        data += 4;
        size -= 4;
        if (len > size)
            len = (uint16_t)size;
        memcpy(in, data, len);
        data += len;
        size -= len;
        if (op == STAGE_APPEND || op == STAGE_RESET) {
            om_fuzz_stage(s, op == STAGE_RESET ? OM_OP_STAGE_RESET : OM_OP_STAGE_APPEND, in, len);
            continue;
        }
        if (op == SET_DEVICE) {
            om_session_set_device(s, len >= 8 ? get_u64(in) : UINT64_MAX);
            continue;
        }
        for (size_t i = 0; i + 8 <= len; i += 8) {
            uint64_t w = get_u64(in + i);
            if (w >> 40 == 0xF0F0F0) {
                w = vals[(w & 0xff) % nvals] + (uint64_t)(int64_t)(int32_t)(uint32_t)(w >> 8);
                memcpy(in + i, &w, 8);
            }
        }
        call(s, op & ~POSTED, in, len, op & POSTED, NULL);
    }
    om_fuzz_session_release(s);
    free(s);
    forget_fuzzed();
    npinned_seen = 0;
    phase = O_SERVER;
    return 0;
}
