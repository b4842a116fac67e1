/* SPDX-License-Identifier: MIT */
/* Pinned host memory shared with clients: memfd pages mapped here, registered with the driver. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/log.h"
#include "internal.h"

/*
 * The server makes the pages (a sealed memfd), maps them, registers them with
 * the driver (so copies are DMA and kernels may read them), and hands the memfd
 * to the client, who maps it at the same address when it can (then one
 * pointer works on both sides, as with unified addressing). The server keeps
 * the mapping, not the memfd: once sent, the descriptor is closed, unless the
 * region may go to the pool for another client (which needs it to map the
 * pages), and those are few (om_budget.pinned_fds). cuMemHostUnregister waits
 * for every running kernel (docs/driver-facts.md), so regions are released when no
 * client's work runs, or on a request's path when only that makes room.
 */

#define R(sym) om_server_real[OM_IDX_##sym]

/*
 * Regions no client holds: `pool` (the server's own pages, zeroed when taken again) and
 * `doomed` (to be unregistered and unmapped). While clients run, pooled regions go to the next
 * allocations that fit them; doomed ones are released at a moment no client's work runs
 * (om_hostmem_reap), and both lists once no session runs (om_hostmem_trim), since
 * unregistering waits for every running kernel. A request that the server's budgets would
 * refuse first releases both lists (evict): it may wait for running kernels once, where it
 * would otherwise fail.
 *
 * The pool is bounded: only regions of at most POOL_REGION_MAX bytes that kept their
 * descriptor go there (at most om_budget.pinned_fds of them), and at most pool_max_bytes() in
 * all; others are doomed. Zeroing a pooled region for its next client is then a few
 * milliseconds at most: a big region is released and made anew rather than zeroed on a
 * request's path (issue #22: zeroing a reused 8 GiB region took 85 s, for a client that had
 * died).
 *
 * Every registered byte and every region counts against the server's budgets (budget.c),
 * pooled and doomed ones included, so what is kept is bounded whatever clients do.
 */
#define POOL_REGION_MAX (32ull << 20)
#define POOL_BYTES_MAX (1ull << 30)

static struct om_hostmem *pool, *doomed;
static uint64_t pool_bytes;    /* of the regions in `pool` (pool_lock) */
static uint64_t pinned_total;  /* bytes registered: held, pooled and doomed (__atomic) */
static uint64_t regions_total; /* regions mapped here: held, pooled and doomed (__atomic) */
static uint64_t kept_fds;      /* regions that keep their memfd, to be pooled (__atomic) */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t pool_max_bytes(void)
{
    return om_budget.server_pinned / 8 < POOL_BYTES_MAX ? om_budget.server_pinned / 8
                                                        : POOL_BYTES_MAX;
}

static size_t destroy_all(struct om_hostmem *list, uint64_t *bytes);

uint64_t om_hostmem_total(void)
{
    return __atomic_load_n(&pinned_total, __ATOMIC_RELAXED);
}

static bool client_gone(struct session *s);

/* Every region no client holds (the pool and the doomed list), unregistered and unmapped now:
 * the caller has seen no client work running (om_idle_now). */
static size_t release_unheld(uint64_t *freed)
{
    struct om_hostmem *drop;

    pthread_mutex_lock(&pool_lock);
    drop = doomed;
    doomed = NULL;
    while (pool) {
        struct om_hostmem *h = pool;
        pool = h->next;
        h->next = drop;
        drop = h;
    }
    pool_bytes = 0;
    pthread_mutex_unlock(&pool_lock);
    return destroy_all(drop, freed);
}

/*
 * Releases every region no client holds, pooled and doomed: called on a request's path when
 * the server's budgets would refuse it. Unregistering waits for every running kernel, and a
 * kernel may wait for something only its client's next call provides (a stream waiting for a
 * value in memory): so the release is made at a moment when no client's work runs, as
 * om_hostmem_reap's, which this request waits for, at most EVICT_WAIT_MS and while its client
 * lives. Returns how many regions went.
 */
#define EVICT_WAIT_MS 10000

static size_t evict(struct session *s)
{
    uint64_t freed;
    size_t n;

    if (!__atomic_load_n(&pool, __ATOMIC_ACQUIRE) && !__atomic_load_n(&doomed, __ATOMIC_ACQUIRE))
        return 0;
    for (int waited = 0; !om_idle_now(); waited += 2) {
        if (waited >= EVICT_WAIT_MS || client_gone(s))
            return 0;
        usleep(2000);
    }
    n = release_unheld(&freed);
    if (n)
        om_info("released %zu pinned region(s) no client holds (%llu bytes) to make room", n,
                (unsigned long long)freed);
    return n;
}

