/* SPDX-License-Identifier: MIT */
/* The client state layer: pinned host memory shared with the server (made by the server, or the
 * program's own pages registered), the table of its regions that copies consult, and the
 * exchanges that make and release it. The memory family's entry points (api/memory.c) call
 * these. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../common/msg.h"
#include "openmps/ops.h"
#include "../remote.h"
#include "../shim.h"

/* The driver's values (cuda.h). */
#define CU_MEMHOSTREGISTER_PORTABLE 0x01u
#define CU_MEMHOSTREGISTER_DEVICEMAP 0x02u
#define CU_MEMHOSTREGISTER_IOMEMORY 0x04u
#define CU_MEMHOSTREGISTER_READ_ONLY 0x08u
#define CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED 712
#define CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED 713

/*
 * cuMemHostAlloc asks the server for pages: it makes a memfd, maps and
 * registers it, and sends the memfd after its answer; this process maps it at
 * the server's address when that is free here (so the pointer means the same
 * memory on both sides, as unified addressing promises), elsewhere otherwise.
 * Copies between device memory and these pages are asynchronous DMA by the
 * server, no staging.
 *
 * Memory the program registers itself (cuMemHostRegister) keeps what it is
 * (hostmove.c decides): private anonymous read-write memory that no other
 * thread may be writing is moved, in place, onto a memfd the server maps and
 * registers too (same address, same bytes; forks keep private copies; given
 * back to private memory at cuMemHostUnregister). Any other range (a file's
 * MAP_SHARED mapping, shared memory, a read-only range, memory of a program
 * with other threads running) stays where and what it is, registered here
 * only: copies from and into it take the pageable path (staged, or through the
 * ring), which reads and writes the program's own pages. Such a copy is done
 * when its call returns: one from the device waits for the stream's earlier
 * work first, and one to the device reads the bytes during the call, which the
 * program cannot tell from a read in stream order, since every earlier copy of
 * the stream into such memory was done when its own call returned (see
 * docs/architecture.md, "Pinned memory", for what differs).
 */
struct pinned {
    uint8_t *addr;   /* here */
    uint64_t server; /* the server's address of the same pages */
    size_t len;
    CUdeviceptr device;
    unsigned flags;
    bool registered; /* a cuMemHostRegister region */
    bool shared;     /* the server maps the same pages (else: registered here only) */
};
static struct pinned *pinned;
static size_t npinned, pinned_cap;
static pthread_rwlock_t pinned_lock = PTHREAD_RWLOCK_INITIALIZER;

static int add_region(struct pinned r)
{
    int rc = 0;

    pthread_rwlock_wrlock(&pinned_lock);
    if (npinned == pinned_cap) {
        size_t cap = pinned_cap ? pinned_cap * 2 : 16;
        struct pinned *n = realloc(pinned, cap * sizeof(*n));
        if (n) {
            pinned = n;
            pinned_cap = cap;
        }
    }
    if (npinned < pinned_cap)
        pinned[npinned++] = r;
    else
        rc = -ENOMEM;
    pthread_rwlock_unlock(&pinned_lock);
    return rc;
}

/* The shared region holding [p, p + n): its server address for p. */
bool om_pinned_lookup(const void *p, size_t n, uint64_t *ret_server)
{
    bool found = false;

    pthread_rwlock_rdlock(&pinned_lock);
    for (size_t i = 0; i < npinned && !found; i++) {
        const struct pinned *r = &pinned[i];
        if (r->shared && (const uint8_t *)p >= r->addr && n <= r->len &&
            (size_t)((const uint8_t *)p - r->addr) <= r->len - n) {
            *ret_server = r->server + (uint64_t)((const uint8_t *)p - r->addr);
            found = true;
        }
    }
    pthread_rwlock_unlock(&pinned_lock);
    return found;
}

