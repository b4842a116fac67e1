/* SPDX-License-Identifier: MIT */
/*
 * Static SM partitions (-S/--static-partitioning, issue #26): the daemon's table of partitions,
 * the commands that make, remove and list them (sm_partition add|rm, lspart, in NVIDIA's syntax
 * and answer formats: docs/driver-facts.md "Static SM partitions"; protocol 3's partition module
 * and a namespace's partitions, v3.c, call the om_parts_* functions below), and a client's
 * partition at its hand-off to its server: the one its CUDA_MPS_SM_PARTITION names, else its
 * namespace's (protocol 3: as if it had named it; naming another is refused).
 *
 * A device's SMs are cut into chunks of the size its SM resource allows (om_device_info's
 * chunk_sms: 8 SMs on Hopper); the SMs after the last whole chunk are the remainder, which one
 * partition may take with it (the configuration file's include_remainder). A partition is a set
 * of chunks of one device, disjoint from every other partition's; the server makes one green
 * context of its chunks (share.c) and every client naming it runs its kernels there. The table
 * lives in the daemon as long as it runs (lost on quit, as set_default_* settings are); which
 * client uses which partition is its client record's `part` (a serial, never reused).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../common/driver.h"
#include "internal.h"

#define PARTS_MAX 64u /* partitions in all: the budget of what an operator can make */
#define ID_LEN 12     /* hex digits of a partition ID */

struct part {
    uint64_t serial;
    char id[ID_LEN + 1];
    char name[64];   /* the configuration file's, "" for one made by sm_partition add */
    char server[64]; /* the named server it was made for (protocol 3), "" for any */
    uint8_t uuid[16];
    uint64_t mask[2]; /* its chunks */
    uint32_t chunks;
    bool remainder;
};

struct om_parts {
    struct part v[PARTS_MAX];
    unsigned n;
    uint64_t next_serial;
    bool open; /* made by protocol 3's sm-partition create, not by -S or the file: a client that
                * names no partition, of a namespace with none, runs on the whole device */
};

int om_parts_enable(struct daemon *d)
{
    if (!d->parts && !(d->parts = calloc(1, sizeof(*d->parts))))
        return -ENOMEM;
    return 0;
}

int om_parts_enable_open(struct daemon *d)
{
    if (d->parts)
        return 0;
    if (om_parts_enable(d) < 0)
        return -ENOMEM;
    d->parts->open = true;
    return 0;
}

void om_parts_free(struct daemon *d)
{
    free(d->parts);
    d->parts = NULL;
}

/* A device's geometry: its chunks (at most OM_PART_MAX_CHUNKS) and the SMs left after them. */
static uint32_t nchunks(const struct om_device_info *dev)
{
    uint32_t n = dev->chunk_sms ? dev->sm_count / dev->chunk_sms : 0;

    if (dev->chunks && dev->chunks < n) /* what a split really gives (om_driver_devices) */
        n = dev->chunks;
    return n > OM_PART_MAX_CHUNKS ? OM_PART_MAX_CHUNKS : n;
}

static uint32_t remainder_sms(const struct om_device_info *dev)
{
    return dev->sm_count - nchunks(dev) * dev->chunk_sms;
}

#define NOT_ENABLED                                                                                \
    "Static SM partitioning is not enabled: start the daemon with -S (--static-partitioning)"

static bool enabled(const struct daemon *d, char *err, size_t errlen)
{
    if (!d->parts)
        snprintf(err, errlen, "%s", NOT_ENABLED);
    return d->parts != NULL;
}

static bool bit(const uint64_t m[2], uint32_t i)
{
    return (m[i / 64] >> (i % 64)) & 1u;
}

/* The ID a partition is known by: 12 hex digits, distinct for every serial (an odd multiplier
 * is a bijection modulo 2^48), opaque as NVIDIA's are. */
static void make_id(uint64_t serial, char *id)
{
    snprintf(id, ID_LEN + 1, "%012" PRIx64,
             (uint64_t)((serial * 0x9E3779B97F4Bull) & 0xFFFFFFFFFFFFull));
}

