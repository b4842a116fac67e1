/* SPDX-License-Identifier: MIT */
/*
 * Protocol 3's module-verb commands (`server list`, `namespace create`, `client terminate`,
 * `feature describe`, ...): their options, answers and formats, and the parsing and tables all
 * modules share (v3cmd.h); the modules of SM partitions and devices are v3devices.c's. The named
 * servers and namespaces they change, the configuration file and the routing of clients are v3.c's.
 * docs/operations.md, "Protocol 3", says what each command prints.
 */
#define _GNU_SOURCE
#include "v3.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../common/config.h"
#include "internal.h"
#include "v3cmd.h"
#include "v3int.h"

int v3_fail(struct v3_ctx *x, const char *fmt, ...)
{
    va_list ap;
    char text[512];

    x->error = true;
    va_start(ap, fmt);
    if (vsnprintf(text, sizeof(text), fmt, ap) < 0)
        text[0] = '\0';
    va_end(ap);
    sb_printf(x->out, "%s", text); /* one line, as the legacy commands' errors */
    return -EINVAL;
}

/* --- commands --- */

const char *v3_opt(const struct v3_ctx *x, const char *key)
{
    for (unsigned i = 0; i < x->nopts; i++)
        if (!strcmp(x->opts[i].key, key))
            return x->opts[i].value ? x->opts[i].value : "";
    return NULL;
}

static bool listed(const char *const *list, const char *key)
{
    for (int k = 0; list && list[k]; k++)
        if (!strcmp(list[k], key))
            return true;
    return false;
}

/* --key=value, key=value, --key value (when value is not an option), flags (-f, --all), and
 * positional arguments, which stand for the command's keys in `positional`'s order (NVIDIA's
 * `server get NAME FIELD`). Every option must be one the command knows (allowed: a list of
 * keys). */
int v3_parse_opts(struct v3_ctx *x, int argc, char **argv, const char *const *allowed,
                  const char *const *flags, const char *const *positional)
{
    unsigned npos = 0;

    for (int i = 0; i < argc; i++) {
        char *a = argv[i];
        const char *key, *value = NULL;
        bool dashed = a[0] == '-' && a[1], is_flag, known;
        char *eq = strchr(a, '=');
        if (!dashed && eq && eq != a) {
            *eq = '\0';
            if (!listed(allowed, a))
                *eq = '='; /* not a key of the command's: a positional argument */
        }
        if (!dashed && !(eq && !*eq)) {
            if (!positional || !positional[npos])
                return v3_fail(x, "Unexpected argument \"%.64s\"", a);
            key = positional[npos++];
            value = a;
            goto store;
        }
        key = dashed ? a + (a[1] == '-' ? 2 : 1) : a;
        if (eq) {
            *eq = '\0';
            value = eq + 1;
        }
        is_flag = listed(flags, key);
        known = listed(allowed, key);
        if (!is_flag && !known)
            return v3_fail(x, "Unknown option \"%.64s\"", a);
        if (is_flag && value)
            return v3_fail(x, "Option %.64s takes no value", a);
        if (known && !value) {
            if (i + 1 >= argc)
                return v3_fail(x, "Option %.64s needs a value", a);
            value = argv[++i];
        }
    store:
        for (unsigned k = 0; k < x->nopts; k++)
            if (!strcmp(x->opts[k].key, key))
                return v3_fail(x, "The %.32s is given twice", key);
        if (x->nopts == V3_MAX_OPTS)
            return v3_fail(x, "Too many options");
        x->opts[x->nopts].key = key;
        x->opts[x->nopts].value = value;
        x->nopts++;
    }
    return 0;
}

int v3_dispatch(struct v3_ctx *x, int argc, char **argv, const struct v3_verb *verbs,
                unsigned nverbs, const char *usage)
{
    x->verb = argc >= 2 ? argv[1] : "";
    for (unsigned i = 0; i < nverbs; i++)
        if (!strcmp(x->verb, verbs[i].verb))
            return v3_parse_opts(x, argc - 2, argv + 2, verbs[i].keys, verbs[i].flags,
                                 verbs[i].positional) < 0
                       ? 0
                       : verbs[i].run(x);
    return v3_fail(x, "%s", usage);
}

bool v3_may_change(struct v3_ctx *x)
{
    if (x->ui->uid == 0 || x->ui->uid == x->d->euid)
        return true;
    v3_fail(x, "Permission denied: needs root or the daemon's user (uid %u)", (unsigned)x->d->euid);
    return false;
}

/* A true|false option (NVIDIA's --include-remainder=, --locality-domains=, audit_log=): *v is
 * left as it was when the option is absent. -1 answered. */
int v3_bool_opt(struct v3_ctx *x, const char *key, bool *v)
{
    const char *t = v3_opt(x, key);

    if (!t)
        return 0;
    if (!strcmp(t, "true") || !strcmp(t, "1"))
        *v = true;
    else if (!strcmp(t, "false") || !strcmp(t, "0"))
        *v = false;
    else
        return v3_fail(x, "Invalid value \"%.32s\" of %s: true or false", t, key);
    return 0;
}

static const char *const limit_keys[] = {"pinned-memory-limit", "active-thread-percentage",
                                         "client-priority"};

static int options_limits(struct v3_ctx *x, struct om_limits *l, bool *has)
{
    char err[200];
    const char *mem = v3_opt(x, limit_keys[0]), *atp = v3_opt(x, limit_keys[1]),
               *prio = v3_opt(x, limit_keys[2]);

    if (om_v3_set_limits(l, mem, atp, prio, err, sizeof(err)) < 0)
        return v3_fail(x, "%s", err);
    if (has) {
        has[0] |= mem != NULL;
        has[1] |= atp != NULL;
        has[2] |= prio != NULL;
    }
    return 0;
}

static void limits_text(const struct om_limits *l, char *atp, char *mem, size_t cap)
{
    bool same = l->ndevices > 0;

    if (l->active_thread_pct_milli)
        om_format_percentage(l->active_thread_pct_milli, atp, cap);
    else
        snprintf(atp, cap, "-");
    for (uint32_t i = 1; i < l->ndevices; i++)
        same &= l->mem_limit[i] == l->mem_limit[0];
    if (!l->ndevices || (same && !l->mem_limit[0])) {
        snprintf(mem, cap, "-");
    } else if (same) {
        om_format_size(l->mem_limit[0], mem, cap);
    } else {
        size_t len = 0;
        mem[0] = '\0';
        for (uint32_t i = 0; i < l->ndevices && len + 24 < cap; i++) {
            char size[24];
            if (!l->mem_limit[i])
                continue;
            om_format_size(l->mem_limit[i], size, sizeof(size));
            len += (size_t)snprintf(mem + len, cap - len, "%s%u=%s", len ? "," : "", i, size);
        }
    }
}

