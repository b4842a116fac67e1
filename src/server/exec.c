/* SPDX-License-Identifier: MIT */
/* The executor: runs a client's driver calls on the real driver, inside the rules of
 * ARCHITECTURE.md. */
#include <errno.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "../common/image.h"
#include "../common/log.h"
#include "../common/msg.h"
#include "../common/wire.h"
#include "internal.h"
#include "openmps/ops.h"

/*
 * Every handler takes the request (untrusted bytes, read through om_rbuf),
 * checks every handle and address range against what this client owns, and
 * returns a CUresult; answers go into `out`. The rules that keep clients
 * independent: never the context's NULL stream (each client gets its own
 * non-blocking streams), synchronous calls become asynchronous ones on the
 * client's stream followed by a wait on that stream only, and nothing that
 * waits for every kernel (cuMemFree, module unload) is issued for a client.
 */

#define REAL(sym) ((void *)om_server_real[OM_IDX_##sym])
typedef CUresult (*fn_v)(void);

struct call {
    struct session *s;
    struct om_rbuf in;
    struct om_wbuf out;
};

/* A client's own errors are logged 16 times per session at most, then once more to say so:
 * a program that repeats a bad call in a loop must not flood server.log, which every user's
 * server shares. */
#define CLIENT_ERRORS_LOGGED 16
#define client_err(s, ...)                                                                         \
    do {                                                                                           \
        if ((s)->errors_logged < CLIENT_ERRORS_LOGGED)                                             \
            om_err(__VA_ARGS__);                                                                   \
        else if ((s)->errors_logged == CLIENT_ERRORS_LOGGED)                                       \
            om_err("client %d: more errors of its requests; they are not logged", (int)(s)->pid);  \
        if ((s)->errors_logged <= CLIENT_ERRORS_LOGGED)                                            \
            (s)->errors_logged++;                                                                  \
    } while (0)

__attribute__((noinline, cold)) static void log_bad_request(struct session *s)
{
    client_err(s, "client %d: malformed request", (int)s->pid);
}

static CUresult bad_request(struct call *c)
{
    log_bad_request(c->s);
    return CUDA_ERROR_INVALID_VALUE;
}

#define ARGS_OK(c) ((c)->in.bad ? bad_request(c) : CUDA_SUCCESS)

/* The bytes the client staged for this call (session.c): exactly n of them, or why not (a
 * budget refused some, or the client staged another length: `mismatch`). */
static CUresult staged(struct call *c, uint64_t n, CUresult mismatch)
{
    if (c->s->stage_error != CUDA_SUCCESS)
        return c->s->stage_error;
    return n == c->s->stage_len ? CUDA_SUCCESS : mismatch;
}

/* The client's stream for a handle it passed: its own default stream for the
 * NULL, legacy and per-thread handles (never the shared context's NULL
 * stream), or a stream it created. NULL when it does not own the handle. */
/* The event a stream's later readers wait on (one per stream, reused: a wait
 * takes the event's state when it is enqueued). */
static CUevent sync_event(struct session *s, CUstream st, CUresult *rc)
{
    CUresult (*create)(CUevent *, unsigned) = REAL(cuEventCreate);

    for (size_t i = 0; i < s->nsync_events; i++)
        if (s->sync_events[i].stream == st)
            return s->sync_events[i].event;
    if (s->nsync_events == s->sync_events_cap) {
        size_t cap = s->sync_events_cap ? s->sync_events_cap * 2 : 8;
        struct om_sync_event *n = realloc(s->sync_events, cap * sizeof(*n));
        if (!n) {
            *rc = CUDA_ERROR_OUT_OF_MEMORY;
            return NULL;
        }
        s->sync_events = n;
        s->sync_events_cap = cap;
    }
    CUevent ev = NULL;
    *rc = create(&ev, CU_EVENT_DISABLE_TIMING);
    if (*rc != CUDA_SUCCESS)
        return NULL;
    s->sync_events[s->nsync_events++] = (struct om_sync_event){st, ev};
    return ev;
}

/* `later` waits for everything enqueued on `first` so far. `enqueue`: the caller enqueues an
 * operation on `later` next (else it only queries or waits, and must not be held). */
static CUresult order_after(struct session *s, CUstream later, CUstream first, bool enqueue)
{
    CUresult rc = CUDA_SUCCESS;
    CUevent ev = sync_event(s, first, &rc);

    if (!ev)
        return rc;
    if (enqueue)
        om_sched_before(s, first); /* the record is an operation on `first` */
    rc = ((CUresult(*)(CUevent, CUstream))REAL(cuEventRecord))(ev, first);
    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(CUstream, CUevent, unsigned))REAL(cuStreamWaitEvent))(later, ev, 0);
    return rc;
}

/*
 * The client's stream for a handle it passed: its own default stream for the
 * NULL, legacy and per-thread handles (never the shared context's NULL
 * stream), or a stream it created. NULL when it does not own the handle.
 *
 * The legacy default stream's semantics inside one client are rebuilt with
 * events (ARCHITECTURE.md): work on it waits for the client's blocking streams,
 * and work on a blocking stream waits for it. Streams created non-blocking and
 * clients using only the default stream pay nothing.
 */
