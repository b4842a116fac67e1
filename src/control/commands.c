/* SPDX-License-Identifier: MIT */
/* The command language of the control front-end, compatible with nvidia-cuda-mps-control. */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/config.h"
#include "../common/log.h"

#define MAX_WORDS 16

struct cmd_ctx {
    struct daemon *d;
    struct conn *ui;
    int argc;
    char **argv;
    struct strbuf *out;
    bool error;
};

typedef int (*cmd_fn)(struct cmd_ctx *);

/* One row per command: name, argument count range, whether it changes state
 * (then only root or the daemon's user may run it), handler, usage. */
struct command {
    const char *name;
    int min_args, max_args;
    bool privileged;
    cmd_fn fn;
    const char *usage;
};

static int fail(struct cmd_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct cmd_ctx *x, const char *fmt, ...)
{
    char text[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    sb_printf(x->out, "%s", text);
    x->error = true;
    return 0;
}

int om_command_split(char *line, char **argv, int max)
{
    int n = 0;
    char *p = line;

    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
            p++;
        if (!*p)
            return n;
        if (n == max)
            return -E2BIG;
        argv[n++] = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\r' && *p != '\n')
            p++;
        if (*p)
            *p++ = '\0';
    }
}

static int parse_pid(struct cmd_ctx *x, const char *s, struct server **ret)
{
    uint64_t v;
    struct server *srv;

    if (om_parse_u64(s, 0x7fffffff, &v) < 0 || v == 0)
        return fail(x, "Invalid server PID \"%.32s\"", s), -EINVAL;
    srv = om_server_find_pid(x->d, (pid_t)v);
    if (!srv)
        return fail(x, "Server %s not found", s), -ESRCH;
    *ret = srv;
    return 0;
}

/* A device given as an ordinal or a UUID ("GPU-..."). */
static int parse_device(struct cmd_ctx *x, const char *s, uint32_t *ret)
{
    const struct om_device_info *devs;
    int n;
    uint64_t v;

    if (om_parse_u64(s, OM_MAX_DEVICES - 1, &v) == 0) {
        *ret = (uint32_t)v;
        return 0;
    }
    n = om_daemon_devices(x->d, &devs);
    for (int i = 0; i < n; i++) {
        char uuid[64];
        om_format_uuid(devs[i].uuid, uuid, sizeof(uuid));
        if (strcasecmp(uuid, s) == 0 || strcasecmp(uuid + 4, s) == 0) {
            *ret = devs[i].ordinal;
            return 0;
        }
    }
    fail(x, "Invalid device \"%.64s\": give an ordinal below %u or a GPU UUID", s, OM_MAX_DEVICES);
    return -EINVAL;
}

/* Clients are shown to root and to their own user only: their pids and
 * command lines are nobody else's business. A server's clients all belong to
 * the server's user, but a multi-user server's (-m), each to its own. */
static bool sees_clients_of(const struct cmd_ctx *x, const struct server *s)
{
    return om_sees_server(x->d, x->ui, s);
}

static int cmd_get_server_list(struct cmd_ctx *x)
{
    for (struct server *s = x->d->servers; s; s = s->next)
        sb_printf(x->out, "%s%d", x->out->len ? "\n" : "", (int)s->pid);
    return 0;
}

static int cmd_get_server_status(struct cmd_ctx *x)
{
    /* A server shutting down still serves its clients: NVIDIA reports ACTIVE. */
    static const char *const names[] = {"INITIALIZING", "ACTIVE", "FAULT", "ACTIVE"};
    struct server *s;

    if (x->argc < 2)
        return fail(x, "A server PID is required");
    if (parse_pid(x, x->argv[1], &s) < 0)
        return 0;
    sb_printf(x->out, "%s", names[s->state]);
    return 0;
}

