/* SPDX-License-Identifier: MIT */
/* openmps: runs a program as an openmps client (openmps run -- CMD ARGS), or natively with its
 * driver calls counted (openmps check -- CMD ARGS); writes a CDI spec for containers (openmps
 * cdi, cdi.c); shows what the clients do (openmps stats, ps, smi: the daemon's stats and ps
 * commands; openmps top, top.c: the same figures, live). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../client/check.h"
#include "../control/frontend.h"
#include "cli.h"
#include "../common/gen/entries.h"
#include "openmps/protocol.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: openmps run [--] COMMAND [ARGS...]\n"
            "       openmps check [-o FILE] [--] COMMAND [ARGS...]\n"
            "       openmps cdi [-o FILE.json] [--pipe-dir DIR] [OPTIONS] (see cdi --help)\n"
            "       openmps stats [--json] [-p SERVER_PID]\n"
            "       openmps ps [-v|--json] [-p SERVER_PID]\n"
            "       openmps smi [-p SERVER_PID]\n"
            "       openmps top [-d SECONDS] [-n N] [-s KEY] [-p SERVER_PID] [-b|--once]\n"
            "       openmps help | --help | -h\n"
            "       openmps version | --version | -V\n"
            "run: runs COMMAND with the openmps shim preloaded and first in LD_LIBRARY_PATH,\n"
            "so its CUDA work goes to the openmps server of CUDA_MPS_PIPE_DIRECTORY (or, with\n"
            "no daemon there, to the real driver as usual).\n"
            "check: runs COMMAND natively (never through a daemon), counts the driver entry\n"
            "points it and its child processes call, and reports those openmps does not\n"
            "run (to stderr, or FILE). Exit status: 0 none, 1 some, 2 COMMAND failed,\n"
            "3 the check itself failed.\n"
            "cdi: writes a CDI spec that gives a container the shim, the pipe directory and\n"
            "CUDA_MPS_PIPE_DIRECTORY, for container runtimes (docs/operations.md).\n"
            "stats: per client and device, what the clients did (GPU time, kernels, copies,\n"
            "memory, calls per second, state); ps: the clients; smi: the clients as\n"
            "nvidia-smi lists them under NVIDIA's MPS. --json: for scripts (docs/operations.md).\n"
            "top: the same, live, full-screen (see openmps top --help).\n"
            "They ask the daemon of CUDA_MPS_PIPE_DIRECTORY; exit status 1 when it cannot.\n"
            "The control daemon is openmps-control; see openmps(1), openmps-control(8).\n");
}

/* getopt_long's error, said our way: the option named, and where to look. */
int om_cli_bad_option(const char *who, char **argv, int c)
{
    const char *arg = argv[optind - 1];

    if (c == ':')
        fprintf(stderr, "%s: option %s needs an argument\n", who, arg);
    else if (!strncmp(arg, "--", 2) && optopt) /* a known one, given what it does not take */
        fprintf(stderr, "%s: option %.*s takes no argument\n", who, (int)strcspn(arg, "="), arg);
    else if (!strncmp(arg, "--", 2))
        fprintf(stderr, "%s: unknown option %s\n", who, arg);
    else
        fprintf(stderr, "%s: unknown option -%c\n", who, optopt);
    fprintf(stderr, "Try `openmps --help'.\n");
    return 2;
}

#ifndef OM_SHIM_REL
#define OM_SHIM_REL "../lib/openmps"
#endif

/* The shim's folder: $OPENMPS_LIB, else where make install puts it (OM_SHIM_REL from bin/, as
 * CMake computes it: ../lib/x86_64-linux-gnu/openmps in a Debian package), ../lib/openmps,
 * ../lib64/openmps, or lib or ../lib (build tree) beside this program. */
int om_cli_shim_dir(char *buf, size_t cap)
{
    const char *env = getenv("OPENMPS_LIB");
    static const char *const rel[] = {OM_SHIM_REL, "../lib/openmps", "../lib64/openmps", "lib",
                                      "../lib"};
    char self[PATH_MAX], *dir;
    ssize_t n;

    if (env && *env) {
        snprintf(buf, cap, "%s", env);
        return 0;
    }
    n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    dir = dirname(self);
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        char lib[PATH_MAX + 64];
        snprintf(buf, cap, "%s/%s", dir, rel[i]);
        snprintf(lib, sizeof(lib), "%s/libcuda.so.1", buf);
        if (access(lib, R_OK) == 0)
            return 0;
    }
    return -1;
}