/* A server's status as NVIDIA's server list shows it ("Ready" for one that serves; the others
 * are openmps' words: NVIDIA's pages show none). */
static const char *status_name(const struct server *p)
{
    static const char *const names[] = {"Initializing", "Ready", "Fault", "Stopping"};
    return p ? names[p->state] : "Stopped";
}

static void table_cells(struct v3_table *t, const char *const *cells, bool header)
{
    struct strbuf *out = t->x->out;

    if (t->lines++)
        sb_printf(out, "\n");
    for (unsigned i = 0; i < t->ncols; i++) {
        const char *c = cells[i];
        if (t->csv) {
            sb_printf(out, "%s", i ? "," : "");
            if (!strpbrk(c, ",\"\n")) {
                sb_printf(out, "%s", c);
                continue;
            }
            sb_printf(out, "\"");
            for (; *c; c++)
                sb_printf(out, "%s%c", *c == '"' ? "\"" : "", *c); /* a quote doubled */
            sb_printf(out, "\"");
            continue;
        }
        char up[64];
        if (header) {
            size_t j = 0;
            for (; c[j] && j + 1 < sizeof(up); j++)
                up[j] = (char)(c[j] >= 'a' && c[j] <= 'z' ? c[j] - 'a' + 'A' : c[j]);
            up[j] = '\0';
            c = up;
        }
        if (i + 1 == t->ncols)
            sb_printf(out, "%s", c);
        else
            sb_printf(out, "%-*s%s", (int)t->width[i], c, strlen(c) >= t->width[i] ? " " : "");
    }
}

int v3_table_start(struct v3_ctx *x, struct v3_table *t, const char *const *cols,
                   const unsigned *width, unsigned ncols)
{
    const char *f = v3_opt(x, "format");

    *t = (struct v3_table){.x = x, .header = true, .ncols = ncols, .cols = cols, .width = width};
    if (f) {
        const char *comma = strchr(f, ',');
        size_t n = comma ? (size_t)(comma - f) : strlen(f);
        bool table = n == 5 && !strncmp(f, "table", 5), csv = n == 3 && !strncmp(f, "csv", 3);
        if ((!table && !csv) || (comma && strcmp(comma + 1, "noheader") != 0))
            return v3_fail(
                x, "Invalid format \"%.32s\": table or csv, either followed by ,noheader", f);
        t->csv = csv;
        t->header = !comma;
    }
    if (t->header)
        table_cells(t, cols, true);
    return 0;
}

/* A list command's start: the server it names (only, NULL for all) must exist. */
int v3_list_start(struct v3_ctx *x, const char *only, struct v3_table *t, const char *const *cols,
                  const unsigned *width, unsigned ncols)
{
    if (only && !om_v3_find_server(x->d, only))
        return v3_fail(x, "Server %.64s not found", only);
    return v3_table_start(x, t, cols, width, ncols);
}

void v3_table_row(struct v3_table *t, const char *const *cells)
{
    table_cells(t, cells, false);
}

/* The pipe directory of a server's (ns NULL) or namespace's socket. */
static void pipe_of(const struct daemon *d, const char *server, const char *ns, char *buf,
                    size_t cap)
{
    if (ns)
        snprintf(buf, cap, "%s/%s/%s", d->pipe_dir ? d->pipe_dir : "-", server, ns);
    else
        snprintf(buf, cap, "%s/%s", d->pipe_dir ? d->pipe_dir : "-", server);
}

/* The fields of a get: one `field`'s value alone (NVIDIA's form), or every field as key=value,
 * one a line, without one. */
struct field {
    const char *key;
    char value[1024]; /* a namespace's SM partitions: up to 16 of "GPU-<uuid>/<ID>" */
};

static int print_fields(struct v3_ctx *x, const struct field *f, unsigned n)
{
    const char *want = v3_opt(x, "field");
    char names[256];
    size_t len = 0;

    for (unsigned i = 0; i < n; i++) {
        if (want && !strcmp(want, f[i].key)) {
            sb_printf(x->out, "%s", f[i].value);
            return 0;
        }
        if (!want)
            sb_printf(x->out, "%s%s=%s", i ? "\n" : "", f[i].key, f[i].value);
        len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "", f[i].key);
        if (len >= sizeof(names))
            len = sizeof(names) - 1;
    }
    if (want)
        return v3_fail(x, "Unknown field \"%.32s\" (fields: %s)", want, names);
    return 0;
}

/* server list [NAME] [--format=…]: one line per named server and per running server of a user
 * without one (NAME "-", its pipe directory the daemon's). */
static int server_list(struct v3_ctx *x)
{
    static const char *const cols[] = {
        "name", "uid", "pid", "status", "pipe-directory", "allowed-devices", "context-ids"};
    static const unsigned width[] = {20, 8, 10, 14, 40, 20, 0};
    struct daemon *d = x->d;
    const char *only = v3_opt(x, "name");
    struct v3_table t;

    if (v3_list_start(x, only, &t, cols, width, 7) < 0)
        return 0;
    for (unsigned i = 0; d->v3 && i < d->v3->nservers; i++) {
        const struct om_v3_server *s = &d->v3->servers[i];
        struct server *p = om_server_for(d, s->uid, s->name);
        char uid[16], pid[16], dir[320];
        if (only && strcmp(only, s->name) != 0)
            continue;
        snprintf(uid, sizeof(uid), "%u", (unsigned)s->uid);
        snprintf(pid, sizeof(pid), p ? "%d" : "-", p ? (int)p->pid : 0);
        pipe_of(d, s->name, NULL, dir, sizeof(dir));
        v3_table_row(&t,
                     (const char *const[]){s->name, uid, pid, status_name(p), dir,
                                           s->allowed_devices[0] ? s->allowed_devices : "-", "-"});
    }
    for (struct server *p = d->servers; p && !only; p = p->next) {
        char uid[16], pid[16];
        if (p->name[0] && om_v3_find_server(d, p->name))
            continue; /* listed above */
        snprintf(uid, sizeof(uid), "%u", (unsigned)p->uid);
        snprintf(pid, sizeof(pid), "%d", (int)p->pid);
        v3_table_row(&t, (const char *const[]){"-", uid, pid, status_name(p),
                                               d->pipe_dir ? d->pipe_dir : "-", "-", "-"});
    }
    return 0;
}

/* Whether the named server has a process in any state (starting, running, stopping), or one
 * about to start (a server create waiting for another user's server to go). */
static bool server_process(const struct daemon *d, const char *name)
{
    if (d->start_uid >= 0 && !strcmp(d->start_name, name))
        return true;
    for (const struct server *p = d->servers; p; p = p->next)
        if (!strcmp(p->name, name))
            return true;
    return false;
}

