/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of the JIT linker (api/remote/linker.tsv). */
#include <stdlib.h>
#include <string.h>

#include "../exec.h"

/* ------------------------------------------------------------------ the linker */

/*
 * A link state's options live in the server: the client sends option values, never pointers
 * of its own (args.c's om_jit_options). The log buffers are the server's (at most
 * OM_JIT_LOG_MAX bytes each, the client's size otherwise), kept with the state as the driver
 * writes into them until cuLinkDestroy; after each step the logs and the options the driver
 * writes back (THREADS_PER_BLOCK, WALL_TIME, the logs' sizes) go back to the client, which
 * fills its own buffers (om_jit_answer). An input's own options may name logs too: buffers of
 * the server's for that cuLinkAddData, answered after the link state's.
 */
#define LINK_CHUNK (256u * 1024u) /* cubin bytes per answer of cuLinkComplete */
#define JIT_INPUT_TYPES 6         /* CU_JIT_NUM_INPUT_TYPES */

struct link {
    struct session *s;
    uint64_t h;
    struct om_jit j; /* its options, the server's log buffers (args.c) */
    void *cubin;     /* the driver's, after cuLinkComplete */
    size_t cubin_size;
    struct link *next;
};
static struct link *links;
static pthread_mutex_t links_lock = PTHREAD_MUTEX_INITIALIZER;

static void link_free(struct link *l)
{
    if (l) {
        om_jit_free(&l->j);
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

CUresult om_x_cuLinkCreate_v2(struct call *c)
{
    CUresult (*create)(unsigned, CUjit_option *, void **, CUlinkState *) = REAL(cuLinkCreate_v2);
    struct link *l = calloc(1, sizeof(*l));
    CUlinkState st = NULL;
    CUresult rc;

    if (!l)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if ((rc = om_jit_options(c, &l->j)) != CUDA_SUCCESS || (rc = ARGS_OK(c)) != CUDA_SUCCESS ||
        (rc = om_own_room(c->s, OM_H_LINKSTATE)) != CUDA_SUCCESS) {
        link_free(l);
        return rc;
    }
    rc = create(l->j.n, l->j.opts, l->j.vals, &st);
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
    om_jit_answer(c, &l->j);
    return CUDA_SUCCESS;
}

/* state, type, size (the staged bytes), the name's length and bytes, the input's options (its
 * own logs too: the driver writes what compiling this input says there, in buffers of the
 * server's, answered after the link state's). */
CUresult om_x_cuLinkAddData_v2(struct call *c)
{
    CUresult (*add)(CUlinkState, CUjitInputType, void *, size_t, const char *, unsigned,
                    CUjit_option *, void **) = REAL(cuLinkAddData_v2);
    uint64_t h = om_get_u64(&c->in), type = om_get_u64(&c->in), size = om_get_u64(&c->in);
    uint64_t nlen = om_get_u64(&c->in);
    const void *np = nlen < 1024 ? om_get_bytes(&c->in, nlen) : NULL;
    struct om_jit in = {0};
    struct link *l;
    char name[1024];
    CUresult rc = om_jit_options(c, &in);

    if (rc == CUDA_SUCCESS)
        rc = ARGS_OK(c);
    if (rc != CUDA_SUCCESS)
        goto out;
    rc = CUDA_ERROR_INVALID_VALUE;
    if (!np || memchr(np, '\0', nlen) || type >= JIT_INPUT_TYPES || size == 0)
        goto out;
    memcpy(name, np, nlen);
    name[nlen] = '\0';
    rc = CUDA_ERROR_INVALID_HANDLE;
    if (!(l = link_find(c, h)))
        goto out;
    if ((rc = om_staged(c, size, CUDA_ERROR_INVALID_VALUE)) != CUDA_SUCCESS)
        goto out;
    /* the driver reads `size` bytes: all of them staged */
    rc = add((CUlinkState)(uintptr_t)h, (CUjitInputType)type, c->s->stage, (size_t)size, name, in.n,
             in.opts, in.vals);
    /* The driver's answer travels in the reply, with the logs: an error's log is the point of
     * the log, and an error answer carries no bytes. */
    om_put_u64(&c->out, (uint64_t)rc);
    om_jit_answer(c, &l->j);
    om_jit_answer(c, &in);
    rc = CUDA_SUCCESS;
out:
    om_jit_free(&in);
    return rc;
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
            om_jit_answer(c, &l->j);
            return CUDA_SUCCESS;
        }
    }
    if (off > l->cubin_size)
        return CUDA_ERROR_INVALID_VALUE;
    n = l->cubin_size - off < LINK_CHUNK ? l->cubin_size - off : LINK_CHUNK;
    om_put_u64(&c->out, CUDA_SUCCESS);
    om_jit_answer(c, &l->j);
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
