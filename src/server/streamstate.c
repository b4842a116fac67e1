/* SPDX-License-Identifier: MIT */
/* The state of a client's streams that every layer above asks about: whether one is capturing,
 * which it created blocking, which it made in a green context. Families, the SM share and the
 * stream routing call down into it; it calls only the driver table and the handle sets. */
#include <errno.h>
#include <stdlib.h>

#include "exec.h"

#define CAPTURE_NONE 0

/* ------------------------------------------------------------------ capture */

bool om_stream_capturing(struct session *s, CUstream st)
{
    CUresult (*fn)(CUstream, int *) = REAL(cuStreamIsCapturing);
    int status = CAPTURE_NONE;

    if (!s->captures || !st || !fn)
        return false;
    return fn(st, &status) == CUDA_SUCCESS && status != CAPTURE_NONE;
}

/* ------------------------------------------------------------------ blocking streams */

bool om_stream_blocking(struct session *s, uint64_t h)
{
    if (om_handles_has(&s->blocking, h))
        return true;
    for (unsigned d = 0; d < OM_MAX_DEVICES; d++)
        if (s->blockings[d].n && om_handles_has(&s->blockings[d], h))
            return true;
    return false;
}

/* ------------------------------------------------------------------ green streams */

uint64_t om_green_of(const struct session *s, uint64_t h)
{
    for (size_t i = 0; i < s->ngstreams; i++)
        if (s->gstreams[i].stream == h)
            return s->gstreams[i].green;
    return 0;
}

bool om_green_stream_of(struct session *s, CUstream st)
{
    return s->ngstreams && om_green_of(s, (uint64_t)(uintptr_t)st) != 0;
}

int om_green_stream_room(struct session *s)
{
    if (s->ngstreams == s->gstreams_cap) {
        size_t cap = s->gstreams_cap ? 2 * s->gstreams_cap : 16;
        struct om_gstream *v = realloc(s->gstreams, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        s->gstreams = v;
        s->gstreams_cap = cap;
    }
    return 0;
}

void om_green_stream_add(struct session *s, uint64_t stream, uint64_t green)
{
    s->gstreams[s->ngstreams++] = (struct om_gstream){stream, green};
}

void om_green_stream_gone(struct session *s, uint64_t h)
{
    for (size_t i = 0; i < s->ngstreams; i++)
        if (s->gstreams[i].stream == h) {
            s->gstreams[i] = s->gstreams[--s->ngstreams];
            return;
        }
}

void om_green_streams_free(struct session *s)
{
    free(s->gstreams);
    s->gstreams = NULL;
    s->ngstreams = s->gstreams_cap = 0;
}
