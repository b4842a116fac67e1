/* SPDX-License-Identifier: MIT */
/* The modules family's driver-API program for the CPU tier (through the shim, a server and the
 * driver test double); prints what it obtained, one "key values" line each, for
 * tests/ipc/test_modules.py to compare with what the double computes.
 *   modules_driver occupancy      every occupancy entry point, a block-size search whose
 *                                 callback is this program's
 *   modules_driver values        stream memory values on the client's memory, refused outside it
 *   modules_driver files PATH    modules loaded from a file this program reads, JIT logs, the
 *                                kernels' parameter queries
 *   modules_driver link PATH     the linker: logs filled in this process, a file it reads, the
 *                                cubin copied back (in pieces when large) and loaded
 *   modules_driver queries       a module's functions: count, enumeration, names, module, library;
 *                                an image loaded twice, unloaded twice
 *   modules_driver tables        the private tables the shim serves in remote mode (21318c60,
 *                                6e163fbe: the slots cuBLAS and cuFFT call), others refused
 *   modules_driver streamctx     streams' context and device (two devices), cuStreamDestroy
 *   modules_driver attrs         stream attributes, managed memory attached to a stream
 *   modules_driver holdk          loads a kernel, prints its handle, waits for stdin to close
 *   modules_driver stealk HANDLE  uses another client's kernel handle: every call refused
 * Exit status 0 when every check passed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

typedef size_t (*CUoccupancyB2DSize)(int);

CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuModuleUnload(CUmodule);
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *, CUfunction, int, size_t);
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *, CUfunction, int, size_t,
                                                              unsigned);
CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *, CUfunction, int, int);
CUresult cuOccupancyMaxPotentialBlockSize(int *, int *, CUfunction, CUoccupancyB2DSize, size_t,
                                          int);
CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *, int *, CUfunction, CUoccupancyB2DSize,
                                                   size_t, int, unsigned);
CUresult cuOccupancyMaxPotentialClusterSize(int *, CUfunction, const CUlaunchConfig *);
CUresult cuOccupancyMaxActiveClusters(int *, CUfunction, const CUlaunchConfig *);
CUresult cuModuleLoad(CUmodule *, const char *);
CUresult cuModuleLoadDataEx(CUmodule *, const void *, unsigned, int *, void **);
CUresult cuLibraryLoadFromFile(void **, const char *, int *, void **, unsigned, int *, void **,
                               unsigned);
CUresult cuLibraryGetKernel(void **, void *, const char *);
CUresult cuFuncGetParamInfo(CUfunction, size_t, size_t *, size_t *);
CUresult cuKernelGetParamInfo(void *, size_t, size_t *, size_t *);
CUresult cuFuncIsLoaded(int *, CUfunction);
CUresult cuModuleGetFunctionCount(unsigned *, CUmodule);
CUresult cuModuleEnumerateFunctions(CUfunction *, unsigned, CUmodule);
CUresult cuLibraryGetModule(CUmodule *, void *);
CUresult cuLibraryGetKernelCount(unsigned *, void *);
CUresult cuFuncGetName(const char **, CUfunction);
CUresult cuKernelGetName(const char **, void *);
CUresult cuFuncGetModule(CUmodule *, CUfunction);
CUresult cuKernelGetLibrary(void **, void *);
CUresult cuStreamGetCtx(CUstream, CUcontext *);
CUresult cuStreamGetCtx_v2(CUstream, CUcontext *, void **);
CUresult cuStreamGetDevice(CUstream, int *);
CUresult cuStreamDestroy(CUstream);
CUresult cuStreamCreateWithPriority(CUstream *, unsigned, int);
CUresult cuStreamGetPriority(CUstream, int *);
CUresult cuStreamSetAttribute(CUstream, int, const void *);
CUresult cuStreamGetAttribute(CUstream, int, void *);
CUresult cuStreamCopyAttributes(CUstream, CUstream);
CUresult cuStreamAttachMemAsync(CUstream, CUdeviceptr, size_t, unsigned);
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned);
CUresult cuLinkCreate_v2(unsigned, int *, void **, void **);
CUresult cuLinkAddData_v2(void *, int, void *, size_t, const char *, unsigned, int *, void **);
CUresult cuLinkAddFile_v2(void *, int, const char *, unsigned, int *, void **);
CUresult cuLinkComplete(void *, void **, size_t *);
CUresult cuLinkDestroy(void *);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamSynchronize(CUstream);
CUresult cuStreamGetId(CUstream, unsigned long long *);
CUresult cuStreamWriteValue32_v2(CUstream, CUdeviceptr, uint32_t, unsigned);
CUresult cuStreamWriteValue64_v2(CUstream, CUdeviceptr, uint64_t, unsigned);
CUresult cuStreamWaitValue32_v2(CUstream, CUdeviceptr, uint32_t, unsigned);
CUresult cuStreamWaitValue64_v2(CUstream, CUdeviceptr, uint64_t, unsigned);
CUresult cuStreamWriteValue32(CUstream, CUdeviceptr, uint32_t, unsigned);
CUresult cuStreamBatchMemOp(CUstream, unsigned, void *, unsigned);

static CUfunction load_kernel(const char *name)
{
    char image[128];
    CUmodule mod;
    CUfunction f;

    snprintf(image, sizeof(image), "fakecubin\n%.64s:8\n", name);
    OK(cuModuleLoadData(&mod, image));
    OK(cuModuleGetFunction(&f, mod, name));
    return f;
}

/* The program's callback: 64 bytes of dynamic shared memory per thread; records its calls. */
static int b2d_calls, b2d_first, b2d_last;
static size_t b2d(int b)
{
    if (!b2d_calls++)
        b2d_first = b;
    b2d_last = b;
    return (size_t)b * 64;
}

