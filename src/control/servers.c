/* SPDX-License-Identifier: MIT */
/* Server lifecycle: starting openmps-server as a user, handing it clients, noticing its end. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/log.h"
#include "../common/visible.h"

bool om_server_live(const struct server *s)
{
    return s->state == SRV_INITIALIZING || s->state == SRV_ACTIVE;
}

struct server *om_server_find_pid(struct daemon *d, pid_t pid)
{
    for (struct server *s = d->servers; s; s = s->next)
        if (s->pid == pid)
            return s;
    return NULL;
}

struct server *om_server_for(struct daemon *d, uid_t uid, const char *name)
{
    for (struct server *s = d->servers; s; s = s->next)
        if (s->uid == uid && !strcmp(s->name, name) && om_server_live(s) && !s->stop_when_idle)
            return s;
    return NULL;
}

struct server *om_server_for_uid(struct daemon *d, uid_t uid)
{
    for (struct server *s = d->servers; s; s = s->next)
        if (s->uid == uid && om_server_live(s) && !s->stop_when_idle)
            return s;
    return NULL;
}

bool om_multiuser_listed(const struct daemon *d, uid_t uid)
{
    for (unsigned i = 0; d->multiuser && i < d->n_mu_uids; i++)
        if (d->mu_uids[i] == uid)
            return true;
    return false;
}

bool om_sees_server(const struct daemon *d, const struct conn *ui, const struct server *s)
{
    return !ui || ui->uid == 0 || ui->uid == s->uid ||
           (s->shared && om_multiuser_listed(d, ui->uid));
}

uid_t om_serving_uid(const struct daemon *d, uid_t uid)
{
    return om_multiuser_listed(d, uid) ? d->mu_uids[0] : uid;
}

bool om_user_served(struct daemon *d, uid_t uid)
{
    return om_server_for_uid(d, om_serving_uid(d, uid)) != NULL;
}

int om_multiuser_setup(struct daemon *d, char *err, size_t errlen)
{
    const char *optin = getenv("OPENMPS_MULTIUSER_SHARED_ADDRESS_SPACE");
    const char *list = getenv("OPENMPS_MULTIUSER_UIDS");

    if (!optin || strcmp(optin, "1") != 0) {
        snprintf(err, errlen,
                 "-m (multi-user servers) is refused: openmps's clients share their server's GPU "
                 "address space, so one user's kernels could read and write another user's "
                 "memory. Each user gets a server of its own; an operator who accepts the risk "
                 "for users who trust each other sets OPENMPS_MULTIUSER_SHARED_ADDRESS_SPACE=1 "
                 "and OPENMPS_MULTIUSER_UIDS (docs/security.md, \"Multi-user servers\")");
        return -1;
    }
    if (d->euid != 0) {
        snprintf(err, errlen,
                 "-m: a daemon run as uid %u serves only its own user; run it as root to serve "
                 "several users in one server",
                 (unsigned)d->euid);
        return -1;
    }
    d->n_mu_uids = 0;
    for (const char *p = list ? list : ""; *p;) {
        char *end;
        unsigned long v;
        if (*p < '0' || *p > '9' || (v = strtoul(p, &end, 10)) >= 0xffffffffUL ||
            (*end && *end != ',') || end - p > 10) {
            snprintf(err, errlen,
                     "-m: OPENMPS_MULTIUSER_UIDS=%.64s: give the users' ids, comma-separated "
                     "(1000,1001)",
                     list);
            return -1;
        }
        bool dup = false;
        for (unsigned i = 0; i < d->n_mu_uids; i++)
            dup |= d->mu_uids[i] == (uid_t)v;
        if (v == 0) {
            snprintf(err, errlen,
                     "-m: OPENMPS_MULTIUSER_UIDS names root (0): root's clients never share a "
                     "server with other users");
            return -1;
        }
        if (!dup && d->n_mu_uids == OM_MULTIUSER_MAX_UIDS) {
            snprintf(err, errlen, "-m: OPENMPS_MULTIUSER_UIDS names more than %d users",
                     OM_MULTIUSER_MAX_UIDS);
            return -1;
        }
        if (!dup)
            d->mu_uids[d->n_mu_uids++] = (uid_t)v;
        p = *end ? end + 1 : end;
    }
    if (d->n_mu_uids < 2) {
        snprintf(err, errlen,
                 "-m: OPENMPS_MULTIUSER_UIDS must name the users (two or more, comma-separated) "
                 "whose clients share one server");
        return -1;
    }
    d->multiuser = true;
    return 0;
}

/* Moves fd to a number >= 10 so that dup2 into 3 and 4 cannot clobber it. */
static int lift_fd(int fd)
{
    return fcntl(fd, F_DUPFD, 10);
}

static _Noreturn void child_fail(int log_fd, const char *what, int err)
{
    char line[512];
    int n = snprintf(line, sizeof(line), "openmps-control: cannot start openmps-server: %s: %s\n",
                     what, strerror(err));
    if (n > 0 && write(log_fd, line, (size_t)n) < 0) {
        /* nothing more to do */
    }
    _exit(127);
}

/*
 * OPENMPS_SERVER_NICE (-20 to 19): the nice value the servers run at, their threads' and their
 * session group's (servers.c, child_nice). A server's threads do its clients' driver work
 * (launches, copies, waits), so a client's batch needs the client's thread and a server thread
 * in turn, each of which waits for a core when another process's burst takes them all (B8 in
 * docs/benchmarks.md). Below 0 the server's threads come first. Set in the server's process
 * before the daemon drops root (a daemon not run by root needs CAP_SYS_NICE or RLIMIT_NICE for
 * values below its own); refused by the kernel, the server starts at the daemon's and its log
 * says why. For measuring (B8); off by default.
 */
