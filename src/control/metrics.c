/* SPDX-License-Identifier: MIT */
/*
 * Metrics for Prometheus: the daemon's view of its servers and their clients in the Prometheus
 * text exposition format (version 0.0.4), served over HTTP at OPENMPS_METRICS=HOST:PORT (off
 * unless set) and written to OPENMPS_METRICS_TEXTFILE=PATH for node_exporter's textfile
 * collector (rewritten every OPENMPS_METRICS_TEXTFILE_S seconds, 15 by default, by rename, so a
 * reader never sees half a file). docs/operations.md, "Metrics", lists the series and labels.
 *
 * The HTTP side is the smallest that Prometheus and curl need: GET /metrics (and HEAD), one
 * request per connection, answered with Connection: close. It runs in the daemon's event loop
 * (no thread: the daemon's tables are single-threaded), non-blocking, so a scraper that stops
 * reading holds nothing but its connection: at most METRICS_MAX_CONNS connections at once (more
 * are closed at accept), each with a request of at most METRICS_MAX_REQUEST bytes and
 * METRICS_TIMEOUT_MS to send it and read the answer.
 *
 * A scrape reads what the daemon already keeps (struct server, struct client_rec) and the
 * servers' accounting as the daemon last asked for it (stats.c, every OPENMPS_METRICS_REFRESH_S
 * seconds, 5 by default, one request at a time): a scrape itself asks the servers nothing.
 * Values of labels that clients chose (the command name, the cgroup) are escaped as the format
 * requires and kept UTF-8.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"

#define METRICS_MAX_CONNS 16
#define METRICS_MAX_REQUEST 8192
#define METRICS_TIMEOUT_MS 5000
#define METRICS_TEXTFILE_DEFAULT_S 15

struct http_conn {
    int fd; /* -1: free */
    int64_t since_ms;
    size_t in_len;
    char in[METRICS_MAX_REQUEST];
    char *out; /* the answer being sent, NULL while the request is read */
    size_t out_len, out_off;
};

struct om_metrics {
    int listen_fd;
    int64_t paused_until_ms; /* accepting failed for lack of descriptors */
    char where[128];         /* HOST:PORT as bound, for the log */
    struct http_conn conns[METRICS_MAX_CONNS];
    char *textfile;
    int textfile_s;
    /* The servers' accounting (stats.c), asked every refresh_s seconds: its series as text. */
    char *acct;
    size_t acct_len;
    int refresh_s;
    int64_t acct_next_ms, acct_asked_ms, acct_at_ms;
    int64_t textfile_next_ms;
    bool textfile_told;
    uint64_t scrapes;
};

/* ------------------------------------------------------------------ the exposition */

/* Bytes of the UTF-8 sequence at p (1 to 4), 0 where p does not start one (Prometheus refuses a
 * whole scrape with a label value that is not UTF-8, and a command name may be any bytes, or
 * cut inside a character). */
