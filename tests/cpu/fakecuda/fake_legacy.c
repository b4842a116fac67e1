/* SPDX-License-Identifier: MIT */
/* The driver test double: the legacy family (api/remote/legacy.tsv). The server's entries
 * (atomics capabilities, RDMA flush) answer from their arguments; the passthrough ones (tensor
 * maps, logs) are called by the client's own driver and record in FAKECUDA_LEGACY_LOG that they
 * were, with the process that called them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_INVALID_DEVICE 101

static void legacy_log(const char *what, unsigned long long a, unsigned long long b)
{
    const char *path = getenv("FAKECUDA_LEGACY_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;

    if (f) {
        fprintf(f, "%s %d %llx %llx\n", what, (int)getpid(), a, b);
        fclose(f);
    }
}

int fake_device_count(void); /* fakecuda.c: the devices CUDA_VISIBLE_DEVICES leaves */

static int bad_device(int dev)
{
    return dev < 0 || dev >= fake_device_count();
}

/* capabilities[i] = 0x100 * (operation + 1) + dev: the answer says what crossed. */
EXPORT int cuDeviceGetHostAtomicCapabilities(unsigned *caps, const int *ops, unsigned n, int dev)
{
    if (bad_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (n && (!caps || !ops))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++) {
        if (ops[i] < 0 || ops[i] > 12)
            return CUDA_ERROR_INVALID_VALUE;
        caps[i] = 0x100u * (unsigned)(ops[i] + 1) + (unsigned)dev;
    }
    return CUDA_SUCCESS;
}

EXPORT int cuDeviceGetP2PAtomicCapabilities(unsigned *caps, const int *ops, unsigned n, int src,
                                            int dst)
{
    if (bad_device(src) || bad_device(dst))
        return CUDA_ERROR_INVALID_DEVICE;
    if (n && (!caps || !ops))
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++) {
        if (ops[i] < 0 || ops[i] > 12)
            return CUDA_ERROR_INVALID_VALUE;
        caps[i] = 0x10000u + 0x100u * (unsigned)(ops[i] + 1) + (unsigned)(src * 16 + dst);
    }
    return CUDA_SUCCESS;
}

EXPORT int cuFlushGPUDirectRDMAWrites(int target, int scope)
{
    if (target != 0 || (scope != 100 && scope != 200))
        return CUDA_ERROR_INVALID_VALUE;
    legacy_log("cuFlushGPUDirectRDMAWrites", (unsigned)target, (unsigned)scope);
    return CUDA_SUCCESS;
}

/* Tensor maps: the 128-byte descriptor holds the address, the rank and the data type.
 * Encoding needs a current context (measured on the H100: without one, the driver answered XLA
 * CUDA_ERROR_INVALID_CONTEXT). */
extern int fake_context_made;
#define CUDA_ERROR_INVALID_CONTEXT 201

EXPORT int cuTensorMapEncodeTiled(void *map, int type, unsigned rank, void *addr,
                                  const uint64_t *dim, const uint64_t *strides, const unsigned *box,
                                  const unsigned *estrides, int interleave, int swizzle, int l2,
                                  int oob)
{
    (void)strides, (void)box, (void)estrides, (void)interleave, (void)swizzle, (void)l2, (void)oob;
    if (!fake_context_made)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!map || ((uintptr_t)map & 63) || rank == 0 || rank > 5 || !dim || ((uintptr_t)addr & 15))
        return CUDA_ERROR_INVALID_VALUE;
    memset(map, 0, 128);
    memcpy(map, &addr, 8);
    memcpy((char *)map + 8, &rank, 4);
    memcpy((char *)map + 12, &type, 4);
    legacy_log("cuTensorMapEncodeTiled", (uintptr_t)addr, rank);
    return CUDA_SUCCESS;
}

EXPORT int cuTensorMapReplaceAddress(void *map, void *addr)
{
    if (!map || ((uintptr_t)map & 63) || ((uintptr_t)addr & 15))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(map, &addr, 8);
    legacy_log("cuTensorMapReplaceAddress", (uintptr_t)addr, 0);
    return CUDA_SUCCESS;
}

EXPORT int cuLogsCurrent(unsigned *iterator, unsigned flags)
{
    if (!iterator || flags)
        return CUDA_ERROR_INVALID_VALUE;
    *iterator = 0x10c5;
    legacy_log("cuLogsCurrent", 0, 0);
    return CUDA_SUCCESS;
}

/* Texture references (cuTexRefCreate): each setter's value is kept for its getter, and the
 * setters that carry floats or addresses log them (FAKECUDA_LEGACY_LOG) with their bits. */
struct texref {
    unsigned magic;
    unsigned long long dptr;
    void *array, *mipmapped;
    int am[3], fm, mfm, fmt, ncomp;
    unsigned flags, aniso;
    float bias, clamp[2], border[4];
};
#define TEXREF_MAGIC 0x7e8ef001u
#define CUDA_ERROR_INVALID_HANDLE 400

static struct texref *texref_of(void *h)
{
    struct texref *t = h;
    return t && t->magic == TEXREF_MAGIC ? t : NULL;
}

static unsigned bits(float f)
{
    unsigned b;
    memcpy(&b, &f, sizeof(b));
    return b;
}

