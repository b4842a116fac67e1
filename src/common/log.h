/* SPDX-License-Identifier: MIT */
/* Logging for the daemon and the server: timestamped lines in the NVIDIA MPS log style. */
#ifndef OM_LOG_H
#define OM_LOG_H

#include <stdarg.h>
#include <stddef.h>

enum om_log_level { OM_LOG_ERROR = 0, OM_LOG_WARN = 1, OM_LOG_INFO = 2, OM_LOG_DEBUG = 3 };

extern int om_log_level_current;

/* Sets the component name ("Control", "Server") and the file descriptor the
 * lines go to; the descriptor stays owned by the caller. -1 means stderr. */
void om_log_init(const char *component, int fd);
/* Also copy every line to stderr (the daemon's -f mode). */
void om_log_also_stderr(int on);

/* Puts every line of this process through a token bucket: `burst` lines at once, then `per_s` a
 * second; the lines left out are counted and the count written (at most once a second) before
 * the next line that is logged. For a process whose every line a user's peers can cause (the
 * server); 0 turns it off (the default). */
void om_log_limit(unsigned burst, unsigned per_s);

void om_log_write(enum om_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A session's own line (connected, disconnected): a bucket of its own, deeper and faster (log.c),
 * so that a burst of sessions is not lost behind their other lines. */
void om_log_session(enum om_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The level is checked before the arguments are evaluated. */
#define om_log(level, ...)                                                                         \
    do {                                                                                           \
        if ((int)(level) <= om_log_level_current)                                                  \
            om_log_write((level), __VA_ARGS__);                                                    \
    } while (0)
#define om_err(...) om_log(OM_LOG_ERROR, __VA_ARGS__)
#define om_warn(...) om_log(OM_LOG_WARN, __VA_ARGS__)
#define om_info(...) om_log(OM_LOG_INFO, __VA_ARGS__)
#define om_debug(...) om_log(OM_LOG_DEBUG, __VA_ARGS__)

/* Text that another process supplied (a command line, a fault message), made safe
 * for a log line: bytes outside printable ASCII and the backslash are written as
 * \xNN (\\ for the backslash), so no escape sequence or line break reaches a
 * terminal that shows the log; at most len bytes of src are read, and a result that
 * does not fit in cap ends in "...". Returns dst. */
const char *om_log_escape(char *dst, size_t cap, const char *src, size_t len);

/* Fatal internal inconsistency: logs file, line and condition, then aborts.
 * Stays on in release builds. */
#define OM_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (!(cond))                                                                               \
            om_assert_fail(#cond, __FILE__, __LINE__);                                             \
    } while (0)
_Noreturn void om_assert_fail(const char *cond, const char *file, int line);

#endif
