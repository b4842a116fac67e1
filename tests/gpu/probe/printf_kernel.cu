// SPDX-License-Identifier: MIT
// Diagnostic (GPU machine): a kernel that printf()s, for stdio_probe.c.
#include <cstdio>
__global__ void hello(int v) { printf("kernel says %d from thread %d\n", v, threadIdx.x); }
int main()
{
    printf("host before\n");
    fflush(stdout);
    hello<<<1, 2>>>(7);
    cudaDeviceSynchronize();
    printf("host after\n");
    return 0;
}
