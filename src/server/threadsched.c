/* SPDX-License-Identifier: MIT */
/* How the kernel schedules a session's thread: its name, and its time slice
 * (OPENMPS_SERVER_SLICE_US). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/log.h"
#include "internal.h"

/*
 * A session's thread works in short bursts (a record, a launch) between sleeps. In B8, while
 * another process's threads took every core, the copies' waits for a core clustered at about
 * 3.75 ms (docs/benchmarks.md, thirteenth session): the time slice Linux's scheduler lets a
 * running thread finish on 16 CPUs before a woken one of equal weight runs. Since Linux 6.12 the
 * scheduler (EEVDF) takes a slice per thread (sched_setattr's sched_runtime for SCHED_OTHER,
 * 0.1 to 100 ms; no privilege needed, checked on Linux 6.18 as user nobody): a thread with a
 * shorter slice gets an earlier deadline, and a woken one may then preempt the running thread
 * instead of waiting for the end of its slice. Its share of the CPU does not change (that is its
 * weight, the nice value): only how soon it runs after a wake-up. OPENMPS_SERVER_SLICE_US asks for
 * that slice on every session thread; unset, the kernel's own. An older kernel ignores the
 * slice (or refuses it): the server says so once. Not yet measured on a GPU machine.
 */
struct om_sched_attr { /* struct sched_attr, SCHED_ATTR_SIZE_VER0 (sched_setattr(2)) */
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
};

static long slice_ns = -1; /* -1: not read yet; 0: the kernel's own */
static pthread_once_t slice_once = PTHREAD_ONCE_INIT;
static unsigned slice_said; /* __atomic: the outcomes logged, one bit each */

static void slice_setting(void)
{
    const char *v = getenv("OPENMPS_SERVER_SLICE_US");
    char *end = NULL;
    long us = v && *v ? strtol(v, &end, 10) : 0;

    slice_ns = 0;
    if (!v || !*v)
        return;
    if (*end || us < 100 || us > 100000) {
        om_warn("OPENMPS_SERVER_SLICE_US=%s is not a slice from 100 to 100000 µs: the kernel's "
                "own",
                v);
        return;
    }
    slice_ns = us * 1000;
}

/* Each outcome once (what, NULL: the slice set), with the error of a refused call. */
static void say_once(unsigned bit, const char *what, int err)
{
    if (__atomic_fetch_or(&slice_said, 1u << bit, __ATOMIC_RELAXED) & 1u << bit)
        return;
    if (!what)
        om_info("session threads run with a time slice of %ld µs (OPENMPS_SERVER_SLICE_US)",
                slice_ns / 1000);
    else if (err)
        om_warn("OPENMPS_SERVER_SLICE_US: %s (%s): the kernel's own slice", what, strerror(err));
    else
        om_warn("OPENMPS_SERVER_SLICE_US: %s: the kernel's own slice", what);
}

void om_thread_sched_session(void)
{
    struct om_sched_attr a = {0}, got = {0};

    pthread_setname_np(pthread_self(), "om-session"); /* top -H, ps -L: the clients' threads */
    pthread_once(&slice_once, slice_setting);
    if (!slice_ns)
        return;
    /* Everything but the slice as it is (the policy, the nice value OPENMPS_SERVER_NICE or an
     * operator gave, reset-on-fork): sched_setattr sets them all. */
    if (syscall(SYS_sched_getattr, 0, &a, sizeof(a), 0) != 0) {
        say_once(1, "cannot read the thread's scheduling", errno);
        return;
    }
    if (a.policy != SCHED_OTHER && a.policy != SCHED_BATCH && a.policy != SCHED_IDLE) {
        say_once(2, "the server runs under a real-time policy, which has no slice", 0);
        return;
    }
    a.size = sizeof(a);
    a.runtime = (uint64_t)slice_ns;
    if (syscall(SYS_sched_setattr, 0, &a, 0) != 0) {
        say_once(3, "the kernel refused it", errno);
        return;
    }
    /* Since 6.12 a fair thread's sched_runtime reads back its slice; before, 0. */
    if (syscall(SYS_sched_getattr, 0, &got, sizeof(got), 0) != 0 || got.runtime != a.runtime) {
        say_once(4, "this kernel keeps its own slice (a slice per thread needs Linux 6.12)", 0);
        return;
    }
    say_once(0, NULL, 0);
}