static int cmd_start_server(struct cmd_ctx *x)
{
    uint64_t uid;
    char err[256];

    /* -mlopart: clients make MLOPart devices where the GPU supports them; openmps serves each
     * GPU whole, as NVIDIA's MPS does where the GPU has no such mode (the server starts). */
    if (x->argc == 4 && strcmp(x->argv[3], "-mlopart") == 0)
        x->argc = 3;
    if (x->argc != 3 || strcmp(x->argv[1], "-uid") != 0)
        return fail(x, "A user id (UID) is required to start a new server");
    if (om_parse_u64(x->argv[2], 0xfffffffe, &uid) < 0)
        return fail(x, "Invalid user id \"%.32s\"", x->argv[2]);
    if (x->d->quitting)
        return fail(x, "The daemon is shutting down; no new server is started");
    if (x->d->euid != 0 && (uid_t)uid != x->d->euid)
        return fail(x, "openmps-control runs as uid %u and can start servers only for that user",
                    (unsigned)x->d->euid);
    /* The server the user's clients go to on the main socket: with -m, the multi-user one of the
     * users listed; in protocol 3, the user's first named server (v3.c). */
    uid = om_serving_uid(x->d, (uid_t)uid);
    const char *name = om_v3_uid_server(x->d, (uid_t)uid);
    if (om_server_for(x->d, (uid_t)uid, name))
        return 0; /* already running: nothing to do, as NVIDIA answers */
    for (struct server *s = x->d->servers; s; s = s->next) {
        if (s->uid != (uid_t)uid) {
            /* One user at a time: start it once that server has gone. */
            x->d->start_uid = (int64_t)uid;
            snprintf(x->d->start_name, sizeof(x->d->start_name), "%s", name);
            om_daemon_schedule(x->d);
            return 0;
        }
    }
    if (!om_server_spawn(x->d, (uid_t)uid, name, err, sizeof(err)))
        return fail(x, "Cannot start a server: %s", err);
    return 0;
}

static int cmd_get_client_list(struct cmd_ctx *x)
{
    struct server *s;

    if (parse_pid(x, x->argv[1], &s) < 0)
        return 0;
    if (!sees_clients_of(x, s))
        return 0; /* as a server without clients */
    for (struct client_rec *r = s->clients; r; r = r->next)
        if (om_sees_client(x->ui, r))
            sb_printf(x->out, "%s%d", x->out->len ? "\n" : "", (int)r->pid);
    return 0;
}

/* Per device that has clients: "[ordinal] PCI id, name", then "PID.contexts"
 * per client (each openmps client holds one context per device it uses). */
static int cmd_get_device_client_list(struct cmd_ctx *x)
{
    struct server *only = NULL;

    if (x->argc == 2 && parse_pid(x, x->argv[1], &only) < 0)
        return 0;
    for (struct server *s = x->d->servers; s; s = s->next) {
        if ((only && s != only) || !sees_clients_of(x, s))
            continue;
        for (uint32_t i = 0; i < s->ndevs && i < 32; i++) {
            bool header = false;
            for (struct client_rec *r = s->clients; r; r = r->next) {
                if (!(r->device_mask & (1u << i)) || !om_sees_client(x->ui, r))
                    continue;
                if (!header)
                    sb_printf(x->out, "%s[%u] %s, %s", x->out->len ? "\n" : "", i,
                              s->devs[i].pci_bus_id, s->devs[i].name);
                header = true;
                sb_printf(x->out, "\n%d.1", (int)r->pid);
            }
        }
    }
    return 0;
}

/* ps -v's MEMLIMIT: "-" for none, the size where only device 0 has a cap (the common case),
 * else the caps as CUDA_MPS_PINNED_DEVICE_MEM_LIMIT writes them ("0=4G,1=2G"), cut to fit. */
