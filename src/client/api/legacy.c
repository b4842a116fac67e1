/* SPDX-License-Identifier: MIT */
/* Remote mode: the legacy family (api/remote/legacy.tsv). Legacy launches keep their block
 * shape, shared size and parameter buffer per function here, in the client, and launch through
 * cuLaunchKernel with the buffer in `extra`; v1 array descriptors are converted to and from the
 * v2 forms; coredump settings, async notifications and peer access are answered here. */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/gen/entries.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "../shim.h"
#include "../gen/calls.h"

#define ERR_PEER_ACCESS_UNSUPPORTED ((CUresult)217)
#define ERR_PEER_ACCESS_NOT_ENABLED ((CUresult)705)
#define ERR_PEER_ACCESS_ALREADY_ENABLED ((CUresult)704)

/* ------------------------------------------------------------------ legacy launches */

/* The parameter space of a legacy launch (the driver's limit for kernel parameters). */
#define PARAM_MAX 4096
#define LEGACY_FUNCS 256

struct legacy {
    CUfunction f;
    unsigned bx, by, bz, shared, size;
    uint8_t params[PARAM_MAX];
};

static pthread_mutex_t legacy_lock = PTHREAD_MUTEX_INITIALIZER;
static struct legacy *legacy[LEGACY_FUNCS];

/* The state of function f, made on first use (NULL: f is NULL, or no room); legacy_lock held. */
static struct legacy *state_of(CUfunction f)
{
    int free_slot = -1;

    if (!f)
        return NULL;
    for (int i = 0; i < LEGACY_FUNCS; i++) {
        if (legacy[i] && legacy[i]->f == f)
            return legacy[i];
        if (!legacy[i] && free_slot < 0)
            free_slot = i;
    }
    if (free_slot < 0 || !(legacy[free_slot] = calloc(1, sizeof(struct legacy))))
        return NULL;
    legacy[free_slot]->f = f;
    return legacy[free_slot];
}

/* Runs op on f's state under the lock: INVALID_HANDLE for a NULL function, OUT_OF_MEMORY when
 * more functions than LEGACY_FUNCS use legacy launches. */
#define WITH_STATE(f, st, body)                                                                    \
    do {                                                                                           \
        CUresult rc_ = CUDA_SUCCESS;                                                               \
        pthread_mutex_lock(&legacy_lock);                                                          \
        struct legacy *st = state_of(f);                                                           \
        if (!(f))                                                                                  \
            rc_ = CUDA_ERROR_INVALID_HANDLE;                                                       \
        else if (!st)                                                                              \
            rc_ = CUDA_ERROR_OUT_OF_MEMORY;                                                        \
        else {                                                                                     \
            body                                                                                   \
        }                                                                                          \
        pthread_mutex_unlock(&legacy_lock);                                                        \
        return rc_;                                                                                \
    } while (0)

