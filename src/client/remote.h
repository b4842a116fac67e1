/* SPDX-License-Identifier: MIT */
/* Remote mode internals shared by the client's remote_*.c files. */
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

/* A call that waits for the server's answer (copied into reply, cap bytes). */
CUresult om_rcall(int index, const struct om_wbuf *req, void *reply, size_t cap, uint32_t *ret_len);
/* om_rcall with the ring already held (om_ring_lock), for exchanges that
 * continue on the socket (pinned memory's memfd). */
void om_ring_lock(void);
void om_ring_unlock(void);
/* transport.c: the descriptor the server sends after an answer, ring held (-1: none). */
int om_recv_fd_locked(void);
CUresult om_rcall_locked(int index, const struct om_wbuf *req, void *reply, size_t cap,
                         uint32_t *ret_len);
/* api/hostmem.c: the server's address of pinned bytes [p, p + n), if shared. */
bool om_pinned_lookup(const void *p, size_t n, uint64_t *ret_server);
int om_pinned_device_pointer(void *p, CUdeviceptr *ret); /* 0, or -1: not pinned */
/* The destination of a copy from the device, [p, p + n): 1 pinned memory shared with the server
 * (its address in *ret_server), 0 other host memory, -1 memory registered read-only to the
 * device (CU_MEMHOSTREGISTER_READ_ONLY): the device may not write it. */
int om_pinned_dst(void *p, size_t n, uint64_t *ret_server);
/* hostmove.c: what a range the program registers is (/proc/self/maps). */
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
/* Pinned memory shared with the server, for the shim's own use (the staging area). */
CUresult om_pinned_alloc(void **pp, size_t bytes);
CUresult om_pinned_free(void *p);
/* staging.c: a pageable copy of n bytes through the pinned staging area, on stream s.
 * *handled false: too small or no area; the caller copies through the ring. */
CUresult om_staging_copy(bool to_device, CUdeviceptr dev, void *host, size_t n, CUstream s,
                         bool async, bool *handled);
/* The staging area's helper threads (they copy only for the thread that called). */
int om_staging_helper_threads(void);

/* A call with two u64 arguments and one u64 answer (out may be NULL). */
CUresult om_rcall_u64(int index, uint64_t a, uint64_t b, uint64_t *out);
/* A call that does not wait (launches, records): errors come at the next sync. */
CUresult om_rpost(int index, const struct om_wbuf *req);
/* Tells the server (for server.log) that this process met an unsupported entry point. */
void om_post_note_unsupported(int index);
/* Stages bytes (module images, copies from pageable memory) and makes the call
 * that uses them, with no other call of this process in between. */
CUresult om_rcall_staged(int index, const void *data, size_t len, const struct om_wbuf *req,
                         void *reply, size_t cap, uint32_t *ret_len);

/* api/devices.c: a device attribute (cached); api/dataplane.c: device ranges of this process. */
CUresult om_device_attribute(int dev, int attrib, int *value);
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
/* False when [p, p + n) starts in device, managed or pinned memory this process knows and runs
 * past its end (the driver refuses such a copy); true otherwise, also for an address not known
 * here, which the server judges. Asked before a copy's host bytes are read (dataplane.c). */
bool om_devrange_fits(CUdeviceptr p, uint64_t n);
/* api/memory.c: forgets the advice and prefetches recorded on the managed range at base. */
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
/* api/modules.c: a stream this process created (rc its creation's answer: returned), with
 * the context current then (cuStreamGetCtx); forgotten when destroyed. */
CUresult om_stream_created(CUresult rc, CUstream *s);
/* api/green.c: the device of a green context's token (-1: destroyed, -2: not one); the green
 * context the current context stands for (false: none); a stream made in one; the green
 * context of a context token (NULL: none). */
