/* SPDX-License-Identifier: MIT */
/*
 * Host callbacks: what the host nodes (api/hostnodes.c) and captured host functions
 * (cuLaunchHostFunc, api/streams.c) give the driver for a client's function. The function a client
 * gives is an address in its own process: the driver gets a trampoline of the server instead, with
 * a token for a record {the client's channel, its function, its argument}. When the driver calls
 * the trampoline (on its host-callback thread), the request goes to the client through the
 * session's host-callback channel (src/common/hostcb.h) and the trampoline waits until the
 * client's thread ran the function, or until the session ends.
 *
 * Records live as long as the session (an executable graph holds the driver's copy of a host
 * node's parameters, whatever became of the node): one per distinct (function, argument) pair,
 * at most MAX_RECORDS per session. Tokens name a slot and its generation, so a call the driver
 * makes after the session ended finds no record and returns at once.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../common/clock.h"
#include "../common/hostcb.h"
#include "exec.h"

#define MAX_RECORDS 4096  /* distinct host functions of one session */
#define WAIT_SLICE_MS 100 /* a waiting trampoline looks at the session's state this often */

/* OPENMPS_HOST_FN_TIMEOUT_S (default 60; 0: none): how long the driver's host-callback thread,
 * which every client's host functions share, may wait for one client's function. Past it the
 * client's session ends (as a client that broke the protocol): a client stopped or stuck in
 * its function must not stop every other client's host nodes. */
static unsigned timeout_s(void)
{
    static unsigned v = UINT32_MAX;

    if (v == UINT32_MAX) {
        const char *e = getenv("OPENMPS_HOST_FN_TIMEOUT_S");
        char *end = NULL;
        unsigned long n = e && *e ? strtoul(e, &end, 10) : 60;
        v = end && *end ? 60 : n > 86400 ? 86400 : (unsigned)n;
    }
    return v;
}

struct om_hostch {
    int refs;   /* the session's, and one per trampoline running (under lock) */
    int closed; /* __atomic: the session ended; nothing more is asked of the client */
    int fd;
    int sock; /* a duplicate of the session's socket: shut down to end a client that hangs */
    int pid;
    struct om_hostcb_area *area;
    pthread_mutex_t mu; /* one request at a time */
    uint32_t seq;
};

struct slot {
    uint32_t gen;
    bool used;
    struct om_hostch *ch;
    uint64_t fn, data;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot *slots;
static size_t nslots;

static long futex(uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, word, op, val, ts, NULL, 0);
}

static void ch_put(struct om_hostch *ch)
{
    bool last;

    pthread_mutex_lock(&lock);
    last = --ch->refs == 0;
    pthread_mutex_unlock(&lock);
    if (!last)
        return;
    munmap(ch->area, OM_HOSTCB_BYTES);
    close(ch->fd);
    if (ch->sock >= 0)
        close(ch->sock);
    pthread_mutex_destroy(&ch->mu);
    free(ch);
}

/* Asks the client to run fn(data) and waits for it (or for the session's end). */
static void call_client(struct om_hostch *ch, uint64_t fn, uint64_t data)
{
    struct om_hostcb_area *a = ch->area;
    struct timespec slice = {0, WAIT_SLICE_MS * 1000000L};
    uint64_t start = om_mono_ns(), limit_ns = (uint64_t)timeout_s() * 1000000000ull;
    uint32_t seq;

    pthread_mutex_lock(&ch->mu);
    if (!__atomic_load_n(&ch->closed, __ATOMIC_ACQUIRE)) {
        seq = ++ch->seq;
        a->fn = fn;
        a->data = data;
        __atomic_store_n(&a->req, seq, __ATOMIC_SEQ_CST);
        futex(&a->req, FUTEX_WAKE, INT_MAX, NULL);
        /* Bounded waits: the word is in memory the client can write, and its death is seen
         * through the session (om_hostcb_close), not through the page. */
        for (;;) {
            uint32_t d = __atomic_load_n(&a->done, __ATOMIC_ACQUIRE);
            if (d == seq || __atomic_load_n(&ch->closed, __ATOMIC_ACQUIRE))
                break;
            if (limit_ns && om_mono_ns() - start >= limit_ns) {
                om_err("client %d: its host function ran past %u s "
                       "(OPENMPS_HOST_FN_TIMEOUT_S): its session ends",
                       ch->pid, timeout_s());
                __atomic_store_n(&ch->closed, 1, __ATOMIC_RELEASE);
                if (ch->sock >= 0)
                    shutdown(ch->sock, SHUT_RDWR); /* the main thread ends the session */
                break;
            }
            futex(&a->done, FUTEX_WAIT, d, &slice);
        }
    }
    pthread_mutex_unlock(&ch->mu);
}

