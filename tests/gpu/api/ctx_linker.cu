// SPDX-License-Identifier: MIT
// The driver API's contexts and modules, without the runtime: three contexts made by
// cuCtxCreate_v4, the cuCtxCreate macro of the 13.0 header (v4 with no parameters) and the
// legacy cuCtxCreate_v2 that older programs call, the context stack (push, pop, set, get),
// the queries (id, flags, API version, device), context-wide event record and wait, and a PTX
// kernel (below, as a string) loaded through the linker with its info and error logs, and
// directly with cuModuleLoadDataEx; its global counter read with cuModuleGetGlobal.
// openmps-gpu-link: -lcuda
#define PROG "ctx_linker"
#include "api.h"
#include <cmath>
#include <cstring>
#include <vector>

// The legacy entry point (the 13.0 header maps cuCtxCreate to cuCtxCreate_v4).
extern "C" CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);

// out[i] = in[i] * a + i for i < n, and one atomic increment of axpbCalls per element.
static const char ptx[] = R"(
.version 7.0
.target sm_70
.address_size 64

.visible .global .align 4 .u32 axpbCalls;

.visible .entry axpb(.param .u64 pOut, .param .u64 pIn, .param .f32 pA, .param .u32 pN)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [pOut];
    ld.param.u64 %rd2, [pIn];
    ld.param.f32 %f1, [pA];
    ld.param.u32 %r1, [pN];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd4, %rd5;
    ld.global.f32 %f2, [%rd6];
    cvt.rn.f32.u32 %f3, %r5;
    fma.rn.f32 %f4, %f2, %f1, %f3;
    add.s64 %rd7, %rd3, %rd5;
    st.global.f32 [%rd7], %f4;
    atom.global.add.u32 %r6, [axpbCalls], 1;
DONE:
    ret;
}
)";

static const char bad_ptx[] = ".version 7.0\n.target sm_70\n.address_size 64\n"
                              ".visible .entry broken() { this is not ptx; }\n";

// Runs axpb from module mod in the current context over n elements and checks the result
// and the module's counter against the CPU. Returns the checksum of the output.
static unsigned long long run_axpb(CUmodule mod, CUstream s, unsigned n, float a, const char *what)
{
    CUfunction f;
    CUdeviceptr din, dout, counter;
    size_t counter_bytes = 0;
    std::vector<float> in(n), out(n), ref(n);
    for (unsigned i = 0; i < n; i++) {
        in[i] = (float)((i * 37u) % 1000u) * 0.25f - 100.0f;
        ref[i] = fmaf(in[i], a, (float)i);
    }
    CU(cuModuleGetFunction(&f, mod, "axpb"));
    CU(cuModuleGetGlobal(&counter, &counter_bytes, mod, "axpbCalls"));
    EXPECT_EQ(counter_bytes, 4);
    CU(cuMemAlloc(&din, n * sizeof(float)));
    CU(cuMemAlloc(&dout, n * sizeof(float)));
    CU(cuMemcpyHtoD(din, in.data(), n * sizeof(float)));
    CU(cuMemsetD32(dout, 0, n));
    CU(cuMemsetD32(counter, 0, 1));
    void *args[] = {&dout, &din, &a, &n};
    CU(cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr));
    CU(cuStreamSynchronize(s));
    CU(cuMemcpyDtoH(out.data(), dout, n * sizeof(float)));
    unsigned calls = 0;
    CU(cuMemcpyDtoH(&calls, counter, sizeof calls));
    EXPECT_EQ(calls, n);
    EXPECT_FLOATS(what, out.data(), ref.data(), n, 0.0f);
    CU(cuMemFree(din));
    CU(cuMemFree(dout));
    return api_fnv(out.data(), n * sizeof(float));
}

