/* SPDX-License-Identifier: MIT */
/* Remote mode, the graphmem family (api/remote/graphmem.tsv): graph memory (allocation and free
 * nodes, the device's graph-memory attributes) and conditional handles. */
#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/gen/entries.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "graph.h"
#include "../shim.h"

/* ------------------------------------------------------------------ graph memory */

CUresult om_r_cuDeviceSetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr, void *value)
{
    uint64_t v;
    REQ(req, 24);

    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&v, value, sizeof(v));
    om_put_u64(&req, (uint64_t)(int64_t)dev);
    om_put_u64(&req, (uint64_t)(int64_t)attr);
    om_put_u64(&req, v);
    return om_rcall(OM_IDX_cuDeviceSetGraphMemAttribute, &req, NULL, 0, NULL);
}

/* Request: graph, dependencies, pool properties, count and access descriptors, size. Answer:
 * the node and the address (written into the caller's parameters, as the driver does). */
CUresult om_r_cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                     size_t n, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    size_t cap = 32 + MAX_DEPS * 8 + sizeof(p->poolProps) + OM_MAX_DEVICES * 12;
    uint64_t reply[2] = {0, 0};
    uint32_t got = 0;
    uint8_t *buf;
    CUresult rc;

    if (!node || !p || p->accessDescCount > OM_MAX_DEVICES ||
        (p->accessDescCount && !p->accessDescs))
        return CUDA_ERROR_INVALID_VALUE;
    if (!(buf = malloc(cap)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct om_wbuf req = {.p = buf, .cap = cap};
    om_put_u64(&req, (uint64_t)(uintptr_t)g);
    rc = om_graph_put_deps(&req, deps, n);
    if (rc == CUDA_SUCCESS) {
        om_put_bytes(&req, &p->poolProps, sizeof(p->poolProps));
        om_put_u64(&req, p->accessDescCount);
        om_put_bytes(&req, p->accessDescs, p->accessDescCount * sizeof(CUmemAccessDesc));
        om_put_u64(&req, p->bytesize);
        rc = om_rcall(OM_IDX_cuGraphAddMemAllocNode, &req, reply, sizeof(reply), &got);
    }
    free(buf);
    if (rc == CUDA_SUCCESS && got != sizeof(reply))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc != CUDA_SUCCESS)
        return rc;
    *node = (CUgraphNode)(uintptr_t)reply[0];
    p->dptr = reply[1];
    CUdeviceptr b;
    size_t sz;
    bool managed;
    if (!om_devrange_find(reply[1], &b, &sz, &managed)) /* copies then know it is device memory */
        om_devrange_add(reply[1], p->bytesize);
    return CUDA_SUCCESS;
}

/* Answer: pool properties, count, descriptors, size, address; the descriptors live in a copy
 * owned by the node here (as the driver's own). */
CUresult om_r_cuGraphMemAllocNodeGetParams(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    size_t props = sizeof(p->poolProps), cap = props + 24 + OM_MAX_DEVICES * 12;
    uint8_t reply[sizeof(CUmemPoolProps) + 24 + OM_MAX_DEVICES * 12];
    uint32_t got = 0;
    uint64_t count;
    const uint8_t *k;
    CUresult rc;
    REQ(req, 8);

    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)node);
    rc = om_rcall(OM_IDX_cuGraphMemAllocNodeGetParams, &req, reply, (uint32_t)cap, &got);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (got < props + 8)
        return CUDA_ERROR_UNKNOWN;
    memcpy(&count, reply + props, 8);
    if (count > OM_MAX_DEVICES || got != props + 24 + count * 12)
        return CUDA_ERROR_UNKNOWN;
    if (!(k = om_graph_node_bytes(node, reply + props + 8, count * 12)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    memset(p, 0, sizeof(*p));
    memcpy(&p->poolProps, reply, props);
    p->accessDescs = count ? (const CUmemAccessDesc *)(const void *)k : NULL;
    p->accessDescCount = count;
    memcpy(&p->bytesize, reply + props + 8 + count * 12, 8);
    memcpy(&p->dptr, reply + props + 16 + count * 12, 8);
    return CUDA_SUCCESS;
}

/* The context is the client's token: the server runs the node in its own. */
