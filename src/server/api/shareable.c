/* SPDX-License-Identifier: MIT */
/*
 * Shareable handles of allocation handles (cuMemCreate) and pools (cuMemPoolCreate), and pool
 * pointers (api/remote/shareable.tsv). Handle types: a POSIX file descriptor (the server's
 * export goes to the client after the answer, SCM_RIGHTS, then the server closes its copy; an
 * import's descriptor comes on the socket just before the call and the server closes its copy
 * after it, as the driver does not take it) or a fabric handle (64 bytes, in the request or the
 * answer). Win32 types are refused (no such handle on Linux). What an import makes is the
 * importer's (handle kinds memhandle and mempool, its budget, released at its end), also when
 * the exporter is another client of this server, the usual case here.
 *
 * One process: an import of what another client of this server exported is an import in the
 * exporting process. Should the driver answer with the exporter's very handle or pool, the
 * importer would share an object another client destroys: refused (NOT_SUPPORTED, logged),
 * the object left alone. Exports are remembered for that check (bounded per session).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/msg.h"
#include "../exec.h"
#include "openmps/ops.h"

#define FD CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
#define FABRIC CU_MEM_HANDLE_TYPE_FABRIC
#define WIN32_TYPES (CU_MEM_HANDLE_TYPE_WIN32 | CU_MEM_HANDLE_TYPE_WIN32_KMT)

/* One handle type of an export or import: a descriptor or a fabric handle. */
static CUresult one_type(uint64_t type)
{
    if (type == FD || type == FABRIC)
        return CUDA_SUCCESS;
    return type == CU_MEM_HANDLE_TYPE_WIN32 || type == CU_MEM_HANDLE_TYPE_WIN32_KMT
               ? CUDA_ERROR_NOT_SUPPORTED
               : CUDA_ERROR_INVALID_VALUE;
}

/* ------------------------------------------------------------------ exports remembered */

struct exported {
    struct session *s;
    enum om_handle_kind kind;
    uint64_t h;
};
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct exported *exps;
static size_t nexps, exps_cap;

static void remember(struct session *s, enum om_handle_kind kind, uint64_t h)
{
    size_t mine = 0;

    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nexps; i++) {
        if (exps[i].s == s && exps[i].kind == kind && exps[i].h == h)
            goto out;
        mine += exps[i].s == s;
    }
    if (mine >= 2u * om_budget.client_handles) /* forget what it no longer holds */
        for (size_t i = nexps; i-- > 0;)
            if (exps[i].s == s && !om_handles_has(&s->own[exps[i].kind], exps[i].h))
                exps[i] = exps[--nexps];
    if (nexps == exps_cap) {
        size_t cap = exps_cap ? 2 * exps_cap : 16;
        struct exported *v = realloc(exps, cap * sizeof(*v));
        if (!v)
            goto out; /* only the check of a same-process import is lost */
        exps = v;
        exps_cap = cap;
    }
    exps[nexps++] = (struct exported){s, kind, h};
out:
    pthread_mutex_unlock(&lock);
}

/* h is what another client exported (the driver answered an import with the exporter's own). */
static bool others(struct session *s, enum om_handle_kind kind, uint64_t h)
{
    bool found = false;

    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nexps && !found; i++)
        found = exps[i].s != s && exps[i].kind == kind && exps[i].h == h;
    pthread_mutex_unlock(&lock);
    return found;
}

void om_shareable_session_end(struct session *s)
{
    pthread_mutex_lock(&lock);
    for (size_t i = nexps; i-- > 0;)
        if (exps[i].s == s)
            exps[i] = exps[--nexps];
    pthread_mutex_unlock(&lock);
}

/* ------------------------------------------------------------------ exports */

/* The driver's export of the client's handle or pool `h`: a descriptor sent after the answer
 * (closed here then), or a fabric handle in the answer. */
