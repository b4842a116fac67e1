/* SPDX-License-Identifier: MIT */
/* OPENMPS_PROFILE: where a session's server time goes, entry point by entry point. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "../common/log.h"

/*
 * A framework client sends hundreds of records per step (a ResNet-18 batch: about 490), and
 * the server's thread pays for each: the record's decoding and checks, the driver's own work,
 * and the wake-up when the thread slept. With OPENMPS_PROFILE set in the daemon's environment,
 * every session counts its calls and their server time per entry point, and the server logs,
 * as the client leaves, the entry points that took most of it, with the times its thread found
 * no record and waited (records per wait: how well a busy thread batches), and each entry
 * point's calls, mean and longest time. Off, it costs one test per record.
 */
struct om_profile {
    uint64_t calls[OM_HANDLER_COUNT];
    uint64_t ns[OM_HANDLER_COUNT];
    uint64_t max_ns[OM_HANDLER_COUNT];
    unsigned slow_logged;
};

/*
 * A call that takes longer than OPENMPS_PROFILE_SLOW_US (default 2000) is also logged on its
 * own, with the wall-clock instant it started (ns since the epoch, as Python's time.time_ns()
 * reads it): bench/b8timeline.py lines them up with the other clients' slowest batches. At most
 * SLOW_LINES per session.
 */
#define SLOW_LINES 200

static int enabled = -1; /* -1: not read yet */
static uint64_t slow_ns = 2000000;

bool om_profile_on(void)
{
    if (enabled < 0) {
        const char *v = getenv("OPENMPS_PROFILE"), *slow = getenv("OPENMPS_PROFILE_SLOW_US");
        char *end;
        long long us = slow && *slow ? strtoll(slow, &end, 10) : -1;

        if (slow && *slow && (*end || us <= 0 || us > 60000000))
            om_warn("OPENMPS_PROFILE_SLOW_US=%s is not a count of microseconds: %llu", slow,
                    (unsigned long long)(slow_ns / 1000));
        else if (us > 0)
            slow_ns = (uint64_t)us * 1000;
        enabled = v && *v && strcmp(v, "0") != 0;
    }
    return enabled;
}

void om_profile_start(struct session *s)
{
    if (om_profile_on())
        s->profile = calloc(1, sizeof(*s->profile)); /* none: the session goes unprofiled */
}

void om_profile_add(struct session *s, int index, uint64_t ns)
{
    if (ns >= slow_ns && s->profile->slow_logged < SLOW_LINES && index >= 0 &&
        index < OM_HANDLER_COUNT) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        s->profile->slow_logged++;
        om_info("client %d: slow call %s took %llu us from %llu", (int)s->pid,
                om_server_entry_name(index), (unsigned long long)(ns / 1000),
                (unsigned long long)((uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec -
                                     ns));
    }
    if (index >= 0 && index < OM_HANDLER_COUNT) {
        s->profile->calls[index]++;
        s->profile->ns[index] += ns;
        if (ns > s->profile->max_ns[index])
            s->profile->max_ns[index] = ns;
    }
}

#define TOP 12

void om_profile_report(struct session *s)
{
    struct om_profile *p = s->profile;
    int top[TOP], ntop = 0;
    uint64_t calls = 0, ns = 0;
    char line[TOP * 100], *at = line;

    if (!p)
        return;
    for (int i = 0; i < OM_HANDLER_COUNT; i++) {
        int j;

        calls += p->calls[i];
        ns += p->ns[i];
        if (!p->calls[i])
            continue;
        /* kept in top[], largest time first */
        if (ntop < TOP)
            j = ntop++;
        else if (p->ns[i] > p->ns[top[TOP - 1]])
            j = TOP - 1;
        else
            continue;
        for (; j > 0 && p->ns[top[j - 1]] < p->ns[i]; j--)
            top[j] = top[j - 1];
        top[j] = i;
    }
    *at = 0;
    for (int k = 0; k < ntop; k++) {
        size_t left = sizeof(line) - (size_t)(at - line);
        int n = snprintf(at, left, "%s%s %llu x %.2f us (max %.0f)", k ? ", " : "",
                         om_server_entry_name(top[k]), (unsigned long long)p->calls[top[k]],
                         p->ns[top[k]] / 1e3 / (double)p->calls[top[k]], p->max_ns[top[k]] / 1e3);
        if (n < 0 || (size_t)n >= left)
            break; /* the line is full: the entries shown are the largest */
        at += n;
    }
    om_info("client %d: profile: %llu driver call(s) in %.1f ms of server time, %llu record(s), "
            "%llu wait(s) for one; most time: %s",
            (int)s->pid, (unsigned long long)calls, ns / 1e6, (unsigned long long)s->calls,
            (unsigned long long)s->waits, line);
    free(p);
    s->profile = NULL;
}
