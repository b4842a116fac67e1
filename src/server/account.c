/* SPDX-License-Identifier: MIT */
/* Accounting per client and device: kernels, GPU busy time, copies, serving time (openmps stats).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/log.h"
#include "../common/msg.h"
#include "internal.h"

/*
 * Cheap enough to stay on: the worker that serves a client is the only writer of its counters,
 * so a hook is a relaxed load and store of its own session's fields (no lock, no atomic
 * read-modify-write, no system call); the main thread reads them when the daemon asks
 * (om_account_send) and once a second for the rates (om_account_tick).
 *
 * GPU busy time, and how exact it is. A client's busy period on a device begins when a kernel
 * (or an executable graph) of it is launched onto one of its streams that had none outstanding,
 * and ends when the server has seen the last such stream done: a wait the worker made for that
 * stream returned (the client's stream or device synchronize, a synchronous copy or set on it, a
 * stream's destruction), or after a wait for an event every stream with a period open is asked
 * (cuStreamQuery: nothing is enqueued, so no hardware queue is blocked, docs/driver-facts.md).
 * Periods of its several streams on one device overlap: their union is counted, not their sum.
 * So the figure is the time the GPU had its kernels to run, from the host's clock:
 *  - it begins at the launch's submission (a kernel that waits behind other clients' kernels
 *    for SMs counts from then: that is the time it needed the GPU);
 *  - it ends when the waiting worker woke, a wake-up late (polling 100 µs, then the driver's
 *    blocking wait: tens of µs), so each period is over-counted by about that;
 *  - a stream the client never waits for (it polls a stream with cuStreamQuery, or only reads
 *    pinned memory) stays counted until its next wait; gaps between kernels while the client
 *    computes without waiting count as busy.
 * No event is recorded around a client's kernels: a timing event behind a long kernel is itself
 * the dependent operation that holds a shared hardware queue (sched.c says why), and one per
 * launch would double the launch's cost.
 *
 * Serving time is the time the client's calls waited for the server: for each record the client
 * waits on (not the posted ones: launches, asynchronous copies and records, which nobody waits
 * for and which are not timed, so that the launch path reads no clock), the worker's time from
 * taking it from the ring to its answer; a record waits in the ring before that, for a time no
 * record carries: not counted. Of that, the time spent waiting for the GPU (gpu_wait_ns).
 */

#define R(sym) om_server_real[OM_IDX_##sym]
#define ADD(field, n)                                                                              \
    __atomic_store_n(&(field), __atomic_load_n(&(field), __ATOMIC_RELAXED) + (n), __ATOMIC_RELAXED)
#define GET(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

static __thread struct session *bound; /* the session this worker serves */

/* OPENMPS_ACCOUNT=off: no hook counts anything (openmps stats then shows calls, memory and
 * limits only), for measuring what the accounting costs against the same build (issue #27).
 * Read once, by the first worker, before any hook of it runs. */
static bool off;

static void read_setting(void)
{
    const char *v = getenv("OPENMPS_ACCOUNT");

    if (!v || !*v || !strcmp(v, "on"))
        return;
    if (!strcmp(v, "off")) {
        off = true;
        om_info("accounting off (OPENMPS_ACCOUNT=off): openmps stats counts no kernels, copies or "
                "GPU time");
    } else {
        om_warn("OPENMPS_ACCOUNT=%s is not on or off: accounting is on", v);
    }
}

void om_account_bind(struct session *s)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    pthread_once(&once, read_setting);
    bound = off ? NULL : s;
    if (s) /* the main thread may be reading it (om_account_send) */
        __atomic_store_n(&s->acct.started_ns, om_mono_ns(), __ATOMIC_RELAXED);
}

uint64_t om_account_now(void)
{
    return off ? 0 : om_mono_ns();
}

void om_account_served(struct session *s, uint64_t t0)
{
    if (t0 && !off) /* 0: a posted record, which nobody waits for (not timed: it is hot) */
        ADD(s->acct.serve_ns, om_mono_ns() - t0);
}

void om_account_copy(struct session *s, enum om_acct_copy dir, uint64_t bytes, CUresult rc)
{
    struct om_acct_dev *d = &s->acct.dev[s->dev];

    if (rc != CUDA_SUCCESS || off)
        return;
    if (dir == OM_ACCT_HTOD)
        ADD(d->htod, bytes);
    else if (dir == OM_ACCT_DTOH)
        ADD(d->dtoh, bytes);
    else
        ADD(d->dtod, bytes);
}

