/* SPDX-License-Identifier: MIT */
/* Remote mode, the occupancy family (api/remote/occupancy.tsv): occupancy queries, answered from a
 * per-kernel cache where the answer cannot change. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/wire.h"
#include "openmps/ops.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "module.h"
#include "../shim.h"

/* ------------------------------------------------------------------ occupancy */

/* Device attributes (CUdevice_attribute) and the function attribute the search needs. */
#define ATTR_MAX_THREADS_PER_BLOCK 1
#define ATTR_WARP_SIZE 10
#define ATTR_MULTIPROCESSOR_COUNT 16
#define FUNC_ATTR_MAX_THREADS_PER_BLOCK 0
#define OCCUPANCY_FLAGS 0x1u /* CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE */

/*
 * Answers kept, by function, block size, dynamic shared size and flags: PyTorch asks the same
 * question before some launches (2 round trips per ResNet-18 batch). The answer depends on the
 * function's build, the device and the function's carveout, which this client changes only
 * through cuFuncSetAttribute (that empties it, as an unload does). A CUkernel passed as a
 * function answers for the current device, so the key has the device.
 */
#define OCC_SLOTS 256 /* a power of two */

static struct occ_entry {
    uint64_t func, smem;
    int block;
    unsigned flags;
    int dev;
    int n;
    bool valid;
} occ_cache[OCC_SLOTS];
static pthread_mutex_t occ_lock = PTHREAD_MUTEX_INITIALIZER;

static struct occ_entry *occ_slot(uint64_t func, int block, uint64_t smem, unsigned flags, int dev)
{
    uint64_t h = ((func >> 4) ^ (uint64_t)block << 40 ^ smem << 8 ^ flags ^ (uint64_t)dev << 56) *
                 0x9E3779B97F4A7C15ull;

    return &occ_cache[(h >> 32) & (OCC_SLOTS - 1)];
}

void om_occupancy_forget(void)
{
    pthread_mutex_lock(&occ_lock);
    memset(occ_cache, 0, sizeof(occ_cache));
    pthread_mutex_unlock(&occ_lock);
}

CUresult om_r_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func,
                                                                   int blockSize,
                                                                   size_t dynamicSMemSize,
                                                                   unsigned int flags)
{
    uint64_t f = (uint64_t)(uintptr_t)func;
    int dev = om_shim.client.ndevices > 1 ? om_current_device() : 0;
    struct occ_entry *e = occ_slot(f, blockSize, dynamicSMemSize, flags, dev);
    bool hit;
    CUresult rc;

    pthread_mutex_lock(&occ_lock);
    hit = numBlocks && e->valid && e->func == f && e->block == blockSize &&
          e->smem == dynamicSMemSize && e->flags == flags && e->dev == dev;
    if (hit)
        *numBlocks = e->n;
    pthread_mutex_unlock(&occ_lock);
    if (hit)
        return CUDA_SUCCESS;
    rc = om_rpc_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize,
                                                                     dynamicSMemSize, flags);
    if (rc == CUDA_SUCCESS && numBlocks && f) {
        pthread_mutex_lock(&occ_lock);
        *e = (struct occ_entry){f, dynamicSMemSize, blockSize, flags, dev, *numBlocks, true};
        pthread_mutex_unlock(&occ_lock);
    }
    return rc;
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
    if ((rc = om_ctx_get_device(NULL, &dev)) != CUDA_SUCCESS)
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
