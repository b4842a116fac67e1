/* SPDX-License-Identifier: MIT */
/* Kernel printf output: caught where the driver writes it, and sent to the client it belongs to. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
 * (docs/architecture.md).
 */

/* Bytes a session keeps for its client at most; the rest is dropped and counted. */
#define OUTPUT_MAX (4u << 20)

static __thread struct session *output_session;

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

    if (f != stdout || !s)
        return real_vfprintf(f, fmt, ap);
    va_copy(copy, ap);
    n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n <= 0)
        return n;
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

bool om_output_pending(const struct session *s)
{
    return s->output_len > 0 || s->output_dropped > 0;
}

void om_output_free(struct session *s)
{
    if (output_session == s)
        output_session = NULL;
    free(s->output);
    s->output = NULL;
    s->output_len = s->output_cap = 0;
    s->output_dropped = 0;
}
