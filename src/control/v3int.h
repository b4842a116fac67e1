/* SPDX-License-Identifier: MIT */
/* What v3.c (named servers, namespaces, the configuration file, routing) shares with v3cmd.c
 * (protocol 3's commands), and no other file uses. */
#ifndef OM_CONTROL_V3INT_H
#define OM_CONTROL_V3INT_H

#include <stdbool.h>
#include <stddef.h>

#include "v3.h"

struct daemon;

/* The daemon's named servers, made at the first use. NULL only without memory. */
struct om_v3 *om_v3_state(struct daemon *d);
/* A named server, or a namespace of one, by name; NULL for none. */
struct om_v3_server *om_v3_find_server(struct daemon *d, const char *name);
struct om_v3_ns *om_v3_find_ns(struct om_v3_server *s, const char *name);
/* A server's or namespace's name: letters, digits, '_' and '-', at most 63 (NVIDIA's are
 * lower-case letters, digits and '_'). */
bool om_v3_good_name(const char *s);
/* allowed_devices: ordinals and GPU UUIDs (or their prefixes), comma-separated. */
bool om_v3_good_devices(const char *s);
/* The limits of a server or namespace from its values as text (the file's, a command's). A
 * NULL text leaves that limit as it is. 0, or -EINVAL with a sentence in err. */
int om_v3_set_limits(struct om_limits *l, const char *mem, const char *atp, const char *prio,
                     char *err, size_t errlen);
/* The running clients of server vs in namespace `from` go to namespace `to` (the same one when
 * its limits changed), each one's limits sent to its server where they changed; how many were
 * in `from`. */
unsigned om_v3_ns_move_clients(struct daemon *d, const struct om_v3_server *vs, const char *from,
                               const struct om_v3_ns *to);
/* How many running clients server vs has in namespace ns. */
unsigned om_v3_ns_clients(struct daemon *d, const struct om_v3_server *vs, const char *ns);

#endif
