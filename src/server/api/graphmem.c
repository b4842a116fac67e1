/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of graph memory: allocation and free nodes, the device's
 * graph memory, conditional handles (api/remote/graphmem.tsv). */
#include <stdlib.h>
#include <string.h>

#include "../graphstate.h"

/* ------------------------------------------------------------------ graph memory */

CUresult om_x_cuDeviceSetGraphMemAttribute(struct call *c)
{
    uint64_t cdev = om_get_u64(&c->in), attr = om_get_u64(&c->in), v = om_get_u64(&c->in);
    int dev = om_dev_in(c->s, cdev);
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (dev < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    /* Only the high watermarks may be set, and only to 0 (a reset). */
    if ((attr != 1 && attr != 3) || v != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return ((CUresult(*)(CUdevice, int, void *))REAL(cuDeviceSetGraphMemAttribute))((CUdevice)dev,
                                                                                    (int)attr, &v);
}
#define GRAPH_ALLOC_MAX (1ull << 46)

/* An allocation node's pool properties and access descriptors (descs: p's, ours to change):
 * device memory of one of the client's devices, no shareable handle; its devices become the
 * server's (devmap.c). */
static CUresult check_alloc(struct session *s, CUDA_MEM_ALLOC_NODE_PARAMS *p,
                            CUmemAccessDesc *descs)
{
    if (p->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        om_loc_in(s, &p->poolProps.location) != CUDA_SUCCESS ||
        p->poolProps.win32SecurityAttributes || p->poolProps.handleTypes)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->bytesize == 0 || p->bytesize > GRAPH_ALLOC_MAX ||
        p->accessDescCount > (size_t)s->devmap.count)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < p->accessDescCount; i++) {
        CUmemAccessDesc *d = &descs[i];
        if (d->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
            om_loc_in(s, &d->location) != CUDA_SUCCESS ||
            (d->flags != 0 && d->flags != 1 && d->flags != 3))
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/*
 * Request: the graph, the dependencies, the pool properties, the count of access descriptors,
 * the descriptors, the size. Answer: the node, the allocation's address (its range is the
 * client's from now on).
 */
CUresult om_x_cuGraphAddMemAllocNode(struct call *c)
{
    uint64_t g = om_get_u64(&c->in), ndeps, count, nh;
    CUgraphNode deps[MAX_DEPS], node = NULL;
    CUmemAccessDesc descs[OM_MAX_DEVICES];
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    const void *props, *d = NULL;
    CUresult rc = om_graph_read_deps(c, deps, &ndeps);

    props = om_get_bytes(&c->in, sizeof(p.poolProps));
    count = om_get_u64(&c->in);
    if (count <= OM_MAX_DEVICES)
        d = om_get_bytes(&c->in, count * sizeof(CUmemAccessDesc));
    memset(&p, 0, sizeof(p));
    p.bytesize = om_get_u64(&c->in);
    if (rc == CUDA_SUCCESS)
        rc = ARGS_OK(c);
    if (rc == CUDA_SUCCESS && (!props || count > OM_MAX_DEVICES || (count && !d)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    memcpy(&p.poolProps, props, sizeof(p.poolProps));
    memcpy(descs, d, count * sizeof(*descs));
    p.accessDescs = count ? descs : NULL;
    p.accessDescCount = count;
    if ((rc = check_alloc(c->s, &p, descs)) == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_GRAPH, g, false);
    if (rc == CUDA_SUCCESS)
        rc = om_own_room(c->s, OM_H_NODE);
    if (rc == CUDA_SUCCESS)
        rc = om_graphmem_room(c->s, 1);
    if (rc == CUDA_SUCCESS) /* before the driver makes the node (om_graphmem_add counts it) */
        rc = om_memcap_check(c->s, p.poolProps.location.id, p.bytesize); /* where it will be */
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = ((CUresult(*)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                       CUDA_MEM_ALLOC_NODE_PARAMS *))REAL(cuGraphAddMemAllocNode))(
        &node, (CUgraph)(uintptr_t)g, deps, (size_t)ndeps, &p);
    if (rc != CUDA_SUCCESS)
        return rc;
    nh = (uint64_t)(uintptr_t)node;
    if ((rc = om_own_add(c, OM_H_NODE, nh)) == CUDA_SUCCESS &&
        (rc = om_graphmem_add(c->s, p.dptr, p.bytesize, g, nh, false, 0,
                              p.poolProps.location.id)) != CUDA_SUCCESS) {
        om_graph_forget_node(c->s, node, 0);
        ((CUresult(*)(CUgraphNode))REAL(cuGraphDestroyNode))(node);
    }
    if (rc == CUDA_SUCCESS) {
        om_put_u64(&c->out, nh);
        om_put_u64(&c->out, p.dptr);
    }
    return rc;
}

/* Answer: the pool properties, the count of access descriptors, the descriptors, the size and
 * the address. */
CUresult om_x_cuGraphMemAllocNodeGetParams(struct call *c)
{
    uint64_t node = om_get_u64(&c->in);
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_NODE, node, false);
    if (rc != CUDA_SUCCESS)
        return rc;
    memset(&p, 0, sizeof(p));
    rc = ((CUresult(*)(CUgraphNode, CUDA_MEM_ALLOC_NODE_PARAMS *))REAL(
        cuGraphMemAllocNodeGetParams))((CUgraphNode)(uintptr_t)node, &p);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (p.accessDescCount > OM_MAX_DEVICES || (p.accessDescCount && !p.accessDescs))
        return CUDA_ERROR_NOT_SUPPORTED;
    p.poolProps.win32SecurityAttributes = NULL;
    om_loc_out(c->s, &p.poolProps.location); /* the client's device ordinals */
    om_put_bytes(&c->out, &p.poolProps, sizeof(p.poolProps));
    om_put_u64(&c->out, p.accessDescCount);
    for (size_t i = 0; i < p.accessDescCount; i++) {
        CUmemAccessDesc d = p.accessDescs[i];
        om_loc_out(c->s, &d.location);
        om_put_bytes(&c->out, &d, sizeof(d));
    }
    om_put_u64(&c->out, p.bytesize);
    om_put_u64(&c->out, p.dptr);
    return CUDA_SUCCESS;
}

/* Request: the graph, the dependencies, the address: a graph allocation of the client's. */
/* cuGraphAddMemFreeNode (generated, val:graphmem): the address freed is a graph allocation the
 * client holds. */
CUresult om_check_graphmem(struct call *c, uint64_t dptr)
{
    return om_graphmem_held(c->s, dptr) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ------------------------------------------------------------------ conditional nodes */

/*
 * A conditional handle is device data the driver made for one graph; the client may use the
 * handles it made, each for its own graph only (kept here, counted against its handle budget,
 * forgotten with the graph). Request: the graph, the default launch value, the flags.
 */
/* cuGraphConditionalHandleCreate (generated, hook: the graph is the client's, the value 32 bits,
 * the flags CU_GRAPH_COND_ASSIGN_DEFAULT's): the handle is kept per graph for the session's
 * teardown. */
CUresult om_hook_cuGraphConditionalHandleCreate(struct call *c,
                                                CUgraphConditionalHandle *pHandle_out,
                                                CUgraph hGraph, CUcontext ctx, unsigned value,
                                                unsigned flags)
{
    uint64_t g = (uint64_t)(uintptr_t)hGraph;
    struct om_graphmem *m = om_graphmem_of(c->s);
    CUgraphConditionalHandle h = 0;
    CUresult rc = CUDA_SUCCESS;

    if (!m)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS && m->nc >= om_budget.client_handles)
        rc = om_budget_refuse(c->s, OM_BUDGET_HANDLES, "conditional handle");
    if (rc == CUDA_SUCCESS && !om_graphmem_grow((void **)&m->c, &m->capc, m->nc, sizeof(*m->c)))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = ((CUresult(*)(CUgraphConditionalHandle *, CUgraph, CUcontext, unsigned, unsigned))REAL(
        cuGraphConditionalHandleCreate))(&h, hGraph, ctx, value, flags);
    if (rc != CUDA_SUCCESS)
        return rc;
    m->c[m->nc++] = (struct gm_cond){h, g};
    *pHandle_out = h;
    return CUDA_SUCCESS;
}