static void server_nice_setting(struct daemon *d)
{
    const char *v = getenv("OPENMPS_SERVER_NICE");
    char *end;
    long n;

    if (d->server_nice_read)
        return; /* once: at the first server's start, when control.log is open */
    d->server_nice_read = true;
    if (!v || !*v)
        return;
    n = strtol(v, &end, 10);
    if (*end || n < -20 || n > 19) {
        om_warn("OPENMPS_SERVER_NICE=%s is not a nice value from -20 to 19: the servers keep "
                "the daemon's",
                v);
        return;
    }
    d->server_nice = (int)n;
    d->server_nice_set = true;
}

/* A line in the server's log from the child (no allocation, no stdio buffers). */
static void child_note(int log_fd, const char *what, int value, int err)
{
    char line[256];
    int n = snprintf(line, sizeof(line),
                     "openmps-control: openmps-server keeps the daemon's %s: "
                     "OPENMPS_SERVER_NICE=%d: %s\n",
                     what, value, strerror(err));
    if (n > 0 && write(log_fd, line, (size_t)n) < 0) {
        /* nothing more to do */
    }
}

/*
 * OPENMPS_SERVER_NICE in the server's process: its threads' nice value, and, where the kernel
 * groups the threads of a session for scheduling (CONFIG_SCHED_AUTOGROUP, on in most
 * distributions' kernels), its session group's, since a thread's nice value orders it only
 * among the threads of its own group, and each session competes with the others as one group
 * (sched(7), "The autogroup feature"). So the server gets a session of its own first: the
 * group's value is then the server's alone, not its daemon's (or, for a daemon in the
 * foreground, its terminal's). The server still ends with its daemon (its channel closes).
 */
static void child_nice(int log_fd, int nice)
{
    char v[16];
    int fd, n;

    if (setpriority(PRIO_PROCESS, 0, nice) < 0)
        child_note(log_fd, "nice value", nice, errno);
    if (setsid() < 0)
        return; /* already a session leader: never, for a child of fork */
    fd = open("/proc/self/autogroup", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return; /* no autogroups: the threads' nice value is all there is */
    n = snprintf(v, sizeof(v), "%d", nice);
    if (write(fd, v, (size_t)n) < 0)
        child_note(log_fd, "session group's nice value", nice, errno);
    close(fd);
}

/* Who the server will be and what it starts with, made before fork: the child only makes
 * system calls (no NSS, no allocation between fork and exec). */
struct identity {
    uid_t uid;
    gid_t gid;
    int ngroups;
    gid_t groups[64];
    char home[256];
    char home_kv[270];
    char visible_kv[300]; /* CUDA_VISIBLE_DEVICES= its named server's allowed_devices (v3.c) */
    char shared_kv[800];  /* OPENMPS_SERVER_SHARED_USERS= the other users it serves (-m), "" */
    char **envp;          /* its whole environment (server_env) */
    bool limits_set;
    struct rlimit limits[RLIM_NLIMITS]; /* process 1's, when the daemon is root */
};

/* Whether `kv` (NAME=value) is one of the settings a server gets from the daemon's
 * environment: OPENMPS_* (docs/operations.md, "Environment"), the driver's CUDA_* but
 * CUDA_MPS_* (the daemon's and its clients': the driver in the server must not look for an
 * MPS daemon), where the driver is found (LD_LIBRARY_PATH), the time zone of the log lines (TZ),
 * the sanitizers' options of a sanitized build, and what OPENMPS_SERVER_ENV names (a list of
 * names, an entry ending in '*' a prefix: another driver's settings). */
static bool server_setting(const char *kv, const char *extra)
{
    static const char *const exact[] = {
        "LD_LIBRARY_PATH", "TZ",           "ASAN_OPTIONS", "LSAN_OPTIONS",
        "UBSAN_OPTIONS",   "TSAN_OPTIONS", "MSAN_OPTIONS"};
    size_t n = strcspn(kv, "=");

    if (kv[n] != '=')
        return false;
    if (!strncmp(kv, "OPENMPS_", 8) || (!strncmp(kv, "CUDA_", 5) && strncmp(kv, "CUDA_MPS_", 9)))
        return true;
    for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
        if (strlen(exact[i]) == n && !strncmp(kv, exact[i], n))
            return true;
    while (extra && *extra) {
        size_t len = strcspn(extra, ",");
        if (len && extra[len - 1] == '*' ? len - 1 <= n && !strncmp(kv, extra, len - 1)
                                         : len == n && !strncmp(kv, extra, n))
            return true;
        extra += len + (extra[len] == ',');
    }
    return false;
}

/* The server's environment: the settings above from the daemon's, HOME of its user, a plain
 * PATH, and what the daemon sets for the driver. Nothing else of the daemon's (a root daemon's
 * environment is root's, and a server's is readable by its user in /proc). */
static char **server_env(struct identity *id)
{
    extern char **environ;
    const char *extra = getenv("OPENMPS_SERVER_ENV");
    size_t n = 0, k = 0;
    char **envp;

    for (char **e = environ; *e; e++)
        n++;
    envp = calloc(n + 8, sizeof(*envp));
    if (!envp)
        return NULL;
    /* OPENMPS_SERVER_SHARED_USERS is the daemon's word alone; a multi-user server keeps no
     * module cache (it would put one user's images in another's HOME). */
    for (char **e = environ; *e; e++)
        if (server_setting(*e, extra) && strncmp(*e, "CUDA_MODULE_LOADING=", 20) &&
            strncmp(*e, "OPENMPS_SERVER_SHARED_USERS=", 28) &&
            !(id->shared_kv[0] && !strncmp(*e, "OPENMPS_MODULE_CACHE=", 21)) &&
            !(id->visible_kv[0] && !strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21)))
            envp[k++] = *e;
    if (id->visible_kv[0])
        envp[k++] = id->visible_kv;
    if (id->shared_kv[0]) {
        envp[k++] = id->shared_kv;
        envp[k++] = "OPENMPS_MODULE_CACHE=off";
    }
    snprintf(id->home_kv, sizeof(id->home_kv), "HOME=%s", id->home[0] ? id->home : "/");
    envp[k++] = id->home_kv;
    envp[k++] = "PATH=/usr/local/bin:/usr/bin:/bin";
    /* More than the default 8 hardware queues, so client streams overlap
     * (docs/driver-facts.md); read by the driver at cuInit. */
    if (!getenv("CUDA_DEVICE_MAX_CONNECTIONS"))
        envp[k++] = "CUDA_DEVICE_MAX_CONNECTIONS=32";
    /* Modules load eagerly, once: a lazily loaded kernel's first launch waits
     * for every running kernel of the context (docs/driver-facts.md). */
    envp[k++] = "CUDA_MODULE_LOADING=EAGER";
    return envp;
}

