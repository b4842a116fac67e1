/* SPDX-License-Identifier: MIT */
/* State of openmps-server, shared by its files. */
#ifndef OM_SERVER_INTERNAL_H
#define OM_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/driver.h"
#include "../common/gen/entries.h"
#include "gen/handles.h"
#include "../common/ring.h"
#include "openmps/cuda_abi.h"
#include "openmps/ops.h"
#include "openmps/protocol.h"

/* Bytes of each ring direction per client. */
#define OM_SERVER_RING_BYTES (1u << 20)
/* Largest answer of one call (a piece of a device-to-host copy, at most). */
#define OM_REPLY_MAX (512u * 1024u)
/* Slots of OM_INLINE_COPY_MAX bytes after a worker's reply buffer, for the DMAs of small
 * host-to-device copies answered before their DMA (api/copies.c). */
#define OM_COPY_SLOTS 8u
/* A worker's reply buffer as pinned: the answer, then the copy slots. */
#define OM_REPLYBUF_BYTES (OM_REPLY_MAX + OM_COPY_SLOTS * OM_INLINE_COPY_MAX)
/* Freed allocations a client keeps for its next ones (devmem.c). */
#define OM_DEVCACHE_ENTRIES 8
/* Largest staged image or copy of one call. */
#define OM_STAGE_MAX (1u << 30)
/* Longest a session worker sleeps before it looks at its stop flag again. */
#define OM_SESSION_POLL_MS 100
/* server.log lines this server (so its user) may write: a burst, then this many a second; the
 * rest are counted and the count logged (om_log_limit). As the daemon's per user. */
#define OM_SERVER_LOG_BURST 300
#define OM_SERVER_LOG_PER_S 10

/* A set of handles a client owns (streams, events, libraries, …): v[0..n) in no order, for
 * walking, and an open-addressed index of positions in v + 1 (0: empty, UINT32_MAX: removed),
 * so a lookup costs the same with 65 536 events as with one. */
struct om_handles {
    uint64_t *v;
    size_t n, cap;
    uint32_t *index;
    size_t slots, used; /* slots: a power of two or 0; used: positions and removed marks */
};

/* Device memory a client may touch: its allocations (owned: it may free them)
 * and the globals of modules it loaded (not owned). */
struct om_range {
    uint64_t base, size;
    uint64_t mem; /* the physical allocation behind an owned range, 0 otherwise */
    bool owned;
    bool managed;     /* shadowed in the client: never kept for reuse (devmem.c) */
    uint64_t pool;    /* stream-ordered memory of this pool (api/mempool.c), 0 otherwise */
    bool graph;       /* a graph allocation's range, held by graphs (graphstate.c) */
    bool mapped;      /* a cuMemMap mapping (api/vmm.c): one buffer with a mapping beside it */
    uint64_t charged; /* bytes counted against the client's device-memory cap (memcap.c) */
    int dev;          /* the device it is on (memcap.c counts it there; devmem.c's cache) */
};
struct om_ranges {
    struct om_range *v;
    size_t n, cap;
};

/* The event that orders other streams after a stream (legacy default stream). */
struct om_sync_event {
    CUstream stream;
    CUevent event;
};

/* A stream whose real priority is not the one its client asked for (priority.c). */
struct om_stream_prio {
    CUstream stream;
    int asked;
};

/* A region of pinned host memory shared with a client (hostmem.c). */
struct om_hostmem {
    int fd;     /* the memfd, kept for the next client the region goes to; -1 once it was sent,
                 * for a region that is never pooled (hostmem.c) */
    void *addr; /* the server's mapping, registered with the driver */
    size_t len;
    CUdeviceptr device;
    bool adopted;            /* the client's own pages (cuMemHostRegister): never reused */
    struct om_hostmem *next; /* in the pool */
};

/* Why a synchronize asked with the completion word was answered after the work instead
 * (syncword.c; the counts are in the log at the session's end). */
enum om_syncword_why {
    OM_SYNCWORD_IDLE,    /* its streams had nothing left to do */
    OM_SYNCWORD_STATE,   /* more to settle: an error to report, shadows, pools, printing, the
                          * word armed last not landed (om_syncword_may_defer) */
    OM_SYNCWORD_STREAMS, /* a context's synchronize with work on several streams */
    OM_SYNCWORD_CORES,   /* no core to spin on (wait.c's om_spin_client_may) */
    OM_SYNCWORD_SCHED,   /* the write would wait behind a long kernel in a shared hardware queue */
    OM_SYNCWORD_DRIVER,  /* the driver refused the word's write */
    OM_SYNCWORD_WHY_N
};

/* A client stream's last kernel, while the scheduler watches it (sched.c). */

struct om_sched_stream {
    CUstream stream;
    uint64_t kernel;      /* the kernel launched last on it; 0 when its successor went */
    uint64_t launched_ns; /* CLOCK_MONOTONIC */
    uint32_t short_runs;  /* decisions taken on short kernels, for the periodic re-measure */
};

/* Kernels a client obtained, with the size of their argument buffer. */
struct om_kernel {
    uint64_t handle;
    uint32_t args_size;
    bool prints; /* its image may call printf (om_output_image_prints): output.c's ordering */
};

/* account.c: what a client did on one device. The worker adds (single writer: a relaxed load and
 * store, no lock), the main thread reads (__atomic) for the daemon's stats. */
