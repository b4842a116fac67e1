/* SPDX-License-Identifier: MIT */
/* Fuzz target: openmps top's JSON reader (src/cli/json.c) and its reading of the daemon's
 * stats document (src/cli/topstats.c), then the rates top derives from two readings. A refusal
 * names the problem; an accepted document's tree is whole (every child within the values). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/cli/json.h"
#include "../../src/cli/topstats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned walk(const struct om_json *j, const struct om_json_value *v, unsigned depth)
{
    unsigned n = 1;

    if (depth > OM_JSON_MAX_DEPTH + 1 || v < j->v || v >= j->v + j->n)
        abort();
    if (v->type == OM_JSON_STRING && strlen(om_json_str(j, v)) > OM_JSON_MAX_STRING)
        abort();
    for (const struct om_json_value *c = om_json_first(j, v); c; c = om_json_next(j, c))
        n += walk(j, c, depth + 1);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct om_top_snapshot a, b;
    struct om_json j;
    char err[256];

    if (om_json_parse(&j, (const char *)data, size, err, sizeof(err)) < 0) {
        if (!err[0] || j.n || j.v)
            abort(); /* a refusal says why and leaves nothing */
    } else {
        const struct om_json_value *root = om_json_root(&j);
        if (!root || walk(&j, root, 0) != j.n)
            abort(); /* every value is reached once from the root */
        om_json_free(&j);
    }
    err[0] = '\0';
    if (om_top_read(&a, (const char *)data, size, err, sizeof(err)) < 0) {
        if (!err[0] || a.nclients || a.ndevices || a.nservers)
            abort();
        return 0;
    }
    if (a.nclients > OM_TOP_MAX_CLIENTS || a.ncdev > OM_TOP_MAX_CLIENT_DEVICES)
        abort();
    om_top_rates(&a, NULL, 0);
    b = a;
    om_top_rates(&b, &a, 1.0);
    return 0;
}
