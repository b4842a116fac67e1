/* SPDX-License-Identifier: MIT */
/* UNIX seqpacket sockets: listen, connect, peer credentials. */
#define _GNU_SOURCE
#include "sock.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int om_path_join(char *buf, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(buf, cap, "%s/%s", dir, name);

    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static int fill_addr(struct sockaddr_un *sa, const char *path)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(sa->sun_path))
        return -ENAMETOOLONG;
    strcpy(sa->sun_path, path);
    return 0;
}

int om_sock_bind(const char *path, mode_t mode)
{
    struct sockaddr_un sa;
    int fd, rc;

    rc = fill_addr(&sa, path);
    if (rc < 0)
        return rc;
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    if (chmod(path, mode) < 0) {
        rc = -errno;
        unlink(path);
        close(fd);
        return rc;
    }
    return fd;
}

int om_sock_start(int fd)
{
    return listen(fd, 512) < 0 ? -errno : 0;
}

int om_sock_listen(const char *path, mode_t mode)
{
    int fd = om_sock_bind(path, mode), rc;

    if (fd < 0)
        return fd;
    rc = om_sock_start(fd);
    if (rc < 0) {
        unlink(path);
        close(fd);
        return rc;
    }
    return fd;
}

int om_sock_connect(const char *path)
{
    struct sockaddr_un sa;
    int fd, rc;

    rc = fill_addr(&sa, path);
    if (rc < 0)
        return rc;
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    do
        rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    while (rc < 0 && errno == EINTR);
    if (rc < 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    return fd;
}

int om_sock_peercred(int fd, pid_t *ret_pid, uid_t *ret_uid, gid_t *ret_gid)
{
    struct ucred uc;
    socklen_t len = sizeof(uc);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
        return -errno;
    if (ret_pid)
        *ret_pid = uc.pid;
    if (ret_uid)
        *ret_uid = uc.uid;
    if (ret_gid)
        *ret_gid = uc.gid;
    return 0;
}
