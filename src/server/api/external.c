/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of external memory and semaphores: the imports (the file
 * descriptor comes on the client's socket just before the call) and the mapped buffers (device
 * memory of the client from then on). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/msg.h"
#include "../exec.h"
#include "openmps/ops.h"

/* The descriptor the client sent for this call. It is always taken, also for a request that
 * does not parse, so that the next import pairs with its own; -1 when none came. */
static int take_fd(struct call *c)
{
    struct om_msg *m = malloc(sizeof(*m));
    int fd = -1;

    if (!m)
        return -1;
    if (om_msg_recv(c->s->sock, m, &fd, 2000) != 0 || m->hdr.type != OM_MSG_HOST_MEM) {
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    free(m);
    return fd;
}

/* A handle type of the Linux driver that is a file descriptor: INVALID_VALUE for the Windows
 * handle types and unknown ones, NOT_SUPPORTED for NvSci objects (refused by the client too). */
static CUresult fd_type(int type, int nvsci, int fd1, int fd2)
{
    if (type == fd1 || type == fd2)
        return CUDA_SUCCESS;
    return type == nvsci ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
}

CUresult om_x_cuImportExternalMemory(struct call *c)
{
    const void *b = om_get_bytes(&c->in, sizeof(CUDA_EXTERNAL_MEMORY_HANDLE_DESC));
    int fd = take_fd(c);
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC d;
    CUexternalMemory m = NULL;
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS && fd < 0)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        memcpy(&d, b, sizeof(d));
        rc = fd_type(d.type, CU_EXTERNAL_MEMORY_HANDLE_TYPE_NVSCIBUF,
                     CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
                     CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD);
    }
    if (rc == CUDA_SUCCESS && (d.size == 0 || (d.flags & ~CUDA_EXTERNAL_MEMORY_DEDICATED)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = om_own_room(c->s, OM_H_EXTMEM);
    if (rc == CUDA_SUCCESS) {
        d.handle.fd = fd;
        rc = ((CUresult(*)(CUexternalMemory *, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *))REAL(
            cuImportExternalMemory))(&m, &d);
    }
    if (rc != CUDA_SUCCESS) {
        if (fd >= 0)
            close(fd); /* on a failure the descriptor stays ours */
        return rc;
    }
    /* The driver owns the descriptor now. */
    if ((rc = om_own_add(c, OM_H_EXTMEM, (uint64_t)(uintptr_t)m)) != CUDA_SUCCESS)
        return rc;
    om_put_u64(&c->out, (uint64_t)(uintptr_t)m);
    return CUDA_SUCCESS;
}

CUresult om_x_cuImportExternalSemaphore(struct call *c)
{
    const void *b = om_get_bytes(&c->in, sizeof(CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC));
    int fd = take_fd(c);
    CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC d;
    CUexternalSemaphore sem = NULL;
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS && fd < 0)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        memcpy(&d, b, sizeof(d));
        rc = fd_type(d.type, CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_NVSCISYNC,
                     CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD,
                     CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD);
    }
    if (rc == CUDA_SUCCESS && d.flags != 0)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = om_own_room(c->s, OM_H_EXTSEM);
    if (rc == CUDA_SUCCESS) {
        d.handle.fd = fd;
        rc = ((CUresult(*)(CUexternalSemaphore *, const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC *))REAL(
            cuImportExternalSemaphore))(&sem, &d);
    }
    if (rc != CUDA_SUCCESS) {
        if (fd >= 0)
            close(fd);
        return rc;
    }
    if ((rc = om_own_add(c, OM_H_EXTSEM, (uint64_t)(uintptr_t)sem)) != CUDA_SUCCESS)
        return rc;
    om_put_u64(&c->out, (uint64_t)(uintptr_t)sem);
    return CUDA_SUCCESS;
}

/* A buffer mapped onto the client's external memory: its device memory from now on (copies and
 * kernels may use it), freed by cuMemFree or at the session's end. It is recorded as a range the
 * server never keeps for reuse (`managed`: om_x_cuMemFree_v2 hands it back to the driver). */
CUresult om_x_cuExternalMemoryGetMappedBuffer(struct call *c)
{
    uint64_t h = om_get_u64(&c->in);
    const void *b = om_get_bytes(&c->in, sizeof(CUDA_EXTERNAL_MEMORY_BUFFER_DESC));
    CUDA_EXTERNAL_MEMORY_BUFFER_DESC d;
    CUdeviceptr p = 0;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_arg_handle(c, OM_H_EXTMEM, h, false)) != CUDA_SUCCESS)
        return rc;
    memcpy(&d, b, sizeof(d));
    if (d.size == 0 || d.offset > UINT64_MAX - d.size || d.flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = om_own_room(c->s, OM_H_EXTBUF)) != CUDA_SUCCESS)
        return rc;
    rc = ((CUresult(*)(CUdeviceptr *, CUexternalMemory, const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *))
              REAL(cuExternalMemoryGetMappedBuffer))(&p, (CUexternalMemory)(uintptr_t)h, &d);
    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_own_add(c, OM_H_EXTBUF, p)) != CUDA_SUCCESS) {
        ((CUresult(*)(CUdeviceptr))REAL(cuMemFree_v2))(p);
        return rc;
    }
    if (om_ranges_add(&c->s->allocs, p, d.size, 0, true) < 0) {
        om_own_drop(c->s, OM_H_EXTBUF, p);
        ((CUresult(*)(CUdeviceptr))REAL(cuMemFree_v2))(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->s->allocs.v[c->s->allocs.n - 1].managed = true;
    om_put_u64(&c->out, p);
    return CUDA_SUCCESS;
}
