/* SPDX-License-Identifier: MIT */
/*
 * Remote mode, the state layer: the driver's private export tables (api/contexts.c's
 * cuGetExportTable calls om_export_table) and the runtime's context-local storage. Which tables and
 * slots are called was found with OPENMPS_TRACE_TABLES (src/client/tabletrace.c) on the H100, with
 * the CUDA 13.0 runtime, cuBLAS, cuFFT, PyTorch 2.11 and CuPy, and what the slots answer with
 * tests/gpu/probe/tools_tables.cu (docs/architecture.md, "Private export tables"):
 *
 *  - the runtime's own six tables come from the local driver (two are covered by the runtime's
 *    integrity check), unmodified but for slot 2 of 263e8860, which takes the current context
 *    (below); its context-local storage table (c693336e) is the shim's (below);
 *  - da9151d3 (called by NVRTC under CuPy: compile options in, PTX or ELF out), 69a28e9f
 *    (called at PyTorch's start) and 1734dc26 (cuBLASLt's cublasLtMatmulAlgoGetHeuristic: slots
 *    4 and 13, host pointers and small integers only; refused, cuBLASLt crashed) take no
 *    context, stream or module in the slots called: they come from the local driver too;
 *  - 21318c60 (tools context, asked by cuBLAS and cuFFT) and 6e163fbe (tools module, cuFFT)
 *    take the server's streams and modules: the shim serves them itself, with the slots seen
 *    called answered from the server and every other slot refusing (and saying which, once).
 *    Any other table is refused as a driver without it would (CUDA_ERROR_NOT_FOUND).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/gen/entries.h"
#include "../remote.h"
#include "../shim.h"

typedef CUresult (*export_fn)(const void **, const void *);

/* By their first eight bytes (the trace shows those). */
static uint64_t head8(const void *uuid)
{
    const uint8_t *u = uuid;
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v = v << 8 | u[i];
    return v;
}

bool om_runtime_table(const void *uuid)
{
    static const uint32_t known[] = {0xf8cff951u, 0x6bd5fb6cu, 0xa094798cu,
                                     0x42d85a81u, 0x263e8860u, 0xd4082055u};
    uint32_t first = (uint32_t)(head8(uuid) >> 32);

    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (known[i] == first)
            return true;
    return false;
}

/* OPENMPS_FORWARD_TABLES=HEX,...: tables (by their first four bytes, as the trace names them)
 * also forwarded to the local driver, to learn whether a library that asks for one works with
 * the local driver's answer. A diagnostic: a slot that takes a context, stream or module of the
 * server crashes there. */
static bool forwarded_by_user(const void *uuid)
{
    const char *v = getenv("OPENMPS_FORWARD_TABLES");
    uint32_t first = (uint32_t)(head8(uuid) >> 32);

    while (v && *v) {
        char *end;
        unsigned long x = strtoul(v, &end, 16);
        if (end == v)
            break;
        if ((uint32_t)x == first)
            return true;
        v = *end ? end + 1 : end;
    }
    return false;
}

static bool context_free_table(const void *uuid)
{
    uint64_t h = head8(uuid);

    return h == 0xda9151d33ae6cc41ull || h == 0x69a28e9f24498b47ull || h == 0x1734dc26800d4745ull ||
           forwarded_by_user(uuid);
}

/* ------------------------------------------------------------------ slots not served */

/* Logs once per table (said: that table's flag) that a slot openmps does not serve was called. */
static void unserved(const char *table, int *said)
{
    if (!__atomic_exchange_n(said, 1, __ATOMIC_RELAXED))
        om_shim_log("a slot of private table %s that openmps does not serve was called "
                    "(OPENMPS_TRACE_TABLES=1 names it)",
                    table);
}

