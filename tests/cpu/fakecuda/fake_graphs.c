/* SPDX-License-Identifier: MIT */
/* The driver test double's graphs and stream capture: graphs of nodes kept in tables, executable
 * graphs as copies of their nodes, launches that run the kernel and memset nodes in order (a
 * kernel node runs as fakecuda.c's cuLaunchKernel does), and stream capture that turns the
 * kernels launched on a capturing stream into a graph. FAKECUDA_GRAPH_LOG gets one line per
 * event a test asserts: "graph+ G", "graph- G", "exec+ E", "exec- E", "capture MODE",
 * "launch E", "kernelnode NAME HEXARGS" (what a kernel node received), "invalidated WHY". */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define OK 0
#define INVALID_VALUE 1
#define INVALID_HANDLE 400
#define NOT_SUPPORTED 801
#define CAPTURE_UNSUPPORTED 900
#define CAPTURE_INVALIDATED 901
#define CAPTURE_UNJOINED 904
#define CAPTURE_UNMATCHED 902

enum {
    KERNEL = 0,
    MEMCPY = 1,
    MEMSET = 2,
    HOST = 3,
    GRAPH = 4,
    EMPTY = 5,
    WAIT_EVENT = 6,
    EVENT_RECORD = 7
};
enum {
    SEM_SIGNAL = 8,
    SEM_WAIT = 9,
    BATCH = 12
}; /* CU_GRAPH_NODE_TYPE_EXT_SEMAS_*, _BATCH_MEM_OP */
#define FAKE_OPS 8
#define OP_BYTES 48 /* CUstreamBatchMemOpParams */
#define FAKE_SEMS 16
#define SEM_PARAMS 144 /* sizeof(CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS) */

struct memset_params {
    uint64_t dst;
    size_t pitch;
    unsigned value, elementSize;
    size_t width, height;
};

/* CUDA_MEMCPY3D; memory types 1 host, 2 device, 4 unified: all host memory here */
struct memcpy3d {
    size_t sx, sy, sz, slod;
    int stype;
    const void *shost;
    uint64_t sdev;
    void *sarr, *r0;
    size_t spitch, sheight;
    size_t dx, dy, dz, dlod;
    int dtype;
    void *dhost;
    uint64_t ddev;
    void *darr, *r1;
    size_t dpitch, dheight;
    size_t w, h, d;
};

struct kernel_params {
    void *func;
    unsigned gx, gy, gz, bx, by, bz, smem;
    void **params;
    void **extra;
    void *kern, *ctx;
};

#define MAX_NODES 4096
#define MAX_GRAPHS 512
#define MAX_DEPS 16

struct fgraph;
struct fnode {
    struct fgraph *g;
    int type, live, enabled;
    struct kernel_params k; /* params/extra: NULL; the bytes below */
    unsigned char args[4096];
    size_t len;
    struct memset_params m;
    struct memcpy3d c;
    void *event;
    struct fgraph *child;
    struct fnode *deps[MAX_DEPS];
    int ndeps;
    struct fnode *cloned_from;
    unsigned char attrs[16][64]; /* kernel node attributes, by id */
    void *sems[FAKE_SEMS];       /* an external semaphore node's */
    unsigned char sem_params[FAKE_SEMS][SEM_PARAMS];
    unsigned nsems;
    unsigned char ops[FAKE_OPS][OP_BYTES]; /* a batch memory op node's */
    unsigned nops, ops_flags;
    void *got_extra[5]; /* what cuGraphKernelNodeGetParams answers: the bytes above */
    size_t got_len;
    void (*host_fn)(void *); /* a host node's function and argument */
    void *host_data;
};
struct fgraph {
    int live;
    struct fnode *nodes[MAX_NODES / 4];
    int n;
};
struct fexec {
    int live;
    struct fgraph *g;
    unsigned long long flags;
    struct fnode nodes[64]; /* copies, by position in the graph */
    int n;
};

static struct fnode nodes[MAX_NODES];
static struct fgraph graphs[MAX_GRAPHS];
static struct fexec execs[256];
static pthread_mutex_t glock = PTHREAD_MUTEX_INITIALIZER;

int fake_launch_kernel_bytes(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, void *s, const void *args, size_t len);
const char *fake_kernel_name(void *k, void **lib); /* fakecuda.c */
void fake_driver_log(const char *what, const char *name, int n);
int fake_flush_printf(void);       /* fakecuda.c: what the kernels printed, at a launch's start */
void fake_attr_log(int id, int v); /* fakecuda.c: "attr ID V" in FAKECUDA_LAUNCH_LOG */

static void glog(const char *fmt, const void *p, const char *extra)
{
    const char *log = getenv("FAKECUDA_GRAPH_LOG");
    FILE *f = log ? fopen(log, "a") : NULL;

    if (f) {
        fprintf(f, fmt, p, extra ? extra : "");
        fputc('\n', f);
        fclose(f);
    }
}

static struct fgraph *graph_of(void *h)
{
    struct fgraph *g = h;
    return g >= graphs && g < graphs + MAX_GRAPHS && g->live ? g : NULL;
}

static struct fnode *node_of(void *h)
{
    struct fnode *n = h;
    return n >= nodes && n < nodes + MAX_NODES && n->live ? n : NULL;
}

static struct fexec *exec_of(void *h)
{
    struct fexec *e = h;
    return e >= execs && e < execs + 256 && e->live ? e : NULL;
}

static struct fgraph *new_graph(void)
{
    for (int i = 0; i < MAX_GRAPHS; i++) {
        if (!graphs[i].live) {
            memset(&graphs[i], 0, sizeof(graphs[i]));
            graphs[i].live = 1;
            glog("graph+ %p%s", &graphs[i], NULL);
            return &graphs[i];
        }
    }
    return NULL;
}

static struct fnode *new_node(struct fgraph *g, int type, void *const *deps, size_t ndeps)
{
    if (!g || ndeps > MAX_DEPS || (ndeps && !deps) || g->n >= MAX_NODES / 4)
        return NULL;
    for (size_t i = 0; i < ndeps; i++)
        if (!node_of(deps[i]) || ((struct fnode *)deps[i])->g != g)
            return NULL;
    for (int i = 0; i < MAX_NODES; i++) {
        if (!nodes[i].live) {
            struct fnode *n = &nodes[i];
            memset(n, 0, sizeof(*n));
            n->live = n->enabled = 1;
            n->g = g;
            n->type = type;
            for (size_t d = 0; d < ndeps; d++)
                n->deps[n->ndeps++] = deps[d];
            g->nodes[g->n++] = n;
            return n;
        }
    }
    return NULL;
}

