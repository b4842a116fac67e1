/* SPDX-License-Identifier: MIT */
/* Kernel printf output: caught where the driver writes it, and sent to the client it belongs to. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/log.h"
#include "internal.h"

/*
 * Measured (tests/gpu/probe, driver 580.159.04): the driver prints the output of device-side
 * printf with vfprintf(stdout, ...) and then fflush(stdout), from the thread whose call made it
 * flush (a synchronising call, a launch, a module load). In the server that thread is the
 * worker of the session that made the call, so the server interposes vfprintf (exported from
 * the executable, which the dlopen'ed driver binds to first), keeps what a worker's driver calls
 * print in that session's buffer, and marks the call's answer; the client then takes the text
 * and writes it to its own stdout, in order with the program's output, as the driver would have.
 *
 * The driver's printf buffer is the context's, so a flush caused by one client's call prints
 * whatever kernels of any client left in it: output is attributed to the session whose call
 * flushed it, which is the printing client itself unless another client's call flushed first
 * (docs/architecture.md). A flush in a thread of no session (the main loop's idle queries) goes
 * to the session that launched last.
 */

/* Bytes a session keeps for its client at most; the rest is dropped and counted. */
#define OUTPUT_MAX (4u << 20)

static __thread struct session *output_session;

/* What the driver prints in a thread that serves no session (the main loop's idle queries
 * flush the printf buffer too): kept here, and taken by the session that launched last at its
 * next answer. */
static pthread_mutex_t stray_lock = PTHREAD_MUTEX_INITIALIZER;
static char *stray;
static size_t stray_len, stray_cap;
static struct session *last_launcher;
/* Another thread is between the driver's vfprintf calls of one flush and its fflush: a worker
 * about to answer waits for the rest (a flush is a few calls, microseconds apart). */
static int stray_busy;

void om_output_launched(struct session *s)
{
    if (__atomic_load_n(&last_launcher, __ATOMIC_RELAXED) != s)
        __atomic_store_n(&last_launcher, s, __ATOMIC_RELAXED);
}

static int keep_stray(const char *fmt, va_list ap, int n)
{
    __atomic_store_n(&stray_busy, 1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&stray_lock);
    if (stray_len + (size_t)n + 1 <= OUTPUT_MAX) {
        if (stray_len + (size_t)n + 1 > stray_cap) {
            size_t cap = stray_cap ? stray_cap : 4096;
            while (cap < stray_len + (size_t)n + 1)
                cap *= 2;
            char *p = realloc(stray, cap);
            if (p) {
                stray = p;
                stray_cap = cap;
            }
        }
        if (stray_len + (size_t)n + 1 <= stray_cap) {
            vsnprintf(stray + stray_len, (size_t)n + 1, fmt, ap);
            stray_len += (size_t)n;
        }
    }
    pthread_mutex_unlock(&stray_lock);
    return n;
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

__attribute__((visibility("default"))) int vfprintf(FILE *f, const char *fmt, va_list ap)
{
    struct session *s = output_session;
    va_list copy;
    int n;

    if (f != stdout)
        return real_vfprintf(f, fmt, ap);
    va_copy(copy, ap);
    n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n <= 0)
        return n;
    if (!s)
        return __atomic_load_n(&last_launcher, __ATOMIC_RELAXED) ? keep_stray(fmt, ap, n)
                                                                 : real_vfprintf(f, fmt, ap);
    if (s->output_len + (size_t)n + 1 > OUTPUT_MAX) {
        s->output_dropped += (uint64_t)n;
        return n;
    }
    if (s->output_len + (size_t)n + 1 > s->output_cap) {
        size_t cap = s->output_cap ? s->output_cap : 4096;
        while (cap < s->output_len + (size_t)n + 1)
            cap *= 2;
        char *p = realloc(s->output, cap);
        if (!p) {
            s->output_dropped += (uint64_t)n;
            return n;
        }
        s->output = p;
        s->output_cap = cap;
    }
    vsnprintf(s->output + s->output_len, (size_t)n + 1, fmt, ap);
    s->output_len += (size_t)n;
    return n;
}

size_t om_output_take(struct session *s, void *out, size_t cap)
{
    size_t n = s->output_len < cap ? s->output_len : cap;

    if (n == 0 && s->output_dropped) { /* said once the buffer has been taken */
        int m = snprintf(out, cap, "[openmps: %llu bytes of kernel printf output were dropped]\n",
                         (unsigned long long)s->output_dropped);
        s->output_dropped = 0;
        return m > 0 ? ((size_t)m < cap ? (size_t)m : cap) : 0;
    }
    memcpy(out, s->output, n);
    memmove(s->output, s->output + n, s->output_len - n);
    s->output_len -= n;
    return n;
}

/* The driver ends a flush with fflush(stdout): in a thread of no session, the flush kept for
 * the last launcher is complete. */
__attribute__((visibility("default"))) int fflush(FILE *f)
{
    static int (*real)(FILE *);

    if (f == stdout && !output_session)
        __atomic_store_n(&stray_busy, 0, __ATOMIC_RELEASE);
    if (!real)
        real = (int (*)(FILE *))dlsym(RTLD_NEXT, "fflush");
    return real ? real(f) : EOF;
}

/* What another thread printed since, when this session launched last (its worker only). */
static void adopt_stray(struct session *s)
{
    if (__atomic_load_n(&last_launcher, __ATOMIC_RELAXED) != s)
        return;
    /* A flush under way in another thread: its last lines come within microseconds. */
    for (int i = 0; i < 200 && __atomic_load_n(&stray_busy, __ATOMIC_ACQUIRE); i++)
        usleep(100);
    __atomic_store_n(&stray_busy, 0, __ATOMIC_RELEASE);
    if (!__atomic_load_n(&stray_len, __ATOMIC_RELAXED))
        return;
    pthread_mutex_lock(&stray_lock);
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
            s->output_len += stray_len;
            stray_len = 0;
        }
    }
    pthread_mutex_unlock(&stray_lock);
}

bool om_output_pending(struct session *s)
{
    adopt_stray(s);
    return s->output_len > 0 || s->output_dropped > 0;
}

void om_output_free(struct session *s)
{
    struct session *expected = s;

    __atomic_compare_exchange_n(&last_launcher, &expected, NULL, false, __ATOMIC_RELAXED,
                                __ATOMIC_RELAXED);
    if (output_session == s)
        output_session = NULL;
    free(s->output);
    s->output = NULL;
    s->output_len = s->output_cap = 0;
    s->output_dropped = 0;
}
