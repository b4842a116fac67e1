/* SPDX-License-Identifier: MIT */
/*
 * The MPS v3 configuration file (-a FILE), parsed strictly: the subset of TOML that NVIDIA's
 * format uses (tables, arrays of tables, `key = value` with strings, integers, decimals and
 * booleans, comments), and only the keys of its schema (docs/operations.md, "The configuration
 * file") plus openmps' own [openmps] table. Anything else, an unknown key, a key given twice, a
 * line longer than OM_CONF_LINE_MAX, is an error naming its line. No C TOML library is packaged
 * by Debian 12; this one is fuzzed (tests/fuzz/fuzz_conf.c).
 */
#define _GNU_SOURCE
#include "conffile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/config.h"

/* Read by the daemon or its servers, so settable here; the shim's own (OPENMPS_TRACE, ...) are
 * read by each program from its environment and are refused with a message saying so. Every
 * getenv("OPENMPS_...") of src/ must be in one of the two lists: unit.conffile_settings checks
 * it (tests/unit/check_conf_settings.py). */
const char *const om_conf_setting_names[] = {
    "OPENMPS_DRIVER",
    "OPENMPS_HOST_FN_TIMEOUT_S",
    "OPENMPS_SERVER",
    "OPENMPS_CHAN_SNDBUF",
    "OPENMPS_SERVER_KILL_GRACE_MS",
    "OPENMPS_SERVER_NICE",
    "OPENMPS_SERVER_SLICE_US",
    "OPENMPS_SERVER_START_TIMEOUT_MS",
    "OPENMPS_SERVER_ENV",
    "OPENMPS_LOG_LEVEL",
    "OPENMPS_HELLO_TIMEOUT_MS",
    "OPENMPS_SCHED",
    "OPENMPS_REPLAY",
    "OPENMPS_REPLAY_CHUNK",
    "OPENMPS_REPLAY_IDLE_US",
    "OPENMPS_REPLAY_MIN_CLIENTS",
    "OPENMPS_SERVER_SYNC",
    "OPENMPS_COPY_ANSWER",
    "OPENMPS_SYNC_WORD",
    "OPENMPS_ACCOUNT",
    "OPENMPS_SPIN_THREADS",
    "OPENMPS_PROFILE",
    "OPENMPS_PROFILE_SLOW_US",
    "OPENMPS_MODULE_CACHE",
    "OPENMPS_MODULE_CACHE_MAX",
    "OPENMPS_CLIENT_PINNED_MAX",
    "OPENMPS_SERVER_PINNED_MAX",
    "OPENMPS_CLIENT_MAX_PINNED_REGIONS",
    "OPENMPS_SERVER_MAX_PINNED_REGIONS",
    "OPENMPS_CLIENT_MAX_STREAMS",
    "OPENMPS_CLIENT_MAX_EVENTS",
    "OPENMPS_CLIENT_MAX_HANDLES",
    "OPENMPS_CLIENT_IMAGE_MAX",
    "OPENMPS_CLIENT_MAX_IMAGES",
    "OPENMPS_SERVER_IMAGE_MAX",
    "OPENMPS_SERVER_REPLAY_MAX",
    "OPENMPS_SERVER_STAGE_MAX",
    "OPENMPS_SERVER_WARM",
    "OPENMPS_FAIR_WINDOW_MS",
    "OPENMPS_PRIORITY_RESERVE",
    "OPENMPS_METRICS",
    "OPENMPS_METRICS_TEXTFILE",
    "OPENMPS_METRICS_TEXTFILE_S",
    "OPENMPS_METRICS_REFRESH_S",
    "OPENMPS_MULTIUSER_SHARED_ADDRESS_SPACE", /* -m's opt-in (docs/security.md) */
    "OPENMPS_MULTIUSER_UIDS",
    /* Set by the daemon for a multi-user server alone: one given in the environment is not
     * passed on, one in the file is refused (conf_setting). */
    "OPENMPS_SERVER_SHARED_USERS",
    NULL,
};

static const char *const shim_settings[] = {
    "OPENMPS_TRACE",          "OPENMPS_TRACE_TABLES", "OPENMPS_TRACE_TABLES_FIRST",
    "OPENMPS_FORWARD_TABLES", "OPENMPS_LIB",          "OPENMPS_CHECK",
    "OPENMPS_CLIENT_SPIN_US", "OPENMPS_WORD_NAP_US",  NULL,
};

