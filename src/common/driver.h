/* SPDX-License-Identifier: MIT */
/* Loading the real CUDA driver by path and asking it about devices. */
#ifndef OM_DRIVER_H
#define OM_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "openmps/protocol.h"

/* The few driver types the control plane needs; the data plane's table of
 * entry points (api/) brings the rest. Values are the driver's documented ones. */
typedef int om_cu_result;
typedef int om_cu_device;
typedef void *om_cu_context;
#define OM_CUDA_SUCCESS 0

struct om_driver {
    void *lib;
    char path[512];
    int version; /* cuDriverGetVersion */
    om_cu_result (*cuInit)(unsigned);
    om_cu_result (*cuDriverGetVersion)(int *);
    om_cu_result (*cuDeviceGetCount)(int *);
    om_cu_result (*cuDeviceGet)(om_cu_device *, int);
    om_cu_result (*cuDeviceGetName)(char *, int, om_cu_device);
    om_cu_result (*cuDeviceGetUuid)(void *, om_cu_device);
    om_cu_result (*cuDeviceGetPCIBusId)(char *, int, om_cu_device);
    om_cu_result (*cuDevicePrimaryCtxRetain)(om_cu_context *, om_cu_device);
    om_cu_result (*cuDevicePrimaryCtxRelease)(om_cu_device);
    /* Optional (NULL where the driver lacks them): the SM figures of om_device_info. */
    om_cu_result (*cuDeviceGetAttribute)(int *, int, om_cu_device);
    om_cu_result (*cuDeviceGetDevResource)(om_cu_device, void *, int);
    om_cu_result (*cuDevSmResourceSplitByCount)(void *, unsigned *, const void *, void *, unsigned,
                                                unsigned);
};

/* Where NVIDIA's installers put the real libcuda.so.1, NULL-terminated. */
extern const char *const om_driver_default_paths[];

/*
 * Loads the real driver: $OPENMPS_DRIVER when set, else the first of the
 * usual install paths that loads. Never searches by bare name (that could
 * find the openmps shim itself). Calls cuInit(0). On failure returns -errno
 * and writes a sentence into err.
 */
int om_driver_open(struct om_driver *drv, char *err, size_t errlen);
void om_driver_close(struct om_driver *drv);

/* Fills up to max device records (with their SM count and static partition chunk size where
 * the driver tells them). Returns the count or -EIO (err filled). */
int om_driver_devices(struct om_driver *drv, struct om_device_info *devs, int max, char *err,
                      size_t errlen);

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
void om_format_uuid(const uint8_t uuid[16], char *buf, size_t cap);

#endif
