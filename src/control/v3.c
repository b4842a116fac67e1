/* SPDX-License-Identifier: MIT */
/*
 * NVIDIA's MPS v3 interface (protocol 3): named servers and their namespaces, from the
 * configuration file (-a) or the module-verb commands (v3cmd.c), their sockets, and the routing
 * of a new client to its server and namespace (and a namespace's static SM partition,
 * partition.c). docs/operations.md, "Protocol 3", says what openmps does not do (yet).
 */
#define _GNU_SOURCE
#include "v3.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/sock.h"
#include "internal.h"
#include "v3int.h"

struct om_v3 *om_v3_state(struct daemon *d)
{
    if (!d->v3)
        d->v3 = calloc(1, sizeof(*d->v3));
    return d->v3;
}

struct om_v3_server *om_v3_find_server(struct daemon *d, const char *name)
{
    for (unsigned i = 0; d->v3 && i < d->v3->nservers; i++)
        if (!strcmp(d->v3->servers[i].name, name))
            return &d->v3->servers[i];
    return NULL;
}

static struct om_v3_server *server_of_uid(const struct daemon *d, uid_t uid)
{
    for (unsigned i = 0; d->v3 && i < d->v3->nservers; i++)
        if (d->v3->servers[i].uid == uid)
            return &d->v3->servers[i];
    return NULL;
}

struct om_v3_ns *om_v3_find_ns(struct om_v3_server *s, const char *name)
{
    for (unsigned i = 0; i < s->nns; i++)
        if (!strcmp(s->ns[i].name, name))
            return &s->ns[i];
    return NULL;
}

bool om_v3_good_name(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n >= OM_CONF_NAME_MAX)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '-'))
            return false;
    return true;
}

/* allowed_devices: ordinals and GPU UUIDs (or their prefixes), comma-separated. */
bool om_v3_good_devices(const char *s)
{
    if (!*s || strlen(s) >= OM_CONF_TEXT_MAX)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '-' || *s == ','))
            return false;
    return true;
}

/* The limits of a server or namespace from its values as text (the file's, a command's). A
 * NULL text leaves that limit as it is. 0, or -EINVAL with a sentence in err. */
int om_v3_set_limits(struct om_limits *l, const char *mem, const char *atp, const char *prio,
                     char *err, size_t errlen)
{
    struct om_limits t = *l;
    uint64_t bytes;

    if (mem) {
        memset(t.mem_limit, 0, sizeof(t.mem_limit));
        t.ndevices = 0;
        if (om_parse_size(mem, &bytes) == 0) {
            for (unsigned i = 0; i < OM_MAX_DEVICES; i++)
                t.mem_limit[i] = bytes;
            t.ndevices = OM_MAX_DEVICES;
        } else if (om_parse_mem_limit_list(mem, &t) != 0) {
            snprintf(err, errlen,
                     "Invalid pinned memory limit \"%.64s\": give a size (10G, 512M) or "
                     "ordinal=size pairs (0=1G,1=512M)",
                     mem);
            return -EINVAL;
        }
    }
    if (atp && om_parse_percentage(atp, &t.active_thread_pct_milli) < 0) {
        snprintf(err, errlen, "Invalid active thread percentage \"%.32s\", expected (0, 100]", atp);
        return -EINVAL;
    }
    if (prio) {
        if (strcmp(prio, "0") != 0 && strcmp(prio, "1") != 0) {
            snprintf(err, errlen, "Invalid client priority \"%.16s\" - must be 0 or 1", prio);
            return -EINVAL;
        }
        t.priority = (uint32_t)(prio[0] - '0');
    }
    *l = t;
    return 0;
}

static void conf_limits(const struct om_conf_limits *c, struct om_limits *l)
{
    char atp[32], prio[4], err[160];

    om_format_percentage(c->atp_milli, atp, sizeof(atp));
    snprintf(prio, sizeof(prio), "%u", c->priority);
    /* the parser checked every value: this cannot fail */
    om_v3_set_limits(l, c->has_mem ? c->mem : NULL, c->has_atp ? atp : NULL,
                     c->has_priority ? prio : NULL, err, sizeof(err));
}