/* A root daemon gives its servers the limits of process 1, the system's defaults, instead of
 * its own (which whoever started it may have raised or lowered): a server has what a process
 * its user starts would have before a login's own settings. A daemon run by a plain user serves
 * only that user, whose limits it keeps. The server then raises its open files' soft limit to
 * the hard one itself (om_raise_nofile). */
static void system_limits(const struct daemon *d, struct identity *id)
{
    id->limits_set = false;
    if (d->euid != 0)
        return;
    for (int r = 0; r < RLIM_NLIMITS; r++)
        if (prlimit(1, (enum __rlimit_resource)r, NULL, &id->limits[r]) < 0)
            return;
    id->limits_set = true;
}

static void resolve_identity(uid_t uid, struct identity *id)
{
    struct passwd *pw = getpwuid(uid);

    memset(id, 0, sizeof(*id));
    id->uid = uid;
    id->gid = pw ? pw->pw_gid : (gid_t)uid; /* no passwd entry: a group of the same number */
    if (pw) {
        int n = (int)(sizeof(id->groups) / sizeof(id->groups[0]));
        if (getgrouplist(pw->pw_name, id->gid, id->groups, &n) >= 0)
            id->ngroups = n;
        else
            id->groups[0] = id->gid, id->ngroups = 1; /* too many groups: the primary only */
        snprintf(id->home, sizeof(id->home), "%s", pw->pw_dir ? pw->pw_dir : "");
    }
    /* Every user's HOME is its passwd entry's, root's included: a root daemon started without
     * HOME (NVIDIA's device plugin starts it so) still gives its servers a module cache
     * (tests/ipc/test_module_cache.py). A server of the daemon's own user keeps the daemon's HOME,
     * the user's own setting (a container's user often has no passwd entry, only HOME). */
    if (uid == geteuid() && getenv("HOME") && getenv("HOME")[0] == '/')
        snprintf(id->home, sizeof(id->home), "%s", getenv("HOME"));
}

static void close_from(int first)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)first, ~0u, 0u) == 0)
        return;
#endif
    struct rlimit rl;
    long max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                   ? (long)rl.rlim_cur
                   : 65536;
    for (long fd = first; fd < max; fd++)
        close((int)fd);
}

/* In the child: become the user (when the daemon is root) and exec the server. */
static _Noreturn void exec_server(struct daemon *d, const struct identity *id, int chan, int log_fd)
{
    char *argv[] = {"openmps-server", "--channel-fd", "3", "--log-fd", "4", NULL};
    sigset_t none;
    int devnull;

    chan = lift_fd(chan);
    log_fd = lift_fd(log_fd);
    if (chan < 0 || log_fd < 0)
        _exit(127);
    if (dup2(chan, 3) < 0 || dup2(log_fd, 4) < 0)
        _exit(127);
    log_fd = 4;
    devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0 && devnull != STDIN_FILENO) {
        dup2(devnull, STDIN_FILENO);
        close(devnull);
    }
    close_from(5);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    /* While still root. Raising a hard limit takes CAP_SYS_RESOURCE, which a root daemon in a
     * container may lack: then the hard limit stays the daemon's and the soft one is process
     * 1's, as far as that allows. */
    for (int r = 0; id->limits_set && r < RLIM_NLIMITS; r++) {
        enum __rlimit_resource res = (enum __rlimit_resource)r;
        struct rlimit now;
        if (setrlimit(res, &id->limits[r]) == 0 || getrlimit(res, &now) < 0)
            continue;
        if (id->limits[r].rlim_cur < now.rlim_max)
            now.rlim_cur = id->limits[r].rlim_cur;
        else
            now.rlim_cur = now.rlim_max;
        setrlimit(res, &now);
    }
    /* While still root: OPENMPS_SERVER_NICE (setup.c). Refused, the server starts anyway. */
    if (d->server_nice_set)
        child_nice(log_fd, d->server_nice);
    if (d->euid == 0 && id->uid != 0) {
        if (setgroups((size_t)id->ngroups, id->groups) < 0)
            child_fail(log_fd, "setting the groups", errno);
        if (setgid(id->gid) < 0)
            child_fail(log_fd, "setgid", errno);
        if (setuid(id->uid) < 0)
            child_fail(log_fd, "setuid", errno);
        if (setuid(0) == 0)
            child_fail(log_fd, "dropping root", EPERM);
    }
    /* In its user's HOME (as the user: a home it cannot enter is not used), else in /: not in
     * the daemon's directory, which its user may not be meant to see. */
    if (!id->home[0] || chdir(id->home) < 0)
        if (chdir("/") < 0)
            child_fail(log_fd, "changing to /", errno);
    execve(d->server_exe, argv, id->envp);
    child_fail(log_fd, d->server_exe, errno);
}

