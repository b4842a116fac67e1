/* SPDX-License-Identifier: MIT */
/* check_generator.py's loopback, client half: the test table's generated client stubs call the
 * generated decoders (loop_server.c) in place of the server, and the calls are checked. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "src/client/gen/remote_decls.h"
#include "src/client/remote.h"
#include "src/common/gen/entries.h"

extern int loop_driver_calls, loop_nodes_was_null;
extern size_t loop_nodes_in;
extern uint64_t loop_range_len, loop_memset_len;
extern float loop_clamp[2];
void loop_own(int kind, uint64_t h);
void loop_server_init(void);
CUresult loop_exec(int index, const void *in, size_t len, void *out, size_t cap, size_t *out_len);

static void *installed[OM_ENTRY_COUNT];
static int failures;

void om_remote_set(int index, void *fn)
{
    installed[index] = fn;
}

CUresult om_rcall(int index, const struct om_wbuf *req, void *reply, size_t cap, uint32_t *ret_len)
{
    size_t n = 0;
    CUresult rc = loop_exec(index, req->p, req->len, reply, cap, &n);

    if (ret_len)
        *ret_len = (uint32_t)n;
    return rc;
}

CUresult om_rpost(int index, const struct om_wbuf *req)
{
    uint8_t reply[64];
    size_t n;
    return loop_exec(index, req->p, req->len, reply, sizeof(reply), &n);
}

/* the hand-written implementations the test table names (not called) */
CUresult om_r_cuCtxGetDevice(CUdevice *d)
{
    return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult om_r_cuDeviceGetAttribute(int *pi, CUdevice_attribute a, CUdevice d)
{
    return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult om_r_cuStreamCreate(CUstream *s, unsigned int f)
{
    return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult om_r_cuStreamCreateWithPriority(CUstream *s, unsigned int f, int p)
{
    return CUDA_ERROR_NOT_SUPPORTED;
}

#define EXPECT(cond, what)                                                                         \
    do {                                                                                           \
        int ok_ = (cond);                                                                          \
        printf("%s: %s\n", ok_ ? "ok" : "FAIL", what);                                             \
        failures += !ok_;                                                                          \
    } while (0)

/* the test table's handle kinds (tests/unit/generator/handles.tsv), in order */
enum { K_STREAM, K_EVENT, K_LIBRARY, K_KERNEL, K_GRAPH, K_NODE, K_TEXREF };

int main(void)
{
    typedef CUresult (*get_nodes_fn)(CUgraph, CUgraphNode *, size_t *);
    typedef CUresult (*memset_fn)(CUdeviceptr, unsigned short, size_t, CUstream);
    typedef CUresult (*add_node_fn)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                                    const CUDA_MEMSET_NODE_PARAMS *, CUcontext);
    CUgraph mine = (CUgraph)(uintptr_t)0x100, theirs = (CUgraph)(uintptr_t)0x200;
    CUgraphNode nodes[8];
    size_t n;
    int calls;

    loop_server_init();
    om_remote_gen_install();
    loop_own(K_GRAPH, 0x100);
    loop_own(K_NODE, 0x501);
    get_nodes_fn get_nodes = (get_nodes_fn)installed[OM_IDX_cuGraphGetNodes];
    memset_fn memset16 = (memset_fn)installed[OM_IDX_cuMemsetD16Async];
    add_node_fn add_node = (add_node_fn)installed[OM_IDX_cuGraphAddMemsetNode];

    n = 99999; /* ignored when the array is NULL */
    EXPECT(get_nodes(mine, NULL, &n) == CUDA_SUCCESS && n == 5 && loop_nodes_was_null,
           "cuGraphGetNodes(g, NULL, &n): the driver gets NULL, n is the count");
    memset(nodes, 0xff, sizeof(nodes));
    n = 3;
    EXPECT(get_nodes(mine, nodes, &n) == CUDA_SUCCESS && n == 3 && loop_nodes_in == 3 &&
               !loop_nodes_was_null && (uintptr_t)nodes[0] == 0x501 &&
               (uintptr_t)nodes[2] == 0x503 && nodes[3] == (CUgraphNode)(uintptr_t)UINTPTR_MAX,
           "cuGraphGetNodes(g, nodes, &3): 3 nodes written, nothing past them");
    n = 8;
    EXPECT(get_nodes(mine, nodes, &n) == CUDA_SUCCESS && n == 5 && (uintptr_t)nodes[4] == 0x505 &&
               nodes[5] == NULL && nodes[7] == NULL,
           "cuGraphGetNodes(g, nodes, &8): 5 nodes, the rest NULL, n is 5");
    n = 0;
    EXPECT(get_nodes(mine, nodes, &n) == CUDA_SUCCESS && n == 0 && !loop_nodes_was_null,
           "cuGraphGetNodes(g, nodes, &0): the driver gets a buffer, not NULL");
    calls = loop_driver_calls;
    n = 2000;
    EXPECT(get_nodes(mine, nodes, &n) == CUDA_ERROR_INVALID_VALUE && loop_driver_calls == calls,
           "cuGraphGetNodes past its MAX: refused by the client");
    {
        uint64_t req[3] = {0x100, 1, 2000};
        uint8_t reply[64];
        size_t len;
        EXPECT(loop_exec(OM_IDX_cuGraphGetNodes, req, sizeof(req), reply, sizeof(reply), &len) ==
                       CUDA_ERROR_INVALID_VALUE &&
                   loop_driver_calls == calls,
               "cuGraphGetNodes past its MAX: refused by the decoder");
    }
    n = 3;
    EXPECT(get_nodes(theirs, nodes, &n) == CUDA_ERROR_INVALID_HANDLE && loop_driver_calls == calls,
           "cuGraphGetNodes of a graph the client does not own: INVALID_HANDLE");

    EXPECT(memset16(0x10000, 7, 16, NULL) == CUDA_SUCCESS && loop_memset_len == 16 &&
               loop_range_len == 32,
           "cuMemsetD16Async within the client's memory: [p, p + 2N) checked");
    calls = loop_driver_calls;
    EXPECT(memset16(0x10000, 7, (size_t)1 << 63, NULL) == CUDA_ERROR_INVALID_VALUE &&
               loop_driver_calls == calls,
           "cuMemsetD16Async of 2^63 halfwords (2N wraps to 0): refused");
    EXPECT(memset16(0x10000, 7, ((size_t)1 << 47) + 1, NULL) == CUDA_ERROR_INVALID_VALUE &&
               loop_driver_calls == calls,
           "cuMemsetD16Async past the client's memory: refused");

    CUDA_MEMSET_NODE_PARAMS p;
    CUgraphNode node = NULL, dep = (CUgraphNode)(uintptr_t)0x777;
    memset(&p, 0, sizeof(p));
    EXPECT(add_node(&node, mine, &dep, 1, &p, NULL) == CUDA_ERROR_INVALID_HANDLE &&
               loop_driver_calls == calls,
           "cuGraphAddMemsetNode depending on a node the client does not own: INVALID_HANDLE");
    dep = (CUgraphNode)(uintptr_t)0x501;
    EXPECT(add_node(&node, mine, &dep, 1, &p, NULL) == CUDA_SUCCESS && (uintptr_t)node == 0x900 &&
               loop_driver_calls == calls + 1,
           "cuGraphAddMemsetNode depending on its own node: the new node is answered");

    typedef CUresult (*clamp_fn)(CUtexref, float, float);
    clamp_fn clamp = (clamp_fn)installed[OM_IDX_cuTexRefSetMipmapLevelClamp];
    float lo = 0.1f, hi = -2.5e-38f; /* bits an integer conversion would lose */
    loop_own(K_TEXREF, 0x300);
    EXPECT(clamp((CUtexref)(uintptr_t)0x300, lo, hi) == CUDA_SUCCESS &&
               memcmp(&loop_clamp[0], &lo, sizeof(lo)) == 0 &&
               memcmp(&loop_clamp[1], &hi, sizeof(hi)) == 0,
           "cuTexRefSetMipmapLevelClamp: float values reach the driver bit for bit");

    /* answers the server makes its own (out:CHECK): from the call's stream; a device the
     * client does not see refused */
    typedef CUresult (*prio_fn)(CUstream, int *);
    typedef CUresult (*bus_fn)(CUdevice *, const char *);
    prio_fn prio = (prio_fn)installed[OM_IDX_cuStreamGetPriority];
    bus_fn bus = (bus_fn)installed[OM_IDX_cuDeviceGetByPCIBusId];
    int pr = 0;
    CUdevice dv = -1;
    loop_own(K_STREAM, 0x7);
    EXPECT(prio((CUstream)(uintptr_t)0x7, &pr) == CUDA_SUCCESS && pr == -7,
           "cuStreamGetPriority: out:asked(hStream) answers from the call's stream");
    EXPECT(bus(&dv, "0000:10:00.0") == CUDA_SUCCESS && dv == 0,
           "cuDeviceGetByPCIBusId: out:dev answers the client's ordinal");
    EXPECT(bus(&dv, "0000:11:00.0") == CUDA_ERROR_INVALID_DEVICE,
           "cuDeviceGetByPCIBusId: a device the client does not see is INVALID_DEVICE");
    printf("%d failure(s)\n", failures);
    return failures != 0;
}
