/* SPDX-License-Identifier: MIT */
/* openmps-control: the control daemon (-d, -f) and its command front-end. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/log.h"
#include "conffile.h"
#include "frontend.h"
#include "internal.h"
#include "v3.h"

static void usage(FILE *f, int protocol)
{
    fprintf(f,
            "usage: openmps-control [-d | -f] [-p 2|3] [-a FILE] [-q] [-v] [-h] "
            "[command [arguments]]\n"
            "  -d, --daemon      start the control daemon in the background\n"
            "  -f, --foreground  run the control daemon in the foreground (logs also on stderr)\n"
            "  -p, --protocol N  2 (NVIDIA's legacy commands, the default) or 3 (named servers,\n"
            "                    namespaces, module-verb commands); CUDA_MPS_PROTOCOL_VERSION\n"
            "                    wins; a front-end follows the running daemon's protocol\n"
            "  -a, --apply FILE  with -d or -f: apply a configuration file (TOML) at the start\n"
            "  -q, --quit        stop the running daemon and its servers (as `quit`)\n"
            "  -m, --multiuser   with -d or -f: the users of OPENMPS_MULTIUSER_UIDS share one\n"
            "                    server (and so one GPU address space: refused unless\n"
            "                    OPENMPS_MULTIUSER_SHARED_ADDRESS_SPACE=1; docs/security.md)\n"
            "  -S, --static-partitioning  with -d or -f: static SM partitions (sm_partition,\n"
            "                    lspart); every client names its own (CUDA_MPS_SM_PARTITION)\n"
            "  -v, --version     print the version\n"
            "  -h, --help        print this help\n"
            "Without -d or -f, commands are read from stdin, one per line (or one command\n"
            "is taken from the arguments) and sent to the running daemon; `help` lists them.\n"
            "Environment: CUDA_MPS_PIPE_DIRECTORY (default " OM_ROOT_PIPE_DIR " for a root\n"
            "daemon, " OM_DEFAULT_PIPE_DIR " for a plain user's; the front-end looks in both\n"
            "and in " OM_NVIDIA_PIPE_DIR "), CUDA_MPS_LOG_DIRECTORY (default " OM_ROOT_LOG_DIR
            " for a root\ndaemon, " OM_DEFAULT_LOG_DIR
            " for a plain user's). Run by the name " OM_NVIDIA_CONTROL
            ", the\ndefaults are NVIDIA's: " OM_NVIDIA_PIPE_DIR " and " OM_NVIDIA_LOG_DIR
            ". See openmps-control(8).\n");
    if (protocol == OM_PROTOCOL_V3)
        fprintf(f,
                "Protocol 3 commands (the legacy ones are answered too):\n"
                "  server list [NAME] | create NAME [--uid=UID] [limits] | delete NAME [--force]\n"
                "  server get NAME [FIELD] | set NAME [limits]\n"
                "  client list [--all] [--server=NAME] | get PID [FIELD]\n"
                "  namespace create|set|delete|list NS --server=NAME [limits] [--cgroup=PATH]\n"
                "  namespace get NS SERVER [FIELD]\n"
                "  lists: --format=table|csv[,noheader]\n"
                "  limits: --pinned-memory-limit=SIZE --active-thread-percentage=PCT "
                "--client-priority=0|1\n");
}

/* -p's value, or CUDA_MPS_PROTOCOL_VERSION's, which wins. 0 when neither is valid (a message
 * was printed). */
static int pick_protocol(const char *flag)
{
    const char *env = getenv("CUDA_MPS_PROTOCOL_VERSION");
    const char *v = env && *env ? env : flag;

    if (!v)
        return OM_PROTOCOL_LEGACY;
    if (!strcmp(v, "2"))
        return OM_PROTOCOL_LEGACY;
    if (!strcmp(v, "3"))
        return OM_PROTOCOL_V3;
    fprintf(stderr, "openmps-control: protocol \"%.16s\"%s: give 2 or 3\n", v,
            v == env ? " (CUDA_MPS_PROTOCOL_VERSION)" : "");
    return 0;
}

/* Run by NVIDIA's name (the drop-in symlink, docs/operations.md "The drop-in name"), the
 * directories default to NVIDIA's, so that scripts relying on NVIDIA's defaults find the daemon
 * and its logs where they look. The variables, when set, still win. */
static void nvidia_defaults(const char *argv0)
{
    const char *base = strrchr(argv0, '/');
    const char *pipe_dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
    const char *log_dir = getenv("CUDA_MPS_LOG_DIRECTORY");

    base = base ? base + 1 : argv0;
    if (strcmp(base, OM_NVIDIA_CONTROL) != 0)
        return;
    if (!pipe_dir || !*pipe_dir)
        setenv("CUDA_MPS_PIPE_DIRECTORY", OM_NVIDIA_PIPE_DIR, 1);
    if (!log_dir || !*log_dir)
        setenv("CUDA_MPS_LOG_DIRECTORY", OM_NVIDIA_LOG_DIR, 1);
}

