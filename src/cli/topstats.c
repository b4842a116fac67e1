/* SPDX-License-Identifier: MIT */
/* openmps top's figures (topstats.h): the stats --json document, read strictly through the JSON
 * reader (json.c) into bounded records; every field top shows must be there with its type. */
#include "topstats.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "json.h"

struct reader {
    const struct om_json *j;
    char *err;
    size_t errcap;
    int failed;
};

static void bad(struct reader *r, const char *fmt, ...)
{
    va_list ap;

    if (r->failed++)
        return; /* the first problem is the one said */
    va_start(ap, fmt);
    vsnprintf(r->err, r->errcap, fmt, ap);
    va_end(ap);
}

static const struct om_json_value *member(struct reader *r, const struct om_json_value *o,
                                          const char *key, uint8_t type, const char *where)
{
    const struct om_json_value *v = om_json_get(r->j, o, key);

    if (!v || v->type != type) {
        bad(r, "%s: \"%s\" %s", where, key, v ? "has the wrong type" : "is missing");
        return NULL;
    }
    return v;
}

static uint64_t u64(struct reader *r, const struct om_json_value *o, const char *key,
                    const char *where)
{
    const struct om_json_value *v = member(r, o, key, OM_JSON_NUMBER, where);

    if (v && !v->is_uint) {
        bad(r, "%s: \"%s\" is not a non-negative integer", where, key);
        return 0;
    }
    return v ? v->u : 0;
}

static unsigned u32(struct reader *r, const struct om_json_value *o, const char *key,
                    const char *where)
{
    uint64_t x = u64(r, o, key, where);

    if (x > UINT32_MAX) {
        bad(r, "%s: \"%s\" is out of range", where, key);
        return 0;
    }
    return (unsigned)x;
}

static int pid_of(struct reader *r, const struct om_json_value *o, const char *key,
                  const char *where)
{
    unsigned x = u32(r, o, key, where);

    if (x > 0x7fffffff) {
        bad(r, "%s: \"%s\" is out of range", where, key);
        return 0;
    }
    return (int)x;
}

static double num(struct reader *r, const struct om_json_value *o, const char *key,
                  const char *where)
{
    const struct om_json_value *v = member(r, o, key, OM_JSON_NUMBER, where);

    if (v && !(v->num >= 0 && v->num < 1e18)) {
        bad(r, "%s: \"%s\" is out of range", where, key);
        return 0;
    }
    return v ? v->num : 0;
}

/* A string member copied into buf (cut to its size: these are shown, never parsed again). */
static void text(struct reader *r, const struct om_json_value *o, const char *key, char *buf,
                 size_t cap, bool optional, const char *where)
{
    const struct om_json_value *v = om_json_get(r->j, o, key);

    buf[0] = '\0';
    if (!v && optional)
        return;
    if (!(v = member(r, o, key, OM_JSON_STRING, where)))
        return;
    snprintf(buf, cap, "%s", om_json_str(r->j, v));
}

static void usage(struct reader *r, const struct om_json_value *o, struct om_top_usage *u,
                  const char *where)
{
    u->kernels = u64(r, o, "kernels", where);
    u->graphs = u64(r, o, "graphs", where);
    u->gpu_ns = u64(r, o, "gpu_time_ns", where);
    u->htod = u64(r, o, "htod_bytes", where);
    u->dtoh = u64(r, o, "dtoh_bytes", where);
    u->dtod = u64(r, o, "dtod_bytes", where);
    u->mem = u64(r, o, "device_memory_bytes", where);
}

static const struct om_json_value *list(struct reader *r, const struct om_json_value *root,
                                        const char *key)
{
    return member(r, root, key, OM_JSON_ARRAY, "the document");
}

/* Element n of a list of `what`s: true where there is room for it (at most max) and it is an
 * object. */
static bool element(struct reader *r, const struct om_json_value *o, unsigned n, unsigned max,
                    const char *what)
{
    if (n == max)
        bad(r, "more than %u %ss", max, what);
    else if (o->type != OM_JSON_OBJECT)
        bad(r, "%s %u is not an object", what, n);
    return !r->failed;
}

