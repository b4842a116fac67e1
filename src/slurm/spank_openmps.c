/* SPDX-License-Identifier: MIT */
/*
 * openmps's SPANK plugin for Slurm (docs/operations.md, "Slurm"): gives every task of a job
 * that asked for openmps the node's pipe and log directories (CUDA_MPS_PIPE_DIRECTORY,
 * CUDA_MPS_LOG_DIRECTORY) and the shim, as `openmps run` does (its folder first in
 * LD_LIBRARY_PATH, the shim itself in LD_PRELOAD), so that every CUDA process of the job is
 * served without a change to the job script. The node's daemon is the prolog's
 * (dist/slurm/prolog).
 *
 * A job asks for openmps by any of: `--gres=mps:N` (the task's environment then holds
 * CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, which Slurm's gres/mps puts there), `--openmps` on
 * srun/sbatch/salloc, or `default=on` in plugstack.conf; `--openmps=no` opts a job out.
 * plugstack.conf's arguments (each KEY=VALUE):
 *   default=on|off   every job, or only those that ask (off)
 *   mps=on|off       whether --gres=mps:N asks (on)
 *   pipe=DIR         the daemon's pipe directory (/run/openmps, as the prolog's default)
 *   log=DIR          its log directory (/var/log/openmps)
 *   shim=DIR         the folder of the shim libcuda.so.1 (the folder above this plugin's, where
 *                    make install puts both: lib/openmps/ and lib/openmps/slurm/)
 * Any other argument, or a value that does not fit, is an error that names it (a `required`
 * plugin then fails the job; slurmd's and srun's logs say why).
 *
 * Built only where Slurm's header is found (Debian: libslurm-dev); the symbols it calls are
 * Slurm's own, resolved in the process that loads it. tests/install/check_slurm.py runs it in
 * a real single-node Slurm.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(openmps, 1);

enum { OPT_OPENMPS = 1 };

static int cfg_default;      /* default=on */
static int cfg_mps = 1;      /* mps=on */
static int user_choice = -1; /* --openmps: 1 yes, 0 no, -1 not given */
static char cfg_pipe[PATH_MAX] = "/run/openmps";
static char cfg_log[PATH_MAX] = "/var/log/openmps";
static char cfg_shim[PATH_MAX]; /* empty: beside this plugin */

/* "on"/"yes"/"1" -> 1, "off"/"no"/"0" -> 0, else -1. */
static int parse_bool(const char *v)
{
    if (!strcmp(v, "on") || !strcmp(v, "yes") || !strcmp(v, "1"))
        return 1;
    if (!strcmp(v, "off") || !strcmp(v, "no") || !strcmp(v, "0"))
        return 0;
    return -1;
}

static int opt_cb(int val, const char *optarg, int remote)
{
    (void)remote;
    if (val != OPT_OPENMPS)
        return -1;
    user_choice = optarg && *optarg ? parse_bool(optarg) : 1;
    if (user_choice < 0) {
        slurm_error("openmps: --openmps=%s: say yes or no", optarg);
        return -1;
    }
    return 0;
}

static struct spank_option openmps_option = {
    "openmps",
    "[yes|no]",
    "Serve the job's CUDA programs with openmps (no: not even under --gres=mps)",
    2,
    OPT_OPENMPS,
    opt_cb};

/* An absolute path without ':' (a colon splits LD_LIBRARY_PATH and LD_PRELOAD, a space
 * LD_PRELOAD), copied into dst. 0, or -1 with the reason in slurmd's or srun's log. */
static int set_path(char *dst, const char *key, const char *v)
{
    if (v[0] != '/' || strpbrk(v, ": \t\n") || strlen(v) >= PATH_MAX) {
        slurm_error("openmps: plugstack.conf: %s=%s: needs an absolute path without ':' or "
                    "spaces",
                    key, v);
        return -1;
    }
    snprintf(dst, PATH_MAX, "%s", v);
    return 0;
}

