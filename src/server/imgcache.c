/* SPDX-License-Identifier: MIT */
/* The user's module images on disk: loaded when a server starts, before any kernel runs. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#include "../common/clock.h"
#include "../common/config.h"
#include "../common/log.h"

/*
 * Adding code to a context waits for every kernel running in it, and holds the context
 * meanwhile (DRIVER_FACTS.md; docs/benchmarks.md, "B6"): a program's first load of a module
 * image the server has not loaded yet stops every client until the running kernels end. A
 * server keeps each image it loaded for its whole life (resources.c); this file keeps them
 * across servers. Each new image is written to the user's cache directory, and a starting
 * server loads what is there before it takes clients, while nothing runs. Then only a program
 * never run on this machine by this user (or pushed out of the cache) pays the wait.
 *
 * OPENMPS_MODULE_CACHE: the directory (default $HOME/.cache/openmps/modules; the daemon sets
 * HOME to the user's), or "off". OPENMPS_MODULE_CACHE_MAX: its size (default 256M; written like
 * the memory limits, a bare number in MiB): writing a new image deletes the least recently used
 * ones past it, and a starting server loads the most recently used ones that fit. Files are
 * <hash>-<size>.img, 0600, in a directory only the user (or root) can change; a file whose bytes do
 * not match its name, or that the driver refuses, is deleted. Everything here is best effort: a
 * cache that cannot be used costs the wait it would have saved, nothing else.
 */

#define DEFAULT_MAX (256ull << 20)
#define MAX_FILES 4096

static char dir[1024];
static uint64_t max_bytes = DEFAULT_MAX;
static bool enabled;

struct entry {
    char name[64];
    uint64_t hash, size;
    struct timespec used; /* the file's modification time: when an image was last used */
};

void om_imgcache_init(void)
{
    const char *d = getenv("OPENMPS_MODULE_CACHE"), *m = getenv("OPENMPS_MODULE_CACHE_MAX");
    const char *home = getenv("HOME");
    char err[512];
    int n;

    if (d && !strcmp(d, "off")) {
        om_info("module cache: off (OPENMPS_MODULE_CACHE=off)");
        return;
    }
    if (m && *m && om_parse_size(m, &max_bytes) < 0) {
        om_warn("OPENMPS_MODULE_CACHE_MAX=%s is not a size (like 256M): using 256M", m);
        max_bytes = DEFAULT_MAX;
    }
    if (d && *d)
        n = snprintf(dir, sizeof(dir), "%s", d);
    else if (home && home[0] == '/')
        n = snprintf(dir, sizeof(dir), "%s/.cache/openmps/modules", home);
    else {
        om_info("module cache: off (no OPENMPS_MODULE_CACHE and no home directory)");
        return;
    }
    if (n < 0 || (size_t)n >= sizeof(dir)) {
        om_warn("module cache: off (its directory's name is too long)");
        return;
    }
    if (om_make_private_dir(dir, 0700, err, sizeof(err)) < 0) {
        om_warn("module cache: off (%s)", err);
        return;
    }
    enabled = true;
}

static bool parse_name(const char *name, uint64_t *hash, uint64_t *size)
{
    char tail[8] = "";

    return sscanf(name, "%16" SCNx64 "-%" SCNu64 "%7s", hash, size, tail) == 3 &&
           !strcmp(tail, ".img") && strlen(name) < sizeof(((struct entry *)0)->name);
}

static void path_of(char *path, size_t len, const char *name)
{
    snprintf(path, len, "%s/%s", dir, name);
}

