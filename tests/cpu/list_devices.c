/* SPDX-License-Identifier: MIT */
/* list-devices: prints cuInit's result and, when it succeeded, every device the process sees,
 * one line each: "ORDINAL NAME GPU-<uuid> BUS-ID". Run natively (the shim passing through to the
 * driver double) or served, the same lines say the same devices: tests/ipc/test_visible_daemon.py
 * compares them. On stderr, the program's CUDA_VISIBLE_DEVICES after cuInit. Exit status 0
 * unless a call after cuInit failed. */
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

CUresult cuInit(unsigned);
CUresult cuDeviceGetCount(int *);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDeviceGetName(char *, int, CUdevice);
CUresult cuDeviceGetUuid_v2(CUuuid *, CUdevice);
CUresult cuDeviceGetPCIBusId(char *, int, CUdevice);

int main(void)
{
    CUresult rc = cuInit(0);
    int n = 0;

    const char *env;

    printf("cuInit %d\n", (int)rc);
    env = getenv("CUDA_VISIBLE_DEVICES"); /* the program's own value, after cuInit */
    fprintf(stderr, "CUDA_VISIBLE_DEVICES after cuInit: %s\n", env ? env : "(unset)");
    if (rc != CUDA_SUCCESS)
        return 0;
    OK(cuDeviceGetCount(&n));
    printf("count %d\n", n);
    for (int i = 0; i < n; i++) {
        CUdevice d;
        CUuuid u;
        char name[128], bus[32];
        const unsigned char *b = (const unsigned char *)u.bytes;
        OK(cuDeviceGet(&d, i));
        OK(cuDeviceGetName(name, sizeof(name), d));
        OK(cuDeviceGetUuid_v2(&u, d));
        OK(cuDeviceGetPCIBusId(bus, sizeof(bus), d));
        printf(
            "%d %s GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x %s\n",
            i, name, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
            b[12], b[13], b[14], b[15], bus);
    }
    return 0;
}
