/* SPDX-License-Identifier: MIT */
/*
 * The driver test double's shareable handles (with FAKECUDA_VMM for allocation handles). A POSIX
 * handle is a real descriptor, so SCM_RIGHTS carries it for real: an allocation handle's export
 * is a new descriptor of its memfd ("fake-vmm"), an import a new handle on that memfd (its
 * mappings show the exporter's bytes); a pool's export is a memfd "fake-pool" holding the pool's
 * address, an import a new pool that allocates nothing (as the driver's). A fabric handle is
 * "FAKEFABR" and the object's address. A pool pointer's export data is "FAKEPPTR" and the
 * address; its import answers the same address (one process: the server's), counted, so that the
 * importer's free (cuMemFree_v2 asks fake_shareable_free) leaves the exporter's memory alone.
 * Every call appends a line to FAKECUDA_MEMORY_LOG.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define OK 0
#define INVALID_VALUE 1
#define NOT_SUPPORTED 801
#define T_FD 1
#define T_FABRIC 8

typedef unsigned long long dptr_t;
int fake_vmm_handle_dup(unsigned long long h, size_t *size, int *types);
unsigned long long fake_vmm_handle_adopt(int fd, size_t size, int types);
int fake_pool_types(void *pool, void **origin);
void *fake_pool_adopt(void *origin);
int fake_alloc_find(dptr_t p, dptr_t *base, size_t *size);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void slog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void slog(const char *fmt, ...)
{
    const char *path = getenv("FAKECUDA_MEMORY_LOG");
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

/* fd is a memfd of that name (the double's own kinds of descriptor). */
static int memfd_named(int fd, const char *name)
{
    char path[64], target[256], want[64];
    ssize_t n;

    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    n = readlink(path, target, sizeof(target) - 1);
    if (n < 0)
        return 0;
    target[n] = 0;
    snprintf(want, sizeof(want), "/memfd:%s ", name); /* "/memfd:NAME (deleted)" */
    return strncmp(target, want, strlen(want)) == 0;
}

struct fabric {
    char magic[8];
    uint64_t object;
    unsigned char rest[48];
};

/* ------------------------------------------------------------------ allocation handles */

EXPORT int cuMemExportToShareableHandle(void *out, unsigned long long h, int type,
                                        unsigned long long flags)
{
    size_t size = 0;
    int types = 0, fd;

    if (!out || flags || (type != T_FD && type != T_FABRIC))
        return INVALID_VALUE;
    fd = fake_vmm_handle_dup(h, &size, &types);
    if (fd < 0)
        return INVALID_VALUE;
    if (!(types & type)) { /* not requested at cuMemCreate */
        close(fd);
        return INVALID_VALUE;
    }
    if (type == T_FABRIC) {
        struct fabric f = {"FAKEFABR", h, {0}};
        close(fd);
        memcpy(out, &f, sizeof(f));
    } else {
        *(int *)out = fd;
    }
    slog("vmmexport %llx type %d", h, type);
    return OK;
}

EXPORT int cuMemImportFromShareableHandle(unsigned long long *h, void *os, int type)
{
    size_t size = 0;
    int types = 0, fd = -1;
    struct stat st;

    if (!h || (type != T_FD && type != T_FABRIC))
        return INVALID_VALUE;
    if (type == T_FABRIC) {
        const struct fabric *f = os;
        if (!f || memcmp(f->magic, "FAKEFABR", 8) != 0)
            return INVALID_VALUE;
        if (getenv("FAKECUDA_SHAREABLE_SAME")) { /* the exporter's handle itself */
            *h = f->object;
            slog("same vmmimport %llx", *h);
            return OK;
        }
        fd = fake_vmm_handle_dup(f->object, &size, &types);
        if (fd < 0)
            return INVALID_VALUE;
    } else {
        int ofd = (int)(intptr_t)os;
        if (!memfd_named(ofd, "fake-vmm") || fstat(ofd, &st) != 0 || st.st_size <= 0) {
            slog("refused vmmimport fd %d", ofd);
            return INVALID_VALUE;
        }
        fd = fcntl(ofd, F_DUPFD_CLOEXEC, 0); /* the caller keeps its own */
        size = (size_t)st.st_size;
        types = T_FD;
    }
    *h = fd >= 0 ? fake_vmm_handle_adopt(fd, size, types) : 0;
    if (!*h) {
        if (fd >= 0)
            close(fd);
        return 2;
    }
    slog("vmmimport %llx type %d size %zu", *h, type, size);
    return OK;
}

/* ------------------------------------------------------------------ pools */

