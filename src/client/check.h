/* SPDX-License-Identifier: MIT */
/* openmps check: the per-process file of call counts the shim writes and the CLI reads. */
#ifndef OM_CHECK_H
#define OM_CHECK_H

#include <stdint.h>

/* Set by `openmps check` to a private directory: the shim stays in passthrough
 * whatever daemon runs, and each process that loads it counts its driver calls
 * in a file of its own there (<pid>-<n>.calls). */
#define OM_CHECK_ENV "OPENMPS_CHECK"
#define OM_CHECK_SUFFIX ".calls"
#define OM_CHECK_MAGIC "OMCHECK1"

/* The file: this header, then one uint64_t counter per entry point in the order of
 * OM_ENTRIES. The counters are the mapped file itself, incremented atomically at each
 * call, so they are complete however the process ends (exit, _exit, a signal). */
struct om_check_file {
    char magic[8];       /* OM_CHECK_MAGIC */
    uint32_t entries;    /* OM_ENTRY_COUNT of the shim that wrote it */
    uint32_t names_hash; /* om_check_names_hash() of its entry names */
    int32_t pid;
    int32_t ppid;
    char exe[256]; /* /proc/self/exe, cut to fit */
    uint64_t counts[];
};

/* FNV-1a over the entry names in table order: a shim and a CLI of different
 * tables refuse to compare counts. */
static inline uint32_t om_check_names_hash(const char *const *names, int n)
{
    uint32_t h = 2166136261u;

    for (int i = 0; i < n; i++) {
        for (const char *p = names[i]; *p; p++)
            h = (h ^ (uint8_t)*p) * 16777619u;
        h = (h ^ 0xffu) * 16777619u; /* a separator: "ab","c" differs from "a","bc" */
    }
    return h;
}

#endif