void om_account_launch(struct session *s, CUstream st, bool graph)
{
    struct om_acct *a = &s->acct;
    struct om_acct_dev *d = &a->dev[s->dev];

    if (off)
        return;
    if (graph)
        ADD(d->graphs, 1);
    else
        ADD(d->kernels, 1);
    if (!st || (a->last < a->nbusy && a->busy[a->last].st == st))
        return; /* the common case: the stream of its last launch, still busy */
    for (unsigned i = 0; i < a->nbusy; i++) {
        if (a->busy[i].st == st) {
            a->last = i;
            return;
        }
    }
    if (a->nbusy == OM_ACCT_STREAMS) {
        a->untimed++;
        return;
    }
    a->busy[a->nbusy].st = st;
    a->busy[a->nbusy].dev = s->dev;
    a->last = a->nbusy++;
    if (d->open++ == 0)
        __atomic_store_n(&d->busy_since, om_mono_ns(), __ATOMIC_RELAXED);
}

/* The stream's period ends now; the device's, when it was its last open one. */
static void close_busy(struct om_acct *a, unsigned i, uint64_t now)
{
    struct om_acct_dev *d = &a->dev[a->busy[i].dev];

    if (--d->open == 0) {
        uint64_t since = GET(d->busy_since);
        /* gpu_ns first: a reader between the two stores sees the period twice at most briefly
         * the other way round, so it is added before since is cleared, and the reader takes
         * gpu_ns before since (om_account_send): it may miss it for an instant, never double it */
        ADD(d->gpu_ns, now > since ? now - since : 0);
        __atomic_store_n(&d->busy_since, 0, __ATOMIC_RELAXED);
    }
    a->busy[i] = a->busy[--a->nbusy];
    a->last = 0;
}

/* Whether a stream's work is done, asked without waiting: never a capturing stream's (a query
 * would invalidate its capture; idle.c says the same). */
static bool stream_done(CUstream st)
{
    CUresult (*capturing)(CUstream, int *) = (CUresult(*)(CUstream, int *))R(cuStreamIsCapturing);
    int status = 0;

    if (capturing && capturing(st, &status) == CUDA_SUCCESS && status != 0)
        return false;
    return ((CUresult(*)(CUstream))R(cuStreamQuery))(st) == CUDA_SUCCESS;
}

/* Set while the worker waits after the client's answer went out (a small copy's DMA,
 * copies.c): no call of the client waits then, so the wait is neither its gpu_wait_ns nor its
 * "waiting" state; the streams it saw done still end their busy periods. */
static __thread bool after_answer;

void om_account_after_answer(bool on)
{
    after_answer = on;
}

uint64_t om_account_wait_begin(uint64_t now)
{
    if (!bound)
        return 0;
    if (!after_answer)
        __atomic_store_n(&bound->acct.waiting_since, now, __ATOMIC_RELAXED);
    return now;
}

void om_account_waited(uint64_t t0, CUstream st, bool event_done)
{
    struct session *s = bound;
    struct om_acct *a;
    uint64_t now;

    if (!s || !t0)
        return;
    a = &s->acct;
    now = om_mono_ns();
    if (!after_answer) {
        ADD(a->gpu_wait_ns, now - t0);
        __atomic_store_n(&a->waiting_since, 0, __ATOMIC_RELAXED);
    }
    for (unsigned i = 0; i < a->nbusy;) {
        if (st ? a->busy[i].st == st : event_done && stream_done(a->busy[i].st))
            close_busy(a, i, now);
        else
            i++;
    }
}

/* ------------------------------------------------------------------ the main thread */

#define RATE_NS 1000000000ull

void om_account_tick(struct session *sessions)
{
    uint64_t now = om_mono_ns();

    for (struct session *s = sessions; s; s = s->next) {
        struct om_acct *a = &s->acct;
        uint64_t calls = GET(s->calls), kernels = 0, dt = now - a->rate_at_ns;

        if (a->rate_at_ns && dt < RATE_NS)
            continue;
        for (unsigned d = 0; d < OM_MAX_DEVICES; d++)
            kernels += GET(a->dev[d].kernels) + GET(a->dev[d].graphs);
        if (a->rate_at_ns) { /* 128 bits: past 1.8e7 calls between two ticks (a main thread
                              * held up a while), 64 would wrap */
            __atomic_store_n(
                &a->calls_per_s_milli,
                (uint64_t)((unsigned __int128)(calls - a->rate_calls) * 1000000000000ull / dt),
                __ATOMIC_RELAXED);
            __atomic_store_n(
                &a->kernels_per_s_milli,
                (uint64_t)((unsigned __int128)(kernels - a->rate_kernels) * 1000000000000ull / dt),
                __ATOMIC_RELAXED);
        }
        a->rate_at_ns = now;
        a->rate_calls = calls;
        a->rate_kernels = kernels;
    }
}

static bool used(const struct om_acct_dev *d, uint64_t bytes)
{
    return GET(d->kernels) || GET(d->graphs) || GET(d->gpu_ns) || GET(d->busy_since) ||
           GET(d->htod) || GET(d->dtoh) || GET(d->dtod) || bytes;
}

