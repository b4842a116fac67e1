/* SPDX-License-Identifier: MIT */
/* Remote mode: what a range the program registers (cuMemHostRegister) is, and moving private
 * pages onto shared memory and back without changing what they mean to the program. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "remote.h"
#include "shim.h"

/*
 * The server can reach a registered range only if it maps the same pages, so a range is moved
 * onto a memfd (its bytes copied into one, the memfd mapped over it at the same address) when
 * that changes nothing the program can see:
 *   - every page is private anonymous memory (no path, [heap] or a named [anon:]), read-write
 *     and not executable: a file's mapping, shared memory, [stack] and the calling thread's
 *     own stack stay where they are;
 *   - no other thread of the program runs (program_threads: the staging helpers, the local
 *     driver's own threads and exiting threads are not counted): another thread's write
 *     between the copy and the mapping would be lost. Signals are blocked meanwhile, so the
 *     calling thread's handlers cannot write either.
 * Everything else stays in place and is served by staged copies (state/pinned.c).
 *
 * A moved range is shared memory, so a forked child would share it with its parent where
 * natively each has a private copy. The fork handlers below make the child's copy private
 * again before fork() returns in it: the parent's forking thread waits until the child is done
 * (a pipe), so every write the program makes after its fork() returned, in any thread that
 * synchronises with it, happens after the child's copy: the program cannot tell this from the
 * kernel's copy at the fork. A fork that bypasses the atfork handlers (a raw clone system call)
 * still shares the pages.
 */

#define MOVED_NAME "openmps-registered"

static int moved_live; /* ranges moved and not given back (__atomic): forks look only then */

/* The process's mappings as the calling thread sees them: /proc/self/maps is empty once the
 * main thread has ended (pthread_exit), /proc/thread-self (Linux 3.17) is not. */
static FILE *open_maps(void)
{
    FILE *f = fopen("/proc/thread-self/maps", "re");

    return f ? f : fopen("/proc/self/maps", "re");
}

/* One mapping of /proc/self/maps; false at the end or on a line that is not one. */
struct vma {
    uintptr_t lo, hi;
    char perms[5];
    unsigned long inode;
    const char *path; /* "" for anonymous memory */
};

static bool parse_vma(char *line, struct vma *v)
{
    int n = 0;
    char *nl = strchr(line, '\n');

    if (nl)
        *nl = 0;
    if (sscanf(line, "%lx-%lx %4s %*x %*x:%*x %lu %n", &v->lo, &v->hi, v->perms, &v->inode, &n) <
            4 ||
        n == 0)
        return false;
    v->path = line + n;
    return true;
}

static bool is_private_anonymous(const struct vma *v)
{
    return v->inode == 0 &&
           (!*v->path || !strcmp(v->path, "[heap]") || !strncmp(v->path, "[anon:", 6));
}

static bool is_moved(const struct vma *v)
{
    return !strncmp(v->path, "/memfd:" MOVED_NAME, sizeof("/memfd:" MOVED_NAME) - 1);
}

/*
 * The threads of this process that are not the program's: the local driver's (the real driver
 * starts one at cuInit, also in remote mode, where the shim initialises it for the runtime's
 * export tables: local.c) and the staging helpers (counted by staging.c). Neither writes the
 * program's memory. The driver's are the threads that appeared during the shim's call of its
 * cuInit; one the program started in that moment from another thread would pass for the
 * driver's, but that other thread keeps the range from being moved while it runs.
 */
#define DRIVER_THREADS_MAX 64
static pthread_mutex_t driver_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t driver_tids[DRIVER_THREADS_MAX], before_tids[DRIVER_THREADS_MAX * 4];
static int ndriver, nbefore;

/* The threads of this process, at most max of them; -1 when /proc cannot be read. */
static int list_tasks(pid_t *out, int max)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;

    if (!d)
        return -1;
    while ((e = readdir(d)))
        if (e->d_name[0] >= '1' && e->d_name[0] <= '9' && n < max)
            out[n++] = (pid_t)atoi(e->d_name);
    closedir(d);
    return n;
}

static bool in(pid_t t, const pid_t *set, int n)
{
    for (int i = 0; i < n; i++)
        if (set[i] == t)
            return true;
    return false;
}

void om_host_local_driver_begin(void)
{
    pthread_mutex_lock(&driver_lock);
    nbefore = list_tasks(before_tids, DRIVER_THREADS_MAX * 4);
}

