/* SPDX-License-Identifier: MIT */
/* Completion words: a page per session that the GPU writes behind a client's work and the
 * client reads, so that a synchronize needs no answer when the work ends (issue #23). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/log.h"
#include "internal.h"

/*
 * A framework's batch ends in a synchronize; answered by the session's thread, it costs two
 * wake-ups once the GPU is done (the thread's, asleep in the driver after its polls, then the
 * client's, asleep on its ring), and in a burst of another process each can wait milliseconds
 * for a core (B8, docs/architecture.md, "What a launch costs the server"). So (unless
 * OPENMPS_SYNC_WORD=off) a client's cuCtxSynchronize whose work is on one stream of it is
 * answered at once with a number N, after the server enqueued cuStreamWriteValue32(N) of the
 * session's word behind that work; the client spins on the word, as a native program's
 * synchronize spins on the driver's own semaphore (src/client/api/contexts.c).
 *
 * The word is the first 4 bytes of a page of its own: a memfd page mapped here, registered with
 * the driver (cuMemHostRegister does not wait for running kernels; unregistering would, so
 * pages are never unregistered: a page whose session ended goes to a pool for the next, and
 * there are never more pages than sessions at once). The client gets the page read-only: a
 * descriptor reopened O_RDONLY, of a memfd sealed against writes through any new mapping
 * (F_SEAL_FUTURE_WRITE), so that it cannot write a word, its own or, through a descriptor kept
 * from an earlier session, another's; and a page only ever serves sessions of one user (a
 * multi-user server's users do not see each other's synchronizes). A page goes back to the pool
 * only once the last word armed on it has landed; one whose write is still pending (its client
 * died waiting, its stream still busy) waits on a list of its own until then. Values only grow
 * within a session; a page taken again starts at 0 with its new session.
 */
struct om_syncword {
    volatile uint32_t *word; /* the page, mapped here */
    CUdeviceptr dev;         /* its address for the GPU */
    int fd;                  /* the memfd, kept to hand the page to the next session */
    uid_t uid;               /* the user whose sessions it serves */
    uint32_t last;           /* pending: the value its last write brings */
    struct om_syncword *next;
};

static struct om_syncword *pool, *pending;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static int setting = -1; /* OPENMPS_SYNC_WORD: 1 on (the default), 0 off; -1: not read yet */

#define R(sym) om_server_real[OM_IDX_##sym]
#define REGISTER_PORTABLE_DEVICEMAP 0x03u /* CU_MEMHOSTREGISTER_PORTABLE | _DEVICEMAP (cuda.h) */

bool om_syncword_on(void)
{
    if (__atomic_load_n(&setting, __ATOMIC_RELAXED) < 0) {
        const char *v = getenv("OPENMPS_SYNC_WORD");
        int on = 1;
        if (v && (!strcasecmp(v, "off") || !strcasecmp(v, "no") || !strcasecmp(v, "false") ||
                  !strcmp(v, "0")))
            on = 0;
        else if (v && *v && strcasecmp(v, "on") && strcasecmp(v, "yes") && strcasecmp(v, "true") &&
                 strcmp(v, "1"))
            om_warn("OPENMPS_SYNC_WORD=%s is not on or off: on, the default", v);
        om_info(on ? "synchronizes answered by a completion word the GPU writes (the default; "
                     "OPENMPS_SYNC_WORD=off answers them after the work)"
                   : "synchronizes answered after the work (OPENMPS_SYNC_WORD=off)");
        __atomic_store_n(&setting, on, __ATOMIC_RELAXED);
    }
    return __atomic_load_n(&setting, __ATOMIC_RELAXED) == 1;
}

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010 /* Linux 5.1 (linux/fcntl.h) */
#endif

static struct om_syncword *page_new(uid_t uid)
{
    struct om_syncword *w = calloc(1, sizeof(*w));
    long page = sysconf(_SC_PAGESIZE);
    void *p = MAP_FAILED;
    bool registered = false;
    CUresult rc;

