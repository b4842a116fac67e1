/* SPDX-License-Identifier: MIT */
/*
 * Graph copy nodes of pageable host memory (docs/architecture.md, "Copy nodes of pageable host
 * memory"): the server cannot read or write the program's pageable memory when the graph runs,
 * but this process can. Such a node becomes a child graph node whose graph is
 *
 *     host node (in)  ->  copy node  ->  host node (out)
 *
 * The host nodes run here, through the host-callback channel (api/hostnodes.c): "in" copies the
 * pageable source into a pinned staging buffer shared with the server, the copy node moves the
 * bytes between the staging buffer and the other side, "out" copies the staging buffer into the
 * pageable destination; a host node with nothing to do returns at once. The three nodes are
 * always there, so that setting a node's parameters (pageable or not) keeps its graph's shape.
 *
 * A record (struct pgcopy) holds what the program set (answered by cuGraphMemcpyNodeGetParams;
 * cuGraphNodeGetType answers a copy node) and the staging buffer; it is the host nodes' argument,
 * which is how a node is recognised as one of these (pg_find), in clones too. Its life is a user
 * object's (api/hostnodes.c): the graph the node is in holds it, clones and executable graphs
 * copy the reference, a child graph's references go to the graph it is added to; when the last
 * goes the staging buffer is freed and the record kept for reuse (the server keeps one
 * host-function record per distinct argument, so reusing ours bounds its count).
 *
 * Launches of one executable graph are ordered, so each staging buffer serves one copy at a
 * time. A 1D copy of pageable memory on a capturing stream (api/copies.c) is captured as a host
 * function and a copy from or into a staging buffer held by the capture's graph (two nodes
 * where the driver makes one: the server cannot add a node to a capture's graph before it
 * ends).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/gen/entries.h"
#include "../gen/stubs.h"
#include "../remote.h"
#include "graph.h"
#include "../shim.h"
#include "../gen/calls.h"

#define PG_MAGIC 0x50474350u /* "PGCP" */
#define NT_MEMCPY 1
#define NT_HOST 3
#define NT_GRAPH 4
#define MT_HOST 1
#define MT_UNIFIED 4
#define USER_OBJECT_NO_DESTRUCTOR_SYNC 1
#define GRAPH_USER_OBJECT_MOVE 1
#define ENTRY(sym, type) ((type)om_remote_entry(OM_IDX_##sym))

struct pgcopy {
    uint32_t magic;
    unsigned pageable;   /* PG_SRC | PG_DST; 0: the copy node does it all */
    CUDA_MEMCPY3D asked; /* as the program set it */
    uint8_t *staging;    /* pinned, shared with the server: one packed box a pageable side */
    size_t box;          /* WidthInBytes * Height * Depth */
    size_t cap;          /* the staging buffer's bytes */
    CUuserObject obj;    /* whose references hold it */
    struct pgcopy *next; /* the free list */
    /* A record made for one executable graph's node (om_pgcopy_exec_set), which its next set
     * reuses: on the list `exec_records` while it is the node's newest. */
    CUgraphExec exec;
    CUgraphNode exec_node;
    struct pgcopy *enext;
};

/* The nodes this process made, and the graph each is in (whose references its records go to
 * when its parameters are set). */
