// SPDX-License-Identifier: MIT
// Code compiled and linked at run time, for the architecture the device reports
// (cuDeviceGetAttribute compute capability, never hard-coded):
// * NVRTC to PTX (compute_XY, C++17, a template kernel found through nvrtcAddNameExpression /
//   nvrtcGetLoweredName), loaded with cuModuleLoadData, launched with cuLaunchKernel;
// * NVRTC to a CUBIN (sm_XY, nvrtcGetCUBIN), loaded with cuModuleLoadData and launched;
// * nvJitLink of two relocatable PTX modules from NVRTC (a kernel and the device function it
//   calls, -rdc=true), the linked cubin loaded with cuModuleLoadData and launched;
// * nvJitLink of the same two modules as LTO-IR (NVRTC -dlto, nvJitLink -lto), the linked cubin
//   loaded with cuLibraryLoadData, its kernel found with cuLibraryGetKernel and launched both
//   through cuKernelGetFunction and as a CUkernel given to cuLaunchKernel.
// Each result is compared with the CPU within 1e-5 relative to max(1, |value|) (the device may
// contract a multiply and an add into one fma).
// openmps-gpu-link: -lcuda -lnvrtc -lnvJitLink
#define PROG "nvrtc_jitlink"
#include "api.h"
#include <cstring>
#include <nvJitLink.h>
#include <nvrtc.h>
#include <string>
#include <vector>

static const char *kSaxpy = R"(
template <typename T>
__global__ void scaled_add(T a, const T *x, T *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}
)";

static const char *kPolyLib = R"(
extern "C" __device__ float openmps_poly(float v)
{
    return (v * 3.0f - 1.0f) * v + 0.5f;
}
)";

static const char *kPolyUser = R"(
extern "C" __device__ float openmps_poly(float v);
extern "C" __global__ void apply_poly(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = 2.0f * openmps_poly(x[i]);
}
)";

