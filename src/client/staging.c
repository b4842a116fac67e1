/* SPDX-License-Identifier: MIT */
/* Large copies between pageable memory and the device: a pipelined pinned staging area. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/gen/entries.h"
#include "../common/clock.h"
#include "gen/stubs.h" /* the generated stubs: its events are made, recorded, queried through them */
#include "openmps/ops.h"
#include "remote.h"
#include "shim.h"

/*
 * The driver copies pageable memory through a staging buffer of its own, one piece after the
 * other (6.6-11 GB/s on an H100, docs/benchmark-definitions.md, B3). Here the process holds a
 * pinned area shared with the server (STAGE_SLOTS slots): the CPU copies one slot while the copy
 * engine moves another, so a copy takes about as long as the CPU's memcpy of its bytes alone.
 *
 * To the device: memcpy into a free slot, post the DMA from the slot and an event record;
 * a slot is free again once its event has completed. From the device: post the DMAs of the
 * first STAGE_SLOTS pieces, then for each piece in turn wait for its event, memcpy it out and
 * post the DMA of the piece STAGE_SLOTS further into the slot just emptied.
 *
 * Everything goes on the caller's stream, in order with its other work; the slots' events are
 * the process's own, made once. One copy uses the area at a time (stage_lock); copies under
 * STAGE_MIN_BYTES, a copy while another thread's copy has the area, a copy on a stream other
 * than the one whose DMA still uses a slot, and every copy when the area cannot be had go
 * through the ring as before: a copy never waits for another stream's work.
 */

#define STAGE_SLOTS 4
#define STAGE_SLOT_BYTES (4u << 20)
#define STAGE_MIN_BYTES (256u << 10)
#define COPY_HELPERS 3                /* threads that share each slot's memcpy with the caller */
#define PARALLEL_MIN_BYTES (1u << 20) /* smaller memcpys are not worth waking them */
#define SPIN_NS 100000ull

static pthread_mutex_t stage_lock = PTHREAD_MUTEX_INITIALIZER;
static int stage_state; /* 0: not tried yet, 1: ready, -1: not available (the ring is used) */
static uint8_t *stage;
static uint64_t stage_server; /* the area's address in the server */
/* Each slot's event on each device (an event is recorded only on a stream of its own device:
 * the driver refuses another's), made at the device's first staged copy; and the one a slot's
 * last DMA recorded. */
static uint64_t device_event[OM_MAX_DEVICES][STAGE_SLOTS];
static bool device_events_made[OM_MAX_DEVICES];
static uint64_t *copy_events; /* the current copy's device's (under stage_lock) */
static uint64_t slot_event[STAGE_SLOTS];
/* A DMA was posted on the slot since its event last completed, on this stream: */
static bool slot_busy[STAGE_SLOTS];
static CUstream slot_stream[STAGE_SLOTS];

/*
 * One core's memcpy moves 7-10 GB/s (the H100 machine), about what the driver's pageable copy
 * reaches; the copy engine moves 55. So each slot's memcpy is shared: the caller and up to
 * COPY_HELPERS threads (fewer on a machine with fewer cores) each copy one part. The helpers
 * spin briefly between parts (a large copy hands them one part after another) and otherwise
 * sleep; they block every signal, so the program's signals reach its own threads.
 */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t go, done;
    uint64_t generation; /* a new job (__atomic; changed under lock) */
    int pending;         /* helpers still copying their part (__atomic) */
    int helpers;
    uint8_t *dst;
    const uint8_t *src;
    size_t len;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
          .go = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER};

/* Part `id` of `parts` of the job, on 64-byte boundaries. */
static void copy_part(int id, int parts)
{
    size_t step = (pool.len / (size_t)parts) & ~(size_t)63;
    size_t off = step * (size_t)id, len = id == parts - 1 ? pool.len - off : step;

    memcpy(pool.dst + off, pool.src + off, len);
}

