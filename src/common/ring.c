/* SPDX-License-Identifier: MIT */
/* Single-producer single-consumer rings in shared memory with futex doorbells. */
#define _GNU_SOURCE
#include "ring.h"

#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define REC_ALIGN 8u

static uint64_t rec_total(uint32_t len)
{
    return ((uint64_t)sizeof(struct om_rec) + len + REC_ALIGN - 1) & ~(uint64_t)(REC_ALIGN - 1);
}

static size_t header_bytes(void)
{
    return (sizeof(struct om_ring_header) + 4095) & ~(size_t)4095;
}

int om_ring_create(uint32_t queue_bytes, int *ret_fd, void **ret_map, size_t *ret_len,
                   struct om_ring_geometry *ret_geo)
{
    size_t len;
    struct om_ring_header *h;
    void *map;
    int fd, rc;

    if (queue_bytes < 4096 || (queue_bytes & (queue_bytes - 1)) || queue_bytes > (16u << 20))
        return -EINVAL;
    len = header_bytes() + 2 * (size_t)queue_bytes;
    fd = memfd_create("openmps-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    if (ftruncate(fd, (off_t)len) < 0)
        goto fail;
    /* The client must not be able to shrink the file under the server's
     * mapping (that would SIGBUS the server). */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
        goto fail;
    map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        goto fail;
    h = map;
    h->magic = OM_RING_MAGIC;
    h->major = OM_RING_MAJOR;
    h->minor = OM_RING_MINOR;
    h->total_bytes = (uint32_t)len;
    h->queue_bytes = queue_bytes;
    h->sq_data_off = (uint32_t)header_bytes();
    h->cq_data_off = (uint32_t)(header_bytes() + queue_bytes);
    ret_geo->queue_bytes = h->queue_bytes;
    ret_geo->sq_data_off = h->sq_data_off;
    ret_geo->cq_data_off = h->cq_data_off;
    *ret_fd = fd;
    *ret_map = map;
    *ret_len = len;
    return 0;
fail:
    rc = -errno;
    close(fd);
    return rc;
}

int om_ring_attach(int fd, size_t len, void **ret_map, struct om_ring_geometry *ret_geo)
{
    struct om_ring_header h;
    struct stat st;
    void *map;
    int seals;

    if (fstat(fd, &st) < 0)
        return -errno;
    /* An unsealed file could be shrunk under our mapping by the peer (SIGBUS). */
    seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK))
        return -EBADMSG;
    if ((size_t)st.st_size != len || len < header_bytes() + 2 * 4096)
        return -EBADMSG;
    map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return -errno;
    memcpy(&h, map, sizeof(h));
    if (h.magic != OM_RING_MAGIC || h.total_bytes != len) {
        munmap(map, len);
        return -EBADMSG;
    }
    if (h.major != OM_RING_MAJOR) {
        munmap(map, len);
        return -EPROTONOSUPPORT;
    }
    if (h.queue_bytes < 4096 || (h.queue_bytes & (h.queue_bytes - 1)) ||
        h.sq_data_off != header_bytes() || h.cq_data_off != header_bytes() + h.queue_bytes ||
        (size_t)h.cq_data_off + h.queue_bytes != len) {
        munmap(map, len);
        return -EBADMSG;
    }
    ret_geo->queue_bytes = h.queue_bytes;
    ret_geo->sq_data_off = h.sq_data_off;
    ret_geo->cq_data_off = h.cq_data_off;
    *ret_map = map;
    return 0;
}

void om_ring_ends(void *map, const struct om_ring_geometry *geo, bool server,
                  struct om_ring_end *ret_tx, struct om_ring_end *ret_rx)
{
    struct om_ring_header *h = map;
    struct om_ring_end sq = {
        .q = &h->sq, .data = (uint8_t *)map + geo->sq_data_off, .size = geo->queue_bytes, .pos = 0};
    struct om_ring_end cq = {
        .q = &h->cq, .data = (uint8_t *)map + geo->cq_data_off, .size = geo->queue_bytes, .pos = 0};

    *ret_tx = server ? cq : sq;
    *ret_rx = server ? sq : cq;
}

static void copy_in(struct om_ring_end *e, uint64_t at, const void *src, size_t n)
{
    size_t off = (size_t)(at & (e->size - 1));
    size_t first = n < e->size - off ? n : e->size - off;

    memcpy(e->data + off, src, first);
    memcpy(e->data, (const uint8_t *)src + first, n - first);
}

static void copy_out(const struct om_ring_end *e, uint64_t at, void *dst, size_t n)
{
    size_t off = (size_t)(at & (e->size - 1));
    size_t first = n < e->size - off ? n : e->size - off;

    memcpy(dst, e->data + off, first);
    memcpy((uint8_t *)dst + first, e->data, n - first);
}

static long futex(uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, word, op, val, ts, NULL, 0);
}

/* Publish-then-check against the waiter's register-then-check: the full
 * fences make the pair a Dekker handshake on every architecture, so one of
 * the two always sees the other (no lost wake-up). */
static void ring_bell(uint32_t *bell, uint32_t *sleepers)
{
    __atomic_fetch_add(bell, 1, __ATOMIC_SEQ_CST);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST))
        futex(bell, FUTEX_WAKE, INT_MAX, NULL);
}

/* Wakes unconditionally: `sleepers` lives in memory the peer can write, so a
 * thread that must be stopped cannot rely on it. */
void om_ring_kick(struct om_ring_queue *q)
{
    __atomic_fetch_add(&q->doorbell, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&q->space_bell, 1, __ATOMIC_SEQ_CST);
    futex(&q->doorbell, FUTEX_WAKE, INT_MAX, NULL);
    futex(&q->space_bell, FUTEX_WAKE, INT_MAX, NULL);
}

