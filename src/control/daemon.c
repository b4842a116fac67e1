/* SPDX-License-Identifier: MIT */
/* The daemon's event loop: accepting connections, queueing clients, signals and shutdown. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/log.h"
#include "../common/sock.h"

int64_t om_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sb_printf(struct strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (sb->oom)
        return;
    for (;;) {
        size_t room = sb->cap - sb->len;
        va_start(ap, fmt);
        n = vsnprintf(sb->buf ? sb->buf + sb->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            sb->oom = true;
            return;
        }
        if ((size_t)n < room) {
            sb->len += (size_t)n;
            return;
        }
        size_t cap = sb->cap ? sb->cap * 2 : 256;
        while (cap < sb->len + (size_t)n + 1)
            cap *= 2;
        char *nb = realloc(sb->buf, cap);
        if (!nb) {
            sb->oom = true;
            return;
        }
        sb->buf = nb;
        sb->cap = cap;
    }
}

void sb_free(struct strbuf *sb)
{
    free(sb->buf);
    memset(sb, 0, sizeof(*sb));
}

/* The user's entry, made when missing; NULL only when out of memory. */
static struct peer *peer_get(struct daemon *d, uid_t uid)
{
    struct peer *p;

    for (p = d->peers; p; p = p->next)
        if (p->uid == uid)
            return p;
    p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->uid = uid;
    p->log_milli = (int64_t)OM_PEER_LOG_BURST * 1000;
    p->log_at_ms = om_now_ms();
    p->next = d->peers;
    d->peers = p;
    return p;
}

static void peer_refill(struct peer *p, int64_t now)
{
    int64_t full = (int64_t)OM_PEER_LOG_BURST * 1000;

    if (now > p->log_at_ms) {
        p->log_milli += (now - p->log_at_ms) * OM_PEER_LOG_PER_S;
        if (p->log_milli > full)
            p->log_milli = full;
    }
    p->log_at_ms = now;
}

/* Says how many lines were left out, at most once a second. The line does not spend the
 * user's allowance: a flooder retrying faster than it refills would otherwise have every
 * token spent on reports of its own suppressed lines, and none of its lines logged again. */
static void peer_report(struct peer *p, int64_t now)
{
    if (!p->log_suppressed || now - p->reported_ms < 1000)
        return;
    p->reported_ms = now;
    om_log_write(OM_LOG_WARN, "uid %u: %llu log line(s) suppressed (more than %d a second)",
                 (unsigned)p->uid, (unsigned long long)p->log_suppressed, OM_PEER_LOG_PER_S);
    p->log_suppressed = 0;
}

bool om_peer_log_ok(struct daemon *d, uid_t uid)
{
    struct peer *p = peer_get(d, uid);

    if (!p)
        return true;
    int64_t now = om_now_ms();

    peer_refill(p, now);
    peer_report(p, now);
    if (p->log_milli < 1000) {
        p->log_suppressed++;
        return false;
    }
    p->log_milli -= 1000;
    return true;
}

/* Reports what was suppressed and forgets users with nothing left to count. */
static void peers_sweep(struct daemon *d, int64_t now)
{
    for (struct peer **pp = &d->peers; *pp;) {
        struct peer *p = *pp;
        peer_refill(p, now);
        peer_report(p, now);
        if (!p->nonclient && !p->waiting && !p->log_suppressed &&
            p->log_milli == (int64_t)OM_PEER_LOG_BURST * 1000) {
            *pp = p->next;
            free(p);
        } else {
            pp = &p->next;
        }
    }
}

/* Moves a connection to another kind, keeping its user's counts. */
static void conn_set_kind(struct daemon *d, struct conn *c, enum conn_kind kind)
{
    if (c->kind == CONN_WAITING) {
        c->peer->waiting--;
        if (c->wprev)
            c->wprev->wnext = c->wnext;
        else
            d->wait_head = c->wnext;
        if (c->wnext)
            c->wnext->wprev = c->wprev;
        else
            d->wait_tail = c->wprev;
        c->wnext = c->wprev = NULL;
    } else {
        c->peer->nonclient--;
    }
    c->kind = kind;
    if (kind == CONN_WAITING) {
        c->peer->waiting++;
        c->wprev = d->wait_tail;
        if (d->wait_tail)
            d->wait_tail->wnext = c;
        else
            d->wait_head = c;
        d->wait_tail = c;
    } else {
        c->peer->nonclient++;
    }
}

/* The connection is unlinked and its descriptor closed at once; the memory
 * waits for the end of the event loop's round, so that the round can still
 * tell that an entry of its poll set is gone. */
