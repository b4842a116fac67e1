/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of device and pinned host memory. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/image.h"
#include "../../common/msg.h"
#include "../exec.h"
#include "openmps/ops.h"

/* ------------------------------------------------------------------ memory */

/* The device's memory as the client may use it: under its cap (memcap.c) the cap is the
 * total, and what it does not hold of the cap is free, at most what the device has free. So a
 * framework that sizes its pool from cuMemGetInfo (PyTorch's mem_get_info) sees its cap. */
/* out:memfree, out:memtotal (cuMemGetInfo_v2, the current device): under the client's cap the
 * cap is the total and what the client does not hold of it the free memory (memcap.c). */
CUresult om_answer_memfree(struct call *c, size_t *free_bytes)
{
    uint64_t cap = om_memcap_cap(c->s, c->s->dev), used = om_memcap_used(c->s, c->s->dev);
    uint64_t left = used < cap ? cap - used : 0;
    /* what the server keeps of the client's freed allocations is free to it (devmem.c); the
     * device has that much at least, so the sum stays within its total */
    uint64_t cached = om_devmem_cached(c->s, c->s->dev);

    *free_bytes = cached > SIZE_MAX - *free_bytes ? SIZE_MAX : *free_bytes + (size_t)cached;
    if (cap && left < *free_bytes)
        *free_bytes = (size_t)left;
    return CUDA_SUCCESS;
}

CUresult om_answer_memtotal(struct call *c, size_t *total)
{
    return om_answer_memcap(c, total, c->s->dev);
}

CUresult om_x_cuMemAlloc_v2(struct call *c)
{
    uint64_t size = 0;

    return om_devmem_for_client(c, false, &size);
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

/* Pinned host memory: the region's memfd goes to the client after the answer, and is closed
 * then unless the region keeps it for the pool (hostmem.c). */
CUresult om_x_cuMemHostAlloc(struct call *c)
{
    uint64_t bytes = om_get_u64(&c->in);
    struct om_hostmem *h;
    int fd;
    bool close_fd;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    rc = hostmem_slot(c->s) < 0 ? CUDA_ERROR_OUT_OF_MEMORY
                                : pinned_budget_take(c->s, bytes, "cuMemHostAlloc");
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = om_hostmem_alloc(c->s, bytes, &h, &fd, &close_fd);
    if (rc != CUDA_SUCCESS) {
        pinned_budget_give(c->s, bytes);
        return rc;
    }
    c->s->pinned_bytes += h->len - pinned_len(bytes); /* a pooled region may be larger */
    c->s->hostmem[c->s->nhostmem++] = h;
    c->s->send_fd_after = fd; /* the server keeps the mapping; the descriptor when poolable */
    c->s->send_fd_close = close_fd;
    om_put_u64(&c->out, (uint64_t)(uintptr_t)h->addr);
    om_put_u64(&c->out, h->len);
    om_put_u64(&c->out, h->device);
    return CUDA_SUCCESS;
}

/* The client's own memory, moved onto a memfd it sends on its socket just
 * before this call. */
CUresult om_x_cuMemHostRegister_v2(struct call *c)
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
    rc = om_hostmem_adopt(c->s, fd, addr, len, &h);
    if (rc != CUDA_SUCCESS) {
        pinned_budget_give(c->s, len);
        return rc;
    }
    c->s->hostmem[c->s->nhostmem++] = h;
    om_put_u64(&c->out, (uint64_t)(uintptr_t)h->addr);
    om_put_u64(&c->out, h->device);
    return CUDA_SUCCESS;
}

CUresult om_x_cuMemFreeHost(struct call *c)
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
        return om_take_call_error(c, rc);
    }
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult om_x_cuMemFree_v2(struct call *c)
{
    uint64_t base = om_get_u64(&c->in);
    struct om_range *r;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    r = om_ranges_find_base(&c->s->allocs, base);
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    if (r->pool || r->graph) /* the driver's cuMemFree frees stream-ordered memory too */
        return om_take_call_error(c, om_poolmem_free(c->s, r));
    /* The program expects its own work on the memory to be done; other
     * clients' work is not waited for. */
    rc = om_exec_sync_client(c->s);
    if (om_ipc_keep(c->s, r))
        ; /* clients that opened it by an IPC handle keep it (api/ipc.c) */
    else if (r->managed) {
        om_devmem_free(r->base, r->size, r->mem);
        om_own_drop(c->s, OM_H_EXTBUF, base); /* a buffer on external memory (external.c) */
    } else {
        om_devmem_give(c->s, r->dev, r->base, r->size, r->mem);
    }
    om_allocs_remove(c->s, r);
    return om_take_call_error(c, rc);
}

/* A dma-buf descriptor of the client's own device range (CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD;
 * flags: CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE). The driver's descriptor goes to the
 * client after the answer, then the server closes its copy: the server keeps nothing. */
CUresult om_x_cuMemGetHandleForAddressRange(struct call *c)
{
    uint64_t dptr = om_get_u64(&c->in), size = om_get_u64(&c->in);
    uint64_t type = om_get_u64(&c->in), flags = om_get_u64(&c->in);
    CUresult (*get)(void *, CUdeviceptr, size_t, int, unsigned long long) =
        REAL(cuMemGetHandleForAddressRange);
    int fd = -1;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (type != 1 || (flags & ~1ull) || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!om_arg_range(c, dptr, size))
        return CUDA_ERROR_INVALID_VALUE;
    rc = get(&fd, (CUdeviceptr)dptr, (size_t)size, (int)type, flags);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (fd < 0)
        return CUDA_ERROR_UNKNOWN;
    c->s->send_fd_after = fd;
    c->s->send_fd_close = true;
    return CUDA_SUCCESS;
}
