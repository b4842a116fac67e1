/* SPDX-License-Identifier: MIT */
/* The argument helpers every handler uses (generated or hand-written): a request that does not
 * parse, the bytes staged for a call, handles and device ranges the calling client owns, and the
 * checks shared by several families. Below the families; calls only the state below it. */
#include <stdlib.h>
#include <string.h>

#include "exec.h"

__attribute__((noinline, cold)) static void log_bad_request(struct session *s)
{
    client_err(s, "client %d: malformed request", (int)s->pid);
}

CUresult om_bad_request(struct call *c)
{
    log_bad_request(c->s);
    return CUDA_ERROR_INVALID_VALUE;
}

/* The bytes the client staged for this call (session.c): exactly n of them, or why not (a
 * budget refused some, or the client staged another length: `mismatch`). */
CUresult om_staged(struct call *c, uint64_t n, CUresult mismatch)
{
    if (c->s->stage_error != CUDA_SUCCESS)
        return c->s->stage_error;
    return n == c->s->stage_len ? CUDA_SUCCESS : mismatch;
}

CUresult om_arg_handle(struct call *c, enum om_handle_kind kind, uint64_t h, bool nullable)
{
    if (h == 0 && nullable)
        return CUDA_SUCCESS;
    if (kind == OM_H_FUNCTION) /* kernels are kept with their argument sizes (resources.c) */
        return om_kernel_total(c->s, h) >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    if (kind == OM_H_GRAPH && om_handles_has(&c->s->own[OM_H_CHILDGRAPH], h))
        return CUDA_SUCCESS; /* a child graph node's graph: usable, not destroyable (api/nodes.c) */
    if (om_handles_has(&c->s->own[kind], h))
        return CUDA_SUCCESS;
    /* A mipmap level or a plane is an array wherever one is read (api/arrays.c): its getters
     * and copies take it; only cuArrayDestroy refuses it, by its own check. */
    if (kind == OM_H_ARRAY && om_handles_has(&c->s->own[OM_H_SUBARRAY], h))
        return CUDA_SUCCESS;
    /* A module's texture reference is a texture reference wherever one is read (its getters,
     * setters, cuParamSetTexRef); cuTexRefDestroy refuses it by its own check (api/texrefs.c). */
    if (kind == OM_H_TEXREF && om_handles_has(&c->s->own[OM_H_MODTEXREF], h))
        return CUDA_SUCCESS;
    return CUDA_ERROR_INVALID_HANDLE;
}

bool om_arg_range(struct call *c, uint64_t p, uint64_t len)
{
    return om_ranges_cover(&c->s->allocs, p, len) || (len && om_hostmem_find_device(c->s, p, len));
}

/* One operation of a batch: its kind (CUstreamBatchMemOpType) known, its address within the
 * client's memory for its width, its flags within their mask; the driver's own field (alias)
 * cleared. */
CUresult om_batch_op_check(struct call *c, uint8_t *op)
{
    int kind;
    uint64_t addr;
    unsigned flags, small_flags;

    memcpy(&kind, op, 4);
    memcpy(&addr, op + 8, 8);
    memcpy(&flags, op + 24, 4);
    memcpy(&small_flags, op + 4, 4);
    switch (kind) {
    case 1:                       /* WAIT_VALUE_32 */
    case 4:                       /* WAIT_VALUE_64 */
        if (flags & ~0x40000003u) /* GEQ, EQ, AND, NOR; FLUSH */
            return CUDA_ERROR_INVALID_VALUE;
        break;
    case 2:                /* WRITE_VALUE_32 */
    case 5:                /* WRITE_VALUE_64 */
        if (flags & ~0x1u) /* NO_MEMORY_BARRIER */
            return CUDA_ERROR_INVALID_VALUE;
        break;
    case 3: /* FLUSH_REMOTE_WRITES: flags must be 0 */
        return small_flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    case 6: /* BARRIER: SYS or GPU */
        return small_flags > 1 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    if (!om_arg_range(c, addr, kind == 1 || kind == 2 ? 4 : 8))
        return CUDA_ERROR_INVALID_VALUE;
    memset(op + 32, 0, 8);
    return CUDA_SUCCESS;
}

/* An array the client may use: its own, or a level or plane of one of its own. */
bool om_arg_array(struct call *c, uint64_t h)
{
    return h && (om_arg_handle(c, OM_H_ARRAY, h, false) == CUDA_SUCCESS ||
                 om_arg_handle(c, OM_H_SUBARRAY, h, false) == CUDA_SUCCESS);
}

/* Bytes of one element of a format with `channels` channels; 0: a format whose elements are
 * not addressed by bytes here (block-compressed, planar video). */
uint64_t om_element_bytes(int format, unsigned channels)
{
    uint64_t one;

    switch (format) {
    case 0x01:
    case 0x08: one = 1; break; /* 8-bit integers */
    case 0x02:
    case 0x09:
    case 0x10: one = 2; break; /* 16-bit integers, half */
    case 0x03:
    case 0x0a:
    case 0x20: one = 4; break; /* 32-bit integers, float */
    default: return 0;
    }
    return channels == 1 || channels == 2 || channels == 4 ? one * channels : 0;
}

/* Device memory of the call's byte count, recorded as the client's; answers its address. A
 * managed allocation (the client shadows it at that address) is always a new one, and is never
 * kept for reuse when freed (devmem.c). */
CUresult om_devmem_for_client(struct call *c, bool managed, uint64_t *size)
{
    uint64_t bytes = om_get_u64(&c->in), base = 0, mem = 0;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_memcap_check(c->s, c->s->dev, bytes)) != CUDA_SUCCESS)
        return rc;
    rc = managed ? om_devmem_alloc(c->s->dev, bytes, &base, size, &mem)
                 : om_devmem_take(c->s, bytes, &base, size, &mem);
    if (managed && om_devmem_release_kept(c->s, rc))
        rc = om_devmem_alloc(c->s->dev, bytes, &base, size, &mem);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (om_ranges_add(&c->s->allocs, base, *size, mem, true) < 0) {
        om_devmem_free(base, *size, mem);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->s->allocs.v[c->s->allocs.n - 1].managed = managed;
    om_memcap_charge(c->s, &c->s->allocs.v[c->s->allocs.n - 1]);
    om_put_u64(&c->out, base);
    return CUDA_SUCCESS;
}

