/* SPDX-License-Identifier: MIT */
/* The host-callback channel: the server asks a client to run one of its host functions (a host
 * node's, or a captured cuLaunchHostFunc's) when the driver reaches it (docs/architecture.md,
 * "Host nodes"). One page of shared memory per session, made by the server at the first host
 * node and sent after that call's answer (OM_MSG_HOST_MEM); one request at a time. */
#ifndef OM_HOSTCB_H
#define OM_HOSTCB_H

#include <stdint.h>

#define OM_HOSTCB_MAGIC 0x42434f48u /* "HOCB" */
#define OM_HOSTCB_BYTES 4096u

struct om_hostcb_area {
    uint32_t magic;
    uint32_t req;  /* the server's request number: bumped after fn and data are written (futex) */
    uint32_t done; /* the client copies req here once fn(data) returned (futex) */
    uint32_t reserved;
    uint64_t fn, data; /* the client's own function and argument */
};

#endif
