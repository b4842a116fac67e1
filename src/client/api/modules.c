/* SPDX-License-Identifier: MIT */
/* Remote mode, the client's hand-written part of the modules family: occupancy (the block-size
 * search that calls the program's callback), cluster occupancy, and the queries of modules,
 * libraries, kernels and functions that the client answers or marshals itself. */
#define _GNU_SOURCE
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
