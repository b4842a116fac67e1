/* SPDX-License-Identifier: MIT */
/* The executor: runs one call of a client through its handler (gen/decoders.c's table), then
 * what every call shares: a fatal fault noted, a posted call's error kept for its stream. */
#include <string.h>
#include <unistd.h>

#include "../common/log.h"
#include "exec.h"

/*
 * Every handler takes the request (untrusted bytes, read through om_rbuf),
 * checks every handle and address range against what this client owns, and
 * returns a CUresult; answers go into `out`. The rules that keep clients
 * independent: never the context's NULL stream (each client gets its own
 * non-blocking streams), synchronous calls become asynchronous ones on the
 * client's stream followed by a wait on that stream only, and nothing that
 * waits for every kernel (cuMemFree, module unload) is issued for a client.
 */

CUresult om_exec(struct session *s, int index, const void *in, size_t in_len, void *out,
                 size_t out_cap, size_t *ret_out_len, bool posted)
{
    struct call c = {.s = s,
                     .in = {.p = in, .len = in_len},
                     .out = {.p = out, .cap = out_cap},
                     .posted = posted};
    om_handler h = index >= 0 && index < OM_HANDLER_COUNT ? om_handlers[index] : NULL;
    CUresult rc;

    s->call_stream = NULL;
    /* The small copies answered before their DMA are done before any other call (api/copies.c:
     * their slots, and what a call may see of their stream). */
    if (index != OM_IDX_op_copy_htod)
        om_copy_settle(s, !posted);
    om_syncword_record(s); /* a client that sends a record spins no more (syncword.c) */
    if (!h) {
        client_err(s, "client %d asked for %s, which the server does not execute", (int)s->pid,
                   index >= 0 && index < OM_HANDLER_COUNT ? om_server_entry_name(index) : "?");
        rc = CUDA_ERROR_NOT_SUPPORTED;
    } else {
        rc = h(&c);
    }
    if (c.out.overflow)
        rc = CUDA_ERROR_UNKNOWN;
    if (om_server_fatal(rc)) {
        om_err("client %d: %s failed with CUresult %d, a fatal GPU fault", (int)s->pid,
               om_server_entry_name(index), rc);
        om_server_fault(rc, s->pid);
    }
    if (posted && rc != CUDA_SUCCESS)
        om_error_post(s, rc); /* its stream's synchronising calls report it (errors.c) */
    else if (rc == CUDA_SUCCESS && s->nperr &&
             (index == OM_IDX_cuEventRecord || index == OM_IDX_cuEventRecordWithFlags)) {
        uint64_t ev; /* the event, first in both requests (api/remote/streams.tsv), checked */
        memcpy(&ev, in, sizeof(ev));
        om_error_event_recorded(s, (CUevent)(uintptr_t)ev); /* it stands behind the error */
    }
    if (posted && s->send_fd_close && s->send_fd_after >= 0)
        close(s->send_fd_after);
    if (posted) {
        s->send_fd_after = -1; /* a descriptor only ever follows an answer */
        s->send_fd_close = false;
    }
    *ret_out_len = rc == CUDA_SUCCESS ? c.out.len : 0;
    return rc;
}
