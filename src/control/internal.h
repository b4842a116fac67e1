/* SPDX-License-Identifier: MIT */
/* State of the openmps-control daemon, shared by its files. */
#ifndef OM_CONTROL_INTERNAL_H
#define OM_CONTROL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/driver.h"
#include "../common/log.h"
#include "../common/msg.h"
#include "openmps/protocol.h"
#include "v3.h"

/* Users one multi-user server may serve (OPENMPS_MULTIUSER_UIDS). */
#define OM_MULTIUSER_MAX_UIDS 64

/* Milliseconds a new connection may take to say who it is
 * (OPENMPS_HELLO_TIMEOUT_MS overrides it; the tests shorten it). */
#define OM_HELLO_TIMEOUT_MS 10000
/* Milliseconds a running server gets to answer a request of the daemon. */
#define OM_SERVER_REPLY_TIMEOUT_MS 5000
/* After a forced shutdown, how long a server may take before SIGKILL. */
#define OM_SERVER_KILL_GRACE_MS 3000 /* the default of d->server_kill_grace_ms */
/* How long a server that reported a fault may take to exit before SIGKILL: it ends its
 * clients' sessions first; one that stays would keep its user's next clients waiting. */
#define OM_SERVER_FAULT_GRACE_MS 10000
/* How long a server may stay INITIALIZING (OPENMPS_SERVER_START_TIMEOUT_MS). */
#define OM_SERVER_START_TIMEOUT_MS 60000
/* A front-end connection idle this long is closed. */
#define OM_UI_IDLE_TIMEOUT_MS (10 * 60 * 1000)
/* Connections of one user that are not (yet) clients: front-ends and silent ones. */
#define OM_MAX_NONCLIENT_CONNS_PER_UID 32
/* Connections of a user without a running server of its own (clients queued behind
 * another user's server, front-ends, silent ones): at most this many per user, and
 * at most half of what all such users share (three quarters of the table). Root,
 * the daemon's user and the user being served are not held to it. */
#define OM_MAX_UNSERVED_CONNS_PER_UID 256
/* Log lines that one user's peers may cause: a burst, then this many per second;
 * the rest are counted and reported in one line. */
#define OM_PEER_LOG_BURST 300
#define OM_PEER_LOG_PER_S 10
/* Descriptors kept free for servers, logs and the driver probe. */
#define OM_FD_RESERVE 64
/* Messages of one server's channel read in one pass of the event loop (servers.c). */
#define OM_SERVER_MSGS_PER_PASS 256
/* Largest piece of an answer in one message (the rest follows, flagged MORE). */
#define OM_ANSWER_CHUNK 60000

enum conn_kind {
    CONN_NEW,     /* accepted, no message yet */
    CONN_UI,      /* front-end sending commands */
    CONN_WAITING, /* client that said hello and waits for its server */
};

/* What the daemon keeps per user that has connections or recently caused log lines. */
struct peer {
    uid_t uid;
    unsigned nonclient; /* CONN_NEW and CONN_UI connections */
    unsigned waiting;   /* CONN_WAITING connections */
    int64_t log_milli;  /* log lines it may still cause, in thousandths */
    int64_t log_at_ms;  /* when log_milli was last refilled */
    uint64_t log_suppressed;
    int64_t reported_ms; /* when the last "suppressed" line was written (one a second at most) */
    struct peer *next;
};