void om_v3_apply_settings(const struct om_conf *c)
{
    for (uint32_t i = 0; i < c->nsettings; i++)
        setenv(c->settings[i].name, c->settings[i].value, 0);
}

/* A server's [[servers.S.devices]] with their [[...sm_partitions]]: static SM partitions made at
 * the start (partition.c; they turn static partitioning on, as -S does). chunks = 0: every chunk
 * still free; max_chunks and shareable (sharing a partition's SMs with others) are refused. */
static int conf_partitions(struct daemon *d, const struct om_conf_server *cs, char *err,
                           size_t errlen)
{
    for (uint32_t k = 0; k < cs->ndevices; k++) {
        const struct om_conf_device *dev = &cs->devices[k];
        char why[400];
        if (om_parts_device_known(d, dev->uuid, why, sizeof(why)) < 0) {
            snprintf(err, errlen, "line %d: server %s: %s", dev->line, cs->name, why);
            return -1;
        }
        for (uint32_t j = 0; j < dev->npartitions; j++) {
            const struct om_conf_partition *p = &dev->parts[j];
            if (p->shareable || p->max_chunks) {
                snprintf(err, errlen,
                         "line %d: SM partition %s: %s is not supported by openmps (its "
                         "partitions hold their chunks alone)",
                         p->line, p->name, p->shareable ? "shareable" : "max_chunks");
                return -1;
            }
            if (om_parts_add_named(d, dev->uuid, cs->name, p->name, p->chunks, p->include_remainder,
                                   why, sizeof(why)) < 0) {
                snprintf(err, errlen, "line %d: SM partition %s: %s", p->line, p->name, why);
                return -1;
            }
        }
    }
    return 0;
}

/* Each [[servers.S.namespaces.N.devices]]: the partition sm_partition names on device uuid (S's
 * own: another server's is refused, om_parts_ns_add) is where N's clients run. */
static int conf_ns_partitions(struct daemon *d, const struct om_conf *c, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < c->nservers; i++) {
        struct om_v3_server *s = om_v3_find_server(d, c->servers[i].name);
        for (uint32_t j = 0; s && j < c->servers[i].nns; j++) {
            const struct om_conf_ns *cn = &c->servers[i].ns[j];
            struct om_v3_ns *n = om_v3_find_ns(s, cn->name);
            for (uint32_t k = 0; n && k < cn->ndevices; k++) {
                char text[OM_CONF_TEXT_MAX + OM_CONF_NAME_MAX + 2], why[400];
                snprintf(text, sizeof(text), "%s/%s", cn->devices[k].uuid,
                         cn->devices[k].sm_partition);
                if (om_parts_ns_add(d, s->name, n->parts, &n->nparts, OM_V3_NS_PARTS, text, why,
                                    sizeof(why)) < 0) {
                    snprintf(err, errlen, "line %d: namespace %s: %s", cn->devices[k].line,
                             cn->name, why);
                    return -1;
                }
            }
        }
    }
    return 0;
}

