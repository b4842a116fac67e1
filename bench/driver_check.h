/* SPDX-License-Identifier: MIT */
/* What the driver-API benchmark programs (launchers.cu, primitives.cu) share: a check that ends
 * the program naming the call that failed, and an empty kernel's PTX, loaded by the driver's
 * JIT for whatever GPU runs it. */
#ifndef OPENMPS_BENCH_DRIVER_CHECK_H
#define OPENMPS_BENCH_DRIVER_CHECK_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        CUresult rc_ = (x);                                                                        \
        if (rc_ != CUDA_SUCCESS) {                                                                 \
            const char *s_ = "?";                                                                  \
            cuGetErrorName(rc_, &s_);                                                              \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, s_);                        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static const char empty_kernel_ptx[] = ".version 7.0\n.target sm_70\n.address_size 64\n"
                                       ".visible .entry empty()\n{\n ret;\n}\n";

#endif
