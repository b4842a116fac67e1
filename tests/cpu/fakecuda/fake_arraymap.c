/* SPDX-License-Identifier: MIT */
/* The driver test double: sparse arrays' tile mappings and a module's texture and surface
 * references (api/remote/arraymap.tsv, texrefs.tsv). Each call logs what it received to
 * FAKECUDA_ARRAYMAP_LOG, one line each. A library's module is the library itself; its texture
 * references are its lines (fakecuda.c's image format) whose name begins with "tex", its surface
 * references those beginning with "surf": the same name answers the same reference. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define OK 0
#define INVALID_VALUE 1
#define INVALID_HANDLE 400
#define NOT_FOUND 500

int fake_library_kernels(void *lib, void **out, int max);
const char *fake_kernel_name(void *k, void **lib);
int cuTexRefCreate(void **ret);

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    const char *path = getenv("FAKECUDA_ARRAYMAP_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    va_list ap;

    if (!f)
        return;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

/* CUarrayMapInfo as cuda.h lays it out (96 bytes). */
struct map_info {
    int resourceType;
    void *resource;
    int subresourceType;
    unsigned sub[8] __attribute__((aligned(8))); /* the union: a mip tail's u64s */
    int op, handleType;
    unsigned long long handle, offset;
    unsigned mask, flags, reserved[2];
};
_Static_assert(sizeof(struct map_info) == 96, "CUarrayMapInfo");
_Static_assert(offsetof(struct map_info, op) == 56, "memOperationType");

/* Every element is logged as it arrived, then checked: a test sees what reached the driver. */
void fake_dma_flush(void *s); /* fakecuda.c: the late work of its stream, first */

EXPORT int cuMemMapArrayAsync(struct map_info *m, unsigned count, void *stream)
{
    fake_dma_flush(stream);
    if (count && !m)
        return INVALID_VALUE;
    for (unsigned i = 0; i < count; i++)
        note("cuMemMapArrayAsync %u/%u type %d res %llx sub %d op %d handle %llx offset %llu "
             "level %u x %u w %u stream %s",
             i, count, m[i].resourceType, (unsigned long long)(uintptr_t)m[i].resource,
             m[i].subresourceType, m[i].op, m[i].handle, m[i].offset, m[i].sub[0], m[i].sub[2],
             m[i].sub[5], stream ? "set" : "null");
    for (unsigned i = 0; i < count; i++)
        if (m[i].resourceType < 0 || m[i].resourceType > 1 || !m[i].resource ||
            m[i].subresourceType < 0 || m[i].subresourceType > 1 || m[i].op < 1 || m[i].op > 2 ||
            m[i].handleType != 0 || (m[i].op == 1) != (m[i].handle != 0) || m[i].mask != 1 ||
            m[i].flags)
            return INVALID_VALUE;
    return OK;
}

EXPORT int cuLibraryGetModule(void **mod, void *lib)
{
    if (!mod || !lib)
        return INVALID_VALUE;
    *mod = lib;
    return OK;
}

/* A library's references, made at their first lookup. */
struct modref {
    void *lib, *ref;
    char name[64];
};
static struct modref refs[64];
static int nrefs;

struct surfref {
    unsigned magic;
    void *array;
};
#define SURFREF_MAGIC 0x5cf4e7u

static int module_ref(void **ret, void *mod, const char *name, const char *prefix)
{
    void *ks[256];
    int n;

    if (!ret || !mod || !name)
        return INVALID_VALUE;
    for (int i = 0; i < nrefs; i++)
        if (refs[i].lib == mod && strcmp(refs[i].name, name) == 0) {
            *ret = refs[i].ref;
            note("%s %s %llx", prefix, name, (unsigned long long)(uintptr_t)*ret);
            return OK;
        }
    if (strncmp(name, prefix, strlen(prefix)) != 0 || strlen(name) >= 64 || nrefs == 64)
        return NOT_FOUND;
    n = fake_library_kernels(mod, ks, 256);
    for (int i = 0; i < n && i < 256; i++) {
        if (strcmp(fake_kernel_name(ks[i], NULL), name) != 0)
            continue;
        if (prefix[0] == 't') {
            if (cuTexRefCreate(ret) != OK)
                return INVALID_VALUE;
        } else {
            struct surfref *s = calloc(1, sizeof(*s));
            if (!s)
                return INVALID_VALUE;
            s->magic = SURFREF_MAGIC;
            *ret = s;
        }
        refs[nrefs].lib = mod;
        refs[nrefs].ref = *ret;
        strcpy(refs[nrefs++].name, name);
        note("%s %s %llx", prefix, name, (unsigned long long)(uintptr_t)*ret);
        return OK;
    }
    return NOT_FOUND;
}

EXPORT int cuModuleGetTexRef(void **ret, void *mod, const char *name)
{
    return module_ref(ret, mod, name, "tex");
}

EXPORT int cuModuleGetSurfRef(void **ret, void *mod, const char *name)
{
    return module_ref(ret, mod, name, "surf");
}

static struct surfref *surfref_of(void *h)
{
    struct surfref *s = h;
    return s && s->magic == SURFREF_MAGIC ? s : NULL;
}

EXPORT int cuSurfRefSetArray(void *h, void *array, unsigned flags)
{
    struct surfref *s = surfref_of(h);

    if (!s)
        return INVALID_HANDLE;
    if (!array || flags)
        return INVALID_VALUE;
    s->array = array;
    note("cuSurfRefSetArray %llx %llx", (unsigned long long)(uintptr_t)h,
         (unsigned long long)(uintptr_t)array);
    return OK;
}

EXPORT int cuSurfRefGetArray(void **array, void *h)
{
    struct surfref *s = surfref_of(h);

    if (!s)
        return INVALID_HANDLE;
    if (!array)
        return INVALID_VALUE;
    *array = s->array;
    return OK;
}

EXPORT int cuParamSetTexRef(void *func, int texunit, void *texref)
{
    if (!func || !texref || texunit != -1)
        return INVALID_VALUE;
    note("cuParamSetTexRef %llx %d %llx", (unsigned long long)(uintptr_t)func, texunit,
         (unsigned long long)(uintptr_t)texref);
    return OK;
}
