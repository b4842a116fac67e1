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

/* The client's handle of a loaded library (counted once per client). */
static CUresult answer_library(struct call *c, uint64_t lib)
{
    if (!om_handles_has(&c->s->own[OM_H_LIBRARY], lib)) {
        if (om_handles_add(&c->s->own[OM_H_LIBRARY], lib) < 0)
            return CUDA_ERROR_OUT_OF_MEMORY;
        om_modref_loaded(c->s, lib);
    }
    om_put_u64(&c->out, lib);
    return CUDA_SUCCESS;
}

/*
 * Request: the image's size, the two keys the client computed (om_image_keys), and whether its
 * bytes were staged. Without its bytes: the library if the server has loaded that image (and
 * may share it), else 0, and the client sends the bytes (its keys are only a question: with
 * bytes, the server computes the keys itself). Answer: the library.
 */
CUresult om_x_cuLibraryLoadData(struct call *c)
{
    CUresult (*load)(CUlibrary *, const void *, void *, void **, unsigned, void *, void **,
                     unsigned) = REAL(cuLibraryLoadData);
    uint64_t size = om_get_u64(&c->in), k1 = om_get_u64(&c->in), k2 = om_get_u64(&c->in);
    uint64_t staged = om_get_u64(&c->in), lib = 0;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    if (size == 0 || size > (1u << 30) || staged > 1)
        return CUDA_ERROR_INVALID_IMAGE;
    if (!staged) { /* known by its keys? */
        if (om_image_lookup(k1, k2, size, &lib) != 0 || !om_modref_may_share(c->s, lib)) {
            om_put_u64(&c->out, 0);
            return CUDA_SUCCESS;
        }
        om_imgcache_used(size, k1); /* for the servers after this one, as a load would */
        return answer_library(c, lib);
    }
    if ((rc = om_staged(c, size, CUDA_ERROR_INVALID_IMAGE)) != CUDA_SUCCESS)
        return rc;
    if (!image_within(c->s->stage, size)) {
        client_err(c->s, "client %d: a module image whose headers reach past its %llu staged bytes",
                   (int)c->s->pid, (unsigned long long)size);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    om_image_keys(c->s->stage, size, &k1, &k2);
    pthread_mutex_lock(om_image_load_lock());
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
        rc = load(&l, c->s->stage, NULL, NULL, 0, NULL, NULL, 0);
        if (rc != CUDA_SUCCESS) {
            om_budget_give(&c->s->image_bytes, size);
            om_image_budget_give(size);
        } else {
            c->s->image_count++;
            lib = (uint64_t)(uintptr_t)l;
            bool prints = om_image_may_print(c->s->stage, size);
            om_image_add(k1, k2, size, lib, prints);
            om_info("client %d: loaded a new module image of %llu bytes%s", (int)c->s->pid,
                    (unsigned long long)size, prints ? " (its kernels may print)" : "");
        }
    }
    pthread_mutex_unlock(om_image_load_lock());
    if (rc != CUDA_SUCCESS)
        return rc;
    /* For the servers after this one (imgcache.c); the staging buffer is this session's. */
    om_imgcache_store(c->s->stage, size, k1);
    return answer_library(c, lib);
}

CUresult om_x_cuLibraryUnload(struct call *c)
{
    uint64_t lib = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);

    /* The image stays loaded for the next client (unloading waits for every
     * kernel); this client just loses the handle. */
    if (rc == CUDA_SUCCESS && !om_handles_remove(&c->s->own[OM_H_LIBRARY], lib))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS)
        om_modref_unloaded(c->s, lib); /* its references of the module go (api/texrefs.c) */
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, 0);
    return rc;
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
     * is one flat buffer (ARCHITECTURE.md). */
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

static CUresult owned_kernel(struct call *c, uint64_t h)
{
    return om_kernel_total(c->s, h) >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult om_x_cuFuncGetAttribute(struct call *c)
{
    uint64_t attrib = om_get_u64(&c->in), k = om_get_u64(&c->in), cdev = om_get_u64(&c->in);
    int v = 0, dev = om_dev_in(c->s, cdev);
    CUresult rc = ARGS_OK(c);

    if (rc == CUDA_SUCCESS)
        rc = owned_kernel(c, k);
    if (rc == CUDA_SUCCESS && dev < 0)
        rc = CUDA_ERROR_INVALID_DEVICE;
    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(int *, int, CUkernel, CUdevice))REAL(cuKernelGetAttribute))(
            &v, (int)attrib, (CUkernel)(uintptr_t)k, (CUdevice)dev);
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, (uint64_t)(int64_t)v);
    return rc;
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