static CUstream find_stream(struct session *s, uint64_t h, bool enqueue, CUresult *rc)
{
    CUstream st;

    *rc = CUDA_SUCCESS;
    if (h == 0 || h == (uint64_t)(uintptr_t)CU_STREAM_LEGACY ||
        h == (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD) {
        if (!s->default_stream) {
            CUresult (*create)(CUstream *, unsigned) = REAL(cuStreamCreate);
            *rc = create(&s->default_stream, CU_STREAM_NON_BLOCKING);
            if (*rc != CUDA_SUCCESS)
                return NULL;
            if (om_idle_track(s->default_stream) < 0) {
                ((CUresult(*)(CUstream))REAL(cuStreamDestroy_v2))(s->default_stream);
                s->default_stream = NULL;
                *rc = CUDA_ERROR_OUT_OF_MEMORY;
                return NULL;
            }
        }
        st = s->default_stream;
        if (enqueue)
            om_sched_before(s, st);
        for (size_t i = 0; i < s->blocking.n && *rc == CUDA_SUCCESS; i++)
            *rc = order_after(s, st, (CUstream)(uintptr_t)s->blocking.v[i], enqueue);
        return *rc == CUDA_SUCCESS ? st : NULL;
    }
    if (!om_handles_has(&s->streams, h)) {
        *rc = CUDA_ERROR_INVALID_HANDLE;
        return NULL;
    }
    st = (CUstream)(uintptr_t)h;
    if (enqueue)
        om_sched_before(s, st);
    if (s->default_stream && om_handles_has(&s->blocking, h))
        *rc = order_after(s, st, s->default_stream, enqueue);
    return *rc == CUDA_SUCCESS ? st : NULL;
}

/* The stream an operation is about to be enqueued on: it may wait for the scheduler first. */
static CUstream client_stream(struct session *s, uint64_t h, CUresult *rc)
{
    return find_stream(s, h, true, rc);
}

/* Waits for this client's streams (and reports a posted call's error). */
CUresult om_exec_sync_client(struct session *s)
{
    CUresult (*sync)(CUstream) = om_wait_stream;
    CUresult rc = CUDA_SUCCESS, r;

    if (s->default_stream && (r = sync(s->default_stream)) != CUDA_SUCCESS)
        rc = r;
    for (size_t i = 0; i < s->streams.n; i++)
        if ((r = sync((CUstream)(uintptr_t)s->streams.v[i])) != CUDA_SUCCESS && !rc)
            rc = r;
    return rc;
}

static CUresult take_async_error(struct session *s, CUresult rc)
{
    if (rc == CUDA_SUCCESS && s->async_error != CUDA_SUCCESS) {
        rc = s->async_error;
        s->async_error = CUDA_SUCCESS;
    }
    return rc;
}

/* ------------------------------------------------------------------ devices */

static CUresult device_arg(struct call *c, CUdevice *dev)
{
    uint64_t d = om_get_u64(&c->in);

    if (c->in.bad)
        return bad_request(c);
    if (d >= (uint64_t)om_server_ndevices())
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = (CUdevice)d;
    return CUDA_SUCCESS;
}

static CUresult x_cuDeviceGetName(struct call *c)
{
    char name[256] = "";
    CUresult (*fn)(char *, int, CUdevice) = REAL(cuDeviceGetName);
    CUdevice dev;
    CUresult rc = device_arg(c, &dev);

    if (rc == CUDA_SUCCESS && (rc = fn(name, sizeof(name), dev)) == CUDA_SUCCESS)
        om_put_bytes(&c->out, name, strnlen(name, sizeof(name)));
    return rc;
}

static CUresult x_cuDeviceGetPCIBusId(struct call *c)
{
    char bus[64] = "";
    CUresult (*fn)(char *, int, CUdevice) = REAL(cuDeviceGetPCIBusId);
    CUdevice dev;
    CUresult rc = device_arg(c, &dev);

    if (rc == CUDA_SUCCESS && (rc = fn(bus, sizeof(bus), dev)) == CUDA_SUCCESS)
        om_put_bytes(&c->out, bus, strnlen(bus, sizeof(bus)));
    return rc;
}

static CUresult x_cuDeviceTotalMem_v2(struct call *c)
{
    CUresult (*fn)(size_t *, CUdevice) = REAL(cuDeviceTotalMem_v2);
    size_t bytes = 0;
    CUdevice dev;
    CUresult rc = device_arg(c, &dev);

    if (rc == CUDA_SUCCESS && (rc = fn(&bytes, dev)) == CUDA_SUCCESS)
        om_put_u64(&c->out, bytes);
    return rc;
}

static CUresult x_cuDeviceGetAttribute(struct call *c)
{
    CUresult (*fn)(int *, int, CUdevice) = REAL(cuDeviceGetAttribute);
    int attrib = (int)(uint32_t)om_get_u64(&c->in), v = 0;
    CUdevice dev;
    CUresult rc = device_arg(c, &dev);

    if (rc == CUDA_SUCCESS && (rc = fn(&v, attrib, dev)) == CUDA_SUCCESS)
        om_put_u64(&c->out, (uint64_t)(int64_t)v);
    return rc;
}

static CUresult x_cuDeviceGetUuid_v2(struct call *c)
{
    CUresult (*fn)(void *, CUdevice) = REAL(cuDeviceGetUuid_v2);
    uint8_t uuid[16];
    CUdevice dev;
    CUresult rc = device_arg(c, &dev);

    if (!om_server_has(OM_IDX_cuDeviceGetUuid_v2))
        fn = REAL(cuDeviceGetUuid);
    if (rc == CUDA_SUCCESS && (rc = fn(uuid, dev)) == CUDA_SUCCESS)
        om_put_bytes(&c->out, uuid, sizeof(uuid));
    return rc;
}

/* ------------------------------------------------------------------ memory */

/* Device memory of the call's byte count, recorded as the client's; answers its address. A
 * managed allocation (the client shadows it at that address) is always a new one, and is never
 * kept for reuse when freed (devmem.c). */
static CUresult alloc_for_client(struct call *c, bool managed, uint64_t *size)
{
    uint64_t bytes = om_get_u64(&c->in), base = 0, mem = 0;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    rc = managed ? om_devmem_alloc(bytes, &base, size, &mem)
                 : om_devmem_take(c->s, bytes, &base, size, &mem);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (om_ranges_add(&c->s->allocs, base, *size, mem, true) < 0) {
        om_devmem_free(base, *size, mem);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->s->allocs.v[c->s->allocs.n - 1].managed = managed;
    om_put_u64(&c->out, base);
    return CUDA_SUCCESS;
}

static CUresult x_cuMemAlloc_v2(struct call *c)
{
    uint64_t size = 0;

    return alloc_for_client(c, false, &size);
}

static CUresult x_cuMemAllocManaged(struct call *c)
{
    /* Device memory at an address the client then shadows on its side. */
    uint64_t size = 0;
    CUresult rc = alloc_for_client(c, true, &size);

    if (rc != CUDA_SUCCESS)
        return rc;
    om_put_u64(&c->out, size);
    return CUDA_SUCCESS;
}

/* A client's pinned bytes, page-rounded as regions are, under its budget (budget.c). */
static uint64_t pinned_len(uint64_t bytes)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);

    return bytes > UINT64_MAX - page ? UINT64_MAX : (bytes + page - 1) / page * page;
}

static CUresult pinned_budget_take(struct session *s, uint64_t bytes, const char *what)
{
    if (s->nhostmem >= om_budget.client_pinned_regions ||
        !om_budget_take(&s->pinned_bytes, pinned_len(bytes), om_budget.client_pinned))
        return om_budget_refuse(s, OM_BUDGET_PINNED, what);
    return CUDA_SUCCESS;
}

static void pinned_budget_give(struct session *s, uint64_t bytes)
{
    om_budget_give(&s->pinned_bytes, pinned_len(bytes));
}