static void memlimit_text(const struct om_limits *l, char *buf, size_t cap)
{
    size_t len = 0;
    bool others = false;

    for (uint32_t i = 1; i < l->ndevices && i < OM_MAX_DEVICES; i++)
        others |= l->mem_limit[i] != 0;
    snprintf(buf, cap, "-");
    if (!others) {
        if (l->ndevices && l->mem_limit[0])
            om_format_size(l->mem_limit[0], buf, cap);
        return;
    }
    for (uint32_t i = 0; i < l->ndevices && i < OM_MAX_DEVICES && len + 1 < cap; i++) {
        char size[32];
        if (!l->mem_limit[i])
            continue;
        om_format_size(l->mem_limit[i], size, sizeof(size));
        int n = snprintf(buf + len, cap - len, "%s%u=%s", len ? "," : "", i, size);
        if (n < 0)
            break;
        len += (size_t)n;
    }
}

/* The device column of ps: the UUID of the first device the client uses, cut
 * to 22 characters as NVIDIA prints it; "-" before it uses one. */
static void client_device(const struct server *s, const struct client_rec *r, char *buf, size_t cap)
{
    snprintf(buf, cap, "-");
    for (uint32_t i = 0; i < s->ndevs && i < 32; i++) {
        if (r->device_mask & (1u << i)) {
            om_format_uuid(s->devs[i].uuid, buf, cap);
            if (cap > 22)
                buf[22] = '\0';
            return;
        }
    }
}

/*
 * ps [-v|--json] [-p <server PID>]: NVIDIA's columns; -v (openmps) adds what the server applies to
 * each client and what it holds: its active thread percentage and priority, its device-memory cap
 * on device 0 (get_device_pinned_mem_limit names the others) and the device memory it holds on
 * every device (as the server last reported it, at most OM_REPORT_MS old).
 */
static int cmd_ps(struct cmd_ctx *x)
{
    struct server *only = NULL;
    bool any = false, verbose = false, json = false;
    int i = 1;

    if (i < x->argc && (!strcmp(x->argv[i], "-v") || !strcmp(x->argv[i], "--json"))) {
        verbose = x->argv[i][1] == 'v';
        json = !verbose;
        i++;
    }
    if (i < x->argc && (x->argc != i + 2 || strcmp(x->argv[i], "-p") != 0))
        return fail(x, "Usage: ps [-v|--json] [-p <server PID>]");
    if (i < x->argc && parse_pid(x, x->argv[i + 1], &only) < 0)
        return 0;
    if (json) /* the table's rows and -v's columns, and more, for scripts (stats.c) */
        return om_stats_ps_json(x->d, x->ui, only, x->out), 0;
    for (struct server *s = x->d->servers; s; s = s->next) {
        if ((only && s != only) || !sees_clients_of(x, s))
            continue;
        for (struct client_rec *r = s->clients; r; r = r->next) {
            char dev[64], pid[16], id[16], spid[16], ns[24], atp[16], cap[160], held[32];
            if (!om_sees_client(x->ui, r))
                continue;
            if (!any) {
                sb_printf(x->out, "%-10s%-10s%-15s%-26s%-15s%-15s", "PID", "ID", "SERVER", "DEVICE",
                          "NAMESPACE", "COMMAND");
                if (verbose)
                    sb_printf(x->out, " %-8s%-10s%-10s%-10s", "SHARE", "PRIORITY", "MEMLIMIT",
                              "MEMORY");
            }
            any = true;
            client_device(s, r, dev, sizeof(dev));
            snprintf(pid, sizeof(pid), "%d", (int)r->pid);
            snprintf(id, sizeof(id), "%u", r->id);
            snprintf(spid, sizeof(spid), "%d", (int)s->pid);
            snprintf(ns, sizeof(ns), "%lu", r->pid_ns);
            sb_printf(x->out, "\n%-10s%-10s%-15s%-26s%-15s%-15s", pid, id, spid, dev, ns,
                      r->command);
            if (!verbose)
                continue;
            om_format_percentage(
                r->limits.active_thread_pct_milli ? r->limits.active_thread_pct_milli : 100000, atp,
                sizeof(atp));
            memlimit_text(&r->limits, cap, sizeof(cap));
            om_format_size(r->device_bytes, held, sizeof(held));
            sb_printf(x->out, " %-8s%-10u%-9s %-10s", atp, (unsigned)r->limits.priority, cap,
                      r->device_bytes ? held : "0");
        }
    }
    return 0;
}

