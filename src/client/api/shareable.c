/* SPDX-License-Identifier: MIT */
/*
 * Remote mode: shareable handles of allocation handles and pools, and pool pointers (the
 * custom rows of api/remote/shareable.tsv; the server's side is src/server/api/shareable.c).
 * A POSIX handle is a file descriptor: an export's comes from the server after its answer on
 * the session's socket and is the program's (as natively); an import's goes to the server on
 * the socket just before the call, and the program keeps its own (the driver does not take it).
 * A fabric handle is 64 bytes in the request or the answer.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/gen/entries.h"
#include "../../common/msg.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "../shim.h"
#include "openmps/ops.h"

#define FD CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
#define FABRIC CU_MEM_HANDLE_TYPE_FABRIC

/* handle, type, flags; the answer: a descriptor after it, or a fabric handle in it. */
static CUresult export(int index, void *out, uint64_t h, CUmemAllocationHandleType type,
                       unsigned long long flags)
{
    REQ(req, 24);
    CUmemFabricHandle fabric;
    uint32_t got = 0;
    int fd = -1;
    CUresult rc;

    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, h);
    om_put_u64(&req, (uint64_t)(uint32_t)type);
    om_put_u64(&req, flags);
    om_ring_lock();
    rc = om_rcall_locked(index, &req, &fabric, sizeof(fabric), &got);
    /* A descriptor follows a successful answer for a descriptor only (one exchange: no other
     * call of this process comes between). */
    if (rc == CUDA_SUCCESS && type == FD && (fd = om_recv_fd_locked()) < 0)
        rc = CUDA_ERROR_UNKNOWN;
    om_ring_unlock();
    if (rc == CUDA_SUCCESS && type == FABRIC && got != sizeof(fabric))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc != CUDA_SUCCESS) {
        if (fd >= 0)
            close(fd);
        return rc;
    }
    if (type == FD)
        *(int *)out = fd;
    else
        memcpy(out, &fabric, sizeof(fabric));
    return CUDA_SUCCESS;
}

CUresult om_r_cuMemExportToShareableHandle(void *shareableHandle,
                                           CUmemGenericAllocationHandle handle,
                                           CUmemAllocationHandleType handleType,
                                           unsigned long long flags)
{
    return export(OM_IDX_cuMemExportToShareableHandle, shareableHandle, (uint64_t)handle,
                  handleType, flags);
}

CUresult om_r_cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool,
                                               CUmemAllocationHandleType handleType,
                                               unsigned long long flags)
{
    return export(OM_IDX_cuMemPoolExportToShareableHandle, handle_out, (uint64_t)(uintptr_t)pool,
                  handleType, flags);
}

/* type, flags, a fabric handle's bytes; a descriptor sent first on the socket. */
static CUresult import(int index, void *os, CUmemAllocationHandleType type,
                       unsigned long long flags, uint64_t *ret)
{
    REQ(req, 16 + sizeof(CUmemFabricHandle));
    uint64_t v = 0;
    uint32_t got = 0;
    int fd = (int)(intptr_t)os;
    CUresult rc;

    if (type == FD && (fd < 0 || (intptr_t)os != (intptr_t)fd || fcntl(fd, F_GETFD) < 0))
        return CUDA_ERROR_INVALID_VALUE; /* not a descriptor of this process */
    if (type == FABRIC && !os)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uint32_t)type);
    om_put_u64(&req, flags);
    if (type == FABRIC)
        om_put_bytes(&req, os, sizeof(CUmemFabricHandle));
    om_ring_lock();
    if (type == FD && om_msg_send(om_shim.client.sock, OM_MSG_HOST_MEM, 0, NULL, 0, fd) < 0)
        rc = CUDA_ERROR_MPS_CONNECTION_FAILED;
    else
        rc = om_rcall_locked(index, &req, &v, sizeof(v), &got);
    om_ring_unlock();
    if (rc == CUDA_SUCCESS && got != sizeof(v))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS)
        *ret = v;
    return rc;
}

CUresult om_r_cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                             CUmemAllocationHandleType shHandleType)
{
    uint64_t v = 0;
    CUresult rc;

    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    rc = import(OM_IDX_cuMemImportFromShareableHandle, osHandle, shHandleType, 0, &v);
    if (rc == CUDA_SUCCESS)
        *handle = (CUmemGenericAllocationHandle)v;
    return rc;
}

CUresult om_r_cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
                                                 CUmemAllocationHandleType handleType,
                                                 unsigned long long flags)
{
    uint64_t v = 0;
    CUresult rc;

    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    rc = import(OM_IDX_cuMemPoolImportFromShareableHandle, handle, handleType, flags, &v);
    if (rc == CUDA_SUCCESS)
        *pool_out = (CUmemoryPool)(uintptr_t)v;
    return rc;
}

/* The imported range is device memory of this process (cuMemcpy tells its side; cuMemFree and
 * cuMemFreeAsync free it), from the imported pool (MEMPOOL_HANDLE). */
CUresult om_r_cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool,
                                     CUmemPoolPtrExportData *shareData)
{
    REQ(req, 8 + sizeof(CUmemPoolPtrExportData));
    uint64_t v[2] = {0, 0}; /* address, size */
    uint32_t got = 0;
    CUresult rc;

    if (!ptr_out || !shareData)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)pool);
    om_put_bytes(&req, shareData, sizeof(*shareData));
    rc = om_rcall(OM_IDX_cuMemPoolImportPointer, &req, v, sizeof(v), &got);
    if (rc == CUDA_SUCCESS && got != sizeof(v))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc != CUDA_SUCCESS)
        return rc;
    if (om_devrange_add(v[0], (size_t)v[1]) < 0) {
        REQ(fr, 8);
        om_put_u64(&fr, v[0]);
        om_rcall(OM_IDX_cuMemFree_v2, &fr, NULL, 0, NULL);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    om_devrange_set_pool(v[0], (uint64_t)(uintptr_t)pool);
    *ptr_out = v[0];
    return CUDA_SUCCESS;
}
