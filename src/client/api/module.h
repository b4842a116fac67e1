/* SPDX-License-Identifier: MIT */
/* What the module families' files (api/modules.c, linker.c, occupancy.c) share. */
#ifndef OM_CLIENT_MODULE_H
#define OM_CLIENT_MODULE_H

#include <stddef.h>

#include "openmps/cuda_abi.h"

/* CUjit_option values whose answers the driver writes into the program's arrays. */
#define JIT_WALL_TIME 2
#define JIT_INFO_LOG_BUFFER 3
#define JIT_INFO_LOG_BUFFER_SIZE_BYTES 4
#define JIT_ERROR_LOG_BUFFER 5
#define JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6

/* api/modules.c: a module file, read by this process (the server never opens a client's path),
 * with a NUL after its bytes (a PTX image ends at its NUL); the caller frees it. NULL with *rc
 * set when it cannot be read. */
char *om_module_read_file(const char *path, CUresult *rc, size_t *ret_len);
/* api/linker.c: a log's size as the program gave it (its option's value), capped as the server
 * caps it (64 KiB); 0 when the options name none. */
unsigned om_jit_log_size(unsigned n, const CUjit_option *o, void **v, int size_opt);
/* api/linker.c: the server's answer to JIT options (args.c's om_jit_answer: the values the
 * driver left, then its info and error logs) into the program's arrays: the logs into its
 * buffers within the sizes it gave (caps: info, error, read before the call, as the driver
 * writes the filled sizes over them), NUL-terminated; the filled sizes, the wall time and the
 * threads per block into their slots, as the driver writes them. UNKNOWN for a malformed one. */
struct om_rbuf;
struct om_wbuf;
/* api/linker.c: n (id, value) pairs of JIT options for the server (args.c's om_jit_options): log
 * buffers as 0 (the server's own), their sizes capped as the server takes them, the wall time 0
 * (an OUT value). INVALID_VALUE past 32 options or without arrays. */
CUresult om_jit_put_options(struct om_wbuf *req, unsigned n, const CUjit_option *o, void **v);
CUresult om_jit_apply_answer(unsigned n, const CUjit_option *opts, void **vals,
                             const unsigned caps[2], struct om_rbuf *in);
/* api/occupancy.c: forgets the cached occupancy answers (a module unloaded, a carveout set). */
void om_occupancy_forget(void);

#endif
