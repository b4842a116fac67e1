/* SPDX-License-Identifier: MIT */
/* Remote mode, the ipc family (api/remote/ipc.tsv): IPC handles of memory and events (the server's
 * side: src/server/api/ipc.c). */
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

/* ------------------------------------------------------------------ IPC */

CUresult om_r_cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    REQ(req, 8);
    uint8_t blob[CU_IPC_HANDLE_SIZE];
    uint32_t got = 0;
    CUresult rc;

    if (!pHandle)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, dptr);
    rc = om_rcall(OM_IDX_cuIpcGetMemHandle, &req, blob, sizeof(blob), &got);
    if (rc == CUDA_SUCCESS && got != sizeof(blob))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS)
        memcpy(pHandle, blob, sizeof(blob));
    return rc;
}

CUresult om_r_cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    REQ(req, CU_IPC_HANDLE_SIZE + 8);
    uint64_t reply[3] = {0};
    uint32_t got = 0;
    CUresult rc;

    if (!pdptr)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_bytes(&req, &handle, sizeof(handle));
    om_put_u64(&req, Flags);
    rc = om_rcall(OM_IDX_cuIpcOpenMemHandle_v2, &req, reply, sizeof(reply), &got);
    if (rc == CUDA_SUCCESS && got != sizeof(reply))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc != CUDA_SUCCESS)
        return rc;
    if (reply[2] && om_devrange_add(reply[0], (size_t)reply[1]) < 0) {
        REQ(cl, 8);
        om_put_u64(&cl, reply[0]);
        om_rcall(OM_IDX_cuIpcCloseMemHandle, &cl, reply, sizeof(reply), &got);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pdptr = reply[0];
    return CUDA_SUCCESS;
}

CUresult om_r_cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    REQ(req, 8);
    uint64_t last = 0;
    uint32_t got = 0;
    CUresult rc;

    om_put_u64(&req, dptr);
    rc = om_rcall(OM_IDX_cuIpcCloseMemHandle, &req, &last, sizeof(last), &got);
    if (got == sizeof(last) && last)
        om_devrange_remove(dptr);
    return rc;
}

/* IPC event handles (src/server/api/ipc.c): the handle is the server's blob, the opened event
 * the same server event, now this client's too. */
CUresult om_r_cuIpcGetEventHandle(CUipcEventHandle *pHandle, CUevent event)
{
    REQ(req, 8);
    uint32_t got = 0;
    CUresult rc;

    if (!pHandle)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)event);
    rc = om_rcall(OM_IDX_cuIpcGetEventHandle, &req, pHandle, sizeof(*pHandle), &got);
    return rc == CUDA_SUCCESS && got != sizeof(*pHandle) ? CUDA_ERROR_UNKNOWN : rc;
}

CUresult om_r_cuIpcOpenEventHandle(CUevent *phEvent, CUipcEventHandle handle)
{
    REQ(req, CU_IPC_HANDLE_SIZE);
    uint64_t ev = 0;
    uint32_t got = 0;
    CUresult rc;

    if (!phEvent)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_bytes(&req, &handle, sizeof(handle));
    rc = om_rcall(OM_IDX_cuIpcOpenEventHandle, &req, &ev, sizeof(ev), &got);
    if (rc == CUDA_SUCCESS && got != sizeof(ev))
        return CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS)
        *phEvent = (CUevent)(uintptr_t)ev;
    return rc;
}
