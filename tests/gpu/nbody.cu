// SPDX-License-Identifier: MIT
// One n-body step (all pairs, dynamic shared memory), checked against the CPU.
#include <cmath>
#include <cstdio>
#include <vector>

__global__ void step(const float4 *p, float4 *v, int n, float dt)
{
    extern __shared__ float4 tile[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float4 me = p[i];
    float3 acc = {0, 0, 0};
    for (int base = 0; base < n; base += blockDim.x) {
        tile[threadIdx.x] = p[base + threadIdx.x];
        __syncthreads();
        for (int j = 0; j < blockDim.x; j++) {
            float dx = tile[j].x - me.x, dy = tile[j].y - me.y, dz = tile[j].z - me.z;
            float inv = rsqrtf(dx * dx + dy * dy + dz * dz + 0.01f);
            float s = tile[j].w * inv * inv * inv;
            acc.x += dx * s, acc.y += dy * s, acc.z += dz * s;
        }
        __syncthreads();
    }
    v[i].x += acc.x * dt, v[i].y += acc.y * dt, v[i].z += acc.z * dt;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "nbody: %s failed: %s\n", #call, cudaGetErrorString(e_));             \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main()
{
    const int n = 2048, block = 128;
    const float dt = 0.01f;
    std::vector<float4> p(n), v(n, float4{0, 0, 0, 0}), out(n);
    float4 *dp, *dv;

    for (int i = 0; i < n; i++)
        p[i] = float4{(float)(i % 13), (float)(i % 7), (float)(i % 5), 1.0f + (i % 3)};
    CHECK(cudaMalloc(&dp, n * sizeof(float4)));
    CHECK(cudaMalloc(&dv, n * sizeof(float4)));
    CHECK(cudaMemcpy(dp, p.data(), n * sizeof(float4), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dv, 0, n * sizeof(float4)));
    step<<<n / block, block, block * sizeof(float4)>>>(dp, dv, n, dt);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(out.data(), dv, n * sizeof(float4), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i += 97) {
        double ax = 0, ay = 0, az = 0;
        for (int j = 0; j < n; j++) {
            double dx = p[j].x - p[i].x, dy = p[j].y - p[i].y, dz = p[j].z - p[i].z;
            double inv = 1.0 / sqrt(dx * dx + dy * dy + dz * dz + 0.01);
            double s = p[j].w * inv * inv * inv;
            ax += dx * s, ay += dy * s, az += dz * s;
        }
        if (fabs(ax * dt - out[i].x) > 1e-3 * fabs(ax * dt) + 1e-4 ||
            fabs(az * dt - out[i].z) > 1e-3 * fabs(az * dt) + 1e-4) {
            fprintf(stderr, "nbody: wrong at %d: %f vs %f\n", i, out[i].x, ax * dt);
            return 1;
        }
    }
    printf("nbody ok %d\n", n);
    return 0;
}
