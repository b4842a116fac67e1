/* SPDX-License-Identifier: MIT */
/* Unit tests of value parsing and directory checks. */
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/common/config.h"
#include "test.h"

TEST(config_parse_size)
{
    uint64_t v = 7;

    CHECK_EQ(om_parse_size("2G", &v), 0);
    CHECK_EQ(v, 2ull << 30);
    CHECK_EQ(om_parse_size("512M", &v), 0);
    CHECK_EQ(v, 512ull << 20);
    CHECK_EQ(om_parse_size("512mb", &v), 0);
    CHECK_EQ(v, 512ull << 20);
    CHECK_EQ(om_parse_size("1.5G", &v), 0);
    CHECK_EQ(v, 1536ull << 20);
    CHECK_EQ(om_parse_size("3000", &v), 0); /* a bare number is MiB, as NVIDIA reads it */
    CHECK_EQ(v, 3000ull << 20);
    CHECK_EQ(om_parse_size("64K", &v), 0);
    CHECK_EQ(v, 65536);
    v = 7;
    CHECK_EQ(om_parse_size("", &v), -EINVAL);
    CHECK_EQ(om_parse_size("G", &v), -EINVAL);
    CHECK_EQ(om_parse_size("-1G", &v), -EINVAL);
    CHECK_EQ(om_parse_size("1.2.3G", &v), -EINVAL);
    CHECK_EQ(om_parse_size("1.G", &v), -EINVAL);
    CHECK_EQ(om_parse_size("xyz", &v), -EINVAL);
    CHECK_EQ(om_parse_size("99999999999999999999T", &v), -EINVAL);
    CHECK_EQ(om_parse_size("16777216T", &v), -EINVAL); /* 2^64 bytes */
    CHECK_EQ(v, 7);                                    /* untouched on failure */
}

TEST(config_format_size)
{
    char buf[32];

    om_format_size(2ull << 30, buf, sizeof(buf));
    CHECK_STR(buf, "2G");
    om_format_size(1536ull << 20, buf, sizeof(buf));
    CHECK_STR(buf, "1536M");
    om_format_size(3ull << 40, buf, sizeof(buf));
    CHECK_STR(buf, "3T");
    om_format_size(4096, buf, sizeof(buf));
    CHECK_STR(buf, "4K");
    om_format_size(1000, buf, sizeof(buf));
    CHECK_STR(buf, "1000");
}

TEST(config_percentage)
{
    uint32_t m = 1;
    char buf[16];

    CHECK_EQ(om_parse_percentage("25", &m), 0);
    CHECK_EQ(m, 25000);
    CHECK_EQ(om_parse_percentage("33.333", &m), 0);
    CHECK_EQ(m, 33333);
    om_format_percentage(m, buf, sizeof(buf));
    CHECK_STR(buf, "33.3");
    om_format_percentage(100000, buf, sizeof(buf));
    CHECK_STR(buf, "100.0");
    om_format_percentage(12550, buf, sizeof(buf));
    CHECK_STR(buf, "12.6");
    m = 1;
    CHECK_EQ(om_parse_percentage("0", &m), -EINVAL);
    CHECK_EQ(om_parse_percentage("100.001", &m), -EINVAL);
    CHECK_EQ(om_parse_percentage("250", &m), -EINVAL);
    CHECK_EQ(om_parse_percentage("abc", &m), -EINVAL);
    CHECK_EQ(om_parse_percentage("1.0001", &m), -EINVAL);
    CHECK_EQ(m, 1);
}