static void occupancy(void)
{
    CUfunction f = load_kernel("occ");
    CUlaunchAttribute attr[2];
    CUlaunchConfig cfg;
    size_t avail = 0;
    int n = 0, grid = 0, block = 0;

    OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, 256, 0));
    printf("active 256 0 %d\n", n);
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&n, f, 96, 20000, 1));
    printf("active 96 20000 %d\n", n);
    n = -1; /* asked again: the client's kept answer */
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&n, f, 96, 20000, 1));
    printf("active again 96 20000 %d\n", n);
    printf("flags2 %d\n", cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&n, f, 96, 0, 2));
    OK(cuOccupancyAvailableDynamicSMemPerBlock(&avail, f, 4, 256));
    printf("available 4 256 %zu\n", avail);
    OK(cuOccupancyMaxPotentialBlockSize(&grid, &block, f, b2d, 0, 0));
    printf("potential callback %d %d calls %d first %d last %d\n", grid, block, b2d_calls,
           b2d_first, b2d_last);
    b2d_calls = 0;
    OK(cuOccupancyMaxPotentialBlockSizeWithFlags(&grid, &block, f, NULL, 30000, 300, 1));
    printf("potential fixed %d %d calls %d\n", grid, block, b2d_calls);
    printf("potential flags2 %d\n",
           cuOccupancyMaxPotentialBlockSizeWithFlags(&grid, &block, f, NULL, 0, 0, 2));

    memset(&cfg, 0, sizeof(cfg));
    memset(attr, 0, sizeof(attr));
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 64, cfg.blockDimY = 2, cfg.blockDimZ = 1;
    OK(cuOccupancyMaxPotentialClusterSize(&n, f, &cfg));
    printf("clustersize 128 %d\n", n);
    attr[0].id = 4; /* CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION */
    memcpy(attr[0].value.bytes, (unsigned[3]){2, 1, 1}, 3 * sizeof(unsigned)); /* x, y, z */
    cfg.blockDimX = 512, cfg.blockDimY = 1, cfg.sharedMemBytes = 1000;
    cfg.attrs = attr, cfg.numAttrs = 1;
    OK(cuOccupancyMaxActiveClusters(&n, f, &cfg));
    printf("clusters 512 1000 2 %d\n", n);
    attr[1].id = 7; /* CU_LAUNCH_ATTRIBUTE_EVENT: names a handle, refused */
    cfg.numAttrs = 2;
    printf("clusters event %d\n", cuOccupancyMaxActiveClusters(&n, f, &cfg));
    cfg.numAttrs = 1;
    cfg.hStream = (CUstream)(uintptr_t)0x7777000;
    printf("clusters stream %d\n", cuOccupancyMaxActiveClusters(&n, f, &cfg));
    printf("occupancy ok\n");
}