void om_conn_close(struct daemon *d, struct conn *c)
{
    if (c->kind == CONN_WAITING)
        conn_set_kind(d, c, CONN_NEW);
    c->peer->nonclient--;
    if (c->prev)
        c->prev->next = c->next;
    else
        d->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    d->nconns--;
    close(c->fd);
    c->fd = -1;
    c->dead = true;
    c->prev = NULL;
    c->next = d->dead_conns;
    d->dead_conns = c;
}

static void free_dead_conns(struct daemon *d)
{
    while (d->dead_conns) {
        struct conn *c = d->dead_conns;
        d->dead_conns = c->next;
        free(c->hello.visible);
        free(c->hello.mem_limit);
        free(c->hello.sm_partition);
        free(c->out.buf);
        free(c);
    }
}

/* How long a front-end may leave an answer unread before its connection is closed. */
#define OM_ANSWER_UNREAD_MS 60000

int om_conn_flush(struct conn *c)
{
    while (c->out.buf) {
        size_t n =
            c->out.len - c->out.off < OM_ANSWER_CHUNK ? c->out.len - c->out.off : OM_ANSWER_CHUNK;
        bool last = c->out.off + n == c->out.len;
        int rc = om_msg_send(c->fd, OM_MSG_ANSWER, c->out.flags | (last ? 0 : OM_ANSWER_MORE),
                             c->out.buf + c->out.off, n, -1);
        if (rc == -EAGAIN || rc == -EWOULDBLOCK)
            return 0; /* the rest when the socket has room (the event loop polls POLLOUT) */
        if (rc < 0)
            return rc;
        c->out.off += n;
        if (last) {
            free(c->out.buf);
            c->out.buf = NULL;
        }
    }
    return 0;
}

/* The front-end's socket is non-blocking: what it cannot take now (a long stats --json, read
 * slowly) is kept and sent as it drains, the connection's commands not read meanwhile. */
int om_send_answer(struct daemon *d, struct conn *c, bool error, const char *text, size_t len)
{
    char *copy;

    (void)d;
    if (c->out.buf) /* a front-end sends its next command only after the answer */
        return -EBUSY;
    copy = malloc(len ? len : 1);
    if (!copy)
        return om_msg_send_text(c->fd, OM_MSG_ANSWER, OM_ANSWER_ERROR, "Error: out of memory");
    memcpy(copy, text, len);
    c->out.buf = copy;
    c->out.len = len;
    c->out.off = 0;
    c->out.flags = error ? OM_ANSWER_ERROR : 0;
    c->out.since_ms = om_now_ms();
    return om_conn_flush(c);
}

/* At most once every 10 s: a flood must not become a log flood. */
static bool warn_allowed(struct daemon *d)
{
    int64_t now = om_now_ms();

    if (now - d->last_accept_warning < 10000)
        return false;
    d->last_accept_warning = now;
    return true;
}

/*
 * Whether one more connection of this user fits; if not, why holds a refusal
 * that names the limit. Root and the daemon's user may use the whole table;
 * everybody else leaves some of it to root. The user being served (its server
 * runs) may queue clients freely; a user without a server, whose clients can
 * only wait, gets a budget, and all such users together a share of the table,
 * so that the served user's clients and root's front-ends always get in.
 */
static bool admit(struct daemon *d, struct peer *p, char *why, size_t len)
{
    long share = d->max_conns - d->max_conns / 4;
    long per_user =
        share / 2 < OM_MAX_UNSERVED_CONNS_PER_UID ? share / 2 : OM_MAX_UNSERVED_CONNS_PER_UID;
    long root_reserve = d->max_conns / 8 > 2 ? d->max_conns / 8 : 2;
    long unserved = 0;

    if ((long)d->nconns >= d->max_conns) {
        snprintf(why, len,
                 "openmps-control has %u connections open, its limit (from RLIMIT_NOFILE); "
                 "try again later",
                 d->nconns);
        return false;
    }
    if (p->uid == 0 || p->uid == d->euid)
        return true;
    if ((long)d->nconns >= d->max_conns - root_reserve) {
        snprintf(why, len,
                 "openmps-control has %u connections open; the last %ld of its %ld are kept for "
                 "root; try again later",
                 d->nconns, root_reserve, d->max_conns);
        return false;
    }
    if (p->nonclient >= OM_MAX_NONCLIENT_CONNS_PER_UID) {
        snprintf(why, len,
                 "uid %u holds %u connections that are not clients (front-ends or silent ones), "
                 "the limit per user",
                 (unsigned)p->uid, p->nonclient);
        return false;
    }
    if (om_user_served(d, p->uid))
        return true;
    if ((long)(p->nonclient + p->waiting) >= per_user) {
        snprintf(
            why, len,
            "uid %u holds %u connections (clients waiting for a server, front-ends) and has no "
            "server running: the limit of %ld per such user; try again when its waiting "
            "clients are served",
            (unsigned)p->uid, p->nonclient + p->waiting, per_user);
        return false;
    }
    for (struct peer *q = d->peers; q; q = q->next)
        if (q->uid != 0 && q->uid != d->euid && !om_user_served(d, q->uid))
            unserved += q->nonclient + q->waiting;
    if (unserved >= share) {
        snprintf(why, len,
                 "users without a running server hold %ld connections, the limit of %ld they "
                 "share; uid %u may try again later",
                 unserved, share, (unsigned)p->uid);
        return false;
    }
    return true;
}

