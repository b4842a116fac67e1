/* SPDX-License-Identifier: MIT */
/* openmps stats, ps --json and smi: the servers' accounting of their clients, asked and shown. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/config.h"

/*
 * `stats [--json|--smi] [-p <server PID>]` asks every running server the front-end may see
 * (root: all; a user: its own) for its clients' accounting (SRV_STATS_ASK; the server answers
 * SRV_STATS, src/server/account.c) and answers once all have answered, or after
 * OM_SERVER_REPLY_TIMEOUT_MS with what came (a server that did not answer is named). The
 * records are joined with what the daemon knows of each client (its command, cgroup, limits)
 * by client id: a record of a client the daemon does not know is dropped, a client without a
 * record shows no activity. What a server says is its user's word: shown, never acted on, and
 * bounded (records beyond its known clients are dropped).
 *
 * The JSON formats are documented in docs/operations.md ("Statistics for scripts").
 */

enum stats_format { FMT_TEXT, FMT_JSON, FMT_SMI, FMT_PROMETHEUS };

/* The records one server sent. */
struct server_part {
    uint64_t server_id;
    bool done;
    const char *error; /* static text: why it has no (complete) answer */
    struct om_stats_client *c;
    uint32_t nc, cap_c;
    struct om_stats_usage *u;
    uint32_t nu, cap_u;
};

struct om_stats_req {
    uint32_t request_id;
    uint64_t ui_id; /* the front-end that waits, 0 for the metrics' own refresh */
    enum stats_format format;
    int64_t deadline_ms;
    struct server_part *parts;
    unsigned nparts;
    struct om_stats_req *next;
};

static bool visible(const struct daemon *d, const struct conn *ui, const struct server *s)
{
    return om_sees_server(d, ui, s); /* no front-end: the metrics see all */
}

static const char *status_name(const struct server *s)
{
    static const char *const names[] = {"INITIALIZING", "ACTIVE", "FAULT", "ACTIVE"};
    return names[s->state];
}

/* ------------------------------------------------------------------ identity */

/*
 * The cgroup that names the client's job or pod. cgroup v2: the "0::/path" line. A v1 or hybrid
 * machine has one line per hierarchy ("N:controllers:/path"), and the v2 line, if any, may say
 * only "/" there: then the named systemd hierarchy's path, else the first controller's that is
 * not "/" (Slurm's and the kubelet's cgroup v1 drivers put the job or pod in each controller's).
 */
size_t om_cgroup_text(const char *path, char *text, size_t cap)
{
    size_t len = 0;
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    text[0] = '\0';
    if (fd < 0)
        return 0;
    /* All of it: on a hybrid host the v2 line comes last, after one line per v1 hierarchy, each
     * with the job's or pod's path (well past 1 KiB); a /proc file may come in pieces. */
    while (len < cap - 1 && (n = read(fd, text + len, cap - 1 - len)) > 0)
        len += (size_t)n;
    close(fd);
    text[len] = '\0';
    return len;
}

void om_stats_cgroup(pid_t pid, char *buf, size_t cap)
{
    char path[64], text[OM_CGROUP_TEXT_MAX], *line, *save = NULL, *v2 = NULL, *systemd = NULL,
                                                    *other = NULL;
    const char *best;

    snprintf(buf, cap, "%s", "");
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    if (om_cgroup_text(path, text, sizeof(text)) == 0)
        return;
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *at = strchr(line, ':');
        at = at ? strchr(at + 1, ':') : NULL;
        if (!at)
            continue;
        at++;
        if (!strncmp(line, "0::", 3))
            v2 = at;
        else if (strstr(line, ":name=systemd:"))
            systemd = at;
        else if (!other && strcmp(at, "/") != 0)
            other = at;
    }
    best = v2 && strcmp(v2, "/")             ? v2
           : systemd && strcmp(systemd, "/") ? systemd
           : other                           ? other
           : v2                              ? v2
           : systemd                         ? systemd
                                             : "";
    snprintf(buf, cap, "%s", best);
    for (char *p = buf; *p; p++) /* the process's own words: printable ASCII only */
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
            *p = '?';
}

/* ------------------------------------------------------------------ the request */

static struct om_stats_req *find_req(struct daemon *d, uint32_t id)
{
    for (struct om_stats_req *r = d->stats_reqs; r; r = r->next)
        if (r->request_id == id)
            return r;
    return NULL;
}