static int hostmem_slot(struct session *s)
{
    if (s->nhostmem == s->hostmem_cap) {
        size_t cap = s->hostmem_cap ? s->hostmem_cap * 2 : 8;
        struct om_hostmem **n = realloc(s->hostmem, cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        s->hostmem = n;
        s->hostmem_cap = cap;
    }
    return 0;
}

/* Pinned host memory: the region's memfd goes to the client after the answer. */
static CUresult x_cuMemHostAlloc(struct call *c)
{
    uint64_t bytes = om_get_u64(&c->in);
    struct om_hostmem *h;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    rc = hostmem_slot(c->s) < 0 ? CUDA_ERROR_OUT_OF_MEMORY
                                : pinned_budget_take(c->s, bytes, "cuMemHostAlloc");
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = om_hostmem_alloc(bytes, &h);
    if (rc != CUDA_SUCCESS) {
        pinned_budget_give(c->s, bytes);
        return rc;
    }
    c->s->pinned_bytes += h->len - pinned_len(bytes); /* a pooled region may be larger */
    c->s->hostmem[c->s->nhostmem++] = h;
    c->s->send_fd_after = h->fd;
    om_put_u64(&c->out, (uint64_t)(uintptr_t)h->addr);
    om_put_u64(&c->out, h->len);
    om_put_u64(&c->out, h->device);
    return CUDA_SUCCESS;
}

/* The client's own memory, moved onto a memfd it sends on its socket just
 * before this call. */
static CUresult x_cuMemHostRegister_v2(struct call *c)
{
    uint64_t addr = om_get_u64(&c->in), len = om_get_u64(&c->in);
    struct om_msg *m = malloc(sizeof(*m));
    struct om_hostmem *h;
    int fd = -1;
    CUresult rc = ARGS_OK(c);

    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* The descriptor message is always taken, even for a malformed request,
     * so that the next registration pairs with its own. */
    if (om_msg_recv(c->s->sock, m, &fd, 2000) != 0 || m->hdr.type != OM_MSG_HOST_MEM || fd < 0)
        rc = CUDA_ERROR_INVALID_VALUE;
    free(m);
    if (rc != CUDA_SUCCESS) {
        if (fd >= 0)
            close(fd);
        return rc;
    }
    if (len == 0 || len > (1ull << 40)) {
        close(fd);
        return CUDA_ERROR_INVALID_VALUE;
    }
    rc = hostmem_slot(c->s) < 0 ? CUDA_ERROR_OUT_OF_MEMORY
                                : pinned_budget_take(c->s, len, "cuMemHostRegister");
    if (rc != CUDA_SUCCESS) {
        close(fd);
        return rc;
    }
    rc = om_hostmem_adopt(fd, addr, len, &h);
    if (rc != CUDA_SUCCESS) {
        pinned_budget_give(c->s, len);
        return rc;
    }
    c->s->hostmem[c->s->nhostmem++] = h;
    om_put_u64(&c->out, (uint64_t)(uintptr_t)h->addr);
    om_put_u64(&c->out, h->device);
    return CUDA_SUCCESS;
}

static CUresult x_cuMemFreeHost(struct call *c)
{
    uint64_t addr = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    for (size_t i = 0; i < c->s->nhostmem; i++) {
        struct om_hostmem *h = c->s->hostmem[i];
        if ((uint64_t)(uintptr_t)h->addr != addr)
            continue;
        rc = om_exec_sync_client(c->s); /* its own copies may still use the pages */
        c->s->hostmem[i] = c->s->hostmem[--c->s->nhostmem];
        pinned_budget_give(c->s, h->len);
        om_hostmem_release(h, true);
        return take_async_error(c->s, rc);
    }
    return CUDA_ERROR_INVALID_VALUE;
}

/* Copies between device memory and pinned memory: straight from and into the
 * shared pages, asynchronous like the driver's. */
static CUresult x_cuMemcpyHtoDAsync_v2(struct call *c)
{
    uint64_t dst = om_get_u64(&c->in), src = om_get_u64(&c->in), n = om_get_u64(&c->in);
    uint64_t sh = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!om_ranges_cover(&c->s->allocs, dst, n) || !om_hostmem_find(c->s, src, n))
        return CUDA_ERROR_INVALID_VALUE;
    st = client_stream(c->s, sh, &rc);
    if (!st)
        return rc;
    return ((CUresult(*)(CUdeviceptr, const void *, size_t, CUstream))REAL(cuMemcpyHtoDAsync_v2))(
        dst, (const void *)(uintptr_t)src, n, st);
}

static CUresult x_cuMemcpyDtoHAsync_v2(struct call *c)
{
    uint64_t dst = om_get_u64(&c->in), src = om_get_u64(&c->in), n = om_get_u64(&c->in);
    uint64_t sh = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!om_ranges_cover(&c->s->allocs, src, n) || !om_hostmem_find(c->s, dst, n))
        return CUDA_ERROR_INVALID_VALUE;
    st = client_stream(c->s, sh, &rc);
    if (!st)
        return rc;
    return ((CUresult(*)(void *, CUdeviceptr, size_t, CUstream))REAL(cuMemcpyDtoHAsync_v2))(
        (void *)(uintptr_t)dst, src, n, st);
}

static CUresult x_cuMemFree_v2(struct call *c)
{
    uint64_t base = om_get_u64(&c->in);
    struct om_range *r;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    r = om_ranges_find_base(&c->s->allocs, base);
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    /* The program expects its own work on the memory to be done; other
     * clients' work is not waited for. */
    rc = om_exec_sync_client(c->s);
    if (r->managed)
        om_devmem_free(r->base, r->size, r->mem);
    else
        om_devmem_give(c->s, r->base, r->size, r->mem);
    om_ranges_remove(&c->s->allocs, r);
    return take_async_error(c->s, rc);
}

static CUresult x_cuMemGetInfo_v2(struct call *c)
{
    CUresult (*fn)(size_t *, size_t *) = REAL(cuMemGetInfo_v2);
    size_t free_bytes = 0, total = 0;
    CUresult rc = fn(&free_bytes, &total);

    if (rc == CUDA_SUCCESS) {
        om_put_u64(&c->out, free_bytes);
        om_put_u64(&c->out, total);
    }
    return rc;
}

/* Host bytes to device memory through the pinned reply buffer, which a call that copies to the
 * device leaves empty (replybuf.c says why the driver never sees the request's or the staging
 * buffer's pageable bytes), a piece at a time, each waited for: the buffer, the request and the
 * staging buffer are reused by the next call. */
static CUresult htod_through_reply(struct call *c, CUdeviceptr dst, const uint8_t *src, uint64_t n,
                                   CUstream st)
{
    CUresult rc = CUDA_SUCCESS;

    for (uint64_t off = 0; off < n && rc == CUDA_SUCCESS; off += c->out.cap) {
        size_t piece = n - off < c->out.cap ? (size_t)(n - off) : c->out.cap;
        memcpy(c->out.p, src + off, piece);
        rc = ((CUresult(*)(CUdeviceptr, const void *, size_t, CUstream))REAL(cuMemcpyHtoDAsync_v2))(
            dst + off, c->out.p, piece, st);
        if (rc == CUDA_SUCCESS)
            rc = om_wait_stream(st);
    }
    return rc;
}

static CUresult x_cuMemcpyHtoD_v2(struct call *c)
{
    uint64_t dst = om_get_u64(&c->in), n = om_get_u64(&c->in), sh = om_get_u64(&c->in);
    size_t inline_len = 0;
    const void *inline_bytes = om_get_rest(&c->in, &inline_len);
    const uint8_t *src = c->s->stage;
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    /* A small copy's bytes follow the arguments; a larger one's were staged before. */
    if (inline_len) {
        if (inline_len != n || n > OM_INLINE_COPY_MAX)
            return CUDA_ERROR_INVALID_VALUE;
        src = inline_bytes;
    } else if ((rc = staged(c, n, CUDA_ERROR_INVALID_VALUE)) != CUDA_SUCCESS) {
        return rc;
    }
    if (!om_ranges_cover(&c->s->allocs, dst, n))
        return CUDA_ERROR_INVALID_VALUE;
    st = client_stream(c->s, sh, &rc);
    if (!st)
        return rc;
    return take_async_error(c->s, htod_through_reply(c, dst, src, n, st));
}

static CUresult x_cuMemcpyDtoH_v2(struct call *c)
{
    CUresult (*copy)(void *, CUdeviceptr, size_t, CUstream) = REAL(cuMemcpyDtoHAsync_v2);
    CUresult (*sync)(CUstream) = om_wait_stream;
    uint64_t src = om_get_u64(&c->in), n = om_get_u64(&c->in), sh = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (n > c->out.cap || !om_ranges_cover(&c->s->allocs, src, n))
        return CUDA_ERROR_INVALID_VALUE;
    st = client_stream(c->s, sh, &rc);
    if (!st)
        return rc;
    rc = copy(c->out.p, src, n, st);
    if (rc == CUDA_SUCCESS)
        rc = sync(st);
    if (rc == CUDA_SUCCESS)
        c->out.len = n;
    return take_async_error(c->s, rc);
}