#define WIN32_TYPES (CU_MEM_HANDLE_TYPE_WIN32 | CU_MEM_HANDLE_TYPE_WIN32_KMT)

CUresult om_shareable_types(uint64_t mask)
{
    if (mask & ~(uint64_t)(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC |
                           WIN32_TYPES))
        return CUDA_ERROR_INVALID_VALUE;
    return mask & WIN32_TYPES ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS;
}

/* out:memcap (cuDeviceTotalMem_v2): under the client's device-memory cap (memcap.c) the cap is
 * the device's total. */
CUresult om_answer_memcap(struct call *c, size_t *total, int dev)
{
    uint64_t cap = om_memcap_cap(c->s, dev);

    if (cap && cap < *total)
        *total = (size_t)cap;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ JIT options */

#define JIT_LAST_OPTION 34 /* CU_JIT_SPLIT_COMPILE */

/* Options whose value is an array of the client's pointers (symbol names and addresses,
 * referenced names): they cannot travel as values. */
static bool jit_option_is_pointer_array(uint64_t o)
{
    return o == 17 || o == 18 || o == 25 || o == 27;
}

CUresult om_jit_options(struct call *c, struct om_jit *j)
{
    uint64_t n = om_get_u64(&c->in);

    if (c->in.bad || n > OM_JIT_OPTIONS_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    j->n = (unsigned)n;
    for (unsigned i = 0; i < j->n; i++) {
        uint64_t o = om_get_u64(&c->in), v = om_get_u64(&c->in);
        if (c->in.bad || o > JIT_LAST_OPTION)
            return CUDA_ERROR_INVALID_VALUE;
        if (jit_option_is_pointer_array(o)) {
            client_err(c->s, "client %d: JIT option %d (an array of pointers) is not supported",
                       (int)c->s->pid, (int)o);
            return CUDA_ERROR_NOT_SUPPORTED;
        }
        j->opts[i] = (CUjit_option)o;
        j->vals[i] = (void *)(uintptr_t)v;
    }
    for (unsigned i = 0; i < j->n; i++) {
        int k = j->opts[i] == JIT_INFO_LOG_BUFFER ? 0 : j->opts[i] == JIT_ERROR_LOG_BUFFER ? 1 : -1;
        int size_opt = k ? JIT_ERROR_LOG_BUFFER_SIZE_BYTES : JIT_INFO_LOG_BUFFER_SIZE_BYTES;
        uintptr_t size = 0;
        if (k < 0)
            continue;
        /* the client's size, capped: the driver writes at most that many bytes; the buffer is
         * that size (the link state's or the load's count is budgeted, its buffers by this cap) */
        for (unsigned m = 0; m < j->n; m++) {
            if ((int)j->opts[m] != size_opt)
                continue;
            if ((uintptr_t)j->vals[m] > OM_JIT_LOG_MAX)
                j->vals[m] = (void *)(uintptr_t)OM_JIT_LOG_MAX;
            size = (uintptr_t)j->vals[m];
        }
        if (j->logs[k]) /* the same log option twice */
            return CUDA_ERROR_INVALID_VALUE;
        if (!(j->logs[k] = calloc(1, size + 1)))
            return CUDA_ERROR_OUT_OF_MEMORY;
        j->vals[i] = j->logs[k];
    }
    return CUDA_SUCCESS;
}

void om_jit_answer(struct call *c, const struct om_jit *j)
{
    om_put_u64(&c->out, j->n);
    for (unsigned i = 0; i < j->n; i++)
        om_put_u64(&c->out, j->opts[i] == JIT_INFO_LOG_BUFFER || j->opts[i] == JIT_ERROR_LOG_BUFFER
                                ? 0
                                : (uint64_t)(uintptr_t)j->vals[i]);
    for (int k = 0; k < 2; k++) { /* the driver NUL-terminates them within their buffers */
        size_t len = j->logs[k] ? strnlen(j->logs[k], OM_JIT_LOG_MAX) : 0;
        om_put_u64(&c->out, len);
        om_put_bytes(&c->out, j->logs[k], len);
    }
}

void om_jit_free(struct om_jit *j)
{
    free(j->logs[0]);
    free(j->logs[1]);
    j->logs[0] = j->logs[1] = NULL;
}
