/* SPDX-License-Identifier: MIT */
/* How the server's threads wait for the GPU: briefly spinning, then asleep in the driver. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "../common/clock.h"
#include "../common/config.h"
#include "../common/log.h"

/*
 * A context's default scheduling (CU_CTX_SCHED_AUTO) spins the CPU in every synchronize while
 * the process has fewer contexts than CPUs, which the server always has. With a hundred
 * clients each waiting for a long kernel, a hundred server threads would spin on a few cores
 * and starve the threads that launch the other clients' kernels: those launches then land late
 * and the clients' kernels look twice as long (B1 at 48 and 128 clients, issue #4). So the
 * server's contexts block on an interrupt (CU_CTX_SCHED_BLOCKING_SYNC, set at start), and a wait
 * first polls for a short while, so that a short kernel's completion is not paid with the
 * interrupt's wake-up.
 */

#define SPIN_NS 100000ull /* 100 µs: a short kernel, or a small copy, is done by then */

/* OPENMPS_SERVER_SYNC: blocking (the default: poll, then sleep), yield (the driver's spin
 * with sched_yield) or spin (the driver's own spin): for measuring the choice. */
static unsigned sync_flags = CU_CTX_SCHED_BLOCKING_SYNC;

/*
 * Spinning is worth its core only while cores are idle. A session's thread spins 50 µs for its
 * client's next record and 100 µs for the GPU: with framework clients that launch every 5-30
 * µs, each busy client keeps a server thread spinning all the time, so past half as many busy
 * clients as cores, the clients (each a busy Python thread) and the spinning threads contend
 * for the cores. Measured on the H200 machine's 16 cores (B7, 16 PyTorch copies): with every
 * thread allowed to spin, 12 threads waited for a core on average and the copies made 10 200
 * images/s; with none spinning, 6.7 waited and they made 22 400 (docs/benchmarks.md).
 *
 * So by default (auto) a thread may spin only while the busy clients and the spinning threads
 * together leave a core free for it: spinning + busy clients < CPUs of the server. A client is
 * busy from its record until its thread has found nothing for OM_BUSY_IDLE_MS (its client then
 * computes, sleeps, or waits for the GPU in a call this thread serves). OPENMPS_SPIN_THREADS=N
 * caps the spinning threads at N instead, whatever the clients do; =all lets every thread spin
 * (what B1-B6 were measured with before the policy): for measuring the choice.
 *
 * The auto rule sees only the server's own clients. OPENMPS_SPIN_THREADS=load adds the rest of
 * the machine: a thread may spin only while no thread of the machine waits for a CPU, by
 * /proc/loadavg's count of runnable threads (the asking thread, running, among them: no more
 * than the CPUs), which a thread of the server reads every millisecond. (Until 2026-11-29 it
 * asked for an idle CPU besides its own, which in B8's steady state, 16-17 runnable threads on
 * 16 CPUs, could also have declined many completion words.) A burst of another process (B8's
 * newcomer: numpy's thread pool on every core) then stops the spinning at once, leaving the cores
 * to whoever has work, as NVIDIA's MPS clients keep theirs only while cores are idle (issue #23).
 * For measuring against auto.
 */
enum { SPIN_AUTO = -1, SPIN_ALL = -2 };
static int spin_max = SPIN_AUTO;
static int spin_cpus = 1;    /* CPUs the server may run on */
static int spinning;         /* threads spinning now (__atomic) */
static int busy_clients;     /* sessions whose client is busy (__atomic) */
static bool spin_load;       /* OPENMPS_SPIN_THREADS=load */
static int machine_runnable; /* the machine's runnable threads, sampled (__atomic) */

bool om_spin_take(void)
{
    int limit;

    if (spin_max == SPIN_ALL)
        return true;
    if (spin_load && __atomic_load_n(&machine_runnable, __ATOMIC_RELAXED) > spin_cpus)
        return false; /* a thread of the machine waits for a CPU */
    limit =
        spin_max >= 0 ? spin_max : spin_cpus - __atomic_load_n(&busy_clients, __ATOMIC_RELAXED) - 1;
    if (limit <= 0)
        return false;
    if (__atomic_add_fetch(&spinning, 1, __ATOMIC_RELAXED) <= limit)
        return true;
    __atomic_sub_fetch(&spinning, 1, __ATOMIC_RELAXED);
    return false;
}

