/* SPDX-License-Identifier: MIT */
/* Client sessions in the server: the handshake, the command ring, and freeing everything. */
#define _GNU_SOURCE
#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../common/clock.h"
#include "../common/config.h"
#include "../common/log.h"
#include "../common/msg.h"
#include "../common/sock.h"
#include "openmps/ops.h"

/* The client's calls run on device `dev` from now on: that device's context is made current on
 * its worker, and its default stream there becomes the one route.c uses. */
CUresult om_session_set_device(struct session *s, uint64_t cdev)
{
    int dev = om_dev_in(s, cdev); /* its ordinal, the server's device */
    CUresult rc;

    if (dev < 0) {
        client_err(s, "client %d: asked for device %llu; it sees %u", (int)s->pid,
                   (unsigned long long)cdev, s->devmap.count);
        return CUDA_ERROR_INVALID_DEVICE;
    }
    if (dev == s->dev)
        return CUDA_SUCCESS;
    if ((rc = om_server_bind_device(dev)) != CUDA_SUCCESS)
        return rc;
    s->default_streams[s->dev] = s->default_stream;
    s->default_stream = s->default_streams[dev];
    s->default_streams[dev] = NULL;     /* kept in default_stream while current */
    s->blockings[s->dev] = s->blocking; /* its blocking streams there, the same way */
    s->blocking = s->blockings[dev];
    memset(&s->blockings[dev], 0, sizeof(s->blockings[dev]));
    s->shares[s->dev] = s->share; /* share.c: its SM share there, the same way */
    s->share = s->shares[dev];
    s->shares[dev] = NULL;
    s->dev = dev;
    om_share_sms_changed(s); /* its share there may differ */
    /* a device it only passed through (the runtime's first calls run on device 0 before the
     * program's cudaSetDevice) is not one it used */
    __atomic_store_n(&s->device_mask, s->worked_mask | 1ull << dev, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

/* The SM count of the client's current context (0: none), for its next launches (share.c):
 * at most the device's. */
CUresult om_session_set_partition(struct session *s, uint64_t sms)
{
    unsigned total = om_share_sm_count(s->dev, 0);

    if (sms > 0xffff || (total && sms > total)) {
        client_err(s, "client %d: a context partition of %llu SMs; device %d has %u", (int)s->pid,
                   (unsigned long long)sms, s->dev, total);
        return CUDA_ERROR_INVALID_VALUE;
    }
    __atomic_store_n(&s->ctx_sms, (uint32_t)sms, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

/* Tells the daemon a client came or went. */
void om_session_report(struct server *srv, const struct session *s, uint32_t id, pid_t pid,
                       uint32_t event)
{
    /* A client starts on its first device (a session's, for OM_CLIENT_UP); the devices it moves
     * to follow (om_session_report_memory). */
    struct om_srv_client m = {.client_id = id, .pid = (uint32_t)pid, .event = event};

    /* its first device, from its map: the worker may have moved it already (not read here) */
    if (event == OM_CLIENT_UP && s) {
        int first = om_first_device(s);
        m.device_mask = first < 32 ? 1u << first : 0;
    }
    if (event == OM_CLIENT_DOWN && s) /* what it held as it left (memacct's audit log) */
        m.device_bytes = om_memcap_used_all(s);

    if (om_msg_send(srv->chan, OM_MSG_SRV_CLIENT, 0, &m, sizeof(m), -1) < 0)
        om_warn("cannot tell the daemon about client %d", (int)pid);
}

void om_session_report_memory(struct server *srv)
{
    for (struct session *s = srv->sessions; s; s = s->next) {
        uint64_t now = om_memcap_used_all(s);
        uint32_t mask = (uint32_t)__atomic_load_n(&s->device_mask, __ATOMIC_RELAXED);
        struct om_srv_client m = {.client_id = s->id,
                                  .pid = (uint32_t)s->pid,
                                  .event = OM_CLIENT_MEMORY,
                                  .device_mask = mask,
                                  .device_bytes = now};
        if (now == s->reported_bytes && mask == s->reported_mask)
            continue;
        if (om_msg_send(srv->chan, OM_MSG_SRV_CLIENT, 0, &m, sizeof(m), -1) < 0)
            return; /* the daemon is gone or full: the next look tries again */
        s->reported_bytes = now;
        s->reported_mask = mask;
    }
}

/* Bytes of every session's staging buffer, under the server's budget (budget.c). */
static uint64_t stage_total;

static void stage_drop(struct session *s)
{
    free(s->stage);
    om_budget_give(&stage_total, s->stage_cap);
    s->stage = NULL;
    s->stage_cap = 0;
}

/*
 * The staging buffer: bytes a client sends ahead of the call that uses them (a module image, a
 * 2D copy's rows). When they cannot all be kept (more than one call may stage, or the server's
 * budget for staging is spent, or memory is out), the rest of the sequence is dropped and
 * stage_error tells the call that uses it why: the session goes on.
 */
static void stage(struct session *s, const struct om_rec *rec, const uint8_t *payload)
{
    if (rec->op == OM_OP_STAGE_RESET) {
        s->stage_len = 0;
        s->stage_error = CUDA_SUCCESS;
        if (s->stage_cap > (64u << 20)) /* a big copy's buffer is not kept */
            stage_drop(s);
        return;
    }
    if (s->stage_error != CUDA_SUCCESS || rec->len == 0)
        return; /* an error already, or nothing to add (the buffer may not exist yet) */
    if (rec->len > OM_STAGE_MAX - s->stage_len) {
        /* The client splits big copies, so only a misbehaving one gets here. */
        s->stage_error = CUDA_ERROR_INVALID_VALUE;
        return;
    }
    if (s->stage_len + rec->len > s->stage_cap) {
        size_t cap = s->stage_cap ? s->stage_cap : 1u << 20;
        uint8_t *nb;
        while (cap < s->stage_len + rec->len)
            cap *= 2;
        if (!om_budget_take(&stage_total, cap - s->stage_cap, om_budget.server_stage)) {
            /* the call fails: what it staged so far goes back to the budget now */
            stage_drop(s);
            s->stage_len = 0;
            s->stage_error = om_budget_refuse(s, OM_BUDGET_STAGE, "staging a call's bytes");
            return;
        }
        nb = realloc(s->stage, cap);
        if (!nb) {
            om_budget_give(&stage_total, cap - s->stage_cap);
            om_err("client %d: no memory for %zu staged bytes", (int)s->pid, cap);
            stage_drop(s);
            s->stage_len = 0;
            s->stage_error = CUDA_ERROR_OUT_OF_MEMORY;
            return;
        }
        s->stage = nb;
        s->stage_cap = cap;
    }
    memcpy(s->stage + s->stage_len, payload, rec->len);
    s->stage_len += rec->len;
}

/* Serves one record. Returns 0, or -EPROTO to end the session. */
static int serve(struct session *s, const struct om_rec *rec, const uint8_t *payload, uint8_t *out)
{
    struct om_rec reply = {.op = rec->op, .seq = rec->seq};
    const void *reply_payload = payload;
    int rc_fd = -1;
    bool rc_fd_close = false;

    /* Any record but a launch ends the session's run of launches, so that what replay.c holds
     * goes to the GPU before this call does anything (launches decide in api/launch.c). */
    if (s->replay && rec->op != OM_OP_ENTRY_BASE + OM_IDX_cuLaunchKernel &&
        rec->op != OM_OP_ENTRY_BASE + OM_IDX_cuLaunchKernelEx && rec->op != OM_OP_PING)
        om_replay_end(s, rec->op >= OM_OP_ENTRY_BASE ? (int)(rec->op - OM_OP_ENTRY_BASE)
                                                     : OM_REPLAY_BY_OP);
    /* So are the DMAs of small copies answered before they ended, but before another small
     * copy (entry points: om_exec; a ping touches no stream). */
    if (rec->op < OM_OP_ENTRY_BASE && rec->op != OM_OP_PING)
        om_copy_settle(s, !(rec->flags & OM_REC_POSTED));
    if (rec->op < OM_OP_ENTRY_BASE)
        om_syncword_record(s); /* entry points: om_exec */
    switch (rec->op) {
    case OM_OP_PING: reply.len = rec->len; break;
    case OM_OP_GOODBYE: return -ECONNRESET;
    case OM_OP_STAGE_RESET:
    case OM_OP_STAGE_APPEND: stage(s, rec, payload); return 0;
    case OM_OP_SET_DEVICE: { /* posted: u64 the client's ordinal[, u64 the context's SMs] */
        uint64_t v[2] = {UINT64_MAX, 0};
        CUresult drc;
        if (rec->len == 8 || rec->len == 16)
            memcpy(v, payload, rec->len);
        drc = om_session_set_device(s, v[0]);
        if (drc == CUDA_SUCCESS)
            drc = om_session_set_partition(s, v[1]);
        if (drc != CUDA_SUCCESS && s->async_error == CUDA_SUCCESS)
            s->async_error = drc; /* reported at its next synchronising call */
        return 0;
    }
    case OM_OP_TAKE_OUTPUT: { /* payload: u64 the room of the client's buffer, u64 which */
        uint64_t v[2] = {0, 0};
        if (rec->len == 8 || rec->len == 16)
            memcpy(v, payload, rec->len);
        reply.len =
            (uint32_t)om_output_take(s, v[1] == 1, out, v[0] < OM_REPLY_MAX ? v[0] : OM_REPLY_MAX);
        reply_payload = out;
        break;
    }
    case OM_OP_NOTE_UNSUPPORTED: {
        uint64_t index = 0;
        if (rec->len == sizeof(index))
            memcpy(&index, payload, sizeof(index));
        /* Once per entry per session: the shim sends each note once, another program may
         * send it in a loop (server.log is every user's). */
        uint8_t bit = (uint8_t)(1u << (index % 8));
        if (rec->len == sizeof(index) && index < OM_ENTRY_COUNT &&
            !(s->noted_unsupported[index / 8] & bit)) {
            s->noted_unsupported[index / 8] |= bit;
            om_info("client %d called %s, which openmps does not support yet "
                    "(CUDA_ERROR_NOT_SUPPORTED)",
                    (int)s->pid, om_server_entry_name((int)index));
        }
        if (rec->flags & OM_REC_POSTED)
            return 0;
        reply.len = 0; /* answered, so the line is written before the client goes on */
        break;
    }
    default:
        if (rec->op >= OM_OP_ENTRY_BASE && rec->op < OM_OP_ENTRY_BASE + OM_HANDLER_COUNT) {
            size_t out_len = 0;
            bool posted = rec->flags & OM_REC_POSTED;
            uint64_t t0 = om_log_level_current >= OM_LOG_DEBUG ? (om_mono_ns() / 1000) : 0;
            uint64_t p0 = s->profile ? om_mono_ns() : 0;
            reply.status = om_exec(s, rec->op - OM_OP_ENTRY_BASE, payload, rec->len, out,
                                   OM_REPLY_MAX, &out_len, posted);
            if (p0)
                om_profile_add(s, rec->op - OM_OP_ENTRY_BASE, om_mono_ns() - p0);
            /* At debug level, every call's start and length: a timeline of what each client
             * put on the GPU when, for questions the benchmarks' figures do not answer. */
            if (t0)
                om_debug("timeline client %d %s start_us %llu took_us %llu rc %d", (int)s->pid,
                         om_server_entry_name(rec->op - OM_OP_ENTRY_BASE), (unsigned long long)t0,
                         (unsigned long long)((om_mono_ns() / 1000) - t0), (int)reply.status);
            if (posted)
                return 0;
            reply.len = (uint32_t)out_len;
            reply_payload = out;
            rc_fd = s->send_fd_after;
            rc_fd_close = s->send_fd_close;
            s->send_fd_after = -1;
            s->send_fd_close = false;
            break;
        }
        om_err("client %d sent unknown operation %u; closing its session", (int)s->pid, rec->op);
        return -EPROTO;
    }
    pid_t fault_pid;
    if (om_server_fault_code(&fault_pid))
        reply.flags |= OM_REC_ENDING; /* the main loop ends every session; output comes then */
    else if (om_output_pending(s))
        reply.flags |= OM_REC_OUTPUT;
    for (;;) {
        int rc = om_ring_send(&s->tx, &reply, reply_payload);
        if (rc == 0) {
            /* A descriptor that belongs to this answer follows it on the socket. */
            if (rc_fd >= 0) {
                uint64_t len = 0;
                om_msg_send(s->sock, OM_MSG_HOST_MEM, 0, &len, sizeof(len), rc_fd);
            }
            if (rc_fd_close)
                close(rc_fd);
            return 0;
        }
        if (rc != -EAGAIN) {
            om_err("client %d corrupted its completion ring (%s); closing its session", (int)s->pid,
                   strerror(-rc));
            if (rc_fd_close)
                close(rc_fd);
            return -EPROTO;
        }
        /* Bounded waits: the doorbell is in memory the client can scribble on,
         * so a stop request must not depend on it waking us. */
        om_ring_wait_space(&s->tx, reply.len, OM_SESSION_POLL_MS, &s->stop);
        if (__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
            if (rc_fd_close)
                close(rc_fd);
            return -ECONNRESET;
        }
    }
}

static void session_destroy(struct session *s);

/* Workers still freeing a session: the server waits for them before it exits. */
void om_session_wait_workers(int timeout_ms)
{
    for (int waited = 0; om_sched_workers() && waited < timeout_ms; waited += 10)
        usleep(10000);
}

/*
 * Everything the client held on the GPU, freed by its worker (which has the
 * context current) when the session ends, however it ended. Its own work is
 * waited for first: unmapping memory under a running kernel would fault the
 * context every client shares. The GPU's part goes in the order of the teardown table
 * (teardown.c); then what the session itself holds.
 */
static void release_gpu_resources(struct session *s)
{
    om_copy_settle(s, false); /* its copy slots are its reply buffer's, which outlives it */
    for (const struct om_teardown_step *t = om_teardown; t->fn; t++)
        t->fn(s);
    if (s->allocs.n || s->own[OM_H_STREAM].n || s->own[OM_H_EVENT].n || s->nhostmem)
        om_info("client %d: freed %zu allocation(s), %zu stream(s), %zu event(s), %zu pinned "
                "region(s)",
                (int)s->pid, s->allocs.n, s->own[OM_H_STREAM].n, s->own[OM_H_EVENT].n, s->nhostmem);
    s->nhostmem = s->hostmem_cap = 0;
    om_handles_free(&s->print_execs);
    om_handles_free(&s->own[OM_H_EVENT]);
    om_handles_free(&s->own[OM_H_STREAM]);
    om_handles_free(&s->touched);
    om_handles_free(&s->own[OM_H_LIBRARY]); /* the images stay loaded for the next client */
    om_libloads_free(s);
    om_output_free(s);
    om_errors_free(s);
    om_ranges_free(&s->allocs);
    s->default_stream = NULL;
    free(s->kernels);
    s->kernels = NULL;
    s->nkernels = s->kernels_cap = 0;
    stage_drop(s);
    s->stage_len = 0;
}

/*
 * The worker's wait for its client's next record, the one place where a session's thread gives
 * up its core: it spins 50 µs first when wait.c allows (cores are left for the busy clients),
 * then sleeps until a record wakes it. A client that sent no record for OM_BUSY_IDLE_MS is no
 * longer busy; while the client spins for its completion word (syncword.c), the thread does
 * not spin and the client stays busy: its next record comes only after the word lands. (Napping in
 * slices, with the client's posted records waking nobody, was tried and measured: no gain in B7 at
 * 8, 16 or 32 copies, docs/benchmarks.md.)
 */
static void wait_record(struct session *s, bool *busy)
{
    bool word = om_syncword_spinning(s); /* its client spins for its word: no record before */
    bool spin = !word && om_spin_take();

    if (om_replay_holding(s)) {
        /* Launches held for a graph (replay.c) wait for the rest of their chunk this long at
         * most, then go out as they are. */
        unsigned us = om_replay_idle_us();
        if (om_ring_wait_data_us(&s->rx, us, spin ? (us < 50 ? us : 50) : 0, &s->stop) ==
            -ETIMEDOUT)
            om_replay_idle(s);
        if (spin)
            om_spin_give();
        return;
    }
    int waited = om_ring_wait_data(&s->rx, *busy ? OM_BUSY_IDLE_MS : OM_SESSION_POLL_MS,
                                   spin ? 50 : 0, &s->stop);

    if (spin)
        om_spin_give();
    if (waited == -ETIMEDOUT && *busy && !word)
        om_spin_client_busy(*busy = false);
    s->waits++;
}

static void *worker_main(void *arg)
{
    struct session *s = arg;
    uint8_t *buf = malloc(OM_REC_MAX_PAYLOAD), *out;
    struct om_replybuf reply;
    bool busy = false; /* the client sent records lately (wait.c: spinning leaves it a core) */

    /* Its default stream counts for the scheduler from now on, though the stream itself is
     * made at its first use: clients that start together are all counted before they launch. */
    om_sched_stream_created();
    om_thread_sched_session();
    om_profile_start(s);
    om_account_bind(s); /* account.c: this thread's waits are its */
    /* The client's work runs in the server's context, on this thread; what the driver prints
     * here (kernel printf) is the client's (output.c). */
    om_output_bind(s);
    bool bound = om_server_bind_device(s->dev) == CUDA_SUCCESS; /* its first device */
    if (!bound)
        om_err("client %d: cannot make the server context current", (int)s->pid);
    reply = om_replybuf_get(bound); /* pinned, in that context: replybuf.c says why */
    out = reply.p;
    if (out && reply.pinned) /* small copies' DMAs read them (api/copies.c) */
        s->copy_slots = (uint8_t *)out + OM_REPLY_MAX;
    if (!buf || !out) {
        /* Ended like a protocol error, and freed below like any session. */
        __atomic_store_n(&s->failed, 1, __ATOMIC_RELEASE);
        shutdown(s->sock, SHUT_RDWR);
        while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE))
            usleep(10000);
    }
    while (buf && out && !__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        struct om_rec rec;
        int rc = om_ring_recv(&s->rx, &rec, buf, OM_REC_MAX_PAYLOAD);
        if (rc == -EAGAIN) {
            wait_record(s, &busy);
            continue;
        }
        if (!busy)
            om_spin_client_busy(busy = true);
        if (rc < 0) {
            om_err("client %d sent a malformed record (%s); closing its session", (int)s->pid,
                   strerror(-rc));
            rc = -EPROTO;
        } else {
            uint64_t t0 = rec.flags & OM_REC_POSTED ? 0 : om_account_now(); /* a call waited on */
            __atomic_store_n(&s->calls, s->calls + 1, __ATOMIC_RELAXED); /* the main thread reads */
            s->answered += !(rec.flags & OM_REC_POSTED);
            rc = serve(s, &rec, buf, out);
            om_account_served(s, t0); /* answered: what follows is not the client's wait */
        }
        if (rc < 0) {
            if (rc == -EPROTO)
                __atomic_store_n(&s->failed, 1, __ATOMIC_RELEASE);
            /* The main thread notices the hang-up and ends the session; this
             * thread waits for that, then frees it. */
            shutdown(s->sock, SHUT_RDWR);
            while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE))
                usleep(10000);
            break;
        }
    }
    om_spin_client_busy(false);
    free(buf);
    /*
     * The session is this thread's alone now (the main thread unlinked it and
     * never waits for it): waiting for the client's own GPU work here stalls
     * nobody else, however long that work runs.
     */
    om_profile_report(s);
    release_gpu_resources(s);
    om_replybuf_put(reply); /* after the client's streams are done with it */
    om_log_session(OM_LOG_INFO,
                   "Client %d disconnected (%s; %llu call(s) served, %llu answered; %u client(s) "
                   "left)",
                   (int)s->pid,
                   __atomic_load_n(&s->failed, __ATOMIC_ACQUIRE) ? "protocol error" : s->end_reason,
                   (unsigned long long)s->calls, (unsigned long long)s->answered, s->left_after);
    session_destroy(s);
    if (om_sched_workers_add(-1) == 0) {
        /* No client's kernel runs now (a new client may start one: rare, and it then waits once
         * for a release that waits for every kernel). */
        om_replybuf_trim();
        om_hostmem_trim();
        malloc_trim(0); /* the sessions' freed heap, spread over worker threads' arenas */
    }
    return NULL;
}