static void free_graph(struct fgraph *g);
static struct fgraph *clone_graph(struct fgraph *g, int depth);

static void drop_node(struct fnode *n)
{
    struct fgraph *g = n->g;
    if (n->type == GRAPH && n->child) { /* a child graph node owns its graph (a clone) */
        free_graph(n->child);
        n->child = NULL;
    }
    for (int i = 0; i < g->n; i++) {
        if (g->nodes[i] == n) {
            memmove(&g->nodes[i], &g->nodes[i + 1], (size_t)(g->n - i - 1) * sizeof(n));
            g->n--;
            break;
        }
    }
    for (int i = 0; i < g->n; i++) /* edges to it go too */
        for (int d = 0; d < g->nodes[i]->ndeps; d++)
            if (g->nodes[i]->deps[d] == n)
                g->nodes[i]->deps[d--] = g->nodes[i]->deps[--g->nodes[i]->ndeps];
    n->live = 0;
}

static void free_graph(struct fgraph *g)
{
    while (g->n)
        drop_node(g->nodes[g->n - 1]);
    g->live = 0;
    glog("graph- %p%s", g, NULL);
}

EXPORT int cuGraphCreate(void **out, unsigned flags)
{
    int rc = OK;
    pthread_mutex_lock(&glock);
    if (!out || flags)
        rc = INVALID_VALUE;
    else if (!(*out = new_graph()))
        rc = 2;
    pthread_mutex_unlock(&glock);
    return rc;
}

EXPORT int cuGraphDestroy(void *h)
{
    struct fgraph *g;
    pthread_mutex_lock(&glock);
    g = graph_of(h);
    if (g)
        free_graph(g);
    pthread_mutex_unlock(&glock);
    return g ? OK : INVALID_VALUE;
}

/* The kernel-node parameters a node keeps: the argument bytes from extra's buffer (the server
 * always sends them that way). */
static int set_kernel(struct fnode *n, const struct kernel_params *p)
{
    const unsigned char *args = NULL;
    size_t len = 0;
    char hex[2 * 4096 + 64];

    void *f = p ? (p->func ? p->func : p->kern) : NULL;

    if (!f || (!p->func && !p->ctx))
        return INVALID_VALUE; /* a kernel (not a function) runs in the context given */
    if (p->params)
        return NOT_SUPPORTED; /* the server never passes kernelParams */
    for (int i = 0; p->extra && p->extra[i]; i += 2) {
        if (p->extra[i] == (void *)1)
            args = p->extra[i + 1];
        else if (p->extra[i] == (void *)2)
            len = *(size_t *)p->extra[i + 1];
    }
    if (len > sizeof(n->args) || (len && !args))
        return INVALID_VALUE;
    n->k = *p;
    n->k.func = f;
    n->k.extra = NULL;
    memcpy(n->args, args, len);
    n->len = len;
    snprintf(hex, sizeof(hex), "%s ", fake_kernel_name(f, NULL));
    for (size_t i = 0; i < len; i++)
        snprintf(hex + strlen(hex), 3, "%02x", n->args[i]);
    glog("kernelnode%s %s", "", hex);
    return OK;
}

#define ADD_NODE(type)                                                                             \
    struct fnode *n;                                                                               \
    pthread_mutex_lock(&glock);                                                                    \
    n = out ? new_node(graph_of(g), type, deps, ndeps) : NULL;                                     \
    pthread_mutex_unlock(&glock);                                                                  \
    if (!n)                                                                                        \
        return INVALID_VALUE;                                                                      \
    *out = n

EXPORT int cuGraphAddEmptyNode(void **out, void *g, void *const *deps, size_t ndeps)
{
    ADD_NODE(EMPTY);
    return OK;
}

EXPORT int cuGraphAddKernelNode_v2(void **out, void *g, void *const *deps, size_t ndeps,
                                   const struct kernel_params *p)
{
    int rc;
    ADD_NODE(KERNEL);
    if ((rc = set_kernel(n, p)) != OK) {
        pthread_mutex_lock(&glock);
        drop_node(n);
        pthread_mutex_unlock(&glock);
    }
    return rc;
}

EXPORT int cuGraphAddMemsetNode(void **out, void *g, void *const *deps, size_t ndeps,
                                const struct memset_params *p, void *ctx)
{
    if (!p || !ctx)
        return INVALID_VALUE; /* a context is needed (the server passes its own) */
    ADD_NODE(MEMSET);
    n->m = *p;
    return OK;
}

static int valid_copy(const struct memcpy3d *c)
{
    return c && (c->stype == 1 || c->stype == 2 || c->stype == 4) &&
           (c->dtype == 1 || c->dtype == 2 || c->dtype == 4) && !c->sarr && !c->darr;
}

EXPORT int cuGraphAddMemcpyNode(void **out, void *g, void *const *deps, size_t ndeps,
                                const struct memcpy3d *p, void *ctx)
{
    if (!valid_copy(p) || !ctx)
        return INVALID_VALUE;
    ADD_NODE(MEMCPY);
    n->c = *p;
    return OK;
}

EXPORT int cuGraphMemcpyNodeGetParams(void *h, struct memcpy3d *p)
{
    struct fnode *n = node_of(h);
    if (!n || n->type != MEMCPY || !p)
        return INVALID_VALUE;
    *p = n->c;
    return OK;
}

EXPORT int cuGraphMemcpyNodeSetParams(void *h, const struct memcpy3d *p)
{
    struct fnode *n = node_of(h);
    if (!n || n->type != MEMCPY || !valid_copy(p))
        return INVALID_VALUE;
    n->c = *p;
    return OK;
}

static void run_copy(const struct memcpy3d *c)
{
    const char *src = c->stype == 1 ? c->shost : (const char *)(uintptr_t)c->sdev;
    char *dst = c->dtype == 1 ? c->dhost : (char *)(uintptr_t)c->ddev;

    for (size_t z = 0; z < c->d; z++)
        for (size_t y = 0; y < c->h; y++)
            memmove(dst + ((c->dz + z) * c->dheight + c->dy + y) * c->dpitch + c->dx,
                    src + ((c->sz + z) * c->sheight + c->sy + y) * c->spitch + c->sx, c->w);
}

EXPORT int cuGraphAddEventRecordNode(void **out, void *g, void *const *deps, size_t ndeps, void *e)
{
    ADD_NODE(EVENT_RECORD);
    n->event = e;
    return OK;
}

EXPORT int cuGraphAddEventWaitNode(void **out, void *g, void *const *deps, size_t ndeps, void *e)
{
    ADD_NODE(WAIT_EVENT);
    n->event = e;
    return OK;
}

