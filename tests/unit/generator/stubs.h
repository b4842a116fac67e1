/* SPDX-License-Identifier: MIT */
/* For check_generator.py's compile of the test table's outputs: the layouts of the structs the
 * test table marshals that cuda_abi.h does not declare (stand-ins: only their sizes matter),
 * and the check its in:testmemset row names. */
#define _GNU_SOURCE /* as fuzz_exec.c, which this precedes */
#include "src/common/gen/types.h"
struct om_CUDA_MEMSET_NODE_PARAMS {
    unsigned long long dst;
    size_t pitch;
    unsigned value, elementSize;
    size_t width, height;
};
struct om_CUctxCreateParams {
    void *a;
    int n;
    void *b;
};
struct om_CUgraphEdgeData {
    unsigned char a, b, c, d[5];
};
struct call;
CUresult om_check_testmemset(struct call *c, CUDA_MEMSET_NODE_PARAMS *p);