static void session_destroy(struct session *s)
{
    if (s->ring_map)
        munmap(s->ring_map, s->ring_len);
    if (s->ring_fd >= 0)
        close(s->ring_fd);
    if (s->sock >= 0)
        close(s->sock);
    om_memcap_free(s);
    free(s);
}

static void log_limits(const struct session *s)
{
    char pct[16], size[32];

    if (s->limits.active_thread_pct_milli) {
        om_format_percentage(s->limits.active_thread_pct_milli, pct, sizeof(pct));
        om_info("client %d: active thread percentage %s", (int)s->pid, pct);
    }
    for (uint32_t i = 0; i < s->limits.ndevices; i++) {
        if (!s->limits.mem_limit[i])
            continue;
        om_format_size(s->limits.mem_limit[i], size, sizeof(size));
        om_info("client %d: device %u pinned memory limit %s", (int)s->pid, i, size);
    }
    if (s->limits.priority)
        om_info("client %d: priority %u (below normal)", (int)s->pid, s->limits.priority);
}

/* A running client's limits become the server's `l` merged with what it asked for itself (its
 * environment, its namespace: s->want). The worker reads them as it goes: the SM share at its
 * next launch (share.c), the memory cap at its next allocation and memory query (memcap.c). A cap
 * lowered below what the client holds takes nothing back: its next allocations are refused until
 * it is under the cap again, and cuMemGetInfo answers the new total with nothing free. Every
 * value is stored before any line is logged: a line in server.log means the whole change is the
 * client's (a program that waits for the line, then looks, sees it). */