static CUresult x_cuMemcpyDtoD_v2(struct call *c)
{
    CUresult (*copy)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = REAL(cuMemcpyDtoDAsync_v2);
    CUresult (*sync)(CUstream) = om_wait_stream;
    uint64_t dst = om_get_u64(&c->in), src = om_get_u64(&c->in), n = om_get_u64(&c->in);
    uint64_t sh = om_get_u64(&c->in), wait = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!om_ranges_cover(&c->s->allocs, dst, n) || !om_ranges_cover(&c->s->allocs, src, n))
        return CUDA_ERROR_INVALID_VALUE;
    st = client_stream(c->s, sh, &rc);
    if (!st)
        return rc;
    rc = copy(dst, src, n, st);
    if (rc == CUDA_SUCCESS && wait)
        rc = sync(st);
    return take_async_error(c->s, rc);
}

static CUresult x_cuMemsetD8_v2(struct call *c)
{
    uint64_t dst = om_get_u64(&c->in), value = om_get_u64(&c->in), width = om_get_u64(&c->in);
    uint64_t count = om_get_u64(&c->in), sh = om_get_u64(&c->in), wait = om_get_u64(&c->in);
    CUresult (*sync)(CUstream) = om_wait_stream;
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((width != 1 && width != 2 && width != 4) || count > UINT64_MAX / 4 ||
        !om_ranges_cover(&c->s->allocs, dst, count * width))
        return CUDA_ERROR_INVALID_VALUE;
    st = client_stream(c->s, sh, &rc);
    if (!st)
        return rc;
    if (width == 1)
        rc = ((CUresult(*)(CUdeviceptr, unsigned char, size_t, CUstream))REAL(cuMemsetD8Async))(
            dst, (unsigned char)value, count, st);
    else if (width == 2)
        rc = ((CUresult(*)(CUdeviceptr, unsigned short, size_t, CUstream))REAL(cuMemsetD16Async))(
            dst, (unsigned short)value, count, st);
    else
        rc = ((CUresult(*)(CUdeviceptr, unsigned, size_t, CUstream))REAL(cuMemsetD32Async))(
            dst, (unsigned)value, count, st);
    if (rc == CUDA_SUCCESS && wait)
        rc = sync(st);
    return take_async_error(c->s, rc);
}

/* The bytes a pitched region touches: rows of `width` bytes, `pitch` apart. */
static bool region_ok(struct session *s, uint64_t base, uint64_t pitch, uint64_t width,
                      uint64_t height)
{
    if (!height || !width)
        return true;
    if (width > pitch || height - 1 > (UINT64_MAX - width) / pitch)
        return false;
    return om_ranges_cover(&s->allocs, base, (height - 1) * pitch + width);
}

static CUresult x_cuMemsetD2D8_v2(struct call *c)
{
    uint64_t dst = om_get_u64(&c->in), pitch = om_get_u64(&c->in), value = om_get_u64(&c->in);
    uint64_t elem = om_get_u64(&c->in), w = om_get_u64(&c->in), h = om_get_u64(&c->in);
    uint64_t sh = om_get_u64(&c->in), wait = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((elem != 1 && elem != 2 && elem != 4) || w > UINT64_MAX / 4 ||
        !region_ok(c->s, dst, pitch, w * elem, h))
        return CUDA_ERROR_INVALID_VALUE;
    st = client_stream(c->s, sh, &rc);
    if (!st)
        return rc;
    if (elem == 1)
        rc = ((CUresult(*)(CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream))REAL(
            cuMemsetD2D8Async))(dst, pitch, (unsigned char)value, w, h, st);
    else if (elem == 2)
        rc = ((CUresult(*)(CUdeviceptr, size_t, unsigned short, size_t, size_t, CUstream))REAL(
            cuMemsetD2D16Async))(dst, pitch, (unsigned short)value, w, h, st);
    else
        rc = ((CUresult(*)(CUdeviceptr, size_t, unsigned, size_t, size_t, CUstream))REAL(
            cuMemsetD2D32Async))(dst, pitch, (unsigned)value, w, h, st);
    if (rc == CUDA_SUCCESS && wait)
        rc = om_wait_stream(st);
    return take_async_error(c->s, rc);
}

/* A staged 2D copy to the device (m complete, its source the packed staging buffer), through
 * the pinned reply buffer (replybuf.c): groups of whole rows, or a row in pieces where one row
 * is wider than the buffer. */
static CUresult copy2d_htod_pieces(struct call *c, CUDA_MEMCPY2D *m, uint64_t sh)
{
    const uint8_t *src = m->srcHost;
    size_t w = m->WidthInBytes, h = m->Height, cap = c->out.cap;
    size_t rows = w <= cap ? cap / w : 1; /* w > 0: x_cuMemcpy2D_v2 refuses 0 */
    CUdeviceptr dst = m->dstDevice;
    CUresult rc = CUDA_SUCCESS;
    CUstream st = client_stream(c->s, sh, &rc);

    if (!st)
        return rc;
    for (size_t r = 0; r < h && rc == CUDA_SUCCESS; r += rows) {
        size_t n = h - r < rows ? h - r : rows;
        if (w > cap) { /* one wide row, a piece at a time */
            rc = htod_through_reply(c, dst + r * m->dstPitch, src + r * w, w, st);
            continue;
        }
        memcpy(c->out.p, src + r * w, n * w);
        m->srcHost = c->out.p;
        m->Height = n;
        m->dstDevice = dst + r * m->dstPitch;
        rc = ((CUresult(*)(const CUDA_MEMCPY2D *, CUstream))REAL(cuMemcpy2DAsync_v2))(m, st);
        if (rc == CUDA_SUCCESS)
            rc = om_wait_stream(st);
    }
    return take_async_error(c->s, rc);
}

/* 2D copies: device to device as asked; a host side is the staging buffer
 * (to the device) or the answer (from it), packed with pitch = width. */