/* The function the driver calls for every host node and captured host function of a client. */
static void trampoline(void *token)
{
    uint64_t t = (uint64_t)(uintptr_t)token, fn = 0, data = 0;
    size_t i = (size_t)(t & 0xffffffffu);
    struct om_hostch *ch = NULL;

    pthread_mutex_lock(&lock);
    if (i >= 1 && i <= nslots && slots[i - 1].used && slots[i - 1].gen == (uint32_t)(t >> 32)) {
        ch = slots[i - 1].ch;
        ch->refs++;
        fn = slots[i - 1].fn;
        data = slots[i - 1].data;
    }
    pthread_mutex_unlock(&lock);
    if (!ch)
        return; /* its session is gone */
    call_client(ch, fn, data);
    ch_put(ch);
}

/* The session's channel, made at its first host function; *made: new (its page is sent). */
static CUresult channel(struct session *s, bool *made)
{
    struct om_hostch *ch = __atomic_load_n(&s->hostch, __ATOMIC_ACQUIRE);
    int fd;
    void *map;

    *made = false;
    if (ch)
        return CUDA_SUCCESS;
    fd = memfd_create("openmps-hostcb", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    map = MAP_FAILED;
    if (ftruncate(fd, OM_HOSTCB_BYTES) == 0 &&
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0)
        map = mmap(NULL, OM_HOSTCB_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED || !(ch = calloc(1, sizeof(*ch)))) {
        if (map != MAP_FAILED)
            munmap(map, OM_HOSTCB_BYTES);
        close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    ch->refs = 1;
    ch->fd = fd;
    ch->sock = fcntl(s->sock, F_DUPFD_CLOEXEC, 0);
    ch->pid = (int)s->pid;
    ch->area = map;
    ch->area->magic = OM_HOSTCB_MAGIC;
    pthread_mutex_init(&ch->mu, NULL);
    __atomic_store_n(&s->hostch, ch, __ATOMIC_RELEASE);
    *made = true;
    return CUDA_SUCCESS;
}

/* The token of the session's record for (fn, data): the existing one, or a new one. */
static CUresult record(struct session *s, uint64_t fn, uint64_t data, uint64_t *token)
{
    struct om_hostch *ch = s->hostch;
    size_t free_slot = nslots;
    CUresult rc = CUDA_SUCCESS;

    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    for (size_t k = 0; k < s->nhostrec; k++) {
        size_t i = (size_t)(s->hostrec[k] & 0xffffffffu) - 1;
        if (slots[i].fn == fn && slots[i].data == data) {
            *token = s->hostrec[k];
            goto out;
        }
    }
    if (s->nhostrec >= MAX_RECORDS) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        client_err(s, "client %d: more than %d distinct host functions", (int)s->pid, MAX_RECORDS);
        goto out;
    }
    if (s->nhostrec == s->hostrec_cap) {
        size_t cap = s->hostrec_cap ? s->hostrec_cap * 2 : 16;
        uint64_t *v = realloc(s->hostrec, cap * sizeof(*v));
        if (!v) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            goto out;
        }
        s->hostrec = v;
        s->hostrec_cap = cap;
    }
    for (size_t i = 0; i < nslots; i++)
        if (!slots[i].used) {
            free_slot = i;
            break;
        }
    if (free_slot == nslots) {
        struct slot *v = realloc(slots, (nslots + 64) * sizeof(*v));
        if (!v) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            goto out;
        }
        memset(v + nslots, 0, 64 * sizeof(*v));
        slots = v;
        nslots += 64;
    }
    slots[free_slot].used = true;
    slots[free_slot].gen++;
    slots[free_slot].ch = ch;
    slots[free_slot].fn = fn;
    slots[free_slot].data = data;
    *token = ((uint64_t)slots[free_slot].gen << 32) | (uint64_t)(free_slot + 1);
    s->hostrec[s->nhostrec++] = *token;
