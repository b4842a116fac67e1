/* SPDX-License-Identifier: MIT */
/* The client side of a session: handshake with the daemon and server, and calls over the ring. */
#define _GNU_SOURCE
#include "client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/msg.h"
#include "../common/sock.h"
#include "openmps/ops.h"

int om_client_limits_from_env(struct om_limits *ret, char *err, size_t errlen)
{
    struct om_limits l = {0};
    const char *v;

    v = getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
    if (v && *v && om_parse_percentage(v, &l.active_thread_pct_milli) < 0) {
        snprintf(err, errlen,
                 "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%s is not a percentage in (0, 100]", v);
        return -EINVAL;
    }
    v = getenv("CUDA_MPS_CLIENT_PRIORITY");
    if (v && *v) {
        if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0) {
            snprintf(err, errlen, "CUDA_MPS_CLIENT_PRIORITY=%s must be 0 or 1", v);
            return -EINVAL;
        }
        l.priority = (uint32_t)(v[0] - '0');
    }
    v = getenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
    if (v && *v && om_parse_mem_limit_list(v, &l) < 0) {
        snprintf(err, errlen,
                 "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=%s is not a list like 0=1G,1=512M or "
                 "GPU-<uuid>=1G",
                 v);
        return -EINVAL;
    }
    *ret = l;
    return 0;
}

/* Whether path (the pipe directory or its socket) may be a daemon's we trust: there, of the
 * kind it should be, and root's or ours (anyone can create /tmp/openmps, or a socket in a
 * directory anyone may write, first). 0, -ENOENT (nothing there), or -EACCES with err set. */
static int trusted_path(const char *path, bool dir, char *err, size_t errlen)
{
    struct stat st;

    if (lstat(path, &st) < 0) {
        if (errno == ENOENT)
            return -ENOENT;
        snprintf(err, errlen, "%s cannot be reached: %s", path, strerror(errno));
        return -EACCES;
    }
    if (dir ? !S_ISDIR(st.st_mode) : !S_ISSOCK(st.st_mode)) {
        snprintf(err, errlen, "%s is not a %s", path, dir ? "directory" : "socket");
        return -EACCES;
    }
    if (st.st_uid != 0 && st.st_uid != geteuid()) {
        snprintf(err, errlen, "%s belongs to uid %u, neither root nor this user", path,
                 (unsigned)st.st_uid);
        return -EACCES;
    }
    return 0;
}

int om_client_connect(struct om_client *c, const char *pipe_dir, char *err, size_t errlen)
{
    char path[300];
    uid_t uid = 0;
    int fd;

    memset(c, 0, sizeof(*c));
    c->sock = -1;
    if (om_path_join(path, sizeof(path), pipe_dir, OM_CONTROL_SOCKET) < 0) {
        snprintf(err, errlen, "the pipe directory path %s is too long", pipe_dir);
        return -ENAMETOOLONG;
    }
    /* Looked at before connecting: a squatter's listener never gets our hello. */
    fd = trusted_path(pipe_dir, true, err, errlen);
    if (fd == 0)
        fd = trusted_path(path, false, err, errlen);
    if (fd == -ENOENT)
        snprintf(err, errlen, "no openmps daemon at %s: %s", path, strerror(ENOENT));
    if (fd < 0)
        return fd;
    fd = om_sock_connect(path);
    if (fd == -ENOENT || fd == -ECONNREFUSED) { /* gone, or a socket left by a daemon that died */
        snprintf(err, errlen, "no openmps daemon at %s: %s", path, strerror(-fd));
        return fd;
    }
    if (fd < 0) {
        snprintf(err, errlen, "%s cannot be reached: %s", path, strerror(-fd));
        return -EACCES;
    }
    /* Only a daemon run by root or by ourselves may receive our hello and
     * hand us shared memory. */
    if (om_sock_peercred(fd, NULL, &uid, NULL) < 0 || (uid != 0 && uid != geteuid())) {
        snprintf(err, errlen, "the daemon socket %s belongs to uid %u, neither root nor this user",
                 path, (unsigned)uid);
        close(fd);
        return -EACCES;
    }
    c->sock = fd;
    return 0;
}

/* A variable's text into a field of the hello; -1 with err set when it does not fit. */
static int hello_text(char *field, size_t cap, const char *value, const char *name, char *err,
                      size_t errlen)
{
    if (strlen(value) >= cap) {
        snprintf(err, errlen, "%s is longer than %zu characters", name, cap - 1);
        return -1;
    }
    strcpy(field, value);
    return 0;
}

