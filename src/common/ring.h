/* SPDX-License-Identifier: MIT */
/* Single-producer single-consumer rings in shared memory with futex doorbells. */
#ifndef OM_RING_H
#define OM_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "openmps/ring.h"

/* One side's view of one queue: the shared queue plus the private copy of the
 * index this side owns. */
struct om_ring_end {
    struct om_ring_queue *q;
    uint8_t *data;
    uint32_t size; /* power of two */
    uint64_t pos;  /* head for a consumer, tail for a producer: never read back from q */
};

/* The shape of a ring as checked once; each side keeps its own copy, never
 * re-reading the header the peer can rewrite. */
struct om_ring_geometry {
    uint32_t queue_bytes;
    uint32_t sq_data_off;
    uint32_t cq_data_off;
};

/* The server creates the memfd (queue_bytes per queue, a power of two >= 4096),
 * seals its size and maps it. On success *ret_fd and *ret_map are the caller's. */
int om_ring_create(uint32_t queue_bytes, int *ret_fd, void **ret_map, size_t *ret_len,
                   struct om_ring_geometry *ret_geo);

/* The client maps a memfd of `len` bytes it received, checks that its size is
 * sealed and that its header is sane. fd stays the caller's. Returns 0 or
 * -EBADMSG / -EPROTONOSUPPORT / -errno. */
int om_ring_attach(int fd, size_t len, void **ret_map, struct om_ring_geometry *ret_geo);

/* The two ends each side uses: the server produces on cq and consumes sq. */
void om_ring_ends(void *map, const struct om_ring_geometry *geo, bool server,
                  struct om_ring_end *ret_tx, struct om_ring_end *ret_rx);

/*
 * Publishes one record. Returns 0, -EAGAIN when there is no room (see
 * om_ring_wait_space), -EMSGSIZE when it can never fit, -EPROTO when the
 * peer's index is impossible (the peer corrupted the ring).
 */
int om_ring_send(struct om_ring_end *tx, const struct om_rec *rec, const void *payload);

/*
 * Copies the next record out of the ring: header into *ret_rec, payload into
 * buf (cap bytes). The copy is taken before anything is checked, so a peer
 * that scribbles on the ring meanwhile cannot change what was validated.
 * Returns 0, -EAGAIN when empty, -EPROTO for an impossible index or length,
 * -EMSGSIZE when the payload exceeds cap (the record is consumed).
 */
int om_ring_recv(struct om_ring_end *rx, struct om_rec *ret_rec, void *buf, size_t cap);

/* Waits until the ring has a record or timeout_ms passed (-1: forever) or
 * *stop becomes true (checked at every wake-up). Spins spin_us first.
 * Returns 0 when data may be there, -ETIMEDOUT otherwise. */
int om_ring_wait_data(struct om_ring_end *rx, int timeout_ms, unsigned spin_us, const int *stop);
/* The same with a timeout in microseconds (a session's held launches wait that long at most). */
int om_ring_wait_data_us(struct om_ring_end *rx, unsigned timeout_us, unsigned spin_us,
                         const int *stop);
/* Waits for room for `need` bytes in tx; same conventions. */
int om_ring_wait_space(struct om_ring_end *tx, size_t need, int timeout_ms, const int *stop);

/* Wakes whoever sleeps on the queue's doorbell (used to stop a waiting thread). */
void om_ring_kick(struct om_ring_queue *q);

#endif
