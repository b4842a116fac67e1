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
#include <time.h>
#include <unistd.h>

#include "internal.h"

#include "../common/clock.h"
#include "../common/config.h"
#include "../common/image.h"
#include "../common/log.h"

/*
 * Adding code to a context waits for every kernel running in it, and holds the context
 * meanwhile (docs/driver-facts.md; docs/benchmarks.md, "B6"): a program's first load of a module
 * image the server has not loaded yet stops every client until the running kernels end. A
 * server keeps each image it loaded for its whole life (resources.c); this file keeps them
 * across servers. Each new image is written to the user's cache directory, and a starting
 * server loads what is there before it takes clients, while nothing runs. Then only a program
 * never run on this machine by this user (or pushed out of the cache) pays the wait.
 *
 * OPENMPS_MODULE_CACHE: the directory (default $HOME/.cache/openmps/modules; the daemon sets
 * HOME to the user's), or "off". Images live in a subdirectory per driver version and GPU
 * architecture (a home shared by machines of several kinds keeps one set for each), made 0700.
 * OPENMPS_MODULE_CACHE_MAX: the cache's size (default 256M; written like the memory limits, a
 * bare number in MiB): writing a new image deletes the least recently used ones past it; a
 * starting server loads the most recently used ones that fit, and stops early where their
 * device memory passes the same size or the loading passes PRELOAD_BUDGET_NS.
 *
 * Files are <16 hex digits of the image's first key (om_image_keys)>-<size>.img, 0600 (files of
 * servers before the keys changed, named by another hash, no longer match and are deleted). A file
 * whose bytes do not match its name, or that the driver calls no valid image, is deleted; one that
 * the last server's start was loading when it died (the marker file .loading names it) is deleted
 * too, so that an image that crashes or hangs the driver cannot stop every later server from
 * starting. Everything here is best effort: a cache that cannot be used costs the wait it would
 * have saved, nothing else. Writing a new image happens in the call that loaded it (which has just
 * waited for the GPU).
 */

#define DEFAULT_MAX (256ull << 20)
#define PRELOAD_BUDGET_NS (10ull * 1000 * 1000 * 1000) /* the daemon waits 60 s for a server */
#define STALE_TMP_S 600
#define MARKER ".loading"

static char dir[1024];
#define PATH_LEN (sizeof(dir) + 1 + 256) /* the directory, '/', a name of readdir's */
static uint64_t max_bytes = DEFAULT_MAX;
static bool enabled;

struct entry {
    char name[48];
    uint64_t hash, size;
    struct timespec used; /* the file's modification time: when its image was last used */
};

#define R(sym) om_server_real[OM_IDX_##sym]

/* The driver's version and device 0's architecture, as "13000-sm90". */
static void kind_of_gpu(char *tag, size_t len)
{
    int version = 0, major = 0, minor = 0;

    if (om_server_has(OM_IDX_cuDriverGetVersion))
        ((CUresult(*)(int *))R(cuDriverGetVersion))(&version);
    if (om_server_has(OM_IDX_cuDeviceGetAttribute)) {
        ((CUresult(*)(int *, int, int))R(cuDeviceGetAttribute))(&major, 75, 0); /* major */
        ((CUresult(*)(int *, int, int))R(cuDeviceGetAttribute))(&minor, 76, 0); /* minor */
    }
    snprintf(tag, len, "%d-sm%d%d", version, major, minor);
}

void om_imgcache_init(void)
{
    const char *d = getenv("OPENMPS_MODULE_CACHE"), *m = getenv("OPENMPS_MODULE_CACHE_MAX");
    const char *home = getenv("HOME");
    char err[1400], tag[64];
    int n;

    if (d && !strcmp(d, "off")) {
        om_info("module cache: off (OPENMPS_MODULE_CACHE=off)");
        return;
    }
    if (m && *m && om_parse_size(m, &max_bytes) < 0) {
        om_warn("OPENMPS_MODULE_CACHE_MAX=%s is not a size (like 256M): using 256M", m);
        max_bytes = DEFAULT_MAX;
    }
    kind_of_gpu(tag, sizeof(tag));
    if (d && *d)
        n = snprintf(dir, sizeof(dir), "%s/%s", d, tag);
    else if (home && home[0] == '/')
        n = snprintf(dir, sizeof(dir), "%s/.cache/openmps/modules/%s", home, tag);
    else {
        om_info("module cache: off (no OPENMPS_MODULE_CACHE and no home directory)");
        return;
    }
    if (n < 0 || (size_t)n >= sizeof(dir)) {
        om_warn("module cache: off (its directory's name is too long)");
        return;
    }
    /* Only the last component, ours, is made private; its parents must be trusted. */
    if (om_make_private_dir(dir, 0700, err, sizeof(err)) < 0) {
        om_warn("module cache: off (%s)", err);
        return;
    }
    enabled = true;
}