    if (!w)
        return NULL;
    w->fd = memfd_create("openmps-syncword", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (w->fd < 0 || ftruncate(w->fd, page) < 0 ||
        (p = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED, w->fd, 0)) ==
            MAP_FAILED ||
        /* this mapping stays writable; none made from the descriptor can be */
        fcntl(w->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) <
            0) {
        om_warn("completion word: cannot make its page (%s): synchronizes are answered as "
                "before",
                strerror(errno));
        goto fail;
    }
    rc = ((CUresult(*)(void *, size_t, unsigned))R(cuMemHostRegister_v2))(
        p, (size_t)page, REGISTER_PORTABLE_DEVICEMAP);
    registered = rc == CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(CUdeviceptr *, void *, unsigned))R(cuMemHostGetDevicePointer_v2))(
            &w->dev, p, 0);
    if (rc != CUDA_SUCCESS) {
        om_warn("completion word: the driver cannot map its page (CUresult %d)", (int)rc);
        goto fail;
    }
    w->word = p;
    w->uid = uid;
    return w;
fail:
    if (p != MAP_FAILED && !registered) /* a registered page stays: unregistering may wait */
        munmap(p, (size_t)page);
    if (w->fd >= 0)
        close(w->fd);
    free(w);
    return NULL;
}

/* The pending pages whose last write landed, to the pool (pool_lock held). */
static void pending_landed(void)
{
    for (struct om_syncword **at = &pending; *at;) {
        struct om_syncword *w = *at;
        if (__atomic_load_n(w->word, __ATOMIC_ACQUIRE) == w->last) {
            *at = w->next;
            w->next = pool;
            pool = w;
        } else {
            at = &w->next;
        }
    }
}

/* A pooled page of the user's (pool_lock held), or NULL. */
static struct om_syncword *pool_take(uid_t uid)
{
    for (struct om_syncword **at = &pool; *at; at = &(*at)->next)
        if ((*at)->uid == uid) {
            struct om_syncword *w = *at;
            *at = w->next;
            return w;
        }
    return NULL;
}

/* No word for any session from now on: the driver refused a write, or no page could be made
 * (every later synchronize would pay for the attempt). Said once. */
static void give_up(const char *why)
{
    if (__atomic_exchange_n(&setting, 0, __ATOMIC_RELAXED) == 1)
        om_warn("completion words off for this server: %s", why);
}

/* The session's page (made or taken from the pool, its word 0) and, in *client_fd, a read-only
 * descriptor of it for the client; CUDA_ERROR_NOT_SUPPORTED when the setting is off or the
 * driver cannot write a word. Needs the context current. */
CUresult om_syncword_take(struct session *s, int *client_fd)
{
    struct om_syncword *w = s->syncword;
    char path[64];

    *client_fd = -1;
    if (!om_syncword_on() || !om_server_has(OM_IDX_cuStreamWriteValue32_v2) ||
        !om_server_has(OM_IDX_cuMemHostRegister_v2) ||
        !om_server_has(OM_IDX_cuMemHostGetDevicePointer_v2))
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!w) {
        pthread_mutex_lock(&pool_lock);
        pending_landed();
        w = pool_take(s->uid);
        pthread_mutex_unlock(&pool_lock);
        if (!w && !(w = page_new(s->uid))) {
            give_up("no page could be made for a word (see above)");
            return CUDA_ERROR_NOT_SUPPORTED;
        }
        *w->word = 0;
        w->next = NULL;
        s->syncword = w;
        s->syncword_seq = 0;
    }
    snprintf(path, sizeof(path), "/proc/self/fd/%d", w->fd);
    *client_fd = open(path, O_RDONLY | O_CLOEXEC);
    return *client_fd >= 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* Whether a synchronize of the session may be answered by its word; when not, counts why.
 * Nothing but the end of the work may be left to do (no error kept for it, no SM share's
 * shadow streams, no pool memory to settle and no kernel that may print: both happen in the
 * driver's synchronize), and the client must have a core to spin on (wait.c's
 * om_spin_client_may; asked first: with more busy clients than cores it is the common answer,
 * and the cheapest). */
bool om_syncword_may_defer(struct session *s)
{
    if (!s->syncword)
        return false;
    if (__atomic_load_n(&setting, __ATOMIC_RELAXED) != 1) {
        s->syncword_declined[OM_SYNCWORD_DRIVER]++; /* given up since its page was made */
        return false;
    }
    if (!om_spin_client_may()) {
        s->syncword_declined[OM_SYNCWORD_CORES]++;
        return false;
    }
    if (s->nperr || s->async_error != CUDA_SUCCESS || s->nshares || s->printed ||
        om_wait_settles_pools() ||
        /* the word armed last has not landed: one word serves every thread of the client, and
         * writes armed on two streams could land out of order, so that a number seen would
         * not mean the work before a smaller one done */
        __atomic_load_n(s->syncword->word, __ATOMIC_ACQUIRE) != s->syncword_seq) {
        s->syncword_declined[OM_SYNCWORD_STATE]++;
        return false;
    }
    return true;
}