static int utf8_len(const unsigned char *p)
{
    int n = p[0] < 0x80                    ? 1
            : p[0] >= 0xc2 && p[0] <= 0xdf ? 2
            : p[0] >= 0xe0 && p[0] <= 0xef ? 3
            : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4
                                           : 0;

    for (int i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((n == 3 && p[0] == 0xe0 && p[1] < 0xa0) || (n == 3 && p[0] == 0xed && p[1] >= 0xa0) ||
        (n == 4 && p[0] == 0xf0 && p[1] < 0x90) || (n == 4 && p[0] == 0xf4 && p[1] >= 0x90))
        return 0; /* overlong, a surrogate, past U+10FFFF */
    return n;
}

/* A label value as the format wants it: backslash, double quote and newline escaped; other
 * control bytes as spaces; what is not UTF-8 as '?'. */
static void put_label(struct strbuf *sb, const char *name, const char *value, bool first)
{
    const unsigned char *p = (const unsigned char *)value;

    sb_printf(sb, "%s%s=\"", first ? "" : ",", name);
    while (*p) {
        int n = utf8_len(p);
        if (*p == '\\' || *p == '"')
            sb_printf(sb, "\\%c", *p);
        else if (*p == '\n')
            sb_printf(sb, "\\n");
        else if (*p < 0x20 || *p == 0x7f)
            sb_printf(sb, " ");
        else if (n == 0)
            sb_printf(sb, "?");
        else
            sb_printf(sb, "%.*s", n, (const char *)p);
        p += n ? n : 1;
    }
    sb_printf(sb, "\"");
}

static void family(struct strbuf *sb, const char *name, const char *type, const char *help)
{
    sb_printf(sb, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static const char *state_name(enum server_state s)
{
    switch (s) {
    case SRV_INITIALIZING: return "initializing";
    case SRV_ACTIVE: return "active";
    case SRV_FAULT: return "fault";
    case SRV_STOPPING: return "stopping";
    }
    return "unknown";
}

/* The labels that name a client: its pid, its user, its command. */
void om_metrics_client_labels(struct strbuf *sb, const struct server *s, const struct client_rec *c)
{
    char num[24];

    snprintf(num, sizeof(num), "%d", (int)c->pid);
    put_label(sb, "pid", num, true);
    (void)s;
    snprintf(num, sizeof(num), "%u", (unsigned)c->uid); /* its own: a -m server's are several */
    put_label(sb, "uid", num, false);
    put_label(sb, "command", c->command, false);
}

/* What a cgroup path says of its job or pod: Slurm's ".../job_<id>/..." and the kubelet's
 * ".../pod<uid>/..." or "...-pod<uid with _>.slice" (empty where it says nothing). */
static void cgroup_names(const char *path, char *job, size_t jcap, char *pod, size_t pcap)
{
    const char *j = strstr(path, "/job_"), *p = strstr(path, "pod");
    size_t n = 0;

    job[0] = pod[0] = '\0';
    if (j) {
        j += 5;
        while (j[n] >= '0' && j[n] <= '9' && n + 1 < jcap)
            n++;
        snprintf(job, jcap, "%.*s", (int)n, j);
    }
    for (; p; p = strstr(p + 3, "pod")) {
        const char *u = p + 3;
        n = 0;
        while (((u[n] >= '0' && u[n] <= '9') || (u[n] >= 'a' && u[n] <= 'f') || u[n] == '-' ||
                u[n] == '_') &&
               n + 1 < pcap)
            n++;
        if (n >= 32) { /* a UUID, with - or _ */
            snprintf(pod, pcap, "%.*s", (int)n, u);
            for (char *c = pod; *c; c++)
                if (*c == '_')
                    *c = '-';
            return;
        }
    }
}

static void uuid_text(const uint8_t u[16], char *out, size_t cap)
{
    snprintf(out, cap, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
}

void om_metrics_render(struct daemon *d, struct strbuf *sb)
{
    unsigned nservers = 0, nclients = 0, nwaiting = 0;
    char num[32], uuid[48];

    for (struct server *s = d->servers; s; s = s->next) {
        nservers++;
        for (struct client_rec *c = s->clients; c; c = c->next)
            nclients += c->up;
    }
    for (struct conn *c = d->wait_head; c; c = c->wnext)
        nwaiting++;

    family(sb, "openmps_info", "gauge", "The daemon's version (always 1).");
    sb_printf(sb, "openmps_info{");
    put_label(sb, "version", OPENMPS_VERSION, true);
    sb_printf(sb, "} 1\n");
    family(sb, "openmps_servers", "gauge", "Servers running (one per user being served).");
    sb_printf(sb, "openmps_servers %u\n", nservers);
    family(sb, "openmps_clients", "gauge", "Clients served by all servers.");
    sb_printf(sb, "openmps_clients %u\n", nclients);
    family(sb, "openmps_clients_waiting", "gauge",
           "Clients waiting for a server (another user's server is running, or theirs starts).");
    sb_printf(sb, "openmps_clients_waiting %u\n", nwaiting);

    /* The devices: the daemon's probe's where it made one, else a running server's. */
    const struct om_device_info *devs = d->ndevs > 0 ? d->devs : NULL;
    int ndevs = d->ndevs > 0 ? d->ndevs : 0;
    for (struct server *s = d->servers; s && !devs; s = s->next)
        if (s->ready && s->ndevs > 0) {
            devs = s->devs;
            ndevs = (int)(s->ndevs < OM_MAX_DEVICES ? s->ndevs : OM_MAX_DEVICES);
        }
    if (ndevs > 0) {
        family(sb, "openmps_device_info", "gauge",
               "A GPU being shared, by ordinal, UUID, name and PCI bus id (always 1).");
        for (int i = 0; i < ndevs; i++) {
            char name[OM_DEVICE_NAME_MAX + 1], bus[OM_PCI_ID_MAX + 1];
            snprintf(name, sizeof(name), "%.*s", (int)OM_DEVICE_NAME_MAX, devs[i].name);
            snprintf(bus, sizeof(bus), "%.*s", (int)OM_PCI_ID_MAX, devs[i].pci_bus_id);
            snprintf(num, sizeof(num), "%d", i);
            uuid_text(devs[i].uuid, uuid, sizeof(uuid));
            sb_printf(sb, "openmps_device_info{");
            put_label(sb, "device", num, true);
            put_label(sb, "uuid", uuid, false);
            put_label(sb, "name", name, false);
            put_label(sb, "pci_bus_id", bus, false);
            sb_printf(sb, "} 1\n");
        }
    }

    if (nservers) {
        family(sb, "openmps_server_info", "gauge", "A server, by pid, user and state (always 1).");
        for (struct server *s = d->servers; s; s = s->next) {
            sb_printf(sb, "openmps_server_info{");
            snprintf(num, sizeof(num), "%d", (int)s->pid);
            put_label(sb, "pid", num, true);
            snprintf(num, sizeof(num), "%u", (unsigned)s->uid);
            put_label(sb, "uid", num, false);
            put_label(sb, "state", state_name(s->state), false);
            sb_printf(sb, "} 1\n");
        }
        family(sb, "openmps_server_clients", "gauge", "Clients a server serves.");
        for (struct server *s = d->servers; s; s = s->next) {
            unsigned n = 0;
            for (struct client_rec *c = s->clients; c; c = c->next)
                n += c->up;
            sb_printf(sb, "openmps_server_clients{");
            snprintf(num, sizeof(num), "%d", (int)s->pid);
            put_label(sb, "pid", num, true);
            snprintf(num, sizeof(num), "%u", (unsigned)s->uid);
            put_label(sb, "uid", num, false);
            sb_printf(sb, "} %u\n", n);
        }
        family(sb, "openmps_server_uptime_seconds", "gauge", "Seconds since a server started.");
        for (struct server *s = d->servers; s; s = s->next) {
            sb_printf(sb, "openmps_server_uptime_seconds{");
            snprintf(num, sizeof(num), "%d", (int)s->pid);
            put_label(sb, "pid", num, true);
            sb_printf(sb, "} %.3f\n", (double)(om_now_ms() - s->started_ms) / 1000.0);
        }
    }

    if (nclients) {
        family(sb, "openmps_client_info", "gauge",
               "A client, by pid, user, command and server (always 1).");
        for (struct server *s = d->servers; s; s = s->next)
            for (struct client_rec *c = s->clients; c; c = c->next) {
                if (!c->up)
                    continue;
                char job[32], pod[64];
                sb_printf(sb, "openmps_client_info{");
                om_metrics_client_labels(sb, s, c);
                snprintf(num, sizeof(num), "%d", (int)s->pid);
                put_label(sb, "server", num, false);
                put_label(sb, "namespace", c->ns, false);
                put_label(sb, "cgroup", c->cgroup, false);
                cgroup_names(c->cgroup, job, sizeof(job), pod, sizeof(pod));
                put_label(sb, "slurm_job", job, false);
                put_label(sb, "pod_uid", pod, false);
                sb_printf(sb, "} 1\n");
            }
        family(sb, "openmps_client_device_memory_bytes", "gauge",
               "Device memory a client holds, as its server last said.");
        for (struct server *s = d->servers; s; s = s->next)
            for (struct client_rec *c = s->clients; c; c = c->next)
                if (c->up) {
                    sb_printf(sb, "openmps_client_device_memory_bytes{");
                    om_metrics_client_labels(sb, s, c);
                    sb_printf(sb, "} %llu\n", (unsigned long long)c->device_bytes);
                }
        family(sb, "openmps_client_active_thread_percentage", "gauge",
               "The SM share a client's server applies to it, in percent (100: none).");
        for (struct server *s = d->servers; s; s = s->next)
            for (struct client_rec *c = s->clients; c; c = c->next)
                if (c->up) {
                    uint32_t milli = c->limits.active_thread_pct_milli;
                    sb_printf(sb, "openmps_client_active_thread_percentage{");
                    om_metrics_client_labels(sb, s, c);
                    sb_printf(sb, "} %.3f\n", milli ? (double)milli / 1000.0 : 100.0);
                }
        family(sb, "openmps_client_priority", "gauge",
               "A client's scheduling priority (0 normal, 1 below normal).");
        for (struct server *s = d->servers; s; s = s->next)
            for (struct client_rec *c = s->clients; c; c = c->next)
                if (c->up) {
                    sb_printf(sb, "openmps_client_priority{");
                    om_metrics_client_labels(sb, s, c);
                    sb_printf(sb, "} %u\n", (unsigned)c->limits.priority);
                }
        bool capped = false;
        for (struct server *s = d->servers; s; s = s->next)
            for (struct client_rec *c = s->clients; c; c = c->next)
                for (uint32_t i = 0; c->up && i < c->limits.ndevices && i < OM_MAX_DEVICES; i++)
                    capped |= c->limits.mem_limit[i] != 0;
        if (capped)
            family(sb, "openmps_client_memory_limit_bytes", "gauge",
                   "The device memory cap a client's server applies on a device (only where set).");
        for (struct server *s = d->servers; s && capped; s = s->next)
            for (struct client_rec *c = s->clients; c; c = c->next)
                for (uint32_t i = 0; c->up && i < c->limits.ndevices && i < OM_MAX_DEVICES; i++)
                    if (c->limits.mem_limit[i]) {
                        sb_printf(sb, "openmps_client_memory_limit_bytes{");
                        om_metrics_client_labels(sb, s, c);
                        snprintf(num, sizeof(num), "%u", (unsigned)i);
                        put_label(sb, "device", num, false);
                        sb_printf(sb, "} %llu\n", (unsigned long long)c->limits.mem_limit[i]);
                    }
    }
    if (d->metrics && d->metrics->acct) {
        family(sb, "openmps_accounting_age_seconds", "gauge",
               "Seconds since the servers' accounting below was asked for.");
        sb_printf(sb, "openmps_accounting_age_seconds %.3f\n",
                  (double)(om_now_ms() - d->metrics->acct_at_ms) / 1000.0);
        sb_printf(sb, "%.*s", (int)d->metrics->acct_len, d->metrics->acct);
    }
    family(sb, "openmps_metrics_scrapes_total", "counter",
           "HTTP requests for /metrics answered since the daemon started.");
    sb_printf(sb, "openmps_metrics_scrapes_total %llu\n",
              (unsigned long long)(d->metrics ? d->metrics->scrapes : 0));
}

/* ------------------------------------------------------------------ HTTP */

/* HOST:PORT, [V6HOST]:PORT or :PORT (every address); port 0 picks a free one (the log says
 * which). */
static int metrics_listen(struct om_metrics *m, const char *spec, char *err, size_t errlen)
{
    char host[96], port[16];
    const char *colon = strrchr(spec, ':');
    struct addrinfo hints = {0}, *res = NULL;
    int fd = -1, one = 1, rc;

    if (!colon || !colon[1] || strlen(colon + 1) >= sizeof(port) ||
        (size_t)(colon - spec) >= sizeof(host)) {
        snprintf(err, errlen, "OPENMPS_METRICS=%.64s is not HOST:PORT (for example 127.0.0.1:9400)",
                 spec);
        return -EINVAL;
    }
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = '\0';
    strcpy(port, colon + 1);
    for (const char *p = port; *p; p++)
        if (*p < '0' || *p > '9') {
            snprintf(err, errlen, "OPENMPS_METRICS=%.64s: the port %s is not a number", spec, port);
            return -EINVAL;
        }
    if (atoi(port) > 65535) {
        snprintf(err, errlen, "OPENMPS_METRICS=%.64s: the port %s is past 65535", spec, port);
        return -EINVAL;
    }
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        memmove(host, host + 1, strlen(host));
        host[strlen(host) - 1] = '\0';
    }
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "OPENMPS_METRICS=%.64s: cannot resolve %s: %s", spec, host,
                 gai_strerror(rc));
        return -EINVAL;
    }
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 16) == 0)
            break;
        rc = errno;
        close(fd);
        fd = -1;
        errno = rc;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "OPENMPS_METRICS=%.64s: cannot listen: %s", spec, strerror(errno));
        return rc;
    }
    {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        char h[INET6_ADDRSTRLEN] = "?";
        int p = 0;
        if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
            if (ss.ss_family == AF_INET) {
                struct sockaddr_in *in = (struct sockaddr_in *)&ss;
                inet_ntop(AF_INET, &in->sin_addr, h, sizeof(h));
                p = ntohs(in->sin_port);
            } else if (ss.ss_family == AF_INET6) {
                struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
                inet_ntop(AF_INET6, &in6->sin6_addr, h, sizeof(h));
                p = ntohs(in6->sin6_port);
            }
        }
        snprintf(m->where, sizeof(m->where), ss.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", h, p);
    }
    m->listen_fd = fd;
    return 0;
}