static void req_free(struct om_stats_req *r)
{
    for (unsigned i = 0; r && i < r->nparts; i++) {
        free(r->parts[i].c);
        free(r->parts[i].u);
    }
    if (r)
        free(r->parts);
    free(r);
}

static void finish(struct daemon *d, struct om_stats_req *r);
static struct om_stats_req *ask(struct daemon *d, struct conn *ui, struct server *only,
                                enum stats_format format);

int om_stats_command(struct daemon *d, struct conn *ui, int argc, char **argv, struct strbuf *out,
                     bool *ret_error)
{
    struct om_stats_req *r;
    struct server *only = NULL;
    enum stats_format format = FMT_TEXT;

    for (int i = 1; i < argc; i++) {
        uint64_t v;
        if (!strcmp(argv[i], "--json") && format == FMT_TEXT) {
            format = FMT_JSON;
        } else if (!strcmp(argv[i], "--smi") && format == FMT_TEXT) {
            format = FMT_SMI;
        } else if (!strcmp(argv[i], "-p") && i + 1 < argc && !only) {
            if (om_parse_u64(argv[++i], 0x7fffffff, &v) < 0 || v == 0) {
                sb_printf(out, "Invalid server PID \"%.32s\"", argv[i]);
                *ret_error = true;
                return 0;
            }
            if (!(only = om_server_find_pid(d, (pid_t)v))) {
                sb_printf(out, "Server %s not found", argv[i]);
                *ret_error = true;
                return 0;
            }
        } else {
            sb_printf(out,
                      "Usage: stats [--json|--smi] [-p <server PID>] (\"%.32s\" is not one "
                      "of them)",
                      argv[i]);
            *ret_error = true;
            return 0;
        }
    }
    r = ask(d, ui, only, format);
    if (!r) {
        sb_printf(out, "Out of memory");
        *ret_error = true;
        return 0;
    }
    ui->awaiting = r->request_id;
    finish(d, r); /* answers now when no server was asked */
    return OM_CMD_LATER;
}

/* A request of every server ui may see (NULL: every server), or only `only`, sent and listed;
 * NULL without memory. The caller calls finish() (which answers at once if nothing was sent). */
static struct om_stats_req *ask(struct daemon *d, struct conn *ui, struct server *only,
                                enum stats_format format)
{
    struct om_stats_req *r = calloc(1, sizeof(*r));
    unsigned n = 0;

    for (struct server *s = d->servers; s; s = s->next)
        n += (!only || s == only) && visible(d, ui, s);
    if (!r || !(r->parts = calloc(n ? n : 1, sizeof(*r->parts)))) {
        free(r);
        return NULL;
    }
    r->request_id = ++d->next_request_id;
    r->ui_id = ui ? ui->id : 0;
    r->format = format;
    r->deadline_ms = om_now_ms() + OM_SERVER_REPLY_TIMEOUT_MS;
    for (struct server *s = d->servers; s; s = s->next) {
        if ((only && s != only) || !visible(d, ui, s))
            continue;
        struct server_part *p = &r->parts[r->nparts++];
        p->server_id = s->id;
        if (!s->ready || s->chan < 0) {
            p->done = true; /* nothing to ask: it has no client yet, or is gone */
            continue;
        }
        if (om_msg_send(s->chan, OM_MSG_SRV_STATS_ASK, 0, &r->request_id, sizeof(r->request_id),
                        -1) < 0) {
            p->done = true;
            p->error = "it could not be asked";
        }
    }
    r->next = d->stats_reqs;
    d->stats_reqs = r;
    return r;
}

void om_stats_refresh_metrics(struct daemon *d)
{
    struct om_stats_req *r;

    for (r = d->stats_reqs; r; r = r->next)
        if (r->format == FMT_PROMETHEUS)
            return; /* the last one is still out: its answer comes first */
    if ((r = ask(d, NULL, NULL, FMT_PROMETHEUS)))
        finish(d, r);
}

static struct server_part *part_of(struct om_stats_req *r, const struct server *s)
{
    for (unsigned i = 0; i < r->nparts; i++)
        if (r->parts[i].server_id == s->id)
            return &r->parts[i];
    return NULL;
}

