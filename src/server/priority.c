/* SPDX-License-Identifier: MIT */
/*
 * Client priority (CUDA_MPS_CLIENT_PRIORITY, set_default_client_priority; issue #12): 0 normal,
 * 1 below normal. Two mechanisms, because stream priorities alone cannot keep a normal client's
 * latency while below-normal kernels fill the GPU (a running block is never preempted for
 * another stream's, so a new kernel waits for the blocks on the SMs to finish):
 *
 * 1. Stream priorities. The driver's range is least 0 to greatest -5 (on the H100 and H200),
 *    and a stream made without one gets 0, the least. A normal client's streams get one level
 *    above what it asked (0 -> -1, ..., -4 -> -5; -5 stays), a below-normal client's all get the
 *    least, so the block scheduler starts a normal client's pending blocks before a below-normal
 *    one's. The client is answered the priority it asked for (cuStreamGetPriority): the server
 *    remembers it per stream where it differs.
 *
 * 2. An SM reserve. While a normal-priority client is connected, every below-normal client's
 *    kernels run in a lane of the device's SMs minus the reserve (OPENMPS_PRIORITY_RESERVE
 *    percent of them, default 12.5: 16 of 132 SMs), through the SM share's lanes and shadow
 *    streams (share.c), so a normal client's kernel finds SMs free. Connected, not launching
 *    lately: a latency-bound service is idle between its requests, and the first kernel of a
 *    request must find the SMs free (kernels queued before the reserve came run where they
 *    were queued). Below-normal clients among themselves have every SM.
 *
 * A priority changed for running clients (set_default_client_priority does not; a server's
 * clients change only through its limits) applies to the streams they create from then on, and
 * to the reserve at once.
 */
#include <stdlib.h>
#include <string.h>

#include "../common/config.h"
#include "exec.h"

#define RESERVE_DEFAULT_MILLI 12500u

static int range_least, range_greatest; /* the driver's, once */
static bool range_known;
static int sessions[2]; /* sessions of priority 0 and 1 now (__atomic) */
static uint32_t reserve_milli = RESERVE_DEFAULT_MILLI;

void om_priority_init(void)
{
    const char *v = getenv("OPENMPS_PRIORITY_RESERVE");
    uint32_t milli;

    if (v && *v) {
        if (!strcmp(v, "0"))
            reserve_milli = 0;
        else if (om_parse_percentage(v, &milli) == 0 && milli < 100000)
            reserve_milli = milli;
        else
            om_warn("OPENMPS_PRIORITY_RESERVE=%s is not a percentage below 100: 12.5", v);
    }
}

static void range(void)
{
    int least = 0, greatest = 0;

    if (__atomic_load_n(&range_known, __ATOMIC_ACQUIRE))
        return;
    if (!om_server_has(OM_IDX_cuCtxGetStreamPriorityRange) ||
        ((CUresult(*)(int *, int *))REAL(cuCtxGetStreamPriorityRange))(&least, &greatest) !=
            CUDA_SUCCESS)
        least = greatest = 0; /* one level: priorities change nothing */
    range_least = least;
    range_greatest = greatest;
    __atomic_store_n(&range_known, true, __ATOMIC_RELEASE);
}

/* What the driver itself makes of a priority: clamped to its range. */
static int clamped(int requested)
{
    range();
    if (requested > range_least)
        requested = range_least;
    if (requested < range_greatest)
        requested = range_greatest;
    return requested;
}

int om_priority_stream(struct session *s, int requested)
{
    requested = clamped(requested);
    if (__atomic_load_n(&s->limits.priority, __ATOMIC_RELAXED))
        return range_least;
    return requested > range_greatest ? requested - 1 : range_greatest;
}

void om_priority_note(struct session *s, CUstream st, int requested, int real)
{
    struct om_stream_prio *n;

    requested = clamped(requested); /* answered as the driver would: clamped */
    if (requested == real)
        return;
    if (s->nprio == s->prio_cap) {
        size_t cap = s->prio_cap ? s->prio_cap * 2 : 8;
        if (!(n = realloc(s->prio, cap * sizeof(*n))))
            return; /* cuStreamGetPriority then answers the real one */
        s->prio = n;
        s->prio_cap = cap;
    }
    s->prio[s->nprio++] = (struct om_stream_prio){st, requested};
}

int om_priority_asked(struct session *s, CUstream st, int real)
{
    for (size_t i = 0; i < s->nprio; i++)
        if (s->prio[i].stream == st)
            return s->prio[i].asked;
    return real;
}

void om_priority_forget(struct session *s, CUstream st)
{
    for (size_t i = 0; i < s->nprio; i++)
        if (s->prio[i].stream == st) {
            s->prio[i] = s->prio[--s->nprio];
            return;
        }
}

void om_priority_release(struct session *s)
{
    free(s->prio);
    s->prio = NULL;
    s->nprio = s->prio_cap = 0;
}

void om_priority_counted(int was, int now)
{
    if (was >= 0)
        __atomic_sub_fetch(&sessions[was ? 1 : 0], 1, __ATOMIC_RELAXED);
    if (now >= 0)
        __atomic_add_fetch(&sessions[now ? 1 : 0], 1, __ATOMIC_RELAXED);
}

uint32_t om_priority_cap_milli(struct session *s)
{
    if (!__atomic_load_n(&s->limits.priority, __ATOMIC_RELAXED) || !reserve_milli)
        return 0;
    return __atomic_load_n(&sessions[0], __ATOMIC_RELAXED) > 0 ? 100000 - reserve_milli : 0;
}
