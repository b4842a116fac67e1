/* SPDX-License-Identifier: MIT */
/* Entry points the shim answers in every mode: cuInit and cuGetProcAddress. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/gen/entries.h"
#include "gen/procaddr.h"
#include "remote.h"
#include "shim.h"

typedef int (*init_fn)(unsigned);
typedef int (*gpa_fn)(const char *, void **, int, uint64_t);
typedef int (*gpa2_fn)(const char *, void **, int, uint64_t, int *);

typedef int (*count_fn)(int *);
typedef int (*device_fn)(int *, int);
typedef int (*uuid_fn)(unsigned char *, int);

/* The devices the server gives this client, in its order, as CUDA_VISIBLE_DEVICES names them
 * ("GPU-<uuid>,..."), asked of the server (om_fn is remote by now). False when it cannot be asked
 * or the text would not fit. A server on MIG instances is untested: their UUIDs would need the
 * "MIG-" form, which nothing here tells apart (docs/architecture.md, "Private export tables"). */
static bool served_devices_spec(char *buf, size_t len)
{
    int n = 0;
    size_t at = 0;

    buf[0] = '\0';
    if (((count_fn)om_fn[OM_IDX_cuDeviceGetCount])(&n) != OM_CUDA_SUCCESS || n <= 0)
        return false;
    for (int i = 0; i < n; i++) {
        unsigned char u[16];
        int dev, w;
        if (((device_fn)om_fn[OM_IDX_cuDeviceGet])(&dev, i) != OM_CUDA_SUCCESS ||
            ((uuid_fn)om_fn[OM_IDX_cuDeviceGetUuid_v2])(u, dev) != OM_CUDA_SUCCESS)
            return false;
        w = snprintf(buf + at, len - at,
                     "%sGPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                     i ? "," : "", u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9],
                     u[10], u[11], u[12], u[13], u[14], u[15]);
        if (w < 0 || (size_t)w >= len - at)
            return false;
        at += (size_t)w;
    }
    return true;
}

/*
 * Remote mode initialises the local driver too: the runtime's export tables (state/tables.c)
 * come from it. The CUDA runtime checks that driver's devices against the ones the shim answers
 * with and fails every call with cudaErrorSoftwareValidityNotEstablished (103) where they differ
 * (measured on two H200s, the daemon under CUDA_VISIBLE_DEVICES=1 and a client without the
 * variable, or naming its device by ordinal: tests/gpu/multi/daemon_visible.sh). The local driver
 * reads CUDA_VISIBLE_DEVICES at its cuInit, so for that one call the variable names, by UUID,
 * exactly the devices the server gives this client, in its order; then the program's own value
 * (or its absence) is put back. Once per process: later cuInit calls find it done.
 */
static void local_driver_init(void)
{
    static char spec[OM_MAX_DEVICES * 48];
    int (*init)(unsigned) = (init_fn)om_shim.real_fn[OM_IDX_cuInit];
    const char *now = getenv("CUDA_VISIBLE_DEVICES");
    char *saved = NULL;
    bool swap;
    int rc;

    if (!init)
        return;
    swap = served_devices_spec(spec, sizeof(spec)) && (!now || strcmp(now, spec) != 0);
    if (swap && now && !(saved = strdup(now)))
        swap = false;
    if (swap)
        setenv("CUDA_VISIBLE_DEVICES", spec, 1);
    /* It starts a thread of its own (driver 580): not the program's (hostmove.c). */
    om_host_local_driver_begin();
    rc = init(0);
    om_host_local_driver_end();
    if (swap) {
        if (saved)
            setenv("CUDA_VISIBLE_DEVICES", saved, 1);
        else
            unsetenv("CUDA_VISIBLE_DEVICES");
        free(saved);
        om_shim_log("the local driver was initialised with CUDA_VISIBLE_DEVICES=%s", spec);
    }
    if (rc != OM_CUDA_SUCCESS)
        om_shim_log("the local driver's cuInit failed (%d); driver-API calls still work", rc);
}

int om_cuInit(unsigned flags)
{
    static pthread_once_t local_once = PTHREAD_ONCE_INIT;

    om_shim_decide();
    switch (om_shim.mode) {
    case OM_MODE_PASSTHROUGH:
        if (!om_shim.real_fn[OM_IDX_cuInit])
            return OM_CUDA_ERROR_NO_DEVICE;
        return ((init_fn)om_shim.real_fn[OM_IDX_cuInit])(flags);
    case OM_MODE_REMOTE:
        if (flags != 0)
            return OM_CUDA_ERROR_INVALID_VALUE;
        pthread_once(&local_once, local_driver_init);
        return OM_CUDA_SUCCESS;
    case OM_MODE_NO_DEVICE: return om_shim.no_device_rc;
    case OM_MODE_FORKED: return OM_CUDA_ERROR_NOT_INITIALIZED; /* as natively (shim.c) */
    default: return om_shim.failed_rc ? om_shim.failed_rc : OM_CUDA_ERROR_MPS_CONNECTION_FAILED;
    }
}

/* OM_MODE_NO_DEVICE: the entries answer CUDA_ERROR_NO_DEVICE; cuInit and cuGetProcAddress stay
 * ours. OM_MODE_FORKED the same with CUDA_ERROR_NOT_INITIALIZED. */