/* Closes a socket whose peer may already have sent something: what is unread
 * at close turns into a reset at the peer, which would then miss the refusal. */
static void drain_close(int fd)
{
    char buf[64];

    while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
    }
    close(fd);
}

/* Accepts on the control socket (listener -1) or a named server's or namespace's (v3.c). */
static void accept_all(struct daemon *d, int listen_fd, int listener)
{
    for (;;) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        struct conn *c;
        struct peer *p;
        char why[256];
        pid_t pid;
        uid_t uid;
        gid_t gid;

        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* The socket stays readable: stop polling it for a moment
                 * instead of spinning on the error. */
                d->accept_paused_until = om_now_ms() + 100;
                if (warn_allowed(d))
                    om_err("cannot accept connections: %s", strerror(errno));
            }
            return;
        }
        if (om_sock_peercred(fd, &pid, &uid, &gid) < 0) {
            close(fd);
            continue;
        }
        p = peer_get(d, uid);
        if (!p) {
            close(fd);
            continue;
        }
        if (listener >= 0 && !om_v3_accepted(d, (unsigned)listener, uid, NULL, why, sizeof(why))) {
            om_peer_info(d, uid, "refusing pid %d: %s", (int)pid, why);
            om_msg_send_text(fd, OM_MSG_REFUSE, 0, why);
            drain_close(fd);
            continue;
        }
        if (!admit(d, p, why, sizeof(why))) {
            /* The whole table full is everybody's problem: said at most every 10 s. */
            if ((long)d->nconns >= d->max_conns ? warn_allowed(d) : om_peer_log_ok(d, uid))
                om_err("too many connections: refusing pid %d: %s", (int)pid, why);
            om_msg_send_text(fd, OM_MSG_REFUSE, 0, why);
            drain_close(fd);
            continue;
        }
        c = calloc(1, sizeof(*c));
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->id = ++d->next_conn_id;
        c->kind = CONN_NEW;
        c->since_ms = om_now_ms();
        c->pid = pid;
        c->uid = uid;
        c->gid = gid;
        c->peer = p;
        if (listener >= 0)
            om_v3_accepted(d, (unsigned)listener, uid, c, why, sizeof(why));
        p->nonclient++;
        c->next = d->conns;
        if (d->conns)
            d->conns->prev = c;
        d->conns = c;
        d->nconns++;
    }
}

/* The hello's texts (8 KiB) are kept only where the client sent them: a connection waiting in
 * the queue costs about what it did before (the daemon takes as many as it has descriptors). */
static bool keep_hello(struct conn *c, const struct om_hello *h)
{
    c->hello.flags = h->flags;
    c->hello.want = h->want;
    if ((h->flags & OM_HELLO_VISIBLE) && !(c->hello.visible = strdup(h->visible)))
        return false;
    if ((h->flags & OM_HELLO_MEM_LIMIT) && !(c->hello.mem_limit = strdup(h->mem_limit)))
        return false;
    if ((h->flags & OM_HELLO_SM_PARTITION) && !(c->hello.sm_partition = strdup(h->sm_partition)))
        return false;
    return true;
}