/* stats [--json|--smi] [-p <server PID>]: the servers' accounting of their clients (stats.c). */
static int cmd_stats(struct cmd_ctx *x)
{
    return om_stats_command(x->d, x->ui, x->argc, x->argv, x->out, &x->error);
}

static int cmd_shutdown_server(struct cmd_ctx *x)
{
    struct server *s;
    bool force = false;

    if (x->argc == 3) {
        if (strcmp(x->argv[2], "-f") != 0)
            return fail(x, "Usage: shutdown_server <PID> [-f]");
        force = true;
    }
    if (parse_pid(x, x->argv[1], &s) < 0)
        return 0;
    om_server_shutdown(x->d, s, force);
    om_daemon_schedule(x->d);
    return 0;
}

/* Prints 0 when the server ended the client's session, else a reason and 1. */
static int cmd_terminate_client(struct cmd_ctx *x)
{
    struct server *s;
    uint64_t cpid;
    bool known = false;
    int rc;

    if (parse_pid(x, x->argv[1], &s) < 0)
        return 0;
    if (om_parse_u64(x->argv[2], 0x7fffffff, &cpid) < 0 || cpid == 0)
        return fail(x, "Invalid process %.32s!\n1", x->argv[2]);
    for (struct client_rec *r = s->clients; r; r = r->next)
        known |= (uint64_t)r->pid == cpid;
    if (!known)
        return fail(x, "Invalid process %s!\n1", x->argv[2]);
    rc = om_terminate_request(x->d, s, (pid_t)cpid, x->ui, false);
    if (rc == -ENOMEM)
        return fail(x, "Out of memory\n1");
    if (rc < 0)
        return fail(x, "Server %d does not answer\n1", (int)s->pid);
    return OM_CMD_LATER;
}

int om_terminate_request(struct daemon *d, struct server *s, pid_t cpid, struct conn *ui, bool v3)
{
    struct om_srv_terminate t;
    struct pending *p = calloc(1, sizeof(*p));

    if (!p)
        return -ENOMEM;
    t.request_id = ++d->next_request_id;
    t.client_pid = (uint32_t)cpid;
    if (s->chan < 0 || om_msg_send(s->chan, OM_MSG_SRV_TERMINATE, 0, &t, sizeof(t), -1) < 0) {
        free(p);
        return -EPIPE;
    }
    p->request_id = t.request_id;
    p->ui_id = ui->id;
    p->deadline_ms = om_now_ms() + OM_SERVER_REPLY_TIMEOUT_MS;
    p->client_pid = cpid;
    p->v3 = v3;
    p->next = s->pending;
    s->pending = p;
    ui->awaiting = t.request_id;
    return 0;
}

static int cmd_quit(struct cmd_ctx *x)
{
    uint64_t t = 0;

    if (x->argc == 2 || (x->argc == 3 && (strcmp(x->argv[1], "-t") != 0 ||
                                          om_parse_u64(x->argv[2], 86400 * 365, &t) < 0)))
        return fail(x, "Usage: quit [-t <seconds>]");
    om_info("quit command issued%s%s", x->argc == 3 ? " with timeout of " : "",
            x->argc == 3 ? x->argv[2] : ""); /* digits only: om_parse_u64 took them */
    om_daemon_quit(x->d, x->argc == 3 ? (int)t : -1);
    return 0;
}

/* NVIDIA answers a set with the value now in force; a bad value keeps the old
 * one. openmps says what was wrong instead, on one line. */
static int set_percentage(struct cmd_ctx *x, const char *arg, uint32_t *dst)
{
    uint32_t milli;
    char buf[32];

    if (om_parse_percentage(arg, &milli) < 0)
        return fail(x, "Invalid percentage \"%.32s\", expected between (0.0, 100.0]", arg);
    *dst = milli;
    om_format_percentage(milli, buf, sizeof(buf));
    sb_printf(x->out, "%s", buf);
    return 0;
}