EXPORT int cuMemPoolExportToShareableHandle(void *out, void *pool, int type,
                                            unsigned long long flags)
{
    void *origin = NULL;
    int types = fake_pool_types(pool, &origin), fd;

    if (!out || flags || types < 0 || origin || (type != T_FD && type != T_FABRIC) ||
        !(types & type))
        return INVALID_VALUE;
    if (type == T_FABRIC) {
        struct fabric f = {"FAKEFABR", (uint64_t)(uintptr_t)pool, {0}};
        memcpy(out, &f, sizeof(f));
    } else {
        uint64_t v = (uint64_t)(uintptr_t)pool;
        fd = memfd_create("fake-pool", MFD_CLOEXEC);
        if (fd < 0)
            return 2;
        if (pwrite(fd, &v, sizeof(v), 0) != sizeof(v)) {
            close(fd);
            return 2;
        }
        *(int *)out = fd;
    }
    slog("poolexport %p type %d", pool, type);
    return OK;
}

EXPORT int cuMemPoolImportFromShareableHandle(void **pool_out, void *os, int type,
                                              unsigned long long flags)
{
    void *origin = NULL, *exporter = NULL;
    uint64_t v = 0;

    if (!pool_out || flags || (type != T_FD && type != T_FABRIC))
        return INVALID_VALUE;
    if (type == T_FABRIC) {
        const struct fabric *f = os;
        if (!f || memcmp(f->magic, "FAKEFABR", 8) != 0)
            return INVALID_VALUE;
        v = f->object;
    } else {
        int fd = (int)(intptr_t)os;
        if (!memfd_named(fd, "fake-pool") || pread(fd, &v, sizeof(v), 0) != sizeof(v)) {
            slog("refused poolimport fd %d", fd);
            return INVALID_VALUE;
        }
    }
    exporter = (void *)(uintptr_t)v;
    if (fake_pool_types(exporter, &origin) < 0 || origin)
        return INVALID_VALUE;
    *pool_out = fake_pool_adopt(exporter);
    if (!*pool_out)
        return 2;
    slog("poolimport %p from %p type %d", *pool_out, exporter, type);
    return OK;
}

/* ------------------------------------------------------------------ pool pointers */

struct ptr_data {
    char magic[8];
    dptr_t base;
    unsigned char rest[48];
};
static struct {
    dptr_t base;
    int refs;
} imported[256];
static int nimported;

EXPORT int cuMemPoolExportPointer(void *data, dptr_t p)
{
    struct ptr_data d = {"FAKEPPTR", 0, {0}};
    dptr_t base = 0;
    size_t size = 0;

    if (!data || fake_alloc_find(p, &base, &size) != 0 || base != p)
        return INVALID_VALUE;
    d.base = p;
    memcpy(data, &d, sizeof(d));
    slog("ptrexport %llx", p);
    return OK;
}

EXPORT int cuMemPoolImportPointer(dptr_t *p, void *pool, const void *data)
{
    struct ptr_data d;
    void *origin = NULL;
    dptr_t base = 0;
    size_t size = 0;
    int rc = OK;

    if (!p || !data || fake_pool_types(pool, &origin) < 0 || !origin)
        return INVALID_VALUE;
    memcpy(&d, data, sizeof(d));
    if (memcmp(d.magic, "FAKEPPTR", 8) != 0 || fake_alloc_find(d.base, &base, &size) != 0)
        return INVALID_VALUE;
    pthread_mutex_lock(&lock);
    {
        int i = 0;
        while (i < nimported && imported[i].base != d.base)
            i++;
        if (i == nimported && nimported == 256)
            rc = 2;
        else if (i == nimported)
            imported[nimported++] = (typeof(imported[0])){d.base, 1};
        else
            imported[i].refs++;
    }
    pthread_mutex_unlock(&lock);
    if (rc != OK)
        return rc;
    *p = d.base;
    slog("ptrimport %llx pool %p", d.base, pool);
    return OK;
}

/* cuMemFree_v2 of an imported pointer: the importer's reference (0), or -1: not imported. */
int fake_shareable_free(unsigned long long p)
{
    int rc = -1;

    pthread_mutex_lock(&lock);
    for (int i = 0; i < nimported && rc < 0; i++) {
        if (imported[i].base == p) {
            if (--imported[i].refs == 0)
                imported[i] = imported[--nimported];
            rc = 0;
        }
    }
    pthread_mutex_unlock(&lock);
    if (rc == 0)
        slog("ptrfree %llx", p);
    return rc;
}

EXPORT int cuMemGetAddressRange_v2(dptr_t *base, size_t *size, dptr_t p)
{
    dptr_t b = 0;
    size_t n = 0;

    if (fake_alloc_find(p, &b, &n) != 0)
        return INVALID_VALUE;
    if (base)
        *base = b;
    if (size)
        *size = n;
    return OK;
}