struct made {
    CUgraphNode node;
    CUgraph graph;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct pgcopy *free_records, *exec_records;
static struct made *made;
static size_t nmade, made_cap;

/* ------------------------------------------------------------------ the copies, in the callback
 * thread */

static uint8_t *side_host(int type, const void *host, CUdeviceptr dev)
{
    return (uint8_t *)(uintptr_t)(type == MT_UNIFIED ? (const void *)(uintptr_t)dev : host);
}

/* The box of one side (its rows at x, y, z of its pitch and height) to or from packed bytes. */
static void box_copy(uint8_t *packed, uint8_t *base, size_t x, size_t y, size_t z, size_t pitch,
                     size_t height, const CUDA_MEMCPY3D *m, bool to_packed)
{
    size_t w = m->WidthInBytes;

    for (size_t k = 0; k < m->Depth; k++)
        for (size_t r = 0; r < m->Height; r++) {
            uint8_t *row = base + ((z + k) * height + y + r) * pitch + x;
            uint8_t *p = packed + (k * m->Height + r) * w;
            memcpy(to_packed ? p : row, to_packed ? row : p, w);
        }
}

void om_pgcopy_in(void *arg)
{
    struct pgcopy *r = arg;
    const CUDA_MEMCPY3D *m = &r->asked;

    if (r->pageable & PG_SRC)
        box_copy(r->staging, side_host(m->srcMemoryType, m->srcHost, m->srcDevice), m->srcXInBytes,
                 m->srcY, m->srcZ, m->srcPitch, m->srcHeight, m, true);
}

void om_pgcopy_out(void *arg)
{
    struct pgcopy *r = arg;
    const CUDA_MEMCPY3D *m = &r->asked;

    if (r->pageable & PG_DST)
        box_copy(r->staging + (r->pageable & PG_SRC ? r->box : 0),
                 side_host(m->dstMemoryType, m->dstHost, m->dstDevice), m->dstXInBytes, m->dstY,
                 m->dstZ, m->dstPitch, m->dstHeight, m, false);
}

/* ------------------------------------------------------------------ records */

/* A pageable side's layout, as the driver checks it: rows within their pitch, slices within
 * their height (1 row and 1 slice need neither). */
static bool layout_ok(size_t x, size_t y, size_t pitch, size_t height, const CUDA_MEMCPY3D *m)
{
    if (m->Height > 1 || m->Depth > 1)
        if (pitch < m->WidthInBytes || x > pitch - m->WidthInBytes)
            return false;
    if (m->Depth > 1 && (height < m->Height || y > height - m->Height))
        return false;
    return true;
}

/* r is no longer its executable graph node's newest record (lock held). */
static void exec_unlist(struct pgcopy *r)
{
    for (struct pgcopy **q = &exec_records; *q; q = &(*q)->enext)
        if (*q == r) {
            *q = r->enext;
            break;
        }
    r->exec = NULL;
}

/* The last reference went (a user object's destructor): the buffer is freed, the record kept. */
static void pg_release(void *arg)
{
    struct pgcopy *r = arg;

    pthread_mutex_lock(&lock);
    if (r->exec)
        exec_unlist(r);
    pthread_mutex_unlock(&lock);
    if (r->staging)
        om_pinned_free(r->staging);
    r->staging = NULL;
    r->magic = 0;
    pthread_mutex_lock(&lock);
    r->next = free_records;
    free_records = r;
    pthread_mutex_unlock(&lock);
}

/* The pageable sides' layouts checked; one box's bytes and the staging buffer's. */
static CUresult pg_sizes(const CUDA_MEMCPY3D *p, unsigned pageable, size_t *box, size_t *bytes)
{
    *box = *bytes = 0;
    if ((pageable & PG_SRC) && !layout_ok(p->srcXInBytes, p->srcY, p->srcPitch, p->srcHeight, p))
        return CUDA_ERROR_INVALID_VALUE;
    if ((pageable & PG_DST) && !layout_ok(p->dstXInBytes, p->dstY, p->dstPitch, p->dstHeight, p))
        return CUDA_ERROR_INVALID_VALUE;
    if (pageable &&
        (__builtin_mul_overflow(p->WidthInBytes, p->Height, box) ||
         __builtin_mul_overflow(*box, p->Depth, box) ||
         __builtin_mul_overflow(*box, (size_t)((pageable & PG_SRC) && (pageable & PG_DST) ? 2 : 1),
                                bytes)))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* A record for p (pageable: its pageable sides), its buffer allocated, and a user object holding
 * it (one reference, the caller's). */
static CUresult pg_new(const CUDA_MEMCPY3D *p, unsigned pageable, struct pgcopy **ret,
                       CUuserObject *obj)
{
    struct pgcopy *r;
    size_t box, bytes;
    CUresult rc;

    if ((rc = pg_sizes(p, pageable, &box, &bytes)) != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&lock);
    if ((r = free_records) != NULL)
        free_records = r->next;
    pthread_mutex_unlock(&lock);
    if (!r && !(r = calloc(1, sizeof(*r))))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *r = (struct pgcopy){.pageable = pageable, .asked = *p, .box = box, .cap = box ? bytes : 0};
    if (pageable && box && (rc = om_pinned_alloc((void **)&r->staging, bytes, 0)) != CUDA_SUCCESS) {
        pg_release(r);
        return rc;
    }
    rc = OM_CALL(cuUserObjectCreate)(obj, r, pg_release, 1, USER_OBJECT_NO_DESTRUCTOR_SYNC);
    if (rc != CUDA_SUCCESS) {
        pg_release(r);
        return rc;
    }
    r->magic = PG_MAGIC;
    r->obj = *obj;
    *ret = r;
    return CUDA_SUCCESS;
}

static CUresult current_ctx(CUcontext ctx, CUcontext *out)
{
    *out = ctx;
    return ctx ? CUDA_SUCCESS : OM_CALL(cuCtxGetCurrent)(out);
}

/* The copy node's parameters: the program's, each pageable side replaced by its staging box. */
static CUDA_MEMCPY3D staged(const struct pgcopy *r)
{
    CUDA_MEMCPY3D m = r->asked;

    if (r->pageable & PG_SRC) {
        m.srcMemoryType = MT_HOST;
        m.srcHost = r->staging;
        m.srcDevice = 0;
        m.srcXInBytes = m.srcY = m.srcZ = 0;
        m.srcPitch = m.WidthInBytes;
        m.srcHeight = m.Height;
    }
    if (r->pageable & PG_DST) {
        m.dstMemoryType = MT_HOST;
        m.dstHost = r->staging + (r->pageable & PG_SRC ? r->box : 0);
        m.dstDevice = 0;
        m.dstXInBytes = m.dstY = m.dstZ = 0;
        m.dstPitch = m.WidthInBytes;
        m.dstHeight = m.Height;
    }
    return m;
}

/* The three nodes for r in g. */
static CUresult pg_nodes(CUgraph g, struct pgcopy *r, CUcontext ctx)
{
    CUgraphNode h1, cp, h2;
    CUresult rc;
    CUDA_HOST_NODE_PARAMS in = {om_pgcopy_in, r}, outp = {om_pgcopy_out, r};
    CUDA_MEMCPY3D m = staged(r);
    rc = OM_CALL(cuGraphAddHostNode)(&h1, g, NULL, 0, &in);
    if (rc == CUDA_SUCCESS)
        rc = OM_CALL(cuGraphAddMemcpyNode)(&cp, g, &h1, 1, &m, ctx);
    if (rc == CUDA_SUCCESS)
        rc = OM_CALL(cuGraphAddHostNode)(&h2, g, &cp, 1, &outp);
    return rc;
}

/* A graph of the three nodes for a new record of p (pageable: its pageable sides), which holds
 * the record's one reference (on failure it is gone with the graph); *ret: the record. */
static CUresult pg_child(const CUDA_MEMCPY3D *p, unsigned pageable, CUcontext ctx, CUgraph *out,
                         struct pgcopy **ret)
{
    struct pgcopy *r;
    CUuserObject obj;
    CUgraph g = NULL;
    CUresult rc;

    if ((rc = current_ctx(ctx, &ctx)) != CUDA_SUCCESS ||
        (rc = pg_new(p, pageable, &r, &obj)) != CUDA_SUCCESS)
        return rc;
    if ((rc = ENTRY(cuGraphCreate, CUresult(*)(CUgraph *, unsigned))(&g, 0)) != CUDA_SUCCESS ||
        (rc = OM_CALL(cuGraphRetainUserObject)(g, obj, 1, GRAPH_USER_OBJECT_MOVE)) !=
            CUDA_SUCCESS) {
        if (rc != CUDA_SUCCESS && g)
            OM_CALL(cuGraphDestroy)(g);
        OM_CALL(cuUserObjectRelease)(obj, 1);
        return rc;
    }
    if ((rc = pg_nodes(g, r, ctx)) != CUDA_SUCCESS) {
        OM_CALL(cuGraphDestroy)(g); /* and the record's reference with it */
        return rc;
    }
    *out = g;
    if (ret)
        *ret = r;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ finding them */

struct pgnodes {
    CUgraph child;
    CUgraphNode in, copy, out;
};

/* The record of node, if it is one of these (its nodes in *pn); NULL otherwise. */
static struct pgcopy *pg_find(CUgraphNode node, struct pgnodes *pn)
{
    CUgraphNodeType t;
    CUgraphNode list[4];
    size_t n = 4;
    struct pgcopy *r = NULL;

    memset(pn, 0, sizeof(*pn));
    if (om_rpc_cuGraphNodeGetType(node, &t) != CUDA_SUCCESS || (int)t != NT_GRAPH ||
        om_rpc_cuGraphChildGraphNodeGetGraph(node, &pn->child) != CUDA_SUCCESS ||
        ENTRY(cuGraphGetNodes, CUresult(*)(CUgraph, CUgraphNode *, size_t *))(pn->child, list,
                                                                              &n) != CUDA_SUCCESS ||
        n != 3)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        CUDA_HOST_NODE_PARAMS hp;
        if (om_rpc_cuGraphNodeGetType(list[i], &t) != CUDA_SUCCESS)
            return NULL;
        if ((int)t == NT_MEMCPY) {
            pn->copy = list[i];
            continue;
        }
        if ((int)t != NT_HOST || OM_CALL(cuGraphHostNodeGetParams)(list[i], &hp) != CUDA_SUCCESS)
            return NULL;
        if (hp.fn == om_pgcopy_in)
            pn->in = list[i], r = hp.userData;
        else if (hp.fn == om_pgcopy_out)
            pn->out = list[i];
    }
    return r && pn->copy && pn->out && r->magic == PG_MAGIC ? r : NULL;
}

static void made_add(CUgraphNode node, CUgraph g)
{
    pthread_mutex_lock(&lock);
    if (nmade == made_cap) {
        size_t cap = made_cap ? made_cap * 2 : 16;
        struct made *v = realloc(made, cap * sizeof(*v));
        if (v) {
            made = v;
            made_cap = cap;
        }
    }
    if (nmade < made_cap)
        made[nmade++] = (struct made){node, g};
    pthread_mutex_unlock(&lock);
}

static CUgraph made_graph(CUgraphNode node)
{
    CUgraph g = NULL;

    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nmade && !g; i++)
        if (made[i].node == node)
            g = made[i].graph;
    pthread_mutex_unlock(&lock);
    return g;
}

/* A node or a graph went: what this file knew of it goes too (node NULL: every node of g). */
void om_pgcopy_forget(CUgraphNode node, CUgraph g)
{
    if (!__atomic_load_n(&nmade, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nmade;)
        if ((node && made[i].node == node) || (!node && made[i].graph == g))
            made[i] = made[--nmade];
        else
            i++;
    pthread_mutex_unlock(&lock);
}

/* ------------------------------------------------------------------ the entry points' paths */

/* cuGraphAddMemcpyNode of pageable memory (pageable: its pageable sides). */
CUresult om_pgcopy_add(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                       const CUDA_MEMCPY3D *p, CUcontext ctx, unsigned pageable)
{
    CUgraph child;
    CUresult rc;

    if (!node)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = pg_child(p, pageable, ctx, &child, NULL)) != CUDA_SUCCESS)
        return rc;
    /* the child's reference is copied to g (api/graphs.c's hook), then the child goes */
    rc = OM_CALL(cuGraphAddChildGraphNode)(node, g, deps, n, child);
    OM_CALL(cuGraphDestroy)(child);
    if (rc == CUDA_SUCCESS)
        made_add(*node, g);
    return rc;
}

/* cuGraphMemcpyNodeSetParams of a node that may be one of these: *handled false when it is not. */
CUresult om_pgcopy_set(CUgraphNode node, const CUDA_MEMCPY3D *p, unsigned pageable, bool *handled)
{
    struct pgnodes pn;
    struct pgcopy *r, *old;
    CUuserObject obj;
    CUgraph g;
    size_t box, bytes;
    CUresult rc;

    *handled = false;
    if (!(old = pg_find(node, &pn)))
        return CUDA_SUCCESS;
    *handled = true;
    if ((rc = pg_sizes(p, pageable, &box, &bytes)) != CUDA_SUCCESS)
        return rc;
    g = made_graph(node);
    if (g && bytes <= old->cap && om_uobj_refs(old->obj) == 1) {
        /* Held by the node's graph alone: no executable graph or clone can run it, so it is
         * set in place (a record, and two of the server's, per set otherwise). */
        struct pgcopy was = *old;
        old->asked = *p;
        old->pageable = pageable;
        old->box = box;
        CUDA_MEMCPY3D m = staged(old);
        if ((rc = OM_CALL(cuGraphMemcpyNodeSetParams)(pn.copy, &m)) != CUDA_SUCCESS)
            *old = was;
        return rc;
    }
    if ((rc = pg_new(p, pageable, &r, &obj)) != CUDA_SUCCESS)
        return rc;
    /* The new record is held by the node's graph (known for the nodes made here; a clone's
     * node: by the child graph's handle, which nothing releases, so it stays for good). */
    rc = OM_CALL(cuGraphRetainUserObject)(g ? g : pn.child, obj, 1, GRAPH_USER_OBJECT_MOVE);
    if (rc != CUDA_SUCCESS) {
        OM_CALL(cuUserObjectRelease)(obj, 1);
        return rc;
    }
    CUDA_HOST_NODE_PARAMS in = {om_pgcopy_in, r}, out = {om_pgcopy_out, r};
    CUDA_MEMCPY3D m = staged(r);
    rc = OM_CALL(cuGraphMemcpyNodeSetParams)(pn.copy, &m);
    if (rc == CUDA_SUCCESS)
        rc = OM_CALL(cuGraphHostNodeSetParams)(pn.in, &in);
    if (rc == CUDA_SUCCESS)
        rc = OM_CALL(cuGraphHostNodeSetParams)(pn.out, &out);
    if (rc != CUDA_SUCCESS) { /* back to the old record whole (its buffer is still held) */
        CUDA_HOST_NODE_PARAMS oin = {om_pgcopy_in, old}, oout = {om_pgcopy_out, old};
        CUDA_MEMCPY3D om = staged(old);
        OM_CALL(cuGraphMemcpyNodeSetParams)(pn.copy, &om);
        OM_CALL(cuGraphHostNodeSetParams)(pn.in, &oin);
        OM_CALL(cuGraphHostNodeSetParams)(pn.out, &oout);
    }
    return rc;
}

/* cuGraphExecMemcpyNodeSetParams: the executable graph's node gets a graph of its own. */
CUresult om_pgcopy_exec_set(CUgraphExec e, CUgraphNode node, const CUDA_MEMCPY3D *p, CUcontext ctx,
                            unsigned pageable, bool *handled)
{
    struct pgnodes pn;
    struct pgcopy *r;
    size_t box, bytes;
    CUgraph child = NULL;
    CUresult rc;

    *handled = false;
    if (!pg_find(node, &pn))
        return CUDA_SUCCESS;
    *handled = true;
    if ((rc = pg_sizes(p, pageable, &box, &bytes)) != CUDA_SUCCESS ||
        (rc = current_ctx(ctx, &ctx)) != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&lock);
    for (r = exec_records; r && !(r->exec == e && r->exec_node == node);)
        r = r->enext;
    pthread_mutex_unlock(&lock);
    if (r && bytes <= r->cap) {
        /* This node's newest record, the executable graph's alone: reused once the work the
         * graph launched is done (a record, and two of the server's, per set otherwise). */
        om_uobj_exec_wait(e);
        r->asked = *p;
        r->pageable = pageable;
        r->box = box;
        rc = ENTRY(cuGraphCreate, CUresult(*)(CUgraph *, unsigned))(&child, 0);
        if (rc == CUDA_SUCCESS)
            rc = pg_nodes(child, r, ctx);
    } else if ((rc = pg_child(p, pageable, ctx, &child, &r)) == CUDA_SUCCESS) {
        pthread_mutex_lock(&lock);
        for (struct pgcopy *o = exec_records; o; o = o->enext)
            if (o->exec == e && o->exec_node == node) {
                exec_unlist(o); /* still held by e; no longer reused */
                break;
            }
        r->exec = e;
        r->exec_node = node;
        r->enext = exec_records;
        exec_records = r;
        pthread_mutex_unlock(&lock);
    }
    /* the executable graph gets the child's reference, if it holds one (api/graphs.c's hook) */
    if (rc == CUDA_SUCCESS)
        rc = OM_CALL(cuGraphExecChildGraphNodeSetParams)(e, node, child);
    if (child)
        OM_CALL(cuGraphDestroy)(child);
    return rc;
}

/* What the program set, for a node that is one of these; false otherwise. */
bool om_pgcopy_params(CUgraphNode node, CUDA_MEMCPY3D *p)
{
    struct pgnodes pn;
    struct pgcopy *r = pg_find(node, &pn);

    if (r)
        *p = r->asked;
    return r != NULL;
}

bool om_pgcopy_is(CUgraphNode node)
{
    struct pgnodes pn;

    return pg_find(node, &pn) != NULL;
}

/* A copy on a capturing stream (api/copies.c): a record held by the capture's graph g, its
 * staging buffer (*staging) and the argument of om_pgcopy_in / om_pgcopy_out (*arg), which the
 * caller captures around a copy from or into the staging buffer. */
CUresult om_pgcopy_captured(const CUDA_MEMCPY3D *p, unsigned pageable, CUgraph g, void **staging,
                            void **arg)
{
    struct pgcopy *r;
    CUuserObject obj;
    CUresult rc;

    if ((rc = pg_new(p, pageable, &r, &obj)) != CUDA_SUCCESS)
        return rc;
    /* held by the capture's graph, which the capture ends with (the same handle) */
    if ((rc = OM_CALL(cuGraphRetainUserObject)(g, obj, 1, GRAPH_USER_OBJECT_MOVE)) !=
        CUDA_SUCCESS) {
        OM_CALL(cuUserObjectRelease)(obj, 1);
        return rc;
    }
    *staging = r->staging;
    *arg = r;
    return CUDA_SUCCESS;
}
