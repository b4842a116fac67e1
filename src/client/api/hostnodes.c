/* SPDX-License-Identifier: MIT */
/*
 * The client's side of host nodes, captured host functions and user objects
 * (api/remote/hostnodes.tsv; docs/architecture.md, "Host nodes and user objects").
 *
 * Host functions run here, in the program: the server's host nodes call a trampoline that
 * writes the function and argument into the session's host-callback page
 * (src/common/hostcb.h) and waits; this process's callback thread, started when the server
 * sends the page (after the first call that made a host node), runs fn(data) and answers.
 *
 * User objects live here only: a reference count and the program's destructor. A graph's
 * references are kept per graph handle; cloning and instantiating copy them, destroying the
 * graph releases them (the graphs family, api/graphs.c, tells: om_uobj_*). An executable graph's
 * are released when it is destroyed, after the work it launched: the streams it was last launched
 * into (up to MAX_STREAMS, else every stream of the process) are waited for in cuGraphExecDestroy,
 * which the driver itself does not do.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../common/gen/entries.h"
#include "../../common/hostcb.h"
#include "../../common/msg.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "graph.h"
#include "../shim.h"
#include "../gen/calls.h"

#define MAX_STREAMS 8 /* streams remembered per executable graph holding user objects */
#define STREAM_CAPTURE_UNSUPPORTED 900
#define USER_OBJECT_NO_DESTRUCTOR_SYNC 1
#define GRAPH_USER_OBJECT_MOVE 1
#define UOBJ_MAGIC 0x55534f42u

/* ------------------------------------------------------------------ the callback channel */

static pthread_mutex_t chan_lock = PTHREAD_MUTEX_INITIALIZER;
static struct om_hostcb_area *area; /* __atomic once set: the channel is up */

static long futex(uint32_t *word, int op, uint32_t val)
{
    return syscall(SYS_futex, word, op, val, NULL, NULL, 0);
}

static void *callback_main(void *arg)
{
    struct om_hostcb_area *a = arg;
    uint32_t seen = __atomic_load_n(&a->done, __ATOMIC_ACQUIRE);

    for (;;) {
        uint32_t r = __atomic_load_n(&a->req, __ATOMIC_ACQUIRE);
        if (r == seen) {
            futex(&a->req, FUTEX_WAIT, r);
            continue;
        }
        ((void (*)(void *))(uintptr_t)a->fn)((void *)(uintptr_t)a->data);
        seen = r;
        __atomic_store_n(&a->done, r, __ATOMIC_RELEASE);
        futex(&a->done, FUTEX_WAKE, INT_MAX);
    }
    return NULL;
}