void om_host_local_driver_end(void)
{
    pid_t now[DRIVER_THREADS_MAX * 4];
    int n = list_tasks(now, DRIVER_THREADS_MAX * 4);

    for (int i = 0; nbefore >= 0 && i < n; i++)
        if (!in(now[i], before_tids, nbefore) && !in(now[i], driver_tids, ndriver) &&
            ndriver < DRIVER_THREADS_MAX)
            driver_tids[ndriver++] = now[i];
    pthread_mutex_unlock(&driver_lock);
}

/* Whether thread tid is exiting (PF_EXITING in /proc/self/task/TID/stat): a thread the program
 * has joined may still be listed for a moment, and a main thread that ended (pthread_exit) stays
 * listed as a zombie while the process lives; neither runs the program's code any more. */
static bool exiting(const char *tid)
{
    char path[64], buf[512], *p;
    unsigned flags = 0;
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/self/task/%s/stat", tid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return true; /* gone */
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return true;
    buf[n] = 0;
    p = strrchr(buf, ')'); /* after the name, which may hold anything */
    return p && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %u", &flags) == 1 && (flags & 0x4u);
}

/* Threads of this process that are the program's; -1 when /proc cannot be read. */
static long program_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    long n = 0;

    if (!d)
        return -1;
    pthread_mutex_lock(&driver_lock);
    while ((e = readdir(d)))
        if (e->d_name[0] >= '1' && e->d_name[0] <= '9' &&
            !in((pid_t)atoi(e->d_name), driver_tids, ndriver) && !exiting(e->d_name))
            n++;
    pthread_mutex_unlock(&driver_lock);
    closedir(d);
    return n - om_staging_helper_threads();
}

int om_host_classify(uintptr_t start, size_t len, struct om_hostclass *out)
{
    FILE *f = open_maps();
    uintptr_t next = start, end = start + len, stack_lo = 0, stack_hi = 0;
    char *line = NULL;
    size_t cap = 0;
    struct vma v;

    *out = (struct om_hostclass){.readable = true, .writable = true, .movable = true};
    if (!f) { /* no /proc: nothing known, so nothing is moved */
        om_shim_log("cannot read /proc/self/maps (%s): registered memory stays where it is",
                    strerror(errno));
        out->movable = false;
        return 0;
    }
    while (next < end && getline(&line, &cap, f) > 0) {
        if (!parse_vma(line, &v) || v.hi <= next)
            continue;
        if (v.lo >= end)
            break;
        if (v.lo > next)
            break; /* a hole */
        out->readable &= v.perms[0] == 'r';
        out->writable &= v.perms[1] == 'w';
        out->movable &= !strcmp(v.perms, "rw-p") && is_private_anonymous(&v);
        out->device_file |= !strncmp(v.path, "/dev/", 5) && strcmp(v.path, "/dev/zero") &&
                            strncmp(v.path, "/dev/zero ", 10) && strncmp(v.path, "/dev/shm/", 9);
        next = v.hi;
    }
    free(line);
    fclose(f);
    if (next < end)
        return -EFAULT;
    /* The calling thread's own stack is written as it runs (a thread's stack is anonymous
     * memory like any other, and its mapping may have merged with its neighbours'). */
    pthread_attr_t attr;
    if (out->movable && pthread_getattr_np(pthread_self(), &attr) == 0) {
        void *addr;
        size_t size;
        if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
            stack_lo = (uintptr_t)addr;
            stack_hi = stack_lo + size;
        }
        pthread_attr_destroy(&attr);
        if (stack_lo < end && start < stack_hi)
            out->movable = false;
    }
    if (out->movable && program_threads() != 1)
        out->movable = false;
    return 0;
}

/* Copies len bytes from `from` to `to` by the kernel: whole pages that hold other objects'
 * bytes too, which a checker tracking object bounds (ASan's memcpy) would take for overflows. */
static void copy_pages(void *to, const void *from, size_t len)
{
    struct iovec local = {to, len}, remote = {(void *)from, len};

    if (syscall(SYS_process_vm_readv, getpid(), &local, 1, &remote, 1, 0) == (long)len)
        return;
    volatile const unsigned char *s = from; /* a kernel that refuses it: byte by byte */
    volatile unsigned char *d = to;
    for (size_t i = 0; i < len; i++)
        d[i] = s[i];
}

/* Private anonymous pages in place of [lo, hi), with its bytes and protection `perms`. */
static int privatize(uintptr_t lo, uintptr_t hi, const char *perms)
{
    size_t len = hi - lo;
    int prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
               (perms[2] == 'x' ? PROT_EXEC : 0);
    void *tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (tmp == MAP_FAILED)
        return -errno;
    if (!(prot & PROT_READ))
        mprotect((void *)lo, len, PROT_READ);
    copy_pages(tmp, (const void *)lo, len);
    if (mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)lo) == MAP_FAILED) {
        int e = errno;
        munmap(tmp, len);
        if (!(prot & PROT_READ))
            mprotect((void *)lo, len, prot);
        return -e;
    }
    if (prot != (PROT_READ | PROT_WRITE))
        mprotect((void *)lo, len, prot);
    return 0;
}

