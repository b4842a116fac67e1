// SPDX-License-Identifier: MIT
// Probe (issue #24, the GPU tier's jit_logs): what a PTX that does not compile gives, loaded with
// log options through cuModuleLoadDataEx (what the program calls) and through cuLibraryLoadData
// (what the openmps server calls for it), and what cuLibraryGetKernel then says. Under openmps
// the load answered 0 where natively it answered 218, with a one-byte-shorter error log.
// Prints one line per call: the result, the error log's reported size and its last 40 bytes.
#include <cuda.h>
#include <stdio.h>
#include <string.h>
#include <string>
#include <unistd.h>

static void show(const char *what, CUresult r, const char *log, void *size)
{
    size_t n = strlen(log);
    printf("%s: rc %d, error log size %zu, strlen %zu, ends \"%s\"\n", what, (int)r,
           (size_t)size, n, n > 40 ? log + n - 40 : log);
}

int main()
{
    CUdevice dev;
    CUcontext ctx;
    cuInit(0);
    cuDeviceGet(&dev, 0);
    cuDevicePrimaryCtxRetain(&ctx, dev);
    cuCtxSetCurrent(ctx);
    for (int round = 0; round < 2; round++) {
        std::string bad = "// probe " + std::to_string((long)getpid()) + " " +
                          std::to_string(round) +
                          "\n.version 7.0\n.target sm_52\n.address_size 64\n"
                          ".visible .entry broken() { nonsense r1; ret; }\n";
        static char err[16384], info[16384];
        CUjit_option o[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_LOG_VERBOSE};
        void *v[] = {info, (void *)sizeof info, err, (void *)sizeof err, (void *)1};
        memset(err, 0, sizeof err);
        if (round == 0) {
            CUmodule m;
            CUresult r = cuModuleLoadDataEx(&m, bad.c_str(), 5, o, v);
            show("cuModuleLoadDataEx", r, err, v[3]);
        } else {
            CUlibrary l = nullptr;
            CUresult r = cuLibraryLoadData(&l, bad.c_str(), o, v, 5, nullptr, nullptr, 0);
            show("cuLibraryLoadData", r, err, v[3]);
            if (r == CUDA_SUCCESS) {
                CUkernel k;
                printf("cuLibraryGetKernel: rc %d\n", (int)cuLibraryGetKernel(&k, l, "broken"));
                unsigned count = 0;
                printf("cuLibraryGetKernelCount: rc %d count %u\n",
                       (int)cuLibraryGetKernelCount(&count, l), count);
            }
        }
    }
    return 0;
}
