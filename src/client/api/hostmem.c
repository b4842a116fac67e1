/* SPDX-License-Identifier: MIT */
/* Remote mode: pinned host memory shared with the server, and copies straight from and into it. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../common/msg.h"
#include "openmps/ops.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "../shim.h"

/*
 * cuMemHostAlloc asks the server for pages: it makes a memfd, maps and
 * registers it, and sends the memfd after its answer; this process maps it at
 * the server's address when that is free here (so the pointer means the same
 * memory on both sides, as unified addressing promises), elsewhere otherwise.
 * Copies between device memory and these pages are asynchronous DMA by the
 * server, no staging. Memory the program registers itself
 * (cuMemHostRegister) is moved, in place, onto a memfd: its pages are copied
 * into one and the memfd is mapped over them at the same address, so the
 * program's pointer and data stay what they were; the server then maps and
 * registers the same pages.
 */
struct pinned {
    uint8_t *addr;   /* here */
    uint64_t server; /* the server's address of the same pages */
    size_t len;
    CUdeviceptr device;
    unsigned flags;
    bool registered; /* a cuMemHostRegister region: not shared */
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
        if ((const uint8_t *)p >= r->addr && n <= r->len &&
            (size_t)((const uint8_t *)p - r->addr) <= r->len - n) {
            *ret_server = r->server + (uint64_t)((const uint8_t *)p - r->addr);
            found = true;
        }
    }
    pthread_rwlock_unlock(&pinned_lock);
    return found;
}

CUresult om_r_cuMemHostAlloc(void **pp, size_t bytes, unsigned flags)
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
    if (at == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (add_region((struct pinned){at, reply[0], (size_t)reply[1], reply[2], flags, false}) < 0) {
        munmap(at, (size_t)reply[1]);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = at;
    return CUDA_SUCCESS;
}

CUresult om_pinned_alloc(void **pp, size_t bytes)
{
    return om_r_cuMemHostAlloc(pp, bytes, 0);
}

CUresult om_r_cuMemFreeHost(void *p);

CUresult om_pinned_free(void *p)
{
    return om_r_cuMemFreeHost(p);
}

CUresult om_r_cuMemAllocHost_v2(void **pp, size_t bytes)
{
    return om_r_cuMemHostAlloc(pp, bytes, 0);
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

CUresult om_r_cuMemFreeHost(void *p)
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
        if ((uint8_t *)p >= pinned[i].addr && (uint8_t *)p < pinned[i].addr + pinned[i].len) {
            *ret = pinned[i].device + (CUdeviceptr)((uint8_t *)p - pinned[i].addr);
            rc = 0;
            break;
        }
    }
    pthread_rwlock_unlock(&pinned_lock);
    return rc;
}

CUresult om_r_cuMemHostGetDevicePointer_v2(CUdeviceptr *dptr, void *p, unsigned flags)
{
    if (!dptr || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return om_pinned_device_pointer(p, dptr) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult om_r_cuMemHostGetFlags(unsigned *flags, void *p)
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

CUresult om_r_cuMemHostRegister_v2(void *p, size_t bytes, unsigned flags)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)p & ~(page - 1);
    size_t len = ((uintptr_t)p + bytes + page - 1) / page * page - start;
    uint64_t reply[2];
    uint32_t got = 0;
    REQ(req, 16);
    CUresult rc;
    int fd;

    if (!p || !bytes)
        return CUDA_ERROR_INVALID_VALUE;
    /* Pages already moved for another registration (or shared pinned memory)
     * cannot move again: the driver refuses overlapping registrations too. */
    pthread_rwlock_rdlock(&pinned_lock);
    for (size_t i = 0; i < npinned; i++) {
        if ((uintptr_t)pinned[i].addr < start + len &&
            start < (uintptr_t)pinned[i].addr + pinned[i].len) {
            pthread_rwlock_unlock(&pinned_lock);
            return 712; /* CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED */
        }
    }
    pthread_rwlock_unlock(&pinned_lock);
    /* The pages move onto a memfd, in place: same address, same bytes. */
    fd = memfd_create("openmps-registered", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* The whole pages are copied, also bytes around the program's range that
     * belong to its neighbours: a raw system call, so that checkers which
     * track object bounds (ASan intercepts pwrite) do not take it for an
     * overflow. */
    if (ftruncate(fd, (off_t)len) < 0 ||
        syscall(SYS_pwrite64, fd, (void *)start, len, (off_t)0) != (long)len ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0 ||
        mmap((void *)start, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
            MAP_FAILED) {
        close(fd);
        return CUDA_ERROR_INVALID_VALUE; /* the pages are unchanged unless the last step ran */
    }
    om_put_u64(&req, start);
    om_put_u64(&req, len);
    /* The memfd goes on the socket just before the call that takes it. */
    om_ring_lock();
    rc = om_msg_send(om_shim.client.sock, OM_MSG_HOST_MEM, 0, NULL, 0, fd) < 0
             ? CUDA_ERROR_MPS_CONNECTION_FAILED
             : om_rcall_locked(OM_IDX_cuMemHostRegister_v2, &req, reply, sizeof(reply), &got);
    om_ring_unlock();
    close(fd);
    if (rc == CUDA_SUCCESS && got != sizeof(reply))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc != CUDA_SUCCESS)
        return rc; /* the memory stays usable, on the memfd, unregistered */
    if (add_region((struct pinned){(uint8_t *)start, reply[0], len, reply[1], flags, true}) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return CUDA_SUCCESS;
}

/* The program keeps its memory (now on the memfd); the server lets go of it. */
CUresult om_r_cuMemHostUnregister(void *p)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uint8_t *start = (uint8_t *)((uintptr_t)p & ~(page - 1));
    struct pinned r;
    REQ(req, 8);

    if (!take_pinned(start, true, &r))
        return 713; /* CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED */
    om_put_u64(&req, r.server);
    return om_rcall(OM_IDX_cuMemFreeHost, &req, NULL, 0, NULL);
}