struct server *om_server_spawn(struct daemon *d, uid_t uid, const char *name, char *err,
                               size_t errlen)
{
    struct identity id;
    struct server *s;
    int sv[2];
    pid_t pid;

    if (d->euid != 0 && uid != d->euid) {
        snprintf(err, errlen,
                 "openmps-control runs as uid %u and can start servers only for that user; "
                 "run the daemon as root to serve uid %u",
                 (unsigned)d->euid, (unsigned)uid);
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        snprintf(err, errlen, "socketpair: %s", strerror(errno));
        free(s);
        return NULL;
    }
    resolve_identity(uid, &id);
    system_limits(d, &id);
    om_v3_server_visible(d, name, id.visible_kv, sizeof(id.visible_kv));
    if (om_multiuser_listed(d, uid)) { /* -m: the other listed users' clients too */
        size_t len =
            (size_t)snprintf(id.shared_kv, sizeof(id.shared_kv), "OPENMPS_SERVER_SHARED_USERS=");
        for (unsigned i = 0; i < d->n_mu_uids && len + 12 < sizeof(id.shared_kv); i++)
            if (d->mu_uids[i] != uid)
                len += (size_t)snprintf(id.shared_kv + len, sizeof(id.shared_kv) - len, "%s%u",
                                        id.shared_kv[len - 1] == '=' ? "" : ",",
                                        (unsigned)d->mu_uids[i]);
    }
    id.envp = server_env(&id);
    server_nice_setting(d);
    pid = id.envp ? fork() : -1;
    if (pid < 0) {
        snprintf(err, errlen, "%s: %s", id.envp ? "fork" : "the server's environment",
                 strerror(id.envp ? errno : ENOMEM));
        free(id.envp);
        close(sv[0]);
        close(sv[1]);
        free(s);
        return NULL;
    }
    if (pid == 0)
        exec_server(d, &id, sv[1], d->server_log_fd);
    free(id.envp); /* its strings are the daemon's environ's, or static, or in id */
    close(sv[1]);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    /* OPENMPS_CHAN_SNDBUF (bytes; for tests): a small channel buffer, so that a burst of clients
     * fills it as 128 clients at once filled the default one on the H200. */
    const char *sndbuf = getenv("OPENMPS_CHAN_SNDBUF");
    if (sndbuf && atoi(sndbuf) > 0) {
        int v = atoi(sndbuf);
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
    }
    s->id = ++d->next_server_id;
    s->pid = pid;
    s->uid = uid;
    snprintf(s->name, sizeof(s->name), "%s", name);
    s->shared = id.shared_kv[0] != '\0';
    s->chan = sv[0];
    s->state = SRV_INITIALIZING;
    s->started_ms = om_now_ms();
    s->next_client_id = 1;                    /* ps numbers clients from 1, as NVIDIA does */
    s->limits = om_v3_server_limits(d, name); /* its named server's, else the defaults */
    s->next = d->servers;
    d->servers = s;
    om_info("Starting new server %d for user %u%s%s%s", (int)pid, (unsigned)uid,
            name[0] ? " (named server " : "", name, name[0] ? ")" : "");
    if (s->shared)
        om_warn("Server %d is a multi-user server (-m): %s; its clients share one GPU address "
                "space",
                (int)pid, id.shared_kv + 28);
    if (om_server_send_limits(s) < 0)
        om_warn("server %d: cannot send its limits", (int)pid);
    return s;
}

/* Sends the server its limits; they apply to its running clients too (each merged again with
 * what it asked for itself: the server does the same), so ps -v shows them at once. */
int om_server_send_limits(struct server *s)
{
    if (s->chan < 0)
        return -EPIPE;
    for (struct client_rec *r = s->clients; r; r = r->next)
        r->limits = om_limits_merge(&s->limits, &r->want);
    return om_msg_send(s->chan, OM_MSG_SRV_LIMITS, 0, &s->limits, sizeof(s->limits), -1);
}

int om_server_send_client_limits(struct server *s, struct client_rec *r)
{
    r->limits = om_limits_merge(&s->limits, &r->want);
    r->limits_pending = true;
    return om_server_flush_client_limits(s);
}

int om_server_flush_client_limits(struct server *s)
{
    for (struct client_rec *r = s->clients; r; r = r->next) {
        struct om_srv_client_limits m = {.client_id = r->id, .want = r->want};
        int rc;
        if (!r->limits_pending)
            continue;
        if (s->chan < 0)
            return -EPIPE;
        rc = om_msg_send(s->chan, OM_MSG_SRV_CLIENT_LIMITS, 0, &m, sizeof(m), -1);
        if (rc == -EAGAIN || rc == -EWOULDBLOCK) {
            /* the rest once the event loop sees room (daemon.c), as for hand-offs */
            if (!s->chan_full_ms)
                s->chan_full_ms = om_now_ms();
            return 0;
        }
        if (rc < 0)
            return rc; /* the server is going: its clients with it */
        r->limits_pending = false;
    }
    return 0;
}

