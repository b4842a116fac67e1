/* SPDX-License-Identifier: MIT */
/* Environment variables, directories and the value syntaxes shared by every openmps process. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *env_or(const char *name, const char *def)
{
    const char *v = getenv(name);

    return v && *v ? v : def;
}

const char *om_daemon_pipe_dir(uid_t euid)
{
    return env_or("CUDA_MPS_PIPE_DIRECTORY", euid == 0 ? OM_ROOT_PIPE_DIR : OM_DEFAULT_PIPE_DIR);
}

const char *om_daemon_log_dir(uid_t euid)
{
    return env_or("CUDA_MPS_LOG_DIRECTORY", euid == 0 ? OM_ROOT_LOG_DIR : OM_DEFAULT_LOG_DIR);
}

int om_pipe_dirs(const char *dirs[OM_PIPE_DIRS_MAX])
{
    const char *v = getenv("CUDA_MPS_PIPE_DIRECTORY");

    if (v && *v) {
        dirs[0] = v;
        return 1;
    }
    dirs[0] = OM_ROOT_PIPE_DIR;
    dirs[1] = OM_DEFAULT_PIPE_DIR;
    dirs[2] = OM_NVIDIA_PIPE_DIR;
    return 3;
}

int om_parse_u64(const char *s, uint64_t max, uint64_t *ret)
{
    uint64_t v = 0;

    if (!s || !*s)
        return -EINVAL;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -EINVAL;
        if (v > (max - (uint64_t)(*s - '0')) / 10)
            return -EINVAL;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *ret = v;
    return 0;
}

/* Parses "123" or "123.456" into an integer and up to `scale_digits` decimals,
 * returning value * 10^scale_digits. */
static int parse_fixed(const char *s, const char *end, int scale_digits, uint64_t *ret)
{
    uint64_t v = 0;
    int decimals = -1;

    if (s == end)
        return -EINVAL;
    for (; s < end; s++) {
        if (*s == '.') {
            if (decimals >= 0 || s + 1 == end)
                return -EINVAL;
            decimals = 0;
            continue;
        }
        if (*s < '0' || *s > '9')
            return -EINVAL;
        if (decimals >= 0 && ++decimals > scale_digits)
            return -EINVAL;
        if (v > (UINT64_MAX - 9) / 10)
            return -EINVAL;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    for (int d = decimals < 0 ? 0 : decimals; d < scale_digits; d++) {
        if (v > UINT64_MAX / 10)
            return -EINVAL;
        v *= 10;
    }
    *ret = v;
    return 0;
}

int om_parse_size(const char *s, uint64_t *ret)
{
    const char *end;
    unsigned shift = 0;
    uint64_t milli;

    if (!s || !*s)
        return -EINVAL;
    end = s + strlen(s);
    if (end > s + 1 && (end[-1] == 'B' || end[-1] == 'b') && !isdigit((unsigned char)end[-2]))
        end--;
    switch (end[-1]) {
    case 'k':
    case 'K': shift = 10; break;
    case 'm':
    case 'M': shift = 20; break;
    case 'g':
    case 'G': shift = 30; break;
    case 't':
    case 'T': shift = 40; break;
    default: break;
    }
    if (shift)
        end--;
    if (parse_fixed(s, end, 3, &milli) < 0)
        return -EINVAL;
    if (shift == 0)
        shift = 20; /* a bare number is MiB, as nvidia-cuda-mps-control reads it */
    /* milli << shift can overflow for large values: check first. */
    if (shift && milli > (UINT64_MAX >> shift))
        return -EINVAL;
    *ret = (milli << shift) / 1000;
    return 0;
}

void om_format_size(uint64_t bytes, char *buf, size_t cap)
{
    static const char units[] = "TGMK";
    static const unsigned shifts[] = {40, 30, 20, 10};

    for (int i = 0; i < 4; i++) {
        uint64_t unit = 1ull << shifts[i];
        if (bytes && bytes % unit == 0) {
            snprintf(buf, cap, "%lluU", (unsigned long long)(bytes / unit));
            buf[strlen(buf) - 1] = units[i];
            return;
        }
    }
    snprintf(buf, cap, "%llu", (unsigned long long)bytes);
}

int om_parse_percentage(const char *s, uint32_t *ret_milli)
{
    uint64_t v;

    if (!s || parse_fixed(s, s + strlen(s), 3, &v) < 0 || v == 0 || v > 100000)
        return -EINVAL;
    *ret_milli = (uint32_t)v;
    return 0;
}

void om_format_percentage(uint32_t milli, char *buf, size_t cap)
{
    uint32_t tenths = (milli + 50) / 100; /* one decimal, rounded, as NVIDIA prints */

    snprintf(buf, cap, "%u.%u", tenths / 10, tenths % 10);
}

int om_parse_mem_limit_list(const char *s, struct om_limits *limits)
{
    struct om_limits l = *limits;
    char buf[OM_VISIBLE_MAX];
    char *save = NULL;
    int uuids = 0;

    if (!s || strlen(s) >= sizeof(buf))
        return -EINVAL;
    strcpy(buf, s);
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        uint64_t dev, bytes;
        if (!eq)
            return -EINVAL;
        *eq = '\0';
        if (strncasecmp(tok, "GPU-", 4) == 0) { /* the daemon knows the UUIDs (visible.c) */
            if (strlen(tok) <= 4 || om_parse_size(eq + 1, &bytes) < 0)
                return -EINVAL;
            uuids++;
            continue;
        }
        if (om_parse_u64(tok, OM_MAX_DEVICES - 1, &dev) < 0 || om_parse_size(eq + 1, &bytes) < 0)
            return -EINVAL;
        l.mem_limit[dev] = bytes;
        if (dev + 1 > l.ndevices)
            l.ndevices = (uint32_t)dev + 1;
    }
    *limits = l;
    return uuids;
}

