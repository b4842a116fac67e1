/* SPDX-License-Identifier: MIT */
/* The executor's interface to its handlers: the generated decoders (gen/decoders.c) and the
 * hand-written ones of each API family (src/server/api/). */
#ifndef OM_SERVER_EXEC_H
#define OM_SERVER_EXEC_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/gen/types.h"
#include "../common/log.h"
#include "../common/wire.h"
#include "gen/handlers.h"
#include "internal.h"

/* The real driver's entry point (cast to its type at the call). */
#define REAL(sym) ((void *)om_server_real[OM_IDX_##sym])

/* One call of a client: its untrusted request and the answer being written. */
struct call {
    struct session *s;
    struct om_rbuf in;
    struct om_wbuf out;
    bool posted; /* no answer: its error is kept for its stream (om_exec), no other is taken */
};

typedef CUresult (*om_handler)(struct call *);
/* gen/decoders.c: the handler of each entry point the server executes (NULL: none). */
extern const om_handler om_handlers[OM_HANDLER_COUNT];

/* A client's own errors are logged 16 times per session at most, then once more to say so:
 * a program that repeats a bad call in a loop must not flood server.log, which every user's
 * server shares. */
#define CLIENT_ERRORS_LOGGED 16
#define client_err(s, ...)                                                                         \
    do {                                                                                           \
        if ((s)->errors_logged < CLIENT_ERRORS_LOGGED)                                             \
            om_err(__VA_ARGS__);                                                                   \
        else if ((s)->errors_logged == CLIENT_ERRORS_LOGGED)                                       \
            om_err("client %d: more errors of its requests; they are not logged", (int)(s)->pid);  \
        if ((s)->errors_logged <= CLIENT_ERRORS_LOGGED)                                            \
            (s)->errors_logged++;                                                                  \
    } while (0)

/* args.c: a request that does not parse: logged (within the limit), INVALID_VALUE. */
CUresult om_bad_request(struct call *c);
#define ARGS_OK(c) ((c)->in.bad ? om_bad_request(c) : CUDA_SUCCESS)

/* The bytes the client staged for this call: exactly n of them, or why not (a budget refused
 * some: that error; the client staged another length: `mismatch`). */
CUresult om_staged(struct call *c, uint64_t n, CUresult mismatch);
/* errors.c: rc, or (when rc is a success) an error of the client's posted calls, taken (errors.c):
 *  om_take_call_error: of the stream this call enqueued on or waited for, or the context's;
 *  om_take_event_error: of the stream `ev` was recorded on after the error, or the context's;
 *  om_take_context_errors: the context's and every stream's (cuCtxSynchronize). */
CUresult om_take_call_error(struct call *c, CUresult rc);
CUresult om_take_event_error(struct session *s, CUevent ev, CUresult rc);
CUresult om_take_context_errors(struct session *s, CUresult rc);

/*
 * route.c: the server stream for a stream handle the client passed: its own default stream for the
 * NULL, legacy and per-thread handles (never the shared context's NULL stream), or a stream it
 * created, with the legacy default stream's ordering rebuilt within the client. `enqueue`: the
 * caller enqueues an operation on it next (the scheduler may hold it first); otherwise it only
 * queries or waits. NULL with *rc set when the client does not own the handle.
 */
CUstream om_find_stream(struct session *s, uint64_t h, bool enqueue, CUresult *rc);
/* Whether session.touched holds every stream of the client that may have work (no SM share, no
 * green context, no failed add), and a stream found idle, dropped from it. */
bool om_streams_touched_only(const struct session *s);
void om_stream_idle_seen(struct session *s, CUstream st);
CUstream om_arg_stream(struct call *c, uint64_t h, bool enqueue, CUresult *rc);
CUstream om_arg_capture_stream(struct call *c, uint64_t h, CUresult *rc); /* stream.capture */
/* `later` waits for everything enqueued on `first` so far (with an event kept per stream, which
 * om_stream_forget_sync destroys when the stream goes). */