/* Writes and waits on the client's memory; addresses outside it, flags outside the mask and
 * streams it does not own are refused. */
static void values(void)
{
    CUstream s;
    CUdeviceptr p;
    uint32_t v32[2] = {0};
    uint64_t v64 = 0;
    unsigned long long id = 0, id2 = 0;
    CUstream foreign = (CUstream)(uintptr_t)0x7777000;

    OK(cuMemAlloc_v2(&p, 4096));
    OK(cuStreamCreate(&s, 0));
    OK(cuStreamWriteValue32_v2(s, p, 0xa5a5a5a5u, 0));
    OK(cuStreamWriteValue32(NULL, p + 4, 77, 1)); /* the v1 name, the default stream */
    OK(cuStreamWriteValue64_v2(s, p + 8, 0x1122334455667788ull, 0));
    OK(cuStreamWaitValue32_v2(s, p, 0xa5a5a5a5u, 1));     /* EQ */
    OK(cuStreamWaitValue64_v2(s, p + 8, 5, 0x40000000u)); /* GEQ | FLUSH */
    OK(cuStreamSynchronize(s));
    OK(cuMemcpyDtoH_v2(v32, p, 8));
    OK(cuMemcpyDtoH_v2(&v64, p + 8, 8));
    printf("read %x %u %llx\n", v32[0], v32[1], (unsigned long long)v64);
    printf("outside32 %d\n", cuStreamWriteValue32_v2(s, p + 4094, 1, 0));
    printf("outside64 %d\n", cuStreamWriteValue64_v2(s, p + 4096, 1, 0));
    printf("waitoutside %d\n", cuStreamWaitValue32_v2(s, p - 4, 1, 0));
    printf("hostaddr %d\n", cuStreamWriteValue32_v2(s, (CUdeviceptr)(uintptr_t)&v64, 1, 0));
    printf("writeflags %d\n", cuStreamWriteValue32_v2(s, p, 1, 2));
    printf("waitflags %d\n", cuStreamWaitValue32_v2(s, p, 1, 4));
    printf("foreignstream %d\n", cuStreamWriteValue32_v2(foreign, p, 1, 0));
    OK(cuStreamGetId(s, &id));
    OK(cuStreamGetId(NULL, &id2));
    printf("ids %d\n", id != 0 && id2 != 0 && id != id2);
    printf("foreignid %d\n", cuStreamGetId(foreign, &id));
    {
        /* a batch (the v1 name): two writes, a wait, a barrier; then one op outside */
        uint8_t ops[4][48];
        int kind;
        uint32_t a = 11;
        uint64_t b = 22, alias = 0xdead;
        memset(ops, 0, sizeof(ops));
        kind = 2, memcpy(ops[0], &kind, 4);
        memcpy(ops[0] + 8, &p, 8), memcpy(ops[0] + 16, &a, 4), memcpy(ops[0] + 32, &alias, 8);
        kind = 5, memcpy(ops[1], &kind, 4);
        v64 = p + 8, memcpy(ops[1] + 8, &v64, 8), memcpy(ops[1] + 16, &b, 8);
        kind = 1, memcpy(ops[2], &kind, 4);
        memcpy(ops[2] + 8, &p, 8), memcpy(ops[2] + 16, &a, 4);
        kind = 6, memcpy(ops[3], &kind, 4);
        OK(cuStreamBatchMemOp(s, 4, ops, 0));
        OK(cuStreamSynchronize(s));
        OK(cuMemcpyDtoH_v2(v32, p, 4));
        OK(cuMemcpyDtoH_v2(&v64, p + 8, 8));
        printf("batch %u %llu\n", v32[0], (unsigned long long)v64);
        v64 = p + 4092;
        memcpy(ops[1] + 8, &v64, 8);
        printf("batchoutside %d\n", cuStreamBatchMemOp(s, 4, ops, 0));
        kind = 9, memcpy(ops[1], &kind, 4);
        printf("batchkind %d\n", cuStreamBatchMemOp(s, 2, ops, 0));
        printf("batchforeign %d\n", cuStreamBatchMemOp(foreign, 1, ops, 0));
        printf("batchflags %d\n", cuStreamBatchMemOp(s, 1, ops, 1));
    }
    printf("values ok\n");
}

