/* SPDX-License-Identifier: MIT */
/* Remote mode, the modules family (api/remote/modules.tsv): loading modules and libraries (files
 * read by this process, images staged), kernels and their parameter layouts, globals, the
 * attributes cache, and the queries of modules, libraries, kernels and functions that the client
 * answers or marshals itself. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/gen/entries.h"
#include "../../common/image.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "module.h"
#include "../shim.h"
#include "openmps/ops.h"

/* ------------------------------------------------------------------ JIT options, files */

/*
 * The answers a load gives through its JIT options when the program asked for no log: the
 * server loads the image without the program's options (its arrays hold pointers of this
 * process), so no log is written: each log buffer gets an empty string, each log size (an OUT
 * value, written into the option's slot as the driver does) 0, the wall time 0 ms. Without this
 * a program that prints the logs would read what its buffers held before. A load that asks for
 * a log goes through load_with_logs below.
 */
void om_jit_options_answer(unsigned n, const int *o, void **v)
{
    if (!o || !v)
        return;
    for (unsigned i = 0; i < n; i++) {
        unsigned size = 0;
        int other = o[i] == JIT_INFO_LOG_BUFFER    ? JIT_INFO_LOG_BUFFER_SIZE_BYTES
                    : o[i] == JIT_ERROR_LOG_BUFFER ? JIT_ERROR_LOG_BUFFER_SIZE_BYTES
                                                   : -1;

        if (other >= 0 && v[i]) {
            for (unsigned j = 0; j < n; j++)
                if (o[j] == other)
                    size = (unsigned)(uintptr_t)v[j];
            if (size > 0)
                ((char *)v[i])[0] = '\0';
        }
    }
    for (unsigned i = 0; i < n; i++) {
        if (o[i] == JIT_INFO_LOG_BUFFER_SIZE_BYTES || o[i] == JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
            v[i] = (void *)(uintptr_t)0;
        } else if (o[i] == JIT_WALL_TIME) {
            float ms = 0.0f;
            v[i] = NULL;
            memcpy(&v[i], &ms, sizeof(ms));
        }
    }
}

#define CUDA_ERROR_FILE_NOT_FOUND 301
#define FILE_MAX (1u << 30)

/* A module file, read by this process (the server never opens a client's path), with a NUL
 * after its bytes (a PTX image ends at its NUL). NULL with *rc set when it cannot be read. */
char *om_module_read_file(const char *path, CUresult *rc, size_t *ret_len)
{
    FILE *f;
    char *buf = NULL;
    size_t len = 0, cap = 0;

    if (!path) {
        *rc = CUDA_ERROR_INVALID_VALUE;
        return NULL;
    }
    if (!(f = fopen(path, "rb"))) {
        *rc = CUDA_ERROR_FILE_NOT_FOUND;
        return NULL;
    }
    for (;;) {
        size_t got;
        if (cap - len < 2) {
            char *more;
            cap = cap ? cap * 2 : 65536;
            if (cap > FILE_MAX + 2u || !(more = realloc(buf, cap))) {
                free(buf);
                fclose(f);
                *rc = cap > FILE_MAX + 2u ? CUDA_ERROR_INVALID_IMAGE : CUDA_ERROR_OUT_OF_MEMORY;
                return NULL;
            }
            buf = more;
        }
        got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0)
            break;
    }
    bool failed = ferror(f) != 0;
    fclose(f);
    if (failed || len == 0) {
        free(buf);
        *rc = failed ? CUDA_ERROR_FILE_NOT_FOUND : CUDA_ERROR_INVALID_IMAGE;
        return NULL;
    }
    buf[len] = '\0';
    if (ret_len)
        *ret_len = len;
    *rc = CUDA_SUCCESS;
    return buf;
}

CUresult om_r_cuModuleLoad(CUmodule *module, const char *fname)
{
    CUresult rc;
    char *image;

    if (!module)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(image = om_module_read_file(fname, &rc, NULL)))
        return rc;
    rc = om_r_cuModuleLoadData(module, image);
    free(image);
    return rc;
}

