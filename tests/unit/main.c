/* SPDX-License-Identifier: MIT */
/* Runs one unit test by name (CTest runs each in its own process), or all with no argument.
 * Each TEST(name) registers itself (test.h) before main runs. */
#include "test.h"

#define OM_UNIT_MAX 256

struct entry {
    const char *name;
    void (*fn)(void);
};

static struct entry tests[OM_UNIT_MAX];
static size_t ntests;

void om_test_register(const char *name, void (*fn)(void))
{
    if (ntests == OM_UNIT_MAX) {
        fprintf(stderr, "more than %d unit tests: raise OM_UNIT_MAX in main.c\n", OM_UNIT_MAX);
        exit(2);
    }
    tests[ntests].name = name;
    tests[ntests].fn = fn;
    ntests++;
}

int main(int argc, char **argv)
{
    for (size_t i = 0; i < ntests; i++) {
        if (argc > 1 && strcmp(argv[1], tests[i].name) != 0)
            continue;
        tests[i].fn();
        printf("ok %s\n", tests[i].name);
        if (argc > 1)
            return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "no test named %s\n", argv[1]);
        return 2;
    }
    return 0;
}
