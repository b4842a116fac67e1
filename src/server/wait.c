/* SPDX-License-Identifier: MIT */
/* How the server's threads wait for the GPU: briefly spinning, then asleep in the driver. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "../common/clock.h"

/*
 * A context's default scheduling (CU_CTX_SCHED_AUTO) spins the CPU in every synchronize while
 * the process has fewer contexts than CPUs, which the server always has. With a hundred
 * clients each waiting for a long kernel, a hundred server threads would spin on a few cores
 * and starve the threads that launch the other clients' kernels: those launches then land late
 * and the clients' kernels look twice as long (B1 at 48 and 128 clients, issue #4). So the
 * server's contexts block on an interrupt (CU_CTX_SCHED_BLOCKING_SYNC, set at start), and a wait
 * first polls for a short while, so that a short kernel's completion is not paid with the
 * interrupt's wake-up.
 */

#define SPIN_NS 100000ull /* 100 µs: a short kernel, or a small copy, is done by then */

/* OPENMPS_SERVER_SYNC: blocking (the default: poll, then sleep), yield (the driver's spin
 * with sched_yield) or spin (the driver's own spin): for measuring the choice. */
static unsigned sync_flags = CU_CTX_SCHED_BLOCKING_SYNC;

unsigned om_wait_context_flags(void)
{
    const char *v = getenv("OPENMPS_SERVER_SYNC");

    if (v && !strcmp(v, "yield"))
        sync_flags = CU_CTX_SCHED_YIELD;
    else if (v && !strcmp(v, "spin"))
        sync_flags = CU_CTX_SCHED_SPIN;
    return sync_flags;
}

/*
 * The driver hands memory freed with cuMemFreeAsync back to its pool (and the pool's memory
 * above its release threshold back to the device, and makes it trimmable) only in a
 * synchronize call: a wait that ends in cuStreamQuery leaves it reserved (measured on the
 * H100: tests/gpu/probe/pool_trim.cu, 32 MiB freed and synchronized with a query loop stay
 * reserved after cuMemPoolTrimTo(0), natively too). So once a session's thread has freed pool
 * memory, its waits that end in a query end with the driver's synchronize as well, which then
 * returns at once (about a microsecond): its pools behave as natively.
 */
static __thread bool settle_pools;

void om_wait_settle_pools(void)
{
    settle_pools = true;
}

/* Streams and events are both pointers to the driver, and the two pairs of calls take one. */
typedef CUresult (*handle_call)(void *);

static CUresult wait_for(void *h, int query_index, int sync_index)
{
    handle_call query = (handle_call)om_server_real[query_index];
    handle_call sync = (handle_call)om_server_real[sync_index];
    uint64_t start = om_mono_ns();
    CUresult rc;

    if (sync_flags != CU_CTX_SCHED_BLOCKING_SYNC)
        return sync(h);
    while ((rc = query(h)) == CUDA_ERROR_NOT_READY)
        if (om_mono_ns() - start > SPIN_NS)
            return sync(h);
    return rc == CUDA_SUCCESS && settle_pools ? sync(h) : rc;
}

CUresult om_wait_stream(CUstream st)
{
    return wait_for(st, OM_IDX_cuStreamQuery, OM_IDX_cuStreamSynchronize);
}

CUresult om_wait_event(CUevent ev)
{
    return wait_for(ev, OM_IDX_cuEventQuery, OM_IDX_cuEventSynchronize);
}
