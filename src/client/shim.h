/* SPDX-License-Identifier: MIT */
/* State of the libcuda.so.1 shim, shared by its files. */
#ifndef OM_SHIM_H
#define OM_SHIM_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "client.h"
#include "../common/gen/entries.h"

#define OM_HIDDEN __attribute__((visibility("hidden")))

/* CUresult values the shim returns itself (from the driver API documentation). */
#define OM_CUDA_SUCCESS 0
#define OM_CUDA_ERROR_INVALID_VALUE 1
#define OM_CUDA_ERROR_NOT_INITIALIZED 3
#define OM_CUDA_ERROR_NO_DEVICE 100
#define OM_CUDA_ERROR_INVALID_DEVICE 101
#define OM_CUDA_ERROR_NOT_FOUND 500
#define OM_CUDA_ERROR_NOT_SUPPORTED 801
#define OM_CUDA_ERROR_MPS_CONNECTION_FAILED 805
#define OM_CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION 915
/* CUdriverProcAddress_flags and CUdriverProcAddressQueryResult */
#define OM_PROC_LEGACY_STREAM 0x1u
#define OM_PROC_PER_THREAD_STREAM 0x2u
#define OM_PROC_SUCCESS 0
#define OM_PROC_SYMBOL_NOT_FOUND 1
#define OM_PROC_VERSION_NOT_SUFFICIENT 2

/* How remote mode treats an entry point (from the tables of api/remote/). */
enum om_entry_mode { OM_ENTRY_REMOTE, OM_ENTRY_LOCAL, OM_ENTRY_PASSTHROUGH, OM_ENTRY_UNSUPPORTED };

enum om_mode {
    OM_MODE_UNDECIDED,   /* before the first cuInit / cuGetProcAddress */
    OM_MODE_PASSTHROUGH, /* no daemon: the real driver does everything */
    OM_MODE_REMOTE,      /* a server executes the work */
    OM_MODE_FAILED,      /* a daemon refused us: every call fails like an MPS client's */
    OM_MODE_NO_DEVICE,   /* our CUDA_VISIBLE_DEVICES names none of the server's devices: every
                          * entry returns CUDA_ERROR_NO_DEVICE, as the driver's without devices */
    OM_MODE_FORKED,      /* a child forked from a process in remote mode: every entry returns
                          * CUDA_ERROR_NOT_INITIALIZED, as the driver's in such a child, and the
                          * parent's session (ring, socket, threads) is never touched */
};

struct om_shim {
    enum om_mode mode;
    bool log_enabled;  /* OPENMPS_TRACE: notes on stderr */
    bool trace_calls;  /* OPENMPS_TRACE: one line per call too */
    bool trace_tables; /* OPENMPS_TRACE_TABLES: private export tables watched (tabletrace.c) */
    bool checking;     /* OPENMPS_CHECK (openmps check): passthrough whatever daemon runs */
    void *real;        /* dlopen handle of the real driver, NULL when there is none */
    char real_path[256];
    void *real_fn[OM_ENTRY_COUNT]; /* the real driver's entry points (NULL: missing) */
    struct om_client client;       /* the session in remote mode */
    char failure[512];
    int no_device_rc; /* OM_MODE_NO_DEVICE: what cuInit answers */
    int failed_rc;    /* OM_MODE_FAILED: what cuInit answers (0: MPS_CONNECTION_FAILED) */
};

extern struct om_shim om_shim;
extern void *om_fn[OM_ENTRY_COUNT];
extern void *om_local_fn[OM_ENTRY_COUNT]; /* the shim's own cuInit, cuGetProcAddress… */

/* entries.c */
const char *om_entry_name(int index);
int om_entry_index(const char *symbol); /* -1 when not a driver symbol */
void om_shim_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Logs "<entry>: why" once per entry point (with OPENMPS_TRACE). */
void om_note_once(int index, const char *why);

/* shim.c */
void om_shim_decide(void);
/* OM_MODE_NO_DEVICE's entry: CUDA_ERROR_NO_DEVICE, but the shim's own entries and the real
 * driver's for what needs no device (passthrough rows: cuDriverGetVersion, error names). */
void *om_no_device_entry(int index);
/* OM_MODE_FORKED's entry: CUDA_ERROR_NOT_INITIALIZED, but the shim's own entries and the real
 * driver's passthrough rows (the version, error names), which need no initialisation. */
void *om_forked_entry(int index);

/* local.c: entry points the shim answers in every mode. */
int om_cuInit(unsigned flags);
int om_cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags);
int om_cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags,
                           int *status);

/* The driver API version remote mode presents (the version the measured
 * cuGetProcAddress table, api/procaddr.tsv, was taken from). */
#define OM_DRIVER_API_VERSION 13000
int om_proc_lookup(const char *symbol, int version, uint64_t flags, int *ret_index);

/* trace.c: with OPENMPS_TRACE, the stub that logs a call and goes on to target. */
void *om_trace_wrap(int index, void *target);
void om_trace_install(void);
void om_trace_crashes(void); /* with OPENMPS_TRACE: a backtrace on SIGSEGV/SIGBUS */

/* tabletrace.c: with OPENMPS_TRACE_TABLES, cuGetExportTable hands out watched tables. */
bool om_tabletrace_start(void);
void *om_tabletrace_wrap(int index, void *target);
/* state/tables.c: whether uuid (16 bytes) is one of the tables the CUDA runtime itself asks for. */
bool om_runtime_table(const void *uuid);

/* check.c: with OPENMPS_CHECK, the stub that counts a call and goes on to target. */
bool om_check_start(void); /* true when checking (the shim must stay in passthrough) */
void *om_check_wrap(int index, void *target);
/* Passthrough: a pointer from the real cuGetProcAddress, counted and traced when asked. */
void *om_passthrough_pointer(const char *symbol, int version, uint64_t flags, void *p);

/* remote.c: the remote implementation of an entry point, or its NOT_SUPPORTED stub. */
void *om_remote_entry(int index);
bool om_entry_is_passthrough(int index); /* its remote-mode row: passthrough */

#endif
