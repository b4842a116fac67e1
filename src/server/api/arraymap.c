/* SPDX-License-Identifier: MIT */
/* The arraymap family's check (api/remote/arraymap.tsv): each element of cuMemMapArrayAsync's
 * list names only what the calling client owns. */
#include "../exec.h"

/* One element: its sparse array (an array of the client's, a level of one, or a mipmapped array
 * of the client's), the enums in range, for a map a tile-pool allocation of the client's (for an
 * unmap none), one device's bit (the client's ordinal, made the server's in place: devmap.c),
 * flags and reserved words zero. */
static CUresult check_one(struct call *c, CUarrayMapInfo *m)
{
    unsigned mask = m->deviceBitMask;
    int dev = mask && !(mask & (mask - 1)) ? om_dev_in(c->s, (uint64_t)__builtin_ctz(mask)) : -1;
    CUresult rc;

    switch (m->resourceType) {
    case CU_RESOURCE_TYPE_ARRAY:
        rc = om_arg_handle(c, OM_H_ARRAY, (uint64_t)(uintptr_t)m->resource.array, false);
        break;
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
        rc = om_arg_handle(c, OM_H_MIPMAPPED_ARRAY, (uint64_t)(uintptr_t)m->resource.mipmap, false);
        break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    if (rc != CUDA_SUCCESS)
        return rc;
    if (m->subresourceType < 0 || m->subresourceType > CU_ARRAY_SPARSE_SUBRESOURCE_TYPE_MIPTAIL ||
        m->memHandleType != CU_MEM_HANDLE_TYPE_GENERIC || dev < 0 || dev > 31 || m->flags ||
        m->reserved[0] || m->reserved[1])
        return CUDA_ERROR_INVALID_VALUE;
    m->deviceBitMask = 1u << dev;
    if (m->memOperationType == CU_MEM_OPERATION_TYPE_MAP)
        return om_arg_handle(c, OM_H_MEMHANDLE, m->memHandle.memHandle, false);
    if (m->memOperationType == CU_MEM_OPERATION_TYPE_UNMAP)
        return m->memHandle.memHandle ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult om_check_arraymap(struct call *c, CUarrayMapInfo *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        CUresult rc = check_one(c, &v[i]);
        if (rc != CUDA_SUCCESS) {
            client_err(c->s, "client %d: cuMemMapArrayAsync: element %zu refused (%d)",
                       (int)c->s->pid, i, (int)rc);
            return rc;
        }
    }
    return CUDA_SUCCESS;
}
