/* SPDX-License-Identifier: MIT */
/* openmps-server: owns the CUDA context of each GPU and serves the clients the daemon hands it. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/log.h"
#include "../common/msg.h"
#include "internal.h"

static volatile sig_atomic_t got_term;

static void on_term(int sig)
{
    (void)sig;
    got_term = 1;
}

static int send_ready(struct server *srv)
{
    size_t len = sizeof(struct om_srv_ready) + (size_t)srv->ndevs * sizeof(struct om_device_info);
    uint8_t *buf = calloc(1, len);
    struct om_srv_ready r = {.ndevices = (uint32_t)srv->ndevs};
    int rc;

    if (!buf)
        return -ENOMEM;
    memcpy(buf, &r, sizeof(r));
    memcpy(buf + sizeof(r), srv->devs, (size_t)srv->ndevs * sizeof(struct om_device_info));
    rc = om_msg_send(srv->chan, OM_MSG_SRV_READY, 0, buf, len, -1);
    free(buf);
    return rc;
}

/* Ends every session; `code` (a CUresult, 0 for none) is what the clients'
 * pending and later calls return. */
static void terminate_all(struct server *srv, const char *why, int code)
{
    while (srv->sessions) {
        struct session *s = srv->sessions;
        om_output_deliver(s); /* an assert's message: its call cannot take it any more */
        om_msg_send_text(s->sock, OM_MSG_TERMINATED, (uint16_t)code, why);
        om_session_end(srv, s, why);
    }
}

/* One message from the daemon. Returns false when the daemon is gone. */
static bool handle_daemon(struct server *srv)
{
    static struct om_msg m;
    struct om_srv_adopt a;
    struct om_limits l;
    uint32_t req, cpid;
    int fd = -1, rc;

    rc = om_msg_recv(srv->chan, &m, &fd, 0);
    if (rc == -EAGAIN || rc == -ETIMEDOUT)
        return true;
    if (rc < 0) {
        if (rc != -ECONNRESET)
            om_err("malformed message from the daemon (%s)", strerror(-rc));
        if (fd >= 0)
            close(fd);
        return false;
    }
    switch (m.hdr.type) {
    case OM_MSG_SRV_ADOPT:
        if (om_decode_adopt(m.payload, m.hdr.len, (uint32_t)srv->ndevs, &a) < 0) {
            om_err("invalid client hand-over from the daemon");
            break;
        }
        if (fd < 0) {
            om_err("client %d (id %u) came without its socket (out of file descriptors?)",
                   (int)a.pid, a.client_id);
            om_session_report(srv, NULL, a.client_id, (pid_t)a.pid, OM_CLIENT_DOWN);
            break;
        }
        om_session_adopt(srv, fd, &a);
        fd = -1;
        break;
    case OM_MSG_SRV_LIMITS:
        if (m.hdr.len < sizeof(l) || om_decode_limits((const void *)m.payload, &l) < 0) {
            om_err("invalid limits from the daemon");
            break;
        }
        srv->limits = l;
        om_session_limits(srv, &l); /* and its running clients' (beyond MPS) */
        break;
    case OM_MSG_SRV_CLIENT_LIMITS: {
        struct om_srv_client_limits cl;
        if (om_decode_client_limits(m.payload, m.hdr.len, &cl) < 0) {
            om_err("invalid client limits from the daemon");
            break;
        }
        om_session_client_limits(srv, &cl);
        break;
    }
    case OM_MSG_SRV_SHUTDOWN: {
        struct om_srv_shutdown sd = {0};
        if (m.hdr.len >= sizeof(sd))
            memcpy(&sd, m.payload, sizeof(sd));
        if (sd.force) {
            om_info("Forced shutdown: ending %u session(s)", srv->nsessions);
            terminate_all(srv, "the server was shut down", 0);
        } else if (!srv->stopping) {
            om_info("Shutdown requested: exiting when the last of %u client(s) has left",
                    srv->nsessions);
        }
        srv->stopping = true;
        break;
    }
    case OM_MSG_SRV_STATS_ASK: /* u32 request id (a longer payload: a later minor's) */
        if (m.hdr.len < sizeof(req)) {
            om_err("invalid stats request from the daemon");
            break;
        }
        memcpy(&req, m.payload, sizeof(req));
        om_account_send(srv->chan, srv->sessions, req);
        break;
    case OM_MSG_SRV_TERMINATE: {
        struct session *s;
        int32_t status = 0;
        if (om_decode_u32_pair(m.payload, m.hdr.len, &req, &cpid) < 0)
            break;
        s = om_session_find_pid(srv, (pid_t)cpid);
        if (s) {
            om_info("Terminating client %d at the daemon's request", (int)cpid);
            om_msg_send_text(s->sock, OM_MSG_TERMINATED, CUDA_ERROR_MPS_CLIENT_TERMINATED,
                             "the client was terminated by the server (terminate_client)");
            om_session_end(srv, s, "terminated");
        } else {
            status = -ESRCH;
        }
        uint32_t reply[2] = {req, (uint32_t)status};
        om_msg_send(srv->chan, OM_MSG_SRV_RESULT, 0, reply, sizeof(reply), -1);
        break;
    }
    default: om_err("unexpected %s message from the daemon", om_msg_type_name(m.hdr.type)); break;
    }
    if (fd >= 0)
        close(fd);
    return true;
}