CUresult om_r_cuFuncSetBlockShape(CUfunction hfunc, int x, int y, int z)
{
    if (x <= 0 || y <= 0 || z <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_STATE(hfunc, st, {
        st->bx = (unsigned)x;
        st->by = (unsigned)y;
        st->bz = (unsigned)z;
    });
}

CUresult om_r_cuFuncSetSharedSize(CUfunction hfunc, unsigned int bytes)
{
    WITH_STATE(hfunc, st, { st->shared = bytes; });
}

CUresult om_r_cuParamSetSize(CUfunction hfunc, unsigned int numbytes)
{
    if (numbytes > PARAM_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_STATE(hfunc, st, { st->size = numbytes; });
}

static CUresult set_bytes(CUfunction f, int offset, const void *p, unsigned n)
{
    if (offset < 0 || (p == NULL && n) || n > PARAM_MAX || (unsigned)offset > PARAM_MAX - n)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_STATE(f, st, {
        if (n)
            memcpy(st->params + offset, p, n);
    });
}

CUresult om_r_cuParamSeti(CUfunction hfunc, int offset, unsigned int value)
{
    return set_bytes(hfunc, offset, &value, sizeof(value));
}

CUresult om_r_cuParamSetf(CUfunction hfunc, int offset, float value)
{
    return set_bytes(hfunc, offset, &value, sizeof(value)); /* its bits, as the kernel reads them */
}

CUresult om_r_cuParamSetv(CUfunction hfunc, int offset, void *ptr, unsigned int numbytes)
{
    return set_bytes(hfunc, offset, ptr, numbytes);
}

static CUresult legacy_launch(CUfunction f, int gw, int gh, CUstream s)
{
    uint8_t args[PARAM_MAX];
    size_t size;
    unsigned bx, by, bz, shared;

    if (gw <= 0 || gh <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&legacy_lock);
    struct legacy *st = state_of(f);
    if (st) {
        bx = st->bx, by = st->by, bz = st->bz, shared = st->shared;
        size = st->size;
        memcpy(args, st->params, size);
    }
    pthread_mutex_unlock(&legacy_lock);
    if (!st)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!bx) /* no cuFuncSetBlockShape: the driver refuses the configuration */
        return CUDA_ERROR_INVALID_VALUE;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, args, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    return OM_CALL(cuLaunchKernel)(f, (unsigned)gw, (unsigned)gh, 1, bx, by, bz, shared, s, NULL,
                                   extra);
}

CUresult om_r_cuLaunch(CUfunction f)
{
    return legacy_launch(f, 1, 1, NULL);
}

CUresult om_r_cuLaunchGrid(CUfunction f, int grid_width, int grid_height)
{
    return legacy_launch(f, grid_width, grid_height, NULL);
}

CUresult om_r_cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height, CUstream hStream)
{
    return legacy_launch(f, grid_width, grid_height, hStream);
}

/* CUDA_COOPERATIVE_LAUNCH_MULTI_DEVICE_NO_PRE_LAUNCH_SYNC | ..._NO_POST_LAUNCH_SYNC */
#define MULTI_DEVICE_FLAGS 0x3u

CUresult om_r_cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *list, unsigned int n,
                                                   unsigned int flags)
{
    /* Each entry must be on a device of its own; one entry is served (its pre- and post-launch
     * synchronisation concern its stream only: its own order), several devices' are not yet. */
    if (!list || n == 0 || (flags & ~MULTI_DEVICE_FLAGS))
        return CUDA_ERROR_INVALID_VALUE;
    if (n > 1)
        return CUDA_ERROR_INVALID_DEVICE;
    return OM_CALL(cuLaunchCooperativeKernel)(
        list->function, list->gridDimX, list->gridDimY, list->gridDimZ, list->blockDimX,
        list->blockDimY, list->blockDimZ, list->sharedMemBytes, list->hStream, list->kernelParams);
}

/* ------------------------------------------------------------------ v1 array descriptors */

CUresult om_r_cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *d)
{
    if (!pHandle || !d)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY_DESCRIPTOR v2 = {
        .Width = d->Width, .Height = d->Height, .Format = d->Format, .NumChannels = d->NumChannels};
    return OM_CALL(cuArrayCreate_v2)(pHandle, &v2);
}

CUresult om_r_cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *d)
{
    if (!pHandle || !d)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR v2 = {.Width = d->Width,
                                  .Height = d->Height,
                                  .Depth = d->Depth,
                                  .Format = d->Format,
                                  .NumChannels = d->NumChannels,
                                  .Flags = d->Flags};
    return OM_CALL(cuArray3DCreate_v2)(pHandle, &v2);
}

