/* SPDX-License-Identifier: MIT */
/*
 * IPC memory and event handles between clients of one server. Every client's memory is the
 * server's, in one context, so a handle is an openmps-made blob: a magic, the server's pid and a
 * random id the server maps to (exporting client, allocation). Opening it in another client of the
 * same server adds the allocation to that client's memory, not owned (it may not free it), at the
 * same address. The allocation lives while it is open somewhere: when its exporter frees it
 * (or leaves), the openers keep it, and the last close frees it. A handle that is not one of
 * this server's is refused with CUDA_ERROR_INVALID_VALUE.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "../exec.h"

#define MAGIC "OMPSIPC1"

struct export
{
    uint64_t id;
    struct session *owner; /* NULL once the exporter freed it or left: the openers hold it */
    uint64_t base, size, mem;
    unsigned opens; /* the openers' references */
};

struct opened {
    struct session *s;
    uint64_t id;
    unsigned refs;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct export *exports;
static size_t nexports, exports_cap;
static struct opened *opens;
static size_t nopens, opens_cap;

static struct export *find_id(uint64_t id)
{
    for (size_t i = 0; i < nexports; i++)
        if (exports[i].id == id)
            return &exports[i];
    return NULL;
}

static struct export *find_owned(struct session *s, uint64_t base)
{
    for (size_t i = 0; i < nexports; i++)
        if (exports[i].owner == s && exports[i].base == base)
            return &exports[i];
    return NULL;
}

static struct opened *find_open(struct session *s, uint64_t id)
{
    for (size_t i = 0; i < nopens; i++)
        if (opens[i].s == s && opens[i].id == id)
            return &opens[i];
    return NULL;
}

/* An export nobody holds any more: its memory goes (with the lock held). */
static void export_drop(struct export *e, bool free_memory)
{
    if (free_memory)
        om_devmem_free(e->base, e->size, e->mem);
    *e = exports[--nexports];
}

static int grow(void **v, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 16;
    void *p = realloc(*v, c * elem);
    if (!p)
        return -1;
    *v = p;
    *cap = c;
    return 0;
}

CUresult om_x_cuIpcGetMemHandle(struct call *c)
{
    uint64_t p = om_get_u64(&c->in), id = 0, pid = (uint64_t)getpid(), mine = 0;
    struct om_range *r = NULL;
    struct export *e;
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
    pthread_mutex_lock(&lock);
    e = find_owned(c->s, r->base);
    if (!e) {
        for (size_t i = 0; i < nexports; i++)
            mine += exports[i].owner == c->s;
        if (mine >= om_budget.client_handles) {
            pthread_mutex_unlock(&lock);
            return om_budget_refuse(c->s, OM_BUDGET_HANDLES, "cuIpcGetMemHandle");
        }
        while (id == 0 || find_id(id))
            if (getrandom(&id, sizeof(id), 0) != sizeof(id))
                id = 0;
        if (grow((void **)&exports, &exports_cap, nexports, sizeof(*exports)) < 0) {
            pthread_mutex_unlock(&lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        e = &exports[nexports++];
        *e = (struct export){id, c->s, r->base, r->size, r->mem, 0};
    }
    id = e->id;
    pthread_mutex_unlock(&lock);
    memcpy(blob, MAGIC, 8);
    memcpy(blob + 8, &pid, 8);
    memcpy(blob + 16, &id, 8);
    om_put_bytes(&c->out, blob, sizeof(blob));
    return CUDA_SUCCESS;
}

CUresult om_x_cuIpcOpenMemHandle_v2(struct call *c)
{
    const uint8_t *blob = om_get_bytes(&c->in, CU_IPC_HANDLE_SIZE);
    uint64_t flags = om_get_u64(&c->in), pid = 0, id = 0, base, size;
    struct export *e;
    struct opened *o;
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
    pthread_mutex_lock(&lock);
    e = find_id(id);
    if (!e || !e->owner) { /* unknown, or freed by its exporter since */
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (e->owner == c->s) { /* the driver refuses a process its own handle */
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    base = e->base;
    size = e->size;
    o = find_open(c->s, id);
    if (!o) {
        if (grow((void **)&opens, &opens_cap, nopens, sizeof(*opens)) < 0 ||
            om_ranges_add(&c->s->allocs, base, size, 0, false) < 0) {
            pthread_mutex_unlock(&lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        o = &opens[nopens++];
        *o = (struct opened){c->s, id, 0};
        first = true;
    }
    o->refs++;
    e->opens++;
    pthread_mutex_unlock(&lock);
    om_put_u64(&c->out, base);
    om_put_u64(&c->out, size);
    om_put_u64(&c->out, first);
    return CUDA_SUCCESS;
}

/* The opener's (not owned) range at base leaves its memory. */
static void forget_range(struct session *s, uint64_t base)
{
    for (size_t i = 0; i < s->allocs.n; i++) {
        if (!s->allocs.v[i].owned && s->allocs.v[i].base == base) {
            om_allocs_remove(s, &s->allocs.v[i]);
            return;
        }
    }
}

CUresult om_x_cuIpcCloseMemHandle(struct call *c)
{
    uint64_t base = om_get_u64(&c->in), id = 0;
    struct opened *o = NULL;
    struct export *e = NULL;
    bool last = false;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nopens && !o; i++) {
        if (opens[i].s == c->s && (e = find_id(opens[i].id)) && e->base == base)
            o = &opens[i];
    }
    if (!o) {
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    id = o->id;
    if (o->refs > 1) { /* opened again before: the range stays */
        o->refs--;
        e->opens--;
        pthread_mutex_unlock(&lock);
        om_put_u64(&c->out, 0);
        return CUDA_SUCCESS;
    }
    *o = opens[--nopens];
    last = true;
    pthread_mutex_unlock(&lock);
    /* Its own work on the memory is done first; nobody else's is waited for. Its reference
     * still holds the memory meanwhile. */
    rc = om_exec_sync_client(c->s);
    forget_range(c->s, base);
    pthread_mutex_lock(&lock);
    e = find_id(id);
    if (e && e->opens && --e->opens == 0 && !e->owner)
        export_drop(e, true);
    pthread_mutex_unlock(&lock);
    om_put_u64(&c->out, last);
    return om_take_call_error(c, rc);
}

bool om_ipc_keep(struct session *s, const struct om_range *r)
{
    bool keep = false;
    struct export *e;

    pthread_mutex_lock(&lock);
    e = find_owned(s, r->base);
    if (e && e->opens) {
        e->owner = NULL; /* the openers hold it now; the last close frees it */
        keep = true;
    } else if (e) {
        export_drop(e, false); /* the caller frees it */
    }
    pthread_mutex_unlock(&lock);
    return keep;
}

void om_ipc_session_end(struct session *s)
{
    pthread_mutex_lock(&lock);
    for (size_t i = nopens; i-- > 0;) {
        if (opens[i].s != s)
            continue;
        struct export *e = find_id(opens[i].id);
        if (e) {
            e->opens -= opens[i].refs < e->opens ? opens[i].refs : e->opens;
            if (!e->opens && !e->owner)
                export_drop(e, true);
        }
        opens[i] = opens[--nopens];
    }
    for (size_t i = nexports; i-- > 0;) {
        if (exports[i].owner != s)
            continue;
        if (!exports[i].opens) {
            export_drop(&exports[i], false); /* freed with the session's allocations */
            continue;
        }
        exports[i].owner = NULL;
        for (size_t j = 0; j < s->allocs.n; j++) /* not freed with them: the openers hold it */
            if (s->allocs.v[j].owned && s->allocs.v[j].base == exports[i].base)
                s->allocs.v[j].owned = false;
    }
    pthread_mutex_unlock(&lock);
}

/*
 * IPC event handles: the same openmps-made blob (magic OMPSIPCE) naming an event of the
 * exporting client, which must have been created for it (CU_EVENT_INTERPROCESS, checked by the
 * driver's own cuIpcGetEventHandle on the server). Opening it in another client makes the same
 * server event that client's too, so a shared event has several holders: each client's
 * cuEventDestroy (or its end) lets go of it, and only the last one destroys it.
 */
#define EVENT_MAGIC "OMPSIPCE"

struct shared_event {
    uint64_t id, event;
    unsigned holders; /* sessions that hold it in their events */
};
static struct shared_event *sevents;
static size_t nsevents, sevents_cap;

static struct shared_event *find_event(uint64_t event)
{
    for (size_t i = 0; i < nsevents; i++)
        if (sevents[i].event == event)
            return &sevents[i];
    return NULL;
}

CUresult om_x_cuIpcGetEventHandle(struct call *c)
{
    uint64_t ev = om_get_u64(&c->in), id = 0, pid = (uint64_t)getpid();
    uint8_t blob[CU_IPC_HANDLE_SIZE] = {0};
    CUipcEventHandle real;
    struct shared_event *e;
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
    pthread_mutex_lock(&lock);
    e = find_event(ev);
    if (!e) {
        while (id == 0 || find_id(id))
            if (getrandom(&id, sizeof(id), 0) != sizeof(id))
                id = 0;
        for (size_t i = 0; i < nsevents && id; i++)
            if (sevents[i].id == id)
                id = 0;
        if (!id || grow((void **)&sevents, &sevents_cap, nsevents, sizeof(*sevents)) < 0) {
            pthread_mutex_unlock(&lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        e = &sevents[nsevents++];
        *e = (struct shared_event){id, ev, 1};
    }
    id = e->id;
    pthread_mutex_unlock(&lock);
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
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nsevents && !ev; i++)
        if (sevents[i].id == id)
            ev = sevents[i].event;
    if (!ev) {
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_INVALID_VALUE; /* unknown, or destroyed by every holder since */
    }
    if (!om_handles_has(&c->s->own[OM_H_EVENT], ev)) {
        if (om_handles_add(&c->s->own[OM_H_EVENT], ev) < 0) {
            pthread_mutex_unlock(&lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        find_event(ev)->holders++;
    }
    pthread_mutex_unlock(&lock);
    om_put_u64(&c->out, ev);
    return CUDA_SUCCESS;
}

bool om_ipc_event_release(uint64_t event)
{
    bool last = true;
    struct shared_event *e;

    pthread_mutex_lock(&lock);
    e = find_event(event);
    if (e && --e->holders > 0)
        last = false;
    else if (e)
        *e = sevents[--nsevents];
    pthread_mutex_unlock(&lock);
    return last;
}

/* The session's end: its events, a shared one destroyed by its last holder only. */
void om_ipc_events_session_end(struct session *s)
{
    for (size_t i = 0; i < s->own[OM_H_EVENT].n; i++)
        if (om_ipc_event_release(s->own[OM_H_EVENT].v[i]))
            ((CUresult(*)(CUevent))REAL(cuEventDestroy_v2))(
                (CUevent)(uintptr_t)s->own[OM_H_EVENT].v[i]);
}
