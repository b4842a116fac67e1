/* SPDX-License-Identifier: MIT */
/* Remote mode, the linker family (api/remote/linker.tsv): the JIT linker: a link state's inputs go
 * to the server, its logs and image come back. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/wire.h"
#include "openmps/ops.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "module.h"
#include "../shim.h"

/* ------------------------------------------------------------------ the linker */

/*
 * The program's option arrays hold pointers of this process (log buffers) and slots the driver
 * writes back: the server gets the values only and keeps its own buffers; each answer carries
 * the server's logs and written-back values, copied here into the program's buffers and slots
 * (which must stay valid while the link state lives, as for the driver). The cubin of
 * cuLinkComplete is copied into memory this record owns until cuLinkDestroy.
 */
#define LINK_MAX_OPTIONS 32
#define LINK_LOG_MAX 65536u
#define LINK_CHUNK (256u * 1024u)
#define LINK_REPLY (64u + 8u * LINK_MAX_OPTIONS + 2u * (8u + LINK_LOG_MAX) + LINK_CHUNK)
/* cuLinkAddData's: the link state's options and logs, then the input's */
#define LINK_REPLY2 (64u + 2u * (8u * LINK_MAX_OPTIONS + 2u * (8u + LINK_LOG_MAX)))
#define JIT_THREADS_PER_BLOCK 1

struct clink {
    CUlinkState h;
    unsigned n;
    CUjit_option *opts;
    void **vals;
    unsigned caps[2]; /* the program's log sizes (info, error), as given */
    void *cubin;
    size_t cubin_size;
    struct clink *next;
};
static struct clink *clinks;
static pthread_mutex_t clinks_lock = PTHREAD_MUTEX_INITIALIZER;

static struct clink *clink_find(CUlinkState h)
{
    struct clink *l;

    pthread_mutex_lock(&clinks_lock);
    for (l = clinks; l && l->h != h; l = l->next) {
    }
    pthread_mutex_unlock(&clinks_lock);
    return l;
}

unsigned om_jit_log_size(unsigned n, const CUjit_option *o, void **v, int size_opt)
{
    uintptr_t size = 0;

    for (unsigned i = 0; i < n; i++)
        if (o[i] == size_opt)
            size = (uintptr_t)v[i];
    return (unsigned)(size < LINK_LOG_MAX ? size : LINK_LOG_MAX);
}

