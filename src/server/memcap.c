/* SPDX-License-Identifier: MIT */
/* A client's device-memory cap (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT and the daemon's limits): what
 * counts against it, the refusal past it, and what the client is told of it. */
#include <inttypes.h>

#include "internal.h"
#include "../common/config.h"
#include "../common/log.h"

/*
 * MPS names the cap a "pinned device memory limit": the device memory a client may hold on
 * one GPU. The session's limits are the daemon's for its server, tightened by the client's
 * own variable (the daemon merges them at adoption). What counts: plain, pitched and
 * managed allocations and stream-ordered (pool) allocations, each by the bytes the client
 * holds (its range's size) from the allocation until its free, and physical allocations of the
 * virtual-memory API from cuMemCreate to the release of the handle (mapping them counts
 * nothing more; memory imported from another process counts nothing); a refused allocation
 * fails with CUDA_ERROR_OUT_OF_MEMORY and changes nothing. Arrays (plain, 3D, layered,
 * mipmapped) count by their descriptor's elements (the driver may pad them: an estimate), from
 * creation to destruction; graph allocations while the client's graphs hold their ranges
 * (graphstate.c). Each device has its own cap and count: an allocation counts on the device
 * it is on (the current one; a pool's, for stream-ordered allocations; an allocation node's).
 */

uint64_t om_memcap_cap(const struct session *s, int dev)
{
    /* The main thread changes them while the client runs (om_session_limits) */
    return dev >= 0 && dev < (int)OM_MAX_DEVICES &&
                   (uint32_t)dev < __atomic_load_n(&s->limits.ndevices, __ATOMIC_RELAXED)
               ? __atomic_load_n(&s->limits.mem_limit[dev], __ATOMIC_RELAXED)
               : 0;
}

uint64_t om_memcap_used(const struct session *s, int dev)
{
    return dev >= 0 && dev < (int)OM_MAX_DEVICES
               ? __atomic_load_n(&s->device_bytes[dev], __ATOMIC_RELAXED)
               : 0;
}

uint64_t om_memcap_used_all(const struct session *s)
{
    uint64_t n = 0;

    for (unsigned d = 0; d < OM_MAX_DEVICES; d++)
        n += __atomic_load_n(&s->device_bytes[d], __ATOMIC_RELAXED);
    return n;
}

/* Its worker changes them; the main thread reads them for the daemon (session.c). */
static void add_bytes(struct session *s, int dev, uint64_t bytes)
{
    if (dev >= 0 && dev < (int)OM_MAX_DEVICES)
        __atomic_add_fetch(&s->device_bytes[dev], bytes, __ATOMIC_RELAXED);
}

static void give_bytes(struct session *s, int dev, uint64_t bytes)
{
    if (dev < 0 || dev >= (int)OM_MAX_DEVICES)
        return;
    uint64_t held = __atomic_load_n(&s->device_bytes[dev], __ATOMIC_RELAXED);

    __atomic_sub_fetch(&s->device_bytes[dev], bytes <= held ? bytes : held, __ATOMIC_RELAXED);
}

CUresult om_memcap_check(struct session *s, int dev, uint64_t bytes)
{
    uint64_t cap = om_memcap_cap(s, dev), used = om_memcap_used(s, dev);
    char capb[32];

    if (!cap || (bytes <= cap && used <= cap - bytes))
        return CUDA_SUCCESS;
    if (!s->memcap_logged) {
        s->memcap_logged = true;
        om_format_size(cap, capb, sizeof(capb));
        om_warn("client %d: device %d memory limit %s reached (%" PRIu64 " bytes held): an "
                "allocation of %" PRIu64 " bytes refused with CUDA_ERROR_OUT_OF_MEMORY; later "
                "refusals are not logged",
                (int)s->pid, dev, capb, used, bytes);
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

void om_memcap_charge_on(struct session *s, struct om_range *r, int dev)
{
    r->charged = r->size;
    r->dev = dev;
    s->worked_mask |= 1ull << dev;
    add_bytes(s, r->dev, r->size);
}

void om_memcap_charge(struct session *s, struct om_range *r)
{
    om_memcap_charge_on(s, r, s->dev); /* made on the device its calls run on */
}

void om_allocs_remove(struct session *s, struct om_range *r)
{
    give_bytes(s, r->dev, r->charged);
    om_ranges_remove(&s->allocs, r);
}

CUresult om_memcap_hold(struct session *s, int dev, uint64_t handle, uint64_t size)
{
    if (om_ranges_add(&s->held, handle, size, 0, true) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->held.v[s->held.n - 1].charged = size;
    s->held.v[s->held.n - 1].dev = dev;
    add_bytes(s, dev, size);
    return CUDA_SUCCESS;
}

void om_memcap_drop(struct session *s, uint64_t handle)
{
    struct om_range *r = om_ranges_find_base(&s->held, handle);

    if (!r)
        return; /* imported, or not counted */
    give_bytes(s, r->dev, r->charged);
    om_ranges_remove(&s->held, r);
}

void om_memcap_free(struct session *s)
{
    om_ranges_free(&s->held);
    for (unsigned d = 0; d < OM_MAX_DEVICES; d++)
        __atomic_store_n(&s->device_bytes[d], 0, __ATOMIC_RELAXED);
}
