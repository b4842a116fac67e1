/* SPDX-License-Identifier: MIT */
/* Kernel output (printf, device-side assert messages): caught where the driver writes it, and
 * sent to the client it belongs to. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/clock.h"
#include "../common/image.h"
#include "../common/log.h"
#include "../common/msg.h"
#include "openmps/protocol.h"
#include "internal.h"

/*
 * Measured (tests/gpu/probe, driver 580.159.04): the driver prints the output of device-side
 * printf with vfprintf(stdout, ...) and then fflush(stdout), from the thread whose call made it
 * flush (a synchronising call, a launch, a module load). The server interposes vfprintf and
 * fflush (exported from the executable, which the dlopen'ed driver binds to first), keeps what
 * the driver prints in a session's buffer, and marks that session's next answer; the client
 * then takes the text and writes it to its own stdout, in order with the program's output, as
 * the driver would have.
 *
 * Whose lines they are: the driver's printf buffer is the context's, shared by every client,
 * and a flush prints whatever any client's kernels left in it, in whichever thread flushed. So
 * the kernels that may print (their image names vprintf: om_output_image_prints) take turns
 * between sessions: one session at a time, the print owner, may have printing kernels whose
 * lines were not flushed yet, and every line the driver prints meanwhile is the owner's, whatever
 * thread's call flushed it. Another session's printing launch first takes the ownership over
 * (handover): it waits for the owner's printing kernels (an event recorded after each, per
 * stream), makes the driver flush them (a synchronize of an idle stream of each device they ran
 * on: the lines go to the owner), waits for a flush another thread has under way, and only then
 * launches. Two printing clients therefore do not run their printing kernels at the same
 * moment; their other kernels, and every client that does not print, run as before.
 *
 * Which kernels may print: om_output_image_prints, once per image the server loads, looks for
 * "vprintf" in the entries of a fatbin the server's GPUs may run, decompressed (nvcc compresses
 * them, LZ4 or Zstandard: common/fatbin.c), or in the PTX or cubin given alone.
 *
 * Without an owner (no printing kernel launched yet, or kernels whose image could not be looked
 * into: a compressed entry that cannot be read, said once), lines go to the session whose call
 * flushed them, and lines flushed in a thread of no session (the main loop's idle queries) to the
 * session that launched last: exact for one printing client alone, a guess beside others.
 *
 * What the driver writes on stderr (the message of a failed device-side assert, "file:line:
 * kernel: block: [..], thread: [..] Assertion `..` failed.", from the same device buffer, at the
 * synchronising call that then answers CUDA_ERROR_ASSERT) goes the same way into the session's
 * errout, and the client writes it on its own stderr. The assert ends the server for every
 * client (the context is unusable): the worker's answer says output waits, but the client's call
 * that would take it races with the main loop ending the session, so the ending sends what is
 * left first (om_output_deliver, OUTPUT messages before TERMINATED).
 */

/* Bytes a session keeps for its client at most; the rest is dropped and counted. */
#define OUTPUT_MAX (4u << 20)

static __thread struct session *output_session;

/* Every session's output buffer, the stray buffer and the owner as vfprintf reads it. */
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
/* What the driver prints in a thread of no session, without an owner: kept for the session that
 * launched last, which takes it at its next answer. */
static char *stray;
static size_t stray_len, stray_cap;
static struct session *last_launcher;

/* The print owner and its fences: held across a printing launch and a handover. */
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;
static struct session *print_owner; /* __atomic; changed under print_lock and out_lock */
struct fence {
    CUstream stream; /* where the owner launched printing kernels (the server's stream) */
    CUevent event;   /* recorded after the last of them */
    int dev;
    bool active; /* lines of its kernels may not be flushed yet (om_output_flush_done) */
    bool done;   /* om_output_flush_done: done before its flush */
};
static struct fence *fences;
static size_t nfences, fences_cap;
static size_t nactive; /* fences active (__atomic: om_output_wants_flush reads it unlocked) */
static CUstream flush_stream[OM_MAX_DEVICES]; /* idle: its synchronize flushes the device's */
/* Threads between a vfprintf of the driver's and its fflush (a flush under way). */
static int flushing;
static __thread bool in_flush;
static __thread bool delivering; /* om_output_deliver's own taking */

