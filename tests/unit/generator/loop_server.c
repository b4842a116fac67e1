/* SPDX-License-Identifier: MIT */
/* check_generator.py's loopback, server half: what the test table's generated decoders use
 * (exec.h), with a handle table of its own, and a driver of two entry points. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "src/server/exec.h"

void *om_server_real[OM_ENTRY_COUNT];
int loop_driver_calls;    /* calls that reached the driver */
uint64_t loop_range_len;  /* the last length om_arg_range was asked about */
int loop_nodes_was_null;  /* cuGraphGetNodes: the driver got NULL */
size_t loop_nodes_in;     /* ... and this count */
uint64_t loop_memset_len; /* cuMemsetD16Async: N */
float loop_clamp[2];      /* cuTexRefSetMipmapLevelClamp: its values */

static struct {
    int kind;
    uint64_t h;
} owned[64];
static int nowned;

void loop_own(int kind, uint64_t h)
{
    owned[nowned].kind = kind;
    owned[nowned++].h = h;
}

int om_server_ndevices(void)
{
    return 1;
}

/* one device, the client's 0 */
int om_dev_in(const struct session *s, uint64_t cdev)
{
    return cdev == 0 ? 0 : -1;
}

CUresult om_answer_dev(struct call *c, CUdevice *dev)
{
    return *dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

/* out:asked(hStream): the answer made the server's own, from the call's stream */
CUresult om_answer_asked(struct call *c, int *priority, CUstream st)
{
    *priority = -(int)(uintptr_t)st;
    return CUDA_SUCCESS;
}

CUresult om_wait_stream(CUstream st)
{
    return CUDA_SUCCESS;
}

CUresult om_take_call_error(struct call *c, CUresult rc)
{
    return rc;
}

CUresult om_bad_request(struct call *c)
{
    return CUDA_ERROR_INVALID_VALUE;
}

CUstream om_arg_stream(struct call *c, uint64_t h, bool enqueue, CUresult *rc)
{
    if (h && om_arg_handle(c, OM_H_STREAM, h, false) != CUDA_SUCCESS) {
        *rc = CUDA_ERROR_INVALID_HANDLE;
        return NULL;
    }
    return (CUstream)(uintptr_t)(h ? h : 0x5);
}

/* stream.capture: no capture in the loopback, so a query's stream as any other's */
CUstream om_arg_capture_stream(struct call *c, uint64_t h, CUresult *rc)
{
    return om_arg_stream(c, h, false, rc);
}

CUresult om_arg_handle(struct call *c, enum om_handle_kind kind, uint64_t h, bool nullable)
{
    if (!h && nullable)
        return CUDA_SUCCESS;
    for (int i = 0; i < nowned; i++)
        if (owned[i].kind == (int)kind && owned[i].h == h)
            return CUDA_SUCCESS;
    return CUDA_ERROR_INVALID_HANDLE;
}

/* the client's memory: [0x10000, 0x20000) */
bool om_arg_range(struct call *c, uint64_t p, uint64_t len)
{
    loop_range_len = len;
    return p >= 0x10000 && p <= 0x20000 && len <= 0x20000 - p;
}

CUresult om_own_room(struct session *s, enum om_handle_kind kind)
{
    return nowned < 64 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult om_own_add(struct call *c, enum om_handle_kind kind, uint64_t h)
{
    loop_own((int)kind, h);
    return CUDA_SUCCESS;
}

void om_own_drop(struct session *s, enum om_handle_kind kind, uint64_t h)
{
}

CUresult om_check_testmemset(struct call *c, CUDA_MEMSET_NODE_PARAMS *p)
{
    return CUDA_SUCCESS;
}

CUresult om_x_cuStreamCreate(struct call *c)
{
    return CUDA_SUCCESS;
}

/* hook: called in place of the driver, with the decoded arguments. */
CUresult om_hook_cuMemAddressFree(struct call *c, CUdeviceptr ptr, size_t size)
{
    return ptr && size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The graph has 5 nodes, 0x501 to 0x505; as the driver: NULL asks for the count, otherwise
 * at most *n are written, the rest of the *n entries NULL, and *n becomes what was written. */
static CUresult drv_graph_get_nodes(CUgraph g, CUgraphNode *nodes, size_t *n)
{
    loop_driver_calls++;
    loop_nodes_was_null = nodes == NULL;
    loop_nodes_in = *n;
    if (!nodes) {
        *n = 5;
        return CUDA_SUCCESS;
    }
    size_t got = *n < 5 ? *n : 5;
    for (size_t i = 0; i < *n; i++)
        nodes[i] = i < got ? (CUgraphNode)(uintptr_t)(0x501 + i) : NULL;
    *n = got;
    return CUDA_SUCCESS;
}

static CUresult drv_memset_d16_async(CUdeviceptr d, unsigned short v, size_t n, CUstream s)
{
    loop_driver_calls++;
    loop_memset_len = n;
    return CUDA_SUCCESS;
}

static CUresult drv_add_memset_node(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                                    const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx)
{
    loop_driver_calls++;
    *node = (CUgraphNode)(uintptr_t)0x900;
    return CUDA_SUCCESS;
}

static CUresult drv_texref_clamp(CUtexref t, float lo, float hi)
{
    loop_driver_calls++;
    loop_clamp[0] = lo;
    loop_clamp[1] = hi;
    return CUDA_SUCCESS;
}

/* the driver's priority of every stream is 0; device N is at bus 0000:1N:00.0 */
static CUresult drv_stream_priority(CUstream s, int *p)
{
    loop_driver_calls++;
    *p = 0;
    return CUDA_SUCCESS;
}

static CUresult drv_by_bus(CUdevice *d, const char *bus)
{
    loop_driver_calls++;
    *d = bus[6] - '0';
    return CUDA_SUCCESS;
}

void loop_server_init(void)
{
    om_server_real[OM_IDX_cuStreamGetPriority] = (void *)drv_stream_priority;
    om_server_real[OM_IDX_cuDeviceGetByPCIBusId] = (void *)drv_by_bus;
    om_server_real[OM_IDX_cuTexRefSetMipmapLevelClamp] = (void *)drv_texref_clamp;
    om_server_real[OM_IDX_cuGraphGetNodes] = (void *)drv_graph_get_nodes;
    om_server_real[OM_IDX_cuMemsetD16Async] = (void *)drv_memset_d16_async;
    om_server_real[OM_IDX_cuGraphAddMemsetNode] = (void *)drv_add_memset_node;
}

/* One request through the entry's decoder, as the server's executor calls it. */
CUresult loop_exec(int index, const void *in, size_t len, void *out, size_t cap, size_t *out_len)
{
    struct call c = {.in = {.p = in, .len = len}, .out = {.p = out, .cap = cap}};
    CUresult rc = om_handlers[index] ? om_handlers[index](&c) : CUDA_ERROR_NOT_SUPPORTED;

    if (c.out.overflow)
        return CUDA_ERROR_UNKNOWN;
    *out_len = c.out.len;
    return rc;
}