/* Reads /proc/PID/cmdline's first word and the pid namespace, for ps. */
static void describe_process(pid_t pid, struct client_rec *r)
{
    char path[64], link[64];
    ssize_t n;
    int fd;

    snprintf(r->command, sizeof(r->command), "?");
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, r->command, sizeof(r->command) - 1);
        close(fd);
        if (n > 0) {
            r->command[n] = '\0';
            for (char *p = r->command; *p; p++)
                if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f)
                    *p = '?';
        } else {
            snprintf(r->command, sizeof(r->command), "?");
        }
    }
    snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
    n = readlink(path, link, sizeof(link) - 1);
    if (n > 0) {
        link[n] = '\0';
        if (sscanf(link, "pid:[%lu]", &r->pid_ns) != 1)
            r->pid_ns = 0;
    }
}

bool om_server_adopt(struct daemon *d, struct server *s, struct conn *c)
{
    struct om_srv_adopt a = {0};
    struct client_rec *r = calloc(1, sizeof(*r));
    /* its namespace, once: its partition and its limits come from the same one (its cgroup is
     * read once, though the client may move meanwhile) */
    const struct om_v3_ns *ns = om_v3_client_ns(d, s, c);
    uint64_t part = 0;
    int rc;

    if (!r) {
        om_msg_send_text(c->fd, OM_MSG_REFUSE, 0, "openmps-control: out of memory");
        om_conn_close(d, c);
        return true;
    }
    if (c->hello.flags & OM_HELLO_VISIBLE) {
        int n = om_visible_resolve(c->hello.visible, s->devs, s->ndevs, &a.devmap);
        char shown[256]; /* the client's text, its control characters escaped for the log */
        om_log_escape(shown, sizeof(shown), c->hello.visible, strlen(c->hello.visible));
        if (n <= 0) {
            char why[512];
            snprintf(why, sizeof(why),
                     "CUDA_VISIBLE_DEVICES=%.200s %s of the %u device(s) of the openmps server "
                     "(their ordinals, or their UUIDs: openmps-control device_query)",
                     shown, n < 0 ? "names a device twice: it sees none" : "names none",
                     (unsigned)s->ndevs);
            om_peer_info(d, c->uid, "Client %d sees no device: %s", (int)c->pid, why);
            /* flags: what its cuInit returns, as the driver's does for the same variable */
            om_msg_send_text(c->fd, OM_MSG_REFUSE,
                             n < 0 ? OM_REFUSE_INVALID_DEVICE : OM_REFUSE_NO_DEVICE, why);
            free(r);
            om_conn_close(d, c);
            return true;
        }
        om_peer_info(d, c->uid, "Client %d: CUDA_VISIBLE_DEVICES=%.200s, %u of %u device(s)",
                     (int)c->pid, shown, a.devmap.count, (unsigned)s->ndevs);
    } else {
        om_visible_all(s->ndevs, &a.devmap);
    }
    if (d->parts) { /* -S: it runs in its static partition, on that partition's device only */
        char why[1024];
        if (om_parts_adopt(d, s, c, ns, &a, &part, why, sizeof(why)) < 0) {
            om_peer_info(d, c->uid, "Refusing client %d: %s", (int)c->pid, why);
            om_msg_send_text(c->fd, OM_MSG_REFUSE, OM_REFUSE_PARTITION, why);
            free(r);
            om_conn_close(d, c);
            return true;
        }
    } else if (c->hello.sm_partition) {
        om_peer_info(d, c->uid,
                     "Client %d: CUDA_MPS_SM_PARTITION is set but the daemon runs without static "
                     "SM partitions (-S): ignored",
                     (int)c->pid);
    }
    a.client_id = s->next_client_id++;
    a.pid = (uint32_t)c->pid;
    a.uid = (uint32_t)c->uid;
    a.want = om_visible_limits(&c->hello.want, &a.devmap); /* in the server's ordinals */
    if (c->hello.flags & OM_HELLO_MEM_LIMIT) {
        char bad[80] = "", shown[256];
        int n =
            om_visible_mem_limits(c->hello.mem_limit, s->devs, s->ndevs, &a.want, bad, sizeof(bad));
        if (n)
            om_peer_info(d, c->uid,
                         "Client %d: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT names %d device(s) the "
                         "server does not have (%s): ignored",
                         (int)c->pid, n, om_log_escape(shown, sizeof(shown), bad, strlen(bad)));
    }
    /* Its namespace (protocol 3: by its cgroup) tightens what it asked for. */
    r->asked = a.want;
    om_v3_route_client(s, ns, &a.want, r->ns, sizeof(r->ns));
    a.limits = om_limits_merge(&s->limits, &a.want);
    rc = om_msg_send(s->chan, OM_MSG_SRV_ADOPT, 0, &a, sizeof(a), c->fd);
    if (rc == -EAGAIN || rc == -EWOULDBLOCK) {
        /* The server has not read the hand-offs before this one yet (128 clients at once filled
         * the socket's buffer on the H200's soak): the client waits, the daemon polls the channel
         * for room (daemon.c) and tries again; a message is sent whole or not at all. */
        if (!s->chan_full_ms) {
            s->chan_full_ms = om_now_ms();
            om_peer_info(d, c->uid,
                         "Server %d has not read the clients handed to it yet; client %d and "
                         "those after it wait for room",
                         (int)s->pid, (int)c->pid);
        }
        s->next_client_id--;
        free(r);
        return false;
    }
    if (rc < 0) {
        om_err("cannot hand client %d to server %d: %s", (int)c->pid, (int)s->pid, strerror(-rc));
        om_msg_send_text(c->fd, OM_MSG_REFUSE, 0,
                         "openmps-control: the server did not take the client; see control.log");
        free(r);
        om_conn_close(d, c);
        return true;
    }
    r->id = a.client_id;
    r->pid = c->pid;
    r->uid = c->uid;
    r->limits = a.limits;
    r->want = a.want;
    r->part = part;
    describe_process(c->pid, r);
    om_stats_cgroup(c->pid, r->cgroup, sizeof(r->cgroup)); /* the job or pod it runs in */
    r->next = s->clients;
    s->clients = r;
    s->nclients++;
    om_peer_info(d, c->uid, "Accepting client %d (uid %u) for server %d as client %u%s%s",
                 (int)c->pid, (unsigned)c->uid, (int)s->pid, a.client_id,
                 r->ns[0] ? ", namespace " : "", r->ns);
    om_conn_close(d, c); /* the server owns the session now */
    return true;
}

