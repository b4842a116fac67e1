/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of graphs and executable graphs (api/remote/graphs.tsv). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../graphstate.h"

#define MAX_DOT (256u * 1024u) /* bytes of one DOT description */
#define OS_ERROR 304           /* CUDA_ERROR_OPERATING_SYSTEM */

/* cuGraphDestroy (generated): the client's own graph only (a child graph node's graph goes with
 * its node); what the session keeps of its nodes is forgotten first. */
CUresult om_release_graph(struct call *c, uint64_t h)
{
    if (!om_handles_has(&c->s->own[OM_H_GRAPH], h))
        return CUDA_ERROR_INVALID_HANDLE;
    om_graph_forget_graph(c->s, (CUgraph)(uintptr_t)h, 0);
    return CUDA_SUCCESS;
}

CUresult om_x_cuGraphGetEdges(struct call *c)
{
    return om_graph_node_list(c, LIST_EDGES);
}

/* ------------------------------------------------------------------ launch */

CUresult om_x_cuGraphLaunch(struct call *c)
{
    uint64_t exec = om_get_u64(&c->in), sh = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    CUstream st;

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_arg_handle(c, OM_H_EXEC, exec, false)) != CUDA_SUCCESS)
        return rc;
    st = om_launch_stream(c, sh, &rc); /* under an SM share, its lane's stream (share.c) */
    if (!st)
        return rc;
    /* A graph whose kernels may print takes the print turn as a printing launch does. */
    bool prints = om_handles_has(&c->s->print_execs, exec) && !om_stream_capturing(c->s, st);
    om_output_launched(c->s);
    if (prints)
        om_output_print_begin(c->s);
    rc =
        ((CUresult(*)(CUgraphExec, CUstream))REAL(cuGraphLaunch))((CUgraphExec)(uintptr_t)exec, st);
    if (prints)
        om_output_print_end(c->s, st, rc == CUDA_SUCCESS);
    /* Scheduled like a kernel: the executable graph is what the scheduler learns the length of. */
    if (rc == CUDA_SUCCESS && !om_stream_capturing(c->s, st)) {
        om_sched_launched(c->s, st, exec);
        om_account_launch(c->s, c->s->call_stream, true); /* account.c: graphs, busy time */
    }
    return rc;
}

/* An executable graph made from g becomes the client's, holding g's graph allocations. */
static CUresult instantiated(struct call *c, uint64_t g, CUgraphExec e)
{
    uint64_t eh = (uint64_t)(uintptr_t)e;
    CUresult rc = om_own_add(c, OM_H_EXEC, eh);

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = om_graphmem_copy(c->s, g, eh)) != CUDA_SUCCESS) { /* not recorded: it goes */
        om_graphmem_forget(c->s, eh, 0);
        ((CUresult(*)(CUgraphExec))REAL(cuGraphExecDestroy))(e);
        om_own_drop(c->s, OM_H_EXEC, eh);
        return rc;
    }
    om_graph_exec_note(c->s, eh, (CUgraph)(uintptr_t)g); /* its kernels may print? */
    return rc;
}

/* An update takes the graph's kernels: whether the executable graph may print is that graph's. */
CUresult om_hook_cuGraphExecUpdate_v2(struct call *c, CUgraphExec e, CUgraph g,
                                      CUgraphExecUpdateResultInfo *info)
{
    CUresult rc = ((CUresult(*)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *))REAL(
        cuGraphExecUpdate_v2))(e, g, info);

    if (rc == CUDA_SUCCESS)
        om_graph_exec_note(c->s, (uint64_t)(uintptr_t)e, g);
    return rc;
}