/* A socket accepted on the control socket. */
struct conn {
    uint64_t id; /* unique for the daemon's life: fds and pointers are reused */
    int fd;
    enum conn_kind kind;
    pid_t pid; /* from SO_PEERCRED */
    uid_t uid;
    gid_t gid;
    int64_t since_ms;  /* accepted (CONN_NEW) or queued (CONN_WAITING) */
    bool told_queued;  /* a QUEUED notice was sent */
    uint32_t awaiting; /* UI: request id of a command in flight to a server, 0 none */
    struct {           /* CONN_WAITING: what its hello asked */
        uint32_t flags;
        struct om_limits want;
        char *visible, *mem_limit; /* its texts, on the heap only when it sent them */
        char *sm_partition;        /* its CUDA_MPS_SM_PARTITION, on the heap when it set it */
    } hello;
    char v3_server[64], v3_ns[64]; /* the namespace socket it came through (v3.c), "" none */
    /* The server process it goes to (om_v3_route_server, at its hello): that of named server
     * route ("" the plain server of route_uid) of user route_uid (its own uid, or with -m a
     * multi-user server's owner). */
    uid_t route_uid;
    char route[64];
    struct peer *peer; /* its user's counts */
    bool dead;         /* closed; freed at the end of the event loop's round */
    struct {           /* UI: what of an answer its socket could not take yet */
        char *buf;     /* NULL: nothing waits; else sent as the socket drains */
        size_t len, off;
        uint16_t flags; /* the answer's (OM_ANSWER_ERROR) */
        int64_t since_ms;
    } out;
    struct conn *next, *prev;   /* d->conns; next also chains d->dead_conns */
    struct conn *wnext, *wprev; /* d->wait_head: waiting clients in arrival order */
};

enum server_state { SRV_INITIALIZING, SRV_ACTIVE, SRV_FAULT, SRV_STOPPING };

/* A client of a server as the daemon knows it (from ADOPT until DOWN). */
struct client_rec {
    uint32_t id;
    pid_t pid;
    uid_t uid; /* its own (a multi-user server's clients are of several users) */
    bool up;   /* the server confirmed the session */
    uint32_t device_mask;
    struct om_limits limits; /* what the server applies to it (the server's, tightened) */
    struct om_limits want;   /* what it asked for in its environment, tightened by its namespace */
    struct om_limits asked;  /* what it asked for in its environment alone (v3.c merges it again
                              * with its namespace's limits when they change) */
    bool limits_pending;     /* its want is still to be sent (SRV_CLIENT_LIMITS; channel full) */
    uint64_t device_bytes;   /* device memory it holds, as the server last said (ps -v) */
    unsigned long pid_ns;    /* inode of /proc/PID/ns/pid, 0 if unknown */
    char command[128];
    char cgroup[256]; /* its /proc/PID/cgroup path (stats.c): the Slurm job, the pod */
    char ns[64];      /* its namespace (protocol 3, v3.c), "" without one */
    uint64_t part;    /* the serial of its static SM partition (partition.c), 0 none */
    struct client_rec *next;
};

/* A request to a server that a UI connection waits on (terminate_client). */
struct pending {
    uint32_t request_id;
    uint64_t ui_id; /* the conn that waits for the answer */
    int64_t deadline_ms;
    pid_t client_pid;
    bool v3; /* protocol 3's client terminate: nothing on success, an error line otherwise */
    struct pending *next;
};

struct server {
    uint64_t id; /* unique for the daemon's life, like conn ids */
    pid_t pid;
    uid_t uid;     /* the user it runs as */
    char name[64]; /* its named server (protocol 3), "" for a user's plain server */
    bool shared;   /* multi-user (-m): it also serves the clients of d->mu_uids' users */
    int chan;      /* socketpair end, -1 once the server closed it */
    enum server_state state;
    bool ready;          /* it said READY once */
    bool stop_when_idle; /* graceful shutdown asked */
    bool forced;         /* forced shutdown sent */
    int64_t kill_at_ms;  /* SIGKILL deadline after a forced shutdown, 0 = none */
    /* Since when its channel has refused a hand-off as full (the server has not read it yet: a
     * burst of clients), 0 = it takes them. Clients wait in the wait list meanwhile. */
    int64_t chan_full_ms;
    int64_t started_ms;
    char fault[256];
    /* What it sent that it should not have, logged once each (servers.c): it runs as its
     * user, who can take it over. */
    bool told_late_ready, told_more_faults;
    uint32_t next_client_id;
    struct client_rec *clients;
    unsigned nclients;
    struct om_limits limits; /* handed to clients adopted from now on */
    struct om_device_info devs[OM_MAX_DEVICES];
    uint32_t ndevs;
    struct pending *pending;
    struct server *next;
};

