/* SPDX-License-Identifier: MIT */
/* What a client owns, by handle kind (api/handles.tsv): the checks every decoder applies. */
#include <stdlib.h>

#include "exec.h"

static const struct {
    const char *name;
    int destroy;            /* entry index, -1: hand-written code destroys them */
    const uint32_t *budget; /* how many of the kind one client may hold */
} kinds[OM_HANDLE_KINDS] = {
#define OM_X_KIND(k, n, d, b) [k] = {n, d, &om_budget.b},
    OM_HANDLE_KIND_TABLE(OM_X_KIND)
#undef OM_X_KIND
};

CUresult om_arg_handle(struct call *c, enum om_handle_kind kind, uint64_t h, bool nullable)
{
    if (h == 0 && nullable)
        return CUDA_SUCCESS;
    if (kind == OM_H_FUNCTION) /* kernels are kept with their argument sizes (resources.c) */
        return om_kernel_total(c->s, h) >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    if (kind == OM_H_GRAPH && om_handles_has(&c->s->own[OM_H_CHILDGRAPH], h))
        return CUDA_SUCCESS; /* a child graph node's graph: usable, not destroyable (graphs.c) */
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

CUresult om_own_room(struct session *s, enum om_handle_kind kind)
{
    if (s->own[kind].n < *kinds[kind].budget)
        return CUDA_SUCCESS;
    return om_budget_refuse(s,
                            kind == OM_H_STREAM  ? OM_BUDGET_STREAMS
                            : kind == OM_H_EVENT ? OM_BUDGET_EVENTS
                                                 : OM_BUDGET_HANDLES,
                            kinds[kind].name);
}

static void destroy(enum om_handle_kind kind, uint64_t h)
{
    if (kinds[kind].destroy >= 0 && om_server_real[kinds[kind].destroy])
        ((CUresult(*)(void *))om_server_real[kinds[kind].destroy])((void *)(uintptr_t)h);
}

CUresult om_own_add(struct call *c, enum om_handle_kind kind, uint64_t h)
{
    if (om_handles_add(&c->s->own[kind], h) == 0)
        return CUDA_SUCCESS;
    /* Not recorded, so never handed out: the object goes at once. */
    destroy(kind, h);
    if (kind == OM_H_EVENT)
        ((CUresult(*)(CUevent))REAL(cuEventDestroy_v2))((CUevent)(uintptr_t)h);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult om_own_adopt(struct call *c, enum om_handle_kind kind, uint64_t h)
{
    CUresult rc;

    if (!h || om_handles_has(&c->s->own[kind], h))
        return CUDA_SUCCESS;
    if ((rc = om_own_room(c->s, kind)) != CUDA_SUCCESS)
        return rc;
    return om_handles_add(&c->s->own[kind], h) < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

void om_own_drop(struct session *s, enum om_handle_kind kind, uint64_t h)
{
    om_handles_remove(&s->own[kind], h);
}

void om_own_release(struct session *s)
{
    /* The reverse order of the table: what refers to another kind goes first. */
    for (int k = OM_HANDLE_KINDS - 1; k >= 0; k--) {
        if (kinds[k].destroy >= 0)
            for (size_t i = s->own[k].n; i-- > 0;)
                destroy((enum om_handle_kind)k, s->own[k].v[i]);
        if (k != OM_H_STREAM && k != OM_H_EVENT && k != OM_H_LIBRARY)
            om_handles_free(&s->own[k]); /* session.c frees those three itself */
    }
}
