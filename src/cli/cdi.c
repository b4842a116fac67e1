/* SPDX-License-Identifier: MIT */
/*
 * openmps cdi: writes a CDI spec (Container Device Interface, the JSON a container runtime reads
 * from /etc/cdi or /var/run/cdi) that puts openmps into a container: the shim bind-mounted
 * read-only beside whatever libcuda.so.1 the image or NVIDIA's toolkit gives it and preloaded
 * (LD_PRELOAD: later loads of "libcuda.so.1" find it by its soname), the daemon's pipe directory
 * bind-mounted read-only (a socket there still takes connections; a container's root cannot
 * put its own listener in the daemon's place), CUDA_MPS_PIPE_DIRECTORY naming it, and the
 * operator's --env variables. One
 * device, whose containerEdits hold it all. docs/operations.md, "Kubernetes and containers";
 * tests/ipc/test_cdi.py runs a client in a bubblewrap container made from it alone.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/config.h"

/* The CDI version this spec needs at least: mounts with a type (0.4.0) and host paths of
 * device nodes (0.5.0, none here); what runtimes of 2023 on read. */
#define CDI_VERSION "0.5.0"
#define CDI_DEFAULT_KIND "openmps/mps"
#define CDI_DEFAULT_NAME "client"
#define CDI_CONTAINER_SHIM "/opt/openmps/lib/libcuda.so.1"
#define CDI_MAX_ENV 64
/* A string the shim holds and NVIDIA's libcuda.so.1 does not: tells the two apart. */
#define SHIM_MARK "OPENMPS_DRIVER"

struct cdi {
    const char *out, *kind, *name;
    const char *pipe, *cpipe; /* the pipe directory on the host, in the container */
    const char *shim, *cshim; /* the shim on the host, in the container */
    const char *install_dir;  /* --install-shim: where the shim is copied first */
    const char *env[CDI_MAX_ENV];
    int nenv;
    char shim_buf[PATH_MAX], real_shim[PATH_MAX], installed[PATH_MAX];
};

static void cdi_usage(FILE *f)
{
    fprintf(f,
            "usage: openmps cdi [-o FILE.json] [--pipe-dir DIR] [--container-pipe-dir DIR]\n"
            "                   [--shim FILE | --install-shim DIR] [--container-shim FILE]\n"
            "                   [--kind VENDOR/CLASS] [--name NAME] [--env NAME=VALUE]...\n"
            "Writes a CDI spec (to stdout, or FILE.json atomically) whose one device, %s=%s\n"
            "by default, gives a container the openmps shim (mounted at %s\n"
            "and preloaded), the daemon's pipe directory (default $CUDA_MPS_PIPE_DIRECTORY, else\n"
            "%s; in the container at the same path unless --container-pipe-dir),\n"
            "CUDA_MPS_PIPE_DIRECTORY and the --env variables. --install-shim DIR copies the shim\n"
            "into DIR first (replacing it by a rename, never in place) and names that copy.\n",
            CDI_DEFAULT_KIND, CDI_DEFAULT_NAME, CDI_CONTAINER_SHIM, OM_ROOT_PIPE_DIR);
}

/* Printable ASCII only: what JSON, a mount table and an environment all take as it is. */
static bool printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            return false;
    return true;
}

/* An absolute path without ".", ".." or empty components, not "/" itself, printable. 0, or -1
 * with the reason on stderr (what: the option it came from). */
static int check_path(const char *what, const char *p)
{
    const char *why = NULL;

    if (!*p)
        why = "is empty";
    else if (p[0] != '/')
        why = "is not absolute";
    else if (!strcmp(p, "/"))
        why = "is the root directory";
    else if (strlen(p) >= PATH_MAX)
        why = "is too long";
    else if (!printable(p))
        why = "has a control or non-ASCII character";
    else if (strstr(p, "//") || (strlen(p) > 1 && p[strlen(p) - 1] == '/'))
        why = "has an empty component (// or a trailing /)";
    else if (strstr(p, "/./") || strstr(p, "/../") || !strcmp(p + strlen(p) - 2, "/.") ||
             (strlen(p) >= 3 && !strcmp(p + strlen(p) - 3, "/..")))
        why = "has a . or .. component";
    if (!why)
        return 0;
    fprintf(stderr, "openmps cdi: %s \"%s\" %s\n", what, p, why);
    return -1;
}