/* The node keeps a copy of the child graph, as the driver does. */
EXPORT int cuGraphAddChildGraphNode(void **out, void *g, void *const *deps, size_t ndeps,
                                    void *child)
{
    struct fgraph *copy = NULL;
    if (!graph_of(child))
        return INVALID_VALUE;
    ADD_NODE(GRAPH);
    pthread_mutex_lock(&glock);
    copy = clone_graph(child, 0);
    if (copy)
        n->child = copy;
    else
        drop_node(n);
    pthread_mutex_unlock(&glock);
    if (!copy)
        return 2;
    glog("childgraph %p%s", copy, NULL);
    return OK;
}

EXPORT int cuGraphChildGraphNodeGetGraph(void *h, void **out)
{
    struct fnode *n;
    int rc = OK;
    pthread_mutex_lock(&glock);
    n = node_of(h);
    if (!n || n->type != GRAPH || !out)
        rc = INVALID_VALUE;
    else
        *out = n->child;
    pthread_mutex_unlock(&glock);
    return rc;
}

static int edges(void *g, void *const *from, void *const *to, size_t count, int add)
{
    int rc = OK;
    pthread_mutex_lock(&glock);
    for (size_t i = 0; i < count && rc == OK; i++) {
        struct fnode *f = node_of(from[i]), *t = node_of(to[i]);
        if (!f || !t || f->g != graph_of(g) || t->g != f->g) {
            rc = INVALID_VALUE;
        } else if (add) {
            if (t->ndeps >= MAX_DEPS)
                rc = INVALID_VALUE;
            else
                t->deps[t->ndeps++] = f;
        } else {
            int d;
            for (d = 0; d < t->ndeps && t->deps[d] != f; d++) {
            }
            if (d == t->ndeps)
                rc = INVALID_VALUE;
            else
                t->deps[d] = t->deps[--t->ndeps];
        }
    }
    pthread_mutex_unlock(&glock);
    return rc;
}

EXPORT int cuGraphAddDependencies(void *g, void *const *from, void *const *to, size_t n)
{
    return edges(g, from, to, n, 1);
}

EXPORT int cuGraphRemoveDependencies(void *g, void *const *from, void *const *to, size_t n)
{
    return edges(g, from, to, n, 0);
}

EXPORT int cuGraphDestroyNode(void *h)
{
    struct fnode *n;
    pthread_mutex_lock(&glock);
    if ((n = node_of(h)))
        drop_node(n);
    pthread_mutex_unlock(&glock);
    return n ? OK : INVALID_VALUE;
}

EXPORT int cuGraphNodeGetType(void *h, int *type)
{
    struct fnode *n = node_of(h);
    if (!n || !type)
        return INVALID_VALUE;
    *type = n->type;
    return OK;
}

/* The driver's list convention: NULL array: the count; else at most *count entries, and
 * *count lowered to the number there are. */
static int answer(void **out, void **all, size_t have, size_t *count)
{
    if (!count)
        return INVALID_VALUE;
    if (!out) {
        *count = have;
        return OK;
    }
    if (have < *count)
        *count = have;
    memcpy(out, all, *count * sizeof(*out));
    return OK;
}

static int list(void *h, int what, void **out, size_t *count)
{
    void *all[MAX_NODES / 4];
    size_t have = 0;
    int rc;

    pthread_mutex_lock(&glock);
    struct fgraph *g = what < 2 ? graph_of(h) : NULL;
    struct fnode *n = what >= 2 ? node_of(h) : NULL;
    if (!g && !n) {
        pthread_mutex_unlock(&glock);
        return INVALID_VALUE;
    }
    if (g) {
        for (int i = 0; i < g->n; i++)
            if (what == 0 || g->nodes[i]->ndeps == 0)
                all[have++] = g->nodes[i];
    } else if (what == 2) {
        for (int d = 0; d < n->ndeps; d++)
            all[have++] = n->deps[d];
    } else {
        for (int i = 0; i < n->g->n; i++)
            for (int d = 0; d < n->g->nodes[i]->ndeps; d++)
                if (n->g->nodes[i]->deps[d] == n)
                    all[have++] = n->g->nodes[i];
    }
    rc = answer(out, all, have, count);
    pthread_mutex_unlock(&glock);
    return rc;
}

EXPORT int cuGraphGetNodes(void *g, void **out, size_t *count)
{
    return list(g, 0, out, count);
}

EXPORT int cuGraphGetRootNodes(void *g, void **out, size_t *count)
{
    return list(g, 1, out, count);
}

EXPORT int cuGraphNodeGetDependencies(void *n, void **out, size_t *count)
{
    return list(n, 2, out, count);
}

EXPORT int cuGraphNodeGetDependentNodes(void *n, void **out, size_t *count)
{
    return list(n, 3, out, count);
}

EXPORT int cuGraphGetEdges(void *h, void **from, void **to, size_t *count)
{
    struct fgraph *g;
    size_t have = 0;

    if (!count)
        return INVALID_VALUE;
    pthread_mutex_lock(&glock);
    g = graph_of(h);
    for (int i = 0; g && i < g->n; i++) {
        for (int d = 0; d < g->nodes[i]->ndeps; d++, have++) {
            if (from && have < *count) {
                from[have] = g->nodes[i]->deps[d];
                to[have] = g->nodes[i];
            }
        }
    }
    pthread_mutex_unlock(&glock);
    if (!g)
        return INVALID_VALUE;
    if (!from || have < *count)
        *count = have;
    return OK;
}

/* A copy of g with its nodes and edges (a child graph node's graph copied too); glock held. */
static struct fgraph *clone_graph(struct fgraph *g, int depth)
{
    struct fgraph *c = depth < 8 ? new_graph() : NULL;
    for (int i = 0; c && i < g->n; i++) {
        struct fnode *n = new_node(c, g->nodes[i]->type, NULL, 0);
        if (!n)
            break;
        memcpy(n, g->nodes[i], sizeof(*n));
        n->g = c;
        n->cloned_from = g->nodes[i];
        c->nodes[i] = n;
        if (n->type == GRAPH && n->child)
            n->child = clone_graph(n->child, depth + 1);
    }
    for (int i = 0; c && i < c->n; i++) /* edges between the copies */
        for (int d = 0; d < c->nodes[i]->ndeps; d++)
            for (int j = 0; j < g->n; j++)
                if (c->nodes[i]->deps[d] == g->nodes[j])
                    c->nodes[i]->deps[d] = c->nodes[j];
    return c;
}