struct om_acct_dev {
    uint64_t kernels, graphs;  /* launched */
    uint64_t gpu_ns;           /* closed busy periods: time with its kernels outstanding */
    uint64_t busy_since;       /* CLOCK_MONOTONIC ns its open busy period began; 0: none */
    uint64_t htod, dtoh, dtod; /* bytes copied */
    uint32_t open;             /* its streams with kernels outstanding here (worker only) */
};
/* Streams of one client whose kernels account.c times at once; a launch on one more is counted
 * but not timed (its own period would be lost, never another's). */
#define OM_ACCT_STREAMS 16
struct om_acct {
    struct om_acct_dev dev[OM_MAX_DEVICES];
    struct {
        CUstream st;
        int dev;
    } busy[OM_ACCT_STREAMS]; /* streams with kernels outstanding (worker only) */
    unsigned nbusy, last;
    uint64_t untimed;       /* launches on a stream past OM_ACCT_STREAMS */
    uint64_t serve_ns;      /* __atomic */
    uint64_t gpu_wait_ns;   /* __atomic */
    uint64_t waiting_since; /* in a GPU wait for it since (ns); 0: not (__atomic) */
    uint64_t started_ns;    /* its session began (__atomic) */
    uint64_t rate_at_ns, rate_calls, rate_kernels; /* the rates' last sample (main thread) */
    uint64_t calls_per_s_milli, kernels_per_s_milli;
};

/*
 * One client's session. Everything the client holds in the server is
 * reachable from here, so that its end (release_gpu_resources) frees all of it in one place
 * whatever the moment the client died.
 */