CUresult om_x_cuFuncSetAttribute(struct call *c)
{
    uint64_t k = om_get_u64(&c->in), attrib = om_get_u64(&c->in), v = om_get_u64(&c->in);
    uint64_t cdev = om_get_u64(&c->in);
    CUresult (*get)(int *, int, CUkernel, CUdevice) = REAL(cuKernelGetAttribute);
    CUresult rc = ARGS_OK(c);
    int now = 0, dev = om_dev_in(c->s, cdev); /* cuKernelSetAttribute's, or the current one */

    if (rc == CUDA_SUCCESS)
        rc = owned_kernel(c, k);
    if (rc == CUDA_SUCCESS && dev < 0)
        rc = CUDA_ERROR_INVALID_DEVICE;
    if (rc != CUDA_SUCCESS)
        return rc;
    if ((attrib == ATTR_MAX_DYNAMIC_SHARED || attrib == ATTR_NON_PORTABLE_CLUSTER) &&
        (int64_t)v >= 0 && (int64_t)v <= INT32_MAX &&
        get(&now, (int)attrib, (CUkernel)(uintptr_t)k, dev) == CUDA_SUCCESS && now >= (int)v)
        return CUDA_SUCCESS; /* already allowed: lowering it would refuse others' launches */
    return ((CUresult(*)(int, int, CUkernel, CUdevice))REAL(cuKernelSetAttribute))(
        (int)attrib, (int)(int64_t)v, (CUkernel)(uintptr_t)k, dev);
}

/* ------------------------------------------------------------------ occupancy of clusters */

/* CUlaunchConfig as the driver reads it; its attributes are 72 bytes each (an id, padding, a
 * 64-byte value), at most 16 travel. */
struct occ_config {
    unsigned gx, gy, gz, bx, by, bz, smem;
    CUstream stream;
    void *attrs;
    unsigned nattrs;
};
#define OCC_ATTR_BYTES 72
#define OCC_MAX_ATTRS 16

/* The attributes a cluster query may carry: values without handles (a cluster dimension,
 * scheduling policies, priorities, carveouts). An access policy window names a device address
 * of the client; the others name events or graph nodes, which would need translating. */
static bool occ_attribute_allowed(int id)
{
    switch (id) {
    case 0:  /* ignore */
    case 2:  /* cooperative */
    case 3:  /* synchronization policy */
    case 4:  /* cluster dimension */
    case 5:  /* cluster scheduling policy */
    case 6:  /* programmatic stream serialization */
    case 8:  /* priority */
    case 9:  /* memory sync domain map */
    case 10: /* memory sync domain */
    case 11: /* preferred cluster dimension */
    case 14: /* preferred shared memory carveout */ return true;
    default: return false;
    }
}

/* The function, the configuration with its stream (the client's, only queried) and checked
 * attributes, then the driver's one int. */
static CUresult cluster_query(struct call *c,
                              CUresult (*query)(int *, CUfunction, const struct occ_config *))
{
    uint64_t k = om_get_u64(&c->in), g = om_get_u64(&c->in), m = om_get_u64(&c->in);
    uint64_t b = om_get_u64(&c->in), smem = om_get_u64(&c->in), sh = om_get_u64(&c->in);
    uint64_t nattrs = om_get_u64(&c->in);
    const void *ap = nattrs <= OCC_MAX_ATTRS ? om_get_bytes(&c->in, nattrs * OCC_ATTR_BYTES) : NULL;
    uint8_t attrs[OCC_MAX_ATTRS * OCC_ATTR_BYTES];
    struct occ_config cfg;
    CUresult rc = ARGS_OK(c);
    CUstream st;
    int v = 0;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (nattrs > OCC_MAX_ATTRS || (nattrs && !ap) || smem > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (nattrs)
        memcpy(attrs, ap, nattrs * OCC_ATTR_BYTES);
    for (uint64_t i = 0; i < nattrs; i++) {
        int id;
        memcpy(&id, attrs + i * OCC_ATTR_BYTES, sizeof(id));
        if (!occ_attribute_allowed(id)) {
            client_err(c->s,
                       "client %d: launch attribute %d in an occupancy query is not supported",
                       (int)c->s->pid, id);
            return CUDA_ERROR_NOT_SUPPORTED;
        }
    }
    if ((rc = om_arg_handle(c, OM_H_FUNCTION, k, false)) != CUDA_SUCCESS)
        return rc;
    st = om_arg_stream(c, sh, false, &rc);
    if (!st)
        return rc;
    cfg = (struct occ_config){
        (unsigned)g,           (unsigned)(g >> 32), (unsigned)m,    (unsigned)(m >> 32),
        (unsigned)b,           (unsigned)(b >> 32), (unsigned)smem, st,
        nattrs ? attrs : NULL, (unsigned)nattrs};
    rc = query(&v, (CUfunction)(uintptr_t)k, &cfg);
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, (uint64_t)(int64_t)v);
    return rc;
}