struct daemon {
    const char *pipe_dir;
    const char *log_dir;
    char sock_path[256];
    char sock_new[256]; /* where the control socket is bound until it listens (setup.c) */
    char pid_path[256];
    char server_exe[4096];
    uid_t euid;
    int listen_fd;
    int signal_fd;
    int lock_fd;
    int server_log_fd; /* server.log, inherited by servers */
    int hello_timeout_ms;
    /* OPENMPS_SERVER_NICE: the servers' nice value, read at the first start, set before the daemon
     * drops root (servers.c);
     * server_nice_set false: they keep the daemon's */
    int server_nice;
    bool server_nice_set, server_nice_read;
    struct conn *conns;
    struct conn *wait_head, *wait_tail; /* CONN_WAITING, oldest first */
    struct conn *dead_conns;
    struct peer *peers;
    bool sched_dirty; /* om_daemon_schedule was asked for since the last pass */
    struct server *servers;
    struct om_stats_req *stats_reqs; /* stats.c: stats commands waiting for servers' answers */
    uint64_t next_conn_id;
    uint64_t next_server_id;
    long max_conns; /* from RLIMIT_NOFILE, less OM_FD_RESERVE */
    unsigned nconns;
    int64_t accept_paused_until; /* after EMFILE/ENFILE */
    int64_t last_accept_warning;
    int server_start_timeout_ms;
    int server_kill_grace_ms; /* OPENMPS_SERVER_KILL_GRACE_MS: a forced stop's SIGKILL after */
    int64_t probe_retry_at;   /* a failed device probe is not retried before this */
    uint32_t next_request_id;
    struct om_limits defaults; /* set_default_*; lost on quit */
    int64_t start_uid;         /* start_server queued behind another user, -1 none */
    char start_name[64];       /* ... of that named server ("" the user's plain server) */
    /* -m with OPENMPS_MULTIUSER_SHARED_ADDRESS_SPACE=1 (docs/security.md "Multi-user servers"):
     * the clients of these users share one server, run as the first of them. */
    bool multiuser;
    bool memacct_audit; /* memacct set audit_log=true, [features.memacct] audit_log: control.log
                         * says what device memory each client held when it left */
    unsigned n_mu_uids;
    uid_t mu_uids[OM_MULTIUSER_MAX_UIDS];
    bool quitting;
    int64_t quit_force_at_ms; /* 0 = wait for clients */
    bool probed;
    struct om_device_info devs[OM_MAX_DEVICES];
    int ndevs; /* -1: probing failed */
    char probe_err[256];
    int protocol;               /* OM_PROTOCOL_LEGACY or OM_PROTOCOL_V3 (v3.h) */
    struct om_v3 *v3;           /* named servers and namespaces (v3.c), NULL before the first */
    struct om_metrics *metrics; /* metrics.c: NULL unless OPENMPS_METRICS or _TEXTFILE is set */
    struct om_parts *parts;     /* partition.c: static SM partitions (-S), NULL without -S */
};

/* What a front-end ui (NULL: the daemon itself, the metrics) may see: a server's clients when
 * it is root, the server's user, or a user listed for a multi-user server (-m); of those, a
 * client when it is root or the client's user (servers.c). */
bool om_sees_server(const struct daemon *d, const struct conn *ui, const struct server *s);
static inline bool om_sees_client(const struct conn *ui, const struct client_rec *r)
{
    return !ui || ui->uid == 0 || ui->uid == r->uid;
}

/* A growing text buffer for answers. */
struct strbuf {
    char *buf;
    size_t len, cap;
    bool oom;
};
void sb_printf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_free(struct strbuf *sb);

int64_t om_now_ms(void);

/* setup.c: everything before the event loop. On failure err holds a sentence. */
int om_daemon_setup(struct daemon *d, char *err, size_t errlen);
/* Starts listening on the control socket, the last step of the set-up: a program that finds the
 * daemon there finds the configuration's servers' and namespaces' sockets, and the pid file,
 * too. */
