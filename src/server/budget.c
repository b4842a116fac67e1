/* SPDX-License-Identifier: MIT */
/* What one client, and all clients together, may make the server hold (docs/security.md). */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/log.h"
#include "internal.h"

/*
 * Every resource a client can make the server hold on its behalf has a budget, so that one
 * client (careless or hostile) cannot take the server, and with it every client of the user,
 * down by exhausting memory or descriptors. Past a budget the call fails with the error the
 * driver gives for the same shortage (CUDA_ERROR_OUT_OF_MEMORY) and the session goes on.
 *
 * Per client: pinned host memory (bytes and regions), streams, events, module images it made
 * the server load (bytes and count). For the server as a whole: pinned host memory (regions
 * kept for reuse included), staging buffers, and the bytes of module code it keeps loaded.
 *
 * The defaults are sized for real programs (PyTorch pins a few GiB, creates some dozens of
 * streams and thousands of events, Triton loads a module per compiled kernel); an operator
 * changes them through the environment of openmps-control, which its servers inherit
 * (docs/operations.md lists the variables).
 */

struct om_budget om_budget;

static uint64_t env_size(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    uint64_t n;

    if (!v || !*v)
        return dflt;
    if (om_parse_size(v, &n) < 0 || n == 0) {
        om_warn("%s=%s is not a size (as 512M or 2G): using the default", name, v);
        return dflt;
    }
    return n;
}

static uint32_t env_count(const char *name, uint32_t dflt)
{
    const char *v = getenv(name);
    uint64_t n;

    if (!v || !*v)
        return dflt;
    if (om_parse_u64(v, UINT32_MAX, &n) < 0 || n == 0) {
        om_warn("%s=%s is not a count from 1 to %u: using the default", name, v, UINT32_MAX);
        return dflt;
    }
    return (uint32_t)n;
}

static void limits(bool log);

void om_budget_init(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 8ull << 30;
    char a[32], b[32], c[32], d[32], e[32];

    /* Pinned pages cannot be swapped out: all clients together stay under three quarters of
     * the machine's memory, one client under half of it. */
    om_budget.client_pinned = env_size("OPENMPS_CLIENT_PINNED_MAX", ram / 2);
    om_budget.server_pinned = env_size("OPENMPS_SERVER_PINNED_MAX", ram / 4 * 3);
    om_budget.server_stage = env_size("OPENMPS_SERVER_STAGE_MAX", 4ull << 30);
    om_budget.client_images = env_size("OPENMPS_CLIENT_IMAGE_MAX", 2ull << 30);
    om_budget.client_image_count = env_count("OPENMPS_CLIENT_MAX_IMAGES", 16384);
    om_budget.server_images = env_size("OPENMPS_SERVER_IMAGE_MAX", 8ull << 30);
    om_budget.client_streams = env_count("OPENMPS_CLIENT_MAX_STREAMS", 1024);
    om_budget.client_events = env_count("OPENMPS_CLIENT_MAX_EVENTS", 65536);
    om_budget.client_handles = env_count("OPENMPS_CLIENT_MAX_HANDLES", 65536);
    om_budget.server_replay = env_size("OPENMPS_SERVER_REPLAY_MAX", 256ull << 20);
    om_format_size(om_budget.client_pinned, a, sizeof(a));
    om_format_size(om_budget.server_pinned, b, sizeof(b));
    om_format_size(om_budget.server_stage, c, sizeof(c));
    om_format_size(om_budget.client_images, d, sizeof(d));
    om_format_size(om_budget.server_images, e, sizeof(e));
    om_info("budgets: pinned %s per client, %s in all; staging %s in all; module images %s and "
            "%u per client, %s in all; %u streams, %u events and %u handles of each other kind per "
            "client",
            a, b, c, d, om_budget.client_image_count, e, om_budget.client_streams,
            om_budget.client_events, om_budget.client_handles);
    limits(false); /* again once the driver is up (om_budget_limits), with its maps and fds */
}

/* Lines of a /proc file (maps: one per mapping), or entries of a /proc directory (fd). */
static long proc_count(const char *path, bool dir)
{
    long n = 0;

    if (dir) {
        DIR *d = opendir(path);
        if (!d)
            return -1;
        for (struct dirent *e; (e = readdir(d));)
            n += e->d_name[0] != '.';
        closedir(d);
        return n;
    }
    char buf[65536];
    ssize_t got;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    while ((got = read(fd, buf, sizeof(buf))) > 0)
        for (ssize_t i = 0; i < got; i++)
            n += buf[i] == '\n';
    close(fd);
    return n;
}