static void handle_hello(struct daemon *d, struct conn *c, const struct om_msg *m)
{
    struct om_hello *h = malloc(sizeof(*h));
    char why[256];

    if (!h || om_decode_hello(m->payload, m->hdr.len, h) < 0) {
        om_peer_err(d, c->uid, "client %d sent an invalid hello; dropping it", (int)c->pid);
        free(h);
        om_conn_close(d, c);
        return;
    }
    if (!keep_hello(c, h)) {
        free(h);
        om_msg_send_text(c->fd, OM_MSG_REFUSE, 0, "openmps-control: out of memory");
        om_conn_close(d, c);
        return;
    }
    free(h);
    if (d->quitting) {
        om_msg_send_text(c->fd, OM_MSG_REFUSE, 0, "openmps-control is shutting down");
        om_conn_close(d, c);
        return;
    }
    if (c->pid == 0) {
        /* SO_PEERCRED gives 0 for a process of a pid namespace we cannot see:
         * such a client could not be told apart, listed or terminated. */
        snprintf(why, sizeof(why),
                 "openmps-control cannot see this client's pid (it runs in another pid namespace); "
                 "run the daemon in the clients' pid namespace (hostPID in Kubernetes)");
        om_peer_info(d, c->uid, "Refusing a client of uid %u: %s", (unsigned)c->uid, why);
        om_msg_send_text(c->fd, OM_MSG_REFUSE, 0, why);
        om_conn_close(d, c);
        return;
    }
    if (d->euid != 0 && c->uid != d->euid) {
        snprintf(why, sizeof(why),
                 "openmps-control runs as uid %u and serves only that user; uid %u was refused "
                 "(run the daemon as root to serve several users)",
                 (unsigned)d->euid, (unsigned)c->uid);
        om_peer_info(d, c->uid, "Refusing client %d: %s", (int)c->pid, why);
        om_msg_send_text(c->fd, OM_MSG_REFUSE, 0, why);
        om_conn_close(d, c);
        return;
    }
    om_v3_route_server(d, c); /* its server: its user's, a named server's, a multi-user one */
    om_peer_info(d, c->uid, "New client %d (uid %u) connected%s%s", (int)c->pid, (unsigned)c->uid,
                 c->route[0] ? " for server " : "", c->route);
    conn_set_kind(d, c, CONN_WAITING);
    c->since_ms = om_now_ms();
    om_daemon_schedule(d);
}

static void handle_command(struct daemon *d, struct conn *c, const struct om_msg *m)
{
    struct strbuf out = {0};
    bool error = false;
    int rc;

    if (om_msg_text(m, OM_CMD_MAX) < 0) {
        om_peer_err(d, c->uid, "front-end %d sent an invalid command message; dropping it",
                    (int)c->pid);
        om_conn_close(d, c);
        return;
    }
    if (c->awaiting) {
        om_peer_err(d, c->uid,
                    "front-end %d sent a command before its previous answer; dropping it",
                    (int)c->pid);
        om_conn_close(d, c);
        return;
    }
    conn_set_kind(d, c, CONN_UI);
    c->since_ms = om_now_ms(); /* idle time counts from the last command */
    rc = om_command_run(d, c, (const char *)m->payload, &out, &error);
    if (rc != OM_CMD_LATER) {
        if (out.oom)
            om_msg_send_text(c->fd, OM_MSG_ANSWER, OM_ANSWER_ERROR, "Error: out of memory");
        else
            om_send_answer(d, c, error, out.buf ? out.buf : "", out.len);
    }
    sb_free(&out);
}

static void handle_conn(struct daemon *d, struct conn *c, short revents)
{
    struct om_msg *m;
    int rc, fd = -1;

    if (c->out.buf) { /* its answer's rest, as its socket drains */
        if ((revents & POLLOUT) && om_conn_flush(c) == 0)
            return;
        if (revents & (POLLHUP | POLLERR | POLLOUT)) /* POLLOUT here: the send failed */
            om_conn_close(d, c);
        return;
    }
    if (c->kind == CONN_WAITING) {
        /* A waiting client only ever hangs up; anything it sends is a protocol error. */
        om_peer_info(d, c->uid, "Client %d left while waiting for its server", (int)c->pid);
        om_conn_close(d, c);
        om_daemon_schedule(d); /* it may have held others back */
        return;
    }
    m = malloc(sizeof(*m));
    if (!m)
        return;
    rc = om_msg_recv(c->fd, m, &fd, 0);
    if (fd >= 0)
        close(fd); /* nobody sends descriptors to the daemon */
    if (rc == -EAGAIN || rc == -ETIMEDOUT) {
        if (revents & (POLLHUP | POLLERR))
            om_conn_close(d, c);
        goto out;
    }
    if (rc == -ECONNRESET) {
        if (c->kind == CONN_NEW)
            om_peer_info(d, c->uid, "connection of pid %d closed before its hello", (int)c->pid);
        om_conn_close(d, c);
        goto out;
    }
    if (rc == -EPROTONOSUPPORT) {
        char text[200];
        snprintf(text, sizeof(text),
                 "openmps protocol version mismatch: the daemon speaks %u.%u, pid %d speaks %u.%u",
                 OM_PROTO_MAJOR, OM_PROTO_MINOR, (int)c->pid, m->hdr.major, m->hdr.minor);
        om_peer_err(d, c->uid, "%s; dropping it", text);
        om_msg_send_text(c->fd, OM_MSG_REFUSE, 0, text);
        om_conn_close(d, c);
        goto out;
    }
    if (rc < 0) {
        om_peer_err(d, c->uid, "malformed message from pid %d (%s); dropping the connection",
                    (int)c->pid, strerror(-rc));
        om_conn_close(d, c);
        goto out;
    }
    if (m->hdr.type == OM_MSG_HELLO && c->kind == CONN_NEW)
        handle_hello(d, c, m);
    else if (m->hdr.type == OM_MSG_COMMAND && (c->kind == CONN_NEW || c->kind == CONN_UI))
        handle_command(d, c, m);
    else {
        om_peer_err(d, c->uid, "unexpected %s message from pid %d; dropping the connection",
                    om_msg_type_name(m->hdr.type), (int)c->pid);
        om_conn_close(d, c);
    }
out:
    free(m);
}