static void files(const char *path)
{
    CUmodule mod;
    CUfunction f;
    void *lib, *k;
    char info[160], error[64];
    int opts[5] = {3, 4, 5, 6, 2}; /* INFO_LOG_BUFFER, its size, ERROR_LOG_BUFFER, its size,
                                      WALL_TIME */
    void *vals[5];
    size_t off, size;
    int state = 0;
    float ms = -1.0f;

    OK(cuModuleLoad(&mod, path));
    OK(cuModuleGetFunction(&f, mod, "fromfile"));
    for (size_t i = 0; i < 3; i++) {
        OK(cuFuncGetParamInfo(f, i, &off, &size));
        printf("param %zu %zu %zu\n", i, off, size);
    }
    printf("param3 %d\n", cuFuncGetParamInfo(f, 3, &off, &size));
    printf("paramforeign %d\n",
           cuFuncGetParamInfo((CUfunction)(uintptr_t)0x7777000, 0, &off, &size));
    OK(cuFuncIsLoaded(&state, f));
    printf("loaded %d\n", state);
    printf("missing %d\n", cuModuleLoad(&mod, "/nonexistent/openmps/module.cubin"));
    memset(info, 'X', sizeof(info));
    memset(error, 'Y', sizeof(error));
    vals[0] = info, vals[1] = (void *)(uintptr_t)sizeof(info);
    vals[2] = error, vals[3] = (void *)(uintptr_t)sizeof(error);
    vals[4] = (void *)(uintptr_t)0x12345678;
    OK(cuLibraryLoadFromFile(&lib, path, opts, vals, 5, NULL, NULL, 0));
    memcpy(&ms, &vals[4], sizeof(ms));
    /* an image the server loaded already (cuModuleLoad above): its JIT again, for the logs */
    printf("logs [%s] [%s] %llu %llu %g\n", info, error, (unsigned long long)(uintptr_t)vals[1],
           (unsigned long long)(uintptr_t)vals[3], (double)ms);
    OK(cuLibraryGetKernel(&k, lib, "fromfile"));
    OK(cuKernelGetParamInfo(k, 2, &off, &size));
    printf("kparam 2 %zu %zu\n", off, size);
    /* a new image: the load's own log, within the size given (the rest cut, NUL-terminated) */
    memset(info, 'X', sizeof(info));
    vals[1] = (void *)(uintptr_t)20;
    OK(cuModuleLoadDataEx(&mod, "fakecubin\nex:4\n", 2, opts, vals));
    printf("exlogs [%s] %llu\n", info, (unsigned long long)(uintptr_t)vals[1]);
    memset(info, 'X', sizeof(info));
    vals[1] = (void *)(uintptr_t)sizeof(info);
    OK(cuModuleLoadDataEx(&mod, "fakecubin\nex2:4\n", 2, opts, vals));
    printf("exlogs2 [%s] %llu\n", info, (unsigned long long)(uintptr_t)vals[1]);
    /* an image the driver refuses: its error, and its error log */
    vals[3] = (void *)(uintptr_t)sizeof(error);
    printf("bad %d", cuModuleLoadDataEx(&mod, "notanimage", 4, opts, vals));
    printf(" [%s] %llu\n", error, (unsigned long long)(uintptr_t)vals[3]);
    /* a PTX that does not compile (the double's "fakebadptx"): 218 at the load, as natively,
     * with the module load's error log, logs asked or not */
    vals[3] = (void *)(uintptr_t)sizeof(error);
    printf("badptx %d", cuModuleLoadDataEx(&mod, "fakebadptx\nbroken:4\n", 4, opts, vals));
    printf(" [%s] %llu\n", error, (unsigned long long)(uintptr_t)vals[3]);
    printf("badptxnolog %d\n", cuModuleLoadData(&mod, "fakebadptx\nbroken2:4\n"));
    vals[1] = (void *)(uintptr_t)sizeof(info); /* the info log alone asked */
    printf("badptxinfo %d\n", cuModuleLoadDataEx(&mod, "fakebadptx\nbroken3:4\n", 2, opts, vals));
    vals[3] = (void *)(uintptr_t)0; /* an error log of size 0: nothing written there */
    printf("badptxzero %d\n", cuModuleLoadDataEx(&mod, "fakebadptx\nbroken4:4\n", 4, opts, vals));
    /* no log asked (a size of 0): the buffer is left, the wall time 0 */
    memset(info, 'X', sizeof(info));
    info[sizeof(info) - 1] = '\0';
    vals[1] = vals[3] = (void *)(uintptr_t)0;
    OK(cuModuleLoadDataEx(&mod, "fakecubin\nex3:4\n", 5, opts, vals));
    memcpy(&ms, &vals[4], sizeof(ms));
    printf("nolog %c %llu %g\n", info[0], (unsigned long long)(uintptr_t)vals[1], (double)ms);
    printf("files ok\n");
}