int om_v3_apply_conf(struct daemon *d, const struct om_conf *c, char *err, size_t errlen)
{
    struct om_v3 *v = om_v3_state(d);

    if (!v) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if (c->nservers && d->protocol != OM_PROTOCOL_V3) {
        snprintf(err, errlen,
                 "line %d: [servers.%s]: named servers and namespaces need protocol 3 (-p 3 or "
                 "CUDA_MPS_PROTOCOL_VERSION=3); a daemon of protocol 2 takes only [openmps]",
                 c->servers[0].line, c->servers[0].name);
        return -EINVAL;
    }
    if (c->line_feature_off) {
        snprintf(err, errlen,
                 "line %d: openmps cannot turn this feature off: it accounts each client's device "
                 "memory always, and every client of its servers shares the server's context",
                 c->line_feature_off);
        return -EINVAL;
    }
    if (c->has_compute_policy) {
        snprintf(err, errlen,
                 "line %d: [compute_policy] (time-slicing between servers) is not supported by "
                 "openmps: its servers share the GPU by SM share (active_thread_percentage)",
                 c->line_compute_policy);
        return -EINVAL;
    }
    for (uint32_t i = 0; i < c->nservers; i++) {
        const struct om_conf_server *cs = &c->servers[i];
        struct om_v3_server *s = &v->servers[v->nservers];
        if (v->nservers == OM_V3_MAX_SERVERS) {
            snprintf(err, errlen, "line %d: more than %u servers", cs->line, OM_V3_MAX_SERVERS);
            return -EINVAL;
        }
        uint32_t nparts = 0;
        for (uint32_t k = 0; k < cs->ndevices; k++)
            nparts += cs->devices[k].npartitions;
        if (cs->locality_domains && nparts) {
            snprintf(err, errlen,
                     "line %d: server %s: locality_domains = true beside SM partitions: the two "
                     "exclude each other",
                     cs->line_locality, cs->name);
            return -EINVAL;
        }
        if (cs->has_timeslice_pct) {
            snprintf(err, errlen,
                     "line %d: timeslice_pct: time-slicing between servers is not "
                     "supported by openmps",
                     cs->line_timeslice);
            return -EINVAL;
        }
        if (conf_partitions(d, cs, err, errlen) < 0)
            return -EINVAL;
        if (cs->allowed_devices[0] &&
            (!om_v3_good_devices(cs->allowed_devices) || getenv("CUDA_VISIBLE_DEVICES"))) {
            snprintf(err, errlen,
                     getenv("CUDA_VISIBLE_DEVICES")
                         ? "line %d: server %s: allowed_devices and the daemon's "
                           "CUDA_VISIBLE_DEVICES both choose devices: give one"
                         : "line %d: server %s: allowed_devices takes ordinals and GPU UUIDs, "
                           "comma-separated",
                     cs->line_allowed, cs->name);
            return -EINVAL;
        }
        uid_t uid = cs->has_uid ? (uid_t)cs->uid : d->euid;
        if (d->euid != 0 && uid != d->euid) {
            snprintf(err, errlen,
                     "line %d: server %s: uid %u, but a daemon run as uid %u serves only its own "
                     "user",
                     cs->has_uid ? cs->line_uid : cs->line, cs->name, (unsigned)uid,
                     (unsigned)d->euid);
            return -EINVAL;
        }
        memset(s, 0, sizeof(*s));
        snprintf(s->name, sizeof(s->name), "%s", cs->name);
        s->uid = uid;
        s->limits = d->defaults;
        conf_limits(&cs->lim, &s->limits);
        s->has_atp = cs->lim.has_atp;
        s->has_priority = cs->lim.has_priority;
        s->has_mem = cs->lim.has_mem;
        s->locality_domains = cs->locality_domains;
        if (cs->locality_domains)
            om_info("configuration: server %s: locality domains asked for; openmps serves each "
                    "GPU as one device",
                    cs->name);
        snprintf(s->allowed_devices, sizeof(s->allowed_devices), "%s", cs->allowed_devices);
        snprintf(s->ns[0].name, sizeof(s->ns[0].name), "default");
        s->nns = 1;
        for (uint32_t j = 0; j < cs->nns; j++) {
            const struct om_conf_ns *cn = &cs->ns[j];
            struct om_v3_ns *n = om_v3_find_ns(s, cn->name);
            if (!n) {
                if (s->nns == OM_V3_MAX_NAMESPACES) {
                    snprintf(err, errlen, "line %d: more than %u namespaces in server %s", cn->line,
                             OM_V3_MAX_NAMESPACES, s->name);
                    return -EINVAL;
                }
                n = &s->ns[s->nns++];
                snprintf(n->name, sizeof(n->name), "%s", cn->name);
            }
            conf_limits(&cn->lim, &n->limits);
            snprintf(n->cgroup, sizeof(n->cgroup), "%s", cn->cgroup);
            n->cgroup_depth = cn->cgroup_depth;
        }
        v->nservers++;
        om_info("configuration: server %s (uid %u), %u namespace(s)", s->name, (unsigned)s->uid,
                s->nns);
    }
    if (conf_ns_partitions(d, c, err, errlen) < 0)
        return -EINVAL;
    if (c->memacct || c->context_share)
        om_info("configuration: [features.memacct] and [features.context-share] need nothing of "
                "openmps: it always accounts each client's memory, and its clients always share "
                "their server's context");
    if (c->memacct_audit_log) {
        d->memacct_audit = true;
        om_info("configuration: memacct audit log on: control.log says what device memory each "
                "client held when it left");
    }
    om_v3_sync_listeners(d);
    return 0;
}