enum vtype { V_STRING, V_INT, V_DECIMAL, V_BOOL };

struct value {
    enum vtype type;
    char text[OM_CONF_TEXT_MAX]; /* the string's content, or the token */
    int64_t i;                   /* V_INT */
    bool b;                      /* V_BOOL */
};

enum table {
    T_ROOT,
    T_COMPUTE_POLICY,
    T_SERVER,
    T_NS,
    T_NS_DEVICE,
    T_DEVICE,
    T_PARTITION,
    T_MEMACCT,
    T_CONTEXT_SHARE,
    T_OPENMPS,
};

/* Keys seen in the current table, to refuse one given twice. */
#define MAX_KEYS_PER_TABLE 64

struct parser {
    struct om_conf *c;
    int line;
    char *err;
    size_t errlen;
    enum table t;
    struct om_conf_server *srv;
    struct om_conf_ns *ns;
    struct om_conf_device *dev;
    struct om_conf_partition *part;
    char table_name[OM_CONF_LINE_MAX + 1];
    unsigned nkeys;
    char keys[MAX_KEYS_PER_TABLE][OM_CONF_NAME_MAX];
    /* Tables already defined, by their full name, to refuse one defined twice. */
    unsigned ntables;
    char (*tables)[OM_CONF_MAX_SEGMENTS * (OM_CONF_NAME_MAX + 1)];
};

#define MAX_TABLES (8 + OM_CONF_MAX_SERVERS * (1 + OM_CONF_MAX_NAMESPACES))

static int bad(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct parser *p, const char *fmt, ...)
{
    char text[384];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    snprintf(p->err, p->errlen, "line %d: %s", p->line, text);
    return -EINVAL;
}

static bool bare_char(char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '-';
}

static const char *skip_ws(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

/* The rest of a line after a value or header: blanks, then nothing or a comment. */
static int end_of_line(struct parser *p, const char *s)
{
    s = skip_ws(s);
    if (*s && *s != '#')
        return bad(p, "unexpected text after the value: \"%.32s\"", s);
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 && *s != '\t')
            return bad(p, "a control character in a comment");
    return 0;
}

/* A basic ("...") or literal ('...') string, on one line. *sp points at the quote. */
static int parse_string(struct parser *p, const char **sp, char *out, size_t cap)
{
    const char *s = *sp;
    char q = *s++;
    size_t n = 0;

    if ((s[0] == q && s[1] == q))
        return bad(p, "multi-line strings are not supported");
    for (;;) {
        char ch = *s;
        if (!ch)
            return bad(p, "a string without its closing %c", q);
        s++;
        if (ch == q)
            break;
        if ((unsigned char)ch < 0x20 && ch != '\t')
            return bad(p, "a control character in a string");
        if (ch == '\\' && q == '"') {
            switch (*s++) {
            case '\\': ch = '\\'; break;
            case '"': ch = '"'; break;
            case 'n': ch = '\n'; break;
            case 't': ch = '\t'; break;
            default: return bad(p, "an escape other than \\\\ \\\" \\n \\t in a string");
            }
        }
        if (n + 1 >= cap)
            return bad(p, "a string longer than %zu bytes", cap - 1);
        out[n++] = ch;
    }
    out[n] = '\0';
    *sp = s;
    return 0;
}

