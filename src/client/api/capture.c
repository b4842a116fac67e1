/* SPDX-License-Identifier: MIT */
/* Remote mode, the capture family (api/remote/capture.tsv): stream capture: its modes, beginning
 * and end, and what a capturing stream answers (the server's side: src/server/api/capture.c). */
#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/gen/entries.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "graph.h"
#include "../shim.h"

#define CAPTURE_MODE_GLOBAL 0
#define CAPTURE_MODE_RELAXED 2
#define CAPTURE_NONE 0 /* CU_STREAM_CAPTURE_STATUS_NONE */

CUresult om_r_cuStreamUpdateCaptureDependencies_v2(CUstream s, CUgraphNode *deps,
                                                   const CUgraphEdgeData *edges, size_t n,
                                                   unsigned flags)
{
    if (!om_graph_edges_plain(edges, n))
        return CUDA_ERROR_NOT_SUPPORTED;
    return ((CUresult(*)(CUstream, CUgraphNode *, size_t, unsigned))om_remote_entry(
        OM_IDX_cuStreamUpdateCaptureDependencies))(s, deps, n, flags);
}

/* ------------------------------------------------------------------ stream capture */

/* The calling thread's capture mode (cuThreadExchangeStreamCaptureMode). The server captures
 * in relaxed mode whatever the client asks (see the server's side), so the mode is kept here
 * for the program to read back; it refuses nothing. */
static __thread int capture_mode = CAPTURE_MODE_GLOBAL;

CUresult om_r_cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    int old;

    if (!mode || (int)*mode < CAPTURE_MODE_GLOBAL || (int)*mode > CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    old = capture_mode;
    capture_mode = (int)*mode;
    *mode = (CUstreamCaptureMode)old;
    return CUDA_SUCCESS;
}

CUresult om_r_cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode)
{
    REQ(req, 16);
    CUresult rc;

    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    om_put_u64(&req, (uint64_t)(int64_t)mode);
    rc = om_rcall(OM_IDX_cuStreamBeginCapture_v2, &req, NULL, 0, NULL);
    om_capture_begun(rc);
    return rc;
}

CUresult om_r_cuStreamBeginCapture(CUstream s)
{
    return om_r_cuStreamBeginCapture_v2(s, (CUstreamCaptureMode)CAPTURE_MODE_GLOBAL);
}

/* The _ptsz forms: their NULL is the calling thread's per-thread default stream, which can be
 * captured, where the plain forms' NULL is the legacy stream, which cannot (the server refuses
 * NULL and CU_STREAM_LEGACY): NULL goes as the per-thread handle. */
static CUstream per_thread(CUstream s)
{
    return s ? s : CU_STREAM_PER_THREAD;
}

CUresult om_r_cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode)
{
    return om_r_cuStreamBeginCapture_v2(per_thread(s), mode);
}

CUresult om_r_cuStreamBeginCapture_ptsz(CUstream s)
{
    return om_r_cuStreamBeginCapture_v2(per_thread(s), (CUstreamCaptureMode)CAPTURE_MODE_GLOBAL);
}

CUresult om_r_cuStreamEndCapture(CUstream s, CUgraph *graph)
{
    uint64_t reply = 0;
    uint32_t got = 0;
    CUresult rc;
    REQ(req, 8);

    if (!graph)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    rc = om_rcall(OM_IDX_cuStreamEndCapture, &req, &reply, sizeof(reply), &got);
    om_capture_ended(rc);
    if (rc == CUDA_SUCCESS && got != sizeof(reply))
        rc = CUDA_ERROR_UNKNOWN;
    *graph = rc == CUDA_SUCCESS ? (CUgraph)(uintptr_t)reply : NULL;
    return rc;
}

/* The dependencies answered last on this thread: valid until its next call, as the driver's
 * own array is valid until the stream's next capture operation; with the answer they come in.
 * On the heap, made at the thread's first query of a capturing stream and freed at its end: as
 * thread-local arrays they made every thread of the program 256 KiB larger (static TLS, which a
 * thread with a small stack of its own cannot hold; issue #24). */
struct capture_info {
    CUgraphNode deps[MAX_LIST];
    CUgraphEdgeData edges[MAX_LIST];
    uint64_t reply[4 + MAX_LIST * 2];
};
static __thread struct capture_info *info;
static pthread_key_t info_key;

static void make_info_key(void)
{
    pthread_key_create(&info_key, free); /* the thread's info at its end */
}

static struct capture_info *thread_info(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    if (!info) {
        pthread_once(&once, make_info_key);
        info = malloc(sizeof(*info));
        if (info && pthread_setspecific(info_key, info) != 0) {
            free(info);
            info = NULL;
        }
    }
    return info;
}

/* The handle to ask a default stream's capture state by, for the shim's own questions: the
 * server serves NULL, legacy and per-thread with one stream, and refuses the legacy handle's
 * capture query beside a blocking stream's capture (src/server/route.c), the per-thread one not;
 * the program's own queries keep its handle. */
