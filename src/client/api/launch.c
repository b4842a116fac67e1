/* SPDX-License-Identifier: MIT */
/* Remote mode, the launch family: kernel launches (plain, extended, cooperative), their
 * configuration checked and their arguments packed by the kernel's parameter layout
 * (api/modules.c keeps the layouts of the kernels this process obtained). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "openmps/ops.h"
#include "../../common/launchattr.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "../shim.h"

/* ------------------------------------------------------------------ launches */

/* The launch limits of the device, checked before a launch is posted so that a
 * bad configuration fails at the launch, as it does natively. */
static CUresult check_config(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned smem)
{
    /* CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK (1), MAX_BLOCK_DIM_X..Z (2-4),
     * MAX_GRID_DIM_X..Z (5-7), MAX_SHARED_MEMORY_PER_BLOCK_OPTIN (97) */
    int lim[8] = {0}, smem_max = 0;
    int dev = om_current_device();

    for (int a = 1; a <= 7; a++)
        if (om_device_attribute(dev, a, &lim[a]) != CUDA_SUCCESS)
            return CUDA_SUCCESS; /* unknown limits: let the server's driver judge */
    if (om_device_attribute(dev, 97, &smem_max) != CUDA_SUCCESS)
        smem_max = 0;
    if (!gx || !gy || !gz || !bx || !by || !bz)
        return CUDA_ERROR_INVALID_VALUE;
    if ((uint64_t)bx * by * bz > (uint64_t)lim[1] || bx > (unsigned)lim[2] ||
        by > (unsigned)lim[3] || bz > (unsigned)lim[4] || gx > (unsigned)lim[5] ||
        gy > (unsigned)lim[6] || gz > (unsigned)lim[7])
        return CUDA_ERROR_INVALID_VALUE;
    if (smem_max > 0 && smem > (unsigned)smem_max)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/*
 * A launch is posted, not waited for: one record with the configuration and
 * the argument bytes laid out as the kernel's parameter layout says, so the
 * server launches from that buffer as is. Its errors come at the next sync.
 */

/* The argument bytes of a launch of f (or a kernel node) laid out as its parameters say, from
 * kernelParams or from extra's buffer: into out (cap bytes) or, for extra, pointed to. */
CUresult om_kernel_args(CUfunction f, void **params, void **extra, void *out, size_t cap,
                        const void **ret_args, size_t *ret_len)
{
    const struct om_layout *l = om_find_layout((uint64_t)(uintptr_t)f);
    const void *args = NULL;
    size_t args_len = 0;
    uint8_t *packed = out;

    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    if (extra) {
        for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                args = extra[i + 1];
            else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
                args_len = *(size_t *)extra[i + 1];
            else
                return CUDA_ERROR_INVALID_VALUE;
        }
    } else {
        if (l->total > cap)
            return CUDA_ERROR_INVALID_VALUE;
        memset(packed, 0, l->total);
        for (uint32_t i = 0; i < l->nparams; i++) {
            if (!params || !params[i])
                return CUDA_ERROR_INVALID_VALUE;
            memcpy(packed + l->offsets[2 * i], params[i], l->offsets[2 * i + 1]);
        }
        args = packed;
        args_len = l->total;
    }
    if (args_len > 32768 || (args_len && !args))
        return CUDA_ERROR_INVALID_VALUE;
    /* A buffer shorter than the kernel's parameters is what the driver takes too: NCCL passes a
     * 4 KiB parameter by its bytes in use (CU_LAUNCH_PARAM_BUFFER_SIZE). The server launches with
     * the kernel's whole layout (its checks and replays know that size): the rest is zeros
     * (the driver leaves it undefined). Issue #24: the server refused it, and a later
     * cuStreamSynchronize of NCCL's answered INVALID_VALUE. */
    if (extra && args_len < l->total) {
        if (l->total > cap)
            return CUDA_ERROR_INVALID_VALUE;
        if (args_len)
            memmove(packed, args, args_len);
        memset(packed + args_len, 0, l->total - args_len);
        args = packed;
        args_len = l->total;
    }
    *ret_args = args;
    *ret_len = args_len;
    return CUDA_SUCCESS;
}

static CUresult post_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
                            void **extra, const void *attrs, unsigned nattrs)
{
    uint8_t buf[128 + OM_LAUNCH_ATTRS_MAX * OM_LAUNCH_ATTR_BYTES + 32768];
    struct om_wbuf req = {.p = buf, .cap = sizeof(buf)};
    const void *args = NULL;
    size_t args_len = 0;
    uint8_t packed[32768];

    if (nattrs > OM_LAUNCH_ATTRS_MAX || (nattrs && !attrs))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult cfg = check_config(gx, gy, gz, bx, by, bz, smem);
    if (cfg != CUDA_SUCCESS)
        return cfg; /* synchronously, as the driver reports a bad configuration */
    cfg = om_kernel_args(f, params, extra, packed, sizeof(packed), &args, &args_len);
    if (cfg != CUDA_SUCCESS)
        return cfg;
    CUresult rc = om_managed_push(s);
    if (rc != CUDA_SUCCESS)
        return rc;
    om_put_u64(&req, (uint64_t)(uintptr_t)f);
    om_put_u64(&req, ((uint64_t)gy << 32) | gx);
    om_put_u64(&req, ((uint64_t)bx << 32) | gz);
    om_put_u64(&req, ((uint64_t)bz << 32) | by);
    om_put_u64(&req, smem);
    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    if (!nattrs) {
        om_put_bytes(&req, args, args_len);
        return om_rpost(OM_IDX_cuLaunchKernel, &req);
    }
    om_put_u64(&req, nattrs);
    om_put_bytes(&req, attrs, (size_t)nattrs * OM_LAUNCH_ATTR_BYTES);
    om_put_bytes(&req, args, args_len);
    return om_rpost(OM_IDX_cuLaunchKernelEx, &req);
}

CUresult om_r_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
                             void **extra)
{
    return post_launch(f, gx, gy, gz, bx, by, bz, smem, s, params, extra, NULL, 0);
}

CUresult om_r_cuLaunchKernelEx(const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra)
{
    if (!cfg)
        return CUDA_ERROR_INVALID_VALUE;
    return post_launch(f, cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ, cfg->blockDimX,
                       cfg->blockDimY, cfg->blockDimZ, cfg->sharedMemBytes, cfg->hStream, params,
                       extra, cfg->attrs, cfg->numAttrs);
}

CUresult om_r_cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                        unsigned bx, unsigned by, unsigned bz, unsigned smem,
                                        CUstream s, void **params)
{
    uint8_t attr[OM_LAUNCH_ATTR_BYTES] = {0};
    int one = 1, id = 2; /* CU_LAUNCH_ATTRIBUTE_COOPERATIVE */

    memcpy(attr, &id, sizeof(id));
    memcpy(attr + 8, &one, sizeof(one));
    return post_launch(f, gx, gy, gz, bx, by, bz, smem, s, params, NULL, attr, 1);
}