int om_client_hello(struct om_client *c, const struct om_limits *want, char *err, size_t errlen)
{
    struct om_hello *h = calloc(1, sizeof(*h)); /* 4 KiB of text: not on a program's stack */
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    const char *limit = getenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"); /* checked: limits_from_env */
    const char *part = getenv("CUDA_MPS_SM_PARTITION");
    int rc;

    if (!h)
        return -ENOMEM;
    h->pid = (uint32_t)getpid();
    if (want)
        h->want = *want;
    /* set, even empty: the daemon reads it against the server's devices */
    if (visible && hello_text(h->visible, sizeof(h->visible), visible, "CUDA_VISIBLE_DEVICES", err,
                              errlen) < 0) {
        free(h);
        return -EINVAL;
    }
    if (visible)
        h->flags |= OM_HELLO_VISIBLE;
    if (limit && strcasestr(limit, "GPU-") && strlen(limit) < sizeof(h->mem_limit)) {
        h->flags |= OM_HELLO_MEM_LIMIT; /* its UUID entries: the daemon knows the devices */
        strcpy(h->mem_limit, limit);
    }
    /* the daemon resolves it (-S: docs/operations.md) */
    if (part && *part &&
        hello_text(h->sm_partition, sizeof(h->sm_partition), part, "CUDA_MPS_SM_PARTITION", err,
                   errlen) < 0) {
        free(h);
        return -EINVAL;
    }
    if (part && *part)
        h->flags |= OM_HELLO_SM_PARTITION;
    rc = om_msg_send(c->sock, OM_MSG_HELLO, 0, h, sizeof(*h), -1);
    free(h);
    if (rc < 0)
        snprintf(err, errlen, "cannot send the hello to the daemon: %s", strerror(-rc));
    return rc;
}

int om_client_welcome(struct om_client *c, int timeout_ms, char *err, size_t errlen)
{
    struct om_msg *m = malloc(sizeof(*m));
    struct om_welcome w;
    struct om_ring_geometry geo;
    int fd = -1, rc;

    if (!m)
        return -ENOMEM;
    for (;;) {
        rc = om_msg_recv(c->sock, m, &fd, timeout_ms);
        if (rc == -EPROTONOSUPPORT) {
            snprintf(err, errlen,
                     "openmps protocol version mismatch: this client speaks %u.%u, "
                     "the daemon %u.%u",
                     OM_PROTO_MAJOR, OM_PROTO_MINOR, m->hdr.major, m->hdr.minor);
            goto out;
        }
        if (rc < 0) {
            snprintf(err, errlen, "no welcome from the openmps server: %s",
                     rc == -ECONNRESET ? "the connection closed" : strerror(-rc));
            goto out;
        }
        if (m->hdr.type == OM_MSG_QUEUED) {
            c->queued = true;
            continue;
        }
        if (m->hdr.type == OM_MSG_REFUSE) {
            snprintf(err, errlen, "%.1000s",
                     om_msg_text(m, 1000) == 0 ? (const char *)m->payload : "refused");
            /* the daemon says we see no device: a process without devices, not a failure */
            rc = m->hdr.flags & OM_REFUSE_INVALID_DEVICE ? -ENXIO
                 : m->hdr.flags & OM_REFUSE_NO_DEVICE    ? -ENODEV
                 : m->hdr.flags & OM_REFUSE_PARTITION    ? -EKEYREJECTED
                                                         : -EPERM;
            goto out;
        }
        if (m->hdr.type != OM_MSG_WELCOME || fd < 0 ||
            om_decode_welcome(m->payload, m->hdr.len, &w) < 0) {
            snprintf(err, errlen, "invalid %s message instead of a welcome",
                     om_msg_type_name(m->hdr.type));
            rc = -EPROTO;
            goto out;
        }
        break;
    }
    rc = om_ring_attach(fd, w.ring_bytes, &c->ring_map, &geo);
    if (rc < 0) {
        snprintf(err, errlen, "cannot map the command ring: %s", strerror(-rc));
        goto out;
    }
    c->ring_len = w.ring_bytes;
    om_ring_ends(c->ring_map, &geo, false, &c->tx, &c->rx);
    /* a server of ring minor 0 writes no limits_epoch: then nothing is kept by it */
    c->limits_epoch = ((struct om_ring_header *)c->ring_map)->minor >= 1
                          ? &((struct om_ring_header *)c->ring_map)->limits_epoch
                          : NULL;
    c->server_pid = (pid_t)w.server_pid;
    c->client_id = w.client_id;
    c->ndevices = w.ndevices;
out:
    if (fd >= 0)
        close(fd); /* the mapping keeps the memory */
    free(m);
    return rc;
}

