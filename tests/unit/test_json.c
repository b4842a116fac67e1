/* SPDX-License-Identifier: MIT */
/* openmps top's JSON reader (src/cli/json.c) and its reading of the stats document
 * (src/cli/topstats.c): what it accepts, what it refuses and why, its bounds, the GPU% it
 * derives. */
#include <stdlib.h>
#include <string.h>

#include "../../src/cli/json.h"
#include "../../src/cli/topstats.h"
#include "test.h"

static int parse(const char *text, char *err, size_t cap)
{
    struct om_json j;
    int rc = om_json_parse(&j, text, strlen(text), err, cap);
    om_json_free(&j);
    return rc;
}

TEST(json_reader)
{
    struct om_json j;
    char err[200];

    static const char doc[] = "{\"a\": [1, -2.5e3, \"x\\\"\\u0041\", true, null], \"b\": {}}";
    CHECK_EQ(om_json_parse(&j, doc, strlen(doc), err, sizeof(err)), 0);
    const struct om_json_value *a = om_json_get(&j, om_json_root(&j), "a"), *v;
    CHECK(a && a->type == OM_JSON_ARRAY);
    v = om_json_first(&j, a);
    CHECK(v->is_uint && v->u == 1);
    v = om_json_next(&j, v);
    CHECK(!v->is_uint && v->num == -2500.0);
    v = om_json_next(&j, v);
    CHECK(!strcmp(om_json_str(&j, v), "x\"A"));
    CHECK(om_json_next(&j, om_json_next(&j, v))->type == OM_JSON_NULL);
    CHECK(om_json_get(&j, om_json_root(&j), "b")->type == OM_JSON_OBJECT);
    CHECK(!om_json_get(&j, om_json_root(&j), "c"));
    om_json_free(&j);
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"", "at byte 0: a value expected, the text ended"},
        {"{\"a\": 01}", "at byte 7: a number with a leading zero"},
        {"{\"a\": 1, \"a\": 2}", "the key \"a\" twice in one object"},
        {"[1,]", "at byte 3: a value expected"},
        {"[1] x", "at byte 4: text after the document"},
        {"\"\\u00e9\"", "\\u00e9: only U+0001..U+007F are read"},
        {"\"\\u0000\"", "\\u0000: only U+0001..U+007F are read"},
        {"\"a\tb\"", "byte 0x09 in a string (printable ASCII only)"},
        {"\"\\x\"", "bad escape \\x"},
        {"[1.]", "no digits after a decimal point"},
        {"{\"a\" 1}", "':' expected after a key"},
        {"[[[[[[[[[1]]]]]]]]]", "nested deeper than 8"},
        {"tru", "a value expected"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        CHECK_EQ(parse(bad[i].text, err, sizeof(err)), -1);
        if (!strstr(err, bad[i].why)) {
            fprintf(stderr, "%s: said \"%s\", expected \"%s\"\n", bad[i].text, err, bad[i].why);
            exit(1);
        }
    }
    CHECK_EQ(parse("[[[[[[[[1]]]]]]]]", err, sizeof(err)),
             0); /* 8 levels: the daemon's 4, and room */
    /* a string of the bound, and one byte more */
    char *big = malloc(OM_JSON_MAX_STRING + 4);
    memset(big, 'x', OM_JSON_MAX_STRING + 3);
    big[0] = '"';
    big[OM_JSON_MAX_STRING + 1] = '"';
    big[OM_JSON_MAX_STRING + 2] = '\0';
    CHECK_EQ(parse(big, err, sizeof(err)), 0);
    big[OM_JSON_MAX_STRING + 1] = 'x';
    big[OM_JSON_MAX_STRING + 2] = '"';
    big[OM_JSON_MAX_STRING + 3] = '\0';
    CHECK_EQ(parse(big, err, sizeof(err)), -1);
    CHECK(strstr(err, "a string longer than 4096 bytes"));
    free(big);
}

#define USAGE(k, g, m)                                                                             \
    "\"kernels\": " #k ", \"graphs\": 0, \"gpu_time_ns\": " #g ", \"htod_bytes\": 0, "             \
    "\"dtoh_bytes\": 0, \"dtod_bytes\": 0, \"device_memory_bytes\": " #m