/* s[0..n) is a name of letters, digits and the characters of extra, beginning with a letter
 * (or a digit where digit_first) and ending with a letter or digit. */
static bool name_ok(const char *s, size_t n, const char *extra, bool digit_first)
{
    if (n == 0)
        return false;
    if (!(s[0] >= 'a' && s[0] <= 'z') && !(s[0] >= 'A' && s[0] <= 'Z') &&
        !(digit_first && s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && !(c && strchr(extra, c)))
            return false;
        if (i == n - 1 && !alnum)
            return false;
    }
    return true;
}

/* The kind as CDI's runtimes parse it: VENDOR/CLASS, the vendor a DNS-like name (letters,
 * digits, '-', '_', '.'), the class at most 63 of letters, digits, '-', '_'. */
static int check_kind(const char *kind)
{
    const char *slash = strchr(kind, '/');

    if (!slash || strchr(slash + 1, '/') || !name_ok(kind, (size_t)(slash - kind), "-_.", false) ||
        strlen(slash + 1) > 63 || !name_ok(slash + 1, strlen(slash + 1), "-_", false)) {
        fprintf(stderr,
                "openmps cdi: --kind \"%s\" is not VENDOR/CLASS (letters, digits, '-', '_', "
                "and '.' in VENDOR; each beginning with a letter, ending with a letter or "
                "digit), e.g. %s\n",
                kind, CDI_DEFAULT_KIND);
        return -1;
    }
    return 0;
}

/* NAME=VALUE with NAME a shell variable name, VALUE printable; not one the spec sets itself. */
static int check_env(const char *kv)
{
    const char *eq = strchr(kv, '=');
    size_t n = eq ? (size_t)(eq - kv) : 0;
    bool ok = n > 0 && !(kv[0] >= '0' && kv[0] <= '9');

    for (size_t i = 0; ok && i < n; i++)
        ok = kv[i] == '_' || (kv[i] >= 'a' && kv[i] <= 'z') || (kv[i] >= 'A' && kv[i] <= 'Z') ||
             (kv[i] >= '0' && kv[i] <= '9');
    if (!ok) {
        fprintf(stderr, "openmps cdi: --env \"%s\" is not NAME=VALUE with NAME a variable name\n",
                kv);
        return -1;
    }
    if (!printable(eq + 1)) {
        fprintf(stderr, "openmps cdi: --env %.*s: the value has a control or non-ASCII character\n",
                (int)n, kv);
        return -1;
    }
    if ((n == strlen("CUDA_MPS_PIPE_DIRECTORY") && !strncmp(kv, "CUDA_MPS_PIPE_DIRECTORY", n)) ||
        (n == strlen("LD_PRELOAD") && !strncmp(kv, "LD_PRELOAD", n))) {
        fprintf(stderr,
                "openmps cdi: --env %.*s: the spec sets it itself (use --container-pipe-dir or "
                "--container-shim)\n",
                (int)n, kv);
        return -1;
    }
    return 0;
}

/* The file is openmps's shim: a readable regular file holding SHIM_MARK. */
static int check_shim(const char *path)
{
    static const char mark[] = SHIM_MARK;
    char buf[65536 + sizeof(mark)];
    size_t keep = 0;
    struct stat st;
    bool found = false;
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0 || fstat(fd, &st) < 0) {
        fprintf(stderr, "openmps cdi: cannot read the shim %s: %s\n", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "openmps cdi: the shim %s is not a regular file\n", path);
        close(fd);
        return -1;
    }
    while (!found && (n = read(fd, buf + keep, sizeof(buf) - keep)) > 0) {
        size_t len = keep + (size_t)n;
        found = memmem(buf, len, mark, sizeof(mark) - 1) != NULL;
        keep = len < sizeof(mark) - 1 ? len : sizeof(mark) - 1;
        memmove(buf, buf + len - keep, keep);
    }
    close(fd);
    if (!found) {
        fprintf(stderr,
                "openmps cdi: %s is not the openmps shim (is it NVIDIA's libcuda.so.1?): name "
                "the libcuda.so.1 that openmps installs, in lib/openmps/\n",
                path);
        return -1;
    }
    return 0;
}

/* A temporary file beside path (a name CDI's runtimes do not read: it does not end in .json),
 * made with the given mode. Returns its descriptor, its name in tmp; -1 (errno). */
