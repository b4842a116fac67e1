/* SPDX-License-Identifier: MIT */
/* Runs of launches that repeat, through the shim and the server (src/server/replay.c), on the
 * driver test double. Each round clears a buffer of LEN slots, launches LEN kernels (kernel i
 * fills slot i), synchronizes and reads the buffer back; what the buffer must hold is checked
 * every round, and every launch the program makes is written, as the double logs a kernel it
 * ran, to the file named by REPLAY_EXPECT (tests/ipc/test_replay.py compares it with
 * FAKECUDA_LAUNCH_LOG: the same kernels in the same order, whether launched or replayed).
 *
 *   replay_driver MODE ROUNDS LEN
 * MODE:
 *   same        the same arguments every round
 *   change      the values change every round (the nodes' parameters are updated)
 *   shape       in round 3 the kernel at 5 runs on a grid of 2 blocks (one node differs)
 *   stream      in round 3 the launches from 8 on go to a stream of the program's own
 *   interleave  in round 3, after launch 5: an event record, a query, a host function and a
 *               4-byte copy into slot 2 (which the held launch 2 wrote before it: the copy wins)
 *   capture     in round 3 the same launches are captured on another stream, then the graph is
 *               launched there
 *   idle        in round 3 the program stops after launch LEN-3 (up to 30 s): the double's log
 *               (REPLAY_LAUNCH_LOG) must have every launch by then, without any call
 *   exit        in round 3 it ends after launch LEN/2, without synchronizing
 *   fault       in round 4 launch 7's value is 0xdeadbeef, which the double faults on: the
 *               round's synchronize must report CUDA_ERROR_ILLEGAL_ADDRESS
 *   prefix      rounds 1 and 2 launch only the first LEN/2 kernels, the later rounds all LEN: a
 *               template of 20 is the start of one of 40 (a forward pass, then forward and
 *               backward)
 *   many        a query after every 5 launches cuts each round into runs of 5, each of its own
 *               grid, the same in rounds 1-2 and in rounds 3-4 but new every two rounds: more
 *               runs than a session keeps templates (the least recently used are replaced)
 *   attrs       every launch is a cuLaunchKernelEx with a cluster dimension of 1 (attribute 4),
 *               the odd ones also with programmatic stream serialization (6)
 * Exit status 0 when every check passed; the first failed check is printed. */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, int);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr, const void *, size_t, CUstream);
CUresult cuMemsetD8_v2(CUdeviceptr, unsigned char, size_t);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamSynchronize(CUstream);
CUresult cuStreamQuery(CUstream);
CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuLaunchHostFunc(CUstream, void (*)(void *), void *);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, CUstream, void **, void **);
CUresult cuLaunchKernelEx(const CUlaunchConfig *, CUfunction, void **, void **);
CUresult cuStreamBeginCapture_v2(CUstream, int);
CUresult cuStreamEndCapture(CUstream, CUgraph *);
CUresult cuGraphInstantiateWithFlags(CUgraphExec *, CUgraph, unsigned long long);
CUresult cuGraphLaunch(CUgraphExec, CUstream);
CUresult cuGraphGetNodes(CUgraph, CUgraphNode *, size_t *);

static FILE *expect;
static bool with_attrs; /* attrs mode: launches through cuLaunchKernelEx */
static CUfunction fill;
static CUdeviceptr buf;

struct fill_args {
    uint64_t p;
    uint32_t v, n;
};

/* A kernel that ran, as the double logs it. */
static void note(const struct fill_args *a, unsigned gx)
{
    const unsigned char *b = (const unsigned char *)a;

    if (!expect)
        return;
    fprintf(expect, "fill_u32 %u,1,1 32,1,1 ", gx);
    for (size_t k = 0; k < sizeof(*a); k++)
        fprintf(expect, "%02x", b[k]);
    fputc('\n', expect);
    fflush(expect);
}

/* Slot i of buf filled with v, on a grid of gx blocks; noted unless captured. */
static void launch(CUstream st, unsigned i, uint32_t v, unsigned gx, bool captured)
{
    struct fill_args a = {buf + 4ull * i, v, 1};
    size_t size = sizeof(a);
    void *extra[] = {(void *)1, &a, (void *)2, &size, NULL};

    if (with_attrs) {
        CUlaunchAttribute at[2];
        memset(at, 0, sizeof(at));
        at[0].id = 4; /* CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: 1 x 1 x 1 */
        at[0].value.bytes[0] = at[0].value.bytes[4] = at[0].value.bytes[8] = 1;
        at[1].id = 6; /* CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: on */
        at[1].value.bytes[0] = 1;
        CUlaunchConfig cfg = {gx, 1, 1, 32, 1, 1, 0, st, at, i % 2 ? 2u : 1u};
        OK(cuLaunchKernelEx(&cfg, fill, NULL, extra));
    } else {
        OK(cuLaunchKernel(fill, gx, 1, 1, 32, 1, 1, 0, st, NULL, extra));
    }
    if (!captured)
        note(&a, gx);
}

/* The kernels the double ran so far: its log's fill_u32 lines. */
static unsigned ran(const char *path)
{
    FILE *f = path ? fopen(path, "r") : NULL;
    char line[256];
    unsigned n = 0;

    while (f && fgets(line, sizeof(line), f))
        n += strncmp(line, "fill_u32 ", 9) == 0;
    if (f)
        fclose(f);
    return n;
}

static void host_fn(void *p)
{
    (void)p;
}