CUresult om_x_cuOccupancyMaxPotentialClusterSize(struct call *c)
{
    return cluster_query(c, REAL(cuOccupancyMaxPotentialClusterSize));
}

CUresult om_x_cuOccupancyMaxActiveClusters(struct call *c)
{
    return cluster_query(c, REAL(cuOccupancyMaxActiveClusters));
}

/* ------------------------------------------------------------------ the linker */

/*
 * A link state's options live in the server: the client sends option values, never pointers
 * of its own. The log buffers are the server's (at most LINK_LOG_MAX bytes each, the client's
 * size otherwise), kept with the state as the driver writes into them until cuLinkDestroy;
 * after each step the logs and the options the driver writes back (THREADS_PER_BLOCK,
 * WALL_TIME, the logs' sizes) go back to the client, which fills its own buffers.
 */
#define LINK_MAX_OPTIONS 32
#define LINK_LOG_MAX 65536u
#define LINK_CHUNK (256u * 1024u) /* cubin bytes per answer of cuLinkComplete */
#define JIT_THREADS_PER_BLOCK 1
#define JIT_WALL_TIME 2
#define JIT_INFO_LOG_BUFFER 3
#define JIT_INFO_LOG_BUFFER_SIZE_BYTES 4
#define JIT_ERROR_LOG_BUFFER 5
#define JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6
#define JIT_LAST_OPTION 34 /* CU_JIT_SPLIT_COMPILE */
#define JIT_INPUT_TYPES 6  /* CU_JIT_NUM_INPUT_TYPES */

struct link {
    struct session *s;
    uint64_t h;
    unsigned n;
    CUjit_option opts[LINK_MAX_OPTIONS];
    void *vals[LINK_MAX_OPTIONS];
    char *info, *error; /* the server's log buffers, or NULL */
    void *cubin;        /* the driver's, after cuLinkComplete */
    size_t cubin_size;
    struct link *next;
};
static struct link *links;
static pthread_mutex_t links_lock = PTHREAD_MUTEX_INITIALIZER;

/* Options whose value is an array of the client's pointers (symbol names and addresses,
 * referenced names): they cannot travel as values. */
static bool jit_option_is_pointer_array(int o)
{
    return o == 17 || o == 18 || o == 25 || o == 27;
}

/* n (id, value) pairs into opts/vals; log buffers become the server's own (allocated here,
 * freed with the link). `logs`: log options are allowed (cuLinkCreate's, not an input's). */
