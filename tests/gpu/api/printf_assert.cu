// SPDX-License-Identifier: MIT
// Device printf and assert. Without arguments: a one-thread kernel prints 8 lines between two
// host lines, and a kernel of 4 x 32 threads one line each; this program's stdout is captured
// in a file meanwhile, checked (the host lines around every device line, the one thread's
// lines in order, each thread's line once), and echoed in a deterministic order. With
// "assert": one thread's assert fails; the program must get cudaErrorAssert (710) from the
// synchronisation, find the assert's message in its stdout or stderr by then (both captured in
// files meanwhile), say which, and exit 0 having printed "assert seen: 710".
// openmps-gpu-runs: - assert
#define PROG "printf_assert"
#include "api.h"
#include <algorithm>
#include <cassert>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

__global__ void one_thread(const int *v)
{
    for (int i = 0; i < 8; i++)
        printf("device line %d: %d\n", i, v[i] * v[i] + 3);
}

__global__ void many_threads(int base)
{
    printf("thread %d.%d: %d\n", blockIdx.x, threadIdx.x, base + blockIdx.x * 32 + threadIdx.x);
}

__global__ void asserting(const int *v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        assert(v[i] != 12345); // false for exactly one element
}

static int do_assert()
{
    const int n = 4096;
    std::vector<int> h(n);
    for (int i = 0; i < n; i++)
        h[i] = i == 1000 ? 12345 : i;
    int *d;
    RT(cudaMalloc(&d, n * sizeof(int)));
    RT(cudaMemcpy(d, h.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    printf("launching a kernel whose assert fails in one thread\n");
    fflush(stdout);
    // stdout and stderr into files while the assert's message is printed (issue #24: under
    // openmps it did not reach the program): it must be there when the synchronisation returns,
    // on the stream the driver writes it to natively (the runner compares the line saying which)
    char out_path[64], err_path[64];
    snprintf(out_path, sizeof out_path, "/tmp/openmps-assert-%d.out", (int)getpid());
    snprintf(err_path, sizeof err_path, "/tmp/openmps-assert-%d.err", (int)getpid());
    FILE *out = fopen(out_path, "w+"), *err = fopen(err_path, "w+");
    EXPECT(out && err);
    fflush(stderr);
    int saved_out = dup(1), saved_err = dup(2);
    EXPECT(dup2(fileno(out), 1) == 1 && dup2(fileno(err), 2) == 2);
    asserting<<<n / 256, 256>>>(d, n);
    cudaError_t e = cudaDeviceSynchronize();
    fflush(stdout);
    fflush(stderr);
    EXPECT(dup2(saved_out, 1) == 1 && dup2(saved_err, 2) == 2);
    close(saved_out);
    close(saved_err);
    if (e != cudaErrorAssert) {
        fprintf(stderr, "%s: expected cudaErrorAssert (710), got %d (%s)\n", PROG, (int)e,
                cudaGetErrorName(e));
        return 1;
    }
    std::string texts[2];
    FILE *files[2] = {out, err};
    for (int k = 0; k < 2; k++) {
        int c;
        rewind(files[k]);
        while ((c = fgetc(files[k])) != EOF)
            texts[k] += (char)c;
        fclose(files[k]);
    }
    unlink(out_path);
    unlink(err_path);
    // "file:line: function: block: [3,0,0], thread: [232,0,0] Assertion `v[i] != 12345` failed."
    const char *want = "block: [3,0,0], thread: [232,0,0] Assertion `v[i] != 12345` failed.";
    bool on_out = texts[0].find(want) != std::string::npos;
    bool on_err = texts[1].find(want) != std::string::npos;
    if (!on_out && !on_err) {
        fprintf(stderr,
                "%s: the assert's message did not reach the program: stdout '%s', stderr '%s'\n",
                PROG, texts[0].c_str(), texts[1].c_str());
        return 1;
    }
    fputs(texts[1].c_str(), stderr); // what the driver wrote there, for the log
    printf("assert message: on %s\n", on_out && on_err ? "stdout and stderr"
                                      : on_out         ? "stdout"
                                                       : "stderr");
    printf("assert seen: %d\n", (int)e);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "assert") == 0)
        return do_assert();
    if (argc > 1) {
        fprintf(stderr, "usage: %s [assert]\n", argv[0]);
        return 2;
    }

    int hv[8], *dv;
    for (int i = 0; i < 8; i++)
        hv[i] = 11 * i - 20;
    RT(cudaMalloc(&dv, sizeof hv));
    RT(cudaMemcpy(dv, hv, sizeof hv, cudaMemcpyHostToDevice));

    // stdout into a file while the kernels print.
    char path[64];
    snprintf(path, sizeof path, "/tmp/openmps-printf-%d.out", (int)getpid());
    FILE *cap = fopen(path, "w+");
    EXPECT(cap != nullptr);
    fflush(stdout);
    int saved = dup(1);
    EXPECT(saved >= 0 && dup2(fileno(cap), 1) == 1);
    printf("host before\n");
    fflush(stdout);
    one_thread<<<1, 1>>>(dv);
    many_threads<<<4, 32>>>(500);
    cudaError_t e = cudaDeviceSynchronize();
    fflush(stdout);
    printf("host after\n");
    fflush(stdout);
    EXPECT(dup2(saved, 1) == 1);
    close(saved);
    RT(e);

    std::vector<std::string> lines;
    std::string cur;
    int c;
    rewind(cap);
    while ((c = fgetc(cap)) != EOF) {
        if (c == '\n') {
            lines.push_back(cur);
            cur.clear();
        } else {
            cur += (char)c;
        }
    }
    fclose(cap);
    unlink(path);
    if (!cur.empty())
        lines.push_back(cur);

    // The host lines around all, the 8 lines in order, each thread's line once.
    const size_t want = 2 + 8 + 4 * 32;
    if (lines.size() != want || lines.front() != "host before" || lines.back() != "host after") {
        fprintf(stderr, "%s: captured %zu lines (expected %zu), first '%s', last '%s'\n", PROG,
                lines.size(), want, lines.empty() ? "" : lines.front().c_str(),
                lines.empty() ? "" : lines.back().c_str());
        return 1;
    }
    size_t next = 0;
    std::vector<std::string> threads;
    char expect[96];
    for (size_t k = 1; k + 1 < lines.size(); k++) {
        if (lines[k].compare(0, 12, "device line ") == 0) {
            snprintf(expect, sizeof expect, "device line %zu: %d", next,
                     next < 8 ? hv[next] * hv[next] + 3 : 0);
            if (next >= 8 || lines[k] != expect) {
                fprintf(stderr, "%s: line %zu is '%s', expected '%s'\n", PROG, k, lines[k].c_str(),
                        expect);
                return 1;
            }
            next++;
        } else {
            threads.push_back(lines[k]);
        }
    }
    EXPECT_EQ(next, 8);
    std::vector<std::string> expected_threads;
    for (int b = 0; b < 4; b++)
        for (int t = 0; t < 32; t++) {
            snprintf(expect, sizeof expect, "thread %d.%d: %d", b, t, 500 + b * 32 + t);
            expected_threads.push_back(expect);
        }
    std::sort(threads.begin(), threads.end());
    std::sort(expected_threads.begin(), expected_threads.end());
    if (threads != expected_threads) {
        for (size_t k = 0; k < threads.size() && k < expected_threads.size(); k++)
            if (threads[k] != expected_threads[k]) {
                fprintf(stderr, "%s: thread lines differ: got '%s', expected '%s'\n", PROG,
                        threads[k].c_str(), expected_threads[k].c_str());
                break;
            }
        fprintf(stderr, "%s: the 128 thread lines are not each present once\n", PROG);
        return 1;
    }
    // Echo: the ordered lines as captured, the thread lines sorted.
    printf("%s\n", lines.front().c_str());
    for (size_t k = 1; k + 1 < lines.size(); k++)
        if (lines[k].compare(0, 12, "device line ") == 0)
            printf("%s\n", lines[k].c_str());
    for (size_t k = 0; k < threads.size(); k += 31)
        printf("(sorted) %s\n", threads[k].c_str());
    printf("%s\n", lines.back().c_str());
    printf("printf: %zu lines captured and checked: host lines around, 8 in order, 128 thread "
           "lines each once\n",
           lines.size());
    RT(cudaFree(dv));
    return 0;
}