/* Appends n records of size sz to *v (bounded by max in all). */
static bool append(void **v, uint32_t *count, uint32_t *cap, const void *add, uint32_t n, size_t sz,
                   uint32_t max)
{
    if (n > max - *count)
        return false;
    if (n == 0)
        return true; /* *v may be NULL yet: nothing to copy into it */
    if (*count + n > *cap) {
        uint32_t nc = *cap ? *cap : 16;
        while (nc < *count + n)
            nc *= 2;
        void *nv = realloc(*v, nc * sz);
        if (!nv)
            return false;
        *v = nv;
        *cap = nc;
    }
    memcpy((uint8_t *)*v + *count * sz, add, n * sz);
    *count += n;
    return true;
}

int om_stats_reply(struct daemon *d, struct server *s, const void *payload, size_t len)
{
    enum { MAXC = OM_MSG_MAX_PAYLOAD / sizeof(struct om_stats_client) };
    enum { MAXU = OM_MSG_MAX_PAYLOAD / sizeof(struct om_stats_usage) };
    static struct om_stats_client c[MAXC];
    static struct om_stats_usage u[MAXU];
    struct om_srv_stats h;
    struct om_stats_req *r;
    struct server_part *p;

    if (om_decode_srv_stats(payload, len, &h, c, MAXC, u, MAXU) < 0)
        return -EBADMSG;
    r = find_req(d, h.request_id);
    p = r ? part_of(r, s) : NULL;
    if (!p || p->done)
        return 0; /* late (the request expired) or not asked: dropped */
    /* each client once in all the answer's messages (the decoder checks one message): a second
     * record would double its figures and repeat its metrics series */
    for (uint32_t i = 0; i < h.nclients && !p->done; i++)
        for (uint32_t k = 0; k < p->nc && !p->done; k++)
            if (p->c[k].client_id == c[i].client_id) {
                p->done = true;
                p->error = "it sent a client twice";
            }
    if (p->done) {
        finish(d, r);
        return 0;
    }
    /* at most its known clients (and a few that are coming), each on every device */
    uint32_t max_c = s->nclients + 16;
    if (!append((void **)&p->c, &p->nc, &p->cap_c, c, h.nclients, sizeof(*c), max_c) ||
        !append((void **)&p->u, &p->nu, &p->cap_u, u, h.nusage, sizeof(*u),
                max_c * OM_MAX_DEVICES)) {
        p->done = true;
        p->error = "it sent more records than it has clients";
    }
    if (!(h.flags & OM_STATS_MORE))
        p->done = true;
    finish(d, r);
    return 0;
}

void om_stats_server_gone(struct daemon *d, struct server *s)
{
    for (struct om_stats_req *r = d->stats_reqs, *next; r; r = next) {
        struct server_part *p = part_of(r, s);
        next = r->next;
        if (p && !p->done) {
            p->done = true;
            p->error = "it went away";
            finish(d, r);
        }
    }
}

void om_stats_expire(struct daemon *d, int64_t now)
{
    for (struct om_stats_req *r = d->stats_reqs, *next; r; r = next) {
        next = r->next;
        if (now < r->deadline_ms)
            continue;
        for (unsigned i = 0; i < r->nparts; i++) {
            if (!r->parts[i].done) {
                r->parts[i].done = true;
                r->parts[i].error = "it did not answer in time";
            }
        }
        finish(d, r);
    }
}

/* ------------------------------------------------------------------ the answer */

/* Text from a process (its command line, cgroup) as a JSON string: printable ASCII only. */
static void json_str(struct strbuf *sb, const char *s)
{
    sb_printf(sb, "\"");
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            sb_printf(sb, "\\%c", ch);
        else if (ch < 0x20 || ch > 0x7e)
            sb_printf(sb, "\\u%04x", ch < 0x20 ? ch : '?');
        else
            sb_printf(sb, "%c", ch);
    }
    sb_printf(sb, "\"");
}

static const char *state_name(uint32_t state)
{
    static const char *const names[OM_STATE_COUNT] = {"idle", "running", "waiting"};
    return state < OM_STATE_COUNT ? names[state] : "unknown";
}

/* What one client did, joined: its record (NULL: none came) and the sums over its devices. */
struct joined {
    const struct om_stats_client *c;
    struct om_stats_usage total; /* device unused */
};