static void *helper_main(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint64_t seen = 0, g;

    for (;;) {
        uint64_t t0 = om_mono_ns();
        while ((g = __atomic_load_n(&pool.generation, __ATOMIC_ACQUIRE)) == seen &&
               om_mono_ns() - t0 < SPIN_NS)
            ;
        if (g == seen) {
            pthread_mutex_lock(&pool.lock);
            while ((g = __atomic_load_n(&pool.generation, __ATOMIC_ACQUIRE)) == seen)
                pthread_cond_wait(&pool.go, &pool.lock);
            pthread_mutex_unlock(&pool.lock);
        }
        seen = g;
        copy_part(id, pool.helpers + 1);
        if (__atomic_sub_fetch(&pool.pending, 1, __ATOMIC_ACQ_REL) == 0) {
            pthread_mutex_lock(&pool.lock);
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.lock);
        }
    }
    return NULL;
}

static void start_helpers(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int want = cpus - 1 < COPY_HELPERS ? (int)cpus - 1 : COPY_HELPERS;
    sigset_t all, old;
    pthread_attr_t attr;

    sigfillset(&all);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (int i = 0; i < want; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, helper_main, (void *)(intptr_t)(i + 1)) != 0)
            break;
        __atomic_add_fetch(&pool.helpers, 1, __ATOMIC_RELEASE);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
}

int om_staging_helper_threads(void)
{
    return __atomic_load_n(&pool.helpers, __ATOMIC_ACQUIRE);
}

static void shared_memcpy(void *dst, const void *src, size_t len)
{
    if (len < PARALLEL_MIN_BYTES || pool.helpers == 0) {
        memcpy(dst, src, len);
        return;
    }
    pool.dst = dst;
    pool.src = src;
    pool.len = len;
    __atomic_store_n(&pool.pending, pool.helpers, __ATOMIC_RELAXED);
    pthread_mutex_lock(&pool.lock);
    __atomic_add_fetch(&pool.generation, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&pool.go);
    pthread_mutex_unlock(&pool.lock);
    copy_part(0, pool.helpers + 1);
    uint64_t t0 = om_mono_ns();
    while (__atomic_load_n(&pool.pending, __ATOMIC_ACQUIRE) && om_mono_ns() - t0 < SPIN_NS)
        ;
    pthread_mutex_lock(&pool.lock);
    while (__atomic_load_n(&pool.pending, __ATOMIC_ACQUIRE))
        pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
}

static bool stage_ready(void)
{
    if (stage_state)
        return stage_state > 0;
    stage_state = -1;
    void *p = NULL;
    CUresult rc = om_pinned_alloc(&p, (size_t)STAGE_SLOTS * STAGE_SLOT_BYTES, 0);
    if (rc != CUDA_SUCCESS) {
        om_shim_log("no pinned staging area (CUresult %d): large pageable copies go through the "
                    "ring, more slowly",
                    (int)rc);
        return false;
    }
    if (!om_pinned_lookup(p, (size_t)STAGE_SLOTS * STAGE_SLOT_BYTES, &stage_server)) {
        om_pinned_free(p);
        om_shim_log("no pinned staging area: large pageable copies go through the ring");
        return false;
    }
    stage = p;
    memset(stage, 0, (size_t)STAGE_SLOTS * STAGE_SLOT_BYTES); /* its pages exist from now on */
    start_helpers();
    stage_state = 1;
    return true;
}

/* The slots' events on device dev, made at its first staged copy (the server makes them in
 * that device's context: the calling thread's device is the server's then). False: none could
 * be made; the copy takes the ring. */
static bool device_events(int dev)
{
    int made = 0;
    bool ok = true;

    if (dev < 0 || dev >= (int)OM_MAX_DEVICES)
        return false;
    if (device_events_made[dev])
        return true;
    while (ok && made < STAGE_SLOTS) {
        CUevent ev = NULL;
        ok = om_rpc_cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS;
        if (ok)
            device_event[dev][made++] = (uint64_t)(uintptr_t)ev;
    }
    if (!ok) { /* give back what was made */
        for (int i = 0; i < made; i++)
            om_rpc_cuEventDestroy_v2((CUevent)(uintptr_t)device_event[dev][i]);
        om_shim_log("no staging events on device %d: its large pageable copies go through the "
                    "ring",
                    dev);
        return false;
    }
    device_events_made[dev] = true;
    return true;
}