/* Whether servers of users other than uid run (one user's at a time, as NVIDIA's MPS); with
 * stop_idle, those without clients are asked to stop (a user may have several: its named
 * servers). */
static bool other_users_servers(struct daemon *d, uid_t uid, bool stop_idle)
{
    bool any = false;

    for (struct server *s = d->servers; s; s = s->next) {
        if (s->uid == uid)
            continue;
        any = true;
        if (stop_idle && s->nclients == 0 && !s->stop_when_idle)
            om_server_shutdown(d, s, false);
    }
    return any;
}

/* A process of that named server (or plain one) of uid is still stopping: the next one starts
 * once it has gone. */
static bool same_server_stopping(struct daemon *d, uid_t uid, const char *name)
{
    for (struct server *s = d->servers; s; s = s->next)
        if (s->uid == uid && !strcmp(s->name, name) && !om_server_for(d, uid, name))
            return true;
    return false;
}

void om_daemon_schedule(struct daemon *d)
{
    d->sched_dirty = true;
}

/*
 * Decides for every waiting client, oldest first: hand it to its user's
 * server, start that server, or keep waiting while another user's server has
 * clients. A client never overtakes an older client of another user, so a
 * busy user cannot starve a waiting one. One pass is linear in the number of
 * waiting clients, and runs at most once per round of the event loop.
 */
static void schedule_pass(struct daemon *d)
{
    bool blocked = false; /* an older client of another user waits */
    uid_t blocked_uid = 0;
    struct conn *next;

    d->sched_dirty = false;
    for (struct conn *c = d->wait_head; c; c = next) {
        struct server *s;
        char err[256];

        next = c->wnext; /* c may be handed over or refused below */
        if (d->quitting) {
            om_msg_send_text(c->fd, OM_MSG_REFUSE, 0, "openmps-control is shutting down");
            om_conn_close(d, c);
            continue;
        }
        if (c->route[0] && !om_v3_route_valid(d, c))
            om_v3_route_server(d, c); /* its named server was deleted while it waited */
        s = om_server_for(d, c->route_uid, c->route);
        if (s && !(blocked && blocked_uid != c->route_uid)) {
            if (s->state == SRV_ACTIVE && s->chan_full_ms &&
                om_now_ms() - s->chan_full_ms > OM_HANDOFF_FULL_MS) {
                om_peer_err(d, c->uid,
                            "Refusing client %d: server %d has not read its channel for %d ms",
                            (int)c->pid, (int)s->pid, OM_HANDOFF_FULL_MS);
                om_msg_send_text(c->fd, OM_MSG_REFUSE, 0,
                                 "openmps-control: the server does not take clients; see "
                                 "control.log");
                om_conn_close(d, c);
            } else if (s->state == SRV_ACTIVE && !s->chan_full_ms && om_server_adopt(d, s, c)) {
                continue; /* handed over */
            }
            /* INITIALIZING: adopted when it is ready; its channel full: when there is room.
             * Either way its user's turn has begun: a younger client of another user waits
             * behind it, and stops no server of this user (one starting has no client yet). */
            if (!blocked) {
                blocked = true;
                blocked_uid = c->route_uid;
            }
            continue;
        }
        /* Its server runs, or it needs one started (another named server of its user), but an
         * older client of another user goes first: starting one now would have that client
         * stop it again, idle, at the next pass, and so on while it waits. */
        if (s || (blocked && blocked_uid != c->route_uid))
            goto wait;
        if (other_users_servers(d, c->route_uid, true))
            goto wait;
        if (same_server_stopping(d, c->route_uid, c->route))
            goto wait;
        if (!om_server_spawn(d, c->route_uid, c->route, err, sizeof(err))) {
            om_peer_err(d, c->uid, "Refusing client %d: %s", (int)c->pid, err);
            om_msg_send_text(c->fd, OM_MSG_REFUSE, 0, err);
            om_conn_close(d, c);
            continue;
        }
        if (!blocked) { /* its user's turn has begun: the server starting is not stopped */
            blocked = true;
            blocked_uid = c->route_uid;
        }
        continue;
    wait:
        if (!blocked) {
            blocked = true;
            blocked_uid = c->route_uid;
        }
        if (!c->told_queued) {
            char text[160];
            c->told_queued = true;
            snprintf(text, sizeof(text),
                     "waiting: a server of another user is busy; uid %u is served after it",
                     (unsigned)c->uid);
            om_peer_info(d, c->uid, "Client %d (uid %u) queued behind the server of another user",
                         (int)c->pid, (unsigned)c->uid);
            om_msg_send_text(c->fd, OM_MSG_QUEUED, 0, text);
        }
    }
    /* start_server for a user while another user's server runs. */
    if (d->start_uid >= 0 && !d->quitting) {
        uid_t uid = (uid_t)d->start_uid;
        char err[256];
        if (om_server_for(d, uid, d->start_name)) {
            d->start_uid = -1;
        } else if (other_users_servers(d, uid, !blocked)) {
            /* started once they have gone */
        } else if (!same_server_stopping(d, uid, d->start_name)) {
            d->start_uid = -1;
            if (!om_server_spawn(d, uid, d->start_name, err, sizeof(err)))
                om_err("start_server -uid %u: %s", (unsigned)uid, err);
        }
    }
    /* Graceful shutdowns complete when the last client has left. */
    for (struct server *s = d->servers; s; s = s->next) {
        if (s->stop_when_idle && s->nclients == 0 && s->chan >= 0 && !s->forced) {
            struct om_srv_shutdown m = {.force = 0};
            om_msg_send(s->chan, OM_MSG_SRV_SHUTDOWN, 0, &m, sizeof(m), -1);
        }
    }
}