int main()
{
    CUdevice dev, d2;
    CUcontext a, b, c, cur, popped;
    unsigned flags, version;
    unsigned long long ida, idb, idc;

    CU(cuInit(0));
    CU(cuDeviceGet(&dev, 0));

    // Three contexts, each made current on top of the one before.
    CUctxCreateParams params;
    memset(&params, 0, sizeof params);
    CU(cuCtxCreate_v4(&a, &params, CU_CTX_SCHED_BLOCKING_SYNC, dev));
    CU(cuCtxGetCurrent(&cur));
    EXPECT(cur == a);
    CU(cuCtxCreate(&b, nullptr, CU_CTX_SCHED_SPIN, dev));
    CU(cuCtxGetCurrent(&cur));
    EXPECT(cur == b);
    CU(cuCtxCreate_v2(&c, CU_CTX_SCHED_YIELD, dev));
    CU(cuCtxGetCurrent(&cur));
    EXPECT(cur == c);
    EXPECT(a != b && b != c && a != c);

    // The queries, for each context made current in turn.
    CU(cuCtxGetFlags(&flags));
    EXPECT_EQ(flags & CU_CTX_SCHED_MASK, CU_CTX_SCHED_YIELD);
    CU(cuCtxGetDevice(&d2));
    EXPECT_EQ(d2, dev);
    CU(cuCtxPopCurrent(&popped));
    EXPECT(popped == c);
    CU(cuCtxGetCurrent(&cur));
    EXPECT(cur == b);
    CU(cuCtxGetFlags(&flags));
    EXPECT_EQ(flags & CU_CTX_SCHED_MASK, CU_CTX_SCHED_SPIN);
    CU(cuCtxPopCurrent(&popped));
    EXPECT(popped == b);
    CU(cuCtxGetFlags(&flags));
    EXPECT_EQ(flags & CU_CTX_SCHED_MASK, CU_CTX_SCHED_BLOCKING_SYNC);
    CU(cuCtxPopCurrent(&popped));
    EXPECT(popped == a);
    CU(cuCtxGetCurrent(&cur));
    EXPECT(cur == nullptr);
    CU(cuCtxGetId(a, &ida));
    CU(cuCtxGetId(b, &idb));
    CU(cuCtxGetId(c, &idc));
    EXPECT(ida != idb && idb != idc && ida != idc);
    CU(cuCtxGetApiVersion(a, &version));
    unsigned vb, vc;
    CU(cuCtxGetApiVersion(b, &vb));
    CU(cuCtxGetApiVersion(c, &vc));
    EXPECT_EQ(vb, version);
    printf("contexts: 3 made, ids distinct, sched flags 0x%x 0x%x 0x%x, api version %u %u %u\n",
           CU_CTX_SCHED_BLOCKING_SYNC, CU_CTX_SCHED_SPIN, CU_CTX_SCHED_YIELD, version, vb, vc);

    // The stack: push b, push a; set c replaces the top (a); pops give c, then b.
    CU(cuCtxPushCurrent(b));
    CU(cuCtxPushCurrent(a));
    CU(cuCtxGetCurrent(&cur));
    EXPECT(cur == a);
    CU(cuCtxSetCurrent(c));
    CU(cuCtxGetCurrent(&cur));
    EXPECT(cur == c);
    CU(cuCtxPopCurrent(&popped));
    EXPECT(popped == c);
    CU(cuCtxGetCurrent(&cur));
    EXPECT(cur == b);
    CU(cuCtxPopCurrent(&popped));
    EXPECT(popped == b);
    printf("stack: push, push, set, pop, pop as expected\n");

    // Context a: the PTX through the linker, with logs.
    CU(cuCtxSetCurrent(a));
    static char info_log[8192], error_log[8192];
    CUjit_option opts[] = {CU_JIT_INFO_LOG_BUFFER,  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                           CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                           CU_JIT_LOG_VERBOSE,      CU_JIT_OPTIMIZATION_LEVEL};
    void *vals[] = {info_log,          (void *)(size_t)sizeof info_log,
                    error_log,         (void *)(size_t)sizeof error_log,
                    (void *)(size_t)1, (void *)(size_t)3};
    CUlinkState link;
    void *cubin = nullptr;
    size_t cubin_size = 0;
    CU(cuLinkCreate(6, opts, vals, &link));
    CU(cuLinkAddData(link, CU_JIT_INPUT_PTX, (void *)ptx, sizeof ptx, "axpb.ptx", 0, nullptr,
                     nullptr));
    CU(cuLinkComplete(link, &cubin, &cubin_size));
    EXPECT(cubin != nullptr && cubin_size > 0);
    EXPECT(error_log[0] == 0);
    EXPECT(info_log[0] != 0); // the verbose log says what was compiled
    CUmodule linked;
    CU(cuModuleLoadData(&linked, cubin));
    CU(cuLinkDestroy(link)); // the cubin belongs to the link state: loaded before this

    // A PTX that does not compile: the error, and a non-empty error log. The driver wrote the
    // logs' lengths back into vals: they are the buffers' sizes again.
    memset(error_log, 0, sizeof error_log);
    vals[1] = (void *)(size_t)sizeof info_log;
    vals[3] = (void *)(size_t)sizeof error_log;
    CU(cuLinkCreate(6, opts, vals, &link));
    CUresult bad = cuLinkAddData(link, CU_JIT_INPUT_PTX, (void *)bad_ptx, sizeof bad_ptx,
                                 "broken.ptx", 0, nullptr, nullptr);
    if (bad == CUDA_SUCCESS)
        bad = cuLinkComplete(link, &cubin, &cubin_size);
    EXPECT_EQ(bad, CUDA_ERROR_INVALID_PTX);
    EXPECT(error_log[0] != 0);
    CU(cuLinkDestroy(link));
    printf("linker: cubin loaded, error log empty; broken PTX refused with %d and a log\n",
           (int)bad);

    CUfunction f;
    int max_threads, ptx_version, binary_version, regs;
    CU(cuModuleGetFunction(&f, linked, "axpb"));
    CU(cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
    CU(cuFuncGetAttribute(&ptx_version, CU_FUNC_ATTRIBUTE_PTX_VERSION, f));
    CU(cuFuncGetAttribute(&binary_version, CU_FUNC_ATTRIBUTE_BINARY_VERSION, f));
    CU(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
    EXPECT(max_threads >= 256 && regs > 0);
    EXPECT_EQ(ptx_version, 70);
    printf("function: max threads %d, ptx version %d, binary version %d\n", max_threads,
           ptx_version, binary_version);

    CUstream sa;
    CUevent ev;
    CU(cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
    CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    const unsigned n = 1u << 20;
    unsigned long long sum_a = run_axpb(linked, sa, n, 1.5f, "linked axpb");
    printf("context a: linked axpb over %u elements correct, checksum %016llx\n", n, sum_a);

    // Context b: the PTX loaded directly, with an error log option.
    CU(cuCtxSetCurrent(b));
    CUjit_option opts2[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals2[] = {error_log, (void *)(size_t)sizeof error_log};
    memset(error_log, 0, sizeof error_log);
    CUmodule direct;
    CU(cuModuleLoadDataEx(&direct, ptx, 2, opts2, vals2));
    EXPECT(error_log[0] == 0);
    CUstream sb;
    CU(cuStreamCreate(&sb, CU_STREAM_DEFAULT));
    unsigned long long sum_b = run_axpb(direct, sb, n, -0.75f, "direct axpb");
    printf("context b: directly loaded axpb correct, checksum %016llx\n", sum_b);

    // Context-wide event: work queued in a, recorded for the whole context; b waits for it;
    // once b's later work is synchronized, the event has completed.
    CU(cuCtxSetCurrent(a));
    CUfunction fa;
    CUdeviceptr buf;
    CU(cuModuleGetFunction(&fa, linked, "axpb"));
    CU(cuMemAlloc(&buf, n * sizeof(float)));
    // On sa itself: cuMemsetD32 on device memory may return before it is done, and sa does
    // not wait for the NULL stream when it is non-blocking (natively this raced once).
    CU(cuMemsetD32Async(buf, 0, n, sa));
    float two = 2.0f;
    unsigned nn = n;
    void *args[] = {&buf, &buf, &two, &nn};
    for (int i = 0; i < 8; i++)
        CU(cuLaunchKernel(fa, n / 256, 1, 1, 256, 1, 1, 0, sa, args, nullptr));
    CU(cuCtxRecordEvent(a, ev));
    CU(cuCtxWaitEvent(b, ev));
    CU(cuCtxSetCurrent(b));
    CUfunction fb;
    CUdeviceptr bbuf;
    CU(cuModuleGetFunction(&fb, direct, "axpb"));
    CU(cuMemAlloc(&bbuf, 1024 * sizeof(float)));
    unsigned small = 1024;
    void *bargs[] = {&bbuf, &bbuf, &two, &small};
    CU(cuLaunchKernel(fb, 4, 1, 1, 256, 1, 1, 0, sb, bargs, nullptr));
    CU(cuCtxSynchronize());
    EXPECT_EQ(cuEventQuery(ev), CUDA_SUCCESS);
    CU(cuCtxSetCurrent(a));
    CU(cuCtxSynchronize());
    // buf after 8 rounds of x = 2x + i from 0: (2^8 - 1) * i
    std::vector<float> got(n);
    CU(cuMemcpyDtoH(got.data(), buf, n * sizeof(float)));
    for (unsigned i = 0; i < n; i++) {
        float x = 0;
        for (int k = 0; k < 8; k++)
            x = fmaf(x, 2.0f, (float)i);
        if (got[i] != x) {
            fprintf(stderr, "%s: context event: element %u is %g, expected %g\n", PROG, i,
                    (double)got[i], (double)x);
            return 1;
        }
    }
    printf("context event: b waited for a's 8 kernels, result checksum %016llx\n",
           api_fnv(got.data(), n * sizeof(float)));

    CU(cuMemFree(buf));
    CU(cuEventDestroy(ev));
    CU(cuStreamDestroy(sa));
    CU(cuModuleUnload(linked));
    CU(cuCtxSetCurrent(b));
    CU(cuMemFree(bbuf));
    CU(cuStreamDestroy(sb));
    CU(cuModuleUnload(direct));
    CU(cuCtxSetCurrent(nullptr));
    CU(cuCtxDestroy(a));
    CU(cuCtxDestroy(b));
    CU(cuCtxDestroy(c));
    CU(cuCtxGetCurrent(&cur));
    EXPECT(cur == nullptr);
    printf("contexts destroyed\n");
    return 0;
}
