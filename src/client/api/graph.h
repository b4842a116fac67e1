/* SPDX-License-Identifier: MIT */
/* What the graph families' files (api/graphs.c, nodes.c, capture.c, graphmem.c, hostnodes.c)
 * share: the server's limits and the marshalling helpers defined in api/graphs.c (and one of
 * api/nodes.c). */
#ifndef OM_CLIENT_GRAPH_H
#define OM_CLIENT_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../remote.h"

#define MAX_DEPS 4096      /* dependencies of one new node (the server's limit) */
#define MAX_LIST 8192      /* nodes or edges of one answer (the server's limit) */
#define ARGS_MAX 32768     /* a kernel's argument bytes */
#define COND_SWITCH_MAX 64 /* bodies of a switch node (the server's limit) */

/* Edge data all default (the only edges carried). */
bool om_graph_edges_plain(const CUgraphEdgeData *e, size_t n);
/* A list of nodes (or, with `to`, of edges) answered by the server for handle h. */
CUresult om_graph_node_list(int index, uint64_t h, CUgraphNode *from, CUgraphNode *to,
                            size_t *count);
/* A _v2 list's edge data after its first version's call: every edge a default one. */
CUresult om_graph_plain_edges(CUresult rc, CUgraphEdgeData *edges, const CUgraphNode *nodes,
                              const size_t *n);
/* A new node's dependencies into the request; the call that makes a node, its handle in *node. */
CUresult om_graph_put_deps(struct om_wbuf *req, const CUgraphNode *deps, size_t n);
CUresult om_graph_new_node(int index, const struct om_wbuf *req, CUgraphNode *node);
/* api/nodes.c: a copy of bytes answered for node, kept until the node is destroyed (what the
 * driver answers through a pointer into memory it keeps). NULL: no memory. */
const uint8_t *om_graph_node_bytes(CUgraphNode node, const void *bytes, size_t len);

/* api/nodes.c: which sides of a copy are pageable host memory (PG_SRC, PG_DST; 0 also for
 * parameters it refuses). */
#define PG_SRC 1u
#define PG_DST 2u
unsigned om_graph_pageable_sides(const CUDA_MEMCPY3D *p);
/* api/pagecopy.c: copy nodes of pageable host memory (child graph nodes the program sees as
 * copy nodes). *handled false: node is not one of them. */
CUresult om_pgcopy_add(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                       const CUDA_MEMCPY3D *p, CUcontext ctx, unsigned pageable);
CUresult om_pgcopy_set(CUgraphNode node, const CUDA_MEMCPY3D *p, unsigned pageable, bool *handled);
CUresult om_pgcopy_exec_set(CUgraphExec e, CUgraphNode node, const CUDA_MEMCPY3D *p, CUcontext ctx,
                            unsigned pageable, bool *handled);
bool om_pgcopy_params(CUgraphNode node, CUDA_MEMCPY3D *p);
bool om_pgcopy_is(CUgraphNode node);
void om_pgcopy_forget(CUgraphNode node, CUgraph g);
/* A copy of pageable memory on a capturing stream: a record held by the capture's graph g, its
 * staging buffer and the argument of the host functions that fill it or empty it. */
CUresult om_pgcopy_captured(const CUDA_MEMCPY3D *p, unsigned pageable, CUgraph g, void **staging,
                            void **arg);
void om_pgcopy_in(void *arg);
void om_pgcopy_out(void *arg);

#endif
