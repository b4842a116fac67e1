/* SPDX-License-Identifier: MIT */
/* Remote mode's transport, the bottom of the client: one call or post of an entry point through
 * the ring, staged data before a call, and the session's end turned into a CUresult. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "../common/msg.h"
#include "../common/wire.h"
#include "openmps/cuda_abi.h"
#include "openmps/ops.h"
#include "remote.h"
#include "shim.h"

/* One ring per process: calls from several threads take turns. */
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;

static CUresult session_error(int rc)
{
    if (rc == -ECONNRESET) {
        om_shim_log("the openmps session ended: %s", om_shim.client.why);
        /* The server's ending names its code: a GPU fault's, or terminate_client's
         * CUDA_ERROR_MPS_CLIENT_TERMINATED; an ending without one (the server stopped or
         * died) is a lost connection. */
        return om_shim.client.end_code ? (CUresult)om_shim.client.end_code
                                       : CUDA_ERROR_MPS_CONNECTION_FAILED;
    }
    return CUDA_ERROR_UNKNOWN;
}

/*
 * The per-call preamble. The server runs a session's calls on one device at a time, the last one
 * the client named (OM_OP_SET_DEVICE), with the SM partition of the current context (a created
 * context's execution affinity, CUDA_MPS_ENABLE_PER_CTX_DEVICE_MULTIPROCESSOR_PARTITIONING=1:
 * its kernels run on that many SMs, server/share.c), in the green context named last (posted as
 * a cuCtxFromGreenCtx record; the NULL stream is that green context's). Before a call, under the
 * ring lock (so in order with the calls), what the calling thread's current context needs is
 * posted when it differs from what was named last. What it needs is data kept by the state layer
 * (state/current.c writes om_preamble whenever a thread's current context changes): nothing is
 * asked of a higher layer here. A client of one device, without partitions or green contexts,
 * never has a preamble other than the empty one and pays one load (om_preamble_used); a call
 * that needs one reads the thread's om_preamble and its context's liveness word.
 */
__thread struct om_preamble om_preamble;
int om_preamble_used;
static uint64_t named[2];   /* device, SMs: a session starts on device 0, no partition */
static uint64_t green_sent; /* the green context the server has current (under the ring lock) */

/* Before a call, ring held (the green context too, but for om_rcall_locked, whose callers hold
 * the ring across an exchange). A context another thread destroyed gives the empty preamble: its
 * calls ran on device 0 before, and still do. */
static void preamble_post(bool with_green)
{
    const struct om_preamble *p = &om_preamble;
    uint64_t now[2] = {0, 0}, green = 0;

    if (p->live && __atomic_load_n(p->live, __ATOMIC_ACQUIRE) == p->want) {
        now[0] = p->device;
        now[1] = p->sms;
        green = p->green;
    }
    if ((now[0] != named[0] || now[1] != named[1]) &&
        om_client_post(&om_shim.client, OM_OP_SET_DEVICE, now, sizeof(now)) == 0) {
        named[0] = now[0];
        named[1] = now[1];
    }
    if (with_green && green != green_sent) {
        REQ(req, 8);
        green_sent = green;
        om_put_u64(&req, green);
        /* posted: a refusal (a green context gone meanwhile) is reported at the next sync */
        om_client_post(&om_shim.client, (uint16_t)(OM_OP_ENTRY_BASE + OM_IDX_cuCtxFromGreenCtx),
                       req.p, (uint32_t)req.len);
    }
}

/* A child forked from this process after its session began (shim.c's forked_child): its calls
 * fail before any lock, which a thread of the parent may have held at the fork. */
static inline bool forked(void)
{
    return __atomic_load_n(&om_shim.mode, __ATOMIC_RELAXED) == OM_MODE_FORKED;
}

/* The check on every call: one load while no thread has a preamble. */
static inline void preamble(bool with_green)
{
    if (__atomic_load_n(&om_preamble_used, __ATOMIC_RELAXED))
        preamble_post(with_green);
}

void om_transport_green_gone(uint64_t g)
{
    pthread_mutex_lock(&ring_lock);
    if (green_sent == g)
        green_sent = 0;
    pthread_mutex_unlock(&ring_lock);
}

void om_ring_lock(void)
{
    pthread_mutex_lock(&ring_lock);
}

void om_ring_unlock(void)
{
    pthread_mutex_unlock(&ring_lock);
}