CUresult om_order_after(struct session *s, CUstream later, CUstream first, bool enqueue);
void om_stream_forget_sync(struct session *s, CUstream st);

/* args.c: a handle of `kind` the calling client owns (0 allowed when `nullable`), or
 * INVALID_HANDLE. */
CUresult om_arg_handle(struct call *c, enum om_handle_kind kind, uint64_t h, bool nullable);
/* [p, p + len) lies within memory of the calling client the device may touch: its device
 * allocations, or its pinned host memory by device pointer. */
bool om_arg_range(struct call *c, uint64_t p, uint64_t len);

/* A batch memory operation (48 bytes, cuStreamBatchMemOp's or a batch node's): its kind and flags
 * known, its address within the client's memory; the driver's own field cleared. */
CUresult om_batch_op_check(struct call *c, uint8_t *op);

/* An array the client may use: its own, or a level or plane of one of its own; the bytes of one
 * element of a format with `channels` channels (0: not addressed by bytes here). */
bool om_arg_array(struct call *c, uint64_t h);
uint64_t om_element_bytes(int format, unsigned channels);
/* Device memory of the call's byte count, recorded as the client's; answers its address (a
 * managed allocation is always a new one, never kept for reuse when freed). */
CUresult om_devmem_for_client(struct call *c, bool managed, uint64_t *size);

/* own.c: handles a call creates: room under the client's budget of the kind (OUT_OF_MEMORY, logged
 * once, otherwise), then owned; om_own_add destroys the object when it cannot be recorded. */
CUresult om_own_room(struct session *s, enum om_handle_kind kind);
CUresult om_own_add(struct call *c, enum om_handle_kind kind, uint64_t h);
/* A handle the driver answered becomes the client's, under its budget (NULL and one it holds
 * already stay as they are; generated list.KIND answers). */
CUresult om_own_adopt(struct call *c, enum om_handle_kind kind, uint64_t h);
void om_own_drop(struct session *s, enum om_handle_kind kind, uint64_t h);

/* route.c: a new server stream made the client's (its handle answered), and one of its
 * streams destroyed (cuStreamDestroy, cuGreenCtxDestroy). */
CUresult om_stream_adopt(struct call *c, CUstream st, uint64_t flags);
CUresult om_stream_release(struct session *s, uint64_t h);
/* devmap.c: the (server) device a stream or pool of the client's is on; noted at creation,
 * forgotten at destruction, freed at the session's end. */
int om_handle_device(const struct session *s, uint64_t h);
int om_first_device(const struct session *s); /* its device 0: the server's ordinal */
bool om_note_device(struct session *s, uint64_t h, int dev);
void om_forget_device(struct session *s, uint64_t h);
void om_handle_devs_release(struct session *s);
/* streamstate.c: the state of a client's streams. om_stream_blocking: created blocking, on any
 * device; om_stream_capturing: a stream of a session that began a capture is capturing now
 * (route.c then adds no hidden ordering or scheduling hold to it: they would join other streams
 * into the capture or invalidate it); the green context a stream was made in (0: none), whether
 * it was, room for one more (-ENOMEM) and the stream noted, a stream gone, the session's end. */
bool om_stream_blocking(struct session *s, uint64_t h);
bool om_stream_capturing(struct session *s, CUstream st);
uint64_t om_green_of(const struct session *s, uint64_t h);
bool om_green_stream_of(struct session *s, CUstream st);
int om_green_stream_room(struct session *s);
void om_green_stream_add(struct session *s, uint64_t stream, uint64_t green);
void om_green_stream_gone(struct session *s, uint64_t h);
void om_green_streams_free(struct session *s);

