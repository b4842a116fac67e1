/* SPDX-License-Identifier: MIT */
/* The front-end of openmps-control (run without -d or -f). */
#ifndef OM_FRONTEND_H
#define OM_FRONTEND_H

/* With argc > 0 the words are one command; otherwise commands are read from
 * stdin, one per line. Returns the exit status: 0 when the daemon answered
 * every command, 1 when it could not be reached or the connection broke. */
int om_frontend_run(int argc, char **argv);

#endif