/* "<16 lowercase hex>-<decimal size, no leading zero>.img" and nothing else. */
static bool parse_name(const char *name, uint64_t *hash, uint64_t *size)
{
    const char *p = name;
    uint64_t h = 0, s = 0;

    for (int i = 0; i < 16; i++, p++) {
        int v = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
        if (v < 0)
            return false;
        h = h << 4 | (uint64_t)v;
    }
    if (*p++ != '-' || *p < '1' || *p > '9')
        return false;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (s > (UINT64_MAX - 9) / 10)
            return false;
        s = s * 10 + (uint64_t)(*p - '0');
    }
    if (strcmp(p, ".img") != 0)
        return false;
    *hash = h;
    *size = s;
    return true;
}

static void path_of(char *path, size_t len, const char *name)
{
    snprintf(path, len, "%s/%s", dir, name);
}

static void drop(const char *name, const char *why)
{
    char path[PATH_LEN];

    path_of(path, sizeof(path), name);
    if (unlink(path) == 0)
        om_warn("module cache: removed %s (%s)", name, why);
}

static int newest_first(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;

    if (x->used.tv_sec != y->used.tv_sec)
        return x->used.tv_sec < y->used.tv_sec ? 1 : -1;
    if (x->used.tv_nsec != y->used.tv_nsec)
        return x->used.tv_nsec < y->used.tv_nsec ? 1 : -1;
    return strcmp(x->name, y->name);
}

/* The cache's files, most recently used first (*ret NULL where there are none); leftovers of
 * writes that died are deleted on the way. */
static size_t list(struct entry **ret)
{
    DIR *dp = opendir(dir);
    struct entry *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    time_t now = time(NULL);

    *ret = NULL;
    if (!dp)
        return 0;
    while ((de = readdir(dp)) != NULL) {
        char path[PATH_LEN];
        struct stat st;
        uint64_t hash, size;
        bool tmp = !strncmp(de->d_name, ".new-", 5);
        if (!tmp && !parse_name(de->d_name, &hash, &size))
            continue;
        path_of(path, sizeof(path), de->d_name);
        if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
            continue;
        if (tmp) {
            if (now - st.st_mtim.tv_sec > STALE_TMP_S)
                unlink(path);
            continue;
        }
        if ((uint64_t)st.st_size != size) {
            drop(de->d_name, "its size is not the one its name says");
            continue;
        }
        if (n == cap) {
            size_t c = cap ? cap * 2 : 64;
            struct entry *nv = realloc(v, c * sizeof(*v));
            if (!nv)
                break;
            v = nv;
            cap = c;
        }
        memcpy(v[n].name, de->d_name, strlen(de->d_name) + 1); /* parse_name: 26 at most */
        v[n].hash = hash;
        v[n].size = size;
        v[n].used = st.st_mtim;
        n++;
    }
    closedir(dp);
    if (n > 1)
        qsort(v, n, sizeof(*v), newest_first);
    *ret = v;
    return n;
}

/* The file's bytes, or NULL: deleted only when they were all read and are not what the name
 * says (a failed read, or no memory, says nothing about the file). */
/* The file's bytes, whose first key (om_image_keys) is its name's; the second in *ret_k2. */
static void *read_image(const struct entry *e, uint64_t *ret_k2)
{
    uint64_t k1 = 0;

    char path[PATH_LEN];
    struct stat st;
    uint8_t *buf = NULL;
    size_t got = 0;
    int fd;

    if (e->size == 0 || e->size > max_bytes || e->size > (uint64_t)SIZE_MAX)
        return NULL;
    path_of(path, sizeof(path), e->name);
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == e->size)
        buf = malloc(e->size);
    while (buf && got < e->size) {
        ssize_t r = read(fd, buf + got, e->size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!buf || got != e->size) {
        free(buf);
        return NULL;
    }
    om_image_keys(buf, got, &k1, ret_k2);
    if (k1 == e->hash)
        return buf;
    free(buf);
    drop(e->name, "its bytes do not match its name");
    return NULL;
}

static void write_marker(const char *name)
{
    char path[PATH_LEN], tmp[PATH_LEN];
    FILE *f;

    path_of(path, sizeof(path), MARKER);
    path_of(tmp, sizeof(tmp), MARKER ".new");
    if ((f = fopen(tmp, "w")) != NULL) {
        fprintf(f, "%s\n", name);
        if (fclose(f) == 0)
            rename(tmp, path);
    }
}

/* An image the last start was loading when that server died: not loaded again. */
static void drop_marked(void)
{
    char path[PATH_LEN], name[64] = "";
    uint64_t h, s;
    FILE *f;

    path_of(path, sizeof(path), MARKER);
    if (!(f = fopen(path, "r")))
        return;
    if (fgets(name, sizeof(name), f))
        name[strcspn(name, "\n")] = '\0';
    fclose(f);
    unlink(path);
    if (parse_name(name, &h, &s))
        drop(name, "the last server's start did not get past loading it");
}