static void conn_free(struct http_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->out);
    c->out = NULL;
    c->fd = -1;
    c->in_len = c->out_len = c->out_off = 0;
}

static void answer(struct daemon *d, struct http_conn *c, int status, const char *reason,
                   const char *type, const char *body, size_t body_len, bool head)
{
    struct strbuf sb = {0};

    (void)d;
    sb_printf(&sb,
              "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
              "Connection: close\r\n\r\n",
              status, reason, type, body_len);
    if (!head && body_len && !sb.oom) {
        char *p = realloc(sb.buf, sb.len + body_len);
        if (!p) {
            sb.oom = true;
        } else {
            sb.buf = p;
            memcpy(sb.buf + sb.len, body, body_len);
            sb.len += body_len;
        }
    }
    if (sb.oom) {
        sb_free(&sb);
        conn_free(c);
        return;
    }
    c->out = sb.buf;
    c->out_len = sb.len;
    c->out_off = 0;
}

static void text_answer(struct daemon *d, struct http_conn *c, int status, const char *reason,
                        const char *text)
{
    answer(d, c, status, reason, "text/plain; charset=utf-8", text, strlen(text), false);
}

/* The request line of a whole request head: GET or HEAD of /metrics, or an error. */
static void serve_request(struct daemon *d, struct http_conn *c)
{
    char method[8], path[256], version[16];
    char *eol = memchr(c->in, '\n', c->in_len);
    bool head;

    if (!eol || eol - c->in > 300 || sscanf(c->in, "%7s %255s %15s", method, path, version) != 3 ||
        strncmp(version, "HTTP/1.", 7) != 0) {
        text_answer(d, c, 400, "Bad Request", "openmps: not an HTTP/1.x request line\n");
        return;
    }
    head = strcmp(method, "HEAD") == 0;
    if (!head && strcmp(method, "GET") != 0) {
        text_answer(d, c, 405, "Method Not Allowed", "openmps: only GET and HEAD are served\n");
        return;
    }
    char *q = strchr(path, '?');
    if (q)
        *q = '\0';
    if (strcmp(path, "/metrics") == 0) {
        struct strbuf sb = {0};
        d->metrics->scrapes++;
        om_metrics_render(d, &sb);
        if (sb.oom) {
            sb_free(&sb);
            text_answer(d, c, 500, "Internal Server Error", "openmps: out of memory\n");
            return;
        }
        answer(d, c, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", sb.buf, sb.len, head);
        sb_free(&sb);
    } else if (strcmp(path, "/") == 0) {
        text_answer(d, c, 200, "OK", "openmps-control: the metrics are at /metrics\n");
    } else {
        text_answer(d, c, 404, "Not Found",
                    "openmps: no such page (the metrics are at /metrics)\n");
    }
}

static void conn_read(struct daemon *d, struct http_conn *c)
{
    ssize_t n = read(c->fd, c->in + c->in_len, sizeof(c->in) - 1 - c->in_len);

    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        conn_free(c);
        return;
    }
    c->in_len += (size_t)n;
    c->in[c->in_len] = '\0';
    if (strstr(c->in, "\r\n\r\n") || strstr(c->in, "\n\n"))
        serve_request(d, c);
    else if (c->in_len == sizeof(c->in) - 1)
        text_answer(d, c, 431, "Request Header Fields Too Large",
                    "openmps: the request's head is longer than 8 KiB\n");
}