/* Maps the page the server sent and starts the thread that serves it (chan_lock held). */
static CUresult channel_up(int fd)
{
    struct om_hostcb_area *a;
    pthread_attr_t attr;
    pthread_t t;
    sigset_t all, old;
    int rc;

    a = mmap(NULL, OM_HOSTCB_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (a == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (a->magic != OM_HOSTCB_MAGIC) {
        munmap(a, OM_HOSTCB_BYTES);
        return CUDA_ERROR_UNKNOWN;
    }
    /* The program's signals go to its own threads, not to this one. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &attr, callback_main, a);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        munmap(a, OM_HOSTCB_BYTES);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    __atomic_store_n(&area, a, __ATOMIC_RELEASE);
    return CUDA_SUCCESS;
}

/*
 * A call that may make a host node: its request ends with whether this process still needs the
 * channel; its answer (two words, or one word 0 when `short_ok`: nothing made) ends with whether
 * the channel's descriptor follows it on the socket (then read at once, the ring held, as
 * pinned memory's is).
 */
static CUresult host_call(int index, struct om_wbuf *req, uint64_t *reply, bool short_ok)
{
    const size_t words = 2;
    uint32_t got = 0;
    CUresult rc;
    bool want = !__atomic_load_n(&area, __ATOMIC_ACQUIRE);

    if (!want) {
        om_put_u64(req, 0);
        rc = om_rcall(index, req, reply, words * 8, &got);
        if (rc == CUDA_SUCCESS && got != words * 8 && !(short_ok && got == 8 && !reply[0]))
            rc = CUDA_ERROR_UNKNOWN;
        return rc;
    }
    pthread_mutex_lock(&chan_lock);
    want = !area;
    om_put_u64(req, want ? 1 : 0);
    om_ring_lock();
    rc = om_rcall_locked(index, req, reply, words * 8, &got);
    if (rc == CUDA_SUCCESS && got != words * 8 && !(short_ok && got == 8 && !reply[0]))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS && got == words * 8 && reply[words - 1]) {
        int fd = om_recv_fd_locked();
        if (fd < 0)
            rc = CUDA_ERROR_UNKNOWN;
        om_ring_unlock();
        if (rc == CUDA_SUCCESS)
            rc = area ? (close(fd), CUDA_SUCCESS) : channel_up(fd);
    } else {
        om_ring_unlock();
    }
    pthread_mutex_unlock(&chan_lock);
    return rc;
}

/* ------------------------------------------------------------------ host nodes */

CUresult om_r_cuGraphAddHostNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                                 const CUDA_HOST_NODE_PARAMS *p)
{
    uint64_t reply[2] = {0};
    uint8_t *buf;
    CUresult rc;

    if (!node || !p || !p->fn || n > MAX_DEPS || (n && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    if (!(buf = malloc(48 + n * 8)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct om_wbuf req = {.p = buf, .cap = 48 + n * 8};
    om_put_u64(&req, (uint64_t)(uintptr_t)g);
    om_put_u64(&req, n);
    om_put_bytes(&req, deps, n * sizeof(*deps));
    om_put_u64(&req, (uint64_t)(uintptr_t)p->fn);
    om_put_u64(&req, (uint64_t)(uintptr_t)p->userData);
    rc = host_call(OM_IDX_cuGraphAddHostNode, &req, reply, false);
    free(buf);
    if (rc == CUDA_SUCCESS)
        *node = (CUgraphNode)(uintptr_t)reply[0];
    else if (reply[0]) /* made, but the channel could not be set up here: no node to hang on */
        OM_CALL(cuGraphDestroyNode)((CUgraphNode)(uintptr_t)reply[0]);
    return rc;
}

CUresult om_r_cuGraphHostNodeGetParams(CUgraphNode node, CUDA_HOST_NODE_PARAMS *p)
{
    uint64_t reply[2];
    uint32_t got = 0;
    CUresult rc;
    REQ(req, 8);

    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)node);
    rc = om_rcall(OM_IDX_cuGraphHostNodeGetParams, &req, reply, sizeof(reply), &got);
    if (rc == CUDA_SUCCESS && got != sizeof(reply))
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS) {
        p->fn = (void (*)(void *))(uintptr_t)reply[0];
        p->userData = (void *)(uintptr_t)reply[1];
    }
    return rc;
}

CUresult om_r_cuGraphHostNodeSetParams(CUgraphNode node, const CUDA_HOST_NODE_PARAMS *p)
{
    REQ(req, 24);

    if (!p || !p->fn)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)node);
    om_put_u64(&req, (uint64_t)(uintptr_t)p->fn);
    om_put_u64(&req, (uint64_t)(uintptr_t)p->userData);
    return om_rcall(OM_IDX_cuGraphHostNodeSetParams, &req, NULL, 0, NULL);
}

CUresult om_r_cuGraphExecHostNodeSetParams(CUgraphExec e, CUgraphNode node,
                                           const CUDA_HOST_NODE_PARAMS *p)
{
    REQ(req, 32);

    if (!p || !p->fn)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)e);
    om_put_u64(&req, (uint64_t)(uintptr_t)node);
    om_put_u64(&req, (uint64_t)(uintptr_t)p->fn);
    om_put_u64(&req, (uint64_t)(uintptr_t)p->userData);
    return om_rcall(OM_IDX_cuGraphExecHostNodeSetParams, &req, NULL, 0, NULL);
}

/* ------------------------------------------------------------------ host functions in capture */

/* Captures this process began and has not seen end: while none is open, no stream of it can be
 * capturing and a host function needs no question to the server. */
static int open_captures;

void om_capture_begun(CUresult rc)
{
    if (rc == CUDA_SUCCESS)
        __atomic_add_fetch(&open_captures, 1, __ATOMIC_ACQ_REL);
}

bool om_capture_none(void)
{
    return !__atomic_load_n(&open_captures, __ATOMIC_ACQUIRE);
}

/* Ended: a graph, or an invalidated (901) or unjoined (904) capture; any other error leaves the
 * count (a stale count costs a question, never a wrong answer). */
void om_capture_ended(CUresult rc)
{
    int n = __atomic_load_n(&open_captures, __ATOMIC_ACQUIRE);

    if ((rc == CUDA_SUCCESS || rc == 901 || rc == 904) && n > 0)
        __atomic_compare_exchange_n(&open_captures, &n, n - 1, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE);
}

/* On a capturing stream the host function becomes a host node of the capture (*captured);
 * otherwise nothing is done. */