CUresult om_r_cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
                                    CUjit_option *jitOptions, void **jitOptionsValues,
                                    unsigned int numJitOptions, CUlibraryOption *libraryOptions,
                                    void **libraryOptionValues, unsigned int numLibraryOptions)
{
    CUresult rc;
    char *image;

    if (!library)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(image = om_module_read_file(fileName, &rc, NULL)))
        return rc;
    rc = om_r_cuLibraryLoadData(library, image, jitOptions, jitOptionsValues, numJitOptions,
                                libraryOptions, libraryOptionValues, numLibraryOptions);
    free(image);
    return rc;
}

/* ------------------------------------------------------------------ kernels' own queries */

CUresult om_r_cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
                                   size_t *paramSize)
{
    return om_kernel_param((uint64_t)(uintptr_t)kernel, paramIndex, paramOffset, paramSize);
}

CUresult om_r_cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
                                 size_t *paramSize)
{
    return om_kernel_param((uint64_t)(uintptr_t)func, paramIndex, paramOffset, paramSize);
}

#define FUNCTION_LOADING_STATE_LOADED 1

CUresult om_r_cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction function)
{
    size_t off, size;

    if (!state)
        return CUDA_ERROR_INVALID_VALUE;
    /* A handle this process obtained (its layout is known); the server loads eagerly. */
    if (om_kernel_param((uint64_t)(uintptr_t)function, SIZE_MAX, &off, &size) ==
        CUDA_ERROR_INVALID_HANDLE)
        return CUDA_ERROR_INVALID_HANDLE;
    *state = FUNCTION_LOADING_STATE_LOADED;
    return CUDA_SUCCESS;
}

CUresult om_r_cuFuncLoad(CUfunction function)
{
    size_t off, size;

    if (om_kernel_param((uint64_t)(uintptr_t)function, SIZE_MAX, &off, &size) ==
        CUDA_ERROR_INVALID_HANDLE)
        return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS; /* already loaded: the server loads every image eagerly */
}

CUresult om_r_cuFuncSetSharedMemConfig(CUfunction hfunc, CUsharedconfig config)
{
    size_t off, size;

    if (config < 0 || config > 2) /* CU_SHARED_MEM_CONFIG_DEFAULT..EIGHT_BYTE_BANK_SIZE */
        return CUDA_ERROR_INVALID_VALUE;
    if (om_kernel_param((uint64_t)(uintptr_t)hfunc, SIZE_MAX, &off, &size) ==
        CUDA_ERROR_INVALID_HANDLE)
        return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS; /* a preference without effect since Volta (the driver ignores it) */
}

/* ------------------------------------------------------------------ libraries' queries */

/* Modules are libraries in the server: a module handle is its library's, a function its
 * kernel's. */
CUresult om_r_cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib)
{
    return om_rpc_cuLibraryGetKernelCount(count, lib);
}

CUresult om_r_cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
    return om_rpc_cuLibraryGetKernelCount(count, (CUlibrary)mod);
}

CUresult om_r_cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
    unsigned n = 0;
    CUresult rc;

    if (!pMod)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = om_rpc_cuLibraryGetKernelCount(&n, library)) != CUDA_SUCCESS)
        return rc; /* not a library of this client's */
    *pMod = (CUmodule)library;
    return CUDA_SUCCESS;
}

CUresult om_r_cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel)
{
    return om_rpc_cuKernelGetLibrary(pLib, kernel);
}

CUresult om_r_cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
    return om_rpc_cuKernelGetLibrary((CUlibrary *)hmod, (CUkernel)hfunc);
}

/* Kernels' names, kept while the process runs (the driver's strings live as long as their
 * library, which the server never unloads). */
struct kname {
    uint64_t kernel;
    char *name;
    struct kname *next;
};
static struct kname *knames;
static pthread_mutex_t knames_lock = PTHREAD_MUTEX_INITIALIZER;

CUresult om_r_cuKernelGetName(const char **name, CUkernel hfunc)
{
    uint64_t k = (uint64_t)(uintptr_t)hfunc;
    char reply[4096];
    uint32_t got = 0;
    struct kname *e;
    REQ(req, 8);
    CUresult rc;

    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&knames_lock);
    for (e = knames; e && e->kernel != k; e = e->next) {
    }
    pthread_mutex_unlock(&knames_lock);
    if (e) {
        *name = e->name;
        return CUDA_SUCCESS;
    }
    om_put_u64(&req, k);
    rc = om_rcall(OM_IDX_cuKernelGetName, &req, reply, sizeof(reply) - 1, &got);
    if (rc != CUDA_SUCCESS)
        return rc;
    reply[got] = '\0';
    if (!(e = calloc(1, sizeof(*e))) || !(e->name = strdup(reply))) {
        free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    e->kernel = k;
    pthread_mutex_lock(&knames_lock);
    e->next = knames;
    knames = e;
    pthread_mutex_unlock(&knames_lock);
    *name = e->name;
    return CUDA_SUCCESS;
}