/* `var` with `first` in front of what it held, separated by a colon. 0 or -1. */
static int prepend(const char *var, const char *first)
{
    const char *old = getenv(var);
    char *v;

    if (asprintf(&v, "%s%s%s", first, old && *old ? ":" : "", old && *old ? old : "") < 0)
        return -1;
    setenv(var, v, 1);
    free(v);
    return 0;
}

/*
 * The shim's folder first in LD_LIBRARY_PATH (the runtime and the libraries dlopen
 * "libcuda.so.1", cuBLASLt dlsym()s its symbols), and the shim itself in LD_PRELOAD, so that
 * it is the libcuda.so.1 the process has from its start: whatever loads the real driver first
 * would otherwise be what every later "libcuda.so.1" finds. Seen on the GPU machine: with
 * LD_LIBRARY_PATH alone, 8 PyTorch ranks under Open MPI's mpirun ran on the real driver and
 * never reached the daemon (which library loaded it is not known); preloaded, all 8 were
 * served. A DT_RPATH naming the driver's folder is one way (it comes before LD_LIBRARY_PATH:
 * tests/cpu/rpath_probe.c). 0, or -1 with the reason on stderr.
 */
static int put_shim_first(void)
{
    char dir[PATH_MAX], lib[PATH_MAX + 16];

    if (om_cli_shim_dir(dir, sizeof(dir)) < 0) {
        fprintf(stderr, "openmps: cannot find the shim (libcuda.so.1); set OPENMPS_LIB\n");
        return -1;
    }
    snprintf(lib, sizeof(lib), "%s/libcuda.so.1", dir);
    if (prepend("LD_LIBRARY_PATH", dir) < 0)
        return -1;
    if (strpbrk(lib, ": ")) /* LD_PRELOAD splits there */
        fprintf(stderr, "openmps: the shim's path %s has a colon or a space: not preloaded\n", lib);
    else if (prepend("LD_PRELOAD", lib) < 0)
        return -1;
#ifdef OM_SANITIZED
    /* A sanitizer build's shim, preloaded, is loaded before its AddressSanitizer runtime (its
     * dependency), which by default refuses to start unless it comes first; it works from
     * there as well, being still ahead of the C library. */
    {
        const char *old = getenv("ASAN_OPTIONS");
        char *v;
        if (asprintf(&v, "%s%sverify_asan_link_order=0", old && *old ? old : "",
                     old && *old ? ":" : "") >= 0) {
            setenv("ASAN_OPTIONS", v, 1);
            free(v);
        }
    }
#endif
    return 0;
}

/* ---------------------------------------------------------------- openmps check */

enum { CHECK_OK, CHECK_UNSUPPORTED, CHECK_PROGRAM_FAILED, CHECK_ERROR };

static const char *const entry_names[OM_ENTRY_COUNT] = {
#define OM_X_NAME(i, sym, mode) [i] = #sym,
    OM_ENTRIES(OM_X_NAME)
#undef OM_X_NAME
};

/* The mode column as the table spells it (REMOTE, LOCAL, PASSTHROUGH, UNSUPPORTED…). */
static const char *const entry_modes[OM_ENTRY_COUNT] = {
#define OM_X_MODE(i, sym, mode) [i] = #mode,
    OM_ENTRIES(OM_X_MODE)
#undef OM_X_MODE
};

struct tally {
    uint64_t counts[OM_ENTRY_COUNT];
    int processes;
    int foreign; /* files written by a shim of another entry table */
};

/* Adds one process's file to the tally. Files of processes that died before
 * writing their header hold no count and are skipped. */
static void add_file(struct tally *t, int dfd, const char *name)
{
    size_t bytes = sizeof(struct om_check_file) + OM_ENTRY_COUNT * sizeof(uint64_t);
    struct om_check_file *f = malloc(bytes);
    int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    ssize_t n = fd >= 0 && f ? read(fd, f, bytes) : -1;

    if (n >= (ssize_t)sizeof(*f) && !memcmp(f->magic, OM_CHECK_MAGIC, sizeof(f->magic))) {
        if (n != (ssize_t)bytes || f->entries != OM_ENTRY_COUNT ||
            f->names_hash != om_check_names_hash(entry_names, OM_ENTRY_COUNT)) {
            t->foreign++;
        } else {
            uint64_t calls = 0;
            for (int i = 0; i < OM_ENTRY_COUNT; i++) {
                t->counts[i] += f->counts[i];
                calls += f->counts[i];
            }
            /* A forked child that only executed another program made no call. */
            t->processes += calls > 0;
        }
    }
    if (fd >= 0)
        close(fd);
    free(f);
}

