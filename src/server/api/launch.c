/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of kernel launches. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/image.h"
#include "../../common/msg.h"
#include "../exec.h"
#include "openmps/ops.h"

/* ------------------------------------------------------------------ launches */

CUresult om_x_cuLaunchKernel(struct call *c)
{
    uint64_t k = om_get_u64(&c->in), g = om_get_u64(&c->in), m = om_get_u64(&c->in);
    uint64_t b = om_get_u64(&c->in), smem = om_get_u64(&c->in), sh = om_get_u64(&c->in);
    size_t args_len = 0;
    const void *args = om_get_rest(&c->in, &args_len);
    int64_t total;
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    total = om_kernel_total(c->s, k);
    if (total < 0)
        return CUDA_ERROR_INVALID_HANDLE;
    if ((int64_t)args_len != total || args_len > sizeof(c->s->launch_args) || smem > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (!om_launch_may_queue(c->s, sh))
        om_launch_flush(c->s); /* its stream's ordering reaches the driver: they go first */
    st = om_launch_stream(c, sh, &rc);
    if (!st)
        return rc;
    /* The argument bytes are already laid out as the kernel expects them. */
    memcpy(c->s->launch_args, args, args_len);
    return om_launch_issue(
        c->s, &(struct om_launch){.f = (CUfunction)(uintptr_t)k,
                                  .grid = {(unsigned)g, (unsigned)(g >> 32), (unsigned)m},
                                  .block = {(unsigned)(m >> 32), (unsigned)b, (unsigned)(b >> 32)},
                                  .smem = (unsigned)smem,
                                  .st = st,
                                  .key = om_sched_key(k, g, (unsigned)m),
                                  .args = c->s->launch_args,
                                  .args_len = args_len});
}

/* CUlaunchAttribute: 72 bytes, an id, padding, a 64-byte value (struct om_launch_config). */
#define LAUNCH_ATTR_BYTES 72

/* Attributes whose values hold no handle (events, graph nodes): they travel as
 * bytes. The others would need translating and are refused for now. */
static bool attribute_allowed(int id)
{
    switch (id) {
    case 0:  /* ignore */
    case 1:  /* access policy window: a device address */
    case 2:  /* cooperative */
    case 3:  /* synchronization policy */
    case 4:  /* cluster dimension */
    case 5:  /* cluster scheduling policy */
    case 6:  /* programmatic stream serialization */
    case 8:  /* priority */
    case 9:  /* memory sync domain map */
    case 10: /* memory sync domain */
    case 11: /* preferred cluster dimension */
    case 14: /* preferred shared memory carveout */ return true;
    default: return false;
    }
}

CUresult om_x_cuLaunchKernelEx(struct call *c)
{
    uint64_t k = om_get_u64(&c->in), g = om_get_u64(&c->in), m = om_get_u64(&c->in);
    uint64_t b = om_get_u64(&c->in), smem = om_get_u64(&c->in), sh = om_get_u64(&c->in);
    uint64_t nattrs = om_get_u64(&c->in);
    uint8_t attrs[16 * LAUNCH_ATTR_BYTES];
    const void *ap = nattrs <= 16 ? om_get_bytes(&c->in, nattrs * LAUNCH_ATTR_BYTES) : NULL;
    size_t args_len = 0;
    const void *args = om_get_rest(&c->in, &args_len);
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (nattrs > 16 || !ap)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(attrs, ap, nattrs * LAUNCH_ATTR_BYTES);
    for (uint64_t i = 0; i < nattrs; i++) {
        int id;
        memcpy(&id, attrs + i * LAUNCH_ATTR_BYTES, sizeof(id));
        if (!attribute_allowed(id)) {
            client_err(c->s, "client %d: launch attribute %d is not supported", (int)c->s->pid, id);
            return CUDA_ERROR_NOT_SUPPORTED;
        }
    }
    if (om_kernel_total(c->s, k) != (int64_t)args_len || args_len > sizeof(c->s->launch_args) ||
        smem > UINT32_MAX)
        return om_kernel_total(c->s, k) < 0 ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
    if (!om_launch_may_queue(c->s, sh))
        om_launch_flush(c->s); /* its stream's ordering reaches the driver: they go first */
    st = om_launch_stream(c, sh, &rc);
    if (!st)
        return rc;
    memcpy(c->s->launch_args, args, args_len);
    return om_launch_issue(
        c->s, &(struct om_launch){.ex = true,
                                  .f = (CUfunction)(uintptr_t)k,
                                  .grid = {(unsigned)g, (unsigned)(g >> 32), (unsigned)m},
                                  .block = {(unsigned)(m >> 32), (unsigned)b, (unsigned)(b >> 32)},
                                  .smem = (unsigned)smem,
                                  .st = st,
                                  .key = om_sched_key(k, g, (unsigned)m),
                                  .attrs = attrs,
                                  .nattrs = (unsigned)nattrs,
                                  .args = c->s->launch_args,
                                  .args_len = args_len});
}