out:
    pthread_mutex_unlock(&lock);
    return rc;
}

/* The client's (fn, data) of a token of this session's; false: none. */
static bool lookup(struct session *s, uint64_t token, uint64_t *fn, uint64_t *data)
{
    bool found = false;

    pthread_mutex_lock(&lock);
    for (size_t k = 0; k < s->nhostrec && !found; k++) {
        if (s->hostrec[k] == token) {
            size_t i = (size_t)(token & 0xffffffffu) - 1;
            *fn = slots[i].fn;
            *data = slots[i].data;
            found = true;
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}

void om_hostcb_close(struct session *s)
{
    struct om_hostch *ch = __atomic_load_n(&s->hostch, __ATOMIC_ACQUIRE);

    if (!ch)
        return;
    __atomic_store_n(&ch->closed, 1, __ATOMIC_RELEASE);
    futex(&ch->area->done, FUTEX_WAKE, INT_MAX, NULL);
}

void om_hostcb_release(struct session *s)
{
    struct om_hostch *ch = __atomic_load_n(&s->hostch, __ATOMIC_ACQUIRE);

    om_hostcb_close(s);
    pthread_mutex_lock(&lock);
    for (size_t k = 0; k < s->nhostrec; k++)
        slots[(size_t)(s->hostrec[k] & 0xffffffffu) - 1].used = false;
    pthread_mutex_unlock(&lock);
    free(s->hostrec);
    s->hostrec = NULL;
    s->nhostrec = s->hostrec_cap = 0;
    if (ch) {
        __atomic_store_n(&s->hostch, NULL, __ATOMIC_RELEASE);
        ch_put(ch); /* a trampoline still running holds its own reference */
    }
}

/*
 * The client's function and argument as the driver's host node parameters: the trampoline and
 * the record's token. The channel is made first; when the client asked for it (`want`), its
 * descriptor follows this call's answer.
 */
CUresult om_hostcb_params(struct call *c, uint64_t fn, uint64_t data, uint64_t want,
                          CUDA_HOST_NODE_PARAMS *p, bool *send)
{
    uint64_t token = 0;
    bool made;
    CUresult rc = channel(c->s, &made);

    if (rc == CUDA_SUCCESS)
        rc = record(c->s, fn, data, &token);
    if (rc != CUDA_SUCCESS)
        return rc;
    p->fn = trampoline;
    p->userData = (void *)(uintptr_t)token;
    *send = want != 0;
    return CUDA_SUCCESS;
}

void om_hostcb_send_channel(struct call *c, bool send)
{
    om_put_u64(&c->out, send ? 1 : 0);
    if (send) {
        c->s->send_fd_after = c->s->hostch->fd;
        c->s->send_fd_close = false;
    }
}

bool om_hostcb_lookup(struct session *s, const CUDA_HOST_NODE_PARAMS *p, uint64_t *fn,
                      uint64_t *data)
{
    return p->fn == trampoline && lookup(s, (uint64_t)(uintptr_t)p->userData, fn, data);
}