void om_spin_give(void)
{
    if (spin_max != SPIN_ALL)
        __atomic_sub_fetch(&spinning, 1, __ATOMIC_RELAXED);
}

/*
 * A client that spins for its completion word (syncword.c) spins on its own thread, one of the
 * busy clients above, whose cores the count already leaves them: it takes no place of the
 * server's spinning threads (it did until 2026-11-29: in B8 the session threads waiting for
 * their clients' next records held the places, and of 8 850 synchronizes per copy about 12
 * were answered by the word). It may spin while the busy clients fit in the server's CPUs — as
 * a native program's synchronize spins while its process has fewer contexts than CPUs — and,
 * with =load, while no thread of the machine waits for a CPU. Past that (B7 with more copies than
 * cores) a spinning client would take the core a server thread needs to launch another's
 * kernels, so the server waits for it instead.
 */
bool om_spin_client_may(void)
{
    if (spin_max == SPIN_ALL)
        return true;
    if (spin_load && __atomic_load_n(&machine_runnable, __ATOMIC_RELAXED) > spin_cpus)
        return false;
    return __atomic_load_n(&busy_clients, __ATOMIC_RELAXED) < spin_cpus;
}

static __thread bool thread_busy; /* this session thread's client counts as busy */

int om_busy_clients(void)
{
    return __atomic_load_n(&busy_clients, __ATOMIC_RELAXED);
}

void om_spin_client_busy(bool busy)
{
    if (busy == thread_busy)
        return;
    thread_busy = busy;
    __atomic_add_fetch(&busy_clients, busy ? 1 : -1, __ATOMIC_RELAXED);
}

/* OPENMPS_SPIN_THREADS=load's sampler: the machine's runnable threads every millisecond, less
 * itself (it runs while it reads). */
static void *load_sampler(void *arg)
{
    int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    char line[128];

    (void)arg;
    if (fd < 0) {
        om_warn("spinning: cannot read /proc/loadavg (%s): OPENMPS_SPIN_THREADS=load spins as "
                "auto does",
                strerror(errno));
        return NULL;
    }
    for (;;) {
        ssize_t n = pread(fd, line, sizeof(line) - 1, 0);
        int running;
        line[n > 0 ? n : 0] = '\0';
        if ((running = om_parse_loadavg_running(line)) > 0)
            __atomic_store_n(&machine_runnable, running - 1, __ATOMIC_RELAXED);
        usleep(1000);
    }
    return NULL;
}

static void spin_init(void)
{
    const char *n = getenv("OPENMPS_SPIN_THREADS");
    cpu_set_t set;
    pthread_t t;
    char *end;
    long x;

    spin_cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
    if (n && !strcmp(n, "load")) {
        spin_load = pthread_create(&t, NULL, load_sampler, NULL) == 0;
        if (spin_load)
            pthread_detach(t);
        om_info("spinning: while busy clients and spinning threads leave one of %d CPU(s) free, "
                "and no thread of the machine waits for a CPU (OPENMPS_SPIN_THREADS=load)%s",
                spin_cpus, spin_load ? "" : "; no sampler thread: as auto");
        return;
    }
    if (!n || !*n || !strcmp(n, "auto")) {
        om_info("spinning: while busy clients and spinning threads leave one of %d CPU(s) free",
                spin_cpus);
        return;
    }
    if (!strcmp(n, "all")) {
        spin_max = SPIN_ALL;
        om_info("spinning: every thread may spin (OPENMPS_SPIN_THREADS=all)");
        return;
    }
    x = strtol(n, &end, 10);
    if (*end || x < 0 || x > 1 << 20) {
        om_warn("OPENMPS_SPIN_THREADS=%s is not auto, load, all or a count of threads: auto", n);
        return;
    }
    spin_max = (int)x;
    om_info("spinning: at most %d server thread(s) at once (OPENMPS_SPIN_THREADS)", spin_max);
}

unsigned om_wait_context_flags(void)
{
    static pthread_once_t spin_once = PTHREAD_ONCE_INIT;
    const char *v = getenv("OPENMPS_SERVER_SYNC");

    pthread_once(&spin_once, spin_init); /* once for the server, not per device */

    if (v && !strcmp(v, "yield"))
        sync_flags = CU_CTX_SCHED_YIELD;
    else if (v && !strcmp(v, "spin"))
        sync_flags = CU_CTX_SCHED_SPIN;
    return sync_flags;
}

