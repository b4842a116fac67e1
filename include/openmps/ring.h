/* SPDX-License-Identifier: MIT */
/* Layout of the shared-memory command ring between a client and its server. */
#ifndef OPENMPS_RING_H
#define OPENMPS_RING_H

#include <stdint.h>

/*
 * One memfd per session, created by the server and passed to the client with
 * SCM_RIGHTS. It holds a header and two single-producer single-consumer byte
 * rings: the submission queue (client -> server) and the completion queue
 * (server -> client). Records are a struct om_rec followed by `len` payload
 * bytes, stored modulo the ring size (a record may wrap).
 *
 * Indices are free-running 64-bit byte counts. Each side keeps a private copy
 * of the index it owns and never trusts the shared copy of it; the index it
 * reads from the other side is checked before use (tail - head <= size).
 *
 * Doorbells are futex words (shared, not FUTEX_PRIVATE): the producer bumps
 * `doorbell` after publishing and calls FUTEX_WAKE only when `sleepers` is
 * non-zero; the consumer that found the ring empty spins briefly, then
 * registers in `sleepers`, re-checks, and sleeps on the value it read.
 * `space_bell` / `space_sleepers` do the same for a producer waiting for room.
 */

#define OM_RING_MAGIC 0x474e5252u /* "RRNG" */
#define OM_RING_MAJOR 1
#define OM_RING_MINOR 1

struct om_ring_queue {
    _Alignas(64) uint64_t head; /* consumer's index */
    _Alignas(64) uint64_t tail; /* producer's index */
    _Alignas(64) uint32_t doorbell;
    uint32_t sleepers;
    _Alignas(64) uint32_t space_bell;
    uint32_t space_sleepers;
};

struct om_ring_header {
    uint32_t magic;
    uint16_t major;
    uint16_t minor;
    uint32_t total_bytes; /* the whole mapping */
    uint32_t queue_bytes; /* data bytes of each queue, a power of two */
    uint32_t sq_data_off; /* offsets of the data areas from the mapping start */
    uint32_t cq_data_off;
    _Alignas(64) struct om_ring_queue sq; /* client -> server */
    struct om_ring_queue cq;              /* server -> client */
    /* Written by the server only: changes whenever the SM count the client would be answered
     * (cuDeviceGetAttribute's MULTIPROCESSOR_COUNT: its SM share, partition or lane) may have
     * changed. The client keeps that count while this word stays what it was when it asked
     * (minor 1). A client that writes it fools only its own cache. */
    _Alignas(64) uint32_t limits_epoch;
};

/* One record. `op` names the operation (the data plane's opcode table), `seq`
 * pairs a completion with its submission, `status` is the result on
 * completions (a CUresult or -errno). */
struct om_rec {
    uint32_t len; /* payload bytes after this header */
    uint16_t op;
    uint16_t flags;
    uint32_t seq;
    int32_t status;
};

/* Operations of the control plane; the data plane adds its own above 1000. */
#define OM_OP_PING 1    /* echo the payload back */
#define OM_OP_GOODBYE 2 /* the client is leaving; no completion */

#define OM_REC_MAX_PAYLOAD (1u << 20)

#endif
