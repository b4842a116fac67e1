/* SPDX-License-Identifier: MIT */
/* Remote mode's internals shared by the client's files, by layer, bottom first (the layers:
 * tests/layers/client.txt and docs/architecture.md, "Client layers"). A file calls only
 * what its own layer and the layers below it declare here. */
#ifndef OM_REMOTE_H
#define OM_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/wire.h"
#include "openmps/cuda_abi.h"

/* A request buffer of `size` bytes on the stack, written with om_put_* (wire.h). */
#define REQ(name, size)                                                                            \
    uint8_t name##_buf[size];                                                                      \
    struct om_wbuf name = {.p = name##_buf, .cap = sizeof(name##_buf)}

/* ================================================================== transport (transport.c) */

/*
 * The per-call preamble: what the server must know of the calling thread's current context
 * before its call, kept as data by the state layer (state/current.c writes it whenever the
 * thread's current context changes) and read by the transport under the ring lock before each
 * call. device, sms and green hold while *live == want; once another thread destroys the
 * context, the preamble is the empty one (live NULL: no context, or one not known).
 */
struct om_preamble {
    uint64_t device;      /* the server's device the calls run on */
    uint64_t sms;         /* the SM partition of a created context (0: the whole device) */
    uint64_t green;       /* the server's green context the calls run in (0: none) */
    const uint64_t *live; /* the context's liveness word (__atomic), NULL: the empty preamble */
    uint64_t want;        /* its value while the context lives */
};
extern __thread struct om_preamble om_preamble;
/* Set (__atomic, never cleared) once some thread's preamble is not the empty one: until then the
 * transport looks at no preamble. */
extern int om_preamble_used;
/* The green context g is gone: the server has none current any more if it was g. */
void om_transport_green_gone(uint64_t g);

/* A call that waits for the server's answer (copied into reply, cap bytes). */
CUresult om_rcall(int index, const struct om_wbuf *req, void *reply, size_t cap, uint32_t *ret_len);
/* om_rcall with the ring already held (om_ring_lock), for exchanges that
 * continue on the socket (pinned memory's memfd). */
void om_ring_lock(void);
void om_ring_unlock(void);
/* The descriptor the server sends after an answer, ring held (-1: none). */
int om_recv_fd_locked(void);
CUresult om_rcall_locked(int index, const struct om_wbuf *req, void *reply, size_t cap,
                         uint32_t *ret_len);
/* A call with two u64 arguments and one u64 answer (out may be NULL). */
CUresult om_rcall_u64(int index, uint64_t a, uint64_t b, uint64_t *out);
/* A call whose answer is one u64 (*out untouched on failure). */
CUresult om_rcall_u64_reply(int index, const struct om_wbuf *req, uint64_t *out);
/* A synchronize through the session's completion word (api/contexts.c, server/syncword.c):
 * the private operation index with its request; *done false: the synchronize is still to be
 * made the ordinary way (no word mapped, or the spin's bound passed). */
CUresult om_word_sync(int index, const struct om_wbuf *req, bool *done);
/* A call that does not wait (launches, records): errors come at the next sync. */
CUresult om_rpost(int index, const struct om_wbuf *req);
/* Tells the server (for server.log) that this process met an unsupported entry point. */
void om_post_note_unsupported(int index);
/* Stages bytes (module images, copies from pageable memory) and makes the call
 * that uses them, with no other call of this process in between. */
CUresult om_rcall_staged(int index, const void *data, size_t len, const struct om_wbuf *req,
                         void *reply, size_t cap, uint32_t *ret_len);

/* ================================================================== state */

/* ---- state/current.c: context tokens and the calling thread's current context */

/* The handle of device dev's primary context, as cuDevicePrimaryCtxRetain answers it. */
CUcontext om_primary_token(int dev);
/* The device a context token stands for (a primary, created or green context's, or a context of
 * the local driver); -1: none, or destroyed. */
int om_ctx_device(CUcontext ctx);
/* cuCtxGetDevice_v2's answer: the device of ctx (NULL: of the current context). INVALID_CONTEXT
 * for a token that stands for nothing or no current context; CONTEXT_IS_DESTROYED for a current
 * context another thread destroyed (*dev -1 then). */
CUresult om_ctx_get_device(CUcontext ctx, CUdevice *dev);
/* The local driver's context standing for one of our context tokens. */
CUcontext om_local_context(CUcontext ctx);
/* The calling thread's current context (NULL: none) and its device (0: none). */
void om_current_context(CUcontext *ret);
int om_current_device(void);
/* The calling thread's context stack, as cuCtxSetCurrent, cuCtxPushCurrent and cuCtxPopCurrent
 * change it (INVALID_CONTEXT for a context token that stands for nothing). */
CUresult om_current_set(CUcontext ctx);
CUresult om_current_push(CUcontext ctx);
CUresult om_current_pop(CUcontext *ctx);
/* Contexts made by cuCtxCreate. The device of a created context's token (-1: destroyed, -2: not
 * a created context); its SM count (0: none, or not a live created context), flags and id
 * (false: not a live created one). */
int om_ctx_created_device(CUcontext ctx);
unsigned om_ctx_created_sms(CUcontext ctx);
bool om_ctx_created_flags(CUcontext ctx, unsigned *flags);
bool om_ctx_created_set_flags(CUcontext ctx, unsigned flags);
bool om_ctx_created_id(CUcontext ctx, unsigned long long *id);
/* A new created context's token (OUT_OF_MEMORY: every slot taken); not made current. */
CUresult om_ctx_created_new(int dev, unsigned flags, unsigned sm_count, CUcontext *ret);
/* Forgets a created context (detach: one reference only): 1 forgotten, 0 still referenced,
 * -1 not a live created context. */
int om_ctx_created_forget(CUcontext ctx, bool detach);
void om_ctx_created_attach(CUcontext ctx); /* one more reference (cuCtxAttach) */
/* Green contexts' tokens: the device of one (-1: destroyed, -2: not one); its id (false: not a
 * green one's); the green context the current context stands for (false: none); the green
 * context of a context token (NULL: none); the token of a green context (false: not ours). */
struct CUgreenCtx_st;
int om_green_ctx_device(CUcontext ctx);
bool om_green_ctx_id(CUcontext ctx, unsigned long long *id);
bool om_green_current(struct CUgreenCtx_st **g);
struct CUgreenCtx_st *om_green_of_context(CUcontext ctx);
bool om_green_token(struct CUgreenCtx_st *g, CUcontext *ret);
/* A green context the server made for this process, and its end. */
void om_green_register(uint64_t handle, int dev);
void om_green_unregister(uint64_t handle);

/* ---- state/ranges.c: device ranges of this process */

/* 0, or -ENOMEM: the range is not known (the caller must not hand it out). */
int om_devrange_add(CUdeviceptr base, size_t size);
/* The pool a range came from (stream-ordered allocation; 0: none), for pointer attributes. */
void om_devrange_set_pool(CUdeviceptr base, uint64_t pool);
uint64_t om_devrange_pool(CUdeviceptr p);
/* The range at base is a mapping of the virtual-memory API (cuMemMap): a copy may run on into the
 * mapping that follows it, as the server allows (om_devrange_fits). */
void om_devrange_set_mapped(CUdeviceptr base);
/* The device a range holding p was made on (-1: none known). */
int om_devrange_device(CUdeviceptr p);
void om_devrange_remove(CUdeviceptr base);
/* The device or managed range holding p, if this process has one. */
bool om_devrange_find(CUdeviceptr p, CUdeviceptr *ret_base, size_t *ret_size, bool *ret_managed);
/* True when p lies in device memory of this process (not managed memory). */
bool om_devrange_holds(CUdeviceptr p);
/* False when [p, p + n) starts in device, managed or pinned memory this process knows and runs
 * past its end (the driver refuses such a copy); true otherwise, also for an address not known
 * here, which the server judges. Asked before a copy's host bytes are read (api/copies.c). */
bool om_devrange_fits(CUdeviceptr p, uint64_t n);
/* The same for a range of cuMemAlloc's (api/memory.c), which only the program's cuMemFree ends:
 * asynchronous sets in it are posted (api/copies.c). */
int om_devrange_add_plain(CUdeviceptr base, size_t size);
/* True only when [p, p + n) lies in one plain allocation of this process (cuMemAlloc's; not
 * pool, mapped, graph, imported or module memory, whose lifetimes the shim does not follow
 * exactly): an asynchronous set there cannot be refused for its range. */
bool om_devrange_plain_holds(CUdeviceptr p, uint64_t n);

/* ---- state/shadows.c: managed memory's ranges and host shadows */

/* A new managed range (its shadow mapped at base); false: the table is full. */
bool om_managed_add(CUdeviceptr base, size_t size);
/* Forgets (and unmaps) the managed range at ptr; false: not one. */
bool om_managed_forget(CUdeviceptr ptr);
/* [p, p + n) lies in managed memory: between launches its shadow is the current copy. */
bool om_managed_in(CUdeviceptr p, size_t n);
bool om_managed_find(CUdeviceptr p, CUdeviceptr *ret_base, size_t *ret_size);
/* Shadows to the device before work on stream s is submitted. */
CUresult om_managed_push(CUstream s);
/* The device's copy back into the shadows when kernels may have written it; after a
 * synchronising call's rc (nothing when it failed). */
CUresult om_managed_pull_if_dirty(void);
CUresult om_managed_pull(CUresult rc);
void om_managed_host_wrote(void); /* a copy or set wrote a shadow */

/* ---- state/pinned.c: pinned host memory shared with the server */

/* The server's address of pinned bytes [p, p + n), if shared. */
bool om_pinned_lookup(const void *p, size_t n, uint64_t *ret_server);
int om_pinned_device_pointer(void *p, CUdeviceptr *ret); /* 0, or -1: not pinned */
/* p in pinned memory, shared with the server (*mapped, *device) or registered in place */
bool om_pinned_find(const void *p, CUdeviceptr *device, bool *mapped);
/* The destination of a copy from the device, [p, p + n): 1 pinned memory shared with the server
 * (its address in *ret_server), 0 other host memory, -1 memory registered read-only to the
 * device (CU_MEMHOSTREGISTER_READ_ONLY): the device may not write it. */
int om_pinned_dst(void *p, size_t n, uint64_t *ret_server);
/* Pinned memory the server makes and shares (cuMemHostAlloc; also the staging area), and its
 * release; the flags of a region holding p; the program's own pages registered and unregistered
 * (cuMemHostRegister, cuMemHostUnregister: moved onto shared memory, or registered here only). */
CUresult om_pinned_alloc(void **pp, size_t bytes, unsigned flags);
CUresult om_pinned_free(void *p);
CUresult om_pinned_flags(unsigned *flags, void *p);
CUresult om_pinned_register(void *p, size_t bytes, unsigned flags);
CUresult om_pinned_unregister(void *p);

/* ---- hostmove.c: what a range the program registers is (/proc/self/maps) */

struct om_hostclass {
    bool readable, writable; /* every page */
    bool movable;     /* private anonymous read-write memory no other thread may be writing */
    bool device_file; /* some page maps a device (/dev/..., not /dev/zero or /dev/shm) */
};
int om_host_classify(uintptr_t start, size_t len, struct om_hostclass *out); /* -EFAULT: a hole */
/* Moves the pages of a movable range onto a sealed memfd at the same address; the memfd or
 * -errno (the pages unchanged). */
int om_host_move(uintptr_t start, size_t len);
/* Gives a moved range back to private memory when no other thread runs; false: it stays. */
bool om_host_unmove(uintptr_t start, size_t len);
/* Around the shim's call of the local driver's cuInit: the threads it starts are not the
 * program's (they never write its memory). */
void om_host_local_driver_begin(void);
void om_host_local_driver_end(void);

/* ---- staging.c: pageable copies */

/* A pageable copy of n bytes through the pinned staging area, on stream s.
 * *handled false: too small or no area; the caller copies through the ring. */
CUresult om_staging_copy(bool to_device, CUdeviceptr dev, void *host, size_t n, CUstream s,
                         bool async, bool *handled);
/* Pageable bytes to the device through the ring: inline in the call, or staged in pieces. */
CUresult om_ring_htod(CUdeviceptr dst, const void *src, size_t n, CUstream stream);
/* The staging area's helper threads (they copy only for the thread that called). */
int om_staging_helper_threads(void);

/* ---- remote.c: the implementation installed for an entry point in remote mode */

void om_remote_set(int index, void *fn);

/* ---- state/tables.c: cuGetExportTable in remote mode (called by api/contexts.c) */

CUresult om_export_table(const void **table, const CUuuid *uuid);

/* ================================================================== families (api/) */

/* These are what one family asks of another's state; a family's own entry points are
 * declared by gen/remote_decls.h. */

/* api/devices.c: a device attribute (cached). */
CUresult om_device_attribute(int dev, int attrib, int *value);
/* api/managed.c: forgets the advice and prefetches recorded on the managed range at base. */
void om_hints_forget(CUdeviceptr base);
/* api/modules.c: the parameter layout of a kernel this process obtained, by handle (NULL:
 * not obtained here). */
struct om_layout {
    uint64_t kernel;
    uint32_t nparams;
    uint32_t total;
    uint32_t *offsets; /* nparams pairs of offset, size */
    struct om_layout *next;
};
const struct om_layout *om_find_layout(uint64_t kernel);
/* api/modules.c: parameter `index` of a kernel this process obtained (its cached layout):
 * INVALID_HANDLE for another handle, INVALID_VALUE past its last parameter. */
CUresult om_kernel_param(uint64_t kernel, size_t index, size_t *ret_offset, size_t *ret_size);
/* api/modules.c: the answers of a load's JIT options (empty logs of length 0, no wall time). */
void om_jit_options_answer(unsigned n, const int *o, void **v); /* o: CUjit_option */
/* api/streams.c: a stream this process created (rc its creation's answer: returned), with
 * the context current then (cuStreamGetCtx); forgotten when destroyed. */
CUresult om_stream_created(CUresult rc, CUstream *s);
void om_stream_forget(CUstream s);
/* api/streams.c: the NULL, legacy and per-thread streams, and those this process created. */
bool om_stream_known(CUstream s);
CUstream om_capture_query_stream(CUstream s); /* api/capture.c: the shim asks by it */
/* api/green.c: a stream made in green context g. */
CUresult om_green_stream_create(CUstream *s, struct CUgreenCtx_st *g, unsigned flags, int priority);
/* api/hostnodes.c: no capture of this process is open (none begun, or all ended): then no
 * stream of this process is capturing, and capture queries are answered here. */
bool om_capture_none(void);
/* api/hostnodes.c: host functions on capturing streams (captures counted as they begin and
 * end), and user objects' references held by graphs and executable graphs. */
void om_capture_begun(CUresult rc);
void om_capture_ended(CUresult rc);
CUresult om_hostfunc_capture(CUstream s, void (*fn)(void *), void *data, bool *captured);
CUresult om_callback_capture_check(CUstream s);
void om_uobj_graph_destroyed(CUgraph g);
void om_uobj_instantiated(CUgraph g, CUgraphExec e);
void om_uobj_exec_launched(CUgraphExec e, CUstream s);
void om_uobj_graph_cloned(CUgraph g, CUgraph clone);
void om_uobj_exec_destroyed(CUgraphExec e);
void om_uobj_exec_updated(CUgraphExec e, CUgraph g);
void om_uobj_child_added(CUgraph child, CUgraph g);
void om_uobj_exec_child_set(CUgraphExec e, CUgraph child);
void om_uobj_exec_wait(CUgraphExec e);
unsigned om_uobj_refs(void *obj); /* a CUuserObject */
/* api/launch.c: the argument bytes of kernel f from kernelParams (packed into out, cap bytes)
 * or extra's buffer: *ret_args, *ret_len (kernel nodes of graphs send them as launches do). */
CUresult om_kernel_args(CUfunction f, void **params, void **extra, void *out, size_t cap,
                        const void **ret_args, size_t *ret_len);
/* api/arrays.c: a 2D or 3D copy with an array operand (through cuMemcpy3D_v2's operation). */
CUresult om_arrays_copy2d(const CUDA_MEMCPY2D *c, CUstream s, bool wait);
CUresult om_arrays_copy3d(const CUDA_MEMCPY3D *c, CUstream s, bool wait);

#endif
