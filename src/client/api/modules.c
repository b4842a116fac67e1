/* SPDX-License-Identifier: MIT */
/* Remote mode, the client's hand-written part of the modules family: occupancy (the block-size
 * search that calls the program's callback), cluster occupancy, and the queries of modules,
 * libraries, kernels and functions that the client answers or marshals itself. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/gen/entries.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "openmps/ops.h"

#define REQ(name, size)                                                                            \
    uint8_t name##_buf[size];                                                                      \
    struct om_wbuf name = {.p = name##_buf, .cap = sizeof(name##_buf)}

/* ------------------------------------------------------------------ occupancy */

/* Device attributes (CUdevice_attribute) and the function attribute the search needs. */
#define ATTR_MAX_THREADS_PER_BLOCK 1
#define ATTR_WARP_SIZE 10
#define ATTR_MULTIPROCESSOR_COUNT 16
#define FUNC_ATTR_MAX_THREADS_PER_BLOCK 0
#define OCCUPANCY_FLAGS 0x1u /* CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE */

CUresult om_r_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func,
                                                                   int blockSize,
                                                                   size_t dynamicSMemSize,
                                                                   unsigned int flags)
{
    return om_rpc_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize,
                                                                       dynamicSMemSize, flags);
}

/*
 * The block size that keeps the most threads resident on one multiprocessor, searched here in
 * the client because the dynamic shared memory of a block size may come from the program's
 * callback, a function of this process (the server cannot call it).
 *
 * The search (written from the driver's documented semantics):
 *   limit  = the smallest of the function's MAX_THREADS_PER_BLOCK, the device's, and
 *            blockSizeLimit when it is not 0;
 *   candidates, largest first: limit itself, then each multiple of the warp size below it;
 *   for each candidate b: smem = callback ? callback(b) : dynamicSMemSize;
 *            n = the server's cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(b, smem);
 *            resident threads n * b; a candidate replaces the best only when it keeps strictly
 *            more threads resident, so among equals the largest block size wins;
 *   answer: *blockSize = the best b, *minGridSize = its n times the multiprocessor count (the
 *           smallest grid that fills every multiprocessor); both 0 when no candidate fits.
 * One round trip per candidate (at most limit / warp size + 1).
 */
static CUresult potential_block_size(int *minGridSize, int *blockSize, CUfunction func,
                                     CUoccupancyB2DSize b2d, size_t dynamicSMemSize,
                                     int blockSizeLimit, unsigned int flags)
{
    int dev = 0, fmax = 0, dmax = 0, warp = 0, sms = 0, limit, best = 0, best_n = 0;
    long long best_threads = 0;
    CUresult rc;

    if (!minGridSize || !blockSize || blockSizeLimit < 0 || (flags & ~OCCUPANCY_FLAGS))
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = om_r_cuCtxGetDevice(&dev)) != CUDA_SUCCESS)
        return rc;
    if ((rc = om_r_cuFuncGetAttribute(&fmax, FUNC_ATTR_MAX_THREADS_PER_BLOCK, func)) !=
            CUDA_SUCCESS ||
        (rc = om_device_attribute(dev, ATTR_MAX_THREADS_PER_BLOCK, &dmax)) != CUDA_SUCCESS ||
        (rc = om_device_attribute(dev, ATTR_WARP_SIZE, &warp)) != CUDA_SUCCESS ||
        (rc = om_device_attribute(dev, ATTR_MULTIPROCESSOR_COUNT, &sms)) != CUDA_SUCCESS)
        return rc;
    limit = fmax < dmax ? fmax : dmax;
    if (blockSizeLimit > 0 && blockSizeLimit < limit)
        limit = blockSizeLimit;
    if (warp <= 0)
        warp = 32;
    for (int b = limit; b > 0; b = b % warp ? b - b % warp : b - warp) {
        size_t smem = b2d ? b2d(b) : dynamicSMemSize;
        int n = 0;
        rc = om_r_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&n, func, b, smem, flags);
        if (rc != CUDA_SUCCESS)
            return rc;
        if ((long long)n * b > best_threads) {
            best_threads = (long long)n * b;
            best = b;
            best_n = n;
        }
    }
    *blockSize = best;
    *minGridSize = best_n * (sms > 0 ? sms : 1);
    return CUDA_SUCCESS;
}

CUresult om_r_cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
                                               CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                               size_t dynamicSMemSize, int blockSizeLimit)
{
    return potential_block_size(minGridSize, blockSize, func, blockSizeToDynamicSMemSize,
                                dynamicSMemSize, blockSizeLimit, 0);
}