CUresult om_r_cuFuncGetName(const char **name, CUfunction hfunc)
{
    return om_r_cuKernelGetName(name, (CUkernel)hfunc);
}

#define ENUMERATE_MAX 4096

/* The handles from the server, then each kernel's parameter layout through its name (what a
 * launch of it needs here). */
CUresult om_r_cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels, CUlibrary lib)
{
    uint64_t *reply;
    uint32_t got = 0;
    REQ(req, 16);
    CUresult rc;

    if (!kernels || numKernels == 0 || numKernels > ENUMERATE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(reply = malloc(8 * (size_t)numKernels)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    om_put_u64(&req, (uint64_t)(uintptr_t)lib);
    om_put_u64(&req, numKernels);
    rc = om_rcall(OM_IDX_cuLibraryEnumerateKernels, &req, reply, 8 * (size_t)numKernels, &got);
    if (rc == CUDA_SUCCESS && got != 8 * numKernels)
        rc = CUDA_ERROR_UNKNOWN;
    for (unsigned i = 0; rc == CUDA_SUCCESS && i < numKernels; i++) {
        const char *name = NULL;
        CUkernel k = NULL;
        rc = om_r_cuKernelGetName(&name, (CUkernel)(uintptr_t)reply[i]);
        if (rc == CUDA_SUCCESS)
            rc = om_r_cuLibraryGetKernel(&k, lib, name);
        if (rc == CUDA_SUCCESS && (uint64_t)(uintptr_t)k != reply[i])
            rc = CUDA_ERROR_UNKNOWN; /* two kernels of one name: not told apart */
        if (rc == CUDA_SUCCESS)
            kernels[i] = k;
    }
    free(reply);
    return rc;
}

CUresult om_r_cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions,
                                         CUmodule mod)
{
    return om_r_cuLibraryEnumerateKernels((CUkernel *)functions, numFunctions, (CUlibrary)mod);
}

/* ------------------------------------------------------------------ loading, kernels, attributes
 */

CUresult om_r_cuModuleGetLoadingMode(int *mode)
{
    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    /* What the driver answers by default. The server loads every image
     * eagerly anyway; the runtime takes its usual (measured) path with lazy. */
    *mode = CU_MODULE_LAZY_LOADING;
    return CUDA_SUCCESS;
}

/* The size of a module image from its own headers (common/image.c), a fatbin wrapper followed
 * to its fatbin (docs/driver-facts.md). 0: not an image of at most 1 GiB. */
static size_t image_size(const void *code, const void **ret_start)
{
    const uint8_t *p = code;
    uint32_t magic;
    uint64_t n;

    memcpy(&magic, p, 4);
    if (magic == OM_FATBIN_WRAPPER_MAGIC) {
        const void *data;
        memcpy(&data, p + 8, sizeof(data));
        p = data;
    }
    *ret_start = p;
    n = om_image_extent(p, 1u << 30);
    return n == UINT64_MAX ? 0 : (size_t)n;
}

static CUresult load_image(int index, void **handle, const void *code)
{
    const void *start;
    size_t size;
    uint64_t v = 0, k1, k2;
    uint32_t got = 0;
    REQ(ask, 32);
    REQ(req, 32);
    CUresult rc;

    if (!handle || !code)
        return CUDA_ERROR_INVALID_VALUE;
    size = image_size(code, &start);
    if (size == 0 || size > (1u << 30))
        return CUDA_ERROR_INVALID_IMAGE;
    /* Its keys first: an image the server has loaded (another client's, or an earlier run's
     * from the module cache) costs no copy and no hashing there. */
    om_image_keys(start, size, &k1, &k2);
    om_put_u64(&ask, (uint64_t)size);
    om_put_u64(&ask, k1);
    om_put_u64(&ask, k2);
    om_put_u64(&ask, 0);
    rc = om_rcall(index, &ask, &v, sizeof(v), &got);
    if (rc == CUDA_SUCCESS && got != sizeof(v))
        return CUDA_ERROR_UNKNOWN;
    if (rc != CUDA_SUCCESS || v) {
        if (rc == CUDA_SUCCESS) {
            *handle = (void *)(uintptr_t)v;
            om_shim_log("a module image of %zu bytes the server had: sent by its keys", size);
        }
        return rc;
    }
    om_put_u64(&req, (uint64_t)size);
    om_put_u64(&req, k1);
    om_put_u64(&req, k2);
    om_put_u64(&req, 1);
    rc = om_rcall_staged(index, start, size, &req, &v, sizeof(v), &got);
    if (rc == CUDA_SUCCESS && got != sizeof(v))
        return CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS)
        *handle = (void *)(uintptr_t)v;
    return rc;
}