static CUresult tools_context_other(void)
{
    static int said;

    unserved("21318c60", &said);
    return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult tools_module_other(void)
{
    static int said;

    unserved("6e163fbe", &said);
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* ------------------------------------------------------------------ 21318c60: tools context */

/* Slot 4 (ctx, out): 1 for a context, 0 for none (measured: NULL gives 0, the runtime's
 * context 1, eight bytes written). */
static CUresult ctx_is_set(void *ctx, uint64_t *out)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    *out = ctx != NULL;
    return CUDA_SUCCESS;
}

/* Slot 51 (ctx, stream, out): an object for the stream, which the library only hands to slot
 * 39. Here the object is the stream handle itself; NULL and CU_STREAM_LEGACY give one object,
 * as natively. */
static CUresult stream_object(void *ctx, CUstream s, void **out)
{
    (void)ctx;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    *out = s ? (void *)s : (void *)CU_STREAM_LEGACY;
    return CUDA_SUCCESS;
}

/* Slot 39 (ctx, object, out): the stream's id, as cuStreamGetId gives it (measured: equal for
 * the NULL, legacy, per-thread, created, non-blocking and priority streams). */
static CUresult stream_object_id(void *ctx, void *object, unsigned long long *out)
{
    (void)ctx;
    if (!out || !object)
        return CUDA_ERROR_INVALID_VALUE;
    return ((CUresult(*)(CUstream, unsigned long long *))om_fn[OM_IDX_cuStreamGetId])(
        (CUstream)object, out);
}

#define TOOLS_CONTEXT_SLOTS 92 /* as the driver's (size word 744) */
static void *tools_context[TOOLS_CONTEXT_SLOTS + 1];

/* ------------------------------------------------------------------ 6e163fbe: tools module */

#define MODULE_FUNCTIONS_MAX 4096

/* Slot 7 (ctx, module, callback, data, …): calls callback(data, f) for each function of the
 * module and returns how many (measured with cuFFT: a module of one kernel, one call of a
 * callback that stores f at data, 1 returned). The functions are the server's, named as
 * cuModuleEnumerateFunctions names them to this client. */
static int module_for_each_function(void *ctx, CUmodule mod, void (*callback)(void *, CUfunction),
                                    void *data)
{
    unsigned count = 0;
    CUfunction *fns;

    (void)ctx;
    if (!callback ||
        ((CUresult(*)(unsigned *, CUmodule))om_fn[OM_IDX_cuModuleGetFunctionCount])(&count, mod) !=
            CUDA_SUCCESS ||
        count == 0 || count > MODULE_FUNCTIONS_MAX)
        return 0;
    fns = calloc(count, sizeof(*fns));
    if (!fns)
        return 0;
    if (((CUresult(*)(CUfunction *, unsigned, CUmodule))om_fn[OM_IDX_cuModuleEnumerateFunctions])(
            fns, count, mod) != CUDA_SUCCESS)
        count = 0;
    for (unsigned i = 0; i < count; i++)
        callback(data, fns[i]);
    free(fns);
    return (int)count;
}

#define TOOLS_MODULE_SLOTS 98 /* as the driver's (size word 792) */
static void *tools_module[TOOLS_MODULE_SLOTS + 1];

/* ------------------------------------------------------------------ 263e8860: context checks */

/* The runtime's table 263e8860 (context checks; not covered by its integrity check: measured,
 * the runtime runs with it watched). Its slot 2 takes the current context first: the runtime
 * calls it when it starts in a context it has not seen, and the local driver reads the context
 * there (measured: a created or green context's token crashed it, at 0x2d bytes into the slot).
 * Served as a copy whose slot 2 gets the local driver's context that the token stands for. */
typedef uint64_t (*slot6)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);
static const uint64_t *context_checks_real;
static uint64_t *context_checks;

static uint64_t context_check_2(uint64_t ctx, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4,
                                uint64_t a5)
{
    CUcontext local = om_local_context((CUcontext)(uintptr_t)ctx);

    return ((slot6)(uintptr_t)context_checks_real[2])((uint64_t)(uintptr_t)local, a1, a2, a3, a4,
                                                      a5);
}

static const void *context_checks_table(const uint64_t *real)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    size_t words = real[0] / sizeof(uint64_t);

    pthread_mutex_lock(&lock);
    if (!context_checks && real[0] % sizeof(uint64_t) == 0 && words > 2 && words < 512) {
        uint64_t *copy = malloc(words * sizeof(uint64_t));
        if (copy) {
            memcpy(copy, real, words * sizeof(uint64_t));
            context_checks_real = real;
            copy[2] = (uint64_t)(uintptr_t)context_check_2;
            context_checks = copy;
        }
    }
    pthread_mutex_unlock(&lock);
    return context_checks ? (const void *)context_checks : (const void *)real;
}

/* ------------------------------------------------------------------ context-local storage (the
 * runtime's table c693336e) */

/*
 * Context-local storage (export table c693336e…, docs/driver-facts.md): the runtime
 * keeps its per-context state here, keyed by our context tokens, which the
 * real driver does not know. So the shim serves this one table; the others
 * come from the real driver unmodified (the runtime's integrity check covers
 * two of them).
 */
static const uint8_t cls_uuid[16] = {0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11,
                                     0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93};

struct cls_entry {
    CUcontext ctx;
    void *key, *value;
    void (*dtor)(CUcontext, void *, void *);
};
static struct cls_entry cls[256];
static int ncls;
static pthread_mutex_t cls_lock = PTHREAD_MUTEX_INITIALIZER;

static CUcontext current_or(CUcontext ctx)
{
    if (!ctx)
        om_current_context(&ctx);
    return ctx;
}