void om_output_launched(struct session *s)
{
    if (__atomic_load_n(&last_launcher, __ATOMIC_RELAXED) != s)
        __atomic_store_n(&last_launcher, s, __ATOMIC_RELAXED);
}

/* Appends to a buffer of at most OUTPUT_MAX bytes; false: no room (out_lock held). */
static bool append(char **buf, size_t *len, size_t *cap, const char *fmt, va_list ap, int n)
{
    if (*len + (size_t)n + 1 > OUTPUT_MAX)
        return false;
    if (*len + (size_t)n + 1 > *cap) {
        size_t c = *cap ? *cap : 4096;
        while (c < *len + (size_t)n + 1)
            c *= 2;
        char *p = realloc(*buf, c);
        if (!p)
            return false;
        *buf = p;
        *cap = c;
    }
    vsnprintf(*buf + *len, (size_t)n + 1, fmt, ap);
    __atomic_store_n(len, *len + (size_t)n, __ATOMIC_RELEASE); /* read unlocked: pending */
    return true;
}

void om_output_bind(struct session *s)
{
    output_session = s;
}

static int real_vfprintf(FILE *f, const char *fmt, va_list ap)
{
    static int (*real)(FILE *, const char *, va_list);

    if (!real)
        real = (int (*)(FILE *, const char *, va_list))dlsym(RTLD_NEXT, "vfprintf");
    return real ? real(f, fmt, ap) : -1;
}

/* What the driver writes on stderr: the owner's, else the session whose call flushed it, else the
 * session that launched last (out_lock held). False: nobody's. */
static bool append_err(const char *fmt, va_list ap, int n)
{
    struct session *s = __atomic_load_n(&print_owner, __ATOMIC_ACQUIRE);

    if (!s)
        s = output_session;
    if (!s)
        s = __atomic_load_n(&last_launcher, __ATOMIC_RELAXED);
    if (!s)
        return false;
    if (!append(&s->errout, &s->errout_len, &s->errout_cap, fmt, ap, n))
        s->output_dropped += (uint64_t)n;
    return true;
}

__attribute__((visibility("default"))) int vfprintf(FILE *f, const char *fmt, va_list ap)
{
    struct session *s;
    va_list copy;
    int n;

    if (f != stdout && f != stderr)
        return real_vfprintf(f, fmt, ap);
    va_copy(copy, ap);
    n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n <= 0)
        return n;
    if (f == stderr) {
        bool taken;
        pthread_mutex_lock(&out_lock);
        taken = append_err(fmt, ap, n);
        pthread_mutex_unlock(&out_lock);
        return taken ? n : real_vfprintf(f, fmt, ap); /* nobody's: the server's own stderr */
    }
    if (!in_flush) { /* the driver's flush has begun in this thread; its fflush ends it */
        in_flush = true;
        __atomic_add_fetch(&flushing, 1, __ATOMIC_ACQ_REL);
    }
    pthread_mutex_lock(&out_lock);
    s = __atomic_load_n(&print_owner, __ATOMIC_ACQUIRE);
    if (!s)
        s = output_session;
    if (s) {
        if (!append(&s->output, &s->output_len, &s->output_cap, fmt, ap, n))
            s->output_dropped += (uint64_t)n;
    } else if (__atomic_load_n(&last_launcher, __ATOMIC_RELAXED)) {
        append(&stray, &stray_len, &stray_cap, fmt, ap, n);
    } else {
        pthread_mutex_unlock(&out_lock);
        return real_vfprintf(f, fmt, ap); /* no client has launched: the server's own */
    }
    pthread_mutex_unlock(&out_lock);
    return n;
}

