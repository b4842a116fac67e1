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
