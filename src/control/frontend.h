/* SPDX-License-Identifier: MIT */
/* The front-end of openmps-control (run without -d or -f). */
#ifndef OM_FRONTEND_H
#define OM_FRONTEND_H

#include <stdbool.h>
#include <stddef.h>

/* With argc > 0 the words are one command; otherwise commands are read from
 * stdin, one per line. Returns the exit status: 0 when the daemon answered
 * every command, 1 when it could not be reached or the connection broke. */
int om_frontend_run(int argc, char **argv);

/* Sends one command line and returns the daemon's whole answer (openmps stats, ps, smi):
 * 0 with *ret_text (malloc'ed, NUL-terminated; the caller frees it) and *ret_error (the daemon
 * flagged the answer an error), or -1 with the reason on stderr (no daemon, the connection
 * broke). */
int om_frontend_ask(const char *line, char **ret_text, bool *ret_error);
/* The same, the reason for a -1 written into why (cap bytes) instead of stderr (openmps top). */
int om_frontend_ask_why(const char *line, char **ret_text, bool *ret_error, char *why, size_t cap);

#endif