static void session_relimit(struct session *s, const struct om_limits *l)
{
    struct om_limits n = om_limits_merge(l, &s->want), *o = &s->limits, was = *o;
    char a[16], b[16];

    if (n.active_thread_pct_milli != was.active_thread_pct_milli) {
        __atomic_store_n(&o->active_thread_pct_milli, n.active_thread_pct_milli, __ATOMIC_RELAXED);
        om_share_sms_changed(s);
    }
    for (uint32_t i = 0; i < OM_MAX_DEVICES; i++) {
        uint64_t now = i < n.ndevices ? n.mem_limit[i] : 0;
        if ((i < was.ndevices ? was.mem_limit[i] : 0) != now)
            __atomic_store_n(&o->mem_limit[i], now, __ATOMIC_RELAXED);
    }
    if (n.ndevices > was.ndevices)
        __atomic_store_n(&o->ndevices, n.ndevices, __ATOMIC_RELAXED);
    if (n.priority != was.priority) {
        om_priority_counted((int)was.priority, (int)n.priority);
        __atomic_store_n(&o->priority, n.priority, __ATOMIC_RELAXED);
    }

    if (n.active_thread_pct_milli != was.active_thread_pct_milli) {
        om_format_percentage(was.active_thread_pct_milli ? was.active_thread_pct_milli : 100000, a,
                             sizeof(a));
        om_format_percentage(n.active_thread_pct_milli ? n.active_thread_pct_milli : 100000, b,
                             sizeof(b));
        om_info("client %d: active thread percentage %s -> %s (from its next launch)", (int)s->pid,
                a, b);
    }
    for (uint32_t i = 0; i < OM_MAX_DEVICES; i++) {
        uint64_t before = i < was.ndevices ? was.mem_limit[i] : 0;
        uint64_t now = i < n.ndevices ? n.mem_limit[i] : 0;
        if (before == now)
            continue;
        om_format_size(before, a, sizeof(a));
        om_format_size(now, b, sizeof(b));
        om_info("client %d: device %u pinned memory limit %s -> %s", (int)s->pid, i,
                before ? a : "none", now ? b : "none");
    }
    if (n.priority != was.priority)
        om_info("client %d: priority %u -> %u (the SM reserve at once, stream priorities for "
                "the streams it creates from now on)",
                (int)s->pid, was.priority, n.priority);
}

