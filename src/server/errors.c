/* SPDX-License-Identifier: MIT */
/* Errors of posted calls: kept for the stream they belong to, reported by its synchronising calls.
 */
#include <stdlib.h>

#include "exec.h"

/*
 * A posted call (a launch, an asynchronous copy, an event record) gets no answer, so an error
 * it meets in the server waits for a synchronising call to report it, as CUDA reports the
 * errors of asynchronous work. It must reach the caller that can tell it belongs to it: a
 * client's threads share its session, and one slot for the whole session gave thread B's
 * unrelated copy the 701 of thread A's launch while every call of A said success. So:
 *
 *  - an error of a call that enqueued on a stream belongs to that stream (the client's handle,
 *    s->call_stream, the first stream the call resolved: route.c's find_stream), and is reported
 *    once, by the first of: a synchronising call on that stream (cuStreamSynchronize, a
 *    synchronous copy or set issued on it), cuEventSynchronize of an event recorded on it after
 *    the error, cuCtxSynchronize, or the stream's destruction;
 *  - an error of a call that enqueued on no stream (a device change) is the context's:
 *    reported by the next synchronising call of any thread, as before.
 *
 * Each stream keeps its first error (later ones of the same stream are dropped: natively the
 * first failing launch is the one a program sees). The table holds an entry per stream with an
 * error and per event recorded behind one, so it is bounded by the client's handle budgets; it
 * is empty, and costs one comparison per record, while nothing fails.
 */

struct om_posted_error {
    CUstream stream; /* the client's stream the error belongs to */
    CUevent event;   /* NULL: the stream's error; else an event recorded on it after the error */
    CUresult rc;
};

static struct om_posted_error *find(struct session *s, CUstream st, CUevent ev)
{
    for (size_t i = 0; i < s->nperr; i++)
        if (s->perr[i].stream == st && s->perr[i].event == ev)
            return &s->perr[i];
    return NULL;
}

/* Entries a session keeps at most: a stream's own entry is kept past it (its error must not be
 * lost), events recorded behind errors are not (their stream's calls still report it). */
#define EVENT_ENTRIES_MAX 4096

static bool add(struct session *s, CUstream st, CUevent ev, CUresult rc)
{
    if (ev && s->nperr >= EVENT_ENTRIES_MAX)
        return false;
    if (!om_grow((void **)&s->perr, s->nperr, &s->perr_cap, sizeof(*s->perr), 4))
        return false;
    s->perr[s->nperr++] = (struct om_posted_error){st, ev, rc};
    return true;
}

/* Forgets the stream's error and the events recorded behind it; returns the error. */
static CUresult take_stream(struct session *s, CUstream st)
{
    CUresult rc = CUDA_SUCCESS;

    for (size_t i = 0; i < s->nperr;) {
        if (s->perr[i].stream != st) {
            i++;
            continue;
        }
        if (!s->perr[i].event)
            rc = s->perr[i].rc;
        s->perr[i] = s->perr[--s->nperr];
    }
    return rc;
}

static CUresult take_context(struct session *s, CUresult rc)
{
    if (rc == CUDA_SUCCESS && s->async_error != CUDA_SUCCESS) {
        rc = s->async_error;
        s->async_error = CUDA_SUCCESS;
    }
    return rc;
}

void om_error_post(struct session *s, CUresult rc)
{
    CUstream st = s->call_stream;

    if (rc == CUDA_SUCCESS)
        return;
    if (st) {
        if (find(s, st, NULL) || add(s, st, NULL, rc))
            return; /* its first error stands */
    }
    if (s->async_error == CUDA_SUCCESS)
        s->async_error = rc; /* no stream (or no memory to keep it by one): the context's */
}

void om_error_event_recorded(struct session *s, CUevent ev)
{
    struct om_posted_error *e;

    if (!s->nperr)
        return;                       /* nothing failed: the common case */
    for (size_t i = 0; i < s->nperr;) /* re-recorded: what it stood behind is not its now */
        if (s->perr[i].event == ev)
            s->perr[i] = s->perr[--s->nperr];
        else
            i++;
    if (s->call_stream && (e = find(s, s->call_stream, NULL)) != NULL)
        add(s, s->call_stream, ev, e->rc); /* without memory: the stream's own calls report it */
}

CUresult om_take_call_error(struct call *c, CUresult rc)
{
    struct session *s = c->s;

    if (rc == CUDA_SUCCESS && s->nperr && s->call_stream)
        rc = take_stream(s, s->call_stream);
    return take_context(s, rc);
}

CUresult om_take_event_error(struct session *s, CUevent ev, CUresult rc)
{
    if (rc == CUDA_SUCCESS && s->nperr) {
        struct om_posted_error *e = NULL;
        for (size_t i = 0; i < s->nperr && !e; i++)
            if (s->perr[i].event == ev)
                e = &s->perr[i];
        if (e)
            rc = take_stream(s, e->stream);
    }
    return take_context(s, rc);
}

CUresult om_take_context_errors(struct session *s, CUresult rc)
{
    rc = take_context(s, rc);
    while (s->nperr) { /* every stream's: the first is reported, all are taken */
        CUresult r = take_stream(s, s->perr[0].stream);
        if (rc == CUDA_SUCCESS)
            rc = r;
    }
    return rc;
}

CUresult om_error_stream_gone(struct session *s, CUstream st)
{
    return s->nperr ? take_stream(s, st) : CUDA_SUCCESS;
}

void om_errors_free(struct session *s)
{
    free(s->perr);
    s->perr = NULL;
    s->nperr = s->perr_cap = 0;
}