static void link(const char *path)
{
    char info[256], error[256], a[] = "fakecubin\nlinked_a:8\n", bad[] = "garbage";
    int opts[6] = {3, 4, 5, 6, 2, 12}; /* logs and their sizes, WALL_TIME, LOG_VERBOSE */
    void *vals[6], *st, *st2, *cubin, *cubin2;
    int in_opts[3] = {3, 4, 7}; /* an input's own log, OPTIMIZATION_LEVEL */
    char in_info[32];
    void *in_vals[3] = {in_info, (void *)(uintptr_t)sizeof(in_info), (void *)(uintptr_t)3};
    int ptr_opt = 17; /* GLOBAL_SYMBOL_NAMES: an array of pointers */
    void *ptr_val = NULL;
    size_t size, size2, off, psize, big = 300000;
    char *image;
    CUmodule mod;
    CUfunction f;
    float ms = 0;

    memset(info, 'X', sizeof(info));
    memset(error, 'Y', sizeof(error));
    memset(in_info, 'Z', sizeof(in_info));
    vals[0] = info, vals[1] = (void *)(uintptr_t)sizeof(info);
    vals[2] = error, vals[3] = (void *)(uintptr_t)sizeof(error);
    vals[4] = NULL, vals[5] = (void *)(uintptr_t)1;
    OK(cuLinkCreate_v2(6, opts, vals, &st));
    printf("created [%s]\n", info);
    printf("buffers %llu %llu\n", (unsigned long long)(uintptr_t)info,
           (unsigned long long)(uintptr_t)error);
    OK(cuLinkAddData_v2(st, 1, a, sizeof(a), "a.ptx", 3, in_opts, in_vals));
    printf("input log [%s] %llu\n", in_info, (unsigned long long)(uintptr_t)in_vals[1]);
    OK(cuLinkAddFile_v2(st, 1, path, 0, NULL, NULL));
    printf("badinput %d\n", cuLinkAddData_v2(st, 0, bad, sizeof(bad), "garbage.o", 0, NULL, NULL));
    printf("error [%s] %llu\n", error, (unsigned long long)(uintptr_t)vals[3]);
    OK(cuLinkComplete(st, &cubin, &size));
    memcpy(&ms, &vals[4], sizeof(ms));
    printf("cubin %zu [%s]\n", size, (char *)cubin);
    printf("info [%s] %llu wall %g\n", info, (unsigned long long)(uintptr_t)vals[1], (double)ms);
    OK(cuModuleLoadData(&mod, cubin));
    OK(cuModuleGetFunction(&f, mod, "linked_b"));
    OK(cuFuncGetParamInfo(f, 1, &off, &psize));
    printf("linked_b 1 %zu %zu\n", off, psize);
    OK(cuLinkComplete(st, &cubin2, &size2));
    printf("again %d\n", cubin2 == cubin && size2 == size);
    OK(cuLinkDestroy(st));
    printf("destroyed %d %d\n", cuLinkDestroy(st), cuLinkComplete(st, &cubin, &size));
    printf("pointers %d\n", cuLinkCreate_v2(1, &ptr_opt, &ptr_val, &st2));

    /* a cubin larger than one answer: it comes in pieces */
    image = calloc(1, big + 1);
    EXPECT(image);
    strcpy(image, "fakecubin\n");
    for (size_t i = strlen(image); i + 4 <= big; i += 4)
        memcpy(image + i, "k:8\n", 4);
    OK(cuLinkCreate_v2(0, NULL, NULL, &st2));
    OK(cuLinkAddData_v2(st2, 0, image, big, "big.cubin", 0, NULL, NULL));
    OK(cuLinkComplete(st2, &cubin, &size));
    printf("big %d %d\n", size > 256 * 1024,
           size == strlen(image) + 1 && !memcmp(cubin, image, size));
    free(image);
    /* st2 is left for the session's end to destroy */
    printf("link ok\n");
}