static int parse_args(int ac, char **av)
{
    for (int i = 0; i < ac; i++) {
        const char *eq = strchr(av[i], '=');
        size_t klen = eq ? (size_t)(eq - av[i]) : 0;
        const char *v = eq ? eq + 1 : "";
        int b = parse_bool(v);

        if (klen == 7 && !strncmp(av[i], "default", klen) && b >= 0)
            cfg_default = b;
        else if (klen == 3 && !strncmp(av[i], "mps", klen) && b >= 0)
            cfg_mps = b;
        else if (klen == 4 && !strncmp(av[i], "pipe", klen)) {
            if (set_path(cfg_pipe, "pipe", v) < 0)
                return -1;
        } else if (klen == 3 && !strncmp(av[i], "log", klen)) {
            if (set_path(cfg_log, "log", v) < 0)
                return -1;
        } else if (klen == 4 && !strncmp(av[i], "shim", klen)) {
            if (set_path(cfg_shim, "shim", v) < 0)
                return -1;
        } else {
            slurm_error("openmps: plugstack.conf: '%s' is not one of default=on|off, "
                        "mps=on|off, pipe=DIR, log=DIR, shim=DIR",
                        av[i]);
            return -1;
        }
    }
    return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    if (parse_args(ac, av) < 0)
        return -1;
    if (spank_option_register(sp, &openmps_option) != ESPANK_SUCCESS) {
        slurm_error("openmps: cannot register --openmps");
        return -1;
    }
    return 0;
}

/* The shim's folder: shim=, else the folder above the one this plugin was loaded from. */
static int shim_dir(char buf[PATH_MAX])
{
    Dl_info info;
    char *slash;

    if (cfg_shim[0]) {
        snprintf(buf, PATH_MAX, "%s", cfg_shim);
        return 0;
    }
    if (!dladdr((void *)shim_dir, &info) || !info.dli_fname || !realpath(info.dli_fname, buf))
        return -1;
    for (int up = 0; up < 2; up++) {
        slash = strrchr(buf, '/');
        if (!slash || slash == buf)
            return -1;
        *slash = '\0';
    }
    return 0;
}

/* `first` in front of the job's value of var, colon-separated. 0 or -1. */
static int prepend(spank_t sp, const char *var, const char *first)
{
    size_t cap = 4096;
    char *old = NULL, *v = NULL;
    spank_err_t rc;
    int ok = 0;

    do { /* the job's value, however long (a module system's path can be) up to 1 MiB */
        char *bigger = realloc(old, cap *= 2);
        if (!bigger)
            goto out;
        old = bigger;
        old[0] = '\0';
        rc = spank_getenv(sp, var, old, (int)cap);
    } while (rc == ESPANK_NOSPACE && cap < (1u << 20));
    if (rc == ESPANK_ENV_NOEXIST)
        old[0] = '\0';
    else if (rc != ESPANK_SUCCESS) {
        slurm_error("openmps: cannot read the task's %s: %s", var, spank_strerror(rc));
        goto out;
    }
    if (asprintf(&v, "%s%s%s", first, old[0] ? ":" : "", old) < 0) {
        v = NULL;
        goto out;
    }
    ok = spank_setenv(sp, var, v, 1) == ESPANK_SUCCESS;
out:
    free(v);
    free(old);
    return ok ? 0 : -1;
}

/* Whether this task is served: --openmps[=no] decides; else default=on; else (mps=on) a share
 * given by gres/mps. */
static int wanted(spank_t sp)
{
    char v[64];

    if (user_choice >= 0)
        return user_choice;
    if (cfg_default)
        return 1;
    return cfg_mps &&
           spank_getenv(sp, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", v, sizeof(v)) == ESPANK_SUCCESS;
}

/* In the task, as the job's user, just before it executes the job's program. */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    char dir[PATH_MAX], lib[PATH_MAX + 16];

    (void)ac;
    (void)av;
    if (!spank_remote(sp) || !wanted(sp))
        return 0;
    if (shim_dir(dir) < 0) {
        slurm_error("openmps: cannot find the shim's folder; set shim=DIR in plugstack.conf");
        return -1;
    }
    snprintf(lib, sizeof(lib), "%s/libcuda.so.1", dir);
    if (access(lib, R_OK) != 0) {
        slurm_error("openmps: no shim at %s; set shim=DIR in plugstack.conf", lib);
        return -1;
    }
    if (strpbrk(dir, ": \t\n")) {
        slurm_error("openmps: the shim's folder %s has a colon or a space", dir);
        return -1;
    }
    if (spank_setenv(sp, "CUDA_MPS_PIPE_DIRECTORY", cfg_pipe, 1) != ESPANK_SUCCESS ||
        spank_setenv(sp, "CUDA_MPS_LOG_DIRECTORY", cfg_log, 1) != ESPANK_SUCCESS ||
        prepend(sp, "LD_LIBRARY_PATH", dir) < 0 || prepend(sp, "LD_PRELOAD", lib) < 0) {
        slurm_error("openmps: cannot set the task's environment");
        return -1;
    }
    return 0;
}
