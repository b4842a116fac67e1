/* SPDX-License-Identifier: MIT */
/* The driver test double's graph memory and conditional nodes (fake_graphs.c keeps the graphs
 * and nodes). An allocation node's memory is the double's device memory (host memory), made at
 * the node's creation, kept for the process (its address fixed, as the driver's). Every call
 * appends one line to FAKECUDA_GRAPHMEM_LOG: "alloc DPTR BYTES DEV NDESC", "free DPTR",
 * "handle H GRAPH VALUE FLAGS", "cond TYPE SIZE HANDLE", "capalloc DPTR", "capfree DPTR". */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define OK 0
#define INVALID_VALUE 1
#define ALLOC_NODE 10
#define FREE_NODE 11
#define COND_NODE 13
#define MAX 512

typedef unsigned long long dptr_t;
struct location {
    int type, id;
};
struct pool_props {
    int allocType, handleTypes;
    struct location location;
    void *win32;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
};
struct access_desc {
    struct location location;
    int flags;
};
struct alloc_params {
    struct pool_props props;
    const struct access_desc *descs;
    size_t ndescs, bytes;
    dptr_t dptr;
};
struct cond_params {
    unsigned long long handle;
    int type;
    unsigned size;
    void **bodies;
    void *ctx;
};
struct node_params {
    int type, reserved0[3];
    union {
        long long reserved1[29];
        struct cond_params cond;
    } u;
    long long reserved2;
};

void *fake_graph_new(void);
void *fake_graph_add(void *g, int type, void *const *deps, size_t ndeps);
void *fake_capture_add(void *s, int type);
int cuMemAlloc_v2(dptr_t *p, size_t bytes);

static struct {
    void *node;
    struct alloc_params p;
    struct access_desc descs[8];
    dptr_t free_dptr;
    void *bodies[64];
} recs[MAX];
static int nrecs;
static struct {
    unsigned long long h;
    void *graph;
} handles[MAX];
static int nhandles;
static unsigned long long next_handle = 0xc0de0001;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void glog(const char *fmt, unsigned long long a, unsigned long long b, unsigned long long c,
                 unsigned long long d)
{
    const char *log = getenv("FAKECUDA_GRAPHMEM_LOG");
    FILE *f = log ? fopen(log, "a") : NULL;

    if (f) {
        fprintf(f, fmt, a, b, c, d);
        fputc('\n', f);
        fclose(f);
    }
}

static int rec_of(void *node)
{
    for (int i = 0; i < nrecs; i++)
        if (recs[i].node == node)
            return i;
    return -1;
}

static int new_rec(void *node)
{
    int i;
    pthread_mutex_lock(&lock);
    i = nrecs < MAX ? nrecs++ : -1;
    if (i >= 0) {
        memset(&recs[i], 0, sizeof(recs[i]));
        recs[i].node = node;
    }
    pthread_mutex_unlock(&lock);
    return i;
}

EXPORT int cuGraphAddMemAllocNode(void **out, void *g, void *const *deps, size_t ndeps,
                                  struct alloc_params *p)
{
    void *n;
    int i;

    if (!out || !p || p->props.allocType != 1 || p->props.location.type != 1 || !p->bytes ||
        p->ndescs > 8 || (p->ndescs && !p->descs))
        return INVALID_VALUE;
    if (!(n = fake_graph_add(g, ALLOC_NODE, deps, ndeps)) || (i = new_rec(n)) < 0)
        return INVALID_VALUE;
    if (cuMemAlloc_v2(&p->dptr, p->bytes) != OK)
        return 2;
    recs[i].p = *p;
    if (p->ndescs) /* (descs may be NULL with none) */
        memcpy(recs[i].descs, p->descs, p->ndescs * sizeof(*p->descs));
    recs[i].p.descs = recs[i].descs;
    glog("alloc %llx %llu %llu %llu", p->dptr, p->bytes, (unsigned long long)p->props.location.id,
         p->ndescs);
    *out = n;
    return OK;
}

EXPORT int cuGraphMemAllocNodeGetParams(void *node, struct alloc_params *p)
{
    int i = rec_of(node);
    if (i < 0 || !p || !recs[i].p.bytes)
        return INVALID_VALUE;
    *p = recs[i].p;
    return OK;
}

EXPORT int cuGraphAddMemFreeNode(void **out, void *g, void *const *deps, size_t ndeps, dptr_t dptr)
{
    void *n;
    int i;

    if (!out || !dptr || !(n = fake_graph_add(g, FREE_NODE, deps, ndeps)) || (i = new_rec(n)) < 0)
        return INVALID_VALUE;
    recs[i].free_dptr = dptr;
    glog("free %llx%.0llu%.0llu%.0llu", dptr, 0, 0, 0);
    *out = n;
    return OK;
}

EXPORT int cuGraphMemFreeNodeGetParams(void *node, dptr_t *out)
{
    int i = rec_of(node);
    if (i < 0 || !out || !recs[i].free_dptr)
        return INVALID_VALUE;
    *out = recs[i].free_dptr;
    return OK;
}

EXPORT int cuGraphConditionalHandleCreate(unsigned long long *h, void *g, void *ctx, unsigned value,
                                          unsigned flags)
{
    (void)ctx;
    if (!h || !g || flags > 1)
        return INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (nhandles < MAX) {
        handles[nhandles].h = next_handle++;
        handles[nhandles].graph = g;
        *h = handles[nhandles++].h;
    }
    pthread_mutex_unlock(&lock);
    glog("handle %llx %llx %llu %llu", *h, (unsigned long long)(uintptr_t)g, value, flags);
    return OK;
}

/* Conditional nodes only (the double's other node kinds have their own entries). */
EXPORT int cuGraphAddNode(void **out, void *g, void *const *deps, size_t ndeps,
                          struct node_params *p)
{
    struct cond_params *c;
    int i, known = 0;
    void *n;

    if (!out || !p || p->type != COND_NODE)
        return 801;
    c = &p->u.cond;
    for (int k = 0; k < nhandles; k++)
        known |= handles[k].h == c->handle && handles[k].graph == g;
    if (!known || c->type < 0 || c->type > 2 || c->size == 0 || c->size > 64 || !c->ctx)
        return INVALID_VALUE;
    if (!(n = fake_graph_add(g, COND_NODE, deps, ndeps)) || (i = new_rec(n)) < 0)
        return INVALID_VALUE;
    for (unsigned b = 0; b < c->size; b++)
        recs[i].bodies[b] = fake_graph_new();
    c->bodies = recs[i].bodies;
    glog("cond %llu %llu %llx%.0llu", (unsigned long long)c->type, c->size, c->handle, 0);
    *out = n;
    return OK;
}

/* fake_memory.c's hooks: stream-ordered allocation and free on a capturing stream become nodes
 * (1: captured). */
int fake_capture_alloc(void *s, dptr_t p, size_t bytes)
{
    void *n = fake_capture_add(s, ALLOC_NODE);
    int i;

    if (!n || (i = new_rec(n)) < 0)
        return 0;
    recs[i].p.bytes = bytes;
    recs[i].p.dptr = p;
    recs[i].p.props.allocType = recs[i].p.props.location.type = 1;
    glog("capalloc %llx%.0llu%.0llu%.0llu", p, 0, 0, 0);
    return 1;
}

int fake_capture_free(void *s, dptr_t p)
{
    void *n = fake_capture_add(s, FREE_NODE);
    int i;

    if (!n || (i = new_rec(n)) < 0)
        return 0;
    recs[i].free_dptr = p;
    glog("capfree %llx%.0llu%.0llu%.0llu", p, 0, 0, 0);
    return 1;
}
