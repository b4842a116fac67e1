/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of copies and sets: asynchronous on the client's stream, then
 * a wait on that stream only. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/image.h"
#include "../../common/msg.h"
#include "../exec.h"
#include "openmps/ops.h"

/* Copies between device memory and pinned memory: straight from and into the
 * shared pages, asynchronous like the driver's. */
CUresult om_x_op_copy_htod_pinned(struct call *c)
{
    uint64_t dst = om_get_u64(&c->in), src = om_get_u64(&c->in), n = om_get_u64(&c->in);
    uint64_t sh = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!om_arg_range(c, dst, n) || !om_hostmem_find(c->s, src, n))
        return CUDA_ERROR_INVALID_VALUE;
    st = om_arg_stream(c, sh, true, &rc);
    if (!st)
        return rc;
    rc = ((CUresult(*)(CUdeviceptr, const void *, size_t, CUstream))REAL(cuMemcpyHtoDAsync_v2))(
        dst, (const void *)(uintptr_t)src, n, st);
    om_account_copy(c->s, OM_ACCT_HTOD, n, rc);
    return rc;
}

CUresult om_x_op_copy_dtoh_pinned(struct call *c)
{
    uint64_t dst = om_get_u64(&c->in), src = om_get_u64(&c->in), n = om_get_u64(&c->in);
    uint64_t sh = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!om_arg_range(c, src, n) || !om_hostmem_find(c->s, dst, n))
        return CUDA_ERROR_INVALID_VALUE;
    st = om_arg_stream(c, sh, true, &rc);
    if (!st)
        return rc;
    rc = ((CUresult(*)(void *, CUdeviceptr, size_t, CUstream))REAL(cuMemcpyDtoHAsync_v2))(
        (void *)(uintptr_t)dst, src, n, st);
    om_account_copy(c->s, OM_ACCT_DTOH, n, rc);
    return rc;
}

/*
 * A synchronous host-to-device copy returns, natively, once the stream's earlier work is done
 * and the bytes are staged: not when the DMA has ended ("API synchronization behavior" in the
 * runtime's documentation: a stream sync before the copy, then the return while the DMA may
 * still run). A copy small enough to ride in its call (OM_INLINE_COPY_MAX) into the client's
 * device memory is answered so: the worker waits for the stream's earlier work, puts the bytes
 * in one of its OM_COPY_SLOTS pinned slots (after its reply buffer, replybuf.c), enqueues the
 * DMA from there and answers.
 *
 * Small copies in a row (B2's 4-byte copy; a program's scalars) need not wait for each other:
 * a copy's "earlier work" that is only the small copies before it on the same stream has
 * nothing the host can see (they write the client's device memory, which only the stream's
 * later work reads, in order). So the session keeps the stream of its small copies in flight
 * (small_stream), which had no other work since the worker last waited for it, and the slots
 * they hold; the next small copy on that stream skips the wait and takes the next slot. Any
 * other record (exec.c, session.c), a small copy on another stream, a larger one, or a copy
 * that finds every slot taken first waits for them (om_copy_settle): so no slot is written
 * while its DMA may read it, and the stream's other work is waited for as before. Measured on
 * the H200 (docs/benchmarks.md, eleventh session): each such copy cost the server its DMA's
 * latency (about 4.7 us) when the worker waited for it after the answer.
 *
 * Only into device memory: into the client's pinned host memory (a device address to the
 * driver), which the program reads with no further call, the copy is answered after its DMA.
 * The server cannot tell a synchronous copy from an asynchronous one of pageable memory (the
 * shim sends both so, and its managed memory's pushes): those of 4 KiB and less are answered
 * so too. An error of a settling wait (the context's, a fault) is the stream's, as a posted
 * call's is. OPENMPS_COPY_ANSWER=late answers every copy after its DMA (for measuring); so does
 * a worker whose reply buffer could not be pinned (no slots).
 */
static int copy_answer_late = -1;

