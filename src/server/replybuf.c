/* SPDX-License-Identifier: MIT */
/* The workers' reply buffers: pinned host memory, so that the server never hands the driver
 * pageable memory for a copy. */
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

#include "../common/log.h"

/*
 * A client's small copies (the bytes of an H2D copy that rode in its call, the pieces it
 * staged, the answer of a D2H copy) pass through the server's memory. Given to the driver as
 * pageable memory, such a copy goes through the driver's own staging buffers, and measured on
 * an H100 with 127 clients (docs/benchmarks.md, "B1's late kernels"), that path at times holds a
 * lock of the context until the running kernels finish: one client's 8-byte copy then stopped
 * the launches, event creations and copies of every other client for a whole kernel's time.
 * Copies to and from pinned memory only enqueue a DMA, and the wait that follows is for the
 * client's own stream.
 *
 * So each worker's reply buffer (OM_REPLY_MAX bytes) is pinned, and its H2D copies pass through
 * it too, since a call that copies to the device answers nothing (api/copies.c); after it, in
 * the same allocation, OM_COPY_SLOTS slots hold the bytes of small copies whose DMA may still
 * run when the next call is served (OM_REPLYBUF_BYTES in all). Pinning and
 * freeing pinned memory are driver calls best not made while clients' kernels run, so buffers are
 * pinned ahead at the start (PREFILL, warm.c), kept when a session ends, and only beyond KEEP
 * freed, once no session is left (KEEP x 544 KiB stay pinned while no client runs). Where
 * pinning fails, the buffer is plain memory and copies take the driver's pageable path, slower
 * but correct.
 */

#define KEEP 64
#define PREFILL 16
#define MAX_KEPT 4096

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *kept[MAX_KEPT];
static int nkept;
static int warned; /* (__atomic) */

#define R(sym) om_server_real[OM_IDX_##sym]

/* A pinned buffer, or NULL with *rc saying why. */
static void *pin_one(CUresult *rc)
{
    void *p = NULL;

    *rc = CUDA_ERROR_NOT_SUPPORTED;
    if (om_server_has(OM_IDX_cuMemHostAlloc))
        /* Portable: pinned for every context of the server (one per GPU). */
        *rc = ((CUresult(*)(void **, size_t, unsigned))R(cuMemHostAlloc))(&p, OM_REPLYBUF_BYTES,
                                                                          CU_MEMHOSTALLOC_PORTABLE);
    return *rc == CUDA_SUCCESS ? p : NULL;
}

void om_replybuf_prefill(void)
{
    CUresult rc;
    void *p;

    for (int i = 0; i < PREFILL && (p = pin_one(&rc)) != NULL; i++) {
        pthread_mutex_lock(&lock);
        kept[nkept++] = p;
        pthread_mutex_unlock(&lock);
    }
}

struct om_replybuf om_replybuf_get(bool context_current)
{
    struct om_replybuf b = {NULL, true};
    CUresult rc = CUDA_ERROR_INVALID_CONTEXT;

    pthread_mutex_lock(&lock);
    if (nkept > 0)
        b.p = kept[--nkept];
    pthread_mutex_unlock(&lock);
    if (b.p)
        return b;
    if (context_current && (b.p = pin_one(&rc)) != NULL)
        return b;
    if (context_current && !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        om_warn("cannot pin a reply buffer (CUresult %d): small copies take the driver's "
                "pageable path",
                (int)rc);
    b.p = malloc(OM_REPLY_MAX); /* no copy slots: small copies answered after their DMA */
    b.pinned = false;
    return b;
}

void om_replybuf_put(struct om_replybuf b)
{
    if (!b.p)
        return;
    if (!b.pinned) {
        free(b.p);
        return;
    }
    pthread_mutex_lock(&lock);
    if (nkept < MAX_KEPT) {
        kept[nkept++] = b.p;
        b.p = NULL;
    }
    pthread_mutex_unlock(&lock);
    if (b.p) /* past thousands of sessions at once: rather free now than leak */
        ((CUresult(*)(void *))R(cuMemFreeHost))(b.p);
}

void om_replybuf_trim(void)
{
    for (;;) {
        void *p = NULL;
        pthread_mutex_lock(&lock);
        if (nkept > KEEP)
            p = kept[--nkept];
        pthread_mutex_unlock(&lock);
        if (!p)
            return;
        ((CUresult(*)(void *))R(cuMemFreeHost))(p);
    }
}
