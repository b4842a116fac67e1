/* SPDX-License-Identifier: MIT */
/* The driver test double's arrays, mipmapped arrays, texture and surface objects: arrays are
 * host memory with their descriptor; every call is recorded in FAKECUDA_ARRAY_LOG. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define OK 0
#define INVALID_VALUE 1
#define INVALID_HANDLE 400

struct desc3 {
    size_t w, h, d;
    int format;
    unsigned channels, flags;
};

struct farray {
    uint32_t magic;
    struct desc3 desc;
    size_t row; /* bytes of a row */
    unsigned char *bytes;
};

struct fmipmap {
    uint32_t magic;
    unsigned nlevels;
    struct farray *levels[32];
};

#define ARRAY_MAGIC 0xa77a1u
#define MIPMAP_MAGIC 0x313a9u

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void note(const char *fmt, ...)
{
    const char *log = getenv("FAKECUDA_ARRAY_LOG");
    FILE *f = log ? fopen(log, "a") : NULL;
    va_list ap;

    if (!f)
        return;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

static size_t elem(int format, unsigned channels)
{
    size_t one = format == 1 || format == 8                     ? 1
                 : format == 2 || format == 9 || format == 0x10 ? 2
                                                                : 4;
    return one * channels;
}

static struct farray *new_array(const struct desc3 *d)
{
    struct farray *a;
    size_t h = d->h ? d->h : 1, z = d->d ? d->d : 1;

    if (!d->w || (d->channels != 1 && d->channels != 2 && d->channels != 4))
        return NULL;
    /* The double's arrays are host memory (and a fuzzer's): 16 MiB at most, as a device would
     * refuse an extent past its limits. */
    if (d->w > (1u << 16) || h > (1u << 16) || z > (1u << 12) ||
        d->w * elem(d->format, d->channels) * h * z > (16u << 20))
        return NULL;
    a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->magic = ARRAY_MAGIC;
    a->desc = *d;
    a->row = d->w * elem(d->format, d->channels);
    a->bytes = calloc(1, a->row * h * z);
    if (!a->bytes) {
        free(a);
        return NULL;
    }
    return a;
}

static struct farray *arr(void *h)
{
    struct farray *a = h;
    return a && a->magic == ARRAY_MAGIC ? a : NULL;
}

EXPORT int cuArrayCreate_v2(void **ret, const size_t *d2) /* CUDA_ARRAY_DESCRIPTOR */
{
    struct desc3 d = {d2[0], d2[1], 0, ((const int *)(d2 + 2))[0], ((const unsigned *)(d2 + 2))[1],
                      0};
    struct farray *a = new_array(&d);

    if (!a)
        return INVALID_VALUE;
    *ret = a;
    note("cuArrayCreate_v2 %zu %zu %d %u", d.w, d.h, d.format, d.channels);
    return OK;
}

EXPORT int cuArray3DCreate_v2(void **ret, const struct desc3 *d)
{
    struct farray *a = new_array(d);

    if (!a)
        return INVALID_VALUE;
    *ret = a;
    note("cuArray3DCreate_v2 %zu %zu %zu", d->w, d->h, d->d);
    return OK;
}

EXPORT int cuArrayDestroy(void *h)
{
    struct farray *a = arr(h);

    if (!a)
        return INVALID_HANDLE;
    note("cuArrayDestroy %p", h);
    a->magic = 0;
    free(a->bytes);
    free(a);
    return OK;
}

EXPORT int cuArray3DGetDescriptor_v2(struct desc3 *d, void *h)
{
    struct farray *a = arr(h);

    if (!a)
        return INVALID_HANDLE;
    *d = a->desc;
    return OK;
}

EXPORT int cuArrayGetDescriptor_v2(size_t *d2, void *h)
{
    struct farray *a = arr(h);

    if (!a)
        return INVALID_HANDLE;
    d2[0] = a->desc.w, d2[1] = a->desc.h;
    ((int *)(d2 + 2))[0] = a->desc.format;
    ((unsigned *)(d2 + 2))[1] = a->desc.channels;
    return OK;
}

EXPORT int cuArrayGetPlane(void **ret, void *h, unsigned i)
{
    (void)ret, (void)i;
    return arr(h) ? INVALID_VALUE : INVALID_HANDLE; /* no multi-planar formats here */
}

EXPORT int cuArrayGetMemoryRequirements(size_t *req, void *h, int dev)
{
    struct farray *a = arr(h);

    if (!a)
        return INVALID_HANDLE;
    memset(req, 0, 32);
    req[0] = a->row * (a->desc.h ? a->desc.h : 1) * (a->desc.d ? a->desc.d : 1);
    req[1] = 512;
    note("cuArrayGetMemoryRequirements %d", dev);
    return OK;
}

EXPORT int cuArrayGetSparseProperties(void *p, void *h)
{
    (void)p;
    return arr(h) ? INVALID_VALUE : INVALID_HANDLE; /* not sparse */
}

EXPORT int cuMipmappedArrayCreate(void **ret, const struct desc3 *d, unsigned levels)
{
    struct fmipmap *m;

    if (!levels || levels > 32)
        return INVALID_VALUE;
    m = calloc(1, sizeof(*m));
    m->magic = MIPMAP_MAGIC;
    m->nlevels = levels;
    for (unsigned i = 0; i < levels; i++) {
        struct desc3 l = *d;
        l.w = d->w >> i ? d->w >> i : 1;
        l.h = d->h ? (d->h >> i ? d->h >> i : 1) : 0;
        m->levels[i] = new_array(&l);
    }
    *ret = m;
    note("cuMipmappedArrayCreate %u", levels);
    return OK;
}

static struct fmipmap *mip(void *h)
{
    struct fmipmap *m = h;
    return m && m->magic == MIPMAP_MAGIC ? m : NULL;
}

EXPORT int cuMipmappedArrayGetLevel(void **ret, void *h, unsigned level)
{
    struct fmipmap *m = mip(h);

    if (!m)
        return INVALID_HANDLE;
    if (level >= m->nlevels)
        return INVALID_VALUE;
    *ret = m->levels[level];
    return OK;
}

EXPORT int cuMipmappedArrayDestroy(void *h)
{
    struct fmipmap *m = mip(h);

    if (!m)
        return INVALID_HANDLE;
    note("cuMipmappedArrayDestroy %p", h);
    for (unsigned i = 0; i < m->nlevels; i++)
        cuArrayDestroy(m->levels[i]);
    m->magic = 0;
    free(m);
    return OK;
}

EXPORT int cuMipmappedArrayGetMemoryRequirements(size_t *req, void *h, int dev)
{
    (void)dev;
    if (!mip(h))
        return INVALID_HANDLE;
    memset(req, 0, 32);
    return OK;
}

EXPORT int cuMipmappedArrayGetSparseProperties(void *p, void *h)
{
    (void)p;
    return mip(h) ? INVALID_VALUE : INVALID_HANDLE;
}

/* CUDA_MEMCPY3D with array sides; device memory is host memory here. */
struct fake_memcpy3d {
    size_t sx, sy, sz, slod;
    int stype;
    const void *shost;
    uintptr_t sdev;
    void *sarr, *r0;
    size_t spitch, sheight;
    size_t dx, dy, dz, dlod;
    int dtype;
    void *dhost;
    uintptr_t ddev;
    void *darr, *r1;
    size_t dpitch, dheight;
    size_t w, h, d;
};

static unsigned char *at(int type, const void *host, uintptr_t dev, void *array, size_t pitch,
                         size_t height, size_t x, size_t y, size_t z)
{
    if (type == 3) {
        struct farray *a = arr(array);
        size_t rows = a->desc.h ? a->desc.h : 1;
        return a->bytes + (z * rows + y) * a->row + x;
    }
    return (unsigned char *)(type == 1 ? (uintptr_t)host : dev) + (z * height + y) * pitch + x;
}

void fake_dma_flush(void *s); /* fakecuda.c: FAKECUDA_DMA_LATER's pending copies */

EXPORT int cuMemcpy3DAsync_v2(const struct fake_memcpy3d *c, void *s)
{
    fake_dma_flush(s);
    (void)s;
    if ((c->stype == 3 && !arr(c->sarr)) || (c->dtype == 3 && !arr(c->darr)))
        return INVALID_HANDLE;
    note("cuMemcpy3DAsync_v2 %d %zu %zu %zu -> %d %zu %zu %zu : %zu %zu %zu", c->stype, c->sx,
         c->sy, c->sz, c->dtype, c->dx, c->dy, c->dz, c->w, c->h, c->d);
    for (size_t z = 0; z < c->d; z++)
        for (size_t y = 0; y < c->h; y++)
            memmove(at(c->dtype, c->dhost, c->ddev, c->darr, c->dpitch, c->dheight, c->dx,
                       c->dy + y, c->dz + z),
                    at(c->stype, c->shost, c->sdev, c->sarr, c->spitch, c->sheight, c->sx,
                       c->sy + y, c->sz + z),
                    c->w);
    return OK;
}

/* Texture and surface objects: numbered; the resource descriptor is kept and recorded. */
#define MAX_OBJECTS 256
static unsigned char objects[MAX_OBJECTS][144];
static int live[MAX_OBJECTS];

static int object_new(unsigned long long *ret, const void *res, const char *what)
{
    const int *type = res;

    for (int i = 1; i < MAX_OBJECTS; i++)
        if (!live[i]) {
            live[i] = 1;
            memcpy(objects[i], res, 144);
            *ret = (unsigned long long)i + 0x1000;
            note("%s type %d %llu", what, *type, *ret);
            return OK;
        }
    return 2;
}

static int object_index(unsigned long long h)
{
    return h > 0x1000 && h < 0x1000 + MAX_OBJECTS && live[h - 0x1000] ? (int)(h - 0x1000) : 0;
}

EXPORT int cuTexObjectCreate(unsigned long long *ret, const void *res, const void *tex,
                             const void *view)
{
    (void)view;
    if (!ret || !res || !tex)
        return INVALID_VALUE;
    return object_new(ret, res, "cuTexObjectCreate");
}

EXPORT int cuSurfObjectCreate(unsigned long long *ret, const void *res)
{
    if (!ret || !res)
        return INVALID_VALUE;
    return object_new(ret, res, "cuSurfObjectCreate");
}

static int object_destroy(unsigned long long h, const char *what)
{
    int i = object_index(h);

    if (!i)
        return INVALID_VALUE;
    live[i] = 0;
    note("%s %llu", what, h);
    return OK;
}

EXPORT int cuTexObjectDestroy(unsigned long long h)
{
    return object_destroy(h, "cuTexObjectDestroy");
}

EXPORT int cuSurfObjectDestroy(unsigned long long h)
{
    return object_destroy(h, "cuSurfObjectDestroy");
}

static int object_res(void *res, unsigned long long h)
{
    int i = object_index(h);

    if (!i)
        return INVALID_VALUE;
    memcpy(res, objects[i], 144);
    return OK;
}

EXPORT int cuTexObjectGetResourceDesc(void *res, unsigned long long h)
{
    return object_res(res, h);
}

EXPORT int cuSurfObjectGetResourceDesc(void *res, unsigned long long h)
{
    return object_res(res, h);
}

EXPORT int cuTexObjectGetTextureDesc(void *tex, unsigned long long h)
{
    if (!object_index(h))
        return INVALID_VALUE;
    memset(tex, 0, 104);
    return OK;
}

EXPORT int cuTexObjectGetResourceViewDesc(void *view, unsigned long long h)
{
    if (!object_index(h))
        return INVALID_VALUE;
    memset(view, 0, 112);
    return OK;
}
