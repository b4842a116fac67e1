/* SPDX-License-Identifier: MIT */
/* remote_driver legacy: the legacy family of api/remote/legacy.tsv through the shim (run with
 * FAKECUDA_LAUNCH_LOG and FAKECUDA_LEGACY_LOG; tests/ipc/test_legacy.py reads them): legacy
 * launches with their per-function state, the multi-device cooperative launch, v1 array
 * descriptors, the passthrough tensor maps and logs (the client's driver), the atomics capabilities
 * and the RDMA flush through the server, and the client's own answers (notifications, coredump,
 * peer). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

typedef struct {
    unsigned Width, Height;
    int Format;
    unsigned NumChannels;
} desc_v1;
typedef struct {
    unsigned Width, Height, Depth;
    int Format;
    unsigned NumChannels, Flags;
} desc3_v1;
typedef struct {
    size_t Width, Height;
    int Format;
    unsigned NumChannels;
} desc_v2;
typedef struct {
    CUfunction function;
    unsigned gx, gy, gz, bx, by, bz, smem;
    CUstream stream;
    void **params;
} launch_params;

CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuCtxSynchronize(void);
CUresult cuCtxGetCurrent(CUcontext *);
CUresult cuCtxCreate_v2(CUcontext *, unsigned, int);
CUresult cuCtxDestroy_v2(CUcontext);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuFuncSetBlockShape(CUfunction, int, int, int);
CUresult cuFuncGetAttribute(int *, int, CUfunction);
CUresult cuFuncSetAttribute(CUfunction, int, int);
CUresult cuFuncSetSharedSize(CUfunction, unsigned);
CUresult cuParamSetSize(CUfunction, unsigned);
CUresult cuParamSeti(CUfunction, int, unsigned);
CUresult cuParamSetf(CUfunction, int, float);
CUresult cuParamSetv(CUfunction, int, void *, unsigned);
CUresult cuLaunch(CUfunction);
CUresult cuLaunchGrid(CUfunction, int, int);
CUresult cuLaunchGridAsync(CUfunction, int, int, CUstream);
CUresult cuLaunchCooperativeKernelMultiDevice(launch_params *, unsigned, unsigned);
CUresult cuArrayCreate(CUarray *, const desc_v1 *);
CUresult cuArray3DCreate(CUarray *, const desc3_v1 *);
CUresult cuArrayGetDescriptor(desc_v1 *, CUarray);
CUresult cuArray3DGetDescriptor(desc3_v1 *, CUarray);
CUresult cuArrayGetDescriptor_v2(desc_v2 *, CUarray);
CUresult cuArrayDestroy(CUarray);
CUresult cuTensorMapEncodeTiled(void *, int, unsigned, void *, const uint64_t *, const uint64_t *,
                                const unsigned *, const unsigned *, int, int, int, int);
CUresult cuTensorMapReplaceAddress(void *, void *);
CUresult cuLogsCurrent(unsigned *, unsigned);
CUresult cuDeviceGetHostAtomicCapabilities(unsigned *, const int *, unsigned, int);
CUresult cuDeviceGetP2PAtomicCapabilities(unsigned *, const int *, unsigned, int, int);
CUresult cuFlushGPUDirectRDMAWrites(int, int);
CUresult cuDeviceRegisterAsyncNotification(int, void (*)(void *, void *, void *), void *, void **);
CUresult cuDeviceUnregisterAsyncNotification(int, void *);
CUresult cuCoredumpGetAttribute(int, void *, size_t *);
CUresult cuCoredumpGetAttributeGlobal(int, void *, size_t *);
CUresult cuCoredumpSetAttribute(int, void *, size_t *);
CUresult cuCoredumpSetAttributeGlobal(int, void *, size_t *);
CUresult cuCtxEnablePeerAccess(CUcontext, unsigned);
CUresult cuMemAlloc_v2(unsigned long long *, size_t);
CUresult cuMemFree_v2(unsigned long long);
typedef void *CUtexref;
CUresult cuTexRefCreate(CUtexref *);
CUresult cuTexRefDestroy(CUtexref);
CUresult cuTexRefSetAddress_v2(size_t *, CUtexref, unsigned long long, size_t);
CUresult cuTexRefGetAddress_v2(unsigned long long *, CUtexref);
CUresult cuTexRefSetAddress2D_v3(CUtexref, const desc_v2 *, unsigned long long, size_t);
CUresult cuTexRefSetAddress2D(CUtexref, const desc_v1 *, unsigned, unsigned);
CUresult cuTexRefSetArray(CUtexref, CUarray, unsigned);
CUresult cuTexRefGetArray(CUarray *, CUtexref);
CUresult cuTexRefSetBorderColor(CUtexref, float *);
CUresult cuTexRefGetBorderColor(float *, CUtexref);
CUresult cuTexRefSetFilterMode(CUtexref, int);
CUresult cuTexRefGetFilterMode(int *, CUtexref);
CUresult cuTexRefSetFormat(CUtexref, int, int);
CUresult cuTexRefGetFormat(int *, int *, CUtexref);
CUresult cuTexRefSetFlags(CUtexref, unsigned);
CUresult cuTexRefSetAddressMode(CUtexref, int, int);
CUresult cuTexRefGetAddressMode(int *, CUtexref, int);
CUresult cuTexRefSetMipmapLevelBias(CUtexref, float);
CUresult cuTexRefGetMipmapLevelBias(float *, CUtexref);
CUresult cuTexRefSetMipmapLevelClamp(CUtexref, float, float);
CUresult cuTexRefGetMipmapLevelClamp(float *, float *, CUtexref);
CUresult cuCtxDisablePeerAccess(CUcontext);

static void legacy_launches(void)
{
    static const char image[] = "fakecubin\nlegacy:4,4,8\nother:4,4,8\n";
    CUmodule mod;
    CUfunction f, g;
    CUstream s;
    unsigned long long u64 = 0x8877665544332211ull;

    OK(cuModuleLoadData(&mod, image));
    OK(cuModuleGetFunction(&f, mod, "legacy"));
    OK(cuModuleGetFunction(&g, mod, "other"));
    OK(cuStreamCreate(&s, 0));
    OK(cuParamSeti(f, 0, 0x11223344u));
    OK(cuParamSetf(f, 4, 1.5f));
    OK(cuParamSetv(f, 8, &u64, 8));
    OK(cuParamSetSize(f, 16));
    OK(cuFuncSetBlockShape(f, 32, 2, 1));
    OK(cuFuncSetSharedSize(f, 0));
    OK(cuLaunchGrid(f, 3, 2));
    OK(cuLaunch(f));
    /* another function's state is its own: no block shape yet */
    OK(cuParamSetSize(g, 16));
    EXPECT_RC(cuLaunch(g), CUDA_ERROR_INVALID_VALUE);
    OK(cuFuncSetBlockShape(g, 8, 1, 1));
    OK(cuParamSetf(g, 0, -0.0f)); /* the sign bit alone: an integer conversion loses it */
    OK(cuLaunchGridAsync(g, 5, 1, s));
    /* refused */
    EXPECT_RC(cuParamSetv(f, 4090, &u64, 8), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuParamSeti(f, -4, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuParamSetSize(f, 4097), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuFuncSetBlockShape(f, 0, 1, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuFuncSetBlockShape(NULL, 1, 1, 1), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_RC(cuLaunchGrid(f, 0, 1), CUDA_ERROR_INVALID_VALUE);
    /* the multi-device cooperative launch: one device, one entry */
    unsigned a = 7, b = 0x3f800000;
    void *params[] = {&a, &b, &u64};
    launch_params lp = {f, 2, 1, 1, 16, 1, 1, 0, s, params};
    OK(cuLaunchCooperativeKernelMultiDevice(&lp, 1, 0));
    launch_params two[2] = {lp, lp};
    EXPECT_RC(cuLaunchCooperativeKernelMultiDevice(two, 2, 0), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_RC(cuLaunchCooperativeKernelMultiDevice(&lp, 1, 4), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuLaunchCooperativeKernelMultiDevice(NULL, 1, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuCtxSynchronize());
    /* attributes are asked once per function, fixed and settable alike */
    int v = 0;
    for (int i = 0; i < 3; i++) {
        OK(cuFuncGetAttribute(&v, 4, f)); /* registers */
        EXPECT(v == 1004);
        OK(cuFuncGetAttribute(&v, 8, f)); /* dynamic shared size: settable */
        EXPECT(v == 1008);
    }
    OK(cuFuncGetAttribute(&v, 4, g)); /* another function: its own answer */
    EXPECT(v == 1004);
    EXPECT_RC(cuFuncGetAttribute(NULL, 4, f), CUDA_ERROR_INVALID_VALUE);
    /* a set is what the client sees next; the same value again costs no round trip */
    OK(cuFuncSetAttribute(f, 8, 2000));
    OK(cuFuncSetAttribute(f, 8, 2000));
    OK(cuFuncGetAttribute(&v, 8, f));
    EXPECT(v == 2000);
    /* lowered: the client sees its value, the server keeps the larger permission */
    OK(cuFuncSetAttribute(f, 8, 500));
    OK(cuFuncGetAttribute(&v, 8, f));
    EXPECT(v == 500);
    /* a hint goes to the driver as set */
    OK(cuFuncSetAttribute(f, 9, 50));
    OK(cuFuncGetAttribute(&v, 9, f));
    EXPECT(v == 50);
    /* refused: the client's value stays */
    EXPECT_RC(cuFuncSetAttribute(f, 8, -1), CUDA_ERROR_INVALID_VALUE);
    OK(cuFuncGetAttribute(&v, 8, f));
    EXPECT(v == 500);
}

static void v1_arrays(void)
{
    CUarray a, b;
    desc_v1 d = {64, 8, 0x01, 4}, back;
    desc3_v1 d3 = {16, 4, 2, 0x10, 2, 0}, back3;
    desc_v2 v2;

    OK(cuArrayCreate(&a, &d));
    OK(cuArrayGetDescriptor_v2(&v2, a));
    EXPECT(v2.Width == 64 && v2.Height == 8 && v2.Format == 0x01 && v2.NumChannels == 4);
    memset(&back, 0xff, sizeof(back));
    OK(cuArrayGetDescriptor(&back, a));
    EXPECT(back.Width == 64 && back.Height == 8 && back.Format == 0x01 && back.NumChannels == 4);
    OK(cuArray3DCreate(&b, &d3));
    memset(&back3, 0xff, sizeof(back3));
    OK(cuArray3DGetDescriptor(&back3, b));
    EXPECT(back3.Width == 16 && back3.Height == 4 && back3.Depth == 2 && back3.Format == 0x10 &&
           back3.NumChannels == 2 && back3.Flags == 0);
    EXPECT_RC(cuArrayCreate(&a, NULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuArrayGetDescriptor(NULL, b), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuArrayGetDescriptor(&back, (CUarray)(uintptr_t)0x1234), CUDA_ERROR_INVALID_HANDLE);
    OK(cuArrayDestroy(a));
    OK(cuArrayDestroy(b));
}

static void passthrough_and_server(void)
{
    static unsigned char map[128] __attribute__((aligned(64)));
    uint64_t dim[2] = {64, 64}, strides[1] = {256};
    unsigned box[2] = {8, 8}, es[2] = {1, 1}, it = 0;

    OK(cuTensorMapEncodeTiled(map, 7, 2, (void *)(uintptr_t)0x7f0000001000ull, dim, strides, box,
                              es, 0, 0, 0, 0));
    uint64_t addr;
    memcpy(&addr, map, 8);
    EXPECT(addr == 0x7f0000001000ull); /* the server's driver encoded it */
    /* refused before the driver: a rank past 5, a data type past the enum, no dimensions */
    EXPECT_RC(cuTensorMapEncodeTiled(map, 7, 6, (void *)(uintptr_t)0x7f0000001000ull, dim, strides,
                                     box, es, 0, 0, 0, 0),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuTensorMapEncodeTiled(map, 99, 2, (void *)(uintptr_t)0x7f0000001000ull, dim, strides,
                                     box, es, 0, 0, 0, 0),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuTensorMapEncodeTiled(map, 7, 2, (void *)(uintptr_t)0x7f0000001000ull, NULL, strides,
                                     box, es, 0, 0, 0, 0),
              CUDA_ERROR_INVALID_VALUE);
    OK(cuTensorMapReplaceAddress(map, (void *)(uintptr_t)0x7f0000002000ull));
    memcpy(&addr, map, 8);
    EXPECT(addr == 0x7f0000002000ull);
    OK(cuLogsCurrent(&it, 0));
    EXPECT(it == 0x10c5);
    /* atomics capabilities: the operations crossed, the answers came back */
    int ops[3] = {0, 5, 12};
    unsigned caps[3] = {0};
    OK(cuDeviceGetHostAtomicCapabilities(caps, ops, 3, 0));
    EXPECT(caps[0] == 0x100 && caps[1] == 0x600 && caps[2] == 0xd00);
    OK(cuDeviceGetP2PAtomicCapabilities(caps, ops, 2, 0, 0));
    EXPECT(caps[0] == 0x10100 && caps[1] == 0x10600 && caps[2] == 0xd00);
    int many[17] = {0};
    unsigned mcaps[17];
    EXPECT_RC(cuDeviceGetHostAtomicCapabilities(mcaps, many, 17, 0),
              CUDA_ERROR_INVALID_VALUE); /* past its MAX */
    EXPECT_RC(cuDeviceGetHostAtomicCapabilities(caps, ops, 3, 1),
              CUDA_ERROR_INVALID_DEVICE); /* a device not seen */
    OK(cuFlushGPUDirectRDMAWrites(0, 200));
    EXPECT_RC(cuFlushGPUDirectRDMAWrites(1, 100),
              CUDA_ERROR_INVALID_VALUE); /* the target out of range */
    EXPECT_RC(cuFlushGPUDirectRDMAWrites(0, 99), CUDA_ERROR_INVALID_VALUE);
}

static void cb(void *info, void *user, void *handle)
{
    (void)info, (void)user, (void)handle;
    abort(); /* never called */
}

static void client_answers(void)
{
    void *h = NULL;
    OK(cuDeviceRegisterAsyncNotification(0, cb, NULL, &h));
    EXPECT(h != NULL);
    EXPECT_RC(cuDeviceRegisterAsyncNotification(1, cb, NULL, &h), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_RC(cuDeviceRegisterAsyncNotification(0, NULL, NULL, &h), CUDA_ERROR_INVALID_VALUE);
    OK(cuDeviceUnregisterAsyncNotification(0, h));
    EXPECT_RC(cuDeviceUnregisterAsyncNotification(0, h), CUDA_ERROR_INVALID_VALUE);

    /* coredump: the driver's defaults, a setting per scope */
    unsigned char v = 9;
    size_t n = 1;
    OK(cuCoredumpGetAttribute(2 /* TRIGGER_HOST */, &v, &n));
    EXPECT(v == 1 && n == 1);
    v = 1;
    OK(cuCoredumpSetAttributeGlobal(1 /* ENABLE_ON_EXCEPTION */, &v, &n));
    v = 9;
    OK(cuCoredumpGetAttribute(1, &v, &n)); /* the context inherits the global setting */
    EXPECT(v == 1);
    v = 0;
    OK(cuCoredumpSetAttribute(1, &v, &n));
    OK(cuCoredumpGetAttribute(1, &v, &n));
    EXPECT(v == 0);
    OK(cuCoredumpGetAttributeGlobal(1, &v, &n));
    EXPECT(v == 1);
    char file[64] = "/tmp/om-core", got[64];
    n = strlen(file) + 1;
    OK(cuCoredumpSetAttributeGlobal(5 /* FILE */, file, &n));
    n = 0;
    OK(cuCoredumpGetAttributeGlobal(5, NULL, &n));
    EXPECT(n == strlen(file) + 1);
    n = sizeof(got);
    OK(cuCoredumpGetAttributeGlobal(5, got, &n));
    EXPECT(strcmp(got, file) == 0);
    n = 2;
    EXPECT_RC(cuCoredumpSetAttribute(1, &v, &n), CUDA_ERROR_INVALID_VALUE); /* a bool is one byte */
    EXPECT_RC(cuCoredumpGetAttribute(99, &v, &n), CUDA_ERROR_INVALID_VALUE);

    /* peer access: the client's one device has no peer */
    CUcontext cur, other;
    OK(cuCtxGetCurrent(&cur));
    EXPECT_RC(cuCtxEnablePeerAccess(cur, 0),
              CUDA_ERROR_INVALID_CONTEXT); /* the current context itself */
    OK(cuCtxCreate_v2(&other, 0, 0));
    OK(cuCtxSetCurrent(cur));
    EXPECT_RC(cuCtxEnablePeerAccess(other, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuCtxEnablePeerAccess(other, 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
    EXPECT_RC(cuCtxDisablePeerAccess(other), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    EXPECT_RC(cuCtxEnablePeerAccess((CUcontext)(uintptr_t)0x99, 0), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuCtxDestroy_v2(other));
}

/* Texture references made by cuTexRefCreate: values (floats bit for bit) through the server,
 * refusals of the decoders; one is left for the session's end to destroy (printed). */
static void texrefs(void)
{
    CUtexref t, kept;
    CUarray a, got;
    desc_v1 d = {32, 4, 0x01, 1};
    unsigned long long p, q;
    size_t off = 99;

    OK(cuTexRefCreate(&t));
    OK(cuMemAlloc_v2(&p, 4096));
    OK(cuTexRefSetAddress_v2(&off, t, p + 256, 1024));
    EXPECT(off == 0);
    OK(cuTexRefGetAddress_v2(&q, t));
    EXPECT(q == p + 256);
    EXPECT_RC(cuTexRefSetAddress_v2(&off, t, p + 256, 4096),
              CUDA_ERROR_INVALID_VALUE); /* past the allocation */
    EXPECT_RC(cuTexRefSetAddress_v2(&off, t, 0x10, 16),
              CUDA_ERROR_INVALID_VALUE); /* not the client's memory */
    desc_v2 d2 = {64, 16, 0x01, 1};
    OK(cuTexRefSetAddress2D_v3(t, &d2, p, 256)); /* 16 rows of 256 bytes: the allocation */
    d2.Height = 17;
    EXPECT_RC(cuTexRefSetAddress2D_v3(t, &d2, p, 256),
              CUDA_ERROR_INVALID_VALUE); /* a row past it */
    EXPECT_RC(cuTexRefSetAddress2D_v3(t, &d2, p, (size_t)1 << 62),
              CUDA_ERROR_INVALID_VALUE); /* Pitch * Height wraps */
    EXPECT_RC(cuTexRefSetAddress2D_v3((CUtexref)(uintptr_t)0x5555, &d2, p, 16),
              CUDA_ERROR_INVALID_HANDLE);
    /* the v1 form: 32-bit addresses, none of which is the client's memory here */
    EXPECT_RC(cuTexRefSetAddress2D(t, &d, 0x1000, 64), CUDA_ERROR_INVALID_VALUE);
    OK(cuArrayCreate(&a, &d));
    OK(cuTexRefSetArray(t, a, 1));
    OK(cuTexRefGetArray(&got, t));
    EXPECT(got == a);
    EXPECT_RC(cuTexRefSetArray(t, (CUarray)(uintptr_t)0x4444, 0),
              CUDA_ERROR_INVALID_HANDLE);                           /* not the client's */
    EXPECT_RC(cuTexRefSetArray(t, a, 2), CUDA_ERROR_INVALID_VALUE); /* a flag out of mask */
    float border[4] = {0.25f, -1.0f, 3.5e-40f /* subnormal */, -0.0f}, back[4];
    OK(cuTexRefSetBorderColor(t, border));
    OK(cuTexRefGetBorderColor(back, t));
    EXPECT(memcmp(border, back, sizeof(back)) == 0);
    OK(cuTexRefSetFilterMode(t, 1));
    int v = -1, n = -1;
    OK(cuTexRefGetFilterMode(&v, t));
    EXPECT(v == 1);
    EXPECT_RC(cuTexRefSetFilterMode(t, 2), CUDA_ERROR_INVALID_VALUE); /* an enum out of range */
    OK(cuTexRefSetFormat(t, 0x20, 2));
    OK(cuTexRefGetFormat(&v, &n, t));
    EXPECT(v == 0x20 && n == 2);
    EXPECT_RC(cuTexRefSetFormat(t, 0x20, 5), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuTexRefSetFlags(t, 0x4), CUDA_ERROR_INVALID_VALUE);
    OK(cuTexRefSetAddressMode(t, 2, 3));
    OK(cuTexRefGetAddressMode(&v, t, 2));
    EXPECT(v == 3);
    EXPECT_RC(cuTexRefSetAddressMode(t, 3, 0), CUDA_ERROR_INVALID_VALUE);
    float bias = -0.375f, lo = 1.0e-42f, hi = 16.5f, r1, r2;
    OK(cuTexRefSetMipmapLevelBias(t, bias));
    OK(cuTexRefGetMipmapLevelBias(&r1, t));
    EXPECT(memcmp(&r1, &bias, sizeof(r1)) == 0);
    OK(cuTexRefSetMipmapLevelClamp(t, lo, hi));
    OK(cuTexRefGetMipmapLevelClamp(&r1, &r2, t));
    EXPECT(memcmp(&r1, &lo, sizeof(r1)) == 0 && memcmp(&r2, &hi, sizeof(r2)) == 0);
    EXPECT_RC(cuTexRefGetFilterMode(&v, (CUtexref)(uintptr_t)0x5555), CUDA_ERROR_INVALID_HANDLE);
    OK(cuTexRefDestroy(t));
    EXPECT_RC(cuTexRefGetFilterMode(&v, t),
              CUDA_ERROR_INVALID_HANDLE); /* destroyed: no longer the client's */
    OK(cuTexRefCreate(&kept));
    printf("texref %llx\n", (unsigned long long)(uintptr_t)kept);
}

void legacy_case(void)
{
    printf("pid %d\n", (int)getpid());
    legacy_launches();
    v1_arrays();
    passthrough_and_server();
    client_answers();
    texrefs();
    printf("legacy ok\n");
}
