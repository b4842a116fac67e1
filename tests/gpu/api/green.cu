// SPDX-License-Identifier: MIT
// Green contexts and device resources: the device's SM resource split into two groups, a
// descriptor and a green context for each, a stream in each (cuGreenCtxStreamCreate), a PTX
// kernel loaded as a library (a CUkernel: launched in the context of its stream) run in both;
// cuGreenCtxRecordEvent / cuGreenCtxWaitEvent order the second green context after the first;
// then the runtime in a green context: cuCtxFromGreenCtx + cuCtxSetCurrent, a stream made by
// the runtime (the green context's), a <<<>>> launch on it and on the default stream (the run
// with the argument "runtime" only: the driver-API part stands on its own).
// openmps-gpu-link: -lcuda
// openmps-gpu-runs: - runtime
#define PROG "green"
#include "api.h"
#include <vector>

// out[i] = v for i < n
static const char ptx[] = R"(
.version 7.0
.target sm_70
.address_size 64

.visible .entry fill(.param .u64 pOut, .param .u32 pV, .param .u32 pN)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [pOut];
    ld.param.u32 %r1, [pV];
    ld.param.u32 %r2, [pN];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r6, %r3, %r4, %r5;
    setp.ge.u32 %p1, %r6, %r2;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r6, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r1;
DONE:
    ret;
}
)";

__global__ void rt_fill(unsigned *out, unsigned v, unsigned n)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = v;
}

static const unsigned N = 1 << 20;

static void launch_fill(CUkernel k, CUdeviceptr out, unsigned v, CUstream s)
{
    unsigned n = N;
    void *args[] = {&out, &v, &n};
    CU(cuLaunchKernel((CUfunction)k, N / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr));
}

static void expect_all(CUdeviceptr p, unsigned v)
{
    std::vector<unsigned> h(N);
    CU(cuMemcpyDtoH(h.data(), p, N * sizeof(unsigned)));
    for (unsigned i = 0; i < N; i++)
        if (h[i] != v) {
            fprintf(stderr, "%s: element %u is %u, expected %u\n", PROG, i, h[i], v);
            exit(1);
        }
}