CUresult om_jit_put_options(struct om_wbuf *req, unsigned n, const CUjit_option *o, void **v)
{
    if (n > LINK_MAX_OPTIONS || (n && (!o || !v)))
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(req, n);
    for (unsigned i = 0; i < n; i++) {
        uint64_t val = (uint64_t)(uintptr_t)v[i];
        if (o[i] == JIT_INFO_LOG_BUFFER || o[i] == JIT_ERROR_LOG_BUFFER || o[i] == JIT_WALL_TIME)
            val = 0;
        else if (o[i] == JIT_INFO_LOG_BUFFER_SIZE_BYTES || o[i] == JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
            val = om_jit_log_size(n, o, v, o[i]);
        om_put_u64(req, (uint64_t)(uint32_t)o[i]);
        om_put_u64(req, val);
    }
    return CUDA_SUCCESS;
}

CUresult om_jit_apply_answer(unsigned n, const CUjit_option *opts, void **vals,
                             const unsigned caps[2], struct om_rbuf *in)
{
    if (om_get_u64(in) != n || in->bad)
        return CUDA_ERROR_UNKNOWN;
    for (unsigned i = 0; i < n; i++) {
        uint64_t v = om_get_u64(in);
        int o = opts[i];
        if (o == JIT_INFO_LOG_BUFFER_SIZE_BYTES || o == JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
            unsigned cap = caps[o == JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
            vals[i] = (void *)(uintptr_t)(v < cap ? v : cap);
        } else if (o == JIT_WALL_TIME || o == JIT_THREADS_PER_BLOCK) {
            vals[i] = (void *)(uintptr_t)v;
        }
    }
    for (int k = 0; k < 2; k++) {
        uint64_t len = om_get_u64(in);
        const void *b = len <= LINK_LOG_MAX ? om_get_bytes(in, (size_t)len) : NULL;
        if (in->bad || !b)
            return CUDA_ERROR_UNKNOWN;
        for (unsigned i = 0; i < n; i++) {
            if (opts[i] != (k ? JIT_ERROR_LOG_BUFFER : JIT_INFO_LOG_BUFFER) || !vals[i] || !caps[k])
                continue;
            size_t m = len < caps[k] - 1 ? (size_t)len : caps[k] - 1;
            memcpy(vals[i], b, m);
            ((char *)vals[i])[m] = '\0';
        }
    }
    return CUDA_SUCCESS;
}

CUresult om_r_cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options, void **optionValues,
                              CUlinkState *stateOut)
{
    REQ(req, 16 + 16 * LINK_MAX_OPTIONS);
    struct clink *l;
    uint8_t *reply;
    uint32_t got = 0;
    struct om_rbuf in;
    CUresult rc;

    if (!stateOut)
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = om_jit_put_options(&req, numOptions, options, optionValues)) != CUDA_SUCCESS)
        return rc;
    if (!(l = calloc(1, sizeof(*l))) || !(reply = malloc(LINK_REPLY))) {
        free(l);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    l->n = numOptions, l->opts = options, l->vals = optionValues;
    l->caps[0] = om_jit_log_size(numOptions, options, optionValues, JIT_INFO_LOG_BUFFER_SIZE_BYTES);
    l->caps[1] =
        om_jit_log_size(numOptions, options, optionValues, JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
    rc = om_rcall(OM_IDX_cuLinkCreate_v2, &req, reply, LINK_REPLY, &got);
    in = (struct om_rbuf){.p = reply, .len = got};
    if (rc == CUDA_SUCCESS) {
        l->h = (CUlinkState)(uintptr_t)om_get_u64(&in);
        rc = (CUresult)om_get_u64(&in);
        if (rc == CUDA_SUCCESS)
            rc = om_jit_apply_answer(l->n, l->opts, l->vals, l->caps, &in);
    }
    free(reply);
    if (rc != CUDA_SUCCESS) {
        free(l);
        return rc;
    }
    pthread_mutex_lock(&clinks_lock);
    l->next = clinks;
    clinks = l;
    pthread_mutex_unlock(&clinks_lock);
    *stateOut = l->h;
    return CUDA_SUCCESS;
}

CUresult om_r_cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size,
                               const char *name, unsigned int numOptions, CUjit_option *options,
                               void **optionValues)
{
    REQ(req, 48 + 1024 + 16 * LINK_MAX_OPTIONS);
    struct clink *l = clink_find(state);
    size_t nlen = name ? strlen(name) : 0;
    unsigned caps[2];
    uint8_t *reply;
    uint32_t got = 0;
    struct om_rbuf in;
    CUresult rc;

    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!data || size == 0 || nlen >= 1024)
        return CUDA_ERROR_INVALID_VALUE;
    om_put_u64(&req, (uint64_t)(uintptr_t)state);
    om_put_u64(&req, (uint64_t)(uint32_t)type);
    om_put_u64(&req, size);
    om_put_u64(&req, nlen);
    om_put_bytes(&req, name, nlen);
    if ((rc = om_jit_put_options(&req, numOptions, options, optionValues)) != CUDA_SUCCESS)
        return rc;
    caps[0] = om_jit_log_size(numOptions, options, optionValues, JIT_INFO_LOG_BUFFER_SIZE_BYTES);
    caps[1] = om_jit_log_size(numOptions, options, optionValues, JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
    if (!(reply = malloc(LINK_REPLY2)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = om_rcall_staged(OM_IDX_cuLinkAddData_v2, data, size, &req, reply, LINK_REPLY2, &got);
    in = (struct om_rbuf){.p = reply, .len = got};
    if (rc == CUDA_SUCCESS) {
        CUresult driver = (CUresult)om_get_u64(&in);
        rc = om_jit_apply_answer(l->n, l->opts, l->vals, l->caps, &in);
        if (rc == CUDA_SUCCESS) /* the input's own options and logs */
            rc = om_jit_apply_answer(numOptions, options, optionValues, caps, &in);
        if (rc == CUDA_SUCCESS)
            rc = driver;
    }
    free(reply);
    return rc;
}

CUresult om_r_cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path,
                               unsigned int numOptions, CUjit_option *options, void **optionValues)
{
    size_t len = 0;
    CUresult rc;
    char *bytes;

    if (!clink_find(state))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!(bytes = om_module_read_file(path, &rc, &len))) /* this process reads it */
        return rc;
    /* PTX (CU_JIT_INPUT_PTX) is text the driver reads to its NUL: the NUL travels too */
    rc = om_r_cuLinkAddData_v2(state, type, bytes, type == 1 ? len + 1 : len, path, numOptions,
                               options, optionValues);
    free(bytes);
    return rc;
}