/* Waits until the slot's last DMA is done. */
static CUresult slot_wait(int i)
{
    if (!slot_busy[i])
        return CUDA_SUCCESS;
    slot_busy[i] = false;
    return om_rpc_cuEventSynchronize((CUevent)(uintptr_t)slot_event[i]);
}

/* Posts a DMA between the slot and the device, then the slot's event record. The first piece
 * of a copy is a call, not a post, so that a bad address or stream fails the copy at once, as
 * the driver's would. */
static CUresult slot_post(int i, int index, CUdeviceptr dev, size_t len, CUstream s, bool first)
{
    uint64_t slot = stage_server + (uint64_t)i * STAGE_SLOT_BYTES;
    REQ(copy, 32);
    CUresult rc;

    om_put_u64(&copy, index == OM_IDX_op_copy_htod_pinned ? dev : slot);
    om_put_u64(&copy, index == OM_IDX_op_copy_htod_pinned ? slot : dev);
    om_put_u64(&copy, (uint64_t)len);
    om_put_u64(&copy, (uint64_t)(uintptr_t)s);
    rc = first ? om_rcall(index, &copy, NULL, 0, NULL) : om_rpost(index, &copy);
    if (rc != CUDA_SUCCESS)
        return rc;
    slot_event[i] = copy_events[i];                                  /* the copy's device's */
    rc = om_rpc_cuEventRecord((CUevent)(uintptr_t)slot_event[i], s); /* posted */
    slot_busy[i] = true;
    slot_stream[i] = s;
    if (rc != CUDA_SUCCESS)
        stage_state = -1; /* the slot's DMA is not tracked: never use the area again */
    return rc;
}

static size_t piece_of(size_t n, size_t off)
{
    return n - off < STAGE_SLOT_BYTES ? n - off : STAGE_SLOT_BYTES;
}

static CUresult htod(CUdeviceptr dst, const uint8_t *src, size_t n, CUstream s, bool async)
{
    CUresult rc = CUDA_SUCCESS;
    int last = 0;
    size_t k = 0;

    for (size_t off = 0; off < n && rc == CUDA_SUCCESS; off += STAGE_SLOT_BYTES, k++) {
        int i = (int)(k % STAGE_SLOTS);
        size_t len = piece_of(n, off);
        rc = slot_wait(i);
        if (rc == CUDA_SUCCESS) {
            shared_memcpy(stage + (size_t)i * STAGE_SLOT_BYTES, src + off, len);
            rc = slot_post(i, OM_IDX_op_copy_htod_pinned, dst + off, len, s, k == 0);
        }
        last = i;
    }
    /* The caller's bytes are in the slots already; a synchronous copy also waits for the
     * device. The last piece's event follows every piece of this copy on the stream, so the
     * slots this copy used are all free then. */
    if (rc == CUDA_SUCCESS && !async) {
        for (size_t i = 0; i < k && i < STAGE_SLOTS; i++)
            if ((int)i != last)
                slot_busy[i] = false;
        rc = slot_wait(last);
    }
    return rc;
}

