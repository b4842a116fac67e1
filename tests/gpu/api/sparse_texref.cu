// SPDX-License-Identifier: MIT
// Sparse arrays and a module's texture and surface references through the driver API
// (api/remote/arraymap.tsv, texrefs.tsv): a sparse 2D array's first tile mapped onto a tile-pool
// allocation with cuMemMapArrayAsync, written and read back by copies; a module loaded from PTX
// text that declares a texref and a surfref at module scope, its kernel reading the texref
// (tex.1d over linear memory bound with cuTexRefSetAddress) and writing the surfref (sust), launched with
// cuLaunchKernel. Prints only deterministic lines; exits non-zero on a wrong result.
// openmps-gpu-link: -lcuda
#include <cuda.h>
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != CUDA_SUCCESS) {                                                                 \
            printf("FAIL %s = %d (line %d)\n", #call, (int)rc_, __LINE__);                         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)


static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                          ".global .texref texA;\n.global .surfref surfA;\n"
                          ".visible .entry readtex(.param .u64 out, .param .u32 n)\n{\n"
                          "  .reg .u64 %rd<4>; .reg .u32 %r<6>; .reg .f32 %f<6>; .reg .pred %p;\n"
                          "  ld.param.u64 %rd1, [out];\n  ld.param.u32 %r1, [n];\n"
                          "  mov.u32 %r2, %tid.x;\n  setp.ge.u32 %p, %r2, %r1;\n  @%p bra DONE;\n"
                          "  tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [texA, {%r2}];\n"
                          "  mul.wide.u32 %rd2, %r2, 4;\n  add.u64 %rd3, %rd1, %rd2;\n"
                          "  st.global.f32 [%rd3], %f1;\n"
                          "  add.f32 %f5, %f1, 0f3F800000;\n  mul.lo.u32 %r3, %r2, 4;\n"
                          "  mov.b32 %r4, %f5;\n  sust.b.1d.b32.trap [surfA, {%r3}], {%r4};\n"
                          "DONE:\n  ret;\n}\n";

static int sparse(CUdevice dev, CUstream st)
{
    int ok = 0;
    CK(cuDeviceGetAttribute(&ok, CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED, dev));
    if (!ok) {
        printf("SKIP sparse arrays: not supported by the device\n");
        return 0;
    }
    CUDA_ARRAY3D_DESCRIPTOR d;
    memset(&d, 0, sizeof(d));
    d.Width = 1024, d.Height = 1024, d.Format = CU_AD_FORMAT_FLOAT, d.NumChannels = 1;
    d.Flags = CUDA_ARRAY3D_SPARSE;
    CUarray a;
    CK(cuArray3DCreate(&a, &d));
    CUDA_ARRAY_SPARSE_PROPERTIES sp;
    CK(cuArrayGetSparseProperties(&sp, a));
    // (cuArrayGetMemoryRequirements is for arrays with deferred mapping: INVALID_VALUE on a
    // sparse one, natively, measured on the H100.)
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    prop.allocFlags.usage = CU_MEM_CREATE_USAGE_TILE_POOL;
    size_t gran = 0;
    CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    size_t tile = (size_t)sp.tileExtent.width * sp.tileExtent.height * 4; // one float channel
    size_t size = (tile + gran - 1) / gran * gran;
    CUmemGenericAllocationHandle h;
    CK(cuMemCreate(&h, size, &prop, 0));
    CUarrayMapInfo m;
    memset(&m, 0, sizeof(m));
    m.resourceType = CU_RESOURCE_TYPE_ARRAY;
    m.resource.array = a;
    m.subresourceType = CU_ARRAY_SPARSE_SUBRESOURCE_TYPE_SPARSE_LEVEL;
    m.subresource.sparseLevel.extentWidth = sp.tileExtent.width;
    m.subresource.sparseLevel.extentHeight = sp.tileExtent.height;
    m.subresource.sparseLevel.extentDepth = 1;
    m.memOperationType = CU_MEM_OPERATION_TYPE_MAP;
    m.memHandleType = CU_MEM_HANDLE_TYPE_GENERIC;
    m.memHandle.memHandle = h;
    m.deviceBitMask = 1u << dev;
    CK(cuMemMapArrayAsync(&m, 1, st));
    unsigned w = sp.tileExtent.width, hgt = sp.tileExtent.height;
    float *in = (float *)malloc((size_t)w * hgt * 4), *out = (float *)calloc((size_t)w * hgt, 4);
    for (size_t i = 0; i < (size_t)w * hgt; i++)
        in[i] = (float)(i % 977) + 0.5f;
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof(c));
    c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = in, c.srcPitch = (size_t)w * 4;
    c.srcHeight = hgt;
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY, c.dstArray = a;
    c.WidthInBytes = (size_t)w * 4, c.Height = hgt, c.Depth = 1;
    CK(cuMemcpy3DAsync(&c, st));
    memset(&c, 0, sizeof(c));
    c.srcMemoryType = CU_MEMORYTYPE_ARRAY, c.srcArray = a;
    c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = out, c.dstPitch = (size_t)w * 4;
    c.dstHeight = hgt;
    c.WidthInBytes = (size_t)w * 4, c.Height = hgt, c.Depth = 1;
    CK(cuMemcpy3DAsync(&c, st));
    CK(cuStreamSynchronize(st));
    if (memcmp(in, out, (size_t)w * hgt * 4) != 0) {
        printf("FAIL sparse tile read back differs\n");
        return 1;
    }
    m.memOperationType = CU_MEM_OPERATION_TYPE_UNMAP;
    m.memHandle.memHandle = 0;
    CK(cuMemMapArrayAsync(&m, 1, st));
    CK(cuStreamSynchronize(st));
    CK(cuArrayDestroy(a));
    CK(cuMemRelease(h));
    free(in), free(out);
    printf("sparse tile mapped, written and read back: ok\n");
    return 0;
}

static int texref(CUstream st)
{
    enum { N = 64 };
    CUmodule mod;
    CUresult rc = cuModuleLoadData(&mod, ptx);
    if (rc != CUDA_SUCCESS) {
        printf("SKIP module texture references: the JIT refused the PTX (%d)\n", (int)rc);
        return 0;
    }
    CUfunction f;
    CUtexref t;
    CUsurfref s;
    CK(cuModuleGetFunction(&f, mod, "readtex"));
    CK(cuModuleGetTexRef(&t, mod, "texA"));
    CK(cuModuleGetSurfRef(&s, mod, "surfA"));
    // (cuTexRefDestroy of a module's reference: the driver accepts it, measured on the H100;
    // openmps refuses it, as the module's object is shared: not called here.)
    CUDA_ARRAY3D_DESCRIPTOR d;
    memset(&d, 0, sizeof(d));
    d.Width = N, d.Format = CU_AD_FORMAT_FLOAT, d.NumChannels = 1;
    d.Flags = CUDA_ARRAY3D_SURFACE_LDST;
    CUarray src, dst, back;
    CK(cuArray3DCreate(&src, &d));
    CK(cuArray3DCreate(&dst, &d));
    float in[N], out[N], surf[N];
    for (int i = 0; i < N; i++)
        in[i] = (float)(i * 3) - 7.25f;
    CK(cuMemcpyHtoA(src, 0, in, sizeof(in)));
    // Bound to linear memory: tex.1d with integer coordinates fetches elements there (over an
    // array it read zeros, natively as under openmps: measured on the H100).
    CUdeviceptr lin;
    size_t offset = 1;
    CK(cuMemAlloc(&lin, sizeof(in)));
    CK(cuMemcpyHtoD(lin, in, sizeof(in)));
    CK(cuTexRefSetAddress(&offset, t, lin, sizeof(in)));
    CK(cuTexRefSetFormat(t, CU_AD_FORMAT_FLOAT, 1));
    if (offset != 0) {
        printf("FAIL cuTexRefSetAddress: offset %zu\n", offset);
        return 1;
    }
    CK(cuSurfRefSetArray(s, dst, 0));
    CK(cuSurfRefGetArray(&back, s));
    if (back != dst) {
        printf("FAIL cuSurfRefGetArray answered another array\n");
        return 1;
    }
    CUdeviceptr o;
    CK(cuMemAlloc(&o, sizeof(out)));
    unsigned n = N;
    void *args[] = {&o, &n};
    CK(cuLaunchKernel(f, 1, 1, 1, N, 1, 1, 0, st, args, NULL));
    CK(cuStreamSynchronize(st));
    CK(cuMemcpyDtoH(out, o, sizeof(out)));
    CK(cuMemcpyAtoH(surf, dst, 0, sizeof(surf)));
    for (int i = 0; i < N; i++)
        if (out[i] != in[i] || surf[i] != in[i] + 1.0f) {
            printf("FAIL texref element %d: %g %g (expected %g %g)\n", i, out[i], surf[i], in[i],
                   in[i] + 1.0f);
            return 1;
        }
    CK(cuMemFree(o));
    CK(cuMemFree(lin));
    CK(cuModuleUnload(mod));
    CK(cuArrayDestroy(src));
    CK(cuArrayDestroy(dst));
    printf("module texref read by tex.1d and surfref written by sust: ok\n");
    return 0;
}

int main()
{
    CUdevice dev;
    CUcontext ctx;
    CUstream st;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    int rc = sparse(dev, st) | texref(st);
    CK(cuStreamDestroy(st));
    CK(cuDevicePrimaryCtxRelease(dev));
    return rc;
}