static void conn_write(struct http_conn *c)
{
    ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);

    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        conn_free(c);
        return;
    }
    c->out_off += (size_t)n;
    if (c->out_off == c->out_len) {
        shutdown(c->fd, SHUT_WR);
        conn_free(c);
    }
}

static void accept_conns(struct om_metrics *m)
{
    for (;;) {
        int fd = accept4(m->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) /* out of descriptors: not polled a while */
                m->paused_until_ms = om_now_ms() + 200;
            return;
        }
        struct http_conn *c = NULL;
        for (int i = 0; i < METRICS_MAX_CONNS && !c; i++)
            if (m->conns[i].fd < 0)
                c = &m->conns[i];
        /* Every slot taken: the connection that has been sending its request longest makes
         * room (a scraper sends its request at once; one that sends nothing is the one to go). */
        bool evict = !c;
        for (int i = 0; evict && i < METRICS_MAX_CONNS; i++)
            if (!m->conns[i].out && (!c || m->conns[i].since_ms < c->since_ms))
                c = &m->conns[i];
        if (!c) { /* every slot is sending an answer: this one is closed, they go on */
            close(fd);
            continue;
        }
        if (c->fd >= 0)
            conn_free(c);
        c->fd = fd;
        c->since_ms = om_now_ms();
        c->in_len = 0;
    }
}