static void start_quit(struct daemon *d, bool force)
{
    if (!d->quitting)
        om_info("Shutting down (%s)", force ? "forced" : "waiting for clients");
    d->quitting = true;
    for (struct server *s = d->servers; s; s = s->next)
        if (force ? !s->forced : !s->stop_when_idle)
            om_server_shutdown(d, s, force);
    om_daemon_schedule(d);
}

/* Called by the quit command. */
void om_daemon_quit(struct daemon *d, int timeout_s)
{
    if (timeout_s >= 0) {
        int64_t at = om_now_ms() + (int64_t)timeout_s * 1000;
        if (!d->quit_force_at_ms || at < d->quit_force_at_ms)
            d->quit_force_at_ms = at ? at : 1;
    }
    start_quit(d, timeout_s == 0);
}

static void handle_signals(struct daemon *d)
{
    struct signalfd_siginfo si;

    while (read(d->signal_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGCHLD) {
            om_server_reap(d);
            om_daemon_schedule(d);
        } else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
            om_info("Received signal %u", si.ssi_signo);
            start_quit(d, true);
        }
    }
}

static void expire_pending(struct daemon *d, struct server *s, int64_t now)
{
    struct pending **pp = &s->pending;

    while (*pp) {
        struct pending *p = *pp;
        if (now < p->deadline_ms) {
            pp = &p->next;
            continue;
        }
        for (struct conn *c = d->conns; c; c = c->next) {
            if (c->id == p->ui_id && c->awaiting == p->request_id) {
                c->awaiting = 0;
                om_msg_send_text(c->fd, OM_MSG_ANSWER, OM_ANSWER_ERROR,
                                 p->v3 ? "The server did not answer in time"
                                       : "The server did not answer in time\n1");
            }
        }
        *pp = p->next; /* a late answer finds nothing and is dropped */
        free(p);
    }
}

