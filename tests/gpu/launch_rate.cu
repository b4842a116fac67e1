// SPDX-License-Identifier: MIT
// The cost of an asynchronous empty-kernel launch (B2): 100 000 launches, then one sync.
#include <chrono>
#include <cstdio>

__global__ void empty() {}

int main()
{
    const int n = 100000;
    empty<<<1, 1>>>();
    if (cudaDeviceSynchronize() != cudaSuccess)
        return 1;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; i++)
        empty<<<1, 1>>>();
    if (cudaDeviceSynchronize() != cudaSuccess)
        return 1;
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                    .count();
    printf("launch_us %.3f\n", us / n);
    return 0;
}