static CUresult x_cuMemcpy2D_v2(struct call *c)
{
    uint64_t stype = om_get_u64(&c->in), dtype = om_get_u64(&c->in);
    uint64_t sdev = om_get_u64(&c->in), spitch = om_get_u64(&c->in);
    uint64_t ddev = om_get_u64(&c->in), dpitch = om_get_u64(&c->in);
    uint64_t w = om_get_u64(&c->in), sh = om_get_u64(&c->in), h = om_get_u64(&c->in);
    uint64_t wait = om_get_u64(&c->in);
    CUDA_MEMCPY2D m = {0};
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((stype != CU_MEMORYTYPE_HOST && stype != CU_MEMORYTYPE_DEVICE) ||
        (dtype != CU_MEMORYTYPE_HOST && dtype != CU_MEMORYTYPE_DEVICE) ||
        (stype == CU_MEMORYTYPE_HOST && dtype == CU_MEMORYTYPE_HOST) || !w || !h ||
        h > UINT64_MAX / w)
        return CUDA_ERROR_INVALID_VALUE;
    m.WidthInBytes = w;
    m.Height = h;
    m.srcMemoryType = (int)stype;
    m.dstMemoryType = (int)dtype;
    if (stype == CU_MEMORYTYPE_DEVICE) {
        if (!region_ok(c->s, sdev, spitch, w, h))
            return CUDA_ERROR_INVALID_VALUE;
        m.srcDevice = sdev;
        m.srcPitch = spitch;
    } else {
        if (h && w > UINT64_MAX / h)
            return CUDA_ERROR_INVALID_VALUE;
        CUresult rs = staged(c, w * h, CUDA_ERROR_INVALID_VALUE);
        if (rs != CUDA_SUCCESS)
            return rs;
        m.srcHost = c->s->stage;
        m.srcPitch = w;
    }
    if (dtype == CU_MEMORYTYPE_DEVICE) {
        if (!region_ok(c->s, ddev, dpitch, w, h))
            return CUDA_ERROR_INVALID_VALUE;
        m.dstDevice = ddev;
        m.dstPitch = dpitch;
    } else {
        if (w * h > c->out.cap)
            return CUDA_ERROR_INVALID_VALUE;
        m.dstHost = c->out.p;
        m.dstPitch = w;
        wait = 1; /* the answer is read when the call returns */
    }
    if (stype == CU_MEMORYTYPE_HOST) /* to device memory, then */
        return copy2d_htod_pieces(c, &m, sh);
    st = client_stream(c->s, sh, &rc);
    if (!st)
        return rc;
    rc = ((CUresult(*)(const CUDA_MEMCPY2D *, CUstream))REAL(cuMemcpy2DAsync_v2))(&m, st);
    if (rc == CUDA_SUCCESS && (wait || stype == CU_MEMORYTYPE_HOST))
        rc = om_wait_stream(st);
    if (rc == CUDA_SUCCESS && dtype == CU_MEMORYTYPE_HOST)
        c->out.len = w * h;
    return take_async_error(c->s, rc);
}

/* ------------------------------------------------------------------ streams, events */

static CUresult x_cuStreamCreate(struct call *c)
{
    CUresult (*fn)(CUstream *, unsigned, int) = REAL(cuStreamCreateWithPriority);
    uint64_t flags = om_get_u64(&c->in), prio = om_get_u64(&c->in);
    CUstream st = NULL;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (c->s->streams.n >= om_budget.client_streams)
        return om_budget_refuse(c->s, OM_BUDGET_STREAMS, "cuStreamCreate");
    /* Always non-blocking: a blocking stream would wait for the shared
     * context's NULL stream, that is, for every client. */
    rc = fn(&st, (unsigned)flags | CU_STREAM_NON_BLOCKING, (int)(int64_t)prio);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (om_idle_track(st) < 0) {
        ((CUresult(*)(CUstream))REAL(cuStreamDestroy_v2))(st);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (om_handles_add(&c->s->streams, (uint64_t)(uintptr_t)st) < 0 ||
        (!(flags & CU_STREAM_NON_BLOCKING) &&
         om_handles_add(&c->s->blocking, (uint64_t)(uintptr_t)st) < 0)) {
        om_handles_remove(&c->s->streams, (uint64_t)(uintptr_t)st);
        om_idle_stream_destroy(st);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    om_sched_stream_created();
    om_put_u64(&c->out, (uint64_t)(uintptr_t)st);
    return CUDA_SUCCESS;
}

/* A stream argument; `enqueue`: the call puts an operation on it (see client_stream). */
static CUresult owned_stream(struct call *c, bool enqueue, CUstream *st)
{
    uint64_t h = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    *st = find_stream(c->s, h, enqueue, &rc);
    return rc;
}

static CUresult x_cuStreamDestroy_v2(struct call *c)
{
    uint64_t h = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!om_handles_has(&c->s->streams, h))
        return CUDA_ERROR_INVALID_HANDLE;
    /* Its work must be done before the stream is forgotten: later frees and the
     * session's end wait only for streams they know. */
    rc = om_wait_stream((CUstream)(uintptr_t)h);
    if (rc != CUDA_SUCCESS && c->s->async_error == CUDA_SUCCESS)
        c->s->async_error = rc;
    om_handles_remove(&c->s->streams, h);
    om_handles_remove(&c->s->blocking, h);
    om_sched_stream_destroyed(c->s, (CUstream)(uintptr_t)h);
    for (size_t i = 0; i < c->s->nsync_events; i++) {
        if (c->s->sync_events[i].stream == (CUstream)(uintptr_t)h) {
            ((CUresult(*)(CUevent))REAL(cuEventDestroy_v2))(c->s->sync_events[i].event);
            c->s->sync_events[i] = c->s->sync_events[--c->s->nsync_events];
            break;
        }
    }
    return om_idle_stream_destroy((CUstream)(uintptr_t)h);
}

static CUresult x_cuStreamSynchronize(struct call *c)
{
    CUstream st;
    CUresult rc = owned_stream(c, false, &st);

    if (rc == CUDA_SUCCESS)
        rc = om_wait_stream(st);
    return take_async_error(c->s, rc);
}

static CUresult x_cuStreamQuery(struct call *c)
{
    CUstream st;
    CUresult rc = owned_stream(c, false, &st);

    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(CUstream))REAL(cuStreamQuery))(st);
    return rc;
}

static CUresult owned_event(struct call *c, CUevent *ev)
{
    uint64_t h = om_get_u64(&c->in);

    if (c->in.bad)
        return bad_request(c);
    if (!om_handles_has(&c->s->events, h))
        return CUDA_ERROR_INVALID_HANDLE;
    *ev = (CUevent)(uintptr_t)h;
    return CUDA_SUCCESS;
}

static CUresult x_cuStreamWaitEvent(struct call *c)
{
    /* Every argument is read and checked before anything is enqueued or held. */
    uint64_t sh = om_get_u64(&c->in), eh = om_get_u64(&c->in), flags = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (flags > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (!om_handles_has(&c->s->events, eh))
        return CUDA_ERROR_INVALID_HANDLE;
    st = find_stream(c->s, sh, true, &rc);
    if (!st)
        return rc;
    return ((CUresult(*)(CUstream, CUevent, unsigned))REAL(cuStreamWaitEvent))(
        st, (CUevent)(uintptr_t)eh, (unsigned)flags);
}

static CUresult x_cuEventCreate(struct call *c)
{
    uint64_t flags = om_get_u64(&c->in);
    CUevent ev = NULL;
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS && c->s->events.n >= om_budget.client_events)
        return om_budget_refuse(c->s, OM_BUDGET_EVENTS, "cuEventCreate");
    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(CUevent *, unsigned))REAL(cuEventCreate))(&ev, (unsigned)flags);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (om_handles_add(&c->s->events, (uint64_t)(uintptr_t)ev) < 0) {
        ((CUresult(*)(CUevent))REAL(cuEventDestroy_v2))(ev);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    om_put_u64(&c->out, (uint64_t)(uintptr_t)ev);
    return CUDA_SUCCESS;
}

static CUresult x_cuEventDestroy_v2(struct call *c)
{
    uint64_t h = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!om_handles_remove(&c->s->events, h))
        return CUDA_ERROR_INVALID_HANDLE;
    return ((CUresult(*)(CUevent))REAL(cuEventDestroy_v2))((CUevent)(uintptr_t)h);
}

static CUresult x_cuEventRecord(struct call *c)
{
    CUevent ev;
    CUstream st;
    CUresult rc = owned_event(c, &ev);

    if (rc == CUDA_SUCCESS)
        rc = owned_stream(c, true, &st);
    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(CUevent, CUstream))REAL(cuEventRecord))(ev, st);
    return rc;
}

