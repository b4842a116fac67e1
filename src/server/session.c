/* SPDX-License-Identifier: MIT */
/* Client sessions in the server: the handshake, the command ring, and freeing everything. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/log.h"
#include "../common/msg.h"
#include "../common/sock.h"

/* Tells the daemon a client came or went. */
void om_session_report(struct server *srv, uint32_t id, pid_t pid, uint32_t event)
{
    /* No device is used before the data plane exists: device_mask 0. */
    struct om_srv_client m = {.client_id = id, .pid = (uint32_t)pid, .event = event};

    if (om_msg_send(srv->chan, OM_MSG_SRV_CLIENT, 0, &m, sizeof(m), -1) < 0)
        om_warn("cannot tell the daemon about client %d", (int)pid);
}

/* Serves one record. Returns 0, or -EPROTO to end the session. */
static int serve(struct session *s, const struct om_rec *rec, const uint8_t *payload)
{
    struct om_rec reply = {.op = rec->op, .seq = rec->seq};

    switch (rec->op) {
    case OM_OP_PING: reply.len = rec->len; break;
    case OM_OP_GOODBYE: return -ECONNRESET;
    default:
        om_err("client %d sent unknown operation %u; closing its session", (int)s->pid, rec->op);
        return -EPROTO;
    }
    for (;;) {
        int rc = om_ring_send(&s->tx, &reply, payload);
        if (rc == 0)
            return 0;
        if (rc != -EAGAIN) {
            om_err("client %d corrupted its completion ring (%s); closing its session", (int)s->pid,
                   strerror(-rc));
            return -EPROTO;
        }
        /* Bounded waits: the doorbell is in memory the client can scribble on,
         * so a stop request must not depend on it waking us. */
        om_ring_wait_space(&s->tx, reply.len, OM_SESSION_POLL_MS, &s->stop);
        if (__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE))
            return -ECONNRESET;
    }
}

static void *worker_main(void *arg)
{
    struct session *s = arg;
    uint8_t *buf = malloc(OM_REC_MAX_PAYLOAD);

    if (!buf) {
        __atomic_store_n(&s->failed, 1, __ATOMIC_RELEASE);
        shutdown(s->sock, SHUT_RDWR);
        return NULL;
    }
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        struct om_rec rec;
        int rc = om_ring_recv(&s->rx, &rec, buf, OM_REC_MAX_PAYLOAD);
        if (rc == -EAGAIN) {
            om_ring_wait_data(&s->rx, OM_SESSION_POLL_MS, 50, &s->stop);
            continue;
        }
        if (rc < 0) {
            om_err("client %d sent a malformed record (%s); closing its session", (int)s->pid,
                   strerror(-rc));
            rc = -EPROTO;
        } else {
            s->calls++;
            rc = serve(s, &rec, buf);
        }
        if (rc < 0) {
            if (rc == -EPROTO)
                __atomic_store_n(&s->failed, 1, __ATOMIC_RELEASE);
            /* The main thread notices the hang-up and frees the session. */
            shutdown(s->sock, SHUT_RDWR);
            break;
        }
    }
    free(buf);
    return NULL;
}

/* Stops and joins the worker; at most OM_SESSION_POLL_MS whatever the client
 * did to the doorbells. */
static void stop_worker(struct session *s)
{
    if (!s->worker_started)
        return;
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    om_ring_kick(s->rx.q);
    om_ring_kick(s->tx.q);
    pthread_join(s->worker, NULL);
    s->worker_started = false;
}

static void session_free(struct session *s)
{
    stop_worker(s);
    if (s->ring_map)
        munmap(s->ring_map, s->ring_len);
    if (s->ring_fd >= 0)
        close(s->ring_fd);
    if (s->sock >= 0)
        close(s->sock);
    free(s);
}

static void log_limits(const struct session *s)
{
    char pct[16], size[32];

    if (s->limits.active_thread_pct_milli) {
        om_format_percentage(s->limits.active_thread_pct_milli, pct, sizeof(pct));
        om_info("client %d: active thread percentage %s", (int)s->pid, pct);
    }
    for (uint32_t i = 0; i < s->limits.ndevices; i++) {
        if (!s->limits.mem_limit[i])
            continue;
        om_format_size(s->limits.mem_limit[i], size, sizeof(size));
        om_info("client %d: device %u pinned memory limit %s", (int)s->pid, i, size);
    }
    if (s->limits.priority)
        om_info("client %d: priority %u (below normal)", (int)s->pid, s->limits.priority);
}