CUresult om_hostfunc_capture(CUstream s, void (*fn)(void *), void *data, bool *captured)
{
    uint64_t reply[2] = {0};
    CUresult rc;
    REQ(req, 32);

    *captured = false;
    if (!__atomic_load_n(&open_captures, __ATOMIC_ACQUIRE))
        return CUDA_SUCCESS;
    om_put_u64(&req, (uint64_t)(uintptr_t)s);
    om_put_u64(&req, (uint64_t)(uintptr_t)fn);
    om_put_u64(&req, (uint64_t)(uintptr_t)data);
    rc = host_call(OM_IDX_cuLaunchHostFunc, &req, reply, true);
    *captured = rc == CUDA_SUCCESS && reply[0];
    return rc;
}

/* cuStreamAddCallback on a capturing stream: refused, as the driver refuses it. The default
 * streams are asked by om_capture_query_stream: beside a blocking stream's capture the legacy
 * stream's callback runs (natively refused with STREAM_CAPTURE_IMPLICIT; docs/compatibility.md),
 * a _ptsz form's NULL cannot be told from it. */
CUresult om_callback_capture_check(CUstream s)
{
    int status = 0;

    if (!__atomic_load_n(&open_captures, __ATOMIC_ACQUIRE))
        return CUDA_SUCCESS;
    if (((CUresult(*)(CUstream, int *))om_remote_entry(OM_IDX_cuStreamIsCapturing))(
            om_capture_query_stream(s), &status) == CUDA_SUCCESS &&
        status != 0)
        return STREAM_CAPTURE_UNSUPPORTED;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ user objects */

struct uobj {
    uint32_t magic;
    unsigned refs;
    void *ptr;
    void (*destroy)(void *);
};

struct uref {
    struct uobj *o;
    unsigned n;
};

/* The references a graph or an executable graph holds. */
struct holder {
    uint64_t h;
    bool exec;
    struct uref *refs;
    size_t nrefs;
    CUstream streams[MAX_STREAMS]; /* an executable graph's last launches */
    int nstreams;
    bool all_streams;
};

static pthread_mutex_t uobj_lock = PTHREAD_MUTEX_INITIALIZER;
static struct holder *holders;
static size_t nholders, holders_cap;

static bool uobj_ok(const struct uobj *o)
{
    return o && o->magic == UOBJ_MAGIC && o->refs > 0;
}

/* Drops n references (uobj_lock held); true: the last went (the caller destroys it unlocked). */
static bool drop_refs(struct uobj *o, unsigned n)
{
    o->refs -= n;
    if (o->refs)
        return false;
    o->magic = 0;
    return true;
}

static void destroy_uobj(struct uobj *o)
{
    o->destroy(o->ptr);
    free(o);
}

static struct holder *holder_of(uint64_t h, bool exec, bool make)
{
    for (size_t i = 0; i < nholders; i++)
        if (holders[i].h == h && holders[i].exec == exec)
            return &holders[i];
    if (!make)
        return NULL;
    if (nholders == holders_cap) {
        size_t cap = holders_cap ? holders_cap * 2 : 16;
        struct holder *v = realloc(holders, cap * sizeof(*v));
        if (!v)
            return NULL;
        holders = v;
        holders_cap = cap;
    }
    memset(&holders[nholders], 0, sizeof(holders[nholders]));
    holders[nholders].h = h;
    holders[nholders].exec = exec;
    return &holders[nholders++];
}

static int holder_add(struct holder *hd, struct uobj *o, unsigned n)
{
    struct uref *v;

    for (size_t i = 0; i < hd->nrefs; i++)
        if (hd->refs[i].o == o) {
            hd->refs[i].n += n;
            return 0;
        }
    if (!(v = realloc(hd->refs, (hd->nrefs + 1) * sizeof(*v))))
        return -1;
    hd->refs = v;
    hd->refs[hd->nrefs++] = (struct uref){o, n};
    return 0;
}

CUresult om_r_cuUserObjectCreate(CUuserObject *out, void *ptr, CUhostFn destroy, unsigned refs,
                                 unsigned flags)
{
    struct uobj *o;

    if (!out || !destroy || refs == 0 || refs > INT_MAX || flags != USER_OBJECT_NO_DESTRUCTOR_SYNC)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(o = malloc(sizeof(*o))))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *o = (struct uobj){UOBJ_MAGIC, refs, ptr, destroy};
    *out = (CUuserObject)(void *)o;
    return CUDA_SUCCESS;
}

