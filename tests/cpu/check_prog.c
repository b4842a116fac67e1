/* SPDX-License-Identifier: MIT */
/* A driver-API program for openmps check's tests: calls entry points a known number of times,
 * in threads, in children (forked, or forked and executed again), or fails on purpose. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

CUresult cuInit(unsigned flags);
CUresult cuDeviceGetCount(int *n);
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int version, uint64_t flags, int *status);
CUresult cuGraphicsUnregisterResource(void *resource);
CUresult cuGetExportTable(const void **table, const unsigned char *uuid);

/* The test double's two private tables (tests/cpu/fakecuda/fake_devices.c), called through:
 * slot 1 adds, slot 2 points to 42, slot 3 multiplies; the headless table's slot 0 adds. */
static int tables(int adds)
{
    typedef uint64_t (*op)(uint64_t, uint64_t);
    unsigned char up[16], down[16];
    const void *const *t = NULL, *const *again = NULL, *const *h = NULL;
    uint64_t sum = 0;

    for (int i = 0; i < 16; i++) {
        up[i] = (unsigned char)(i + 1);
        down[i] = (unsigned char)(16 - i);
    }
    if (cuGetExportTable((const void **)&t, up) || cuGetExportTable((const void **)&again, up) ||
        cuGetExportTable((const void **)&h, down))
        return 73;
    for (int i = 0; i < adds; i++)
        sum += ((op)t[1])((uint64_t)i, 1);
    printf("sum %llu mul %llu datum %d same %d headless %llu\n", (unsigned long long)sum,
           (unsigned long long)((op)t[3])(6, 7), *(const int *)t[2], t == again,
           (unsigned long long)((op)h[0])(2, 3));
    return 0;
}

static int count_n(int n)
{
    int devices = -1;

    for (int i = 0; i < n; i++)
        if (cuDeviceGetCount(&devices) != 0)
            return -1;
    return devices;
}

static void *thread_main(void *arg)
{
    count_n((int)(intptr_t)arg);
    return NULL;
}

static int usage(void)
{
    fprintf(stderr, "usage: check-prog calls N M | unsupported | fork N | spawn N | "
                    "threads T N | fail STATUS | abort | tables N\n");
    return 64;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    int a = argc > 2 ? atoi(argv[2]) : 0, b = argc > 3 ? atoi(argv[3]) : 0, status = 0;

    if (cuInit(0) != 0) {
        fprintf(stderr, "check-prog: cuInit failed\n");
        return 70;
    }
    if (!strcmp(what, "calls")) { /* N direct calls, M through a cuGetProcAddress pointer */
        CUresult (*fn)(int *) = NULL;
        int st = -1;
        printf("devices %d\n", count_n(a));
        if (cuGetProcAddress_v2("cuDeviceGetCount", (void **)&fn, 13000, 0, &st) != 0 || !fn)
            return 71;
        for (int i = 0; i < b; i++)
            fn(&st);
        return 0;
    }
    if (!strcmp(what, "unsupported")) {
        printf("cuGraphicsUnregisterResource %d\n", cuGraphicsUnregisterResource(NULL));
        return 0;
    }
    if (!strcmp(what, "fork") || !strcmp(what, "spawn")) { /* the child calls N times */
        char n[16];
        pid_t pid;
        fflush(NULL);
        pid = fork();
        if (pid == 0 && !strcmp(what, "fork")) {
            count_n(a);
            _exit(0); /* no exit handlers: the counts must be there anyway */
        }
        if (pid == 0) {
            snprintf(n, sizeof(n), "%d", a);
            execl("/proc/self/exe", "check-prog", "calls", n, "0", (char *)NULL);
            _exit(127);
        }
        count_n(1);
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
            return 72;
        return 0;
    }
    if (!strcmp(what, "threads")) { /* T threads, N calls each */
        pthread_t t[64];
        if (a < 1 || a > 64)
            return usage();
        for (int i = 0; i < a; i++)
            pthread_create(&t[i], NULL, thread_main, (void *)(intptr_t)b);
        for (int i = 0; i < a; i++)
            pthread_join(t[i], NULL);
        return 0;
    }
    if (!strcmp(what, "tables")) /* N calls of a private table's slot */
        return tables(a);
    if (!strcmp(what, "fail")) {
        count_n(1);
        return a;
    }
    if (!strcmp(what, "abort")) {
        count_n(2);
        abort();
    }
    return usage();
}
