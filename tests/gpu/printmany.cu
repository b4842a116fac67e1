// SPDX-License-Identifier: MIT
// Kernel printf from several clients at once (tests/gpu/run.sh): `printmany N BASE` launches N
// one-thread kernels, each printing "printmany line BASE+i", and synchronizes after each. Run
// alone (no arguments: N = 20) it checks nothing but its exit status; run.sh starts two copies
// under openmps at once and checks that each one's stdout holds exactly its own N lines, in
// order, and none of the other's.
#include <cstdio>
#include <cstdlib>

__global__ void print_line(unsigned v)
{
    printf("printmany line %u\n", v);
}

int main(int argc, char **argv)
{
    unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 20, base = argc > 2 ? (unsigned)atoi(argv[2]) : 0;

    for (unsigned i = 0; i < n; i++) {
        print_line<<<1, 1>>>(base + i);
        cudaError_t e = cudaDeviceSynchronize();
        if (e != cudaSuccess) {
            fprintf(stderr, "printmany: %s\n", cudaGetErrorString(e));
            return 1;
        }
    }
    return 0;
}
