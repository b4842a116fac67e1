// SPDX-License-Identifier: MIT
// A kernel that writes out of bounds: the error reaches this program (at its next
// synchronisation), natively as under openmps, whose server then restarts its context.
#include <cstdio>

__global__ void oob(int *p)
{
    p[1ll << 40] = 1; // far outside any allocation
}

int main()
{
    int *d;
    if (cudaMalloc(&d, sizeof(int)) != cudaSuccess)
        return 1;
    oob<<<1, 1>>>(d);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaErrorIllegalAddress) {
        fprintf(stderr, "fault: expected an illegal address, got %s\n", cudaGetErrorString(e));
        return 1;
    }
    printf("fault reported: %s\n", cudaGetErrorName(e));
    return 0;
}