/* The cache's files, most recently used first; *ret NULL where there are none. */
static size_t list(struct entry **ret)
{
    DIR *dp = opendir(dir);
    struct entry *v = NULL;
    size_t n = 0;
    struct dirent *de;

    *ret = NULL;
    if (!dp)
        return 0;
    v = calloc(MAX_FILES, sizeof(*v));
    while (v && n < MAX_FILES && (de = readdir(dp)) != NULL) {
        struct entry *e = &v[n];
        char path[1300];
        struct stat st;
        if (!parse_name(de->d_name, &e->hash, &e->size))
            continue;
        path_of(path, sizeof(path), de->d_name);
        if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
            continue;
        memcpy(e->name, de->d_name, strlen(de->d_name) + 1); /* parse_name: it fits */
        e->used = st.st_mtim;
        n++;
    }
    closedir(dp);
    for (size_t i = 1; i < n; i++) /* by use, newest first (insertion sort: few files) */
        for (size_t j = i; j > 0 && (v[j].used.tv_sec > v[j - 1].used.tv_sec ||
                                     (v[j].used.tv_sec == v[j - 1].used.tv_sec &&
                                      v[j].used.tv_nsec > v[j - 1].used.tv_nsec));
             j--) {
            struct entry t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    *ret = v;
    return n;
}

static void drop(const char *name, const char *why)
{
    char path[1300];

    path_of(path, sizeof(path), name);
    if (unlink(path) == 0)
        om_warn("module cache: removed %s (%s)", name, why);
}

/* The file's bytes when they are what its name says; NULL otherwise. */
static void *read_image(const struct entry *e)
{
    char path[1300];
    int fd;
    uint8_t *buf;
    size_t got = 0;

    if (e->size == 0 || e->size > max_bytes || e->size > (uint64_t)SIZE_MAX)
        return NULL;
    path_of(path, sizeof(path), e->name);
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    buf = malloc(e->size);
    while (buf && got < e->size) {
        ssize_t r = read(fd, buf + got, e->size - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (buf && got == e->size && om_hash64(buf, got) == e->hash)
        return buf;
    free(buf);
    drop(e->name, "its bytes do not match its name");
    return NULL;
}

void om_imgcache_preload(void)
{
    CUresult (*load)(CUlibrary *, const void *, void *, void **, unsigned, void *, void **,
                     unsigned) = om_server_real[OM_IDX_cuLibraryLoadData];
    struct entry *v;
    uint64_t t0 = om_mono_ns(), bytes = 0;
    size_t n, loaded = 0;

    if (!enabled || !om_server_has(OM_IDX_cuLibraryLoadData))
        return;
    n = list(&v);
    for (size_t i = 0; i < n; i++) {
        void *img;
        CUlibrary lib = NULL;
        uint64_t known;
        if (bytes + v[i].size > max_bytes)
            continue; /* older ones that no longer fit: deleted at the next write */
        if (!(img = read_image(&v[i])))
            continue;
        if (om_image_lookup(img, v[i].hash, v[i].size, &known) == 0) {
            free(img);
            continue;
        }
        if (load(&lib, img, NULL, NULL, 0, NULL, NULL, 0) == CUDA_SUCCESS) {
            om_image_add(img, v[i].hash, v[i].size, (uint64_t)(uintptr_t)lib);
            bytes += v[i].size;
            loaded++;
        } else {
            drop(v[i].name, "the driver refused it");
        }
        free(img);
    }
    free(v);
    om_info("module cache: loaded %zu image(s), %" PRIu64 " bytes, in %.1f ms from %s", loaded,
            bytes, (double)(om_mono_ns() - t0) / 1e6, dir);
}

/* Deletes the least recently used files past the cache's size. */
static void trim(void)
{
    struct entry *v;
    size_t n = list(&v);
    uint64_t bytes = 0;

    for (size_t i = 0; i < n; i++) {
        if (bytes + v[i].size <= max_bytes) {
            bytes += v[i].size;
            continue;
        }
        char path[1300];
        path_of(path, sizeof(path), v[i].name);
        unlink(path);
    }
    free(v);
}

void om_imgcache_store(const void *bytes, size_t size, uint64_t hash)
{
    char name[64], path[1300], tmp[1300];
    size_t done = 0;
    int fd;

    if (!enabled || size == 0 || size > max_bytes)
        return;
    snprintf(name, sizeof(name), "%016" PRIx64 "-%zu.img", hash, size);
    path_of(path, sizeof(path), name);
    if (access(path, F_OK) == 0) {
        utimensat(AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW); /* used now */
        return;
    }
    snprintf(tmp, sizeof(tmp), "%s/.new-XXXXXX", dir);
    fd = mkstemp(tmp);
    if (fd < 0)
        return;
    while (done < size) {
        ssize_t w = write(fd, (const uint8_t *)bytes + done, size - done);
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    if (close(fd) == 0 && done == size && rename(tmp, path) == 0) {
        trim();
        return;
    }
    unlink(tmp); /* a full disk, most likely: nothing kept */
}

void om_imgcache_used(size_t size, uint64_t hash)
{
    char name[64], path[1300];

    if (!enabled)
        return;
    snprintf(name, sizeof(name), "%016" PRIx64 "-%zu.img", hash, size);
    path_of(path, sizeof(path), name);
    utimensat(AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW);
}
