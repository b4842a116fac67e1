/* SPDX-License-Identifier: MIT */
/* Environment variables, directories and the value syntaxes shared by every openmps process. */
#ifndef OM_CONFIG_H
#define OM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "openmps/protocol.h"

/* A root daemon's default directories: only root can create them, so no other user can take
 * them first (docs/operations.md, "Files"). */
#define OM_ROOT_PIPE_DIR "/run/openmps"
#define OM_ROOT_LOG_DIR "/var/log/openmps"
/* A plain user's daemon's defaults. */
#define OM_DEFAULT_PIPE_DIR "/tmp/openmps"
#define OM_DEFAULT_LOG_DIR "/tmp/openmps-log"
/* NVIDIA's defaults, which openmps-control takes when run by NVIDIA's name (the drop-in symlink
 * installed with OPENMPS_MPS_NAMES=ON); clients and the front-end look there last. */
#define OM_NVIDIA_CONTROL "nvidia-cuda-mps-control"
#define OM_NVIDIA_PIPE_DIR "/tmp/nvidia-mps"
#define OM_NVIDIA_LOG_DIR "/var/log/nvidia-mps"
/* The most directories om_pipe_dirs returns. */
#define OM_PIPE_DIRS_MAX 3

/* The daemon's directories: CUDA_MPS_PIPE_DIRECTORY / CUDA_MPS_LOG_DIRECTORY, or the defaults
 * of a daemon run by euid. */
const char *om_daemon_pipe_dir(uid_t euid);
const char *om_daemon_log_dir(uid_t euid);
/* Where clients and the front-end look for a daemon, in order: CUDA_MPS_PIPE_DIRECTORY alone
 * when it is set; else a root daemon's default, a plain user's, then NVIDIA's (a daemon run by
 * the drop-in name). Returns how many (1 to OM_PIPE_DIRS_MAX) it wrote into dirs. */
int om_pipe_dirs(const char *dirs[OM_PIPE_DIRS_MAX]);

/* Decimal unsigned integer without sign or suffix, at most max. 0 or -EINVAL. */
int om_parse_u64(const char *s, uint64_t max, uint64_t *ret);

/* Sizes as NVIDIA's tools write them: a decimal with one of the suffixes K,
 * M, G, T (powers of 1024, either case, optional trailing B); a bare number
 * means MiB, as nvidia-cuda-mps-control reads it. "2G", "512M", "1.5G",
 * "3000" (= 3000M). 0 or -EINVAL (also on overflow or a fraction of a byte). */
int om_parse_size(const char *s, uint64_t *ret);
/* Writes a size the way get_*_pinned_mem_limit answers it: the largest unit
 * that divides it exactly ("2G", "1536M", "4K"), plain bytes otherwise. */
void om_format_size(uint64_t bytes, char *buf, size_t cap);

/* The machine's runnable threads in a /proc/loadavg line, its fourth field's first number
 * ("0.52 0.58 0.59 3/1042 12345": 3), or -EINVAL. */
int om_parse_loadavg_running(const char *line);

/* Percentage 0 < p <= 100 with at most three decimals, as thousandths. */
int om_parse_percentage(const char *s, uint32_t *ret_milli);
/* One decimal, as NVIDIA prints it: "25.0", "33.3". */
void om_format_percentage(uint32_t milli, char *buf, size_t cap);

/* CUDA_MPS_PINNED_DEVICE_MEM_LIMIT syntax: "0=1G,1=512M,GPU-8932f937=2G" (device ordinals or
 * GPU UUIDs). Sets the ordinals' limits; UUID entries are checked and left to the daemon, which
 * knows the devices (om_visible_mem_limits). Returns how many UUID entries there are, or
 * -EINVAL (limits untouched). */
int om_parse_mem_limit_list(const char *s, struct om_limits *limits);

/*
 * Creates dir (and missing parents, 0755) and makes sure it is safe to use:
 * a real directory (not a symlink), owned by the effective user, not writable
 * by others. A directory we own gets `mode`. On failure returns -errno and
 * writes a sentence naming the problem into err.
 */
int om_make_private_dir(const char *dir, mode_t mode, char *err, size_t errlen);

/* Raises the soft limit of open files to the hard limit (daemon and server
 * hold one descriptor per client). Returns the new soft limit. */
long om_raise_nofile(void);

#endif