CUresult
om_r_cuOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize, int *blockSize, CUfunction func,
                                               CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                               size_t dynamicSMemSize, int blockSizeLimit,
                                               unsigned int flags)
{
    return potential_block_size(minGridSize, blockSize, func, blockSizeToDynamicSMemSize,
                                dynamicSMemSize, blockSizeLimit, flags);
}

/* A launch attribute (CUlaunchAttribute) travels as its 72 bytes; at most 16 of them. */
#define LAUNCH_ATTR_BYTES 72
#define MAX_LAUNCH_ATTRS 16

/* Cluster occupancy: the function and the launch configuration as a launch sends them (the
 * stream and the attributes are checked by the server), one int back. */
static CUresult cluster_call(int index, int *out, CUfunction func, const CUlaunchConfig *cfg)
{
    REQ(req, 64 + MAX_LAUNCH_ATTRS * LAUNCH_ATTR_BYTES);
    uint64_t v = 0;
    uint32_t got = 0;
    CUresult rc;

    if (!out || !cfg || cfg->numAttrs > MAX_LAUNCH_ATTRS || (cfg->numAttrs && !cfg->attrs))
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)func);
    om_put_u64(&req, ((uint64_t)cfg->gridDimY << 32) | cfg->gridDimX);
    om_put_u64(&req, ((uint64_t)cfg->blockDimX << 32) | cfg->gridDimZ);
    om_put_u64(&req, ((uint64_t)cfg->blockDimZ << 32) | cfg->blockDimY);
    om_put_u64(&req, cfg->sharedMemBytes);
    om_put_u64(&req, (uint64_t)(uintptr_t)cfg->hStream);
    om_put_u64(&req, cfg->numAttrs);
    if (cfg->numAttrs)
        om_put_bytes(&req, cfg->attrs, (size_t)cfg->numAttrs * LAUNCH_ATTR_BYTES);
    rc = om_rcall(index, &req, &v, sizeof(v), &got);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (got != sizeof(v))
        return CUDA_ERROR_UNKNOWN;
    *out = (int)(int64_t)v;
    return CUDA_SUCCESS;
}

CUresult om_r_cuOccupancyMaxPotentialClusterSize(int *clusterSize, CUfunction func,
                                                 const CUlaunchConfig *config)
{
    return cluster_call(OM_IDX_cuOccupancyMaxPotentialClusterSize, clusterSize, func, config);
}

CUresult om_r_cuOccupancyMaxActiveClusters(int *numClusters, CUfunction func,
                                           const CUlaunchConfig *config)
{
    return cluster_call(OM_IDX_cuOccupancyMaxActiveClusters, numClusters, func, config);
}

/* ------------------------------------------------------------------ JIT options, files */

/* CUjit_option values whose answers the driver writes into the program's arrays. */
#define JIT_WALL_TIME 2
#define JIT_INFO_LOG_BUFFER 3
#define JIT_INFO_LOG_BUFFER_SIZE_BYTES 4
#define JIT_ERROR_LOG_BUFFER 5
#define JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6

/*
 * The answers a load gives through its JIT options: the server loads the image without the
 * program's options (its arrays hold pointers of this process), so no log is written: each log
 * buffer gets an empty string, each log size (an OUT value, written into the option's slot as
 * the driver does) 0, the wall time 0 ms. Without this a program that prints the logs would
 * read what its buffers held before.
 */
void om_jit_options_answer(unsigned n, const int *o, void **v)
{
    if (!o || !v)
        return;
    for (unsigned i = 0; i < n; i++) {
        unsigned size = 0;
        int other = o[i] == JIT_INFO_LOG_BUFFER    ? JIT_INFO_LOG_BUFFER_SIZE_BYTES
                    : o[i] == JIT_ERROR_LOG_BUFFER ? JIT_ERROR_LOG_BUFFER_SIZE_BYTES
                                                   : -1;

        if (other >= 0 && v[i]) {
            for (unsigned j = 0; j < n; j++)
                if (o[j] == other)
                    size = (unsigned)(uintptr_t)v[j];
            if (size > 0)
                ((char *)v[i])[0] = '\0';
        }
    }
    for (unsigned i = 0; i < n; i++) {
        if (o[i] == JIT_INFO_LOG_BUFFER_SIZE_BYTES || o[i] == JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
            v[i] = (void *)(uintptr_t)0;
        } else if (o[i] == JIT_WALL_TIME) {
            float ms = 0.0f;
            v[i] = NULL;
            memcpy(&v[i], &ms, sizeof(ms));
        }
    }
}

