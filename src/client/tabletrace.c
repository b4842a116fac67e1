/* SPDX-License-Identifier: MIT */
/*
 * OPENMPS_TRACE_TABLES=1: the driver's private export tables, watched. A diagnostic for finding
 * which tables and slots the CUDA libraries (cuBLAS, cuFFT…, each with its own static runtime)
 * call, with what and how often, in passthrough as in remote mode (issue #11: "trace rather
 * than guess").
 *
 * cuGetExportTable then hands out a copy of each table whose code slots are trampolines: a
 * call logs "table XXXXXXXX slot N (six argument words) = result" for its first
 * OPENMPS_TRACE_TABLES_FIRST calls (default 4; every later call is only counted), with the
 * first four words each readable argument points to after the call (where outputs land), and goes
 * on to the table's own function; at exit, every slot called is listed with its count. A table is
 * copied only when its first word is its size in bytes (as every table the driver serves has
 * been seen to start); a slot is wrapped only when it points into an executable mapping (a
 * table may hold data). The trampolines pass twelve integer-register-or-stack words on, as
 * trace.c's do: a float argument would not survive, and a slot's float result neither.
 *
 * The tables the CUDA runtime itself asks for are not watched unless OPENMPS_TRACE_TABLES=all:
 * the runtime checks a hash over their addresses and stops with error 103 ("integrity checks
 * failed") when they are copies (measured with PyTorch and cuBLAS on the H100).
 * OPENMPS_TRACE_TABLES=263e8860,6e163fbe watches the tables listed (by their first four bytes)
 * and no other.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shim.h"

typedef uint64_t W;
typedef W (*fn12)(W, W, W, W, W, W, W, W, W, W, W, W);

#define TT_TABLES 32
#define TT_SLOTS 1024 /* trampolines, over all tables */

struct tt_slot {
    void *target;
    unsigned long calls;
    uint8_t uuid0[4]; /* the table's first four bytes, for the log */
    uint16_t index;
};

struct tt_table {
    uint8_t uuid[16];
    const void *orig;
    W *copy;
};

static struct tt_slot slots[TT_SLOTS];
static unsigned slots_used;
static struct tt_table tables[TT_TABLES];
static unsigned tables_used;
static unsigned long log_first = 4;
static bool watch_runtime; /* OPENMPS_TRACE_TABLES=all */
static char only[256];     /* OPENMPS_TRACE_TABLES=263e8860,…: those tables only */

/* Whether the table is one of the list's (its first four bytes in hexadecimal). */
static bool listed(const uint8_t *uuid)
{
    char hex[9];

    snprintf(hex, sizeof(hex), "%02x%02x%02x%02x", uuid[0], uuid[1], uuid[2], uuid[3]);
    return strstr(only, hex) != NULL;
}

static void *inner_export; /* the cuGetExportTable the program would have called */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void say(const char *line, int n)
{
    if (n > 0 && write(STDERR_FILENO, line, (size_t)n) < 0) {
        /* nothing to do */
    }
}

/* Whether [p, p + len) lies in one mapping of this process whose permissions have `perm`
 * ('r', 'w' or 'x') at position `at`. */
static bool mapped(W p, W len, int at, char perm)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    bool yes = false;

    if (!f)
        return false;
    while (!yes && fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        char perms[8];

        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && perms[at] == perm && p >= lo &&
            p + len <= hi)
            yes = true;
    }
    fclose(f);
    return yes;
}

/* Copies len bytes at p into buf without touching them in place: the kernel reads them for us
 * (process_vm_readv on ourselves), so an argument that only looks like a pointer, or memory a
 * sanitizer keeps to itself, gives false instead of a crash. */
static bool peek(W p, void *buf, size_t len)
{
    struct iovec here = {buf, len}, there = {(void *)(uintptr_t)p, len};

    return p >= 4096 && process_vm_readv(getpid(), &here, 1, &there, 1, 0) == (ssize_t)len;
}

/* Whether 65 bytes at p could be read and start with a C string of 2 to 63 printable
 * characters (copied into text). */
static bool printable(W p, char text[65])
{
    int n = 0;

    if (!peek(p, text, 65))
        return false;
    while (n < 64 && text[n] >= 0x20 && text[n] < 0x7f)
        n++;
    return n >= 2 && n < 64 && text[n] == 0;
}