struct session {
    uint32_t id;
    pid_t pid;
    uid_t uid;
    int sock; /* the client's socket, handed over by the daemon */
    int ring_fd;
    void *ring_map;
    size_t ring_len;
    struct om_ring_end tx, rx;
    struct om_limits limits; /* effective; the main thread stores changes (__atomic fields) */
    struct om_limits want;   /* what the client asked for itself (merged again on a change) */
    pthread_t worker;
    bool worker_started;
    int stop;   /* asks the worker to leave (__atomic) */
    int failed; /* the worker found a protocol error (__atomic) */
    /* device memory it holds on each device, as its cap counts it (memcap.c; __atomic) */
    uint64_t device_bytes[OM_MAX_DEVICES];
    uint64_t reported_bytes;    /* device_bytes as the daemon last heard it (main thread) */
    uint32_t reported_mask;     /* device_mask as the daemon last heard it (main thread) */
    bool memcap_logged;         /* its first refusal past the cap was logged */
    uint64_t calls;             /* records served (its worker writes, __atomic) */
    uint64_t answered;          /* of them, calls the client waited for (its worker only) */
    uint64_t waits;             /* times its thread found no record and waited */
    struct om_profile *profile; /* OPENMPS_PROFILE: server time per entry point (profile.c) */
    char end_reason[200];       /* a copy: the caller's text may not outlive the worker */
    unsigned left_after;        /* sessions left then, for the log */
    /* What the client owns; freed at its end whatever the moment. */
    CUstream default_stream; /* its NULL, legacy and per-thread default stream */
    /* Several devices: the device its calls run on now (OM_OP_SET_DEVICE), its default
     * stream on each other device (default_stream is the current device's), the devices it
     * made streams, memory or launches on (worker only), and what the daemon is told: those and
     * the current one (a bit each, for get_device_client_list and ps; __atomic). */
    int dev;
    struct om_devmap devmap;    /* the devices it sees, in its order (devmap.c) */
    uint32_t ctx_sms;           /* its current context's SM partition (OM_OP_SET_DEVICE; 0: none) */
    struct om_part_assign part; /* its static SM partition (-S; share.c), flags 0: none */
    CUstream default_streams[OM_MAX_DEVICES];
    uint64_t worked_mask;
    uint64_t device_mask;
    struct om_handles own[OM_HANDLE_KINDS]; /* by kind (api/handles.tsv); streams, events, … */
    struct om_handles print_execs; /* its executable graphs that may print (graphstate.c) */
    /* api/contexts.c: the stream cuCtxRecordEvent joins the client's streams on, per device */
    CUstream ctx_streams[OM_MAX_DEVICES];
    /* devmap.c: the device of each stream and pool made on another device than the session's
     * first (the others are on its first: a client of one device keeps this empty) */
    struct om_handle_dev {
        uint64_t handle;
        int dev;
    } * handle_devs;
    size_t nhandle_devs, handle_devs_cap;
    struct om_green *green; /* api/green.c: its green contexts and device resources */
    /* streamstate.c: which green context each stream it made in one belongs to */
    struct om_gstream {
        uint64_t stream, green;
    } * gstreams;
    size_t ngstreams, gstreams_cap;
    struct om_share *share; /* share.c: its SM share's lane and shadow streams */
    /* ... on its other devices (swapped like default_streams), and how many it made */
    struct om_share *shares[OM_MAX_DEVICES];
    unsigned nshares;
    struct om_stream_prio *prio; /* priority.c: its streams' asked priorities, where changed */
    size_t nprio, prio_cap;
    bool share_logged; /* share.c: a share was applied (a later 100 % is logged) */
    /* route.c: the streams that may have work: each stream a call resolves is added, and the
     * completion word's context synchronize (api/contexts.c) queries these only, dropping those
     * it finds idle (a stream nothing was resolved to since it was idle is idle). touched_lost:
     * an add failed, so every stream is queried from then on. */
    struct om_handles touched;
    CUstream last_touched;
    bool touched_lost;
    struct om_handles blocking; /* streams the client created blocking (legacy semantics) */
    /* ... on its other devices: the legacy default stream orders a device's streams only
     * (swapped like default_streams) */
    struct om_handles blockings[OM_MAX_DEVICES];
    struct om_hostmem **hostmem; /* pinned regions the client holds */
    int send_fd_after;           /* a memfd to send once the call's completion is out */
    bool send_fd_close;          /* ... and close it then (a descriptor made for the client) */
    /* api/copies.c: small host-to-device copies answered before their DMA ended. copy_slots:
     * OM_COPY_SLOTS pinned slots of OM_INLINE_COPY_MAX bytes their DMAs read (NULL: none, the
     * copies are answered after their DMA); small_stream: the stream of those in flight, which
     * had no other work since it was last waited for (NULL: none); small_used: the slots they
     * hold. om_copy_settle waits for them before any other record. */
    uint8_t *copy_slots;
    CUstream small_stream;
    unsigned small_used;
    /* syncword.c: its completion word's page (NULL: none yet), the last number armed on it, and
     * how many synchronizes it answered; printed: it launched a kernel that may print (its
     * synchronizes are answered after the driver's, which prints the output) */
    struct om_syncword *syncword;
    uint32_t syncword_seq;
    uint64_t syncword_armed;
    uint64_t syncword_declined[OM_SYNCWORD_WHY_N]; /* asked, answered after the work instead */
    bool syncword_spin; /* its client may still spin for the word armed last (not landed yet) */
    bool printed;
    size_t nhostmem, hostmem_cap;
    struct om_sync_event *sync_events;
    size_t nsync_events, sync_events_cap;
    struct om_ranges allocs;
    struct om_range devcache[OM_DEVCACHE_ENTRIES]; /* its freed allocations, for its next */
    size_t ndevcache;
    struct om_sched_stream *sched; /* its streams' last kernels, while scheduling is on */
    struct om_replay *replay;      /* replay.c: its current run of launches, its templates */
    size_t nsched, sched_cap;
    struct om_kernel *kernels;
    size_t nkernels, kernels_cap;
    uint8_t *stage; /* bytes the client staged for its next call */
    size_t stage_len, stage_cap;
    CUresult stage_error; /* why the staged bytes are incomplete (a budget), for their user */
    /* What counts against the client's budgets (budget.c). */
    uint64_t pinned_bytes; /* pinned regions it holds */
    uint64_t image_bytes;  /* module images new to the server that it loaded */
    uint32_t image_count;
    /* Libraries it loaded more than once (the same image, from several threads: CuPy), each with
     * its loads past the first: one handle answers every load (the server loads an image once),
     * and each cuLibraryUnload takes back one load, as natively each takes back its own
     * (api/modules.c). Few: one entry per library, only while it has more than one load. */
    struct om_libloads {
        uint64_t lib;
        uint32_t more;
    } * libloads;
    size_t nlibloads, libloads_cap;
    unsigned budget_logged; /* bit per enum om_budget_kind: its refusal was logged */
    unsigned errors_logged; /* of its requests' errors (client_err logs 16 at most) */
    char *output;           /* kernel printf output for the client (output.c) */
    size_t output_len, output_cap;
    uint64_t output_dropped;
    char *errout; /* what the driver wrote on stderr for it: device-side assert messages */
    size_t errout_len, errout_cap;
    uint8_t launch_args[32768];
    /* bit per entry point whose "not supported" note was logged (session.c): once per session */
    uint8_t noted_unsupported[(OM_ENTRY_COUNT + 7) / 8];
    unsigned captures; /* stream captures it began and has not ended (api/capture.c) */
    /* hostcb.c: its host-callback channel and its host functions' records */
    struct om_hostch *hostch; /* __atomic: the main thread closes it at the session's end */
    uint64_t *hostrec;
    size_t nhostrec, hostrec_cap;
    /* errors.c: the first error of a posted call that enqueued on no stream (the context's),
     * and the errors of posted calls by stream, for their synchronising calls */
    CUresult async_error;
    struct om_posted_error *perr;
    size_t nperr, perr_cap;
    CUstream call_stream; /* route.c: the client stream the current call enqueues on (NULL: none) */
    /* Its own pools for cuMemAllocAsync (api/mempool.c); cuMemAddressReserve, cuMemMap
     * (api/vmm.c). */
    uint64_t pool_default[OM_MAX_DEVICES], pool_current[OM_MAX_DEVICES]; /* per device */
    struct om_ranges vmm_reserved, vmm_mapped;
    struct om_ranges held; /* handles charged to its device-memory cap (base) and their bytes */
    /* api/vmm.c: the extra driver references the client holds on handles it owns (each
     * cuMemRetainAllocationHandle of a mapped handle adds one; one cuMemRelease drops one) */
    uint64_t *vmm_extra;
    size_t vmm_extra_n, vmm_extra_cap;
    struct om_graphmem *graphmem; /* graph allocations, conditional handles (graphstate.c) */
    struct om_acct acct;          /* account.c: what it did, for the daemon's stats */
    struct session *next;
};

