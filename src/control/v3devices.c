/* SPDX-License-Identifier: MIT */
/*
 * Protocol 3's modules of the GPU's resources: NVIDIA's `sm-partition` (static SM partitions of a
 * named server's device, over the daemon's table of partition.c), openmps' older `partition`
 * spelling of it, and `device list` (each server's devices as its clients number them).
 * docs/operations.md, "Static SM partitions" and "Protocol 3", says what each prints.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../common/config.h"
#include "../common/visible.h"
#include "internal.h"
#include "v3cmd.h"
#include "v3int.h"

/* Whether a partition was made for the named server (sm-partition create, its file's). */
bool v3_server_has_partitions(struct daemon *d, const char *server)
{
    struct om_part_row row;

    for (unsigned i = 0; om_parts_row(d, i, &row); i++)
        if (!strcmp(row.server, server))
            return true;
    return false;
}

/* --- protocol 3's partition module: static SM partitions (partition.c), as sm_partition add|rm
 * and lspart make and list them --- */

/* partition list [--device=UUID] [--format=…]: one line per partition. */
static int partition_list(struct v3_ctx *x)
{
    static const char *const cols[] = {"id", "name", "device", "chunks", "sms", "clients"};
    static const unsigned width[] = {14, 20, 42, 8, 6, 0};
    const char *dev = v3_opt(x, "device");
    struct om_part_row row;
    char err[256];
    struct v3_table t;

    if (dev && om_parts_device_known(x->d, dev, err, sizeof(err)) < 0)
        return v3_fail(x, "%s", err);
    if (v3_table_start(x, &t, cols, width, 6) < 0)
        return 0;
    for (unsigned i = 0; om_parts_row(x->d, i, &row); i++) {
        char chunks[16], sms[16], clients[16];
        if (dev && strncasecmp(row.device, dev, strlen(dev)) != 0)
            continue;
        snprintf(chunks, sizeof(chunks), "%u", row.chunks);
        snprintf(sms, sizeof(sms), "%u", row.sms);
        snprintf(clients, sizeof(clients), "%u", row.clients);
        v3_table_row(&t, (const char *const[]){row.id, row.name, row.device, chunks, sms, clients});
    }
    return 0;
}

/* partition create --device=UUID --chunks=N [--name=NAME] [--include-remainder]: prints the
 * partition as CUDA_MPS_SM_PARTITION names it ("GPU-<uuid>/<ID>"). */
static int partition_create(struct v3_ctx *x)
{
    const char *dev = v3_opt(x, "device"), *chunks = v3_opt(x, "chunks"), *name = v3_opt(x, "name");
    uint64_t n, serial;
    char err[400], text[96];

    if (!v3_may_change(x))
        return 0;
    if (!dev || !chunks)
        return v3_fail(x, "Usage: partition create --device=UUID --chunks=N [--name=NAME] "
                          "[--include-remainder]");
    if (om_parse_u64(chunks, OM_PART_MAX_CHUNKS, &n) < 0)
        return v3_fail(x, "Invalid number of chunks \"%.32s\" (0: every free chunk, at most %u)",
                       chunks, OM_PART_MAX_CHUNKS);
    if (name && !om_v3_good_name(name))
        return v3_fail(x, "Invalid partition name \"%.64s\": letters, digits, '_' and '-'", name);
    if (!(serial = om_parts_create(x->d, dev, "", name ? name : "", (uint32_t)n,
                                   v3_opt(x, "include-remainder") != NULL, err, sizeof(err))))
        return v3_fail(x, "%s", err);
    om_parts_name(x->d, serial, text, sizeof(text));
    sb_printf(x->out, "%s", text);
    return 0;
}

/* partition delete PARTITION: by "GPU-<uuid>/<ID>", its ID or its name. */
static int partition_delete(struct v3_ctx *x)
{
    const char *which = v3_opt(x, "name");
    uint64_t serial;
    char err[400];

    if (!v3_may_change(x))
        return 0;
    if (!which)
        return v3_fail(x,
                       "Usage: partition delete PARTITION (GPU-<uuid>/<ID>, its ID or its name)");
    if (!(serial = om_parts_resolve(x->d, which, NULL, err, sizeof(err))) ||
        om_parts_delete(x->d, serial, err, sizeof(err)) < 0)
        return v3_fail(x, "%s", err);
    return 0;
}