#define CLIENT(pid, g)                                                                             \
    "{\"pid\": " #pid ", \"client_id\": 1, \"server_pid\": 9, \"uid\": 0, \"command\": \"a\", "    \
    "\"cgroup\": \"/\", \"namespace\": 1, \"state\": \"idle\", \"active_thread_percentage\": "     \
    "100.0, \"priority\": 0, \"calls\": 1, \"calls_per_s\": 0.5, \"kernels_per_s\": 0.000, "       \
    "\"serve_time_ns\": 1, \"gpu_wait_time_ns\": 1, \"connected_ns\": 2000000000, "                \
    "\"pinned_memory_bytes\": 0, " USAGE(1, g, 4) ", \"devices\": [{\"ordinal\": 0, " USAGE(       \
        1, g, 4) ", \"memory_limit_bytes\": null}]}"

#define DOC(c)                                                                                     \
    "{\"version\": 1, \"time\": 5.5, \"servers\": [{\"pid\": 9, \"uid\": 0, \"status\": "          \
    "\"ACTIVE\", \"answered\": true}], \"devices\": [{\"server_pid\": 9, \"ordinal\": 0, "         \
    "\"uuid\": \"GPU-1\", \"name\": \"n\", \"pci_bus_id\": \"p\", \"clients\": 1, " USAGE(         \
        1, 1000000000, 4) "}], \"clients\": [" c "]}"

TEST(top_reads_stats)
{
    static struct om_top_snapshot a, b;
    char err[200];
    static const char first[] = DOC(CLIENT(7, 1000000000)), second[] = DOC(CLIENT(7, 1500000000)),
                      nothing[] = DOC("");

    CHECK_EQ(om_top_read(&a, first, strlen(first), err, sizeof(err)), 0);
    CHECK(a.nservers == 1 && a.ndevices == 1 && a.nclients == 1 && a.ncdev == 1);
    CHECK(a.clients[0].pid == 7 && !strcmp(a.clients[0].state, "idle"));
    CHECK(a.servers[0].answered && !strcmp(a.servers[0].status, "ACTIVE"));
    om_top_rates(&a, NULL, 0); /* first: 1 s of GPU time in 2 s connected */
    CHECK(a.clients[0].gpu_pct > 49.9 && a.clients[0].gpu_pct < 50.1);
    CHECK(a.devices[0].gpu_pct > 49.9 && a.devices[0].gpu_pct < 50.1);
    CHECK_EQ(om_top_read(&b, second, strlen(second), err, sizeof(err)), 0);
    om_top_rates(&b, &a, 1.0); /* 0.5 s more in 1 s */
    CHECK(b.clients[0].gpu_pct > 49.9 && b.clients[0].gpu_pct < 50.1);
    CHECK_EQ(om_top_read(&b, nothing, strlen(nothing), err, sizeof(err)), 0);
    CHECK_EQ(b.nclients, 0);
    /* a field missing or of the wrong type is named */
    static const struct {
        const char *from, *to, *why;
    } bad[] = {
        {"\"version\": 1", "\"version\": 2", "version is not 1"},
        {"\"calls\": 1", "\"calls\": -1", "client 0: \"calls\" is not a non-negative integer"},
        {"\"command\": \"a\"", "\"command\": 1", "client 0: \"command\" has the wrong type"},
        {"\"answered\": true", "\"answered\": 1", "server 0: \"answered\" is not true or false"},
        {"\"clients\": 1", "\"clientz\": 1", "device 0: \"clients\" is missing"},
        {"\"pid\": 7", "\"pid\": 4294967296", "client 0: \"pid\" is out of range"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char doc[sizeof(first) + 16];
        const char *at = strstr(first, bad[i].from);
        CHECK(at);
        snprintf(doc, sizeof(doc), "%.*s%s%s", (int)(at - first), first, bad[i].to,
                 at + strlen(bad[i].from));
        err[0] = '\0';
        CHECK_EQ(om_top_read(&b, doc, strlen(doc), err, sizeof(err)), -1);
        CHECK_EQ(b.nclients + b.nservers + b.ndevices, 0);
        if (!strstr(err, bad[i].why)) {
            fprintf(stderr, "%s: said \"%s\", expected \"%s\"\n", bad[i].to, err, bad[i].why);
            exit(1);
        }
    }
}