struct server {
    int chan; /* to the daemon */
    uid_t uid;
    /* A multi-user server's (-m; OPENMPS_SERVER_SHARED_USERS, set by the daemon): the other
     * users whose clients it serves; 0 for a server of its own user's clients alone. */
    unsigned n_shared;
    uid_t shared[64];
    struct om_driver drv;
    struct om_device_info devs[OM_MAX_DEVICES];
    int ndevs;
    om_cu_context ctx[OM_MAX_DEVICES];
    bool peer[OM_MAX_DEVICES][OM_MAX_DEVICES]; /* [i][j]: device i's context reaches j's memory */
    struct om_limits limits;                   /* from the daemon, for new clients */
    struct session *sessions;
    unsigned nsessions;
    bool stopping; /* graceful: exit when the last client left */
};

/* driver.c: loads the driver (its entry points by index: om_server_missing where it lacks one),
 * retains one primary context per device with `ctx_flags` (om_wait_context_flags) and keeps
 * `srv` for the functions below; 0 or -errno with the reason in err. om_server_enable_peers: every
 * context reaches every device it can. */
int om_server_driver_init(struct server *srv, unsigned ctx_flags, char *err, size_t errlen);
void om_server_enable_peers(struct server *srv);
/* The first fatal fault's CUresult (0: none yet) and client, and the descriptor that becomes
 * readable when it comes (made by om_server_fault_init, -errno; the main loop polls it). */
int om_server_fault_init(void);
int om_server_fault_code(pid_t *ret_pid);
int om_server_fault_fd(void);
extern void *om_server_real[OM_ENTRY_COUNT];
int om_server_ndevices(void);
CUresult om_server_missing(void);
/* A fatal GPU fault: the context is unusable for every client. om_server_fault
 * records the first one (thread-safe) and wakes the main loop, which ends every
 * session with the reason and exits; the daemon starts a new server. */
bool om_server_fatal(CUresult rc);
void om_server_fault(CUresult rc, pid_t pid);
bool om_server_has(int index); /* false: the real driver lacks it (a stub answers) */
const char *om_server_entry_name(int index);
/* Makes the server's primary context of device 0 (of `dev`) current on the calling thread. */
CUresult om_server_bind_context(void);
CUresult om_server_bind_device(int dev);
/* Whether device `from`'s context reaches device `to`'s memory (peer access, enabled at start). */
bool om_server_peer(int from, int to);

/* exec.c: runs one driver call of a client. */
CUresult om_exec(struct session *s, int index, const void *in, size_t in_len, void *out,
                 size_t out_cap, size_t *ret_out_len, bool posted);
/* route.c: waits for every stream of the client (its shadows' too); a posted call's error. */
CUresult om_exec_sync_client(struct session *s);
/* errors.c: a failed posted call's error, kept for its stream (the call's) or the context;
 * a recorded event of the current call's stream; a stream destroyed (its error, taken); the
 * session's end. */
void om_error_post(struct session *s, CUresult rc);
void om_error_event_recorded(struct session *s, CUevent ev);
CUresult om_error_stream_gone(struct session *s, CUstream st);
void om_errors_free(struct session *s);
/* output.c: kernel printf output printed by the driver in a session's worker, for its client. */
void om_output_init(void);                  /* at the start: each device's flush stream */
void om_output_bind(struct session *s);     /* the calling thread's session (NULL: none) */
bool om_output_pending(struct session *s);  /* in its worker: also takes stray output */
void om_output_launched(struct session *s); /* it launched: stray output is its */
/* After a wait of this thread's session: the lines of its printing kernels that are done flushed,
 * when it owns the printf buffer and some may not be (output.c). */
bool om_output_wants_flush(void);
void om_output_flush_done(void);
/* Its kernels may print (om_image_print_scan for the server's GPUs; unreadable: said once). */
bool om_output_image_prints(const void *img, size_t len);
/* Around the launch of a kernel that may print: the session becomes the print owner (after the
 * previous owner's printing kernels and their lines); then its launch on `st` is fenced. */
void om_output_print_begin(struct session *s);
void om_output_print_end(struct session *s, CUstream st, bool launched);
/* Bytes moved into out, of its stdout text (which 0) or its stderr text (1). */
size_t om_output_take(struct session *s, int which, void *out, size_t cap);
/* At the session's ending by the server (a fault): what it still keeps for its client, sent on
 * its socket as OUTPUT messages before the TERMINATED one (the client's taking call would fail). */
void om_output_deliver(struct session *s);
void om_output_free(struct session *s);
/* api/capture.c: at the session's end, ends the captures it left open (before its streams are
 * waited for). */
void om_graphs_release(struct session *s);
/* graphstate.c: graph allocations. A range allocated while capturing on `st` becomes the
 * capture graph's (false: not recorded, no memory); at the session's end (its streams waited
 * for) the allocations still recorded are freed and forgotten. */
bool om_graphmem_captured(struct session *s, CUstream st, uint64_t base, uint64_t size,
                          uint64_t pool);
void om_graphmem_session_end(struct session *s);
/* hostcb.c: the session ends (any thread): a host function waited for is given up;
 * then (its worker, after its work and graphs are gone) the records and channel are freed. */
