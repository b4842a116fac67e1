/* SPDX-License-Identifier: MIT */
/* The libcuda.so.1 shim, its top: loading the real driver, the choice of mode at the first
 * cuInit or cuGetProcAddress, and the installation of the remote implementations (the entry
 * table itself and the shim's state are entries.c's). */
#define _GNU_SOURCE
#include "shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/driver.h"
#include "gen/remote_decls.h"

/* Entry points the real driver lacks (an older driver): NOT_FOUND, named once. */
static int missing(int index)
{
    om_note_once(index, "not in the real driver");
    return OM_CUDA_ERROR_NOT_FOUND;
}

/* Entry points without any driver (no real driver here, no daemon). */
static int no_driver(int index)
{
    om_note_once(index, "no device (no CUDA driver here, or CUDA_VISIBLE_DEVICES names none)");
    return OM_CUDA_ERROR_NO_DEVICE;
}

/* Entry points in a child forked from a process in remote mode (forked_child below). */
static int forked(int index)
{
    om_note_once(index, "a child forked after CUDA was initialised cannot use CUDA");
    return OM_CUDA_ERROR_NOT_INITIALIZED;
}

#define OM_X_STUBS(i, sym, mode)                                                                   \
    static int missing_##sym(void)                                                                 \
    {                                                                                              \
        return missing(i);                                                                         \
    }                                                                                              \
    static int nodrv_##sym(void)                                                                   \
    {                                                                                              \
        return no_driver(i);                                                                       \
    }                                                                                              \
    static int forked_##sym(void)                                                                  \
    {                                                                                              \
        return forked(i);                                                                          \
    }
OM_ENTRIES(OM_X_STUBS)
#undef OM_X_STUBS

static void *const missing_stubs[OM_ENTRY_COUNT] = {
#define OM_X_REF(i, sym, mode) [i] = (void *)missing_##sym,
    OM_ENTRIES(OM_X_REF)
#undef OM_X_REF
};

static void *const no_driver_stubs[OM_ENTRY_COUNT] = {
#define OM_X_REF(i, sym, mode) [i] = (void *)nodrv_##sym,
    OM_ENTRIES(OM_X_REF)
#undef OM_X_REF
};

static void *const forked_stubs[OM_ENTRY_COUNT] = {
#define OM_X_REF(i, sym, mode) [i] = (void *)forked_##sym,
    OM_ENTRIES(OM_X_REF)
#undef OM_X_REF
};

void *om_forked_entry(int index)
{
    if (index < 0 || index >= OM_ENTRY_COUNT)
        return NULL;
    if (om_entry_is_passthrough(index) && om_shim.real_fn[index])
        return om_shim.real_fn[index]; /* cuDriverGetVersion, error names: no context needed */
    return om_local_fn[index] ? om_local_fn[index] : forked_stubs[index];
}

void *om_no_device_entry(int index)
{
    if (index < 0 || index >= OM_ENTRY_COUNT)
        return NULL;
    if (om_entry_is_passthrough(index) && om_shim.real_fn[index])
        return om_shim.real_fn[index]; /* cuDriverGetVersion, error names: no device needed */
    return om_local_fn[index] ? om_local_fn[index] : no_driver_stubs[index];
}