/*
 * Pinned regions cost the server one mapping each (and the client one more in its own
 * process), and the kernel allows a process vm.max_map_count of them (65530 by default): past
 * it every mmap fails, a new client's ring and thread stacks included, so every new client of
 * the user would fail with 805. The server therefore gives pinned regions three quarters of the
 * maps it has left once its driver is up, keeps the last quarter for new clients' sessions and
 * the driver, and lets one client take a quarter of the regions' share, so that one client
 * leaves the others served. OPENMPS_SERVER_MAX_PINNED_REGIONS and
 * OPENMPS_CLIENT_MAX_PINNED_REGIONS can lower these, not raise them.
 *
 * Descriptors: a region's memfd is sent to its client and closed (api/memory.c); only regions
 * that may go to the pool for the next client keep theirs (hostmem.c), at most 256 and at most
 * a quarter of the descriptors RLIMIT_NOFILE leaves, the rest being for clients' sockets and
 * whatever the driver opens.
 */
static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static void limits(bool log)
{
    long max_maps = 65530, maps = proc_count("/proc/self/maps", false);
    long fds = proc_count("/proc/self/fd", true), nofile = 1024;
    struct rlimit rl;
    FILE *f = fopen("/proc/sys/vm/max_map_count", "re");
    uint64_t room, regions, fd_room;

    if (f) {
        if (fscanf(f, "%ld", &max_maps) != 1)
            max_maps = 65530;
        fclose(f);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        nofile =
            rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 30) ? 1L << 30 : (long)rl.rlim_cur;
    room = max_maps > maps && maps >= 0 ? (uint64_t)(max_maps - maps) : 0;
    regions = room / 4 * 3;
    regions = min_u64(regions, env_count("OPENMPS_SERVER_MAX_PINNED_REGIONS", UINT32_MAX));
    om_budget.server_pinned_regions = (uint32_t)(regions ? regions : 1);
    om_budget.client_pinned_regions = (uint32_t)min_u64(
        env_count("OPENMPS_CLIENT_MAX_PINNED_REGIONS", UINT32_MAX),
        om_budget.server_pinned_regions / 4 ? om_budget.server_pinned_regions / 4 : 1);
    fd_room = nofile > fds && fds >= 0 ? (uint64_t)(nofile - fds) : 0;
    om_budget.pinned_fds = (uint32_t)min_u64(256, fd_room / 4);
    if (log)
        om_info("pinned regions: %u per client, %u in all (vm.max_map_count %ld, %ld maps in use); "
                "%u descriptors of pooled regions at most (RLIMIT_NOFILE %ld, %ld open)",
                om_budget.client_pinned_regions, om_budget.server_pinned_regions, max_maps, maps,
                om_budget.pinned_fds, nofile, fds);
}

void om_budget_limits(void)
{
    limits(true);
}

bool om_budget_take(uint64_t *counter, uint64_t n, uint64_t max)
{
    uint64_t cur = __atomic_load_n(counter, __ATOMIC_RELAXED);

    do {
        if (n > max || cur > max - n)
            return false;
    } while (!__atomic_compare_exchange_n(counter, &cur, cur + n, true, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    return true;
}

void om_budget_give(uint64_t *counter, uint64_t n)
{
    __atomic_sub_fetch(counter, n, __ATOMIC_RELAXED);
}

/* One line per client and budget: a program that retries in a loop must not flood the log. */
CUresult om_budget_refuse(struct session *s, enum om_budget_kind kind, const char *what)
{
    static const char *const names[OM_BUDGET_KINDS] = {
        [OM_BUDGET_PINNED] = "pinned host memory",
        [OM_BUDGET_STAGE] = "staging memory",
        [OM_BUDGET_IMAGES] = "module images",
        [OM_BUDGET_STREAMS] = "streams",
        [OM_BUDGET_EVENTS] = "events",
        [OM_BUDGET_HANDLES] = "handles of one kind",
    };

    if (!(s->budget_logged & (1u << kind))) {
        s->budget_logged |= 1u << kind;
        om_warn("client %d: %s refused: over its budget of %s (docs/operations.md, "
                "\"Budgets\"); further refusals of this kind are not logged",
                (int)s->pid, what, names[kind]);
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}