static int parse_value(struct parser *p, const char *s, struct value *v)
{
    memset(v, 0, sizeof(*v));
    if (*s == '"' || *s == '\'') {
        v->type = V_STRING;
        if (parse_string(p, &s, v->text, sizeof(v->text)) < 0)
            return -EINVAL;
        return end_of_line(p, s);
    }
    if (*s == '[')
        return bad(p, "arrays are not supported: write the list as one string");
    if (*s == '{')
        return bad(p, "inline tables are not supported: write a [table] of its own");
    size_t n = 0;
    while (s[n] && s[n] != ' ' && s[n] != '\t' && s[n] != '#')
        n++;
    if (n == 0)
        return bad(p, "a key without a value");
    if (n >= sizeof(v->text))
        return bad(p, "a value longer than %zu bytes", sizeof(v->text) - 1);
    memcpy(v->text, s, n);
    v->text[n] = '\0';
    if (!strcmp(v->text, "true") || !strcmp(v->text, "false")) {
        v->type = V_BOOL;
        v->b = v->text[0] == 't';
        return end_of_line(p, s + n);
    }
    /* A decimal integer (an optional sign, no leading zeros but 0 itself), or a decimal with
     * one point: enough for percentages and counts. */
    const char *d = v->text + (v->text[0] == '+' || v->text[0] == '-');
    size_t digits = strspn(d, "0123456789");
    if (digits == 0 || digits > 18)
        return bad(p, "\"%.32s\" is not a value (strings are quoted; numbers are decimal)",
                   v->text);
    if (d[0] == '0' && digits > 1)
        return bad(p, "\"%.32s\": leading zeros are not allowed", v->text);
    if (d[digits] == '\0') {
        v->type = V_INT;
        v->i = strtoll(v->text, NULL, 10);
    } else if (d[digits] == '.' && strspn(d + digits + 1, "0123456789") > 0 &&
               d[digits + 1 + strspn(d + digits + 1, "0123456789")] == '\0') {
        v->type = V_DECIMAL;
    } else {
        return bad(p, "\"%.32s\" is not a value (strings are quoted; numbers are decimal)",
                   v->text);
    }
    return end_of_line(p, s + n);
}

/* A key or a table name's part: bare, or quoted on one line. */
static int parse_key(struct parser *p, const char **sp, char *out, size_t cap)
{
    const char *s = *sp;
    size_t n = 0;

    if (*s == '"' || *s == '\'') {
        if (parse_string(p, &s, out, cap) < 0)
            return -EINVAL;
        if (!out[0])
            return bad(p, "an empty key");
        *sp = s;
        return 0;
    }
    while (bare_char(s[n]))
        n++;
    if (n == 0)
        return bad(p, "a key was expected at \"%.32s\"", s);
    if (n >= cap)
        return bad(p, "a key longer than %zu bytes", cap - 1);
    memcpy(out, s, n);
    out[n] = '\0';
    *sp = s + n;
    return 0;
}

/* Server, namespace and partition names become directory names and command arguments. */
static int check_name(struct parser *p, const char *what, const char *name)
{
    for (const char *q = name; *q; q++)
        if (!bare_char(*q))
            return bad(p, "the %s name \"%.64s\" may hold only letters, digits, '_' and '-'", what,
                       name);
    return 0;
}

static struct om_conf_server *server_named(struct parser *p, const char *name)
{
    struct om_conf *c = p->c;

    for (uint32_t i = 0; i < c->nservers; i++)
        if (!strcmp(c->servers[i].name, name))
            return &c->servers[i];
    if (check_name(p, "server", name) < 0)
        return NULL;
    if (c->nservers == OM_CONF_MAX_SERVERS) {
        bad(p, "more than %u servers", OM_CONF_MAX_SERVERS);
        return NULL;
    }
    struct om_conf_server *s = &c->servers[c->nservers++];
    snprintf(s->name, sizeof(s->name), "%s", name);
    s->line = p->line;
    return s;
}

static struct om_conf_ns *ns_named(struct parser *p, struct om_conf_server *s, const char *name)
{
    for (uint32_t i = 0; i < s->nns; i++)
        if (!strcmp(s->ns[i].name, name))
            return &s->ns[i];
    if (check_name(p, "namespace", name) < 0)
        return NULL;
    if (s->nns == OM_CONF_MAX_NAMESPACES) {
        bad(p, "more than %u namespaces in server %s", OM_CONF_MAX_NAMESPACES, s->name);
        return NULL;
    }
    struct om_conf_ns *n = &s->ns[s->nns++];
    snprintf(n->name, sizeof(n->name), "%s", name);
    n->line = p->line;
    return n;
}

static struct om_conf_device *new_device(struct parser *p, struct om_conf_device *devs, uint32_t *n,
                                         const char *where)
{
    if (*n == OM_CONF_MAX_DEVICES) {
        bad(p, "more than %u devices in %s", OM_CONF_MAX_DEVICES, where);
        return NULL;
    }
    struct om_conf_device *d = &devs[(*n)++];
    d->line = p->line;
    return d;
}

