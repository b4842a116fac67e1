/* SPDX-License-Identifier: MIT */
/* Grows the driver's pools of streams and events once, before any client's kernel runs. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#include "../common/clock.h"
#include "../common/log.h"

/*
 * Measured on an H100 (docs/benchmarks.md, "B1's late kernels"): with about 127 clients
 * starting together, a cuEventCreate or the creation or first use of a client's stream now
 * and then took as long as the longest running kernel (500 ms), and meanwhile every other
 * client's launches, copies and event creations waited in the driver: the kernels of those
 * launches started a whole kernel late. It happened only in the first runs after the server
 * started, never once the server had served that many clients: the driver grows pools of
 * its own for streams and events, apparently waiting for the GPU while it does, and keeps
 * them grown after the streams and events are destroyed.
 *
 * So the server grows them before it takes clients, while nothing runs: WARM_STREAMS streams
 * as the clients get them (non-blocking), and WARM_EVENTS events of the flags clients create,
 * each recorded once on one of those streams; then all are destroyed. It takes about 10 ms at
 * the server's start. The grown pools keep GPU memory: with 256 streams here, the server held
 * 658 MiB after B4's 128 clients had left, against 588 MiB without this, so WARM_STREAMS is
 * the 128 clients the server is sized for (B4); past that, a new stream may grow the pool
 * while kernels run.
 * OPENMPS_SERVER_WARM=off leaves it out (for measuring what it is for).
 */

#define WARM_STREAMS 128
#define WARM_EVENTS 1024

#define R(sym) om_server_real[OM_IDX_##sym]

void om_warm_driver_pools(void)
{
    static const unsigned event_flags[] = {0, CU_EVENT_DISABLE_TIMING, CU_EVENT_BLOCKING_SYNC,
                                           CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING};
    static const int need[] = {OM_IDX_cuStreamCreate,    OM_IDX_cuStreamDestroy_v2,
                               OM_IDX_cuEventCreate,     OM_IDX_cuEventRecord,
                               OM_IDX_cuEventDestroy_v2, OM_IDX_cuCtxSynchronize};
    const char *env = getenv("OPENMPS_SERVER_WARM");
    CUstream *st = NULL;
    CUevent *ev = NULL;
    int nst = 0, nev = 0;
    uint64_t t0 = om_mono_ns();

    if (env && !strcmp(env, "off")) {
        om_info("driver pools: not grown ahead (OPENMPS_SERVER_WARM=off)");
        return;
    }
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
        if (!om_server_has(need[i]))
            return;
    st = calloc(WARM_STREAMS, sizeof(*st));
    ev = calloc(WARM_EVENTS, sizeof(*ev));
    if (!st || !ev)
        goto out;
    while (nst < WARM_STREAMS && ((CUresult(*)(CUstream *, unsigned))R(cuStreamCreate))(
                                     &st[nst], CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS)
        nst++;
    while (nst > 0 && nev < WARM_EVENTS &&
           ((CUresult(*)(CUevent *, unsigned))R(cuEventCreate))(
               &ev[nev], event_flags[nev % (sizeof(event_flags) / sizeof(event_flags[0]))]) ==
               CUDA_SUCCESS) {
        ((CUresult(*)(CUevent, CUstream))R(cuEventRecord))(ev[nev], st[nev % nst]);
        nev++;
    }
    ((CUresult(*)(void))R(cuCtxSynchronize))();
out:
    for (int i = 0; i < nev; i++)
        ((CUresult(*)(CUevent))R(cuEventDestroy_v2))(ev[i]);
    for (int i = 0; i < nst; i++)
        ((CUresult(*)(CUstream))R(cuStreamDestroy_v2))(st[i]);
    free(ev);
    free(st);
    om_info("driver pools: grew them with %d streams and %d events in %.1f ms", nst, nev,
            (double)(om_mono_ns() - t0) / 1e6);
}