/* The daemon's device a UUID text names: the whole UUID or a prefix of it that names one device
 * ("GPU-74d43ed3", as lspart shows them), any case. NULL with err set otherwise. */
static const struct om_device_info *device_named(struct daemon *d, const char *text, char *err,
                                                 size_t errlen)
{
    const struct om_device_info *devs, *found = NULL;
    int n = om_daemon_probed_devices(d, &devs);
    size_t len = strlen(text);

    if (n < 0) {
        snprintf(err, errlen, "Cannot list the devices: %s", d->probe_err);
        return NULL;
    }
    if (len < 5 || strncasecmp(text, "GPU-", 4) != 0) {
        snprintf(err, errlen, "\"%.64s\" is not a device UUID (GPU-..., as device_query shows)",
                 text);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        char u[64];
        om_format_uuid(devs[i].uuid, u, sizeof(u));
        if (len <= strlen(u) && !strncasecmp(u, text, len)) {
            if (found) {
                snprintf(err, errlen, "\"%.64s\" names more than one device: give more of the UUID",
                         text);
                return NULL;
            }
            found = &devs[i];
        }
    }
    if (!found)
        snprintf(err, errlen, "No device has the UUID %.64s (device_query lists them)", text);
    return found;
}

/* The chunks the partitions of a device hold, and whether one holds its remainder. */
static void used(const struct om_parts *p, const uint8_t uuid[16], uint64_t m[2], bool *rest)
{
    m[0] = m[1] = 0;
    *rest = false;
    for (unsigned i = 0; i < p->n; i++)
        if (!memcmp(p->v[i].uuid, uuid, 16)) {
            m[0] |= p->v[i].mask[0];
            m[1] |= p->v[i].mask[1];
            *rest |= p->v[i].remainder;
        }
}

static unsigned clients_of(const struct daemon *d, uint64_t serial)
{
    unsigned n = 0;

    for (const struct server *s = d->servers; s; s = s->next)
        for (const struct client_rec *r = s->clients; r; r = r->next)
            n += r->part == serial;
    return n;
}

static bool names(const struct part *x, const char *text)
{
    return !strcmp(x->id, text) || (x->name[0] && !strcmp(x->name, text));
}

/* The partition a text names on dev (NULL: any device): its ID, or its name. A name is unique
 * per device and server (NVIDIA's partitions are a server's): where partitions of several
 * servers share it, server's own is taken (server NULL, or none of its: the first). */
static struct part *find(struct om_parts *p, const uint8_t *uuid, const char *text,
                         const char *server)
{
    struct part *first = NULL;

    for (unsigned i = 0; i < p->n; i++) {
        struct part *x = &p->v[i];
        if ((uuid && memcmp(x->uuid, uuid, 16) != 0) || !names(x, text))
            continue;
        if (!server || !strcmp(x->server, server))
            return x;
        if (!first)
            first = x;
    }
    return first;
}

/* Makes a partition of `chunks` free chunks of dev (0: all that are free), the lowest first.
 * Returns it, or NULL with err set. */