void om_hostcb_close(struct session *s);
void om_hostcb_release(struct session *s);
/* own.c: at the session's end, destroys what is left of the handle kinds with a destroy entry. */
void om_own_release(struct session *s);
/* api/contexts.c: what cuCtxRecordEvent made for the session (its joining stream). */
void om_ctx_release(struct session *s);
/* modref.c: at the session's end, the libraries it held and its module references. */
void om_modref_release(struct session *s);
/* api/modules.c: at the session's end, its count of libraries loaded more than once. */
void om_libloads_free(struct session *s);
/* priority.c: the client priority. om_priority_counted: a session's priority went from `was`
 * to `now` (-1: none, at its start and end); om_priority_release: the session's end. */
void om_priority_init(void);
void om_priority_counted(int was, int now);
void om_priority_release(struct session *s);
/* share.c: waits for its shadow streams; ends its SM share (its shadows, its lane). */
CUresult om_share_wait(struct session *s);
void om_share_release(struct session *s);
/* api/green.c: its green contexts, after its streams are destroyed. */
void om_green_release(struct session *s);

/* budget.c: what a client, and all clients together, may make the server hold. */
struct om_budget {
    uint64_t client_pinned, server_pinned; /* bytes of pinned host memory */
    uint64_t server_stage;                 /* bytes of all sessions' staging buffers */
    uint64_t client_images, server_images; /* bytes of module images loaded */
    uint32_t client_pinned_regions, client_image_count, client_streams, client_events;
    uint32_t client_handles; /* of each other kind of api/handles.tsv */
    uint64_t server_replay;  /* bytes of all sessions' replay templates (replay.c) */
    /* From the server's limits (om_budget_limits): pinned regions of all clients (one map
     * each), and the descriptors of pooled regions the server may keep. */
    uint32_t server_pinned_regions, pinned_fds;
};
extern struct om_budget om_budget;
enum om_budget_kind {
    OM_BUDGET_PINNED,
    OM_BUDGET_STAGE,
    OM_BUDGET_IMAGES,
    OM_BUDGET_STREAMS,
    OM_BUDGET_EVENTS,
    OM_BUDGET_HANDLES,
    OM_BUDGET_KINDS
};
void om_budget_init(void); /* from the environment, once at the start */
/* The budgets that come from the server's own limits (vm.max_map_count, RLIMIT_NOFILE), less
 * what it uses: once its driver is up, before its first client. */
void om_budget_limits(void);
/* Adds n to *counter unless that passes max (atomic); false: refused, nothing changed. */
bool om_budget_take(uint64_t *counter, uint64_t n, uint64_t max);
void om_budget_give(uint64_t *counter, uint64_t n);
/* Logs the first refusal of a kind per client; returns CUDA_ERROR_OUT_OF_MEMORY. */
CUresult om_budget_refuse(struct session *s, enum om_budget_kind kind, const char *what);

/* devmem.c: device memory that can be freed without waiting for other clients. */
/* More device memory than any GPU holds (64 TiB): refused with CUDA_ERROR_OUT_OF_MEMORY, as the
 * driver refuses it, before a size is rounded (a huge count must not wrap). */
#define OM_DEVMEM_MAX_BYTES (1ull << 46)
CUresult om_devmem_alloc(int dev, uint64_t bytes, uint64_t *ret_base, uint64_t *ret_size,
                         uint64_t *ret_mem);
void om_devmem_free(uint64_t base, uint64_t size, uint64_t mem);
/* The same for a client, through its cache of freed allocations (reused by it alone). */
CUresult om_devmem_take(struct session *s, uint64_t bytes, uint64_t *ret_base, uint64_t *ret_size,
                        uint64_t *ret_mem);
void om_devmem_give(struct session *s, int dev, uint64_t base, uint64_t size, uint64_t mem);
void om_devmem_drop_cache(struct session *s);                /* at the session's end */
uint64_t om_devmem_cached(const struct session *s, int dev); /* kept for its next allocation */
bool om_devmem_release_kept(struct session *s, CUresult rc); /* after another kind's OOM */

/* poolmem.c, ipcstate.c: at the session's end, before its allocations are freed. */
void om_poolmem_session_end(struct session *s);
void om_ipc_session_end(struct session *s);
/* ipcstate.c: an event a session lets go of: true when no other session holds it through an
 * IPC handle (the caller destroys it then), false when another still does. */
bool om_ipc_event_release(uint64_t event);
/* api/vmm.c: at the session's end. */
void om_vmm_session_end(struct session *s);
/* args.c: a mask of shareable handle types the server offers (POSIX file descriptor,
 * fabric; Win32 NOT_SUPPORTED, unknown bits INVALID_VALUE). api/shareable.c: a session's end. */
CUresult om_shareable_types(uint64_t mask);
void om_shareable_session_end(struct session *s);
/* poolmem.c: cuMemFree of a client's pool memory: after its own work, on its default stream. */
CUresult om_poolmem_free(struct session *s, struct om_range *r);
/* ipcstate.c: an owned range the client frees: true when clients that opened it by an IPC handle
 * keep it alive (then ipcstate.c frees it after the last of them; the caller only forgets it). */
bool om_ipc_keep(struct session *s, const struct om_range *r);

/* imgcache.c: the user's module images on disk, loaded at the start while no kernel runs. */
void om_imgcache_init(void);
void om_imgcache_preload(void); /* with the context current, before any client */
/* An image a client loaded: written when the cache lacks it (a new one, or one trimmed or
 * removed since), otherwise marked used now. */
void om_imgcache_store(const void *bytes, size_t size, uint64_t hash);
/* The cached image of that size and first key was used now (the cache keeps the most recently
 * used): false where there is none. */
