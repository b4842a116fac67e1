/* SPDX-License-Identifier: MIT */
/* The monotonic clock every timing of the daemon, the server and the shim reads. */
#ifndef OM_CLOCK_H
#define OM_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t om_mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