/* ------------------------------------------------------------------ the textfile */

static void write_textfile(struct daemon *d)
{
    struct om_metrics *m = d->metrics;
    struct strbuf sb = {0};
    char tmp[4200];
    int fd;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp", m->textfile) >= (int)sizeof(tmp))
        return;
    om_metrics_render(d, &sb);
    fd = sb.oom ? -1 : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd >= 0 && write(fd, sb.buf, sb.len) == (ssize_t)sb.len && close(fd) == 0 &&
        rename(tmp, m->textfile) == 0) {
        m->textfile_told = false;
    } else {
        if (!m->textfile_told)
            om_warn("metrics: cannot write %s: %s (tried again every %d s)", m->textfile,
                    sb.oom ? "out of memory" : strerror(errno), m->textfile_s);
        m->textfile_told = true;
        if (fd >= 0)
            close(fd);
        unlink(tmp);
    }
    sb_free(&sb);
}

/* ------------------------------------------------------------------ the daemon's hooks */

void om_metrics_accounting(struct daemon *d, struct strbuf *text)
{
    struct om_metrics *m = d->metrics;

    if (!m || text->oom)
        return;
    free(m->acct);
    m->acct = text->buf; /* taken over */
    m->acct_len = text->len;
    m->acct_at_ms = m->acct_asked_ms;
    text->buf = NULL;
    text->len = text->cap = 0;
}