static int server_create(struct v3_ctx *x)
{
    struct daemon *d = x->d;
    struct om_v3 *v;
    char name[OM_CONF_NAME_MAX], err[256];
    uint64_t uid = d->euid;
    bool has[3] = {false, false, false};

    if (!v3_may_change(x))
        return 0;
    if (v3_opt(x, "uid") && om_parse_u64(v3_opt(x, "uid"), 0xfffffffe, &uid) < 0)
        return v3_fail(x, "Invalid user id \"%.32s\"", v3_opt(x, "uid"));
    if (d->euid != 0 && (uid_t)uid != d->euid)
        return v3_fail(x, "openmps-control runs as uid %u and can start servers only for that user",
                       (unsigned)d->euid);
    if (v3_opt(x, "name") && strlen(v3_opt(x, "name")) >= sizeof(name))
        return v3_fail(x, "Invalid server name \"%.64s...\": at most %u characters",
                       v3_opt(x, "name"), OM_CONF_NAME_MAX - 1);
    if (v3_opt(x, "name"))
        snprintf(name, sizeof(name), "%s", v3_opt(x, "name"));
    else
        snprintf(name, sizeof(name), "uid_%u", (unsigned)uid); /* NVIDIA's automatic name */
    if (!om_v3_good_name(name))
        return v3_fail(x, "Invalid server name \"%.64s\": letters, digits, '_' and '-', at most %u",
                       name, OM_CONF_NAME_MAX - 1);
    if (om_v3_find_server(d, name))
        return v3_fail(x, "Server %s already exists", name);
    if (!(v = om_v3_state(d)))
        return v3_fail(x, "Out of memory");
    if (v->nservers == OM_V3_MAX_SERVERS)
        return v3_fail(x, "At most %u named servers", OM_V3_MAX_SERVERS);
    struct om_v3_server s = {.uid = (uid_t)uid, .limits = d->defaults, .nns = 1};
    snprintf(s.name, sizeof(s.name), "%s", name);
    snprintf(s.ns[0].name, sizeof(s.ns[0].name), "default");
    if (options_limits(x, &s.limits, has) < 0)
        return 0;
    s.has_mem = has[0];
    s.has_atp = has[1];
    s.has_priority = has[2];
    if (v3_bool_opt(x, "locality-domains", &s.locality_domains) < 0)
        return 0;
    if (s.locality_domains && v3_server_has_partitions(d, name))
        return v3_fail(x,
                       "SM partitions made for a server %s remain: SM partitions and locality "
                       "domains exclude each other",
                       name);
    if (s.locality_domains)
        om_info("server %s: locality domains asked for; openmps serves each GPU as one device",
                name);
    if (v3_opt(x, "allowed-devices")) {
        if (!om_v3_good_devices(v3_opt(x, "allowed-devices")) || getenv("CUDA_VISIBLE_DEVICES"))
            return v3_fail(x, getenv("CUDA_VISIBLE_DEVICES")
                                  ? "--allowed-devices and the daemon's CUDA_VISIBLE_DEVICES both "
                                    "choose devices: give one"
                                  : "Invalid devices: ordinals and GPU UUIDs, comma-separated");
        snprintf(s.allowed_devices, sizeof(s.allowed_devices), "%s", v3_opt(x, "allowed-devices"));
    }
    v->servers[v->nservers++] = s;
    /* Started now, as start_server does: at once, or once another user's server has gone. Its
     * own process: a user's other servers (named or not) run beside it. */
    if (d->quitting || om_server_for(d, (uid_t)uid, name))
        return 0;
    for (struct server *p = d->servers; p; p = p->next) {
        if (p->uid != (uid_t)uid) {
            d->start_uid = (int64_t)uid;
            snprintf(d->start_name, sizeof(d->start_name), "%s", name);
            om_daemon_schedule(d);
            return 0;
        }
    }
    if (!om_server_spawn(d, (uid_t)uid, name, err, sizeof(err)))
        return v3_fail(x, "Cannot start server %s: %s", name, err);
    return 0;
}

static int server_delete(struct v3_ctx *x)
{
    struct daemon *d = x->d;
    const char *name = v3_opt(x, "name");
    struct om_v3_server *s;

    if (!v3_may_change(x))
        return 0;
    if (!name)
        return v3_fail(x, "Usage: server delete NAME [--force]");
    if (!(s = om_v3_find_server(d, name)))
        return v3_fail(x, "Server %.64s not found", name);
    if (v3_server_has_partitions(d, s->name))
        return v3_fail(x,
                       "Server %s has SM partitions: sm-partition delete them first "
                       "(sm-partition list --server=%s)",
                       s->name, s->name);
    struct server *p = om_server_for(d, s->uid, s->name);
    bool force = v3_opt(x, "f") || v3_opt(x, "force");
    if (p && p->nclients && !force)
        return v3_fail(x,
                       "Server %s has %u running client(s): give --force to delete it (its clients "
                       "are terminated)",
                       s->name, p->nclients);
    if (p) {
        om_server_shutdown(d, p, force);
        om_daemon_schedule(d);
    }
    if (d->start_uid >= 0 && !strcmp(d->start_name, s->name))
        d->start_uid = -1; /* a server create's start not made yet: nothing to start now */
    unsigned i = (unsigned)(s - d->v3->servers);
    memmove(s, s + 1, (d->v3->nservers - i - 1) * sizeof(*s));
    d->v3->nservers--;
    return 0;
}

/* The server named by --name, or NULL (answered). */
static struct om_v3_server *named(struct v3_ctx *x)
{
    struct om_v3_server *s;

    if (!v3_opt(x, "name"))
        return v3_fail(x, "A server name is required (server %s NAME, or --name=NAME)", x->verb),
               NULL;
    if (!(s = om_v3_find_server(x->d, v3_opt(x, "name"))))
        return v3_fail(x, "Server %.64s not found", v3_opt(x, "name")), NULL;
    return s;
}

