/* SPDX-License-Identifier: MIT */
/* What each client owns in the server (handles, allocations), and the shared module cache. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "internal.h"

#define SLOT_EMPTY 0u
#define SLOT_GONE UINT32_MAX

static size_t slot_of(uint64_t v, size_t slots)
{
    v ^= v >> 33;
    v *= 0xff51afd7ed558ccdull; /* a 64-bit finaliser's mixing step */
    v ^= v >> 33;
    return (size_t)v & (slots - 1);
}

/* The slot holding v, or the slot where it would go (*ret_found false). */
static size_t index_find(const struct om_handles *h, uint64_t v, bool *ret_found)
{
    size_t i = slot_of(v, h->slots), free_slot = SIZE_MAX;

    for (;; i = (i + 1) & (h->slots - 1)) {
        uint32_t e = h->index[i];
        if (e == SLOT_EMPTY) {
            *ret_found = false;
            return free_slot != SIZE_MAX ? free_slot : i;
        }
        if (e == SLOT_GONE) {
            if (free_slot == SIZE_MAX)
                free_slot = i;
        } else if (h->v[e - 1] == v) {
            *ret_found = true;
            return i;
        }
    }
}

static int index_rebuild(struct om_handles *h, size_t slots)
{
    uint32_t *n = calloc(slots, sizeof(*n));

    if (!n)
        return -ENOMEM;
    free(h->index);
    h->index = n;
    h->slots = slots;
    h->used = h->n;
    for (size_t p = 0; p < h->n; p++) {
        bool found;
        h->index[index_find(h, h->v[p], &found)] = (uint32_t)(p + 1);
    }
    return 0;
}

bool om_grow(void **v, size_t n, size_t *cap, size_t size, size_t first)
{
    size_t c;
    void *p;

    if (n < *cap)
        return true;
    c = *cap ? 2 * *cap : first;
    if (c < *cap || c > SIZE_MAX / size)
        return false;
    p = realloc(*v, c * size);
    if (!p)
        return false;
    *v = p;
    *cap = c;
    return true;
}

int om_handles_add(struct om_handles *h, uint64_t v)
{
    bool found = false;
    size_t slot;

    if (h->n >= UINT32_MAX - 1)
        return -ENOMEM;
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 16;
        uint64_t *nv = realloc(h->v, cap * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        h->v = nv;
        h->cap = cap;
    }
    /* At most half the slots in use (positions and removed marks). */
    if ((h->used + 1) * 2 > h->slots &&
        index_rebuild(h, h->slots && (h->n + 1) * 4 > h->slots ? h->slots * 2
                         : h->slots                            ? h->slots
                                                               : 32) < 0)
        return -ENOMEM;
    slot = index_find(h, v, &found);
    if (found)
        return 0; /* already owned */
    if (h->index[slot] == SLOT_EMPTY)
        h->used++;
    h->v[h->n++] = v;
    h->index[slot] = (uint32_t)h->n;
    return 0;
}

bool om_handles_has(const struct om_handles *h, uint64_t v)
{
    bool found = false;

    if (h->slots)
        index_find(h, v, &found);
    return found;
}

bool om_handles_remove(struct om_handles *h, uint64_t v)
{
    bool found = false;
    size_t slot, pos;

    if (!h->slots)
        return false;
    slot = index_find(h, v, &found);
    if (!found)
        return false;
    pos = h->index[slot] - 1;
    h->index[slot] = SLOT_GONE;
    if (pos != h->n - 1) { /* the last one moves into the hole: its slot learns where */
        uint64_t last = h->v[h->n - 1];
        h->v[pos] = last;
        h->index[index_find(h, last, &found)] = (uint32_t)(pos + 1);
    }
    h->n--;
    return true;
}

void om_handles_free(struct om_handles *h)
{
    free(h->v);
    free(h->index);
    memset(h, 0, sizeof(*h));
}

int om_ranges_add(struct om_ranges *r, uint64_t base, uint64_t size, uint64_t mem, bool owned)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        struct om_range *nv = realloc(r->v, cap * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        r->v = nv;
        r->cap = cap;
    }
    r->v[r->n++] = (struct om_range){.base = base, .size = size, .mem = mem, .owned = owned};
    return 0;
}

/* A span lies within one range, or within mappings side by side: handles mapped next to each
 * other are one buffer to the program (PyTorch's expandable segments grow a segment so), and
 * its copies and memsets cross from one mapping into the next. Allocations of other kinds that
 * happen to lie side by side stay apart, as the driver keeps them. */
bool om_ranges_cover(const struct om_ranges *r, uint64_t addr, uint64_t len)
{
    uint64_t end = addr + len;
    bool first = true;

    if (len == 0)
        return true;
    if (end < addr)
        return false;
    while (addr < end) {
        size_t i;
        for (i = 0; i < r->n; i++)
            if (addr >= r->v[i].base && addr - r->v[i].base < r->v[i].size &&
                (first || r->v[i].mapped))
                break;
        if (i == r->n) {
            om_debug("[%#llx, %#llx) is not the client's memory", (unsigned long long)addr,
                     (unsigned long long)end);
            return false;
        }
        if (r->v[i].base + r->v[i].size <= addr) /* a size that wraps: no further */
            return false;
        if (r->v[i].base + r->v[i].size < end && !r->v[i].mapped)
            return false; /* past an allocation that is not a mapping */
        addr = r->v[i].base + r->v[i].size;
        first = false;
    }
    return true;
}