int om_daemon_listen(struct daemon *d, char *err, size_t errlen);
int om_daemon_write_pid(struct daemon *d);
void om_daemon_cleanup(struct daemon *d);

/* metrics.c: the Prometheus metrics (OPENMPS_METRICS=HOST:PORT, OPENMPS_METRICS_TEXTFILE=PATH).
 * setup at the daemon's set-up (a bad setting fails it); started once the log is open; the
 * event loop polls its descriptors (at most OM_METRICS_MAX_FDS after the others) and hands it
 * their events; timer and next_ms fit it into the loop's timeouts. */
#define OM_METRICS_MAX_FDS 17
struct pollfd;
int om_metrics_setup(struct daemon *d, char *err, size_t errlen);
void om_metrics_started(struct daemon *d);
size_t om_metrics_pollfds(struct daemon *d, struct pollfd *p);
void om_metrics_handle(struct daemon *d, const struct pollfd *p, size_t n);
void om_metrics_timer(struct daemon *d, int64_t now);
int64_t om_metrics_next_ms(struct daemon *d, int64_t next);
void om_metrics_cleanup(struct daemon *d);
/* The exposition of what the daemon knows, appended to sb. */
void om_metrics_render(struct daemon *d, struct strbuf *sb);
/* A client's pid, uid and command labels, as every client series has them. */
void om_metrics_client_labels(struct strbuf *sb, const struct server *s,
                              const struct client_rec *c);
/* stats.c's answer to the metrics' refresh: the accounting's series (the buffer is taken). */
void om_metrics_accounting(struct daemon *d, struct strbuf *text);

/* daemon.c */
int om_daemon_run(struct daemon *d);
/* Asks for a scheduling pass over the waiting clients; it runs once at the end
 * of the event loop's round, however often it was asked for. */
void om_daemon_schedule(struct daemon *d);
void om_conn_close(struct daemon *d, struct conn *c);
/* True when a log line caused by a peer of this user may be written (a token
 * bucket per user); false counts the line as suppressed. */
bool om_peer_log_ok(struct daemon *d, uid_t uid);
#define om_peer_log(d, uid, level, ...)                                                            \
    do {                                                                                           \
        if ((int)(level) <= om_log_level_current && om_peer_log_ok((d), (uid)))                    \
            om_log_write((level), __VA_ARGS__);                                                    \
    } while (0)
#define om_peer_err(d, uid, ...) om_peer_log(d, uid, OM_LOG_ERROR, __VA_ARGS__)
#define om_peer_info(d, uid, ...) om_peer_log(d, uid, OM_LOG_INFO, __VA_ARGS__)
/* Sends an answer of any length to a front-end (OM_ANSWER_CHUNK pieces); what its socket cannot
 * take now is kept in c->out and sent as it drains. -EBUSY: an answer of c's still waits. */
int om_send_answer(struct daemon *d, struct conn *c, bool error, const char *text, size_t len);
/* Sends what of c's answer waits (c->out), as far as its socket takes it; 0, or -errno when the
 * connection broke (the caller closes it). */
int om_conn_flush(struct conn *c);

/* commands.c: runs one command line from a UI connection. Returns true when the
 * answer was produced into out, false when it will be sent later (a server
 * request is pending). */
#define OM_CMD_LATER 1
int om_command_run(struct daemon *d, struct conn *ui, const char *line, struct strbuf *out,
                   bool *ret_error);
/* The pure parser used by om_command_run and its fuzz target: splits a line
 * into at most max words in place. Returns the count or -E2BIG. */
int om_command_split(char *line, char **argv, int max);

/* stats.c: the stats command (OM_CMD_LATER: answered once the servers have; ret_error and out
 * for a bad command line); a server's SRV_STATS (-EBADMSG: invalid); a server gone, and the
 * requests' deadlines; ps --json; a process's cgroup path (empty when unknown). */