static int serve(struct server *srv)
{
    struct pollfd *pfds = NULL;
    size_t cap = 0;

    for (;;) {
        size_t n = 0;
        int rc;

        if (got_term) {
            om_info("Terminated by a signal: ending %u session(s)", srv->nsessions);
            terminate_all(srv, "the server was stopped", 0);
            break;
        }
        if (srv->stopping && !srv->sessions)
            break;
        pid_t fault_pid = 0;
        int fault_code = om_server_fault_code(&fault_pid);
        if (fault_code) {
            /*
             * MPS semantics: every client of the GPU is told, then the context
             * is recreated. A new server process is the surest new context:
             * the daemon starts one for the next client.
             */
            char why[200];
            snprintf(why, sizeof(why),
                     "a fatal GPU fault (CUresult %d) in client %d; the server restarts",
                     fault_code, (int)fault_pid);
            om_err("FAULT: %s; ending %u session(s)", why, srv->nsessions);
            om_msg_send_text(srv->chan, OM_MSG_SRV_FAULT, 0, why);
            terminate_all(srv, why, fault_code);
            free(pfds);
            return 3;
        }
        if (srv->nsessions + 2 > cap) {
            struct pollfd *np = realloc(pfds, (srv->nsessions + 2) * 2 * sizeof(*np));
            if (!np) {
                sleep(1);
                continue;
            }
            pfds = np;
            cap = (srv->nsessions + 2) * 2;
        }
        pfds[n++] = (struct pollfd){.fd = srv->chan, .events = POLLIN};
        for (struct session *s = srv->sessions; s; s = s->next)
            /* Only the hang-up: a client's descriptor messages (pinned memory
             * it registers) are read by its worker, in order with its calls. */
            pfds[n++] = (struct pollfd){.fd = s->sock, .events = POLLRDHUP};
        pfds[n++] = (struct pollfd){.fd = om_server_fault_fd(), .events = POLLIN};
        rc = poll(pfds, n, OM_REPORT_MS);
        if (rc < 0 && errno != EINTR)
            break;
        om_hostmem_reap(); /* pinned regions left behind, once nothing of clients runs */
        om_session_report_memory(srv);
        om_account_tick(srv->sessions); /* the clients' rates, once a second */
        if (rc <= 0)
            continue;
        for (size_t i = 1; i + 1 < n; i++) {
            struct session *s;
            if (!pfds[i].revents || !(s = om_session_find_fd(srv, pfds[i].fd)))
                continue;
            om_session_end(srv, s, "its connection closed");
        }
        if (pfds[0].revents && !handle_daemon(srv)) {
            om_err("the control daemon is gone: ending %u session(s)", srv->nsessions);
            terminate_all(srv, "the openmps control daemon is gone", 0);
            break;
        }
    }
    free(pfds);
    return 0;
}

/* OPENMPS_SERVER_SHARED_USERS (uids, comma-separated): the daemon makes this a multi-user
 * server (-m, docs/security.md "Multi-user servers"): clients of those users are served too. A
 * malformed list is ignored as a whole (logged): the server then takes its own user's only. */
