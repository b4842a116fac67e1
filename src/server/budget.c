/* SPDX-License-Identifier: MIT */
/* What one client, and all clients together, may make the server hold (docs/security.md). */
#include <stdio.h>
#include <stdlib.h>
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

void om_budget_init(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 8ull << 30;
    char a[32], b[32], c[32], d[32], e[32];

    /* Pinned pages cannot be swapped out: all clients together stay under three quarters of
     * the machine's memory, one client under half of it. */
    om_budget.client_pinned = env_size("OPENMPS_CLIENT_PINNED_MAX", ram / 2);
    om_budget.server_pinned = env_size("OPENMPS_SERVER_PINNED_MAX", ram / 4 * 3);
    om_budget.client_pinned_regions = env_count("OPENMPS_CLIENT_MAX_PINNED_REGIONS", 65536);
    om_budget.server_stage = env_size("OPENMPS_SERVER_STAGE_MAX", 4ull << 30);
    om_budget.client_images = env_size("OPENMPS_CLIENT_IMAGE_MAX", 2ull << 30);
    om_budget.client_image_count = env_count("OPENMPS_CLIENT_MAX_IMAGES", 16384);
    om_budget.server_images = env_size("OPENMPS_SERVER_IMAGE_MAX", 8ull << 30);
    om_budget.client_streams = env_count("OPENMPS_CLIENT_MAX_STREAMS", 1024);
    om_budget.client_events = env_count("OPENMPS_CLIENT_MAX_EVENTS", 65536);
    om_budget.client_handles = env_count("OPENMPS_CLIENT_MAX_HANDLES", 65536);
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