/*
 * share.c: the client's SM share. om_launch_stream is the stream a kernel launch, or a graph's,
 * on the client's stream `h` goes to (the shadow in its lane under a share: share.c);
 * om_share_settle makes a stream of the client wait for its shadow's kernels before any other
 * use (route.c calls it for every stream a call names; `enqueue` as om_find_stream's).
 * om_share_wait waits for every shadow, om_share_stream_gone forgets a stream's, and
 * om_share_release ends the session's (after om_exec_sync_client). The SM count and the SM
 * resource the client is shown on a device follow its share.
 */
CUstream om_launch_stream(struct call *c, uint64_t h, CUresult *rc);
/*
 * priority.c: the real priority of a new stream of the client that asked for `requested`
 * (normal clients one level up, below-normal ones the least), remembered where they differ
 * (om_priority_note) so cuStreamGetPriority answers what it asked (om_priority_asked) until
 * the stream goes (om_priority_forget); om_priority_cap_milli: the share a below-normal client
 * is held to now (0: none), and for a normal client notes its launch.
 */
int om_priority_stream(struct session *s, int requested);
void om_priority_note(struct session *s, CUstream st, int requested, int real);
int om_priority_asked(struct session *s, CUstream st, int real);
void om_priority_forget(struct session *s, CUstream st);
uint32_t om_priority_cap_milli(struct session *s);
CUstream om_share_launch(struct session *s, CUstream st, bool ordered, CUresult *rc);
/* Whether the client's launches may go to a shadow stream now (a share, a priority reserve, a
 * partition of its context, or a lane left from one): replay.c does not hold them then. */
bool om_share_active(struct session *s);
CUresult om_share_settle(struct session *s, CUstream st, bool enqueue);
void om_share_stream_gone(struct session *s, CUstream st);
unsigned om_share_sm_count(int dev, uint32_t pct_milli);
unsigned om_share_client_sms(struct session *s, int dev);
/* The SM count the client would be answered may have changed: its shim asks again. */
void om_share_sms_changed(struct session *s);
CUresult om_share_resource(struct session *s, int dev, struct om_CUdevResource *res);

/* devmap.c: the client's device ordinals (its CUDA_VISIBLE_DEVICES) and the server's. dev_in:
 * the server's ordinal of the client's device, -1 where it has none; dev_out: the client's of a
 * server device, -1 where it does not see it; loc_in/loc_out: a memory location, in place
 * (device locations only; loc_in: INVALID_DEVICE where the client has no such device). */
int om_dev_in(const struct session *s, uint64_t cdev);
int om_dev_out(const struct session *s, int sdev);
CUresult om_loc_in(const struct session *s, CUmemLocation *loc);
void om_loc_out(const struct session *s, CUmemLocation *loc);
CUresult om_answer_dev(struct call *c, CUdevice *dev);                  /* out:dev */
CUresult om_answer_allocprop(struct call *c, CUmemAllocationProp *p);   /* out:allocprop */
CUresult om_check_access(struct call *c, CUmemAccessDesc *v, size_t n); /* arr:access */
/* Answers the server makes its own (out:CHECK(...) rows): the SM share's count, a memory cap,
 * the priority asked for (api/devices.c, args.c, api/memory.c, api/streams.c). */
CUresult om_answer_smcount(struct call *c, int *v, uint64_t attrib, int dev);
CUresult om_answer_memcap(struct call *c, size_t *total, int dev);
CUresult om_answer_memfree(struct call *c, size_t *free_bytes);
CUresult om_answer_memtotal(struct call *c, size_t *total);
CUresult om_answer_asked(struct call *c, int *priority, CUstream st);

/* hostcb.c: a client's function and argument as the driver's host node parameters (the
 * trampoline and a record's token; the session's channel made first); the answer's last word,
 * whether the channel's descriptor follows it (`send`: the client asked for it). */
CUresult om_hostcb_params(struct call *c, uint64_t fn, uint64_t data, uint64_t want,
                          CUDA_HOST_NODE_PARAMS *p, bool *send);