void om_server_shutdown(struct daemon *d, struct server *s, bool force)
{
    struct om_srv_shutdown m = {.force = force ? 1u : 0u};

    s->stop_when_idle = true;
    if (s->state == SRV_ACTIVE || s->state == SRV_INITIALIZING)
        s->state = SRV_STOPPING;
    if (force) {
        s->forced = true;
        if (!s->kill_at_ms)
            s->kill_at_ms = om_now_ms() + d->server_kill_grace_ms;
    }
    if (s->chan < 0 || om_msg_send(s->chan, OM_MSG_SRV_SHUTDOWN, 0, &m, sizeof(m), -1) < 0) {
        /* It cannot hear us: make sure it goes. */
        kill(s->pid, force ? SIGKILL : SIGTERM);
    }
    om_info("Server %d: %s shutdown requested", (int)s->pid, force ? "forced" : "graceful");
}

/* held_bytes: the device memory it held as it left, as its server says (0 also for a client
 * whose session never began) */
static void client_down(struct daemon *d, struct server *s, uint32_t id, uint64_t held_bytes)
{
    for (struct client_rec **pp = &s->clients; *pp; pp = &(*pp)->next) {
        struct client_rec *r = *pp;
        if (r->id != id)
            continue;
        r->device_bytes = held_bytes;
        om_peer_info(d, r->uid, "Server %d: client %d (id %u) disconnected", (int)s->pid,
                     (int)r->pid, id);
        if (d->memacct_audit) { /* memacct set audit_log=true */
            char held[32];
            om_format_size(r->device_bytes, held, sizeof(held));
            om_info("memacct: client %d (uid %u, server %s%s%s) left holding %s of device "
                    "memory",
                    (int)r->pid, (unsigned)r->uid, s->name[0] ? s->name : "-",
                    r->ns[0] ? ", namespace " : "", r->ns, r->device_bytes ? held : "0");
        }
        *pp = r->next;
        free(r);
        s->nclients--;
        return;
    }
}

static void answer_pending(struct daemon *d, struct server *s, uint32_t request_id, int status)
{
    /* the server's word: an errno, negated; anything else is no errno strerror may be given */
    if (status > 0 || status < -4095)
        status = -EPROTO;
    for (struct pending **pp = &s->pending; *pp; pp = &(*pp)->next) {
        struct pending *p = *pp;
        if (p->request_id != request_id)
            continue;
        *pp = p->next;
        for (struct conn *c = d->conns; c; c = c->next) {
            if (c->id != p->ui_id || c->awaiting != request_id)
                continue;
            c->awaiting = 0;
            if (p->v3) { /* protocol 3: nothing, or one line that is an error (exit 1) */
                char text[160];
                snprintf(text, sizeof(text), "Cannot terminate client %d: %s", (int)p->client_pid,
                         strerror(-status));
                om_msg_send_text(c->fd, OM_MSG_ANSWER, status ? OM_ANSWER_ERROR : 0,
                                 status ? text : "");
            } else if (status == 0)
                om_msg_send_text(c->fd, OM_MSG_ANSWER, 0, "0");
            else {
                char text[160];
                snprintf(text, sizeof(text), "Cannot terminate the client: %s\n1",
                         strerror(-status));
                om_msg_send_text(c->fd, OM_MSG_ANSWER, OM_ANSWER_ERROR, text);
            }
        }
        free(p);
        return;
    }
}

/* Closes our end of the channel; the process is reaped on SIGCHLD. */
static void channel_lost(struct daemon *d, struct server *s)
{
    if (s->chan >= 0) {
        close(s->chan);
        s->chan = -1;
    }
    while (s->pending)
        answer_pending(d, s, s->pending->request_id, -ESRCH);
    om_stats_server_gone(d, s); /* a stats command waiting for it answers without it */
    if (om_server_live(s) || s->state == SRV_STOPPING) {
        /* A server that closed its channel without exiting is of no use. */
        if (!s->kill_at_ms)
            s->kill_at_ms = om_now_ms() + d->server_kill_grace_ms;
    }
}

static void drain_fault(struct server *s);