/* Reads every process's file in dir, then removes them and dir. */
static int collect(const char *dir, struct tally *t)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t sl = strlen(OM_CHECK_SUFFIX);

    if (!d)
        return -errno;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (l > sl && !strcmp(e->d_name + l - sl, OM_CHECK_SUFFIX))
            add_file(t, dirfd(d), e->d_name);
        unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
    rmdir(dir);
    return 0;
}

static void describe_status(int status, char *buf, size_t cap)
{
    if (WIFEXITED(status))
        snprintf(buf, cap, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, cap, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, cap, "ended with wait status 0x%x", (unsigned)status);
}

static int report(FILE *out, const char *cmd, int status, const struct tally *t)
{
    bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    int called = 0, unsupported = 0, rc;
    char how[128];

    describe_status(status, how, sizeof(how));
    fprintf(out, "openmps check: %s %s natively; %d process%s called the CUDA driver\n", cmd, how,
            t->processes, t->processes == 1 ? "" : "es");
    for (int i = 0; i < OM_ENTRY_COUNT; i++) {
        if (!t->counts[i])
            continue;
        if (!called++)
            fprintf(out, "%12s  %-12s %s\n", "calls", "openmps", "entry point");
        unsupported += !strcmp(entry_modes[i], "UNSUPPORTED");
        fprintf(out, "%12llu  %-12s %s\n", (unsigned long long)t->counts[i],
                !strcmp(entry_modes[i], "UNSUPPORTED") ? "UNSUPPORTED" : "supported",
                entry_names[i]);
    }
    if (t->processes == 0)
        fprintf(out, "openmps check: no process loaded the openmps shim: the program called no "
                     "CUDA driver entry point through libcuda.so.1 (a program that loads the "
                     "driver by its full path is not seen)\n");
    if (unsupported) {
        fprintf(out,
                "openmps check: %d of the %d entry points called %s not supported by openmps "
                "%s (under openmps %s CUDA_ERROR_NOT_SUPPORTED):",
                unsupported, called, unsupported == 1 ? "is" : "are", OPENMPS_VERSION,
                unsupported == 1 ? "it returns" : "they return");
        for (int i = 0; i < OM_ENTRY_COUNT; i++)
            if (t->counts[i] && !strcmp(entry_modes[i], "UNSUPPORTED"))
                fprintf(out, " %s", entry_names[i]);
        fputc('\n', out);
    } else if (called) {
        fprintf(out,
                "openmps check: every one of the %d entry points called is supported by "
                "openmps %s\n",
                called, OPENMPS_VERSION);
    }
    rc = unsupported ? CHECK_UNSUPPORTED : CHECK_OK;
    if (failed) {
        fprintf(out,
                "openmps check: the program failed (it %s): the counts cover what it called "
                "until then\n",
                how);
        rc = CHECK_PROGRAM_FAILED;
    }
    if (t->foreign) {
        fprintf(out,
                "openmps check: %d process%s ran with a shim of another openmps version "
                "(set OPENMPS_LIB to this one's): not counted\n",
                t->foreign, t->foreign == 1 ? "" : "es");
        rc = CHECK_ERROR;
    }
    return rc;
}