static int temp_beside(const char *path, mode_t mode, char *tmp, size_t cap)
{
    const char *slash = strrchr(path, '/'); /* path is absolute (check_path) */
    int fd;

    if ((size_t)snprintf(tmp, cap, "%.*s/.%s.XXXXXX", (int)(slash - path), path, slash + 1) >=
        cap) {
        errno = ENAMETOOLONG;
        return -1;
    }
    fd = mkostemp(tmp, O_CLOEXEC);
    if (fd >= 0 && fchmod(fd, mode) < 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        errno = e;
        return -1;
    }
    return fd;
}

/* Writes all of buf[0..n), fsyncs and closes fd, renames tmp to path. 0 or -1 (errno; tmp
 * removed). */
static int finish_replace(int fd, const void *buf, size_t n, const char *tmp, const char *path)
{
    const char *p = buf;
    int e;

    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            goto fail;
        p += w;
        n -= (size_t)w;
    }
    if (fsync(fd) < 0)
        goto fail;
    if (close(fd) < 0) {
        fd = -1;
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path) < 0)
        goto fail;
    return 0;
fail:
    e = errno ? errno : EIO;
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    errno = e;
    return -1;
}

/* Copies the shim into dir (made 0755 when missing) as libcuda.so.1, by a rename: a container
 * that has the old file mounted keeps it whole. */
static int install_shim(struct cdi *c)
{
    char tmp[PATH_MAX + 32];
    struct stat st;
    char *data = NULL;
    size_t len = 0, cap = 0;
    ssize_t n;
    int in, out;

    if (mkdir(c->install_dir, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "openmps cdi: cannot make --install-shim %s: %s\n", c->install_dir,
                strerror(errno));
        return -1;
    }
    if (lstat(c->install_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "openmps cdi: --install-shim %s is not a directory\n", c->install_dir);
        return -1;
    }
    snprintf(c->installed, sizeof(c->installed), "%s/libcuda.so.1", c->install_dir);
    in = open(c->shim, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        fprintf(stderr, "openmps cdi: cannot read %s: %s\n", c->shim, strerror(errno));
        return -1;
    }
    for (;;) {
        if (len == cap) {
            char *more = realloc(data, cap ? cap * 2 : 1 << 20);
            if (!more) {
                fprintf(stderr, "openmps cdi: out of memory reading %s\n", c->shim);
                goto fail;
            }
            data = more;
            cap = cap ? cap * 2 : 1 << 20;
        }
        n = read(in, data + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "openmps cdi: cannot read %s: %s\n", c->shim, strerror(errno));
            goto fail;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    out = temp_beside(c->installed, 0644, tmp, sizeof(tmp));
    if (out < 0 || finish_replace(out, data, len, tmp, c->installed) < 0) {
        fprintf(stderr, "openmps cdi: cannot write %s: %s\n", c->installed, strerror(errno));
        goto fail;
    }
    close(in);
    free(data);
    c->shim = c->installed;
    return 0;
fail:
    close(in);
    free(data);
    return -1;
}

/* A growing text buffer; a failed allocation makes it NULL, reported once at the end. */
struct text {
    char *s;
    size_t len, cap;
    bool failed;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (t->failed)
        return;
    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = true;
            return;
        }
        if (t->s && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = (t->cap + (size_t)n + 1) * 2;
        char *more = realloc(t->s, cap);
        if (!more) {
            t->failed = true;
            return;
        }
        t->s = more;
        t->cap = cap;
    }
}

