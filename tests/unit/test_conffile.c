/* SPDX-License-Identifier: MIT */
/* The configuration file's parser (src/control/conffile.c): what it accepts, and that every
 * refusal names the offending line; and how protocol 3 matches a client's cgroup (v3.c). */
#include <stdlib.h>
#include <unistd.h>

#include "../../src/control/conffile.h"
#include "../../src/control/v3.h"
#include "test.h"

static struct om_conf *conf(void)
{
    static struct om_conf *c;
    if (!c)
        c = calloc(1, sizeof(*c));
    CHECK(c != NULL);
    return c;
}

static int parse(const char *text, char *err, size_t cap)
{
    return om_conf_parse(text, strlen(text), conf(), err, cap);
}

TEST(conffile_accepts_nvidia_format)
{
    static const char text[] = "# comment\n"
                               "schema_version = \"1.0\"\n"
                               "\n"
                               "[compute_policy]\n"
                               "timeslice = \"long\"\n"
                               "[servers.training]\n"
                               "allowed_devices          = \"GPU-abcd-1234,GPU-efgh-5678\"\n"
                               "pinned_memory_limit      = \"10G\"\n"
                               "active_thread_percentage = \"50\"\n"
                               "client_priority          = \"0\"\n"
                               "uid                      = 1000\n"
                               "locality_domains         = false  # trailing comment\n"
                               "[servers.training.namespaces.high_priority]\n"
                               "pinned_memory_limit      = '5G'\n"
                               "active_thread_percentage = 25.5\n"
                               "cgroup = \"/sys/fs/cgroup/training\"\n"
                               "cgroup_depth = 1\n"
                               "[[servers.training.namespaces.high_priority.devices]]\n"
                               "uuid = \"GPU-74d43ed3\"\n"
                               "sm_partition = \"large\"\n"
                               "[[servers.training.devices]]\n"
                               "uuid = \"GPU-74d43ed3-cdf7-e667-3644-bf5b4f46ed65\"\n"
                               "  [[servers.training.devices.sm_partitions]]\n"
                               "  name              = \"large\"\n"
                               "  chunks            = 4\n"
                               "  include_remainder = false\n"
                               "  [[servers.training.devices.sm_partitions]]\n"
                               "  name = \"rest\"\n"
                               "  include_remainder = true\n"
                               "[features.memacct]\n"
                               "enabled   = true\r\n"
                               "audit_log = true\n"
                               "[features.context-share]\n"
                               "enabled        = true\n"
                               "default_socket = \"on\"\n"
                               "[openmps]\n"
                               "log_level = 3\n"
                               "sched = \"off\"\n"
                               "replay = false\n";
    char err[512];
    struct om_conf *c = conf();

    CHECK_EQ(parse(text, err, sizeof(err)), 0);
    CHECK(c->has_schema && c->has_compute_policy && c->memacct && c->context_share);
    CHECK_EQ(c->nservers, 1);
    CHECK_STR(c->servers[0].name, "training");
    CHECK(c->servers[0].has_uid && c->servers[0].uid == 1000);
    CHECK_STR(c->servers[0].lim.mem, "10G");
    CHECK_EQ(c->servers[0].lim.atp_milli, 50000);
    CHECK_EQ(c->servers[0].nns, 1);
    CHECK_EQ(c->servers[0].ns[0].lim.atp_milli, 25500);
    CHECK_STR(c->servers[0].ns[0].cgroup, "/sys/fs/cgroup/training");
    CHECK_STR(c->servers[0].ns[0].devices[0].sm_partition, "large");
    CHECK_EQ(c->servers[0].ndevices, 1);
    CHECK_EQ(c->servers[0].devices[0].npartitions, 2);
    CHECK_EQ(c->servers[0].devices[0].parts[0].chunks, 4);
    CHECK(c->servers[0].devices[0].parts[1].include_remainder);
    CHECK_EQ(c->nsettings, 3);
    CHECK_STR(c->settings[0].name, "OPENMPS_LOG_LEVEL");
    CHECK_STR(c->settings[0].value, "3");
    CHECK_STR(c->settings[2].name, "OPENMPS_REPLAY");
    CHECK_STR(c->settings[2].value, "0");
}