static void queries(void)
{
    static const char image[] = "fakecubin\nq_one:8\nq_two:4,8\n";
    CUmodule mod, mod2, mod3;
    CUfunction fs[3], f;
    const char *n0, *n1, *again;
    void *lib;
    unsigned count = 0;
    size_t off, size;

    OK(cuModuleLoadData(&mod, image));
    OK(cuModuleGetFunctionCount(&count, mod));
    printf("count %u\n", count);
    OK(cuLibraryGetModule(&mod2, mod));
    printf("module same %d\n", mod2 == mod);
    OK(cuModuleEnumerateFunctions(fs, 2, mod));
    OK(cuFuncGetName(&n0, fs[0]));
    OK(cuKernelGetName(&n1, fs[1]));
    OK(cuFuncGetName(&again, fs[0]));
    printf("names %s %s stable %d\n", n0, n1, again == n0);
    OK(cuFuncGetParamInfo(fs[1], 1, &off, &size));
    printf("enumerated layout %zu %zu\n", off, size);
    OK(cuModuleGetFunction(&f, mod, "q_two"));
    printf("same handle %d\n", f == fs[1]);
    OK(cuFuncGetModule(&mod3, fs[0]));
    OK(cuKernelGetLibrary(&lib, fs[1]));
    printf("owner %d %d\n", mod3 == mod, lib == (void *)mod);
    printf("toomany %d\n", cuModuleEnumerateFunctions(fs, 3, mod));
    /* the same image loaded again (CuPy's threads do): each load has its unload, and a module
     * stays usable until its own (the server answers one handle for both) */
    OK(cuModuleLoadData(&mod2, image));
    OK(cuModuleUnload(mod));
    OK(cuModuleGetFunction(&f, mod2, "q_one"));
    OK(cuModuleUnload(mod2));
    printf("twice unloaded %d\n", cuModuleGetFunction(&f, mod2, "q_one"));
    printf("queries ok\n");
}

CUresult cuGetExportTable(const void **, const unsigned char *);

static void store_function(void *data, CUfunction f)
{
    CUfunction *seen = data;

    while (*seen)
        seen++;
    *seen = f;
}

