/* SPDX-License-Identifier: MIT */
/* Daemon start-up: directories, the instance lock, refusing NVIDIA's daemon, socket, pid file. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/log.h"
#include "../common/sock.h"

#define LOCK_NAME "control.lock"
#define PID_NAME "openmps-control.pid"
/* The control socket until it listens; shorter than its name, so any pipe directory that fits
 * one fits the other. */
#define SOCK_NEW_NAME "control.new"

/* True when something accepts connections on path (stream or seqpacket). */
static bool socket_alive(const char *path)
{
    static const int types[] = {SOCK_STREAM, SOCK_SEQPACKET};
    struct sockaddr_un sa = {.sun_family = AF_UNIX};

    if (strlen(path) >= sizeof(sa.sun_path))
        return false;
    strcpy(sa.sun_path, path);
    for (int i = 0; i < 2; i++) {
        int fd = socket(AF_UNIX, types[i] | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
        close(fd);
        if (rc == 0)
            return true;
    }
    return false;
}

static pid_t read_pid_file(const char *path)
{
    char buf[32] = "";
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return 0;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    return (pid_t)atoi(buf);
}

static bool pid_alive(pid_t pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* NVIDIA's daemon leaves nvidia-cuda-mps-control.pid while it runs and
 * listens on "control" in the pipe directory. */
static int refuse_nvidia(const char *pipe_dir, char *err, size_t errlen)
{
    char path[300];
    pid_t pid;

    if (om_path_join(path, sizeof(path), pipe_dir, "nvidia-cuda-mps-control.pid") < 0)
        return 0;
    pid = read_pid_file(path);
    if (!pid_alive(pid))
        pid = 0;
    if (om_path_join(path, sizeof(path), pipe_dir, "control") == 0 && socket_alive(path) && !pid)
        pid = -1;
    if (!pid)
        return 0;
    if (pid > 0)
        snprintf(err, errlen,
                 "the pipe directory %s is in use by NVIDIA's MPS daemon "
                 "(nvidia-cuda-mps-control, pid %d); set CUDA_MPS_PIPE_DIRECTORY to another "
                 "directory for openmps",
                 pipe_dir, (int)pid);
    else
        snprintf(err, errlen,
                 "the pipe directory %s is in use by NVIDIA's MPS daemon (its control socket "
                 "answers); set CUDA_MPS_PIPE_DIRECTORY to another directory for openmps",
                 pipe_dir);
    return -EBUSY;
}

static void find_server_exe(struct daemon *d)
{
    const char *env = getenv("OPENMPS_SERVER");
    char self[4096];
    ssize_t n;

    if (env && *env) {
        snprintf(d->server_exe, sizeof(d->server_exe), "%s", env);
        return;
    }
    n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        snprintf(d->server_exe, sizeof(d->server_exe), "openmps-server");
        return;
    }
    self[n] = '\0';
    snprintf(d->server_exe, sizeof(d->server_exe), "%s/openmps-server", dirname(self));
}

/* Opens a log for appending, readable by its owner only: a log left 0644 by
 * an older version is tightened too. */
static int open_log(const char *dir, const char *name, char *err, size_t errlen)
{
    char path[300];
    int fd, rc;

    if (om_path_join(path, sizeof(path), dir, name) < 0) {
        snprintf(err, errlen, "the log directory path %s is too long", dir);
        return -ENAMETOOLONG;
    }
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || fchmod(fd, 0600) < 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot %s %s: %s", fd < 0 ? "open" : "restrict the mode of", path,
                 strerror(errno));
        if (fd >= 0)
            close(fd);
        return rc;
    }
    return fd;
}

