/* SPDX-License-Identifier: MIT */
/*
 * CUDA_VISIBLE_DEVICES on a client: which of its server's devices it sees, in which order.
 * The daemon resolves the client's text (it knows the server's devices); the server maps every
 * device ordinal the client passes or receives through the result (server/devmap.c).
 */
#ifndef OPENMPS_VISIBLE_H
#define OPENMPS_VISIBLE_H

#include <stdint.h>

#include "openmps/protocol.h"

/* Reads `spec` as the driver reads CUDA_VISIBLE_DEVICES (each read of it measured against the
 * driver on two GPUs: tests/gpu/multi/run.sh): comma-separated ordinals of the server's devices
 * or GPU UUIDs ("GPU-" and enough leading digits, any case, to name one device), spaces around
 * an entry ignored; the first entry that names no device ends the list. Returns the count (0:
 * the client sees no device, its cuInit answers CUDA_ERROR_NO_DEVICE), or -1 when a device is
 * named twice (the driver's cuInit then answers CUDA_ERROR_INVALID_DEVICE). */
int om_visible_resolve(const char *spec, const struct om_device_info *devs, uint32_t ndevs,
                       struct om_devmap *ret);
/* Every device, in the server's order (no CUDA_VISIBLE_DEVICES on the client). */
void om_visible_all(uint32_t ndevs, struct om_devmap *ret);
/* A client's own request (its CUDA_MPS_PINNED_DEVICE_MEM_LIMIT's ordinals count its devices) in
 * the server's ordinals; limits for ordinals it does not have are dropped (a UUID entry names a
 * server device directly, visible to the client or not: om_visible_mem_limits). */
struct om_limits om_visible_limits(const struct om_limits *want, const struct om_devmap *m);
/* The UUID entries of a client's CUDA_MPS_PINNED_DEVICE_MEM_LIMIT ("GPU-<uuid or prefix>=SIZE";
 * its ordinal entries the client parsed itself) into l, in the server's ordinals, the tighter
 * where a device already has a limit. Returns how many named no device (the first in bad). */
int om_visible_mem_limits(const char *spec, const struct om_device_info *devs, uint32_t ndevs,
                          struct om_limits *l, char *bad, size_t badlen);
/* A map from the daemon: every ordinal below ndevs, none twice. 0 or -1. */
int om_decode_devmap(const struct om_devmap *in, uint32_t ndevs, struct om_devmap *ret);

#endif