/* Forks into the background once the daemon is set up, so errors of the set-up
 * still reach the terminal. The parent exits when the child is ready. */
static int go_background(void)
{
    int pfd[2];
    pid_t pid;
    char ok;

    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -errno;
    pid = fork();
    if (pid < 0)
        return -errno;
    if (pid > 0) {
        close(pfd[1]);
        _exit(read(pfd[0], &ok, 1) == 1 ? 0 : 1);
    }
    close(pfd[0]);
    if (setsid() < 0)
        return -errno;
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        dup2(devnull, STDIN_FILENO);
        dup2(devnull, STDOUT_FILENO);
        dup2(devnull, STDERR_FILENO);
        if (devnull > STDERR_FILENO)
            close(devnull);
    }
    return pfd[1];
}

/* systemd's readiness notification (the unit's Type=notify): `systemctl start`, and the units
 * ordered after the daemon's, go on once it answers on its socket, not when it was started.
 * NOTIFY_SOCKET names a datagram socket, a path or "@" and an abstract name; unset, nothing is
 * sent (started by hand, by Slurm, in a pod). */
static void notify_ready(bool background)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char msg[64];
    size_t len;
    int fd, n;

    if (!path || !*path)
        return;
    if (background) {
        /* systemd takes the notification only from the process it started, which -d ended */
        om_warn("NOTIFY_SOCKET is set but the daemon went to the background (-d): a systemd unit "
                "of Type=notify runs it with -f; systemd is not told");
        unsetenv("NOTIFY_SOCKET");
        return;
    }
    len = strlen(path);
    /* an abstract name ("@...") may fill sun_path; a path needs room for its terminator */
    if ((path[0] != '/' && path[0] != '@') || len > sizeof(sa.sun_path) ||
        (path[0] == '/' && len == sizeof(sa.sun_path))) {
        om_warn("NOTIFY_SOCKET is not a socket's path; systemd is not told the daemon is ready");
        unsetenv("NOTIFY_SOCKET");
        return;
    }
    memcpy(sa.sun_path, path, len);
    if (path[0] == '@')
        sa.sun_path[0] = '\0';
    n = snprintf(msg, sizeof(msg), "READY=1\nMAINPID=%d", (int)getpid());
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || sendto(fd, msg, (size_t)n, MSG_NOSIGNAL, (struct sockaddr *)&sa,
                         (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) < 0)
        om_warn("cannot tell systemd the daemon is ready (NOTIFY_SOCKET): %s", strerror(errno));
    if (fd >= 0)
        close(fd);
    unsetenv("NOTIFY_SOCKET"); /* said once; not the servers' (they get a minimal environment) */
}

