/* SPDX-License-Identifier: MIT */
/* Whether any client's work runs on the GPU now: every client stream, asked without waiting. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

/*
 * The server is the only submitter of its context, and every client operation goes to a client
 * stream (docs/architecture.md, "Concurrency rules in the server": never the context's NULL
 * stream), so "no client stream has work" means nothing runs. Releases that wait for every running
 * kernel (cuMemHostUnregister of pinned regions clients left behind, hostmem.c) are made only then,
 * so they wait for nothing and stall no client. A stream leaves the list, under the lock, before it
 * is destroyed, so a query never meets a destroyed stream.
 */

#define R(sym) om_server_real[OM_IDX_##sym]

static CUstream *streams;
static size_t nstreams, cap;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

int om_idle_track(CUstream st)
{
    int rc = 0;

    pthread_mutex_lock(&lock);
    if (nstreams == cap) {
        size_t ncap = cap ? cap * 2 : 256;
        CUstream *n = realloc(streams, ncap * sizeof(*n));
        if (n) {
            streams = n;
            cap = ncap;
        }
    }
    if (nstreams < cap)
        streams[nstreams++] = st;
    else
        rc = -ENOMEM;
    pthread_mutex_unlock(&lock);
    return rc;
}

CUresult om_idle_stream_destroy(CUstream st)
{
    CUresult rc;

    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nstreams; i++) {
        if (streams[i] == st) {
            streams[i] = streams[--nstreams];
            break;
        }
    }
    rc = ((CUresult(*)(CUstream))R(cuStreamDestroy_v2))(st);
    pthread_mutex_unlock(&lock);
    return rc;
}

bool om_idle_now(void)
{
    CUresult (*query)(CUstream) = (CUresult(*)(CUstream))R(cuStreamQuery);
    bool idle = query != NULL;

    pthread_mutex_lock(&lock);
    CUresult (*capturing)(CUstream, int *) = (CUresult(*)(CUstream, int *))R(cuStreamIsCapturing);
    for (size_t i = 0; i < nstreams && idle; i++) {
        int status = 0;
        /* A query of a capturing stream would invalidate its capture: such a stream counts
         * as busy. */
        if (capturing && capturing(streams[i], &status) == CUDA_SUCCESS && status != 0)
            idle = false;
        else
            idle = query(streams[i]) == CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return idle;
}
