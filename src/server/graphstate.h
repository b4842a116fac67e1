/* SPDX-License-Identifier: MIT */
/* The graph families' shared state and helpers (graphstate.c), and the limits they share. */
#ifndef OM_SERVER_GRAPHSTATE_H
#define OM_SERVER_GRAPHSTATE_H

#include "exec.h"

#define CAPTURE_NONE 0
#define MAX_DEPS 4096            /* dependencies of one new node (as the table's rows) */
#define MAX_LIST 8192            /* nodes (or edges) of one answer */
#define NODE_TYPE_KERNEL 0       /* CU_GRAPH_NODE_TYPE_KERNEL */
#define NODE_TYPE_GRAPH 4        /* CU_GRAPH_NODE_TYPE_GRAPH */
#define NODE_TYPE_CONDITIONAL 13 /* CU_GRAPH_NODE_TYPE_CONDITIONAL */
#define MAX_NESTING 16           /* child graphs within child graphs the server follows */

/*
 * The lists of nodes (cuGraphGetNodes, cuGraphGetRootNodes, a node's dependencies or
 * dependents, a graph's edges). Request: the graph or node, the capacity the client offers
 * (its array may be NULL: then only the count is asked). Answer: the count the driver wrote,
 * then the nodes (for edges: the `from` array, then the `to` array). Every node answered
 * becomes the client's.
 */
enum list_kind { LIST_NODES, LIST_ROOTS, LIST_DEPS, LIST_DEPENDENTS, LIST_EDGES };
#define COND_SWITCH_MAX 64 /* bodies of a switch node the server accepts */

struct gm_hold {
    uint64_t base, size;
    uint64_t holder; /* a graph or an executable graph */
    uint64_t node;   /* the allocation node, for a graph holder (0: unknown) */
    bool inst;       /* an executable graph was made with it */
};
struct gm_cond {
    uint64_t handle, graph; /* a conditional handle the client made, for that graph */
};
struct gm_condnode {
    uint64_t node;
    unsigned n;
    unsigned depth; /* its bodies' nesting: 1 in a top-level graph, 2 in a body's body… */
    uint64_t body[COND_SWITCH_MAX]; /* the node's body graphs (childgraph kind) */
};
struct om_graphmem {
    struct gm_hold *h;
    size_t nh, caph;
    struct gm_cond *c;
    size_t nc, capc;
    struct gm_condnode *cn;
    size_t ncn, capcn;
};

/* Nodes the driver answered become the client's; what a destroyed node or graph (a child graph's,
 * to MAX_NESTING) takes with it; a list of nodes answered (its request read here); a new node's
 * dependencies, each the client's; the context a node runs in (the server's). */
CUresult om_graph_own_all(struct call *c, enum om_handle_kind kind, const CUgraphNode *v, size_t n);
void om_graph_forget_node(struct session *s, CUgraphNode n, int depth);
void om_graph_forget_graph(struct session *s, CUgraph g, int depth);
CUresult om_graph_node_list(struct call *c, enum list_kind kind);
/* Executable graphs whose kernels may print (kernel printf's turns, output.c): whether g's may,
 * one made from g noted as printing or not, one noted as printing (a kernel or child graph
 * replaced). */
bool om_graph_may_print(struct session *s, CUgraph g);
void om_graph_exec_note(struct session *s, uint64_t exec, CUgraph g);
void om_graph_exec_prints(struct session *s, uint64_t exec);
CUresult om_graph_read_deps(struct call *c, CUgraphNode *deps, uint64_t *n);
CUcontext om_graph_server_context(void);
/* Graph allocations (the comment above om_graphmem_of in graphstate.c says who holds them): the
 * session's record (NULL: out of memory), growing one of its arrays, whether a base is held, room
 * for n more, one added, released by a holder, forgotten with a holder or node, copied from a
 * graph to an executable graph made from it. */
struct om_graphmem *om_graphmem_of(struct session *s);
bool om_graphmem_grow(void **v, size_t *cap, size_t n, size_t el);
bool om_graphmem_held(struct session *s, uint64_t base);
CUresult om_graphmem_room(struct session *s, size_t n);
CUresult om_graphmem_add(struct session *s, uint64_t base, uint64_t size, uint64_t holder,
                         uint64_t node, bool inst, uint64_t pool, int dev);
void om_graphmem_release(struct session *s, uint64_t base, bool inst);
void om_graphmem_forget(struct session *s, uint64_t holder, uint64_t node);
CUresult om_graphmem_copy(struct session *s, uint64_t g, uint64_t e);
/* The graph a stream captures into (0: none), and the node it captured last (*last). */
uint64_t om_graph_capture_graph(CUstream st, uint64_t *last);
/* Conditional handles and nodes forgotten with their graph or node. */
void om_cond_forget_graph(struct session *s, uint64_t graph);
void om_cond_forget_node(struct session *s, uint64_t node, int depth);

#endif