/* server get NAME [FIELD] */
static int server_get(struct v3_ctx *x)
{
    struct om_v3_server *s = named(x);
    static const char *const keys[] = {"name",
                                       "uid",
                                       "pid",
                                       "status",
                                       "pipe-directory",
                                       "allowed-devices",
                                       "active-thread-percentage",
                                       "pinned-memory-limit",
                                       "client-priority"};
    struct field f[9];

    for (unsigned i = 0; i < 9; i++)
        f[i].key = keys[i];
    if (!s)
        return 0;
    struct server *p = om_server_for(x->d, s->uid, s->name);
    snprintf(f[0].value, sizeof(f[0].value), "%s", s->name);
    snprintf(f[1].value, sizeof(f[1].value), "%u", (unsigned)s->uid);
    snprintf(f[2].value, sizeof(f[2].value), p ? "%d" : "-", p ? (int)p->pid : 0);
    snprintf(f[3].value, sizeof(f[3].value), "%s", status_name(p));
    pipe_of(x->d, s->name, NULL, f[4].value, sizeof(f[4].value));
    snprintf(f[5].value, sizeof(f[5].value), "%s",
             s->allowed_devices[0] ? s->allowed_devices : "-");
    limits_text(&s->limits, f[6].value, f[7].value, sizeof(f[6].value));
    snprintf(f[8].value, sizeof(f[8].value), "%u", (unsigned)s->limits.priority);
    return print_fields(x, f, 9);
}

/* server set: the limits reach its running process (and its clients, as set_* of protocol 2);
 * allowed_devices, its next start. */
static int server_set(struct v3_ctx *x)
{
    struct om_v3_server *s;
    struct om_limits l;
    bool has[3] = {false, false, false};
    const char *devs = v3_opt(x, "allowed-devices");

    bool locality;
    uint64_t uid;

    if (!v3_may_change(x) || !(s = named(x)))
        return 0;
    if (x->nopts < 2)
        return v3_fail(x, "server set %s: give at least one option to set (server help)", s->name);
    if (devs && devs[0] && !om_v3_good_devices(devs))
        return v3_fail(x, "Invalid devices \"%.64s\": ordinals and GPU UUIDs, comma-separated",
                       devs);
    locality = s->locality_domains;
    if (v3_bool_opt(x, "locality-domains", &locality) < 0)
        return 0;
    if (locality && !s->locality_domains && v3_server_has_partitions(x->d, s->name))
        return v3_fail(x,
                       "Server %s has SM partitions: SM partitions and locality domains exclude "
                       "each other (sm-partition delete them first)",
                       s->name);
    uid = s->uid;
    if (v3_opt(x, "uid") && om_parse_u64(v3_opt(x, "uid"), 0xfffffffe, &uid) < 0)
        return v3_fail(x, "Invalid user id \"%.32s\"", v3_opt(x, "uid"));
    if ((uid_t)uid != s->uid) {
        if (x->d->euid != 0 && (uid_t)uid != x->d->euid)
            return v3_fail(x, "openmps-control runs as uid %u and can serve only that user",
                           (unsigned)x->d->euid);
        if (server_process(x->d, s->name))
            return v3_fail(x,
                           "Server %s runs as uid %u: its user changes only while it is stopped "
                           "(server delete, then server create --uid=%u)",
                           s->name, (unsigned)s->uid, (unsigned)uid);
    }
    l = s->limits;
    if (options_limits(x, &l, has) < 0)
        return 0;
    s->uid = (uid_t)uid;
    if (locality != s->locality_domains)
        om_info("server %s: locality domains %s; openmps serves each GPU as one device", s->name,
                locality ? "asked for" : "off");
    s->locality_domains = locality;
    s->limits = l;
    s->has_mem |= has[0];
    s->has_atp |= has[1];
    s->has_priority |= has[2];
    if (devs)
        snprintf(s->allowed_devices, sizeof(s->allowed_devices), "%s", devs);
    struct server *p = om_server_for(x->d, s->uid, s->name);
    if (p && (has[0] || has[1] || has[2])) {
        p->limits = l;
        om_v3_server_ready(x->d, p);
        om_server_send_limits(p);
    }
    return 0;
}

static int cmd_server(struct v3_ctx *x, int argc, char **argv)
{
    static const char *const create_keys[] = {"name",
                                              "uid",
                                              "pinned-memory-limit",
                                              "active-thread-percentage",
                                              "client-priority",
                                              "allowed-devices",
                                              "locality-domains",
                                              NULL};
    static const char *const set_keys[] = {"name",
                                           "uid",
                                           "pinned-memory-limit",
                                           "active-thread-percentage",
                                           "client-priority",
                                           "allowed-devices",
                                           "locality-domains",
                                           NULL};
    static const char *const name_key[] = {"name", NULL};
    static const char *const list_keys[] = {"name", "format", NULL};
    static const char *const get_keys[] = {"name", "field", NULL};
    static const char *const force[] = {"f", "force", NULL};
    static const char *const mlopart[] = {"mlopart", NULL};
    static const char *const get_pos[] = {"name", "field", NULL};

    if (argc < 2)
        return v3_fail(x, "Usage: server list|create|delete|get|set [options]");
    x->verb = argv[1];
    if (!strcmp(argv[1], "list")) {
        if (v3_parse_opts(x, argc - 2, argv + 2, list_keys, NULL, name_key) < 0)
            return 0;
        return server_list(x);
    }
    if (!strcmp(argv[1], "create")) {
        if (v3_parse_opts(x, argc - 2, argv + 2, create_keys, mlopart, name_key) < 0)
            return 0;
        /* --mlopart: clients make MLOPart devices where the GPU supports them; openmps serves
         * each GPU whole, as NVIDIA's MPS does where the GPU has no such mode. */
        return server_create(x);
    }
    if (!strcmp(argv[1], "delete")) {
        if (v3_parse_opts(x, argc - 2, argv + 2, name_key, force, name_key) < 0)
            return 0;
        return server_delete(x);
    }
    if (!strcmp(argv[1], "get")) {
        if (v3_parse_opts(x, argc - 2, argv + 2, get_keys, NULL, get_pos) < 0)
            return 0;
        return server_get(x);
    }
    if (!strcmp(argv[1], "set")) {
        if (v3_parse_opts(x, argc - 2, argv + 2, set_keys, NULL, name_key) < 0)
            return 0;
        return server_set(x);
    }
    return v3_fail(x, "Unknown command \"server %.32s\" (server list|create|delete|get|set)",
                   argv[1]);
}

/* The server's ordinals of the devices a client used ("0,1"), or with pci their PCI bus ids; "-"
 * before its first call. */
static void client_devices(const struct server *p, const struct client_rec *r, bool pci, char *buf,
                           size_t cap)
{
    size_t len = 0;

    snprintf(buf, cap, "-");
    for (unsigned i = 0; i < 32 && i < p->ndevs && len + OM_PCI_ID_MAX + 2 < cap; i++)
        if (r->device_mask & (1u << i))
            len += (size_t)(pci ? snprintf(buf + len, cap - len, "%s%s", len ? "," : "",
                                           p->devs[i].pci_bus_id)
                                : snprintf(buf + len, cap - len, "%s%u", len ? "," : "", i));
}

