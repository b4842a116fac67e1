/* SPDX-License-Identifier: MIT */
/* Timestamped log lines written with one write(2) each, so lines of several threads never mix. */
#include "log.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int om_log_level_current = OM_LOG_INFO;

static const char *log_component = "openmps";
static int log_fd = -1;
static int log_stderr;

void om_log_init(const char *component, int fd)
{
    const char *lvl = getenv("OPENMPS_LOG_LEVEL");

    log_component = component;
    log_fd = fd;
    if (lvl && *lvl >= '0' && *lvl <= '3' && lvl[1] == '\0')
        om_log_level_current = *lvl - '0';
}

void om_log_also_stderr(int on)
{
    log_stderr = on;
}

static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n <= 0)
            return; /* a log that cannot be written must not stop the service */
        buf += n;
        len -= (size_t)n;
    }
}

void om_log_write(enum om_log_level level, const char *fmt, ...)
{
    static const char *const tags[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    char line[2048];
    struct timeval tv;
    struct tm tm;
    size_t off;
    va_list ap;
    int n;

    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    off = strftime(line, sizeof(line), "[%Y-%m-%d %H:%M:%S", &tm);
    n = snprintf(line + off, sizeof(line) - off, ".%03ld %s %5d] %s%s", (long)tv.tv_usec / 1000,
                 log_component, (int)getpid(), level == OM_LOG_INFO ? "" : tags[level],
                 level == OM_LOG_INFO ? "" : ": ");
    if (n > 0)
        off += (size_t)n < sizeof(line) - off ? (size_t)n : sizeof(line) - off - 1;
    va_start(ap, fmt);
    n = vsnprintf(line + off, sizeof(line) - off - 1, fmt, ap);
    va_end(ap);
    if (n > 0)
        off += (size_t)n < sizeof(line) - off - 1 ? (size_t)n : sizeof(line) - off - 2;
    line[off++] = '\n';
    write_all(log_fd >= 0 ? log_fd : STDERR_FILENO, line, off);
    if (log_stderr && log_fd >= 0)
        write_all(STDERR_FILENO, line, off);
}

const char *om_log_escape(char *dst, size_t cap, const char *src, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t k = 0;

    if (cap == 0)
        return dst;
    for (size_t i = 0; i < len && src[i]; i++) {
        unsigned char ch = (unsigned char)src[i];
        char esc[4];
        size_t n = 0;

        if (ch == '\\') {
            esc[n++] = '\\';
            esc[n++] = '\\';
        } else if (ch < 0x20 || ch > 0x7e) {
            esc[n++] = '\\';
            esc[n++] = 'x';
            esc[n++] = hex[ch >> 4];
            esc[n++] = hex[ch & 15];
        } else {
            esc[n++] = (char)ch;
        }
        /* Every piece but the last leaves room for the "..." that marks a cut. */
        bool last = i + 1 >= len || !src[i + 1];
        if (k + n + (last ? 1 : 4) > cap) {
            for (int j = 0; j < 3 && k + 1 < cap; j++)
                dst[k++] = '.';
            break;
        }
        memcpy(dst + k, esc, n);
        k += n;
    }
    dst[k] = '\0';
    return dst;
}

void om_assert_fail(const char *cond, const char *file, int line)
{
    om_log_write(OM_LOG_ERROR, "assertion failed: %s at %s:%d", cond, file, line);
    abort();
}
