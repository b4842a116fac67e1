/* SPDX-License-Identifier: MIT */
/* Remote mode: external memory and semaphores (the custom rows of api/remote/external.tsv).
 * The file descriptor of an import goes to the server on the session's socket just before the
 * call (as a registered memfd does); the driver owns the server's copy after a successful
 * import, so this process closes its own then, as the driver would have taken it. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "../../common/gen/entries.h"
#include "../../common/msg.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "../shim.h"
#include "openmps/ops.h"

/* Types whose handle is a file descriptor here; the Windows handle types are refused with
 * INVALID_VALUE (no such handle on Linux), NvSci objects with NOT_SUPPORTED. */
static CUresult fd_type(int type, int nvsci, int fd1, int fd2)
{
    if (type == fd1 || type == fd2)
        return CUDA_SUCCESS;
    return type == nvsci ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
}

/* One import: the descriptor, then the call that takes it, in one exchange. */
static CUresult import(int index, int fd, const void *desc, size_t size, uint64_t *ret)
{
    REQ(req, 128);
    uint8_t reply[8];
    uint32_t got = 0;
    struct om_rbuf in;
    CUresult rc;

    if (fd < 0 || fcntl(fd, F_GETFD) < 0)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_bytes(&req, desc, size);
    om_ring_lock();
    rc = om_msg_send(om_shim.client.sock, OM_MSG_HOST_MEM, 0, NULL, 0, fd) < 0
             ? CUDA_ERROR_MPS_CONNECTION_FAILED
             : om_rcall_locked(index, &req, reply, sizeof(reply), &got);
    om_ring_unlock();
    if (rc != CUDA_SUCCESS)
        return rc; /* the descriptor stays the caller's */
    in = (struct om_rbuf){.p = reply, .len = got};
    *ret = om_get_u64(&in);
    if (in.bad)
        return CUDA_ERROR_UNKNOWN;
    close(fd); /* the server's copy holds the resource now */
    return CUDA_SUCCESS;
}

CUresult om_r_cuImportExternalMemory(CUexternalMemory *m, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *d)
{
    uint64_t h = 0;
    CUresult rc;

    if (!m || !d)
        return CUDA_ERROR_INVALID_VALUE;
    rc =
        fd_type(d->type, CU_EXTERNAL_MEMORY_HANDLE_TYPE_NVSCIBUF,
                CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD, CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD);
    if (rc == CUDA_SUCCESS)
        rc = import(OM_IDX_cuImportExternalMemory, d->handle.fd, d, sizeof(*d), &h);
    if (rc == CUDA_SUCCESS)
        *m = (CUexternalMemory)(uintptr_t)h;
    return rc;
}

CUresult om_r_cuImportExternalSemaphore(CUexternalSemaphore *sem,
                                        const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC *d)
{
    uint64_t h = 0;
    CUresult rc;

    if (!sem || !d)
        return CUDA_ERROR_INVALID_VALUE;
    rc = fd_type(d->type, CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_NVSCISYNC,
                 CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD,
                 CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD);
    if (rc == CUDA_SUCCESS)
        rc = import(OM_IDX_cuImportExternalSemaphore, d->handle.fd, d, sizeof(*d), &h);
    if (rc == CUDA_SUCCESS)
        *sem = (CUexternalSemaphore)(uintptr_t)h;
    return rc;
}

/* Device memory of this process from now on: cuMemcpy tells its side, cuMemFree frees it. */
CUresult om_r_cuExternalMemoryGetMappedBuffer(CUdeviceptr *p, CUexternalMemory m,
                                              const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *d)
{
    REQ(req, 8 + sizeof(*d));
    uint8_t reply[8];
    uint32_t got = 0;
    struct om_rbuf in;
    uint64_t v;
    CUresult rc;

    if (!p || !d)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)m);
    om_put_bytes(&req, d, sizeof(*d));
    rc = om_rcall(OM_IDX_cuExternalMemoryGetMappedBuffer, &req, reply, sizeof(reply), &got);
    if (rc != CUDA_SUCCESS)
        return rc;
    in = (struct om_rbuf){.p = reply, .len = got};
    v = om_get_u64(&in);
    if (in.bad || om_devrange_add(v, (size_t)d->size) < 0) {
        /* A buffer this process could not tell from host memory is not handed out. */
        REQ(fr, 8);
        om_put_u64(&fr, v);
        if (!in.bad)
            om_rcall(OM_IDX_cuMemFree_v2, &fr, NULL, 0, NULL);
        return in.bad ? CUDA_ERROR_UNKNOWN : CUDA_ERROR_OUT_OF_MEMORY;
    }
    *p = v;
    return CUDA_SUCCESS;
}
