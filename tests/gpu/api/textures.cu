// SPDX-License-Identifier: MIT
// CUDA arrays, textures and surfaces through the driver API: a 1D array with every 1D copy
// (host, device, array to array), 2D arrays filled by 2D copies from host and device memory,
// read by texture objects with point and linear filtering, a 3D and a layered array copied
// with cuMemcpy3D and read by texture objects, a mipmapped array's level, and a surface
// object written by a kernel; descriptors queried. Checked against the CPU.
// openmps-gpu-link: -lcuda
#define PROG "textures"
#include "api.h"
#include <cmath>
#include <cstring>
#include <vector>

static float texel(int x, int y, int z)
{
    return (float)((x * 7 + y * 13 + z * 29) % 61);
}

__global__ void sample2d(cudaTextureObject_t t, float *out, int w, int h, float dx)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < w && y < h)
        out[y * w + x] = tex2D<float>(t, x + dx, y + 0.5f);
}

__global__ void sample3d(cudaTextureObject_t t, float *out, int w, int h, int d)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y, z = blockIdx.z;
    if (x < w && y < h && z < d)
        out[(z * h + y) * w + x] = tex3D<float>(t, x + 0.5f, y + 0.5f, z + 0.5f);
}

__global__ void sample_layered(cudaTextureObject_t t, float *out, int w, int h, int layers)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y, l = blockIdx.z;
    if (x < w && y < h && l < layers)
        out[(l * h + y) * w + x] = tex2DLayered<float>(t, x + 0.5f, y + 0.5f, l);
}

__global__ void write_surface(cudaSurfaceObject_t s, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < w && y < h)
        surf2Dwrite((float)((x * 7 + y * 13) % 61) * 2.0f + 1.0f, s, x * (int)sizeof(float), y);
}

static CUtexObject make_tex(CUarray a, CUfilter_mode filter)
{
    CUDA_RESOURCE_DESC rd;
    memset(&rd, 0, sizeof rd);
    rd.resType = CU_RESOURCE_TYPE_ARRAY;
    rd.res.array.hArray = a;
    CUDA_TEXTURE_DESC td;
    memset(&td, 0, sizeof td);
    td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = CU_TR_ADDRESS_MODE_CLAMP;
    td.filterMode = filter;
    CUtexObject t;
    CU(cuTexObjectCreate(&t, &rd, &td, nullptr));
    return t;
}

static CUDA_MEMCPY2D copy2d(size_t w_bytes, size_t h)
{
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    c.WidthInBytes = w_bytes;
    c.Height = h;
    return c;
}

static void check_desc3d(const char *what, CUarray a, size_t w, size_t h, size_t d, unsigned flags)
{
    CUDA_ARRAY3D_DESCRIPTOR got;
    memset(&got, 0, sizeof got);
    CU(cuArray3DGetDescriptor(&got, a));
    if (got.Width != w || got.Height != h || got.Depth != d || got.Format != CU_AD_FORMAT_FLOAT ||
        got.NumChannels != 1 || (got.Flags & flags) != flags) {
        fprintf(stderr, "%s: %s descriptor: %zux%zux%zu format %d channels %u flags %x\n", PROG,
                what, got.Width, got.Height, got.Depth, (int)got.Format, got.NumChannels,
                got.Flags);
        exit(1);
    }
}