static int run_daemon(bool background, int protocol, const char *conf_path, bool static_parts,
                      bool multiuser)
{
    static struct daemon d;
    struct om_conf *conf = NULL;
    char err[512];
    int ready_fd = -1, rc;

    if (conf_path) {
        /* Read before the set-up: its [openmps] settings are the set-up's (the environment
         * still wins). */
        if (om_conf_load(conf_path, &conf, err, sizeof(err)) < 0) {
            fprintf(stderr, "openmps-control: %s\n", err);
            return 1;
        }
        om_v3_apply_settings(conf);
    }
    d.protocol = protocol;
    /* -m: only with the operator's opt-in (the environment's, or the file's [openmps]), which
     * names the risk; refused otherwise, saying why (docs/security.md "Multi-user servers") */
    d.euid = geteuid();
    if (multiuser && om_multiuser_setup(&d, err, sizeof(err)) < 0) {
        fprintf(stderr, "openmps-control: %s\n", err);
        free(conf);
        return 2;
    }
    if (static_parts && om_parts_enable(&d) < 0) {
        fprintf(stderr, "openmps-control: out of memory\n");
        free(conf);
        return 1;
    }
    if (om_daemon_setup(&d, err, sizeof(err)) < 0 ||
        (conf && om_v3_apply_conf(&d, conf, err, sizeof(err)) < 0)) {
        if (conf && !strncmp(err, "line ", 5))
            fprintf(stderr, "openmps-control: %s: %s\n", conf_path, err);
        else
            fprintf(stderr, "openmps-control: %s\n", err);
        om_daemon_cleanup(&d);
        free(conf);
        return 1;
    }
    if (conf)
        om_info("configuration %s applied (protocol %d)", conf_path, protocol);
    if (d.multiuser)
        om_warn("multi-user mode (-m, OPENMPS_MULTIUSER_SHARED_ADDRESS_SPACE=1): the clients of "
                "%u users (OPENMPS_MULTIUSER_UIDS, the first runs their servers) share servers and "
                "so one GPU address space: each can read and write the others' device memory",
                d.n_mu_uids);
    free(conf);
    if (background) {
        ready_fd = go_background();
        if (ready_fd < 0) {
            fprintf(stderr, "openmps-control: cannot go to the background: %s\n",
                    strerror(-ready_fd));
            om_daemon_cleanup(&d); /* its sockets and lock: the next daemon starts clean */
            return 1;
        }
    } else {
        om_log_also_stderr(1);
    }
    /* The pid file before the socket listens: whatever finds the daemon answering (a test, a
     * script that then signals it) finds its pid too. */
    if (om_daemon_write_pid(&d) < 0)
        om_warn("cannot write the pid file %s", d.pid_path);
    if (om_daemon_listen(&d, err, sizeof(err)) < 0) {
        if (background) /* stderr is /dev/null by now; the parent exits 1 */
            om_err("%s", err);
        else
            fprintf(stderr, "openmps-control: %s\n", err);
        om_daemon_cleanup(&d);
        return 1;
    }
    if (ready_fd >= 0) {
        if (write(ready_fd, "1", 1) != 1) {
            /* the parent is gone; carry on */
        }
        close(ready_fd);
    }
    notify_ready(background);
    rc = om_daemon_run(&d);
    om_daemon_cleanup(&d);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"daemon", no_argument, NULL, 'd'},
        {"foreground", no_argument, NULL, 'f'},
        {"forground", no_argument, NULL, 'f'}, /* as NVIDIA's program spells it too */
        {"version", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"protocol", required_argument, NULL, 'p'},
        {"apply", required_argument, NULL, 'a'},
        {"quit", no_argument, NULL, 'q'},
        {"multiuser", no_argument, NULL, 'm'},
        {"static-partitioning", no_argument, NULL, 'S'},
        {NULL, 0, NULL, 0},
    };
    int mode = 0, c; /* mode: 'd', 'f' or 0 for the front-end */
    const char *protocol_flag = NULL, *conf_path = NULL;
    bool quit = false, help = false, static_parts = false, multiuser = false;

    nvidia_defaults(argv[0]);
    opterr = 0;
    /* '+': the options end at the first command word, whose own arguments ("quit -t 5") are
     * the daemon's to read. */
    while ((c = getopt_long(argc, argv, "+dfvhp:a:qmS", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
        case 'f':
            if (mode && mode != c) {
                fprintf(stderr, "openmps-control: -d and -f exclude each other\n");
                return 2;
            }
            mode = c;
            break;
        case 'v':
            printf("openmps-control %s (openmps protocol %d.%d)\n", OPENMPS_VERSION, OM_PROTO_MAJOR,
                   OM_PROTO_MINOR);
            return 0;
        case 'h': help = true; break;
        case 'p': protocol_flag = optarg; break;
        case 'a': conf_path = optarg; break;
        case 'q': quit = true; break;
        case 'm': multiuser = true; break;
        case 'S': static_parts = true; break;
        default:
            if (optopt == 'p' || optopt == 'a') {
                fprintf(stderr, "openmps-control: option -%c needs an argument\n", optopt);
                fprintf(stderr, "Try `openmps-control --help'.\n");
                return 2;
            }
            if (!strncmp(argv[optind - 1], "--", 2) && optopt)
                fprintf(stderr, "openmps-control: option %.*s takes no argument\n",
                        (int)strcspn(argv[optind - 1], "="), argv[optind - 1]);
            else if (!strncmp(argv[optind - 1], "--", 2))
                fprintf(stderr, "openmps-control: unknown option %s\n", argv[optind - 1]);
            else
                fprintf(stderr, "openmps-control: unknown option -%c\n", optopt);
            fprintf(stderr, "Try `openmps-control --help'.\n");
            return 2;
        }
    }
    int protocol = pick_protocol(protocol_flag);
    if (!protocol)
        return 2;
    if (help) {
        usage(stdout, protocol);
        return 0;
    }
    if (mode) {
        if (optind < argc || quit) {
            fprintf(stderr, "openmps-control: -%c takes no command (got %s)\n", mode,
                    quit ? "-q" : argv[optind]);
            return 2;
        }
        return run_daemon(mode == 'd', protocol, conf_path, static_parts, multiuser);
    }
    if (multiuser) {
        fprintf(stderr, "openmps-control: -m starts the daemon in multi-user mode: give it with "
                        "-d or -f\n");
        return 2;
    }
    if (static_parts) {
        fprintf(stderr, "openmps-control: -S starts the daemon with static SM partitioning: give "
                        "it with -d or -f\n");
        return 2;
    }
    if (conf_path) {
        fprintf(stderr, "openmps-control: -a applies a configuration at the daemon's start: give "
                        "it with -d or -f\n");
        return 2;
    }
    if (quit) {
        char *words[] = {(char *)"quit", NULL};
        if (optind < argc) {
            fprintf(stderr, "openmps-control: -q takes no command (got %s)\n", argv[optind]);
            return 2;
        }
        return om_frontend_run(1, words);
    }
    /* A front-end sends the words as they are: the running daemon answers them in its own
     * protocol, whatever -p this invocation was given. */
    return om_frontend_run(argc - optind, argv + optind);
}