void om_syncword_declined(struct session *s, enum om_syncword_why why)
{
    if (s->syncword)
        s->syncword_declined[why]++;
}

/* Any record of the client ends it: its thread that waited for the word has come back. (Not
 * always: another thread of the client may post while the first still spins; that client then
 * counts as busy through its records rather than its spin, and may be counted idle 2 ms after
 * them while the first thread spins on, at most 50 ms.) */
void om_syncword_record(struct session *s)
{
    s->syncword_spin = false;
}

/* The session's thread, waiting for its client's next record, neither spins nor counts its
 * client idle while the client may still spin for its word (session.c's wait_record): the
 * record cannot come before the work ends, and the client's thread keeps its core until then.
 * The client spins 50 ms at most and then asks the server, so a word that never lands (a fault
 * stopped the GPU) ends this too. */
bool om_syncword_spinning(struct session *s)
{
    if (s->syncword_spin && __atomic_load_n(s->syncword->word, __ATOMIC_ACQUIRE) == s->syncword_seq)
        s->syncword_spin = false; /* landed: the client stops spinning */
    return s->syncword_spin;
}

/* A synchronize of stream st (busy; om_syncword_may_defer said yes) deferred to the word: the
 * number the word will hold once st's work before it is done (0: not deferred, the reason
 * counted; wait as before). The write waits for st's last kernel, so while client streams share
 * the hardware queues it goes only where the scheduler would let a dependent operation go
 * (sched.c's om_sched_may_follow); it is never held, which would bring back the wake-ups the
 * word removes. */
uint32_t om_syncword_arm(struct session *s, CUstream st)
{
    uint32_t seq;
    CUresult rc;

    if (!s->syncword)
        return 0;
    if (!om_sched_may_follow(s, st)) {
        om_syncword_declined(s, OM_SYNCWORD_SCHED);
        return 0;
    }
    seq = s->syncword_seq + 1;
    if (!seq)
        seq = 1; /* 0 is the page's value when taken: never a number given out */
    rc = ((CUresult(*)(CUstream, CUdeviceptr, uint32_t, unsigned))R(cuStreamWriteValue32_v2))(
        st, s->syncword->dev, seq, 0);
    if (rc != CUDA_SUCCESS) {
        om_syncword_declined(s, OM_SYNCWORD_DRIVER);
        if (rc == CUDA_ERROR_NOT_SUPPORTED)
            give_up("the driver does not write a word behind a stream's work "
                    "(cuStreamWriteValue32 answered CUDA_ERROR_NOT_SUPPORTED)");
        return 0;
    }
    s->syncword_seq = seq;
    s->syncword_armed++;
    s->syncword_spin = true; /* the client spins until the word lands or it gives up */
    return seq;
}

/* At the session's end, its streams' work done (every write landed): the page to the pool. */
void om_syncword_session_end(struct session *s)
{
    struct om_syncword *w = s->syncword;

    om_syncword_record(s);
    if (!w)
        return;
    const uint64_t *no = s->syncword_declined;
    uint64_t any = s->syncword_armed;
    for (int i = 0; i < OM_SYNCWORD_WHY_N; i++)
        any |= no[i];
    if (any)
        om_info(
            "client %d: %llu synchronize(s) deferred to the completion word; answered after "
            "the work: %llu with nothing left to do, %llu with more to settle, %llu on "
            "several streams, %llu with no core to spin on, %llu behind a long kernel in a "
            "shared queue, %llu refused by the driver",
            (int)s->pid, (unsigned long long)s->syncword_armed,
            (unsigned long long)no[OM_SYNCWORD_IDLE], (unsigned long long)no[OM_SYNCWORD_STATE],
            (unsigned long long)no[OM_SYNCWORD_STREAMS], (unsigned long long)no[OM_SYNCWORD_CORES],
            (unsigned long long)no[OM_SYNCWORD_SCHED], (unsigned long long)no[OM_SYNCWORD_DRIVER]);
    s->syncword = NULL;
    w->last = s->syncword_seq;
    pthread_mutex_lock(&pool_lock);
    w->next = pending; /* to the pool once its last write landed (pending_landed) */
    pending = w;
    pending_landed();
    pthread_mutex_unlock(&pool_lock);
}