struct om_stats_req;
int om_stats_command(struct daemon *d, struct conn *ui, int argc, char **argv, struct strbuf *out,
                     bool *ret_error);
int om_stats_reply(struct daemon *d, struct server *s, const void *payload, size_t len);
void om_stats_server_gone(struct daemon *d, struct server *s);
void om_stats_expire(struct daemon *d, int64_t now);
void om_stats_ps_json(struct daemon *d, struct conn *ui, struct server *only, struct strbuf *out);
void om_stats_cgroup(pid_t pid, char *buf, size_t cap);
/* A cgroup file (/proc/PID/cgroup) whole, up to OM_CGROUP_TEXT_MAX - 1 bytes, NUL-terminated: its
 * length (0: none; cap - 1: maybe cut). stats.c and v3.c read it with their own rules. */
#define OM_CGROUP_TEXT_MAX 16384
size_t om_cgroup_text(const char *path, char *text, size_t cap);
/* Asks every server for its accounting for the metrics (om_metrics_accounting gets it), unless
 * the last such request is still out. */
void om_stats_refresh_metrics(struct daemon *d);

/* partition.c: static SM partitions (-S; docs/operations.md "Static SM partitions").
 * om_parts_enable at the set-up (-ENOMEM); the commands sm_partition and lspart (out gets the
 * answer, *ret_error whether it is an error); a partition made from the configuration file
 * (chunks 0: every free chunk; err gets a sentence) and whether a UUID names a device of the
 * daemon (0, or -1 with err set); om_parts_adopt resolves what a client's
 * hello names for server s, or, where it names none, its namespace's partition (ns, NULL for
 * none; a client naming another than its namespace's is refused): 0 with a->part and a->devmap
 * set (the client sees its partition's device only) and *ret_serial, or -1 with why set (the
 * client is refused, OM_REFUSE_PARTITION). */
struct om_srv_adopt;
int om_parts_enable(struct daemon *d);
int om_parts_enable_open(struct daemon *d); /* sm-partition create's: clients may name none */
void om_parts_free(struct daemon *d);
void om_parts_sm_partition(struct daemon *d, int argc, char **argv, struct strbuf *out,
                           bool *ret_error);
void om_parts_lspart(struct daemon *d, struct strbuf *out);
int om_parts_device_known(struct daemon *d, const char *uuid, char *err, size_t errlen);
int om_parts_add_named(struct daemon *d, const char *uuid, const char *server, const char *name,
                       uint32_t chunks, bool remainder, char *err, size_t errlen);
int om_parts_adopt(struct daemon *d, const struct server *s, const struct conn *c,
                   const struct om_v3_ns *ns, struct om_srv_adopt *a, uint64_t *ret_serial,
                   char *why, size_t whylen);
/* For protocol 3 (v3.c: the partition module, a namespace's partitions). Partitions are known
 * there by their serial (never reused). om_parts_create makes one as sm_partition add does
 * (chunks 0: every free chunk; name "" none): its serial, or 0 with err set. om_parts_delete
 * removes one unless a client or a namespace uses it (0, or -1 with err set). om_parts_resolve:
 * the partition a text names as CUDA_MPS_SM_PARTITION does ("GPU-<uuid>/<ID>", a UUID's prefix
 * and a name, or the ID or name alone where only one partition has it), 0 with err set if none.
 * om_parts_name: "GPU-<uuid>/<ID>" of a serial ("-" once it is gone). om_parts_ns_add appends
 * the partition a text names to a namespace's list (at most cap, one per device): 0, or -1 with
 * err set. om_parts_row: the i-th partition (false past the last). */
struct om_part_row {
    uint64_t serial;
    char id[16];
    char name[64];
    char device[64]; /* its device's UUID */
    char server[64]; /* the named server it was made for (sm-partition create), "" any */
    unsigned chunks, sms, clients;
    bool remainder;
};
struct om_part_room {
    uint32_t total_chunks, free_chunks, free_sms;
};
const struct om_device_info *om_parts_device(struct daemon *d, const char *text, char *err,
                                             size_t errlen);
