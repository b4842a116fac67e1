/* SPDX-License-Identifier: MIT */
/* openmps check (OPENMPS_CHECK=DIR): passthrough, and a count of every driver call per process. */
#define _GNU_SOURCE
#include "check.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shim.h"

/*
 * Each counted entry point gets a stub in assembly that adds one to its counter
 * with one atomic instruction and jumps on to its target: every argument, stack
 * and floating-point ones included, reaches the target untouched. The stubs are
 * installed only when checking, so a normal run pays nothing.
 */
OM_HIDDEN __attribute__((used)) uint64_t *om_check_counts; /* the mapped counters */
OM_HIDDEN __attribute__((used)) void *om_check_next[OM_ENTRY_COUNT];

#if defined(__x86_64__)
#define OM_X_COUNT(i, sym, mode)                                                                   \
    __asm__(".text\n"                                                                              \
            ".p2align 4\n"                                                                         \
            ".type om_count_" #sym ", @function\n"                                                 \
            "om_count_" #sym ":\n"                                                                 \
            "    movq om_check_counts(%rip), %r11\n"                                               \
            "    lock incq " #i "*8(%r11)\n"                                                       \
            "    jmp *om_check_next+" #i "*8(%rip)\n"                                              \
            ".size om_count_" #sym ", .-om_count_" #sym "\n");
#elif defined(__aarch64__)
/* x16, x17 (intra-call scratch) and x9 (a temporary) hold no argument at entry. */
#define OM_X_COUNT(i, sym, mode)                                                                   \
    __asm__(".text\n"                                                                              \
            ".p2align 4\n"                                                                         \
            ".type om_count_" #sym ", %function\n"                                                 \
            "om_count_" #sym ":\n"                                                                 \
            "    adrp x16, om_check_counts\n"                                                      \
            "    ldr x16, [x16, :lo12:om_check_counts]\n"                                          \
            "    mov x17, #" #i "*8\n"                                                             \
            "    add x16, x16, x17\n"                                                              \
            "1:  ldxr x17, [x16]\n"                                                                \
            "    add x17, x17, #1\n"                                                               \
            "    stxr w9, x17, [x16]\n"                                                            \
            "    cbnz w9, 1b\n"                                                                    \
            "    adrp x16, om_check_next+" #i "*8\n"                                               \
            "    ldr x16, [x16, :lo12:om_check_next+" #i "*8]\n"                                   \
            "    br x16\n"                                                                         \
            ".size om_count_" #sym ", .-om_count_" #sym "\n");
#else
#error "openmps: the counting stubs exist for x86-64 and AArch64"
#endif
OM_ENTRIES(OM_X_COUNT)
#undef OM_X_COUNT

#define OM_X_DECL(i, sym, mode) extern char om_count_##sym[];
OM_ENTRIES(OM_X_DECL)
#undef OM_X_DECL

static void *const stubs[OM_ENTRY_COUNT] = {
#define OM_X_REF(i, sym, mode) [i] = (void *)om_count_##sym,
    OM_ENTRIES(OM_X_REF)
#undef OM_X_REF
};

static const char *const names[OM_ENTRY_COUNT] = {
#define OM_X_NAME(i, sym, mode) [i] = #sym,
    OM_ENTRIES(OM_X_NAME)
#undef OM_X_NAME
};

static char dir[PATH_MAX];
static struct om_check_file *file;    /* this process's mapped file */
static uint64_t sink[OM_ENTRY_COUNT]; /* counts of a process whose file could not be made */

#define FILE_BYTES (sizeof(struct om_check_file) + OM_ENTRY_COUNT * sizeof(uint64_t))

/* Creates and maps this process's file (zero counts). NULL and errno on failure. */
static struct om_check_file *open_file(void)
{
    char path[PATH_MAX + 64];
    struct om_check_file *f;
    ssize_t n;
    int fd = -1;

    /* A pid can come back within one check (a child ended, another got its pid). */
    for (int k = 0; k < 1000 && fd < 0; k++) {
        snprintf(path, sizeof(path), "%s/%d-%d" OM_CHECK_SUFFIX, dir, (int)getpid(), k);
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
            return NULL;
    }
    if (fd < 0)
        return NULL;
    if (ftruncate(fd, (off_t)FILE_BYTES) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    f = mmap(NULL, FILE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (f == MAP_FAILED)
        return NULL;
    f->entries = OM_ENTRY_COUNT;
    f->names_hash = om_check_names_hash(names, OM_ENTRY_COUNT);
    f->pid = (int32_t)getpid();
    f->ppid = (int32_t)getppid();
    n = readlink("/proc/self/exe", f->exe, sizeof(f->exe) - 1);
    if (n < 0)
        n = 0;
    f->exe[n] = '\0';
    memcpy(f->magic, OM_CHECK_MAGIC, sizeof(f->magic)); /* last: the file is complete */
    return f;
}

/* The child of a fork counts in a file of its own, from zero: the mapping it
 * inherited is its parent's (shared), and so are the counts in it. */
static void forked_child(void)
{
    struct om_check_file *old = file;

    file = open_file();
    __atomic_store_n(&om_check_counts, file ? file->counts : sink, __ATOMIC_RELEASE);
    if (!file)
        fprintf(stderr, "openmps check: process %d cannot record its driver calls in %s: %s\n",
                (int)getpid(), dir, strerror(errno));
    if (old)
        munmap(old, FILE_BYTES);
}

bool om_check_start(void)
{
    const char *env = getenv(OM_CHECK_ENV);

    if (!env || !*env)
        return false;
    snprintf(dir, sizeof(dir), "%s", env);
    file = open_file();
    if (!file) {
        /* Still passthrough (the check must not reach a daemon), but uncounted. */
        fprintf(stderr, "openmps check: process %d cannot record its driver calls in %s: %s\n",
                (int)getpid(), dir, strerror(errno));
        return true;
    }
    om_check_counts = file->counts;
    pthread_atfork(NULL, NULL, forked_child);
    for (int i = 0; i < OM_ENTRY_COUNT; i++)
        om_fn[i] = om_check_wrap(i, om_fn[i]);
    return true;
}

void *om_check_wrap(int index, void *target)
{
    if (!om_check_counts || index < 0 || index >= OM_ENTRY_COUNT || !target ||
        target == stubs[index])
        return target;
    __atomic_store_n(&om_check_next[index], target, __ATOMIC_RELEASE);
    return stubs[index];
}

/* A pointer the real driver's cuGetProcAddress handed out, as the program will
 * call it: counted and traced under the entry point it stands for. */
void *om_passthrough_pointer(const char *symbol, int version, uint64_t flags, void *p)
{
    static void *self_base;
    Dl_info where;
    int index = -1;

    if (!p || (!om_shim.trace_calls && !om_shim.trace_tables && !om_check_counts))
        return p;
    if (!self_base && dladdr((void *)om_passthrough_pointer, &where))
        self_base = where.dli_fbase;
    /* One of our own exports (a driver may answer with the symbol the process sees first):
     * it goes through om_fn, counted and traced there already. */
    if (dladdr(p, &where) && where.dli_fbase == self_base)
        return p;
    for (int i = 0; i < OM_ENTRY_COUNT && index < 0; i++)
        if (om_shim.real_fn[i] == p)
            index = i;
    /* A driver may hand out internal functions: then the measured table says which entry
     * point that symbol, version and flags mean. */
    if (index < 0 && om_proc_lookup(symbol, version, flags, &index) != OM_PROC_SUCCESS)
        return p;
    /* cuInit and cuGetProcAddress stay the shim's, so later look-ups come back here. */
    if (om_local_fn[index])
        p = om_local_fn[index];
    return om_trace_wrap(index, om_check_wrap(index, p));
}