/*
 * Some waits that end in a query end with the driver's synchronize as well, which then returns
 * at once, for two things the driver does only in a synchronize:
 *  - it hands memory freed with cuMemFreeAsync back to its pool (and the pool's memory above its
 *    release threshold back to the device; measured on the H100, tests/gpu/probe/pool_trim.cu:
 *    32 MiB freed and synchronized with a query loop stay reserved after cuMemPoolTrimTo(0),
 *    natively too): once a session's thread freed pool memory, all its waits (settle_pools);
 *  - it prints the kernels' printf output, which must come out in this worker for this client's
 *    answer (output.c): the waits of a client's cuCtxSynchronize (om_wait_flush_output). Seen
 *    without it: printf_assert's 136 device lines lost on the H200 (2026-11-27), flushed by
 *    nobody before the client exited. Not every wait: the synchronize costs 3 to 5 µs there
 *    (B2's launch + synchronize went from 10.5 to 15.5 µs, its 4-byte copy from 8.1 to 11.5
 *    when every wait had it). After any wait of a client that owns printing kernels whose lines
 *    may not be flushed yet, output.c makes the driver flush (om_output_flush_done), so that a
 *    stream or event synchronize shows them as natively; a client that prints nothing pays
 *    nothing.
 */
static __thread bool settle_pools, flush_output;

void om_wait_settle_pools(void)
{
    settle_pools = true;
}

bool om_wait_settles_pools(void)
{
    return settle_pools;
}

void om_wait_flush_output(bool on)
{
    flush_output = on;
}

/* Streams and events are both pointers to the driver, and the two pairs of calls take one. */
typedef CUresult (*handle_call)(void *);

/* Asleep in the driver: the client waits too (in its call), so it is not busy meanwhile. */
static CUresult sleep_in(handle_call sync, void *h)
{
    bool was = thread_busy;
    CUresult rc;

    om_spin_client_busy(false);
    rc = sync(h);
    om_spin_client_busy(was);
    return rc;
}

/* *ret_start: when it began, for the accounting (account.c; 0 off a session's worker). */
static CUresult wait_gpu(void *h, int query_index, int sync_index, uint64_t *ret_start)
{
    handle_call query = (handle_call)om_server_real[query_index];
    handle_call sync = (handle_call)om_server_real[sync_index];
    uint64_t start = om_mono_ns();
    CUresult rc;

    *ret_start = om_account_wait_begin(start); /* the client waits for the GPU now */
    if (sync_flags != CU_CTX_SCHED_BLOCKING_SYNC)
        return sync(h);
    if (om_spin_take()) {
        while ((rc = query(h)) == CUDA_ERROR_NOT_READY && om_mono_ns() - start <= SPIN_NS)
            ;
        om_spin_give();
        if (rc != CUDA_ERROR_NOT_READY) /* then the synchronize where it matters (above) */
            return rc == CUDA_SUCCESS && (settle_pools || flush_output) ? sync(h) : rc;
    }
    return sleep_in(sync, h);
}

/* A wait, then the printing kernels' lines its client owns flushed for its answer (above). */
static CUresult wait_for(void *h, int query_index, int sync_index, uint64_t *ret_start)
{
    CUresult rc = wait_gpu(h, query_index, sync_index, ret_start);

    if (rc == CUDA_SUCCESS && om_output_wants_flush())
        om_output_flush_done();
    return rc;
}

CUresult om_wait_stream(CUstream st)
{
    uint64_t t0;
    CUresult rc = wait_for(st, OM_IDX_cuStreamQuery, OM_IDX_cuStreamSynchronize, &t0);

    om_account_waited(t0, st, false); /* its busy period ends (an error ended its work too) */
    return rc;
}

CUresult om_wait_event(CUevent ev)
{
    uint64_t t0;
    CUresult rc = wait_for(ev, OM_IDX_cuEventQuery, OM_IDX_cuEventSynchronize, &t0);

    om_account_waited(t0, NULL, rc == CUDA_SUCCESS); /* the streams it may have been on */
    return rc;
}