static CUresult export(struct call *c, enum om_handle_kind kind, int index)
{
    uint64_t h = om_get_u64(&c->in), type = om_get_u64(&c->in), flags = om_get_u64(&c->in);
    union {
        int fd;
        CUmemFabricHandle fabric;
    } out;
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, kind, h, false);
    if (rc == CUDA_SUCCESS)
        rc = one_type(type);
    if (rc == CUDA_SUCCESS && flags)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    memset(&out, 0, sizeof(out));
    out.fd = -1;
    rc = ((CUresult(*)(void *, uint64_t, int, unsigned long long))om_server_real[index])(
        &out, h, (int)type, 0);
    if (rc != CUDA_SUCCESS)
        return rc;
    remember(c->s, kind, h);
    if (type == FABRIC) {
        om_put_bytes(&c->out, &out.fabric, sizeof(out.fabric));
        return CUDA_SUCCESS;
    }
    if (out.fd < 0)
        return CUDA_ERROR_UNKNOWN;
    c->s->send_fd_after = out.fd;
    c->s->send_fd_close = true;
    return CUDA_SUCCESS;
}

CUresult om_x_cuMemExportToShareableHandle(struct call *c)
{
    return export(c, OM_H_MEMHANDLE, OM_IDX_cuMemExportToShareableHandle);
}

CUresult om_x_cuMemPoolExportToShareableHandle(struct call *c)
{
    return export(c, OM_H_MEMPOOL, OM_IDX_cuMemPoolExportToShareableHandle);
}

/* ------------------------------------------------------------------ imports */

/* The descriptor the client sent for this call (always taken, also for a request that does not
 * parse, so that the next import pairs with its own); -1 when none came. */