static void one_server(struct reader *r, struct om_top_server *sv, const struct om_json_value *o,
                       unsigned n)
{
    char where[48];

    snprintf(where, sizeof(where), "server %u", n);
    memset(sv, 0, sizeof(*sv));
    sv->pid = pid_of(r, o, "pid", where);
    sv->uid = u32(r, o, "uid", where);
    text(r, o, "status", sv->status, sizeof(sv->status), false, where);
    const struct om_json_value *a = om_json_get(r->j, o, "answered");
    if (!a || (a->type != OM_JSON_TRUE && a->type != OM_JSON_FALSE))
        bad(r, "%s: \"answered\" is not true or false", where);
    sv->answered = a && a->type == OM_JSON_TRUE;
    text(r, o, "error", sv->error, sizeof(sv->error), true, where);
}

static void one_device(struct reader *r, struct om_top_device *d, const struct om_json_value *o,
                       unsigned n)
{
    char where[48];

    snprintf(where, sizeof(where), "device %u", n);
    memset(d, 0, sizeof(*d));
    d->server_pid = pid_of(r, o, "server_pid", where);
    d->ordinal = u32(r, o, "ordinal", where);
    d->clients = u32(r, o, "clients", where);
    text(r, o, "uuid", d->uuid, sizeof(d->uuid), false, where);
    text(r, o, "name", d->name, sizeof(d->name), false, where);
    text(r, o, "pci_bus_id", d->pci, sizeof(d->pci), false, where);
    usage(r, o, &d->u, where);
}

static void one_client(struct reader *r, struct om_top_snapshot *s, const struct om_json_value *o)
{
    struct om_top_client *c = &s->clients[s->nclients];
    char where[48];

    snprintf(where, sizeof(where), "client %u", s->nclients);
    memset(c, 0, sizeof(*c));
    c->pid = pid_of(r, o, "pid", where);
    c->id = u32(r, o, "client_id", where);
    c->server_pid = pid_of(r, o, "server_pid", where);
    c->uid = u32(r, o, "uid", where);
    text(r, o, "command", c->command, sizeof(c->command), false, where);
    text(r, o, "cgroup", c->cgroup, sizeof(c->cgroup), false, where);
    text(r, o, "state", c->state, sizeof(c->state), false, where);
    c->share = num(r, o, "active_thread_percentage", where);
    c->priority = u32(r, o, "priority", where);
    c->calls = u64(r, o, "calls", where);
    c->calls_per_s = num(r, o, "calls_per_s", where);
    c->kernels_per_s = num(r, o, "kernels_per_s", where);
    c->serve_ns = u64(r, o, "serve_time_ns", where);
    c->wait_ns = u64(r, o, "gpu_wait_time_ns", where);
    c->connected_ns = u64(r, o, "connected_ns", where);
    c->pinned = u64(r, o, "pinned_memory_bytes", where);
    usage(r, o, &c->u, where);
    c->dev_first = s->ncdev;
    const struct om_json_value *devs = member(r, o, "devices", OM_JSON_ARRAY, where);
    for (const struct om_json_value *d = om_json_first(r->j, devs); d && !r->failed;
         d = om_json_next(r->j, d)) {
        if (s->ncdev == OM_TOP_MAX_CLIENT_DEVICES || d->type != OM_JSON_OBJECT) {
            bad(r,
                d->type != OM_JSON_OBJECT ? "%s: a device is not an object"
                                          : "%s: more than %u devices of clients in all",
                where, OM_TOP_MAX_CLIENT_DEVICES);
            return;
        }
        struct om_top_cdev *cd = &s->cdev[s->ncdev++];
        cd->ordinal = u32(r, d, "ordinal", where);
        usage(r, d, &cd->u, where);
        c->ndev++;
    }
    s->nclients++;
}