static struct part *add(struct daemon *d, const struct om_device_info *dev, uint32_t chunks,
                        bool remainder, const char *server, const char *name, char *err,
                        size_t errlen)
{
    struct om_parts *p = d->parts;
    uint32_t total = nchunks(dev), nfree = 0;
    uint64_t taken[2];
    bool rest_taken;
    struct part *x;

    if (!dev->chunk_sms || !total) {
        snprintf(err, errlen,
                 "Device %u has no SM resource to partition (its driver has no green contexts)",
                 (unsigned)dev->ordinal);
        return NULL;
    }
    used(p, dev->uuid, taken, &rest_taken);
    for (uint32_t i = 0; i < total; i++)
        nfree += !bit(taken, i);
    if (!chunks)
        chunks = nfree;
    if (chunks == 0 || chunks > nfree || (remainder && (rest_taken || !remainder_sms(dev)))) {
        /* NVIDIA's answer for a partition the device cannot give (docs/driver-facts.md) */
        snprintf(err, errlen,
                 "Failed to fulfill the requested SM partition of %u chunks, error "
                 "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION (%u of %u chunks of %u SMs free%s)",
                 (unsigned)chunks, (unsigned)nfree, (unsigned)total, (unsigned)dev->chunk_sms,
                 remainder ? (rest_taken ? "; the remainder is taken" : "; no remainder") : "");
        return NULL;
    }
    if (p->n == PARTS_MAX) {
        snprintf(err, errlen, "Too many SM partitions (at most %u): remove one first", PARTS_MAX);
        return NULL;
    }
    struct part *same = name && name[0] ? find(p, dev->uuid, name, server) : NULL;
    if (same && !strcmp(same->server, server)) {
        snprintf(err, errlen, "Device %u has an SM partition %s%s%s already",
                 (unsigned)dev->ordinal, name, server[0] ? " of server " : "", server);
        return NULL;
    }
    x = &p->v[p->n];
    memset(x, 0, sizeof(*x));
    x->serial = ++p->next_serial;
    make_id(x->serial, x->id);
    snprintf(x->name, sizeof(x->name), "%s", name ? name : "");
    snprintf(x->server, sizeof(x->server), "%s", server);
    memcpy(x->uuid, dev->uuid, 16);
    x->chunks = chunks;
    x->remainder = remainder;
    for (uint32_t i = 0, got = 0; i < total && got < chunks; i++)
        if (!bit(taken, i)) {
            x->mask[i / 64] |= 1ull << (i % 64);
            got++;
        }
    p->n++;
    return x;
}

static uint32_t sms_of(const struct part *x, const struct om_device_info *dev)
{
    return x->chunks * dev->chunk_sms + (x->remainder ? remainder_sms(dev) : 0);
}

int om_parts_device_known(struct daemon *d, const char *uuid, char *err, size_t errlen)
{
    return device_named(d, uuid, err, errlen) ? 0 : -1;
}

uint64_t om_parts_create(struct daemon *d, const char *uuid, const char *server, const char *name,
                         uint32_t chunks, bool remainder, char *err, size_t errlen)
{
    const struct om_device_info *dev;
    struct part *x;
    char u[64];

    if (!enabled(d, err, errlen))
        return 0;
    if (!(dev = device_named(d, uuid, err, errlen)) ||
        !(x = add(d, dev, chunks, remainder, server, name, err, errlen)))
        return 0;
    om_format_uuid(dev->uuid, u, sizeof(u));
    om_info("SM partition %s%s%s%s created on %s: %u chunk(s), %u SMs", x->id, name[0] ? " (" : "",
            name, name[0] ? ")" : "", u, (unsigned)x->chunks, (unsigned)sms_of(x, dev));
    return x->serial;
}

