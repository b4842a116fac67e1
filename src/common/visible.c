/* SPDX-License-Identifier: MIT */
/* A client's CUDA_VISIBLE_DEVICES, read against its server's devices as the driver reads it. */
#include "visible.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "driver.h"

/* The device an entry names: an ordinal, or "GPU-" and the start of one UUID (any case, as
 * nvidia-smi prints it or shortened while it stays unique). -1: none, or more than one. */
static int entry_device(const char *e, size_t len, const struct om_device_info *devs,
                        uint32_t ndevs)
{
    int found = -1;

    while (len && isspace((unsigned char)*e)) { /* the driver takes "1, 0" and " 1" */
        e++;
        len--;
    }
    while (len && isspace((unsigned char)e[len - 1]))
        len--;
    if (len == 0)
        return -1;
    if (isdigit((unsigned char)e[0])) {
        unsigned long v = 0;
        for (size_t i = 0; i < len; i++) {
            if (!isdigit((unsigned char)e[i]) || v > OM_MAX_DEVICES)
                return -1;
            v = v * 10 + (unsigned long)(e[i] - '0');
        }
        return v < ndevs ? (int)v : -1;
    }
    if (len <= 4 || strncasecmp(e, "GPU-", 4) != 0)
        return -1; /* a negative index, MIG-, anything else: the list ends */
    for (uint32_t d = 0; d < ndevs; d++) {
        char uuid[64];
        om_format_uuid(devs[d].uuid, uuid, sizeof(uuid));
        if (len <= strlen(uuid) && strncasecmp(uuid, e, len) == 0) {
            if (found >= 0)
                return -1; /* ambiguous */
            found = (int)d;
        }
    }
    return found;
}

int om_visible_resolve(const char *spec, const struct om_device_info *devs, uint32_t ndevs,
                       struct om_devmap *ret)
{
    struct om_devmap m = {0};
    bool taken[OM_MAX_DEVICES] = {false};
    const char *p = spec;
    bool by_uuid = false;

    if (ndevs > OM_MAX_DEVICES)
        ndevs = OM_MAX_DEVICES;
    while (*p) { /* past ndevs entries, one more can only name a device again */
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        int d = entry_device(p, len, devs, ndevs);
        bool uuid = d >= 0 && !isdigit((unsigned char)p[strspn(p, " \t")]);
        /* An ordinal after a UUID ends the list: the driver (580, two H200s) under
         * "GPU-<prefix of the second>,0" sees one device, not two. */
        if (d < 0 || (by_uuid && !uuid))
            break; /* the devices before an entry that names none are visible */
        by_uuid |= uuid;
        if (taken[d]) {
            *ret = (struct om_devmap){0};
            return -1; /* a device named twice: the driver takes none (measured) */
        }
        taken[d] = true;
        m.server[m.count++] = (uint8_t)d;
        if (!end)
            break;
        p = end + 1;
    }
    *ret = m;
    return (int)m.count;
}

void om_visible_all(uint32_t ndevs, struct om_devmap *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->count = ndevs < OM_MAX_DEVICES ? ndevs : OM_MAX_DEVICES;
    for (uint32_t i = 0; i < ret->count; i++)
        ret->server[i] = (uint8_t)i;
}

struct om_limits om_visible_limits(const struct om_limits *want, const struct om_devmap *m)
{
    struct om_limits l = *want;

    memset(l.mem_limit, 0, sizeof(l.mem_limit));
    l.ndevices = 0;
    for (uint32_t i = 0; i < want->ndevices && i < m->count; i++) {
        uint32_t d = m->server[i];
        l.mem_limit[d] = want->mem_limit[i];
        if (want->mem_limit[i] && d + 1 > l.ndevices)
            l.ndevices = d + 1;
    }
    return l;
}

int om_decode_devmap(const struct om_devmap *in, uint32_t ndevs, struct om_devmap *ret)
{
    struct om_devmap m;
    bool taken[OM_MAX_DEVICES] = {false};

    memcpy(&m, in, sizeof(m));
    if (m.count > OM_MAX_DEVICES || m.count > ndevs || m.reserved)
        return -1;
    for (uint32_t i = 0; i < m.count; i++) {
        if (m.server[i] >= ndevs || taken[m.server[i]])
            return -1;
        taken[m.server[i]] = true;
    }
    *ret = m;
    return 0;
}

int om_visible_mem_limits(const char *spec, const struct om_device_info *devs, uint32_t ndevs,
                          struct om_limits *l, char *bad, size_t badlen)
{
    char buf[OM_VISIBLE_MAX];
    char *save = NULL;
    int unknown = 0;

    if (strlen(spec) >= sizeof(buf))
        return 0;
    strcpy(buf, spec);
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        uint64_t bytes;
        int d;
        if (!eq || strncasecmp(tok, "GPU-", 4) != 0 || om_parse_size(eq + 1, &bytes) < 0)
            continue; /* an ordinal's entry (the client's), or not one of ours to read */
        *eq = '\0';
        if ((d = entry_device(tok, strlen(tok), devs, ndevs)) < 0) {
            if (!unknown++ && bad)
                snprintf(bad, badlen, "%s", tok);
            continue;
        }
        if (!l->mem_limit[d] || bytes < l->mem_limit[d]) /* the tighter of two for one device */
            l->mem_limit[d] = bytes;
        if ((uint32_t)d + 1 > l->ndevices)
            l->ndevices = (uint32_t)d + 1;
    }
    return unknown;
}