static bool executable(W p)
{
    return mapped(p, 1, 2, 'x');
}

static W tt_call(unsigned k, W a, W b, W c, W d, W e, W f, W g, W h, W j, W l, W m, W o)
{
    struct tt_slot *s = &slots[k];
    unsigned long n = __atomic_fetch_add(&s->calls, 1, __ATOMIC_RELAXED);
    W rc = ((fn12)s->target)(a, b, c, d, e, f, g, h, j, l, m, o);

    if (n < log_first) {
        const W args[6] = {a, b, c, d, e, f};
        char line[1024];
        int len =
            snprintf(line, sizeof(line),
                     "openmps[%d] table %02x%02x%02x%02x slot %u (0x%" PRIx64 ", 0x%" PRIx64
                     ", 0x%" PRIx64 ", 0x%" PRIx64 ", 0x%" PRIx64 ", 0x%" PRIx64 ") = 0x%" PRIx64,
                     (int)getpid(), s->uuid0[0], s->uuid0[1], s->uuid0[2], s->uuid0[3], s->index, a,
                     b, c, d, e, f, rc);
        /* What the arguments that point to readable memory hold after the call (outputs). */
        for (int i = 0; i < 6 && len > 0 && len < (int)sizeof(line) - 80; i++) {
            char text[65];
            W q[4];
            if (printable(args[i], text))
                len +=
                    snprintf(line + len, sizeof(line) - (size_t)len, "; a%d = \"%.60s\"", i, text);
            else if (!(args[i] & 7) && peek(args[i], q, sizeof(q)))
                len += snprintf(line + len, sizeof(line) - (size_t)len,
                                "; *a%d = 0x%" PRIx64 " 0x%" PRIx64 " 0x%" PRIx64 " 0x%" PRIx64, i,
                                q[0], q[1], q[2], q[3]);
        }
        if (len > 0 && len < (int)sizeof(line) - 1) {
            line[len++] = '\n';
            say(line, len);
        }
    }
    return rc;
}

/* TT_SLOTS trampolines, named by octal numbers so that the name and the index are one token:
 * tt_0017 is trampoline 017 (15). */
#define TT_FN(n)                                                                                   \
    static W tt_##n(W a, W b, W c, W d, W e, W f, W g, W h, W j, W l, W m, W o)                    \
    {                                                                                              \
        return tt_call(n, a, b, c, d, e, f, g, h, j, l, m, o);                                     \
    }
