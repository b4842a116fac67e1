/* SPDX-License-Identifier: MIT */
/* A client's memory of stream-ordered pools (api/mempool.c makes it), freed where other families
 * free memory: cuMemFree (api/memory.c) and the session's end. */
#include <string.h>

#include "exec.h"

/* cuMemFree of pool memory (api/memory.c): after the client's own work, on its default stream. */
CUresult om_poolmem_free(struct session *s, struct om_range *r)
{
    CUresult rc = om_exec_sync_client(s), frc;
    CUstream st = om_find_stream(s, 0, true, &frc);

    om_wait_settle_pools();
    frc = st ? ((CUresult(*)(CUdeviceptr, CUstream))REAL(cuMemFreeAsync))(r->base, st) : frc;
    if (!r->graph) /* a graph allocation's range stays while its graphs hold it (graphstate.c) */
        om_allocs_remove(s, r);
    return rc != CUDA_SUCCESS ? rc : frc;
}

/* The session's end (teardown.c): its pool memory freed on its default stream, before its pools
 * go (own.c). */
void om_poolmem_session_end(struct session *s)
{
    CUresult rc;
    CUstream st = NULL;
    bool any = false;

    for (size_t i = 0; i < s->allocs.n; i++)
        any |= s->allocs.v[i].pool != 0;
    if (any)
        st = om_find_stream(s, 0, true, &rc);
    for (size_t i = s->allocs.n; i-- > 0;) {
        if (!s->allocs.v[i].pool)
            continue;
        if (st)
            ((CUresult(*)(CUdeviceptr, CUstream))REAL(cuMemFreeAsync))(s->allocs.v[i].base, st);
        om_allocs_remove(s, &s->allocs.v[i]);
    }
    if (st)
        ((CUresult(*)(CUstream))REAL(cuStreamSynchronize))(st);
    /* The pools themselves go with the kinds of api/handles.tsv (own.c). */
    memset(s->pool_default, 0, sizeof(s->pool_default));
    memset(s->pool_current, 0, sizeof(s->pool_current));
}
