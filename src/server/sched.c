/* SPDX-License-Identifier: MIT */
/* When a client stream's next operation goes to the GPU: at once, or after the long kernel
 * before it has finished (docs/driver-facts.md, "Hardware queues per context";
 * docs/architecture.md, "The fast path and the scheduler"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/log.h"
#include "../common/clock.h"
#include "internal.h"

/*
 * One context has a fixed number of hardware queues (CUDA_DEVICE_MAX_CONNECTIONS, at most 32,
 * which the daemon sets to 32 for its servers unless already set; docs/driver-facts.md). With more
 * client streams than queues, streams share queues, and an operation that depends on a kernel still
 * running (the next kernel of a chain, an event record, a copy of the result) waits at the head of
 * its queue and blocks every other stream queued behind it: chains then run in waves. Independent
 * kernels on a shared queue do run side by side; only the waiting dependent operation hurts.
 *
 * So, while the client streams outnumber the queues, an operation whose stream's last
 * operation was a kernel predicted to run long is held here, in the client's worker, until
 * that kernel has finished; then it goes to the GPU with nothing left to wait for. Only
 * clients whose work is all on their default stream are held (may_hold): their worker's order
 * is their stream's order, so the hold delays nothing of theirs that could have run. A client
 * with streams of its own is never held (holding one of its streams in its worker would stop
 * its other streams). Kernels predicted short (their measured durations) go straight through,
 * and with no more streams than queues nothing here costs more than a comparison.
 *
 * Completion is watched with cuStreamQuery, which enqueues nothing: an event recorded to
 * watch the kernel would itself be the dependent operation that blocks the queue.
 *
 * Durations: per kernel handle (module images are loaded once per server, so every client of
 * a program shares its kernels' handles), an average of launch to completion seen, taken from
 * waits that saw the kernel running (or, done at the first look, only when that proves it
 * short: the client may have computed for a while before its next call). Every 32nd decision
 * on a kernel predicted short waits anyway, so a kernel that became long is noticed.
 *
 * Fair share (issue #12): the same hold also applies, whatever the stream count, while two
 * holdable clients launch kernels not known to be short (within the last 100 ms,
 * OPENMPS_FAIR_WINDOW_MS).
 * Then each of them has one long kernel in the GPU's queues at a time, so the block scheduler,
 * which starts the oldest pending kernel's blocks first, serves them in turn: a client that
 * queues twenty kernels back to back gets no more of the GPU than one that waits for each.
 * One client alone, or clients of short kernels, are never held for it.
 *
 * A wait is bounded (twice the prediction plus 50 ms; 2 s for a kernel never measured): a
 * kernel that spins until something its client does later (a call that sets a flag it polls)
 * would otherwise never finish. Past the bound the operation goes to the GPU and queues there
 * as it would without this scheduler, and the log says so.
 */

/* A kernel running at most this long blocks a shared queue briefly enough to let it. */
#define SHORT_US 500
#define RESAMPLE_EVERY 32
#define UNKNOWN_BOUND_NS (2000ull * 1000 * 1000)
#define MARGIN_NS (50ull * 1000 * 1000)
#define POLL_MIN_NS (20ull * 1000)
#define POLL_MAX_NS (1000ull * 1000)
#define TABLE_SLOTS 4096 /* kernels whose durations are kept; a power of two */
#define PROBES 16
#define CONTENTION_MS 100 /* OPENMPS_FAIR_WINDOW_MS: tests make it long */

enum mode { MODE_AUTO, MODE_OFF, MODE_ALWAYS };

static enum mode mode = MODE_AUTO;
static int queues = 8;     /* the driver's default when CUDA_DEVICE_MAX_CONNECTIONS is unset */
static int live_streams;   /* client streams that exist now (__atomic) */
static int announced;      /* the log said that scheduling started (__atomic) */
static uint64_t held_ops;  /* operations held, for the log at exit (__atomic) */
static uint64_t gave_up;   /* waits that reached their bound (__atomic) */
static int fair_announced; /* the log said that fair share started (__atomic) */
static uint64_t contention_ns = CONTENTION_MS * 1000000ull;
/* The last two holdable clients that launched a kernel not known short, and when (__atomic;
 * racing updates may mix a pair: it only starts or ends holding a little early or late). */