int v3_cmd_partition(struct v3_ctx *x, int argc, char **argv)
{
    static const char *const list_keys[] = {"device", "format", NULL};
    static const char *const create_keys[] = {"device", "chunks", "name", NULL};
    static const char *const create_pos[] = {"device", "chunks", NULL};
    static const char *const remainder[] = {"include-remainder", NULL};
    static const char *const name_key[] = {"name", NULL};
    static const struct v3_verb verbs[] = {
        {"list", list_keys, NULL, NULL, partition_list},
        {"create", create_keys, remainder, create_pos, partition_create},
        {"delete", name_key, NULL, name_key, partition_delete},
    };

    if (!x->d->parts)
        return v3_fail(x, "Static SM partitioning is not enabled: start the daemon with -S "
                          "(--static-partitioning), make partitions in its configuration file, or "
                          "make one with sm-partition create");
    return v3_dispatch(x, argc, argv, verbs, 3,
                       "Usage: partition list|create|delete [options] (partition help)");
}

/* --- protocol 3's sm-partition module (NVIDIA's): static SM partitions of a named server's
 * device. The partitions are the daemon's table (partition.c), shared with sm_partition, lspart
 * and the older `partition` module; each remembers the server it was made for. The first one
 * makes the table where neither -S nor the file did: a client then runs in the partition it
 * names or its namespace names, and one that names none runs on its whole devices, as before
 * (with -S every client must name one). --- */

/* The partition NAME made for server srv on device uuid. */
static bool smp_find(struct v3_ctx *x, const char *name, const char *srv, const char *uuid,
                     struct om_part_row *row)
{
    for (unsigned i = 0; om_parts_row(x->d, i, row); i++)
        if (!strcmp(row->name, name) && !strcasecmp(row->device, uuid) && !strcmp(row->server, srv))
            return true;
    return false;
}

/* The machine's devices that server s's clients see, in their order: its allowed-devices read as
 * the driver reads CUDA_VISIBLE_DEVICES (om_visible_resolve), all without (s NULL: all). Returns
 * how many are in map (0: none), or -1 answered. */
static int server_devices(struct v3_ctx *x, const struct om_v3_server *s,
                          const struct om_device_info **devs, struct om_devmap *map)
{
    int n = om_daemon_probed_devices(x->d, devs), k;

    if (n < 0)
        return v3_fail(x, "Cannot list the devices: %s", x->d->probe_err);
    memset(map, 0, sizeof(*map));
    if (!s || !s->allowed_devices[0]) {
        for (k = 0; k < n && k < (int)OM_MAX_DEVICES; k++)
            map->server[k] = (uint8_t)k;
        map->count = (uint32_t)k;
        return k;
    }
    k = om_visible_resolve(s->allowed_devices, *devs, (uint32_t)n, map);
    return k < 0 ? 0 : k; /* a device named twice: the driver gives the client none */
}

/* The device a --device names for server s (NULL: the machine): an ordinal as s's clients
 * number their devices, or a UUID (or a prefix of it) of one of them. Its UUID text in uuid;
 * NULL answered. */
static const struct om_device_info *smp_device(struct v3_ctx *x, const struct om_v3_server *s,
                                               const char *text, char *uuid, size_t cap)
{
    const struct om_device_info *devs, *dev = NULL;
    struct om_devmap map;
    char err[256];
    int n = server_devices(x, s, &devs, &map);

    if (n < 0)
        return NULL;
    if (text[0] && text[strspn(text, "0123456789")] == '\0') {
        unsigned long k = strtoul(text, NULL, 10);
        if (k < (unsigned long)n)
            dev = &devs[map.server[k]];
    } else if ((dev = om_parts_device(x->d, text, err, sizeof(err)))) {
        bool seen = false;
        for (int k = 0; k < n; k++)
            seen |= &devs[map.server[k]] == dev;
        dev = seen ? dev : NULL;
    } else {
        return v3_fail(x, "%s", err), NULL;
    }
    if (!dev)
        return v3_fail(x, "No device %.64s among %s%s's (device list%s%s shows them)", text,
                       s ? "server " : "the machine", s ? s->name : "", s ? " --server=" : "",
                       s ? s->name : ""),
               NULL;
    om_format_uuid(dev->uuid, uuid, cap);
    return dev;
}

#define SMP_CREATE_USAGE                                                                           \
    "Usage: sm-partition create NAME --server=SERVER --device=ORDINAL|UUID --chunks=N "            \
    "[--include-remainder=true|false]"