/* The driver may print with fprintf: the same (the server itself writes its logs with write(2)). */
__attribute__((visibility("default"))) int fprintf(FILE *f, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vfprintf(f, fmt, ap);
    va_end(ap);
    return n;
}

/* The driver ends a flush with fflush(stdout). */
__attribute__((visibility("default"))) int fflush(FILE *f)
{
    static int (*real)(FILE *);

    if (f == stdout && in_flush) {
        in_flush = false;
        __atomic_sub_fetch(&flushing, 1, __ATOMIC_ACQ_REL);
    }
    if (!real)
        real = (int (*)(FILE *))dlsym(RTLD_NEXT, "fflush");
    return real ? real(f) : EOF;
}

/* A flush under way in another thread: its last lines come within microseconds (20 ms at
 * most, should a driver print without its fflush). */
static void wait_flushes(void)
{
    for (int i = 0; i < 200 && __atomic_load_n(&flushing, __ATOMIC_ACQUIRE) > (in_flush ? 1 : 0);
         i++)
        usleep(100);
}

/* How long a handover waits for the owner's printing kernels at most. A printing kernel may wait
 * for something its client's later call provides (a stream waiting for a value the client
 * writes next), and that call may be the owner's next printing launch, which waits for
 * print_lock: past this, the handover goes on without them (their lines may then reach the new
 * owner, said once in server.log) rather than hold both clients forever. */
#define DRAIN_MAX_NS 2000000000ull

/* The owner's printing kernels are done and their lines printed (print_lock held). */
static void drain_owner(void)
{
    CUresult (*equery)(CUevent) = (CUresult(*)(CUevent))om_server_real[OM_IDX_cuEventQuery];
    CUresult (*edestroy)(CUevent) = (CUresult(*)(CUevent))om_server_real[OM_IDX_cuEventDestroy_v2];
    CUresult (*ssync)(CUstream) = (CUresult(*)(CUstream))om_server_real[OM_IDX_cuStreamSynchronize];
    static bool told;
    bool used[OM_MAX_DEVICES] = {false};
    uint64_t start = om_mono_ns();

    for (size_t i = 0; i < nfences; i++) {
        unsigned nap = 20;
        while (equery(fences[i].event) == CUDA_ERROR_NOT_READY) {
            if (om_mono_ns() - start > DRAIN_MAX_NS) {
                if (!told)
                    om_warn("kernel printf: a printing kernel of client %d has not finished "
                            "in 2 s; another client's printing goes on (lines may cross)",
                            print_owner ? (int)print_owner->pid : -1);
                told = true;
                break;
            }
            usleep(nap);
            nap = nap < 1000 ? nap * 2 : 1000;
        }
        edestroy(fences[i].event);
        used[fences[i].dev] = true;
    }
    nfences = 0;
    __atomic_store_n(&nactive, 0, __ATOMIC_RELEASE);
    for (int d = 0; d < (int)OM_MAX_DEVICES; d++)
        if (used[d] && flush_stream[d])
            ssync(flush_stream[d]); /* the driver prints what the kernels left: the owner's */
    wait_flushes();
}

/*
 * The driver prints kernel output at a synchronize, not at a query (its documented flush points:
 * synchronizing calls, launches, blocking copies, module loads), and a wait of the server's ends
 * in a query when the work is done within its spin (wait.c). So after a wait of a session that
 * owns printing kernels whose lines may not be flushed yet (active fences), the driver is made to
 * flush (the idle flush stream's synchronize of each device they ran on, a few µs): the lines of
 * every kernel done by then, the waited one's among them, go with this answer, so a stream
 * synchronize, an event synchronize or a copy to the host shows them as natively. The fences done
 * before that flush are inactive after it (their events kept for the next printing launch on
 * their stream). Only the print owner pays it, and only while it has active fences. A handover
 * under way (print_lock taken) is not waited for: it flushes this owner's lines into this
 * session's buffer itself, for its next answer.
 */