#define TT_REF(n) [n] = (void *)tt_##n,
#define TT_8(X, p) X(p##0) X(p##1) X(p##2) X(p##3) X(p##4) X(p##5) X(p##6) X(p##7)
#define TT_64(X, p)                                                                                \
    TT_8(X, p##0)                                                                                  \
    TT_8(X, p##1)                                                                                  \
    TT_8(X, p##2) TT_8(X, p##3) TT_8(X, p##4) TT_8(X, p##5) TT_8(X, p##6) TT_8(X, p##7)
#define TT_512(X, p)                                                                               \
    TT_64(X, p##0)                                                                                 \
    TT_64(X, p##1)                                                                                 \
    TT_64(X, p##2)                                                                                 \
    TT_64(X, p##3) TT_64(X, p##4) TT_64(X, p##5) TT_64(X, p##6) TT_64(X, p##7)

TT_512(TT_FN, 0)
TT_512(TT_FN, 01)
static void *const trampolines[TT_SLOTS] = {TT_512(TT_REF, 0) TT_512(TT_REF, 01)};

static void summary(void)
{
    char line[160];

    for (unsigned k = 0; k < slots_used; k++) {
        struct tt_slot *s = &slots[k];
        unsigned long n = __atomic_load_n(&s->calls, __ATOMIC_RELAXED);

        if (n)
            say(line,
                snprintf(line, sizeof(line),
                         "openmps[%d] table %02x%02x%02x%02x slot %u: %lu calls\n", (int)getpid(),
                         s->uuid0[0], s->uuid0[1], s->uuid0[2], s->uuid0[3], s->index, n));
    }
}

/* The watched copy of `orig` (the same copy for the same table), or orig itself. */
static const void *watched(const void *orig, const uint8_t uuid[16])
{
    const W *t = orig;
    const void *ret = orig;
    char line[160];
    unsigned count;

    pthread_mutex_lock(&lock);
    for (unsigned i = 0; i < tables_used; i++)
        if (tables[i].orig == orig && !memcmp(tables[i].uuid, uuid, 16)) {
            ret = tables[i].copy ? (const void *)tables[i].copy : orig;
            goto out;
        }
    count = (unsigned)(t[0] / sizeof(W));
    if (t[0] % sizeof(W) || count < 2 || count > 512 || tables_used == TT_TABLES) {
        say(line, snprintf(line, sizeof(line),
                           "openmps[%d] table %02x%02x%02x%02x: first word 0x%" PRIx64
                           " is not a size: not watched\n",
                           (int)getpid(), uuid[0], uuid[1], uuid[2], uuid[3], t[0]));
        if (tables_used < TT_TABLES) { /* said once */
            tables[tables_used].orig = orig;
            memcpy(tables[tables_used].uuid, uuid, 16);
            tables[tables_used++].copy = NULL;
        }
        goto out;
    }
    W *copy = malloc(count * sizeof(W));
    if (!copy)
        goto out;
    memcpy(copy, t, count * sizeof(W));
    unsigned wrapped = 0;
    for (unsigned i = 1; i < count && slots_used < TT_SLOTS; i++) {
        if (!t[i] || !executable(t[i]))
            continue;
        struct tt_slot *s = &slots[slots_used];
        s->target = (void *)(uintptr_t)t[i];
        s->index = (uint16_t)i;
        memcpy(s->uuid0, uuid, 4);
        copy[i] = (W)(uintptr_t)trampolines[slots_used++];
        wrapped++;
    }
    tables[tables_used].orig = orig;
    memcpy(tables[tables_used].uuid, uuid, 16);
    tables[tables_used++].copy = copy;
    say(line,
        snprintf(line, sizeof(line),
                 "openmps[%d] table %02x%02x%02x%02x-%02x%02x%02x%02x…: %u slots, %u watched\n",
                 (int)getpid(), uuid[0], uuid[1], uuid[2], uuid[3], uuid[4], uuid[5], uuid[6],
                 uuid[7], count - 1, wrapped));
    if (watch_runtime) { /* =all: the whole uuid, and where each code slot is */
        int len = snprintf(line, sizeof(line), "openmps[%d] table uuid", (int)getpid());
        for (int i = 0; i < 16; i++)
            len += snprintf(line + len, sizeof(line) - (size_t)len, " %02x", uuid[i]);
        line[len++] = '\n';
        say(line, len);
        for (unsigned i = 1; i < count; i++) {
            Dl_info where;
            if (t[i] && executable(t[i]) && dladdr((void *)(uintptr_t)t[i], &where))
                say(line,
                    snprintf(line, sizeof(line),
                             "openmps[%d] table %02x%02x%02x%02x slot %u at %s+0x%lx\n",
                             (int)getpid(), uuid[0], uuid[1], uuid[2], uuid[3], i, where.dli_fname,
                             (unsigned long)((uintptr_t)t[i] - (uintptr_t)where.dli_fbase)));
        }
    }
    ret = copy;
out:
    pthread_mutex_unlock(&lock);
    return ret;
}

static int traced_export_table(const void **table, const void *uuid)
{
    int rc = ((int (*)(const void **, const void *))inner_export)(table, uuid);

    if (rc == 0 && table && *table && uuid &&
        (only[0] ? listed(uuid) : watch_runtime || !om_runtime_table(uuid)))
        *table = watched(*table, uuid);
    return rc;
}

void *om_tabletrace_wrap(int index, void *target)
{
    if (!om_shim.trace_tables || index != OM_IDX_cuGetExportTable || !target ||
        target == (void *)traced_export_table)
        return target;
    __atomic_store_n(&inner_export, target, __ATOMIC_RELEASE);
    return (void *)traced_export_table;
}

bool om_tabletrace_start(void)
{
    const char *v = getenv("OPENMPS_TRACE_TABLES"), *first = getenv("OPENMPS_TRACE_TABLES_FIRST");

    if (!v || !*v || !strcmp(v, "0"))
        return false;
    watch_runtime = !strcmp(v, "all");
    if (strlen(v) >= 8 && strcmp(v, "all") != 0)
        snprintf(only, sizeof(only), "%s", v);
    if (first && *first)
        log_first = strtoul(first, NULL, 10);
    atexit(summary);
    return true;
}
