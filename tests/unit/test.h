/* SPDX-License-Identifier: MIT */
/* A small test harness: named test functions, assertions that print both sides. */
#ifndef OM_TEST_H
#define OM_TEST_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Defines a test: its function and a constructor that registers it by name before main runs.
 * The TEST(name) lines are the one list of unit tests: tests/CMakeLists.txt finds them in
 * tests/unit/test_*.c and gives each its CTest entry (unit.NAME). */
void om_test_register(const char *name, void (*fn)(void));
#define TEST(name)                                                                                 \
    static void test_##name(void);                                                                 \
    __attribute__((constructor)) static void om_test_register_##name(void)                         \
    {                                                                                              \
        om_test_register(#name, test_##name);                                                      \
    }                                                                                              \
    static void test_##name(void)

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

#endif