static void shared_users(struct server *srv)
{
    const char *v = getenv("OPENMPS_SERVER_SHARED_USERS");
    unsigned n = 0;

    for (const char *p = v ? v : ""; *p;) {
        char *end;
        unsigned long u = strtoul(p, &end, 10);
        if (*p < '0' || *p > '9' || u == 0 || u >= 0xffffffffUL || (*end && *end != ',') ||
            n == sizeof(srv->shared) / sizeof(srv->shared[0])) {
            om_err("OPENMPS_SERVER_SHARED_USERS=%.100s is not a list of user ids: ignored", v);
            return;
        }
        srv->shared[n++] = (uid_t)u;
        p = *end ? end + 1 : end;
    }
    srv->n_shared = n;
}

int main(int argc, char **argv)
{
    static struct server srv;
    struct sigaction sa = {.sa_handler = on_term};
    char err[512];
    int log_fd = -1;

    /* Not dumpable, before anything else: the server runs as its user, who could otherwise
     * ptrace it, read its memory or take its descriptors (/proc/PID/fd): the daemon's channel,
     * server.log (shared by every user's server) and every client's pinned memory. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    /* Big buffers (a session's staging buffer, up to OPENMPS_SERVER_STAGE_MAX in all; images)
     * from their own mappings, given back when freed. glibc otherwise raises its threshold to
     * the size of each mapped block freed (up to 32 MiB), after which such buffers come from the
     * session threads' arenas and stay resident when freed: the server's memory would then
     * exceed the sum of its budgets. (ipc.thirty_two_hostile_clients_stay_in_budget saw the
     * server grow by 177 MiB once, in make test's loaded pass, against 42 MiB in 24 runs
     * after, loaded or not: this mechanism is the one found that explains it, not a
     * reproduction.) A fixed threshold also keeps the trim threshold fixed. */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    srv.chan = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--channel-fd"))
            srv.chan = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--log-fd"))
            log_fd = atoi(argv[i + 1]);
    }
    if (srv.chan < 0) {
        fprintf(stderr, "openmps-server is started by openmps-control, not by hand\n");
        return 2;
    }
    om_log_init("Server", log_fd);
    /* Every line of this server is caused, one way or another, by its user's clients, and
     * server.log is shared by every user's server: the same bucket as the daemon keeps per
     * user (control/internal.h, OM_PEER_LOG_*).
     * An operator who asked for a line per call (OPENMPS_LOG_LEVEL=3, OPENMPS_PROFILE) gets
     * them all: tools read those lines (bench/timeline.py). */
    if (om_log_level_current < OM_LOG_DEBUG && !om_profile_on())
        om_log_limit(OM_SERVER_LOG_BURST, OM_SERVER_LOG_PER_S);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    srv.uid = geteuid();
    shared_users(&srv);
    om_raise_nofile();
    if (om_server_fault_init() < 0) {
        om_err("cannot create the fault pipe: %s", strerror(errno));
        return 1;
    }
    om_info("openmps-server %s starting for uid %u%s", OPENMPS_VERSION, (unsigned)srv.uid,
            srv.n_shared ? " (multi-user: the clients of other users too, in one address space)"
                         : "");
    om_sched_init();
    om_replay_init();
    om_priority_init();
    om_budget_init();
    if (om_server_driver_init(&srv, om_wait_context_flags(), err, sizeof(err)) < 0) {
        om_err("%s", err);
        om_msg_send_text(srv.chan, OM_MSG_SRV_FAULT, 0, err);
        return 1;
    }
    om_imgcache_init(); /* its directory depends on the driver and the GPU */
    if (srv.ndevs > 1)
        om_server_enable_peers(&srv);
    om_output_init();
    if (om_server_bind_context() == CUDA_SUCCESS) {
        om_warm_driver_pools(); /* before any client: warm.c and replybuf.c say why */
        om_replybuf_prefill();
        om_imgcache_preload(); /* the images of earlier servers, while nothing runs */
    }
    om_budget_limits(); /* the driver's maps and descriptors are there now */
    if (send_ready(&srv) < 0) {
        om_err("cannot reach the daemon");
        return 1;
    }
    om_info("Server ready with %d device(s), driver %s (version %d)", srv.ndevs, srv.drv.path,
            srv.drv.version);
    if (serve(&srv) == 3) {
        om_session_wait_workers(2000);
        om_info("Server exiting after a GPU fault");
        return 3; /* the context is unusable: nothing to release */
    }
    om_session_wait_workers(10000);
    om_sched_report();
    for (int i = 0; i < srv.ndevs; i++)
        srv.drv.cuDevicePrimaryCtxRelease(i);
    om_info("Server exiting");
    return 0;
}