struct om_limits om_v3_server_limits(const struct daemon *d, const char *name)
{
    const struct om_v3_server *s = name[0] ? om_v3_find_server((struct daemon *)d, name) : NULL;

    return s ? s->limits : d->defaults;
}

const char *om_v3_uid_server(const struct daemon *d, uid_t uid)
{
    const struct om_v3_server *s = server_of_uid(d, uid);

    return s ? s->name : "";
}

void om_v3_cgroup_file(const char *path, char *buf, size_t cap)
{
    char text[OM_CGROUP_TEXT_MAX];
    size_t len = om_cgroup_text(path, text, sizeof(text));

    buf[0] = '\0';
    for (char *line = text; *line;) {
        char *next = strchr(line, '\n');
        if (!next && len == sizeof(text) - 1)
            return; /* cut by the buffer: not the whole line */
        if (next)
            *next++ = '\0';
        if (!strncmp(line, "0::", 3)) {
            if (strlen(line + 3) < cap) /* a path cut short would name another cgroup */
                snprintf(buf, cap, "%s", line + 3);
            return;
        }
        if (!next)
            break;
        line = next;
    }
}

/* The client's cgroup (v2: the "0::" line of /proc/PID/cgroup), "" when unknown. */
static void client_cgroup(pid_t pid, char *buf, size_t cap)
{
    char path[64];

    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    om_v3_cgroup_file(path, buf, cap);
}

bool om_v3_in_cgroup(const char *want, unsigned max_depth, const char *cgroup)
{
    size_t n;

    if (!want[0] || cgroup[0] != '/')
        return false;
    if (!strncmp(want, "/sys/fs/cgroup", 14) && (want[14] == '/' || !want[14]))
        want += 14;
    if (!*want)
        want = "/";
    n = strlen(want);
    while (n > 1 && want[n - 1] == '/')
        n--;
    /* rest: what lies below want ("" for want itself, else "/a/b") */
    const char *rest = cgroup;
    if (n == 1 && want[0] == '/') {
        if (!strcmp(cgroup, "/"))
            rest = "";
    } else if (strncmp(cgroup, want, n) == 0 && (cgroup[n] == '/' || cgroup[n] == '\0')) {
        rest = cgroup + n;
    } else {
        return false;
    }
    if (max_depth) {
        unsigned depth = 0;
        for (const char *p = rest; *p; p++)
            depth += *p == '/';
        if (depth > max_depth)
            return false;
    }
    return true;
}

void om_v3_server_visible(const struct daemon *d, const char *name, char *kv, size_t cap)
{
    const struct om_v3_server *s = name[0] ? om_v3_find_server((struct daemon *)d, name) : NULL;

    kv[0] = '\0';
    if (s && s->allowed_devices[0])
        snprintf(kv, cap, "CUDA_VISIBLE_DEVICES=%s", s->allowed_devices);
}

/* A size for "every device" covers OM_MAX_DEVICES ordinals until the server says how many it
 * has: then only those keep it (so that ps -v shows one size). */
static void fit_devices(struct om_limits *l, uint32_t ndevs)
{
    for (uint32_t i = ndevs; i < l->ndevices && i < OM_MAX_DEVICES; i++)
        l->mem_limit[i] = 0;
    if (l->ndevices > ndevs)
        l->ndevices = ndevs;
}

void om_v3_server_ready(const struct daemon *d, struct server *s)
{
    if (s->name[0] && om_v3_find_server((struct daemon *)d, s->name))
        fit_devices(&s->limits, s->ndevs);
}

/* What a client of process p in namespace n is held to beyond its server's limits: what it asked
 * for itself, tightened by the namespace's limits. */
static struct om_limits ns_want(const struct om_v3_ns *n, const struct server *p,
                                const struct om_limits *asked)
{
    struct om_limits l = n->limits;

    fit_devices(&l, p->ndevs);
    return om_limits_merge(asked, &l);
}