static int take_fd(struct call *c)
{
    struct om_msg *m = malloc(sizeof(*m));
    int fd = -1;

    if (!m)
        return -1;
    if (om_msg_recv(c->s->sock, m, &fd, 2000) != 0 || m->hdr.type != OM_MSG_HOST_MEM) {
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    free(m);
    return fd;
}

/*
 * Request: type, flags (pools; 0 for allocation handles), then a fabric handle's 64 bytes, or
 * nothing for a descriptor (it came on the socket). Answer: the new handle or pool.
 */
static CUresult import(struct call *c, enum om_handle_kind kind)
{
    uint64_t type = om_get_u64(&c->in), flags = om_get_u64(&c->in), h = 0;
    const void *fabric = type == FABRIC ? om_get_bytes(&c->in, sizeof(CUmemFabricHandle)) : NULL;
    int fd = type == FD ? take_fd(c) : -1;
    CUmemFabricHandle fh;
    void *os = NULL;
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS)
        rc = one_type(type);
    if (rc == CUDA_SUCCESS && (flags || (type == FD && fd < 0)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = om_own_room(c->s, kind);
    if (rc == CUDA_SUCCESS) {
        if (type == FABRIC) {
            memcpy(&fh, fabric, sizeof(fh));
            os = &fh;
        } else {
            os = (void *)(uintptr_t)fd; /* the driver's convention: the descriptor's value */
        }
        if (kind == OM_H_MEMHANDLE)
            rc = ((CUresult(*)(CUmemGenericAllocationHandle *, void *, int))REAL(
                cuMemImportFromShareableHandle))(&h, os, (int)type);
        else
            rc = ((CUresult(*)(CUmemoryPool *, void *, int, unsigned long long))REAL(
                cuMemPoolImportFromShareableHandle))((CUmemoryPool *)(void *)&h, os, (int)type, 0);
    }
    if (fd >= 0)
        close(fd); /* the driver does not keep the descriptor; the program has its own */
    if (rc != CUDA_SUCCESS)
        return rc;
    if (others(c->s, kind, h) || om_handles_has(&c->s->own[kind], h)) {
        /* The driver gave back an object that is already someone's: sharing it would let one
         * client destroy what another uses. Left alone: whether the import added a reference
         * of its own is not measured (the driver's rule is one release per import; the test
         * double answers the holder's handle without one, and releasing it there freed the
         * holder's allocation: found by the ASan pass). A leaked reference is the lesser harm. */
        client_err(c->s,
                   "client %d: importing a shareable handle gave back the %s %#llx that a "
                   "client of this server already holds; refused (CUDA_ERROR_NOT_SUPPORTED)",
                   (int)c->s->pid, kind == OM_H_MEMHANDLE ? "allocation handle" : "pool",
                   (unsigned long long)h);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if ((rc = om_own_add(c, kind, h)) != CUDA_SUCCESS)
        return rc;
    om_put_u64(&c->out, h);
    return CUDA_SUCCESS;
}

CUresult om_x_cuMemImportFromShareableHandle(struct call *c)
{
    return import(c, OM_H_MEMHANDLE);
}

CUresult om_x_cuMemPoolImportFromShareableHandle(struct call *c)
{
    return import(c, OM_H_MEMPOOL);
}

/* ------------------------------------------------------------------ pool pointers */

/* ptr: within the client's memory from a pool it owns. Answer: the 64 bytes of export data. */
/* val:poolptr (cuMemPoolExportPointer, generated): pool memory of a pool the client owns. */
CUresult om_check_poolptr(struct call *c, uint64_t ptr)
{
    const struct om_range *r = NULL;

    for (size_t i = 0; i < c->s->allocs.n && !r; i++)
        if (ptr >= c->s->allocs.v[i].base && ptr - c->s->allocs.v[i].base < c->s->allocs.v[i].size)
            r = &c->s->allocs.v[i];
    if (!r || !r->pool || !om_handles_has(&c->s->own[OM_H_MEMPOOL], r->pool))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* pool: one the client owns (the driver refuses a pool that was not imported). The imported
 * range is the client's pool memory from then on (cuMemFree, cuMemFreeAsync, its end). Answer:
 * the address and the size (the driver's address range of it). */
CUresult om_x_cuMemPoolImportPointer(struct call *c)
{
    uint64_t pool = om_get_u64(&c->in);
    const void *b = om_get_bytes(&c->in, sizeof(CUmemPoolPtrExportData));
    CUmemPoolPtrExportData d;
    CUdeviceptr p = 0, base = 0;
    size_t size = 0;
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_MEMPOOL, pool, false);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (c->s->allocs.n >= (size_t)om_budget.client_handles * 64) /* a bound on the records */
        return om_budget_refuse(c->s, OM_BUDGET_HANDLES, "cuMemPoolImportPointer");
    memcpy(&d, b, sizeof(d));
    rc = ((CUresult(*)(CUdeviceptr *, CUmemoryPool, CUmemPoolPtrExportData *))REAL(
        cuMemPoolImportPointer))(&p, (CUmemoryPool)(uintptr_t)pool, &d);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = ((CUresult(*)(CUdeviceptr *, size_t *, CUdeviceptr))REAL(cuMemGetAddressRange_v2))(
        &base, &size, p);
    if (rc == CUDA_SUCCESS && (base != p || size == 0))
        rc = CUDA_ERROR_UNKNOWN;
    /* Already its memory: once is enough (the second import's reference is given back, the
     * driver counting one per import, as it asks every importer to free what it imported). */
    if (rc == CUDA_SUCCESS && om_ranges_find_base(&c->s->allocs, p))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && om_ranges_add(&c->s->allocs, p, size, 0, true) < 0)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS) {
        CUresult frc;
        CUstream st = om_find_stream(c->s, 0, true, &frc);
        if (st)
            ((CUresult(*)(CUdeviceptr, CUstream))REAL(cuMemFreeAsync))(p, st);
        return rc;
    }
    c->s->allocs.v[c->s->allocs.n - 1].pool = pool;
    om_put_u64(&c->out, p);
    om_put_u64(&c->out, size);
    return CUDA_SUCCESS;
}
