/* SPDX-License-Identifier: MIT */
/* device-limits: an unmodified driver-API program for the Slurm test (tests/install/
 * check_slurm.py). Its RUNPATH (not RPATH) names the folder where libcuda.so.1 is the driver
 * double, as a real program finds the real driver in the system's folder: natively it runs on
 * the double; only a shim put first (LD_LIBRARY_PATH or LD_PRELOAD) makes it a client. Prints
 * what device 0 shows it: "cuInit RC", then "sms N" (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
 * its SM share when served) and "total BYTES" (cuDeviceTotalMem, its memory cap when served).
 * Exit status 0 when every call succeeded. */
#include <stddef.h>
#include <stdio.h>

#include "check.h"

CUresult cuInit(unsigned);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDeviceGetAttribute(int *, int, CUdevice);
CUresult cuDeviceTotalMem_v2(size_t *, CUdevice);

int main(void)
{
    CUresult rc = cuInit(0);
    CUdevice dev = -1;
    int sms = -1;
    size_t total = 0;

    printf("cuInit %d\n", rc);
    if (rc != CUDA_SUCCESS)
        return 1;
    if ((rc = cuDeviceGet(&dev, 0)) != CUDA_SUCCESS ||
        (rc = cuDeviceGetAttribute(&sms, 16 /* MULTIPROCESSOR_COUNT */, dev)) != CUDA_SUCCESS ||
        (rc = cuDeviceTotalMem_v2(&total, dev)) != CUDA_SUCCESS) {
        printf("failed %d\n", rc);
        return 1;
    }
    printf("sms %d\ntotal %zu\n", sms, total);
    return 0;
}
