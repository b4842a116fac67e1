// SPDX-License-Identifier: MIT
// The client of the GPU stress workloads (tests/gpu/stress/*.py; issue #9): one kind of work in
// a loop, every result checked, until told to stop (or killed, which is the point of torture).
//   stress MODE [--seconds S] [--iters N] [--stop FILE] [--pause-ms N] [--max-mib N]
// MODE: launch | pageable | staged | pinned | module | alloc | streams | mixed  (driver API)
//       rt     (the runtime: <<<>>> launches of this file's own kernel, cudaMemcpy, cudaHostAlloc)
//       fault  (launches a kernel that writes far out of bounds; prints the error it gets)
//       probe  (init, one kernel, checked; prints when it completed)
// Without --seconds, --iters or --stop it loops until killed. Stdout (unbuffered) has
// "start T", "up T" (session and modules ready), "ready T" (first iteration checked),
// "ok MODE iters N" at a clean end, or "error CODE NAME T" for a failed call (exit 1); a wrong
// result prints "mismatch ..." (exit 2). T: CLOCK_MONOTONIC milliseconds (Python's
// time.monotonic() * 1000 reads the same clock). With STRESS_FAKE=1 the module image is one for
// the CPU tier's driver test double and kernel results are not checked (its kernels do nothing);
// copies still are. STRESS_NO_REGISTER=1 leaves cuMemHostRegister out of the pinned work.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda.h>
#include <time.h>
#include <unistd.h>
#include <vector>

// nvcc -ptx -arch=compute_80 of:
//   extern "C" __global__ void vadd(const unsigned *a, const unsigned *b, unsigned *c, int n)
//   { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i] + 1u; }
//   extern "C" __global__ void spin(long long iterations, unsigned long long *out)
//   { (an LCG, iterations steps; the result stored) }
//   extern "C" __global__ void fault(int *p) { p[1ll << 40] = 1; }
// (checked with ptxas -arch=sm_90). Each copy of the image ends with a different comment, so
// the server sees three images and loads each once (it keeps one copy per distinct image).
static const char ptx_image[] = R"PTX(
.version 9.0
.target sm_80
.address_size 64
.visible .entry vadd(
	.param .u64 vadd_param_0,
	.param .u64 vadd_param_1,
	.param .u64 vadd_param_2,
	.param .u32 vadd_param_3
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<10>;
	.reg .b64 	%rd<11>;
	ld.param.u64 	%rd1, [vadd_param_0];
	ld.param.u64 	%rd2, [vadd_param_1];
	ld.param.u64 	%rd3, [vadd_param_2];
	ld.param.u32 	%r2, [vadd_param_3];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__BB0_2;
	cvta.to.global.u64 	%rd4, %rd1;
	mul.wide.s32 	%rd5, %r1, 4;
	add.s64 	%rd6, %rd4, %rd5;
	cvta.to.global.u64 	%rd7, %rd2;
	add.s64 	%rd8, %rd7, %rd5;
	ld.global.u32 	%r6, [%rd6];
	ld.global.u32 	%r7, [%rd8];
	add.s32 	%r8, %r6, %r7;
	add.s32 	%r9, %r8, 1;
	cvta.to.global.u64 	%rd9, %rd3;
	add.s64 	%rd10, %rd9, %rd5;
	st.global.u32 	[%rd10], %r9;
$L__BB0_2:
	ret;
}
.visible .entry spin(
	.param .u64 spin_param_0,
	.param .u64 spin_param_1
)
{
	.reg .pred 	%p<6>;
	.reg .b64 	%rd<32>;
	ld.param.u64 	%rd15, [spin_param_0];
	ld.param.u64 	%rd16, [spin_param_1];
	setp.lt.s64 	%p1, %rd15, 1;
	mov.u64 	%rd31, 1;
	@%p1 bra 	$L__BB1_7;
	add.s64 	%rd20, %rd15, -1;
	and.b64  	%rd1, %rd15, 3;
	setp.lt.u64 	%p2, %rd20, 3;
	mov.u64 	%rd31, 1;
	@%p2 bra 	$L__BB1_4;
	sub.s64 	%rd25, %rd1, %rd15;
	mov.u64 	%rd31, 1;
$L__BB1_3:
	mul.lo.s64 	%rd22, %rd31, -338549647893938671;
	add.s64 	%rd31, %rd22, 7401132627792533940;
	add.s64 	%rd25, %rd25, 4;
	setp.ne.s64 	%p3, %rd25, 0;
	@%p3 bra 	$L__BB1_3;
$L__BB1_4:
	setp.eq.s64 	%p4, %rd1, 0;
	@%p4 bra 	$L__BB1_7;
	neg.s64 	%rd29, %rd1;
$L__BB1_6:
	mul.lo.s64 	%rd23, %rd31, 6364136223846793005;
	add.s64 	%rd31, %rd23, 1442695040888963407;
	add.s64 	%rd29, %rd29, 1;
	setp.ne.s64 	%p5, %rd29, 0;
	@%p5 bra 	$L__BB1_6;
$L__BB1_7:
	cvta.to.global.u64 	%rd24, %rd16;
	st.global.u64 	[%rd24], %rd31;
	ret;
}
.visible .entry fault(
	.param .u64 fault_param_0
)
{
	.reg .b32 	%r<2>;
	.reg .b64 	%rd<4>;
	ld.param.u64 	%rd1, [fault_param_0];
	cvta.to.global.u64 	%rd2, %rd1;
	add.s64 	%rd3, %rd2, 4398046511104;
	mov.u32 	%r1, 1;
	st.global.u32 	[%rd3], %r1;
	ret;
}
)PTX";
// The driver test double's image format (tests/cpu/fakecuda): kernel names and parameter sizes.
static const char fake_image[] = "fakecubin\nvadd:8,8,8,4\nspin:8,8\nfault:8\n";