#define JIT_SENT_MAX 32
#define JIT_LOG_MAX 65536u
#define JIT_REPLY (24u + 8u * JIT_SENT_MAX + 2u * (8u + JIT_LOG_MAX))

/* Whether the options ask for a log: a buffer with a size. */
static bool wants_log(unsigned n, const int *o, void **v)
{
    for (unsigned i = 0; o && v && i < n; i++)
        if ((o[i] == JIT_INFO_LOG_BUFFER_SIZE_BYTES || o[i] == JIT_ERROR_LOG_BUFFER_SIZE_BYTES) &&
            (uintptr_t)v[i] > 0)
            for (unsigned j = 0; j < n; j++)
                if (o[j] == o[i] - 1 && v[j])
                    return true;
    return false;
}

/* Options whose values are arrays of this process's pointers: not sent (the server refuses
 * them; without logs they were never sent either). */
static bool pointer_array(int o)
{
    return o == 17 || o == 18 || o == 25 || o == 27;
}

/*
 * A load whose program asked for a log (cuModuleLoadDataEx, cuLibraryLoadData's jitOptions):
 * the options go with the staged image as values (the logs' buffers are the server's), and the
 * answer brings back what the driver wrote: the logs into the program's buffers (within their
 * sizes, NUL-terminated), the filled sizes, the wall time into the options' slots, as the
 * driver does (src/server/api/modules.c, load_staged).
 */