EXPORT int cuGraphClone(void **out, void *h)
{
    struct fgraph *g, *c = NULL;
    pthread_mutex_lock(&glock);
    if ((g = graph_of(h)))
        c = clone_graph(g, 0);
    pthread_mutex_unlock(&glock);
    if (!c)
        return INVALID_VALUE;
    *out = c;
    return OK;
}

EXPORT int cuGraphNodeFindInClone(void **out, void *orig, void *clone)
{
    struct fgraph *c = graph_of(clone);
    for (int i = 0; c && i < c->n; i++) {
        if (c->nodes[i]->cloned_from == orig) {
            *out = c->nodes[i];
            return OK;
        }
    }
    return INVALID_VALUE;
}

/* The executable graph's own copies of child graph nodes' graphs go (glock held). */
static void drop_exec_children(struct fexec *e)
{
    for (int i = 0; i < e->n; i++)
        if (e->nodes[i].type == GRAPH && e->nodes[i].child) {
            free_graph(e->nodes[i].child);
            e->nodes[i].child = NULL;
        }
}

/* The graph's nodes copied into the executable graph, a child graph node's graph copied too,
 * as the driver does: setting the graph's nodes afterwards does not change it (glock held). */
static void snapshot(struct fexec *e)
{
    drop_exec_children(e);
    e->n = 0;
    for (int i = 0; i < e->g->n && i < 64; i++) {
        e->nodes[e->n] = *e->g->nodes[i];
        if (e->nodes[e->n].type == GRAPH && e->nodes[e->n].child)
            e->nodes[e->n].child = clone_graph(e->nodes[e->n].child, 1);
        e->n++;
    }
}

EXPORT int cuGraphInstantiateWithFlags(void **out, void *h, unsigned long long flags)
{
    struct fgraph *g;
    struct fexec *e = NULL;

    pthread_mutex_lock(&glock);
    if ((g = graph_of(h)) && out) {
        for (int i = 0; i < 256 && !e; i++) {
            if (!execs[i].live) {
                e = &execs[i];
                e->live = 1;
                e->g = g;
                e->flags = flags;
                e->n = 0;
                snapshot(e);
            }
        }
    }
    pthread_mutex_unlock(&glock);
    if (!e)
        return INVALID_VALUE;
    *out = e;
    glog("exec+ %p%s", e, NULL);
    return OK;
}

EXPORT int cuGraphExecDestroy(void *h)
{
    struct fexec *e = exec_of(h);
    if (!e)
        return INVALID_VALUE;
    pthread_mutex_lock(&glock);
    drop_exec_children(e);
    pthread_mutex_unlock(&glock);
    e->live = 0;
    glog("exec- %p%s", e, NULL);
    return OK;
}

EXPORT int cuGraphExecGetFlags(void *h, unsigned long long *flags)
{
    struct fexec *e = exec_of(h);
    if (!e || !flags)
        return INVALID_VALUE;
    *flags = e->flags;
    return OK;
}

static struct fnode *exec_node(struct fexec *e, void *h)
{
    for (int i = 0; e && i < e->n; i++)
        if (e->g->nodes[i] == h)
            return &e->nodes[i];
    return NULL;
}

void fake_dma_flush(void *s); /* fakecuda.c: the late work of FAKECUDA_DMA_LATER, _KERNEL_LATER */

static int run_node(struct fnode *n, void *s)
{
    int rc = OK;

    if (n->type != KERNEL && n->type != GRAPH)
        fake_dma_flush(s);            /* a node after a kernel that writes late sees its writes */
    if (n->type == GRAPH && n->child) /* its nodes in the order they were added */
        for (int i = 0; i < n->child->n && rc == OK; i++)
            rc = run_node(n->child->nodes[i], s);
    else if (n->type == KERNEL) {
        for (int id = 1; id < 16; id++) { /* as cuLaunchKernelEx logs them */
            static const unsigned char zero[64];
            int v;
            if (memcmp(n->attrs[id], zero, 64)) {
                memcpy(&v, n->attrs[id], 4);
                fake_attr_log(id, v);
            }
        }
        rc = fake_launch_kernel_bytes(n->k.func, n->k.gx, n->k.gy, n->k.gz, n->k.bx, n->k.by,
                                      n->k.bz, s, n->args, n->len);
    } else if (n->type == MEMCPY)
        run_copy(&n->c);
    else if (n->type == HOST)
        n->host_fn(n->host_data); /* in order, on the launching thread */
    else if (n->type == MEMSET && n->m.elementSize == 1)
        for (size_t r = 0; r < n->m.height; r++)
            memset((char *)(uintptr_t)n->m.dst + r * n->m.pitch, (int)n->m.value, n->m.width);
    else if (n->type == MEMSET && n->m.elementSize == 4)
        for (size_t r = 0; r < n->m.height; r++)
            for (size_t x = 0; x < n->m.width; x++)
                ((unsigned *)(uintptr_t)(n->m.dst + r * n->m.pitch))[x] = n->m.value;
    return rc;
}

EXPORT int cuGraphLaunch(void *h, void *s)
{
    fake_dma_flush(s);
    struct fexec *e = exec_of(h);
    int rc = OK;

    if (!e)
        return INVALID_VALUE;
    if (fake_flush_printf() != OK) /* a launch prints earlier kernels' output at its start */
        return 710;                /* CUDA_ERROR_ASSERT, after a device-side assert */
    glog("launch %p%s", e, NULL);
    fake_driver_log("graph", NULL, e->n);
    for (int i = 0; i < e->n && rc == OK; i++)
        if (e->nodes[i].enabled)
            rc = run_node(&e->nodes[i], s);
    return rc;
}

EXPORT int cuGraphUpload(void *h, void *s)
{
    (void)s;
    return exec_of(h) ? OK : INVALID_VALUE;
}

EXPORT int cuGraphKernelNodeSetParams_v2(void *h, const struct kernel_params *p)
{
    struct fnode *n = node_of(h);
    return n && n->type == KERNEL ? set_kernel(n, p) : INVALID_VALUE;
}

/* As the driver: the node's arguments as `extra` (the form the server set), owned by the node. */
EXPORT int cuGraphKernelNodeGetParams_v2(void *h, struct kernel_params *p)
{
    struct fnode *n;
    int rc = OK;
    pthread_mutex_lock(&glock);
    n = node_of(h);
    if (!n || n->type != KERNEL || !p) {
        rc = INVALID_VALUE;
    } else {
        *p = n->k;
        p->params = NULL;
        p->extra = NULL;
        if (n->len) {
            n->got_len = n->len;
            n->got_extra[0] = (void *)1; /* CU_LAUNCH_PARAM_BUFFER_POINTER */
            n->got_extra[1] = n->args;
            n->got_extra[2] = (void *)2; /* CU_LAUNCH_PARAM_BUFFER_SIZE */
            n->got_extra[3] = &n->got_len;
            n->got_extra[4] = NULL; /* CU_LAUNCH_PARAM_END */
            p->extra = n->got_extra;
        }
    }
    pthread_mutex_unlock(&glock);
    return rc;
}