static struct joined join(const struct server_part *p, const struct client_rec *cr)
{
    struct joined j = {0};

    for (uint32_t i = 0; p && i < p->nc && !j.c; i++)
        if (p->c[i].client_id == cr->id && p->c[i].pid == (uint32_t)cr->pid)
            j.c = &p->c[i];
    for (uint32_t i = 0; j.c && i < p->nu; i++) {
        const struct om_stats_usage *u = &p->u[i];
        if (u->client_id != cr->id)
            continue;
        j.total.kernels += u->kernels;
        j.total.graphs += u->graphs;
        j.total.gpu_ns += u->gpu_ns;
        j.total.htod_bytes += u->htod_bytes;
        j.total.dtoh_bytes += u->dtoh_bytes;
        j.total.dtod_bytes += u->dtod_bytes;
        j.total.device_bytes += u->device_bytes;
    }
    return j;
}

static void usage_json(struct strbuf *sb, const struct om_stats_usage *u)
{
    sb_printf(sb,
              "\"kernels\": %llu, \"graphs\": %llu, \"gpu_time_ns\": %llu, \"htod_bytes\": %llu, "
              "\"dtoh_bytes\": %llu, \"dtod_bytes\": %llu, \"device_memory_bytes\": %llu",
              (unsigned long long)u->kernels, (unsigned long long)u->graphs,
              (unsigned long long)u->gpu_ns, (unsigned long long)u->htod_bytes,
              (unsigned long long)u->dtoh_bytes, (unsigned long long)u->dtod_bytes,
              (unsigned long long)u->device_bytes);
}

static double share_pct(const struct client_rec *cr)
{
    uint32_t m = cr->limits.active_thread_pct_milli;
    return (m ? m : 100000) / 1000.0;
}

static void client_json(struct strbuf *sb, const struct server *s, const struct client_rec *cr,
                        const struct server_part *p)
{
    struct joined j = join(p, cr);

    sb_printf(sb, "{\"pid\": %d, \"client_id\": %u, \"server_pid\": %d, \"uid\": %u, ",
              (int)cr->pid, cr->id, (int)s->pid, (unsigned)cr->uid);
    sb_printf(sb, "\"command\": ");
    json_str(sb, cr->command);
    sb_printf(sb, ", \"cgroup\": ");
    json_str(sb, cr->cgroup);
    sb_printf(sb, ", \"namespace\": %lu, \"state\": \"%s\", ", cr->pid_ns,
              j.c ? state_name(j.c->state) : "unknown");
    sb_printf(sb, "\"active_thread_percentage\": %.1f, \"priority\": %u, ", share_pct(cr),
              (unsigned)cr->limits.priority);
    sb_printf(sb,
              "\"calls\": %llu, \"calls_per_s\": %.3f, \"kernels_per_s\": %.3f, "
              "\"serve_time_ns\": %llu, \"gpu_wait_time_ns\": %llu, \"connected_ns\": %llu, "
              "\"pinned_memory_bytes\": %llu, ",
              (unsigned long long)(j.c ? j.c->calls : 0),
              j.c ? j.c->calls_per_s_milli / 1000.0 : 0.0,
              j.c ? j.c->kernels_per_s_milli / 1000.0 : 0.0,
              (unsigned long long)(j.c ? j.c->serve_ns : 0),
              (unsigned long long)(j.c ? j.c->gpu_wait_ns : 0),
              (unsigned long long)(j.c ? j.c->connected_ns : 0),
              (unsigned long long)(j.c ? j.c->pinned_bytes : 0));
    if (!j.c) /* no record: the daemon's own figure of its memory */
        j.total.device_bytes = cr->device_bytes;
    usage_json(sb, &j.total);
    sb_printf(sb, ", \"devices\": [");
    bool first = true;
    for (uint32_t i = 0; j.c && i < p->nu; i++) {
        const struct om_stats_usage *u = &p->u[i];
        if (u->client_id != cr->id)
            continue;
        sb_printf(sb, "%s{\"ordinal\": %u, ", first ? "" : ", ", u->device);
        usage_json(sb, u);
        uint64_t cap = u->device < cr->limits.ndevices ? cr->limits.mem_limit[u->device] : 0;
        if (cap)
            sb_printf(sb, ", \"memory_limit_bytes\": %llu}", (unsigned long long)cap);
        else
            sb_printf(sb, ", \"memory_limit_bytes\": null}");
        first = false;
    }
    sb_printf(sb, "]}");
}