/* A JSON string of printable ASCII (checked before): only '"' and '\\' need escaping. */
static void put_str(struct text *t, const char *s)
{
    put(t, "\"");
    for (; *s; s++)
        put(t, *s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
    put(t, "\"");
}

static void put_mount(struct text *t, const char *host, const char *in, const char *options,
                      bool last)
{
    put(t, "          {\n            \"hostPath\": ");
    put_str(t, host);
    put(t, ",\n            \"containerPath\": ");
    put_str(t, in);
    put(t, ",\n            \"type\": \"bind\",\n            \"options\": [%s]\n          }%s\n",
        options, last ? "" : ",");
}

static void render(const struct cdi *c, struct text *t)
{
    char pre[PATH_MAX + 16];

    put(t, "{\n  \"cdiVersion\": \"%s\",\n  \"kind\": ", CDI_VERSION);
    put_str(t, c->kind);
    put(t, ",\n  \"devices\": [\n    {\n      \"name\": ");
    put_str(t, c->name);
    put(t, ",\n      \"containerEdits\": {\n        \"env\": [\n          ");
    snprintf(pre, sizeof(pre), "CUDA_MPS_PIPE_DIRECTORY=%s", c->cpipe);
    put_str(t, pre);
    put(t, ",\n          ");
    snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", c->cshim);
    put_str(t, pre);
    for (int i = 0; i < c->nenv; i++) {
        put(t, ",\n          ");
        put_str(t, c->env[i]);
    }
    put(t, "\n        ],\n        \"mounts\": [\n");
    put_mount(t, c->shim, c->cshim, "\"ro\", \"nosuid\", \"nodev\", \"bind\"", false);
    put_mount(t, c->pipe, c->cpipe, "\"ro\", \"nosuid\", \"nodev\", \"noexec\", \"bind\"", true);
    put(t, "        ]\n      }\n    }\n  ]\n}\n");
}

/* The spec to stdout, or to path by a rename (a runtime reading the directory never sees half
 * a spec). 0 or -1 with the reason on stderr. */
static int write_spec(const char *path, const struct text *t)
{
    char tmp[PATH_MAX + 32];
    int fd;

    if (!path) {
        if (fwrite(t->s, 1, t->len, stdout) != t->len || fflush(stdout) != 0) {
            fprintf(stderr, "openmps cdi: cannot write the spec to stdout: %s\n", strerror(errno));
            return -1;
        }
        return 0;
    }
    fd = temp_beside(path, 0644, tmp, sizeof(tmp));
    if (fd < 0 || finish_replace(fd, t->s, t->len, tmp, path) < 0) {
        fprintf(stderr, "openmps cdi: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The options, checked. 0, 1 (--help: done) or 2 (a usage error, said). */
static int parse(struct cdi *c, int argc, char **argv)
{
    enum { O_PIPE = 256, O_CPIPE, O_SHIM, O_CSHIM, O_INSTALL, O_KIND, O_NAME, O_ENV };
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"pipe-dir", required_argument, NULL, O_PIPE},
        {"container-pipe-dir", required_argument, NULL, O_CPIPE},
        {"shim", required_argument, NULL, O_SHIM},
        {"container-shim", required_argument, NULL, O_CSHIM},
        {"install-shim", required_argument, NULL, O_INSTALL},
        {"kind", required_argument, NULL, O_KIND},
        {"name", required_argument, NULL, O_NAME},
        {"env", required_argument, NULL, O_ENV},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;

    optind = 0; /* glibc: start afresh */
    while ((ch = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'o': c->out = strcmp(optarg, "-") ? optarg : NULL; break;
        case O_PIPE: c->pipe = optarg; break;
        case O_CPIPE: c->cpipe = optarg; break;
        case O_SHIM: c->shim = optarg; break;
        case O_CSHIM: c->cshim = optarg; break;
        case O_INSTALL: c->install_dir = optarg; break;
        case O_KIND: c->kind = optarg; break;
        case O_NAME: c->name = optarg; break;
        case O_ENV:
            if (c->nenv == CDI_MAX_ENV) {
                fprintf(stderr, "openmps cdi: more than %d --env\n", CDI_MAX_ENV);
                return 2;
            }
            if (check_env(optarg) < 0)
                return 2;
            for (int i = 0; i < c->nenv; i++) {
                size_t n = strcspn(optarg, "=");
                if (!strncmp(c->env[i], optarg, n + 1)) {
                    fprintf(stderr, "openmps cdi: --env %.*s given twice\n", (int)n, optarg);
                    return 2;
                }
            }
            c->env[c->nenv++] = optarg;
            break;
        case 'h': cdi_usage(stdout); return 1;
        default: return om_cli_bad_option("openmps cdi", argv, ch);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "openmps cdi: unexpected argument \"%s\" (see openmps cdi --help)\n",
                argv[optind]);
        return 2;
    }
    if (!c->pipe) {
        const char *env = getenv("CUDA_MPS_PIPE_DIRECTORY");
        c->pipe = env && *env ? env : OM_ROOT_PIPE_DIR;
    }
    if (!c->cpipe)
        c->cpipe = c->pipe;
    if (check_path("--pipe-dir", c->pipe) < 0 || check_path("--container-pipe-dir", c->cpipe) < 0 ||
        (c->shim && check_path("--shim", c->shim) < 0) ||
        (c->install_dir && check_path("--install-shim", c->install_dir) < 0) ||
        check_path("--container-shim", c->cshim) < 0 ||
        (c->out && check_path("--output", c->out) < 0) || check_kind(c->kind) < 0)
        return 2;
    if (!name_ok(c->name, strlen(c->name), "-_.:", true)) {
        fprintf(stderr,
                "openmps cdi: --name \"%s\" is not a device name (letters, digits, '-', '_', "
                "'.', ':'; beginning and ending with a letter or digit)\n",
                c->name);
        return 2;
    }
    if (c->out && strcmp(c->out + (strlen(c->out) > 5 ? strlen(c->out) - 5 : 0), ".json")) {
        fprintf(stderr,
                "openmps cdi: --output %s: runtimes read only *.json and *.yaml files from "
                "their CDI directories, and this writes JSON: name it *.json\n",
                c->out);
        return 2;
    }
    if (strpbrk(c->cshim, ": ")) { /* LD_PRELOAD splits there */
        fprintf(stderr,
                "openmps cdi: --container-shim %s has a colon or a space, where "
                "LD_PRELOAD splits its list\n",
                c->cshim);
        return 2;
    }
    if (!strncmp(c->cshim, c->cpipe, strlen(c->cpipe)) && c->cshim[strlen(c->cpipe)] == '/') {
        fprintf(stderr,
                "openmps cdi: --container-shim %s lies in the container's pipe directory "
                "%s, whose mount would hide it\n",
                c->cshim, c->cpipe);
        return 2;
    }
    if (c->shim && c->install_dir && !strcmp(c->shim, c->install_dir)) {
        fprintf(stderr, "openmps cdi: --shim and --install-shim name the same path\n");
        return 2;
    }
    return 0;
}

int om_cli_cdi(int argc, char **argv)
{
    struct cdi *c = calloc(1, sizeof(*c));
    struct text t = {0};
    struct stat st;
    int rc;

    if (!c)
        return 1;
    c->kind = CDI_DEFAULT_KIND;
    c->name = CDI_DEFAULT_NAME;
    c->cshim = CDI_CONTAINER_SHIM;
    rc = parse(c, argc, argv);
    if (rc) {
        free(c);
        return rc == 1 ? 0 : 2;
    }
    rc = 1;
    if (!c->shim) {
        if (om_cli_shim_dir(c->shim_buf, sizeof(c->shim_buf) - 16) < 0) {
            fprintf(stderr, "openmps cdi: cannot find the shim (libcuda.so.1): name it with "
                            "--shim or OPENMPS_LIB\n");
            goto out;
        }
        strcat(c->shim_buf, "/libcuda.so.1");
        /* found relative to this program (bin/../lib/openmps): the plain path */
        if (!realpath(c->shim_buf, c->real_shim)) {
            fprintf(stderr, "openmps cdi: cannot read the shim %s: %s\n", c->shim_buf,
                    strerror(errno));
            goto out;
        }
        c->shim = c->real_shim;
        if (check_path("the shim's path", c->shim) < 0)
            goto out;
    }
    if (check_shim(c->shim) < 0 || (c->install_dir && install_shim(c) < 0))
        goto out;
    /* The pipe directory may come after the spec (the daemon makes it); a symlink or a file
     * there would be refused by the daemon, so it is refused here too. */
    if (lstat(c->pipe, &st) == 0 && !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "openmps cdi: --pipe-dir %s is %s, not a directory\n", c->pipe,
                S_ISLNK(st.st_mode) ? "a symlink" : "a file");
        goto out;
    }
    if (lstat(c->pipe, &st) < 0)
        fprintf(stderr,
                "openmps cdi: note: %s does not exist yet; containers given this spec fail to "
                "start until the daemon (or the operator) makes it\n",
                c->pipe);
    render(c, &t);
    if (t.failed) {
        fprintf(stderr, "openmps cdi: out of memory\n");
        goto out;
    }
    if (write_spec(c->out, &t) == 0)
        rc = 0;
out:
    free(t.s);
    free(c);
    return rc;
}
