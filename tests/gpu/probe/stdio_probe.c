/* SPDX-License-Identifier: MIT */
/* Diagnostic (GPU machine): which stdio/write calls a process makes when the driver flushes
 * kernel printf output. LD_PRELOAD it into a program whose kernels printf; each interposed call
 * whose stream or descriptor is stdout is named on stderr, with the caller's library. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void tell(const char *fn, const void *caller)
{
    Dl_info info;
    char line[256];
    int n;

    if (!dladdr(caller, &info) || !info.dli_fname)
        info.dli_fname = "?";
    n = snprintf(line, sizeof(line), "[stdio_probe] %s from %s\n", fn, info.dli_fname);
    if (n > 0)
        (void)!write(2, line, (size_t)n);
}

#define NEXT(name, type) ((type)dlsym(RTLD_NEXT, name))

size_t fwrite(const void *p, size_t size, size_t n, FILE *f)
{
    if (f == stdout)
        tell("fwrite", __builtin_return_address(0));
    return NEXT("fwrite", size_t(*)(const void *, size_t, size_t, FILE *))(p, size, n, f);
}

int fputs(const char *s, FILE *f)
{
    if (f == stdout)
        tell("fputs", __builtin_return_address(0));
    return NEXT("fputs", int (*)(const char *, FILE *))(s, f);
}

int vfprintf(FILE *f, const char *fmt, va_list ap)
{
    if (f == stdout)
        tell("vfprintf", __builtin_return_address(0));
    return NEXT("vfprintf", int (*)(FILE *, const char *, va_list))(f, fmt, ap);
}

int fprintf(FILE *f, const char *fmt, ...)
{
    va_list ap;
    int rc;

    if (f == stdout)
        tell("fprintf", __builtin_return_address(0));
    va_start(ap, fmt);
    rc = NEXT("vfprintf", int (*)(FILE *, const char *, va_list))(f, fmt, ap);
    va_end(ap);
    return rc;
}

int printf(const char *fmt, ...)
{
    va_list ap;
    int rc;

    tell("printf", __builtin_return_address(0));
    va_start(ap, fmt);
    rc = NEXT("vprintf", int (*)(const char *, va_list))(fmt, ap);
    va_end(ap);
    return rc;
}

int vprintf(const char *fmt, va_list ap)
{
    tell("vprintf", __builtin_return_address(0));
    return NEXT("vprintf", int (*)(const char *, va_list))(fmt, ap);
}

int puts(const char *s)
{
    tell("puts", __builtin_return_address(0));
    return NEXT("puts", int (*)(const char *))(s);
}

ssize_t write(int fd, const void *p, size_t n)
{
    if (fd == 1)
        tell("write", __builtin_return_address(0));
    return NEXT("write", ssize_t(*)(int, const void *, size_t))(fd, p, n);
}

int fflush(FILE *f)
{
    if (f == stdout)
        tell("fflush", __builtin_return_address(0));
    return NEXT("fflush", int (*)(FILE *))(f);
}
