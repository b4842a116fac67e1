/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of module images, kernels and their attributes. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/image.h"
#include "../../common/msg.h"
#include "../exec.h"
#include "openmps/ops.h"

/* ------------------------------------------------------------------ modules, kernels */

/*
 * Whether a module image ends within its `size` staged bytes by its own headers: the driver
 * takes no size and reads as far as they say, so an image that claims more would have the
 * driver read past the staging buffer, in the server every client shares.
 */
static bool image_within(const uint8_t *p, uint64_t size)
{
    return om_image_extent(p, size) <= size;
}

/* The session's entry of a library loaded more than once, or NULL. */
static struct om_libloads *more_loads(struct session *s, uint64_t lib)
{
    for (size_t i = 0; i < s->nlibloads; i++)
        if (s->libloads[i].lib == lib)
            return &s->libloads[i];
    return NULL;
}

/* One more load of a library the client holds already: counted, so that its handle stays the
 * client's until as many unloads (natively each load has its own handle and unload). */
static CUresult load_again(struct session *s, uint64_t lib)
{
    struct om_libloads *m = more_loads(s, lib);

    if (m) {
        if (m->more == UINT32_MAX)
            return CUDA_ERROR_OUT_OF_MEMORY;
        m->more++;
        return CUDA_SUCCESS;
    }
    /* at most one entry per library it holds */
    if (!om_grow((void **)&s->libloads, s->nlibloads, &s->libloads_cap, sizeof(*s->libloads), 8))
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->libloads[s->nlibloads++] = (struct om_libloads){.lib = lib, .more = 1};
    return CUDA_SUCCESS;
}

/* A loaded library becomes the client's (counted once per client in modref.c). */
static CUresult own_library(struct call *c, uint64_t lib)
{
    if (om_handles_has(&c->s->own[OM_H_LIBRARY], lib))
        return load_again(c->s, lib);
    if (om_handles_add(&c->s->own[OM_H_LIBRARY], lib) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    om_modref_loaded(c->s, lib);
    return CUDA_SUCCESS;
}

void om_libloads_free(struct session *s)
{
    free(s->libloads);
    s->libloads = NULL;
    s->nlibloads = s->libloads_cap = 0;
}

/* The client's handle of a loaded library. */
static CUresult answer_library(struct call *c, uint64_t lib)
{
    CUresult rc = own_library(c, lib);

    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, lib);
    return rc;
}

/* JIT options of a load whose program asked for logs (cuModuleLoadDataEx, cuLibraryLoadData's
 * jitOptions): args.c's om_jit_*, answered after the library. */

/*
 * The logs of an image this server loaded before (the library is shared, and loaded once): the
 * driver's JIT of it with the program's options, through the linker, which compiles on the host
 * only (a second load would make the first launch of its kernels wait for every client's).
 * Its input type from its first bytes: an ELF cubin, a fatbin, else PTX.
 */
static void jit_logs_again(struct om_jit *j, const uint8_t *image, uint64_t size)
{
    CUresult (*create)(unsigned, CUjit_option *, void **, CUlinkState *) = REAL(cuLinkCreate_v2);
    CUresult (*add)(CUlinkState, CUjitInputType, void *, size_t, const char *, unsigned,
                    CUjit_option *, void **) = REAL(cuLinkAddData_v2);
    CUresult (*complete)(CUlinkState, void **, size_t *) = REAL(cuLinkComplete);
    CUresult (*destroy)(CUlinkState) = REAL(cuLinkDestroy);
    uint32_t magic = 0;
    CUlinkState st = NULL;
    void *cubin;
    size_t n;
    int type;

    memcpy(&magic, image, size < 4 ? (size_t)size : 4);
    type = magic == 0x464c457fu                           ? 0  /* CU_JIT_INPUT_CUBIN */
           : magic == 0xba55ed50u || magic == 0x466243b1u ? 2  /* CU_JIT_INPUT_FATBINARY */
                                                          : 1; /* CU_JIT_INPUT_PTX */
    if (create(j->n, j->opts, j->vals, &st) != CUDA_SUCCESS)
        return;
    if (add(st, type, (void *)image, (size_t)size, "image", 0, NULL, NULL) == CUDA_SUCCESS)
        complete(st, &cubin, &n);
    destroy(st);
}