/* The moved mappings within [lo, hi) (all of them for hi == 0), in a malloc'd array (*out;
 * NULL when there are none); how many. */
static size_t moved_vmas(uintptr_t lo, uintptr_t hi, struct vma **out)
{
    FILE *f = open_maps();
    char *line = NULL;
    size_t cap = 0, n = 0, max = 0;
    struct vma v;

    *out = NULL;
    if (!f)
        return 0;
    while (getline(&line, &cap, f) > 0) {
        if (!parse_vma(line, &v) || !is_moved(&v))
            continue;
        if (hi && (v.hi <= lo || v.lo >= hi))
            continue;
        v.path = "";
        if (hi) { /* only the part within the range */
            v.lo = v.lo < lo ? lo : v.lo;
            v.hi = v.hi > hi ? hi : v.hi;
        }
        if (n == max) {
            struct vma *grown = realloc(*out, (max ? max * 2 : 16) * sizeof(v));
            if (!grown)
                break; /* the rest stays shared */
            *out = grown;
            max = max ? max * 2 : 16;
        }
        (*out)[n++] = v;
    }
    free(line);
    fclose(f);
    return n;
}

/* ------------------------------------------------------------------ fork */

static pthread_mutex_t fork_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vma *fork_vmas; /* what the child makes private (under fork_lock) */
static size_t fork_nvmas;
static int fork_pipe[2] = {-1, -1};

static void fork_prepare(void)
{
    pthread_mutex_lock(&fork_lock);
    fork_nvmas = 0;
    if (!__atomic_load_n(&moved_live, __ATOMIC_ACQUIRE))
        return;
    fork_nvmas = moved_vmas(0, 0, &fork_vmas);
    if (fork_nvmas && pipe2(fork_pipe, O_CLOEXEC) < 0)
        fork_pipe[0] = fork_pipe[1] = -1; /* the child is not waited for */
}

/* Waits until the child has its private copies (it closes the pipe: done, exec'd or dead). */
static void fork_parent(void)
{
    char c;

    if (fork_pipe[0] >= 0) {
        close(fork_pipe[1]);
        while (read(fork_pipe[0], &c, 1) < 0 && errno == EINTR)
            ;
        close(fork_pipe[0]);
    }
    fork_pipe[0] = fork_pipe[1] = -1;
    free(fork_vmas);
    fork_vmas = NULL;
    pthread_mutex_unlock(&fork_lock);
}

static void fork_child(void)
{
    for (size_t i = 0; i < fork_nvmas; i++)
        privatize(fork_vmas[i].lo, fork_vmas[i].hi, fork_vmas[i].perms);
    if (fork_nvmas)
        __atomic_store_n(&moved_live, 0, __ATOMIC_RELEASE);
    if (fork_pipe[0] >= 0) {
        close(fork_pipe[0]);
        close(fork_pipe[1]); /* the parent goes on */
    }
    fork_pipe[0] = fork_pipe[1] = -1;
    free(fork_vmas);
    fork_vmas = NULL;
    pthread_mutex_unlock(&fork_lock);
}

static void install_fork_handlers(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* ------------------------------------------------------------------ moving */

int om_host_move(uintptr_t start, size_t len)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    sigset_t all, old;
    int fd, rc = 0;

    pthread_once(&once, install_fork_handlers);
    fd = memfd_create(MOVED_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    /* The whole pages, neighbours' bytes included: a raw system call (see copy_pages). */
    if (ftruncate(fd, (off_t)len) < 0 ||
        syscall(SYS_pwrite64, fd, (void *)start, len, (off_t)0) != (long)len ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0 ||
        mmap((void *)start, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
            MAP_FAILED)
        rc = -errno; /* the pages are unchanged unless the last step ran */
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    __atomic_add_fetch(&moved_live, 1, __ATOMIC_ACQ_REL);
    return fd;
}

bool om_host_unmove(uintptr_t start, size_t len)
{
    struct vma *v;
    size_t n;
    sigset_t all, old;
    bool done = true;

    if (program_threads() != 1)
        return false; /* another thread may be writing: the pages stay shared (fork handled) */
    n = moved_vmas(start, start + len, &v);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (size_t i = 0; i < n; i++)
        done &= privatize(v[i].lo, v[i].hi, v[i].perms) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    free(v);
    if (done)
        __atomic_sub_fetch(&moved_live, 1, __ATOMIC_ACQ_REL);
    return done;
}