static CUresult cls_put(CUcontext ctx, void *key, void *value,
                        void (*dtor)(CUcontext, void *, void *))
{
    CUresult rc = CUDA_SUCCESS;

    om_shim_log("context storage put(ctx %p, key %p, value %p)", ctx, key, value);
    ctx = current_or(ctx);
    pthread_mutex_lock(&cls_lock);
    int i = 0;
    while (i < ncls && !(cls[i].ctx == ctx && cls[i].key == key))
        i++;
    if (i == ncls && ncls == (int)(sizeof(cls) / sizeof(cls[0])))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    else {
        if (i == ncls)
            ncls++;
        cls[i] = (struct cls_entry){ctx, key, value, dtor};
    }
    pthread_mutex_unlock(&cls_lock);
    return rc;
}

static CUresult cls_remove(CUcontext ctx, void *key)
{
    om_shim_log("context storage remove(ctx %p, key %p)", ctx, key);
    ctx = current_or(ctx);
    pthread_mutex_lock(&cls_lock);
    for (int i = 0; i < ncls; i++) {
        if (cls[i].ctx == ctx && cls[i].key == key) {
            cls[i] = cls[--ncls];
            break;
        }
    }
    pthread_mutex_unlock(&cls_lock);
    return CUDA_SUCCESS;
}

static CUresult cls_get(void **value, CUcontext ctx, void *key)
{
    CUresult rc = CUDA_ERROR_INVALID_HANDLE;

    ctx = current_or(ctx);
    pthread_mutex_lock(&cls_lock);
    for (int i = 0; i < ncls; i++) {
        if (cls[i].ctx == ctx && cls[i].key == key) {
            *value = cls[i].value;
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&cls_lock);
    om_shim_log("context storage get(ctx %p, key %p) = %d", ctx, key, rc);
    return rc;
}

static CUresult cls_unknown_slot(void)
{
    om_shim_log("an unknown slot of the context-local storage table was called");
    return CUDA_ERROR_NOT_SUPPORTED;
}

static void *const cls_table[] = {(void *)cls_put,          (void *)cls_remove,
                                  (void *)cls_get,          (void *)cls_unknown_slot,
                                  (void *)cls_unknown_slot, (void *)cls_unknown_slot,
                                  (void *)cls_unknown_slot, (void *)cls_unknown_slot};

/* The runtime's context-local storage table. */
static const void *cls_table_of(const void *uuid)
{
    return memcmp(uuid, cls_uuid, 16) == 0 ? (const void *)cls_table : NULL;
}

static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void tables_init(void)
{
    tools_context[0] = (void *)(uintptr_t)sizeof(tools_context);
    for (int i = 1; i <= TOOLS_CONTEXT_SLOTS; i++)
        tools_context[i] = (void *)tools_context_other;
    tools_context[4] = (void *)ctx_is_set;
    tools_context[39] = (void *)stream_object_id;
    tools_context[51] = (void *)stream_object;
    tools_module[0] = (void *)(uintptr_t)sizeof(tools_module);
    for (int i = 1; i <= TOOLS_MODULE_SLOTS; i++)
        tools_module[i] = (void *)tools_module_other;
    tools_module[7] = (void *)module_for_each_function;
}

/* cuGetExportTable in remote mode (api/contexts.c's om_r_cuGetExportTable calls it). */
CUresult om_export_table(const void **table, const CUuuid *uuid)
{
    void *real = om_shim.real_fn[OM_IDX_cuGetExportTable];
    uint64_t h;

    if (!table || !uuid)
        return CUDA_ERROR_INVALID_VALUE;
    h = head8(uuid);
    om_shim_log("cuGetExportTable %08x", (unsigned)(h >> 32));
    if ((*table = cls_table_of(uuid)) != NULL)
        return CUDA_SUCCESS;
    pthread_once(&tables_once, tables_init);
    if (h == 0x21318c6097143248ull) {
        *table = tools_context;
        return CUDA_SUCCESS;
    }
    if (h == 0x6e163fbeb958444dull) {
        *table = tools_module;
        return CUDA_SUCCESS;
    }
    if (real && h == 0x263e88607cd26143ull) {
        CUresult rc = ((export_fn)real)(table, uuid);
        if (rc == CUDA_SUCCESS && *table)
            *table = context_checks_table(*table);
        return rc;
    }
    if (real && (om_runtime_table(uuid) || context_free_table(uuid)))
        return ((export_fn)real)(table, uuid);
    om_shim_log("cuGetExportTable: table %08x is not offered in remote mode", (unsigned)(h >> 32));
    return CUDA_ERROR_NOT_FOUND;
}