/*
 * Driver 580 (two H200s, tests/gpu/probe/jit_library.cu): cuLibraryLoadData of a PTX that does
 * not compile answers CUDA_SUCCESS, with the compiler's error log written, and fails only at the
 * kernel's lookup (218), where cuModuleLoadDataEx, what the program called, answers 218 at once.
 * So a new image whose library load wrote an error log is loaded once more as a module with the
 * same options (their log sizes as the program gave them: `sizes`), for the driver's own answer and
 * logs; if that fails, the library goes and its error is the load's. A module that loads is
 * unloaded (the library serves the client). Only loads that wrote an error log pay it.
 */
static CUresult load_as_module_too(CUlibrary lib, const uint8_t *image, unsigned n,
                                   CUjit_option *opts, void **vals, void *const *sizes)
{
    CUresult (*load)(CUmodule *, const void *, unsigned, CUjit_option *, void **) =
        REAL(cuModuleLoadDataEx);
    CUresult (*unload)(CUmodule) = REAL(cuModuleUnload);
    CUresult (*unload_lib)(CUlibrary) = REAL(cuLibraryUnload);
    CUmodule m = NULL;
    CUresult rc;

    if (!load)
        return CUDA_SUCCESS;
    for (unsigned i = 0; i < n; i++) {
        if (opts[i] == JIT_INFO_LOG_BUFFER_SIZE_BYTES || opts[i] == JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
            vals[i] = sizes[i];
        else if ((opts[i] == JIT_INFO_LOG_BUFFER || opts[i] == JIT_ERROR_LOG_BUFFER) && vals[i])
            ((char *)vals[i])[0] = '\0';
    }
    rc = load(&m, image, n, opts, vals);
    if (rc == CUDA_SUCCESS) {
        if (unload)
            unload(m);
    } else if (unload_lib) {
        unload_lib(lib);
    }
    return rc;
}

/* The staged image: the library loaded before, shared, or loaded now (with the JIT options and
 * their logs when `j`: a new image's are the load's own, a known image's a JIT of it again),
 * made the client's; *ret_lib. */
static CUresult load_staged(struct call *c, struct om_jit *j, uint64_t size, uint64_t *ret_lib)
{
    CUresult (*load)(CUlibrary *, const void *, void *, void **, unsigned, void *, void **,
                     unsigned) = REAL(cuLibraryLoadData);
    uint64_t k1, k2, lib = 0;
    bool loaded = false;
    CUresult rc = CUDA_SUCCESS;

    if ((rc = om_staged(c, size, CUDA_ERROR_INVALID_IMAGE)) != CUDA_SUCCESS)
        return rc;
    if (!image_within(c->s->stage, size)) {
        client_err(c->s, "client %d: a module image whose headers reach past its %llu staged bytes",
                   (int)c->s->pid, (unsigned long long)size);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    om_image_keys(c->s->stage, size, &k1, &k2);
    /* Whether a new image's kernels may print is looked at before the load lock is taken: the
     * look decompresses entries (output.c), which other clients' loads need not wait for. One
     * loaded by another client meanwhile is found below. */
    bool scanned = false, prints = false;
    pthread_mutex_lock(om_image_load_lock());
    if (om_image_lookup(k1, k2, size, &lib) != 0 || !om_modref_may_share(c->s, lib)) {
        pthread_mutex_unlock(om_image_load_lock());
        prints = om_output_image_prints(c->s->stage, size);
        scanned = true;
        pthread_mutex_lock(om_image_load_lock());
    }
    /* A library another client claimed (a module's texture references, api/texrefs.c): this
     * client loads its own copy. */
    if (om_image_lookup(k1, k2, size, &lib) != 0 || !om_modref_may_share(c->s, lib)) {
        CUlibrary l = NULL;
        /* A new image: it stays loaded while the server runs, so it counts against the
         * client's budget and the server's (budget.c). */
        if (c->s->image_count >= om_budget.client_image_count ||
            !om_budget_take(&c->s->image_bytes, size, om_budget.client_images)) {
            pthread_mutex_unlock(om_image_load_lock());
            return om_budget_refuse(c->s, OM_BUDGET_IMAGES, "loading a new module image");
        }
        if (!om_image_budget_take(size)) {
            om_budget_give(&c->s->image_bytes, size);
            pthread_mutex_unlock(om_image_load_lock());
            return om_budget_refuse(c->s, OM_BUDGET_IMAGES,
                                    "loading a new module image (the server's own budget, "
                                    "OPENMPS_SERVER_IMAGE_MAX, is spent)");
        }
        /* The options: the program's, and an error log of the server's where they give none
         * the driver can write (no error log, or one of size 0: its options are left out, as
         * the driver would write nothing there) — load_as_module_too needs to see the log.
         * What the driver writes back goes to the program's values. */
        char quiet[512] = "";
        CUjit_option o[OM_JIT_OPTIONS_MAX + 2];
        void *v[OM_JIT_OPTIONS_MAX + 2], *sizes[OM_JIT_OPTIONS_MAX + 2];
        unsigned n = 0, from[OM_JIT_OPTIONS_MAX];
        bool sized = false;
        for (unsigned i = 0; j && i < j->n; i++)
            sized |= j->opts[i] == JIT_ERROR_LOG_BUFFER_SIZE_BYTES && j->vals[i];
        bool own_log = !j || !j->logs[1] || !sized;
        for (unsigned i = 0; j && i < j->n; i++) {
            if (own_log && (j->opts[i] == JIT_ERROR_LOG_BUFFER ||
                            j->opts[i] == JIT_ERROR_LOG_BUFFER_SIZE_BYTES))
                continue;
            from[n] = i;
            o[n] = j->opts[i], v[n++] = j->vals[i];
        }
        unsigned kept = n;
        if (own_log) {
            o[n] = JIT_ERROR_LOG_BUFFER, v[n++] = quiet;
            o[n] = JIT_ERROR_LOG_BUFFER_SIZE_BYTES, v[n++] = (void *)(uintptr_t)sizeof(quiet);
        }
        memcpy(sizes, v, n * sizeof(*v));
        rc = load(&l, c->s->stage, o, v, n, NULL, NULL, 0);
        const char *elog = own_log ? quiet : j->logs[1];
        if (rc == CUDA_SUCCESS && elog[0])
            rc = load_as_module_too(l, c->s->stage, n, o, v, sizes);
        for (unsigned k = 0; k < kept; k++)
            j->vals[from[k]] = v[k];
        loaded = true;
        if (rc != CUDA_SUCCESS) {
            om_budget_give(&c->s->image_bytes, size);
            om_image_budget_give(size);
        } else {
            c->s->image_count++;
            lib = (uint64_t)(uintptr_t)l;
            if (!scanned) /* shared a moment ago, claimed since */
                prints = om_output_image_prints(c->s->stage, size);
            om_image_add(k1, k2, size, lib, prints);
            om_info("client %d: loaded a new module image of %llu bytes%s", (int)c->s->pid,
                    (unsigned long long)size, prints ? " (its kernels may print)" : "");
        }
    }
    pthread_mutex_unlock(om_image_load_lock());
    if (rc != CUDA_SUCCESS)
        return rc;
    if (j && !loaded)
        jit_logs_again(j, c->s->stage, size);
    /* For the servers after this one (imgcache.c); the staging buffer is this session's. */
    om_imgcache_store(c->s->stage, size, k1);
    if ((rc = own_library(c, lib)) == CUDA_SUCCESS)
        *ret_lib = lib;
    return rc;
}

/*
 * Request: the image's size, the two keys the client computed (om_image_keys), and whether its
 * bytes were staged, then (optional) JIT options as above. Without its bytes: the library if the
 * server has loaded that image (and may share it), else 0, and the client sends the bytes (its
 * keys are only a question: with bytes, the server computes the keys itself). Answer: the
 * library; with options, the load's result, the library (0 on failure), the options and logs.
 */
CUresult om_x_cuLibraryLoadData(struct call *c)
{
    uint64_t size = om_get_u64(&c->in), k1 = om_get_u64(&c->in), k2 = om_get_u64(&c->in);
    uint64_t staged = om_get_u64(&c->in), lib = 0;
    bool with_jit = !c->in.bad && c->in.len - c->in.off >= 8;
    struct om_jit j = {0};
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (size == 0 || size > (1u << 30) || staged > 1)
        return CUDA_ERROR_INVALID_IMAGE;
    if (with_jit) { /* staged: the logs need the bytes */
        if (!staged)
            return CUDA_ERROR_INVALID_VALUE;
        if ((rc = om_jit_options(c, &j)) == CUDA_SUCCESS) {
            /* The load's answer travels in the reply, with the logs: a failed JIT's error log is
             * the point of the log, and an error answer carries no bytes. */
            rc = load_staged(c, &j, size, &lib);
            om_put_u64(&c->out, (uint64_t)rc);
            om_put_u64(&c->out, rc == CUDA_SUCCESS ? lib : 0);
            om_jit_answer(c, &j);
            rc = CUDA_SUCCESS;
        }
        om_jit_free(&j);
        return rc;
    }
    if (!staged) { /* known by its keys? */
        if (om_image_lookup(k1, k2, size, &lib) != 0 || !om_modref_may_share(c->s, lib)) {
            om_put_u64(&c->out, 0);
            return CUDA_SUCCESS;
        }
        om_imgcache_used(size, k1); /* for the servers after this one, as a load would */
        return answer_library(c, lib);
    }
    if ((rc = load_staged(c, NULL, size, &lib)) == CUDA_SUCCESS)
        om_put_u64(&c->out, lib);
    return rc;
}

/* cuLibraryUnload (generated, hook: the library is the client's): the image stays loaded for
 * the next client (unloading waits for every kernel); this client takes back one of its loads,
 * and loses the handle with the last. */
CUresult om_hook_cuLibraryUnload(struct call *c, CUlibrary library)
{
    uint64_t lib = (uint64_t)(uintptr_t)library;
    struct om_libloads *m = more_loads(c->s, lib);

    if (m) { /* the handle is held by another load too */
        if (--m->more == 0)
            *m = c->s->libloads[--c->s->nlibloads];
        return CUDA_SUCCESS;
    }
    if (!om_handles_remove(&c->s->own[OM_H_LIBRARY], lib))
        return CUDA_ERROR_INVALID_HANDLE;
    om_modref_unloaded(c->s, lib); /* its references of the module go (api/texrefs.c) */
    return CUDA_SUCCESS;
}

/* name bytes after a u64 owner: copied to a NUL-terminated string. */
static CUresult name_arg(struct call *c, char *name, size_t cap)
{
    size_t len;
    const void *p = om_get_rest(&c->in, &len);

    if (c->in.bad || !p || len == 0 || len >= cap || memchr(p, '\0', len))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(name, p, len);
    name[len] = '\0';
    return CUDA_SUCCESS;
}

/* A kernel's parameter layout (offset and size pairs in params[2 * 256]) and its argument
 * bytes, noted as the client's (resources.c): a kernel the client may launch and query. */
static CUresult kernel_layout(struct call *c, uint64_t lib, CUkernel k, const char *name,
                              uint64_t *params, uint32_t *ret_n, uint32_t *ret_total)
{
    CUresult (*info)(CUkernel, size_t, size_t *, size_t *) = REAL(cuKernelGetParamInfo);
    uint32_t n = 0, total = 0;

    for (; n < 256; n++) {
        size_t off = 0, size = 0;
        if (info(k, n, &off, &size) != CUDA_SUCCESS)
            break;
        params[2 * n] = off;
        params[2 * n + 1] = size;
        if (off + size > total)
            total = (uint32_t)(off + size);
    }
    if (n == 256) {
        size_t off = 0, size = 0;
        if (info(k, n, &off, &size) == CUDA_SUCCESS) {
            /* Forwarding part of the parameters would run the kernel with
             * garbage: refuse the kernel instead, by name. */
            client_err(c->s, "client %d: kernel %s has more than 256 parameters: not supported",
                       (int)c->s->pid, name);
            return CUDA_ERROR_NOT_SUPPORTED;
        }
    }
    if (om_kernel_note(c->s, (uint64_t)(uintptr_t)k, total, om_library_prints(lib)) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *ret_n = n;
    *ret_total = total;
    return CUDA_SUCCESS;
}

CUresult om_x_cuLibraryGetKernel(struct call *c)
{
    CUresult (*get)(CUkernel *, CUlibrary, const char *) = REAL(cuLibraryGetKernel);
    uint64_t lib = om_get_u64(&c->in);
    char name[1024];
    CUkernel k = NULL;
    uint64_t params[2 * 256];
    uint32_t n = 0, total = 0;
    CUresult rc = name_arg(c, name, sizeof(name));

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!om_handles_has(&c->s->own[OM_H_LIBRARY], lib))
        return CUDA_ERROR_INVALID_HANDLE;
    rc = get(&k, (CUlibrary)(uintptr_t)lib, name);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* The layout answered with the handle: the client caches it, so a launch
     * is one flat buffer (docs/architecture.md, "The life of a launch"). */
    if ((rc = kernel_layout(c, lib, k, name, params, &n, &total)) != CUDA_SUCCESS)
        return rc;
    om_put_u64(&c->out, (uint64_t)(uintptr_t)k);
    om_put_u64(&c->out, n);
    om_put_bytes(&c->out, params, 16 * (size_t)n);
    return CUDA_SUCCESS;
}

/* At most this many kernels in one answer of cuLibraryEnumerateKernels. */
#define ENUMERATE_MAX 4096

/* lib, count: the library's first `count` kernels, each noted as the client's. */
CUresult om_x_cuLibraryEnumerateKernels(struct call *c)
{
    CUresult (*enumerate)(CUkernel *, unsigned, CUlibrary) = REAL(cuLibraryEnumerateKernels);
    uint64_t lib = om_get_u64(&c->in), count = om_get_u64(&c->in);
    uint64_t params[2 * 256];
    CUkernel *ks;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (count == 0 || count > ENUMERATE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (!om_handles_has(&c->s->own[OM_H_LIBRARY], lib))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!(ks = calloc((size_t)count, sizeof(*ks))))
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = enumerate(ks, (unsigned)count, (CUlibrary)(uintptr_t)lib);
    for (uint64_t i = 0; rc == CUDA_SUCCESS && i < count; i++) {
        uint32_t n, total;
        rc = kernel_layout(c, lib, ks[i], "(enumerated)", params, &n, &total);
        if (rc == CUDA_SUCCESS)
            om_put_u64(&c->out, (uint64_t)(uintptr_t)ks[i]);
    }
    free(ks);
    return rc;
}

/* A kernel of the client's: its name's bytes. */
CUresult om_x_cuKernelGetName(struct call *c)
{
    CUresult (*get)(const char **, CUkernel) = REAL(cuKernelGetName);
    uint64_t k = om_get_u64(&c->in);
    const char *name = NULL;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (om_kernel_total(c->s, k) < 0)
        return CUDA_ERROR_INVALID_HANDLE;
    rc = get(&name, (CUkernel)(uintptr_t)k);
    if (rc == CUDA_SUCCESS && !name)
        rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS)
        om_put_bytes(&c->out, name, strnlen(name, 4095));
    return rc;
}

CUresult om_x_cuLibraryGetGlobal(struct call *c)
{
    CUresult (*get)(CUdeviceptr *, size_t *, CUlibrary, const char *) = REAL(cuLibraryGetGlobal);
    uint64_t lib = om_get_u64(&c->in);
    char name[1024];
    CUdeviceptr p = 0;
    size_t size = 0;
    CUresult rc = name_arg(c, name, sizeof(name));

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!om_handles_has(&c->s->own[OM_H_LIBRARY], lib))
        return CUDA_ERROR_INVALID_HANDLE;
    rc = get(&p, &size, (CUlibrary)(uintptr_t)lib, name);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* The module's globals are shared by every client of the image (as in
     * one process); the client may copy to and from them. */
    if (!om_ranges_cover(&c->s->allocs, p, size))
        om_ranges_add(&c->s->allocs, p, size, 0, false);
    om_put_u64(&c->out, p);
    om_put_u64(&c->out, size);
    return CUDA_SUCCESS;
}

