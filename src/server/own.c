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
