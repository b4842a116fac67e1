/* SPDX-License-Identifier: MIT */
/* The MPS v3 configuration file (-a FILE): a strict parser of the TOML subset it is written in. */
#ifndef OM_CONTROL_CONFFILE_H
#define OM_CONTROL_CONFFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Every length and count the file may use, so that what a file makes the daemon hold is bounded
 * (docs/operations.md, "The configuration file"). */
#define OM_CONF_MAX_BYTES (256u * 1024u) /* the whole file */
#define OM_CONF_LINE_MAX 1024u           /* one line, without its newline */
#define OM_CONF_NAME_MAX 64u             /* a server, namespace or partition name, with its NUL */
#define OM_CONF_TEXT_MAX 256u            /* a string value, with its NUL */
#define OM_CONF_MAX_SERVERS 16u
#define OM_CONF_MAX_NAMESPACES 16u /* per server, besides its default namespace */
#define OM_CONF_MAX_DEVICES 16u    /* [[servers.S.devices]] per server; devices per namespace */
#define OM_CONF_MAX_PARTITIONS 16u /* sm_partitions per device */
#define OM_CONF_MAX_SETTINGS 64u   /* keys of [openmps] */
#define OM_CONF_MAX_SEGMENTS 6u    /* parts of one table name */

/* The limits a server or namespace table sets; has_* says which. Texts as written (validated). */
struct om_conf_limits {
    bool has_mem, has_atp, has_priority;
    char mem[OM_CONF_TEXT_MAX]; /* "10G" (every device) or "0=1G,1=512M" */
    uint32_t atp_milli;         /* active_thread_percentage, in thousandths */
    uint32_t priority;          /* 0 or 1 */
    int line_mem, line_atp, line_priority;
};

struct om_conf_partition {
    char name[OM_CONF_NAME_MAX];
    uint32_t chunks, max_chunks;
    bool include_remainder, shareable;
    int line;
};

struct om_conf_device {
    char uuid[OM_CONF_NAME_MAX];
    char sm_partition[OM_CONF_NAME_MAX]; /* a namespace's device: the partition it uses */
    uint32_t npartitions;
    struct om_conf_partition parts[OM_CONF_MAX_PARTITIONS];
    int line;
};

struct om_conf_ns {
    char name[OM_CONF_NAME_MAX];
    struct om_conf_limits lim;
    char cgroup[OM_CONF_TEXT_MAX]; /* empty: none */
    uint32_t cgroup_depth;
    uint32_t ndevices;
    struct om_conf_device devices[OM_CONF_MAX_DEVICES];
    int line;
};

struct om_conf_server {
    char name[OM_CONF_NAME_MAX];
    bool defined; /* its own [servers.S] header was seen (a sub-table alone makes it too) */
    struct om_conf_limits lim;
    bool has_uid;
    uint32_t uid;
    char allowed_devices[OM_CONF_TEXT_MAX]; /* empty: all */
    bool locality_domains;
    bool has_timeslice_pct;
    int line, line_uid, line_locality, line_timeslice, line_allowed;
    uint32_t nns;
    struct om_conf_ns ns[OM_CONF_MAX_NAMESPACES];
    uint32_t ndevices;
    struct om_conf_device devices[OM_CONF_MAX_DEVICES];
};

struct om_conf_setting {
    char name[OM_CONF_NAME_MAX]; /* the variable: OPENMPS_ and the key in capitals */
    char value[OM_CONF_TEXT_MAX];
    int line;
};

struct om_conf {
    bool has_schema;
    bool has_compute_policy; /* [compute_policy] set something: openmps cannot apply it */
    int line_compute_policy;
    bool memacct, memacct_audit_log, context_share; /* [features.*] as written */
    int line_feature_off; /* a feature turned off (enabled = false, default_socket = "off"),
                           * which openmps cannot do: the first such line, 0 none */
    uint32_t nservers;
    struct om_conf_server servers[OM_CONF_MAX_SERVERS];
    uint32_t nsettings;
    struct om_conf_setting settings[OM_CONF_MAX_SETTINGS];
};

/* Parses text (len bytes, any content) into *ret (zeroed first; large: allocate it). Returns 0,
 * or -EINVAL with a sentence in err that begins "line N: " naming the offending line. */
int om_conf_parse(const char *text, size_t len, struct om_conf *ret, char *err, size_t errlen);

/* Reads path (at most OM_CONF_MAX_BYTES) and parses it; err begins with the path. A new om_conf
 * in *ret (free it) or NULL; -errno or -EINVAL. */
int om_conf_load(const char *path, struct om_conf **ret, char *err, size_t errlen);

/* The OPENMPS_* settings [openmps] may set (their names, NULL-terminated). */
extern const char *const om_conf_setting_names[];

#endif