/* sm-partition create NAME --server=S --device=D --chunks=N [--include-remainder=BOOL] */
static int smp_create(struct v3_ctx *x)
{
    const char *name = v3_opt(x, "name"), *srv = v3_opt(x, "server"), *chunks = v3_opt(x, "chunks");
    const struct om_v3_server *s;
    struct om_part_row row;
    bool rest = false, was = x->d->parts != NULL;
    char uuid[64], err[400], text[96];
    uint64_t n, serial;

    if (!v3_may_change(x))
        return 0;
    if (!name || !srv || !v3_opt(x, "device") || !chunks)
        return v3_fail(x, SMP_CREATE_USAGE);
    if (!om_v3_good_name(name))
        return v3_fail(x, "Invalid partition name \"%.64s\": letters, digits, '_' and '-'", name);
    if (!(s = om_v3_find_server(x->d, srv)))
        return v3_fail(x, "Server %.64s not found", srv);
    if (s->locality_domains)
        return v3_fail(x,
                       "Server %s has locality domains on: SM partitions and locality domains "
                       "exclude each other (server set %s --locality-domains=false)",
                       s->name, s->name);
    if (om_parse_u64(chunks, OM_PART_MAX_CHUNKS, &n) < 0 || !n)
        return v3_fail(x, "Invalid number of chunks \"%.32s\": a positive integer, at most %u",
                       chunks, OM_PART_MAX_CHUNKS);
    if (v3_bool_opt(x, "include-remainder", &rest) < 0 ||
        !smp_device(x, s, v3_opt(x, "device"), uuid, sizeof(uuid)))
        return 0;
    if (om_parts_enable_open(x->d) < 0)
        return v3_fail(x, "Out of memory");
    if (!(serial =
              om_parts_create(x->d, uuid, s->name, name, (uint32_t)n, rest, err, sizeof(err)))) {
        if (!was)
            om_parts_free(x->d);
        return v3_fail(x, "%s", err);
    }
    if (!was)
        om_info("static SM partitions on (clients that name none run outside them): the first "
                "sm-partition create");
    om_parts_name(x->d, serial, text, sizeof(text));
    if (!smp_find(x, name, s->name, uuid, &row))
        row.sms = 0;
    sb_printf(x->out,
              "SM partition '%s' created on device %s (sm-count=%u)\nCUDA_MPS_SM_PARTITION=%s",
              name, uuid, row.sms, text);
    return 0;
}

/* sm-partition delete NAME --server=S --device=D */
static int smp_delete(struct v3_ctx *x)
{
    const char *name = v3_opt(x, "name"), *srv = v3_opt(x, "server");
    const struct om_v3_server *s;
    struct om_part_row row;
    char uuid[64], err[400];

    if (!v3_may_change(x))
        return 0;
    if (!name || !srv || !v3_opt(x, "device"))
        return v3_fail(x, "Usage: sm-partition delete NAME --server=SERVER --device=ORDINAL|UUID");
    if (!(s = om_v3_find_server(x->d, srv)))
        return v3_fail(x, "Server %.64s not found", srv);
    if (!smp_device(x, s, v3_opt(x, "device"), uuid, sizeof(uuid)))
        return 0;
    if (!smp_find(x, name, srv, uuid, &row))
        return v3_fail(x,
                       "No SM partition %.64s of server %s on device %s (sm-partition list shows "
                       "them)",
                       name, srv, uuid);
    if (om_parts_delete(x->d, row.serial, err, sizeof(err)) < 0)
        return v3_fail(x, "%s", err);
    sb_printf(x->out, "SM partition '%s' deleted from device %s", name, uuid);
    return 0;
}

/* sm-partition list [--server=S] [--device=D] [--all] [--format=…]: the partitions, then what is
 * left of each device ("unallocated"). */
static int smp_list(struct v3_ctx *x)
{
    static const char *const cols[] = {"server", "device",      "name",
                                       "chunks", "sm-count",    "include-remainder",
                                       "status", "visible-uuid"};
    static const unsigned width[] = {16, 42, 16, 8, 10, 19, 13, 0};
    const char *srv = v3_opt(x, "server");
    const struct om_device_info *devs, *only = NULL;
    char uuid[64] = "";
    struct om_part_row row;
    struct v3_table t;
    int ndev;

    if (v3_list_start(x, srv, &t, cols, width, 8) < 0)
        return 0;
    if (v3_opt(x, "device") && !(only = smp_device(x, srv ? om_v3_find_server(x->d, srv) : NULL,
                                                   v3_opt(x, "device"), uuid, sizeof(uuid))))
        return 0;
    for (unsigned i = 0; om_parts_row(x->d, i, &row); i++) {
        char chunks[16], sms[16], text[96];
        const char *status = "created";
        if ((srv && strcmp(row.server, srv) != 0) || (only && strcasecmp(row.device, uuid) != 0))
            continue;
        if (row.server[0]) {
            const struct om_v3_server *s = om_v3_find_server(x->d, row.server);
            status = s && om_server_for(x->d, s->uid, s->name) ? "created" : "configured";
        }
        snprintf(chunks, sizeof(chunks), "%u", row.chunks);
        snprintf(sms, sizeof(sms), "%u", row.sms);
        om_parts_name(x->d, row.serial, text, sizeof(text));
        v3_table_row(&t, (const char *const[]){row.server[0] ? row.server : "-", row.device,
                                               row.name, chunks, sms,
                                               row.remainder ? "true" : "false", status, text});
    }
    ndev = om_daemon_probed_devices(x->d, &devs);
    for (int k = 0; k < ndev; k++) {
        struct om_part_room room;
        char u[64], chunks[16], sms[16];
        if (only && only->ordinal != devs[k].ordinal)
            continue;
        om_parts_device_room(x->d, &devs[k], &room);
        if (!room.free_sms)
            continue;
        om_format_uuid(devs[k].uuid, u, sizeof(u));
        snprintf(chunks, sizeof(chunks), "%u", room.free_chunks);
        snprintf(sms, sizeof(sms), "%u", room.free_sms);
        v3_table_row(&t, (const char *const[]){"-", u, "-", chunks, sms, "-", "unallocated", "-"});
    }
    return 0;
}

