// SPDX-License-Identifier: MIT
// What the real driver answers to cuMemHostRegister for the ranges openmps serves in place or
// refuses (src/client/state/pinned.c): run natively, one line per case, "NAME CUresult".
//   nvcc -o hostreg_codes hostreg_codes.cu -lcuda && ./hostreg_codes /tmp/some-file
// And what the runtime passes for cudaHostRegister(p, n, cudaHostRegisterDefault): run it with
// the shim first in LD_LIBRARY_PATH and OPENMPS_TRACE=1 (no daemon: the real driver, traced).
#include <cuda.h>
#include <cuda_runtime.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void one(const char *name, void *p, size_t n, unsigned flags)
{
    CUresult rc = cuMemHostRegister(p, n, flags);
    printf("%s %d\n", name, (int)rc);
    if (rc == CUDA_SUCCESS) {
        CUdeviceptr d = 0;
        CUresult g = cuMemHostGetDevicePointer(&d, p, 0);
        printf("%s devptr %d\n", name, (int)g);
        cuMemHostUnregister(p);
    }
}

int main(int argc, char **argv)
{
    const size_t len = 3 * 4096;
    CUdevice dev;
    CUcontext ctx;
    int ro = -1;

    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return 1;
    cuDeviceGetAttribute(&ro, CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, dev);
    printf("read_only_host_register_supported %d\n", ro);
    unsigned char *a = (unsigned char *)mmap(NULL, len, PROT_READ | PROT_WRITE,
                                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    one("anon_flags0", a, len, 0);
    one("anon_unknown_flag", a, len, 0x100);
    one("anon_iomemory", a, len, CU_MEMHOSTREGISTER_IOMEMORY);
    one("anon_read_only_flag", a, len, CU_MEMHOSTREGISTER_READ_ONLY);
    mprotect(a, len, PROT_READ);
    one("prot_read_flags0", a, len, 0);
    one("prot_read_devicemap", a, len, CU_MEMHOSTREGISTER_DEVICEMAP);
    one("prot_read_read_only_flag", a, len, CU_MEMHOSTREGISTER_READ_ONLY);
    mprotect(a, len, PROT_NONE);
    one("prot_none", a, len, 0);
    munmap(a + 4096, 4096);
    mprotect(a, len, PROT_READ | PROT_WRITE);
    one("hole", a, len, 0);
    unsigned char *s =
        (unsigned char *)mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    one("shared_anon_devicemap", s, len, CU_MEMHOSTREGISTER_DEVICEMAP);
    if (argc > 1) {
        int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0 && ftruncate(fd, len) == 0) {
            unsigned char *f =
                (unsigned char *)mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            one("file_shared_devicemap", f, len, CU_MEMHOSTREGISTER_DEVICEMAP);
        }
    }
    // the runtime's default flags (traced under OPENMPS_TRACE)
    void *r = malloc(1 << 20);
    printf("cudaHostRegister_default %d\n",
           (int)cudaHostRegister(r, 1 << 20, cudaHostRegisterDefault));
    cudaHostUnregister(r);
    return 0;
}