static void device_json(struct strbuf *sb, const struct server *s, uint32_t dev,
                        const struct server_part *p)
{
    struct om_stats_usage t = {0};
    unsigned clients = 0;
    char uuid[64];

    for (uint32_t i = 0; p && i < p->nu; i++) {
        const struct om_stats_usage *u = &p->u[i];
        bool known = false;
        if (u->device != dev)
            continue;
        for (const struct client_rec *cr = s->clients; cr && !known; cr = cr->next)
            known = cr->id == u->client_id;
        if (!known)
            continue;
        clients++;
        t.kernels += u->kernels;
        t.graphs += u->graphs;
        t.gpu_ns += u->gpu_ns;
        t.htod_bytes += u->htod_bytes;
        t.dtoh_bytes += u->dtoh_bytes;
        t.dtod_bytes += u->dtod_bytes;
        t.device_bytes += u->device_bytes;
    }
    om_format_uuid(s->devs[dev].uuid, uuid, sizeof(uuid));
    sb_printf(sb, "{\"server_pid\": %d, \"ordinal\": %u, \"uuid\": \"%s\", \"name\": ", (int)s->pid,
              dev, uuid);
    json_str(sb, s->devs[dev].name);
    sb_printf(sb, ", \"pci_bus_id\": ");
    json_str(sb, s->devs[dev].pci_bus_id);
    sb_printf(sb, ", \"clients\": %u, ", clients);
    usage_json(sb, &t);
    sb_printf(sb, "}");
}

static void answer_json(struct strbuf *sb, struct daemon *d, const struct om_stats_req *r,
                        const struct conn *ui)
{
    struct timespec now;
    bool first = true;

    clock_gettime(CLOCK_REALTIME, &now);
    sb_printf(sb, "{\"version\": 1, \"time\": %lld.%03ld, \"servers\": [", (long long)now.tv_sec,
              now.tv_nsec / 1000000);
    for (unsigned i = 0; i < r->nparts; i++) {
        for (struct server *s = d->servers; s; s = s->next) {
            if (s->id != r->parts[i].server_id)
                continue;
            sb_printf(sb, "%s{\"pid\": %d, \"uid\": %u, \"status\": \"%s\", \"answered\": %s",
                      first ? "" : ", ", (int)s->pid, (unsigned)s->uid, status_name(s),
                      r->parts[i].error ? "false" : "true");
            if (r->parts[i].error)
                sb_printf(sb, ", \"error\": \"%s\"", r->parts[i].error);
            sb_printf(sb, "}");
            first = false;
        }
    }
    sb_printf(sb, "], \"devices\": [");
    first = true;
    for (unsigned i = 0; i < r->nparts; i++)
        for (struct server *s = d->servers; s; s = s->next)
            for (uint32_t dev = 0; s->id == r->parts[i].server_id && dev < s->ndevs; dev++) {
                sb_printf(sb, "%s", first ? "" : ", ");
                device_json(sb, s, dev, &r->parts[i]);
                first = false;
            }
    sb_printf(sb, "], \"clients\": [");
    first = true;
    for (unsigned i = 0; i < r->nparts; i++)
        for (struct server *s = d->servers; s; s = s->next)
            for (struct client_rec *cr = s->clients; s->id == r->parts[i].server_id && cr;
                 cr = cr->next) {
                if (!om_sees_client(ui, cr))
                    continue;
                sb_printf(sb, "%s", first ? "" : ", ");
                client_json(sb, s, cr, &r->parts[i]);
                first = false;
            }
    sb_printf(sb, "]}");
}

static void size_text(uint64_t bytes, char *buf, size_t cap)
{
    if (bytes)
        om_format_size(bytes, buf, cap);
    else
        snprintf(buf, cap, "0");
}

