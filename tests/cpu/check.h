/* SPDX-License-Identifier: MIT */
/* What the CPU driver programs share (the driver-API programs of tests/cpu that tests/ipc runs
 * against the shim, the server and the driver double): the driver's types and constants
 * (include/openmps/cuda_abi.h), the error codes the programs name that it lacks, and the checks.
 *
 *   EXPECT(cond)                    the condition holds
 *   EXPECT_MSG(cond, fmt, ...)      the same, saying more (printf's format and arguments)
 *   OK(call)                        the call returns CUDA_SUCCESS
 *   EXPECT_RC(call, CUDA_ERROR_X)   the call returns exactly CUDA_ERROR_X
 *
 * A failed check prints the file and line, what was checked and what the call returned, on
 * stderr, and exits with status 1 (the test that runs the program reads both). */
#ifndef OM_TESTS_CPU_CHECK_H
#define OM_TESTS_CPU_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "openmps/cuda_abi.h"

/* Codes the driver API documents that the shim and the server do not name (cuda_abi.h). */
enum {
    CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
    CUDA_ERROR_OPERATING_SYSTEM = 304,
    CUDA_ERROR_OUT_OF_RESOURCES = 701,
    CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705,
    CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
    CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
};

#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: EXPECT failed: %s\n", __FILE__, __LINE__, #cond);              \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define EXPECT_MSG(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: EXPECT failed: %s: ", __FILE__, __LINE__, #cond);              \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define EXPECT_RC(call, want)                                                                      \
    do {                                                                                           \
        CUresult rc_ = (call);                                                                     \
        if (rc_ != (want)) {                                                                       \
            fprintf(stderr, "%s:%d: %s returned %d, expected %s (%d)\n", __FILE__, __LINE__,       \
                    #call, (int)rc_, #want, (int)(want));                                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define OK(call) EXPECT_RC(call, CUDA_SUCCESS)

#endif
