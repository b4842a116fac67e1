/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of the JIT linker (api/remote/linker.tsv). */
#include <stdlib.h>
#include <string.h>

#include "../exec.h"

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