CUresult om_r_cuUserObjectRetain(CUuserObject obj, unsigned count)
{
    struct uobj *o = (struct uobj *)(void *)obj;
    CUresult rc = CUDA_SUCCESS;

    if (count == 0 || count > INT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&uobj_lock);
    if (!uobj_ok(o) || o->refs > UINT_MAX - count)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        o->refs += count;
    pthread_mutex_unlock(&uobj_lock);
    return rc;
}

CUresult om_r_cuUserObjectRelease(CUuserObject obj, unsigned count)
{
    struct uobj *o = (struct uobj *)(void *)obj;
    CUresult rc = CUDA_SUCCESS;
    bool last = false;

    if (count == 0 || count > INT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&uobj_lock);
    if (!uobj_ok(o) || o->refs < count)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        last = drop_refs(o, count);
    pthread_mutex_unlock(&uobj_lock);
    if (last)
        destroy_uobj(o);
    return rc;
}

/* The graph is not checked with the server: a capture's graph (cuStreamGetCaptureInfo) is not
 * the client's there until the capture ends, and its references carry over to the graph the
 * capture ends with (the same handle). */
CUresult om_r_cuGraphRetainUserObject(CUgraph g, CUuserObject obj, unsigned count, unsigned flags)
{
    struct uobj *o = (struct uobj *)(void *)obj;
    struct holder *hd;
    CUresult rc = CUDA_SUCCESS;

    if (!g || count == 0 || count > INT_MAX || (flags & ~(unsigned)GRAPH_USER_OBJECT_MOVE))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&uobj_lock);
    if (!uobj_ok(o) ||
        ((flags & GRAPH_USER_OBJECT_MOVE) ? o->refs < count : o->refs > UINT_MAX - count))
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (!(hd = holder_of((uint64_t)(uintptr_t)g, false, true)) || holder_add(hd, o, count))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    else if (!(flags & GRAPH_USER_OBJECT_MOVE))
        o->refs += count; /* new references; moved ones were the caller's */
    pthread_mutex_unlock(&uobj_lock);
    return rc;
}

CUresult om_r_cuGraphReleaseUserObject(CUgraph g, CUuserObject obj, unsigned count)
{
    struct uobj *o = (struct uobj *)(void *)obj;
    struct holder *hd;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    bool last = false;

    if (!g || count == 0 || count > INT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&uobj_lock);
    hd = uobj_ok(o) ? holder_of((uint64_t)(uintptr_t)g, false, false) : NULL;
    for (size_t i = 0; hd && i < hd->nrefs; i++) {
        if (hd->refs[i].o != o || hd->refs[i].n < count)
            continue;
        hd->refs[i].n -= count;
        if (!hd->refs[i].n)
            hd->refs[i] = hd->refs[--hd->nrefs];
        last = drop_refs(o, count);
        rc = CUDA_SUCCESS;
        break;
    }
    pthread_mutex_unlock(&uobj_lock);
    if (last)
        destroy_uobj(o);
    return rc;
}

/* Removes a holder; its references are released (the objects whose last went destroyed). */
static void holder_drop(uint64_t h, bool exec)
{
    struct uobj **dead = NULL;
    size_t ndead = 0;
    struct holder *hd;

    pthread_mutex_lock(&uobj_lock);
    hd = holder_of(h, exec, false);
    if (hd) {
        dead = calloc(hd->nrefs + 1, sizeof(*dead));
        for (size_t i = 0; i < hd->nrefs; i++)
            if (drop_refs(hd->refs[i].o, hd->refs[i].n) && dead)
                dead[ndead++] = hd->refs[i].o;
        free(hd->refs);
        *hd = holders[--nholders];
    }
    pthread_mutex_unlock(&uobj_lock);
    for (size_t i = 0; i < ndead; i++)
        destroy_uobj(dead[i]);
    free(dead);
}

