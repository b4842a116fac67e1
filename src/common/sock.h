/* SPDX-License-Identifier: MIT */
/* UNIX seqpacket sockets: listen, connect, peer credentials. */
#ifndef OM_SOCK_H
#define OM_SOCK_H

#include <sys/types.h>

/* Name of the daemon's socket inside the pipe directory. */
#define OM_CONTROL_SOCKET "control.sock"

/* Binds and listens at path with the given mode. A file already at path is
 * the caller's to remove first. Returns the listening fd or -errno. */
int om_sock_listen(const char *path, mode_t mode);

/* om_sock_listen in two steps: bind (the file at path, connect refused with ECONNREFUSED), then
 * listen, once whatever a connection may rely on is ready (the daemon's control socket: last).
 * om_sock_bind returns the fd or -errno; om_sock_start 0 or -errno. */
int om_sock_bind(const char *path, mode_t mode);
int om_sock_start(int fd);

/* Connects to path. Returns the fd or -errno (-ENOENT, -ECONNREFUSED when no
 * daemon listens, -ENAMETOOLONG for a path too long for a socket address). */
int om_sock_connect(const char *path);

/* Credentials of the process at the other end, as of its connect(2). */
int om_sock_peercred(int fd, pid_t *ret_pid, uid_t *ret_uid, gid_t *ret_gid);

/* Joins dir and name into buf; -ENAMETOOLONG when it does not fit. */
int om_path_join(char *buf, size_t cap, const char *dir, const char *name);

#endif