int om_metrics_setup(struct daemon *d, char *err, size_t errlen)
{
    const char *spec = getenv("OPENMPS_METRICS");
    const char *file = getenv("OPENMPS_METRICS_TEXTFILE");
    const char *every = getenv("OPENMPS_METRICS_TEXTFILE_S");
    const char *refresh = getenv("OPENMPS_METRICS_REFRESH_S");
    struct om_metrics *m;
    int rc;

    if ((!spec || !*spec) && (!file || !*file))
        return 0;
    m = calloc(1, sizeof(*m));
    if (!m) {
        snprintf(err, errlen, "out of memory for the metrics");
        return -ENOMEM;
    }
    m->listen_fd = -1;
    for (int i = 0; i < METRICS_MAX_CONNS; i++)
        m->conns[i].fd = -1;
    d->metrics = m;
    m->refresh_s = 5;
    if (refresh && *refresh) {
        char *end = NULL;
        long v = strtol(refresh, &end, 10);
        if (*end || v < 1 || v > 3600) {
            snprintf(err, errlen,
                     "OPENMPS_METRICS_REFRESH_S=%.32s is not a number of seconds from 1 to 3600",
                     refresh);
            return -EINVAL;
        }
        m->refresh_s = (int)v;
    }
    if (spec && *spec && (rc = metrics_listen(m, spec, err, errlen)) < 0)
        return rc;
    if (file && *file) {
        char *end = NULL;
        long s = every && *every ? strtol(every, &end, 10) : METRICS_TEXTFILE_DEFAULT_S;
        if (file[0] != '/' || strlen(file) > 4000) {
            snprintf(err, errlen, "OPENMPS_METRICS_TEXTFILE=%.64s is not an absolute path", file);
            return -EINVAL;
        }
        if ((end && *end) || s < 1 || s > 3600) {
            snprintf(err, errlen,
                     "OPENMPS_METRICS_TEXTFILE_S=%.32s is not a number of seconds from 1 to 3600",
                     every);
            return -EINVAL;
        }
        m->textfile = strdup(file);
        m->textfile_s = (int)s;
        if (!m->textfile) {
            snprintf(err, errlen, "out of memory for the metrics");
            return -ENOMEM;
        }
    }
    return 0;
}

