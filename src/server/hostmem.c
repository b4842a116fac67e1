/* SPDX-License-Identifier: MIT */
/* Pinned host memory shared with clients: memfd pages mapped here, registered with the driver. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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
 * pointer works on both sides, as with unified addressing). Registration is
 * never undone while the server runs: cuMemHostUnregister waits for every
 * running kernel (DRIVER_FACTS.md). Freed regions go to a pool, zeroed, for
 * the next allocation of a size they fit.
 */

#define R(sym) om_server_real[OM_IDX_##sym]

/*
 * Regions no client holds: `pool` (the server's own pages, zeroed when taken again) and
 * `doomed` (to be unregistered and unmapped). While clients run, pooled regions go to the next
 * allocations that fit them; both lists are released only once no session runs
 * (om_hostmem_trim), since unregistering waits for every running kernel. Registering is cheap
 * and waits for nothing, so nothing is kept across that: the server's pinned memory and
 * descriptors return to their baseline whenever it is idle. Every registered byte counts
 * against the server's pinned budget (budget.c), pooled and doomed ones included, so what is
 * kept is bounded whatever clients do.
 */
static struct om_hostmem *pool, *doomed;
static uint64_t pinned_total; /* bytes registered: held, pooled and doomed (__atomic) */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t om_hostmem_total(void)
{
    return __atomic_load_n(&pinned_total, __ATOMIC_RELAXED);
}

/* Room for len more bytes under the server's budget; logged at most once a minute. */
static bool server_budget_take(size_t len)
{
    static uint64_t last_log_s;
    uint64_t now = (uint64_t)time(NULL);

    if (om_budget_take(&pinned_total, len, om_budget.server_pinned))
        return true;
    if (now >= last_log_s + 60) {
        last_log_s = now;
        om_warn("pinned host memory of %zu bytes refused: the server holds %llu bytes, its budget "
                "(OPENMPS_SERVER_PINNED_MAX) is %llu",
                len, (unsigned long long)om_hostmem_total(),
                (unsigned long long)om_budget.server_pinned);
    }
    return false;
}

static struct om_hostmem *pool_take(size_t len)
{
    struct om_hostmem **best = NULL;

    pthread_mutex_lock(&pool_lock);
    for (struct om_hostmem **pp = &pool; *pp; pp = &(*pp)->next)
        if ((*pp)->len >= len && (*pp)->len <= 2 * len && (!best || (*pp)->len < (*best)->len))
            best = pp;
    struct om_hostmem *h = best ? *best : NULL;
    if (h)
        *best = h->next;
    pthread_mutex_unlock(&pool_lock);
    if (h) {
        memset(h->addr, 0, h->len); /* nothing of the previous client's */
        h->next = NULL;
    }
    return h;
}

CUresult om_hostmem_alloc(size_t bytes, struct om_hostmem **ret)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len;
    struct om_hostmem *h;
    CUresult rc;

    if (bytes == 0 || bytes > (1ull << 40))
        return bytes ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
    len = (bytes + page - 1) / page * page;
    h = pool_take(len);
    if (h) {
        *ret = h;
        return CUDA_SUCCESS;
    }
    if (!server_budget_take(len))
        return CUDA_ERROR_OUT_OF_MEMORY;
    h = calloc(1, sizeof(*h));
    if (!h) {
        om_budget_give(&pinned_total, len);
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
    /* CU_MEMHOSTREGISTER_PORTABLE | DEVICEMAP */
    rc = ((CUresult(*)(void *, size_t, unsigned))R(cuMemHostRegister_v2))(h->addr, len, 0x3);
    if (rc != CUDA_SUCCESS) {
        munmap(h->addr, len);
        close(h->fd);
        free(h);
        om_budget_give(&pinned_total, len);
        return rc;
    }
    if (((CUresult(*)(CUdeviceptr *, void *, unsigned))R(cuMemHostGetDevicePointer_v2))(
            &h->device, h->addr, 0) != CUDA_SUCCESS)
        h->device = (CUdeviceptr)(uintptr_t)h->addr;
    *ret = h;
    return CUDA_SUCCESS;
fail:
    om_err("pinned memory of %zu bytes: %s", len, strerror(errno));
    if (h->fd >= 0)
        close(h->fd);
    free(h);
    om_budget_give(&pinned_total, len);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/*
 * Memory the client registered (cuMemHostRegister): it moved those pages onto
 * a memfd at the same address and sends the memfd; the server maps it (at the
 * same address when it can) and registers it. fd is consumed.
 */
CUresult om_hostmem_adopt(int fd, uint64_t client_addr, size_t len, struct om_hostmem **ret)
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
    if (!server_budget_take(len)) {
        close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    h = calloc(1, sizeof(*h));
    if (!h) {
        close(fd);
        om_budget_give(&pinned_total, len);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    h->fd = fd;
    h->len = len;
    h->adopted = true;
    h->addr = mmap((void *)(uintptr_t)client_addr, len, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
    if (h->addr == MAP_FAILED)
        h->addr = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (h->addr == MAP_FAILED) {
        close(fd);
        free(h);
        om_budget_give(&pinned_total, len);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    rc = ((CUresult(*)(void *, size_t, unsigned))R(cuMemHostRegister_v2))(h->addr, len, 0x3);
    if (rc != CUDA_SUCCESS) {
        munmap(h->addr, len);
        close(fd);
        free(h);
        om_budget_give(&pinned_total, len);
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
 * unregistered and unmapped here at the next moment no session runs, while the
 * client's own mapping (if it lives on) stays valid.
 */
void om_hostmem_release(struct om_hostmem *h, bool reusable)
{
    pthread_mutex_lock(&pool_lock);
    if (reusable && !h->adopted) {
        h->next = pool;
        pool = h;
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
    close(h->fd);
    om_budget_give(&pinned_total, h->len);
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
    struct om_hostmem *drop;
    uint64_t freed;
    size_t n;

    pthread_mutex_lock(&pool_lock);
    drop = doomed;
    doomed = NULL;
    while (pool) {
        struct om_hostmem *h = pool;
        pool = h->next;
        h->next = drop;
        drop = h;
    }
    pthread_mutex_unlock(&pool_lock);
    n = destroy_all(drop, &freed);
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
