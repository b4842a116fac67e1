/* SPDX-License-Identifier: MIT */
/* The driver test double for the CPU tier: the entry points the control plane uses, no GPU. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Values from the driver API documentation. */
#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_INVALID_DEVICE 101

#define EXPORT __attribute__((visibility("default")))

static int initialized;

/* FAKECUDA_DEVICES: device count (default 1). FAKECUDA_FAIL_INIT=1: cuInit
 * fails with CUDA_ERROR_NO_DEVICE. FAKECUDA_INIT_DELAY_MS: cuInit sleeps. */
static int device_count(void)
{
    const char *v = getenv("FAKECUDA_DEVICES");
    int n = v ? atoi(v) : 1;

    return n < 0 ? 0 : n > 8 ? 8 : n;
}

EXPORT int cuInit(unsigned flags)
{
    const char *delay = getenv("FAKECUDA_INIT_DELAY_MS");

    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (delay)
        usleep((useconds_t)atoi(delay) * 1000);
    if (getenv("FAKECUDA_FAIL_INIT"))
        return CUDA_ERROR_NO_DEVICE;
    initialized = 1;
    return CUDA_SUCCESS;
}

EXPORT int cuDriverGetVersion(int *v)
{
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

EXPORT int cuDeviceGetCount(int *n)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!n)
        return CUDA_ERROR_INVALID_VALUE;
    *n = device_count();
    return CUDA_SUCCESS;
}

EXPORT int cuDeviceGet(int *dev, int ordinal)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

EXPORT int cuDeviceGetName(char *name, int len, int dev)
{
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "openmps fake GPU %d", dev);
    return CUDA_SUCCESS;
}

EXPORT int cuDeviceGetUuid(unsigned char *uuid, int dev)
{
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    for (int i = 0; i < 16; i++)
        uuid[i] = (unsigned char)(0xf0 + i + dev * 0x10);
    return CUDA_SUCCESS;
}

EXPORT int cuDeviceGetPCIBusId(char *bus, int len, int dev)
{
    if (!bus || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(bus, (size_t)len, "0000:%02x:00.0", 0x10 + dev);
    return CUDA_SUCCESS;
}

EXPORT int cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
    static char contexts[8];

    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *ctx = &contexts[dev];
    return CUDA_SUCCESS;
}

EXPORT int cuDevicePrimaryCtxRelease(int dev)
{
    return dev < 0 || dev >= device_count() ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

/* Enough of cuGetProcAddress for the shim's passthrough tests: every name
 * this double exports, at any version. */
EXPORT int cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                               unsigned long long flags, int *status)
{
    Dl_info me;
    void *h = NULL, *p = NULL;

    (void)version;
    (void)flags;
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    if (dladdr((void *)cuInit, &me) && me.dli_fname)
        h = dlopen(me.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (h) {
        Dl_info where;
        p = dlsym(h, symbol);
        /* Only this library's own functions, not the shim's same-named ones. */
        if (p && (!dladdr(p, &where) || where.dli_fbase != me.dli_fbase))
            p = NULL;
        dlclose(h);
    }
    *pfn = p;
    if (status)
        *status = p ? 0 : 1;
    return CUDA_SUCCESS;
}
