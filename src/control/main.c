/* SPDX-License-Identifier: MIT */
/* openmps-control: the control daemon (-d, -f) and its command front-end. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/log.h"
#include "frontend.h"
#include "internal.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: openmps-control [-d | -f] [-v] [-h] [command [arguments]]\n"
            "  -d, --daemon      start the control daemon in the background\n"
            "  -f, --foreground  run the control daemon in the foreground (logs also on stderr)\n"
            "  -v, --version     print the version\n"
            "  -h, --help        print this help\n"
            "Without -d or -f, commands are read from stdin, one per line (or one command\n"
            "is taken from the arguments) and sent to the running daemon; `help` lists them.\n"
            "Environment: CUDA_MPS_PIPE_DIRECTORY (default " OM_ROOT_PIPE_DIR " for a root\n"
            "daemon, " OM_DEFAULT_PIPE_DIR " for a plain user's; the front-end looks in both),\n"
            "CUDA_MPS_LOG_DIRECTORY (default " OM_ROOT_LOG_DIR
            " for a root daemon,\n" OM_DEFAULT_LOG_DIR " for a plain user's).\n");
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

static int run_daemon(bool background)
{
    static struct daemon d;
    char err[512];
    int ready_fd = -1, rc;

    if (om_daemon_setup(&d, err, sizeof(err)) < 0) {
        fprintf(stderr, "openmps-control: %s\n", err);
        om_daemon_cleanup(&d);
        return 1;
    }
    if (background) {
        ready_fd = go_background();
        if (ready_fd < 0) {
            fprintf(stderr, "openmps-control: cannot go to the background: %s\n",
                    strerror(-ready_fd));
            return 1;
        }
    } else {
        om_log_also_stderr(1);
    }
    if (om_daemon_write_pid(&d) < 0)
        om_warn("cannot write the pid file %s", d.pid_path);
    if (ready_fd >= 0) {
        if (write(ready_fd, "1", 1) != 1) {
            /* the parent is gone; carry on */
        }
        close(ready_fd);
    }
    rc = om_daemon_run(&d);
    om_daemon_cleanup(&d);
    return rc;
}

int main(int argc, char **argv)
{
    int i = 1;
    int mode = 0; /* 'd', 'f' or 0 for the front-end */

    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-d") || !strcmp(a, "--daemon"))
            mode = 'd';
        else if (!strcmp(a, "-f") || !strcmp(a, "--foreground") || !strcmp(a, "--forground"))
            mode = 'f';
        else if (!strcmp(a, "-v") || !strcmp(a, "--version")) {
            printf("openmps-control %s (openmps protocol %d.%d)\n", OPENMPS_VERSION, OM_PROTO_MAJOR,
                   OM_PROTO_MINOR);
            return 0;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "openmps-control: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (mode) {
        if (i < argc) {
            fprintf(stderr, "openmps-control: -%c takes no command\n", mode);
            return 2;
        }
        return run_daemon(mode == 'd');
    }
    return om_frontend_run(argc - i, argv + i);
}
