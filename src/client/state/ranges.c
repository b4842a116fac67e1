/* SPDX-License-Identifier: MIT */
/* The client state layer: the device memory this process obtained (allocations, pool and
 * mapped ranges, module globals), which tells a copy which side each pointer is on and which
 * device a range was made on. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "openmps/cuda_abi.h"
#include "../remote.h"

/* The device memory this process obtained (allocations, module globals), so a
 * copy with unified addressing (cuMemcpy) knows which side each pointer is on. */
/* 32 bytes (ipc.allocation_the_shim_cannot_record_is_refused fails its growth by that size) */
struct devrange {
    CUdeviceptr base;
    size_t size;
    uint64_t pool; /* the memory pool it came from (stream-ordered allocation), or 0 */
    int dev;       /* the device it was made on: the calling thread's current one */
    bool mapped;   /* a mapping of the virtual-memory API: a copy may go on into the next one */
    bool plain;    /* cuMemAlloc's: freed only by the program's cuMemFree (om_devrange_add_plain) */
};
_Static_assert(sizeof(struct devrange) == 32, "the test that fails the table's growth knows it");
static struct devrange *devranges;
static size_t ndevranges, devranges_cap;
static pthread_mutex_t devranges_lock = PTHREAD_MUTEX_INITIALIZER;

static int add(CUdeviceptr base, size_t size, bool plain)
{
    int rc = 0;

    pthread_mutex_lock(&devranges_lock);
    if (ndevranges == devranges_cap) {
        size_t cap = devranges_cap ? devranges_cap * 2 : 64;
        struct devrange *n = realloc(devranges, cap * sizeof(*n));
        if (n) {
            devranges = n;
            devranges_cap = cap;
        }
    }
    if (ndevranges < devranges_cap)
        devranges[ndevranges++] =
            (struct devrange){base, size, 0, om_current_device(), false, plain};
    else
        rc = -ENOMEM; /* unknown here, the range would pass for host memory in cuMemcpy */
    pthread_mutex_unlock(&devranges_lock);
    return rc;
}

int om_devrange_add(CUdeviceptr base, size_t size)
{
    return add(base, size, false);
}

int om_devrange_add_plain(CUdeviceptr base, size_t size)
{
    return add(base, size, true);
}

void om_devrange_set_pool(CUdeviceptr base, uint64_t pool)
{
    pthread_mutex_lock(&devranges_lock);
    for (size_t i = 0; i < ndevranges; i++)
        if (devranges[i].base == base)
            devranges[i].pool = pool;
    pthread_mutex_unlock(&devranges_lock);
}

void om_devrange_set_mapped(CUdeviceptr base)
{
    pthread_mutex_lock(&devranges_lock);
    for (size_t i = 0; i < ndevranges; i++)
        if (devranges[i].base == base)
            devranges[i].mapped = true;
    pthread_mutex_unlock(&devranges_lock);
}

uint64_t om_devrange_pool(CUdeviceptr p)
{
    uint64_t pool = 0;

    pthread_mutex_lock(&devranges_lock);
    for (size_t i = 0; i < ndevranges; i++)
        if (p >= devranges[i].base && p - devranges[i].base < devranges[i].size)
            pool = devranges[i].pool;
    pthread_mutex_unlock(&devranges_lock);
    return pool;
}

int om_devrange_device(CUdeviceptr p)
{
    int dev = -1;

    pthread_mutex_lock(&devranges_lock);
    for (size_t i = 0; i < ndevranges; i++)
        if (p >= devranges[i].base && p - devranges[i].base < devranges[i].size)
            dev = devranges[i].dev;
    pthread_mutex_unlock(&devranges_lock);
    return dev;
}

void om_devrange_remove(CUdeviceptr base)
{
    pthread_mutex_lock(&devranges_lock);
    for (size_t i = 0; i < ndevranges; i++) {
        if (devranges[i].base == base) {
            devranges[i] = devranges[--ndevranges];
            break;
        }
    }
    pthread_mutex_unlock(&devranges_lock);
}

bool om_devrange_find(CUdeviceptr p, CUdeviceptr *ret_base, size_t *ret_size, bool *ret_managed)
{
    bool found = false;

    pthread_mutex_lock(&devranges_lock);
    for (size_t i = 0; i < ndevranges && !found; i++) {
        if (p >= devranges[i].base && p - devranges[i].base < devranges[i].size) {
            *ret_base = devranges[i].base;
            *ret_size = devranges[i].size;
            *ret_managed = false;
            found = true;
        }
    }
    pthread_mutex_unlock(&devranges_lock);
    if (found)
        return true;
    if (!om_managed_find(p, ret_base, ret_size)) /* state/shadows.c */
        return false;
    *ret_managed = true;
    return true;
}

/* As the server's om_ranges_cover walks a range: the device range holding its start, then, past
 * the end of a mapping, the mapping that holds the next byte. */
static int devranges_fit(CUdeviceptr p, uint64_t n)
{
    uint64_t at = p, end = p + n;
    int fits = -1; /* not known here */

    pthread_mutex_lock(&devranges_lock);
    while (at < end) {
        size_t i;
        for (i = 0; i < ndevranges; i++)
            if (at >= devranges[i].base && at - devranges[i].base < devranges[i].size &&
                (fits < 0 || devranges[i].mapped))
                break;
        if (i == ndevranges) {
            fits = fits < 0 ? -1 : 0;
            break;
        }
        uint64_t stop = devranges[i].base + devranges[i].size;
        fits = 1;
        if (stop >= end)
            break;
        if (!devranges[i].mapped) {
            fits = 0;
            break;
        }
        at = stop;
    }
    pthread_mutex_unlock(&devranges_lock);
    return fits;
}

bool om_devrange_plain_holds(CUdeviceptr p, uint64_t n)
{
    bool found = false;

    pthread_mutex_lock(&devranges_lock);
    for (size_t i = 0; i < ndevranges && !found; i++) {
        const struct devrange *r = &devranges[i];
        found = p >= r->base && p - r->base < r->size && n <= r->size - (p - r->base) && r->plain &&
                !r->pool && !r->mapped;
    }
    pthread_mutex_unlock(&devranges_lock);
    return found;
}

bool om_devrange_fits(CUdeviceptr p, uint64_t n)
{
    CUdeviceptr base;
    size_t size;
    bool is_managed;
    uint64_t server;
    int fits;

    if (p + n < p)
        return false; /* no memory wraps around */
    if ((fits = devranges_fit(p, n)) >= 0)
        return fits;
    if (om_devrange_find(p, &base, &size, &is_managed)) /* managed memory */
        return n <= size - (p - base);
    if (om_pinned_device_pointer((void *)(uintptr_t)p, &base) == 0) /* pinned host memory */
        return om_pinned_lookup((const void *)(uintptr_t)p, n, &server);
    return true;
}

/* True when p lies in device memory of this process (not managed memory). */
bool om_devrange_holds(CUdeviceptr p)
{
    bool found = false;

    pthread_mutex_lock(&devranges_lock);
    for (size_t i = 0; i < ndevranges && !found; i++)
        found = p >= devranges[i].base && p - devranges[i].base < devranges[i].size;
    pthread_mutex_unlock(&devranges_lock);
    return found;
}
