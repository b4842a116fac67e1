/* SPDX-License-Identifier: MIT */
/* The server's hand-written handler of the texrefs family (api/remote/texrefs.tsv):
 * cuTexRefSetAddress2D, whose device range is the descriptor's rows, which the generated
 * vocabulary cannot name (a LEN of a struct's fields). */
#include <stdlib.h>
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