static bool answer_early(void)
{
    if (__atomic_load_n(&copy_answer_late, __ATOMIC_RELAXED) < 0) {
        const char *v = getenv("OPENMPS_COPY_ANSWER");
        bool late = v && !strcmp(v, "late");
        if (v && !late && strcmp(v, "early"))
            om_warn("OPENMPS_COPY_ANSWER=%s is not early or late: early", v);
        if (late)
            om_info("small host-to-device copies answered after their DMA "
                    "(OPENMPS_COPY_ANSWER=late)");
        __atomic_store_n(&copy_answer_late, late, __ATOMIC_RELAXED);
    }
    return !__atomic_load_n(&copy_answer_late, __ATOMIC_RELAXED);
}

void om_copy_settle(struct session *s, bool client_waits)
{
    CUstream st = s->small_stream;
    unsigned used = s->small_used;
    CUresult rc;

    s->small_stream = NULL;
    s->small_used = 0;
    if (!st || !used)
        return;
    om_account_after_answer(!client_waits); /* else nobody waits for it: not gpu_wait_ns */
    rc = om_wait_stream(st);
    om_account_after_answer(false);
    if (rc == CUDA_SUCCESS)
        return;
    if (om_server_fatal(rc)) { /* another's fault seen here first: as exec.c does */
        om_err("client %d: a small copy's DMA ended with CUresult %d, a fatal GPU fault",
               (int)s->pid, rc);
        om_server_fault(rc, s->pid);
    }
    CUstream was = s->call_stream;
    s->call_stream = st; /* route.c's call_stream: the stream the call enqueued on */
    om_error_post(s, rc);
    s->call_stream = was;
}

/* A small copy answered before its DMA: into a slot, after the stream's earlier work but for
 * the small copies before it (above). */
static CUresult htod_early(struct session *s, CUdeviceptr dst, const void *src, size_t n,
                           CUstream st)
{
    CUresult rc;
    uint8_t *slot;

    if (s->small_stream != st || s->small_used == OM_COPY_SLOTS)
        om_copy_settle(s, true);
    if (!s->small_stream) { /* its earlier work, as the driver's synchronous copy does */
        if ((rc = om_wait_stream(st)) != CUDA_SUCCESS)
            return rc;
        s->small_stream = st;
    }
    slot = s->copy_slots + (size_t)s->small_used * OM_INLINE_COPY_MAX;
    memcpy(slot, src, n);
    rc = ((CUresult(*)(CUdeviceptr, const void *, size_t, CUstream))REAL(cuMemcpyHtoDAsync_v2))(
        dst, slot, n, st);
    if (rc == CUDA_SUCCESS)
        s->small_used++; /* the DMA reads the slot until the stream is next waited for */
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

CUresult om_x_op_copy_htod(struct call *c)
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
    } else if ((rc = om_staged(c, n, CUDA_ERROR_INVALID_VALUE)) != CUDA_SUCCESS) {
        return rc;
    }
    if (!om_arg_range(c, dst, n))
        return CUDA_ERROR_INVALID_VALUE;
    st = om_arg_stream(c, sh, true, &rc);
    if (!st)
        return rc;
    /* Early only into device memory: pinned host memory the client reads directly (XLA's flags)
     * must hold the bytes when the answer comes. */
    if (inline_len && c->s->copy_slots && answer_early() &&
        om_ranges_cover(&c->s->allocs, dst, n)) {
        rc = htod_early(c->s, dst, src, n, st);
    } else {
        om_copy_settle(c->s, true); /* its stream's work is waited for as before */
        rc = htod_through_reply(c, dst, src, n, st);
    }
    om_account_copy(c->s, OM_ACCT_HTOD, n, rc);
    return om_take_call_error(c, rc);
}

CUresult om_x_op_copy_dtoh(struct call *c)
{
    CUresult (*copy)(void *, CUdeviceptr, size_t, CUstream) = REAL(cuMemcpyDtoHAsync_v2);
    CUresult (*sync)(CUstream) = om_wait_stream;
    uint64_t src = om_get_u64(&c->in), n = om_get_u64(&c->in), sh = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (n > c->out.cap || !om_arg_range(c, src, n))
        return CUDA_ERROR_INVALID_VALUE;
    st = om_arg_stream(c, sh, true, &rc);
    if (!st)
        return rc;
    rc = copy(c->out.p, src, n, st);
    if (rc == CUDA_SUCCESS)
        rc = sync(st);
    if (rc == CUDA_SUCCESS)
        c->out.len = n;
    om_account_copy(c->s, OM_ACCT_DTOH, n, rc);
    return om_take_call_error(c, rc);
}

