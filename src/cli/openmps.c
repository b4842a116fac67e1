/* SPDX-License-Identifier: MIT */
/* openmps: runs a program as an openmps client (openmps run -- CMD ARGS). */
#define _GNU_SOURCE
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: openmps run [--] COMMAND [ARGS...]\n"
               "Runs COMMAND with the openmps shim first in LD_LIBRARY_PATH, so its CUDA work\n"
               "goes to the openmps server of CUDA_MPS_PIPE_DIRECTORY (or, with no daemon\n"
               "there, to the real driver as usual).\n");
}

/* The shim's folder: $OPENMPS_LIB, else ../lib/openmps (installed) or ../lib (build tree)
 * beside this program. */
static int shim_dir(char *buf, size_t cap)
{
    const char *env = getenv("OPENMPS_LIB");
    static const char *const rel[] = {"../lib/openmps", "../lib64/openmps", "lib", "../lib"};
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

int main(int argc, char **argv)
{
    char dir[PATH_MAX], *path;
    const char *old = getenv("LD_LIBRARY_PATH");
    int first = 2;

    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "run") != 0) {
        fprintf(stderr, "openmps: unknown command %s\n", argv[1]);
        usage(stderr);
        return 2;
    }
    if (first < argc && !strcmp(argv[first], "--"))
        first++;
    if (first >= argc) {
        usage(stderr);
        return 2;
    }
    if (shim_dir(dir, sizeof(dir)) < 0) {
        fprintf(stderr, "openmps: cannot find the shim (libcuda.so.1); set OPENMPS_LIB\n");
        return 1;
    }
    if (asprintf(&path, "%s%s%s", dir, old && *old ? ":" : "", old && *old ? old : "") < 0)
        return 1;
    setenv("LD_LIBRARY_PATH", path, 1);
    execvp(argv[first], argv + first);
    fprintf(stderr, "openmps: cannot run %s: %s\n", argv[first], strerror(errno));
    free(path);
    return 127;
}