TEST(conffile_refusals_name_the_line)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"[servers.a]\n", "line 1: schema_version = \"1.0\" is missing"},
        {"schema_version = \"2.0\"\n", "line 1: schema_version \"2.0\" is not supported"},
        {"schema_version = \"1.0\"\n[servers.a]\nbogus = 1\n",
         "line 3: unknown key \"bogus\" in [servers.a]"},
        {"schema_version = \"1.0\"\nfoo = 1\n", "line 2: unknown key \"foo\" at the top"},
        {"schema_version = \"1.0\"\n[servers.a.namespaces.b]\nuid = 5\n",
         "line 3: unknown key \"uid\" in [servers.a.namespaces.b]"},
        {"schema_version = \"1.0\"\n[nonsense]\n", "line 2: unknown table [nonsense]"},
        {"schema_version = \"1.0\"\n[servers.a]\n[servers.a]\n", "line 3: table [servers.a] is "
                                                                 "defined twice"},
        {"schema_version = \"1.0\"\n[servers.a]\nuid = 1\nuid = 2\n",
         "line 4: key \"uid\" is given twice"},
        {"schema_version = \"1.0\"\n[servers.a]\nuid = \"x\"\n", "line 3: uid must be an integer"},
        {"schema_version = \"1.0\"\n[servers.a]\nactive_thread_percentage = \"150\"\n",
         "line 3: active_thread_percentage \"150\" is not in (0, 100]"},
        {"schema_version = \"1.0\"\n[servers.a]\npinned_memory_limit = \"lots\"\n",
         "line 3: pinned_memory_limit \"lots\""},
        {"schema_version = \"1.0\"\n[servers.a]\nclient_priority = \"2\"\n",
         "line 3: client_priority must be 0 or 1"},
        {"schema_version = \"1.0\"\n[servers.a]\nlocality_domains = 1\n",
         "line 3: locality_domains must be true or false"},
        {"schema_version = \"1.0\"\n[servers.a b]\n", "line 2: a table header without"},
        {"schema_version = \"1.0\"\n[servers.\"a/b\"]\n", "line 2: the server name \"a/b\""},
        {"schema_version = \"1.0\"\nx = \"open\n", "line 2: a string without its closing"},
        {"schema_version = \"1.0\" junk\n", "line 1: unexpected text after the value"},
        {"schema_version = \"1.0\"\n[servers.a]\nuid = [1, 2]\n", "line 3: arrays are not"},
        {"schema_version = \"1.0\"\n[servers.a]\nuid.x = 1\n", "line 3: dotted keys"},
        {"schema_version = \"1.0\"\n[servers.a]\nuid 1\n", "line 3: \"=\" expected"},
        {"schema_version = \"1.0\"\n[servers.a]\nuid = 007\n", "line 3: \"007\": leading zeros"},
        {"schema_version = \"1.0\"\n[[servers.a.devices.sm_partitions]]\n",
         "line 2: [[servers.a.devices.sm_partitions]] before any"},
        {"schema_version = \"1.0\"\n[[servers.a.devices]]\nchunks = 1\n",
         "line 3: unknown key \"chunks\" in [servers.a.devices]"},
        {"schema_version = \"1.0\"\n[[servers.a.devices]]\n", "line 2: a device of server a "
                                                              "without its uuid"},
        {"schema_version = \"1.0\"\n[[servers.a.namespaces.b.devices]]\nuuid = \"GPU-1\"\n",
         "line 2: a device of namespace b without its sm_partition"},
        {"schema_version = \"1.0\"\n[openmps]\ntrace = 1\n",
         "line 3: OPENMPS_TRACE is read by each program"},
        {"schema_version = \"1.0\"\n[openmps]\nserver_shared_users = \"1,2\"\n",
         "line 3: OPENMPS_SERVER_SHARED_USERS is the daemon's word"},
        {"schema_version = \"1.0\"\n[openmps]\nnot_a_setting = 1\n",
         "line 3: unknown key \"not_a_setting\" in [openmps]"},
        {"schema_version = \"1.0\"\n[openmps]\nLOG_LEVEL = 1\n", "line 3: unknown key"},
        {"schema_version = \"1.0\"\n\x01\n", "line 2: a key was expected"},
    };
    char err[512];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = parse(cases[i].text, err, sizeof(err));
        if (rc != -EINVAL || strncmp(err, cases[i].want, strlen(cases[i].want)) != 0) {
            fprintf(stderr, "case %zu: rc %d, err \"%s\", want \"%s\"\n", i, rc, err,
                    cases[i].want);
            exit(1);
        }
    }
}

