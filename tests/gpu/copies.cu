// SPDX-License-Identifier: MIT
// Every copy and set kind a CUDA C program uses, each checked: 1D both ways and device to
// device, cudaMemcpyDefault (unified addressing), async, memset, pitched 2D, 3D, peer on one
// device, symbols of the module, and the pointer queries around them.
#include <cstdio>
#include <cstring>
#include <vector>

__device__ int table[256];

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "copies: %s failed: %s\n", #call, cudaGetErrorString(e_));            \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)
#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "copies: line %d: %s\n", __LINE__, #cond);                             \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main()
{
    const int n = 1 << 16;
    std::vector<unsigned char> h(n), back(n);
    unsigned char *a, *b;
    cudaStream_t s;

    for (int i = 0; i < n; i++)
        h[i] = (unsigned char)(i * 7 + 3);
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMalloc(&a, n));
    CHECK(cudaMalloc(&b, n));
    // 1D, default kind, async, memset
    CHECK(cudaMemcpy(a, h.data(), n, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice));
    CHECK(cudaMemcpy(back.data(), b, n, cudaMemcpyDefault));
    EXPECT(back == h);
    CHECK(cudaMemsetAsync(b, 0x5a, n / 2, s));
    CHECK(cudaMemcpyAsync(back.data(), b, n, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    EXPECT(back[0] == 0x5a && back[n / 2 - 1] == 0x5a && back[n / 2] == h[n / 2]);
    // pointer queries and memory info
    cudaPointerAttributes attr;
    CHECK(cudaPointerGetAttributes(&attr, a + 10));
    EXPECT(attr.type == cudaMemoryTypeDevice && attr.devicePointer == a + 10);
    size_t free_b = 0, total_b = 0;
    CHECK(cudaMemGetInfo(&free_b, &total_b));
    EXPECT(free_b > 0 && total_b >= free_b);
    // pitched 2D: a 100x40 window of bytes, memset2D, copies both ways and within the device
    size_t pitch = 0;
    unsigned char *img, *img2;
    std::vector<unsigned char> h2(100 * 40), b2(100 * 40);
    for (int i = 0; i < 100 * 40; i++)
        h2[i] = (unsigned char)(i % 251);
    CHECK(cudaMallocPitch(&img, &pitch, 100, 40));
    CHECK(cudaMallocPitch(&img2, &pitch, 100, 40));
    CHECK(cudaMemset2D(img, pitch, 0x11, 100, 40));
    CHECK(cudaMemcpy2D(img + pitch * 2 + 8, pitch, h2.data(), 100, 80, 30, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy2D(img2, pitch, img, pitch, 100, 40, cudaMemcpyDeviceToDevice));
    CHECK(cudaMemcpy2D(b2.data(), 100, img2, pitch, 100, 40, cudaMemcpyDeviceToHost));
    EXPECT(b2[0] == 0x11 && b2[2 * 100 + 7] == 0x11 && b2[2 * 100 + 8] == h2[0]);
    EXPECT(b2[31 * 100 + 87] == h2[29 * 100 + 79] && b2[32 * 100 + 8] == 0x11);
    // 3D: a 64x6x5 box into a pitched volume and back
    cudaPitchedPtr vol;
    cudaExtent ext = make_cudaExtent(64, 6, 5);
    std::vector<unsigned char> box(64 * 6 * 5), box2(64 * 6 * 5);
    for (size_t i = 0; i < box.size(); i++)
        box[i] = (unsigned char)(i * 5 + 1);
    CHECK(cudaMalloc3D(&vol, ext));
    cudaMemcpy3DParms in = {};
    in.srcPtr = make_cudaPitchedPtr(box.data(), 64, 64, 6);
    in.dstPtr = vol;
    in.extent = ext;
    in.kind = cudaMemcpyHostToDevice;
    CHECK(cudaMemcpy3D(&in));
    cudaMemcpy3DParms out = {};
    out.srcPtr = vol;
    out.dstPtr = make_cudaPitchedPtr(box2.data(), 64, 64, 6);
    out.extent = ext;
    out.kind = cudaMemcpyDeviceToHost;
    CHECK(cudaMemcpy3D(&out));
    EXPECT(box == box2);
    // peer copy on one device
    CHECK(cudaMemcpyPeer(b, 0, a, 0, n));
    CHECK(cudaMemcpy(back.data(), b, n, cudaMemcpyDeviceToHost));
    EXPECT(back == h);
    // symbols of the module
    std::vector<int> t(256), t2(256);
    for (int i = 0; i < 256; i++)
        t[i] = i * i;
    CHECK(cudaMemcpyToSymbol(table, t.data(), sizeof(int) * 256));
    CHECK(cudaMemcpyFromSymbol(t2.data(), table, sizeof(int) * 256));
    EXPECT(t == t2);
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    CHECK(cudaFree(img));
    CHECK(cudaFree(img2));
    CHECK(cudaFree(vol.ptr));
    printf("copies ok\n");
    return 0;
}