int om_parts_add_named(struct daemon *d, const char *uuid, const char *server, const char *name,
                       uint32_t chunks, bool remainder, char *err, size_t errlen)
{
    if (om_parts_enable(d) < 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return om_parts_create(d, uuid, server, name, chunks, remainder, err, errlen) ? 0 : -1;
}

static struct part *by_serial(const struct om_parts *p, uint64_t serial)
{
    for (unsigned i = 0; p && i < p->n; i++)
        if (p->v[i].serial == serial)
            return (struct part *)&p->v[i];
    return NULL;
}

/* Whether partition x may go: no client runs in it, no namespace routes its clients there. */
static bool removable(struct daemon *d, const struct part *x, char *err, size_t errlen)
{
    char u[64], who[160];
    unsigned n;

    om_format_uuid(x->uuid, u, sizeof(u));
    if ((n = clients_of(d, x->serial))) {
        snprintf(err, errlen,
                 "Partition %s/%s is in use by %u client(s): it can be removed once they exit", u,
                 x->id, n);
        return false;
    }
    if (om_v3_part_user(d, x->serial, who, sizeof(who))) {
        snprintf(err, errlen,
                 "Partition %s/%s is the SM partition of %s: change the namespace first "
                 "(namespace set ... --sm-partition=none)",
                 u, x->id, who);
        return false;
    }
    return true;
}

static void drop(struct daemon *d, struct part *x)
{
    char u[64];

    om_format_uuid(x->uuid, u, sizeof(u));
    om_info("SM partition %s removed from %s", x->id, u);
    *x = d->parts->v[--d->parts->n];
}

int om_parts_delete(struct daemon *d, uint64_t serial, char *err, size_t errlen)
{
    struct part *x = d->parts ? by_serial(d->parts, serial) : NULL;

    if (!x) {
        snprintf(err, errlen, "No such SM partition");
        return -1;
    }
    if (!removable(d, x, err, errlen))
        return -1;
    drop(d, x);
    return 0;
}

uint64_t om_parts_resolve(struct daemon *d, const char *text, const char *server, char *err,
                          size_t errlen)
{
    const char *slash = strchr(text, '/');
    const struct om_device_info *dev = NULL;
    struct part *x = NULL;
    char uuid[80];

    if (!enabled(d, err, errlen))
        return 0;
    if (slash) { /* its device first, by its UUID or a prefix of it */
        size_t k = (size_t)(slash - text);
        snprintf(uuid, sizeof(uuid), "%.*s", (int)(k < sizeof(uuid) ? k : sizeof(uuid) - 1), text);
        if (!(dev = device_named(d, uuid, err, errlen)))
            return 0;
        x = find(d->parts, dev->uuid, slash + 1, server);
    } else {
        /* server's own first: the others only where it has none of that name */
        bool own = false;
        for (unsigned i = 0; server && i < d->parts->n && !own; i++)
            own = names(&d->parts->v[i], text) && !strcmp(d->parts->v[i].server, server);
        for (unsigned i = 0; i < d->parts->n; i++) {
            struct part *y = &d->parts->v[i];
            if (!names(y, text) || (own && strcmp(y->server, server) != 0))
                continue;
            if (x) {
                snprintf(err, errlen,
                         "\"%.64s\" names several SM partitions (of several devices or "
                         "servers): give <device UUID>/<ID>",
                         text);
                return 0;
            }
            x = y;
        }
    }
    if (!x) {
        snprintf(err, errlen, "No SM partition %.64s (partition list shows them)", text);
        return 0;
    }
    return x->serial;
}

void om_parts_name(const struct daemon *d, uint64_t serial, char *buf, size_t cap)
{
    const struct part *x = by_serial(d->parts, serial);
    char u[64];

    if (!x) {
        snprintf(buf, cap, "-");
        return;
    }
    om_format_uuid(x->uuid, u, sizeof(u));
    snprintf(buf, cap, "%s/%s", u, x->id);
}

int om_parts_ns_add(struct daemon *d, const char *server, uint64_t *list, unsigned *n, unsigned cap,
                    const char *text, char *err, size_t errlen)
{
    uint64_t serial = om_parts_resolve(d, text, server, err, errlen);
    const struct part *x = serial ? by_serial(d->parts, serial) : NULL;

    if (!x)
        return -1;
    if (x->server[0] && strcmp(x->server, server) != 0) {
        snprintf(err, errlen, "%.64s is an SM partition of server %s, not of server %s", text,
                 x->server, server);
        return -1;
    }
    for (unsigned i = 0; i < *n; i++) {
        const struct part *y = by_serial(d->parts, list[i]);
        if (y && !memcmp(y->uuid, x->uuid, sizeof(x->uuid))) {
            char u[64];
            om_format_uuid(x->uuid, u, sizeof(u));
            snprintf(err, errlen,
                     "%.64s and partition %s are both on device %s: a namespace has one SM "
                     "partition per device",
                     text, y->id, u);
            return -1;
        }
    }
    if (*n >= cap) {
        snprintf(err, errlen, "At most %u SM partitions per namespace", cap);
        return -1;
    }
    list[(*n)++] = serial;
    return 0;
}

bool om_parts_row(struct daemon *d, unsigned i, struct om_part_row *row)
{
    const struct om_device_info *devs, *dev = NULL;
    const struct part *x;
    int n;

    if (!d->parts || i >= d->parts->n)
        return false;
    x = &d->parts->v[i];
    n = om_daemon_probed_devices(d, &devs);
    for (int k = 0; k < n && !dev; k++)
        if (!memcmp(devs[k].uuid, x->uuid, sizeof(x->uuid)))
            dev = &devs[k];
    memset(row, 0, sizeof(*row));
    row->serial = x->serial;
    snprintf(row->id, sizeof(row->id), "%s", x->id);
    snprintf(row->name, sizeof(row->name), "%s", x->name[0] ? x->name : "-");
    om_format_uuid(x->uuid, row->device, sizeof(row->device));
    row->chunks = x->chunks;
    row->sms = dev ? sms_of(x, dev) : 0;
    row->clients = clients_of(d, x->serial);
    row->remainder = x->remainder;
    snprintf(row->server, sizeof(row->server), "%s", x->server);
    return true;
}

/* The device text names: its ordinal ("0"), its UUID or a prefix of it (device_named). */
const struct om_device_info *om_parts_device(struct daemon *d, const char *text, char *err,
                                             size_t errlen)
{
    const struct om_device_info *devs;
    char *end;
    unsigned long ord;
    int n;

    if (!text[0] || text[strspn(text, "0123456789")] != '\0')
        return device_named(d, text, err, errlen);
    if ((n = om_daemon_probed_devices(d, &devs)) < 0) {
        snprintf(err, errlen, "Cannot list the devices: %s", d->probe_err);
        return NULL;
    }
    ord = strtoul(text, &end, 10);
    for (int i = 0; i < n; i++)
        if (devs[i].ordinal == ord)
            return &devs[i];
    snprintf(err, errlen, "No device %.16s (device_query lists them)", text);
    return NULL;
}

/* What the partitions leave of a device: its chunks in all, the free ones, the SMs of those
 * (and of its remainder while no partition holds it). */
void om_parts_device_room(const struct daemon *d, const struct om_device_info *dev,
                          struct om_part_room *room)
{
    uint64_t taken[2] = {0, 0};
    bool rest_taken = false;

    if (d->parts)
        used(d->parts, dev->uuid, taken, &rest_taken);
    room->total_chunks = nchunks(dev);
    room->free_chunks = 0;
    for (uint32_t i = 0; i < room->total_chunks; i++)
        room->free_chunks += !bit(taken, i);
    room->free_sms = room->free_chunks * dev->chunk_sms + (rest_taken ? 0 : remainder_sms(dev));
}

static void sm_add(struct daemon *d, int argc, char **argv, struct strbuf *out, bool *ret_error)
{
    const struct om_device_info *dev;
    char err[512], u[64], *end;
    unsigned long chunks;
    struct part *x;

    if (argc != 4) {
        sb_printf(out, "Usage: sm_partition add <device UUID> <number of chunks>");
        *ret_error = true;
        return;
    }
    chunks = strtoul(argv[3], &end, 10);
    if (!isdigit((unsigned char)argv[3][0]) || *end || chunks == 0 || chunks > OM_PART_MAX_CHUNKS) {
        sb_printf(out, "\"%.32s\" is not a number of chunks (1 to %u)", argv[3],
                  OM_PART_MAX_CHUNKS);
        *ret_error = true;
        return;
    }
    if (!(dev = device_named(d, argv[2], err, sizeof(err))) ||
        !(x = add(d, dev, (uint32_t)chunks, false, "", NULL, err, sizeof(err)))) {
        sb_printf(out, "%s", err);
        *ret_error = true;
        return;
    }
    om_format_uuid(dev->uuid, u, sizeof(u));
    om_info("SM partition %s created on %s: %u chunk(s) of %u SMs", x->id, u, (unsigned)x->chunks,
            (unsigned)dev->chunk_sms);
    sb_printf(out, "Partition %s/%s created", u, x->id);
}

static void sm_rm(struct daemon *d, int argc, char **argv, struct strbuf *out, bool *ret_error)
{
    const struct om_device_info *dev;
    char err[512], u[64], uuid[80];
    const char *id;
    struct part *x;

    /* "rm <UUID> <ID>", or "rm <UUID>/<ID>" as CUDA_MPS_SM_PARTITION names it */
    if (argc == 3 && strchr(argv[2], '/')) {
        size_t k = (size_t)(strchr(argv[2], '/') - argv[2]);
        snprintf(uuid, sizeof(uuid), "%.*s", (int)(k < sizeof(uuid) ? k : sizeof(uuid) - 1),
                 argv[2]);
        id = argv[2] + k + 1;
    } else if (argc == 4) {
        snprintf(uuid, sizeof(uuid), "%s", argv[2]);
        id = argv[3];
    } else {
        sb_printf(out, "Usage: sm_partition rm <device UUID> <partition ID>");
        *ret_error = true;
        return;
    }
    if (!(dev = device_named(d, uuid, err, sizeof(err)))) {
        sb_printf(out, "%s", err);
        *ret_error = true;
        return;
    }
    om_format_uuid(dev->uuid, u, sizeof(u));
    if (!(x = find(d->parts, dev->uuid, id, NULL))) {
        sb_printf(out, "No SM partition %.64s on %s (lspart lists them)", id, u);
        *ret_error = true;
        return;
    }
    if (!removable(d, x, err, sizeof(err))) {
        sb_printf(out, "%s", err);
        *ret_error = true;
        return;
    }
    sb_printf(out, "Partition %s/%s removed", u, x->id);
    drop(d, x);
}

void om_parts_sm_partition(struct daemon *d, int argc, char **argv, struct strbuf *out,
                           bool *ret_error)
{
    if (!d->parts) {
        sb_printf(out, "%s", NOT_ENABLED);
        *ret_error = true;
    } else if (argc >= 2 && !strcmp(argv[1], "add")) {
        sm_add(d, argc, argv, out, ret_error);
    } else if (argc >= 2 && !strcmp(argv[1], "rm")) {
        sm_rm(d, argc, argv, out, ret_error);
    } else {
        sb_printf(out, "Usage: sm_partition add <device UUID> <number of chunks> | "
                       "sm_partition rm <device UUID> <partition ID>");
        *ret_error = true;
    }
}

/* NVIDIA's table (docs/driver-facts.md): two header lines; per device a row of its free and used
 * chunks and SMs, then a row per partition: ID, chunks, SMs, whether a client uses it. */
void om_parts_lspart(struct daemon *d, struct strbuf *out)
{
    const struct om_device_info *devs;
    int n = d->parts ? om_daemon_probed_devices(d, &devs) : 0;

    if (!d->parts) {
        sb_printf(out, "%s", NOT_ENABLED);
        return;
    }
    sb_printf(out, "%-14s%-16s%-8s%-8s%-7s%-7s%s\n", "GPU", "Partition", "free", "used", "free",
              "used", "clients");
    sb_printf(out, "%-30s%-8s%-8s%-7s%s", "", "chunks", "chunks", "SM", "SM");
    for (int i = 0; i < n; i++) {
        const struct om_device_info *dev = &devs[i];
        uint32_t total = nchunks(dev), used_chunks = 0, used_sms = 0;
        char u[64], shortu[13];
        uint64_t taken[2];
        bool rest;

        if (!total)
            continue; /* nothing to partition there */
        used(d->parts, dev->uuid, taken, &rest);
        for (uint32_t k = 0; k < total; k++)
            used_chunks += bit(taken, k);
        used_sms = used_chunks * dev->chunk_sms + (rest ? remainder_sms(dev) : 0);
        om_format_uuid(dev->uuid, u, sizeof(u));
        memcpy(shortu, u, sizeof(shortu) - 1); /* "GPU-" and 8 digits, as NVIDIA shows it */
        shortu[sizeof(shortu) - 1] = '\0';
        sb_printf(out, "\n%-14s%-16s%-8u%-8u%-7u%u", shortu, "", (unsigned)(total - used_chunks),
                  (unsigned)used_chunks, (unsigned)(dev->sm_count - used_sms), (unsigned)used_sms);
        for (unsigned k = 0; k < d->parts->n; k++) {
            const struct part *x = &d->parts->v[k];
            if (memcmp(x->uuid, dev->uuid, 16))
                continue;
            sb_printf(out, "\n%-14s%-16s%-8s%-8u%-7s%-7u%s", shortu, x->id, "", (unsigned)x->chunks,
                      "", (unsigned)sms_of(x, dev), clients_of(d, x->serial) ? "Yes" : "No");
        }
    }
}

/* The partition of server s a client's CUDA_MPS_SM_PARTITION names ("UUID/ID": that device's),
 * and that device of the server's (*ret_dev); NULL when none. */
static struct part *named_by_client(struct daemon *d, const struct server *s, const char *v,
                                    const struct om_device_info **ret_dev)
{
    const char *slash = strchr(v, '/'), *id = slash ? slash + 1 : v;
    struct part *x = NULL;

    for (uint32_t i = 0; i < s->ndevs && !x; i++) {
        char u[64];
        om_format_uuid(s->devs[i].uuid, u, sizeof(u));
        if (slash && ((size_t)(slash - v) > strlen(u) || strncasecmp(u, v, (size_t)(slash - v)) ||
                      slash - v < 5))
            continue; /* "UUID/ID": its device first */
        if ((x = find(d->parts, s->devs[i].uuid, id, s->name)))
            *ret_dev = &s->devs[i];
    }
    return x;
}

/* Where in the client's devices (a->devmap) server device `ordinal` is, -1 when it does not see
 * it. */
static int seen_at(const struct om_srv_adopt *a, uint32_t ordinal)
{
    for (uint32_t i = 0; i < a->devmap.count; i++)
        if (a->devmap.server[i] == ordinal)
            return (int)i;
    return -1;
}

/* The partitions of a namespace, "UUID/ID,..." for a message. */
static void ns_parts_text(const struct daemon *d, const struct om_v3_ns *ns, char *buf, size_t cap)
{
    size_t len = 0;

    buf[0] = '\0';
    for (unsigned i = 0; i < ns->nparts && len + 1 < cap; i++) {
        char one[96];
        om_parts_name(d, ns->parts[i], one, sizeof(one));
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? "," : "", one);
    }
}

