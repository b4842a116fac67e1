/* SPDX-License-Identifier: MIT */
/* Remote mode: the texrefs family's hand-written client side (api/remote/texrefs.tsv):
 * cuTexRefSetAddress2D with its descriptor, and the v1 form converted to it; a module's texture
 * and surface references, cuTexRefDestroy, cuSurfRefGetArray (custom on the server). */
#include <string.h>

#include "../../common/gen/entries.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "openmps/ops.h"

CUresult om_r_cuTexRefSetAddress2D_v3(CUtexref hTexRef, const CUDA_ARRAY_DESCRIPTOR *desc,
                                      CUdeviceptr dptr, size_t Pitch)
{
    uint8_t buf[8 + sizeof(CUDA_ARRAY_DESCRIPTOR) + 16 + 8];
    struct om_wbuf req = {.p = buf, .cap = sizeof(buf)};

    if (!desc)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)hTexRef);
    om_put_bytes(&req, desc, sizeof(*desc));
    om_put_u64(&req, (uint64_t)dptr);
    om_put_u64(&req, (uint64_t)Pitch);
    return om_rcall(OM_IDX_cuTexRefSetAddress2D_v3, &req, NULL, 0, NULL);
}

CUresult om_r_cuTexRefSetAddress2D(CUtexref hTexRef, const CUDA_ARRAY_DESCRIPTOR_v1 *desc,
                                   CUdeviceptr_v1 dptr, unsigned int Pitch)
{
    if (!desc)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY_DESCRIPTOR v2 = {.Width = desc->Width,
                                .Height = desc->Height,
                                .Format = desc->Format,
                                .NumChannels = desc->NumChannels};
    return om_r_cuTexRefSetAddress2D_v3(hTexRef, &v2, (CUdeviceptr)dptr, Pitch);
}

/* A module's texture or surface reference by name (the server's module is the client's library
 * handle, api/modules.c); the names the server takes are shorter than 1024 bytes. */
static CUresult module_ref(int index, void **ret, CUmodule hmod, const char *name)
{
    uint64_t reply = 0;
    uint32_t got = 0;
    REQ(req, 8 + 1024);
    CUresult rc;

    if (!ret || !name || !*name || strlen(name) >= 1024)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)hmod);
    om_put_bytes(&req, name, strlen(name));
    rc = om_rcall(index, &req, &reply, sizeof(reply), &got);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (got != sizeof(reply))
        return CUDA_ERROR_UNKNOWN;
    *ret = (void *)(uintptr_t)reply;
    return CUDA_SUCCESS;
}

CUresult om_r_cuModuleGetTexRef(CUtexref *pTexRef, CUmodule hmod, const char *name)
{
    return module_ref(OM_IDX_cuModuleGetTexRef, (void **)pTexRef, hmod, name);
}

CUresult om_r_cuModuleGetSurfRef(CUsurfref *pSurfRef, CUmodule hmod, const char *name)
{
    return module_ref(OM_IDX_cuModuleGetSurfRef, (void **)pSurfRef, hmod, name);
}