/* Its flags (CU_EVENT_RECORD_EXTERNAL for graphs) go to the driver; without them, as a record. */
static CUresult x_cuEventRecordWithFlags(struct call *c)
{
    uint64_t eh = om_get_u64(&c->in), sh = om_get_u64(&c->in), flags = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (flags > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (!om_handles_has(&c->s->events, eh))
        return CUDA_ERROR_INVALID_HANDLE;
    if (flags && !om_server_has(OM_IDX_cuEventRecordWithFlags))
        return CUDA_ERROR_NOT_SUPPORTED;
    st = find_stream(c->s, sh, true, &rc);
    if (!st)
        return rc;
    if (!om_server_has(OM_IDX_cuEventRecordWithFlags))
        return ((CUresult(*)(CUevent, CUstream))REAL(cuEventRecord))((CUevent)(uintptr_t)eh, st);
    return ((CUresult(*)(CUevent, CUstream, unsigned))REAL(cuEventRecordWithFlags))(
        (CUevent)(uintptr_t)eh, st, (unsigned)flags);
}

static CUresult x_cuEventSynchronize(struct call *c)
{
    CUevent ev;
    CUresult rc = owned_event(c, &ev);

    if (rc == CUDA_SUCCESS)
        rc = om_wait_event(ev);
    return take_async_error(c->s, rc);
}

static CUresult x_cuEventQuery(struct call *c)
{
    CUevent ev;
    CUresult rc = owned_event(c, &ev);

    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(CUevent))REAL(cuEventQuery))(ev);
    return rc;
}

static CUresult x_cuEventElapsedTime_v2(struct call *c)
{
    CUresult (*fn)(float *, CUevent, CUevent) = REAL(cuEventElapsedTime_v2);
    CUevent a, b;
    float ms = 0;
    uint32_t bits;
    CUresult rc = owned_event(c, &a);

    if (!om_server_has(OM_IDX_cuEventElapsedTime_v2))
        fn = REAL(cuEventElapsedTime);
    if (rc == CUDA_SUCCESS)
        rc = owned_event(c, &b);
    if (rc == CUDA_SUCCESS)
        rc = fn(&ms, a, b);
    if (rc == CUDA_SUCCESS) {
        memcpy(&bits, &ms, sizeof(bits));
        om_put_u64(&c->out, bits);
    }
    return rc;
}

static CUresult x_cuCtxSynchronize(struct call *c)
{
    return take_async_error(c->s, om_exec_sync_client(c->s));
}

static CUresult x_cuCtxGetLimit(struct call *c)
{
    uint64_t limit = om_get_u64(&c->in);
    size_t v = 0;
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(size_t *, int))REAL(cuCtxGetLimit))(&v, (int)limit);
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, v);
    return rc;
}

static CUresult x_cuCtxSetLimit(struct call *c)
{
    uint64_t limit = om_get_u64(&c->in), v = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);

    /* Context-wide: it changes the limit for every client (noted in docs). */
    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(int, size_t))REAL(cuCtxSetLimit))((int)limit, (size_t)v);
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, 0);
    return rc;
}

static CUresult x_cuCtxGetStreamPriorityRange(struct call *c)
{
    int least = 0, greatest = 0;
    CUresult rc = ((CUresult(*)(int *, int *))REAL(cuCtxGetStreamPriorityRange))(&least, &greatest);

    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, ((uint64_t)(uint32_t)greatest << 32) | (uint32_t)least);
    return rc;
}

/* ------------------------------------------------------------------ modules, kernels */

/*
 * Whether a module image ends within its `size` staged bytes by its own headers: the driver
 * takes no size and reads as far as they say, so an image that claims more would have the
 * driver read past the staging buffer, in the server every client shares.
 */
static bool image_within(const uint8_t *p, uint64_t size)
{
    return om_image_extent(p, size) <= size;
}

static CUresult x_cuLibraryLoadData(struct call *c)
{
    CUresult (*load)(CUlibrary *, const void *, void *, void **, unsigned, void *, void **,
                     unsigned) = REAL(cuLibraryLoadData);
    uint64_t size = om_get_u64(&c->in), lib = 0, hash;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (size == 0)
        return CUDA_ERROR_INVALID_IMAGE;
    if ((rc = staged(c, size, CUDA_ERROR_INVALID_IMAGE)) != CUDA_SUCCESS)
        return rc;
    if (!image_within(c->s->stage, size)) {
        client_err(c->s, "client %d: a module image whose headers reach past its %llu staged bytes",
                   (int)c->s->pid, (unsigned long long)size);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    hash = om_hash64(c->s->stage, size);
    pthread_mutex_lock(om_image_load_lock());
    if (om_image_lookup(c->s->stage, hash, size, &lib) != 0) {
        CUlibrary l = NULL;
        /* A new image: it stays loaded while the server runs, so it counts against the
         * client's budget and the server's (budget.c). */
        if (c->s->image_count >= om_budget.client_image_count ||
            !om_budget_take(&c->s->image_bytes, size, om_budget.client_images)) {
            pthread_mutex_unlock(om_image_load_lock());
            return om_budget_refuse(c->s, OM_BUDGET_IMAGES, "loading a new module image");
        }
        if (!om_image_budget_take(size)) {
            om_budget_give(&c->s->image_bytes, size);
            pthread_mutex_unlock(om_image_load_lock());
            return om_budget_refuse(c->s, OM_BUDGET_IMAGES,
                                    "loading a new module image (the server's own budget, "
                                    "OPENMPS_SERVER_IMAGE_MAX, is spent)");
        }
        rc = load(&l, c->s->stage, NULL, NULL, 0, NULL, NULL, 0);
        if (rc != CUDA_SUCCESS) {
            om_budget_give(&c->s->image_bytes, size);
            om_image_budget_give(size);
        } else {
            c->s->image_count++;
            lib = (uint64_t)(uintptr_t)l;
            om_image_add(c->s->stage, hash, size, lib);
            om_info("client %d: loaded a new module image of %llu bytes", (int)c->s->pid,
                    (unsigned long long)size);
        }
    }
    pthread_mutex_unlock(om_image_load_lock());
    if (rc != CUDA_SUCCESS)
        return rc;
    /* For the servers after this one (imgcache.c); the staging buffer is this session's. */
    om_imgcache_store(c->s->stage, size, hash);
    if (!om_handles_has(&c->s->libraries, lib) && om_handles_add(&c->s->libraries, lib) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    om_put_u64(&c->out, lib);
    return CUDA_SUCCESS;
}

static CUresult x_cuLibraryUnload(struct call *c)
{
    uint64_t lib = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);

    /* The image stays loaded for the next client (unloading waits for every
     * kernel); this client just loses the handle. */
    if (rc == CUDA_SUCCESS && !om_handles_remove(&c->s->libraries, lib))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, 0);
    return rc;
}

/* name bytes after a u64 owner: copied to a NUL-terminated string. */
static CUresult name_arg(struct call *c, char *name, size_t cap)
{
    size_t len;
    const void *p = om_get_rest(&c->in, &len);

    if (c->in.bad || !p || len == 0 || len >= cap || memchr(p, '\0', len))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(name, p, len);
    name[len] = '\0';
    return CUDA_SUCCESS;
}

