/* SPDX-License-Identifier: MIT */
/* OPENMPS_PROFILE: where a session's server time goes, entry point by entry point. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    uint64_t calls[OM_ENTRY_COUNT];
    uint64_t ns[OM_ENTRY_COUNT];
    uint64_t max_ns[OM_ENTRY_COUNT];
};

static int enabled = -1; /* -1: not read yet */

bool om_profile_on(void)
{
    if (enabled < 0) {
        const char *v = getenv("OPENMPS_PROFILE");
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
    if (index >= 0 && index < OM_ENTRY_COUNT) {
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
    for (int i = 0; i < OM_ENTRY_COUNT; i++) {
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