/* Takes ownership of fd whatever happens. */
void om_session_adopt(struct server *srv, int fd, const struct om_srv_adopt *a)
{
    struct om_welcome w = {0};
    struct om_ring_geometry geo;
    struct session *s;
    pid_t pid;
    uid_t uid;
    int rc;

    s = calloc(1, sizeof(*s));
    if (!s) {
        close(fd);
        om_session_report(srv, a->client_id, (pid_t)a->pid, OM_CLIENT_DOWN);
        return;
    }
    s->id = a->client_id;
    s->pid = (pid_t)a->pid;
    s->uid = (uid_t)a->uid;
    s->sock = fd;
    s->ring_fd = -1;
    s->limits = a->limits;
    fcntl(fd, F_SETFL, O_NONBLOCK);
    /* The daemon vouches for the client, but the socket is the client's
     * own: its credentials must be the ones the daemon named. */
    if (om_sock_peercred(fd, &pid, &uid, NULL) < 0 || pid != s->pid || uid != srv->uid) {
        om_err("refusing client %u: its socket belongs to pid %d uid %u, not pid %d uid %u", s->id,
               (int)pid, (unsigned)uid, (int)s->pid, (unsigned)srv->uid);
        om_msg_send_text(fd, OM_MSG_REFUSE, 0, "openmps-server: credentials do not match");
        goto fail;
    }
    if (srv->stopping) {
        om_msg_send_text(fd, OM_MSG_REFUSE, 0, "openmps-server: the server is shutting down");
        goto fail;
    }
    rc = om_ring_create(OM_SERVER_RING_BYTES, &s->ring_fd, &s->ring_map, &s->ring_len, &geo);
    if (rc < 0) {
        om_err("client %d: cannot create its ring: %s", (int)s->pid, strerror(-rc));
        om_msg_send_text(fd, OM_MSG_REFUSE, 0, "openmps-server: cannot create the command ring");
        goto fail;
    }
    om_ring_ends(s->ring_map, &geo, true, &s->tx, &s->rx);
    if (pthread_create(&s->worker, NULL, worker_main, s) != 0) {
        om_err("client %d: cannot start its worker thread", (int)s->pid);
        goto fail;
    }
    s->worker_started = true;
    w.server_pid = (uint32_t)getpid();
    w.client_id = s->id;
    w.ring_bytes = (uint32_t)s->ring_len;
    w.ndevices = (uint32_t)srv->ndevs;
    rc = om_msg_send(fd, OM_MSG_WELCOME, 0, &w, sizeof(w), s->ring_fd);
    if (rc < 0) {
        om_info("client %d left during its handshake (%s)", (int)s->pid, strerror(-rc));
        goto fail;
    }
    /* The mapping keeps the memory; one descriptor per session is enough. */
    close(s->ring_fd);
    s->ring_fd = -1;
    s->next = srv->sessions;
    srv->sessions = s;
    srv->nsessions++;
    om_info("Client %d connected (client id %u, %u client(s))", (int)s->pid, s->id, srv->nsessions);
    log_limits(s);
    om_session_report(srv, s->id, s->pid, OM_CLIENT_UP);
    return;
fail:
    om_session_report(srv, s->id, s->pid, OM_CLIENT_DOWN);
    session_free(s);
}

void om_session_end(struct server *srv, struct session *s, const char *why)
{
    for (struct session **pp = &srv->sessions; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    }
    srv->nsessions--;
    om_session_report(srv, s->id, s->pid, OM_CLIENT_DOWN);
    stop_worker(s); /* before reading what the worker wrote */
    om_info("Client %d disconnected (%s; %llu call(s) served; %u client(s) left)", (int)s->pid,
            __atomic_load_n(&s->failed, __ATOMIC_ACQUIRE) ? "protocol error" : why,
            (unsigned long long)s->calls, srv->nsessions);
    session_free(s);
}

struct session *om_session_find_fd(struct server *srv, int fd)
{
    for (struct session *s = srv->sessions; s; s = s->next)
        if (s->sock == fd)
            return s;
    return NULL;
}

struct session *om_session_find_pid(struct server *srv, pid_t pid)
{
    for (struct session *s = srv->sessions; s; s = s->next)
        if (s->pid == pid)
            return s;
    return NULL;
}