struct CUgreenCtx_st;
int om_green_ctx_device(CUcontext ctx);
bool om_green_ctx_id(CUcontext ctx, unsigned long long *id); /* false: not a green one's */
bool om_green_current(struct CUgreenCtx_st **g);
CUresult om_green_stream_create(CUstream *s, struct CUgreenCtx_st *g, unsigned flags, int priority);
struct CUgreenCtx_st *om_green_of_context(CUcontext ctx);
/* With the ring held, before a call: tells the server the calling thread's current green
 * context when it is not the one the last call had (the NULL stream is that green context's). */
void om_green_before_call(void);
void om_stream_forget(CUstream s);
/* api/streams.c: the NULL, legacy and per-thread streams, and those this process created. */
bool om_stream_known(CUstream s);
/* api/hostnodes.c: no capture of this process is open (none begun, or all ended): then no
 * stream of this process is capturing, and capture queries are answered here. */
bool om_capture_none(void);
/* api/primary.c: the calling thread's current context (NULL: none). */
void om_current_context(CUcontext *ret);
/* api/primary.c: the device of the calling thread's current context (0: none). */
int om_current_device(void);
/* The SM count of the calling thread's current context when the program created it with an
 * execution affinity and CUDA_MPS_ENABLE_PER_CTX_DEVICE_MULTIPROCESSOR_PARTITIONING=1; 0
 * otherwise (api/primary.c, api/contexts.c). */
unsigned om_current_sm_partition(void);
/* The handle of device dev's primary context, as cuDevicePrimaryCtxRetain answers it. */
CUcontext om_primary_token(int dev);
unsigned om_ctx_created_sms(CUcontext ctx);
bool om_ctx_partitions_made(void); /* any context created with an SM count */
/* api/contexts.c: contexts made by cuCtxCreate. The device of a created context's token (-1:
 * destroyed, -2: not a created context); its flags and id (false: not a live created one). */
int om_ctx_created_device(CUcontext ctx);
/* api/primary.c: the local driver's context standing for one of our context tokens. */
CUcontext om_local_context(CUcontext ctx);
bool om_ctx_created_flags(CUcontext ctx, unsigned *flags);
bool om_ctx_created_id(CUcontext ctx, unsigned long long *id);

/* api/hostnodes.c: host functions on capturing streams (captures counted as they begin and
 * end), and user objects' references held by graphs and executable graphs. */
void om_capture_begun(CUresult rc);
void om_capture_ended(CUresult rc);
CUresult om_hostfunc_capture(CUstream s, void (*fn)(void *), void *data, bool *captured);
CUresult om_callback_capture_check(CUstream s);
/* api/graphs.c: the call of a custom row (graph memory's server side) that hostnodes.c's installed
 * function wraps with the user objects' references (cuGraphExecDestroy's is generated). */
CUresult om_rpc_cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph g, unsigned long long flags);
void om_uobj_graph_destroyed(CUgraph g);
void om_uobj_instantiated(CUgraph g, CUgraphExec e);
void om_uobj_exec_launched(CUgraphExec e, CUstream s);

/* api/launch.c: the argument bytes of kernel f from kernelParams (packed into out, cap bytes)
 * or extra's buffer: *ret_args, *ret_len (kernel nodes of graphs send them as launches do). */
CUresult om_kernel_args(CUfunction f, void **params, void **extra, void *out, size_t cap,
                        const void **ret_args, size_t *ret_len);

/* api/dataplane.c: managed shadows to the device before work on stream s is submitted. */
CUresult om_managed_push(CUstream s);

/* remote.c: the implementation installed for an entry point in remote mode. */
void om_remote_set(int index, void *fn);

/* api/arrays.c: a 2D or 3D copy with an array operand (through cuMemcpy3D_v2's operation). */
CUresult om_arrays_copy2d(const CUDA_MEMCPY2D *c, CUstream s, bool wait);
CUresult om_arrays_copy3d(const CUDA_MEMCPY3D *c, CUstream s, bool wait);

#endif
