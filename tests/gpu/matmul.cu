// SPDX-License-Identifier: MIT
// A tiled matrix product in shared memory, checked against the CPU.
#include <cmath>
#include <cstdio>
#include <vector>

#define TILE 16

__global__ void matmul(const float *a, const float *b, float *c, int n)
{
    __shared__ float ta[TILE][TILE], tb[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0;
    for (int t = 0; t < n / TILE; t++) {
        ta[threadIdx.y][threadIdx.x] = a[row * n + t * TILE + threadIdx.x];
        tb[threadIdx.y][threadIdx.x] = b[(t * TILE + threadIdx.y) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            sum += ta[threadIdx.y][k] * tb[k][threadIdx.x];
        __syncthreads();
    }
    c[row * n + col] = sum;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "matmul: %s failed: %s\n", #call, cudaGetErrorString(e_));            \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main()
{
    const int n = 256;
    std::vector<float> a(n * n), b(n * n), c(n * n);
    float *da, *db, *dc;

    for (int i = 0; i < n * n; i++)
        a[i] = (float)(i % 17) / 17.0f, b[i] = (float)(i % 13) / 13.0f;
    CHECK(cudaMalloc(&da, n * n * sizeof(float)));
    CHECK(cudaMalloc(&db, n * n * sizeof(float)));
    CHECK(cudaMalloc(&dc, n * n * sizeof(float)));
    CHECK(cudaMemcpy(da, a.data(), n * n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b.data(), n * n * sizeof(float), cudaMemcpyHostToDevice));
    matmul<<<dim3(n / TILE, n / TILE), dim3(TILE, TILE)>>>(da, db, dc, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(c.data(), dc, n * n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i += 7)
        for (int j = 0; j < n; j += 5) {
            double ref = 0;
            for (int k = 0; k < n; k++)
                ref += (double)a[i * n + k] * b[k * n + j];
            if (fabs(ref - c[i * n + j]) > 1e-3 * fabs(ref) + 1e-3) {
                fprintf(stderr, "matmul: wrong at %d,%d: %f vs %f\n", i, j, c[i * n + j], ref);
                return 1;
            }
        }
    printf("matmul ok %d\n", n);
    return 0;
}