// The runtime's own kernel (mode rt): its fatbin is registered at start and loaded by the
// runtime at the first launch, so a client killed early dies loading it.
__global__ void rt_vadd(const unsigned *a, const unsigned *b, unsigned *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i] + 2u;
}

enum { NVARIANTS = 3, MAX_LIVE = 32 };

static const char *mode = "?";
static bool fake;
static bool no_register; // STRESS_NO_REGISTER=1: no cuMemHostRegister in the pinned work
static size_t max_bytes = 64u << 20;
static unsigned long long rng_state;
static CUmodule modules[NVARIANTS];
static CUfunction f_vadd, f_spin, f_fault;
static CUstream stream;
static CUdeviceptr scratch;

static double now_ms()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static unsigned long long rnd()
{
    // xorshift64*: enough for sizes and choices
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static size_t rnd_below(size_t n)
{
    return n ? (size_t)(rnd() % n) : 0;
}

// A size between lo and hi, spread evenly over the powers of two (small ones as often as large).
static size_t rnd_size(size_t lo, size_t hi)
{
    if (hi > max_bytes)
        hi = max_bytes;
    if (hi <= lo)
        return lo;
    int bits_lo = 0, bits_hi = 0;
    while ((size_t)1 << (bits_lo + 1) <= lo)
        bits_lo++;
    while ((size_t)1 << (bits_hi + 1) <= hi)
        bits_hi++;
    int b = bits_lo + (int)rnd_below((size_t)(bits_hi - bits_lo + 1));
    size_t base = (size_t)1 << b;
    size_t n = base + rnd_below(base);
    return n < lo ? lo : n > hi ? hi : n;
}

static void cu_failed(const char *call, CUresult r, int line)
{
    const char *name = nullptr;
    if (cuGetErrorName(r, &name) != CUDA_SUCCESS || !name)
        name = "?";
    printf("error %d %s %.3f\n", (int)r, name, now_ms());
    fprintf(stderr, "stress %s [%d]: line %d: %s failed: %s (%d)\n", mode, (int)getpid(), line,
            call, name, (int)r);
    exit(1);
}

static void rt_failed(const char *call, cudaError_t e, int line)
{
    printf("error %d %s %.3f\n", (int)e, cudaGetErrorName(e), now_ms());
    fprintf(stderr, "stress %s [%d]: line %d: %s failed: %s\n", mode, (int)getpid(), line, call,
            cudaGetErrorString(e));
    exit(1);
}

static void mismatch(int line, const char *fmt, ...)
{
    va_list ap;
    printf("mismatch line %d\n", line);
    fprintf(stderr, "stress %s [%d]: line %d: wrong result: ", mode, (int)getpid(), line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS)                                                                    \
            cu_failed(#call, r_, __LINE__);                                                        \
    } while (0)
#define RT(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            rt_failed(#call, e_, __LINE__);                                                        \
    } while (0)

// A pattern with no short period, different per salt.
static void fill(unsigned char *p, size_t n, unsigned salt)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)((unsigned)((i + salt) * 2654435761u) >> 24);
}