/* One client's records at `at` (its usage rows after `usage`): the counts written. */
static void snapshot(struct session *s, uint64_t now, struct om_stats_client *c,
                     struct om_stats_usage *usage, uint32_t *ret_nusage)
{
    struct om_acct *a = &s->acct;
    uint32_t mask = (uint32_t)GET(s->device_mask), n = 0;
    bool running = false;

    memset(c, 0, sizeof(*c));
    c->client_id = s->id;
    c->pid = (uint32_t)s->pid;
    c->calls = GET(s->calls);
    c->calls_per_s_milli = GET(a->calls_per_s_milli);
    c->kernels_per_s_milli = GET(a->kernels_per_s_milli);
    c->serve_ns = GET(a->serve_ns);
    c->gpu_wait_ns = GET(a->gpu_wait_ns);
    c->pinned_bytes = GET(s->pinned_bytes);
    uint64_t started = GET(a->started_ns);
    /* its worker may have begun after `now` was read: not 2^64 ns */
    c->connected_ns = started && now > started ? now - started : 0;
    for (unsigned d = 0; d < OM_MAX_DEVICES; d++) {
        const struct om_acct_dev *ad = &a->dev[d];
        uint64_t bytes = GET(s->device_bytes[d]);
        if (!(d < 32 && (mask & (1u << d))) && !used(ad, bytes))
            continue;
        struct om_stats_usage *u = &usage[n++];
        memset(u, 0, sizeof(*u));
        u->client_id = s->id;
        u->device = d;
        u->kernels = GET(ad->kernels);
        u->graphs = GET(ad->graphs);
        u->gpu_ns = GET(ad->gpu_ns); /* before busy_since: close_busy says why */
        uint64_t since = GET(ad->busy_since);
        if (since && now > since) {
            u->gpu_ns += now - since;
            running = true;
        }
        u->htod_bytes = GET(ad->htod);
        u->dtoh_bytes = GET(ad->dtoh);
        u->dtod_bytes = GET(ad->dtod);
        u->device_bytes = bytes;
    }
    c->state = GET(a->waiting_since) ? OM_STATE_WAITING
               : running             ? OM_STATE_RUNNING
                                     : OM_STATE_IDLE;
    *ret_nusage = n;
}

/* Messages of at most OM_MSG_MAX_PAYLOAD bytes, each with whole clients (a client's usage rows
 * travel with it: the decoder requires it). */
int om_account_send(int chan, struct session *sessions, uint32_t request_id)
{
    enum {
        CLIENT_MAX = sizeof(struct om_stats_client) + OM_MAX_DEVICES * sizeof(struct om_stats_usage)
    };
    uint8_t *msg = malloc(OM_MSG_MAX_PAYLOAD), *one = malloc(CLIENT_MAX);
    struct om_srv_stats h = {.request_id = request_id};
    struct om_stats_client *cs = NULL;
    struct om_stats_usage *us = NULL;
    uint64_t now = om_mono_ns();
    struct session *s = sessions;
    int rc = 0;

    if (!msg || !one) {
        free(msg);
        free(one);
        /* an empty answer still ends the daemon's wait */
        return om_msg_send(chan, OM_MSG_SRV_STATS, 0, &h, sizeof(h), -1) < 0 ? -EPIPE : -ENOMEM;
    }
    cs = malloc(OM_MSG_MAX_PAYLOAD);
    us = malloc(OM_MSG_MAX_PAYLOAD);
    if (!cs || !us) {
        rc = -ENOMEM;
        s = NULL; /* an empty answer */
    }
    for (;;) {
        size_t used_bytes = sizeof(h);
        h.nclients = h.nusage = 0;
        while (s) {
            struct om_stats_client c;
            uint32_t nu = 0;
            snapshot(s, now, &c, (struct om_stats_usage *)one, &nu);
            size_t add = sizeof(c) + nu * sizeof(struct om_stats_usage);
            if (used_bytes + add > OM_MSG_MAX_PAYLOAD)
                break; /* into the next message */
            cs[h.nclients++] = c;
            memcpy(&us[h.nusage], one, nu * sizeof(struct om_stats_usage));
            h.nusage += nu;
            used_bytes += add;
            s = s->next;
        }
        h.flags = s ? OM_STATS_MORE : 0;
        memcpy(msg, &h, sizeof(h));
        memcpy(msg + sizeof(h), cs, h.nclients * sizeof(*cs));
        memcpy(msg + sizeof(h) + h.nclients * sizeof(*cs), us, h.nusage * sizeof(*us));
        if (om_msg_send(chan, OM_MSG_SRV_STATS, 0, msg, used_bytes, -1) < 0) {
            rc = -EPIPE;
            break;
        }
        if (!s)
            break;
    }
    free(cs);
    free(us);
    free(msg);
    free(one);
    return rc;
}