EXPORT int cuGraphExecKernelNodeSetParams_v2(void *e, void *h, const struct kernel_params *p)
{
    struct fnode *n = exec_node(exec_of(e), h);
    return n && n->type == KERNEL ? set_kernel(n, p) : INVALID_VALUE;
}

EXPORT int cuGraphKernelNodeCopyAttributes(void *dst, void *src)
{
    return node_of(dst) && node_of(src) ? OK : INVALID_VALUE;
}

EXPORT int cuGraphMemsetNodeGetParams(void *h, struct memset_params *p)
{
    struct fnode *n = node_of(h);
    if (!n || n->type != MEMSET || !p)
        return INVALID_VALUE;
    *p = n->m;
    return OK;
}

EXPORT int cuGraphMemsetNodeSetParams(void *h, const struct memset_params *p)
{
    struct fnode *n = node_of(h);
    if (!n || n->type != MEMSET || !p)
        return INVALID_VALUE;
    n->m = *p;
    return OK;
}

EXPORT int cuGraphExecMemsetNodeSetParams(void *e, void *h, const struct memset_params *p,
                                          void *ctx)
{
    struct fnode *n = exec_node(exec_of(e), h);
    if (!n || n->type != MEMSET || !p || !ctx)
        return INVALID_VALUE;
    n->m = *p;
    return OK;
}

#define EVENT_NODE(get, set, execset, kind)                                                        \
    EXPORT int get(void *h, void **ev)                                                             \
    {                                                                                              \
        struct fnode *n = node_of(h);                                                              \
        if (!n || n->type != kind || !ev)                                                          \
            return INVALID_VALUE;                                                                  \
        *ev = n->event;                                                                            \
        return OK;                                                                                 \
    }                                                                                              \
    EXPORT int set(void *h, void *ev)                                                              \
    {                                                                                              \
        struct fnode *n = node_of(h);                                                              \
        if (!n || n->type != kind)                                                                 \
            return INVALID_VALUE;                                                                  \
        n->event = ev;                                                                             \
        return OK;                                                                                 \
    }                                                                                              \
    EXPORT int execset(void *e, void *h, void *ev)                                                 \
    {                                                                                              \
        struct fnode *n = exec_node(exec_of(e), h);                                                \
        if (!n || n->type != kind)                                                                 \
            return INVALID_VALUE;                                                                  \
        n->event = ev;                                                                             \
        return OK;                                                                                 \
    }
EVENT_NODE(cuGraphEventRecordNodeGetEvent, cuGraphEventRecordNodeSetEvent,
           cuGraphExecEventRecordNodeSetEvent, EVENT_RECORD)
EVENT_NODE(cuGraphEventWaitNodeGetEvent, cuGraphEventWaitNodeSetEvent,
           cuGraphExecEventWaitNodeSetEvent, WAIT_EVENT)

/* The executable graph's node gets a copy of child (the topology must be the node's). */
EXPORT int cuGraphExecChildGraphNodeSetParams(void *e, void *h, void *child)
{
    struct fnode *n = exec_node(exec_of(e), h);
    struct fgraph *c = graph_of(child), *copy;
    int rc = OK;

    pthread_mutex_lock(&glock);
    if (!n || n->type != GRAPH || !c || !n->child || n->child->n != c->n)
        rc = INVALID_VALUE;
    else if (!(copy = clone_graph(c, 1)))
        rc = 2;
    else {
        free_graph(n->child);
        n->child = copy;
    }
    pthread_mutex_unlock(&glock);
    return rc;
}

EXPORT int cuGraphNodeGetEnabled(void *e, void *h, unsigned *on)
{
    struct fnode *n = exec_node(exec_of(e), h);
    if (!n || !on)
        return INVALID_VALUE;
    *on = (unsigned)n->enabled;
    return OK;
}

EXPORT int cuGraphNodeSetEnabled(void *e, void *h, unsigned on)
{
    struct fnode *n = exec_node(exec_of(e), h);
    if (!n || on > 1)
        return INVALID_VALUE;
    n->enabled = (int)on;
    return OK;
}

/* CUDA_GRAPH_INSTANTIATE_PARAMS */
struct instantiate_params {
    unsigned long long flags;
    void *hUploadStream, *hErrNode_out;
    int result_out;
};

/* CUgraphExecUpdateResultInfo */
struct update_info {
    int result;
    void *errorNode, *errorFromNode;
};

EXPORT int cuGraphExecUpdate_v2(void *h, void *g, struct update_info *info)
{
    struct fexec *e = exec_of(h);
    struct fgraph *gr = graph_of(g);
    if (!e || !gr || !info)
        return INVALID_VALUE;
    memset(info, 0, sizeof(*info));
    if (gr->n != e->n) { /* a topology change: CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED */
        info->result = 2;
        return 910; /* CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE */
    }
    pthread_mutex_lock(&glock);
    snapshot(e);
    pthread_mutex_unlock(&glock);
    return OK;
}

/* ------------------------------------------------------------------ graph memory */

static unsigned long long graph_mem_high;

EXPORT int cuDeviceGraphMemTrim(int dev)
{
    return dev == 0 ? OK : 101;
}

EXPORT int cuDeviceGetGraphMemAttribute(int dev, int attr, void *v)
{
    if (dev != 0 || !v || attr < 0 || attr > 3)
        return INVALID_VALUE;
    *(unsigned long long *)v = attr == 1 ? graph_mem_high : 4096ull * (unsigned)(attr + 1);
    return OK;
}

EXPORT int cuDeviceSetGraphMemAttribute(int dev, int attr, void *v)
{
    if (dev != 0 || !v || (attr != 1 && attr != 3) || *(unsigned long long *)v)
        return INVALID_VALUE;
    graph_mem_high = 0;
    return OK;
}

static char fake_ctx;

EXPORT int cuCtxGetCurrent(void **ctx)
{
    *ctx = &fake_ctx;
    return OK;
}

/* ------------------------------------------------------------------ stream capture */

/* Capture state per stream: the graph it captures into (its origin's), its status, whether it
 * began the capture. Streams and events are tokens (fakecuda.c); they are found by address. */