static void print_percentage(struct cmd_ctx *x, uint32_t milli)
{
    char buf[32];

    om_format_percentage(milli ? milli : 100000, buf, sizeof(buf));
    sb_printf(x->out, "%s", buf);
}

static int cmd_set_default_atp(struct cmd_ctx *x)
{
    return set_percentage(x, x->argv[1], &x->d->defaults.active_thread_pct_milli);
}

static int cmd_get_default_atp(struct cmd_ctx *x)
{
    print_percentage(x, x->d->defaults.active_thread_pct_milli);
    return 0;
}

static int cmd_set_atp(struct cmd_ctx *x)
{
    struct server *s;

    if (parse_pid(x, x->argv[1], &s) < 0)
        return 0;
    set_percentage(x, x->argv[2], &s->limits.active_thread_pct_milli);
    if (!x->error)
        om_server_send_limits(s);
    return 0;
}

static int cmd_get_atp(struct cmd_ctx *x)
{
    struct server *s;

    if (parse_pid(x, x->argv[1], &s) < 0)
        return 0;
    print_percentage(x, s->limits.active_thread_pct_milli);
    return 0;
}

static int set_mem_limit(struct cmd_ctx *x, struct om_limits *l, const char *dev_arg,
                         const char *size_arg)
{
    uint32_t dev;
    uint64_t bytes;

    if (parse_device(x, dev_arg, &dev) < 0)
        return 0;
    if (om_parse_size(size_arg, &bytes) < 0)
        return fail(x, "Invalid memory limit \"%.32s\" (examples: 2G, 512M; a plain number is MiB)",
                    size_arg);
    l->mem_limit[dev] = bytes;
    if (dev + 1 > l->ndevices)
        l->ndevices = dev + 1;
    return 0;
}

/* An unset limit has an empty answer, as NVIDIA's. */
static int get_mem_limit(struct cmd_ctx *x, const struct om_limits *l, const char *dev_arg)
{
    uint32_t dev;
    char buf[32];

    if (parse_device(x, dev_arg, &dev) < 0)
        return 0;
    if (dev < l->ndevices && l->mem_limit[dev]) {
        om_format_size(l->mem_limit[dev], buf, sizeof(buf));
        sb_printf(x->out, "%s", buf);
    }
    return 0;
}

static int cmd_set_default_mem(struct cmd_ctx *x)
{
    return set_mem_limit(x, &x->d->defaults, x->argv[1], x->argv[2]);
}

static int cmd_get_default_mem(struct cmd_ctx *x)
{
    return get_mem_limit(x, &x->d->defaults, x->argv[1]);
}

static int cmd_set_mem(struct cmd_ctx *x)
{
    struct server *s;

    if (parse_pid(x, x->argv[1], &s) < 0)
        return 0;
    set_mem_limit(x, &s->limits, x->argv[2], x->argv[3]);
    if (!x->error)
        om_server_send_limits(s);
    return 0;
}

static int cmd_get_mem(struct cmd_ctx *x)
{
    struct server *s;

    if (parse_pid(x, x->argv[1], &s) < 0)
        return 0;
    return get_mem_limit(x, &s->limits, x->argv[2]);
}

static int cmd_set_default_priority(struct cmd_ctx *x)
{
    if (strcmp(x->argv[1], "0") != 0 && strcmp(x->argv[1], "1") != 0)
        return fail(x, "Invalid priority value - must be 0 or 1!");
    x->d->defaults.priority = (uint32_t)(x->argv[1][0] - '0');
    return 0;
}

static int cmd_get_default_priority(struct cmd_ctx *x)
{
    sb_printf(x->out, "%u", x->d->defaults.priority);
    return 0;
}