static CUresult x_cuLibraryGetKernel(struct call *c)
{
    CUresult (*get)(CUkernel *, CUlibrary, const char *) = REAL(cuLibraryGetKernel);
    CUresult (*info)(CUkernel, size_t, size_t *, size_t *) = REAL(cuKernelGetParamInfo);
    uint64_t lib = om_get_u64(&c->in);
    char name[1024];
    CUkernel k = NULL;
    uint64_t params[2 * 256];
    uint32_t n = 0, total = 0;
    CUresult rc = name_arg(c, name, sizeof(name));

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!om_handles_has(&c->s->libraries, lib))
        return CUDA_ERROR_INVALID_HANDLE;
    rc = get(&k, (CUlibrary)(uintptr_t)lib, name);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* The layout answered with the handle: the client caches it, so a launch
     * is one flat buffer (ARCHITECTURE.md). */
    for (; n < 256; n++) {
        size_t off = 0, size = 0;
        if (info(k, n, &off, &size) != CUDA_SUCCESS)
            break;
        params[2 * n] = off;
        params[2 * n + 1] = size;
        if (off + size > total)
            total = (uint32_t)(off + size);
    }
    if (n == 256) {
        size_t off = 0, size = 0;
        if (info(k, n, &off, &size) == CUDA_SUCCESS) {
            /* Forwarding part of the parameters would run the kernel with
             * garbage: refuse the kernel instead, by name. */
            client_err(c->s, "client %d: kernel %s has more than 256 parameters: not supported",
                       (int)c->s->pid, name);
            return CUDA_ERROR_NOT_SUPPORTED;
        }
    }
    if (om_kernel_note(c->s, (uint64_t)(uintptr_t)k, total) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    om_put_u64(&c->out, (uint64_t)(uintptr_t)k);
    om_put_u64(&c->out, n);
    om_put_bytes(&c->out, params, 16 * (size_t)n);
    return CUDA_SUCCESS;
}

static CUresult x_cuLibraryGetGlobal(struct call *c)
{
    CUresult (*get)(CUdeviceptr *, size_t *, CUlibrary, const char *) = REAL(cuLibraryGetGlobal);
    uint64_t lib = om_get_u64(&c->in);
    char name[1024];
    CUdeviceptr p = 0;
    size_t size = 0;
    CUresult rc = name_arg(c, name, sizeof(name));

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!om_handles_has(&c->s->libraries, lib))
        return CUDA_ERROR_INVALID_HANDLE;
    rc = get(&p, &size, (CUlibrary)(uintptr_t)lib, name);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* The module's globals are shared by every client of the image (as in
     * one process); the client may copy to and from them. */
    if (!om_ranges_cover(&c->s->allocs, p, size))
        om_ranges_add(&c->s->allocs, p, size, 0, false);
    om_put_u64(&c->out, p);
    om_put_u64(&c->out, size);
    return CUDA_SUCCESS;
}

static CUresult owned_kernel(struct call *c, uint64_t h)
{
    return om_kernel_total(c->s, h) >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult x_cuFuncGetAttribute(struct call *c)
{
    uint64_t attrib = om_get_u64(&c->in), k = om_get_u64(&c->in), dev = om_get_u64(&c->in);
    int v = 0;
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS)
        rc = owned_kernel(c, k);
    if (rc == CUDA_SUCCESS && dev >= (uint64_t)om_server_ndevices())
        rc = CUDA_ERROR_INVALID_DEVICE;
    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(int *, int, CUkernel, CUdevice))REAL(cuKernelGetAttribute))(
            &v, (int)attrib, (CUkernel)(uintptr_t)k, (CUdevice)dev);
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, (uint64_t)(int64_t)v);
    return rc;
}

static CUresult x_cuFuncSetAttribute(struct call *c)
{
    uint64_t k = om_get_u64(&c->in), attrib = om_get_u64(&c->in), v = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS)
        rc = owned_kernel(c, k);
    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(int, int, CUkernel, CUdevice))REAL(cuKernelSetAttribute))(
            (int)attrib, (int)(int64_t)v, (CUkernel)(uintptr_t)k, 0);
    return rc;
}

static CUresult x_cuOccupancy(struct call *c)
{
    uint64_t k = om_get_u64(&c->in), block = om_get_u64(&c->in), smem = om_get_u64(&c->in);
    uint64_t flags = om_get_u64(&c->in);
    int n = 0;
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS)
        rc = owned_kernel(c, k);
    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(int *, CUfunction, int, size_t, unsigned))REAL(
            cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags))(
            &n, (CUfunction)(uintptr_t)k, (int)block, (size_t)smem, (unsigned)flags);
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, (uint64_t)n);
    return rc;
}

/* ------------------------------------------------------------------ launches */

static CUresult x_cuLaunchKernel(struct call *c)
{
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       unsigned, CUstream, void **, void **) = REAL(cuLaunchKernel);
    uint64_t k = om_get_u64(&c->in), g = om_get_u64(&c->in), m = om_get_u64(&c->in);
    uint64_t b = om_get_u64(&c->in), smem = om_get_u64(&c->in), sh = om_get_u64(&c->in);
    size_t args_len = 0;
    const void *args = om_get_rest(&c->in, &args_len);
    int64_t total;
    void *extra[5];
    size_t size;
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    total = om_kernel_total(c->s, k);
    if (total < 0)
        return CUDA_ERROR_INVALID_HANDLE;
    if ((int64_t)args_len != total || args_len > sizeof(c->s->launch_args) || smem > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    st = client_stream(c->s, sh, &rc);
    if (!st)
        return rc;
    /* The argument bytes are already laid out as the kernel expects them. */
    size = args_len;
    memcpy(c->s->launch_args, args, args_len);
    extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
    extra[1] = c->s->launch_args;
    extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
    extra[3] = &size;
    extra[4] = CU_LAUNCH_PARAM_END;
    rc = launch((CUfunction)(uintptr_t)k, (unsigned)g, (unsigned)(g >> 32), (unsigned)m,
                (unsigned)(m >> 32), (unsigned)b, (unsigned)(b >> 32), (unsigned)smem, st, NULL,
                args_len ? extra : NULL);
    if (rc == CUDA_SUCCESS)
        om_sched_launched(c->s, st, k);
    return rc;
}

/* CUlaunchConfig / CUlaunchAttribute (72 bytes: an id, padding, a 64-byte value). */
struct launch_config {
    unsigned gx, gy, gz, bx, by, bz, smem;
    CUstream stream;
    void *attrs;
    unsigned nattrs;
};
#define LAUNCH_ATTR_BYTES 72

/* Attributes whose values hold no handle (events, graph nodes): they travel as
 * bytes. The others would need translating and are refused for now. */
static bool attribute_allowed(int id)
{
    switch (id) {
    case 0:  /* ignore */
    case 1:  /* access policy window: a device address */
    case 2:  /* cooperative */
    case 3:  /* synchronization policy */
    case 4:  /* cluster dimension */
    case 5:  /* cluster scheduling policy */
    case 6:  /* programmatic stream serialization */
    case 8:  /* priority */
    case 9:  /* memory sync domain map */
    case 10: /* memory sync domain */
    case 11: /* preferred cluster dimension */
    case 14: /* preferred shared memory carveout */ return true;
    default: return false;
    }
}

