/* SPDX-License-Identifier: MIT */
/* Launch attributes (CUlaunchAttribute) as they travel between the client and the server: their
 * size, how many one launch carries, and which of them travel as plain bytes. The client's
 * launches and cluster occupancy queries (src/client/api/launch.c, occupancy.c) and the server's
 * checks of launches, kernel node attributes and occupancy queries (src/server/api/) read this
 * one list. */
#ifndef OM_COMMON_LAUNCHATTR_H
#define OM_COMMON_LAUNCHATTR_H

#include <stdbool.h>
#include <stdint.h>

#define OM_LAUNCH_ATTR_BYTES 72       /* an id, padding, a 64-byte value */
#define OM_LAUNCH_ATTR_VALUE_BYTES 64 /* CUlaunchAttributeValue (CUkernelNodeAttrValue) */
#define OM_LAUNCH_ATTRS_MAX 16        /* attributes of one launch or query */

/* CU_LAUNCH_ATTRIBUTE_IGNORE: an entry of a launch's attribute list that the driver skips. It is
 * no attribute of a kernel node (whose getter and setter refuse it), so it is not in the list
 * below: the launch and the occupancy query accept it beside the list. */
#define OM_LAUNCH_ATTR_IGNORE 0
#define OM_LAUNCH_ATTR_ACCESS_POLICY_WINDOW 1
#define OM_LAUNCH_ATTR_PRIORITY 8

/* Attributes whose values hold no handle (events, graph nodes): they travel as bytes. The others
 * would need translating and are refused (NOT_SUPPORTED). */
static inline bool om_launch_attr_plain(int64_t id)
{
    switch (id) {
    case OM_LAUNCH_ATTR_ACCESS_POLICY_WINDOW: /* a device address, a cache hint */
    case 2:                                   /* cooperative */
    case 3:                                   /* synchronization policy */
    case 4:                                   /* cluster dimension */
    case 5:                                   /* cluster scheduling policy */
    case 6:                                   /* programmatic stream serialization */
    case 8:                                   /* priority */
    case 9:                                   /* memory sync domain map */
    case 10:                                  /* memory sync domain */
    case 11:                                  /* preferred cluster dimension */
    case 14:                                  /* preferred shared memory carveout */
    case 16: /* NVLink-centric scheduling (a hint; NCCL sets it on compute capability 10+) */
        return true;
    default: return false;
    }
}

#endif