static void room_give(size_t len)
{
    om_budget_give(&pinned_total, len);
    om_budget_give(&regions_total, 1);
}

/* One more region of len bytes under the server's budgets of bytes and regions, the regions
 * no client holds released first if that makes room; a refusal is logged at most once a
 * minute. */
static bool room_take(struct session *s, size_t len)
{
    static uint64_t last_log_s;
    uint64_t now;

    for (int tries = 0; tries < 2; tries++) {
        if (om_budget_take(&regions_total, 1, om_budget.server_pinned_regions)) {
            if (om_budget_take(&pinned_total, len, om_budget.server_pinned))
                return true;
            om_budget_give(&regions_total, 1);
        }
        if (tries == 0)
            evict(s); /* another request's eviction may have made the room too */
    }
    now = (uint64_t)time(NULL);
    if (now >= last_log_s + 60) {
        last_log_s = now;
        om_warn("pinned host memory of %zu bytes refused: the server holds %llu bytes in %llu "
                "region(s), its budgets are %llu bytes (OPENMPS_SERVER_PINNED_MAX) and %u "
                "regions (docs/operations.md, \"Budgets\")",
                len, (unsigned long long)om_hostmem_total(),
                (unsigned long long)__atomic_load_n(&regions_total, __ATOMIC_RELAXED),
                (unsigned long long)om_budget.server_pinned, om_budget.server_pinned_regions);
    }
    return false;
}

/* The client that asked is gone: the main thread saw its socket hang up and ended its session
 * (om_session_end sets the stop flag). No more work for it. */
static bool client_gone(struct session *s)
{
    return __atomic_load_n(&s->stop, __ATOMIC_ACQUIRE) != 0;
}

static struct om_hostmem *pool_take(size_t len)
{
    struct om_hostmem **best = NULL;

    pthread_mutex_lock(&pool_lock);
    for (struct om_hostmem **pp = &pool; *pp; pp = &(*pp)->next)
        if ((*pp)->len >= len && (*pp)->len <= 2 * len && (!best || (*pp)->len < (*best)->len))
            best = pp;
    struct om_hostmem *h = best ? *best : NULL;
    if (h) {
        *best = h->next;
        pool_bytes -= h->len;
    }
    pthread_mutex_unlock(&pool_lock);
    if (h) {
        memset(h->addr, 0, h->len); /* nothing of the previous client's; POOL_REGION_MAX at most */
        h->next = NULL;
    }
    return h;
}

/* A dead client's answer is read by nobody: the error only stops the work. */
#define GONE CUDA_ERROR_OUT_OF_MEMORY