#define CUDA_ERROR_FILE_NOT_FOUND 301
#define FILE_MAX (1u << 30)

/* A module file, read by this process (the server never opens a client's path), with a NUL
 * after its bytes (a PTX image ends at its NUL). NULL with *rc set when it cannot be read. */
static char *read_module_file(const char *path, CUresult *rc)
{
    FILE *f;
    char *buf = NULL;
    size_t len = 0, cap = 0;

    if (!path) {
        *rc = CUDA_ERROR_INVALID_VALUE;
        return NULL;
    }
    if (!(f = fopen(path, "rb"))) {
        *rc = CUDA_ERROR_FILE_NOT_FOUND;
        return NULL;
    }
    for (;;) {
        size_t got;
        if (cap - len < 2) {
            char *more;
            cap = cap ? cap * 2 : 65536;
            if (cap > FILE_MAX + 2u || !(more = realloc(buf, cap))) {
                free(buf);
                fclose(f);
                *rc = cap > FILE_MAX + 2u ? CUDA_ERROR_INVALID_IMAGE : CUDA_ERROR_OUT_OF_MEMORY;
                return NULL;
            }
            buf = more;
        }
        got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0)
            break;
    }
    bool failed = ferror(f) != 0;
    fclose(f);
    if (failed || len == 0) {
        free(buf);
        *rc = failed ? CUDA_ERROR_FILE_NOT_FOUND : CUDA_ERROR_INVALID_IMAGE;
        return NULL;
    }
    buf[len] = '\0';
    *rc = CUDA_SUCCESS;
    return buf;
}

CUresult om_r_cuModuleLoad(CUmodule *module, const char *fname)
{
    CUresult rc;
    char *image;

    if (!module)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(image = read_module_file(fname, &rc)))
        return rc;
    rc = om_r_cuModuleLoadData(module, image);
    free(image);
    return rc;
}

CUresult om_r_cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
                                    CUjit_option *jitOptions, void **jitOptionsValues,
                                    unsigned int numJitOptions, CUlibraryOption *libraryOptions,
                                    void **libraryOptionValues, unsigned int numLibraryOptions)
{
    CUresult rc;
    char *image;

    if (!library)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(image = read_module_file(fileName, &rc)))
        return rc;
    rc = om_r_cuLibraryLoadData(library, image, jitOptions, jitOptionsValues, numJitOptions,
                                libraryOptions, libraryOptionValues, numLibraryOptions);
    free(image);
    return rc;
}

/* ------------------------------------------------------------------ kernels' own queries */

CUresult om_r_cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
                                   size_t *paramSize)
{
    return om_kernel_param((uint64_t)(uintptr_t)kernel, paramIndex, paramOffset, paramSize);
}

CUresult om_r_cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
                                 size_t *paramSize)
{
    return om_kernel_param((uint64_t)(uintptr_t)func, paramIndex, paramOffset, paramSize);
}

#define FUNCTION_LOADING_STATE_LOADED 1

CUresult om_r_cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction function)
{
    size_t off, size;

    if (!state)
        return CUDA_ERROR_INVALID_VALUE;
    /* A handle this process obtained (its layout is known); the server loads eagerly. */
    if (om_kernel_param((uint64_t)(uintptr_t)function, SIZE_MAX, &off, &size) ==
        CUDA_ERROR_INVALID_HANDLE)
        return CUDA_ERROR_INVALID_HANDLE;
    *state = FUNCTION_LOADING_STATE_LOADED;
    return CUDA_SUCCESS;
}

CUresult om_r_cuFuncLoad(CUfunction function)
{
    size_t off, size;

    if (om_kernel_param((uint64_t)(uintptr_t)function, SIZE_MAX, &off, &size) ==
        CUDA_ERROR_INVALID_HANDLE)
        return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS; /* already loaded: the server loads every image eagerly */
}

CUresult om_r_cuFuncSetSharedMemConfig(CUfunction hfunc, CUsharedconfig config)
{
    size_t off, size;

    if (config < 0 || config > 2) /* CU_SHARED_MEM_CONFIG_DEFAULT..EIGHT_BYTE_BANK_SIZE */
        return CUDA_ERROR_INVALID_VALUE;
    if (om_kernel_param((uint64_t)(uintptr_t)hfunc, SIZE_MAX, &off, &size) ==
        CUDA_ERROR_INVALID_HANDLE)
        return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS; /* a preference without effect since Volta (the driver ignores it) */
}
