/* SPDX-License-Identifier: MIT */
/* Remote mode, the vmm family (api/remote/vmm.tsv): the virtual-memory API: physical allocations,
 * address reservations, mappings, access. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/msg.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "../shim.h"
#include "openmps/ops.h"

#define U64(x) ((uint64_t)(uintptr_t)(x))

/* ------------------------------------------------------------------ virtual memory management */

/* cuMemMap and cuMemUnmap (generated, wrap): the mapped range is device memory this process
 * tells from host memory (its device ranges). */
CUresult om_r_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                       CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    CUresult rc = om_rpc_cuMemMap(ptr, size, offset, handle, flags);

    if (rc == CUDA_SUCCESS && om_devrange_add(ptr, size) < 0) {
        /* A mapping this process could not tell from host memory is not kept. */
        om_r_cuMemUnmap(ptr, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc == CUDA_SUCCESS)
        om_devrange_set_mapped(ptr);
    return rc;
}

CUresult om_r_cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    CUresult rc = om_rpc_cuMemUnmap(ptr, size);

    if (rc != CUDA_ERROR_INVALID_VALUE)
        om_devrange_remove(ptr);
    return rc;
}

CUresult om_r_cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                             size_t count)
{
    REQ(req, 24 + 16 * sizeof(CUmemAccessDesc));

    if (!desc || count == 0 || count > 16)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, ptr);
    om_put_u64(&req, size);
    om_put_u64(&req, count);
    om_put_bytes(&req, desc, count * sizeof(*desc));
    return om_rcall(OM_IDX_cuMemSetAccess, &req, NULL, 0, NULL);
}
