// SPDX-License-Identifier: MIT
// Checks shared by the API-family programs of the GPU tier: each failed call or comparison
// prints what differed, naming the program, and exits 1.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda.h>
#include <cuda_runtime.h>

#ifndef PROG
#define PROG "api"
#endif

static inline void api_fail_cu(const char *what, CUresult r, int line)
{
    const char *name = nullptr;
    cuGetErrorName(r, &name);
    fprintf(stderr, "%s: line %d: %s returned %d (%s)\n", PROG, line, what, (int)r,
            name ? name : "?");
    exit(1);
}
static inline void api_fail_rt(const char *what, cudaError_t e, int line)
{
    fprintf(stderr, "%s: line %d: %s returned %d (%s)\n", PROG, line, what, (int)e,
            cudaGetErrorName(e));
    exit(1);
}

// A driver call that must succeed.
#define CU(call)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS)                                                                    \
            api_fail_cu(#call, r_, __LINE__);                                                      \
    } while (0)
// A runtime call that must succeed.
#define RT(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            api_fail_rt(#call, e_, __LINE__);                                                      \
    } while (0)
// A condition that must hold.
#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s: line %d: check failed: %s\n", PROG, __LINE__, #cond);             \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
// Two integers that must be equal, both printed when they differ.
#define EXPECT_EQ(a, b)                                                                            \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_) {                                                                            \
            fprintf(stderr, "%s: line %d: %s is %lld, expected %s = %lld\n", PROG, __LINE__, #a,   \
                    a_, #b, b_);                                                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

// A checksum of bytes (FNV-1a), printed as the deterministic evidence of a result.
static inline unsigned long long api_fnv(const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    unsigned long long h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

// The first index where two float arrays differ by more than tol (relative to max(1,|ref|)),
// or -1; the difference is printed.
static inline long api_compare(const char *what, const float *got, const float *ref, size_t n,
                               float tol)
{
    for (size_t i = 0; i < n; i++) {
        float d = got[i] - ref[i], m = ref[i] < 0 ? -ref[i] : ref[i];
        if (d < 0)
            d = -d;
        if (!(d <= tol * (m > 1 ? m : 1))) {
            fprintf(stderr, "%s: %s differs at %zu: got %.9g, expected %.9g\n", PROG, what, i,
                    (double)got[i], (double)ref[i]);
            return (long)i;
        }
    }
    return -1;
}
#define EXPECT_FLOATS(what, got, ref, n, tol)                                                      \
    do {                                                                                           \
        if (api_compare(what, got, ref, n, tol) >= 0)                                              \
            exit(1);                                                                               \
    } while (0)