static void device_table(struct cmd_ctx *x, const struct om_device_info *devs, int n, bool csv)
{
    if (csv)
        sb_printf(x->out, "\nDevice Ordinal,PCI IDs,UUID,Name,Attributes");
    else
        sb_printf(x->out, "\n%-16s%-15s%-42s%-34s%s", "Device Ordinal", "PCI IDs", "UUID", "Name",
                  "Attributes");
    for (int i = 0; i < n; i++) {
        char uuid[64], ord[16];
        om_format_uuid(devs[i].uuid, uuid, sizeof(uuid));
        snprintf(ord, sizeof(ord), "%u", devs[i].ordinal);
        if (csv)
            sb_printf(x->out, "\n%s,%s,%s,%s,N/A", ord, devs[i].pci_bus_id, uuid, devs[i].name);
        else
            sb_printf(x->out, "\n%-16s%-15s%-42s%-34sN/A", ord, devs[i].pci_bus_id, uuid,
                      devs[i].name);
    }
}

/* Static SM partitions (partition.c). */
static int cmd_sm_partition(struct cmd_ctx *x)
{
    om_parts_sm_partition(x->d, x->argc, x->argv, x->out, &x->error);
    return 0;
}

static int cmd_lspart(struct cmd_ctx *x)
{
    om_parts_lspart(x->d, x->out);
    x->error = !x->d->parts;
    return 0;
}

static int cmd_device_query(struct cmd_ctx *x)
{
    const struct om_device_info *devs;
    struct server *only = NULL;
    bool csv = false;
    int n;

    for (int i = 1; i < x->argc; i++) {
        if (strcmp(x->argv[i], "--csv") == 0)
            csv = true;
        else if (only || parse_pid(x, x->argv[i], &only) < 0)
            return only ? fail(x, "Usage: device_query [<PID>] [--csv]") : 0;
    }
    n = om_daemon_devices(x->d, &devs);
    if (n < 0)
        return fail(x, "No devices can be listed: %s", x->d->probe_err);
    sb_printf(x->out, "Default");
    device_table(x, devs, n, csv);
    if (only) {
        sb_printf(x->out, "\n\nServer %d", (int)only->pid);
        device_table(x, only->devs, (int)only->ndevs, csv);
    }
    return 0;
}

static int cmd_help(struct cmd_ctx *x);

static const struct command commands[] = {
    {"get_server_list", 0, 0, false, cmd_get_server_list, ""},
    {"get_server_status", 0, 1, false, cmd_get_server_status, "<PID>"},
    {"start_server", 0, 3, true, cmd_start_server, "-uid <UID> [-mlopart]"},
    {"get_client_list", 1, 1, false, cmd_get_client_list, "<PID>"},
    {"get_device_client_list", 0, 1, false, cmd_get_device_client_list, "[<PID>]"},
    {"ps", 0, 3, false, cmd_ps, "[-v|--json] [-p <PID>]"},
    {"stats", 0, 3, false, cmd_stats, "[--json|--smi] [-p <PID>]"},
    {"shutdown_server", 1, 2, true, cmd_shutdown_server, "<PID> [-f]"},
    {"terminate_client", 2, 2, true, cmd_terminate_client, "<server PID> <client PID>"},
    {"quit", 0, 2, true, cmd_quit, "[-t <seconds>]"},
    {"set_default_active_thread_percentage", 1, 1, true, cmd_set_default_atp, "<percentage>"},
    {"get_default_active_thread_percentage", 0, 0, false, cmd_get_default_atp, ""},
    {"set_active_thread_percentage", 2, 2, true, cmd_set_atp, "<PID> <percentage>"},
    {"get_active_thread_percentage", 1, 1, false, cmd_get_atp, "<PID>"},
    {"set_default_device_pinned_mem_limit", 2, 2, true, cmd_set_default_mem, "<dev> <size>"},
    {"get_default_device_pinned_mem_limit", 1, 1, false, cmd_get_default_mem, "<dev>"},
    {"set_device_pinned_mem_limit", 3, 3, true, cmd_set_mem, "<PID> <dev> <size>"},
    {"get_device_pinned_mem_limit", 2, 2, false, cmd_get_mem, "<PID> <dev>"},
    {"set_default_client_priority", 1, 1, true, cmd_set_default_priority, "<0|1>"},
    {"get_default_client_priority", 0, 0, false, cmd_get_default_priority, ""},
    {"device_query", 0, 2, false, cmd_device_query, "[<PID>] [--csv]"},
    {"sm_partition", 1, 3, true, cmd_sm_partition,
     "add <device UUID> <chunks> | rm <device UUID> <partition ID>"},
    {"lspart", 0, 0, false, cmd_lspart, ""},
    {"help", 0, 0, false, cmd_help, ""},
};

