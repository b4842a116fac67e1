#include <cstdio>
__global__ void talk(int v){ printf("hello %d\n", v); }
__global__ void quiet(int *p){ p[threadIdx.x] = 1; }