int main(int argc, char **argv)
{
    bool with_runtime = argc > 1 && !strcmp(argv[1], "runtime");
    CUdevice dev;
    CUcontext primary;
    CUdevResource all, groups[2], rest, r;
    CUdevResourceDesc desc[2];
    CUgreenCtx g[2], got;
    CUstream s[2];
    CUlibrary lib;
    CUkernel fill;
    CUevent ev;
    CUdeviceptr buf[2];
    unsigned long long id[2];
    unsigned nb = 0;

    CU(cuInit(0));
    CU(cuDeviceGet(&dev, 0));
    CU(cuDevicePrimaryCtxRetain(&primary, dev));
    CU(cuCtxSetCurrent(primary));

    // The SM resource and its split: two groups of at least the minimum partition size.
    CU(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
    EXPECT(all.type == CU_DEV_RESOURCE_TYPE_SM && all.sm.smCount > 0);
    fprintf(stderr, "%s: %u SMs, partitions of %u aligned to %u\n", PROG, all.sm.smCount,
            all.sm.minSmPartitionSize, all.sm.smCoscheduledAlignment);
    unsigned min = all.sm.smCount / 2 / 8 * 8; // two halves, a multiple of 8
    EXPECT(min >= all.sm.minSmPartitionSize);
    CU(cuDevSmResourceSplitByCount(nullptr, &nb, &all, nullptr, 0, min));
    EXPECT(nb >= 2);
    nb = 2;
    CU(cuDevSmResourceSplitByCount(groups, &nb, &all, &rest, 0, min));
    EXPECT_EQ(nb, 2);
    for (int i = 0; i < 2; i++) {
        EXPECT(groups[i].type == CU_DEV_RESOURCE_TYPE_SM && groups[i].sm.smCount >= min);
        CU(cuDevResourceGenerateDesc(&desc[i], &groups[i], 1));
        CU(cuGreenCtxCreate(&g[i], desc[i], dev, CU_GREEN_CTX_DEFAULT_STREAM));
        CU(cuGreenCtxGetDevResource(g[i], &r, CU_DEV_RESOURCE_TYPE_SM));
        EXPECT_EQ(r.sm.smCount, groups[i].sm.smCount);
        CU(cuGreenCtxGetId(g[i], &id[i]));
        CU(cuGreenCtxStreamCreate(&s[i], g[i], CU_STREAM_NON_BLOCKING, 0));
        CU(cuStreamGetGreenCtx(s[i], &got));
        EXPECT(got == g[i]);
    }
    EXPECT(id[0] != id[1]);
    printf("green: two green contexts of the split, a stream in each\n");

    // A kernel in each green context's stream.
    CU(cuLibraryLoadData(&lib, ptx, nullptr, nullptr, 0, nullptr, nullptr, 0));
    CU(cuLibraryGetKernel(&fill, lib, "fill"));
    for (int i = 0; i < 2; i++)
        CU(cuMemAlloc(&buf[i], N * sizeof(unsigned)));
    launch_fill(fill, buf[0], 11, s[0]);
    launch_fill(fill, buf[1], 22, s[1]);
    CU(cuStreamSynchronize(s[0]));
    CU(cuStreamSynchronize(s[1]));
    expect_all(buf[0], 11);
    expect_all(buf[1], 22);
    printf("green: a kernel in each green context\n");

    // Green context 1 waits for what green context 0 did: the copy sees the fill.
    CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    launch_fill(fill, buf[0], 33, s[0]);
    CU(cuGreenCtxRecordEvent(g[0], ev));
    CU(cuGreenCtxWaitEvent(g[1], ev));
    CU(cuMemcpyDtoDAsync(buf[1], buf[0], N * sizeof(unsigned), s[1]));
    CU(cuStreamSynchronize(s[1]));
    expect_all(buf[1], 33);
    CU(cuEventSynchronize(ev));
    printf("green: events order one green context after another\n");

    // The runtime in green context 1: its stream is the green context's.
    fprintf(stderr, "%s: the driver-API part done\n", PROG);
    CUcontext c1, cur;
    cudaStream_t rs;
    CU(cuCtxFromGreenCtx(&c1, g[1]));
    CU(cuCtxSetCurrent(c1));
    CU(cuCtxGetCurrent(&cur));
    EXPECT(cur == c1);
    CU(cuStreamGetGreenCtx(nullptr, &got)); // the NULL stream: the current green context's
    EXPECT(got == g[1]);
    if (with_runtime) {
        RT(cudaStreamCreateWithFlags(&rs, cudaStreamNonBlocking));
        CU(cuStreamGetGreenCtx((CUstream)rs, &got));
        EXPECT(got == g[1]);
        rt_fill<<<N / 256, 256, 0, rs>>>((unsigned *)buf[1], 44, N);
        RT(cudaGetLastError());
        RT(cudaStreamSynchronize(rs));
        expect_all(buf[1], 44);
        rt_fill<<<N / 256, 256>>>((unsigned *)buf[0], 55, N);
        RT(cudaGetLastError());
        RT(cudaDeviceSynchronize());
        expect_all(buf[0], 55);
        RT(cudaStreamDestroy(rs));
        printf("green: the runtime in a green context\n");
    }

    CU(cuCtxSetCurrent(primary));
    for (int i = 0; i < 2; i++) {
        CU(cuStreamDestroy(s[i]));
        CU(cuMemFree(buf[i]));
    }
    CU(cuEventDestroy(ev));
    CU(cuLibraryUnload(lib));
    for (int i = 0; i < 2; i++)
        CU(cuGreenCtxDestroy(g[i]));
    printf("green: done\n");
    return 0;
}