/* Whether named server vs serves uid's clients: its user's, and with -m the listed users'
 * (root's front-ends may connect to any socket, but its clients go to its own servers). */
static bool serves_user(const struct daemon *d, const struct om_v3_server *vs, uid_t uid)
{
    return vs->uid == uid || (om_multiuser_listed(d, uid) && om_multiuser_listed(d, vs->uid));
}

/* The namespace of named server vs whose cgroup holds `cgroup` most specifically (the longest
 * path); NULL for none. */
static const struct om_v3_ns *cgroup_ns(const struct om_v3_server *vs, const char *cgroup,
                                        size_t *best_len)
{
    const struct om_v3_ns *best = NULL;

    for (unsigned i = 0; i < vs->nns; i++) {
        size_t n = strlen(vs->ns[i].cgroup);
        if (om_v3_in_cgroup(vs->ns[i].cgroup, vs->ns[i].cgroup_depth, cgroup) && n > *best_len) {
            best = &vs->ns[i];
            *best_len = n;
        }
    }
    return best;
}

void om_v3_route_server(const struct daemon *d, struct conn *c)
{
    const struct om_v3_server *vs =
        c->v3_server[0] ? om_v3_find_server((struct daemon *)d, c->v3_server) : NULL;
    uid_t uid = om_serving_uid(d, c->uid);
    char cgroup[4096] = "";
    size_t best_len = 0;
    bool any_cgroup = false;

    if (vs && serves_user(d, vs, c->uid)) { /* its socket: that named server */
        c->route_uid = vs->uid;
        snprintf(c->route, sizeof(c->route), "%s", vs->name);
        return;
    }
    c->route_uid = uid;
    snprintf(c->route, sizeof(c->route), "%s", om_v3_uid_server(d, uid));
    /* Its cgroup: the user's named server with the namespace that holds it most specifically
     * (the first such server where two are as specific). */
    for (unsigned i = 0; d->v3 && i < d->v3->nservers; i++)
        for (unsigned j = 0; d->v3->servers[i].uid == uid && j < d->v3->servers[i].nns; j++)
            any_cgroup |= d->v3->servers[i].ns[j].cgroup[0] != '\0';
    if (!any_cgroup)
        return;
    client_cgroup(c->pid, cgroup, sizeof(cgroup));
    for (unsigned i = 0; i < d->v3->nservers; i++)
        if (d->v3->servers[i].uid == uid && cgroup_ns(&d->v3->servers[i], cgroup, &best_len))
            snprintf(c->route, sizeof(c->route), "%s", d->v3->servers[i].name);
}

bool om_v3_route_valid(const struct daemon *d, const struct conn *c)
{
    const struct om_v3_server *vs;

    if (!c->route[0])
        return true;
    /* deleted, or deleted and made again for another user, while c waited: routed again */
    vs = om_v3_find_server((struct daemon *)d, c->route);
    return vs && vs->uid == c->route_uid && serves_user(d, vs, c->uid);
}

const struct om_v3_ns *om_v3_client_ns(const struct daemon *d, const struct server *s,
                                       const struct conn *c)
{
    const struct om_v3_server *vs =
        s->name[0] ? om_v3_find_server((struct daemon *)d, s->name) : NULL;
    char cgroup[4096];

    if (!vs)
        return NULL;
    const struct om_v3_ns *best = &vs->ns[0];
    size_t best_len = 0;
    /* Its socket names the namespace (a namespace deleted since: the default one). */
    if (c->v3_server[0] && !strcmp(c->v3_server, vs->name)) {
        for (unsigned i = 0; i < vs->nns; i++)
            if (!strcmp(vs->ns[i].name, c->v3_ns))
                best = &vs->ns[i];
        return best;
    }
    client_cgroup(c->pid, cgroup, sizeof(cgroup));
    /* The namespace with the longest matching cgroup: the most specific. */
    const struct om_v3_ns *by_cgroup = cgroup_ns(vs, cgroup, &best_len);
    return by_cgroup ? by_cgroup : best;
}

void om_v3_route_client(const struct server *s, const struct om_v3_ns *n, struct om_limits *want,
                        char *ns, size_t cap)
{
    snprintf(ns, cap, "%s", n ? n->name : "");
    if (n)
        *want = ns_want(n, s, want);
}