int v3_cmd_sm_partition(struct v3_ctx *x, int argc, char **argv)
{
    static const char *const create_keys[] = {
        "name", "server", "device", "chunks", "include-remainder", NULL};
    static const char *const delete_keys[] = {"name", "server", "device", NULL};
    static const char *const list_keys[] = {"server", "device", "format", NULL};
    static const char *const all[] = {"all", NULL};
    static const char *const name_key[] = {"name", NULL};
    static const struct v3_verb verbs[] = {
        {"list", list_keys, all, NULL, smp_list},
        {"create", create_keys, NULL, name_key, smp_create},
        {"delete", delete_keys, NULL, name_key, smp_delete},
    };

    return v3_dispatch(x, argc, argv, verbs, 3,
                       "Usage: sm-partition list|create|delete [options] (sm-partition help)");
}

/* --- device list: each named server's devices, as its clients see them --- */

static void device_row(struct v3_ctx *x, struct v3_table *t, unsigned ordinal, const char *server,
                       const struct om_device_info *dev)
{
    struct om_part_room room;
    struct om_part_row row;
    char ord[16], u[64], sms[16], chunks[16], attrs[64] = "-";
    unsigned nparts = 0;

    om_format_uuid(dev->uuid, u, sizeof(u));
    om_parts_device_room(x->d, dev, &room);
    for (unsigned i = 0; om_parts_row(x->d, i, &row); i++)
        nparts += !strcasecmp(row.device, u);
    if (nparts)
        snprintf(attrs, sizeof(attrs), "sm-partitions=%u", nparts);
    snprintf(ord, sizeof(ord), "%u", ordinal);
    snprintf(sms, sizeof(sms), "%u", (unsigned)dev->sm_count);
    snprintf(chunks, sizeof(chunks), "%u", (unsigned)room.total_chunks);
    v3_table_row(
        t, (const char *const[]){ord, server, dev->pci_bus_id, u, dev->name, sms, chunks, attrs});
}

/* device list [--server=S] [--format=…]: a server's devices in the order its clients number
 * them (its allowed devices read as the driver reads CUDA_VISIBLE_DEVICES, renumbered from 0),
 * each with its SMs and static-partition chunks; without named servers, the machine's devices
 * with server "-". */
static int device_list(struct v3_ctx *x)
{
    static const char *const cols[] = {"ordinal", "server",    "pci-id",       "device-uuid",
                                       "name",    "total-sms", "total-chunks", "attributes"};
    static const unsigned width[] = {8, 16, 14, 42, 26, 10, 13, 0};
    const char *only = v3_opt(x, "server");
    const struct om_device_info *devs;
    struct om_devmap map;
    struct v3_table t;
    int n;

    if (v3_list_start(x, only, &t, cols, width, 8) < 0)
        return 0;
    if (!x->d->v3 || !x->d->v3->nservers) {
        if ((n = server_devices(x, NULL, &devs, &map)) < 0)
            return 0;
        for (int k = 0; k < n; k++)
            device_row(x, &t, (unsigned)k, "-", &devs[map.server[k]]);
        return 0;
    }
    for (unsigned i = 0; i < x->d->v3->nservers; i++) {
        const struct om_v3_server *s = &x->d->v3->servers[i];
        if (only && strcmp(only, s->name) != 0)
            continue;
        if ((n = server_devices(x, s, &devs, &map)) < 0)
            return 0;
        for (int k = 0; k < n; k++)
            device_row(x, &t, (unsigned)k, s->name, &devs[map.server[k]]);
    }
    return 0;
}

int v3_cmd_device(struct v3_ctx *x, int argc, char **argv)
{
    static const char *const list_keys[] = {"server", "format", NULL};
    static const struct v3_verb verbs[] = {{"list", list_keys, NULL, NULL, device_list}};

    return v3_dispatch(x, argc, argv, verbs, 1,
                       "Usage: device list [--server=NAME] [--format=table|csv[,noheader]]");
}
