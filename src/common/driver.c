/* SPDX-License-Identifier: MIT */
/* Loading the real CUDA driver by path and asking it about devices. */
#include "driver.h"

#include "openmps/cuda_abi.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const om_driver_default_paths[] = {
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "/usr/lib/aarch64-linux-gnu/libcuda.so.1",
    "/usr/lib64/libcuda.so.1",
    "/usr/local/nvidia/lib64/libcuda.so.1",
    "/usr/lib/wsl/lib/libcuda.so.1",
    NULL,
};

static int resolve(struct om_driver *drv, char *err, size_t errlen)
{
#define OM_RESOLVE(name)                                                                           \
    do {                                                                                           \
        *(void **)&drv->name = dlsym(drv->lib, #name);                                             \
        if (!drv->name) {                                                                          \
            snprintf(err, errlen, "the driver %s has no symbol %s", drv->path, #name);             \
            return -ENOENT;                                                                        \
        }                                                                                          \
    } while (0)
    OM_RESOLVE(cuInit);
    OM_RESOLVE(cuDriverGetVersion);
    OM_RESOLVE(cuDeviceGetCount);
    OM_RESOLVE(cuDeviceGet);
    OM_RESOLVE(cuDeviceGetName);
    OM_RESOLVE(cuDeviceGetUuid);
    OM_RESOLVE(cuDeviceGetPCIBusId);
    OM_RESOLVE(cuDevicePrimaryCtxRetain);
    OM_RESOLVE(cuDevicePrimaryCtxRelease);
#undef OM_RESOLVE
    *(void **)&drv->cuDeviceGetAttribute = dlsym(drv->lib, "cuDeviceGetAttribute");
    *(void **)&drv->cuDeviceGetDevResource = dlsym(drv->lib, "cuDeviceGetDevResource");
    *(void **)&drv->cuDevSmResourceSplitByCount = dlsym(drv->lib, "cuDevSmResourceSplitByCount");
    return 0;
}

int om_driver_open(struct om_driver *drv, char *err, size_t errlen)
{
    const char *env = getenv("OPENMPS_DRIVER");
    const char *one[] = {env, NULL};
    const char *const *paths = env && *env ? one : om_driver_default_paths;
    char tried[1024] = "";
    om_cu_result cr;
    int rc;

    memset(drv, 0, sizeof(*drv));
    for (int i = 0; paths[i]; i++) {
        drv->lib = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
        if (drv->lib) {
            snprintf(drv->path, sizeof(drv->path), "%s", paths[i]);
            break;
        }
        if (env && *env)
            snprintf(tried, sizeof(tried), ": %s", dlerror());
    }
    if (!drv->lib) {
        snprintf(err, errlen, "cannot load the CUDA driver (%s)%s",
                 env && *env ? env : "libcuda.so.1 in the usual places; set OPENMPS_DRIVER", tried);
        return -ENOENT;
    }
    rc = resolve(drv, err, errlen);
    if (rc < 0)
        goto fail;
    cr = drv->cuInit(0);
    if (cr != OM_CUDA_SUCCESS) {
        /* A CUDA_VISIBLE_DEVICES that names no device (100) or a device twice (101) is the
         * operator's to fix: say so, with the value (a daemon's passes to its servers). */
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        const char *why = cr == 100 ? "names no device" : cr == 101 ? "names a device twice" : NULL;
        if (vis && why)
            snprintf(err, errlen,
                     "cuInit failed with CUresult %d (driver %s): "
                     "CUDA_VISIBLE_DEVICES=%.200s %s",
                     cr, drv->path, vis, why);
        else
            snprintf(err, errlen, "cuInit failed with CUresult %d (driver %s)", cr, drv->path);
        rc = -EIO;
        goto fail;
    }
    if (drv->cuDriverGetVersion(&drv->version) != OM_CUDA_SUCCESS)
        drv->version = 0;
    return 0;
fail:
    dlclose(drv->lib);
    drv->lib = NULL;
    return rc;
}

void om_driver_close(struct om_driver *drv)
{
    if (drv && drv->lib) {
        dlclose(drv->lib);
        drv->lib = NULL;
    }
}

/* A device's SMs and the chunk a static SM partition is made of: the SM resource's minimum
 * partition size and co-scheduling alignment, the larger (8 SMs on Hopper: docs/driver-facts.md);
 * left 0 where the driver does not tell them. */
static void sm_figures(struct om_driver *drv, om_cu_device dev, struct om_device_info *d)
{
    struct om_CUdevResource res;
    int sms = 0;

    if (drv->cuDeviceGetAttribute &&
        drv->cuDeviceGetAttribute(&sms, 16 /* MULTIPROCESSOR_COUNT */, dev) == OM_CUDA_SUCCESS &&
        sms > 0)
        d->sm_count = (uint32_t)sms;
    memset(&res, 0, sizeof(res));
    if (drv->cuDeviceGetDevResource &&
        drv->cuDeviceGetDevResource(dev, &res, CU_DEV_RESOURCE_TYPE_SM) == OM_CUDA_SUCCESS &&
        res.sm.smCount) {
        unsigned chunk = res.sm.minSmPartitionSize > res.sm.smCoscheduledAlignment
                             ? res.sm.minSmPartitionSize
                             : res.sm.smCoscheduledAlignment;
        unsigned n = 0;
        d->sm_count = res.sm.smCount;
        d->chunk_sms = chunk ? chunk : 1;
        /* the groups a split really gives (the server makes the same split) */
        if (drv->cuDevSmResourceSplitByCount &&
            drv->cuDevSmResourceSplitByCount(NULL, &n, &res, NULL, 0, d->chunk_sms) ==
                OM_CUDA_SUCCESS)
            d->chunks = n < OM_PART_MAX_CHUNKS ? n : OM_PART_MAX_CHUNKS; /* the masks' width */
    }
}

int om_driver_devices(struct om_driver *drv, struct om_device_info *devs, int max, char *err,
                      size_t errlen)
{
    int count = 0;
    om_cu_result cr = drv->cuDeviceGetCount(&count);

    if (cr != OM_CUDA_SUCCESS) {
        snprintf(err, errlen, "cuDeviceGetCount failed with CUresult %d", cr);
        return -EIO;
    }
    if (count > max)
        count = max;
    for (int i = 0; i < count; i++) {
        struct om_device_info *d = &devs[i];
        om_cu_device dev;
        memset(d, 0, sizeof(*d));
        d->ordinal = (uint32_t)i;
        if ((cr = drv->cuDeviceGet(&dev, i)) != OM_CUDA_SUCCESS ||
            (cr = drv->cuDeviceGetName(d->name, sizeof(d->name), dev)) != OM_CUDA_SUCCESS ||
            (cr = drv->cuDeviceGetUuid(d->uuid, dev)) != OM_CUDA_SUCCESS ||
            (cr = drv->cuDeviceGetPCIBusId(d->pci_bus_id, sizeof(d->pci_bus_id), dev)) !=
                OM_CUDA_SUCCESS) {
            snprintf(err, errlen, "querying device %d failed with CUresult %d", i, cr);
            return -EIO;
        }
        d->name[sizeof(d->name) - 1] = '\0';
        d->pci_bus_id[sizeof(d->pci_bus_id) - 1] = '\0';
        sm_figures(drv, dev, d);
    }
    return count;
}

void om_format_uuid(const uint8_t u[16], char *buf, size_t cap)
{
    snprintf(buf, cap, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
}