int om_client_open(struct om_client *c, const char *pipe_dir, int timeout_ms, char *err,
                   size_t errlen)
{
    struct om_limits want;
    int rc = om_client_limits_from_env(&want, err, errlen);

    if (rc < 0)
        return rc;
    rc = om_client_connect(c, pipe_dir, err, errlen);
    if (rc == 0)
        rc = om_client_hello(c, &want, err, errlen);
    if (rc == 0)
        rc = om_client_welcome(c, timeout_ms, err, errlen);
    if (rc < 0 && c->sock >= 0) {
        close(c->sock);
        c->sock = -1;
    }
    return rc;
}

/* Kernel output on the program's stdout or stderr stream, flushed, as the driver writes it. */
static void write_output(bool to_stderr, const void *p, size_t n)
{
    FILE *f = to_stderr ? stderr : stdout;

    if (n)
        fwrite(p, 1, n, f);
    fflush(f);
}

/* Called while waiting: has the server ended the session or died? */
static bool session_over(struct om_client *c)
{
    struct pollfd p = {.fd = c->sock, .events = POLLIN};
    struct om_msg *m;

    if (c->dead)
        return true;
    if (poll(&p, 1, 0) <= 0)
        return false;
    /* A pinned-memory descriptor that follows an answer is not an ending:
     * the caller of that call takes it. */
    {
        struct om_msg_hdr h;
        ssize_t n = recv(c->sock, &h, sizeof(h), MSG_PEEK | MSG_DONTWAIT);
        if (n == (ssize_t)sizeof(h) && h.magic == OM_PROTO_MAGIC && h.type == OM_MSG_HOST_MEM)
            return false;
    }
    m = malloc(sizeof(*m));
    snprintf(c->why, sizeof(c->why), "the openmps server closed the session");
    /* Kernel output the server still kept for us (an assert's message) comes first. */
    int got = m ? om_msg_recv(c->sock, m, NULL, 0) : -1;
    while (got == 0 && m->hdr.type == OM_MSG_OUTPUT) {
        write_output(m->hdr.flags & OM_OUTPUT_STDERR, m->payload, m->hdr.len);
        got = om_msg_recv(c->sock, m, NULL, 1000); /* the TERMINATED that follows */
    }
    if (got == 0 && m->hdr.type == OM_MSG_TERMINATED && om_msg_text(m, 200) == 0) {
        snprintf(c->why, sizeof(c->why), "%.200s", (const char *)m->payload);
        c->end_code = m->hdr.flags; /* the GPU fault that ended it, if one did */
    }
    free(m);
    c->dead = true;
    return true;
}

/* The server said it ends the session after this answer (a fatal fault): the output it kept for
 * us (a device-side assert's message) comes on the socket before TERMINATED, and is written
 * before the call that met the fault returns, as natively. 5 s at most. */
static void wait_ending(struct om_client *c)
{
    for (int i = 0; i < 50 && !c->dead; i++) {
        struct pollfd p = {.fd = c->sock, .events = POLLIN};
        if (poll(&p, 1, 100) > 0)
            session_over(c);
    }
}

bool om_client_alive(struct om_client *c)
{
    return !session_over(c);
}

/* Puts one record in the ring, waiting for room while the session lives. */
static int send_record(struct om_client *c, const struct om_rec *rec, const void *payload)
{
    int rc;

    if (c->dead)
        return -ECONNRESET;
    while ((rc = om_ring_send(&c->tx, rec, payload)) == -EAGAIN) {
        if (session_over(c))
            return -ECONNRESET;
        om_ring_wait_space(&c->tx, rec->len, OM_CLIENT_LIVENESS_MS, NULL);
    }
    return rc;
}

int om_client_post(struct om_client *c, uint16_t op, const void *payload, uint32_t len)
{
    struct om_rec rec = {.len = len, .op = op, .flags = OM_REC_POSTED, .seq = ++c->next_seq};

    return send_record(c, &rec, payload);
}