bool om_v3_part_user(const struct daemon *d, uint64_t serial, char *who, size_t cap)
{
    for (unsigned i = 0; d->v3 && i < d->v3->nservers; i++)
        for (unsigned j = 0; j < d->v3->servers[i].nns; j++)
            for (unsigned k = 0; k < d->v3->servers[i].ns[j].nparts; k++)
                if (d->v3->servers[i].ns[j].parts[k] == serial) {
                    snprintf(who, cap, "namespace %s of server %s", d->v3->servers[i].ns[j].name,
                             d->v3->servers[i].name);
                    return true;
                }
    return false;
}

/* The running clients of server vs in namespace `from` go to namespace `to` (the same one when its
 * limits changed): each one's own limits are merged again with to's, and those that changed are
 * sent to its server (SRV_CLIENT_LIMITS), which applies them as it applies set_*'s. Returns how
 * many clients were in `from`. */
unsigned om_v3_ns_move_clients(struct daemon *d, const struct om_v3_server *vs, const char *from,
                               const struct om_v3_ns *to)
{
    struct server *p = om_server_for(d, vs->uid, vs->name);
    unsigned n = 0;

    for (struct client_rec *r = p ? p->clients : NULL; r; r = r->next) {
        if (strcmp(r->ns, from) != 0)
            continue;
        struct om_limits want = ns_want(to, p, &r->asked);
        n++;
        snprintf(r->ns, sizeof(r->ns), "%s", to->name);
        if (!memcmp(&want, &r->want, sizeof(want)))
            continue;
        r->want = want;
        if (om_server_send_client_limits(p, r) < 0)
            om_warn("server %d: cannot send client %d its namespace's limits", (int)p->pid,
                    (int)r->pid);
    }
    return n;
}

/* How many running clients server vs has in namespace ns. */
unsigned om_v3_ns_clients(struct daemon *d, const struct om_v3_server *vs, const char *ns)
{
    struct server *p = om_server_for(d, vs->uid, vs->name);
    unsigned n = 0;

    for (struct client_rec *r = p ? p->clients : NULL; r; r = r->next)
        n += !strcmp(r->ns, ns);
    return n;
}

/* --- the sockets of named servers and namespaces --- */

/* <pipe>/<server>[/<ns>] into dir, its socket into sock. -ENAMETOOLONG when they do not fit. */
static int listener_paths(const struct daemon *d, const char *server, const char *ns, char *dir,
                          size_t dcap, char *sock, size_t scap)
{
    int n = ns[0] ? snprintf(dir, dcap, "%s/%s/%s", d->pipe_dir, server, ns)
                  : snprintf(dir, dcap, "%s/%s", d->pipe_dir, server);
    if (n < 0 || (size_t)n >= dcap || om_path_join(sock, scap, dir, OM_CONTROL_SOCKET) < 0)
        return -ENAMETOOLONG;
    return 0;
}

static bool listener_wanted(const struct daemon *d, const struct om_v3_listener *l)
{
    struct om_v3_server *s = om_v3_find_server((struct daemon *)d, l->server);
    return s && (!l->ns[0] || om_v3_find_ns(s, l->ns));
}

static void close_listener(const struct daemon *d, struct om_v3_listener *l)
{
    char dir[300], sock[320];

    close(l->fd);
    l->fd = -1;
    if (listener_paths(d, l->server, l->ns, dir, sizeof(dir), sock, sizeof(sock)) == 0) {
        unlink(sock);
        rmdir(dir); /* a server's own directory goes once its namespaces' have */
    }
}

