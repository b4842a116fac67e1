/* SPDX-License-Identifier: MIT */
/*
 * Linked against libcuda.so.1 with a DT_RPATH naming a folder whose libcuda.so.1 is the driver
 * double (tests/CMakeLists.txt), as Open MPI's CUDA support names the driver's folder: a
 * DT_RPATH comes before LD_LIBRARY_PATH, so only a preloaded shim is the libcuda.so.1 this
 * program binds to. Prints the file its cuInit comes from.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

int cuInit(unsigned flags);

int main(void)
{
    Dl_info info;
    char path[PATH_MAX];

    if (!dladdr((void *)cuInit, &info) || !info.dli_fname || !realpath(info.dli_fname, path))
        return 2;
    printf("cuInit from %s\n", path);
    return 0;
}