static void answer_text(struct strbuf *sb, struct daemon *d, const struct om_stats_req *r,
                        const struct conn *ui)
{
    bool any = false;

    for (unsigned i = 0; i < r->nparts; i++) {
        for (struct server *s = d->servers; s; s = s->next) {
            if (s->id != r->parts[i].server_id)
                continue;
            if (r->parts[i].error)
                sb_printf(sb, "Server %d: %s\n", (int)s->pid, r->parts[i].error);
            for (struct client_rec *cr = s->clients; cr; cr = cr->next) {
                struct joined j = join(&r->parts[i], cr);
                char h2d[32], d2h[32], d2d[32], mem[32], pin[32];
                if (!om_sees_client(ui, cr))
                    continue;
                if (!any)
                    sb_printf(sb, "%-9s %-9s %-8s %11s %9s %9s %8s %8s %8s %8s %8s %s\n", "PID",
                              "SERVER", "STATE", "GPU-TIME(s)", "KERNELS", "CALLS/S", "H2D", "D2H",
                              "D2D", "MEMORY", "PINNED", "COMMAND");
                any = true;
                size_text(j.total.htod_bytes, h2d, sizeof(h2d));
                size_text(j.total.dtoh_bytes, d2h, sizeof(d2h));
                size_text(j.total.dtod_bytes, d2d, sizeof(d2d));
                size_text(j.c ? j.total.device_bytes : cr->device_bytes, mem, sizeof(mem));
                size_text(j.c ? j.c->pinned_bytes : 0, pin, sizeof(pin));
                sb_printf(sb, "%-9d %-9d %-8s %11.3f %9llu %9.1f %8s %8s %8s %8s %8s %s\n",
                          (int)cr->pid, (int)s->pid, j.c ? state_name(j.c->state) : "unknown",
                          j.total.gpu_ns / 1e9, (unsigned long long)j.total.kernels,
                          j.c ? j.c->calls_per_s_milli / 1000.0 : 0.0, h2d, d2h, d2d, mem, pin,
                          cr->command);
            }
        }
    }
    if (sb->len && sb->buf[sb->len - 1] == '\n')
        sb->buf[--sb->len] = '\0';
}

/* One line of nvidia-smi's box (SMI_WIDTH characters): `left` and `right` within its borders. */
#define SMI_WIDTH 91
static void smi_line(struct strbuf *sb, const char *left, const char *right)
{
    int pad = SMI_WIDTH - 2 - (int)strlen(left) - (int)strlen(right);
    sb_printf(sb, "|%s%*s%s|\n", left, pad > 0 ? pad : 1, "", right);
}

static void smi_process(struct strbuf *sb, uint32_t dev, pid_t pid, const char *type,
                        const char *name, const char *memory)
{
    char left[128], right[40];

    snprintf(left, sizeof(left), "%5u   N/A  N/A  %8d  %5s   %.40s", dev, (int)pid, type, name);
    snprintf(right, sizeof(right), "%s ", memory);
    smi_line(sb, left, right);
}

/* What nvidia-smi's process table shows under NVIDIA's MPS: per GPU, the server (type C) and
 * each client as an M+C process with the device memory it holds (docs/operations.md says what
 * nvidia-smi itself shows under openmps, and why). */
static void answer_smi(struct strbuf *sb, struct daemon *d, const struct om_stats_req *r,
                       const struct conn *ui)
{
    char rule[SMI_WIDTH + 1];
    bool any = false;

    memset(rule, '-', SMI_WIDTH);
    rule[0] = rule[SMI_WIDTH - 1] = '+';
    rule[SMI_WIDTH] = '\0';
    sb_printf(sb, "%s\n", rule);
    smi_line(sb, " Processes:", "");
    smi_line(sb, "  GPU   GI   CI        PID   Type   Process name", "GPU Memory ");
    smi_line(sb, "        ID   ID", "Usage      ");
    memset(rule + 1, '=', SMI_WIDTH - 2);
    rule[0] = rule[SMI_WIDTH - 1] = '|';
    sb_printf(sb, "%s\n", rule);
    for (unsigned i = 0; i < r->nparts; i++)
        for (struct server *s = d->servers; s; s = s->next)
            for (uint32_t dev = 0; s->id == r->parts[i].server_id && dev < s->ndevs; dev++) {
                const struct server_part *p = &r->parts[i];
                bool header = false;
                for (struct client_rec *cr = s->clients; cr; cr = cr->next) {
                    uint64_t bytes = 0;
                    bool on = dev < 32 && (cr->device_mask & (1u << dev));
                    if (!om_sees_client(ui, cr))
                        continue;
                    char mib[32];
                    for (uint32_t k = 0; k < p->nu; k++)
                        if (p->u[k].client_id == cr->id && p->u[k].device == dev) {
                            bytes = p->u[k].device_bytes;
                            on = true;
                        }
                    if (!on)
                        continue;
                    if (!header) /* its own memory (its contexts) is not known to openmps */
                        smi_process(sb, dev, s->pid, "C", "openmps-server", "N/A");
                    header = true;
                    snprintf(mib, sizeof(mib), "%lluMiB",
                             (unsigned long long)((bytes + (1u << 20) - 1) >> 20));
                    smi_process(sb, dev, cr->pid, "M+C", cr->command, mib);
                    any = true;
                }
            }
    if (!any)
        smi_line(sb, "  No running processes found", "");
    memset(rule, '-', SMI_WIDTH);
    rule[0] = rule[SMI_WIDTH - 1] = '+';
    sb_printf(sb, "%s", rule);
}