static struct {
    uint32_t client;
    uint64_t ns;
} contenders[2];

static struct {
    uint64_t kernel; /* 0: free (__atomic) */
    uint32_t avg_us; /* 0: not measured yet (__atomic) */
} durations[TABLE_SLOTS];

/* Session workers running now (session.c counts them; fair share needs two). */
static int live_workers;

int om_sched_workers(void)
{
    return __atomic_load_n(&live_workers, __ATOMIC_ACQUIRE);
}

int om_sched_workers_add(int delta)
{
    return __atomic_add_fetch(&live_workers, delta, __ATOMIC_ACQ_REL);
}

void om_sched_init(void)
{
    const char *m = getenv("OPENMPS_SCHED");
    const char *q = getenv("CUDA_DEVICE_MAX_CONNECTIONS");

    if (m && !strcmp(m, "off"))
        mode = MODE_OFF;
    else if (m && !strcmp(m, "always"))
        mode = MODE_ALWAYS;
    else if (m && *m && strcmp(m, "auto"))
        om_warn("OPENMPS_SCHED=%s is not auto, off or always: using auto", m);
    if (q && atoi(q) > 0)
        queues = atoi(q) > OM_SCHED_MAX_QUEUES ? OM_SCHED_MAX_QUEUES : atoi(q);
    if ((m = getenv("OPENMPS_FAIR_WINDOW_MS")) && atoi(m) > 0)
        contention_ns = (uint64_t)atoi(m) * 1000000ull;
    om_info("scheduling: %s, %d hardware queues per context",
            mode == MODE_OFF      ? "off"
            : mode == MODE_ALWAYS ? "always"
                                  : "auto",
            queues);
}

void om_sched_report(void)
{
    uint64_t held = __atomic_load_n(&held_ops, __ATOMIC_RELAXED);

    if (held)
        om_info("scheduling: held %llu operation(s) behind long kernels; %llu wait(s) reached "
                "their bound",
                (unsigned long long)held,
                (unsigned long long)__atomic_load_n(&gave_up, __ATOMIC_RELAXED));
}

static bool active(void)
{
    if (mode == MODE_OFF)
        return false;
    if (mode == MODE_ALWAYS)
        return true;
    int live = __atomic_load_n(&live_streams, __ATOMIC_RELAXED);
    if (live <= queues)
        return false;
    /* read first: an exchange on every call would bounce the line between the workers */
    if (!__atomic_load_n(&announced, __ATOMIC_RELAXED) &&
        !__atomic_exchange_n(&announced, 1, __ATOMIC_RELAXED))
        om_info("scheduling: %d client streams share %d hardware queues; operations behind long "
                "kernels now wait in the server",
                live, queues);
    return true;
}

