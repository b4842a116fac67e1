/* SPDX-License-Identifier: MIT */
/* NVIDIA's MPS v3 interface in openmps-control: named servers, namespaces, module-verb commands. */
#ifndef OM_CONTROL_V3_H
#define OM_CONTROL_V3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "conffile.h"
#include "openmps/protocol.h"

struct daemon;
struct conn;
struct server;
struct strbuf;

/* The protocols: 2 (NVIDIA's legacy commands, the default) and 3 (module-verb commands, named
 * servers and namespaces). */
#define OM_PROTOCOL_LEGACY 2
#define OM_PROTOCOL_V3 3

/* Named servers and namespaces that commands may create; the configuration file's bounds. */
#define OM_V3_MAX_SERVERS OM_CONF_MAX_SERVERS
#define OM_V3_MAX_NAMESPACES OM_CONF_MAX_NAMESPACES
#define OM_V3_NS_PARTS OM_CONF_MAX_DEVICES /* SM partitions of a namespace: one per device */

struct om_v3_ns {
    char name[OM_CONF_NAME_MAX];
    struct om_limits limits;       /* what its clients are held to, within their server's */
    char cgroup[OM_CONF_TEXT_MAX]; /* clients in this cgroup (v2 path) land here; "" none */
    unsigned cgroup_depth;         /* 0: any depth below it */
    /* The static SM partitions its clients run in (partition.c's serials), one per device at
     * most: a client that names none runs in the first on a device it sees. */
    unsigned nparts;
    uint64_t parts[OM_V3_NS_PARTS];
};

struct om_v3_server {
    char name[OM_CONF_NAME_MAX];
    uid_t uid;
    struct om_limits limits; /* has_limits: replaces the daemon's defaults for its process */
    bool has_atp, has_priority, has_mem;
    bool locality_domains; /* asked for (server create|set, the file): each GPU is still one
                            * device (docs/operations.md, "Locality domains") */
    char allowed_devices[OM_CONF_TEXT_MAX];
    unsigned nns;
    struct om_v3_ns ns[OM_V3_MAX_NAMESPACES];
};

/* A socket of a named server (ns "": the server's own, its default namespace's) or of one of
 * its namespaces: $CUDA_MPS_PIPE_DIRECTORY/<server>[/<ns>]/control.sock. A client whose
 * CUDA_MPS_PIPE_DIRECTORY is that directory lands in that namespace. */
#define OM_V3_MAX_LISTENERS (OM_V3_MAX_SERVERS * (OM_V3_MAX_NAMESPACES + 1))
struct om_v3_listener {
    int fd;
    char server[OM_CONF_NAME_MAX];
    char ns[OM_CONF_NAME_MAX];
};

struct om_v3 {
    unsigned nservers;
    struct om_v3_server servers[OM_V3_MAX_SERVERS];
    unsigned nlisteners;
    struct om_v3_listener listeners[OM_V3_MAX_LISTENERS];
};

/* Protocol 3's commands, one a line, for `help` on a daemon of protocol 3. */
extern const char *const om_v3_help;

/* Turns a parsed configuration file into the daemon's named servers and namespaces, and makes
 * its static SM partitions (a namespace's devices route its clients into them). What openmps
 * cannot do (compute policies, locality domains, shareable partitions) is refused: err names the
 * file's line. 0 or -EINVAL/-ENOMEM. */
int om_v3_apply_conf(struct daemon *d, const struct om_conf *c, char *err, size_t errlen);

/* Sets the environment from the file's [openmps] table, where a variable is not already set
 * (the environment wins). */
void om_v3_apply_settings(const struct om_conf *c);

/* True when argv[0] is a v3 module (server, client, namespace, sm-partition, ...): the command
 * was run (or refused on a protocol-2 daemon) into out. om_v3_is_module: whether a word names
 * one (the front-end: an error answer to one exits 1). */
bool om_v3_is_module(const char *word);
bool om_v3_command(struct daemon *d, struct conn *ui, int argc, char **argv, struct strbuf *out,
                   bool *ret_error);

/* The limits a new server process of named server `name` starts with: the named server's, else
 * (name "", or one deleted) the daemon's defaults. */
struct om_limits om_v3_server_limits(const struct daemon *d, const char *name);

/* The devices of named server `name`, where its allowed_devices is set, as
 * "CUDA_VISIBLE_DEVICES=..." for the server's environment; "" otherwise. */
void om_v3_server_visible(const struct daemon *d, const char *name, char *kv, size_t cap);

/* The named server a client of uid reaches by its uid on the main socket: uid's first named
 * server (the configuration file's order, then creation's), "" for none (its plain server). */
const char *om_v3_uid_server(const struct daemon *d, uid_t uid);

/* Chooses the server process a new client c goes to (c->route_uid, c->route): the named server
 * of the socket it came through, where that server serves its user; else on the main socket
 * the named server of its user (with -m, the multi-user servers' owner) with the namespace
 * whose cgroup holds it most specifically; else that user's first named server; else the
 * user's plain server. */
void om_v3_route_server(const struct daemon *d, struct conn *c);
/* Whether c's named server still exists for c's user (it may be deleted, or deleted and made
 * again for another user, while c waits). */
bool om_v3_route_valid(const struct daemon *d, const struct conn *c);

/* Server s said which devices it has (READY): its named server's limits for "every device" are
 * kept for those. */
void om_v3_server_ready(const struct daemon *d, struct server *s);

/* The namespace a new client c of server s lands in (by the socket it came through, else by its
 * cgroup, else the default namespace), NULL when s is no named server. Chosen once per client
 * (servers.c): its SM partition and its limits come from the same one. */
const struct om_v3_ns *om_v3_client_ns(const struct daemon *d, const struct server *s,
                                       const struct conn *c);

/* Namespace n (om_v3_client_ns's; NULL: none) of server s: its limits tighten *want, and its
 * name is written to ns (cap bytes; "" for none). */
void om_v3_route_client(const struct server *s, const struct om_v3_ns *n, struct om_limits *want,
                        char *ns, size_t cap);

/* True when a namespace routes its clients into SM partition serial: who gets "namespace NS of
 * server S" (partition.c refuses to remove it). */
bool om_v3_part_user(const struct daemon *d, uint64_t serial, char *who, size_t cap);

/* True when cgroup (a cgroup v2 path, "/a/b") lies in want (the same form, or under
 * /sys/fs/cgroup), at most max_depth levels below it (0: any). */
bool om_v3_in_cgroup(const char *want, unsigned max_depth, const char *cgroup);

/* The cgroup v2 path in a /proc/PID/cgroup file (its "0::" line, read whole) into buf; "" when
 * there is none, or it does not fit in cap bytes. */
void om_v3_cgroup_file(const char *path, char *buf, size_t cap);

/* Opens the sockets of the named servers and namespaces that have none and closes (and
 * removes) those of the ones gone. Called after every change; a socket that cannot be made is
 * logged. */
void om_v3_sync_listeners(struct daemon *d);
/* The listening sockets for the event loop: how many, and the i-th's descriptor. */
unsigned om_v3_nlisteners(const struct daemon *d);
int om_v3_listener_fd(const struct daemon *d, unsigned i);
/* A connection of uid accepted on listener i: with c NULL, whether to take it (false: why
 * filled; its user is not the server's); then records its route in c. */
bool om_v3_accepted(const struct daemon *d, unsigned i, uid_t uid, struct conn *c, char *why,
                    size_t cap);

/* Closes and removes the sockets and frees the named servers (NULL-safe). */
void om_v3_cleanup(struct daemon *d);

#endif
