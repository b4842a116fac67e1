/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of the devices family (api/remote/devices.tsv has the
 * rest): the device's memory as the calling client may use it. */
#include "../exec.h"
#include "openmps/ops.h"

/* Under the client's device-memory cap (memcap.c) the cap is the device's total. */
CUresult om_x_cuDeviceTotalMem_v2(struct call *c)
{
    uint64_t dev = om_get_u64(&c->in), zero = om_get_u64(&c->in), cap;
    size_t total = 0;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (zero) /* the second argument of the client's two-argument call */
        return CUDA_ERROR_INVALID_VALUE;
    if (dev >= (uint64_t)om_server_ndevices())
        return CUDA_ERROR_INVALID_DEVICE;
    rc = ((CUresult(*)(size_t *, CUdevice))REAL(cuDeviceTotalMem_v2))(&total, (CUdevice)dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    cap = om_memcap_cap(c->s, (int)dev);
    om_put_u64(&c->out, cap && cap < total ? cap : total);
    return CUDA_SUCCESS;
}