static CUresult x_cuLaunchKernelEx(struct call *c)
{
    CUresult (*launch)(const struct launch_config *, CUfunction, void **, void **) =
        REAL(cuLaunchKernelEx);
    uint64_t k = om_get_u64(&c->in), g = om_get_u64(&c->in), m = om_get_u64(&c->in);
    uint64_t b = om_get_u64(&c->in), smem = om_get_u64(&c->in), sh = om_get_u64(&c->in);
    uint64_t nattrs = om_get_u64(&c->in);
    uint8_t attrs[16 * LAUNCH_ATTR_BYTES];
    const void *ap = nattrs <= 16 ? om_get_bytes(&c->in, nattrs * LAUNCH_ATTR_BYTES) : NULL;
    size_t args_len = 0;
    const void *args = om_get_rest(&c->in, &args_len);
    struct launch_config cfg;
    void *extra[5];
    size_t size;
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (nattrs > 16 || !ap)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(attrs, ap, nattrs * LAUNCH_ATTR_BYTES);
    for (uint64_t i = 0; i < nattrs; i++) {
        int id;
        memcpy(&id, attrs + i * LAUNCH_ATTR_BYTES, sizeof(id));
        if (!attribute_allowed(id)) {
            client_err(c->s, "client %d: launch attribute %d is not supported", (int)c->s->pid, id);
            return CUDA_ERROR_NOT_SUPPORTED;
        }
    }
    if (om_kernel_total(c->s, k) != (int64_t)args_len || args_len > sizeof(c->s->launch_args) ||
        smem > UINT32_MAX)
        return om_kernel_total(c->s, k) < 0 ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
    st = client_stream(c->s, sh, &rc);
    if (!st)
        return rc;
    size = args_len;
    memcpy(c->s->launch_args, args, args_len);
    extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
    extra[1] = c->s->launch_args;
    extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
    extra[3] = &size;
    extra[4] = CU_LAUNCH_PARAM_END;
    cfg = (struct launch_config){
        (unsigned)g, (unsigned)(g >> 32), (unsigned)m,    (unsigned)(m >> 32),
        (unsigned)b, (unsigned)(b >> 32), (unsigned)smem, st,
        attrs,       (unsigned)nattrs};
    rc = launch(&cfg, (CUfunction)(uintptr_t)k, NULL, args_len ? extra : NULL);
    if (rc == CUDA_SUCCESS)
        om_sched_launched(c->s, st, k);
    return rc;
}

static CUresult x_cuStreamGetFlags(struct call *c)
{
    uint64_t h = om_get_u64(&c->in);
    unsigned flags = 0;
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    st = find_stream(c->s, h, false, &rc);
    if (st)
        rc = ((CUresult(*)(CUstream, unsigned *))REAL(cuStreamGetFlags))(st, &flags);
    /* What the client asked for: its blocking streams are non-blocking on the server. */
    if (rc == CUDA_SUCCESS && (om_handles_has(&c->s->blocking, h) || h <= 2))
        flags &= ~CU_STREAM_NON_BLOCKING;
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, flags);
    return rc;
}

static CUresult x_cuStreamGetPriority(struct call *c)
{
    uint64_t h = om_get_u64(&c->in);
    int prio = 0;
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    st = find_stream(c->s, h, false, &rc);
    if (st)
        rc = ((CUresult(*)(CUstream, int *))REAL(cuStreamGetPriority))(st, &prio);
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, (uint64_t)(int64_t)prio);
    return rc;
}

/* ------------------------------------------------------------------ dispatch */

typedef CUresult (*handler)(struct call *);

static handler handler_of(int index)
{
    switch (index) {
#define OM_H(sym)                                                                                  \
    case OM_IDX_##sym: return x_##sym;
        OM_H(cuDeviceGetName)
        OM_H(cuDeviceGetPCIBusId)
        OM_H(cuDeviceTotalMem_v2)
        OM_H(cuDeviceGetAttribute)
        OM_H(cuDeviceGetUuid_v2)
        OM_H(cuMemAlloc_v2)
        OM_H(cuMemAllocManaged)
        OM_H(cuMemHostAlloc)
        OM_H(cuMemFreeHost)
        OM_H(cuMemHostRegister_v2)
        OM_H(cuMemcpyHtoDAsync_v2)
        OM_H(cuMemcpyDtoHAsync_v2)
        OM_H(cuMemFree_v2)
        OM_H(cuMemGetInfo_v2)
        OM_H(cuMemcpyHtoD_v2)
        OM_H(cuMemcpyDtoH_v2)
        OM_H(cuMemcpyDtoD_v2)
        OM_H(cuMemsetD8_v2)
        OM_H(cuMemsetD2D8_v2)
        OM_H(cuMemcpy2D_v2)
        OM_H(cuStreamCreate)
        OM_H(cuStreamDestroy_v2)
        OM_H(cuStreamSynchronize)
        OM_H(cuStreamQuery)
        OM_H(cuStreamWaitEvent)
        OM_H(cuEventCreate)
        OM_H(cuEventRecordWithFlags)
        OM_H(cuEventDestroy_v2)
        OM_H(cuEventRecord)
        OM_H(cuEventSynchronize)
        OM_H(cuEventQuery)
        OM_H(cuEventElapsedTime_v2)
        OM_H(cuCtxSynchronize)
        OM_H(cuCtxGetLimit)
        OM_H(cuCtxSetLimit)
        OM_H(cuCtxGetStreamPriorityRange)
        OM_H(cuLibraryLoadData)
        OM_H(cuLibraryUnload)
        OM_H(cuLibraryGetKernel)
        OM_H(cuLibraryGetGlobal)
        OM_H(cuFuncGetAttribute)
        OM_H(cuFuncSetAttribute)
        OM_H(cuLaunchKernel)
        OM_H(cuLaunchKernelEx)
        OM_H(cuStreamGetFlags)
        OM_H(cuStreamGetPriority)
#undef OM_H
    case OM_IDX_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags: return x_cuOccupancy;
    default: return NULL;
    }
}

CUresult om_exec(struct session *s, int index, const void *in, size_t in_len, void *out,
                 size_t out_cap, size_t *ret_out_len, bool posted)
{
    struct call c = {.s = s, .in = {.p = in, .len = in_len}, .out = {.p = out, .cap = out_cap}};
    handler h = index >= 0 && index < OM_ENTRY_COUNT ? handler_of(index) : NULL;
    CUresult rc;

    if (!h) {
        client_err(s, "client %d asked for %s, which the server does not execute", (int)s->pid,
                   index >= 0 && index < OM_ENTRY_COUNT ? om_server_entry_name(index) : "?");
        rc = CUDA_ERROR_NOT_SUPPORTED;
    } else {
        rc = h(&c);
    }
    if (c.out.overflow)
        rc = CUDA_ERROR_UNKNOWN;
    if (om_server_fatal(rc)) {
        om_err("client %d: %s failed with CUresult %d, a fatal GPU fault", (int)s->pid,
               om_server_entry_name(index), rc);
        om_server_fault(rc, s->pid);
    }
    if (posted && rc != CUDA_SUCCESS && s->async_error == CUDA_SUCCESS)
        s->async_error = rc; /* reported at the next synchronising call */
    if (posted)
        s->send_fd_after = -1; /* a descriptor only ever follows an answer */
    *ret_out_len = rc == CUDA_SUCCESS ? c.out.len : 0;
    return rc;
}