/* Whether the caller may see client r of server p: root, or its user (ps does the same). */
static bool may_see(const struct v3_ctx *x, const struct server *p, const struct client_rec *r)
{
    return om_sees_server(x->d, x->ui, p) && om_sees_client(x->ui, r);
}

/* The named server of process p, NULL for a plain one (or one whose named server is gone). */
static const struct om_v3_server *named_of(struct daemon *d, const struct server *p)
{
    return p->name[0] ? om_v3_find_server(d, p->name) : NULL;
}

/* client list [--all] [--server=NAME] [--format=…]: without --all, the clients of the caller's
 * own servers. */
static int client_list(struct v3_ctx *x)
{
    static const char *const cols[] = {"pid", "server", "device", "namespace", "cmd"};
    static const unsigned width[] = {10, 20, 8, 20, 0};
    struct daemon *d = x->d;
    const struct om_v3_server *only = NULL;
    struct v3_table t;

    if (v3_list_start(x, v3_opt(x, "server"), &t, cols, width, 5) < 0)
        return 0;
    only = v3_opt(x, "server") ? om_v3_find_server(d, v3_opt(x, "server")) : NULL;
    for (struct server *p = d->servers; p; p = p->next) {
        const struct om_v3_server *vs = named_of(d, p);
        if (only && vs != only)
            continue;
        for (struct client_rec *r = p->clients; r; r = r->next) {
            char pid[16], dev[128];
            if (!may_see(x, p, r) || (!v3_opt(x, "all") && !only && x->ui->uid != r->uid))
                continue;
            snprintf(pid, sizeof(pid), "%d", (int)r->pid);
            client_devices(p, r, false, dev, sizeof(dev));
            v3_table_row(&t, (const char *const[]){pid, vs ? vs->name : "-", dev,
                                                   r->ns[0] ? r->ns : "-", r->command});
        }
    }
    return 0;
}

/* client get PID [FIELD]: NVIDIA's fields, then openmps' namespace; maws-ns is "-" (openmps has
 * no such namespace). */
static int client_get(struct v3_ctx *x)
{
    static const char *const keys[] = {"pid",      "server",  "device", "pci-id",
                                       "linux-ns", "maws-ns", "cmd",    "namespace"};
    const char *text = v3_opt(x, "pid");
    uint64_t pid;
    struct field f[8];

    if (!text)
        return v3_fail(x, "A client's pid is required (client get PID [FIELD])");
    if (om_parse_u64(text, 0x7fffffff, &pid) < 0 || pid == 0)
        return v3_fail(x, "Invalid pid \"%.32s\"", text);
    for (struct server *p = x->d->servers; p; p = p->next) {
        const struct om_v3_server *vs = named_of(x->d, p);
        for (struct client_rec *r = p->clients; r; r = r->next) {
            if ((uint64_t)r->pid != pid || !may_see(x, p, r))
                continue;
            for (unsigned i = 0; i < 8; i++)
                f[i].key = keys[i];
            snprintf(f[0].value, sizeof(f[0].value), "%d", (int)r->pid);
            snprintf(f[1].value, sizeof(f[1].value), "%s", vs ? vs->name : "-");
            client_devices(p, r, false, f[2].value, sizeof(f[2].value));
            client_devices(p, r, true, f[3].value, sizeof(f[3].value));
            snprintf(f[4].value, sizeof(f[4].value), r->pid_ns ? "pid:[%lu]" : "-", r->pid_ns);
            snprintf(f[5].value, sizeof(f[5].value), "-");
            snprintf(f[6].value, sizeof(f[6].value), "%s", r->command);
            snprintf(f[7].value, sizeof(f[7].value), "%s", r->ns[0] ? r->ns : "-");
            return print_fields(x, f, 8);
        }
    }
    return v3_fail(x, "Client %.32s not found", text);
}

/* client terminate PID: its server ends its session as terminate_client does (its later calls
 * fail, CUDA_ERROR_MPS_CLIENT_TERMINATED); answered once the server has (om_command_run). */
static int client_terminate(struct v3_ctx *x)
{
    const char *text = v3_opt(x, "pid");
    uint64_t pid;
    int rc;

    if (!v3_may_change(x))
        return 0;
    if (!text)
        return v3_fail(x, "A client's pid is required (client terminate PID)");
    if (om_parse_u64(text, 0x7fffffff, &pid) < 0 || pid == 0)
        return v3_fail(x, "Invalid pid \"%.32s\"", text);
    for (struct server *p = x->d->servers; p; p = p->next)
        for (struct client_rec *r = p->clients; r; r = r->next) {
            if ((uint64_t)r->pid != pid)
                continue;
            if ((rc = om_terminate_request(x->d, p, r->pid, x->ui, true)) < 0)
                return v3_fail(x, "Cannot terminate client %d: %s", (int)r->pid,
                               rc == -ENOMEM ? "out of memory" : "its server does not answer");
            return 0;
        }
    return v3_fail(x, "Client %.32s not found", text);
}

static int cmd_client(struct v3_ctx *x, int argc, char **argv)
{
    static const char *const list_keys[] = {"server", "format", NULL};
    static const char *const all[] = {"all", NULL};
    static const char *const get_keys[] = {"pid", "field", NULL};
    static const char *const pid_key[] = {"pid", NULL};
    static const struct v3_verb verbs[] = {
        {"list", list_keys, all, NULL, client_list},
        {"get", get_keys, NULL, get_keys, client_get},
        {"terminate", pid_key, NULL, pid_key, client_terminate},
    };

    return v3_dispatch(x, argc, argv, verbs, 3,
                       "Usage: client list [--all] [--server=NAME] [--format=table|csv] | client "
                       "get PID [FIELD] | client terminate PID");
}

static int ns_target(struct v3_ctx *x, struct om_v3_server **rs, struct om_v3_ns **rn,
                     bool must_exist)
{
    const char *sname = v3_opt(x, "server"), *name = v3_opt(x, "name");

    if (!sname || !name)
        return v3_fail(x,
                       "A namespace and its server are required (namespace %s NAMESPACE "
                       "--server=NAME)",
                       x->verb);
    if (!(*rs = om_v3_find_server(x->d, sname)))
        return v3_fail(x, "Server %.64s not found", sname);
    *rn = om_v3_find_ns(*rs, name);
    if (must_exist && !*rn)
        return v3_fail(x, "Namespace %.64s not found in server %.64s", name, sname);
    return 0;
}

/* A namespace's fields, NVIDIA's first (namespace list's columns), then openmps' cgroup routing
 * and its SM partitions ("GPU-<uuid>/<ID>", comma-separated; "-" none). */