/* The daemon changed the server's limits: each running client's follow. */
void om_session_limits(struct server *srv, const struct om_limits *l)
{
    for (struct session *s = srv->sessions; s; s = s->next)
        session_relimit(s, l);
}

void om_session_client_limits(struct server *srv, const struct om_srv_client_limits *c)
{
    for (struct session *s = srv->sessions; s; s = s->next) {
        if (s->id != c->client_id)
            continue;
        s->want = c->want;
        session_relimit(s, &srv->limits);
        return;
    }
    /* gone meanwhile (or refused at its adoption): nothing to change */
    om_debug("limits for client %u, which has no session here: ignored", c->client_id);
}

/* Takes ownership of fd whatever happens. */
void om_session_adopt(struct server *srv, int fd, const struct om_srv_adopt *a)
{
    struct om_welcome w = {0};
    struct om_ring_geometry geo;
    struct session *s;
    pid_t pid;
    uid_t uid;
    int rc;

    s = calloc(1, sizeof(*s));
    if (!s) {
        close(fd);
        om_session_report(srv, NULL, a->client_id, (pid_t)a->pid, OM_CLIENT_DOWN);
        return;
    }
    s->id = a->client_id;
    s->pid = (pid_t)a->pid;
    s->uid = (uid_t)a->uid;
    s->sock = fd;
    s->ring_fd = -1;
    s->send_fd_after = -1;
    s->limits = a->limits;
    s->want = a->want;
    s->devmap = a->devmap;       /* checked against the server's devices (om_decode_adopt) */
    s->part = a->part;           /* -S: its device is the devmap's only one (the daemon's) */
    s->dev = om_first_device(s); /* its device 0: its calls start there */
    s->device_mask = 1ull << s->dev;
    fcntl(fd, F_SETFL, O_NONBLOCK);
    /* The daemon vouches for the client, but the socket is the client's
     * own: its credentials must be the ones the daemon named, of this server's user (or, in a
     * multi-user server, of one of the users it was started for). */
    bool user_ok = s->uid == srv->uid;
    for (unsigned i = 0; i < srv->n_shared; i++)
        user_ok |= s->uid == srv->shared[i];
    if (om_sock_peercred(fd, &pid, &uid, NULL) < 0 || pid != s->pid || uid != s->uid || !user_ok) {
        om_err("refusing client %u: its socket belongs to pid %d uid %u, not pid %d uid %u", s->id,
               (int)pid, (unsigned)uid, (int)s->pid, (unsigned)s->uid);
        om_msg_send_text(fd, OM_MSG_REFUSE, 0, "openmps-server: credentials do not match");
        goto fail;
    }
    if (srv->stopping) {
        om_msg_send_text(fd, OM_MSG_REFUSE, 0, "openmps-server: the server is shutting down");
        goto fail;
    }
    rc = om_ring_create(OM_SERVER_RING_BYTES, &s->ring_fd, &s->ring_map, &s->ring_len, &geo);
    if (rc < 0) {
        om_err("client %d: cannot create its ring: %s", (int)s->pid, strerror(-rc));
        om_msg_send_text(fd, OM_MSG_REFUSE, 0, "openmps-server: cannot create the command ring");
        goto fail;
    }
    om_ring_ends(s->ring_map, &geo, true, &s->tx, &s->rx);
    /* not 0, which a shim's empty cache holds (a shim that forked keeps its parent's) */
    ((struct om_ring_header *)s->ring_map)->limits_epoch = (uint32_t)om_mono_ns() | 1;
    if (pthread_create(&s->worker, NULL, worker_main, s) != 0) {
        om_err("client %d: cannot start its worker thread", (int)s->pid);
        goto fail;
    }
    s->worker_started = true;
    om_sched_workers_add(1);
    pthread_detach(s->worker);
    w.server_pid = (uint32_t)getpid();
    w.client_id = s->id;
    w.ring_bytes = (uint32_t)s->ring_len;
    w.ndevices = s->devmap.count;
    /* The daemon hears of the client before the client hears of its session: whatever the
     * client's program does once it runs (a job script's `ps`, a scrape of the metrics) finds it
     * there with its device. A handshake that fails from here reports it down (fail:). */
    om_session_report(srv, s, s->id, s->pid, OM_CLIENT_UP);
    rc = om_msg_send(fd, OM_MSG_WELCOME, 0, &w, sizeof(w), s->ring_fd);
    if (rc < 0) {
        om_info("client %d left during its handshake (%s)", (int)s->pid, strerror(-rc));
        goto fail;
    }
    /* The mapping keeps the memory; one descriptor per session is enough. */
    close(s->ring_fd);
    s->ring_fd = -1;
    s->next = srv->sessions;
    srv->sessions = s;
    srv->nsessions++;
    om_log_session(OM_LOG_INFO, "Client %d connected (client id %u, %u client(s))", (int)s->pid,
                   s->id, srv->nsessions);
    log_limits(s);
    om_priority_counted(-1, (int)s->limits.priority); /* priority.c: clients of each priority */
    return;
fail:
    om_session_report(srv, s, s->id, s->pid, OM_CLIENT_DOWN);
    if (s->worker_started) {
        snprintf(s->end_reason, sizeof(s->end_reason), "its handshake failed");
        om_ring_kick(s->rx.q);
        __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE); /* last touch: the worker frees it */
    } else {
        session_destroy(s);
    }
}