/* Answer: the executable graph, the node that failed (if the client's), the result. */
CUresult om_x_cuGraphInstantiateWithParams(struct call *c)
{
    uint64_t g = om_get_u64(&c->in), flags = om_get_u64(&c->in), sh = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    CUDA_GRAPH_INSTANTIATE_PARAMS p;
    CUgraphExec e = NULL;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (flags & ~(uint64_t)0xF)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = om_arg_handle(c, OM_H_GRAPH, g, false)) != CUDA_SUCCESS)
        return rc;
    if ((rc = om_own_room(c->s, OM_H_EXEC)) != CUDA_SUCCESS)
        return rc;
    memset(&p, 0, sizeof(p));
    p.flags = flags;
    if (flags & 2) { /* CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD: on the client's stream */
        p.hUploadStream = om_arg_stream(c, sh, true, &rc);
        if (!p.hUploadStream)
            return rc;
    }
    rc = ((CUresult(*)(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *))REAL(
        cuGraphInstantiateWithParams))(&e, (CUgraph)(uintptr_t)g, &p);
    if (rc == CUDA_SUCCESS && (rc = instantiated(c, g, e)) != CUDA_SUCCESS)
        return rc;
    if (rc == CUDA_SUCCESS) { /* a failure's answer does not travel: the client says why */
        om_put_u64(&c->out, (uint64_t)(uintptr_t)e);
        om_put_u64(&c->out, (uint64_t)(uintptr_t)p.hErrNode_out);
        om_put_u64(&c->out, (uint64_t)(int64_t)p.result_out);
    }
    return rc;
}

/* The driver writes the description into a memory file of the server (by its /proc path);
 * the client writes the text to its own path. */
CUresult om_x_cuGraphDebugDotPrint(struct call *c)
{
    uint64_t g = om_get_u64(&c->in), flags = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    char path[64];
    char *text = NULL;
    off_t len;
    int fd;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (flags & ~(uint64_t)0xFFFF)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = om_arg_handle(c, OM_H_GRAPH, g, false)) != CUDA_SUCCESS)
        return rc;
    fd = memfd_create("openmps-dot", MFD_CLOEXEC);
    if (fd < 0)
        return OS_ERROR;
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    rc = ((CUresult(*)(CUgraph, const char *, unsigned))REAL(cuGraphDebugDotPrint))(
        (CUgraph)(uintptr_t)g, path, (unsigned)flags);
    len = rc == CUDA_SUCCESS ? lseek(fd, 0, SEEK_END) : 0;
    if (rc == CUDA_SUCCESS && (len < 0 || len > (off_t)MAX_DOT)) {
        client_err(c->s, "client %d: a graph description of more than %u bytes is not carried",
                   (int)c->s->pid, MAX_DOT);
        rc = CUDA_ERROR_NOT_SUPPORTED;
    }
    if (rc == CUDA_SUCCESS && len && !(text = malloc((size_t)len)))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS && len && pread(fd, text, (size_t)len, 0) != len)
        rc = OS_ERROR;
    if (rc == CUDA_SUCCESS)
        om_put_bytes(&c->out, text, (size_t)len);
    free(text);
    close(fd);
    return rc;
}

CUresult om_x_cuGraphInstantiateWithFlags(struct call *c)
{
    uint64_t g = om_get_u64(&c->in), flags = om_get_u64(&c->in);
    CUgraphExec e = NULL;
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS)
        rc = om_own_room(c->s, OM_H_EXEC);
    if (rc == CUDA_SUCCESS)
        rc = om_arg_handle(c, OM_H_GRAPH, g, false);
    if (rc == CUDA_SUCCESS && (flags & ~(uint64_t)0xF))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = ((CUresult(*)(CUgraphExec *, CUgraph, unsigned long long))REAL(
        cuGraphInstantiateWithFlags))(&e, (CUgraph)(uintptr_t)g, flags);
    if (rc == CUDA_SUCCESS && (rc = instantiated(c, g, e)) == CUDA_SUCCESS)
        om_put_u64(&c->out, (uint64_t)(uintptr_t)e);
    return rc;
}

/* cuGraphExecDestroy (generated): its graph allocations are forgotten before the driver may
 * reuse the addresses. */
CUresult om_release_exec(struct call *c, uint64_t e)
{
    om_graphmem_forget(c->s, e, 0);
    om_handles_remove(&c->s->print_execs, e);
    return CUDA_SUCCESS;
}