/*
 * Kernel printf output the server caught for this client (src/server/output.c), written to
 * this process's stdout as the driver would have written it in a process of its own: into the
 * program's stdio stream, then flushed; what the driver wrote on stderr (assert messages) to
 * stderr. Taken right after the answer that said it waits, before
 * the call returns to the program, so it comes before whatever the program prints next.
 */
static void take_output(struct om_client *c)
{
    static char buf[64 * 1024];
    uint32_t got = 0;
    int rc;

    c->taking_output = true;
    for (uint64_t which = 0; which < 2; which++) { /* stdout's, then stderr's (asserts) */
        uint64_t req[2] = {sizeof(buf), which};
        do {
            got = 0;
            rc = om_client_call(c, OM_OP_TAKE_OUTPUT, req, sizeof(req), buf, sizeof(buf), &got);
            if (rc >= 0 && got)
                fwrite(buf, 1, got, which ? stderr : stdout);
        } while (rc >= 0 && got == sizeof(buf));
        fflush(which ? stderr : stdout);
    }
    c->taking_output = false;
}

unsigned om_client_env_us(unsigned *cache, const char *name, unsigned dflt, unsigned max)
{
    unsigned got = __atomic_load_n(cache, __ATOMIC_RELAXED);
    const char *v;
    char *end = NULL;
    long x;

    if (got != ~0u)
        return got;
    v = getenv(name);
    x = v && *v ? strtol(v, &end, 10) : -1;
    got = dflt;
    if (x >= 0 && x <= (long)max && !*end)
        got = (unsigned)x;
    else if (v && *v)
        fprintf(stderr, "openmps: %s=%s is not a count of microseconds from 0 to %u; %u it is\n",
                name, v, max, dflt);
    __atomic_store_n(cache, got, __ATOMIC_RELAXED);
    return got;
}

/* How long a call spins for its answer before it sleeps: 20 µs (most answers come within
 * microseconds), or OPENMPS_CLIENT_SPIN_US (0 to 1 s), for measuring the choice (B8 in
 * docs/benchmarks.md: spinning 20 ms did not keep the copies' batches short). */
static unsigned reply_spin_us(void)
{
    static unsigned us = ~0u;

    return om_client_env_us(&us, "OPENMPS_CLIENT_SPIN_US", 20, 1000000);
}

int om_client_call(struct om_client *c, uint16_t op, const void *payload, uint32_t len, void *reply,
                   size_t cap, uint32_t *ret_len)
{
    struct om_rec rec = {.len = len, .op = op, .seq = ++c->next_seq};
    struct om_rec got;
    bool spun = false, looked_again = false;
    int rc = send_record(c, &rec, payload);

    if (rc < 0)
        return rc;
    for (;;) {
        rc = om_ring_recv(&c->rx, &got, reply, cap);
        if (rc == -EAGAIN) {
            if (c->dead) {
                /* An answer the server wrote just before it ended the session is still this
                 * call's (the one that met a fault, with the output it says waits): one more
                 * look at the ring. */
                if (looked_again)
                    return -ECONNRESET;
                looked_again = true;
                continue;
            }
            /* Most answers come within microseconds: spin for them first, and look at the
             * socket (a system call) only when none came. */
            if (!spun) {
                spun = true;
                if (om_ring_wait_data(&c->rx, 0, reply_spin_us(), NULL) == 0)
                    continue;
            }
            if (session_over(c))
                return -ECONNRESET;
            om_ring_wait_data(&c->rx, OM_CLIENT_LIVENESS_MS, 0, NULL);
            continue;
        }
        if (rc < 0)
            return rc;
        if (got.seq != rec.seq) {
            /* Out of step with the server: nothing after this can be trusted. */
            c->dead = true;
            snprintf(c->why, sizeof(c->why), "the session lost step with the server");
            return -ECONNRESET;
        }
        if (ret_len)
            *ret_len = got.len;
        if (got.flags & OM_REC_ENDING)
            wait_ending(c);
        else if ((got.flags & OM_REC_OUTPUT) && !c->taking_output)
            take_output(c);
        return got.status;
    }
}

void om_client_close(struct om_client *c)
{
    if (c->ring_map && !c->dead) {
        struct om_rec rec = {.op = OM_OP_GOODBYE, .seq = ++c->next_seq};
        om_ring_send(&c->tx, &rec, NULL);
    }
    if (c->ring_map)
        munmap(c->ring_map, c->ring_len);
    if (c->sock >= 0)
        close(c->sock);
    c->ring_map = NULL;
    c->limits_epoch = NULL;
    c->sock = -1;
}