struct om_range *om_ranges_find_base(struct om_ranges *r, uint64_t base)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].base == base && r->v[i].owned)
            return &r->v[i];
    return NULL;
}

void om_ranges_remove(struct om_ranges *r, struct om_range *it)
{
    *it = r->v[--r->n];
}

void om_ranges_free(struct om_ranges *r)
{
    free(r->v);
    memset(r, 0, sizeof(*r));
}

int om_kernel_note(struct session *s, uint64_t handle, uint32_t args_size, bool prints)
{
    if (om_kernel_total(s, handle) >= 0)
        return 0;
    if (s->nkernels == s->kernels_cap) {
        size_t cap = s->kernels_cap ? s->kernels_cap * 2 : 16;
        struct om_kernel *nk = realloc(s->kernels, cap * sizeof(*nk));
        if (!nk)
            return -ENOMEM;
        s->kernels = nk;
        s->kernels_cap = cap;
    }
    s->kernels[s->nkernels++] = (struct om_kernel){handle, args_size, prints};
    s->printed |= prints; /* its synchronizes wait in the driver, which prints (syncword.c) */
    return 0;
}

const struct om_kernel *om_kernel_find(const struct session *s, uint64_t handle)
{
    for (size_t i = 0; i < s->nkernels; i++)
        if (s->kernels[i].handle == handle)
            return &s->kernels[i];
    return NULL;
}

int64_t om_kernel_total(const struct session *s, uint64_t handle)
{
    for (size_t i = 0; i < s->nkernels; i++)
        if (s->kernels[i].handle == handle)
            return s->kernels[i].args_size;
    return -1;
}

/* ------------------------------------------------------------------ module cache */

/*
 * Images are loaded once per server, keyed by content, and never unloaded
 * while the server runs: loading and unloading wait for every running kernel
 * of the context (docs/driver-facts.md), so the first load of an image is the only
 * barrier, and 100 copies of one program pay it once.
 *
 * The server keeps no copy of an image: it is known by its size and two independent 64-bit
 * hashes of its bytes (om_image_keys, common/image.c: the shim computes them too and sends them
 * first, so a client loading an image the server has sends no bytes), so the table costs a few
 * dozen bytes per image whatever their sizes. Two different images that agree
 * on all three by accident are not a practical concern (2^-128); a client that crafts such a
 * pair gains nothing it could not do with a kernel, since every client's kernels share one
 * address space (docs/security.md). The loaded code itself is bounded by the budgets
 * (budget.c): per client, and OPENMPS_SERVER_IMAGE_MAX for the server.
 */
struct image {
    uint64_t hash, hash2;
    size_t size;
    uint64_t library;
    bool prints; /* om_output_image_prints */
    struct image *next;
};

static struct image *images;
static uint64_t images_bytes; /* of every image loaded (__atomic) */
static pthread_mutex_t images_lock = PTHREAD_MUTEX_INITIALIZER;

int om_image_lookup(uint64_t k1, uint64_t k2, size_t size, uint64_t *ret_library)
{
    int rc = -ENOENT;

    pthread_mutex_lock(&images_lock);
    for (struct image *im = images; im; im = im->next) {
        if (im->hash == k1 && im->size == size && im->hash2 == k2) {
            *ret_library = im->library;
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&images_lock);
    return rc;
}

bool om_image_budget_take(size_t size)
{
    return om_budget_take(&images_bytes, size, om_budget.server_images);
}

void om_image_budget_give(size_t size)
{
    om_budget_give(&images_bytes, size);
}

/* The libraries whose images may print, apart: a kernel lookup asks, and they are few. */
static uint64_t *printing;
static size_t nprinting, printing_cap;

bool om_library_prints(uint64_t library)
{
    bool yes = false;

    pthread_mutex_lock(&images_lock);
    for (size_t i = 0; i < nprinting && !yes; i++)
        yes = printing[i] == library;
    pthread_mutex_unlock(&images_lock);
    return yes;
}

void om_image_add(uint64_t k1, uint64_t k2, size_t size, uint64_t library, bool prints)
{
    struct image *im = calloc(1, sizeof(*im));

    if (!im)
        return; /* only the table entry is lost: a later client loads the image again */
    im->hash = k1;
    im->hash2 = k2;
    im->size = size;
    im->library = library;
    im->prints = prints;
    pthread_mutex_lock(&images_lock);
    im->next = images;
    images = im;
    if (prints && nprinting == printing_cap) {
        size_t cap = printing_cap ? printing_cap * 2 : 16;
        uint64_t *n = realloc(printing, cap * sizeof(*n));
        if (n) {
            printing = n;
            printing_cap = cap;
        }
    }
    if (prints && nprinting < printing_cap) /* else its output is ordered as an unknown one's */
        printing[nprinting++] = library;
    pthread_mutex_unlock(&images_lock);
}

pthread_mutex_t *om_image_load_lock(void)
{
    static pthread_mutex_t load = PTHREAD_MUTEX_INITIALIZER;

    return &load;
}
