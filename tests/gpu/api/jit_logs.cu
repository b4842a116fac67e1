// SPDX-License-Identifier: MIT
// The JIT's logs (issue #24: under openmps the info log held fewer lines than natively). A PTX
// kernel, made unique to this process by a comment (so that the server compiles it for this
// load, as the driver does natively, rather than finding it loaded), is loaded with
// cuModuleLoadDataEx and verbose logs, then linked with cuLinkCreate/cuLinkAddData (the input's
// own logs too)/cuLinkComplete; a PTX that does not compile fills the error log. Every log is
// printed line by line with the size the driver wrote back (the runner compares them with
// native); the wall time is only checked to be set. The kernels run.
// openmps-gpu-link: -lcuda
#define PROG "jit_logs"
#include "api.h"
#include <cctype>
#include <cstring>
#include <string>
#include <unistd.h>

static const char *ptx_body = ".version 7.0\n"
                              ".target sm_52\n"
                              ".address_size 64\n"
                              ".visible .entry add1(.param .u64 p)\n"
                              "{\n"
                              "  .reg .b32 r<3>;\n"
                              "  .reg .b64 rd<3>;\n"
                              "  ld.param.u64 rd1, [p];\n"
                              "  cvta.to.global.u64 rd2, rd1;\n"
                              "  ld.global.u32 r1, [rd2];\n"
                              "  add.s32 r2, r1, 1;\n"
                              "  st.global.u32 [rd2], r2;\n"
                              "  ret;\n"
                              "}\n";

// The size as the driver's rule (the text and its NUL), and the compiler's own timings masked:
// they differ from run to run, natively too.
static void print_log(const char *what, const char *log, size_t size)
{
    if (size == strlen(log) + 1)
        printf("%s: size strlen + 1\n", what);
    else
        printf("%s: size %zu, strlen %zu\n", what, size, strlen(log));
    std::string s(log);
    for (size_t t = s.find("time = "); t != std::string::npos; t = s.find("time = ", t + 1))
        for (size_t i = t + 7; i < s.size() && (isdigit((unsigned char)s[i]) || s[i] == '.'); i++)
            s[i] = '#';
    size_t at = 0;
    while (at < s.size()) {
        size_t nl = s.find('\n', at);
        std::string line = s.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
        printf("  | %s\n", line.c_str());
        at = nl == std::string::npos ? s.size() : nl + 1;
    }
}

static void run_add1(CUfunction f)
{
    CUdeviceptr d;
    unsigned v = 41;
    CU(cuMemAlloc(&d, 4));
    CU(cuMemcpyHtoD(d, &v, 4));
    void *args[] = {&d};
    CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
    CU(cuMemcpyDtoH(&v, d, 4));
    EXPECT_EQ(v, 42);
    CU(cuMemFree(d));
}

int main()
{
    RT(cudaFree(0));
    std::string ptx = std::string("// process ") + std::to_string((long)getpid()) + "\n" + ptx_body;
    static char info[16384], error[16384];

    // cuModuleLoadDataEx with logs
    CUjit_option o[] = {CU_JIT_INFO_LOG_BUFFER,  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                        CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                        CU_JIT_LOG_VERBOSE,      CU_JIT_WALL_TIME};
    void *v[] = {
        info,   (void *)(size_t)sizeof info, error, (void *)(size_t)sizeof error, (void *)(size_t)1,
        nullptr};
    CUmodule mod;
    CUfunction f;
    CU(cuModuleLoadDataEx(&mod, ptx.c_str(), 6, o, v));
    print_log("load info log", info, (size_t)v[1]);
    print_log("load error log", error, (size_t)v[3]);
    CU(cuModuleGetFunction(&f, mod, "add1"));
    run_add1(f);

    // the linker: the link state's logs and the input's own
    static char in_info[16384];
    std::string ptx2 = ptx + "// linked\n";
    memset(info, 0, sizeof info);
    void *lv[] = {
        info,   (void *)(size_t)sizeof info, error, (void *)(size_t)sizeof error, (void *)(size_t)1,
        nullptr};
    CUlinkState st;
    CU(cuLinkCreate(6, o, lv, &st));
    CUjit_option io[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                         CU_JIT_LOG_VERBOSE};
    void *iv[] = {in_info, (void *)(size_t)sizeof in_info, (void *)(size_t)1};
    // Driver 580 (H200) refuses an input's own log options (CUDA_ERROR_INVALID_VALUE); openmps
    // must answer the same, and the input then goes in without them.
    CUresult added = cuLinkAddData(st, CU_JIT_INPUT_PTX, (void *)ptx2.c_str(), ptx2.size() + 1,
                                   "add1.ptx", 3, io, iv);
    printf("cuLinkAddData with the input's own logs: %d\n", (int)added);
    if (added == CUDA_SUCCESS)
        print_log("input info log", in_info, (size_t)iv[1]);
    else
        CU(cuLinkAddData(st, CU_JIT_INPUT_PTX, (void *)ptx2.c_str(), ptx2.size() + 1, "add1.ptx",
                         0, nullptr, nullptr));
    void *cubin;
    size_t cubin_size;
    CU(cuLinkComplete(st, &cubin, &cubin_size));
    print_log("link info log", info, (size_t)lv[1]);
    print_log("link error log", error, (size_t)lv[3]);
    CUmodule mod2;
    CU(cuModuleLoadData(&mod2, cubin));
    CU(cuLinkDestroy(st));
    CU(cuModuleGetFunction(&f, mod2, "add1"));
    run_add1(f);

    // a PTX that does not compile: the error log
    std::string bad = std::string("// process ") + std::to_string((long)getpid()) +
                      "\n.version 7.0\n.target sm_52\n.address_size 64\n"
                      ".visible .entry broken() { nonsense r1; ret; }\n";
    memset(error, 0, sizeof error);
    v[3] = (void *)(size_t)sizeof error;
    CUresult r = cuModuleLoadDataEx(&mod, bad.c_str(), 6, o, v);
    printf("broken PTX: %d\n", (int)r);
    print_log("broken error log", error, (size_t)v[3]);
    EXPECT(r != CUDA_SUCCESS && error[0] != 0);
    return 0;
}