static CUresult load_with_logs(void **handle, const void *code, unsigned n, const int *o, void **v)
{
    const void *start;
    size_t size = image_size(code, &start);
    unsigned sent = 0, idx[JIT_SENT_MAX], caps[2];
    CUjit_option sopts[JIT_SENT_MAX];
    void *svals[JIT_SENT_MAX];
    uint64_t k1, k2;
    uint32_t got = 0;
    uint8_t *reply;
    REQ(req, 48 + 16 * JIT_SENT_MAX);
    CUresult rc;

    if (!handle || !code)
        return CUDA_ERROR_INVALID_VALUE;
    if (size == 0 || size > (1u << 30))
        return CUDA_ERROR_INVALID_IMAGE;
    for (unsigned i = 0; i < n; i++)
        if (!pointer_array(o[i]) && sent < JIT_SENT_MAX) {
            sopts[sent] = o[i], svals[sent] = v[i];
            idx[sent++] = i;
        }
    caps[0] = om_jit_log_size(sent, sopts, svals, JIT_INFO_LOG_BUFFER_SIZE_BYTES);
    caps[1] = om_jit_log_size(sent, sopts, svals, JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
    om_image_keys(start, size, &k1, &k2);
    om_put_u64(&req, (uint64_t)size);
    om_put_u64(&req, k1);
    om_put_u64(&req, k2);
    om_put_u64(&req, 1);
    if ((rc = om_jit_put_options(&req, sent, sopts, svals)) != CUDA_SUCCESS)
        return rc;
    if (!(reply = malloc(JIT_REPLY)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = om_rcall_staged(OM_IDX_cuLibraryLoadData, start, size, &req, reply, JIT_REPLY, &got);
    if (rc == CUDA_SUCCESS) {
        struct om_rbuf in = {.p = reply, .len = got};
        CUresult driver = (CUresult)om_get_u64(&in);
        uint64_t lib = om_get_u64(&in);
        rc = om_jit_apply_answer(sent, sopts, svals, caps, &in);
        for (unsigned k = 0; rc == CUDA_SUCCESS && k < sent; k++)
            v[idx[k]] = svals[k]; /* what the driver wrote back */
        if (rc == CUDA_SUCCESS && driver == CUDA_SUCCESS)
            *handle = (void *)(uintptr_t)lib;
        if (rc == CUDA_SUCCESS)
            rc = driver;
    }
    free(reply);
    return rc;
}

CUresult om_r_cuLibraryLoadData(CUlibrary *lib, const void *code, CUjit_option *jo, void **jv,
                                unsigned njo, CUlibraryOption *lo, void **lv, unsigned nlo)
{
    CUresult rc;

    (void)lo, (void)lv, (void)nlo; /* the server loads eagerly */
    if (wants_log(njo, (const int *)jo, jv))
        return load_with_logs((void **)lib, code, njo, (const int *)jo, jv);
    rc = load_image(OM_IDX_cuLibraryLoadData, lib, code);
    om_jit_options_answer(njo, jo, jv);
    return rc;
}

CUresult om_r_cuModuleLoadData(CUmodule *mod, const void *image)
{
    return load_image(OM_IDX_cuLibraryLoadData, mod, image);
}

CUresult om_r_cuModuleLoadDataEx(CUmodule *mod, const void *image, unsigned n, CUjit_option *o,
                                 void **v)
{
    CUresult rc;

    if (wants_log(n, (const int *)o, v))
        return load_with_logs((void **)mod, image, n, (const int *)o, v);
    rc = load_image(OM_IDX_cuLibraryLoadData, mod, image);
    om_jit_options_answer(n, o, v);
    return rc;
}

CUresult om_r_cuModuleLoadFatBinary(CUmodule *mod, const void *image)
{
    return load_image(OM_IDX_cuLibraryLoadData, mod, image);
}

static void attr_cache_clear(void);

CUresult om_r_cuLibraryUnload(CUlibrary lib)
{
    attr_cache_clear(); /* its functions' handles may come back for another image's */
    return om_rpc_cuLibraryUnload(lib);
}

CUresult om_r_cuModuleUnload(CUmodule mod)
{
    return om_r_cuLibraryUnload(mod); /* modules are libraries in the server */
}

/* Parameter layouts of the kernels this process obtained, by handle (struct om_layout,
 * remote.h). */
#define LAYOUT_BUCKETS 256
static struct om_layout *layouts[LAYOUT_BUCKETS];
static pthread_mutex_t layout_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned bucket(uint64_t k)
{
    return (unsigned)((k >> 4) ^ (k >> 12)) % LAYOUT_BUCKETS;
}

const struct om_layout *om_find_layout(uint64_t k)
{
    const struct om_layout *l;

    pthread_mutex_lock(&layout_lock);
    for (l = layouts[bucket(k)]; l && l->kernel != k; l = l->next) {
    }
    pthread_mutex_unlock(&layout_lock);
    return l;
}

/* Reply of a kernel lookup: handle, nparams, then offset and size per parameter. */
static CUresult get_kernel(int index, void **out, uint64_t owner, const char *name)
{
    uint64_t reply[2 + 2 * 256];
    uint32_t got = 0;
    REQ(req, 16 + 1024);
    struct om_layout *l;
    CUresult rc;

    if (!out || !name)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, owner);
    om_put_bytes(&req, name, strlen(name));
    rc = om_rcall(index, &req, reply, sizeof(reply), &got);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (got < 16 || reply[1] > 256 || got != 16 + 16 * reply[1])
        return CUDA_ERROR_UNKNOWN;
    *out = (void *)(uintptr_t)reply[0];
    if (om_find_layout(reply[0]))
        return CUDA_SUCCESS;
    l = calloc(1, sizeof(*l));
    if (!l)
        return CUDA_ERROR_OUT_OF_MEMORY;
    l->kernel = reply[0];
    l->nparams = (uint32_t)reply[1];
    l->offsets = calloc(2 * (size_t)l->nparams + 1, sizeof(uint32_t));
    if (!l->offsets) {
        free(l);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (uint32_t i = 0; i < l->nparams; i++) {
        uint32_t off = (uint32_t)reply[2 + 2 * i], size = (uint32_t)reply[3 + 2 * i];
        l->offsets[2 * i] = off;
        l->offsets[2 * i + 1] = size;
        if (off + size > l->total)
            l->total = off + size;
    }
    pthread_mutex_lock(&layout_lock);
    l->next = layouts[bucket(l->kernel)];
    layouts[bucket(l->kernel)] = l;
    pthread_mutex_unlock(&layout_lock);
    return CUDA_SUCCESS;
}

CUresult om_r_cuLibraryGetKernel(CUkernel *k, CUlibrary lib, const char *name)
{
    return get_kernel(OM_IDX_cuLibraryGetKernel, k, (uint64_t)(uintptr_t)lib, name);
}

CUresult om_r_cuModuleGetFunction(CUfunction *f, CUmodule mod, const char *name)
{
    return get_kernel(OM_IDX_cuLibraryGetKernel, f, (uint64_t)(uintptr_t)mod, name);
}

CUresult om_kernel_param(uint64_t kernel, size_t index, size_t *ret_offset, size_t *ret_size)
{
    const struct om_layout *l = om_find_layout(kernel);

    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    if (index >= l->nparams || !ret_offset || !ret_size)
        return CUDA_ERROR_INVALID_VALUE;
    *ret_offset = l->offsets[2 * index];
    *ret_size = l->offsets[2 * index + 1];
    return CUDA_SUCCESS;
}

CUresult om_r_cuKernelGetFunction(CUfunction *f, CUkernel k)
{
    if (!f)
        return CUDA_ERROR_INVALID_VALUE;
    if (!om_find_layout((uint64_t)(uintptr_t)k))
        return CUDA_ERROR_INVALID_HANDLE;
    *f = (CUfunction)k; /* the server launches kernels and functions alike */
    return CUDA_SUCCESS;
}

CUresult om_r_cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary lib, const char *name)
{
    uint64_t reply[2];
    uint32_t got = 0;
    REQ(req, 16 + 1024);
    CUresult rc;

    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)lib);
    om_put_bytes(&req, name, strlen(name));
    rc = om_rcall(OM_IDX_cuLibraryGetGlobal, &req, reply, sizeof(reply), &got);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (got != sizeof(reply))
        return CUDA_ERROR_UNKNOWN;
    if (om_devrange_add(reply[0], (size_t)reply[1]) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (dptr)
        *dptr = reply[0];
    if (bytes)
        *bytes = (size_t)reply[1];
    return CUDA_SUCCESS;
}

CUresult om_r_cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule mod, const char *name)
{
    return om_r_cuLibraryGetGlobal(dptr, bytes, mod, name);
}

