/* SPDX-License-Identifier: MIT */
/* A driver-API program run through the shim: passthrough to the driver test double without a
 * daemon, remote mode with one. Prints what it saw; tests/ipc/test_shim.py checks it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* The driver API as a program declares it (values from the documentation). */
CUresult cuInit(unsigned flags);
CUresult cuDriverGetVersion(int *v);
CUresult cuDeviceGetCount(int *n);
CUresult cuDeviceGet(CUdevice *d, int ordinal);
CUresult cuDeviceGetName(char *name, int len, CUdevice d);
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int version, uint64_t flags, int *status);
CUresult cuGetProcAddress(const char *sym, void **pfn, int version, uint64_t flags);
CUresult cuGraphicsUnregisterResource(void *resource); /* unsupported: graphics interop */

int main(void)
{
    int v = 0, n = -1, status = -1;
    CUdevice dev = -1;
    char name[128] = "";
    void *fn = NULL;
    CUresult rc;

    rc = cuInit(0);
    printf("cuInit %d\n", rc);
    rc = cuDriverGetVersion(&v);
    printf("cuDriverGetVersion %d %d\n", rc, v);
    rc = cuDeviceGetCount(&n);
    printf("cuDeviceGetCount %d %d\n", rc, n);
    rc = cuDeviceGet(&dev, 0);
    printf("cuDeviceGet %d %d\n", rc, dev);
    rc = cuDeviceGetName(name, sizeof(name), dev);
    printf("cuDeviceGetName %d %s\n", rc, rc == 0 ? name : "-");
    rc = cuGetProcAddress_v2("cuDeviceGetCount", &fn, 13000, 0, &status);
    printf("cuGetProcAddress_v2 cuDeviceGetCount %d status %d %s\n", rc, status,
           fn == NULL ? "null" : "pointer");
    if (fn) {
        n = -1;
        rc = ((CUresult(*)(int *))fn)(&n);
        printf("  through the pointer %d %d\n", rc, n);
    }
    /* The variant chosen by version and flags (remote mode: measured table). */
    static const struct {
        const char *sym;
        int version;
        uint64_t flags;
    } q[] = {{"cuMemcpyHtoD", 13000, 2},
             {"cuMemcpyHtoD", 3020, 2},
             {"cuMemAlloc", 13000, 0},
             {"cuNoSuchThing", 13000, 0},
             {"cuMemAlloc", 1000, 0}};
    for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
        fn = NULL;
        status = -1;
        rc = cuGetProcAddress_v2(q[i].sym, &fn, q[i].version, q[i].flags, &status);
        printf("lookup %s %d %llu -> %d status %d %s\n", q[i].sym, q[i].version,
               (unsigned long long)q[i].flags, rc, status, fn ? "pointer" : "null");
    }
    rc = cuGetProcAddress("cuNoSuchThing", &fn, 13000, 0);
    printf("cuGetProcAddress cuNoSuchThing %d\n", rc);
    /* An entry point openmps does not support (its arguments are not read). */
    rc = cuGraphicsUnregisterResource(NULL);
    printf("cuGraphicsUnregisterResource %d\n", rc);
    rc = cuGraphicsUnregisterResource(NULL);
    printf("cuGraphicsUnregisterResource %d\n", rc);
    return 0;
}