static void expect_same(const unsigned char *want, const unsigned char *got, size_t n, int line,
                        const char *what)
{
    if (memcmp(want, got, n) != 0) {
        size_t i = 0;
        while (i < n && want[i] == got[i])
            i++;
        mismatch(line, "%s: %zu bytes, first difference at %zu (%u, want %u)", what, n, i, got[i],
                 want[i]);
    }
}

static void image_for(int v, std::vector<char> &img)
{
    const char *base = fake ? fake_image : ptx_image;
    char tail[64];
    // A PTX comment, or (for the test double) one more kernel line, makes each copy distinct.
    snprintf(tail, sizeof(tail), fake ? "v%d:4\n" : "// variant %d\n", v);
    img.assign(base, base + strlen(base));
    img.insert(img.end(), tail, tail + strlen(tail));
    img.push_back('\0');
}

static void init_driver()
{
    CUdevice dev;
    CUcontext ctx;
    std::vector<char> img;

    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    image_for(0, img);
    CK(cuModuleLoadData(&modules[0], img.data()));
    CK(cuModuleGetFunction(&f_vadd, modules[0], "vadd"));
    CK(cuModuleGetFunction(&f_spin, modules[0], "spin"));
    CK(cuModuleGetFunction(&f_fault, modules[0], "fault"));
    CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&scratch, 64));
}

static void launch_vadd(CUfunction f, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, int n,
                        CUstream s)
{
    void *args[] = {&a, &b, &c, &n};
    CK(cuLaunchKernel(f, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, s, args, nullptr));
}

