/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of the devices family (api/remote/devices.tsv has the
 * rest): the device's memory as the calling client may use it. */
#include "../exec.h"
#include "openmps/ops.h"

/* Under the client's device-memory cap (memcap.c) the cap is the device's total. */
/* attribute, device: the driver's value, but the SM count is the client's share's (share.c). */
CUresult om_x_cuDeviceGetAttribute(struct call *c)
{
    uint64_t attrib = om_get_u64(&c->in), cdev = om_get_u64(&c->in);
    int v = 0, dev = om_dev_in(c->s, cdev);
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (attrib > 1023)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    rc = ((CUresult(*)(int *, int, CUdevice))REAL(cuDeviceGetAttribute))(&v, (int)attrib,
                                                                         (CUdevice)dev);
    if (rc == CUDA_SUCCESS && attrib == 16) { /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
        unsigned sms = om_share_client_sms(c->s, dev);
        if (sms && sms < (unsigned)v)
            v = (int)sms;
    }
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, (uint64_t)(int64_t)v);
    return rc;
}

CUresult om_x_cuDeviceTotalMem_v2(struct call *c)
{
    uint64_t cdev = om_get_u64(&c->in), zero = om_get_u64(&c->in), cap;
    int dev = om_dev_in(c->s, cdev);
    size_t total = 0;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (zero) /* the second argument of the client's two-argument call */
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    rc = ((CUresult(*)(size_t *, CUdevice))REAL(cuDeviceTotalMem_v2))(&total, (CUdevice)dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    cap = om_memcap_cap(c->s, dev);
    om_put_u64(&c->out, cap && cap < total ? cap : total);
    return CUDA_SUCCESS;
}
