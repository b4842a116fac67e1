/* SPDX-License-Identifier: MIT */
/* Operations carried in ring records: driver entry points and the plumbing around them. */
#ifndef OPENMPS_OPS_H
#define OPENMPS_OPS_H

/*
 * A driver entry point travels as op OM_OP_ENTRY_BASE + its index in
 * api/driver_api.tsv (OM_IDX_<symbol>). Client and server are built from the
 * same table, and a session only exists between equal protocol versions.
 * Payloads are sequences of little-endian u64s and byte strings, each entry
 * point's layout given by its row in api/remote/<family>.tsv: generated into
 * src/server/gen/decoders.c and src/client/gen/remote_stubs.c, or written by
 * hand in src/server/api/<family>.c and src/client/api/<family>.c.
 */
#define OM_OP_ENTRY_BASE 1000

/* Record flags. */
#define OM_REC_POSTED 0x1u /* asynchronous: no completion; errors are kept for the next sync */
#define OM_REC_OUTPUT 0x2u /* on an answer: kernel output waits (OM_OP_TAKE_OUTPUT) */
/* On an answer: a fatal fault ends the server; its OUTPUT messages, then TERMINATED, follow on the
 * socket: the client waits for them before the call returns */
#define OM_REC_ENDING 0x4u

/* Plumbing operations (below OM_OP_ENTRY_BASE). */
#define OM_OP_STAGE_RESET 10  /* drop the session's staging buffer */
#define OM_OP_STAGE_APPEND 11 /* append the payload to it (posted) */
/* u64 entry index: the client met an entry point openmps does not support (for server.log) */
#define OM_OP_NOTE_UNSUPPORTED 12
/* u64 room, u64 which (0 stdout, 1 stderr; absent: stdout): answered with up to room bytes of
 * what the driver printed for the client's kernels on that stream (printf; assert messages) */
#define OM_OP_TAKE_OUTPUT 13
/* u64 device (the server's ordinal), posted: the calls after it run on that device, until the
 * next; the client sends it when its calling thread's current device changed */
#define OM_OP_SET_DEVICE 14

/* Largest payload of one record the client sends; bigger data is staged in pieces. */
#define OM_CHUNK_BYTES (256u * 1024u)
/* Largest host-to-device copy whose bytes ride in the call itself (no staging records). */
#define OM_INLINE_COPY_MAX 4096u
/* Largest staging of one call: bigger pageable copies are several calls. */
#define OM_STAGE_PIECE (64u << 20)

#endif