/*
 * A function's attributes are kept here once asked: cuDNN and cuBLASLt ask them around their
 * launches (the runtime's cudaFuncGetAttributes asks 16 of them), a round trip each: measured,
 * 212 per ResNet-18 batch under PyTorch, the most of any call. An attribute fixed when the
 * image was built is the same for every client. One a program may set (the dynamic shared
 * size, the carveout, the cluster's dimensions and policies) is, as in a process of its own,
 * what this client set last, or what it was when first asked: module images, and so function
 * handles, are shared by the server's clients, and the function's value in the server may be
 * another client's. The server keeps the two permissions a launch depends on at the largest
 * value any client set (api/modules.c), so a launch within what this client set never fails
 * for another client's smaller setting. Setting a permission or a hint to the value this
 * client already knows changes nothing in the server: no round trip then. Direct-mapped by
 * handle; a module or library unload empties it (a handle may be reused by the next load).
 */
#define ATTR_COUNT 16 /* CU_FUNC_ATTRIBUTE_MAX: attributes 0 to 15 */
#define ATTR_MAX_DYNAMIC_SHARED 8
#define ATTR_CARVEOUT 9
#define ATTR_NON_PORTABLE_CLUSTER 14
#define ATTR_CLUSTER_POLICY 15
#define ATTR_SLOTS 1024 /* a power of two */

static struct attr_entry {
    uint64_t handle;
    uint64_t dev;
    uint32_t known; /* bit a: v[a] holds attribute a */
    int v[ATTR_COUNT];
} attr_cache[ATTR_SLOTS];
static pthread_mutex_t attr_lock = PTHREAD_MUTEX_INITIALIZER;

static struct attr_entry *attr_slot(uint64_t handle, uint64_t dev)
{
    uint64_t h = (handle >> 4) * 0x9E3779B97F4A7C15ull + dev;

