/* SPDX-License-Identifier: MIT */
/*
 * IPC memory and event handles between clients of one server. Every client's memory is the
 * server's, in one context, so a handle is an openmps-made blob: a magic, the server's pid and a
 * random id the server maps to (exporting client, allocation). Opening it in another client of the
 * same server adds the allocation to that client's memory, not owned (it may not free it), at the
 * same address. The allocation lives while it is open somewhere: when its exporter frees it
 * (or leaves), the openers keep it, and the last close frees it. A handle that is not one of
 * this server's is refused with CUDA_ERROR_INVALID_VALUE. What the handles share lives in
 * ipcstate.c; this file makes and reads the handles.
 */
#include <string.h>
#include <unistd.h>

#include "../exec.h"

#define MAGIC "OMPSIPC1"

CUresult om_x_cuIpcGetMemHandle(struct call *c)
{
    uint64_t p = om_get_u64(&c->in), id = 0, pid = (uint64_t)getpid();
    struct om_range *r = NULL;
    uint8_t blob[CU_IPC_HANDLE_SIZE] = {0};
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    for (size_t i = 0; i < c->s->allocs.n && !r; i++) {
        struct om_range *x = &c->s->allocs.v[i];
        if (x->owned && p >= x->base && p - x->base < x->size)
            r = x;
    }
    /* Its own allocations of cuMemAlloc only: pool memory has cuMemPoolExportPointer, managed
     * memory none (the driver refuses both here too); a graph allocation's address outlives
     * its memory (another client could keep it after the graph went). */
    if (!r || r->pool || r->managed || r->graph)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = om_ipc_export(c->s, r, &id)) != CUDA_SUCCESS)
        return rc;
    memcpy(blob, MAGIC, 8);
    memcpy(blob + 8, &pid, 8);
    memcpy(blob + 16, &id, 8);
    om_put_bytes(&c->out, blob, sizeof(blob));
    return CUDA_SUCCESS;
}

CUresult om_x_cuIpcOpenMemHandle_v2(struct call *c)
{
    const uint8_t *blob = om_get_bytes(&c->in, CU_IPC_HANDLE_SIZE);
    uint64_t flags = om_get_u64(&c->in), pid = 0, id = 0, base = 0, size = 0;
    bool first = false;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!blob || (flags & ~(uint64_t)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&pid, blob + 8, 8);
    memcpy(&id, blob + 16, 8);
    if (memcmp(blob, MAGIC, 8) || pid != (uint64_t)getpid())
        return CUDA_ERROR_INVALID_VALUE; /* not a handle of this server */
    if ((rc = om_ipc_open(c->s, id, &base, &size, &first)) != CUDA_SUCCESS)
        return rc;
    om_put_u64(&c->out, base);
    om_put_u64(&c->out, size);
    om_put_u64(&c->out, first);
    return CUDA_SUCCESS;
}

CUresult om_x_cuIpcCloseMemHandle(struct call *c)
{
    uint64_t base = om_get_u64(&c->in);
    bool last = false;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    rc = om_ipc_close(c->s, base, &last);
    if (rc != CUDA_SUCCESS && !last)
        return rc; /* not a handle it opened */
    om_put_u64(&c->out, last);
    return last ? om_take_call_error(c, rc) : rc;
}

/*
 * IPC event handles: the same openmps-made blob (magic OMPSIPCE) naming an event of the
 * exporting client, which must have been created for it (CU_EVENT_INTERPROCESS, checked by the
 * driver's own cuIpcGetEventHandle on the server). Opening it in another client makes the same
 * server event that client's too, so a shared event has several holders: each client's
 * cuEventDestroy (or its end) lets go of it, and only the last one destroys it.
 */
#define EVENT_MAGIC "OMPSIPCE"

CUresult om_x_cuIpcGetEventHandle(struct call *c)
{
    uint64_t ev = om_get_u64(&c->in), id = 0, pid = (uint64_t)getpid();
    uint8_t blob[CU_IPC_HANDLE_SIZE] = {0};
    CUipcEventHandle real;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_arg_handle(c, OM_H_EVENT, ev, false)) != CUDA_SUCCESS)
        return rc;
    /* The driver says whether the event may be shared (its flags); its handle is not used. */
    rc = ((CUresult(*)(CUipcEventHandle *, CUevent))REAL(cuIpcGetEventHandle))(
        &real, (CUevent)(uintptr_t)ev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_ipc_event_export(ev, &id)) != CUDA_SUCCESS)
        return rc;
    memcpy(blob, EVENT_MAGIC, 8);
    memcpy(blob + 8, &pid, 8);
    memcpy(blob + 16, &id, 8);
    om_put_bytes(&c->out, blob, sizeof(blob));
    return CUDA_SUCCESS;
}

CUresult om_x_cuIpcOpenEventHandle(struct call *c)
{
    const uint8_t *blob = om_get_bytes(&c->in, CU_IPC_HANDLE_SIZE);
    uint64_t pid = 0, id = 0, ev = 0;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    memcpy(&pid, blob + 8, 8);
    memcpy(&id, blob + 16, 8);
    if (memcmp(blob, EVENT_MAGIC, 8) || pid != (uint64_t)getpid())
        return CUDA_ERROR_INVALID_VALUE; /* not a handle of this server */
    if ((rc = om_own_room(c->s, OM_H_EVENT)) != CUDA_SUCCESS)
        return rc;
    if ((rc = om_ipc_event_open(c->s, id, &ev)) != CUDA_SUCCESS)
        return rc;
    om_put_u64(&c->out, ev);
    return CUDA_SUCCESS;
}
