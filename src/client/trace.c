/* SPDX-License-Identifier: MIT */
/* OPENMPS_TRACE=1: one line per driver call on stderr: name, first arguments, result, microseconds.
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

/*
 * Each traced entry point gets a stub that takes twelve integer-register-or-
 * stack words and passes all twelve on: on x86-64 and AArch64 that forwards
 * every integer and pointer argument of any driver entry point unchanged
 * (the largest takes eleven). Floating-point arguments are not preserved
 * across the logging, so the four texture-reference and cuParamSetf calls
 * that take a float by value are wrong under tracing (and only then).
 */
typedef uint64_t W;
typedef int (*fn12)(W, W, W, W, W, W, W, W, W, W, W, W);

static void *targets[OM_ENTRY_COUNT];

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int traced(int i, W a, W b, W c, W d, W e, W f, W g, W h, W j, W k, W l, W m)
{
    double t0 = now_us();
    int rc = ((fn12)targets[i])(a, b, c, d, e, f, g, h, j, k, l, m);
    char line[256];
    int n = snprintf(line, sizeof(line),
                     "openmps[%d] %s(0x%llx, 0x%llx, 0x%llx, 0x%llx, ...) = %d (%.1f us)\n",
                     (int)getpid(), om_entry_name(i), (unsigned long long)a, (unsigned long long)b,
                     (unsigned long long)c, (unsigned long long)d, rc, now_us() - t0);
    if (n > 0 && write(STDERR_FILENO, line, (size_t)n) < 0) {
        /* nothing to do */
    }
    return rc;
}

#define OM_X_TRACE(i, sym, mode)                                                                   \
    static int trace_##sym(W a, W b, W c, W d, W e, W f, W g, W h, W j, W k, W l, W m)             \
    {                                                                                              \
        return traced(i, a, b, c, d, e, f, g, h, j, k, l, m);                                      \
    }
OM_ENTRIES(OM_X_TRACE)
#undef OM_X_TRACE

static void *const stubs[OM_ENTRY_COUNT] = {
#define OM_X_REF(i, sym, mode) [i] = (void *)trace_##sym,
    OM_ENTRIES(OM_X_REF)
#undef OM_X_REF
};

void *om_trace_wrap(int index, void *target)
{
    target = om_tabletrace_wrap(index, target);
    if (!om_shim.trace_calls || index < 0 || index >= OM_ENTRY_COUNT || !target ||
        target == stubs[index])
        return target;
    __atomic_store_n(&targets[index], target, __ATOMIC_RELEASE);
    return stubs[index];
}

void om_trace_install(void)
{
    if (!om_shim.trace_calls) {
        om_fn[OM_IDX_cuGetExportTable] =
            om_tabletrace_wrap(OM_IDX_cuGetExportTable, om_fn[OM_IDX_cuGetExportTable]);
        return;
    }
    for (int i = 0; i < OM_ENTRY_COUNT; i++)
        om_fn[i] = om_trace_wrap(i, om_fn[i]);
}

/* With OPENMPS_TRACE, a program that dies of SIGSEGV or SIGBUS prints where, with the shared
 * object of each frame (the local driver, the runtime, the shim…), then dies as it would have. */
static void crashed(int sig)
{
    void *frames[48];
    int n = backtrace(frames, 48);
    static const char head[] = "openmps: the program crashed; its stack:\n";

    if (write(STDERR_FILENO, head, sizeof(head) - 1) < 0) {
        /* nothing to do */
    }
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
    signal(sig, SIG_DFL);
    raise(sig);
}

void om_trace_crashes(void)
{
    void *warm[1];

    if (!om_shim.trace_calls)
        return;
    backtrace(warm, 1); /* loads what backtrace needs now, not in the handler */
    signal(SIGSEGV, crashed);
    signal(SIGBUS, crashed);
}