#define NS_FIELDS 10
static unsigned ns_fields(struct v3_ctx *x, const struct om_v3_server *s, const struct om_v3_ns *n,
                          struct field *f)
{
    static const char *const keys[] = {"name",
                                       "server",
                                       "server-status",
                                       "pinned-memory-limit",
                                       "active-thread-percentage",
                                       "client-priority",
                                       "pipe-directory",
                                       "cgroup",
                                       "cgroup-depth",
                                       "sm-partition"};
    size_t len = 0;

    for (unsigned i = 0; i < NS_FIELDS; i++)
        f[i].key = keys[i];
    snprintf(f[0].value, sizeof(f[0].value), "%s", n->name);
    snprintf(f[1].value, sizeof(f[1].value), "%s", s->name);
    snprintf(f[2].value, sizeof(f[2].value), "%s",
             status_name(om_server_for(x->d, s->uid, s->name)));
    limits_text(&n->limits, f[4].value, f[3].value, sizeof(f[3].value));
    snprintf(f[5].value, sizeof(f[5].value), "%u", (unsigned)n->limits.priority);
    pipe_of(x->d, s->name, n->name, f[6].value, sizeof(f[6].value));
    snprintf(f[7].value, sizeof(f[7].value), "%s", n->cgroup[0] ? n->cgroup : "-");
    snprintf(f[8].value, sizeof(f[8].value), "%u", n->cgroup_depth);
    snprintf(f[9].value, sizeof(f[9].value), "-");
    for (unsigned i = 0; i < n->nparts && len + 100 < sizeof(f[9].value); i++) {
        char one[96];
        om_parts_name(x->d, n->parts[i], one, sizeof(one));
        len += (size_t)snprintf(f[9].value + len, sizeof(f[9].value) - len, "%s%s", len ? "," : "",
                                one);
    }
    return NS_FIELDS;
}

/* namespace list [NAMESPACE] [--server=NAME] [--format=…] */
static int ns_list(struct v3_ctx *x)
{
    static const char *const cols[] = {"name",
                                       "server",
                                       "server-status",
                                       "pinned-memory-limit",
                                       "active-thread-percentage",
                                       "client-priority",
                                       "pipe-directory"};
    static const unsigned width[] = {20, 20, 15, 21, 26, 17, 0};
    struct daemon *d = x->d;
    const char *only = v3_opt(x, "server"), *name = v3_opt(x, "name");
    struct field f[NS_FIELDS];
    struct v3_table t;

    if (v3_list_start(x, only, &t, cols, width, 7) < 0)
        return 0;
    for (unsigned i = 0; d->v3 && i < d->v3->nservers; i++) {
        const struct om_v3_server *s = &d->v3->servers[i];
        if (only && strcmp(only, s->name) != 0)
            continue;
        for (unsigned j = 0; j < s->nns; j++) {
            if (name && strcmp(name, s->ns[j].name) != 0)
                continue;
            ns_fields(x, s, &s->ns[j], f);
            v3_table_row(&t, (const char *const[]){f[0].value, f[1].value, f[2].value, f[3].value,
                                                   f[4].value, f[5].value, f[6].value});
        }
    }
    return 0;
}

/* --sm-partition=LIST: the partitions (as CUDA_MPS_SM_PARTITION names them, one per device)
 * where the namespace's clients run from now on; "none" (or "") none. Its running clients stay
 * in theirs: a client's partition is its green context, made once. */
static int ns_partitions(struct v3_ctx *x, const struct om_v3_server *s, struct om_v3_ns *t,
                         const char *list)
{
    char buf[OM_CMD_MAX + 1], err[400], *save = NULL;

    t->nparts = 0;
    if (!list[0] || !strcmp(list, "none"))
        return 0;
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *one = strtok_r(buf, ",", &save); one; one = strtok_r(NULL, ",", &save))
        if (om_parts_ns_add(x->d, s->name, t->parts, &t->nparts, OM_V3_NS_PARTS, one, err,
                            sizeof(err)) < 0)
            return v3_fail(x, "Invalid --sm-partition: %s", err);
    return 0;
}

static int cmd_namespace(struct v3_ctx *x, int argc, char **argv)
{
    static const char *const change_keys[] = {"server",
                                              "name",
                                              "pinned-memory-limit",
                                              "active-thread-percentage",
                                              "client-priority",
                                              "cgroup",
                                              "cgroup-depth",
                                              "sm-partition",
                                              NULL};
    static const char *const list_keys[] = {"server", "name", "format", NULL};
    static const char *const get_keys[] = {"server", "name", "field", NULL};
    static const char *const delete_keys[] = {"server", "name", NULL};
    static const char *const force[] = {"f", "force", NULL};
    static const char *const name_pos[] = {"name", NULL};
    static const char *const get_pos[] = {"name", "server", "field", NULL};
    struct om_v3_server *s;
    struct om_v3_ns *n;
    const char *verb = argc >= 2 ? argv[1] : "";
    bool list = !strcmp(verb, "list"), get = !strcmp(verb, "get"), del = !strcmp(verb, "delete");

    x->verb = verb;
    /* NVIDIA's `namespace get NAMESPACE SERVER FIELD`; the others' NAMESPACE, or --name */
    if (v3_parse_opts(x, argc > 2 ? argc - 2 : 0, argv + 2,
                      list  ? list_keys
                      : get ? get_keys
                      : del ? delete_keys
                            : change_keys,
                      del ? force : NULL, get ? get_pos : name_pos) < 0)
        return 0;
    if (list)
        return ns_list(x);
    if (get) {
        struct field f[NS_FIELDS];
        if (ns_target(x, &s, &n, true) < 0)
            return 0;
        return print_fields(x, f, ns_fields(x, s, n, f));
    }
    if (strcmp(verb, "create") != 0 && strcmp(verb, "delete") != 0 && strcmp(verb, "set") != 0)
        return v3_fail(x, "Usage: namespace create|delete|list|set|get NAMESPACE --server=NAME "
                          "[--pinned-memory-limit=SIZE] [--active-thread-percentage=PCT] "
                          "[--client-priority=0|1] [--cgroup=PATH] [--cgroup-depth=N] "
                          "[--sm-partition=LIST]");
    if (!v3_may_change(x) || ns_target(x, &s, &n, strcmp(verb, "create") != 0) < 0)
        return 0;
    if (!strcmp(verb, "delete")) {
        unsigned busy = om_v3_ns_clients(x->d, s, n->name);
        if (n == &s->ns[0])
            return v3_fail(x, "The default namespace of a server cannot be deleted");
        if (busy && !v3_opt(x, "f") && !v3_opt(x, "force"))
            return v3_fail(x,
                           "Namespace %s of server %s has %u running client(s): give --force to "
                           "delete it (they move to the default namespace)",
                           n->name, s->name, busy);
        /* its clients carry on in the server's default namespace, with its limits */
        if (om_v3_ns_move_clients(x->d, s, n->name, &s->ns[0]))
            om_info("namespace %s of server %s deleted: its %u client(s) go to the default "
                    "namespace",
                    n->name, s->name, busy);
        memmove(n, n + 1, (size_t)(&s->ns[s->nns] - (n + 1)) * sizeof(*n));
        s->nns--;
        return 0;
    }
    if (!strcmp(verb, "set") && x->nopts < 3) /* NAMESPACE and --server, then what to set */
        return v3_fail(x, "namespace set %s: give at least one option to set (namespace help)",
                       n->name);
    struct om_v3_ns t;
    if (!strcmp(verb, "create")) {
        if (n)
            return v3_fail(x, "Namespace %.64s already exists in server %s", v3_opt(x, "name"),
                           s->name);
        if (!om_v3_good_name(v3_opt(x, "name")))
            return v3_fail(x, "Invalid namespace name \"%.64s\": letters, digits, '_' and '-'",
                           v3_opt(x, "name"));
        if (s->nns == OM_V3_MAX_NAMESPACES)
            return v3_fail(x, "At most %u namespaces per server", OM_V3_MAX_NAMESPACES);
        memset(&t, 0, sizeof(t));
        snprintf(t.name, sizeof(t.name), "%s", v3_opt(x, "name"));
    } else {
        t = *n;
    }
    if (options_limits(x, &t.limits, NULL) < 0)
        return 0;
    if (v3_opt(x, "cgroup")) {
        if (v3_opt(x, "cgroup")[0] != '/' || strlen(v3_opt(x, "cgroup")) >= sizeof(t.cgroup))
            return v3_fail(x, "Invalid cgroup \"%.64s\": an absolute path", v3_opt(x, "cgroup"));
        snprintf(t.cgroup, sizeof(t.cgroup), "%s", v3_opt(x, "cgroup"));
    }
    if (v3_opt(x, "cgroup-depth")) {
        uint64_t v;
        if (om_parse_u64(v3_opt(x, "cgroup-depth"), 64, &v) < 0)
            return v3_fail(x, "Invalid cgroup depth \"%.16s\" (0 to 64)",
                           v3_opt(x, "cgroup-depth"));
        t.cgroup_depth = (unsigned)v;
    }
    if (v3_opt(x, "sm-partition") && ns_partitions(x, s, &t, v3_opt(x, "sm-partition")) < 0)
        return 0;
    if (!n) {
        s->ns[s->nns++] = t;
        return 0;
    }
    /* set: the new limits reach the namespace's running clients too (a changed cgroup only
     * routes those that arrive from now on) */
    *n = t;
    om_v3_ns_move_clients(x->d, s, n->name, n);
    return 0;
}

