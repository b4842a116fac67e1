/* SPDX-License-Identifier: MIT */
/*
 * Launch slots (OPENMPS_LAUNCH_SLOTS=K; off unless set): at most K session threads in the
 * driver's kernel launch at once.
 *
 * Why: the driver takes one launch at a time into a context, and a thread that waits for
 * another's launch spins (bench/launchers.cu on the H200: 4.6 µs of CPU a launch with one
 * launching thread, 9.1 with eight, 12.8 with sixteen; docs/benchmarks.md). Every session's
 * thread launches its client's kernels into the one context, so with many busy clients the
 * server pays that waiting in cores the clients need (B7 at 32 copies, B8).
 *
 * How: a session thread that finds no slot free does not wait for one. A launch needs no
 * answer, so the thread keeps the launch in its session's queue and goes on with the client's
 * next record. It issues the queue, in order, at a later launch that finds a slot free, and
 * before anything else of the session reaches the driver — any other call (exec.c), a launch
 * whose stream needs ordering work first, a change of device, the wait for the client's next
 * record (session.c) and the session's end — waiting for a slot then (spinning: the holders
 * are in a launch, a few µs). Only the session's own thread touches its queue, so the driver
 * sees the session's calls in the client's order, as without slots. A queued launch's error is
 * the session's asynchronous error, reported at its next synchronising call, as a posted
 * launch's is anyway.
 *
 * The queue holds QUEUE_BYTES of launches (their argument bytes included); a launch that does
 * not fit waits for a slot. OPENMPS_LAUNCH_SLOTS=defer (for tests): no slot is ever free for a
 * launch, so each waits in the queue until the session's next other call.
 */
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "exec.h"

#define QUEUE_BYTES (256u << 10)
#define ATTR_BYTES 72 /* a CUlaunchAttribute: an id, padding, a 64-byte value */

/* One queued launch, followed by its attributes and its argument bytes (8-byte aligned). */
struct queued {
    uint32_t size; /* of the whole entry */
    uint32_t nattrs;
    uint32_t args_len;
    bool ex;
    CUfunction f;
    unsigned grid[3], block[3], smem;
    CUstream st;
    uint64_t key;
};

struct om_launchq {
    size_t len; /* bytes queued in buf */
    unsigned count;
    uint64_t queued_total; /* launches that ever waited here (logged as the session ends) */
    _Alignas(8) uint8_t buf[QUEUE_BYTES];
};

enum { SLOTS_OFF = -1, SLOTS_DEFER = 0 };
static int max_slots = SLOTS_OFF;
static int in_launch; /* threads in the driver's launch now (__atomic) */

void om_launchq_init(void)
{
    const char *v = getenv("OPENMPS_LAUNCH_SLOTS");
    char *end;
    long k;

    if (!v || !*v)
        return;
    if (!strcmp(v, "defer")) {
        max_slots = SLOTS_DEFER;
        om_info("launch slots: every launch waits for its session's next other call "
                "(OPENMPS_LAUNCH_SLOTS=defer)");
        return;
    }
    k = strtol(v, &end, 10);
    if (*end || k < 1 || k > 1024) {
        om_warn("OPENMPS_LAUNCH_SLOTS=%s is not a count of threads from 1 to 1024: every "
                "thread launches at once",
                v);
        return;
    }
    max_slots = (int)k;
    om_info("launch slots: at most %d thread(s) in the driver's launch at once", max_slots);
}