static CUresult link_options(struct call *c, struct link *l, bool logs)
{
    uint64_t n = om_get_u64(&c->in);

    if (c->in.bad || n > LINK_MAX_OPTIONS)
        return CUDA_ERROR_INVALID_VALUE;
    l->n = (unsigned)n;
    for (unsigned i = 0; i < l->n; i++) {
        uint64_t o = om_get_u64(&c->in), v = om_get_u64(&c->in);
        if (c->in.bad || o >= JIT_LAST_OPTION + 1)
            return CUDA_ERROR_INVALID_VALUE;
        if (jit_option_is_pointer_array((int)o)) {
            client_err(c->s, "client %d: JIT option %d (an array of pointers) is not supported",
                       (int)c->s->pid, (int)o);
            return CUDA_ERROR_NOT_SUPPORTED;
        }
        if (!logs && (o == JIT_INFO_LOG_BUFFER || o == JIT_ERROR_LOG_BUFFER))
            return CUDA_ERROR_INVALID_VALUE; /* the client answers an input's logs itself */
        l->opts[i] = (CUjit_option)o;
        l->vals[i] = (void *)(uintptr_t)v;
    }
    for (unsigned i = 0; i < l->n; i++) {
        int size_opt = l->opts[i] == JIT_INFO_LOG_BUFFER    ? JIT_INFO_LOG_BUFFER_SIZE_BYTES
                       : l->opts[i] == JIT_ERROR_LOG_BUFFER ? JIT_ERROR_LOG_BUFFER_SIZE_BYTES
                                                            : -1;
        char **buf = l->opts[i] == JIT_INFO_LOG_BUFFER ? &l->info : &l->error;
        if (size_opt < 0)
            continue;
        /* the client's size, capped: the driver writes at most that many bytes; the buffer
         * is that size (the link state's count is budgeted, its buffers by this cap) */
        uintptr_t size = 0;
        for (unsigned j = 0; j < l->n; j++) {
            if ((int)l->opts[j] != size_opt)
                continue;
            if ((uintptr_t)l->vals[j] > LINK_LOG_MAX)
                l->vals[j] = (void *)(uintptr_t)LINK_LOG_MAX;
            size = (uintptr_t)l->vals[j];
        }
        if (*buf) /* the same log option twice */
            return CUDA_ERROR_INVALID_VALUE;
        if (!(*buf = calloc(1, size + 1)))
            return CUDA_ERROR_OUT_OF_MEMORY;
        l->vals[i] = *buf;
    }
    return CUDA_SUCCESS;
}

static void link_free(struct link *l)
{
    if (l) {
        free(l->info);
        free(l->error);
        free(l);
    }
}

/* The calling client's link state h (NULL: not its own). */
static struct link *link_find(struct call *c, uint64_t h)
{
    struct link *l;

    if (!om_handles_has(&c->s->own[OM_H_LINKSTATE], h))
        return NULL;
    pthread_mutex_lock(&links_lock);
    for (l = links; l && !(l->s == c->s && l->h == h); l = l->next) {
    }
    pthread_mutex_unlock(&links_lock);
    return l;
}

/* After each step: every option's value as the driver left it (the client takes back those the
 * driver writes), then both logs (the driver NUL-terminates them within their buffers). */
static void link_answer(struct call *c, const struct link *l)
{
    const char *logs[2] = {l->info, l->error};

    om_put_u64(&c->out, l->n);
    for (unsigned i = 0; i < l->n; i++)
        om_put_u64(&c->out, l->opts[i] == JIT_INFO_LOG_BUFFER || l->opts[i] == JIT_ERROR_LOG_BUFFER
                                ? 0
                                : (uint64_t)(uintptr_t)l->vals[i]);
    for (int k = 0; k < 2; k++) {
        size_t len = logs[k] ? strnlen(logs[k], LINK_LOG_MAX) : 0;
        om_put_u64(&c->out, len);
        om_put_bytes(&c->out, logs[k], len);
    }
}

CUresult om_x_cuLinkCreate_v2(struct call *c)
{
    CUresult (*create)(unsigned, CUjit_option *, void **, CUlinkState *) = REAL(cuLinkCreate_v2);
    struct link *l = calloc(1, sizeof(*l));
    CUlinkState st = NULL;
    CUresult rc;

    if (!l)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if ((rc = link_options(c, l, true)) != CUDA_SUCCESS || (rc = ARGS_OK(c)) != CUDA_SUCCESS ||
        (rc = om_own_room(c->s, OM_H_LINKSTATE)) != CUDA_SUCCESS) {
        link_free(l);
        return rc;
    }
    rc = create(l->n, l->opts, l->vals, &st);
    if (rc != CUDA_SUCCESS) {
        link_free(l);
        return rc;
    }
    l->s = c->s;
    l->h = (uint64_t)(uintptr_t)st;
    if ((rc = om_own_add(c, OM_H_LINKSTATE, l->h)) != CUDA_SUCCESS) { /* destroyed there */
        link_free(l);
        return rc;
    }
    pthread_mutex_lock(&links_lock);
    l->next = links;
    links = l;
    pthread_mutex_unlock(&links_lock);
    om_put_u64(&c->out, l->h);
    om_put_u64(&c->out, CUDA_SUCCESS);
    link_answer(c, l);
    return CUDA_SUCCESS;
}