static CUresult dtoh(uint8_t *dst, CUdeviceptr src, size_t n, CUstream s)
{
    size_t pieces = (n + STAGE_SLOT_BYTES - 1) / STAGE_SLOT_BYTES;
    CUresult rc = CUDA_SUCCESS;

    for (size_t k = 0; k < pieces && k < STAGE_SLOTS && rc == CUDA_SUCCESS; k++) {
        rc = slot_wait((int)k);
        if (rc == CUDA_SUCCESS)
            rc = slot_post((int)k, OM_IDX_op_copy_dtoh_pinned, src + k * STAGE_SLOT_BYTES,
                           piece_of(n, k * STAGE_SLOT_BYTES), s, k == 0);
    }
    for (size_t k = 0; k < pieces && rc == CUDA_SUCCESS; k++) {
        int i = (int)(k % STAGE_SLOTS);
        size_t off = k * STAGE_SLOT_BYTES, next = (k + STAGE_SLOTS) * STAGE_SLOT_BYTES;
        rc = slot_wait(i);
        if (rc != CUDA_SUCCESS)
            break;
        shared_memcpy(dst + off, stage + (size_t)i * STAGE_SLOT_BYTES, piece_of(n, off));
        if (k + STAGE_SLOTS < pieces)
            rc = slot_post(i, OM_IDX_op_copy_dtoh_pinned, src + next, piece_of(n, next), s, false);
    }
    return rc;
}

/* True when no slot is still in use by a copy on another stream: waiting for it would tie
 * this copy to that stream's work (a long kernel, or work that waits for this stream). */
static bool slots_free_of_other_streams(CUstream s)
{
    for (int i = 0; i < STAGE_SLOTS; i++) {
        if (!slot_busy[i] || slot_stream[i] == s)
            continue;
        if (om_rpc_cuEventQuery((CUevent)(uintptr_t)slot_event[i]) != CUDA_SUCCESS)
            return false;
        slot_busy[i] = false;
    }
    return true;
}

CUresult om_staging_copy(bool to_device, CUdeviceptr dev, void *host, size_t n, CUstream s,
                         bool async, bool *handled)
{
    CUresult rc;

    *handled = false;
    /* A forked child must not write into its parent's staging area (the pages are shared);
     * the ring path answers it with its session's error. */
    if (n < STAGE_MIN_BYTES || om_shim.client.dead)
        return CUDA_SUCCESS;
    /* Another thread's copy has the area, or a copy on another stream still uses a slot: this
     * copy takes the ring (slower, but tied to nothing else). */
    if (pthread_mutex_trylock(&stage_lock) != 0)
        return CUDA_SUCCESS;
    if (!stage_ready() || !slots_free_of_other_streams(s) || !device_events(om_current_device())) {
        pthread_mutex_unlock(&stage_lock);
        return CUDA_SUCCESS;
    }
    copy_events = device_event[om_current_device()];
    *handled = true;
    rc = to_device ? htod(dev, host, n, s, async) : dtoh(host, dev, n, s);
    pthread_mutex_unlock(&stage_lock);
    return rc;
}

/* Pageable bytes to the device: inline in the call up to OM_INLINE_COPY_MAX, otherwise
 * staged in pieces of OM_STAGE_PIECE: a copy of any size, and the server keeps no huge
 * buffer. */
CUresult om_ring_htod(CUdeviceptr dst, const void *src, size_t n, CUstream stream)
{
    if (n <= OM_INLINE_COPY_MAX) { /* the bytes ride in the call: one record, not three */
        REQ(req, 24 + OM_INLINE_COPY_MAX);
        om_put_u64(&req, dst);
        om_put_u64(&req, (uint64_t)n);
        om_put_u64(&req, (uint64_t)(uintptr_t)stream);
        om_put_bytes(&req, src, n);
        return om_rcall(OM_IDX_op_copy_htod, &req, NULL, 0, NULL);
    }
    for (size_t off = 0; off < n; off += OM_STAGE_PIECE) {
        size_t piece = n - off < OM_STAGE_PIECE ? n - off : OM_STAGE_PIECE;
        REQ(one, 32);
        om_put_u64(&one, dst + off);
        om_put_u64(&one, (uint64_t)piece);
        om_put_u64(&one, (uint64_t)(uintptr_t)stream);
        CUresult rc = om_rcall_staged(OM_IDX_op_copy_htod, (const uint8_t *)src + off, piece, &one,
                                      NULL, 0, NULL);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return CUDA_SUCCESS;
}