/* --- feature, memacct, context-share: NVIDIA's optional server behaviours. openmps's two are
 * what it is built on: each client's device memory is accounted (its limits need it) and every
 * client of a server shares its context (the reason it exists). They are on and stay on. --- */

static const struct {
    const char *name, *why_on;
} features[] = {
    {"memacct", "openmps accounts each client's device memory always: its memory limits, ps -v "
                "and openmps stats are built on it"},
    {"context-share", "every client of an openmps server shares the server's context; a program "
                      "that must not share runs without openmps (with no daemon at its "
                      "CUDA_MPS_PIPE_DIRECTORY)"},
};

static int feature_index(struct v3_ctx *x, const char *name)
{
    for (int i = 0; i < (int)(sizeof(features) / sizeof(features[0])); i++)
        if (!strcmp(name, features[i].name))
            return i;
    return v3_fail(x, "Unknown feature \"%.32s\" (memacct, context-share)", name);
}

/* feature describe [NAME] [--format=…] | feature enable NAME | feature disable NAME */
static int cmd_feature(struct v3_ctx *x, int argc, char **argv)
{
    static const char *const cols[] = {"feature", "state", "module", "covers"};
    static const unsigned width[] = {16, 20, 16, 0};
    static const char *const describe_keys[] = {"name", "format", NULL};
    static const char *const name_key[] = {"name", NULL};
    int only = -1, k;
    struct v3_table t;

    x->verb = argc >= 2 ? argv[1] : "";
    if (!strcmp(x->verb, "describe")) {
        if (v3_parse_opts(x, argc - 2, argv + 2, describe_keys, NULL, name_key) < 0 ||
            (v3_opt(x, "name") && (only = feature_index(x, v3_opt(x, "name"))) < 0) ||
            v3_table_start(x, &t, cols, width, 4) < 0)
            return 0;
        for (k = 0; k < (int)(sizeof(features) / sizeof(features[0])); k++)
            if (only < 0 || only == k)
                v3_table_row(&t, (const char *const[]){features[k].name, "enabled (default)",
                                                       features[k].name, "-"});
        return 0;
    }
    if (strcmp(x->verb, "enable") != 0 && strcmp(x->verb, "disable") != 0)
        return v3_fail(x, "Usage: feature describe [NAME] | feature enable|disable NAME");
    if (v3_parse_opts(x, argc - 2, argv + 2, name_key, NULL, name_key) < 0 || !v3_may_change(x))
        return 0;
    if (!v3_opt(x, "name"))
        return v3_fail(x, "Usage: feature %s memacct|context-share", x->verb);
    if ((k = feature_index(x, v3_opt(x, "name"))) < 0)
        return 0;
    if (x->verb[0] == 'd')
        return v3_fail(x, "%s cannot be disabled: %s", features[k].name, features[k].why_on);
    return 0; /* enable: it is */
}

/* memacct describe [--format=…] | memacct set audit_log=true|false */
static int cmd_memacct(struct v3_ctx *x, int argc, char **argv)
{
    static const char *const cols[] = {"setting", "value"};
    static const unsigned width[] = {12, 0};
    static const char *const describe_keys[] = {"format", NULL};
    static const char *const set_keys[] = {"audit_log", "audit-log", NULL};
    struct v3_table t;
    bool v;

    x->verb = argc >= 2 ? argv[1] : "";
    if (!strcmp(x->verb, "describe")) {
        if (v3_parse_opts(x, argc - 2, argv + 2, describe_keys, NULL, NULL) < 0 ||
            v3_table_start(x, &t, cols, width, 2) < 0)
            return 0;
        v3_table_row(&t, (const char *const[]){"enabled", "true"});
        v3_table_row(&t,
                     (const char *const[]){"audit_log", x->d->memacct_audit ? "true" : "false"});
        return 0;
    }
    if (strcmp(x->verb, "set") != 0)
        return v3_fail(x, "Usage: memacct describe | memacct set audit_log=true|false");
    if (v3_parse_opts(x, argc - 2, argv + 2, set_keys, NULL, NULL) < 0 || !v3_may_change(x))
        return 0;
    if (!v3_opt(x, "audit_log") == !v3_opt(x, "audit-log")) /* one of the two spellings */
        return v3_fail(x, "Usage: memacct set audit_log=true|false");
    v = x->d->memacct_audit;
    if (v3_bool_opt(x, v3_opt(x, "audit_log") ? "audit_log" : "audit-log", &v) < 0)
        return 0;
    if (v != x->d->memacct_audit)
        om_info("memacct: audit log %s (memacct set)", v ? "on" : "off");
    x->d->memacct_audit = v;
    return 0;
}