static int no_device_proc_address(const char *symbol, void **pfn, int version, uint64_t flags,
                                  int *status)
{
    int index = -1, st = om_proc_lookup(symbol, version, flags, &index);

    *pfn = NULL;
    if (st == OM_PROC_SUCCESS)
        *pfn = om_shim.mode == OM_MODE_FORKED ? om_forked_entry(index) : om_no_device_entry(index);
    if (status)
        *status = st;
    return OM_CUDA_SUCCESS;
}

/*
 * The entry the real driver hands out for (symbol, version, flags), from the
 * measured table (api/procaddr.tsv): the row of the highest first version
 * <= version. Returns OM_PROC_SUCCESS with *ret_index, or the query result.
 */
int om_proc_lookup(const char *symbol, int version, uint64_t flags, int *ret_index)
{
    int lo = 0, hi = OM_PROC_VARIANT_COUNT - 1, first = -1, pick = -1;

    while (lo <= hi) { /* first row of this name */
        int mid = (lo + hi) / 2;
        int c = strcmp(symbol, om_proc_variants[mid].name);
        if (c <= 0) {
            if (c == 0)
                first = mid;
            hi = mid - 1;
        } else {
            lo = mid + 1;
        }
    }
    if (first < 0)
        return OM_PROC_SYMBOL_NOT_FOUND;
    for (int i = first; i < OM_PROC_VARIANT_COUNT && !strcmp(om_proc_variants[i].name, symbol); i++)
        if (om_proc_variants[i].version <= version)
            pick = i;
    if (pick < 0)
        return OM_PROC_VERSION_NOT_SUFFICIENT;
    *ret_index = (flags & OM_PROC_PER_THREAD_STREAM) ? om_proc_variants[pick].per_thread
                                                     : om_proc_variants[pick].legacy;
    return *ret_index < 0 ? OM_PROC_VERSION_NOT_SUFFICIENT : OM_PROC_SUCCESS;
}

/* Remote mode: as the real driver answers (measured), with our implementations. */
static int remote_proc_address(const char *symbol, void **pfn, int version, uint64_t flags,
                               int *status)
{
    int index = -1, st;

    if (version > OM_DRIVER_API_VERSION) {
        *pfn = NULL;
        return OM_CUDA_ERROR_INVALID_VALUE; /* status left alone, as the driver does */
    }
    st = om_proc_lookup(symbol, version, flags, &index);
    *pfn = st == OM_PROC_SUCCESS ? om_trace_wrap(index, om_remote_entry(index)) : NULL;
    if (status)
        *status = st;
    return OM_CUDA_SUCCESS;
}

int om_cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status)
{
    static int index = -1;
    int rc;

    if (!symbol || !pfn)
        return OM_CUDA_ERROR_INVALID_VALUE;
    om_shim_decide();
    if (index < 0)
        index = om_entry_index("cuGetProcAddress_v2");
    switch (om_shim.mode) {
    case OM_MODE_PASSTHROUGH:
        /* The real driver's own pointers: passthrough costs nothing after this. */
        if (!om_shim.real_fn[index])
            return OM_CUDA_ERROR_NO_DEVICE;
        rc = ((gpa2_fn)om_shim.real_fn[index])(symbol, pfn, version, flags, status);
        if (rc == OM_CUDA_SUCCESS)
            *pfn = om_passthrough_pointer(symbol, version, flags, *pfn);
        return rc;
    case OM_MODE_REMOTE: return remote_proc_address(symbol, pfn, version, flags, status);
    case OM_MODE_NO_DEVICE:
    case OM_MODE_FORKED: return no_device_proc_address(symbol, pfn, version, flags, status);
    default: return OM_CUDA_ERROR_MPS_CONNECTION_FAILED;
    }
}

int om_cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags)
{
    static int index = -1;

    if (!symbol || !pfn)
        return OM_CUDA_ERROR_INVALID_VALUE;
    om_shim_decide();
    if (index < 0)
        index = om_entry_index("cuGetProcAddress");
    if (om_shim.mode == OM_MODE_PASSTHROUGH) {
        if (!om_shim.real_fn[index])
            return OM_CUDA_ERROR_NO_DEVICE;
        int got = ((gpa_fn)om_shim.real_fn[index])(symbol, pfn, version, flags);
        if (got == OM_CUDA_SUCCESS)
            *pfn = om_passthrough_pointer(symbol, version, flags, *pfn);
        return got;
    }
    if (om_shim.mode == OM_MODE_REMOTE || om_shim.mode == OM_MODE_NO_DEVICE ||
        om_shim.mode == OM_MODE_FORKED) {
        /* The old entry point has no status: a miss is CUDA_ERROR_NOT_FOUND. */
        int status = OM_PROC_SUCCESS;
        int rc = om_shim.mode == OM_MODE_REMOTE
                     ? remote_proc_address(symbol, pfn, version, flags, &status)
                     : no_device_proc_address(symbol, pfn, version, flags, &status);
        return rc == OM_CUDA_SUCCESS && status != OM_PROC_SUCCESS ? OM_CUDA_ERROR_NOT_FOUND : rc;
    }
    return OM_CUDA_ERROR_MPS_CONNECTION_FAILED;
}