bool om_imgcache_used(size_t size, uint64_t hash);

/* account.c: per client and device, what it did (openmps stats). Hooks of the worker's paths,
 * each one line where it is called: the calling thread serves s from om_account_bind on (its
 * waits are its, wait.c); a launch (graph: an executable graph) accepted on the client's stream
 * `st` (NULL: untimed); bytes copied each way by a copy that returned rc (counted on success); a
 * record served since t0 (om_account_now; 0: a posted record, not timed). */
enum om_acct_copy { OM_ACCT_HTOD, OM_ACCT_DTOH, OM_ACCT_DTOD };
void om_account_bind(struct session *s);
void om_account_launch(struct session *s, CUstream st, bool graph);
void om_account_copy(struct session *s, enum om_acct_copy dir, uint64_t bytes, CUresult rc);
uint64_t om_account_now(void);
void om_account_served(struct session *s, uint64_t t0);
/* wait.c: a wait for the GPU begins at `now` (the wait's own clock reading; returns it, 0 off a
 * worker) and ends: `st` a stream waited for (its busy period closes, whatever the wait
 * returned), or event_done: an event found done (every stream of the session with a period open
 * is asked, without waiting). */
uint64_t om_account_wait_begin(uint64_t now);
void om_account_after_answer(bool on); /* the worker's waits are not the client's until false */
void om_account_waited(uint64_t t0, CUstream st, bool event_done);
/* Main thread: each session's rates, at most once a second; the answer to the daemon's
 * SRV_STATS_ASK `request_id` on `chan` (0 or -errno). */
void om_account_tick(struct session *sessions);
int om_account_send(int chan, struct session *sessions, uint32_t request_id);

/* warm.c: grows the driver's stream and event pools at the start, while no kernel runs. */
void om_warm_driver_pools(void);

/* replybuf.c: a worker's reply buffer of OM_REPLY_MAX bytes, pinned where the driver allows
 * it: the server's side of a client's small copies (api/copies.c). */
struct om_replybuf {
    void *p;
    bool pinned;
};
/* Plain memory where the context is not current (nothing can be pinned); .p NULL: out of
 * memory. */
struct om_replybuf om_replybuf_get(bool context_current);
void om_replybuf_put(struct om_replybuf b);
void om_replybuf_prefill(void); /* at the start, with the context current */
void om_replybuf_trim(void);    /* once no session is left: frees what is kept beyond a few */

/* hostmem.c */
/* A region of at least `bytes` for session s; *send_fd: its descriptor for the client, which
 * the caller closes once sent when *send_close (the region keeps none). */
CUresult om_hostmem_alloc(struct session *s, size_t bytes, struct om_hostmem **ret, int *send_fd,
                          bool *send_close);
/* Done with a region: reusable (the client unmapped it, or its memory is gone) or doomed. */
void om_hostmem_release(struct om_hostmem *h, bool reusable);
/* With no session left: releases the regions no client holds (pooled and doomed). */
void om_hostmem_trim(void);
/* While clients run: releases doomed regions when no client's work runs (om_idle_now). */
void om_hostmem_reap(void);
uint64_t om_hostmem_total(void); /* bytes registered now, for the server's budget */
CUresult om_hostmem_adopt(struct session *s, int fd, uint64_t client_addr, size_t len,
                          struct om_hostmem **ret);
struct om_hostmem *om_hostmem_find(struct session *s, uint64_t addr, uint64_t n);
struct om_hostmem *om_hostmem_find_device(struct session *s, uint64_t addr, uint64_t n);

/* resources.c */
/* Room for one more element in the array *v of n elements of `size` bytes (capacity *cap, the
 * first `first`, then doubling): false when memory is short. */
bool om_grow(void **v, size_t n, size_t *cap, size_t size, size_t first);
int om_handles_add(struct om_handles *h, uint64_t v);
bool om_handles_has(const struct om_handles *h, uint64_t v);
bool om_handles_remove(struct om_handles *h, uint64_t v);
void om_handles_free(struct om_handles *h);
int om_ranges_add(struct om_ranges *r, uint64_t base, uint64_t size, uint64_t mem, bool owned);
bool om_ranges_cover(const struct om_ranges *r, uint64_t addr, uint64_t len);
struct om_range *om_ranges_find_base(struct om_ranges *r, uint64_t base);
void om_ranges_remove(struct om_ranges *r, struct om_range *it);
void om_ranges_free(struct om_ranges *r);
int om_kernel_note(struct session *s, uint64_t handle, uint32_t args_size, bool prints);
int64_t om_kernel_total(const struct session *s, uint64_t handle); /* -1: not its kernel */
const struct om_kernel *om_kernel_find(const struct session *s, uint64_t handle); /* NULL: ditto */
/* The loaded images by their keys (om_image_keys of their bytes) and size. */
int om_image_lookup(uint64_t k1, uint64_t k2, size_t size, uint64_t *ret_library);
void om_image_add(uint64_t k1, uint64_t k2, size_t size, uint64_t library, bool prints);
bool om_library_prints(uint64_t library); /* its image may print (om_output_image_prints) */
/* The server's budget of loaded image bytes: taken before a new image is loaded. */
bool om_image_budget_take(size_t size);
void om_image_budget_give(size_t size);
pthread_mutex_t *om_image_load_lock(void);
/* api/linker.c: frees the records of a session's link states (destroyed by own.c). */
void om_link_forget_session(struct session *s);

