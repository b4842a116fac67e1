/* SPDX-License-Identifier: MIT */
/* A module's texture and surface references, and which client a library's references belong to:
 * the module family (api/modules.c) notes libraries loaded and unloaded and asks whether one may
 * be shared; the texrefs family (api/texrefs.c) obtains references through it. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"

/*
 * A module's texture and surface references are state of the module, and a module image is
 * loaded once for every client that loads it (api/modules.c): were two clients to share one,
 * each would read through the other's bindings (its arrays). So the first client that asks for
 * a library's references claims the library, which it must hold alone (no other live session
 * holds it); from then on a client loading the same image gets its own copy of it (loaded anew,
 * against its image budget), and the claimed library is handed to no one else, also after its
 * claimer ended (its references stay bound to the claimer's destroyed arrays).
 */
struct modlib {
    uint64_t lib;
    uint32_t holders; /* live sessions that hold it (loaded, not unloaded) */
    uint32_t claimer; /* session id, 0: none */
};
struct modref {
    uint64_t ref, lib;
    uint32_t session;
    enum om_handle_kind kind;
};
static pthread_mutex_t modref_lock = PTHREAD_MUTEX_INITIALIZER;
static struct modlib *modlibs;
static size_t nmodlibs, modlibs_cap;
static struct modref *modrefs;
static size_t nmodrefs, modrefs_cap;

static struct modlib *modlib_find(uint64_t lib)
{
    for (size_t i = 0; i < nmodlibs; i++)
        if (modlibs[i].lib == lib)
            return &modlibs[i];
    return NULL;
}

bool om_modref_may_share(struct session *s, uint64_t lib)
{
    pthread_mutex_lock(&modref_lock);
    struct modlib *m = modlib_find(lib);
    bool ok = !m || !m->claimer || m->claimer == s->id;
    pthread_mutex_unlock(&modref_lock);
    return ok;
}

void om_modref_loaded(struct session *s, uint64_t lib)
{
    (void)s;
    pthread_mutex_lock(&modref_lock);
    struct modlib *m = modlib_find(lib);
    if (!m && om_grow((void **)&modlibs, nmodlibs, &modlibs_cap, sizeof(*modlibs), 16)) {
        m = &modlibs[nmodlibs++];
        *m = (struct modlib){.lib = lib};
    }
    /* Without room it is not noted: then no client may claim it (modref_claim). */
    if (m)
        m->holders++;
    pthread_mutex_unlock(&modref_lock);
}

/* The session's references of `lib` (every library: lib 0) leave its sets; with the lock. */
static void drop_refs(struct session *s, uint64_t lib)
{
    for (size_t i = nmodrefs; i-- > 0;)
        if (modrefs[i].session == s->id && (!lib || modrefs[i].lib == lib)) {
            om_own_drop(s, modrefs[i].kind, modrefs[i].ref);
            modrefs[i] = modrefs[--nmodrefs];
        }
}

static void let_go(uint64_t lib)
{
    struct modlib *m = modlib_find(lib);
    if (m && m->holders)
        m->holders--;
}

void om_modref_unloaded(struct session *s, uint64_t lib)
{
    pthread_mutex_lock(&modref_lock);
    let_go(lib);
    drop_refs(s, lib);
    pthread_mutex_unlock(&modref_lock);
}

void om_modref_release(struct session *s)
{
    pthread_mutex_lock(&modref_lock);
    for (size_t i = 0; i < s->own[OM_H_LIBRARY].n; i++)
        let_go(s->own[OM_H_LIBRARY].v[i]);
    drop_refs(s, 0);
    pthread_mutex_unlock(&modref_lock);
}

/* The library the client holds, claimed for it (NOT_SUPPORTED while another client holds it
 * too, or claimed it first). With the lock. */
static CUresult modref_claim(struct call *c, uint64_t lib)
{
    struct modlib *m = modlib_find(lib);

    if (!om_handles_has(&c->s->own[OM_H_LIBRARY], lib))
        return CUDA_ERROR_INVALID_HANDLE;
    if (m && m->claimer == c->s->id)
        return CUDA_SUCCESS;
    if (!m || m->claimer || m->holders != 1) {
        client_err(c->s,
                   "client %d: a module's texture or surface reference, while another client "
                   "holds the module's image: not supported",
                   (int)c->s->pid);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    m->claimer = c->s->id;
    return CUDA_SUCCESS;
}

/* cuModuleGetTexRef, cuModuleGetSurfRef (api/texrefs.c): hmod (the client's library), the name's
 * bytes; answers the reference, the client's (of `kind`), its library claimed. */
CUresult om_modref_get(struct call *c, enum om_handle_kind kind, int entry)
{
    uint64_t lib = om_get_u64(&c->in);
    size_t len = 0;
    const void *p = om_get_rest(&c->in, &len);
    char name[1024];
    CUmodule mod = NULL;
    void *ref = NULL;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!p || len == 0 || len >= sizeof(name) || memchr(p, '\0', len))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(name, p, len);
    name[len] = '\0';
    pthread_mutex_lock(&modref_lock);
    if ((rc = modref_claim(c, lib)) != CUDA_SUCCESS)
        goto out;
    rc = ((CUresult(*)(CUmodule *, CUlibrary))REAL(cuLibraryGetModule))(&mod,
                                                                        (CUlibrary)(uintptr_t)lib);
    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(void **, CUmodule, const char *))om_server_real[entry])(&ref, mod, name);
    if (rc != CUDA_SUCCESS)
        goto out;
    if (!om_handles_has(&c->s->own[kind], (uint64_t)(uintptr_t)ref)) {
        /* Not destroyed when it cannot be noted (no destroy entry): only not handed out. */
        if ((rc = om_own_room(c->s, kind)) != CUDA_SUCCESS ||
            !om_grow((void **)&modrefs, nmodrefs, &modrefs_cap, sizeof(*modrefs), 16) ||
            (rc = om_own_add(c, kind, (uint64_t)(uintptr_t)ref)) != CUDA_SUCCESS) {
            rc = rc != CUDA_SUCCESS ? rc : CUDA_ERROR_OUT_OF_MEMORY;
            goto out;
        }
        modrefs[nmodrefs++] = (struct modref){
            .ref = (uint64_t)(uintptr_t)ref, .lib = lib, .session = c->s->id, .kind = kind};
    }
    om_put_u64(&c->out, (uint64_t)(uintptr_t)ref);
out:
    pthread_mutex_unlock(&modref_lock);
    return rc;
}