#define MAX_CAPTURES 64
static struct capture {
    void *stream;
    struct fgraph *g;
    int status; /* 1 active, 2 invalidated */
    int origin;
    unsigned long long id;
    struct fnode *last; /* the dependency of the next captured node */
} caps[MAX_CAPTURES];
static void *captured_events[256]; /* recorded in some capture */
static unsigned long long next_capture_id = 1;

static struct capture *cap_of(void *s)
{
    for (int i = 0; i < MAX_CAPTURES; i++)
        if (caps[i].stream && caps[i].stream == s)
            return &caps[i];
    return NULL;
}

static void invalidate(struct fgraph *g, const char *why)
{
    for (int i = 0; i < MAX_CAPTURES; i++)
        if (caps[i].stream && caps[i].g == g)
            caps[i].status = 2;
    glog("invalidated%s %s", "", why);
}

EXPORT int cuStreamBeginCapture_v2(void *s, int mode)
{
    struct capture *c;
    char m[16];

    if (!s)
        return CAPTURE_UNSUPPORTED; /* the NULL stream cannot be captured */
    pthread_mutex_lock(&glock);
    if (cap_of(s)) {
        pthread_mutex_unlock(&glock);
        return 900;
    }
    for (c = caps; c < caps + MAX_CAPTURES && c->stream; c++) {
    }
    if (c == caps + MAX_CAPTURES || !(c->g = new_graph())) {
        pthread_mutex_unlock(&glock);
        return 2;
    }
    c->stream = s;
    c->status = 1;
    c->origin = 1;
    c->id = next_capture_id++;
    c->last = NULL;
    pthread_mutex_unlock(&glock);
    snprintf(m, sizeof(m), "%d", mode);
    glog("capture%s %s", "", m);
    return OK;
}

EXPORT int cuStreamEndCapture(void *s, void **out)
{
    struct capture *c;
    struct fgraph *g;
    int rc = OK;

    pthread_mutex_lock(&glock);
    c = cap_of(s);
    if (!c || !c->origin) {
        pthread_mutex_unlock(&glock);
        return c ? CAPTURE_UNMATCHED : INVALID_VALUE;
    }
    g = c->g;
    for (int i = 0; i < MAX_CAPTURES; i++) {
        if (caps[i].stream && caps[i].g == g && &caps[i] != c) {
            rc = CAPTURE_UNJOINED; /* another stream joined and did not come back */
            caps[i].stream = NULL;
        }
    }
    if (c->status != 1 && rc == OK)
        rc = CAPTURE_INVALIDATED;
    c->stream = NULL;
    if (rc != OK)
        free_graph(g);
    pthread_mutex_unlock(&glock);
    *out = rc == OK ? g : NULL;
    return rc;
}

EXPORT int cuStreamIsCapturing(void *s, int *status)
{
    struct capture *c;
    pthread_mutex_lock(&glock);
    c = cap_of(s);
    *status = c ? c->status : 0;
    pthread_mutex_unlock(&glock);
    return OK;
}

EXPORT int cuStreamGetCaptureInfo(void *s, int *status, unsigned long long *id)
{
    struct capture *c = cap_of(s);
    *status = c ? c->status : 0;
    if (id && c)
        *id = c->id;
    return OK;
}

EXPORT int cuStreamGetCaptureInfo_v3(void *s, int *status, unsigned long long *id, void **graph,
                                     void *const **deps, const void **edges, size_t *n)
{
    struct capture *c = cap_of(s);
    *status = c ? c->status : 0;
    if (id)
        *id = c ? c->id : 0;
    if (graph)
        *graph = c ? c->g : NULL;
    if (deps)
        *deps = c && c->last ? (void *const *)&c->last : NULL;
    if (edges)
        *edges = NULL;
    if (n)
        *n = c && c->last ? 1 : 0;
    return OK;
}

EXPORT int cuStreamUpdateCaptureDependencies(void *s, void **deps, size_t n, unsigned flags)
{
    struct capture *c = cap_of(s);
    if (!c || flags > 1 || n > 1)
        return INVALID_VALUE;
    c->last = n ? deps[0] : NULL;
    return OK;
}

/* fakecuda.c's hooks: a kernel launched on a capturing stream becomes a node (1: taken); a
 * query of a capturing stream invalidates its capture (as the driver's does); an event recorded
 * in a capture, waited for by another stream, joins that stream into the capture; a capturing
 * stream that waits for an event recorded outside it breaks its capture's isolation. */
int fake_capture_kernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, void *s, const void *args, size_t len)
{
    struct capture *c;
    struct fnode *n = NULL;
    size_t size = len;
    void *extra[5] = {(void *)1, (void *)args, (void *)2, &size, NULL};
    struct kernel_params p = {f, gx, gy, gz, bx, by, bz, 0, NULL, extra, NULL, NULL};

    pthread_mutex_lock(&glock);
    c = cap_of(s);
    if (c && c->status == 1 &&
        (n = new_node(c->g, KERNEL, c->last ? (void *const *)&c->last : NULL, c->last ? 1 : 0)))
        c->last = n;
    pthread_mutex_unlock(&glock);
    if (n)
        set_kernel(n, &p);
    return c != NULL;
}

int fake_capture_query(void *s)
{
    struct capture *c = cap_of(s);
    if (!c)
        return 0;
    invalidate(c->g, "query");
    return CAPTURE_UNSUPPORTED;
}

void fake_capture_record(void *e, void *s)
{
    int slot = (int)(((uintptr_t)e) % 256);
    captured_events[slot] = cap_of(s) ? cap_of(s)->g : NULL;
}

int fake_capture_wait(void *s, void *e)
{
    int slot = (int)(((uintptr_t)e) % 256);
    struct fgraph *g = captured_events[slot];
    struct capture *c = cap_of(s);

    if (c && g != c->g) {
        invalidate(c->g, "isolation");
        return 905; /* CUDA_ERROR_STREAM_CAPTURE_ISOLATION */
    }
    if (!c && g) { /* joins */
        for (int i = 0; i < MAX_CAPTURES; i++) {
            if (!caps[i].stream) {
                caps[i] = (struct capture){s, g, 1, 0, 0, NULL};
                break;
            }
        }
    }
    return OK;
}

EXPORT int cuGraphInstantiateWithParams(void **out, void *h, struct instantiate_params *p)
{
    int rc;
    if (!p)
        return INVALID_VALUE;
    rc = cuGraphInstantiateWithFlags(out, h, p->flags);
    p->result_out = rc == OK ? 0 : 1;
    p->hErrNode_out = NULL;
    if (rc == OK && (p->flags & 2) && !p->hUploadStream)
        return INVALID_VALUE;
    return rc;
}