/*
 * Function handles are shared by the clients that loaded one image, so a value one client sets
 * is every client's. Two attributes are permissions a launch is checked against: the largest
 * dynamic shared memory a launch may ask (8) and whether a cluster may exceed the portable size
 * (14). For those the function keeps the largest value any client set: a client that set what
 * its launches need is never refused for another's smaller setting (its launches that would
 * exceed its own setting may then run where natively they fail). Each client sees the value
 * it set itself (the client keeps it: src/client/api/modules.c).
 */
#define ATTR_MAX_DYNAMIC_SHARED 8
#define ATTR_NON_PORTABLE_CLUSTER 14

/* cuKernelSetAttribute (generated, hook: the kernel is the client's, the device the server's
 * ordinal; cuFuncSetAttribute's too, with the current device). */
CUresult om_hook_cuKernelSetAttribute(struct call *c, CUfunction_attribute attrib, int val,
                                      CUkernel kernel, CUdevice dev)
{
    CUresult (*get)(int *, int, CUkernel, CUdevice) = REAL(cuKernelGetAttribute);
    int now = 0;

    if (((int)attrib == ATTR_MAX_DYNAMIC_SHARED || (int)attrib == ATTR_NON_PORTABLE_CLUSTER) &&
        val >= 0 && get(&now, (int)attrib, kernel, dev) == CUDA_SUCCESS && now >= val)
        return CUDA_SUCCESS; /* already allowed: lowering it would refuse others' launches */
    return ((CUresult(*)(int, int, CUkernel, CUdevice))REAL(cuKernelSetAttribute))((int)attrib, val,
                                                                                   kernel, dev);
}