/* A holdable client launched a kernel not known to be short. */
static void contend(const struct session *s, uint64_t now)
{
    if (__atomic_load_n(&contenders[0].client, __ATOMIC_RELAXED) != s->id) {
        __atomic_store_n(&contenders[1].client,
                         __atomic_load_n(&contenders[0].client, __ATOMIC_RELAXED),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&contenders[1].ns, __atomic_load_n(&contenders[0].ns, __ATOMIC_RELAXED),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&contenders[0].client, s->id, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&contenders[0].ns, now, __ATOMIC_RELAXED);
}

/* Two clients of long kernels launched lately: fair share holds (see the top). */
static bool contended(uint64_t now)
{
    uint32_t a = __atomic_load_n(&contenders[0].client, __ATOMIC_RELAXED);
    uint32_t b = __atomic_load_n(&contenders[1].client, __ATOMIC_RELAXED);
    uint64_t tb = __atomic_load_n(&contenders[1].ns, __ATOMIC_RELAXED);

    if (mode == MODE_OFF || a == b || !tb || now - tb > contention_ns)
        return false;
    if (!__atomic_load_n(&fair_announced, __ATOMIC_RELAXED) &&
        !__atomic_exchange_n(&fair_announced, 1, __ATOMIC_RELAXED))
        om_info("scheduling: clients of long kernels contend; each one's next operation waits "
                "for its last long kernel (fair share)");
    return true;
}

static size_t slot_of(uint64_t kernel)
{
    return (size_t)((kernel * 0x9e3779b97f4a7c15ull) >> 40) & (TABLE_SLOTS - 1);
}

/* The average duration of a kernel in µs; 0 when never measured. */
static uint32_t predicted_us(uint64_t kernel)
{
    size_t i = slot_of(kernel);

    for (int p = 0; p < PROBES; p++, i = (i + 1) & (TABLE_SLOTS - 1)) {
        uint64_t k = __atomic_load_n(&durations[i].kernel, __ATOMIC_ACQUIRE);
        if (k == kernel)
            return __atomic_load_n(&durations[i].avg_us, __ATOMIC_RELAXED);
        if (k == 0)
            return 0;
    }
    return 0;
}

static void learn(uint64_t kernel, uint64_t ns)
{
    uint32_t us = ns / 1000 > UINT32_MAX ? UINT32_MAX : (uint32_t)(ns / 1000);
    size_t i = slot_of(kernel);

    if (us == 0)
        us = 1;
    for (int p = 0; p < PROBES; p++, i = (i + 1) & (TABLE_SLOTS - 1)) {
        uint64_t k = __atomic_load_n(&durations[i].kernel, __ATOMIC_ACQUIRE);
        if (k == 0) {
            uint64_t expect = 0;
            if (__atomic_compare_exchange_n(&durations[i].kernel, &expect, kernel, false,
                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                k = kernel;
            else
                k = expect;
        }
        if (k == kernel) {
            /* Racing updates from two clients may lose one sample: harmless. */
            uint32_t old = __atomic_load_n(&durations[i].avg_us, __ATOMIC_RELAXED);
            uint32_t avg = old ? (uint32_t)(((uint64_t)old * 3 + us) / 4) : us;
            __atomic_store_n(&durations[i].avg_us, avg ? avg : 1, __ATOMIC_RELAXED);
            return;
        }
    }
    /* The table is full around this slot: the kernel stays unmeasured (always waited for). */
}

static struct om_sched_stream *find(struct session *s, CUstream st, bool add)
{
    for (size_t i = 0; i < s->nsched; i++)
        if (s->sched[i].stream == st)
            return &s->sched[i];
    if (!add)
        return NULL;
    if (s->nsched == s->sched_cap) {
        size_t cap = s->sched_cap ? s->sched_cap * 2 : 4;
        struct om_sched_stream *n = realloc(s->sched, cap * sizeof(*n));
        if (!n)
            return NULL; /* not scheduled: the operation queues on the GPU as without us */
        s->sched = n;
        s->sched_cap = cap;
    }
    s->sched[s->nsched] = (struct om_sched_stream){.stream = st};
    return &s->sched[s->nsched++];
}

void om_sched_stream_created(void)
{
    __atomic_add_fetch(&live_streams, 1, __ATOMIC_RELAXED);
}

void om_sched_stream_destroyed(struct session *s, CUstream st)
{
    struct om_sched_stream *t = find(s, st, false);

    __atomic_sub_fetch(&live_streams, 1, __ATOMIC_RELAXED);
    if (t)
        *t = s->sched[--s->nsched];
}

void om_sched_session_free(struct session *s)
{
    free(s->sched);
    s->sched = NULL;
    s->nsched = s->sched_cap = 0;
}

/* Whether holding this client's operations costs only this client's waiting: its work is all
 * on its default stream, so its worker's order is that stream's order and nothing of it could
 * have run meanwhile. A client with streams of its own overlaps them; holding one stream's
 * operation in its worker would hold back the others, so its work is never held. */
static bool may_hold(const struct session *s)
{
    return s->own[OM_H_STREAM].n == 0;
}

void om_sched_launched(struct session *s, CUstream st, uint64_t kernel)
{
    struct om_sched_stream *t;
    uint32_t pred;

    /* a client alone is held only by the queues' scheduling: not a line more than before */
    if (mode == MODE_OFF || (om_sched_workers() < 2 && !active())) {
        if ((t = find(s, st, false)))
            t->kernel = 0; /* no stale kernel for when scheduling starts again */
        return;
    }
    if (!may_hold(s)) {
        /* never held: its last kernel is kept only for om_sched_may_follow, while the queues
         * are shared */
        bool shared = active();
        if ((t = find(s, st, shared)))
            t->kernel = shared ? kernel : 0;
        return;
    }
    if (!(t = find(s, st, true)))
        return;
    t->kernel = kernel;
    t->launched_ns = om_mono_ns();
    pred = predicted_us(kernel);
    if (!pred || pred >= SHORT_US)
        contend(s, t->launched_ns);
}

static void pause_ns(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                          .tv_nsec = (long)(ns % 1000000000ull)};

    nanosleep(&ts, NULL);
}

/* The completion word's write (syncword.c) waits for st's last kernel like any dependent
 * operation, but it is not held: holding it would bring back the wake-ups the word removes, and
 * fair share has nothing to gain from it (it is no kernel). So it is declined where
 * om_sched_before would hold a dependent operation for the shared queues' sake: the queues are
 * shared, st's last kernel still may run (its successor has not gone), and that kernel is
 * predicted long or, for a client the scheduler may hold, not measured. A client with streams
 * of its own is never held, and its operations go behind its kernels whatever they are; its
 * write goes too unless its kernel is known long (measured for a holdable client: module
 * images are shared, so are kernel handles). */
bool om_sched_may_follow(struct session *s, CUstream st)
{
    struct om_sched_stream *t;
    uint32_t pred;

    if (!active() || !s->nsched || !(t = find(s, st, false)) || !t->kernel)
        return true;
    pred = predicted_us(t->kernel);
    return pred ? pred < SHORT_US : !may_hold(s);
}

void om_sched_before(struct session *s, CUstream st)
{
    CUresult (*query)(CUstream) = (CUresult(*)(CUstream))om_server_real[OM_IDX_cuStreamQuery];
    struct om_sched_stream *t;
    uint64_t kernel, start, bound;
    uint32_t pred;

    if (!s->nsched || !(t = find(s, st, false)) || !t->kernel)
        return;
    kernel = t->kernel;
    t->kernel = 0; /* whatever happens below, the next operation follows this one */
    if (!may_hold(s) || (!active() && !contended(om_mono_ns())))
        return;
    pred = predicted_us(kernel);
    if (pred && pred < SHORT_US && ++t->short_runs % RESAMPLE_EVERY)
        return;
    start = om_mono_ns();
    bound = pred ? 2 * (uint64_t)pred * 1000 + MARGIN_NS : UNKNOWN_BOUND_NS;
    for (bool counted = false;; counted = true) {
        CUresult rc = query(st);
        uint64_t t_now = om_mono_ns();
        if (rc != CUDA_ERROR_NOT_READY) {
            /* Launch to completion seen, when it was seen running; done at the first look, the
             * time is only an upper bound (the client may have computed meanwhile): it counts
             * only when it proves the kernel short. */
            uint64_t ns = t_now - t->launched_ns;
            if (rc == CUDA_SUCCESS && (counted || ns < SHORT_US * 1000ull))
                learn(kernel, ns);
            return; /* an error surfaces through the operation itself */
        }
        if (!counted)
            __atomic_add_fetch(&held_ops, 1, __ATOMIC_RELAXED);
        if (__atomic_load_n(&s->stop, __ATOMIC_RELAXED))
            return; /* the session ends: nothing more goes to the GPU for it */
        if (t_now - start > bound) {
            char usual[32] = "unknown";
            if (pred)
                snprintf(usual, sizeof(usual), "%u us", pred);
            __atomic_add_fetch(&gave_up, 1, __ATOMIC_RELAXED);
            om_info("client %d: stopped waiting for its kernel after %llu ms (its usual "
                    "duration: %s); the next operation queues behind it",
                    (int)s->pid, (unsigned long long)((t_now - start) / 1000000), usual);
            return;
        }
        /* Poll often early (short kernels), rarely late (long ones): at most 1 ms late. */
        uint64_t step = (t_now - t->launched_ns) / 16;
        pause_ns(step < POLL_MIN_NS ? POLL_MIN_NS : step > POLL_MAX_NS ? POLL_MAX_NS : step);
    }
}