static void tables(void)
{
    static const unsigned char context[16] = {0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48,
                                              0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2};
    static const unsigned char module[16] = {0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d,
                                             0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99, 0x1e};
    static const char image[] = "fakecubin\nt_one:8\nt_two:4,8\nt_three:8\n";
    typedef CUresult (*slot3)(void *, void *, void *);
    typedef int (*slot7)(void *, CUmodule, void (*)(void *, CUfunction), void *);
    const void *const *tc = NULL, *const *tm = NULL, *other = NULL;
    unsigned char sized[16];
    unsigned long long v = 7, id = 0, id2 = 0;
    void *obj = NULL, *obj2 = NULL;
    CUstream s;
    CUmodule mod;
    CUfunction seen[5] = {0}, fs[3];
    int n;

    OK(cuGetExportTable((const void **)&tc, context));
    OK(cuGetExportTable((const void **)&tm, module));
    printf("sizes %zu %zu\n", (size_t)tc[0], (size_t)tm[0]);
    OK(((slot3)tc[4])(NULL, &v, NULL));
    printf("slot4 null %llu", v);
    OK(((slot3)tc[4])((void *)0x1234, &v, NULL));
    printf(" ctx %llu\n", v);
    OK(cuStreamCreate(&s, 0));
    OK(((slot3)tc[51])(NULL, s, &obj));
    OK(((slot3)tc[39])(NULL, obj, &v));
    OK(cuStreamGetId(s, &id));
    OK(((slot3)tc[51])(NULL, NULL, &obj2));
    OK(((slot3)tc[39])(NULL, obj2, &id2));
    printf("stream id same %d null stream %d\n", v == id && id != 0, id2 != id);
    printf("other slot %d\n", ((slot3)tc[5])(NULL, NULL, NULL));
    OK(cuModuleLoadData(&mod, image));
    n = ((slot7)tm[7])(NULL, mod, store_function, seen);
    OK(cuModuleEnumerateFunctions(fs, 3, mod));
    printf("functions %d same %d\n", n, seen[0] == fs[0] && seen[1] == fs[1] && seen[2] == fs[2]);
    printf("module other slot %d\n", ((slot3)tm[6])(NULL, NULL, NULL));
    for (int i = 0; i < 16; i++)
        sized[i] = (unsigned char)(i + 1);
    printf("unknown table %d\n", cuGetExportTable(&other, sized));
    {
        /* The runtime's context checks: slot 2 gets the local driver's context for a token of
         * ours (the double's slot echoes what it got), any other pointer as it is. */
        static const unsigned char checks[16] = {0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43,
                                                 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e};
        const void *const *cc = NULL;
        CUcontext token = NULL;
        unsigned long long got = 0, got2 = 0, got_other = 0;
        OK(cuGetExportTable((const void **)&cc, checks));
        OK(cuDevicePrimaryCtxRetain(&token, 0));
        OK(((slot3)cc[2])(token, &got, NULL));
        OK(((slot3)cc[2])(token, &got2, NULL));
        OK(((slot3)cc[2])((void *)0x5000, &got_other, NULL));
        printf("checks token replaced %d stable %d other kept %d others %llu\n",
               got != 0 && got != (unsigned long long)(uintptr_t)token, got == got2,
               got_other == 0x5000, (unsigned long long)((slot3)cc[3])((void *)6, (void *)7, 0));
    }
    printf("tables ok\n");
}

/* Clients see one device for now (the server runs them on its device 0). */
static void streamctx(CUcontext ctx0)
{
    CUcontext got = NULL;
    CUstream s0, s1;
    void *green = (void *)1;
    int dev = -1;

    OK(cuStreamCreateWithPriority(&s1, 0, -1));
    OK(cuStreamCreate(&s0, 0));
    OK(cuStreamGetCtx(s1, &got));
    printf("s1 ctx %d\n", got == ctx0);
    OK(cuStreamGetDevice(s1, &dev));
    printf("s1 device %d\n", dev);
    OK(cuStreamGetCtx_v2(s0, &got, &green));
    printf("s0 ctx %d green %d\n", got == ctx0, green == NULL);
    OK(cuStreamGetDevice(NULL, &dev));
    printf("null device %d\n", dev);
    printf("foreign %d\n", cuStreamGetCtx((CUstream)(uintptr_t)0x7777000, &got));
    OK(cuStreamDestroy(s1)); /* the v1 name */
    printf("destroyed %d\n", cuStreamGetDevice(s1, &dev));
    printf("streamctx ok\n");
}

/* CUstreamAttrValue's access policy window; the other members are ints at offset 0. */
struct window {
    CUdeviceptr base;
    size_t bytes;
    float hit;
    int hitprop, missprop;
    char pad[32];
};

