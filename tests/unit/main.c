/* SPDX-License-Identifier: MIT */
/* Runs one unit test by name (CTest runs each in its own process), or all with no argument. */
#include "test.h"

struct entry {
    const char *name;
    void (*fn)(void);
};

static const struct entry tests[] = {
#define OM_X_ENTRY(name) {#name, test_##name},
    OM_UNIT_TESTS(OM_X_ENTRY)
#undef OM_X_ENTRY
};

int main(int argc, char **argv)
{
    size_t n = sizeof(tests) / sizeof(tests[0]);

    for (size_t i = 0; i < n; i++) {
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