int om_parts_adopt(struct daemon *d, const struct server *s, const struct conn *c,
                   const struct om_v3_ns *ns, struct om_srv_adopt *a, uint64_t *ret_serial,
                   char *why, size_t whylen)
{
    const char *v = c->hello.sm_partition;
    const struct om_device_info *dev = NULL;
    struct part *x = NULL;
    char shown[160], theirs[400] = "";
    bool by_ns = ns && ns->nparts, own = v && *v;
    int at = -1;

    if (by_ns)
        ns_parts_text(d, ns, theirs, sizeof(theirs));
    if (own) {
        om_log_escape(shown, sizeof(shown), v, strlen(v));
        if (!(x = named_by_client(d, s, v, &dev))) {
            snprintf(why, whylen,
                     "CUDA_MPS_SM_PARTITION=%s names no SM partition of this daemon (lspart "
                     "lists them)",
                     shown);
            return -1;
        }
        if (x->server[0] && strcmp(x->server, s->name) != 0) {
            snprintf(why, whylen,
                     "CUDA_MPS_SM_PARTITION=%s is an SM partition of server %s; this client's "
                     "server is %s",
                     shown, x->server, s->name[0] ? s->name : "its user's plain server");
            return -1;
        }
        bool listed = !by_ns;
        for (unsigned i = 0; by_ns && i < ns->nparts; i++)
            listed |= ns->parts[i] == x->serial;
        if (!listed) { /* its namespace puts it in a partition: it may name that one, no other */
            snprintf(why, whylen,
                     "CUDA_MPS_SM_PARTITION=%s is not the SM partition of its namespace %s (%s): "
                     "unset it, or name that partition",
                     shown, ns->name, theirs);
            return -1;
        }
        at = seen_at(a, dev->ordinal);
    } else if (by_ns) {
        /* as if it had named its namespace's partition: the first on a device it sees */
        snprintf(shown, sizeof(shown), "(namespace %s)", ns->name);
        for (unsigned i = 0; i < ns->nparts && at < 0; i++) {
            struct part *y = by_serial(d->parts, ns->parts[i]);
            for (uint32_t k = 0; y && k < s->ndevs; k++)
                if (!memcmp(s->devs[k].uuid, y->uuid, sizeof(y->uuid)) &&
                    (at = seen_at(a, s->devs[k].ordinal)) >= 0) {
                    x = y;
                    dev = &s->devs[k];
                    break;
                }
        }
        if (!x) {
            snprintf(why, whylen,
                     "the SM partitions of its namespace %s (%s) are on devices it does not see "
                     "(its CUDA_VISIBLE_DEVICES, or its server's devices, leave them out)",
                     ns->name, theirs);
            return -1;
        }
    } else if (d->parts->open) {
        return 0; /* protocol 3's partitions, no -S: it runs outside them, as before them */
    } else {
        snprintf(why, whylen,
                 "openmps-control runs with static SM partitions (-S): every client names its "
                 "partition in CUDA_MPS_SM_PARTITION (as sm_partition add printed it; lspart "
                 "lists them)");
        return -1;
    }
    if (at < 0) {
        snprintf(why, whylen,
                 "CUDA_MPS_SM_PARTITION=%s is on a device its CUDA_VISIBLE_DEVICES leaves out",
                 shown);
        return -1;
    }
    /* The chunks are the daemon's (its own probe): the server must split its device alike. */
    const struct om_device_info *probed, *mine = NULL;
    int np = om_daemon_probed_devices(d, &probed);
    for (int i = 0; i < np && !mine; i++)
        if (!memcmp(probed[i].uuid, dev->uuid, sizeof(dev->uuid)))
            mine = &probed[i];
    if (!mine || !mine->chunk_sms || mine->chunk_sms != dev->chunk_sms ||
        mine->chunks != dev->chunks) {
        snprintf(why, whylen,
                 "the server's device %u does not split into the SM chunks the daemon measured "
                 "(%u of %u SMs; the server reports %u of %u)",
                 (unsigned)dev->ordinal, mine ? (unsigned)mine->chunks : 0u,
                 mine ? (unsigned)mine->chunk_sms : 0u, (unsigned)dev->chunks,
                 (unsigned)dev->chunk_sms);
        return -1;
    }
    a->devmap.count = 1; /* its partition's device is the only one it sees */
    a->devmap.server[0] = (uint8_t)dev->ordinal;
    a->part.flags = OM_PART_VALID | (x->remainder ? OM_PART_REMAINDER : 0u);
    a->part.device = dev->ordinal;
    a->part.chunk_sms = mine->chunk_sms;
    a->part.serial = x->serial;
    a->part.mask[0] = x->mask[0];
    a->part.mask[1] = x->mask[1];
    *ret_serial = x->serial;
    om_peer_info(d, c->uid, "Client %d: SM partition %s%s%s: %u SMs of device %u", (int)c->pid,
                 x->id, own ? "" : ", its namespace ", own ? "" : ns->name,
                 (unsigned)sms_of(x, dev), (unsigned)dev->ordinal);
    return 0;
}