bool om_output_wants_flush(void)
{
    struct session *s = output_session;

    return s && __atomic_load_n(&print_owner, __ATOMIC_ACQUIRE) == s &&
           __atomic_load_n(&nactive, __ATOMIC_ACQUIRE) > 0;
}

void om_output_flush_done(void)
{
    CUresult (*equery)(CUevent) = (CUresult(*)(CUevent))om_server_real[OM_IDX_cuEventQuery];
    CUresult (*ssync)(CUstream) = (CUresult(*)(CUstream))om_server_real[OM_IDX_cuStreamSynchronize];
    struct session *s = output_session;
    bool used[OM_MAX_DEVICES] = {false};

    if (!s || pthread_mutex_trylock(&print_lock) != 0)
        return;
    if (__atomic_load_n(&print_owner, __ATOMIC_RELAXED) == s) {
        for (size_t i = 0; i < nfences; i++) {
            if (!fences[i].active)
                continue;
            used[fences[i].dev] = true;
            /* done before the flush below: its lines are in it */
            fences[i].done = equery(fences[i].event) == CUDA_SUCCESS;
        }
        for (int d = 0; d < (int)OM_MAX_DEVICES; d++)
            if (used[d] && flush_stream[d])
                ssync(flush_stream[d]);
        for (size_t i = 0; i < nfences; i++) {
            if (fences[i].active && fences[i].done) {
                fences[i].active = false;
                __atomic_sub_fetch(&nactive, 1, __ATOMIC_ACQ_REL);
            }
        }
    }
    pthread_mutex_unlock(&print_lock);
}

/* The SM versions of the server's GPUs (90 for sm_90), read once: which entries of a fatbin the
 * driver may run here. */
static unsigned gpu_arch[OM_MAX_DEVICES];
static int ngpu_arch;
static pthread_once_t gpu_arch_once = PTHREAD_ONCE_INIT;

static void read_gpu_archs(void)
{
    CUresult (*attr)(int *, int, CUdevice) =
        (CUresult(*)(int *, int, CUdevice))om_server_real[OM_IDX_cuDeviceGetAttribute];

    for (int d = 0; attr && d < om_server_ndevices() && d < (int)OM_MAX_DEVICES; d++) {
        int major = 0, minor = 0;
        if (attr(&major, 75, d) /* the compute capability, major */ != CUDA_SUCCESS ||
            attr(&minor, 76, d) /* and minor */ != CUDA_SUCCESS || major <= 0 || minor < 0) {
            ngpu_arch = 0; /* unknown: every entry is looked at */
            return;
        }
        gpu_arch[ngpu_arch++] = (unsigned)(major * 10 + minor);
    }
}

bool om_output_image_prints(const void *img, size_t len)
{
    static bool told_unread, told_large;
    const char *force = getenv("CUDA_FORCE_PTX_JIT"); /* the driver then compiles every PTX */
    enum om_print_scan found;

    pthread_once(&gpu_arch_once, read_gpu_archs);
    found = om_image_print_scan(img, len, gpu_arch, force && force[0] == '1' ? 0 : ngpu_arch);
    if (found == OM_PRINTS_UNKNOWN && !__atomic_exchange_n(&told_unread, true, __ATOMIC_RELAXED))
        om_warn("kernel printf: a module image has a compressed entry openmps cannot read (no "
                "libzstd.so.1, or a corrupt entry); its kernels' lines are not ordered between "
                "clients and may reach another one (said once)");
    if (found == OM_PRINTS_TOO_LARGE && !__atomic_exchange_n(&told_large, true, __ATOMIC_RELAXED))
        om_warn("kernel printf: a module image of %zu bytes holds more entries, or more to "
                "decompress, than openmps looks into (65 536; 64 times its size and 64 MiB); its "
                "kernels' lines are not ordered between clients (said once)",
                len);
    return found == OM_PRINTS_MAY;
}

/* At the server's start: each device's flush stream, made by the server for itself rather than in
 * the first printing client's request (print_end makes one there only if this one failed). */