long om_raise_nofile(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -1;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    return rl.rlim_cur == RLIM_INFINITY ? 1L << 20 : (long)rl.rlim_cur;
}

/* Creates the missing parents of dir, and refuses a parent that another user
 * could swap under us: one owned by someone else than root or us, or writable
 * by others without the sticky bit. */
static int make_parents(const char *dir, char *bad, size_t badlen)
{
    char buf[4096];
    size_t len = strlen(dir);
    struct stat st;

    if (len >= sizeof(buf))
        return -ENAMETOOLONG;
    memcpy(buf, dir, len + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -errno;
        if (stat(buf, &st) < 0)
            return -errno;
        if ((st.st_uid != 0 && st.st_uid != geteuid()) ||
            ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))) {
            snprintf(bad, badlen, "%s", buf);
            return -EPERM;
        }
        *p = '/';
    }
    return 0;
}

int om_make_private_dir(const char *dir, mode_t mode, char *err, size_t errlen)
{
    char bad[4096] = "";
    struct stat st;
    int rc;

    if (dir[0] != '/') {
        snprintf(err, errlen, "directory %s is not an absolute path", dir);
        return -EINVAL;
    }
    rc = make_parents(dir, bad, sizeof(bad));
    if (rc == -EPERM) {
        snprintf(err, errlen,
                 "%s cannot be trusted: %s belongs to another user or anyone may replace its "
                 "entries; use a directory whose parents only root or you can change",
                 dir, bad);
        return rc;
    }
    if (rc == 0 && mkdir(dir, mode) < 0 && errno != EEXIST)
        rc = -errno;
    if (rc < 0) {
        snprintf(err, errlen, "cannot create directory %s: %s", dir, strerror(-rc));
        return rc;
    }
    if (lstat(dir, &st) < 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot inspect directory %s: %s", dir, strerror(-rc));
        return rc;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s exists and is not a directory (a symlink is refused)", dir);
        return -ENOTDIR;
    }
    if (st.st_uid != geteuid()) {
        snprintf(err, errlen, "directory %s belongs to uid %u, not to uid %u; refusing to use it",
                 dir, (unsigned)st.st_uid, (unsigned)geteuid());
        return -EPERM;
    }
    if ((st.st_mode & 07777) != mode && chmod(dir, mode) < 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot set the mode of %s: %s", dir, strerror(-rc));
        return rc;
    }
    return 0;
}

int om_parse_loadavg_running(const char *line)
{
    const char *p = line;
    char *end;
    unsigned long n;

    for (int field = 0; field < 3; field++) { /* the three load averages */
        p += strspn(p, " ");
        if (!*p)
            return -EINVAL;
        p += strcspn(p, " ");
    }
    p += strspn(p, " ");
    if (*p < '0' || *p > '9')
        return -EINVAL;
    n = strtoul(p, &end, 10);
    if (*end != '/' || n > 1u << 22)
        return -EINVAL;
    return (int)n;
}