#define NVRTC(call)                                                                                \
    do {                                                                                           \
        nvrtcResult r_ = (call);                                                                   \
        if (r_ != NVRTC_SUCCESS) {                                                                 \
            fprintf(stderr, "%s: line %d: %s returned %d (%s)\n", PROG, __LINE__, #call, (int)r_,  \
                    nvrtcGetErrorString(r_));                                                      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum Output { PTX, CUBIN, LTOIR };

// Compiles src with NVRTC; returns the output of the kind asked for. name, when given, is a
// name expression whose lowered (mangled) name is returned in *lowered.
static std::vector<char> compile(const char *src, const char *file,
                                 const std::vector<std::string> &opts, Output out,
                                 const char *name = nullptr, std::string *lowered = nullptr)
{
    nvrtcProgram prog;
    NVRTC(nvrtcCreateProgram(&prog, src, file, 0, nullptr, nullptr));
    if (name)
        NVRTC(nvrtcAddNameExpression(prog, name));
    std::vector<const char *> o;
    for (const std::string &s : opts)
        o.push_back(s.c_str());
    nvrtcResult r = nvrtcCompileProgram(prog, (int)o.size(), o.data());
    size_t logSize = 0;
    nvrtcGetProgramLogSize(prog, &logSize);
    if (r != NVRTC_SUCCESS) {
        std::string log(logSize, '\0');
        nvrtcGetProgramLog(prog, &log[0]);
        fprintf(stderr, "%s: nvrtc compiling %s: %s\n%s\n", PROG, file, nvrtcGetErrorString(r),
                log.c_str());
        exit(1);
    }
    if (name) {
        const char *l = nullptr;
        NVRTC(nvrtcGetLoweredName(prog, name, &l));
        *lowered = l;
    }
    size_t size = 0;
    std::vector<char> code;
    switch (out) {
    case PTX:
        NVRTC(nvrtcGetPTXSize(prog, &size));
        code.resize(size);
        NVRTC(nvrtcGetPTX(prog, code.data()));
        break;
    case CUBIN:
        NVRTC(nvrtcGetCUBINSize(prog, &size));
        code.resize(size);
        NVRTC(nvrtcGetCUBIN(prog, code.data()));
        break;
    case LTOIR:
        NVRTC(nvrtcGetLTOIRSize(prog, &size));
        code.resize(size);
        NVRTC(nvrtcGetLTOIR(prog, code.data()));
        break;
    }
    NVRTC(nvrtcDestroyProgram(&prog));
    EXPECT(size > 0);
    return code;
}

static void jl_check(nvJitLinkHandle h, nvJitLinkResult r, const char *what, int line)
{
    if (r == NVJITLINK_SUCCESS)
        return;
    size_t n = 0;
    std::string log;
    if (nvJitLinkGetErrorLogSize(h, &n) == NVJITLINK_SUCCESS && n) {
        log.resize(n);
        nvJitLinkGetErrorLog(h, &log[0]);
    }
    fprintf(stderr, "%s: line %d: %s returned %d\n%s\n", PROG, line, what, (int)r, log.c_str());
    exit(1);
}
#define JL(h, call) jl_check(h, (call), #call, __LINE__)

// Links the two inputs (PTX or LTO-IR) into a cubin for sm_<arch>.
static std::vector<char> jitlink(int arch, nvJitLinkInputType kind, const std::vector<char> &a,
                                 const std::vector<char> &b)
{
    std::string archOpt = "-arch=sm_" + std::to_string(arch);
    const char *opts[2] = {archOpt.c_str(), "-lto"};
    nvJitLinkHandle h;
    nvJitLinkResult r = nvJitLinkCreate(&h, kind == NVJITLINK_INPUT_LTOIR ? 2 : 1, opts);
    if (r != NVJITLINK_SUCCESS) {
        fprintf(stderr, "%s: nvJitLinkCreate returned %d\n", PROG, (int)r);
        exit(1);
    }
    JL(h, nvJitLinkAddData(h, kind, a.data(), a.size(), "poly_user"));
    JL(h, nvJitLinkAddData(h, kind, b.data(), b.size(), "poly_lib"));
    JL(h, nvJitLinkComplete(h));
    size_t size = 0;
    JL(h, nvJitLinkGetLinkedCubinSize(h, &size));
    EXPECT(size > 0);
    std::vector<char> cubin(size);
    JL(h, nvJitLinkGetLinkedCubin(h, cubin.data()));
    JL(h, nvJitLinkDestroy(&h));
    return cubin;
}

static const int N = 10000;

static void fill(std::vector<float> &v, unsigned salt)
{
    for (size_t i = 0; i < v.size(); i++)
        v[i] = (float)((i * 2654435761u + salt * 40503u) % 2001u) / 1000.0f - 1.0f;
}

// Launches f on (x, y, n) or (a, x, y, n) and returns y.
static std::vector<float> launch(CUfunction f, bool withScale, float a, CUdeviceptr dx,
                                 CUdeviceptr dy, const std::vector<float> &y0, CUstream s)
{
    int n = N;
    CU(cuMemcpyHtoDAsync(dy, y0.data(), N * sizeof(float), s));
    void *argsScaled[] = {&a, &dx, &dy, &n};
    void *argsPlain[] = {&dx, &dy, &n};
    CU(cuLaunchKernel(f, (N + 255) / 256, 1, 1, 256, 1, 1, 0, s, withScale ? argsScaled : argsPlain,
                      nullptr));
    std::vector<float> y(N);
    CU(cuMemcpyDtoHAsync(y.data(), dy, N * sizeof(float), s));
    CU(cuStreamSynchronize(s));
    return y;
}

int main()
{
    CUdevice dev;
    CUcontext ctx;
    CU(cuInit(0));
    CU(cuDeviceGet(&dev, 0));
    CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU(cuCtxSetCurrent(ctx));
    int major = 0, minor = 0;
    CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CU(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    const int arch = major * 10 + minor;
    int vmaj = 0, vmin = 0;
    NVRTC(nvrtcVersion(&vmaj, &vmin));
    fprintf(stderr, "%s: device sm_%d, nvrtc %d.%d\n", PROG, arch, vmaj, vmin);
    const std::string compute = "--gpu-architecture=compute_" + std::to_string(arch);
    const std::string sm = "--gpu-architecture=sm_" + std::to_string(arch);

    CUstream s;
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    std::vector<float> x(N), y0(N), ref(N);
    fill(x, 1);
    fill(y0, 2);
    CUdeviceptr dx, dy;
    CU(cuMemAlloc(&dx, N * sizeof(float)));
    CU(cuMemAlloc(&dy, N * sizeof(float)));
    CU(cuMemcpyHtoD(dx, x.data(), N * sizeof(float)));

    // ---- NVRTC -> PTX, a template kernel by its lowered name
    const float a = 1.75f;
    for (int i = 0; i < N; i++)
        ref[i] = a * x[i] + y0[i];
    std::string lowered;
    std::vector<char> ptx =
        compile(kSaxpy, "saxpy.cu", {compute, "-std=c++17"}, PTX, "scaled_add<float>", &lowered);
    EXPECT(strstr(ptx.data(), ".entry") != nullptr);
    CUmodule mod;
    CUfunction f;
    CU(cuModuleLoadData(&mod, ptx.data()));
    CU(cuModuleGetFunction(&f, mod, lowered.c_str()));
    std::vector<float> y = launch(f, true, a, dx, dy, y0, s);
    EXPECT_FLOATS("nvrtc ptx", y.data(), ref.data(), N, 1e-5f);
    CU(cuModuleUnload(mod));
    printf("nvrtc: ptx for the device's compute capability, a template kernel by its lowered "
           "name: within 1e-5 of the CPU\n");

    // ---- NVRTC -> CUBIN
    std::vector<char> cubin =
        compile(kSaxpy, "saxpy.cu", {sm, "-std=c++17"}, CUBIN, "scaled_add<float>", &lowered);
    CU(cuModuleLoadData(&mod, cubin.data()));
    CU(cuModuleGetFunction(&f, mod, lowered.c_str()));
    y = launch(f, true, a, dx, dy, y0, s);
    EXPECT_FLOATS("nvrtc cubin", y.data(), ref.data(), N, 1e-5f);
    CU(cuModuleUnload(mod));
    printf("nvrtc: cubin for the device's architecture: within 1e-5 of the CPU\n");

    // ---- nvJitLink of relocatable PTX
    for (int i = 0; i < N; i++)
        ref[i] = 2.0f * ((x[i] * 3.0f - 1.0f) * x[i] + 0.5f);
    std::vector<char> userPtx = compile(kPolyUser, "poly_user.cu", {compute, "-rdc=true"}, PTX);
    std::vector<char> libPtx = compile(kPolyLib, "poly_lib.cu", {compute, "-rdc=true"}, PTX);
    cubin = jitlink(arch, NVJITLINK_INPUT_PTX, userPtx, libPtx);
    CU(cuModuleLoadData(&mod, cubin.data()));
    CU(cuModuleGetFunction(&f, mod, "apply_poly"));
    y = launch(f, false, 0, dx, dy, y0, s);
    EXPECT_FLOATS("nvjitlink ptx", y.data(), ref.data(), N, 1e-5f);
    CU(cuModuleUnload(mod));
    printf("nvjitlink: two relocatable ptx modules linked into a cubin: within 1e-5 of the "
           "CPU\n");

    // ---- nvJitLink of LTO-IR, the cubin as a library
    std::vector<char> userIr =
        compile(kPolyUser, "poly_user.cu", {compute, "-rdc=true", "-dlto"}, LTOIR);
    std::vector<char> libIr =
        compile(kPolyLib, "poly_lib.cu", {compute, "-rdc=true", "-dlto"}, LTOIR);
    cubin = jitlink(arch, NVJITLINK_INPUT_LTOIR, userIr, libIr);
    CUlibrary lib;
    CUkernel k;
    CU(cuLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    CU(cuLibraryGetKernel(&k, lib, "apply_poly"));
    CU(cuKernelGetFunction(&f, k));
    y = launch(f, false, 0, dx, dy, y0, s);
    EXPECT_FLOATS("nvjitlink lto (function)", y.data(), ref.data(), N, 1e-5f);
    y = launch((CUfunction)k, false, 0, dx, dy, y0, s);
    EXPECT_FLOATS("nvjitlink lto (kernel)", y.data(), ref.data(), N, 1e-5f);
    CU(cuLibraryUnload(lib));
    printf("nvjitlink: two lto-ir modules linked with -lto, loaded as a library, launched as a "
           "function and as a kernel: within 1e-5 of the CPU\n");

    CU(cuMemFree(dx));
    CU(cuMemFree(dy));
    CU(cuStreamDestroy(s));
    CU(cuDevicePrimaryCtxRelease(dev));
    printf("nvrtc_jitlink done\n");
    return 0;
}