void om_session_end(struct server *srv, struct session *s, const char *why)
{
    for (struct session **pp = &srv->sessions; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    }
    om_priority_counted((int)__atomic_load_n(&s->limits.priority, __ATOMIC_RELAXED), -1);
    srv->nsessions--;
    om_session_report(srv, s, s->id, s->pid, OM_CLIENT_DOWN);
    snprintf(s->end_reason, sizeof(s->end_reason), "%s", why);
    s->left_after = srv->nsessions;
    if (!s->worker_started) {
        om_log_session(OM_LOG_INFO, "Client %d disconnected (%s)", (int)s->pid, why);
        session_destroy(s);
        return;
    }
    /* The worker frees the session once its own GPU work is done: the main
     * thread never waits for a client's kernels. The kicks come before the
     * stop flag: once the flag is set, the session may be gone at any moment
     * (the worker notices the flag within OM_SESSION_POLL_MS either way). */
    om_ring_kick(s->rx.q);
    om_ring_kick(s->tx.q);
    om_hostcb_close(s); /* a trampoline waiting for this client returns */
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
}

struct session *om_session_find_fd(struct server *srv, int fd)
{
    for (struct session *s = srv->sessions; s; s = s->next)
        if (s->sock == fd)
            return s;
    return NULL;
}

struct session *om_session_find_pid(struct server *srv, pid_t pid)
{
    for (struct session *s = srv->sessions; s; s = s->next)
        if (s->pid == pid)
            return s;
    return NULL;
}