static void handle_timers(struct daemon *d)
{
    int64_t now = om_now_ms();
    struct conn *next;

    for (struct server *s = d->servers; s; s = s->next) /* its waiting clients are refused */
        if (s->chan_full_ms && now - s->chan_full_ms > OM_HANDOFF_FULL_MS)
            d->sched_dirty = true;

    for (struct conn *c = d->conns; c; c = next) {
        next = c->next;
        if (c->kind == CONN_NEW && now - c->since_ms > d->hello_timeout_ms) {
            om_peer_err(d, c->uid, "pid %d connected but said nothing for %d ms; dropping it",
                        (int)c->pid, d->hello_timeout_ms);
            om_conn_close(d, c);
        } else if (c->out.buf && now - c->out.since_ms > OM_ANSWER_UNREAD_MS) {
            om_peer_info(d, c->uid, "front-end pid %d left its answer unread for %d s; closing it",
                         (int)c->pid, OM_ANSWER_UNREAD_MS / 1000);
            om_conn_close(d, c);
        } else if (c->kind == CONN_UI && !c->awaiting && !c->out.buf &&
                   now - c->since_ms > OM_UI_IDLE_TIMEOUT_MS) {
            om_peer_info(d, c->uid, "front-end pid %d idle for %d s; closing it", (int)c->pid,
                         OM_UI_IDLE_TIMEOUT_MS / 1000);
            om_conn_close(d, c);
        }
    }
    for (struct server *s = d->servers; s; s = s->next) {
        if (s->kill_at_ms && now >= s->kill_at_ms) {
            om_err("Server %d did not exit in time; killing it", (int)s->pid);
            kill(s->pid, SIGKILL);
            s->kill_at_ms = 0;
        }
        if (s->state == SRV_INITIALIZING && !s->kill_at_ms &&
            now - s->started_ms > d->server_start_timeout_ms) {
            snprintf(s->fault, sizeof(s->fault), "not ready after %d s",
                     d->server_start_timeout_ms / 1000);
            om_err("Server %d is %s; killing it", (int)s->pid, s->fault);
            kill(s->pid, SIGKILL);
            s->kill_at_ms = now + d->server_kill_grace_ms;
        }
        expire_pending(d, s, now);
    }
    om_stats_expire(d, now); /* stats commands answered without a server that is too slow */
    peers_sweep(d, now);
    om_metrics_timer(d, now);
    if (d->quitting && d->quit_force_at_ms && now >= d->quit_force_at_ms) {
        d->quit_force_at_ms = 0;
        om_info("Quit timeout reached; forcing the servers down");
        start_quit(d, true);
    }
}

static int next_timeout(struct daemon *d)
{
    int64_t now = om_now_ms(), next = now + 1000;

    for (struct conn *c = d->conns; c; c = c->next)
        if (c->kind == CONN_NEW && c->since_ms + d->hello_timeout_ms + 1 < next)
            next = c->since_ms + d->hello_timeout_ms + 1;
    for (struct server *s = d->servers; s; s = s->next) {
        if (s->kill_at_ms && s->kill_at_ms < next)
            next = s->kill_at_ms;
        if (s->state == SRV_INITIALIZING && s->started_ms + d->server_start_timeout_ms < next)
            next = s->started_ms + d->server_start_timeout_ms + 1;
    }
    if (d->accept_paused_until > now && d->accept_paused_until < next)
        next = d->accept_paused_until;
    if (d->quit_force_at_ms && d->quit_force_at_ms < next)
        next = d->quit_force_at_ms;
    next = om_metrics_next_ms(d, next);
    return next <= now ? 0 : (int)(next - now);
}

/* Who a poll entry belongs to. A handler may close a connection and another
 * may get its descriptor's number: a closed connection stays allocated, marked
 * dead, until the round ends; a server is looked up by id. */
struct poll_owner {
    bool is_server;
    uint64_t id;
    struct conn *conn;
    int listener; /* a named server's or namespace's socket (v3.c): its index + 1, else 0 */
};

static struct server *server_by_id(struct daemon *d, uint64_t id)
{
    for (struct server *s = d->servers; s; s = s->next)
        if (s->id == id)
            return s;
    return NULL;
}

/* The defaults of NVIDIA's daemon from its own environment (docs/operations.md, "Limits"): the SM
 * share and the priority its servers start with, as set_default_active_thread_percentage and
 * set_default_client_priority set them; a value that is neither is logged and ignored. */
static void defaults_from_environment(struct daemon *d)
{
    const char *v = getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
    uint32_t milli;
    char buf[16];

    if (v && *v) {
        if (om_parse_percentage(v, &milli) == 0) {
            d->defaults.active_thread_pct_milli = milli;
            om_format_percentage(milli, buf, sizeof(buf));
            om_info("default active thread percentage %s (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE)", buf);
        } else {
            om_warn("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%.32s is not a percentage in (0, 100]: "
                    "ignored",
                    v);
        }
    }
    v = getenv("CUDA_MPS_CLIENT_PRIORITY");
    if (v && *v) {
        if ((v[0] == '0' || v[0] == '1') && !v[1]) {
            d->defaults.priority = (uint32_t)(v[0] - '0');
            om_info("default client priority %s (CUDA_MPS_CLIENT_PRIORITY)", v);
        } else {
            om_warn("CUDA_MPS_CLIENT_PRIORITY=%.32s is neither 0 nor 1: ignored", v);
        }
    }
}