static int define_table(struct parser *p, const char *full)
{
    for (unsigned i = 0; i < p->ntables; i++)
        if (!strcmp(p->tables[i], full))
            return bad(p, "table [%s] is defined twice", full);
    if (p->ntables == MAX_TABLES)
        return bad(p, "more than %u tables", (unsigned)MAX_TABLES);
    snprintf(p->tables[p->ntables++], sizeof(p->tables[0]), "%s", full);
    return 0;
}

/* A [table] or [[array of tables]] line. */
static int parse_header(struct parser *p, const char *s)
{
    bool array = s[1] == '[';
    char seg[OM_CONF_MAX_SEGMENTS][OM_CONF_NAME_MAX];
    unsigned n = 0;
    size_t used = 0;

    s += array ? 2 : 1;
    for (;;) {
        s = skip_ws(s);
        if (n == OM_CONF_MAX_SEGMENTS)
            return bad(p, "a table name of more than %u parts", OM_CONF_MAX_SEGMENTS);
        if (parse_key(p, &s, seg[n], sizeof(seg[n])) < 0)
            return -EINVAL;
        n++;
        s = skip_ws(s);
        if (*s == '.') {
            s++;
            continue;
        }
        break;
    }
    if (*s++ != ']' || (array && *s++ != ']'))
        return bad(p, "a table header without its closing %s", array ? "]]" : "]");
    if (end_of_line(p, s) < 0)
        return -EINVAL;
    p->table_name[0] = '\0';
    for (unsigned i = 0; i < n; i++)
        used += (size_t)snprintf(p->table_name + used, sizeof(p->table_name) - used, "%s%s",
                                 i ? "." : "", seg[i]);
    p->nkeys = 0;
    p->srv = NULL;
    p->ns = NULL;
    p->dev = NULL;
    p->part = NULL;

    bool is_servers = n >= 2 && !strcmp(seg[0], "servers");
    if (!array) {
        if (define_table(p, p->table_name) < 0)
            return -EINVAL;
        if (n == 1 && !strcmp(seg[0], "compute_policy")) {
            p->t = T_COMPUTE_POLICY;
            return 0;
        }
        if (n == 1 && !strcmp(seg[0], "openmps")) {
            p->t = T_OPENMPS;
            return 0;
        }
        if (n == 2 && !strcmp(seg[0], "features") && !strcmp(seg[1], "memacct")) {
            p->t = T_MEMACCT;
            return 0;
        }
        if (n == 2 && !strcmp(seg[0], "features") && !strcmp(seg[1], "context-share")) {
            p->t = T_CONTEXT_SHARE;
            return 0;
        }
        if (is_servers && n == 2) {
            p->srv = server_named(p, seg[1]);
            if (!p->srv)
                return -EINVAL;
            p->srv->defined = true;
            p->srv->line = p->line;
            p->t = T_SERVER;
            return 0;
        }
        if (is_servers && n == 4 && !strcmp(seg[2], "namespaces")) {
            p->srv = server_named(p, seg[1]);
            if (!p->srv || !(p->ns = ns_named(p, p->srv, seg[3])))
                return -EINVAL;
            p->ns->line = p->line;
            p->t = T_NS;
            return 0;
        }
        return bad(p, "unknown table [%s]", p->table_name);
    }
    if (is_servers && n == 3 && !strcmp(seg[2], "devices")) {
        p->srv = server_named(p, seg[1]);
        if (!p->srv || !(p->dev = new_device(p, p->srv->devices, &p->srv->ndevices, p->srv->name)))
            return -EINVAL;
        p->t = T_DEVICE;
        return 0;
    }
    if (is_servers && n == 4 && !strcmp(seg[2], "devices") && !strcmp(seg[3], "sm_partitions")) {
        p->srv = server_named(p, seg[1]);
        if (!p->srv)
            return -EINVAL;
        if (!p->srv->ndevices)
            return bad(p, "[[%s]] before any [[servers.%s.devices]]", p->table_name, seg[1]);
        p->dev = &p->srv->devices[p->srv->ndevices - 1];
        if (p->dev->npartitions == OM_CONF_MAX_PARTITIONS)
            return bad(p, "more than %u SM partitions on one device", OM_CONF_MAX_PARTITIONS);
        p->part = &p->dev->parts[p->dev->npartitions++];
        p->part->line = p->line;
        p->t = T_PARTITION;
        return 0;
    }
    if (is_servers && n == 5 && !strcmp(seg[2], "namespaces") && !strcmp(seg[4], "devices")) {
        p->srv = server_named(p, seg[1]);
        if (!p->srv || !(p->ns = ns_named(p, p->srv, seg[3])) ||
            !(p->dev = new_device(p, p->ns->devices, &p->ns->ndevices, p->ns->name)))
            return -EINVAL;
        p->t = T_NS_DEVICE;
        return 0;
    }
    return bad(p, "unknown array of tables [[%s]]", p->table_name);
}

