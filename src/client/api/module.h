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
/* api/occupancy.c: forgets the cached occupancy answers (a module unloaded, a carveout set). */
void om_occupancy_forget(void);

#endif
