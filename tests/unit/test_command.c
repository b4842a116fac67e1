/* SPDX-License-Identifier: MIT */
/* Unit tests of the command-line splitter of the daemon. */
#include <errno.h>

#include "../../src/control/internal.h"
#include "test.h"

TEST(command_split)
{
    char line[] = "  set_device_pinned_mem_limit\t123  0 2G \r\n";
    char many[] = "a b c d e f g h i";
    char empty[] = " \t ";
    char *argv[8];

    CHECK_EQ(om_command_split(line, argv, 8), 4);
    CHECK_STR(argv[0], "set_device_pinned_mem_limit");
    CHECK_STR(argv[1], "123");
    CHECK_STR(argv[2], "0");
    CHECK_STR(argv[3], "2G");
    CHECK_EQ(om_command_split(many, argv, 8), -E2BIG);
    CHECK_EQ(om_command_split(empty, argv, 8), 0);
}

/* What a peer typed, made safe for a log line, and bounded with a mark. */
TEST(log_escape)
{
    char out[16];

    CHECK_STR(om_log_escape(out, sizeof(out), "ps -p 1", 100), "ps -p 1");
    CHECK_STR(om_log_escape(out, sizeof(out), "\x1b[2J\\", 100), "\\x1b[2J\\\\");
    CHECK_STR(om_log_escape(out, sizeof(out), "a\nb\x7f\x9b", 100), "a\\x0ab\\x7f\\x9b");
    /* Exactly 15 characters fit; one more is cut and marked. */
    CHECK_STR(om_log_escape(out, sizeof(out), "123456789012345", 100), "123456789012345");
    CHECK_STR(om_log_escape(out, sizeof(out), "1234567890123456", 100), "123456789012...");
    /* An escape is never cut in half. */
    CHECK_STR(om_log_escape(out, sizeof(out), "12345678901\x01xyz", 100), "12345678901...");
    /* len bounds what is read. */
    CHECK_STR(om_log_escape(out, sizeof(out), "abcdef", 3), "abc");
    CHECK_STR(om_log_escape(out, 1, "abc", 3), "");
}
