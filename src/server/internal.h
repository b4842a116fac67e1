/* SPDX-License-Identifier: MIT */
/* State of openmps-server, shared by its files. */
#ifndef OM_SERVER_INTERNAL_H
#define OM_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/driver.h"
#include "../common/ring.h"
#include "openmps/protocol.h"

/* Bytes of each ring direction per client. */
#define OM_SERVER_RING_BYTES (1u << 20)
/* Longest a session worker sleeps before it looks at its stop flag again. */
#define OM_SESSION_POLL_MS 100

/*
 * One client's session. Everything the client holds in the server is
 * reachable from here, so that session_free releases all of it in one place
 * whatever the moment the client died.
 */
struct session {
    uint32_t id;
    pid_t pid;
    uid_t uid;
    int sock; /* the client's socket, handed over by the daemon */
    int ring_fd;
    void *ring_map;
    size_t ring_len;
    struct om_ring_end tx, rx;
    struct om_limits limits;
    pthread_t worker;
    bool worker_started;
    int stop;       /* asks the worker to leave (__atomic) */
    int failed;     /* the worker found a protocol error (__atomic) */
    uint64_t calls; /* records served */
    struct session *next;
};

struct server {
    int chan; /* to the daemon */
    uid_t uid;
    struct om_driver drv;
    struct om_device_info devs[OM_MAX_DEVICES];
    int ndevs;
    om_cu_context ctx[OM_MAX_DEVICES];
    struct om_limits limits; /* from the daemon, for new clients */
    struct session *sessions;
    unsigned nsessions;
    bool stopping; /* graceful: exit when the last client left */
};

/* session.c */
void om_session_adopt(struct server *srv, int fd, const struct om_srv_adopt *a);
void om_session_end(struct server *srv, struct session *s, const char *why);
struct session *om_session_find_fd(struct server *srv, int fd);
struct session *om_session_find_pid(struct server *srv, pid_t pid);
/* Tells the daemon a client came (OM_CLIENT_UP) or went (OM_CLIENT_DOWN). Every
 * client the daemon hands over gets exactly one UP or DOWN for its first fate. */
void om_session_report(struct server *srv, uint32_t id, pid_t pid, uint32_t event);

#endif
