/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of the texrefs family (api/remote/texrefs.tsv):
 * cuTexRefSetAddress2D, whose device range is the descriptor's rows, which the generated
 * vocabulary cannot name (a LEN of a struct's fields); a module's texture and surface references
 * (their library claimed by one client: modref.c), cuTexRefDestroy (not of a module's),
 * cuSurfRefGetArray (only an array the client holds). */
#include <string.h>

#include "../exec.h"

/* The texture reference is the client's; [dptr, dptr + Pitch * Height) within its memory (the
 * rows a pitched allocation of that height holds; no row may wrap around). */
CUresult om_x_cuTexRefSetAddress2D_v3(struct call *c)
{
    uint64_t t = om_get_u64(&c->in);
    const void *b = om_get_bytes(&c->in, sizeof(CUDA_ARRAY_DESCRIPTOR));
    uint64_t dptr = om_get_u64(&c->in);
    uint64_t pitch = om_get_u64(&c->in);
    CUDA_ARRAY_DESCRIPTOR d;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_arg_handle(c, OM_H_TEXREF, t, false)) != CUDA_SUCCESS)
        return rc;
    memcpy(&d, b, sizeof(d));
    if (!pitch || !d.Height || (uint64_t)d.Height > UINT64_MAX / pitch ||
        !om_arg_range(c, dptr, pitch * (uint64_t)d.Height))
        return CUDA_ERROR_INVALID_VALUE;
    return ((CUresult(*)(CUtexref, const CUDA_ARRAY_DESCRIPTOR *, CUdeviceptr, size_t))REAL(
        cuTexRefSetAddress2D_v3))((CUtexref)(uintptr_t)t, &d, (CUdeviceptr)dptr, (size_t)pitch);
}

CUresult om_x_cuModuleGetTexRef(struct call *c)
{
    return om_modref_get(c, OM_H_MODTEXREF, OM_IDX_cuModuleGetTexRef);
}

CUresult om_x_cuModuleGetSurfRef(struct call *c)
{
    return om_modref_get(c, OM_H_MODSURFREF, OM_IDX_cuModuleGetSurfRef);
}

/* Only a texture reference the client created: a module's is the module's (api/handles.tsv). */
/* cuTexRefDestroy (generated): its own texture references only, not a module's. */
CUresult om_release_texref(struct call *c, uint64_t t)
{
    return om_handles_has(&c->s->own[OM_H_TEXREF], t) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* The array bound to the client's surface reference, when it is one the client holds (the
 * array bound last may have been destroyed since, its handle reused): INVALID_VALUE otherwise. */
/* out:array (cuSurfRefGetArray): an array the driver answers must be one the client may use. */
CUresult om_answer_array(struct call *c, CUarray *a)
{
    return om_arg_handle(c, OM_H_ARRAY, (uint64_t)(uintptr_t)*a, false) == CUDA_SUCCESS
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_VALUE;
}
