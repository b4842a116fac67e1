/* SPDX-License-Identifier: MIT */
/* Entry points the shim answers in every mode: cuInit and cuGetProcAddress. */
#include <string.h>

#include "gen/procaddr.h"
#include "remote.h"
#include "shim.h"

typedef int (*init_fn)(unsigned);
typedef int (*gpa_fn)(const char *, void **, int, uint64_t);
typedef int (*gpa2_fn)(const char *, void **, int, uint64_t, int *);

int om_cuInit(unsigned flags)
{
    static int index = -1;

    om_shim_decide();
    if (index < 0)
        index = om_entry_index("cuInit");
    switch (om_shim.mode) {
    case OM_MODE_PASSTHROUGH:
        if (!om_shim.real_fn[index])
            return OM_CUDA_ERROR_NO_DEVICE;
        return ((init_fn)om_shim.real_fn[index])(flags);
    case OM_MODE_REMOTE:
        if (flags != 0)
            return OM_CUDA_ERROR_INVALID_VALUE;
        /* The real driver is initialised too: the runtime's export tables
         * (docs/driver-facts.md) need it. It creates no context. */
        if (om_shim.real_fn[index]) {
            /* It starts a thread of its own (driver 580): not the program's (hostmove.c). */
            om_host_local_driver_begin();
            int rc = ((init_fn)om_shim.real_fn[index])(0);
            om_host_local_driver_end();
            if (rc != OM_CUDA_SUCCESS)
                om_shim_log("the local driver's cuInit failed; driver-API calls still work");
        }
        return OM_CUDA_SUCCESS;
    case OM_MODE_NO_DEVICE: return om_shim.no_device_rc;
    case OM_MODE_FORKED: return OM_CUDA_ERROR_NOT_INITIALIZED; /* as natively (shim.c) */
    default: return OM_CUDA_ERROR_MPS_CONNECTION_FAILED;
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