CUresult om_r_cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
    struct clink *l = clink_find(state);
    uint8_t *reply;
    size_t off = 0, total = 0;
    CUresult rc = CUDA_SUCCESS;

    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!cubinOut || !sizeOut)
        return CUDA_ERROR_INVALID_VALUE;
    if (l->cubin) { /* completed before: the same bytes */
        *cubinOut = l->cubin;
        *sizeOut = l->cubin_size;
        return CUDA_SUCCESS;
    }
    if (!(reply = malloc(LINK_REPLY)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    do {
        REQ(req, 16);
        uint32_t got = 0;
        struct om_rbuf in;
        const void *chunk;
        uint64_t size, n;
        om_put_u64(&req, (uint64_t)(uintptr_t)state);
        om_put_u64(&req, off);
        rc = om_rcall(OM_IDX_cuLinkComplete, &req, reply, LINK_REPLY, &got);
        if (rc != CUDA_SUCCESS)
            break;
        in = (struct om_rbuf){.p = reply, .len = got};
        rc = (CUresult)om_get_u64(&in);
        CUresult logs = om_jit_apply_answer(l->n, l->opts, l->vals, l->caps, &in);
        if (rc != CUDA_SUCCESS || (rc = logs) != CUDA_SUCCESS)
            break;
        size = om_get_u64(&in);
        chunk = om_get_rest(&in, &n);
        if (in.bad || (off && size != total) || n > size - off || (n == 0 && off < size) ||
            size > (1u << 30)) {
            rc = CUDA_ERROR_UNKNOWN;
            break;
        }
        if (!l->cubin) {
            total = (size_t)size;
            if (!(l->cubin = malloc(total ? total : 1))) {
                rc = CUDA_ERROR_OUT_OF_MEMORY;
                break;
            }
        }
        memcpy((uint8_t *)l->cubin + off, chunk, (size_t)n);
        off += (size_t)n;
    } while (off < total);
    free(reply);
    if (rc != CUDA_SUCCESS) {
        free(l->cubin);
        l->cubin = NULL;
        return rc;
    }
    l->cubin_size = total;
    *cubinOut = l->cubin;
    *sizeOut = total;
    return CUDA_SUCCESS;
}

CUresult om_r_cuLinkDestroy(CUlinkState state)
{
    struct clink **p, *l = NULL;
    CUresult rc;

    if (!clink_find(state))
        return CUDA_ERROR_INVALID_HANDLE;
    rc = om_rcall_u64(OM_IDX_cuLinkDestroy, (uint64_t)(uintptr_t)state, 0, NULL);
    pthread_mutex_lock(&clinks_lock);
    for (p = &clinks; *p; p = &(*p)->next) {
        if ((*p)->h == state) {
            l = *p;
            *p = l->next;
            break;
        }
    }
    pthread_mutex_unlock(&clinks_lock);
    if (l) { /* the cubin the program had goes with the state, as the driver's does */
        free(l->cubin);
        free(l);
    }
    return rc;
}