/* The accounting's series in Prometheus's text format (docs/operations.md, "Metrics"): per
 * client, its counters per device, its waits and state; labelled as metrics.c labels a client. */
static void answer_prometheus(struct strbuf *sb, struct daemon *d, const struct om_stats_req *r)
{
    static const struct {
        const char *name, *type, *help;
    } fam[] = {
        {"openmps_client_gpu_seconds_total", "counter",
         "Time with kernels of the client outstanding on a device (docs/operations.md says how "
         "exact)."},
        {"openmps_client_kernels_total", "counter", "Kernels the client launched on a device."},
        {"openmps_client_graph_launches_total", "counter",
         "Executable graphs the client launched on a device."},
        {"openmps_client_copied_bytes_total", "counter",
         "Bytes the client copied on a device, by direction (htod, dtoh, dtod)."},
        {"openmps_client_calls_total", "counter", "Calls of the client the server served."},
        {"openmps_client_serve_seconds_total", "counter",
         "Server time spent on the client's calls that it waited for, GPU waits included."},
        {"openmps_client_gpu_wait_seconds_total", "counter",
         "Of that, time waiting for the GPU for its synchronising calls."},
        {"openmps_client_pinned_memory_bytes", "gauge", "Pinned host memory the client holds."},
        {"openmps_client_state", "gauge",
         "1 for the client's state (running, waiting, idle) when the server was last asked."},
    };

    for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
        bool any = false;
        for (unsigned i = 0; i < r->nparts; i++) {
            const struct server_part *p = &r->parts[i];
            const struct server *s = NULL;
            for (s = d->servers; s && s->id != p->server_id; s = s->next)
                ;
            for (const struct client_rec *cr = s ? s->clients : NULL; cr; cr = cr->next) {
                struct joined j = join(p, cr);
                if (!j.c)
                    continue;
                if (!any)
                    sb_printf(sb, "# HELP %s %s\n# TYPE %s %s\n", fam[f].name, fam[f].help,
                              fam[f].name, fam[f].type);
                any = true;
                if (f <= 3) { /* per device */
                    for (uint32_t k = 0; k < p->nu; k++) {
                        const struct om_stats_usage *u = &p->u[k];
                        if (u->client_id != cr->id)
                            continue;
                        const uint64_t dir[3] = {u->htod_bytes, u->dtoh_bytes, u->dtod_bytes};
                        static const char *const dname[3] = {"htod", "dtoh", "dtod"};
                        for (int x = 0; x < (f == 3 ? 3 : 1); x++) {
                            sb_printf(sb, "%s{", fam[f].name);
                            om_metrics_client_labels(sb, s, cr);
                            sb_printf(sb, ",device=\"%u\"", (unsigned)u->device);
                            if (f == 3)
                                sb_printf(sb, ",direction=\"%s\"", dname[x]);
                            sb_printf(sb, "} ");
                            if (f == 0)
                                sb_printf(sb, "%.9f\n", (double)u->gpu_ns / 1e9);
                            else
                                sb_printf(sb, "%llu\n",
                                          (unsigned long long)(f == 1   ? u->kernels
                                                               : f == 2 ? u->graphs
                                                                        : dir[x]));
                        }
                    }
                    continue;
                }
                if (f == 8) {
                    for (uint32_t st = 0; st < OM_STATE_COUNT; st++) {
                        sb_printf(sb, "%s{", fam[f].name);
                        om_metrics_client_labels(sb, s, cr);
                        sb_printf(sb, ",state=\"%s\"} %d\n", state_name(st), j.c->state == st);
                    }
                    continue;
                }
                sb_printf(sb, "%s{", fam[f].name);
                om_metrics_client_labels(sb, s, cr);
                if (f == 4)
                    sb_printf(sb, "} %llu\n", (unsigned long long)j.c->calls);
                else if (f == 5)
                    sb_printf(sb, "} %.9f\n", (double)j.c->serve_ns / 1e9);
                else if (f == 6)
                    sb_printf(sb, "} %.9f\n", (double)j.c->gpu_wait_ns / 1e9);
                else
                    sb_printf(sb, "} %llu\n", (unsigned long long)j.c->pinned_bytes);
            }
        }
    }
}