/* `to` (a clone, or an executable graph) holds the references `from` holds, new ones. */
static void holder_copy(uint64_t from, uint64_t to, bool exec)
{
    struct holder *src, *dst;

    if (!__atomic_load_n(&nholders, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&uobj_lock);
    src = holder_of(from, false, false);
    if (src && src->nrefs && (dst = holder_of(to, exec, true))) {
        src = holder_of(from, false, false); /* the table may have moved */
        for (size_t i = 0; i < src->nrefs; i++)
            if (holder_add(dst, src->refs[i].o, src->refs[i].n) == 0)
                src->refs[i].o->refs += src->refs[i].n;
    }
    pthread_mutex_unlock(&uobj_lock);
}

void om_uobj_graph_destroyed(CUgraph g)
{
    if (__atomic_load_n(&nholders, __ATOMIC_ACQUIRE))
        holder_drop((uint64_t)(uintptr_t)g, false);
}

void om_uobj_instantiated(CUgraph g, CUgraphExec e)
{
    holder_copy((uint64_t)(uintptr_t)g, (uint64_t)(uintptr_t)e, true);
}

/* An executable graph holding references was launched into s: remembered for its destroy. */
void om_uobj_exec_launched(CUgraphExec e, CUstream s)
{
    struct holder *hd;

    if (!__atomic_load_n(&nholders, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&uobj_lock);
    hd = holder_of((uint64_t)(uintptr_t)e, true, false);
    if (hd && !hd->all_streams) {
        int i = 0;
        while (i < hd->nstreams && hd->streams[i] != s)
            i++;
        if (i == hd->nstreams && hd->nstreams == MAX_STREAMS)
            hd->all_streams = true;
        else if (i == hd->nstreams)
            hd->streams[hd->nstreams++] = s;
    }
    pthread_mutex_unlock(&uobj_lock);
}

/* Waits for the work the executable graph launched (the streams remembered), if it holds
 * references; false: it holds none. */
static bool wait_exec_work(CUgraphExec e)
{
    CUstream streams[MAX_STREAMS];
    struct holder *hd;
    int n = 0;
    bool held = false, all = false;

    if (!__atomic_load_n(&nholders, __ATOMIC_ACQUIRE))
        return false;
    pthread_mutex_lock(&uobj_lock);
    if ((hd = holder_of((uint64_t)(uintptr_t)e, true, false)) != NULL && hd->nrefs) {
        held = true;
        all = hd->all_streams;
        n = hd->nstreams;
        memcpy(streams, hd->streams, sizeof(streams));
    }
    pthread_mutex_unlock(&uobj_lock);
    if (!held)
        return false;
    if (all)
        ((CUresult(*)(void))om_remote_entry(OM_IDX_cuCtxSynchronize))();
    for (int i = 0; !all && i < n; i++) /* a stream destroyed since: its error is no matter */
        ((CUresult(*)(CUstream))om_remote_entry(OM_IDX_cuStreamSynchronize))(streams[i]);
    return true;
}

/* The references a user object has (0: not one). */
unsigned om_uobj_refs(void *obj)
{
    struct uobj *o = (struct uobj *)(void *)obj;
    unsigned n;

    pthread_mutex_lock(&uobj_lock);
    n = uobj_ok(o) ? o->refs : 0;
    pthread_mutex_unlock(&uobj_lock);
    return n;
}

/* The work the executable graph launched is done (if it holds references: api/pagecopy.c's
 * records are references). */
void om_uobj_exec_wait(CUgraphExec e)
{
    wait_exec_work(e);
}

/* A clone of g holds the references g holds. */
void om_uobj_graph_cloned(CUgraph g, CUgraph clone)
{
    holder_copy((uint64_t)(uintptr_t)g, (uint64_t)(uintptr_t)clone, false);
}

/* A child graph node of g was made of child (the driver copied it): g holds what child holds,
 * new references (the node's graph lives as long as g, whatever becomes of child). */
void om_uobj_child_added(CUgraph child, CUgraph g)
{
    holder_copy((uint64_t)(uintptr_t)child, (uint64_t)(uintptr_t)g, false);
}

/* The executable graph's child graph node was set to a copy of child: the same, for e. */
void om_uobj_exec_child_set(CUgraphExec e, CUgraph child)
{
    holder_copy((uint64_t)(uintptr_t)child, (uint64_t)(uintptr_t)e, true);
}

/* The executable graph's references go once the work it launched is done. */
void om_uobj_exec_destroyed(CUgraphExec e)
{
    if (__atomic_load_n(&nholders, __ATOMIC_ACQUIRE)) {
        wait_exec_work(e);
        holder_drop((uint64_t)(uintptr_t)e, true);
    }
}

/* An update replaces the executable graph's references by copies of the new graph's; its old
 * ones go once the work it launched before is done. */
void om_uobj_exec_updated(CUgraphExec e, CUgraph g)
{
    uint64_t old = (uint64_t)(uintptr_t)e ^ 1; /* a key no graph handle has (they are aligned) */
    struct holder *hd;

    if (!__atomic_load_n(&nholders, __ATOMIC_ACQUIRE))
        return;
    wait_exec_work(e);
    pthread_mutex_lock(&uobj_lock);
    hd = holder_of((uint64_t)(uintptr_t)e, true, false);
    if (hd) /* the old references, set apart under another key, then released */
        hd->h = old;
    pthread_mutex_unlock(&uobj_lock);
    holder_copy((uint64_t)(uintptr_t)g, (uint64_t)(uintptr_t)e, true);
    if (hd)
        holder_drop(old, true);
}