CUresult om_rcall_locked(int index, const struct om_wbuf *req, void *reply, size_t cap,
                         uint32_t *ret_len)
{
    uint32_t got = 0;
    int rc;

    if (req->overflow)
        return CUDA_ERROR_INVALID_VALUE;
    if (forked())
        return CUDA_ERROR_NOT_INITIALIZED;
    preamble(false);
    rc = om_client_call(&om_shim.client, (uint16_t)(OM_OP_ENTRY_BASE + index), req->p,
                        (uint32_t)req->len, reply, cap, &got);
    if (rc < 0)
        return session_error(rc);
    if (ret_len)
        *ret_len = got;
    return (CUresult)rc;
}

CUresult om_rcall(int index, const struct om_wbuf *req, void *reply, size_t cap, uint32_t *ret_len)
{
    uint32_t got = 0;
    int rc;

    if (req->overflow)
        return CUDA_ERROR_INVALID_VALUE;
    if (forked())
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&ring_lock);
    preamble(true);
    rc = om_client_call(&om_shim.client, (uint16_t)(OM_OP_ENTRY_BASE + index), req->p,
                        (uint32_t)req->len, reply, cap, &got);
    pthread_mutex_unlock(&ring_lock);
    if (rc < 0)
        return session_error(rc);
    if (ret_len)
        *ret_len = got;
    return (CUresult)rc;
}

CUresult om_rpost(int index, const struct om_wbuf *req)
{
    int rc;

    if (req->overflow)
        return CUDA_ERROR_INVALID_VALUE;
    if (forked())
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&ring_lock);
    preamble(true);
    rc = om_client_post(&om_shim.client, (uint16_t)(OM_OP_ENTRY_BASE + index), req->p,
                        (uint32_t)req->len);
    pthread_mutex_unlock(&ring_lock);
    return rc < 0 ? session_error(rc) : CUDA_SUCCESS;
}

void om_post_note_unsupported(int index)
{
    uint64_t v = (uint64_t)index;

    if (forked())
        return;
    pthread_mutex_lock(&ring_lock);
    om_client_call(&om_shim.client, OM_OP_NOTE_UNSUPPORTED, &v, sizeof(v), NULL, 0, NULL);
    pthread_mutex_unlock(&ring_lock);
}

/*
 * Stages `len` bytes (in pieces) and makes the call that uses them, as one
 * exchange: the staging buffer is the session's, so no other thread's call
 * may come between.
 */
CUresult om_rcall_staged(int index, const void *data, size_t len, const struct om_wbuf *req,
                         void *reply, size_t cap, uint32_t *ret_len)
{
    const uint8_t *p = data;
    CUresult rc;
    int sent;

    if (forked())
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&ring_lock);
    preamble(true);
    sent = om_client_post(&om_shim.client, OM_OP_STAGE_RESET, NULL, 0);
    while (sent == 0 && len > 0) {
        uint32_t n = len > OM_CHUNK_BYTES ? OM_CHUNK_BYTES : (uint32_t)len;
        sent = om_client_post(&om_shim.client, OM_OP_STAGE_APPEND, p, n);
        p += n;
        len -= n;
    }
    rc = sent < 0 ? session_error(sent) : om_rcall_locked(index, req, reply, cap, ret_len);
    pthread_mutex_unlock(&ring_lock);
    return rc;
}

/* Calls with two u64 arguments and one u64 answer share one path. */
CUresult om_rcall_u64(int index, uint64_t a, uint64_t b, uint64_t *out)
{
    uint64_t v = 0;
    uint32_t got = 0;
    REQ(req, 16);
    CUresult rc;

    om_put_u64(&req, a);
    om_put_u64(&req, b);
    rc = om_rcall(index, &req, &v, sizeof(v), &got);
    if (rc == CUDA_SUCCESS && got != sizeof(v))
        return CUDA_ERROR_UNKNOWN;
    if (out)
        *out = v;
    return rc;
}

/* The descriptor the server sends right after an answer (a HOST_MEM message carrying it with
 * SCM_RIGHTS: pinned memory, exported handles, the host-callback channel), with the ring still
 * held by the caller so that nothing comes between; -1 when none came within 5 s. */
int om_recv_fd_locked(void)
{
    struct om_msg *m = malloc(sizeof(*m));
    int fd = -1;

    if (!m)
        return -1;
    if (om_msg_recv(om_shim.client.sock, m, &fd, 5000) != 0 || m->hdr.type != OM_MSG_HOST_MEM) {
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    free(m);
    return fd;
}

/* A call whose answer is one u64 (*out untouched on failure). */
CUresult om_rcall_u64_reply(int index, const struct om_wbuf *req, uint64_t *out)
{
    uint64_t v = 0;
    uint32_t got = 0;
    CUresult rc = om_rcall(index, req, &v, sizeof(v), &got);

    if (rc == CUDA_SUCCESS && got != sizeof(v))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS)
        *out = v;
    return rc;
}