/* An array whose sizes do not fit the v1 form's unsigned ints: INVALID_VALUE. */
CUresult om_r_cuArrayGetDescriptor(CUDA_ARRAY_DESCRIPTOR_v1 *d, CUarray hArray)
{
    CUresult (*get)(CUDA_ARRAY_DESCRIPTOR *, CUarray) = (CUresult(*)(
        CUDA_ARRAY_DESCRIPTOR *, CUarray))om_remote_entry(OM_IDX_cuArrayGetDescriptor_v2);
    CUDA_ARRAY_DESCRIPTOR v2;

    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = get(&v2, hArray);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (v2.Width > UINT_MAX || v2.Height > UINT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    *d = (CUDA_ARRAY_DESCRIPTOR_v1){.Width = (unsigned)v2.Width,
                                    .Height = (unsigned)v2.Height,
                                    .Format = v2.Format,
                                    .NumChannels = v2.NumChannels};
    return CUDA_SUCCESS;
}

CUresult om_r_cuArray3DGetDescriptor(CUDA_ARRAY3D_DESCRIPTOR_v1 *d, CUarray hArray)
{
    CUresult (*get)(CUDA_ARRAY3D_DESCRIPTOR *, CUarray) = (CUresult(*)(
        CUDA_ARRAY3D_DESCRIPTOR *, CUarray))om_remote_entry(OM_IDX_cuArray3DGetDescriptor_v2);
    CUDA_ARRAY3D_DESCRIPTOR v2;

    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = get(&v2, hArray);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (v2.Width > UINT_MAX || v2.Height > UINT_MAX || v2.Depth > UINT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    *d = (CUDA_ARRAY3D_DESCRIPTOR_v1){.Width = (unsigned)v2.Width,
                                      .Height = (unsigned)v2.Height,
                                      .Depth = (unsigned)v2.Depth,
                                      .Format = v2.Format,
                                      .NumChannels = v2.NumChannels,
                                      .Flags = v2.Flags};
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ async notifications */

/* Registered, never called: the server's device sends clients no notifications. */
#define NOTIFY_MAX 64
static pthread_mutex_t notify_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t notify_handles[NOTIFY_MAX]; /* 0: free */
static uintptr_t notify_next = 0x4e00;

CUresult om_r_cuDeviceRegisterAsyncNotification(CUdevice device, CUasyncCallback callbackFunc,
                                                void *userData, CUasyncCallbackHandle *callback)
{
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;

    (void)userData;
    if (device < 0 || device >= (int)om_shim.client.ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    if (!callbackFunc || !callback)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&notify_lock);
    for (int i = 0; i < NOTIFY_MAX; i++) {
        if (!notify_handles[i]) {
            notify_handles[i] = notify_next++;
            *callback = (CUasyncCallbackHandle)notify_handles[i];
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&notify_lock);
    return rc;
}

CUresult om_r_cuDeviceUnregisterAsyncNotification(CUdevice device, CUasyncCallbackHandle callback)
{
    CUresult rc = CUDA_ERROR_INVALID_VALUE;

    if (device < 0 || device >= (int)om_shim.client.ndevices)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&notify_lock);
    for (int i = 0; callback && i < NOTIFY_MAX; i++) {
        if (notify_handles[i] == (uintptr_t)callback) {
            notify_handles[i] = 0;
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&notify_lock);
    return rc;
}

/* ------------------------------------------------------------------ coredump settings */

/* Kept in the client (one set for the process, one for its contexts): they cannot make the
 * server dump the client's work, the server's coredump settings are its own. */
enum {
    CD_ENABLE_ON_EXCEPTION = 1,
    CD_TRIGGER_HOST,
    CD_LIGHTWEIGHT,
    CD_USER_TRIGGER,
    CD_FILE,
    CD_PIPE,
    CD_FLAGS,
    CD_MAX
};
#define CD_STRING_MAX 1024

struct coredump {
    bool set[CD_MAX];
    bool b[CD_MAX];
    int flags;
    char file[CD_STRING_MAX], pipe[CD_STRING_MAX];
};

static pthread_mutex_t cd_lock = PTHREAD_MUTEX_INITIALIZER;
static struct coredump cd_global, cd_context;

static size_t cd_size(int a, const struct coredump *g, const struct coredump *c)
{
    if (a == CD_FILE || a == CD_PIPE) {
        const struct coredump *from = c && c->set[a] ? c : g;
        if (from->set[a])
            return strlen(a == CD_FILE ? from->file : from->pipe) + 1;
        char host[256] = "";
        gethostname(host, sizeof(host) - 1);
        return (size_t)snprintf(NULL, 0, "%s.cuda.%s.%d", a == CD_FILE ? "core" : "corepipe", host,
                                (int)getpid()) +
               1;
    }
    return a == CD_FLAGS ? sizeof(int) : sizeof(bool);
}

static CUresult cd_get(bool global, CUcoredumpSettings attrib, void *value, size_t *size)
{
    int a = (int)attrib;

    if (a < CD_ENABLE_ON_EXCEPTION || a >= CD_MAX || !size)
        return CUDA_ERROR_INVALID_VALUE;
    if (!global) {
        CUcontext cur;
        om_current_context(&cur);
        if (!cur)
            return CUDA_ERROR_INVALID_CONTEXT;
    }
    pthread_mutex_lock(&cd_lock);
    const struct coredump *c = global ? NULL : &cd_context, *g = &cd_global;
    const struct coredump *from = c && c->set[a] ? c : g;
    size_t need = cd_size(a, g, c);
    CUresult rc = CUDA_SUCCESS;
    if (!value)
        *size = need;
    else if (*size < need)
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (a == CD_FILE || a == CD_PIPE) {
        if (from->set[a]) {
            memcpy(value, a == CD_FILE ? from->file : from->pipe, need);
        } else {
            char host[256] = "";
            gethostname(host, sizeof(host) - 1);
            snprintf(value, need, "%s.cuda.%s.%d", a == CD_FILE ? "core" : "corepipe", host,
                     (int)getpid());
        }
        *size = need;
    } else if (a == CD_FLAGS) {
        memcpy(value, &from->flags, sizeof(int));
        *size = need;
    } else {
        bool v = from->set[a] ? from->b[a] : a == CD_TRIGGER_HOST; /* the driver's defaults */
        memcpy(value, &v, sizeof(v));
        *size = need;
    }
    pthread_mutex_unlock(&cd_lock);
    return rc;
}

static CUresult cd_set(bool global, CUcoredumpSettings attrib, void *value, size_t *size)
{
    int a = (int)attrib;

    if (a < CD_ENABLE_ON_EXCEPTION || a >= CD_MAX || !value || !size)
        return CUDA_ERROR_INVALID_VALUE;
    if (!global) {
        CUcontext cur;
        om_current_context(&cur);
        if (!cur)
            return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (a == CD_FILE || a == CD_PIPE) {
        size_t n = strnlen(value, *size);
        if (n >= CD_STRING_MAX || n == *size)
            return CUDA_ERROR_INVALID_VALUE;
    } else if (*size != (a == CD_FLAGS ? sizeof(int) : sizeof(bool))) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&cd_lock);
    struct coredump *to = global ? &cd_global : &cd_context;
    if (a == CD_FILE)
        strcpy(to->file, value);
    else if (a == CD_PIPE)
        strcpy(to->pipe, value);
    else if (a == CD_FLAGS)
        memcpy(&to->flags, value, sizeof(int));
    else
        memcpy(&to->b[a], value, sizeof(bool));
    to->set[a] = true;
    pthread_mutex_unlock(&cd_lock);
    return CUDA_SUCCESS;
}

CUresult om_r_cuCoredumpGetAttribute(CUcoredumpSettings attrib, void *value, size_t *size)
{
    return cd_get(false, attrib, value, size);
}

CUresult om_r_cuCoredumpGetAttributeGlobal(CUcoredumpSettings attrib, void *value, size_t *size)
{
    return cd_get(true, attrib, value, size);
}

CUresult om_r_cuCoredumpSetAttribute(CUcoredumpSettings attrib, void *value, size_t *size)
{
    return cd_set(false, attrib, value, size);
}

CUresult om_r_cuCoredumpSetAttributeGlobal(CUcoredumpSettings attrib, void *value, size_t *size)
{
    return cd_set(true, attrib, value, size);
}

/* ------------------------------------------------------------------ peer access */

/*
 * The server enabled peer access between its devices' contexts where the hardware allows it
 * (driver.c), so a client's copies and kernels already reach another device's memory; what the
 * client enables is kept here, per pair of devices, to answer as the driver does: a context of
 * the same device, or a pair the hardware cannot connect, is refused, a second enable says it
 * already is, a disable of one never enabled says so.
 */
static unsigned char peer_enabled[OM_MAX_DEVICES][OM_MAX_DEVICES];
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;

static CUresult peer_pair(CUcontext peerContext, CUdevice *from, CUdevice *to)
{
    CUcontext cur;

    om_current_context(&cur);
    if (!cur || !peerContext || cur == peerContext ||
        om_ctx_get_device(peerContext, to) != CUDA_SUCCESS ||
        om_ctx_get_device(cur, from) != CUDA_SUCCESS || *from < 0 || *to < 0 ||
        *from >= (int)OM_MAX_DEVICES || *to >= (int)OM_MAX_DEVICES)
        return CUDA_ERROR_INVALID_CONTEXT;
    return CUDA_SUCCESS;
}

CUresult om_r_cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    CUresult (*can)(int *, CUdevice, CUdevice) = om_remote_entry(OM_IDX_cuDeviceCanAccessPeer);
    CUdevice from, to;
    CUresult rc;
    int ok = 0;

    if (Flags)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = peer_pair(peerContext, &from, &to)) != CUDA_SUCCESS)
        return rc;
    if (from == to || can(&ok, from, to) != CUDA_SUCCESS || !ok)
        return ERR_PEER_ACCESS_UNSUPPORTED;
    pthread_mutex_lock(&peer_lock);
    rc = peer_enabled[from][to] ? ERR_PEER_ACCESS_ALREADY_ENABLED : CUDA_SUCCESS;
    peer_enabled[from][to] = 1;
    pthread_mutex_unlock(&peer_lock);
    return rc;
}

CUresult om_r_cuCtxDisablePeerAccess(CUcontext peerContext)
{
    CUdevice from, to;
    CUresult rc;

    if ((rc = peer_pair(peerContext, &from, &to)) != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&peer_lock);
    rc = peer_enabled[from][to] ? CUDA_SUCCESS : ERR_PEER_ACCESS_NOT_ENABLED;
    peer_enabled[from][to] = 0;
    pthread_mutex_unlock(&peer_lock);
    return rc; /* the server's contexts keep their access: only this client's view changes */
}

/* ------------------------------------------------------------------ tensor maps */

/* The map's 128 bytes go to the server's driver with the new address and come back patched
 * (the three encoders are generated rows; a map is opaque, so no generated kind carries it
 * both ways). */
CUresult om_r_cuTensorMapReplaceAddress(CUtensorMap *tensorMap, void *globalAddress)
{
    uint8_t buf[sizeof(CUtensorMap) + 8];
    struct om_wbuf req = {.p = buf, .cap = sizeof(buf)};
    uint32_t got = 0;
    CUresult rc;

    if (!tensorMap)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_bytes(&req, tensorMap, sizeof(*tensorMap));
    om_put_u64(&req, (uint64_t)(uintptr_t)globalAddress);
    rc = om_rcall(OM_IDX_cuTensorMapReplaceAddress, &req, buf, sizeof(CUtensorMap), &got);
    if (rc == CUDA_SUCCESS && got != sizeof(CUtensorMap))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS)
        memcpy(tensorMap, buf, sizeof(*tensorMap));
    return rc;
}