void om_hostcb_send_channel(struct call *c, bool send);
/* The client's function and argument of host node parameters the server made (false: not its). */
bool om_hostcb_lookup(struct session *s, const CUDA_HOST_NODE_PARAMS *p, uint64_t *fn,
                      uint64_t *data);

/* ipcstate.c: what IPC handles share (api/ipc.c makes and reads the handles). An allocation of
 * the client exported (its id, made once; the client's budget of handles), opened by another
 * client (INVALID_VALUE: unknown or freed; INVALID_CONTEXT: its own; the range becomes the
 * opener's, *ret_first on its first open), closed (INVALID_VALUE with *ret_last false: not open;
 * on the last close, its own work waited for: that wait's result, *ret_last true). An event
 * exported (its id), opened (it becomes the opener's event too). */
CUresult om_ipc_export(struct session *s, const struct om_range *r, uint64_t *ret_id);
CUresult om_ipc_open(struct session *s, uint64_t id, uint64_t *ret_base, uint64_t *ret_size,
                     bool *ret_first);
CUresult om_ipc_close(struct session *s, uint64_t base, bool *ret_last);
CUresult om_ipc_event_export(uint64_t ev, uint64_t *ret_id);
CUresult om_ipc_event_open(struct session *s, uint64_t id, uint64_t *ret_ev);

/* args.c: JIT options of a link step or a load (api/linker.c, api/modules.c), as the client sends
 * them: a count, then (id, value) pairs; the log buffers the driver writes are the server's own,
 * of the client's sizes (capped at OM_JIT_LOG_MAX), allocated by om_jit_options and freed by
 * om_jit_free (also after a failure). om_jit_answer: the count, every value as the driver left
 * it (log buffers as 0), then the info and the error log (a length, the bytes). Options whose
 * values are arrays of the client's pointers are NOT_SUPPORTED. */
#define OM_JIT_OPTIONS_MAX 32
/* The JIT options whose values are logs and their sizes (CUjit_option's values). */
#define JIT_INFO_LOG_BUFFER 3
#define JIT_INFO_LOG_BUFFER_SIZE_BYTES 4
#define JIT_ERROR_LOG_BUFFER 5
#define JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6
#define OM_JIT_LOG_MAX 65536u
struct om_jit {
    unsigned n;
    CUjit_option opts[OM_JIT_OPTIONS_MAX];
    void *vals[OM_JIT_OPTIONS_MAX];
    char *logs[2]; /* info, error: the server's buffers, or NULL */
};
CUresult om_jit_options(struct call *c, struct om_jit *j);
void om_jit_answer(struct call *c, const struct om_jit *j);
void om_jit_free(struct om_jit *j);

/* The checks of `in:CHECK` parameters, by family (src/server/api/<family>.c). */
CUresult om_check_resdesc(struct call *c, CUDA_RESOURCE_DESC *d);        /* arrays */
CUresult om_check_arraymap(struct call *c, CUarrayMapInfo *v, size_t n); /* arraymap */
/* modref.c: a module's texture and surface references. A library whose references a client
 * obtained is that client's alone from then on: another client loading the same image gets its
 * own copy (om_modref_may_share false). Libraries loaded and unloaded are noted
 * (om_modref_release in internal.h: the session's end); om_modref_get reads a reference's
 * request and answers it (entry: cuModuleGetTexRef's or cuModuleGetSurfRef's index). */
bool om_modref_may_share(struct session *s, uint64_t lib);
void om_modref_loaded(struct session *s, uint64_t lib);
void om_modref_unloaded(struct session *s, uint64_t lib);
CUresult om_modref_get(struct call *c, enum om_handle_kind kind, int entry);
/* graphstate.c and api/nodes.c: the checks the node family's rows name (every node handle the
 * client's; a memset node's range within its memory). */
CUresult om_check_nodes(struct call *c, CUgraphNode *v, size_t n);
CUresult om_check_memset(struct call *c, CUDA_MEMSET_NODE_PARAMS *p);

#endif