int om_daemon_run(struct daemon *d)
{
    struct pollfd *pfds = NULL;
    struct poll_owner *owners = NULL;
    size_t cap = 0;

    om_info("openmps-control %s started (pipe directory %s, log directory %s, up to %ld "
            "connections)",
            OPENMPS_VERSION, d->pipe_dir, d->log_dir, d->max_conns);
    defaults_from_environment(d);
    om_metrics_started(d);
    for (;;) {
        size_t n = 0, want = 2 + OM_METRICS_MAX_FDS, nmain;
        int rc;

        if (d->quitting && !d->servers)
            break;
        want += d->nconns + om_v3_nlisteners(d);
        for (struct server *s = d->servers; s; s = s->next)
            want++;
        if (want > cap) {
            struct pollfd *np = realloc(pfds, want * 2 * sizeof(*np));
            struct poll_owner *no = np ? realloc(owners, want * 2 * sizeof(*no)) : NULL;
            if (np)
                pfds = np;
            if (!np || !no) {
                om_err("out of memory in the event loop");
                sleep(1);
                continue;
            }
            owners = no;
            cap = want * 2;
        }
        pfds[n++] = (struct pollfd){.fd = d->signal_fd, .events = POLLIN};
        /* While accepting fails for lack of descriptors, leave the socket alone. */
        pfds[n++] = (struct pollfd){.fd = om_now_ms() < d->accept_paused_until ? -1 : d->listen_fd,
                                    .events = POLLIN};
        for (unsigned i = 0; i < om_v3_nlisteners(d); i++) {
            owners[n] = (struct poll_owner){false, 0, NULL, (int)i + 1};
            pfds[n++] = (struct pollfd){
                .fd = om_now_ms() < d->accept_paused_until ? -1 : om_v3_listener_fd(d, i),
                .events = POLLIN};
        }
        /* The servers' channels before the connections: what a server said before a command
         * was sent (a client up, om_session_adopt) is read before the command is answered. */
        for (struct server *s = d->servers; s; s = s->next) {
            owners[n] = (struct poll_owner){true, s->id, NULL, 0};
            pfds[n++] = (struct pollfd){.fd = s->chan, /* -1 is skipped */
                                        .events = POLLIN | (s->chan_full_ms ? POLLOUT : 0)};
        }
        for (struct conn *c = d->conns; c; c = c->next) {
            owners[n] = (struct poll_owner){false, c->id, c, 0};
            pfds[n++] = (struct pollfd){.fd = c->fd, .events = c->out.buf ? POLLOUT : POLLIN};
        }
        nmain = n;
        n += om_metrics_pollfds(d, pfds + n);
        rc = poll(pfds, n, next_timeout(d));
        if (rc < 0 && errno != EINTR) {
            om_err("poll: %s", strerror(errno));
            break;
        }
        handle_timers(d);
        if (rc > 0 && pfds[0].revents)
            handle_signals(d);
        if (rc > 0 && pfds[1].revents)
            accept_all(d, d->listen_fd, -1);
        for (size_t i = 2; rc > 0 && i < nmain; i++) {
            if (!pfds[i].revents || pfds[i].fd < 0)
                continue;
            if (owners[i].listener) {
                /* a command of this round may have closed it: then its index is another's */
                unsigned l = (unsigned)owners[i].listener - 1;
                if (l < om_v3_nlisteners(d) && om_v3_listener_fd(d, l) == pfds[i].fd)
                    accept_all(d, pfds[i].fd, (int)l);
            } else if (owners[i].is_server) {
                struct server *s = server_by_id(d, owners[i].id);
                if (s && s->chan == pfds[i].fd && (pfds[i].revents & POLLOUT)) {
                    s->chan_full_ms = 0; /* room again: the waiting clients go next pass */
                    d->sched_dirty = true;
                    om_server_flush_client_limits(s); /* and the limits not sent yet, first */
                }
                if (s && s->chan == pfds[i].fd && (pfds[i].revents & ~POLLOUT))
                    om_server_handle_message(d, s);
            } else if (!owners[i].conn->dead) {
                handle_conn(d, owners[i].conn, pfds[i].revents);
            }
        }
        if (rc > 0)
            om_metrics_handle(d, pfds + nmain, n - nmain);
        if (d->sched_dirty)
            schedule_pass(d);
        free_dead_conns(d);
    }
    free(pfds);
    free(owners);
    while (d->conns)
        om_conn_close(d, d->conns);
    free_dead_conns(d);
    while (d->peers) {
        struct peer *p = d->peers;
        d->peers = p->next;
        free(p);
    }
    om_info("openmps-control exiting");
    return 0;
}