/* state, type, size (the staged bytes), the name's length and bytes, the input's options. */
CUresult om_x_cuLinkAddData_v2(struct call *c)
{
    CUresult (*add)(CUlinkState, CUjitInputType, void *, size_t, const char *, unsigned,
                    CUjit_option *, void **) = REAL(cuLinkAddData_v2);
    uint64_t h = om_get_u64(&c->in), type = om_get_u64(&c->in), size = om_get_u64(&c->in);
    uint64_t nlen = om_get_u64(&c->in);
    const void *np = nlen < 1024 ? om_get_bytes(&c->in, nlen) : NULL;
    struct link in = {0}, *l;
    char name[1024];
    CUresult rc = link_options(c, &in, false);

    if (rc == CUDA_SUCCESS)
        rc = ARGS_OK(c);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!np || memchr(np, '\0', nlen) || type >= JIT_INPUT_TYPES || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(name, np, nlen);
    name[nlen] = '\0';
    if (!(l = link_find(c, h)))
        return CUDA_ERROR_INVALID_HANDLE;
    if ((rc = om_staged(c, size, CUDA_ERROR_INVALID_VALUE)) != CUDA_SUCCESS)
        return rc;
    /* the driver reads `size` bytes: all of them staged */
    rc = add((CUlinkState)(uintptr_t)h, (CUjitInputType)type, c->s->stage, (size_t)size, name, in.n,
             in.opts, in.vals);
    /* The driver's answer travels in the reply, with the logs: an error's log is the point of
     * the log, and an error answer carries no bytes. */
    om_put_u64(&c->out, (uint64_t)rc);
    link_answer(c, l);
    return CUDA_SUCCESS;
}

/* state, offset: completes the link at the first call; answers the logs, the cubin's size and
 * its bytes from offset (at most LINK_CHUNK). */
CUresult om_x_cuLinkComplete(struct call *c)
{
    CUresult (*complete)(CUlinkState, void **, size_t *) = REAL(cuLinkComplete);
    uint64_t h = om_get_u64(&c->in), off = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    struct link *l;
    size_t n;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!(l = link_find(c, h)))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!l->cubin) {
        if (off != 0)
            return CUDA_ERROR_INVALID_VALUE;
        rc = complete((CUlinkState)(uintptr_t)h, &l->cubin, &l->cubin_size);
        if (rc == CUDA_SUCCESS && !l->cubin)
            rc = CUDA_ERROR_UNKNOWN;
        if (rc != CUDA_SUCCESS) { /* the driver's answer and its logs (as cuLinkAddData) */
            l->cubin = NULL;
            om_put_u64(&c->out, (uint64_t)rc);
            link_answer(c, l);
            return CUDA_SUCCESS;
        }
    }
    if (off > l->cubin_size)
        return CUDA_ERROR_INVALID_VALUE;
    n = l->cubin_size - off < LINK_CHUNK ? l->cubin_size - off : LINK_CHUNK;
    om_put_u64(&c->out, CUDA_SUCCESS);
    link_answer(c, l);
    om_put_u64(&c->out, l->cubin_size);
    om_put_bytes(&c->out, (const uint8_t *)l->cubin + off, n);
    return CUDA_SUCCESS;
}

CUresult om_x_cuLinkDestroy(struct call *c)
{
    CUresult (*destroy)(CUlinkState) = REAL(cuLinkDestroy);
    uint64_t h = om_get_u64(&c->in);
    CUresult rc = ARGS_OK(c);
    struct link **p, *l = NULL;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (!link_find(c, h))
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&links_lock);
    for (p = &links; *p; p = &(*p)->next) {
        if ((*p)->s == c->s && (*p)->h == h) {
            l = *p;
            *p = l->next;
            break;
        }
    }
    pthread_mutex_unlock(&links_lock);
    om_own_drop(c->s, OM_H_LINKSTATE, h);
    rc = destroy((CUlinkState)(uintptr_t)h);
    link_free(l);
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, 0);
    return rc;
}

/* The session's end: own.c has destroyed its link states (cuLinkDestroy); their options and
 * log buffers go now. */
void om_link_forget_session(struct session *s)
{
    struct link **p = &links, *dead = NULL;

    pthread_mutex_lock(&links_lock);
    while (*p) {
        struct link *l = *p;
        if (l->s == s) {
            *p = l->next;
            l->next = dead;
            dead = l;
        } else {
            p = &l->next;
        }
    }
    pthread_mutex_unlock(&links_lock);
    while (dead) {
        struct link *next = dead->next;
        link_free(dead);
        dead = next;
    }
}