CUresult om_x_op_copy_dtod(struct call *c)
{
    CUresult (*copy)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = REAL(cuMemcpyDtoDAsync_v2);
    CUresult (*sync)(CUstream) = om_wait_stream;
    uint64_t dst = om_get_u64(&c->in), src = om_get_u64(&c->in), n = om_get_u64(&c->in);
    uint64_t sh = om_get_u64(&c->in), wait = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!om_arg_range(c, dst, n) || !om_arg_range(c, src, n))
        return CUDA_ERROR_INVALID_VALUE;
    st = om_arg_stream(c, sh, true, &rc);
    if (!st)
        return rc;
    rc = copy(dst, src, n, st);
    if (rc == CUDA_SUCCESS && wait)
        rc = sync(st);
    om_account_copy(c->s, OM_ACCT_DTOD, n, rc);
    return om_take_call_error(c, rc);
}

CUresult om_x_op_memset(struct call *c)
{
    uint64_t dst = om_get_u64(&c->in), value = om_get_u64(&c->in), width = om_get_u64(&c->in);
    uint64_t count = om_get_u64(&c->in), sh = om_get_u64(&c->in), wait = om_get_u64(&c->in);
    CUresult (*sync)(CUstream) = om_wait_stream;
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    /* The stream first: a posted set's refusal is then its stream's error (om_exec), reported
     * by that stream's next synchronising call, as a launch's is. */
    st = om_arg_stream(c, sh, true, &rc);
    if (!st)
        return rc;
    if ((width != 1 && width != 2 && width != 4) || count > UINT64_MAX / 4 ||
        !om_arg_range(c, dst, count * width))
        return CUDA_ERROR_INVALID_VALUE;
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
    /* posted (the shim posts sets of its plain allocations): the errors kept for the stream
     * and the context stay for the calls that report them */
    return c->posted ? rc : om_take_call_error(c, rc);
}

/* The bytes a pitched region touches: rows of `width` bytes, `pitch` apart. An empty region (no
 * row, or rows of no byte) touches nothing and is not checked here: the callers do not pass it
 * to the driver. */
static bool region_ok(struct session *s, uint64_t base, uint64_t pitch, uint64_t width,
                      uint64_t height)
{
    if (!height || !width)
        return true;
    if (width > pitch || height - 1 > (UINT64_MAX - width) / pitch)
        return false;
    return om_ranges_cover(&s->allocs, base, (height - 1) * pitch + width);
}

CUresult om_x_op_memset_2d(struct call *c)
{
    uint64_t dst = om_get_u64(&c->in), pitch = om_get_u64(&c->in), value = om_get_u64(&c->in);
    uint64_t elem = om_get_u64(&c->in), w = om_get_u64(&c->in), h = om_get_u64(&c->in);
    uint64_t sh = om_get_u64(&c->in), wait = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    /* The pitch of a single row is unused (the driver's documentation of cuMemsetD2D*). */
    if ((elem != 1 && elem != 2 && elem != 4) || w > UINT64_MAX / 4 ||
        !region_ok(c->s, dst, h == 1 ? w * elem : pitch, w * elem, h))
        return CUDA_ERROR_INVALID_VALUE;
    st = om_arg_stream(c, sh, true, &rc);
    if (!st)
        return rc;
    /* Rows of no element, or no row: nothing to set. The driver is not asked to walk the rows
     * (a height of 2^40 would keep this worker busy for hours on a driver that does). */
    if (!w || !h)
        return om_take_call_error(c, CUDA_SUCCESS);
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
    return om_take_call_error(c, rc);
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
    CUstream st = om_arg_stream(c, sh, true, &rc);

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
    return om_take_call_error(c, rc);
}

/* 2D copies: device to device as asked; a host side is the staging buffer
 * (to the device) or the answer (from it), packed with pitch = width. */