static void finish(struct daemon *d, struct om_stats_req *r)
{
    struct strbuf out = {0};

    for (unsigned i = 0; i < r->nparts; i++)
        if (!r->parts[i].done)
            return;
    for (struct om_stats_req **pp = &d->stats_reqs; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    if (r->format == FMT_PROMETHEUS) { /* the metrics' refresh: they keep the text */
        answer_prometheus(&out, d, r);
        om_metrics_accounting(d, &out);
    }
    for (struct conn *c = d->conns; r->ui_id && c; c = c->next) {
        if (c->id != r->ui_id || c->awaiting != r->request_id)
            continue;
        c->awaiting = 0;
        if (r->format == FMT_JSON)
            answer_json(&out, d, r, c);
        else if (r->format == FMT_SMI)
            answer_smi(&out, d, r, c);
        else
            answer_text(&out, d, r, c);
        if (out.oom)
            om_msg_send_text(c->fd, OM_MSG_ANSWER, OM_ANSWER_ERROR, "Error: out of memory");
        else
            om_send_answer(d, c, false, out.buf ? out.buf : "", out.len);
    }
    sb_free(&out);
    req_free(r);
}

/* ------------------------------------------------------------------ ps --json */

void om_stats_ps_json(struct daemon *d, struct conn *ui, struct server *only, struct strbuf *out)
{
    bool first = true;

    sb_printf(out, "{\"version\": 1, \"clients\": [");
    for (struct server *s = d->servers; s; s = s->next) {
        if ((only && s != only) || !visible(d, ui, s))
            continue;
        for (struct client_rec *cr = s->clients; cr; cr = cr->next) {
            char uuid[64] = "";
            if (!om_sees_client(ui, cr))
                continue;
            for (uint32_t i = 0; i < s->ndevs && i < 32; i++)
                if (cr->device_mask & (1u << i)) {
                    om_format_uuid(s->devs[i].uuid, uuid, sizeof(uuid));
                    break;
                }
            sb_printf(out,
                      "%s{\"pid\": %d, \"id\": %u, \"server_pid\": %d, \"uid\": %u, "
                      "\"device\": \"%s\", \"devices\": [",
                      first ? "" : ", ", (int)cr->pid, cr->id, (int)s->pid, (unsigned)cr->uid,
                      uuid);
            bool f = true;
            for (uint32_t i = 0; i < s->ndevs && i < 32; i++)
                if (cr->device_mask & (1u << i)) {
                    sb_printf(out, "%s%u", f ? "" : ", ", i);
                    f = false;
                }
            sb_printf(out, "], \"namespace\": %lu, \"command\": ", cr->pid_ns);
            json_str(out, cr->command);
            sb_printf(out, ", \"cgroup\": ");
            json_str(out, cr->cgroup);
            sb_printf(out,
                      ", \"active_thread_percentage\": %.1f, \"priority\": %u, "
                      "\"memory_limit_bytes\": {",
                      share_pct(cr), (unsigned)cr->limits.priority);
            f = true;
            for (uint32_t i = 0; i < cr->limits.ndevices && i < OM_MAX_DEVICES; i++)
                if (cr->limits.mem_limit[i]) {
                    sb_printf(out, "%s\"%u\": %llu", f ? "" : ", ", i,
                              (unsigned long long)cr->limits.mem_limit[i]);
                    f = false;
                }
            sb_printf(out, "}, \"device_memory_bytes\": %llu}",
                      (unsigned long long)cr->device_bytes);
            first = false;
        }
    }
    sb_printf(out, "]}");
}