static int cmd_help(struct cmd_ctx *x)
{
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        sb_printf(x->out, "%s%s%s%s", i ? "\n" : "", commands[i].name,
                  commands[i].usage[0] ? " " : "", commands[i].usage);
    if (x->d->protocol == OM_PROTOCOL_V3)
        sb_printf(x->out, "\n%s", om_v3_help);
    return 0;
}

int om_command_run(struct daemon *d, struct conn *ui, const char *line, struct strbuf *out,
                   bool *ret_error)
{
    char buf[OM_CMD_MAX + 1];
    char *argv[MAX_WORDS];
    struct cmd_ctx x = {.d = d, .ui = ui, .argv = argv, .out = out};
    const struct command *cmd = NULL;
    char shown[256], answer[256];
    int rc;

    /* Everything the peer typed is escaped before it reaches the log: no
     * terminal escape sequence, no forged line. */
    om_log_escape(shown, sizeof(shown), line, OM_CMD_MAX);
    snprintf(buf, sizeof(buf), "%s", line);
    x.argc = om_command_split(buf, argv, MAX_WORDS);
    if (x.argc == 0)
        return 0; /* an empty line has an empty answer */
    if (x.argc < 0) {
        fail(&x, "Too many arguments (at most %d words)", MAX_WORDS);
        goto done;
    }
    if (om_v3_command(d, ui, x.argc, argv, out, &x.error)) {
        if (ui->awaiting) { /* client terminate: answered once its server has */
            om_peer_info(d, ui->uid, "Command from pid %d (uid %u): %s (answer pending)",
                         (int)ui->pid, (unsigned)ui->uid, shown);
            return OM_CMD_LATER;
        }
        goto done; /* a module-verb command of protocol 3 (v3.c) */
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(commands[i].name, argv[0]) == 0)
            cmd = &commands[i];
    if (!cmd) {
        fail(&x, "Unknown command \"%.64s\" (help lists the commands)", argv[0]);
        goto done;
    }
    if (x.argc - 1 < cmd->min_args || x.argc - 1 > cmd->max_args) {
        fail(&x, "Usage: %s%s%s", cmd->name, cmd->usage[0] ? " " : "", cmd->usage);
        goto done;
    }
    if (cmd->privileged && ui->uid != 0 && ui->uid != d->euid) {
        fail(&x, "Permission denied: %s needs root or the daemon's user (uid %u)", cmd->name,
             (unsigned)d->euid);
        goto done;
    }
    rc = cmd->fn(&x);
    if (rc == OM_CMD_LATER) {
        om_peer_info(d, ui->uid, "Command from pid %d (uid %u): %s (answer pending)", (int)ui->pid,
                     (unsigned)ui->uid, shown);
        return OM_CMD_LATER;
    }
done:
    /* The answer of an error echoes what was typed: escaped as well. */
    if (x.error)
        om_peer_info(d, ui->uid, "Command from pid %d (uid %u): %s -> %s", (int)ui->pid,
                     (unsigned)ui->uid, shown,
                     om_log_escape(answer, sizeof(answer), out->buf ? out->buf : "",
                                   out->len > 200 ? 200 : out->len));
    else
        om_peer_info(d, ui->uid, "Command from pid %d (uid %u): %s", (int)ui->pid,
                     (unsigned)ui->uid, shown);
    *ret_error = x.error;
    return 0;
}