void om_parts_device_room(const struct daemon *d, const struct om_device_info *dev,
                          struct om_part_room *room);
uint64_t om_parts_create(struct daemon *d, const char *uuid, const char *server, const char *name,
                         uint32_t chunks, bool remainder, char *err, size_t errlen);
int om_parts_delete(struct daemon *d, uint64_t serial, char *err, size_t errlen);
uint64_t om_parts_resolve(struct daemon *d, const char *text, const char *server, char *err,
                          size_t errlen);
void om_parts_name(const struct daemon *d, uint64_t serial, char *buf, size_t cap);
int om_parts_ns_add(struct daemon *d, const char *server, uint64_t *list, unsigned *n, unsigned cap,
                    const char *text, char *err, size_t errlen);
bool om_parts_row(struct daemon *d, unsigned i, struct om_part_row *row);

/* commands.c: asks server s to end client cpid's session for front-end ui (terminate_client,
 * v3 false; client terminate, v3 true), which then waits for the answer (ui->awaiting; servers.c
 * answers it). 0, or -ENOMEM / -EPIPE (the server's channel is gone). */
int om_terminate_request(struct daemon *d, struct server *s, pid_t cpid, struct conn *ui, bool v3);

/* servers.c */
/* Starts the server process of named server `name` ("" a user's plain server) as uid. */
struct server *om_server_spawn(struct daemon *d, uid_t uid, const char *name, char *err,
                               size_t errlen);
struct server *om_server_find_pid(struct daemon *d, pid_t pid);
/* The process of named server `name` ("" the plain one) of uid that may take new clients. */
struct server *om_server_for(struct daemon *d, uid_t uid, const char *name);
/* A server of uid's (any of its named servers, or its plain one) that may take new clients. */
struct server *om_server_for_uid(struct daemon *d, uid_t uid);
/* Multi-user (-m): whether uid is one of OPENMPS_MULTIUSER_UIDS; the user whose servers serve
 * uid's clients (the list's first where uid is listed, else uid itself). */
bool om_multiuser_listed(const struct daemon *d, uid_t uid);
uid_t om_serving_uid(const struct daemon *d, uid_t uid);
/* Whether a live server serves uid's clients (its own, or a multi-user server that lists it). */
bool om_user_served(struct daemon *d, uid_t uid);
/* -m at the start: 0, or -1 with a sentence in err (no opt-in, a bad list). */
int om_multiuser_setup(struct daemon *d, char *err, size_t errlen);
/* Hands client c to its server: true when done (or refused: c is closed either way), false
 * when the server's channel is full (c stays in the wait list; s->chan_full_ms is set). */
bool om_server_adopt(struct daemon *d, struct server *s, struct conn *c);
/* How long a server's channel may stay full before the clients waiting for it are refused. */
#define OM_HANDOFF_FULL_MS 20000
void om_server_shutdown(struct daemon *d, struct server *s, bool force);
/* quit: timeout_s < 0 waits for the clients; otherwise forces after that many seconds. */
void om_daemon_quit(struct daemon *d, int timeout_s);
void om_server_handle_message(struct daemon *d, struct server *s);
void om_server_reap(struct daemon *d);
int om_server_send_limits(struct server *s);
/* Sends one running client's changed own limits (r->want) to its server, and updates its
 * record; what the full channel does not take now is sent once it has room. */
int om_server_send_client_limits(struct server *s, struct client_rec *r);
/* Sends the client limits still waiting (limits_pending); 0, or -errno. */
int om_server_flush_client_limits(struct server *s);
bool om_server_live(const struct server *s);
/* Devices for device_query: from a running server that has every device (no named server's
 * allowed_devices), else probed once. */
int om_daemon_devices(struct daemon *d, const struct om_device_info **ret);
/* The daemon's own probe of the driver (root's, in a child process), never a server's report:
 * what static partitions are made on (a user's server is untrusted, and may see fewer devices). */
int om_daemon_probed_devices(struct daemon *d, const struct om_device_info **ret);

#endif