CUresult om_pinned_alloc(void **pp, size_t bytes, unsigned flags)
{
    uint64_t reply[3];
    uint32_t got = 0;
    REQ(req, 16);
    CUresult rc;
    int fd = -1;
    void *at;

    if (!pp || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, bytes);
    om_put_u64(&req, flags);
    /* The answer and the memfd after it are one exchange: no other call between. */
    om_ring_lock();
    rc = om_rcall_locked(OM_IDX_cuMemHostAlloc, &req, reply, sizeof(reply), &got);
    if (rc == CUDA_SUCCESS && (got != sizeof(reply) || (fd = om_recv_fd_locked()) < 0))
        rc = CUDA_ERROR_UNKNOWN;
    om_ring_unlock();
    if (rc != CUDA_SUCCESS) {
        if (fd >= 0)
            close(fd);
        return rc;
    }
    at = mmap((void *)(uintptr_t)reply[0], (size_t)reply[1], PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
    if (at == MAP_FAILED) {
        om_shim_log("pinned memory: 0x%llx is taken here; the pointer differs from the server's",
                    (unsigned long long)reply[0]);
        at = mmap(NULL, (size_t)reply[1], PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    close(fd);
    if (at != MAP_FAILED && add_region((struct pinned){at, reply[0], (size_t)reply[1], reply[2],
                                                       flags, false, true}) < 0) {
        munmap(at, (size_t)reply[1]);
        at = MAP_FAILED;
    }
    if (at == MAP_FAILED) { /* the server's region goes back now, not at the session's end */
        REQ(back, 8);
        om_put_u64(&back, reply[0]);
        om_rcall(OM_IDX_cuMemFreeHost, &back, NULL, 0, NULL);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = at;
    return CUDA_SUCCESS;
}

/* Removes the region that starts at `addr` (allocated, or registered) from the
 * table into *out; false when there is none. */
static bool take_pinned(const void *addr, bool registered, struct pinned *out)
{
    bool found = false;

    pthread_rwlock_wrlock(&pinned_lock);
    for (size_t i = 0; i < npinned; i++) {
        if (pinned[i].addr == addr && pinned[i].registered == registered) {
            *out = pinned[i];
            pinned[i] = pinned[--npinned];
            found = true;
            break;
        }
    }
    pthread_rwlock_unlock(&pinned_lock);
    return found;
}

CUresult om_pinned_free(void *p)
{
    struct pinned r;
    REQ(req, 8);

    if (!take_pinned(p, false, &r))
        return CUDA_ERROR_INVALID_VALUE;
    munmap(r.addr, r.len);
    om_put_u64(&req, r.server);
    return om_rcall(OM_IDX_cuMemFreeHost, &req, NULL, 0, NULL);
}

int om_pinned_device_pointer(void *p, CUdeviceptr *ret)
{
    int rc = -1;

    pthread_rwlock_rdlock(&pinned_lock);
    for (size_t i = 0; i < npinned; i++) {
        if (pinned[i].shared && (uint8_t *)p >= pinned[i].addr &&
            (uint8_t *)p < pinned[i].addr + pinned[i].len) {
            *ret = pinned[i].device + (CUdeviceptr)((uint8_t *)p - pinned[i].addr);
            rc = 0;
            break;
        }
    }
    pthread_rwlock_unlock(&pinned_lock);
    return rc;
}

/* Whether p lies in pinned memory of the program's, allocated or registered (shared with the
 * server or registered in place): *device its device pointer, when it has one (shared). */
bool om_pinned_find(const void *p, CUdeviceptr *device, bool *mapped)
{
    bool found = false;

    pthread_rwlock_rdlock(&pinned_lock);
    for (size_t i = 0; i < npinned && !found; i++) {
        const struct pinned *r = &pinned[i];
        if ((const uint8_t *)p >= r->addr && (const uint8_t *)p < r->addr + r->len) {
            *mapped = r->shared;
            *device = r->shared ? r->device + (CUdeviceptr)((const uint8_t *)p - r->addr) : 0;
            found = true;
        }
    }
    pthread_rwlock_unlock(&pinned_lock);
    return found;
}

CUresult om_pinned_flags(unsigned *flags, void *p)
{
    CUresult rc = CUDA_ERROR_INVALID_VALUE;

    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_rwlock_rdlock(&pinned_lock);
    for (size_t i = 0; i < npinned; i++) {
        if ((uint8_t *)p >= pinned[i].addr && (uint8_t *)p < pinned[i].addr + pinned[i].len) {
            *flags = pinned[i].flags;
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_rwlock_unlock(&pinned_lock);
    return rc;
}

int om_pinned_dst(void *p, size_t n, uint64_t *ret_server)
{
    const uint8_t *b = p;
    int rc = 0;

    pthread_rwlock_rdlock(&pinned_lock);
    for (size_t i = 0; i < npinned && rc == 0; i++) {
        const struct pinned *r = &pinned[i];
        if (b >= r->addr + r->len || b + n <= r->addr)
            continue;
        if (r->flags & CU_MEMHOSTREGISTER_READ_ONLY)
            rc = -1;
        else if (r->shared && b >= r->addr && n <= r->len && (size_t)(b - r->addr) <= r->len - n) {
            *ret_server = r->server + (uint64_t)(b - r->addr);
            rc = 1;
        }
    }
    pthread_rwlock_unlock(&pinned_lock);
    return rc;
}

/* The moved pages go to the server: their memfd on the socket just before the call that takes
 * it. The server's address and device pointer of the pages in reply[]. */
static CUresult share_moved(uintptr_t start, size_t len, int fd, uint64_t reply[2])
{
    uint32_t got = 0;
    REQ(req, 16);
    CUresult rc;

    om_put_u64(&req, start);
    om_put_u64(&req, len);
    om_ring_lock();
    rc =
        om_msg_send(om_shim.client.sock, OM_MSG_HOST_MEM, 0, NULL, 0, fd) < 0
            ? CUDA_ERROR_MPS_CONNECTION_FAILED
            : om_rcall_locked(OM_IDX_cuMemHostRegister_v2, &req, reply, 2 * sizeof(uint64_t), &got);
    om_ring_unlock();
    if (rc == CUDA_SUCCESS && got != 2 * sizeof(uint64_t))
        rc = CUDA_ERROR_UNKNOWN;
    return rc;
}

/*
 * Error codes, as the driver answered them on an H200 (driver 580, tests/gpu/probe/
 * hostreg_codes.cu): unknown flags, a hole, an unreadable page, a read-only page without
 * CU_MEMHOSTREGISTER_READ_ONLY, DEVICEMAP of memory it cannot map (a file's MAP_SHARED mapping
 * there) and IOMEMORY of ordinary memory all INVALID_VALUE. So DEVICEMAP of a range the server
 * is not given answers INVALID_VALUE too. IOMEMORY of a device's mapping answers NOT_SUPPORTED:
 * another process cannot map this one's I/O space.
 */
CUresult om_pinned_register(void *p, size_t bytes, unsigned flags)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)p & ~(page - 1);
    size_t len;
    uint64_t reply[2];
    struct om_hostclass what;
    CUresult rc;
    int fd;

    if (!p || !bytes || bytes > UINTPTR_MAX - (uintptr_t)p - page)
        return CUDA_ERROR_INVALID_VALUE;
    len = ((uintptr_t)p + bytes + page - 1) / page * page - start;
    if (flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                            CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY))
        return CUDA_ERROR_INVALID_VALUE;
    /* Pages already registered (or shared pinned memory): the driver refuses overlapping
     * registrations too. */
    pthread_rwlock_rdlock(&pinned_lock);
    for (size_t i = 0; i < npinned; i++) {
        if ((uintptr_t)pinned[i].addr < start + len &&
            start < (uintptr_t)pinned[i].addr + pinned[i].len) {
            pthread_rwlock_unlock(&pinned_lock);
            return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
    }
    pthread_rwlock_unlock(&pinned_lock);
    if (om_host_classify(start, len, &what) < 0 || !what.readable ||
        (!what.writable && !(flags & CU_MEMHOSTREGISTER_READ_ONLY)))
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & CU_MEMHOSTREGISTER_IOMEMORY)
        return what.device_file ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
    if (!what.movable) {
        /* Stays what it is: registered here only, copies staged; no device pointer. */
        if (flags & CU_MEMHOSTREGISTER_DEVICEMAP)
            return CUDA_ERROR_INVALID_VALUE;
        if (add_region((struct pinned){(uint8_t *)start, 0, len, 0, flags, true, false}) < 0)
            return CUDA_ERROR_OUT_OF_MEMORY;
        return CUDA_SUCCESS;
    }
    fd = om_host_move(start, len);
    if (fd < 0)
        return CUDA_ERROR_INVALID_VALUE; /* the pages are unchanged */
    rc = share_moved(start, len, fd, reply);
    close(fd);
    if (rc == CUDA_SUCCESS && add_region((struct pinned){(uint8_t *)start, reply[0], len, reply[1],
                                                         flags, true, true}) < 0) {
        REQ(fr, 8);
        om_put_u64(&fr, reply[0]);
        om_rcall(OM_IDX_cuMemFreeHost, &fr, NULL, 0, NULL);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc != CUDA_SUCCESS)
        om_host_unmove(start, len); /* not registered: private memory again */
    return rc;
}

/* The server lets go of the pages; moved ones become private memory again (they stay on the
 * memfd, and private across forks, while another thread runs: hostmove.c). A range registered
 * here only is left as it was: nothing was changed. */
CUresult om_pinned_unregister(void *p)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uint8_t *start = (uint8_t *)((uintptr_t)p & ~(page - 1));
    struct pinned r;
    REQ(req, 8);
    CUresult rc;

    if (!take_pinned(start, true, &r))
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    if (!r.shared)
        return CUDA_SUCCESS;
    om_put_u64(&req, r.server);
    rc = om_rcall(OM_IDX_cuMemFreeHost, &req, NULL, 0, NULL);
    om_host_unmove((uintptr_t)r.addr, r.len);
    return rc;
}
