/* SPDX-License-Identifier: MIT */
/* Sparse arrays' tile mappings and a module's texture and surface references through the shim
 * and the server on the driver double (fake_arraymap.c; FAKECUDA_VMM for cuMemCreate).
 *   arraymap_driver basic          maps and unmaps tiles, a module's references bound, used and
 *                                  refused where they must be; released at the module's unload
 *   arraymap_driver hold           prints its array, allocation handle and module texref, waits
 *   arraymap_driver steal A H T    uses another client's array A, handle H, texref T: refused;
 *                                  the same image's texref is its own copy ("own T2")
 * Exit status 0 when every check passed; the first failed check is printed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* Texture and surface references: cuda_abi.h does not name their handles. */
typedef void *CUtexref, *CUsurfref;

CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamSynchronize(CUstream);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuArray3DCreate_v2(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
CUresult cuArrayDestroy(CUarray);
CUresult cuMipmappedArrayCreate(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned);
CUresult cuMemCreate(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                     unsigned long long);
CUresult cuMemMapArrayAsync(CUarrayMapInfo *, unsigned, CUstream);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleUnload(CUmodule);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuModuleGetTexRef(CUtexref *, CUmodule, const char *);
CUresult cuModuleGetSurfRef(CUsurfref *, CUmodule, const char *);
CUresult cuTexRefSetArray(CUtexref, CUarray, unsigned);
CUresult cuTexRefGetArray(CUarray *, CUtexref);
CUresult cuTexRefSetAddress_v2(size_t *, CUtexref, CUdeviceptr, size_t);
CUresult cuTexRefDestroy(CUtexref);
CUresult cuSurfRefSetArray(CUsurfref, CUarray, unsigned);
CUresult cuSurfRefGetArray(CUarray *, CUsurfref);
CUresult cuParamSetTexRef(CUfunction, int, CUtexref);

static const char image[] = "fakecubin\nk:8\ntexA:\nsurfA:\n";

static CUarray sparse_array(void)
{
    CUDA_ARRAY3D_DESCRIPTOR d = {64, 64, 0, 0x20, 1, 0x40 | 0x02}; /* SPARSE | SURFACE_LDST */
    CUarray a;
    OK(cuArray3DCreate_v2(&a, &d));
    return a;
}

static CUmemGenericAllocationHandle tile_pool(void)
{
    CUmemAllocationProp p = {.type = 1, .location = {1, 0}, .allocFlags.usage = 1}; /* TILE_POOL */
    CUmemGenericAllocationHandle h;
    OK(cuMemCreate(&h, 65536, &p, 0));
    return h;
}

static CUarrayMapInfo map_of(CUarray a, CUmemGenericAllocationHandle h)
{
    CUarrayMapInfo m = {0};
    m.resourceType = 0;
    m.resource.array = a;
    m.subresource.sparseLevel.extentWidth = m.subresource.sparseLevel.extentHeight = 64;
    m.subresource.sparseLevel.extentDepth = 1;
    m.memOperationType = 1;
    m.memHandle.memHandle = h;
    m.offset = 0;
    m.deviceBitMask = 1;
    return m;
}

static void basic(void)
{
    CUstream st;
    CUarray a = sparse_array(), b;
    CUmipmappedArray mm;
    CUDA_ARRAY3D_DESCRIPTOR md = {64, 64, 0, 0x20, 1, 0x40};
    CUmemGenericAllocationHandle h = tile_pool();
    CUarrayMapInfo m[2], bad, *many;
    CUmodule mod;
    CUfunction f;
    CUtexref t, t2;
    CUsurfref sr;
    CUdeviceptr d;
    size_t off;

    OK(cuStreamCreate(&st, 0));
    OK(cuMipmappedArrayCreate(&mm, &md, 4));
    /* a map of the array's level and of the mipmapped array's tail, then their unmaps */
    m[0] = map_of(a, h);
    m[1] = map_of(NULL, h);
    m[1].resourceType = 1, m[1].resource.mipmap = mm, m[1].subresourceType = 1, m[1].offset = 4096;
    OK(cuMemMapArrayAsync(m, 2, st));
    m[0].memOperationType = m[1].memOperationType = 2;
    m[0].memHandle.memHandle = m[1].memHandle.memHandle = 0;
    OK(cuMemMapArrayAsync(m, 2, NULL));
    OK(cuStreamSynchronize(st));
    /* each refused before the driver (the double logs what it gets; the test reads the log) */
    bad = map_of(a, h), bad.resourceType = 2;
    EXPECT_RC(cuMemMapArrayAsync(&bad, 1, st), CUDA_ERROR_INVALID_VALUE);
    bad = map_of(a, h), bad.subresourceType = 2;
    EXPECT_RC(cuMemMapArrayAsync(&bad, 1, st), CUDA_ERROR_INVALID_VALUE);
    bad = map_of(a, h), bad.memOperationType = 3;
    EXPECT_RC(cuMemMapArrayAsync(&bad, 1, st), CUDA_ERROR_INVALID_VALUE);
    bad = map_of(a, h), bad.memHandleType = 1;
    EXPECT_RC(cuMemMapArrayAsync(&bad, 1, st), CUDA_ERROR_INVALID_VALUE);
    bad = map_of(a, h), bad.deviceBitMask = 2;
    EXPECT_RC(cuMemMapArrayAsync(&bad, 1, st), CUDA_ERROR_INVALID_VALUE);
    bad = map_of(a, h), bad.reserved[1] = 1;
    EXPECT_RC(cuMemMapArrayAsync(&bad, 1, st), CUDA_ERROR_INVALID_VALUE);
    bad = map_of(a, h), bad.memOperationType = 2; /* an unmap names no allocation */
    EXPECT_RC(cuMemMapArrayAsync(&bad, 1, st), CUDA_ERROR_INVALID_VALUE);
    bad = map_of(a, h + 1); /* not a handle of this client's */
    EXPECT_RC(cuMemMapArrayAsync(&bad, 1, st), CUDA_ERROR_INVALID_HANDLE);
    bad = map_of((CUarray)(uintptr_t)0x1234, h);
    EXPECT_RC(cuMemMapArrayAsync(&bad, 1, st), CUDA_ERROR_INVALID_HANDLE);
    EXPECT((many = calloc(257, sizeof(*many))) != NULL);
    for (int i = 0; i < 257; i++)
        many[i] = map_of(a, h);
    EXPECT_RC(cuMemMapArrayAsync(many, 257, st),
              CUDA_ERROR_INVALID_VALUE); /* past the maximum of 256 */
    free(many);

    /* a module's references */
    OK(cuModuleLoadData(&mod, image));
    OK(cuModuleGetFunction(&f, mod, "k"));
    OK(cuModuleGetTexRef(&t, mod, "texA"));
    OK(cuModuleGetTexRef(&t2, mod, "texA"));
    EXPECT(t == t2);
    EXPECT_RC(cuModuleGetTexRef(&t2, mod, "texB"), CUDA_ERROR_NOT_FOUND);
    OK(cuModuleGetSurfRef(&sr, mod, "surfA"));
    OK(cuTexRefSetArray(t, a, 1));
    OK(cuTexRefGetArray(&b, t));
    EXPECT(b == a);
    OK(cuMemAlloc_v2(&d, 4096));
    OK(cuTexRefSetAddress_v2(&off, t, d, 4096));
    EXPECT_RC(cuTexRefSetAddress_v2(&off, t, d, 1ull << 40),
              CUDA_ERROR_INVALID_VALUE);                      /* past the allocation */
    EXPECT_RC(cuTexRefDestroy(t), CUDA_ERROR_INVALID_HANDLE); /* the module's */
    OK(cuParamSetTexRef(f, -1, t));
    EXPECT_RC(cuParamSetTexRef(f, 0, t), CUDA_ERROR_INVALID_VALUE);
    OK(cuSurfRefSetArray(sr, a, 0));
    EXPECT_RC(cuSurfRefSetArray(sr, a, 1), CUDA_ERROR_INVALID_VALUE);
    OK(cuSurfRefGetArray(&b, sr));
    EXPECT(b == a);
    b = sparse_array();
    OK(cuSurfRefSetArray(sr, b, 0));
    OK(cuArrayDestroy(b));
    EXPECT_RC(cuSurfRefGetArray(&b, sr),
              CUDA_ERROR_INVALID_VALUE); /* its array is gone: not answered */
    OK(cuModuleUnload(mod));
    EXPECT_RC(cuTexRefSetArray(t, a, 1), CUDA_ERROR_INVALID_HANDLE); /* released with the module */
    EXPECT_RC(cuSurfRefSetArray(sr, a, 0), CUDA_ERROR_INVALID_HANDLE);
    printf("texref %llx\n", (unsigned long long)(uintptr_t)t);
}

int main(int argc, char **argv)
{
    CUcontext ctx;

    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
    if (argc > 1 && !strcmp(argv[1], "basic")) {
        basic();
        printf("basic ok\n");
    } else if (argc > 1 && !strcmp(argv[1], "hold")) {
        CUmodule mod;
        CUtexref t;
        char line[16];
        CUarray a = sparse_array();
        CUmemGenericAllocationHandle h = tile_pool();
        OK(cuModuleLoadData(&mod, image));
        OK(cuModuleGetTexRef(&t, mod, "texA"));
        OK(cuTexRefSetArray(t, a, 1));
        printf("%llu %llu %llu\n", (unsigned long long)(uintptr_t)a, (unsigned long long)h,
               (unsigned long long)(uintptr_t)t);
        fflush(stdout);
        if (!fgets(line, sizeof(line), stdin))
            return 0;
    } else if (argc > 4 && !strcmp(argv[1], "steal")) {
        CUarray a = (CUarray)(uintptr_t)strtoull(argv[2], NULL, 10), mine = sparse_array(), b;
        CUmemGenericAllocationHandle h = strtoull(argv[3], NULL, 10), own = tile_pool();
        CUtexref t = (CUtexref)(uintptr_t)strtoull(argv[4], NULL, 10), t2;
        CUarrayMapInfo m = map_of(a, own);
        CUmodule mod;
        EXPECT_RC(cuMemMapArrayAsync(&m, 1, NULL), CUDA_ERROR_INVALID_HANDLE);
        m = map_of(mine, h);
        EXPECT_RC(cuMemMapArrayAsync(&m, 1, NULL), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuTexRefSetArray(t, mine, 1), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuTexRefGetArray(&b, t), CUDA_ERROR_INVALID_HANDLE);
        EXPECT_RC(cuTexRefDestroy(t), CUDA_ERROR_INVALID_HANDLE);
        /* the same image: a library of its own, whose reference is not the holder's */
        OK(cuModuleLoadData(&mod, image));
        OK(cuModuleGetTexRef(&t2, mod, "texA"));
        EXPECT(t2 != t);
        OK(cuTexRefSetArray(t2, mine, 1));
        m = map_of(mine, own);
        OK(cuMemMapArrayAsync(&m, 1, NULL));
        printf("steal refused, own %llu\n", (unsigned long long)(uintptr_t)t2);
    } else {
        return 2;
    }
    return 0;
}