int main()
{
    const int W = 64, H = 32, D = 8, L = 4;
    RT(cudaSetDevice(0));
    RT(cudaFree(0));

    // ---- 1D: host -> array, array -> array, array -> device, device -> array, array -> host.
    std::vector<float> line(W), back(W);
    for (int x = 0; x < W; x++)
        line[x] = texel(x, 3, 0);
    CUDA_ARRAY_DESCRIPTOR d1;
    memset(&d1, 0, sizeof d1);
    d1.Width = W;
    d1.Height = 0;
    d1.Format = CU_AD_FORMAT_FLOAT;
    d1.NumChannels = 1;
    CUarray a1, b1;
    CU(cuArrayCreate(&a1, &d1));
    CU(cuArrayCreate(&b1, &d1));
    CUDA_ARRAY_DESCRIPTOR g1;
    CU(cuArrayGetDescriptor(&g1, a1));
    EXPECT_EQ(g1.Width, W);
    EXPECT_EQ(g1.Height, 0);
    EXPECT_EQ(g1.Format, CU_AD_FORMAT_FLOAT);
    EXPECT_EQ(g1.NumChannels, 1);
    CUdeviceptr dl;
    CU(cuMemAlloc(&dl, W * sizeof(float)));
    CU(cuMemcpyHtoA(a1, 0, line.data(), W * sizeof(float)));
    CU(cuMemcpyAtoA(b1, 0, a1, 0, W * sizeof(float)));
    CU(cuMemsetD32(dl, 0, W));
    CU(cuMemcpyAtoD(dl, b1, 0, W * sizeof(float)));
    CU(cuMemcpyDtoA(a1, 0, dl, W * sizeof(float)));
    CU(cuMemcpyAtoH(back.data(), a1, 0, W * sizeof(float)));
    EXPECT_FLOATS("1D array round trip", back.data(), line.data(), W, 0.0f);
    // A part: 16 floats from offset 8 elements.
    std::vector<float> part(16);
    CU(cuMemcpyAtoH(part.data(), b1, 8 * sizeof(float), 16 * sizeof(float)));
    EXPECT_FLOATS("1D array part", part.data(), line.data() + 8, 16, 0.0f);
    printf("1d array: host, array, device round trip exact (checksum %016llx)\n",
           api_fnv(back.data(), W * sizeof(float)));

    // ---- 2D: from host and from device memory by cuMemcpy2D; textures point and linear.
    std::vector<float> img(W * H), out(W * H), ref(W * H);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            img[y * W + x] = texel(x, y, 0);
    CUDA_ARRAY_DESCRIPTOR d2 = d1;
    d2.Height = H;
    CUarray a2, c2;
    CU(cuArrayCreate(&a2, &d2));
    CU(cuArrayCreate(&c2, &d2));
    CUDA_MEMCPY2D cp = copy2d(W * sizeof(float), H);
    cp.srcMemoryType = CU_MEMORYTYPE_HOST;
    cp.srcHost = img.data();
    cp.srcPitch = W * sizeof(float);
    cp.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    cp.dstArray = a2;
    CU(cuMemcpy2D(&cp));
    CUdeviceptr dimg, dout;
    size_t pitch;
    CU(cuMemAllocPitch(&dimg, &pitch, W * sizeof(float), H, 4));
    CU(cuMemAlloc(&dout, W * H * D * L * sizeof(float)));
    cp = copy2d(W * sizeof(float), H); // array a2 -> pitched device -> array c2
    cp.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    cp.srcArray = a2;
    cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    cp.dstDevice = dimg;
    cp.dstPitch = pitch;
    CU(cuMemcpy2D(&cp));
    cp = copy2d(W * sizeof(float), H);
    cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    cp.srcDevice = dimg;
    cp.srcPitch = pitch;
    cp.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    cp.dstArray = c2;
    CU(cuMemcpy2D(&cp));
    cp = copy2d(W * sizeof(float), H);
    cp.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    cp.srcArray = c2;
    cp.dstMemoryType = CU_MEMORYTYPE_HOST;
    cp.dstHost = out.data();
    cp.dstPitch = W * sizeof(float);
    CU(cuMemcpy2D(&cp));
    EXPECT_FLOATS("2D array through pitched device memory", out.data(), img.data(), W * H, 0.0f);

    CUtexObject tpoint = make_tex(c2, CU_TR_FILTER_MODE_POINT);
    CUtexObject tlinear = make_tex(c2, CU_TR_FILTER_MODE_LINEAR);
    CUDA_RESOURCE_DESC rd;
    CU(cuTexObjectGetResourceDesc(&rd, tlinear));
    EXPECT_EQ(rd.resType, CU_RESOURCE_TYPE_ARRAY);
    EXPECT(rd.res.array.hArray == c2);
    dim3 grid2((W + 63) / 64, H);
    // Point sampling at x + 0.75: the texel x itself.
    sample2d<<<grid2, 64>>>((cudaTextureObject_t)tpoint, (float *)dout, W, H, 0.75f);
    RT(cudaDeviceSynchronize());
    CU(cuMemcpyDtoH(out.data(), dout, W * H * sizeof(float)));
    EXPECT_FLOATS("point-sampled texture", out.data(), img.data(), W * H, 0.0f);
    unsigned long long point_sum = api_fnv(out.data(), W * H * sizeof(float));
    // Linear filtering at x + 1: halfway between texels x and x + 1 (clamped at the edge).
    sample2d<<<grid2, 64>>>((cudaTextureObject_t)tlinear, (float *)dout, W, H, 1.0f);
    RT(cudaDeviceSynchronize());
    CU(cuMemcpyDtoH(out.data(), dout, W * H * sizeof(float)));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            ref[y * W + x] = 0.5f * (img[y * W + x] + img[y * W + (x + 1 < W ? x + 1 : x)]);
    EXPECT_FLOATS("linear-filtered texture", out.data(), ref.data(), W * H, 1e-3f);
    printf("2d array: copies host, array, pitched device exact; point texture exact (checksum "
           "%016llx); linear texture within 1e-3 of the midpoints\n",
           point_sum);

    // ---- 3D: cuMemcpy3D host -> array -> host, and a point texture over it.
    std::vector<float> vol(W * H * D), vout(W * H * D);
    for (int z = 0; z < D; z++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                vol[(z * H + y) * W + x] = texel(x, y, z);
    CUDA_ARRAY3D_DESCRIPTOR d3;
    memset(&d3, 0, sizeof d3);
    d3.Width = W;
    d3.Height = H;
    d3.Depth = D;
    d3.Format = CU_AD_FORMAT_FLOAT;
    d3.NumChannels = 1;
    CUarray a3;
    CU(cuArray3DCreate(&a3, &d3));
    check_desc3d("3D array", a3, W, H, D, 0);
    CUDA_MEMCPY3D c3;
    memset(&c3, 0, sizeof c3);
    c3.srcMemoryType = CU_MEMORYTYPE_HOST;
    c3.srcHost = vol.data();
    c3.srcPitch = W * sizeof(float);
    c3.srcHeight = H;
    c3.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    c3.dstArray = a3;
    c3.WidthInBytes = W * sizeof(float);
    c3.Height = H;
    c3.Depth = D;
    CU(cuMemcpy3D(&c3));
    CUDA_MEMCPY3D r3;
    memset(&r3, 0, sizeof r3);
    r3.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    r3.srcArray = a3;
    r3.dstMemoryType = CU_MEMORYTYPE_HOST;
    r3.dstHost = vout.data();
    r3.dstPitch = W * sizeof(float);
    r3.dstHeight = H;
    r3.WidthInBytes = W * sizeof(float);
    r3.Height = H;
    r3.Depth = D;
    CU(cuMemcpy3D(&r3));
    EXPECT_FLOATS("3D array round trip", vout.data(), vol.data(), W * H * D, 0.0f);
    CUtexObject t3 = make_tex(a3, CU_TR_FILTER_MODE_POINT);
    sample3d<<<dim3((W + 63) / 64, H, D), 64>>>((cudaTextureObject_t)t3, (float *)dout, W, H, D);
    RT(cudaDeviceSynchronize());
    CU(cuMemcpyDtoH(vout.data(), dout, W * H * D * sizeof(float)));
    EXPECT_FLOATS("3D texture", vout.data(), vol.data(), W * H * D, 0.0f);
    printf("3d array: cuMemcpy3D both ways and a 3D texture exact (checksum %016llx)\n",
           api_fnv(vout.data(), W * H * D * sizeof(float)));

    // ---- Layered: L layers of W x H, read with tex2DLayered.
    std::vector<float> lay(W * H * L), lout(W * H * L);
    for (int l = 0; l < L; l++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                lay[(l * H + y) * W + x] = texel(x, y, 100 + l);
    CUDA_ARRAY3D_DESCRIPTOR dl3 = d3;
    dl3.Depth = L;
    dl3.Flags = CUDA_ARRAY3D_LAYERED;
    CUarray al;
    CU(cuArray3DCreate(&al, &dl3));
    check_desc3d("layered array", al, W, H, L, CUDA_ARRAY3D_LAYERED);
    c3.srcHost = lay.data();
    c3.dstArray = al;
    c3.Depth = L;
    CU(cuMemcpy3D(&c3));
    CUtexObject tl = make_tex(al, CU_TR_FILTER_MODE_POINT);
    sample_layered<<<dim3((W + 63) / 64, H, L), 64>>>((cudaTextureObject_t)tl, (float *)dout, W, H,
                                                      L);
    RT(cudaDeviceSynchronize());
    CU(cuMemcpyDtoH(lout.data(), dout, W * H * L * sizeof(float)));
    EXPECT_FLOATS("layered texture", lout.data(), lay.data(), W * H * L, 0.0f);
    printf("layered array: %d layers read by tex2DLayered exact (checksum %016llx)\n", L,
           api_fnv(lout.data(), W * H * L * sizeof(float)));

    // ---- Mipmapped: 3 levels of a W x H array; level 1 is W/2 x H/2.
    CUDA_ARRAY3D_DESCRIPTOR dm = d3;
    dm.Depth = 0;
    CUmipmappedArray mip;
    CUarray level1;
    CU(cuMipmappedArrayCreate(&mip, &dm, 3));
    CU(cuMipmappedArrayGetLevel(&level1, mip, 1));
    check_desc3d("mipmap level 1", level1, W / 2, H / 2, 0, 0);
    std::vector<float> small((W / 2) * (H / 2)), sback(small.size());
    for (int y = 0; y < H / 2; y++)
        for (int x = 0; x < W / 2; x++)
            small[y * (W / 2) + x] = texel(2 * x, 2 * y, 7);
    cp = copy2d((W / 2) * sizeof(float), H / 2);
    cp.srcMemoryType = CU_MEMORYTYPE_HOST;
    cp.srcHost = small.data();
    cp.srcPitch = (W / 2) * sizeof(float);
    cp.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    cp.dstArray = level1;
    CU(cuMemcpy2D(&cp));
    cp = copy2d((W / 2) * sizeof(float), H / 2);
    cp.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    cp.srcArray = level1;
    cp.dstMemoryType = CU_MEMORYTYPE_HOST;
    cp.dstHost = sback.data();
    cp.dstPitch = (W / 2) * sizeof(float);
    CU(cuMemcpy2D(&cp));
    EXPECT_FLOATS("mipmap level 1", sback.data(), small.data(), small.size(), 0.0f);
    printf("mipmapped array: level 1 is %dx%d, its copy round trip exact\n", W / 2, H / 2);

    // ---- Surface: a kernel writes a surface-capable 2D array; copied out through device memory.
    CUDA_ARRAY3D_DESCRIPTOR ds = d3;
    ds.Depth = 0;
    ds.Flags = CUDA_ARRAY3D_SURFACE_LDST;
    CUarray as;
    CU(cuArray3DCreate(&as, &ds));
    check_desc3d("surface array", as, W, H, 0, CUDA_ARRAY3D_SURFACE_LDST);
    CUDA_RESOURCE_DESC srd;
    memset(&srd, 0, sizeof srd);
    srd.resType = CU_RESOURCE_TYPE_ARRAY;
    srd.res.array.hArray = as;
    CUsurfObject surf;
    CU(cuSurfObjectCreate(&surf, &srd));
    write_surface<<<grid2, 64>>>((cudaSurfaceObject_t)surf, W, H);
    RT(cudaDeviceSynchronize());
    cp = copy2d(W * sizeof(float), H);
    cp.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    cp.srcArray = as;
    cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    cp.dstDevice = dimg;
    cp.dstPitch = pitch;
    CU(cuMemcpy2D(&cp));
    cp = copy2d(W * sizeof(float), H);
    cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    cp.srcDevice = dimg;
    cp.srcPitch = pitch;
    cp.dstMemoryType = CU_MEMORYTYPE_HOST;
    cp.dstHost = out.data();
    cp.dstPitch = W * sizeof(float);
    CU(cuMemcpy2D(&cp));
    for (int i = 0; i < W * H; i++)
        ref[i] = img[i] * 2.0f + 1.0f;
    EXPECT_FLOATS("surface written by a kernel", out.data(), ref.data(), W * H, 0.0f);
    printf("surface: kernel writes exact (checksum %016llx)\n",
           api_fnv(out.data(), W * H * sizeof(float)));

    CU(cuSurfObjectDestroy(surf));
    CU(cuTexObjectDestroy(tpoint));
    CU(cuTexObjectDestroy(tlinear));
    CU(cuTexObjectDestroy(t3));
    CU(cuTexObjectDestroy(tl));
    CU(cuArrayDestroy(as));
    CU(cuMipmappedArrayDestroy(mip));
    CU(cuArrayDestroy(al));
    CU(cuArrayDestroy(a3));
    CU(cuArrayDestroy(a1));
    CU(cuArrayDestroy(b1));
    CU(cuArrayDestroy(a2));
    CU(cuArrayDestroy(c2));
    CU(cuMemFree(dl));
    CU(cuMemFree(dimg));
    CU(cuMemFree(dout));
    printf("textures done\n");
    return 0;
}