static int want_type(struct parser *p, const char *key, const struct value *v, enum vtype t)
{
    static const char *const names[] = {"a string", "an integer", "a number", "true or false"};
    if (v->type == t || (t == V_DECIMAL && v->type == V_INT))
        return 0;
    return bad(p, "%s must be %s", key, names[t]);
}

/* A number given as a string ("50", as NVIDIA writes them) or bare (50). */
static int numeric_text(struct parser *p, const char *key, const struct value *v)
{
    if (v->type == V_BOOL)
        return bad(p, "%s must be a number or a quoted number", key);
    return 0;
}

static int limit_key(struct parser *p, struct om_conf_limits *l, const char *key,
                     const struct value *v)
{
    if (!strcmp(key, "pinned_memory_limit")) {
        uint64_t bytes;
        struct om_limits tmp = {0};
        if (numeric_text(p, key, v) < 0)
            return -EINVAL;
        if (om_parse_size(v->text, &bytes) < 0 &&
            (!strchr(v->text, '=') || om_parse_mem_limit_list(v->text, &tmp) != 0))
            return bad(p,
                       "pinned_memory_limit \"%.64s\": give a size (10G, 512M) or "
                       "ordinal=size pairs (0=1G,1=512M)",
                       v->text);
        snprintf(l->mem, sizeof(l->mem), "%s", v->text);
        l->has_mem = true;
        l->line_mem = p->line;
        return 1;
    }
    if (!strcmp(key, "active_thread_percentage")) {
        if (numeric_text(p, key, v) < 0)
            return -EINVAL;
        if (om_parse_percentage(v->text, &l->atp_milli) < 0)
            return bad(p, "active_thread_percentage \"%.32s\" is not in (0, 100]", v->text);
        l->has_atp = true;
        l->line_atp = p->line;
        return 1;
    }
    if (!strcmp(key, "client_priority")) {
        if (numeric_text(p, key, v) < 0)
            return -EINVAL;
        if (strcmp(v->text, "0") != 0 && strcmp(v->text, "1") != 0)
            return bad(p, "client_priority must be 0 or 1");
        l->priority = (uint32_t)(v->text[0] - '0');
        l->has_priority = true;
        l->line_priority = p->line;
        return 1;
    }
    return 0;
}

static int uint_key(struct parser *p, const char *key, const struct value *v, uint32_t max,
                    uint32_t *ret)
{
    if (want_type(p, key, v, V_INT) < 0)
        return -EINVAL;
    if (v->i < 0 || v->i > (int64_t)max)
        return bad(p, "%s must be between 0 and %u", key, max);
    *ret = (uint32_t)v->i;
    return 0;
}

static int text_key(struct parser *p, const char *key, const struct value *v, char *out, size_t cap)
{
    if (want_type(p, key, v, V_STRING) < 0)
        return -EINVAL;
    if (strlen(v->text) >= cap)
        return bad(p, "%s is longer than %zu bytes", key, cap - 1);
    snprintf(out, cap, "%s", v->text);
    return 0;
}