static size_t free_device_memory(void)
{
    size_t free_b = 0, total = 0;

    if (om_server_has(OM_IDX_cuMemGetInfo_v2))
        ((CUresult(*)(size_t *, size_t *))R(cuMemGetInfo_v2))(&free_b, &total);
    return free_b;
}

static void trim(void);

void om_imgcache_preload(void)
{
    CUresult (*load)(CUlibrary *, const void *, void *, void **, unsigned, void *, void **,
                     unsigned) = R(cuLibraryLoadData);
    struct entry *v;
    uint64_t t0 = om_mono_ns(), bytes = 0, device = 0;
    size_t n, loaded = 0, i;
    const char *stopped = NULL;

    if (!enabled || !om_server_has(OM_IDX_cuLibraryLoadData))
        return;
    drop_marked();
    n = list(&v);
    for (i = 0; i < n && !stopped; i++) {
        void *img;
        CUlibrary lib = NULL;
        uint64_t known, k2 = 0;
        size_t before;
        CUresult rc;
        if (v[i].size > max_bytes - bytes)
            continue; /* older ones that no longer fit: the trim below deletes them */
        if (om_mono_ns() - t0 > PRELOAD_BUDGET_NS) {
            stopped = "its time ran out";
            break;
        }
        if (!(img = read_image(&v[i], &k2)))
            continue;
        if (om_image_lookup(v[i].hash, k2, v[i].size, &known) == 0) {
            free(img);
            continue;
        }
        if (!om_image_budget_take(v[i].size)) {
            free(img);
            stopped = "the server's budget of module images (OPENMPS_SERVER_IMAGE_MAX) is spent";
            break;
        }
        write_marker(v[i].name);
        before = free_device_memory();
        rc = load(&lib, img, NULL, NULL, 0, NULL, NULL, 0);
        if (rc != CUDA_SUCCESS)
            om_image_budget_give(v[i].size);
        if (rc == CUDA_SUCCESS) {
            size_t after = free_device_memory();
            om_image_add(v[i].hash, k2, v[i].size, (uint64_t)(uintptr_t)lib,
                         om_output_image_prints(img, v[i].size));
            bytes += v[i].size;
            device += before > after ? before - after : 0;
            loaded++;
            if (device > max_bytes)
                stopped = "the loaded images' device memory passed the cache's size";
        } else if (rc == CUDA_ERROR_INVALID_IMAGE || rc == CUDA_ERROR_INVALID_PTX ||
                   rc == CUDA_ERROR_NO_BINARY_FOR_GPU || rc == CUDA_ERROR_UNSUPPORTED_PTX_VERSION) {
            drop(v[i].name, "the driver calls it no valid image for this GPU");
        }
        free(img);
    }
    if (n) {
        char path[PATH_LEN];
        path_of(path, sizeof(path), MARKER);
        unlink(path);
    }
    free(v);
    trim(); /* the size may be smaller than the last server's */
    om_info("module cache: loaded %zu image(s), %" PRIu64 " bytes, %" PRIu64
            " bytes of device memory, in %.1f ms from %s%s%s",
            loaded, bytes, device, (double)(om_mono_ns() - t0) / 1e6, dir,
            stopped ? "; stopped: " : "", stopped ? stopped : "");
}

/* Deletes the least recently used files past the cache's size. */
static void trim(void)
{
    struct entry *v;
    size_t n = list(&v);
    uint64_t bytes = 0;

    for (size_t i = 0; i < n; i++) {
        char path[PATH_LEN];
        if (v[i].size <= max_bytes - bytes) {
            bytes += v[i].size;
            continue;
        }
        path_of(path, sizeof(path), v[i].name);
        unlink(path);
    }
    free(v);
}

bool om_imgcache_used(size_t size, uint64_t hash)
{
    char name[48], path[PATH_LEN];

    if (!enabled || size == 0 || size > max_bytes)
        return false;
    snprintf(name, sizeof(name), "%016" PRIx64 "-%zu.img", hash, size);
    path_of(path, sizeof(path), name);
    return utimensat(AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW) == 0;
}

void om_imgcache_store(const void *bytes, size_t size, uint64_t hash)
{
    char name[48], path[PATH_LEN], tmp[PATH_LEN];
    size_t done = 0;
    int fd;

    if (!enabled || size == 0 || size > max_bytes)
        return;
    if (om_imgcache_used(size, hash))
        return; /* there already: used now */
    snprintf(name, sizeof(name), "%016" PRIx64 "-%zu.img", hash, size);
    path_of(path, sizeof(path), name);
    path_of(tmp, sizeof(tmp), ".new-XXXXXX");
    fd = mkstemp(tmp);
    if (fd < 0)
        return;
    while (done < size) {
        ssize_t w = write(fd, (const uint8_t *)bytes + done, size - done);
        if (w < 0 && errno == EINTR)
            continue;
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
