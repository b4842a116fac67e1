/* SPDX-License-Identifier: MIT */
/* The client state layer: managed memory's ranges and their host shadows, which copy is newer,
 * and the moves between them (pushed before work is submitted, pulled after synchronising
 * calls). */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "../../common/wire.h"
#include "openmps/cuda_abi.h"
#include "openmps/ops.h"
#include "../remote.h"
#include "../shim.h"

/*
 * Managed memory, emulated as the pre-Pascal model (docs/architecture.md): the server allocates
 * device memory at an address D; the client maps a host shadow at the same D, so one pointer is
 * valid on both sides. The shadow goes to the device before each launch and comes back after
 * each synchronising call. The program is told CONCURRENT_MANAGED_ACCESS = 0, as on such GPUs.
 * (Every managed byte moves at each launch and sync: dirty-page tracking is the next
 * refinement.) Managed allocations: device memory with a host shadow at the same address.
 */
struct managed {
    CUdeviceptr base;
    size_t size;
};
static struct managed managed[256];
static int nmanaged;
static pthread_mutex_t managed_lock = PTHREAD_MUTEX_INITIALIZER;

/* True when [p, p + n) lies in managed memory: between launches its host
 * shadow is the current copy, so copies and sets act on the shadow. */
bool om_managed_in(CUdeviceptr p, size_t n)
{
    bool found = false;

    pthread_mutex_lock(&managed_lock);
    for (int i = 0; i < nmanaged && !found; i++)
        found = p >= managed[i].base && n <= managed[i].size &&
                p - managed[i].base <= managed[i].size - n;
    pthread_mutex_unlock(&managed_lock);
    return found;
}

/*
 * Which copy is newer. The pre-Pascal model the program was told about
 * (CONCURRENT_MANAGED_ACCESS = 0) forbids host access while device work is
 * outstanding, so: after a pull the host may write (host_dirty), after a push
 * kernels may write (device_dirty). A launch pushes only if the host may have
 * written; a synchronising call pulls only if kernels may have.
 */
static int device_dirty;
static int host_dirty = 1;

/* The shadow's bytes to the device: a staged copy of the range itself (htod
 * would take the shadow's own path). */
static CUresult push_range(CUdeviceptr base, size_t size, CUstream s)
{
    return om_ring_htod(base, (const void *)(uintptr_t)base, size, s);
}

/* Before work is submitted: every shadow to the device, on the work's stream;
 * afterwards the device's copy is the newer one until the next pull. */
CUresult om_managed_push(CUstream s)
{
    CUresult rc = CUDA_SUCCESS;

    if (!__atomic_load_n(&nmanaged, __ATOMIC_ACQUIRE))
        return CUDA_SUCCESS;
    pthread_mutex_lock(&managed_lock);
    if (__atomic_load_n(&host_dirty, __ATOMIC_ACQUIRE)) {
        for (int i = 0; i < nmanaged && rc == CUDA_SUCCESS; i++)
            rc = push_range(managed[i].base, managed[i].size, s);
        if (rc == CUDA_SUCCESS)
            __atomic_store_n(&host_dirty, 0, __ATOMIC_RELEASE);
    }
    if (nmanaged)
        __atomic_store_n(&device_dirty, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&managed_lock);
    return rc;
}

/* The device's view back into the shadows, when kernels may have changed it:
 * host writes made since the last pull are kept otherwise. */
CUresult om_managed_pull_if_dirty(void)
{
    CUresult rc = CUDA_SUCCESS;

    if (!__atomic_load_n(&device_dirty, __ATOMIC_ACQUIRE))
        return CUDA_SUCCESS;
    /* The device copy is read after this client's work finished. */
    {
        REQ(sync, 8);
        rc = om_rcall(OM_IDX_cuCtxSynchronize, &sync, NULL, 0, NULL);
    }
    pthread_mutex_lock(&managed_lock);
    for (int i = 0; i < nmanaged && rc == CUDA_SUCCESS; i++) {
        CUdeviceptr base = managed[i].base;
        for (size_t off = 0; off < managed[i].size && rc == CUDA_SUCCESS; off += OM_CHUNK_BYTES) {
            size_t piece =
                managed[i].size - off < OM_CHUNK_BYTES ? managed[i].size - off : OM_CHUNK_BYTES;
            uint32_t got = 0;
            REQ(req, 32);
            om_put_u64(&req, base + off);
            om_put_u64(&req, (uint64_t)piece);
            om_put_u64(&req, 0);
            rc = om_rcall(OM_IDX_cuMemcpyDtoH_v2, &req, (void *)(uintptr_t)(base + off), piece,
                          &got);
            if (rc == CUDA_SUCCESS && got != piece)
                rc = CUDA_ERROR_UNKNOWN;
        }
    }
    if (rc == CUDA_SUCCESS) {
        __atomic_store_n(&device_dirty, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&host_dirty, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&managed_lock);
    return rc;
}

/* After a synchronising call. */
CUresult om_managed_pull(CUresult rc)
{
    return rc == CUDA_SUCCESS ? om_managed_pull_if_dirty() : rc;
}

/* Forgets a managed range being freed; true when ptr was one. */
bool om_managed_forget(CUdeviceptr ptr)
{
    bool found = false;

    pthread_mutex_lock(&managed_lock);
    for (int i = 0; i < nmanaged; i++) {
        if (managed[i].base == ptr) {
            munmap((void *)(uintptr_t)ptr, managed[i].size);
            managed[i] = managed[--nmanaged];
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&managed_lock);
    return found;
}

/* The host wrote a shadow (a copy or a set into managed memory): the next launch pushes. */
void om_managed_host_wrote(void)
{
    __atomic_store_n(&host_dirty, 1, __ATOMIC_RELEASE);
}

/* A new managed range whose shadow is mapped at base; false: the table is full. */
bool om_managed_add(CUdeviceptr base, size_t size)
{
    pthread_mutex_lock(&managed_lock);
    bool room = nmanaged < (int)(sizeof(managed) / sizeof(managed[0]));
    if (room) {
        managed[nmanaged++] = (struct managed){base, size};
        __atomic_store_n(&host_dirty, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&managed_lock);
    return room;
}

/* The managed range holding p, if this process has one. */
bool om_managed_find(CUdeviceptr p, CUdeviceptr *ret_base, size_t *ret_size)
{
    bool found = false;

    pthread_mutex_lock(&managed_lock);
    for (int i = 0; i < nmanaged && !found; i++) {
        if (p >= managed[i].base && p - managed[i].base < managed[i].size) {
            *ret_base = managed[i].base;
            *ret_size = managed[i].size;
            found = true;
        }
    }
    pthread_mutex_unlock(&managed_lock);
    return found;
}