static int setting_key(struct parser *p, const char *key, const struct value *v)
{
    struct om_conf *c = p->c;
    char name[OM_CONF_NAME_MAX];
    size_t k = strlen(key);

    if (k + 8 >= sizeof(name))
        return bad(p, "unknown key \"%.64s\" in [openmps]", key);
    memcpy(name, "OPENMPS_", 8);
    for (size_t i = 0; i <= k; i++)
        name[8 + i] = (key[i] >= 'a' && key[i] <= 'z') ? (char)(key[i] - 32) : key[i];
    for (int i = 0; shim_settings[i]; i++)
        if (!strcmp(name, shim_settings[i]))
            return bad(p,
                       "%s is read by each program (the shim), not the daemon: set it in "
                       "the programs' environment",
                       name);
    if (!strcmp(name, "OPENMPS_SERVER_SHARED_USERS")) /* listed for the check, never taken */
        return bad(p,
                   "%s is the daemon's word to a multi-user server alone: list the users in "
                   "multiuser_uids",
                   name);
    bool known = false;
    for (int i = 0; om_conf_setting_names[i]; i++)
        known |= !strcmp(name, om_conf_setting_names[i]);
    if (!known || strcmp(key, name + 8) == 0 /* capitals: the key is the name in lower case */)
        return bad(p,
                   "unknown key \"%.64s\" in [openmps] (keys are the OPENMPS_* settings in "
                   "lower case, without OPENMPS_)",
                   key);
    if (c->nsettings == OM_CONF_MAX_SETTINGS)
        return bad(p, "more than %u settings", OM_CONF_MAX_SETTINGS);
    struct om_conf_setting *s = &c->settings[c->nsettings++];
    snprintf(s->name, sizeof(s->name), "%s", name);
    if (v->type == V_BOOL)
        snprintf(s->value, sizeof(s->value), "%d", v->b);
    else
        snprintf(s->value, sizeof(s->value), "%s", v->text);
    s->line = p->line;
    return 0;
}