static int check_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *outpath = NULL, *tmp = getenv("TMPDIR");
    struct tally *t;
    char dir[PATH_MAX];
    int first, status = 0, rc, c;
    FILE *out = stderr;
    pid_t pid;

    /* argv[0] is "check"; '+': COMMAND's own options are its own. */
    optind = 0; /* glibc: start afresh, reading the "+" again */
    while ((c = getopt_long(argc, argv, "+:o:h", opts, NULL)) != -1) {
        if (c == 'o')
            outpath = optarg;
        else if (c == 'h') {
            usage(stdout);
            return CHECK_OK;
        } else {
            om_cli_bad_option("openmps check", argv, c);
            return CHECK_ERROR;
        }
    }
    first = optind;
    if (first >= argc) {
        fprintf(stderr, "openmps check: no COMMAND to run\n");
        usage(stderr);
        return CHECK_ERROR;
    }
    t = calloc(1, sizeof(*t));
    if (!t)
        return CHECK_ERROR;
    snprintf(dir, sizeof(dir), "%s/openmps-check.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (put_shim_first() < 0) {
        free(t);
        return CHECK_ERROR;
    }
    if (!mkdtemp(dir)) {
        fprintf(stderr, "openmps check: cannot make a folder like %s: %s\n", dir, strerror(errno));
        free(t);
        return CHECK_ERROR;
    }
    setenv(OM_CHECK_ENV, dir, 1);
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        execvp(argv[first], argv + first);
        fprintf(stderr, "openmps check: cannot run %s: %s\n", argv[first], strerror(errno));
        _exit(127);
    }
    if (pid < 0) {
        fprintf(stderr, "openmps check: fork: %s\n", strerror(errno));
        rmdir(dir);
        free(t);
        return CHECK_ERROR;
    }
    /* Ctrl-C is the program's to take; the report comes after it ends. */
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (collect(dir, t) < 0) {
        fprintf(stderr, "openmps check: cannot read the counts in %s: %s\n", dir, strerror(errno));
        free(t);
        return CHECK_ERROR;
    }
    if (outpath && !(out = fopen(outpath, "w"))) {
        fprintf(stderr, "openmps check: cannot write %s: %s\n", outpath, strerror(errno));
        free(t);
        return CHECK_ERROR;
    }
    rc = report(out, argv[first], status, t);
    if (out != stderr && fclose(out) != 0)
        rc = CHECK_ERROR;
    free(t);
    return rc;
}

/* ---------------------------------------------------------------- openmps stats, ps, smi */

/* Asks the daemon `word` with the arguments (smi: stats --smi) and prints its answer: 0, or 1
 * when the daemon is not there or refused the command (its reason on stderr). */
static int ask_main(int argc, char **argv)
{
    char line[OM_CMD_MAX + 1] = "", *text = NULL;
    size_t used = 0;
    bool error = false;

    for (int i = 0; i < argc; i++) {
        const char *w = i == 0 && !strcmp(argv[0], "smi") ? "stats --smi" : argv[i];
        int n = snprintf(line + used, sizeof(line) - used, "%s%s", i ? " " : "", w);
        if (n < 0 || (size_t)n >= sizeof(line) - used) {
            fprintf(stderr, "openmps %s: the arguments are too long\n", argv[0]);
            return 2;
        }
        used += (size_t)n;
    }
    if (om_frontend_ask(line, &text, &error) < 0)
        return 1;
    fprintf(error ? stderr : stdout, "%s%s", text, *text ? "\n" : "");
    free(text);
    return error ? 1 : 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    const char *cmd;
    int c;

    opterr = 0;
    /* '+': the options end at the command word. */
    while ((c = getopt_long(argc, argv, "+hV", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        if (c == 'V') {
            printf("openmps %s\n", OPENMPS_VERSION);
            return 0;
        }
        return om_cli_bad_option("openmps", argv, c);
    }
    if (optind >= argc) {
        fprintf(stderr, "openmps: no command given\n");
        usage(stderr);
        return 2;
    }
    cmd = argv[optind];
    if (!strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "version")) {
        printf("openmps %s\n", OPENMPS_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "check"))
        return check_main(argc - optind, argv + optind);
    if (!strcmp(cmd, "cdi"))
        return om_cli_cdi(argc - optind, argv + optind);
    if (!strcmp(cmd, "stats") || !strcmp(cmd, "ps") || !strcmp(cmd, "smi"))
        return ask_main(argc - optind, argv + optind);
    if (!strcmp(cmd, "top"))
        return om_cli_top(argc - optind, argv + optind);
    if (strcmp(cmd, "run") != 0) {
        fprintf(stderr,
                "openmps: unknown command %s (the commands: run, check, cdi, stats, ps, smi, "
                "top, help, version)\n",
                cmd);
        return 2;
    }
    argc -= optind;
    argv += optind;
    optind = 0; /* glibc: start afresh, reading the "+" again */
    while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        return om_cli_bad_option("openmps run", argv, c);
    }
    if (optind >= argc) {
        fprintf(stderr, "openmps run: no COMMAND to run\n");
        usage(stderr);
        return 2;
    }
    if (put_shim_first() < 0)
        return 1;
    execvp(argv[optind], argv + optind);
    fprintf(stderr, "openmps: cannot run %s: %s\n", argv[optind], strerror(errno));
    return 127;
}
