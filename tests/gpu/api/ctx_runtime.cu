// SPDX-License-Identifier: MIT
// The runtime started while a context the program created (cuCtxCreate) is current: a
// cudaMalloc, a <<<>>> launch, a copy back, checked. Prints "ctx_runtime: ok". (Under openmps
// the runtime's context checks then see the local driver's context the token stands for:
// src/client/state/tables.c.) With the argument "hold": then waits 3 s (to look at the process).
// openmps-gpu-link: -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

__global__ void put(int *p, int v) { p[threadIdx.x] = v + threadIdx.x; }

int main(int argc, char **argv)
{
    CUdevice dev;
    CUcontext ctx;
    int *d, h[32];

    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxCreate(&ctx, NULL, 0, dev)) {
        fprintf(stderr, "ctx_runtime: driver setup failed\n");
        return 1;
    }
    fprintf(stderr, "ctx_runtime: created context current, starting the runtime\n");
    if (cudaMalloc(&d, sizeof(h)) != cudaSuccess)
        return 2;
    put<<<1, 32>>>(d, 7);
    if (cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost) != cudaSuccess)
        return 3;
    for (int i = 0; i < 32; i++)
        if (h[i] != 7 + i)
            return 4;
    printf("ctx_runtime: ok\n");
    fflush(stdout);
    if (argc > 1 && !strcmp(argv[1], "hold"))
        sleep(3);
    return 0;
}