int main(int argc, char **argv)
{
    static const char image[] = "fakecubin\nfill_u32:8,4,4\n";
    const char *mode = argc > 3 ? argv[1] : "";
    unsigned rounds = argc > 3 ? (unsigned)atoi(argv[2]) : 0,
             len = argc > 3 ? (unsigned)atoi(argv[3]) : 0;
    CUcontext ctx;
    CUmodule mod;
    CUstream other, cap;
    CUevent ev;
    uint32_t *host;

    if (!rounds || len < 10 || len > 4096) {
        fprintf(stderr, "usage: replay_driver MODE ROUNDS LEN (LEN 10-4096)\n");
        return 2;
    }
    with_attrs = !strcmp(mode, "attrs");
    expect = getenv("REPLAY_EXPECT") ? fopen(getenv("REPLAY_EXPECT"), "w") : NULL;
    host = calloc(len, sizeof(*host));
    EXPECT(host);
    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
    OK(cuModuleLoadData(&mod, image));
    OK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    OK(cuMemAlloc_v2(&buf, 4ull * len));
    OK(cuStreamCreate(&other, 1 /* CU_STREAM_NON_BLOCKING */));
    OK(cuStreamCreate(&cap, 1));
    OK(cuEventCreate(&ev, 2 /* CU_EVENT_DISABLE_TIMING */));
    for (unsigned r = 1; r <= rounds; r++) {
        bool changing = !strcmp(mode, "change");
        uint32_t base = changing ? r * 100000u : 0;
        CUresult want = CUDA_SUCCESS;

        unsigned count = !strcmp(mode, "prefix") && r <= 2 ? len / 2 : len;

        OK(cuMemsetD8_v2(buf, 0, 4ull * len));
        for (unsigned i = 0; i < count; i++) {
            uint32_t v = base + i + 1;
            CUstream st = NULL;
            unsigned gx = 1;

            if (r == 3 && !strcmp(mode, "shape") && i == 5)
                gx = 2;
            if (!strcmp(mode, "many")) {
                if (i && i % 5 == 0)
                    EXPECT(cuStreamQuery(NULL) == CUDA_SUCCESS); /* a run ends */
                gx = 1 + ((r + 1) / 2) * 1000 + i / 5;
            }
            if (r == 3 && !strcmp(mode, "stream") && i >= 8)
                st = other;
            if (r == 4 && !strcmp(mode, "fault") && i == 7) {
                v = 0xdeadbeefu;
                want = 700; /* CUDA_ERROR_ILLEGAL_ADDRESS */
            }
            if (r == 3 && !strcmp(mode, "idle") && i == len - 3) {
                unsigned before = ran(getenv("REPLAY_LAUNCH_LOG")), after = before;
                /* no call for up to 30 s (a loaded machine may be slow to run them): the server
                 * sends what it holds after OPENMPS_REPLAY_IDLE_US on its own */
                for (int w = 0; w < 3000 && after != (r - 1) * len + i; w++) {
                    usleep(10 * 1000);
                    after = ran(getenv("REPLAY_LAUNCH_LOG"));
                }
                EXPECT_MSG(after == (r - 1) * len + i,
                           "after 30 s without a call the double ran %u of %u launches "
                           "(%u before the pause)",
                           after, (r - 1) * len + i, before);
            }
            if (r == 3 && !strcmp(mode, "exit") && i == len / 2)
                _exit(0); /* held launches, an unfinished run: the server carries on */
            launch(st, i, v, gx, false);
            if (r == 3 && !strcmp(mode, "interleave") && i == 5) {
                uint32_t mark = 77;
                OK(cuEventRecord(ev, NULL));
                EXPECT(cuStreamQuery(NULL) == CUDA_SUCCESS);
                OK(cuLaunchHostFunc(NULL, host_fn, NULL));
                OK(cuMemcpyHtoDAsync_v2(buf + 8, &mark, 4, NULL));
            }
        }
        if (r == 3 && !strcmp(mode, "capture")) {
            CUgraph g;
            CUgraphExec e;
            size_t n = 0;

            OK(cuStreamSynchronize(NULL)); /* the round's launches are done */
            OK(cuStreamBeginCapture_v2(cap, 0 /* global */));
            for (unsigned i = 0; i < len; i++)
                launch(cap, i, 500000u + i, 1, true); /* nodes of its graph, not run */
            OK(cuStreamEndCapture(cap, &g));
            OK(cuGraphGetNodes(g, NULL, &n));
            EXPECT_MSG(n == len, "the client's capture has %zu nodes, not %u", n, len);
            OK(cuGraphInstantiateWithFlags(&e, g, 0));
            OK(cuGraphLaunch(e, cap));
            for (unsigned i = 0; i < len; i++) {
                struct fill_args a = {buf + 4ull * i, 500000u + i, 1};
                note(&a, 1);
            }
            OK(cuStreamSynchronize(cap));
            OK(cuMemcpyDtoH_v2(host, buf, 4ull * len));
            for (unsigned i = 0; i < len; i++)
                EXPECT_MSG(host[i] == 500000u + i, "captured round: slot %u holds %u", i, host[i]);
            for (unsigned i = 0; i < len; i++)
                launch(NULL, i, base + i + 1, 1, false); /* the round again */
        }
        if (want != CUDA_SUCCESS) {
            EXPECT_RC(cuStreamSynchronize(NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
            printf("replay fault reported\n");
            free(host);
            return 0;
        }
        OK(cuStreamSynchronize(NULL));
        OK(cuStreamSynchronize(other));
        OK(cuMemcpyDtoH_v2(host, buf, 4ull * len));
        for (unsigned i = 0; i < len; i++) {
            uint32_t v = i < count ? base + i + 1 : 0;
            if (r == 3 && !strcmp(mode, "interleave") && i == 2)
                v = 77;
            EXPECT_MSG(host[i] == v, "round %u: slot %u holds %u, not %u", r, i, host[i], v);
        }
    }
    if (expect)
        fclose(expect);
    free(host);
    printf("replay %s ok\n", mode);
    return 0;
}
