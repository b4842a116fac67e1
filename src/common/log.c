/* SPDX-License-Identifier: MIT */
/* Timestamped log lines written with one write(2) each, so lines of several threads never mix. */
#include "log.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
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

/* The process-wide token bucket of om_log_limit (off while burst is 0): lines it may still
 * write, in thousandths, refilled at per_s a second; what it left out is counted and said in
 * one line at most once a second. Threads log rarely: a mutex is enough. */
struct bucket {
    pthread_mutex_t lock;
    unsigned burst, per_s;
    int64_t milli, at_ms, reported_ms;
    uint64_t suppressed;
};
static struct bucket bucket = {.lock = PTHREAD_MUTEX_INITIALIZER};
/* The sessions' own lines (om_log_session: a client connected, disconnected) have a bucket of
 * their own, 16 times as deep and 10 times as fast: a burst of clients ending together (33 in
 * ipc.thirty_two_hostile_clients_stay_in_budget, whose refusals spent the lines' bucket) must
 * not lose them, and a user who starts processes in a loop still cannot fill the disk. */
static struct bucket sessions = {.lock = PTHREAD_MUTEX_INITIALIZER};

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

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void bucket_set(struct bucket *b, unsigned burst, unsigned per_s)
{
    pthread_mutex_lock(&b->lock);
    b->burst = burst;
    b->per_s = per_s;
    b->milli = (int64_t)burst * 1000;
    b->at_ms = mono_ms();
    pthread_mutex_unlock(&b->lock);
}

void om_log_limit(unsigned burst, unsigned per_s)
{
    bucket_set(&bucket, burst, per_s);
    bucket_set(&sessions, burst * 16, per_s * 10);
}

/* Takes a token for one line; false when there is none (the line is counted). *report is set to
 * the count of lines left out when it is time to say so (the report takes no token: a flood
 * faster than the refill would otherwise spend every token on its own reports). */
static bool bucket_take(struct bucket *b, uint64_t *report)
{
    bool ok = true;
    int64_t now;

    *report = 0;
    if (!__atomic_load_n(&b->burst, __ATOMIC_RELAXED))
        return true;
    now = mono_ms();
    pthread_mutex_lock(&b->lock);
    if (now > b->at_ms) {
        int64_t full = (int64_t)b->burst * 1000;
        b->milli += (now - b->at_ms) * (int64_t)b->per_s;
        if (b->milli > full)
            b->milli = full;
        b->at_ms = now;
    }
    if (b->suppressed && now - b->reported_ms >= 1000) {
        *report = b->suppressed;
        b->suppressed = 0;
        b->reported_ms = now;
    }
    if (b->milli < 1000) {
        b->suppressed++;
        ok = false;
    } else {
        b->milli -= 1000;
    }
    pthread_mutex_unlock(&b->lock);
    return ok;
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

static void log_vwrite(enum om_log_level level, const char *fmt, va_list ap)
{
    static const char *const tags[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    char line[2048];
    struct timeval tv;
    struct tm tm;
    size_t off;
    int n;

    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    off = strftime(line, sizeof(line), "[%Y-%m-%d %H:%M:%S", &tm);
    n = snprintf(line + off, sizeof(line) - off, ".%03ld %s %5d] %s%s", (long)tv.tv_usec / 1000,
                 log_component, (int)getpid(), level == OM_LOG_INFO ? "" : tags[level],
                 level == OM_LOG_INFO ? "" : ": ");
    if (n > 0)
        off += (size_t)n < sizeof(line) - off ? (size_t)n : sizeof(line) - off - 1;
    n = vsnprintf(line + off, sizeof(line) - off - 1, fmt, ap);
    if (n > 0)
        off += (size_t)n < sizeof(line) - off - 1 ? (size_t)n : sizeof(line) - off - 2;
    line[off++] = '\n';
    write_all(log_fd >= 0 ? log_fd : STDERR_FILENO, line, off);
    if (log_stderr && log_fd >= 0)
        write_all(STDERR_FILENO, line, off);
}

__attribute__((format(printf, 2, 3))) static void log_unlimited(enum om_log_level level,
                                                                const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    log_vwrite(level, fmt, ap);
    va_end(ap);
}

static void log_through(struct bucket *b, enum om_log_level level, const char *fmt, va_list ap)
{
    uint64_t left_out;
    bool ok = bucket_take(b, &left_out);

    if (left_out)
        log_unlimited(OM_LOG_WARN, "%llu log line(s) suppressed (more than %u a second)",
                      (unsigned long long)left_out, b->per_s);
    if (ok)
        log_vwrite(level, fmt, ap);
}

void om_log_write(enum om_log_level level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    log_through(&bucket, level, fmt, ap);
    va_end(ap);
}

void om_log_session(enum om_log_level level, const char *fmt, ...)
{
    va_list ap;

    if ((int)level > om_log_level_current)
        return;
    va_start(ap, fmt);
    log_through(&sessions, level, fmt, ap);
    va_end(ap);
}

/* How many characters byte ch takes once escaped, written into esc. */
static size_t escape_byte(unsigned char ch, char esc[4])
{
    static const char hex[] = "0123456789abcdef";

    if (ch == '\\') {
        esc[0] = esc[1] = '\\';
        return 2;
    }
    if (ch < 0x20 || ch > 0x7e) {
        esc[0] = '\\';
        esc[1] = 'x';
        esc[2] = hex[ch >> 4];
        esc[3] = hex[ch & 15];
        return 4;
    }
    esc[0] = (char)ch;
    return 1;
}

const char *om_log_escape(char *dst, size_t cap, const char *src, size_t len)
{
    size_t k = 0, total = 0, i;
    char esc[4];

    if (cap == 0)
        return dst;
    for (i = 0; i < len && src[i]; i++)
        total += escape_byte((unsigned char)src[i], esc);
    len = i;
    /* When it does not all fit, room is left for the "..." that marks the cut;
     * an escape is never cut in half. */
    for (i = 0; i < len; i++) {
        size_t n = escape_byte((unsigned char)src[i], esc);
        if (total + 1 > cap && k + n + 4 > cap)
            break;
        memcpy(dst + k, esc, n);
        k += n;
    }
    for (int j = 0; i < len && j < 3 && k + 1 < cap; j++)
        dst[k++] = '.';
    dst[k] = '\0';
    return dst;
}

void om_assert_fail(const char *cond, const char *file, int line)
{
    log_unlimited(OM_LOG_ERROR, "assertion failed: %s at %s:%d", cond, file, line);
    abort();
}
