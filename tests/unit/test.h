/* SPDX-License-Identifier: MIT */
/* A small test harness: named test functions, assertions that print both sides. */
#ifndef OM_TEST_H
#define OM_TEST_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST(name) void test_##name(void)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_) {                                                                            \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %s (%lld vs %lld)\n", __FILE__,         \
                    __LINE__, #a, #b, a_, b_);                                                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (strcmp(a_, b_) != 0) {                                                                 \
            fprintf(stderr, "%s:%d: CHECK_STR failed: %s == %s (\"%s\" vs \"%s\")\n", __FILE__,    \
                    __LINE__, #a, #b, a_, b_);                                                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Every test, listed once: main.c expands it into declarations and the table. */
#define OM_UNIT_TESTS(X)                                                                           \
    X(config_parse_size)                                                                           \
    X(config_format_size)                                                                          \
    X(config_percentage)                                                                           \
    X(config_mem_limit_list)                                                                       \
    X(config_private_dir)                                                                          \
    X(msg_decode_header)                                                                           \
    X(msg_decode_payloads)                                                                         \
    X(msg_socket_roundtrip)                                                                        \
    X(msg_fd_passing)                                                                              \
    X(msg_answer_chunks)                                                                           \
    X(visible_resolve)                                                                             \
    X(visible_limits_and_map)                                                                      \
    X(visible_mem_limits)                                                                          \
    X(ring_roundtrip)                                                                              \
    X(ring_wrap)                                                                                   \
    X(ring_full)                                                                                   \
    X(ring_corrupt_indices)                                                                        \
    X(ring_cross_process)                                                                          \
    X(ring_wait_timeout)                                                                           \
    X(command_split)                                                                               \
    X(log_escape)                                                                                  \
    X(image_extent)                                                                                \
    X(image_keys)

#define OM_X_DECL(name) TEST(name);
OM_UNIT_TESTS(OM_X_DECL)
#undef OM_X_DECL

#endif