/* Said once the log is open (setup runs before it). */
void om_metrics_started(struct daemon *d)
{
    if (!d->metrics)
        return;
    if (d->metrics->listen_fd >= 0)
        om_info("metrics: serving Prometheus's format on http://%s/metrics", d->metrics->where);
    if (d->metrics->textfile) {
        om_info("metrics: writing %s every %d s", d->metrics->textfile, d->metrics->textfile_s);
        write_textfile(d);
        d->metrics->textfile_next_ms = om_now_ms() + d->metrics->textfile_s * 1000;
    }
}

size_t om_metrics_pollfds(struct daemon *d, struct pollfd *p)
{
    struct om_metrics *m = d->metrics;
    size_t n = 0;

    if (!m || m->listen_fd < 0)
        return 0;
    p[n++] = (struct pollfd){.fd = om_now_ms() < m->paused_until_ms ? -1 : m->listen_fd,
                             .events = POLLIN};
    for (int i = 0; i < METRICS_MAX_CONNS; i++)
        p[n++] = (struct pollfd){.fd = m->conns[i].fd, /* -1 is skipped */
                                 .events = m->conns[i].out ? POLLOUT : POLLIN};
    return n;
}

void om_metrics_handle(struct daemon *d, const struct pollfd *p, size_t n)
{
    struct om_metrics *m = d->metrics;

    if (!m || n == 0)
        return;
    for (size_t i = 1; i < n && i <= METRICS_MAX_CONNS; i++) {
        struct http_conn *c = &m->conns[i - 1];
        if (c->fd < 0 || c->fd != p[i].fd || !p[i].revents)
            continue;
        if (c->out)
            conn_write(c);
        else
            conn_read(d, c);
        if (c->fd >= 0 && c->out && (p[i].revents & (POLLERR | POLLHUP)) &&
            !(p[i].revents & POLLOUT))
            conn_free(c);
    }
    if (p[0].revents)
        accept_conns(m);
}

void om_metrics_timer(struct daemon *d, int64_t now)
{
    struct om_metrics *m = d->metrics;

    if (!m)
        return;
    for (int i = 0; i < METRICS_MAX_CONNS; i++)
        if (m->conns[i].fd >= 0 && now - m->conns[i].since_ms > METRICS_TIMEOUT_MS)
            conn_free(&m->conns[i]);
    if (now >= m->acct_next_ms) {
        m->acct_asked_ms = now;
        m->acct_next_ms = now + m->refresh_s * 1000;
        om_stats_refresh_metrics(d);
    }
    if (m->textfile && now >= m->textfile_next_ms) {
        write_textfile(d);
        m->textfile_next_ms = now + m->textfile_s * 1000;
    }
}

int64_t om_metrics_next_ms(struct daemon *d, int64_t next)
{
    struct om_metrics *m = d->metrics;

    if (!m)
        return next;
    for (int i = 0; i < METRICS_MAX_CONNS; i++)
        if (m->conns[i].fd >= 0 && m->conns[i].since_ms + METRICS_TIMEOUT_MS + 1 < next)
            next = m->conns[i].since_ms + METRICS_TIMEOUT_MS + 1;
    if (m->textfile && m->textfile_next_ms < next)
        next = m->textfile_next_ms;
    if (m->acct_next_ms < next)
        next = m->acct_next_ms;
    if (m->paused_until_ms > om_now_ms() && m->paused_until_ms < next)
        next = m->paused_until_ms;
    return next;
}

void om_metrics_cleanup(struct daemon *d)
{
    struct om_metrics *m = d->metrics;

    if (!m)
        return;
    for (int i = 0; i < METRICS_MAX_CONNS; i++)
        conn_free(&m->conns[i]);
    if (m->listen_fd >= 0)
        close(m->listen_fd);
    if (m->textfile && m->textfile_next_ms)
        unlink(m->textfile); /* a daemon that is gone has no figures: none are left stale */
    free(m->textfile);
    free(m->acct);
    free(m);
    d->metrics = NULL;
}
