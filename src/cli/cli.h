/* SPDX-License-Identifier: MIT */
/* What the commands of the openmps program (src/cli/) share. */
#ifndef OM_CLI_H
#define OM_CLI_H

#include <stddef.h>

/* The shim's folder (where libcuda.so.1 lies): $OPENMPS_LIB, else beside this program where
 * make install or the build puts it. 0, or -1 when none is found. */
int om_cli_shim_dir(char *buf, size_t cap);
/* getopt_long's error c (':' or '?') for argv, said as who's, with where to look. Returns 2. */
int om_cli_bad_option(const char *who, char **argv, int c);
/* openmps cdi ARGS (argv[0] is "cdi"): the exit status. src/cli/cdi.c. */
int om_cli_cdi(int argc, char **argv);
/* openmps top (top.c): argv[0] is "top". */
int om_cli_top(int argc, char **argv);

#endif