TEST(config_mem_limit_list)
{
    struct om_limits l = {0};

    CHECK_EQ(om_parse_mem_limit_list("0=1G,1=512M", &l), 0);
    CHECK_EQ(l.ndevices, 2);
    CHECK_EQ(l.mem_limit[0], 1ull << 30);
    CHECK_EQ(l.mem_limit[1], 512ull << 20);
    CHECK_EQ(om_parse_mem_limit_list("3=2G", &l), 0);
    CHECK_EQ(l.ndevices, 4);
    CHECK_EQ(om_parse_mem_limit_list("64=1G", &l), -EINVAL);
    CHECK_EQ(om_parse_mem_limit_list("0", &l), -EINVAL);
    CHECK_EQ(om_parse_mem_limit_list("0=", &l), -EINVAL);
    CHECK_EQ(om_parse_mem_limit_list("a=1G", &l), -EINVAL);
    CHECK_EQ(l.ndevices, 4); /* untouched on failure */
    /* UUID entries are checked and counted, for the daemon (visible.c) */
    CHECK_EQ(om_parse_mem_limit_list("GPU-8932f937=2G,1=256M,gpu-ab=1G", &l), 2);
    CHECK_EQ(l.mem_limit[1], 256ull << 20);
    CHECK_EQ(om_parse_mem_limit_list("GPU-8932=", &l), -EINVAL);
    CHECK_EQ(om_parse_mem_limit_list("GPU-=1G", &l), -EINVAL);
}

TEST(config_private_dir)
{
    char base[] = "/tmp/om-unit-XXXXXX", dir[128], link[128], err[256];
    struct stat st;

    CHECK(mkdtemp(base) != NULL);
    snprintf(dir, sizeof(dir), "%s/a/b/pipe", base);
    CHECK_EQ(om_make_private_dir(dir, 0700, err, sizeof(err)), 0);
    CHECK_EQ(stat(dir, &st), 0);
    CHECK_EQ(st.st_mode & 07777, 0700);
    chmod(dir, 0777); /* a directory of ours with a loose mode is tightened */
    CHECK_EQ(om_make_private_dir(dir, 0755, err, sizeof(err)), 0);
    CHECK_EQ(stat(dir, &st), 0);
    CHECK_EQ(st.st_mode & 07777, 0755);
    snprintf(link, sizeof(link), "%s/link", base);
    CHECK_EQ(symlink(dir, link), 0);
    CHECK_EQ(om_make_private_dir(link, 0700, err, sizeof(err)), -ENOTDIR);
    CHECK(strstr(err, "symlink") != NULL);
    CHECK_EQ(om_make_private_dir("relative/dir", 0700, err, sizeof(err)), -EINVAL);
    /* A parent anyone may write (no sticky bit) could have entries swapped. */
    snprintf(link, sizeof(link), "%s/open", base);
    CHECK_EQ(mkdir(link, 0777), 0);
    CHECK_EQ(chmod(link, 0777), 0);
    snprintf(dir, sizeof(dir), "%s/open/pipe", base);
    CHECK_EQ(om_make_private_dir(dir, 0700, err, sizeof(err)), -EPERM);
    CHECK(strstr(err, "cannot be trusted") != NULL);
    CHECK_EQ(chmod(link, 01777), 0); /* sticky, like /tmp: fine */
    CHECK_EQ(om_make_private_dir(dir, 0700, err, sizeof(err)), 0);
    snprintf(dir, sizeof(dir), "%s/a/b/pipe", base);
    if (geteuid() == 0) {
        CHECK_EQ(chown(dir, 12345, 12345), 0);
        CHECK_EQ(om_make_private_dir(dir, 0700, err, sizeof(err)), -EPERM);
        CHECK(strstr(err, "belongs to uid 12345") != NULL);
    }
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
    CHECK_EQ(system(cmd), 0);
}

TEST(config_parse_loadavg_running)
{
    CHECK_EQ(om_parse_loadavg_running("0.52 0.58 0.59 3/1042 12345\n"), 3);
    CHECK_EQ(om_parse_loadavg_running("12.00 9.10 4.00 28/2011 77"), 28);
    CHECK_EQ(om_parse_loadavg_running("0.52 0.58 0.59 3"), -EINVAL); /* no total */
    CHECK_EQ(om_parse_loadavg_running("0.52 0.58"), -EINVAL);
    CHECK_EQ(om_parse_loadavg_running(""), -EINVAL);
    CHECK_EQ(om_parse_loadavg_running("a b c x/1 2"), -EINVAL);
    CHECK_EQ(om_parse_loadavg_running("1 1 1 99999999999/1 2"), -EINVAL); /* out of range */
}
