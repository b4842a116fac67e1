/* SPDX-License-Identifier: MIT */
/* The front-end: sends command lines to the running daemon and prints its answers. */
#include "frontend.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/msg.h"
#include "../common/sock.h"
#include "v3.h"

#define OM_FRONTEND_TIMEOUT_MS 60000

/* A reason the front-end gives: into why (cap bytes) where the caller wants it (openmps top
 * shows it on its screen), else on stderr. */
static void say(char *why, size_t cap, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    if (why && cap) {
        vsnprintf(why, cap, fmt, ap);
    } else {
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
    }
    va_end(ap);
}

/* The daemon in the first of the pipe directories (om_pipe_dirs) where one listens. */
static int connect_daemon(char *why, size_t cap)
{
    const char *dirs[OM_PIPE_DIRS_MAX];
    int n = om_pipe_dirs(dirs), fd = -ENOENT;
    char path[300], tried[700] = "";

    for (int i = 0; i < n; i++) {
        if (om_path_join(path, sizeof(path), dirs[i], OM_CONTROL_SOCKET) < 0) {
            say(why, cap, "openmps-control: the pipe directory path %s is too long", dirs[i]);
            return -1;
        }
        fd = om_sock_connect(path);
        if (fd >= 0)
            return fd;
        snprintf(tried + strlen(tried), sizeof(tried) - strlen(tried), "%s%s (%s)",
                 i ? ", nor in " : "", dirs[i], strerror(-fd));
    }
    say(why, cap,
        "openmps-control: cannot find the control daemon in %s: start it with "
        "`openmps-control -d`, with the same CUDA_MPS_PIPE_DIRECTORY",
        tried);
    return -1;
}

/* Sends one line and prints the answer. Returns 0, 1 when the answer is an error, or -1 when
 * the daemon went away. */
static int one_command(int fd, struct om_msg *m, const char *line)
{
    bool error = false;
    size_t len = strlen(line);
    int rc;

    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        len--;
    if (len > OM_CMD_MAX) {
        printf("Command too long (at most %u bytes)\n", OM_CMD_MAX);
        fflush(stdout);
        return 0;
    }
    size_t total = 0;

    rc = om_msg_send(fd, OM_MSG_COMMAND, 0, line, len, -1);
    do {
        /* Every command is answered at once, except terminate_client, which
         * the daemon bounds to a few seconds; a minute means the daemon hangs.
         * A failed send is read after too: a daemon that refused the
         * connection said why before it closed it. */
        int rrc = om_msg_recv(fd, m, NULL, rc == 0 ? OM_FRONTEND_TIMEOUT_MS : 1000);
        if (rrc == 0 && m->hdr.type == OM_MSG_REFUSE && om_msg_text(m, 1000) == 0) {
            fprintf(stderr, "openmps-control: the daemon refused the connection: %s\n",
                    (const char *)m->payload);
            return -1;
        }
        if (rc == 0)
            rc = rrc;
        if (rc < 0 || m->hdr.type != OM_MSG_ANSWER || om_msg_text(m, OM_MSG_MAX_PAYLOAD) < 0) {
            fprintf(stderr, "openmps-control: the connection to the daemon broke (%s)\n",
                    rc < 0 ? strerror(-rc) : "unexpected message");
            return -1;
        }
        error |= (m->hdr.flags & OM_ANSWER_ERROR) != 0;
        fwrite(m->payload, 1, m->hdr.len, stdout);
        total += m->hdr.len;
    } while (m->hdr.flags & OM_ANSWER_MORE);
    /* An empty answer prints nothing, as NVIDIA's front-end does. */
    if (total)
        putchar('\n');
    fflush(stdout);
    return error ? 1 : 0;
}

int om_frontend_ask_why(const char *line, char **ret_text, bool *ret_error, char *why, size_t cap)
{
    struct om_msg *m = malloc(sizeof(*m));
    char *text = NULL;
    size_t len = 0;
    int fd = m ? connect_daemon(why, cap) : -1, rc;

    if (fd < 0) {
        free(m);
        return -1;
    }
    *ret_error = false;
    rc = om_msg_send(fd, OM_MSG_COMMAND, 0, line, strlen(line), -1);
    do {
        char *nt;
        if (rc == 0)
            rc = om_msg_recv(fd, m, NULL, OM_FRONTEND_TIMEOUT_MS);
        if (rc == 0 && m->hdr.type == OM_MSG_REFUSE && om_msg_text(m, 1000) == 0) {
            say(why, cap, "openmps: the daemon refused the connection: %s",
                (const char *)m->payload);
            rc = -ECONNREFUSED;
            break;
        }
        if (rc < 0 || m->hdr.type != OM_MSG_ANSWER || om_msg_text(m, OM_MSG_MAX_PAYLOAD) < 0) {
            say(why, cap, "openmps: the connection to the daemon broke (%s)",
                rc < 0 ? strerror(-rc) : "unexpected message");
            rc = rc < 0 ? rc : -EPROTO;
            break;
        }
        if (!(nt = realloc(text, len + m->hdr.len + 1))) {
            rc = -ENOMEM;
            break;
        }
        text = nt;
        memcpy(text + len, m->payload, m->hdr.len);
        len += m->hdr.len;
        text[len] = '\0';
        *ret_error |= (m->hdr.flags & OM_ANSWER_ERROR) != 0;
    } while (m->hdr.flags & OM_ANSWER_MORE);
    close(fd);
    free(m);
    if (rc < 0) {
        free(text);
        return -1;
    }
    *ret_text = text ? text : strdup("");
    if (!*ret_text)
        say(why, cap, "openmps: out of memory");
    return *ret_text ? 0 : -1;
}

int om_frontend_ask(const char *line, char **ret_text, bool *ret_error)
{
    return om_frontend_ask_why(line, ret_text, ret_error, NULL, 0);
}

int om_frontend_run(int argc, char **argv)
{
    struct om_msg *m;
    char *line = NULL;
    size_t cap = 0;
    int fd, rc = 0;

    fd = connect_daemon(NULL, 0);
    if (fd < 0)
        return 1;
    m = malloc(sizeof(*m));
    if (!m) {
        close(fd);
        return 1;
    }
    if (argc > 0) {
        /* One command given as arguments: "openmps-control start_server -uid 1000". */
        char buf[OM_CMD_MAX + 2] = "";
        size_t used = 0;
        for (int i = 0; i < argc; i++) {
            int n = snprintf(buf + used, sizeof(buf) - used, "%s%s", i ? " " : "", argv[i]);
            if (n < 0 || (size_t)n >= sizeof(buf) - used) {
                fprintf(stderr, "openmps-control: command too long\n");
                rc = 1;
                goto out;
            }
            used += (size_t)n;
        }
        rc = one_command(fd, m, buf);
        /* scripts test a module's exit status: an error answer to one exits 1; a legacy
         * command exits 0 whatever it answered, as NVIDIA's */
        rc = rc < 0 || (rc > 0 && om_v3_is_module(argv[0]));
        goto out;
    }
    while (getline(&line, &cap, stdin) >= 0) {
        if (one_command(fd, m, line) < 0) {
            rc = 1;
            break;
        }
    }
out:
    free(line);
    free(m);
    close(fd);
    return rc;
}