const char *const om_v3_help =
    "server list [NAME] [--format=table|csv[,noheader]]\n"
    "server create NAME [--uid=UID] [--pinned-memory-limit=SIZE] "
    "[--active-thread-percentage=PCT] [--client-priority=0|1] [--allowed-devices=LIST] "
    "[--locality-domains=true|false] [--mlopart]\n"
    "server delete NAME [--force]\n"
    "server get NAME [FIELD]\n"
    "server set NAME [--uid=UID] [--pinned-memory-limit=SIZE] [--active-thread-percentage=PCT] "
    "[--client-priority=0|1] [--allowed-devices=LIST] [--locality-domains=true|false]\n"
    "client list [--all] [--server=NAME] [--format=table|csv[,noheader]]\n"
    "client get PID [FIELD]\n"
    "client terminate PID\n"
    "namespace list [NAMESPACE] [--server=NAME] [--format=table|csv[,noheader]]\n"
    "namespace create|set NAMESPACE --server=NAME [--pinned-memory-limit=SIZE] "
    "[--active-thread-percentage=PCT] [--client-priority=0|1] [--cgroup=PATH] "
    "[--cgroup-depth=N] [--sm-partition=LIST|none]\n"
    "namespace get NAMESPACE SERVER [FIELD]\n"
    "namespace delete NAMESPACE --server=NAME [--force]\n"
    "sm-partition list [--server=NAME] [--device=ORDINAL|UUID] [--all] "
    "[--format=table|csv[,noheader]]\n"
    "sm-partition create NAME --server=NAME --device=ORDINAL|UUID --chunks=N "
    "[--include-remainder=true|false]\n"
    "sm-partition delete NAME --server=NAME --device=ORDINAL|UUID\n"
    "partition list [--device=UUID] [--format=table|csv[,noheader]]\n"
    "partition create --device=UUID --chunks=N [--name=NAME] [--include-remainder]\n"
    "partition delete PARTITION\n"
    "device list [--server=NAME] [--format=table|csv[,noheader]]\n"
    "feature describe [memacct|context-share] [--format=table|csv[,noheader]]\n"
    "feature enable|disable memacct|context-share\n"
    "memacct describe [--format=table|csv[,noheader]]\n"
    "memacct set audit_log=true|false\n"
    "(a NAME or NAMESPACE may also be given as --name=NAME)";

/* Whether verb is one of the |-separated words of a help line's verbs ("create|set NS ..."). */
static bool verb_among(const char *words, const char *verb)
{
    size_t vlen = strlen(verb);
    const char *stop = words + strcspn(words, " \n");

    for (const char *w = words; w < stop;) {
        size_t n = strcspn(w, "| \n");
        if (n == vlen && !strncmp(w, verb, vlen))
            return true;
        w += n + 1;
    }
    return false;
}

/* `MODULE help`, `MODULE VERB help` (NVIDIA's): the help's lines of that module (and verb). */
static void module_help(struct v3_ctx *x, int argc, char **argv)
{
    const char *verb = argc == 3 ? argv[1] : NULL;
    size_t mlen = strlen(argv[0]);
    unsigned n = 0;

    for (const char *line = om_v3_help; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        bool mine = len > mlen && !strncmp(line, argv[0], mlen) && line[mlen] == ' ';
        if (mine && (!verb || verb_among(line + mlen + 1, verb)))
            sb_printf(x->out, "%s%.*s", n++ ? "\n" : "", (int)len, line);
        line += len + (end != NULL);
    }
    if (!n)
        v3_fail(x, "Unknown command \"%.32s %.32s\" (help: the commands)", argv[0],
                verb ? verb : "");
}

/* A module of NVIDIA's v3 with no documented verbs: answered with where its state shows. */
static int cmd_context_share(struct v3_ctx *x, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return v3_fail(x, "NVIDIA's MPS v3 documents no commands of the context-share module: "
                      "feature describe shows its state (always enabled in openmps: every client "
                      "of a server shares its context)");
}

/* Protocol 3's modules, each with what runs it; `help` as a module's last word is answered from
 * om_v3_help, but by a module with no verbs (help: NULL). */
static const struct {
    const char *name;
    int (*run)(struct v3_ctx *x, int argc, char **argv);
    bool help;
} modules[] = {
    {"server", cmd_server, true},
    {"client", cmd_client, true},
    {"namespace", cmd_namespace, true},
    {"partition", v3_cmd_partition, true},
    {"sm-partition", v3_cmd_sm_partition, true},
    {"device", v3_cmd_device, true},
    {"feature", cmd_feature, true},
    {"memacct", cmd_memacct, true},
    {"context-share", cmd_context_share, false},
};

static int module_of(const char *word)
{
    for (int i = 0; i < (int)(sizeof(modules) / sizeof(modules[0])); i++)
        if (!strcmp(word, modules[i].name))
            return i;
    return -1;
}

bool om_v3_is_module(const char *word)
{
    return module_of(word) >= 0;
}

bool om_v3_command(struct daemon *d, struct conn *ui, int argc, char **argv, struct strbuf *out,
                   bool *ret_error)
{
    struct v3_ctx x = {.d = d, .ui = ui, .out = out};
    const char *m = argv[0];
    int k = module_of(m);

    if (k < 0)
        return false;
    if (d->protocol != OM_PROTOCOL_V3) {
        v3_fail(&x,
                "\"%.16s\" is a command of protocol 3; this daemon runs protocol 2: start it with "
                "-p 3 (or CUDA_MPS_PROTOCOL_VERSION=3)%s",
                m,
                strcmp(m, "partition") && strcmp(m, "sm-partition")
                    ? ""
                    : "; sm_partition and lspart work on either");
    } else if (modules[k].help && (argc == 2 || argc == 3) && !strcmp(argv[argc - 1], "help")) {
        module_help(&x, argc, argv);
    } else {
        modules[k].run(&x, argc, argv);
    }
    om_v3_sync_listeners(d); /* the sockets follow the servers and namespaces */
    *ret_error = x.error;
    return true;
}
