/* SPDX-License-Identifier: MIT */
/*
 * What IPC handles share between clients of this server (api/ipc.c makes and opens the handles):
 * the exported allocations with their openers, and the shared events with their holders. Other
 * families ask it whether memory a client frees stays for its openers (om_ipc_keep: api/memory.c,
 * api/mempool.c) and whether an event a client destroys is its last holder's
 * (om_ipc_event_release: api/streams.c); the session's end lets go of both.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "exec.h"

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

/* A new id, unused by any export and any shared event (with the lock). */
static uint64_t new_id(void)
{
    uint64_t id = 0;

    while (id == 0 || find_id(id))
        if (getrandom(&id, sizeof(id), 0) != sizeof(id))
            id = 0;
    return id;
}

/* ------------------------------------------------------------------ memory */

CUresult om_ipc_export(struct session *s, const struct om_range *r, uint64_t *ret_id)
{
    uint64_t mine = 0;
    struct export *e;

    pthread_mutex_lock(&lock);
    e = find_owned(s, r->base);
    if (!e) {
        for (size_t i = 0; i < nexports; i++)
            mine += exports[i].owner == s;
        if (mine >= om_budget.client_handles) {
            pthread_mutex_unlock(&lock);
            return om_budget_refuse(s, OM_BUDGET_HANDLES, "cuIpcGetMemHandle");
        }
        uint64_t id = new_id();
        if (grow((void **)&exports, &exports_cap, nexports, sizeof(*exports)) < 0) {
            pthread_mutex_unlock(&lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        e = &exports[nexports++];
        *e = (struct export){id, s, r->base, r->size, r->mem, 0};
    }
    *ret_id = e->id;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

CUresult om_ipc_open(struct session *s, uint64_t id, uint64_t *ret_base, uint64_t *ret_size,
                     bool *ret_first)
{
    struct export *e;
    struct opened *o;
    bool first = false;

    pthread_mutex_lock(&lock);
    e = find_id(id);
    if (!e || !e->owner) { /* unknown, or freed by its exporter since */
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (e->owner == s) { /* the driver refuses a process its own handle */
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    o = find_open(s, id);
    if (!o) {
        if (grow((void **)&opens, &opens_cap, nopens, sizeof(*opens)) < 0 ||
            om_ranges_add(&s->allocs, e->base, e->size, 0, false) < 0) {
            pthread_mutex_unlock(&lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        o = &opens[nopens++];
        *o = (struct opened){s, id, 0};
        first = true;
    }
    o->refs++;
    e->opens++;
    *ret_base = e->base;
    *ret_size = e->size;
    *ret_first = first;
    pthread_mutex_unlock(&lock);
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

CUresult om_ipc_close(struct session *s, uint64_t base, bool *ret_last)
{
    struct opened *o = NULL;
    struct export *e = NULL;
    uint64_t id;
    CUresult rc;

    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nopens && !o; i++) {
        if (opens[i].s == s && (e = find_id(opens[i].id)) && e->base == base)
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
        *ret_last = false;
        return CUDA_SUCCESS;
    }
    *o = opens[--nopens];
    pthread_mutex_unlock(&lock);
    /* Its own work on the memory is done first; nobody else's is waited for. Its reference
     * still holds the memory meanwhile. */
    rc = om_exec_sync_client(s);
    forget_range(s, base);
    pthread_mutex_lock(&lock);
    e = find_id(id);
    if (e && e->opens && --e->opens == 0 && !e->owner)
        export_drop(e, true);
    pthread_mutex_unlock(&lock);
    *ret_last = true;
    return rc;
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

/* ------------------------------------------------------------------ events */

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

CUresult om_ipc_event_export(uint64_t ev, uint64_t *ret_id)
{
    struct shared_event *e;
    uint64_t id = 0;

    pthread_mutex_lock(&lock);
    e = find_event(ev);
    if (!e) {
        id = new_id();
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
    *ret_id = e->id;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

CUresult om_ipc_event_open(struct session *s, uint64_t id, uint64_t *ret_ev)
{
    uint64_t ev = 0;

    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nsevents && !ev; i++)
        if (sevents[i].id == id)
            ev = sevents[i].event;
    if (!ev) {
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_INVALID_VALUE; /* unknown, or destroyed by every holder since */
    }
    if (!om_handles_has(&s->own[OM_H_EVENT], ev)) {
        if (om_handles_add(&s->own[OM_H_EVENT], ev) < 0) {
            pthread_mutex_unlock(&lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        find_event(ev)->holders++;
    }
    pthread_mutex_unlock(&lock);
    *ret_ev = ev;
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