/* True when path is this very library (never load ourselves as the driver). */
static bool is_self(const char *path)
{
    Dl_info self;
    struct stat a, b;

    if (!dladdr((void *)om_entry_name, &self) || !self.dli_fname)
        return false;
    return stat(path, &a) == 0 && stat(self.dli_fname, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

static void *load_real_driver(void)
{
    const char *const *paths = om_driver_default_paths;
    const char *env = getenv("OPENMPS_DRIVER");

    if (env && *env) {
        void *h = is_self(env) ? NULL : dlopen(env, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            om_shim_log("cannot load OPENMPS_DRIVER=%s: %s", env,
                        is_self(env) ? "that is the openmps shim itself" : dlerror());
        return h;
    }
    for (int i = 0; paths[i]; i++) {
        void *h;
        if (access(paths[i], R_OK) != 0 || is_self(paths[i]))
            continue;
        h = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            snprintf(om_shim.real_path, sizeof(om_shim.real_path), "%s", paths[i]);
            return h;
        }
    }
    return NULL;
}

static void install_local(void)
{
    om_local_fn[OM_IDX_cuInit] = (void *)om_cuInit;
    om_local_fn[OM_IDX_cuGetProcAddress] = (void *)om_cuGetProcAddress;
    om_local_fn[OM_IDX_cuGetProcAddress_v2] = (void *)om_cuGetProcAddress_v2;
    for (int i = 0; i < OM_ENTRY_COUNT; i++)
        if (om_local_fn[i])
            om_fn[i] = om_local_fn[i];
}

/*
 * A child of fork shares the parent's ring (shared memory) and socket, and inherits the locks the
 * parent's other threads held at the fork (the ring's among them) without those threads. Natively
 * such a child cannot use CUDA: the driver answers CUDA_ERROR_NOT_INITIALIZED to every call, cuInit
 * included (PyTorch's "Cannot re-initialize CUDA in forked subprocess"). So does the shim's: every
 * entry of om_fn, and of what cuGetProcAddress answers from now on, is a stub that touches no
 * state, and the transport refuses before any lock (a pointer looked up before the fork). The
 * child's copy of the socket is closed (else the parent's end would go unnoticed while the child
 * lives); nothing is sent: the session is the parent's.
 */
static void forked_child(void)
{
    if (om_shim.mode != OM_MODE_REMOTE)
        return;
    __atomic_store_n(&om_shim.mode, OM_MODE_FORKED, __ATOMIC_RELEASE);
    for (int i = 0; i < OM_ENTRY_COUNT; i++)
        __atomic_store_n(&om_fn[i], om_forked_entry(i), __ATOMIC_RELEASE);
    om_shim.client.dead = true;
    snprintf(om_shim.client.why, sizeof(om_shim.client.why),
             "a child process cannot use its parent's openmps session");
    if (om_shim.client.sock >= 0) {
        close(om_shim.client.sock);
        om_shim.client.sock = -1;
    }
}

__attribute__((constructor)) static void shim_load(void)
{
    pthread_atfork(NULL, NULL, forked_child);
    const char *trace = getenv("OPENMPS_TRACE");

    om_shim.log_enabled = trace && *trace && strcmp(trace, "0") != 0;
    om_shim.trace_calls = om_shim.log_enabled;
    om_shim.trace_tables = om_tabletrace_start();
    om_trace_crashes();
    om_shim.real = load_real_driver();
    for (int i = 0; i < OM_ENTRY_COUNT; i++) {
        void *p = om_shim.real ? dlsym(om_shim.real, om_entry_name(i)) : NULL;
        om_shim.real_fn[i] = p;
        om_fn[i] = p ? p : om_shim.real ? missing_stubs[i] : no_driver_stubs[i];
    }
    install_local();
    om_shim.checking = om_check_start();
    /* Traced from the first call on (remote mode wraps its own entries again). */
    om_trace_install();
}

/* Switches om_fn to the remote implementations. */
static void remote_install(void)
{
    /* Every device of the server: the calls of a thread run on its current device
     * (the per-call preamble, transport.c). */
    om_remote_gen_install(); /* every row of api/remote/ (gen/remote_stubs.c) */
    for (int i = 0; i < OM_ENTRY_COUNT; i++)
        __atomic_store_n(&om_fn[i], om_remote_entry(i), __ATOMIC_RELEASE);
}

/* Decides once, at the first cuInit or cuGetProcAddress, whether a daemon
 * serves this process. */
static void decide(void)
{
    char err[512], untrusted[512] = "";
    const char *dirs[OM_PIPE_DIRS_MAX];
    char looked[1024] = "";
    int rc = -ENOENT, n;

    if (om_shim.checking) { /* openmps check: the program runs natively */
        om_shim.mode = OM_MODE_PASSTHROUGH;
        om_shim_log("openmps check: running on the real driver, counting calls");
        om_trace_install();
        return;
    }
    /* The pipe directories in turn (CUDA_MPS_PIPE_DIRECTORY, else a root daemon's default,
     * a plain user's, then NVIDIA's, where the drop-in name puts a daemon): the first daemon we
     * trust serves us. One that is neither root's nor ours, or cannot be reached, is no daemon: the
     * program runs natively, told once why (another user may have created the directory first; that
     * must not stop its programs). */
    n = om_pipe_dirs(dirs);
    for (int i = 0; i < n; i++) {
        rc = om_client_open(&om_shim.client, dirs[i], -1, err, sizeof(err));
        if (rc == -EACCES && !untrusted[0])
            snprintf(untrusted, sizeof(untrusted), "%s", err);
        if (rc != -ENOENT && rc != -ECONNREFUSED && rc != -EACCES)
            break;
    }
    if (rc == -ENOENT || rc == -ECONNREFUSED || rc == -EACCES) {
        om_shim.mode = OM_MODE_PASSTHROUGH;
        if (untrusted[0])
            fprintf(stderr,
                    "openmps: not using the openmps daemon: %s; running on the real "
                    "driver\n",
                    untrusted);
        for (int i = 0; i < n; i++)
            snprintf(looked + strlen(looked), sizeof(looked) - strlen(looked), "%s%s",
                     i ? " nor in " : "", dirs[i]);
        om_shim_log("no openmps daemon in %s: running on the real driver", looked);
        om_trace_install();
        return;
    }
    if (rc == -ENODEV || rc == -ENXIO) {
        /* Every entry, called directly or looked up, answers as a driver without devices:
         * never the local driver, whose numbering is not the server's. */
        om_shim.mode = OM_MODE_NO_DEVICE;
        om_shim.no_device_rc =
            rc == -ENXIO ? OM_CUDA_ERROR_INVALID_DEVICE : OM_CUDA_ERROR_NO_DEVICE;
        for (int i = 0; i < OM_ENTRY_COUNT; i++)
            om_fn[i] = om_no_device_entry(i);
        om_shim_log("%s", err);
        return;
    }
    if (rc < 0) {
        /* A daemon is there but will not serve us: fail as an MPS client
         * does, and say why even without OPENMPS_TRACE. */
        om_shim.mode = OM_MODE_FAILED;
        if (rc == -EKEYREJECTED) /* static partitions: none named, or an unknown one */
            om_shim.failed_rc = OM_CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION; /* as NVIDIA's */
        snprintf(om_shim.failure, sizeof(om_shim.failure), "%s", err);
        fprintf(stderr, "openmps: cannot use the openmps server: %s\n", err);
        return;
    }
    om_shim.mode = OM_MODE_REMOTE;
    om_shim_log("remote mode: server %d, client id %u", (int)om_shim.client.server_pid,
                om_shim.client.client_id);
    remote_install();
    om_trace_install();
}

void om_shim_decide(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    pthread_once(&once, decide);
}
