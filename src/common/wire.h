/* SPDX-License-Identifier: MIT */
/* Building and reading the payload of a ring record: bounds-checked, little-endian u64s and bytes.
 */
#ifndef OM_WIRE_H
#define OM_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A writer over a caller's buffer; `overflow` is set instead of writing past cap. */
struct om_wbuf {
    uint8_t *p;
    size_t len, cap;
    bool overflow;
};

static inline void om_put_bytes(struct om_wbuf *w, const void *src, size_t n)
{
    if (w->overflow || n > w->cap - w->len) {
        w->overflow = true;
        return;
    }
    if (n) /* src may be NULL for nothing */
        memcpy(w->p + w->len, src, n);
    w->len += n;
}

static inline void om_put_u64(struct om_wbuf *w, uint64_t v)
{
    om_put_bytes(w, &v, sizeof(v));
}

/* A reader over bytes from another process: every get checks the end, and a
 * short read sets `bad` and yields zeros, so a handler checks once at the end. */
struct om_rbuf {
    const uint8_t *p;
    size_t len, off;
    bool bad;
};

static inline const void *om_get_bytes(struct om_rbuf *r, size_t n)
{
    const void *at;

    if (r->bad || n > r->len - r->off) {
        r->bad = true;
        return NULL;
    }
    at = r->p + r->off;
    r->off += n;
    return at;
}

static inline uint64_t om_get_u64(struct om_rbuf *r)
{
    uint64_t v = 0;
    const void *at = om_get_bytes(r, sizeof(v));

    if (at)
        memcpy(&v, at, sizeof(v));
    return v;
}

/* The rest of the payload. */
static inline const void *om_get_rest(struct om_rbuf *r, size_t *ret_len)
{
    *ret_len = r->bad ? 0 : r->len - r->off;
    return om_get_bytes(r, *ret_len);
}

#endif