TEST(conffile_bounds)
{
    char err[512];
    size_t n = OM_CONF_LINE_MAX + 40;
    char *text = malloc(OM_CONF_MAX_BYTES + 2);

    CHECK(text != NULL);
    /* a line too long */
    snprintf(text, n, "schema_version = \"1.0\"\n# ");
    memset(text + strlen(text), 'x', OM_CONF_LINE_MAX);
    text[strlen("schema_version = \"1.0\"\n# ") + OM_CONF_LINE_MAX] = '\0';
    CHECK_EQ(om_conf_parse(text, strlen(text), conf(), err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "line 2: longer than") == err);
    /* a file too long */
    memset(text, '\n', OM_CONF_MAX_BYTES + 1);
    CHECK_EQ(om_conf_parse(text, OM_CONF_MAX_BYTES + 1, conf(), err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "longer than") != NULL);
    /* a NUL byte */
    CHECK_EQ(om_conf_parse("schema_version = \"1.0\"\n#\0x\n", 27, conf(), err, sizeof(err)),
             -EINVAL);
    CHECK(strstr(err, "line 2: a NUL byte") == err);
    /* too many servers */
    size_t len = (size_t)snprintf(text, OM_CONF_MAX_BYTES, "schema_version = \"1.0\"\n");
    for (unsigned i = 0; i <= OM_CONF_MAX_SERVERS; i++)
        len += (size_t)snprintf(text + len, OM_CONF_MAX_BYTES - len, "[servers.s%u]\n", i);
    CHECK_EQ(om_conf_parse(text, len, conf(), err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "more than 16 servers") != NULL);
    /* too many namespaces */
    len = (size_t)snprintf(text, OM_CONF_MAX_BYTES, "schema_version = \"1.0\"\n");
    for (unsigned i = 0; i <= OM_CONF_MAX_NAMESPACES; i++)
        len += (size_t)snprintf(text + len, OM_CONF_MAX_BYTES - len, "[servers.s.namespaces.n%u]\n",
                                i);
    CHECK_EQ(om_conf_parse(text, len, conf(), err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "more than 16 namespaces") != NULL);
    free(text);
}

TEST(v3_cgroup_match)
{
    static const struct {
        const char *want;
        unsigned depth;
        const char *cgroup;
        bool in;
    } cases[] = {
        {"/sys/fs/cgroup/training", 0, "/training", true},
        {"/training", 0, "/training/job1/step0", true},
        {"/training/", 0, "/training/job1", true},
        {"/training", 0, "/trainingX", false},
        {"/training", 0, "/other/training", false},
        {"/training", 1, "/training/job1", true},
        {"/training", 1, "/training/job1/step0", false},
        {"/training", 1, "/training", true},
        {"/sys/fs/cgroup", 0, "/anything", true},
        {"/", 1, "/", true},
        {"/", 1, "/a", true},
        {"/", 1, "/a/b", false},
        {"", 0, "/a", false},
        {"/a", 0, "", false},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (om_v3_in_cgroup(cases[i].want, cases[i].depth, cases[i].cgroup) != cases[i].in) {
            fprintf(stderr, "case %zu: %s (depth %u) holds %s: want %d\n", i, cases[i].want,
                    cases[i].depth, cases[i].cgroup, cases[i].in);
            exit(1);
        }
    }
}

/* The v2 line of a /proc/PID/cgroup file, found however far down it is: on a hybrid host it
 * comes after a line per v1 hierarchy, each holding the pod's or job's path (here 1.7 KiB of
 * them: a 1 KiB read missed it, and the client lost its namespace). */
TEST(v3_cgroup_file)
{
    char path[] = "/tmp/om-test-cgroup-XXXXXX", got[256];
    const char *pod = "/kubepods/burstable/pod0123456789abcdef0123456789abcdef/"
                      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    int fd = mkstemp(path);
    FILE *f;

    CHECK(fd >= 0);
    CHECK((f = fdopen(fd, "w")) != NULL);
    for (int i = 12; i >= 1; i--)
        fprintf(f, "%d:controller%d:%s\n", i, i, pod);
    fprintf(f, "0::/training/job1\n");
    CHECK(fclose(f) == 0);
    om_v3_cgroup_file(path, got, sizeof(got));
    CHECK(strcmp(got, "/training/job1") == 0);
    om_v3_cgroup_file(path, got, 8); /* cut short it would name another cgroup: none */
    CHECK(strcmp(got, "") == 0);
    CHECK((f = fopen(path, "w")) != NULL);
    fprintf(f, "1:cpu:/a\n"); /* a v1 host: no v2 line */
    CHECK(fclose(f) == 0);
    om_v3_cgroup_file(path, got, sizeof(got));
    CHECK(strcmp(got, "") == 0);
    unlink(path);
}