static bool slot_try(void)
{
    int n = __atomic_load_n(&in_launch, __ATOMIC_RELAXED);

    while (n < max_slots)
        if (__atomic_compare_exchange_n(&in_launch, &n, n + 1, true, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return true;
    return false;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static void slot_wait(void)
{
    if (max_slots == SLOTS_DEFER)
        return; /* the queue's issue needs no slot in this mode (tests) */
    while (!slot_try())
        cpu_relax();
}

static void slot_give(void)
{
    if (max_slots != SLOTS_DEFER)
        __atomic_sub_fetch(&in_launch, 1, __ATOMIC_RELEASE);
}

/* The driver call itself, and what a launch that reached the driver is followed by. */
static CUresult launch_now(struct session *s, const struct om_launch *l)
{
    void *extra[5];
    size_t size = l->args_len;
    CUresult rc;

    extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
    extra[1] = (void *)l->args;
    extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
    extra[3] = &size;
    extra[4] = CU_LAUNCH_PARAM_END;
    if (l->ex) {
        struct om_launch_config cfg = {l->grid[0],       l->grid[1],  l->grid[2], l->block[0],
                                       l->block[1],      l->block[2], l->smem,    l->st,
                                       (void *)l->attrs, l->nattrs};
        rc = ((CUresult(*)(const struct om_launch_config *, CUfunction, void **, void **))REAL(
            cuLaunchKernelEx))(&cfg, l->f, NULL, l->args_len ? extra : NULL);
    } else {
        rc = ((CUresult(*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, CUstream, void **, void **))REAL(cuLaunchKernel))(
            l->f, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2],
            l->smem, l->st, NULL, l->args_len ? extra : NULL);
    }
    return rc;
}

/* What a launch the session made is followed by, when it reaches the driver or its queue: the
 * scheduler counts it on its stream from then (sched.c flushes the queue before it waits for
 * it), and its printf output is the session's. */
static void launched(struct session *s, const struct om_launch *l)
{
    om_sched_launched(s, l->st, l->key);
    om_output_launched(s); /* printf output flushed by no session's call is its */
}

/* Issues the session's queue, in order; the caller holds a slot. */
static void issue_queue(struct session *s)
{
    struct om_launchq *q = s->launchq;
    size_t at = 0;

    while (at < q->len) {
        const struct queued *e = (const struct queued *)(q->buf + at);
        const uint8_t *attrs = (const uint8_t *)(e + 1);
        struct om_launch l = {.ex = e->ex,
                              .f = e->f,
                              .grid = {e->grid[0], e->grid[1], e->grid[2]},
                              .block = {e->block[0], e->block[1], e->block[2]},
                              .smem = e->smem,
                              .st = e->st,
                              .key = e->key,
                              .attrs = attrs,
                              .nattrs = e->nattrs,
                              .args = attrs + (size_t)e->nattrs * ATTR_BYTES,
                              .args_len = e->args_len};
        CUresult rc = launch_now(s, &l);

        if (rc != CUDA_SUCCESS) {
            if (s->async_error == CUDA_SUCCESS)
                s->async_error = rc; /* reported at its next synchronising call */
            if (om_server_fatal(rc)) {
                om_err("client %d: a queued %s failed with CUresult %d, a fatal GPU fault",
                       (int)s->pid, e->ex ? "cuLaunchKernelEx" : "cuLaunchKernel", rc);
                om_server_fault(rc, s->pid);
            }
        }
        at += e->size;
    }
    q->len = 0;
    q->count = 0;
}

bool om_launch_flush(struct session *s)
{
    if (!s->launchq || !s->launchq->count)
        return false;
    slot_wait();
    issue_queue(s);
    slot_give();
    return true;
}

static size_t entry_size(const struct om_launch *l)
{
    return (sizeof(struct queued) + (size_t)l->nattrs * ATTR_BYTES + l->args_len + 7) & ~(size_t)7;
}

CUresult om_launch_issue(struct session *s, const struct om_launch *l)
{
    struct om_launchq *q = s->launchq;
    size_t size = entry_size(l);
    CUresult rc;

    if (max_slots == SLOTS_OFF) {
        if ((rc = launch_now(s, l)) == CUDA_SUCCESS)
            launched(s, l);
        return rc;
    }
    if (slot_try()) {
        if (q && q->count)
            issue_queue(s); /* what waited goes first */
        rc = launch_now(s, l);
        slot_give();
        if (rc == CUDA_SUCCESS)
            launched(s, l);
        return rc;
    }
    if (!q && !(q = s->launchq = calloc(1, sizeof(*q))))
        size = QUEUE_BYTES + 1; /* no room to queue it in: launched as without slots */
    if (!q || q->len + size > QUEUE_BYTES) {
        om_launch_flush(s);
        if (size > QUEUE_BYTES) {
            slot_wait();
            rc = launch_now(s, l);
            slot_give();
            if (rc == CUDA_SUCCESS)
                launched(s, l);
            return rc;
        }
    }
    struct queued *e = (struct queued *)(q->buf + q->len);
    *e = (struct queued){.size = (uint32_t)size,
                         .nattrs = l->nattrs,
                         .args_len = (uint32_t)l->args_len,
                         .ex = l->ex,
                         .f = l->f,
                         .grid = {l->grid[0], l->grid[1], l->grid[2]},
                         .block = {l->block[0], l->block[1], l->block[2]},
                         .smem = l->smem,
                         .st = l->st,
                         .key = l->key};
    memcpy(e + 1, l->attrs, (size_t)l->nattrs * ATTR_BYTES);
    memcpy((uint8_t *)(e + 1) + (size_t)l->nattrs * ATTR_BYTES, l->args, l->args_len);
    q->len += size;
    q->count++;
    q->queued_total++;
    launched(s, l);
    return CUDA_SUCCESS;
}

void om_launchq_free(struct session *s)
{
    if (!s->launchq)
        return;
    om_launch_flush(s);
    if (s->launchq->queued_total)
        om_info("client %d: %llu launch(es) waited for a launch slot", (int)s->pid,
                (unsigned long long)s->launchq->queued_total);
    free(s->launchq);
    s->launchq = NULL;
}