/* One key = value in the current table. */
static int apply_key(struct parser *p, const char *key, const struct value *v)
{
    struct om_conf *c = p->c;
    int rc;

    switch (p->t) {
    case T_ROOT:
        if (!strcmp(key, "schema_version")) {
            if (want_type(p, key, v, V_STRING) < 0)
                return -EINVAL;
            if (strcmp(v->text, "1.0") != 0)
                return bad(p, "schema_version \"%.16s\" is not supported (only \"1.0\")", v->text);
            c->has_schema = true;
            return 0;
        }
        break;
    case T_COMPUTE_POLICY:
        if (!strcmp(key, "timeslice") || !strcmp(key, "timeslice_yield_level")) {
            c->has_compute_policy = true;
            c->line_compute_policy = p->line;
            return 0;
        }
        break;
    case T_SERVER: {
        struct om_conf_server *s = p->srv;
        if ((rc = limit_key(p, &s->lim, key, v)) != 0)
            return rc < 0 ? rc : 0;
        if (!strcmp(key, "uid")) {
            s->has_uid = true;
            s->line_uid = p->line;
            return uint_key(p, key, v, 0xfffffffeu, &s->uid);
        }
        if (!strcmp(key, "allowed_devices")) {
            s->line_allowed = p->line;
            return text_key(p, key, v, s->allowed_devices, sizeof(s->allowed_devices));
        }
        if (!strcmp(key, "locality_domains")) {
            if (want_type(p, key, v, V_BOOL) < 0)
                return -EINVAL;
            s->locality_domains = v->b;
            s->line_locality = p->line;
            return 0;
        }
        if (!strcmp(key, "timeslice_pct")) {
            if (numeric_text(p, key, v) < 0)
                return -EINVAL;
            s->has_timeslice_pct = true;
            s->line_timeslice = p->line;
            return 0;
        }
        break;
    }
    case T_NS: {
        struct om_conf_ns *n = p->ns;
        if ((rc = limit_key(p, &n->lim, key, v)) != 0)
            return rc < 0 ? rc : 0;
        if (!strcmp(key, "cgroup")) {
            if (text_key(p, key, v, n->cgroup, sizeof(n->cgroup)) < 0)
                return -EINVAL;
            if (n->cgroup[0] != '/')
                return bad(p, "cgroup must be an absolute path");
            return 0;
        }
        if (!strcmp(key, "cgroup_depth"))
            return uint_key(p, key, v, 64, &n->cgroup_depth);
        break;
    }
    case T_NS_DEVICE:
        if (!strcmp(key, "uuid"))
            return text_key(p, key, v, p->dev->uuid, sizeof(p->dev->uuid));
        if (!strcmp(key, "sm_partition")) {
            if (text_key(p, key, v, p->dev->sm_partition, sizeof(p->dev->sm_partition)) < 0)
                return -EINVAL;
            return check_name(p, "partition", p->dev->sm_partition);
        }
        break;
    case T_DEVICE:
        if (!strcmp(key, "uuid"))
            return text_key(p, key, v, p->dev->uuid, sizeof(p->dev->uuid));
        break;
    case T_PARTITION:
        if (!strcmp(key, "name")) {
            if (text_key(p, key, v, p->part->name, sizeof(p->part->name)) < 0)
                return -EINVAL;
            return check_name(p, "partition", p->part->name);
        }
        if (!strcmp(key, "chunks"))
            return uint_key(p, key, v, 1024, &p->part->chunks);
        if (!strcmp(key, "max_chunks"))
            return uint_key(p, key, v, 1024, &p->part->max_chunks);
        if (!strcmp(key, "include_remainder") || !strcmp(key, "shareable")) {
            if (want_type(p, key, v, V_BOOL) < 0)
                return -EINVAL;
            *(key[0] == 'i' ? &p->part->include_remainder : &p->part->shareable) = v->b;
            return 0;
        }
        break;
    case T_MEMACCT:
        if (!strcmp(key, "enabled") || !strcmp(key, "audit_log") || !strcmp(key, "force_polling")) {
            if (want_type(p, key, v, V_BOOL) < 0)
                return -EINVAL;
            if (key[0] == 'e')
                c->memacct = v->b;
            else if (key[0] == 'a')
                c->memacct_audit_log = v->b;
            if (key[0] == 'e' && !v->b && !c->line_feature_off)
                c->line_feature_off = p->line;
            return 0;
        }
        break;
    case T_CONTEXT_SHARE:
        if (!strcmp(key, "enabled")) {
            if (want_type(p, key, v, V_BOOL) < 0)
                return -EINVAL;
            c->context_share = v->b;
            if (!v->b && !c->line_feature_off)
                c->line_feature_off = p->line;
            return 0;
        }
        if (!strcmp(key, "default_socket")) {
            if (want_type(p, key, v, V_STRING) < 0)
                return -EINVAL;
            if (strcmp(v->text, "on") != 0 && strcmp(v->text, "off") != 0)
                return bad(p, "default_socket must be \"on\" or \"off\"");
            if (!strcmp(v->text, "off") && !c->line_feature_off)
                c->line_feature_off = p->line;
            return 0;
        }
        break;
    case T_OPENMPS: return setting_key(p, key, v);
    }
    if (p->t == T_ROOT)
        return bad(p, "unknown key \"%.64s\" at the top of the file", key);
    return bad(p, "unknown key \"%.64s\" in [%s]", key, p->table_name);
}

static int parse_line(struct parser *p, const char *s)
{
    char key[OM_CONF_NAME_MAX];
    struct value v;

    s = skip_ws(s);
    if (!*s || *s == '#')
        return end_of_line(p, s);
    if (*s == '[')
        return parse_header(p, s);
    if (parse_key(p, &s, key, sizeof(key)) < 0)
        return -EINVAL;
    s = skip_ws(s);
    if (*s == '.')
        return bad(p, "dotted keys are not supported: write a [table] header");
    if (*s++ != '=')
        return bad(p, "\"=\" expected after the key \"%.64s\"", key);
    for (unsigned i = 0; i < p->nkeys; i++)
        if (!strcmp(p->keys[i], key))
            return bad(p, "key \"%.64s\" is given twice", key);
    if (p->nkeys == MAX_KEYS_PER_TABLE)
        return bad(p, "more than %u keys in one table", MAX_KEYS_PER_TABLE);
    snprintf(p->keys[p->nkeys++], sizeof(p->keys[0]), "%s", key);
    if (parse_value(p, skip_ws(s), &v) < 0)
        return -EINVAL;
    return apply_key(p, key, &v);
}