/* idle.c: every client stream, to tell when none has work (nothing of clients runs). */
int om_idle_track(CUstream st);               /* -ENOMEM: the caller destroys the stream */
CUresult om_idle_stream_destroy(CUstream st); /* forgets it, then destroys it */
bool om_idle_now(void);                       /* no client stream has work (asked, not waited) */

/* memcap.c: the client's device-memory cap. om_memcap_check before an allocation of `bytes`
 * (CUDA_ERROR_OUT_OF_MEMORY past the cap), om_memcap_charge once its range is recorded in
 * s->allocs (on the session's current device), om_allocs_remove instead of
 * om_ranges_remove(&s->allocs, …) when it goes. Counted per device. */
uint64_t om_memcap_cap(const struct session *s, int dev); /* 0: none */
uint64_t om_memcap_used(const struct session *s, int dev);
uint64_t om_memcap_used_all(const struct session *s); /* on every device (ps -v) */
CUresult om_memcap_check(struct session *s, int dev, uint64_t bytes);
void om_memcap_charge(struct session *s, struct om_range *r);
/* ... charged to the device it is on, where that is not the current one (a pool's, a graph's). */
void om_memcap_charge_on(struct session *s, struct om_range *r, int dev);
void om_allocs_remove(struct session *s, struct om_range *r);
/* Memory behind a handle (a cuMemCreate allocation, an array), counted from its creation
 * (after the check) to its release or destruction; om_memcap_free at the session's end. */
CUresult om_memcap_hold(struct session *s, int dev, uint64_t handle, uint64_t size);
void om_memcap_drop(struct session *s, uint64_t handle);
void om_memcap_free(struct session *s);

/* profile.c: OPENMPS_PROFILE, a session's server time per entry point, logged as it ends. */
bool om_profile_on(void);
void om_profile_start(struct session *s);
void om_profile_add(struct session *s, int index, uint64_t ns);
void om_profile_report(struct session *s); /* and frees the profile */

/* threadsched.c: a session thread's name and time slice (OPENMPS_SERVER_SLICE_US), set by the
 * thread itself as it starts. */
void om_thread_sched_session(void);
/* wait.c: waits for a stream's or an event's work without spinning a CPU for long. */
unsigned om_wait_context_flags(void); /* the primary context's scheduling flags */
/* Whether this thread may spin now (OPENMPS_SPIN_THREADS); om_spin_give after a true. */
bool om_spin_take(void);
void om_spin_give(void);
/* Whether a busy client may spin for its completion word (syncword.c): it is one of the busy
 * clients, whose cores the count leaves them, so it takes no server thread's place. */
bool om_spin_client_may(void);
/* Whether this session thread's client is busy (it sent records lately): busy clients take
 * cores that spinning threads then leave them. */
void om_spin_client_busy(bool busy);
/* How many sessions' clients are busy now (sent records lately). */
int om_busy_clients(void);
#define OM_BUSY_IDLE_MS 2 /* a session thread that found no record for this long: not busy */
CUresult om_wait_stream(CUstream st);
/* syncword.c: completion words (OPENMPS_SYNC_WORD) */
bool om_syncword_on(void);
CUresult om_syncword_take(struct session *s, int *client_fd);
bool om_syncword_may_defer(struct session *s);
/* A synchronize asked with the word answered after the work instead, and why (for the log). */
void om_syncword_declined(struct session *s, enum om_syncword_why why);
void om_syncword_record(struct session *s); /* its next record came: its client spins no more */
/* Whether its client may still be spinning for its word: armed, not landed, no record since. */
bool om_syncword_spinning(struct session *s);
uint32_t om_syncword_arm(struct session *s, CUstream st);
void om_syncword_session_end(struct session *s);
/* The DMAs of the small copies answered before they ended, waited for (api/copies.c): before
 * any record but another small copy is served. Their error is the stream's, for the client's
 * next synchronising call on it. client_waits: the client waits for the call being served (the
 * wait is its time, for the accounting). */
void om_copy_settle(struct session *s, bool client_waits);
CUresult om_wait_event(CUevent ev);
/* From now on, this thread's waits end in the driver's own synchronize (pools settle: wait.c);
 * while on, the same for printf output to come out (a client's cuCtxSynchronize). */
void om_wait_settle_pools(void);
bool om_wait_settles_pools(void); /* this thread's waits end in a synchronize (pools) */
void om_wait_flush_output(bool on);

/* sched.c: holds an operation behind a long kernel on a shared hardware queue. */
#define OM_SCHED_MAX_QUEUES 32 /* the driver's ceiling of CUDA_DEVICE_MAX_CONNECTIONS */
void om_sched_init(void);
/* The session workers running now (fair share needs two): session.c counts them in and out
 * (om_sched_workers_add returns the count after the change). */
int om_sched_workers(void);
int om_sched_workers_add(int delta);
void om_sched_report(void); /* a line in the log: what the scheduler did */
void om_sched_stream_created(void);
void om_sched_stream_destroyed(struct session *s, CUstream st);
void om_sched_session_free(struct session *s);
/* Before an operation is enqueued on a client's stream: returns once it may go. */
void om_sched_before(struct session *s, CUstream st);
/* Whether an operation that waits for st's last kernel may be enqueued now without blocking a
 * shared hardware queue behind a long kernel (the completion word's write, which is never held:
 * syncword.c). No side effect. */
