/* SPDX-License-Identifier: MIT */
/* The bottom of the shim: its state (the mode, the real driver's entry points, the session), the
 * entry table the exported trampolines jump through, the names of the entry points, and the
 * shim's notes on stderr. Everything else in src/client may use these; they use nothing of it. */
#define _GNU_SOURCE
#include "shim.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The exported trampolines (gen/exports.S) jump through this table. Until the
 * mode is chosen it points at the real driver (passthrough), except for the
 * entry points that choose the mode. */
OM_HIDDEN void *om_fn[OM_ENTRY_COUNT];

struct om_shim om_shim = {.mode = OM_MODE_UNDECIDED};

static const char *const entry_names[OM_ENTRY_COUNT] = {
#define OM_X_NAME(i, sym, mode) [i] = #sym,
    OM_ENTRIES(OM_X_NAME)
#undef OM_X_NAME
};

const char *om_entry_name(int index)
{
    return index >= 0 && index < OM_ENTRY_COUNT ? entry_names[index] : "?";
}

int om_entry_index(const char *symbol)
{
    int lo = 0, hi = OM_ENTRY_COUNT - 1;

    while (lo <= hi) { /* the table is sorted by symbol (api/gen.py checks it) */
        int mid = (lo + hi) / 2;
        int c = strcmp(symbol, entry_names[mid]);
        if (c == 0)
            return mid;
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return -1;
}

void om_note_once(int index, const char *why)
{
    static unsigned char noted[OM_ENTRY_COUNT];

    if (index < 0 || index >= OM_ENTRY_COUNT)
        return;
    if (__atomic_exchange_n(&noted[index], 1, __ATOMIC_RELAXED))
        return;
    om_shim_log("%s: %s", entry_names[index], why);
}

void om_shim_log(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    int n;

    if (!om_shim.log_enabled)
        return;
    n = snprintf(line, sizeof(line), "openmps[%d]: ", (int)getpid());
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    /* stderr, never stdout: the program's output is the program's. */
    if (write(STDERR_FILENO, line, (size_t)n) < 0) {
        /* nothing to do */
    }
}

/* The entry points the shim answers itself in every mode. */
void *om_local_fn[OM_ENTRY_COUNT];