/* One message of the server's; false when there was none or the channel is closed. */
static bool handle_one(struct daemon *d, struct server *s)
{
    struct om_msg *m = malloc(sizeof(*m));
    struct om_srv_client cl;
    struct om_srv_ready rd;
    uint32_t a, b;
    bool more = false;
    int rc;

    if (!m)
        return false;
    rc = om_msg_recv(s->chan, m, NULL, 0);
    if (rc == -EAGAIN || rc == -ETIMEDOUT)
        goto out;
    if (rc < 0) {
        if (rc != -ECONNRESET)
            om_err("server %d sent a malformed message (%s); closing its channel", (int)s->pid,
                   strerror(-rc));
        else
            drain_fault(s); /* what it sent before it went (drain_fault says why) */
        channel_lost(d, s);
        goto out;
    }
    switch (m->hdr.type) {
    case OM_MSG_SRV_READY:
        /* Once, while it starts: a later READY would change the devices others' clients were
         * handed (and what device_query shows) under them. */
        if (s->ready || s->state == SRV_FAULT) {
            if (!s->told_late_ready)
                om_peer_err(d, s->uid,
                            "Server %d sent READY again; ignored (a protocol "
                            "violation: it is ready once, while it starts)",
                            (int)s->pid);
            s->told_late_ready = true;
            break;
        }
        if (om_decode_srv_ready(m->payload, m->hdr.len, &rd, s->devs, OM_MAX_DEVICES) < 0)
            goto bad;
        s->ndevs = rd.ndevices;
        om_v3_server_ready(d, s);
        s->ready = true;
        if (s->state == SRV_INITIALIZING)
            s->state = SRV_ACTIVE;
        om_info("Server %d is ACTIVE with %u device(s) (started in %lld ms)", (int)s->pid,
                rd.ndevices, (long long)(om_now_ms() - s->started_ms));
        break;
    case OM_MSG_SRV_FAULT:
        if (om_msg_text(m, 255) < 0)
            goto bad;
        /* One fault per server: a server ends after it (its clients' sessions first). More
         * are ignored, said once: a server taken over by its user must not flood the log. */
        if (s->fault[0]) {
            if (!s->told_more_faults)
                om_peer_err(d, s->uid, "Server %d reports faults again; ignored", (int)s->pid);
            s->told_more_faults = true;
            break;
        }
        /* The server runs as its user: its words are escaped like any peer's. */
        om_log_escape(s->fault, sizeof(s->fault), (const char *)m->payload, 255);
        if (!s->fault[0])
            snprintf(s->fault, sizeof(s->fault), "(no reason given)");
        if (s->state != SRV_STOPPING)
            s->state = SRV_FAULT;
        /* It gets a grace period to end its sessions and exit; one that stays is killed, so
         * that its user's waiting clients get a fresh server. */
        if (!s->kill_at_ms)
            s->kill_at_ms = om_now_ms() + OM_SERVER_FAULT_GRACE_MS;
        /* One line per server, never held back: the reason a user's server went. */
        om_err("Server %d reports a fault: %s", (int)s->pid, s->fault);
        break;
    case OM_MSG_SRV_CLIENT:
        if (om_decode_srv_client(m->payload, m->hdr.len, &cl) < 0)
            goto bad;
        if (cl.event == OM_CLIENT_DOWN) {
            client_down(d, s, cl.client_id, cl.device_bytes);
        } else {
            for (struct client_rec *r = s->clients; r; r = r->next)
                if (r->id == cl.client_id && cl.event == OM_CLIENT_MEMORY) {
                    r->device_bytes = cl.device_bytes;
                    if (cl.device_mask)
                        r->device_mask = cl.device_mask; /* the devices it used so far */
                } else if (r->id == cl.client_id) {
                    r->up = true;
                    r->device_mask = cl.device_mask;
                }
        }
        break;
    case OM_MSG_SRV_STATS: /* its clients' accounting, for a stats command (stats.c) */
        if (om_stats_reply(d, s, m->payload, m->hdr.len) < 0)
            goto bad;
        break;
    case OM_MSG_SRV_RESULT:
        if (om_decode_u32_pair(m->payload, m->hdr.len, &a, &b) < 0)
            goto bad;
        answer_pending(d, s, a, (int32_t)b);
        break;
    default: goto bad;
    }
    om_daemon_schedule(d);
    more = s->chan >= 0;
    goto out;
bad:
    om_err("server %d sent an invalid %s message; closing its channel", (int)s->pid,
           om_msg_type_name(m->hdr.type));
    channel_lost(d, s);
out:
    free(m);
    return more;
}

void om_server_handle_message(struct daemon *d, struct server *s)
{
    /* What the server has sent so far, up to a bound (a server that floods its channel shares
     * the loop with the others): the event loop reads the channels before the commands
     * (daemon.c), so a client the server reported before its client could run a front-end is in
     * the answer (ps, get_device_client_list, the metrics), with its device. */
    for (int i = 0; i < OM_SERVER_MSGS_PER_PASS && handle_one(d, s); i++)
        ;
}

static void server_free(struct server *s)
{
    while (s->clients) {
        struct client_rec *r = s->clients;
        s->clients = r->next;
        free(r);
    }
    while (s->pending) {
        struct pending *p = s->pending;
        s->pending = p->next;
        free(p);
    }
    if (s->chan >= 0)
        close(s->chan);
    free(s);
}

/* Tells every client that waits for this server (its user's, its named server's) why it will
 * not come. */
static void refuse_waiting(struct daemon *d, const struct server *s, const char *why)
{
    struct conn *c = d->conns, *next;

    for (; c; c = next) {
        next = c->next;
        if (c->kind == CONN_WAITING && c->route_uid == s->uid && !strcmp(c->route, s->name)) {
            om_msg_send_text(c->fd, OM_MSG_REFUSE, 0, why);
            om_peer_info(d, c->uid, "Refusing client %d: %s", (int)c->pid, why);
            om_conn_close(d, c);
        }
    }
}

/* A server that dies right after reporting a fault: its last words are read
 * before its channel is closed, so the log says why it went. A server that exits with our
 * messages unread (a client handed to it while it failed to start) makes the kernel report
 * ECONNRESET on the first read, before what it sent; the next read still returns that. */