bool om_sched_may_follow(struct session *s, CUstream st);
/* After a kernel was enqueued on a client's stream. `kernel`: what its duration is learned by,
 * om_sched_key of the kernel and its grid (an executable graph: its handle). */
void om_sched_launched(struct session *s, CUstream st, uint64_t kernel);
/* A kernel's key for the durations learned: the same kernel on a grid of 8 blocks and on one of
 * 528 are two (measured: a B5 kernel of 12 ms and the same kernel's 0.3 ms probe shared one
 * average, which then called the long one short). */
static inline uint64_t om_sched_key(uint64_t kernel, uint64_t grid_xy, uint64_t grid_z)
{
    return kernel ^ ((grid_xy * 0x9e3779b97f4a7c15ull) + grid_z) * 0xff51afd7ed558ccdull;
}

/* replay.c: repeated runs of launches replayed as graphs (docs/architecture.md, "Replaying what
 * repeats"). om_replay_launch takes a launch whose stream route.c resolved (not capturing, not
 * printing, no priority attribute, no SM share) and holds it or launches it; om_replay_end ends the
 * session's run (every other record does, before its handler runs); om_replay_idle lets out
 * what is held when nothing arrived for om_replay_idle_us. */
void om_replay_init(void);
bool om_replay_enabled(void);
unsigned om_replay_idle_us(void);
bool om_replay_holding(const struct session *s);
/* A launch as the request carries it: kernel, grid and block packed, shared memory, argument
 * bytes, launch attributes (OM_LAUNCH_ATTR_BYTES each, any alignment; all om_launch_attr_plain
 * or ignored). */
struct om_replay_rec {
    uint64_t k, g, m, b;
    uint32_t smem, len, nattrs;
    const void *args, *attrs;
};
CUresult om_replay_launch(struct session *s, uint64_t handle, CUstream st,
                          const struct om_replay_rec *l);
/* Why a run ended: an entry point's index (OM_IDX_*), or one of these. */
enum {
    OM_REPLAY_BY_PRINTS = -1,  /* a launch of a kernel that may print */
    OM_REPLAY_BY_ATTRS = -2,   /* a launch with a priority attribute */
    OM_REPLAY_BY_CAPTURE = -3, /* a launch on a capturing stream */
    OM_REPLAY_BY_STREAM = -4,  /* a launch on another stream */
    OM_REPLAY_BY_OP = -5,      /* a private operation (a device change, staged bytes) */
    OM_REPLAY_BY_END = -6,     /* the session's end */
    OM_REPLAY_BY_SHARE = -7,   /* a launch sent to an SM share's shadow stream */
    OM_REPLAY_BY_KINDS = 7
};
void om_replay_end(struct session *s, int by);
void om_replay_next_stream(struct session *s, uint64_t handle);
void om_replay_idle(struct session *s);
void om_replay_session_flush(struct session *s);
void om_replay_session_end(struct session *s);

/* teardown.c: what a session holds, released in this order at its end (session.c walks it;
 * the last entry's fn is NULL). Each hook leaves its part of the session empty. */
struct om_teardown_step {
    const char *what;
    void (*fn)(struct session *s);
};
extern const struct om_teardown_step om_teardown[];
/* The core's steps of it: route.c's waits for the streams' work, ordering events and streams,
 * default streams; devmem.c's allocations and cache; hostmem.c's pinned regions; ipcstate.c's
 * events. */
void om_route_session_wait(struct session *s);
void om_route_session_end(struct session *s);
void om_route_defaults_end(struct session *s);
void om_devmem_session_end(struct session *s);
void om_hostmem_session_end(struct session *s);
void om_ipc_events_session_end(struct session *s);

/* session.c */
/* The daemon changed the server's limits: applied to every running client (session.c). */
void om_session_limits(struct server *srv, const struct om_limits *l);
/* ... one client's own limits changed (SRV_CLIENT_LIMITS, protocol 3's namespaces). */
void om_session_client_limits(struct server *srv, const struct om_srv_client_limits *c);
/* The session's calls run on its device cdev (its ordinal) from now on (OM_OP_SET_DEVICE);
 * INVALID_DEVICE where it has none. */
CUresult om_session_set_device(struct session *s, uint64_t dev);
/* ... and within the SM count of its current context (0: none; share.c). */
CUresult om_session_set_partition(struct session *s, uint64_t sms);
void om_session_adopt(struct server *srv, int fd, const struct om_srv_adopt *a);
void om_session_end(struct server *srv, struct session *s, const char *why);
/* Waits (at most timeout_ms) for the workers of ended sessions to finish freeing. */
void om_session_wait_workers(int timeout_ms);
struct session *om_session_find_fd(struct server *srv, int fd);
struct session *om_session_find_pid(struct server *srv, pid_t pid);
/* Tells the daemon a client came (OM_CLIENT_UP) or went (OM_CLIENT_DOWN). Every
 * client the daemon hands over gets exactly one UP or DOWN for its first fate. */
void om_session_report(struct server *srv, const struct session *s, uint32_t id, pid_t pid,
                       uint32_t event);
/* Tells the daemon the device memory of each client whose use changed since it last did (for
 * `ps -v`); the main thread, at least every OM_REPORT_MS. */
#define OM_REPORT_MS 250
void om_session_report_memory(struct server *srv);

#endif