/* What a whole file must hold, once every line was read. */
static int check_whole(struct parser *p)
{
    struct om_conf *c = p->c;

    if (!c->has_schema) {
        p->line = 1;
        return bad(p, "schema_version = \"1.0\" is missing");
    }
    for (uint32_t i = 0; i < c->nservers; i++) {
        const struct om_conf_server *s = &c->servers[i];
        for (uint32_t d = 0; d < s->ndevices; d++) {
            p->line = s->devices[d].line;
            if (!s->devices[d].uuid[0])
                return bad(p, "a device of server %s without its uuid", s->name);
            for (uint32_t j = 0; j < s->devices[d].npartitions; j++) {
                const struct om_conf_partition *a = &s->devices[d].parts[j];
                p->line = a->line;
                if (!a->name[0])
                    return bad(p, "an SM partition without its name");
                for (uint32_t k = 0; k < j; k++)
                    if (!strcmp(s->devices[d].parts[k].name, a->name))
                        return bad(p, "SM partition %s is defined twice on one device", a->name);
            }
        }
        for (uint32_t n = 0; n < s->nns; n++)
            for (uint32_t d = 0; d < s->ns[n].ndevices; d++) {
                p->line = s->ns[n].devices[d].line;
                if (!s->ns[n].devices[d].uuid[0])
                    return bad(p, "a device of namespace %s without its uuid", s->ns[n].name);
                if (!s->ns[n].devices[d].sm_partition[0])
                    return bad(p, "a device of namespace %s without its sm_partition",
                               s->ns[n].name);
            }
    }
    return 0;
}

int om_conf_parse(const char *text, size_t len, struct om_conf *ret, char *err, size_t errlen)
{
    struct parser p = {.c = ret, .err = err, .errlen = errlen, .t = T_ROOT};
    char line[OM_CONF_LINE_MAX + 1];
    size_t at = 0;
    int rc = 0;

    memset(ret, 0, sizeof(*ret));
    if (errlen)
        err[0] = '\0';
    p.tables = calloc(MAX_TABLES, sizeof(*p.tables));
    if (!p.tables) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if (len > OM_CONF_MAX_BYTES) {
        p.line = 1;
        rc = bad(&p, "the file is longer than %u bytes", OM_CONF_MAX_BYTES);
        goto out;
    }
    while (at < len) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
        p.line++;
        if (n && text[at + n - 1] == '\r')
            n--;
        if (n > OM_CONF_LINE_MAX) {
            rc = bad(&p, "longer than %u bytes", OM_CONF_LINE_MAX);
            goto out;
        }
        if (memchr(text + at, '\0', n)) {
            rc = bad(&p, "a NUL byte");
            goto out;
        }
        memcpy(line, text + at, n);
        line[n] = '\0';
        if ((rc = parse_line(&p, line)) < 0)
            goto out;
        at = nl ? (size_t)(nl - text) + 1 : len;
    }
    rc = check_whole(&p);
out:
    free(p.tables);
    if (rc < 0)
        memset(ret, 0, sizeof(*ret));
    return rc;
}

int om_conf_load(const char *path, struct om_conf **ret, char *err, size_t errlen)
{
    char *text = NULL, msg[448];
    size_t len = 0;
    struct om_conf *c = NULL;
    int fd, rc;

    *ret = NULL;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot read the configuration file %s: %s", path, strerror(-rc));
        return rc;
    }
    text = malloc(OM_CONF_MAX_BYTES + 1);
    c = calloc(1, sizeof(*c));
    if (!text || !c) {
        rc = -ENOMEM;
        snprintf(err, errlen, "%s: out of memory", path);
        goto out;
    }
    for (;;) {
        ssize_t n = read(fd, text + len, OM_CONF_MAX_BYTES + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            snprintf(err, errlen, "cannot read the configuration file %s: %s", path, strerror(-rc));
            goto out;
        }
        if (n == 0 || (len += (size_t)n) > OM_CONF_MAX_BYTES)
            break;
    }
    rc = om_conf_parse(text, len, c, msg, sizeof(msg));
    if (rc < 0) {
        snprintf(err, errlen, "%s: %s", path, msg);
        goto out;
    }
    *ret = c;
    c = NULL;
out:
    close(fd);
    free(text);
    free(c);
    return rc;
}
