/* SPDX-License-Identifier: MIT */
/* The driver test double: the legacy family (api/remote/legacy.tsv). The server's entries
 * (atomics capabilities, RDMA flush) answer from their arguments; the passthrough ones (tensor
 * maps, logs) are called by the client's own driver and record in FAKECUDA_LEGACY_LOG that they
 * were, with the process that called them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_INVALID_DEVICE 101

static void legacy_log(const char *what, unsigned long long a, unsigned long long b)
{
    const char *path = getenv("FAKECUDA_LEGACY_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;

    if (f) {
        fprintf(f, "%s %d %llx %llx\n", what, (int)getpid(), a, b);
        fclose(f);
    }
}

static int bad_device(int dev)
{
    const char *v = getenv("FAKECUDA_DEVICES");
    return dev < 0 || dev >= (v ? atoi(v) : 1);
}

/* capabilities[i] = 0x100 * (operation + 1) + dev: the answer says what crossed. */
EXPORT int cuDeviceGetHostAtomicCapabilities(unsigned *caps, const int *ops, unsigned n, int dev)
{
    if (bad_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (n && (!caps || !ops))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++) {
        if (ops[i] < 0 || ops[i] > 12)
            return CUDA_ERROR_INVALID_VALUE;
        caps[i] = 0x100u * (unsigned)(ops[i] + 1) + (unsigned)dev;
    }
    return CUDA_SUCCESS;
}

EXPORT int cuDeviceGetP2PAtomicCapabilities(unsigned *caps, const int *ops, unsigned n, int src,
                                            int dst)
{
    if (bad_device(src) || bad_device(dst))
        return CUDA_ERROR_INVALID_DEVICE;
    if (n && (!caps || !ops))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++) {
        if (ops[i] < 0 || ops[i] > 12)
            return CUDA_ERROR_INVALID_VALUE;
        caps[i] = 0x10000u + 0x100u * (unsigned)(ops[i] + 1) + (unsigned)(src * 16 + dst);
    }
    return CUDA_SUCCESS;
}

EXPORT int cuFlushGPUDirectRDMAWrites(int target, int scope)
{
    if (target != 0 || (scope != 100 && scope != 200))
        return CUDA_ERROR_INVALID_VALUE;
    legacy_log("cuFlushGPUDirectRDMAWrites", (unsigned)target, (unsigned)scope);
    return CUDA_SUCCESS;
}

/* Tensor maps: the 128-byte descriptor holds the address, the rank and the data type. */
EXPORT int cuTensorMapEncodeTiled(void *map, int type, unsigned rank, void *addr,
                                  const uint64_t *dim, const uint64_t *strides, const unsigned *box,
                                  const unsigned *estrides, int interleave, int swizzle, int l2,
                                  int oob)
{
    (void)strides, (void)box, (void)estrides, (void)interleave, (void)swizzle, (void)l2, (void)oob;
    if (!map || ((uintptr_t)map & 63) || rank == 0 || rank > 5 || !dim || ((uintptr_t)addr & 15))
        return CUDA_ERROR_INVALID_VALUE;
    memset(map, 0, 128);
    memcpy(map, &addr, 8);
    memcpy((char *)map + 8, &rank, 4);
    memcpy((char *)map + 12, &type, 4);
    legacy_log("cuTensorMapEncodeTiled", (uintptr_t)addr, rank);
    return CUDA_SUCCESS;
}

EXPORT int cuTensorMapReplaceAddress(void *map, void *addr)
{
    if (!map || ((uintptr_t)map & 63) || ((uintptr_t)addr & 15))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(map, &addr, 8);
    legacy_log("cuTensorMapReplaceAddress", (uintptr_t)addr, 0);
    return CUDA_SUCCESS;
}

EXPORT int cuLogsCurrent(unsigned *iterator, unsigned flags)
{
    if (!iterator || flags)
        return CUDA_ERROR_INVALID_VALUE;
    *iterator = 0x10c5;
    legacy_log("cuLogsCurrent", 0, 0);
    return CUDA_SUCCESS;
}