CUresult om_x_op_copy_2d(struct call *c)
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
        CUresult rs = om_staged(c, w * h, CUDA_ERROR_INVALID_VALUE);
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
    if (stype == CU_MEMORYTYPE_HOST) { /* to device memory, then */
        rc = copy2d_htod_pieces(c, &m, sh);
        om_account_copy(c->s, OM_ACCT_HTOD, w * h, rc);
        return rc;
    }
    st = om_arg_stream(c, sh, true, &rc);
    if (!st)
        return rc;
    rc = ((CUresult(*)(const CUDA_MEMCPY2D *, CUstream))REAL(cuMemcpy2DAsync_v2))(&m, st);
    if (rc == CUDA_SUCCESS && (wait || stype == CU_MEMORYTYPE_HOST))
        rc = om_wait_stream(st);
    if (rc == CUDA_SUCCESS && dtype == CU_MEMORYTYPE_HOST)
        c->out.len = w * h;
    om_account_copy(c->s, dtype == CU_MEMORYTYPE_HOST ? OM_ACCT_DTOH : OM_ACCT_DTOD, w * h, rc);
    return om_take_call_error(c, rc);
}

/* ------------------------------------------------------------------ copies with arrays */

/* One side of a copy as the client sent it: its memory type, the device address or array
 * handle, the offset (x in bytes, y, z) and for device memory the pitch and slice height. */
struct side {
    uint64_t type, addr, x, y, z, pitch, height;
};

static void get_side(struct call *c, struct side *s)
{
    s->type = om_get_u64(&c->in);
    s->addr = om_get_u64(&c->in);
    s->x = om_get_u64(&c->in);
    s->y = om_get_u64(&c->in);
    s->z = om_get_u64(&c->in);
    s->pitch = om_get_u64(&c->in);
    s->height = om_get_u64(&c->in);
}