void om_output_init(void)
{
    CUresult (*screate)(CUstream *, unsigned) =
        (CUresult(*)(CUstream *, unsigned))om_server_real[OM_IDX_cuStreamCreate];

    for (int d = 0; d < om_server_ndevices() && d < (int)OM_MAX_DEVICES; d++)
        if (om_server_bind_device(d) != CUDA_SUCCESS ||
            screate(&flush_stream[d], CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
            flush_stream[d] = NULL;
}

void om_output_print_begin(struct session *s)
{
    pthread_mutex_lock(&print_lock); /* until om_output_print_end */
    if (__atomic_load_n(&print_owner, __ATOMIC_RELAXED) == s)
        return;
    drain_owner();
    pthread_mutex_lock(&out_lock);
    __atomic_store_n(&print_owner, s, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&out_lock);
}

void om_output_print_end(struct session *s, CUstream st, bool launched)
{
    CUresult (*create)(CUevent *, unsigned) =
        (CUresult(*)(CUevent *, unsigned))om_server_real[OM_IDX_cuEventCreate];
    CUresult (*record)(CUevent, CUstream) =
        (CUresult(*)(CUevent, CUstream))om_server_real[OM_IDX_cuEventRecord];
    CUresult (*screate)(CUstream *, unsigned) =
        (CUresult(*)(CUstream *, unsigned))om_server_real[OM_IDX_cuStreamCreate];
    CUresult (*ssync)(CUstream) = (CUresult(*)(CUstream))om_server_real[OM_IDX_cuStreamSynchronize];
    int dev = s->dev >= 0 && s->dev < (int)OM_MAX_DEVICES ? s->dev : 0;
    size_t i;

    if (!launched)
        goto out;
    if (!flush_stream[dev] && screate(&flush_stream[dev], CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
        flush_stream[dev] = NULL;
    for (i = 0; i < nfences && fences[i].stream != st; i++)
        ;
    if (i == nfences) {
        CUevent ev = NULL;
        if (nfences == fences_cap) {
            size_t cap = fences_cap ? fences_cap * 2 : 8;
            struct fence *n = realloc(fences, cap * sizeof(*n));
            if (n) {
                fences = n;
                fences_cap = cap;
            }
        }
        if (nfences == fences_cap || create(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
            ssync(st); /* no fence to wait for later: wait now (and flush) */
            goto out;
        }
        fences[nfences++] = (struct fence){st, ev, dev, false, false};
    }
    if (record(fences[i].event, st) != CUDA_SUCCESS) {
        ssync(st);
    } else if (!fences[i].active) {
        fences[i].active = true;
        __atomic_add_fetch(&nactive, 1, __ATOMIC_ACQ_REL);
    }
out:
    pthread_mutex_unlock(&print_lock);
}

/* What another thread printed since, when this session launched last (its worker only). */
static void adopt_stray(struct session *s)
{
    if (__atomic_load_n(&last_launcher, __ATOMIC_RELAXED) != s)
        return;
    wait_flushes();
    if (!__atomic_load_n(&stray_len, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&out_lock);
    if (stray_len && s->output_len + stray_len <= OUTPUT_MAX) {
        if (s->output_len + stray_len > s->output_cap) {
            char *p = realloc(s->output, s->output_len + stray_len);
            if (p) {
                s->output = p;
                s->output_cap = s->output_len + stray_len;
            }
        }
        if (s->output_len + stray_len <= s->output_cap) {
            memcpy(s->output + s->output_len, stray, stray_len);
            __atomic_store_n(&s->output_len, s->output_len + stray_len, __ATOMIC_RELEASE);
            __atomic_store_n(&stray_len, 0, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&out_lock);
}

/* Moves up to cap bytes of a buffer into out (out_lock held). */
static size_t take(char *buf, size_t *len, void *out, size_t cap)
{
    size_t n = *len < cap ? *len : cap;

    if (!n)
        return 0; /* the buffer may not exist yet */
    memcpy(out, buf, n);
    memmove(buf, buf + n, *len - n);
    __atomic_store_n(len, *len - n, __ATOMIC_RELEASE);
    return n;
}

size_t om_output_take(struct session *s, int which, void *out, size_t cap)
{
    size_t n;
    pid_t fault_pid;

    /* After a fatal fault the ending delivers it (om_output_deliver): an answer to a taking
     * call could come after the client has seen the session end. */
    if (om_server_fault_code(&fault_pid) && !delivering)
        return 0;
    pthread_mutex_lock(&out_lock);
    if (which == 1) {
        n = take(s->errout, &s->errout_len, out, cap);
        pthread_mutex_unlock(&out_lock);
        return n;
    }
    n = s->output_len < cap ? s->output_len : cap;
    if (n == 0 && s->output_dropped) { /* said once the buffer has been taken */
        int m = snprintf(out, cap, "[openmps: %llu bytes of kernel printf output were dropped]\n",
                         (unsigned long long)s->output_dropped);
        s->output_dropped = 0;
        pthread_mutex_unlock(&out_lock);
        return m > 0 ? ((size_t)m < cap ? (size_t)m : cap) : 0;
    }
    n = take(s->output, &s->output_len, out, cap);
    pthread_mutex_unlock(&out_lock);
    return n;
}

void om_output_deliver(struct session *s)
{
    static char buf[OM_MSG_MAX_PAYLOAD];

    adopt_stray(s);
    delivering = true; /* the main thread's, at the ending */
    for (int which = 0; which < 2; which++) {
        size_t n;
        while ((n = om_output_take(s, which, buf, sizeof(buf))) > 0)
            if (om_msg_send(s->sock, OM_MSG_OUTPUT, which ? OM_OUTPUT_STDERR : 0, buf, (uint32_t)n,
                            -1) < 0)
                break; /* the client is gone */
    }
    delivering = false;
}

bool om_output_pending(struct session *s)
{
    struct session *owner = __atomic_load_n(&print_owner, __ATOMIC_RELAXED);

    /* Its lines another thread is printing belong in this answer: the owner's, or, without an
     * owner, the last launcher's that a thread of no session flushes (the idle queries). Seen
     * once in the loaded tier without the second case: a line flushed by the idle thread while
     * the worker answered, kept for an answer that never came (the client exited). */
    if (owner == s || (!owner && __atomic_load_n(&last_launcher, __ATOMIC_RELAXED) == s))
        wait_flushes();
    adopt_stray(s);
    return __atomic_load_n(&s->output_len, __ATOMIC_ACQUIRE) > 0 ||
           __atomic_load_n(&s->errout_len, __ATOMIC_ACQUIRE) > 0 || s->output_dropped > 0;
}

void om_output_free(struct session *s)
{
    struct session *expected = s;

    /* The owner's lines printed and dropped with it, not given to the next session. */
    if (__atomic_load_n(&print_owner, __ATOMIC_ACQUIRE) == s) {
        pthread_mutex_lock(&print_lock);
        if (__atomic_load_n(&print_owner, __ATOMIC_RELAXED) == s) {
            drain_owner();
            pthread_mutex_lock(&out_lock);
            __atomic_store_n(&print_owner, NULL, __ATOMIC_RELEASE);
            pthread_mutex_unlock(&out_lock);
        }
        pthread_mutex_unlock(&print_lock);
    }
    __atomic_compare_exchange_n(&last_launcher, &expected, NULL, false, __ATOMIC_RELAXED,
                                __ATOMIC_RELAXED);
    if (output_session == s)
        output_session = NULL;
    pthread_mutex_lock(&out_lock);
    free(s->output);
    s->output = NULL;
    s->output_len = s->output_cap = 0;
    free(s->errout);
    s->errout = NULL;
    s->errout_len = s->errout_cap = 0;
    s->output_dropped = 0;
    pthread_mutex_unlock(&out_lock);
}