CUresult om_hostmem_alloc(struct session *s, size_t bytes, struct om_hostmem **ret, int *send_fd,
                          bool *send_close)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len;
    struct om_hostmem *h;
    bool keep;
    CUresult rc;

    if (bytes == 0 || bytes > (1ull << 40))
        return bytes ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
    if (client_gone(s))
        return GONE;
    len = (bytes + page - 1) / page * page;
    h = pool_take(len);
    if (h) {
        *ret = h;
        *send_fd = h->fd; /* a pooled region keeps its descriptor */
        *send_close = false;
        return CUDA_SUCCESS;
    }
    if (!room_take(s, len))
        return CUDA_ERROR_OUT_OF_MEMORY;
    h = calloc(1, sizeof(*h));
    if (!h) {
        room_give(len);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    h->len = len;
    h->fd = memfd_create("openmps-pinned", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (h->fd < 0 || ftruncate(h->fd, (off_t)len) < 0 ||
        fcntl(h->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
        goto fail;
    /* From a range of its own, which a client's process is unlikely to use, so
     * the client can map the pages at the same address. */
    static uint64_t next = 0x600000000000ull;
    for (int tries = 0; tries < 64; tries++) {
        uint64_t at = __atomic_fetch_add(&next, len + (1u << 21), __ATOMIC_RELAXED);
        h->addr = mmap((void *)(uintptr_t)at, len, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_FIXED_NOREPLACE, h->fd, 0);
        if (h->addr != MAP_FAILED)
            break;
    }
    if (h->addr == MAP_FAILED)
        h->addr = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd, 0);
    if (h->addr == MAP_FAILED) {
        h->addr = NULL;
        goto fail;
    }
    /* Registering pins every page (for gigabytes, seconds): not for a client that is gone. */
    rc = client_gone(s)
             ? GONE
             /* CU_MEMHOSTREGISTER_PORTABLE | DEVICEMAP */
             : ((CUresult(*)(void *, size_t, unsigned))R(cuMemHostRegister_v2))(h->addr, len, 0x3);
    if (rc != CUDA_SUCCESS) {
        munmap(h->addr, len);
        close(h->fd);
        free(h);
        room_give(len);
        return rc;
    }
    if (((CUresult(*)(CUdeviceptr *, void *, unsigned))R(cuMemHostGetDevicePointer_v2))(
            &h->device, h->addr, 0) != CUDA_SUCCESS)
        h->device = (CUdeviceptr)(uintptr_t)h->addr;
    /* Only a region the pool may take keeps its descriptor; the others' goes with the answer. */
    keep = len <= POOL_REGION_MAX && om_budget_take(&kept_fds, 1, om_budget.pinned_fds);
    *send_fd = h->fd;
    *send_close = !keep;
    if (!keep)
        h->fd = -1;
    *ret = h;
    return CUDA_SUCCESS;
fail:
    om_err("pinned memory of %zu bytes: %s", len, strerror(errno));
    if (h->fd >= 0)
        close(h->fd);
    free(h);
    room_give(len);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/*
 * Memory the client registered (cuMemHostRegister): it moved those pages onto
 * a memfd at the same address and sends the memfd; the server maps it (at the
 * same address when it can) and registers it. fd is consumed.
 */
CUresult om_hostmem_adopt(struct session *s, int fd, uint64_t client_addr, size_t len,
                          struct om_hostmem **ret)
{
    struct om_hostmem *h;
    struct stat st;
    int seals = fcntl(fd, F_GET_SEALS);
    CUresult rc;

    /* A size the client could still shrink would fault the server later. */
    if (seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(fd, &st) < 0 || (size_t)st.st_size < len ||
        len == 0) {
        close(fd);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!room_take(s, len)) {
        close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    h = calloc(1, sizeof(*h));
    if (!h) {
        close(fd);
        room_give(len);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    h->fd = -1; /* never pooled: the mapping is all the server needs */
    h->len = len;
    h->adopted = true;
    h->addr = mmap((void *)(uintptr_t)client_addr, len, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
    if (h->addr == MAP_FAILED)
        h->addr = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (h->addr == MAP_FAILED) {
        free(h);
        room_give(len);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    rc = ((CUresult(*)(void *, size_t, unsigned))R(cuMemHostRegister_v2))(h->addr, len, 0x3);
    if (rc != CUDA_SUCCESS) {
        munmap(h->addr, len);
        free(h);
        room_give(len);
        return rc;
    }
    if (((CUresult(*)(CUdeviceptr *, void *, unsigned))R(cuMemHostGetDevicePointer_v2))(
            &h->device, h->addr, 0) != CUDA_SUCCESS)
        h->device = (CUdeviceptr)(uintptr_t)h->addr;
    *ret = h;
    return CUDA_SUCCESS;
}

/*
 * A region the client is done with. Its pages go to another client only when
 * nobody can still see them: the client unmapped them (cuMemFreeHost) or its
 * process has no memory left (exited, killed, a zombie). Otherwise, and always
 * for the program's own pages (cuMemHostRegister), the region is doomed: it is
 * unregistered and unmapped here at the next moment no client's work runs, while
 * the client's own mapping (if it lives on) stays valid. So is a region the pool
 * has no room for, or that it never takes (a big one, one that kept no descriptor).
 */
void om_hostmem_release(struct om_hostmem *h, bool reusable)
{
    pthread_mutex_lock(&pool_lock);
    if (reusable && !h->adopted && h->fd >= 0 && h->len <= POOL_REGION_MAX &&
        pool_bytes + h->len <= pool_max_bytes()) {
        h->next = pool;
        pool = h;
        pool_bytes += h->len;
    } else {
        h->next = doomed;
        doomed = h;
    }
    pthread_mutex_unlock(&pool_lock);
}

static void region_destroy(struct om_hostmem *h)
{
    CUresult (*unregister)(void *) = (CUresult(*)(void *))R(cuMemHostUnregister);

    if (unregister)
        unregister(h->addr);
    munmap(h->addr, h->len);
    if (h->fd >= 0) {
        close(h->fd);
        om_budget_give(&kept_fds, 1);
    }
    room_give(h->len);
    free(h);
}

/* Releases a list of regions; returns how many, and their bytes in *bytes. */
static size_t destroy_all(struct om_hostmem *list, uint64_t *bytes)
{
    size_t n = 0;

    *bytes = 0;
    while (list) {
        struct om_hostmem *h = list;
        list = h->next;
        *bytes += h->len;
        n++;
        region_destroy(h);
    }
    return n;
}

/*
 * Called when the last session's worker is done (no client's work can be running, so
 * unregistering waits for nothing; a client that connects meanwhile may wait for it once,
 * as for om_replybuf_trim). Needs the context current.
 */
void om_hostmem_trim(void)
{
    uint64_t freed;
    size_t n;

    n = release_unheld(&freed);
    if (n)
        om_info("released %zu pinned region(s) of ended sessions (%llu bytes)", n,
                (unsigned long long)freed);
}

/*
 * Doomed regions are released while clients run too, at a moment when no client stream has
 * work (idle.c): then unregistering waits for nothing. A client that enqueues a kernel between
 * that look and the release makes the release wait for it once (the same window as
 * om_hostmem_trim's). Called by the main thread, at most once a second and after every event;
 * the look costs one cuStreamQuery per client stream, and is made only when something is
 * doomed.
 */
void om_hostmem_reap(void)
{
    struct om_hostmem *drop;
    uint64_t freed;
    size_t n;

    if (!__atomic_load_n(&doomed, __ATOMIC_ACQUIRE) || !om_idle_now())
        return;
    pthread_mutex_lock(&pool_lock);
    drop = doomed;
    doomed = NULL;
    pthread_mutex_unlock(&pool_lock);
    n = destroy_all(drop, &freed);
    if (n)
        om_debug("released %zu pinned region(s) clients left behind (%llu bytes)", n,
                 (unsigned long long)freed);
}

/* The session's region holding [addr, addr + n), by the server's address or by its device
 * pointer (under unified addressing the same). */
static struct om_hostmem *find(struct session *s, uint64_t addr, uint64_t n, bool device)
{
    for (size_t i = 0; i < s->nhostmem; i++) {
        struct om_hostmem *h = s->hostmem[i];
        uint64_t base = device ? (uint64_t)h->device : (uint64_t)(uintptr_t)h->addr;
        if (addr >= base && n <= h->len && addr - base <= h->len - n)
            return h;
    }
    return NULL;
}

struct om_hostmem *om_hostmem_find(struct session *s, uint64_t addr, uint64_t n)
{
    return find(s, addr, n, false);
}

struct om_hostmem *om_hostmem_find_device(struct session *s, uint64_t addr, uint64_t n)
{
    return find(s, addr, n, true);
}

/*
 * Whether the client's process can no longer touch its pinned pages: it is gone, a zombie, or
 * exiting with its memory already released. The session's end alone does not say so: a
 * process that closed its session, or a child it forked, may still map them. A process
 * exits its memory before it closes its descriptors, so when the session ended because the
 * client died, this is true by the time the worker asks.
 */
static bool memory_gone(pid_t pid)
{
    char path[64], buf[512];
    ssize_t n;
    int fd;

    if (kill(pid, 0) < 0 && errno == ESRCH)
        return true;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    /* pid (comm) S ...: the command may hold ')' itself, so the last one ends it */
    const char *paren = strrchr(buf, ')');
    if (paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'))
        return true;
    /* Field 23 is vsize: 0 once the process has no memory (in exit, before it is a zombie). */
    const char *p = paren ? paren + 2 : NULL;
    for (int field = 3; p && field < 23; field++) {
        p = strchr(p, ' ');
        if (p)
            p++;
    }
    return p && p[0] == '0' && p[1] == ' ';
}

void om_hostmem_session_end(struct session *s)
{
    /* Pages the client may still map (it lives on, or forked) are not reused; those of a
     * process whose memory is gone are. */
    bool gone = memory_gone(s->pid);
    for (size_t i = 0; i < s->nhostmem; i++)
        om_hostmem_release(s->hostmem[i], gone);
    s->pinned_bytes = 0;
    free(s->hostmem);
    s->hostmem = NULL; /* nhostmem stays for session.c's last line, which clears it */
}