static void open_listener(struct daemon *d, const char *server, const char *ns)
{
    struct om_v3 *v = d->v3;
    char dir[300], sock[320], err[256], top[300];
    mode_t mode = d->euid == 0 ? 0755 : 0700; /* as the pipe directory's */
    int fd;

    for (unsigned i = 0; i < v->nlisteners; i++)
        if (!strcmp(v->listeners[i].server, server) && !strcmp(v->listeners[i].ns, ns))
            return;
    if (v->nlisteners == OM_V3_MAX_LISTENERS)
        return;
    if (listener_paths(d, server, ns, dir, sizeof(dir), sock, sizeof(sock)) < 0) {
        om_err("server %s, namespace %s: the socket path is too long", server, ns);
        return;
    }
    if (snprintf(top, sizeof(top), "%s/%s", d->pipe_dir, server) >= (int)sizeof(top) ||
        om_make_private_dir(top, mode, err, sizeof(err)) < 0 ||
        om_make_private_dir(dir, mode, err, sizeof(err)) < 0) {
        om_err("server %s, namespace %s: no socket: %s", server, ns[0] ? ns : "default", err);
        return;
    }
    unlink(sock);
    fd = om_sock_listen(sock, d->euid == 0 ? 0666 : 0600);
    if (fd < 0) {
        om_err("cannot listen on %s: %s", sock, strerror(-fd));
        return;
    }
    struct om_v3_listener *l = &v->listeners[v->nlisteners++];
    l->fd = fd;
    snprintf(l->server, sizeof(l->server), "%s", server);
    snprintf(l->ns, sizeof(l->ns), "%s", ns);
    om_info("listening on %s for server %s, namespace %s", sock, server, ns[0] ? ns : "default");
}

void om_v3_sync_listeners(struct daemon *d)
{
    struct om_v3 *v = d->v3;

    if (!v || d->listen_fd < 0 || !d->pipe_dir)
        return; /* no daemon (the fuzz targets) */
    /* Namespaces' before their server's: a server's directory is removed once it is empty. */
    for (unsigned pass = 0; pass < 2; pass++)
        for (unsigned i = 0; i < v->nlisteners;) {
            struct om_v3_listener *l = &v->listeners[i];
            if ((pass == 0) != (l->ns[0] != '\0') || listener_wanted(d, l)) {
                i++;
                continue;
            }
            close_listener(d, l);
            memmove(l, l + 1, (v->nlisteners - i - 1) * sizeof(*l));
            v->nlisteners--;
        }
    for (unsigned i = 0; i < v->nservers; i++) {
        open_listener(d, v->servers[i].name, "");
        for (unsigned j = 0; j < v->servers[i].nns; j++)
            open_listener(d, v->servers[i].name, v->servers[i].ns[j].name);
    }
}

unsigned om_v3_nlisteners(const struct daemon *d)
{
    return d->v3 ? d->v3->nlisteners : 0;
}

int om_v3_listener_fd(const struct daemon *d, unsigned i)
{
    return d->v3 && i < d->v3->nlisteners ? d->v3->listeners[i].fd : -1;
}

bool om_v3_accepted(const struct daemon *d, unsigned i, uid_t uid, struct conn *c, char *why,
                    size_t cap)
{
    const struct om_v3_listener *l = &d->v3->listeners[i];
    const struct om_v3_server *s = om_v3_find_server((struct daemon *)d, l->server);

    if (!c) {
        /* A user's clients go to its own server: another's socket is refused, saying why
         * (root, whose front-ends may use any socket, is let in; with -m, the users listed
         * reach each other's: they share servers). */
        if (s && (uid == 0 || serves_user(d, s, uid)))
            return true;
        if (s)
            snprintf(why, cap,
                     "openmps-control: this socket is server %s's, which serves uid %u: connect "
                     "to your own user's server",
                     s->name, (unsigned)s->uid);
        else
            snprintf(why, cap, "openmps-control: server %s is gone", l->server);
        return false;
    }
    snprintf(c->v3_server, sizeof(c->v3_server), "%s", l->server);
    snprintf(c->v3_ns, sizeof(c->v3_ns), "%s", l->ns[0] ? l->ns : "default");
    return true;
}

void om_v3_cleanup(struct daemon *d)
{
    if (!d->v3)
        return;
    for (unsigned pass = 0; pass < 2; pass++)
        for (unsigned i = 0; i < d->v3->nlisteners; i++)
            if ((pass == 0) == (d->v3->listeners[i].ns[0] != '\0') && d->v3->listeners[i].fd >= 0)
                close_listener(d, &d->v3->listeners[i]);
    free(d->v3);
    d->v3 = NULL;
}