static void attrs(void)
{
    CUstream s, s2, foreign = (CUstream)(uintptr_t)0x7777000;
    CUdeviceptr p, m;
    struct window w, got;
    int prio[16] = {-2};
    int back[16] = {0};

    OK(cuMemAlloc_v2(&p, 4096));
    OK(cuMemAllocManaged(&m, 4096, 1));
    OK(cuStreamCreate(&s, 0));
    OK(cuStreamCreate(&s2, 0));
    OK(cuStreamSetAttribute(s, 8, prio)); /* PRIORITY */
    OK(cuStreamGetAttribute(s, 8, back));
    printf("priority %d\n", back[0]);
    memset(&w, 0, sizeof(w));
    w.base = p, w.bytes = 4096, w.hit = 0.5f, w.hitprop = 2;
    OK(cuStreamSetAttribute(s, 1, &w));
    OK(cuStreamGetAttribute(s, 1, &got));
    printf("window %d %zu\n", got.base == p, got.bytes);
    w.bytes = 8192;
    printf("window outside %d\n", cuStreamSetAttribute(s, 1, &w));
    printf("attr 7 %d\n", cuStreamSetAttribute(s, 7, prio));
    OK(cuStreamCopyAttributes(s2, s));
    memset(back, 0, sizeof(back));
    OK(cuStreamGetAttribute(s2, 8, back));
    printf("copied %d\n", back[0]);
    printf("get foreign %d\n", cuStreamGetAttribute(foreign, 8, back));
    printf("get attr 65 %d\n", cuStreamGetAttribute(s, 65, back));
    printf("copy foreign %d\n", cuStreamCopyAttributes(s2, foreign));
    printf("attach %d %d\n", cuStreamAttachMemAsync(s, m, 0, 1),
           cuStreamAttachMemAsync(NULL, m, 4096, 2));
    printf("attach part %d\n", cuStreamAttachMemAsync(s, m + 16, 16, 1));
    printf("attach device %d\n", cuStreamAttachMemAsync(s, p, 0, 1));
    printf("attach flags %d\n", cuStreamAttachMemAsync(s, m, 0, 3));
    printf("attach foreign %d\n", cuStreamAttachMemAsync(foreign, m, 0, 4));
    printf("attrs ok\n");
}

/* Every call with a kernel handle this client does not own. */
static void stealk(CUfunction f)
{
    CUlaunchConfig cfg;
    size_t avail;
    int n, grid, block;

    load_kernel("thief"); /* a kernel of its own: the session has some */
    memset(&cfg, 0, sizeof(cfg));
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
    printf("steal active %d\n", cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, 32, 0));
    printf("steal flags %d\n",
           cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&n, f, 32, 0, 0));
    printf("steal available %d\n", cuOccupancyAvailableDynamicSMemPerBlock(&avail, f, 1, 32));
    printf("steal potential %d\n", cuOccupancyMaxPotentialBlockSize(&grid, &block, f, NULL, 0, 0));
    printf("steal clustersize %d\n", cuOccupancyMaxPotentialClusterSize(&n, f, &cfg));
    printf("steal clusters %d\n", cuOccupancyMaxActiveClusters(&n, f, &cfg));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "occupancy";
    CUcontext ctx;

    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
    if (!strcmp(mode, "occupancy")) {
        occupancy();
    } else if (!strcmp(mode, "values")) {
        values();
    } else if (!strcmp(mode, "files") && argc > 2) {
        files(argv[2]);
    } else if (!strcmp(mode, "link") && argc > 2) {
        link(argv[2]);
    } else if (!strcmp(mode, "queries")) {
        queries();
    } else if (!strcmp(mode, "tables")) {
        tables();
    } else if (!strcmp(mode, "streamctx")) {
        streamctx(ctx);
    } else if (!strcmp(mode, "attrs")) {
        attrs();
    } else if (!strcmp(mode, "holdk")) {
        char line[16];
        CUfunction held = load_kernel("held");
        void *held_lib = NULL;
        OK(cuKernelGetLibrary(&held_lib, held));
        printf("%llu %llu\n", (unsigned long long)(uintptr_t)held,
               (unsigned long long)(uintptr_t)held_lib);
        fflush(stdout);
        while (fgets(line, sizeof(line), stdin)) {
        }
    } else if (!strcmp(mode, "stealk") && argc > 3) {
        void *lib = (void *)(uintptr_t)strtoull(argv[3], NULL, 10);
        CUfunction f = (CUfunction)(uintptr_t)strtoull(argv[2], NULL, 10);
        const char *name;
        unsigned n;
        CUfunction fs[1];
        stealk(f);
        printf("steal name %d\n", cuKernelGetName(&name, f));
        printf("steal library %d\n", cuKernelGetLibrary(&lib, f));
        lib = (void *)(uintptr_t)strtoull(argv[3], NULL, 10);
        printf("steal count %d\n", cuLibraryGetKernelCount(&n, lib));
        printf("steal enumerate %d\n", cuModuleEnumerateFunctions(fs, 1, lib));
    } else {
        fprintf(stderr, "modules_driver: unknown mode %s\n", mode);
        return 2;
    }
    return 0;
}