EXPORT int cuTexRefCreate(void **ret)
{
    struct texref *t = calloc(1, sizeof(*t));

    if (!ret || !t) {
        free(t);
        return CUDA_ERROR_INVALID_VALUE;
    }
    t->magic = TEXREF_MAGIC;
    *ret = t;
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefDestroy(void *h)
{
    struct texref *t = texref_of(h);

    if (!t)
        return CUDA_ERROR_INVALID_HANDLE;
    t->magic = 0;
    legacy_log("cuTexRefDestroy", (uintptr_t)h, 0);
    free(t);
    return CUDA_SUCCESS;
}

#define TEXREF(h)                                                                                  \
    struct texref *t = texref_of(h);                                                               \
    if (!t)                                                                                        \
    return CUDA_ERROR_INVALID_HANDLE

EXPORT int cuTexRefSetAddress_v2(size_t *off, void *h, unsigned long long dptr, size_t bytes)
{
    TEXREF(h);
    t->dptr = dptr;
    if (off)
        *off = 0;
    legacy_log("cuTexRefSetAddress_v2", dptr, bytes);
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefSetAddress(unsigned *off, void *h, unsigned dptr, unsigned bytes)
{
    size_t o = 0;
    int rc = cuTexRefSetAddress_v2(&o, h, dptr, bytes);
    if (off)
        *off = (unsigned)o;
    return rc;
}

EXPORT int cuTexRefGetAddress_v2(unsigned long long *p, void *h)
{
    TEXREF(h);
    *p = t->dptr;
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefGetAddress(unsigned *p, void *h)
{
    TEXREF(h);
    *p = (unsigned)t->dptr;
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefSetAddressMode(void *h, int dim, int am)
{
    TEXREF(h);
    t->am[dim] = am;
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefGetAddressMode(int *am, void *h, int dim)
{
    TEXREF(h);
    *am = t->am[dim];
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefSetArray(void *h, void *a, unsigned flags)
{
    TEXREF(h);
    t->array = a;
    legacy_log("cuTexRefSetArray", (uintptr_t)a, flags);
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefGetArray(void **a, void *h)
{
    TEXREF(h);
    *a = t->array;
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefSetMipmappedArray(void *h, void *m, unsigned flags)
{
    TEXREF(h);
    t->mipmapped = m;
    legacy_log("cuTexRefSetMipmappedArray", (uintptr_t)m, flags);
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefGetMipmappedArray(void **m, void *h)
{
    TEXREF(h);
    *m = t->mipmapped;
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefSetBorderColor(void *h, float *c)
{
    TEXREF(h);
    memcpy(t->border, c, sizeof(t->border));
    legacy_log("cuTexRefSetBorderColor", bits(c[0]), bits(c[3]));
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefGetBorderColor(float *c, void *h)
{
    TEXREF(h);
    memcpy(c, t->border, sizeof(t->border));
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefSetFilterMode(void *h, int fm)
{
    TEXREF(h);
    t->fm = fm;
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefGetFilterMode(int *fm, void *h)
{
    TEXREF(h);
    *fm = t->fm;
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefSetMipmapFilterMode(void *h, int fm)
{
    TEXREF(h);
    t->mfm = fm;
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefGetMipmapFilterMode(int *fm, void *h)
{
    TEXREF(h);
    *fm = t->mfm;
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefSetFlags(void *h, unsigned flags)
{
    TEXREF(h);
    t->flags = flags;
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefGetFlags(unsigned *flags, void *h)
{
    TEXREF(h);
    *flags = t->flags;
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefSetFormat(void *h, int fmt, int n)
{
    TEXREF(h);
    t->fmt = fmt;
    t->ncomp = n;
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefGetFormat(int *fmt, int *n, void *h)
{
    TEXREF(h);
    *fmt = t->fmt;
    if (n)
        *n = t->ncomp;
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefSetMaxAnisotropy(void *h, unsigned aniso)
{
    TEXREF(h);
    t->aniso = aniso;
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefGetMaxAnisotropy(int *aniso, void *h)
{
    TEXREF(h);
    *aniso = (int)t->aniso;
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefSetMipmapLevelBias(void *h, float bias)
{
    TEXREF(h);
    t->bias = bias;
    legacy_log("cuTexRefSetMipmapLevelBias", bits(bias), 0);
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefGetMipmapLevelBias(float *bias, void *h)
{
    TEXREF(h);
    *bias = t->bias;
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefSetMipmapLevelClamp(void *h, float lo, float hi)
{
    TEXREF(h);
    t->clamp[0] = lo;
    t->clamp[1] = hi;
    legacy_log("cuTexRefSetMipmapLevelClamp", bits(lo), bits(hi));
    return CUDA_SUCCESS;
}

EXPORT int cuTexRefGetMipmapLevelClamp(float *lo, float *hi, void *h)
{
    TEXREF(h);
    *lo = t->clamp[0];
    *hi = t->clamp[1];
    return CUDA_SUCCESS;
}

struct desc2 {
    size_t w, h;
    int format;
    unsigned channels;
};

EXPORT int cuTexRefSetAddress2D_v3(void *h, const struct desc2 *d, unsigned long long dptr,
                                   size_t pitch)
{
    TEXREF(h);
    if (!d || pitch < d->w)
        return CUDA_ERROR_INVALID_VALUE;
    t->dptr = dptr;
    legacy_log("cuTexRefSetAddress2D_v3", dptr, pitch * d->h);
    return CUDA_SUCCESS;
}