int om_ring_send(struct om_ring_end *tx, const struct om_rec *rec, const void *payload)
{
    uint64_t head = __atomic_load_n(&tx->q->head, __ATOMIC_ACQUIRE);
    uint64_t used = tx->pos - head;
    uint64_t total = rec_total(rec->len);

    if (used > tx->size)
        return -EPROTO;
    if (total > tx->size || rec->len > OM_REC_MAX_PAYLOAD)
        return -EMSGSIZE;
    if (tx->size - used < total)
        return -EAGAIN;
    copy_in(tx, tx->pos, rec, sizeof(*rec));
    if (rec->len)
        copy_in(tx, tx->pos + sizeof(*rec), payload, rec->len);
    tx->pos += total;
    __atomic_store_n(&tx->q->tail, tx->pos, __ATOMIC_RELEASE);
    ring_bell(&tx->q->doorbell, &tx->q->sleepers);
    return 0;
}

int om_ring_recv(struct om_ring_end *rx, struct om_rec *ret_rec, void *buf, size_t cap)
{
    uint64_t tail = __atomic_load_n(&rx->q->tail, __ATOMIC_ACQUIRE);
    uint64_t avail = tail - rx->pos;
    struct om_rec rec;
    int rc = 0;

    if (avail == 0)
        return -EAGAIN;
    if (avail > rx->size || avail < sizeof(rec))
        return -EPROTO;
    copy_out(rx, rx->pos, &rec, sizeof(rec));
    if (rec.len > OM_REC_MAX_PAYLOAD || rec_total(rec.len) > avail)
        return -EPROTO;
    if (rec.len > cap)
        rc = -EMSGSIZE;
    else if (rec.len)
        copy_out(rx, rx->pos + sizeof(rec), buf, rec.len);
    rx->pos += rec_total(rec.len);
    __atomic_store_n(&rx->q->head, rx->pos, __ATOMIC_RELEASE);
    ring_bell(&rx->q->space_bell, &rx->q->space_sleepers);
    *ret_rec = rec;
    return rc;
}

static int64_t now_ns(void)
{
    return (int64_t)om_mono_ns();
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* The eventcount wait shared by both directions: ready() says whether to stop
 * waiting; bell/sleepers are the queue's futex pair. */
static int wait_on(struct om_ring_end *e, bool (*ready)(struct om_ring_end *, size_t), size_t arg,
                   uint32_t *bell, uint32_t *sleepers, int64_t timeout_ns, unsigned spin_us,
                   const int *stop)
{
    int64_t start = now_ns();
    int64_t deadline = timeout_ns < 0 ? INT64_MAX : start + timeout_ns;

    for (unsigned i = 0; spin_us; i++) {
        if (ready(e, arg) || (stop && __atomic_load_n(stop, __ATOMIC_ACQUIRE)))
            return 0;
        if ((i & 63) == 63 && now_ns() - start > (int64_t)spin_us * 1000)
            break;
        cpu_relax();
    }
    for (;;) {
        uint32_t seen = __atomic_load_n(bell, __ATOMIC_SEQ_CST);
        struct timespec ts, *tsp = NULL;
        int64_t left;

        __atomic_fetch_add(sleepers, 1, __ATOMIC_SEQ_CST);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        if (ready(e, arg) || (stop && __atomic_load_n(stop, __ATOMIC_ACQUIRE))) {
            __atomic_fetch_sub(sleepers, 1, __ATOMIC_SEQ_CST);
            return 0;
        }
        left = deadline - now_ns();
        if (left <= 0) {
            __atomic_fetch_sub(sleepers, 1, __ATOMIC_SEQ_CST);
            return -ETIMEDOUT;
        }
        if (deadline != INT64_MAX) {
            ts.tv_sec = left / 1000000000;
            ts.tv_nsec = left % 1000000000;
            tsp = &ts;
        }
        futex(bell, FUTEX_WAIT, seen, tsp);
        __atomic_fetch_sub(sleepers, 1, __ATOMIC_SEQ_CST);
    }
}

static bool has_data(struct om_ring_end *e, size_t unused)
{
    (void)unused;
    return __atomic_load_n(&e->q->tail, __ATOMIC_ACQUIRE) != e->pos;
}

static bool has_space(struct om_ring_end *e, size_t need)
{
    uint64_t used = e->pos - __atomic_load_n(&e->q->head, __ATOMIC_ACQUIRE);

    /* An impossible index counts as ready so that the sender sees -EPROTO. */
    return used > e->size || e->size - used >= need;
}

int om_ring_wait_data(struct om_ring_end *rx, int timeout_ms, unsigned spin_us, const int *stop)
{
    return wait_on(rx, has_data, 0, &rx->q->doorbell, &rx->q->sleepers,
                   timeout_ms < 0 ? -1 : (int64_t)timeout_ms * 1000000, spin_us, stop);
}

int om_ring_wait_data_us(struct om_ring_end *rx, unsigned timeout_us, unsigned spin_us,
                         const int *stop)
{
    return wait_on(rx, has_data, 0, &rx->q->doorbell, &rx->q->sleepers, (int64_t)timeout_us * 1000,
                   spin_us, stop);
}

int om_ring_wait_space(struct om_ring_end *tx, size_t need, int timeout_ms, const int *stop)
{
    return wait_on(tx, has_space, (size_t)rec_total((uint32_t)need), &tx->q->space_bell,
                   &tx->q->space_sleepers, timeout_ms < 0 ? -1 : (int64_t)timeout_ms * 1000000, 0,
                   stop);
}
