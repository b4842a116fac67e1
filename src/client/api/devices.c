/* SPDX-License-Identifier: MIT */
/* Remote mode, the devices family's hand-written part (api/remote/devices.tsv has the rest):
 * the device count and ordinals as the client sees them, device attributes, each asked of
 * the server once per device, and the device's memory. */
#include <limits.h>

#include "openmps/cuda_abi.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "../shim.h"

CUresult om_r_cuDeviceGetCount(int *count)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = (int)om_shim.client.ndevices;
    return CUDA_SUCCESS;
}

CUresult om_r_cuDeviceGet(CUdevice *dev, int ordinal)
{
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= (int)om_shim.client.ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

/* The runtime reads ~100 attributes at start: each is asked once per device. */
#define MAX_ATTR 160
static int attr_cache[OM_MAX_DEVICES][MAX_ATTR];
static unsigned char attr_known[OM_MAX_DEVICES][MAX_ATTR];

/*
 * The SM count follows the client's SM share, which the operator may change while it runs
 * (set_active_thread_percentage, a namespace's limits), and its lane: frameworks ask for it
 * per operation (PyTorch about 4 times per ResNet-18 batch), each a round trip. It is kept with
 * the server's limits_epoch read before asking, and asked again once the word has moved
 * (om_share_sms_changed). Each device's entry is one word, (epoch << 32) | (count + 1), 0
 * when none, so that threads that race store whole entries.
 */
static uint64_t sm_cache[OM_MAX_DEVICES];

static uint32_t limits_epoch(void)
{
    const uint32_t *w = om_shim.client.limits_epoch;

    return w ? __atomic_load_n(w, __ATOMIC_ACQUIRE) : 0; /* 0: never kept */
}

CUresult om_r_cuDeviceGetAttribute(int *value, int attrib, CUdevice dev)
{
    int v = 0;
    CUresult rc;
    uint32_t epoch = 0;

    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= (int)om_shim.client.ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    /* Managed memory is emulated without concurrent access (docs/architecture.md, "The data
     * plane"). */
    if (attrib == CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) {
        *value = 0;
        return CUDA_SUCCESS;
    }
    if (attrib >= 0 && attrib < MAX_ATTR &&
        __atomic_load_n(&attr_known[dev][attrib], __ATOMIC_ACQUIRE)) {
        *value = attr_cache[dev][attrib];
        return CUDA_SUCCESS;
    }
    if (attrib == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT && (epoch = limits_epoch())) {
        uint64_t e = __atomic_load_n(&sm_cache[dev], __ATOMIC_RELAXED);
        if (e && (uint32_t)(e >> 32) == epoch) {
            *value = (int)(uint32_t)e - 1;
            return CUDA_SUCCESS;
        }
    }
    rc = om_rpc_cuDeviceGetAttribute(&v, attrib, dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    *value = v;
    if (attrib == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) {
        if (epoch && v >= 0) /* kept under the epoch read before asking: a change meanwhile
                              * moved the word, and the next query asks again */
            __atomic_store_n(&sm_cache[dev], (uint64_t)epoch << 32 | ((uint64_t)v + 1),
                             __ATOMIC_RELAXED);
    } else if (attrib >= 0 && attrib < MAX_ATTR) {
        attr_cache[dev][attrib] = *value;
        __atomic_store_n(&attr_known[dev][attrib], 1, __ATOMIC_RELEASE);
    }
    return CUDA_SUCCESS;
}

CUresult om_device_attribute(int dev, int attrib, int *value)
{
    return om_r_cuDeviceGetAttribute(value, attrib, dev);
}

/* The device's memory as this client may use it: under a device-memory cap the server answers
 * the cap (src/server/memcap.c). */
CUresult om_r_cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    return om_rpc_cuDeviceTotalMem_v2(bytes, dev);
}

/* The 32-bit form: sizes above 4 GiB - 1 are reported as 4 GiB - 1 (src/client/api/v1.c does
 * the same for cuMemGetInfo). */
CUresult om_r_cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    size_t b = 0;
    CUresult rc;

    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    rc = om_r_cuDeviceTotalMem_v2(&b, dev);
    if (rc == CUDA_SUCCESS)
        *bytes = b > UINT_MAX ? UINT_MAX : (unsigned int)b;
    return rc;
}

/* ------------------------------------------------------------------ bus ids */

/* The server's ordinal for a bus id: a device this client sees, or none. */
CUresult om_r_cuDeviceGetByPCIBusId(CUdevice *dev, const char *bus)
{
    CUdevice d = -1;
    CUresult rc = om_rpc_cuDeviceGetByPCIBusId(&d, bus);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (d < 0 || d >= (int)om_shim.client.ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = d;
    return CUDA_SUCCESS;
}
