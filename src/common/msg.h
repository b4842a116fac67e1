/* SPDX-License-Identifier: MIT */
/* Sending, receiving and validating protocol messages (include/openmps/protocol.h). */
#ifndef OM_MSG_H
#define OM_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "openmps/protocol.h"

/* A received message; the payload is NUL-terminated one byte past len so text
 * payloads can be used as strings after om_msg_text() checked them. */
struct om_msg {
    struct om_msg_hdr hdr;
    uint8_t payload[OM_MSG_MAX_PAYLOAD + 1];
};

/* Name of a message type for logs ("HELLO"), or "unknown". */
const char *om_msg_type_name(uint32_t type);

/*
 * Checks a raw datagram: size, magic, version, type, length. On success fills
 * ret_hdr and returns 0. Errors: -EBADMSG (short, bad magic, unknown type,
 * length mismatch), -EPROTONOSUPPORT (another major version; ret_hdr is filled
 * so the caller can name both versions), -EMSGSIZE (payload over the limit).
 */
int om_msg_decode(const void *buf, size_t n, struct om_msg_hdr *ret_hdr);

/* Payload decoders: every field is checked; longer payloads (newer minors) are
 * accepted, shorter ones are -EBADMSG. Outputs are untouched on failure. */
int om_decode_limits(const struct om_limits *in, struct om_limits *ret);
/* A client's effective limits: the server's (`srv`), tightened by what the client asked for in
 * its environment (`want`): a client can only tighten. */
struct om_limits om_limits_merge(const struct om_limits *srv, const struct om_limits *want);
int om_decode_hello(const void *p, size_t len, struct om_hello *ret);
int om_decode_welcome(const void *p, size_t len, struct om_welcome *ret);
/* ndevs: the server's devices, which the client's map must name. */
int om_decode_adopt(const void *p, size_t len, uint32_t ndevs, struct om_srv_adopt *ret);
int om_decode_srv_client(const void *p, size_t len, struct om_srv_client *ret);
/* A client's changed limits (SRV_CLIENT_LIMITS): a client id, the reserved word 0, its limits as
 * om_decode_limits checks them. */
int om_decode_client_limits(const void *p, size_t len, struct om_srv_client_limits *ret);
/* A server's READY: its device names and bus ids come back NUL-terminated, every byte outside
 * printable ASCII replaced with '?' (the server is its user's process). */
int om_decode_srv_ready(const void *p, size_t len, struct om_srv_ready *ret_head,
                        struct om_device_info *ret_devs, uint32_t max_devs);
/* A server's accounting (SRV_STATS): at most max_clients and max_usage records, each client once,
 * each usage record naming one of the message's clients and a device below OM_MAX_DEVICES, a
 * known state; the records are copied out. The numbers themselves are the server's word (its
 * user's process): the daemon shows them, never acts on them. */
int om_decode_srv_stats(const void *p, size_t len, struct om_srv_stats *ret_head,
                        struct om_stats_client *ret_clients, uint32_t max_clients,
                        struct om_stats_usage *ret_usage, uint32_t max_usage);
int om_decode_u32_pair(const void *p, size_t len, uint32_t *ret_a, uint32_t *ret_b);

/* A text payload: no NUL bytes, at most max_len bytes. Returns 0 or -EBADMSG. */
int om_msg_text(const struct om_msg *m, size_t max_len);

/* Sends one message, with send_fd attached when >= 0 (still owned by the
 * caller). Never raises SIGPIPE. Returns 0 or -errno. */
int om_msg_send(int fd, uint16_t type, uint16_t flags, const void *payload, size_t len,
                int send_fd);
int om_msg_send_text(int fd, uint16_t type, uint16_t flags, const char *text);

/*
 * Receives one message into *ret. A file descriptor that came with it is
 * stored in *ret_fd (owned by the caller) when ret_fd is not NULL; otherwise,
 * or when the message is invalid, received descriptors are closed. When the
 * kernel could not deliver the descriptor (our table is full) the message is
 * returned with *ret_fd = -1.
 * timeout_ms < 0 waits forever. Returns 0, -ETIMEDOUT, -ECONNRESET (peer
 * gone), or the decode errors of om_msg_decode.
 */
int om_msg_recv(int fd, struct om_msg *ret, int *ret_fd, int timeout_ms);

#endif
