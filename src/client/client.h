/* SPDX-License-Identifier: MIT */
/* The client side of a session: handshake with the daemon and server, and calls over the ring. */
#ifndef OM_CLIENT_H
#define OM_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/ring.h"
#include "openmps/protocol.h"

/* Milliseconds between checks that the server is still there while waiting
 * for a completion: a dead server is noticed within this time. */
#define OM_CLIENT_LIVENESS_MS 100

struct om_client {
    int sock;
    void *ring_map;
    size_t ring_len;
    struct om_ring_end tx, rx;
    const uint32_t *limits_epoch; /* the server's word in the ring header, or NULL (minor 0) */
    uint32_t next_seq;
    pid_t server_pid;
    uint32_t client_id;
    uint32_t ndevices;
    bool queued;        /* the daemon said we wait behind another user */
    bool dead;          /* the session is over; why says why */
    int end_code;       /* a CUresult the server gave as the reason (a GPU fault), or 0 */
    bool taking_output; /* in the calls that take kernel printf output (om_client_call) */
    char why[256];
};

/* Reads CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT and
 * CUDA_MPS_CLIENT_PRIORITY. On a malformed value returns -EINVAL and names
 * the variable in err. */
int om_client_limits_from_env(struct om_limits *ret, char *err, size_t errlen);

/*
 * The handshake in three steps (om_client_open runs them all; tests run them
 * one by one to die between them):
 *   connect: -ENOENT / -ECONNREFUSED mean no daemon (run without openmps); -EACCES a pipe
 *            directory or socket that is neither root's nor ours, or cannot be reached (err
 *            says which): no daemon either, but worth a warning;
 *   hello:   sends who we are and our limits;
 *   welcome: waits for the server's welcome (QUEUED notices are noted in
 *            c->queued), maps the ring. A REFUSE gives -EPERM with the
 *            reason in err; a protocol mismatch -EPROTONOSUPPORT.
 * timeout_ms < 0 waits as long as it takes (MPS clients of another user wait).
 */
int om_client_connect(struct om_client *c, const char *pipe_dir, char *err, size_t errlen);
int om_client_hello(struct om_client *c, const struct om_limits *want, char *err, size_t errlen);
int om_client_welcome(struct om_client *c, int timeout_ms, char *err, size_t errlen);

int om_client_open(struct om_client *c, const char *pipe_dir, int timeout_ms, char *err,
                   size_t errlen);

/* The environment variable `name` as a count of microseconds from 0 to max, or dflt (unset, or
 * not such a count: said on stderr), read once into *cache (~0u until then). For the client's
 * measuring settings. */
unsigned om_client_env_us(unsigned *cache, const char *name, unsigned dflt, unsigned max);

/*
 * One call: sends a record and waits for its completion, whose payload is
 * copied into reply (cap bytes; *ret_len gets its size). Returns the
 * completion's status (>= 0 as the server set it, a CUresult later), or
 * -ECONNRESET when the session ended (c->why says why, within
 * OM_CLIENT_LIVENESS_MS of the server's death), -EPROTO on a corrupt ring.
 */
int om_client_call(struct om_client *c, uint16_t op, const void *payload, uint32_t len, void *reply,
                   size_t cap, uint32_t *ret_len);

/* Sends a record without waiting for anything back (launches, async copies):
 * the server reports its errors at the next synchronising call. */
int om_client_post(struct om_client *c, uint16_t op, const void *payload, uint32_t len);

/* False once the server ended the session or died (c->why says why). Never blocks. */
bool om_client_alive(struct om_client *c);

/* Says goodbye (when the session is alive) and frees everything. */
void om_client_close(struct om_client *c);

#endif