/* The box [x, x + w) x [y, y + h) x [z, z + d) lies within the side's memory. */
static CUresult side_ok(struct call *c, const struct side *s, uint64_t w, uint64_t h, uint64_t d)
{
    if (s->type == CU_MEMORYTYPE_ARRAY) {
        CUDA_ARRAY3D_DESCRIPTOR a;
        uint64_t elem, bytes, rows, slices;
        if (!om_arg_array(c, s->addr))
            return CUDA_ERROR_INVALID_HANDLE;
        if (((CUresult(*)(CUDA_ARRAY3D_DESCRIPTOR *, CUarray))REAL(cuArray3DGetDescriptor_v2))(
                &a, (CUarray)(uintptr_t)s->addr) != CUDA_SUCCESS)
            return CUDA_ERROR_INVALID_HANDLE;
        elem = om_element_bytes(a.Format, a.NumChannels);
        if (!elem || a.Width > UINT64_MAX / elem)
            return CUDA_ERROR_NOT_SUPPORTED;
        bytes = a.Width * elem;
        rows = a.Height ? a.Height : 1;
        slices = a.Depth ? a.Depth : 1;
        if (s->x > bytes || w > bytes - s->x || s->y > rows || h > rows - s->y || s->z > slices ||
            d > slices - s->z)
            return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
    }
    if (s->type == CU_MEMORYTYPE_DEVICE) {
        /* slice z + k starts at (z + k) * height * pitch, row y + r at (y + r) * pitch */
        unsigned __int128 slice = (unsigned __int128)s->height * s->pitch;
        if (slice > ((unsigned __int128)1 << 64))
            return CUDA_ERROR_INVALID_VALUE;
        unsigned __int128 first = s->z * slice + (unsigned __int128)s->y * s->pitch + s->x;
        unsigned __int128 span = (d - 1) * slice + (unsigned __int128)(h - 1) * s->pitch + w;
        if ((h > 1 || d > 1) && w > s->pitch)
            return CUDA_ERROR_INVALID_VALUE;
        if (s->addr + first + span > ((unsigned __int128)1 << 64))
            return CUDA_ERROR_INVALID_VALUE;
        return om_arg_range(c, s->addr + (uint64_t)first, (uint64_t)span)
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_INVALID_VALUE;
    }
    return s->type == CU_MEMORYTYPE_HOST ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static void fill(const struct side *s, size_t *x, size_t *y, size_t *z, int *type, CUdeviceptr *dev,
                 void **arr, size_t *pitch, size_t *height)
{
    *type = (int)s->type;
    *x = s->x, *y = s->y, *z = s->z;
    if (s->type == CU_MEMORYTYPE_ARRAY)
        *arr = (void *)(uintptr_t)s->addr;
    else if (s->type == CU_MEMORYTYPE_DEVICE) {
        *dev = s->addr;
        *pitch = s->pitch;
        *height = s->height;
    }
}

/*
 * A copy with at least one array operand (the client sends the others as 2D copies): the
 * source's side, the destination's, the extent, the stream, whether to wait. A host source is
 * the staging buffer, a host destination the answer, both packed (pitch = width, height =
 * rows) and at most one reply buffer long (the client sends pieces); the driver copies through
 * the pinned reply buffer and the call waits for its stream before it returns.
 */
CUresult om_x_op_copy_3d(struct call *c)
{
    struct side src, dst;
    uint64_t w, h, d, sh, wait, total;
    CUDA_MEMCPY3D m;
    CUstream st;
    CUresult rc;

    get_side(c, &src);
    get_side(c, &dst);
    w = om_get_u64(&c->in), h = om_get_u64(&c->in), d = om_get_u64(&c->in);
    sh = om_get_u64(&c->in), wait = om_get_u64(&c->in);
    if ((rc = ARGS_OK(c)) != CUDA_SUCCESS)
        return rc;
    if ((src.type != CU_MEMORYTYPE_ARRAY && dst.type != CU_MEMORYTYPE_ARRAY) ||
        (src.type == CU_MEMORYTYPE_HOST && dst.type == CU_MEMORYTYPE_HOST) || !w || !h || !d ||
        __builtin_mul_overflow(w, h, &total) || __builtin_mul_overflow(total, d, &total))
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = side_ok(c, &src, w, h, d)) != CUDA_SUCCESS ||
        (rc = side_ok(c, &dst, w, h, d)) != CUDA_SUCCESS)
        return rc;
    memset(&m, 0, sizeof(m));
    fill(&src, &m.srcXInBytes, &m.srcY, &m.srcZ, &m.srcMemoryType, &m.srcDevice, &m.srcArray,
         &m.srcPitch, &m.srcHeight);
    fill(&dst, &m.dstXInBytes, &m.dstY, &m.dstZ, &m.dstMemoryType, &m.dstDevice, &m.dstArray,
         &m.dstPitch, &m.dstHeight);
    m.WidthInBytes = w, m.Height = h, m.Depth = d;
    if (src.type == CU_MEMORYTYPE_HOST || dst.type == CU_MEMORYTYPE_HOST) {
        if (total > c->out.cap)
            return CUDA_ERROR_INVALID_VALUE;
        wait = 1; /* the reply buffer is reused (or read) when the call returns */
    }
    if (src.type == CU_MEMORYTYPE_HOST) {
        if ((rc = om_staged(c, total, CUDA_ERROR_INVALID_VALUE)) != CUDA_SUCCESS)
            return rc;
        memcpy(c->out.p, c->s->stage, total);
        m.srcHost = c->out.p;
        m.srcXInBytes = m.srcY = m.srcZ = 0;
        m.srcPitch = w, m.srcHeight = h;
    }
    if (dst.type == CU_MEMORYTYPE_HOST) {
        m.dstHost = c->out.p;
        m.dstXInBytes = m.dstY = m.dstZ = 0;
        m.dstPitch = w, m.dstHeight = h;
    }
    st = om_arg_stream(c, sh, true, &rc);
    if (!st)
        return rc;
    rc = ((CUresult(*)(const CUDA_MEMCPY3D *, CUstream))REAL(cuMemcpy3DAsync_v2))(&m, st);
    if (rc == CUDA_SUCCESS && wait)
        rc = om_wait_stream(st);
    if (rc == CUDA_SUCCESS && dst.type == CU_MEMORYTYPE_HOST)
        c->out.len = total;
    om_account_copy(c->s,
                    src.type == CU_MEMORYTYPE_HOST   ? OM_ACCT_HTOD
                    : dst.type == CU_MEMORYTYPE_HOST ? OM_ACCT_DTOH
                                                     : OM_ACCT_DTOD,
                    total, rc);
    return om_take_call_error(c, rc);
}