/* The description: the graph and its node count, as DOT. */
EXPORT int cuGraphDebugDotPrint(void *h, const char *path, unsigned flags)
{
    struct fgraph *g = graph_of(h);
    FILE *f;

    if (!g || !path)
        return INVALID_VALUE;
    f = fopen(path, "w");
    if (!f)
        return 999;
    fprintf(f, "digraph fake {\n  label=\"%d nodes, flags %u\"\n}\n", g->n, flags);
    fclose(f);
    return OK;
}

/* Begins a capture into an existing graph, after the given dependencies. */
EXPORT int cuStreamBeginCaptureToGraph(void *s, void *h, void *const *deps, const void *edges,
                                       size_t n, int mode)
{
    struct capture *c;
    char m[16];

    if (!s)
        return CAPTURE_UNSUPPORTED;
    if (edges || n > 1 || !graph_of(h))
        return INVALID_VALUE;
    pthread_mutex_lock(&glock);
    if (cap_of(s)) {
        pthread_mutex_unlock(&glock);
        return 900;
    }
    for (c = caps; c < caps + MAX_CAPTURES && c->stream; c++) {
    }
    if (c == caps + MAX_CAPTURES) {
        pthread_mutex_unlock(&glock);
        return 2;
    }
    *c = (struct capture){s, graph_of(h), 1, 1, next_capture_id++, n ? deps[0] : NULL};
    pthread_mutex_unlock(&glock);
    snprintf(m, sizeof(m), "%d", mode);
    glog("capture%s %s", "", m);
    return OK;
}

EXPORT int cuGraphExecMemcpyNodeSetParams(void *e, void *h, const struct memcpy3d *p, void *ctx)
{
    struct fnode *n = exec_node(exec_of(e), h);
    if (!n || n->type != MEMCPY || !valid_copy(p) || !ctx)
        return INVALID_VALUE;
    n->c = *p;
    return OK;
}

EXPORT int cuGraphKernelNodeGetAttribute(void *h, int id, void *v)
{
    struct fnode *n = node_of(h);
    if (!n || n->type != KERNEL || id < 0 || id >= 16 || !v)
        return INVALID_VALUE;
    memcpy(v, n->attrs[id], 64);
    return OK;
}

EXPORT int cuGraphKernelNodeSetAttribute(void *h, int id, const void *v)
{
    struct fnode *n = node_of(h);
    if (!n || n->type != KERNEL || id < 0 || id >= 16 || !v)
        return INVALID_VALUE;
    memcpy(n->attrs[id], v, 64);
    return OK;
}

/* ------------------------------------------------------------------ external semaphore nodes */

struct sem_node_params {
    void **sems;
    const void *params;
    unsigned n;
};

static int set_sems(struct fnode *n, int type, const struct sem_node_params *p)
{
    if (!n || n->type != type || !p || p->n > FAKE_SEMS || (p->n && (!p->sems || !p->params)))
        return INVALID_VALUE;
    for (unsigned i = 0; i < p->n; i++)
        if (!p->sems[i])
            return INVALID_VALUE;
    n->nsems = p->n;
    memcpy(n->sems, p->sems, p->n * sizeof(void *));
    memcpy(n->sem_params, p->params, (size_t)p->n * SEM_PARAMS);
    for (unsigned i = 0; i < p->n; i++) {
        char v[32];
        unsigned long long value;
        memcpy(&value, n->sem_params[i], sizeof(value)); /* params.fence.value first */
        snprintf(v, sizeof(v), " value %llu", value);
        glog(type == SEM_SIGNAL ? "semsignal %p%s" : "semwait %p%s", p->sems[i], v);
    }
    return OK;
}

static int add_sem_node(void **out, void *g, void *const *deps, size_t ndeps, int type,
                        const struct sem_node_params *p)
{
    int rc;
    ADD_NODE(type);
    pthread_mutex_lock(&glock);
    if ((rc = set_sems(n, type, p)) != OK)
        drop_node(n);
    pthread_mutex_unlock(&glock);
    return rc;
}

static int get_sems(void *h, int type, struct sem_node_params *p)
{
    struct fnode *n;
    int rc = OK;
    pthread_mutex_lock(&glock);
    n = node_of(h);
    if (!n || n->type != type || !p)
        rc = INVALID_VALUE;
    else
        *p = (struct sem_node_params){n->sems, n->sem_params, n->nsems};
    pthread_mutex_unlock(&glock);
    return rc;
}

static int node_set_sems(void *h, int type, const struct sem_node_params *p)
{
    int rc;
    pthread_mutex_lock(&glock);
    rc = set_sems(node_of(h), type, p);
    pthread_mutex_unlock(&glock);
    return rc;
}

static int exec_set_sems(void *e, void *h, int type, const struct sem_node_params *p)
{
    int rc;
    pthread_mutex_lock(&glock);
    rc = set_sems(exec_node(exec_of(e), h), type, p);
    pthread_mutex_unlock(&glock);
    return rc;
}

EXPORT int cuGraphAddExternalSemaphoresSignalNode(void **out, void *g, void *const *deps,
                                                  size_t ndeps, const struct sem_node_params *p)
{
    return add_sem_node(out, g, deps, ndeps, SEM_SIGNAL, p);
}

EXPORT int cuGraphAddExternalSemaphoresWaitNode(void **out, void *g, void *const *deps,
                                                size_t ndeps, const struct sem_node_params *p)
{
    return add_sem_node(out, g, deps, ndeps, SEM_WAIT, p);
}

EXPORT int cuGraphExternalSemaphoresSignalNodeGetParams(void *h, struct sem_node_params *p)
{
    return get_sems(h, SEM_SIGNAL, p);
}

EXPORT int cuGraphExternalSemaphoresWaitNodeGetParams(void *h, struct sem_node_params *p)
{
    return get_sems(h, SEM_WAIT, p);
}

EXPORT int cuGraphExternalSemaphoresSignalNodeSetParams(void *h, const struct sem_node_params *p)
{
    return node_set_sems(h, SEM_SIGNAL, p);
}

EXPORT int cuGraphExternalSemaphoresWaitNodeSetParams(void *h, const struct sem_node_params *p)
{
    return node_set_sems(h, SEM_WAIT, p);
}

EXPORT int cuGraphExecExternalSemaphoresSignalNodeSetParams(void *e, void *h,
                                                            const struct sem_node_params *p)
{
    return exec_set_sems(e, h, SEM_SIGNAL, p);
}

EXPORT int cuGraphExecExternalSemaphoresWaitNodeSetParams(void *e, void *h,
                                                          const struct sem_node_params *p)
{
    return exec_set_sems(e, h, SEM_WAIT, p);
}