static void launch_spin(long long iterations, CUstream s)
{
    CUdeviceptr out = scratch;
    void *args[] = {&iterations, &out};
    CK(cuLaunchKernel(f_spin, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
}

// Inputs for vadd in a and b (n words each, host copies returned), c = a + b + 1 checked.
static void vadd_checked(CUfunction f, int n, CUstream s, int launches)
{
    std::vector<unsigned> ha(n), hb(n), hc(n);
    CUdeviceptr a, b, c;
    unsigned salt = (unsigned)rnd();

    for (int i = 0; i < n; i++)
        ha[i] = i * 3u + salt, hb[i] = (unsigned)i ^ salt;
    CK(cuMemAlloc(&a, n * sizeof(unsigned)));
    CK(cuMemAlloc(&b, n * sizeof(unsigned)));
    CK(cuMemAlloc(&c, n * sizeof(unsigned)));
    CK(cuMemcpyHtoDAsync(a, ha.data(), n * sizeof(unsigned), s));
    CK(cuMemcpyHtoDAsync(b, hb.data(), n * sizeof(unsigned), s));
    for (int i = 0; i < launches; i++)
        launch_vadd(f, a, b, c, n, s);
    CK(cuMemcpyDtoHAsync(hc.data(), c, n * sizeof(unsigned), s));
    CK(cuStreamSynchronize(s));
    if (!fake)
        for (int i = 0; i < n; i++)
            if (hc[i] != ha[i] + hb[i] + 1u)
                mismatch(__LINE__, "vadd[%d] = %u, want %u", i, hc[i], ha[i] + hb[i] + 1u);
    CK(cuMemFree(a));
    CK(cuMemFree(b));
    CK(cuMemFree(c));
}

static void op_launch()
{
    // Sometimes a kernel of a millisecond or so in front, so that kills find kernels running.
    if (rnd_below(4) == 0)
        launch_spin((long long)rnd_size(1000, 1000000), stream);
    vadd_checked(f_vadd, (int)rnd_size(1, 1 << 20), stream, 1 + (int)rnd_below(16));
}

// One round trip through pageable memory, unaligned at both ends; synchronous or on a stream.
static void round_trip(size_t n)
{
    std::vector<unsigned char> h(n + 1), back(n + 3);
    CUdeviceptr d;
    unsigned salt = (unsigned)rnd();

    fill(h.data() + 1, n, salt);
    CK(cuMemAlloc(&d, n));
    if (rnd_below(2)) {
        CK(cuMemcpyHtoDAsync(d, h.data() + 1, n, stream));
        CK(cuMemcpyDtoHAsync(back.data() + 3, d, n, stream));
        CK(cuStreamSynchronize(stream));
    } else {
        CK(cuMemcpyHtoD(d, h.data() + 1, n));
        CK(cuMemcpyDtoH(back.data() + 3, d, n));
    }
    expect_same(h.data() + 1, back.data() + 3, n, __LINE__, "pageable round trip");
    CK(cuMemFree(d));
}

static void op_pageable()
{
    // bytes in the call (at most 4 KiB), the ring (under 256 KiB), now and then the staging area
    static const size_t fixed[] = {1, 4, 4096, 4097, 65536, 200000, (256 << 10) - 1};
    if (rnd_below(2))
        round_trip(fixed[rnd_below(sizeof(fixed) / sizeof(fixed[0]))]);
    else
        round_trip(rnd_size(1, rnd_below(8) ? 256 << 10 : 4 << 20));
}

static void op_staged()
{
    // The pipelined staging area: 256 KiB and more, up to 64 MiB, and a device-to-device copy.
    size_t n = rnd_size(256 << 10, 64 << 20);
    std::vector<unsigned char> h(n), back(n);
    CUdeviceptr d, d2;

    fill(h.data(), n, (unsigned)rnd());
    CK(cuMemAlloc(&d, n));
    CK(cuMemAlloc(&d2, n));
    CK(cuMemcpyHtoD(d, h.data(), n));
    CK(cuMemcpyDtoDAsync(d2, d, n, stream));
    CK(cuStreamSynchronize(stream));
    CK(cuMemcpyDtoH(back.data(), d2, n));
    expect_same(h.data(), back.data(), n, __LINE__, "staged round trip");
    CK(cuMemFree(d));
    CK(cuMemFree(d2));
}

static void *pinned_alloc(size_t n)
{
    void *p = nullptr;
    switch (rnd_below(4)) {
    case 0: CK(cuMemAllocHost(&p, n)); break;
    case 1: CK(cuMemHostAlloc(&p, n, 0)); break;
    case 2: CK(cuMemHostAlloc(&p, n, CU_MEMHOSTALLOC_PORTABLE)); break;
    default: CK(cuMemHostAlloc(&p, n, CU_MEMHOSTALLOC_DEVICEMAP)); break;
    }
    return p;
}

static void op_pinned()
{
    size_t n = rnd_size(4096, 32 << 20);
    unsigned char *src = (unsigned char *)pinned_alloc(n);
    unsigned char *dst = (unsigned char *)pinned_alloc(n);
    CUdeviceptr d;

    fill(src, n, (unsigned)rnd());
    memset(dst, 0, n);
    CK(cuMemAlloc(&d, n));
    CK(cuMemcpyHtoDAsync(d, src, n, stream));
    CK(cuMemcpyDtoHAsync(dst, d, n, stream));
    CK(cuStreamSynchronize(stream));
    expect_same(src, dst, n, __LINE__, "pinned round trip");
    CK(cuMemFree(d));
    CK(cuMemFreeHost(src));
    CK(cuMemFreeHost(dst));
    if (rnd_below(4) == 0 && !no_register) {
        // memory of the program's own, registered and unregistered
        size_t m = rnd_size(4096, 8 << 20), page = (size_t)sysconf(_SC_PAGESIZE);
        m = (m + page - 1) / page * page;
        unsigned char *own = (unsigned char *)aligned_alloc(page, m);
        std::vector<unsigned char> want(m);
        if (!own)
            mismatch(__LINE__, "aligned_alloc(%zu) failed", m);
        fill(own, m, (unsigned)rnd());
        memcpy(want.data(), own, m);
        CK(cuMemHostRegister(own, m, 0));
        CK(cuMemAlloc(&d, m));
        CK(cuMemcpyHtoDAsync(d, own, m, stream));
        CK(cuStreamSynchronize(stream));
        memset(own, 0, m);
        CK(cuMemcpyDtoHAsync(own, d, m, stream));
        CK(cuStreamSynchronize(stream));
        expect_same(want.data(), own, m, __LINE__, "registered round trip");
        CK(cuMemHostUnregister(own));
        CK(cuMemFree(d));
        free(own);
    }
}

static void op_module()
{
    std::vector<char> img;
    CUmodule m;
    CUfunction f;

    image_for((int)rnd_below(NVARIANTS), img);
    CK(cuModuleLoadData(&m, img.data()));
    CK(cuModuleGetFunction(&f, m, "vadd"));
    vadd_checked(f, (int)rnd_size(1, 1 << 16), stream, 1);
    CK(cuModuleUnload(m));
}

struct live {
    CUdeviceptr p;
    size_t n;
    unsigned char v;
};
static live lives[MAX_LIVE];
static int nlive;

static void free_one(int i)
{
    // Checked before it goes: the first bytes still hold the value set.
    unsigned char got[256];
    size_t k = lives[i].n < sizeof(got) ? lives[i].n : sizeof(got);
    CK(cuMemcpyDtoH(got, lives[i].p, k));
    for (size_t j = 0; j < k; j++)
        if (got[j] != lives[i].v)
            mismatch(__LINE__, "allocation of %zu bytes: byte %zu is %u, want %u", lives[i].n, j,
                     got[j], lives[i].v);
    CK(cuMemFree(lives[i].p));
    lives[i] = lives[--nlive];
}

static void op_alloc()
{
    // Allocations that live a while: up to 32 at once, 1 byte to 64 MiB, each set to a value.
    for (int k = 0; k < 8; k++) {
        if (nlive == MAX_LIVE || (nlive > 0 && rnd_below(2))) {
            free_one((int)rnd_below((size_t)nlive));
        } else {
            live &l = lives[nlive];
            l.n = rnd_size(1, 64 << 20);
            l.v = (unsigned char)rnd();
            CK(cuMemAlloc(&l.p, l.n));
            CK(cuMemsetD8Async(l.p, l.v, l.n, stream));
            CK(cuStreamSynchronize(stream));
            nlive++;
        }
    }
}

static void op_streams()
{
    // A few streams and events of their own, work on each, one waiting for another's event.
    enum { MAXS = 4 };
    CUstream s[MAXS];
    CUevent e[MAXS];
    int ns = 1 + (int)rnd_below(MAXS);
    for (int i = 0; i < ns; i++) {
        if (rnd_below(2)) {
            CK(cuStreamCreate(&s[i], rnd_below(2) ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT));
        } else {
            int least = 0, greatest = 0;
            if (!fake) // not in the test double
                CK(cuCtxGetStreamPriorityRange(&least, &greatest));
            CK(cuStreamCreateWithPriority(&s[i], CU_STREAM_NON_BLOCKING, greatest));
        }
        CK(cuEventCreate(&e[i], rnd_below(2) ? CU_EVENT_DISABLE_TIMING : CU_EVENT_DEFAULT));
    }
    for (int i = 0; i < ns; i++) {
        if (i > 0)
            CK(cuStreamWaitEvent(s[i], e[i - 1], 0));
        if (rnd_below(3) == 0)
            launch_spin((long long)rnd_size(1000, 200000), s[i]);
        vadd_checked(f_vadd, (int)rnd_size(1, 1 << 16), s[i], 1);
        CK(cuEventRecord(e[i], s[i]));
    }
    CK(cuEventSynchronize(e[ns - 1]));
    for (int i = 0; i < ns; i++) {
        CK(cuEventDestroy(e[i]));
        CK(cuStreamDestroy(s[i]));
    }
}

static void op_mixed()
{
    switch (rnd_below(14)) {
    case 0:
    case 1:
    case 2: op_launch(); break;
    case 3:
    case 4:
    case 5: op_pageable(); break;
    case 6: op_staged(); break;
    case 7:
    case 8: op_pinned(); break;
    case 9: op_module(); break;
    case 10:
    case 11: op_alloc(); break;
    default: op_streams(); break;
    }
}

static void op_rt()
{
    int n = (int)rnd_size(1, 1 << 20);
    size_t bytes = n * sizeof(unsigned);
    std::vector<unsigned> ha(n), hb(n);
    unsigned *pinned, *a, *b, *c;
    cudaStream_t s;
    unsigned salt = (unsigned)rnd();

    for (int i = 0; i < n; i++)
        ha[i] = i * 5u + salt, hb[i] = (unsigned)i ^ ~salt;
    RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    RT(cudaMalloc(&a, bytes));
    RT(cudaMalloc(&b, bytes));
    RT(cudaMalloc(&c, bytes));
    RT(cudaHostAlloc(&pinned, bytes, rnd_below(2) ? cudaHostAllocDefault : cudaHostAllocMapped));
    RT(cudaMemcpy(a, ha.data(), bytes, cudaMemcpyHostToDevice)); // pageable
    memcpy(pinned, hb.data(), bytes);
    RT(cudaMemcpyAsync(b, pinned, bytes, cudaMemcpyHostToDevice, s)); // pinned
    rt_vadd<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
    RT(cudaGetLastError());
    RT(cudaMemcpyAsync(pinned, c, bytes, cudaMemcpyDeviceToHost, s));
    RT(cudaStreamSynchronize(s));
    for (int i = 0; i < n; i++)
        if (pinned[i] != ha[i] + hb[i] + 2u)
            mismatch(__LINE__, "rt_vadd[%d] = %u, want %u", i, pinned[i], ha[i] + hb[i] + 2u);
    RT(cudaFreeHost(pinned));
    RT(cudaFree(a));
    RT(cudaFree(b));
    RT(cudaFree(c));
    RT(cudaStreamDestroy(s));
}

static int run_fault()
{
    // The launch's time is the fault's (the kernel starts at once and faults at its first store).
    CUresult r;
    printf("launch %.3f\n", now_ms());
    void *args[] = {&scratch};
    r = cuLaunchKernel(f_fault, 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr);
    if (r == CUDA_SUCCESS)
        r = cuStreamSynchronize(stream);
    if (r == CUDA_SUCCESS)
        r = cuCtxSynchronize();
    if (r == CUDA_SUCCESS) {
        printf("nofault %.3f\n", now_ms());
        fprintf(stderr, "stress fault: the out-of-bounds kernel reported no error\n");
        return 3;
    }
    cu_failed("the out-of-bounds kernel", r, __LINE__);
    return 1;
}

struct options {
    double seconds = 0;
    long iters = 0;
    const char *stop = nullptr;
    int pause_ms = 0;
};

static int usage()
{
    fprintf(stderr, "usage: stress MODE [--seconds S] [--iters N] [--stop FILE] [--pause-ms N] "
                    "[--max-mib N]\n  MODE: launch pageable staged pinned module alloc streams "
                    "mixed rt fault probe\n");
    return 64;
}

int main(int argc, char **argv)
{
    options o;
    void (*op)() = nullptr;

    setvbuf(stdout, nullptr, _IONBF, 0);
    if (argc < 2)
        return usage();
    mode = argv[1];
    for (int i = 2; i < argc; i++) {
        if (i + 1 >= argc)
            return usage();
        if (!strcmp(argv[i], "--seconds"))
            o.seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--iters"))
            o.iters = atol(argv[++i]);
        else if (!strcmp(argv[i], "--stop"))
            o.stop = argv[++i];
        else if (!strcmp(argv[i], "--pause-ms"))
            o.pause_ms = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--max-mib"))
            max_bytes = (size_t)atol(argv[++i]) << 20;
        else
            return usage();
    }
    if (max_bytes < (1u << 20))
        max_bytes = 1u << 20;
    const char *f = getenv("STRESS_FAKE");
    fake = f && *f && strcmp(f, "0") != 0;
    const char *nr = getenv("STRESS_NO_REGISTER");
    no_register = nr && *nr && strcmp(nr, "0") != 0;
    rng_state = ((unsigned long long)getpid() << 32) ^ (unsigned long long)(now_ms() * 1000) ^
                0x9e3779b97f4a7c15ull;
    if (!rng_state)
        rng_state = 1;
    double t0 = now_ms();
    printf("start %.3f\n", t0);

    static const struct {
        const char *name;
        void (*fn)();
    } ops[] = {{"launch", op_launch},   {"pageable", op_pageable}, {"staged", op_staged},
               {"pinned", op_pinned},   {"module", op_module},     {"alloc", op_alloc},
               {"streams", op_streams}, {"mixed", op_mixed},       {"rt", op_rt}};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (!strcmp(mode, ops[i].name))
            op = ops[i].fn;
    if (!op && strcmp(mode, "fault") != 0 && strcmp(mode, "probe") != 0)
        return usage();

    if (op == op_rt) {
        if (fake) {
            fprintf(stderr, "stress: mode rt needs a GPU (the test double has no runtime)\n");
            return 64;
        }
        RT(cudaFree(nullptr)); // the runtime's context and its registered module
    } else {
        init_driver();
    }
    printf("up %.3f\n", now_ms());
    if (!strcmp(mode, "fault"))
        return run_fault();
    if (!strcmp(mode, "probe")) {
        vadd_checked(f_vadd, 4096, stream, 1);
        printf("first_kernel_done %.3f\n", now_ms());
        return 0;
    }

    long n = 0;
    for (;;) {
        op();
        if (++n == 1)
            printf("ready %.3f\n", now_ms());
        if (o.iters && n >= o.iters)
            break;
        if (o.seconds > 0 && now_ms() - t0 >= o.seconds * 1e3)
            break;
        if (o.stop && access(o.stop, F_OK) == 0)
            break;
        if (o.pause_ms > 0)
            usleep((useconds_t)rnd_below((size_t)o.pause_ms * 1000));
    }
    while (nlive > 0)
        free_one(nlive - 1);
    if (op == op_rt) {
        RT(cudaDeviceSynchronize());
    } else {
        CK(cuStreamSynchronize(stream));
        CK(cuMemFree(scratch));
        CK(cuStreamDestroy(stream));
    }
    printf("ok %s iters %ld ms %.0f\n", mode, n, now_ms() - t0);
    return 0;
}
