// SPDX-License-Identifier: MIT
// Every occupancy query of the driver API, for runtime kernels: active blocks (with and
// without flags), the block-size search (plain, with a dynamic shared memory callback that
// runs in this process, with flags and a limit), the dynamic shared memory available per
// block, and the cluster queries. The answers are checked for consistency with one another,
// the kernels launched with the block sizes found (results checked), and all printed: under
// openmps they must equal the native ones.
// openmps-gpu-link: -lcuda
#define PROG "occupancy"
#include "api.h"
#include <cstring>
#include <vector>

__global__ void __launch_bounds__(1024) scale(float *p, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] *= a;
}

// Dynamic shared memory: one float per thread; the block reverses its slice.
__global__ void reverse_blocks(float *p, int n)
{
    extern __shared__ float tile[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? p[i] : 0.0f;
    __syncthreads();
    int j = blockIdx.x * blockDim.x + (blockDim.x - 1 - threadIdx.x);
    if (i < n && j < n)
        p[i] = tile[blockDim.x - 1 - threadIdx.x];
}

__global__ void cluster_rank(unsigned *out)
{
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    if (threadIdx.x == 0)
        out[blockIdx.x] = rank;
}

static int callback_calls = 0;
static size_t CUDA_CB smem_for(int block_size)
{
    callback_calls++;
    return (size_t)block_size * sizeof(float);
}

static CUfunction func_of(const void *kernel)
{
    cudaFunction_t f;
    RT(cudaGetFuncBySymbol(&f, kernel));
    return (CUfunction)f;
}

int main()
{
    CUdevice dev;
    int sms = 0;
    RT(cudaSetDevice(0));
    RT(cudaFree(0));
    CU(cuCtxGetDevice(&dev));
    CU(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    CUfunction fscale = func_of((const void *)scale);
    CUfunction frev = func_of((const void *)reverse_blocks);
    CUfunction fcl = func_of((const void *)cluster_rank);

    // The plain search, then the blocks per SM at its answer.
    int min_grid = 0, block = 0, per_sm = 0, per_sm_flags = 0;
    CU(cuOccupancyMaxPotentialBlockSize(&min_grid, &block, fscale, nullptr, 0, 0));
    EXPECT(block > 0 && block <= 1024 && block % 32 == 0);
    CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fscale, block, 0));
    CU(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&per_sm_flags, fscale, block, 0,
                                                            CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE));
    EXPECT(per_sm > 0 && per_sm_flags > 0);
    EXPECT_EQ(min_grid, per_sm * sms);
    printf("scale: block size %d, min grid %d, %d blocks per SM (%d with caching override)\n",
           block, min_grid, per_sm, per_sm_flags);

    // The search with a callback for the dynamic shared memory, and with flags and a limit.
    int min_grid2 = 0, block2 = 0, per_sm2 = 0, min_grid3 = 0, block3 = 0;
    CU(cuOccupancyMaxPotentialBlockSize(&min_grid2, &block2, frev, smem_for, 0, 0));
    EXPECT(callback_calls > 0);
    EXPECT(block2 > 0 && block2 % 32 == 0);
    CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm2, frev, block2, smem_for(block2)));
    EXPECT(per_sm2 > 0);
    EXPECT_EQ(min_grid2, per_sm2 * sms);
    int calls_before = callback_calls;
    CU(cuOccupancyMaxPotentialBlockSizeWithFlags(&min_grid3, &block3, frev, smem_for, 0, 256,
                                                 CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE));
    EXPECT(callback_calls > calls_before);
    EXPECT(block3 > 0 && block3 <= 256);
    printf("reverse_blocks: block size %d (callback), min grid %d, %d blocks per SM; limited to "
           "256: block size %d, min grid %d\n",
           block2, min_grid2, per_sm2, block3, min_grid3);

    // The dynamic shared memory left per block at that occupancy is enough for it.
    size_t avail = 0;
    CU(cuOccupancyAvailableDynamicSMemPerBlock(&avail, frev, per_sm2, block2));
    EXPECT(avail >= smem_for(block2));
    int per_sm_avail = 0;
    CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_avail, frev, block2, avail));
    EXPECT(per_sm_avail >= per_sm2);
    printf("reverse_blocks: %zu bytes of dynamic shared memory available per block at %d "
           "blocks of %d\n",
           avail, per_sm2, block2);

    // The kernels at the sizes found.
    const int n = 1 << 20;
    std::vector<float> h(n), back(n), ref(n);
    for (int i = 0; i < n; i++)
        h[i] = (float)(i % 1000) - 500.0f;
    float *d;
    RT(cudaMalloc(&d, n * sizeof(float)));
    RT(cudaMemcpy(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    scale<<<(n + block - 1) / block, block>>>(d, 3.0f, n);
    // Each block reverses its slice; in a last partial block (if block2 does not divide n) the
    // elements whose mirror lies past n stay as they are.
    reverse_blocks<<<(n + block2 - 1) / block2, block2, smem_for(block2)>>>(d, n);
    RT(cudaMemcpy(back.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int b = 0; b * block2 < n; b++) {
        int lo = b * block2, hi = lo + block2 <= n ? lo + block2 : n;
        for (int i = lo; i < hi; i++) {
            int j = lo + (block2 - 1 - (i - lo));
            ref[i] = j < n ? h[j] * 3.0f : h[i] * 3.0f;
        }
    }
    EXPECT_FLOATS("scale then reverse at the found block sizes", back.data(), ref.data(), n, 0.0f);
    printf("kernels at the found sizes: correct (checksum %016llx)\n",
           api_fnv(back.data(), n * sizeof(float)));

    // Clusters: the largest cluster for 128-thread blocks, and active clusters of 2.
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = 64;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 128;
    cfg.blockDimY = cfg.blockDimZ = 1;
    int cluster = 0, clusters = 0;
    CU(cuOccupancyMaxPotentialClusterSize(&cluster, fcl, &cfg));
    EXPECT(cluster >= 2);
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = 2;
    attr.value.clusterDim.y = 1;
    attr.value.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    CU(cuOccupancyMaxActiveClusters(&clusters, fcl, &cfg));
    EXPECT(clusters > 0);
    unsigned *ranks;
    RT(cudaMalloc(&ranks, 64 * sizeof(unsigned)));
    RT(cudaMemset(ranks, 0xff, 64 * sizeof(unsigned)));
    void *args[] = {&ranks};
    CU(cuLaunchKernelEx(&cfg, fcl, args, nullptr));
    unsigned hr[64];
    RT(cudaMemcpy(hr, ranks, sizeof hr, cudaMemcpyDeviceToHost));
    for (int b = 0; b < 64; b++)
        EXPECT_EQ(hr[b], b % 2);
    printf("clusters: largest %d for 128 threads, %d active clusters of 2; a launch in clusters "
           "of 2 saw ranks 0,1\n",
           cluster, clusters);
    RT(cudaFree(ranks));
    RT(cudaFree(d));
    printf("occupancy done\n");
    return 0;
}