    return &attr_cache[(h >> 32) & (ATTR_SLOTS - 1)];
}

static void attr_cache_clear(void)
{
    pthread_mutex_lock(&attr_lock);
    memset(attr_cache, 0, sizeof(attr_cache));
    pthread_mutex_unlock(&attr_lock);
    om_occupancy_forget();
}

/* Whether the client knows the attribute's value (then in *value). */
static bool attr_known(uint64_t handle, uint64_t dev, int attrib, int *value)
{
    struct attr_entry *e = attr_slot(handle, dev);
    bool hit;

    pthread_mutex_lock(&attr_lock);
    hit = e->handle == handle && e->dev == dev && (e->known >> attrib & 1);
    if (hit)
        *value = e->v[attrib];
    pthread_mutex_unlock(&attr_lock);
    return hit;
}

static void attr_keep(uint64_t handle, uint64_t dev, int attrib, int value)
{
    struct attr_entry *e = attr_slot(handle, dev);

    pthread_mutex_lock(&attr_lock);
    if (e->handle != handle || e->dev != dev)
        *e = (struct attr_entry){.handle = handle, .dev = dev};
    e->v[attrib] = value;
    e->known |= 1u << attrib;
    pthread_mutex_unlock(&attr_lock);
}

static CUresult attr_call(int *value, int attrib, uint64_t handle, uint64_t dev)
{
    bool cached = attrib >= 0 && attrib < ATTR_COUNT && handle;
    CUresult rc;

    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    if (cached && attr_known(handle, dev, attrib, value))
        return CUDA_SUCCESS;
    rc = om_rpc_cuKernelGetAttribute(value, (CUfunction_attribute)attrib,
                                     (CUkernel)(uintptr_t)handle, (CUdevice)dev);
    if (rc == CUDA_SUCCESS && cached)
        attr_keep(handle, dev, attrib, *value);
    return rc;
}

/* A function's attributes are the current device's (a kernel's name their device). */
CUresult om_r_cuFuncGetAttribute(int *value, int attrib, CUfunction f)
{
    return attr_call(value, attrib, (uint64_t)(uintptr_t)f, (uint64_t)om_current_device());
}

CUresult om_r_cuKernelGetAttribute(int *value, int attrib, CUkernel k, CUdevice dev)
{
    return attr_call(value, attrib, (uint64_t)(uintptr_t)k, (uint64_t)dev);
}

static CUresult attr_set(uint64_t handle, uint64_t dev, int attrib, int value)
{
    bool settable_once = attrib == ATTR_MAX_DYNAMIC_SHARED || attrib == ATTR_CARVEOUT ||
                         attrib == ATTR_NON_PORTABLE_CLUSTER || attrib == ATTR_CLUSTER_POLICY;
    int known = 0;
    CUresult rc;

    if (settable_once && handle && attr_known(handle, dev, attrib, &known) && known == value)
        return CUDA_SUCCESS;
    rc = om_rpc_cuKernelSetAttribute((CUfunction_attribute)attrib, value,
                                     (CUkernel)(uintptr_t)handle, (CUdevice)dev);
    if (rc == CUDA_SUCCESS && handle && attrib >= 0 && attrib < ATTR_COUNT)
        attr_keep(handle, dev, attrib, value);
    if (rc == CUDA_SUCCESS)
        om_occupancy_forget(); /* a carveout changes what fits */
    return rc;
}

CUresult om_r_cuFuncSetAttribute(CUfunction f, int attrib, int value)
{
    return attr_set((uint64_t)(uintptr_t)f, (uint64_t)om_current_device(), attrib, value);
}

CUresult om_r_cuKernelSetAttribute(int attrib, int value, CUkernel k, CUdevice dev)
{
    return attr_set((uint64_t)(uintptr_t)k, (uint64_t)dev, attrib, value);
}

CUresult om_r_cuFuncSetCacheConfig(CUfunction f, int config)
{
    (void)f, (void)config; /* a preference the shared context may ignore */
    return CUDA_SUCCESS;
}

CUresult om_r_cuKernelSetCacheConfig(CUkernel k, int config, CUdevice dev)
{
    (void)k, (void)config, (void)dev;
    return CUDA_SUCCESS;
}