int om_top_read(struct om_top_snapshot *s, const char *text_in, size_t len, char *err,
                size_t errcap)
{
    struct om_json j;
    struct reader r = {.j = &j, .err = err, .errcap = errcap};
    char jerr[160];

    s->nservers = s->ndevices = s->nclients = s->ncdev = 0;
    if (om_json_parse(&j, text_in, len, jerr, sizeof(jerr)) < 0) {
        snprintf(err, errcap, "the daemon's stats are not JSON: %s", jerr);
        return -1;
    }
    const struct om_json_value *root = om_json_root(&j);
    if (!root || root->type != OM_JSON_OBJECT) {
        bad(&r, "the document is not an object");
        goto out;
    }
    if (u64(&r, root, "version", "the document") != 1 && !r.failed)
        bad(&r, "the document's version is not 1 (this openmps top reads version 1)");
    s->time = num(&r, root, "time", "the document");
    const struct om_json_value *servers = list(&r, root, "servers"),
                               *devices = list(&r, root, "devices"),
                               *clients = list(&r, root, "clients");
    for (const struct om_json_value *o = om_json_first(&j, servers); o && !r.failed;
         o = om_json_next(&j, o))
        if (element(&r, o, s->nservers, OM_TOP_MAX_SERVERS, "server")) {
            one_server(&r, &s->servers[s->nservers], o, s->nservers);
            s->nservers++;
        }
    for (const struct om_json_value *o = om_json_first(&j, devices); o && !r.failed;
         o = om_json_next(&j, o))
        if (element(&r, o, s->ndevices, OM_TOP_MAX_DEVICES, "device")) {
            one_device(&r, &s->devices[s->ndevices], o, s->ndevices);
            s->ndevices++;
        }
    for (const struct om_json_value *o = om_json_first(&j, clients); o && !r.failed;
         o = om_json_next(&j, o))
        if (element(&r, o, s->nclients, OM_TOP_MAX_CLIENTS, "client"))
            one_client(&r, s, o);
out:
    om_json_free(&j);
    if (r.failed)
        s->nservers = s->ndevices = s->nclients = s->ncdev = 0;
    return r.failed ? -1 : 0;
}

static const struct om_top_client *find(const struct om_top_snapshot *s,
                                        const struct om_top_client *c)
{
    for (unsigned i = 0; s && i < s->nclients; i++)
        if (s->clients[i].pid == c->pid && s->clients[i].id == c->id &&
            s->clients[i].server_pid == c->server_pid)
            return &s->clients[i];
    return NULL;
}

/* The GPU time of client record p on `ordinal` (0 where it has none). */
static uint64_t dev_gpu(const struct om_top_snapshot *s, const struct om_top_client *p,
                        unsigned ordinal)
{
    for (unsigned i = 0; i < p->ndev; i++)
        if (s->cdev[p->dev_first + i].ordinal == ordinal)
            return s->cdev[p->dev_first + i].u.gpu_ns;
    return 0;
}

void om_top_rates(struct om_top_snapshot *cur, const struct om_top_snapshot *prev, double seconds)
{
    for (unsigned d = 0; d < cur->ndevices; d++)
        cur->devices[d].gpu_pct = 0;
    for (unsigned i = 0; i < cur->nclients; i++) {
        struct om_top_client *c = &cur->clients[i];
        const struct om_top_client *p = find(prev, c);
        double span = p && seconds > 0 ? seconds : c->connected_ns / 1e9;
        c->gpu_pct = 0;
        for (unsigned k = 0; k < c->ndev; k++) {
            const struct om_top_cdev *cd = &cur->cdev[c->dev_first + k];
            uint64_t was = p ? dev_gpu(prev, p, cd->ordinal) : 0;
            double pct =
                span > 0 && cd->u.gpu_ns >= was ? (cd->u.gpu_ns - was) / 1e9 / span * 100 : 0;
            c->gpu_pct += pct;
            for (unsigned d = 0; d < cur->ndevices; d++)
                if (cur->devices[d].server_pid == c->server_pid &&
                    cur->devices[d].ordinal == cd->ordinal)
                    cur->devices[d].gpu_pct += pct;
        }
    }
}
