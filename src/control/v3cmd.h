/* SPDX-License-Identifier: MIT */
/* What protocol 3's command files share: v3cmd.c (the parsing of options, the answers' tables,
 * the dispatch, the server, client, namespace, feature and memacct modules) and v3devices.c
 * (the sm-partition, partition and device modules). No other file uses it. */
#ifndef OM_CONTROL_V3CMD_H
#define OM_CONTROL_V3CMD_H

#include <stdbool.h>

struct conn;
struct daemon;
struct strbuf;

#define V3_MAX_OPTS 12

struct v3_ctx {
    struct daemon *d;
    struct conn *ui;
    struct strbuf *out;
    const char *verb; /* the command's, for its messages */
    bool error;
    unsigned nopts;
    struct {
        const char *key;   /* without its dashes */
        const char *value; /* NULL for a flag */
    } opts[V3_MAX_OPTS];
};

/* An error answer (one line; the command then exits 1); returns -EINVAL. */
int v3_fail(struct v3_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An option's value ("" for a flag), NULL when it was not given. */
const char *v3_opt(const struct v3_ctx *x, const char *key);
/* --key=value, key=value, --key value, flags and positional arguments (which stand for the
 * keys of `positional`, in order) into x's options; every key must be allowed or a flag. 0, or
 * -EINVAL answered. */
int v3_parse_opts(struct v3_ctx *x, int argc, char **argv, const char *const *allowed,
                  const char *const *flags, const char *const *positional);
/* Whether the caller may change state (root, the daemon's user); answered when not. */
bool v3_may_change(struct v3_ctx *x);
/* A true|false option into *v (left as it was when absent). 0, or -EINVAL answered. */
int v3_bool_opt(struct v3_ctx *x, const char *key, bool *v);

/* The answer of a list command: --format=table (columns padded, a header of the columns' names
 * in capitals) or csv (comma-separated, a header of their names, a value with a comma or a quote
 * quoted as RFC 4180 does), each optionally ",noheader". */
struct v3_table {
    struct v3_ctx *x;
    bool csv, header;
    unsigned lines, ncols;
    const char *const *cols;
    const unsigned *width; /* table: each column's width, a space at least between */
};
/* A list's start: its --format checked, its header written (v3_list_start: the server a
 * list names must exist). 0, or -EINVAL answered. */
int v3_table_start(struct v3_ctx *x, struct v3_table *t, const char *const *cols,
                   const unsigned *width, unsigned ncols);
int v3_list_start(struct v3_ctx *x, const char *only, struct v3_table *t, const char *const *cols,
                  const unsigned *width, unsigned ncols);
void v3_table_row(struct v3_table *t, const char *const *cells);

/* A module's verbs: each one's keys, flags and positional keys (v3_parse_opts), and what runs
 * it once its options are read. v3_dispatch runs the verb argv[1] names, or answers usage. */
struct v3_verb {
    const char *verb;
    const char *const *keys, *const *flags, *const *positional;
    int (*run)(struct v3_ctx *x);
};
int v3_dispatch(struct v3_ctx *x, int argc, char **argv, const struct v3_verb *verbs,
                unsigned nverbs, const char *usage);

/* v3devices.c: whether a partition was made for the named server; the modules. */
bool v3_server_has_partitions(struct daemon *d, const char *server);
int v3_cmd_partition(struct v3_ctx *x, int argc, char **argv);
int v3_cmd_sm_partition(struct v3_ctx *x, int argc, char **argv);
int v3_cmd_device(struct v3_ctx *x, int argc, char **argv);

#endif