CUstream om_capture_query_stream(CUstream s)
{
    return !s || s == CU_STREAM_LEGACY ? CU_STREAM_PER_THREAD : s;
}

/*
 * Capture queries without a capture: PyTorch asks cuStreamIsCapturing before copies and
 * allocations, cuDNN and cuBLAS before their launches (a round trip each, 7.4 µs measured on
 * the H100 under openmps). While no capture of this process is open, no stream of it can be
 * capturing (captures are per process: other clients' captures never include its streams), so
 * a stream this process knows is answered here; anything else still asks the server, which
 * also refuses a stream that is not the client's.
 */
static bool surely_not_capturing(CUstream s)
{
    return om_capture_none() && om_stream_known(s);
}

CUresult om_r_cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status)
{
    if (status && surely_not_capturing(s))
        return om_r_cuStreamGetCaptureInfo_v3(s, status, NULL, NULL, NULL, NULL, NULL);
    return om_rpc_cuStreamIsCapturing(s, status);
}

CUresult om_r_cuStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id)
{
    if (status && surely_not_capturing(s))
        return om_r_cuStreamGetCaptureInfo_v3(s, status, id, NULL, NULL, NULL, NULL);
    return om_rpc_cuStreamGetCaptureInfo(s, status, id);
}

CUresult om_r_cuStreamGetCaptureInfo_v3(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                                        CUgraph *graph, const CUgraphNode **deps,
                                        const CUgraphEdgeData **edges, size_t *ndeps)
{
    struct capture_info *ci;
    uint64_t *reply;
    uint32_t got = 0;
    uint64_t n;
    CUresult rc;
    REQ(req, 8);

    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    if (surely_not_capturing(s)) { /* what the server answers for a stream not capturing */
        *status = (CUstreamCaptureStatus)CAPTURE_NONE;
        if (id)
            *id = 0;
        if (graph)
            *graph = NULL;
        if (deps)
            *deps = NULL;
        if (edges)
            *edges = NULL;
        if (ndeps)
            *ndeps = 0;
        return CUDA_SUCCESS;
    }
    if (!(ci = thread_info()))
        return CUDA_ERROR_OUT_OF_MEMORY;
    reply = ci->reply;
    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    rc = om_rcall(OM_IDX_cuStreamGetCaptureInfo_v3, &req, reply, sizeof(ci->reply), &got);
    if (rc != CUDA_SUCCESS)
        return rc;
    n = got >= 32 ? reply[3] : 0;
    if (got < 32 || n > MAX_LIST || got != 32 + n * (sizeof(CUgraphNode) + sizeof(CUgraphEdgeData)))
        return CUDA_ERROR_UNKNOWN;
    memcpy(ci->deps, reply + 4, n * sizeof(CUgraphNode));
    memcpy(ci->edges, reply + 4 + n, n * sizeof(CUgraphEdgeData));
    if (!edges && !om_graph_edges_plain(ci->edges, (size_t)n))
        return 214; /* CUDA_ERROR_LOSSY_QUERY: edges other than the default, not asked for */
    *status = (CUstreamCaptureStatus)reply[0];
    if (id)
        *id = reply[1];
    if (graph)
        *graph = (CUgraph)(uintptr_t)reply[2];
    if (deps)
        *deps = n ? ci->deps : NULL;
    if (edges)
        *edges = n ? ci->edges : NULL;
    if (ndeps)
        *ndeps = (size_t)n;
    return CUDA_SUCCESS;
}

CUresult om_r_cuStreamGetCaptureInfo_v2(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                                        CUgraph *graph, const CUgraphNode **deps, size_t *ndeps)
{
    return om_r_cuStreamGetCaptureInfo_v3(s, status, id, graph, deps, NULL, ndeps);
}

CUresult om_r_cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode *deps,
                                          const CUgraphEdgeData *edges, size_t n,
                                          CUstreamCaptureMode mode)
{
    uint8_t *buf;
    CUresult rc;

    if (!om_graph_edges_plain(edges, n))
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!(buf = malloc(32 + MAX_DEPS * 8)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct om_wbuf req = {.p = buf, .cap = 32 + MAX_DEPS * 8};
    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    om_put_u64(&req, (uint64_t)(uintptr_t)g);
    rc = om_graph_put_deps(&req, deps, n);
    if (rc == CUDA_SUCCESS) {
        om_put_u64(&req, (uint64_t)(int64_t)mode);
        rc = om_rcall(OM_IDX_cuStreamBeginCaptureToGraph, &req, NULL, 0, NULL);
        om_capture_begun(rc);
    }
    free(buf);
    return rc;
}

CUresult om_r_cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g, const CUgraphNode *deps,
                                               const CUgraphEdgeData *edges, size_t n,
                                               CUstreamCaptureMode mode)
{
    return om_r_cuStreamBeginCaptureToGraph(per_thread(s), g, deps, edges, n, mode);
}
