/* SPDX-License-Identifier: MIT */
/* The bottom of the server: the real driver's entry points by index, the server's contexts (one
 * per device, peer access between them) and the first fatal GPU fault. Every other file reaches
 * the driver through here (REAL() in exec.h); this file calls nothing of the server's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/log.h"
#include "internal.h"

static struct server *the_server;

/* A fatal GPU fault seen by any session's worker: the first one is kept, and a
 * byte on fault_pipe wakes the main loop. */
static int fault_code;
static int fault_pid;
static int fault_pipe[2] = {-1, -1};

bool om_server_fatal(CUresult rc)
{
    /* Errors after which the context itself is unusable (sticky). */
    switch (rc) {
    case 700:
    case 702:
    case 710:
    case 714:
    case 715:
    case 716:
    case 717:
    case 718:
    case 719: return true;
    default: return false;
    }
}

void om_server_fault(CUresult rc, pid_t pid)
{
    int expected = 0;

    if (__atomic_compare_exchange_n(&fault_code, &expected, rc, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST)) {
        __atomic_store_n(&fault_pid, (int)pid, __ATOMIC_SEQ_CST);
        if (write(fault_pipe[1], "f", 1) < 0) {
            /* the main loop also checks at its next wake-up */
        }
    }
}

int om_server_fault_init(void)
{
    return pipe2(fault_pipe, O_CLOEXEC | O_NONBLOCK) < 0 ? -errno : 0;
}

int om_server_fault_fd(void)
{
    return fault_pipe[0];
}

int om_server_fault_code(pid_t *ret_pid)
{
    int code = __atomic_load_n(&fault_code, __ATOMIC_SEQ_CST);

    if (code)
        *ret_pid = (pid_t)__atomic_load_n(&fault_pid, __ATOMIC_SEQ_CST);
    return code;
}

void *om_server_real[OM_ENTRY_COUNT];

static const char *const entry_names[OM_HANDLER_COUNT] = {
#define OM_X_NAME(i, sym, mode) [i] = #sym,
    OM_ENTRIES(OM_X_NAME)
#undef OM_X_NAME
#define OM_X_OP_NAME(i, name) [i] = "op:" #name,
        OM_OPS(OM_X_OP_NAME)
#undef OM_X_OP_NAME
};

/* What the server calls for an entry point its driver lacks: never a NULL jump. */
CUresult om_server_missing(void)
{
    return CUDA_ERROR_NOT_SUPPORTED;
}

bool om_server_has(int index)
{
    return om_server_real[index] != (void *)om_server_missing;
}

const char *om_server_entry_name(int index)
{
    return entry_names[index];
}

int om_server_ndevices(void)
{
    return the_server->ndevs;
}

CUresult om_server_bind_device(int dev)
{
    CUresult (*set)(om_cu_context) = om_server_real[OM_IDX_cuCtxSetCurrent];

    if (!set || the_server->ndevs == 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= the_server->ndevs)
        return CUDA_ERROR_INVALID_DEVICE;
    return set(the_server->ctx[dev]);
}

CUresult om_server_bind_context(void)
{
    return om_server_bind_device(0); /* a session starts on device 0, as a process does */
}

/* Every context may reach every other device's memory where the hardware lets it: a client's
 * copies between devices and kernels reading another device's memory work without the client
 * enabling anything (its cuCtxEnablePeerAccess is bookkeeping in the shim). */
void om_server_enable_peers(struct server *srv)
{
    CUresult (*can)(int *, CUdevice, CUdevice) = om_server_real[OM_IDX_cuDeviceCanAccessPeer];
    CUresult (*enable)(om_cu_context, unsigned) = om_server_real[OM_IDX_cuCtxEnablePeerAccess];

    if (!om_server_has(OM_IDX_cuDeviceCanAccessPeer) ||
        !om_server_has(OM_IDX_cuCtxEnablePeerAccess))
        return;
    for (int i = 0; i < srv->ndevs; i++) {
        if (om_server_bind_device(i) != CUDA_SUCCESS)
            continue;
        for (int j = 0; j < srv->ndevs; j++) {
            int ok = 0;
            CUresult rc;
            if (i == j || can(&ok, i, j) != CUDA_SUCCESS || !ok)
                continue;
            rc = enable(srv->ctx[j], 0);
            if (rc == CUDA_SUCCESS || rc == 704) /* CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED */
                srv->peer[i][j] = true;
            else
                om_warn("device %d cannot reach device %d's memory: CUresult %d", i, j, (int)rc);
        }
    }
    for (int i = 0; i < srv->ndevs; i++)
        for (int j = 0; j < srv->ndevs; j++)
            if (srv->peer[i][j])
                om_info("peer access: device %d reaches device %d's memory", i, j);
}

bool om_server_peer(int from, int to)
{
    return from >= 0 && to >= 0 && from < the_server->ndevs && to < the_server->ndevs &&
           the_server->peer[from][to];
}

/* Loads the driver and retains one primary context per device. */
int om_server_driver_init(struct server *srv, unsigned ctx_flags, char *err, size_t errlen)
{
    int rc;

    the_server = srv;
    rc = om_driver_open(&srv->drv, err, errlen);

    if (rc < 0)
        return rc;
    for (int i = 0; i < OM_ENTRY_COUNT; i++) {
        om_server_real[i] = dlsym(srv->drv.lib, entry_names[i]);
        if (!om_server_real[i])
            om_server_real[i] = (void *)om_server_missing;
    }
    srv->ndevs = om_driver_devices(&srv->drv, srv->devs, OM_MAX_DEVICES, err, errlen);
    if (srv->ndevs < 0)
        return srv->ndevs;
    for (int i = 0; i < srv->ndevs; i++) {
        /* Synchronizing threads sleep instead of spinning (wait.c says why). */
        CUresult fr =
            ((CUresult(*)(CUdevice, unsigned))om_server_real[OM_IDX_cuDevicePrimaryCtxSetFlags_v2])(
                i, ctx_flags);
        if (fr != CUDA_SUCCESS)
            om_warn("device %d: cannot make synchronization block (CUresult %d): waits spin", i,
                    (int)fr);
        om_cu_result cr = srv->drv.cuDevicePrimaryCtxRetain(&srv->ctx[i], i);
        if (cr != OM_CUDA_SUCCESS) {
            snprintf(err, errlen, "cannot retain the primary context of device %d: CUresult %d", i,
                     cr);
            return -EIO;
        }
        om_info("Created the server context on device %d (%s, %s)", i, srv->devs[i].name,
                srv->devs[i].pci_bus_id);
    }
    return 0;
}