/* ------------------------------------------------------------------ batch memory op nodes */

struct batch_node_params {
    void *ctx;
    unsigned count;
    void *ops;
    unsigned flags;
};

static int set_batch(struct fnode *n, const struct batch_node_params *p)
{
    if (!n || n->type != BATCH || !p || !p->ctx || !p->count || p->count > FAKE_OPS || !p->ops)
        return INVALID_VALUE;
    n->nops = p->count;
    n->ops_flags = p->flags;
    memcpy(n->ops, p->ops, (size_t)p->count * OP_BYTES);
    for (unsigned i = 0; i < p->count; i++) {
        unsigned long long addr;
        char v[32];
        memcpy(&addr, n->ops[i] + 8, sizeof(addr));
        snprintf(v, sizeof(v), " kind %d", (int)n->ops[i][0]);
        glog("batchop %p%s", (void *)(uintptr_t)addr, v);
    }
    return OK;
}

EXPORT int cuGraphAddBatchMemOpNode(void **out, void *g, void *const *deps, size_t ndeps,
                                    const struct batch_node_params *p)
{
    int rc;
    ADD_NODE(BATCH);
    pthread_mutex_lock(&glock);
    if ((rc = set_batch(n, p)) != OK)
        drop_node(n);
    pthread_mutex_unlock(&glock);
    return rc;
}

EXPORT int cuGraphBatchMemOpNodeGetParams(void *h, struct batch_node_params *p)
{
    struct fnode *n;
    int rc = OK;
    pthread_mutex_lock(&glock);
    n = node_of(h);
    if (!n || n->type != BATCH || !p)
        rc = INVALID_VALUE;
    else
        *p = (struct batch_node_params){NULL, n->nops, n->ops, n->ops_flags};
    pthread_mutex_unlock(&glock);
    return rc;
}

EXPORT int cuGraphBatchMemOpNodeSetParams(void *h, const struct batch_node_params *p)
{
    int rc;
    pthread_mutex_lock(&glock);
    rc = set_batch(node_of(h), p);
    pthread_mutex_unlock(&glock);
    return rc;
}

EXPORT int cuGraphExecBatchMemOpNodeSetParams(void *e, void *h, const struct batch_node_params *p)
{
    int rc;
    pthread_mutex_lock(&glock);
    rc = set_batch(exec_node(exec_of(e), h), p);
    pthread_mutex_unlock(&glock);
    return rc;
}

/* ------------------------------------------------------------------ host nodes */

/* CUDA_HOST_NODE_PARAMS */
struct host_params {
    void (*fn)(void *);
    void *data;
};

EXPORT int cuGraphAddHostNode(void **out, void *g, void *const *deps, size_t ndeps,
                              const struct host_params *p)
{
    if (!p || !p->fn)
        return INVALID_VALUE;
    ADD_NODE(HOST);
    n->host_fn = p->fn;
    n->host_data = p->data;
    glog("hostnode+ %p%s", n, NULL);
    return OK;
}

EXPORT int cuGraphHostNodeGetParams(void *h, struct host_params *p)
{
    struct fnode *n = node_of(h);
    if (!n || n->type != HOST || !p)
        return INVALID_VALUE;
    p->fn = n->host_fn;
    p->data = n->host_data;
    return OK;
}

EXPORT int cuGraphHostNodeSetParams(void *h, const struct host_params *p)
{
    struct fnode *n = node_of(h);
    if (!n || n->type != HOST || !p || !p->fn)
        return INVALID_VALUE;
    n->host_fn = p->fn;
    n->host_data = p->data;
    return OK;
}

EXPORT int cuGraphExecHostNodeSetParams(void *e, void *h, const struct host_params *p)
{
    struct fnode *n = exec_node(exec_of(e), h);
    if (!n || n->type != HOST || !p || !p->fn)
        return INVALID_VALUE;
    n->host_fn = p->fn;
    n->host_data = p->data;
    return OK;
}

/* On a capturing stream, a host node after the capture's last; otherwise run now (the double's
 * streams have finished their work when a call returns). */
EXPORT int cuLaunchHostFunc(void *s, void (*fn)(void *), void *data)
{
    fake_dma_flush(s);
    struct capture *c;
    struct fnode *n = NULL;

    if (!fn)
        return INVALID_VALUE;
    pthread_mutex_lock(&glock);
    c = cap_of(s);
    if (c && c->status == 1 &&
        (n = new_node(c->g, HOST, c->last ? (void *const *)&c->last : NULL, c->last ? 1 : 0))) {
        n->host_fn = fn;
        n->host_data = data;
        c->last = n;
    }
    pthread_mutex_unlock(&glock);
    if (c) {
        glog("hostfunc captured%s%s", "", NULL);
        return n ? OK : CAPTURE_INVALIDATED;
    }
    fn(data);
    return OK;
}

/* fake_graphmem.c's hooks: a new graph (a conditional node's body), a node of `type` in graph
 * g, and a node of `type` in the capture of stream s after its last one (NULL: not capturing). */
void *fake_graph_new(void)
{
    struct fgraph *g;
    pthread_mutex_lock(&glock);
    g = new_graph();
    pthread_mutex_unlock(&glock);
    return g;
}

void *fake_graph_add(void *g, int type, void *const *deps, size_t ndeps)
{
    struct fnode *n;
    pthread_mutex_lock(&glock);
    n = new_node(graph_of(g), type, deps, ndeps);
    pthread_mutex_unlock(&glock);
    return n;
}

void *fake_capture_add(void *s, int type);

/* fakecuda.c's 1D copies: on a capturing stream, a copy node (1: taken), as the driver makes. */
int fake_capture_copy(void *s, void *dst, const void *src, size_t bytes)
{
    struct fnode *n = fake_capture_add(s, MEMCPY);

    if (n) {
        memset(&n->c, 0, sizeof(n->c));
        n->c.stype = n->c.dtype = 2;
        n->c.sdev = (uint64_t)(uintptr_t)src;
        n->c.ddev = (uint64_t)(uintptr_t)dst;
        n->c.w = n->c.spitch = n->c.dpitch = bytes;
        n->c.h = n->c.d = n->c.sheight = n->c.dheight = 1;
    }
    return n != NULL;
}

void *fake_capture_add(void *s, int type)
{
    struct capture *c;
    struct fnode *n = NULL;

    pthread_mutex_lock(&glock);
    c = cap_of(s);
    if (c && c->status == 1 &&
        (n = new_node(c->g, type, c->last ? (void *const *)&c->last : NULL, c->last ? 1 : 0)))
        c->last = n;
    pthread_mutex_unlock(&glock);
    return n;
}