static void drain_fault(struct server *s)
{
    struct om_msg *m = s->chan >= 0 ? malloc(sizeof(*m)) : NULL;
    bool reset = false;
    int rc;

    for (int i = 0; m && i < 256; i++) {
        rc = om_msg_recv(s->chan, m, NULL, 0);
        if (rc == -ECONNRESET && !reset) {
            reset = true;
            continue;
        }
        if (rc < 0)
            break;
        if (m->hdr.type == OM_MSG_SRV_FAULT && om_msg_text(m, 255) == 0 && !s->fault[0]) {
            om_log_escape(s->fault, sizeof(s->fault), (const char *)m->payload, 255);
            om_err("Server %d reports a fault: %s", (int)s->pid, s->fault);
        }
    }
    free(m);
}

void om_server_reap(struct daemon *d)
{
    int status;
    pid_t pid;

    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        struct server **pp = &d->servers;
        while (*pp && (*pp)->pid != pid)
            pp = &(*pp)->next;
        if (!*pp)
            continue;
        struct server *s = *pp;
        drain_fault(s);
        bool never_ready = !s->ready;
        char how[64];
        if (WIFEXITED(status))
            snprintf(how, sizeof(how), "exit status %d", WEXITSTATUS(status));
        else
            snprintf(how, sizeof(how), "signal %d", WTERMSIG(status));
        if (s->state == SRV_STOPPING && WIFEXITED(status) && WEXITSTATUS(status) == 0)
            om_info("Server %d exited", (int)pid);
        else
            om_err("Server %d (uid %u) died (%s) with %u client(s)%s", (int)pid, (unsigned)s->uid,
                   how, s->nclients, never_ready ? " before it became ready" : "");
        *pp = s->next;
        channel_lost(d, s);
        if (never_ready) {
            char why[400];
            snprintf(why, sizeof(why),
                     "openmps: the server for uid %u failed to start (%s%s%s); "
                     "see server.log in %s",
                     (unsigned)s->uid, how, s->fault[0] ? ": " : "", s->fault, d->log_dir);
            refuse_waiting(d, s, why);
        }
        server_free(s);
    }
}

/* What the probe child reports through its pipe. */
struct probe_result {
    int32_t count; /* -1: failed, err says why */
    char err[256];
    struct om_device_info devs[OM_MAX_DEVICES];
};

/*
 * Asks the driver about the devices in a short-lived child process: the
 * daemon itself never loads the driver (no driver threads in a process that
 * forks servers, no cuInit hanging the event loop for long, no driver state
 * in a root process on behalf of any user who typed device_query).
 */
static int probe_devices(struct daemon *d)
{
    static struct probe_result r;
    struct pollfd p;
    size_t got = 0;
    int pfd[2], status;
    pid_t pid;

    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -errno;
    pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return -errno;
    }
    if (pid == 0) {
        struct om_driver drv;
        close(pfd[0]);
        memset(&r, 0, sizeof(r));
        r.count = -1;
        if (om_driver_open(&drv, r.err, sizeof(r.err)) == 0)
            r.count = om_driver_devices(&drv, r.devs, OM_MAX_DEVICES, r.err, sizeof(r.err));
        _exit(write(pfd[1], &r, sizeof(r)) == (ssize_t)sizeof(r) ? 0 : 1);
    }
    close(pfd[1]);
    p = (struct pollfd){.fd = pfd[0], .events = POLLIN};
    while (got < sizeof(r)) {
        ssize_t n;
        if (poll(&p, 1, 10000) <= 0)
            break;
        n = read(pfd[0], (char *)&r + got, sizeof(r) - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(pfd[0]);
    if (got < sizeof(r))
        kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (got < sizeof(r)) {
        snprintf(d->probe_err, sizeof(d->probe_err), "the driver did not answer in 10 s");
        return -ETIMEDOUT;
    }
    r.err[sizeof(r.err) - 1] = '\0';
    if (r.count < 0 || r.count > (int)OM_MAX_DEVICES) {
        snprintf(d->probe_err, sizeof(d->probe_err), "%s", r.count < 0 ? r.err : "bad count");
        return -EIO;
    }
    for (int i = 0; i < r.count; i++) {
        r.devs[i].name[sizeof(r.devs[i].name) - 1] = '\0';
        r.devs[i].pci_bus_id[sizeof(r.devs[i].pci_bus_id) - 1] = '\0';
    }
    memcpy(d->devs, r.devs, sizeof(d->devs));
    return r.count;
}

int om_daemon_devices(struct daemon *d, const struct om_device_info **ret)
{
    for (struct server *s = d->servers; s; s = s->next) {
        char kv[300];
        /* a named server's allowed_devices are its own, not every client's */
        om_v3_server_visible(d, s->name, kv, sizeof(kv));
        if (s->state == SRV_ACTIVE && !kv[0]) {
            *ret = s->devs;
            return (int)s->ndevs;
        }
    }
    return om_daemon_probed_devices(d, ret);
}

int om_daemon_probed_devices(struct daemon *d, const struct om_device_info **ret)
{
    /* A success is kept; a failure is tried again at most every 10 s. */
    if (!d->probed && om_now_ms() >= d->probe_retry_at) {
        d->ndevs = probe_devices(d);
        d->probed = d->ndevs >= 0;
        if (!d->probed) {
            d->probe_retry_at = om_now_ms() + 10000;
            om_warn("device_query: %s", d->probe_err);
        }
    }
    *ret = d->devs;
    return d->probed ? d->ndevs : -1;
}
