/* SPDX-License-Identifier: MIT */
/* The driver test double: device queries of api/remote/devices.tsv. Each answer is made of the
 * arguments it received, so a test sees that they crossed the server unchanged. And two private
 * export tables (at the end). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_INVALID_DEVICE 101
#define CUDA_ERROR_NOT_FOUND 500

int fake_device_count(void);      /* fakecuda.c: the devices CUDA_VISIBLE_DEVICES leaves */
int fake_machine_device(int dev); /* and the machine's device behind one */

static int bad_device(int dev)
{
    return dev < 0 || dev >= fake_device_count();
}

EXPORT int cuDeviceCanAccessPeer(int *can, int dev, int peer)
{
    if (!can)
        return CUDA_ERROR_INVALID_VALUE;
    if (bad_device(dev) || bad_device(peer))
        return CUDA_ERROR_INVALID_DEVICE;
    *can = dev != peer; /* a device is not its own peer */
    return CUDA_SUCCESS;
}

/* The server enables peer access between its devices' contexts at its start. */
EXPORT int cuCtxEnablePeerAccess(void *peer, unsigned flags)
{
    return !peer ? CUDA_ERROR_INVALID_VALUE : flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

EXPORT int cuDeviceComputeCapability(int *major, int *minor, int dev)
{
    if (!major || !minor)
        return CUDA_ERROR_INVALID_VALUE;
    if (bad_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *major = 9;
    *minor = fake_machine_device(dev);
    return CUDA_SUCCESS;
}

/* The bus ids of cuDeviceGetPCIBusId: 0000:1N:00.0 for the machine's device N, found among the
 * devices the process sees. */
EXPORT int cuDeviceGetByPCIBusId(int *dev, const char *bus)
{
    unsigned d = 0;
    char tail[8] = "";

    if (!dev || !bus || sscanf(bus, "0000:%2x:00.%1s", &d, tail) != 2 || d < 0x10)
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < fake_device_count(); i++)
        if (fake_machine_device(i) == (int)d - 0x10) {
            *dev = i;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_DEVICE;
}

EXPORT int cuDeviceGetExecAffinitySupport(int *pi, int type, int dev)
{
    if (!pi || type != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (bad_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *pi = 1;
    return CUDA_SUCCESS;
}

EXPORT int cuDeviceGetLuid(char *luid, unsigned *mask, int dev)
{
    if (!luid || !mask)
        return CUDA_ERROR_INVALID_VALUE;
    if (bad_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    memcpy(luid, "LUID", 4);
    memset(luid + 4, 0x40 + fake_machine_device(dev), 4);
    *mask = 1u << dev;
    return CUDA_SUCCESS;
}

EXPORT int cuDeviceGetP2PAttribute(int *v, int attrib, int src, int dst)
{
    if (!v || attrib < 1 || attrib > 5)
        return CUDA_ERROR_INVALID_VALUE;
    if (bad_device(src) || bad_device(dst))
        return CUDA_ERROR_INVALID_DEVICE;
    *v = attrib * 100 + src * 10 + dst;
    return CUDA_SUCCESS;
}

/* CUdevprop: fourteen ints. */
EXPORT int cuDeviceGetProperties(int *prop, int dev)
{
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    if (bad_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    for (int i = 0; i < 14; i++)
        prop[i] = 1000 * (dev + 1) + i;
    return CUDA_SUCCESS;
}

EXPORT int cuDeviceGetTexture1DLinearMaxWidth(size_t *w, int format, unsigned channels, int dev)
{
    if (!w || (channels != 1 && channels != 2 && channels != 4))
        return CUDA_ERROR_INVALID_VALUE;
    if (bad_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *w = ((size_t)1 << 28) + (size_t)format * 16 + channels;
    return CUDA_SUCCESS;
}

EXPORT int cuDeviceTotalMem(unsigned *bytes, int dev)
{
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (bad_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = 0xfffff000u - (unsigned)dev; /* the v1 call's 32 bits */
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ private export tables
 * Two tables for the export-table tracer's test (OPENMPS_TRACE_TABLES): uuid 01 02 … 10 starts
 * with its size in bytes, then add(a, b), a data slot (a pointer to 42) and mul(a, b); uuid
 * 10 0f … 01 starts with a function (no size header); and the runtime's 263e8860 (below). Any
 * other uuid: CUDA_ERROR_NOT_FOUND. */
static uint64_t table_add(uint64_t a, uint64_t b)
{
    return a + b;
}

static uint64_t table_mul(uint64_t a, uint64_t b)
{
    return a * b;
}

static const int table_datum = 42;
static const void *const sized_table[] = {(const void *)(4 * sizeof(void *)), (void *)table_add,
                                          &table_datum, (void *)table_mul};
static const void *const headless_table[] = {(void *)table_add, (void *)table_mul};

/* 263e8860… (the runtime's context checks): slot 2 writes the context it was given at its
 * second argument, so a test sees what the shim passed on. */
static int table_context_echo(void *ctx, uint64_t *out)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    *out = (uint64_t)(uintptr_t)ctx;
    return CUDA_SUCCESS;
}

static const void *const context_checks[] = {(const void *)(4 * sizeof(void *)), (void *)table_add,
                                             (void *)table_context_echo, (void *)table_mul};
static const unsigned char context_checks_uuid[16] = {
    0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e};

EXPORT int cuGetExportTable(const void **table, const unsigned char *uuid)
{
    unsigned char up[16], down[16];

    if (!table || !uuid)
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < 16; i++) {
        up[i] = (unsigned char)(i + 1);
        down[i] = (unsigned char)(16 - i);
    }
    if (!memcmp(uuid, up, 16))
        *table = sized_table;
    else if (!memcmp(uuid, down, 16))
        *table = headless_table;
    else if (!memcmp(uuid, context_checks_uuid, 16))
        *table = context_checks;
    else
        return CUDA_ERROR_NOT_FOUND;
    return CUDA_SUCCESS;
}
