/* SPDX-License-Identifier: MIT */
/* openmps top's figures: the daemon's `stats --json` document (version 1, docs/operations.md
 * "Statistics") read into fixed, bounded records (topstats.c), and the rates top derives from
 * two of them. No curses here: the fuzz target (tests/fuzz/fuzz_json.c) runs it too. */
#ifndef OM_CLI_TOPSTATS_H
#define OM_CLI_TOPSTATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OM_TOP_MAX_SERVERS 256
#define OM_TOP_MAX_DEVICES 1024
#define OM_TOP_MAX_CLIENTS 4096
#define OM_TOP_MAX_CLIENT_DEVICES 16384 /* the clients' per-device records, all together */

struct om_top_usage {
    uint64_t kernels, graphs, gpu_ns, htod, dtoh, dtod, mem;
};

struct om_top_server {
    int pid;
    unsigned uid;
    bool answered;
    char status[16];
    char error[128];
};

struct om_top_device {
    int server_pid;
    unsigned ordinal, clients;
    char uuid[48], name[64], pci[24];
    struct om_top_usage u;
    double gpu_pct; /* derived (om_top_rates) */
};

struct om_top_cdev {
    unsigned ordinal;
    struct om_top_usage u;
};

struct om_top_client {
    int pid, server_pid;
    unsigned id, uid, priority;
    char command[256], cgroup[256], state[12];
    double share, calls_per_s, kernels_per_s;
    uint64_t calls, serve_ns, wait_ns, connected_ns, pinned;
    struct om_top_usage u;
    unsigned dev_first, ndev; /* its records in the snapshot's cdev */
    double gpu_pct;           /* derived (om_top_rates) */
};

struct om_top_snapshot {
    double time; /* the daemon's clock, seconds */
    unsigned nservers, ndevices, nclients, ncdev;
    struct om_top_server servers[OM_TOP_MAX_SERVERS];
    struct om_top_device devices[OM_TOP_MAX_DEVICES];
    struct om_top_client clients[OM_TOP_MAX_CLIENTS];
    struct om_top_cdev cdev[OM_TOP_MAX_CLIENT_DEVICES];
};

/* Reads a stats --json answer into *s: 0, or -1 with what is wrong (the field named) in err. */
int om_top_read(struct om_top_snapshot *s, const char *text, size_t len, char *err, size_t errcap);

/* GPU% of every client and device of `cur`: a client's GPU time over the `seconds` since `prev`
 * (its own earlier record; NULL or a client new since: over the time it has been connected);
 * a device's, the sum of its clients' on it. */
void om_top_rates(struct om_top_snapshot *cur, const struct om_top_snapshot *prev, double seconds);

#endif