int om_daemon_setup(struct daemon *d, char *err, size_t errlen)
{
    char path[300];
    mode_t pipe_mode;
    sigset_t mask;
    int fd, rc, log_fd;
    pid_t other;

    d->euid = geteuid();
    d->pipe_dir = om_daemon_pipe_dir(d->euid);
    d->log_dir = om_daemon_log_dir(d->euid);
    d->listen_fd = d->signal_fd = d->lock_fd = d->server_log_fd = -1;
    d->start_uid = -1;
    d->hello_timeout_ms = OM_HELLO_TIMEOUT_MS;
    d->max_conns = om_raise_nofile() - OM_FD_RESERVE;
    if (d->max_conns < 16)
        d->max_conns = 16;
    d->server_start_timeout_ms = OM_SERVER_START_TIMEOUT_MS;
    if (getenv("OPENMPS_SERVER_START_TIMEOUT_MS"))
        d->server_start_timeout_ms = atoi(getenv("OPENMPS_SERVER_START_TIMEOUT_MS"));
    if (d->server_start_timeout_ms < 100)
        d->server_start_timeout_ms = 100;
    d->server_kill_grace_ms = OM_SERVER_KILL_GRACE_MS;
    if (getenv("OPENMPS_SERVER_KILL_GRACE_MS"))
        d->server_kill_grace_ms = atoi(getenv("OPENMPS_SERVER_KILL_GRACE_MS"));
    if (d->server_kill_grace_ms < 100)
        d->server_kill_grace_ms = 100;
    if (getenv("OPENMPS_HELLO_TIMEOUT_MS"))
        d->hello_timeout_ms = atoi(getenv("OPENMPS_HELLO_TIMEOUT_MS"));
    if (d->hello_timeout_ms < 100)
        d->hello_timeout_ms = 100;
    find_server_exe(d);
    /* A root daemon serves every user: they must reach the socket. A plain
     * user's daemon serves only that user: nobody else needs to look in. */
    pipe_mode = d->euid == 0 ? 0755 : 0700;
    rc = om_make_private_dir(d->pipe_dir, pipe_mode, err, errlen);
    if (rc < 0)
        return rc;
    /* The logs name every user's processes and commands: root's (or the
     * daemon's user's) only. Servers write server.log through the descriptor
     * they inherit, so they need no access to the directory. */
    rc = om_make_private_dir(d->log_dir, 0700, err, errlen);
    if (rc < 0)
        return rc;
    rc = refuse_nvidia(d->pipe_dir, err, errlen);
    if (rc < 0)
        return rc;
    if ((rc = om_path_join(path, sizeof(path), d->pipe_dir, LOCK_NAME)) < 0 ||
        (rc = om_path_join(d->pid_path, sizeof(d->pid_path), d->pipe_dir, PID_NAME)) < 0 ||
        (rc = om_path_join(d->sock_path, sizeof(d->sock_path), d->pipe_dir, OM_CONTROL_SOCKET)) <
            0 ||
        (rc = om_path_join(d->sock_new, sizeof(d->sock_new), d->pipe_dir, SOCK_NEW_NAME)) < 0) {
        snprintf(err, errlen, "the pipe directory path %s is too long", d->pipe_dir);
        return rc;
    }
    /* The lock is held for the daemon's life; a crashed daemon's lock is
     * released by the kernel, so stale files never block a new daemon. */
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return rc;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        rc = -errno;
        other = read_pid_file(d->pid_path);
        if (rc == -EWOULDBLOCK)
            snprintf(err, errlen, "an instance of this daemon is already running on %s (pid %d)",
                     d->pipe_dir, (int)other);
        else
            snprintf(err, errlen, "cannot lock %s: %s", path, strerror(-rc));
        close(fd);
        return rc == -EWOULDBLOCK ? -EBUSY : rc;
    }
    d->lock_fd = fd;
    if (unlink(d->sock_path) == 0)
        om_debug("removed a stale socket %s", d->sock_path);
    unlink(d->sock_new); /* a crashed daemon's, never listened on */
    /* Bound now, under another name, and listened on last (om_daemon_listen), which then gives it
     * its name: once control.sock is there it answers, and every socket of the configuration and
     * the pid file are there too (a script that waits for the file, or for an answer, may start
     * clients at once). */
    d->listen_fd = om_sock_bind(d->sock_new, d->euid == 0 ? 0666 : 0600);
    if (d->listen_fd < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", d->sock_path, strerror(-d->listen_fd));
        return d->listen_fd;
    }
    log_fd = open_log(d->log_dir, "control.log", err, errlen);
    if (log_fd < 0)
        return log_fd;
    om_log_init("Control", log_fd);
    d->server_log_fd = open_log(d->log_dir, "server.log", err, errlen);
    if (d->server_log_fd < 0)
        return d->server_log_fd;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    d->signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (d->signal_fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "signalfd: %s", strerror(errno));
        return rc;
    }
    return om_metrics_setup(d, err, errlen);
}

int om_daemon_listen(struct daemon *d, char *err, size_t errlen)
{
    int rc = om_sock_start(d->listen_fd);

    if (rc == 0 && rename(d->sock_new, d->sock_path) < 0)
        rc = -errno;
    if (rc < 0)
        snprintf(err, errlen, "cannot listen on %s: %s", d->sock_path, strerror(-rc));
    return rc;
}

int om_daemon_write_pid(struct daemon *d)
{
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
    int fd = open(d->pid_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);

    if (fd < 0)
        return -errno;
    if (write(fd, buf, (size_t)n) != n) {
        close(fd);
        return -EIO;
    }
    close(fd);
    return 0;
}

void om_daemon_cleanup(struct daemon *d)
{
    /* Remove our files while we still hold the lock, so a new daemon never
     * sees them half-gone. */
    if (d->listen_fd >= 0) {
        unlink(d->sock_path);
        unlink(d->sock_new); /* a set-up that failed before the listen */
        close(d->listen_fd);
    }
    unlink(d->pid_path);
    if (d->signal_fd >= 0)
        close(d->signal_fd);
    if (d->server_log_fd >= 0)
        close(d->server_log_fd);
    om_v3_cleanup(d);
    om_metrics_cleanup(d);
    om_parts_free(d);
    if (d->lock_fd >= 0)
        close(d->lock_fd);
}
