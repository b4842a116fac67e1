// SPDX-License-Identifier: MIT
// Streams, events and device identity through the driver API: priorities, flags, ids and
// contexts of streams, the access policy window attribute, wait and write of 32- and 64-bit
// values between two streams and as a batch, managed memory attached to one stream, events
// recorded with flags and timed, host functions, the profiler switches, the device's UUID,
// LUID, PCI bus id and P2P attributes with itself, and the persisting L2 lines reset. Results
// checked; return codes that depend on the platform are printed, not judged (under openmps
// they must be the native ones).
// openmps-gpu-link: -lcuda
#define PROG "stream_misc"
#include "api.h"
#include <cstring>
#include <cudaProfiler.h>
#include <vector>

__global__ void fill(unsigned *p, unsigned seed, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = (unsigned)i * 2246822519u + seed;
}

__global__ void triple(unsigned *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] *= 3u;
}

struct HostSum {
    const unsigned *h;
    int n;
    unsigned long long sum;
    int calls;
};

static void CUDA_CB host_sum(void *user)
{
    HostSum *hs = (HostSum *)user;
    unsigned long long s = 0;
    for (int i = 0; i < hs->n; i++)
        s += hs->h[i];
    hs->sum = s;
    hs->calls++;
}

static unsigned want(int i, unsigned seed, unsigned mul)
{
    return ((unsigned)i * 2246822519u + seed) * mul;
}

int main()
{
    const int n = 1 << 16;
    const size_t bytes = n * sizeof(unsigned);
    CUdevice dev;
    CUcontext ctx, sctx;
    RT(cudaSetDevice(0));
    RT(cudaFree(0));
    CU(cuCtxGetCurrent(&ctx));
    CU(cuCtxGetDevice(&dev));

    // ---- Stream properties.
    int least = 0, greatest = 0, prio = 99;
    CU(cuCtxGetStreamPriorityRange(&least, &greatest));
    CUstream hi, lo;
    CU(cuStreamCreateWithPriority(&hi, CU_STREAM_NON_BLOCKING, greatest));
    CU(cuStreamCreateWithPriority(&lo, CU_STREAM_DEFAULT, least));
    CU(cuStreamGetPriority(hi, &prio));
    EXPECT_EQ(prio, greatest);
    CU(cuStreamGetPriority(lo, &prio));
    EXPECT_EQ(prio, least);
    unsigned flags = 99;
    CU(cuStreamGetFlags(hi, &flags));
    EXPECT_EQ(flags, CU_STREAM_NON_BLOCKING);
    CU(cuStreamGetFlags(lo, &flags));
    EXPECT_EQ(flags, CU_STREAM_DEFAULT);
    unsigned long long id_hi = 0, id_lo = 0;
    CU(cuStreamGetId(hi, &id_hi));
    CU(cuStreamGetId(lo, &id_lo));
    EXPECT(id_hi != id_lo);
    CU(cuStreamGetCtx(hi, &sctx));
    EXPECT(sctx == ctx);
    printf("streams: priority range %d..%d, priorities and flags kept, ids distinct, context "
           "the current one\n",
           least, greatest);

    // ---- The access policy window.
    CUdeviceptr buf;
    CU(cuMemAlloc(&buf, bytes));
    int max_window = 0;
    CU(cuDeviceGetAttribute(&max_window, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, dev));
    CUstreamAttrValue v, back;
    memset(&v, 0, sizeof v);
    v.accessPolicyWindow.base_ptr = (void *)buf;
    v.accessPolicyWindow.num_bytes = bytes < (size_t)max_window ? bytes : (size_t)max_window;
    v.accessPolicyWindow.hitRatio = 0.5f;
    v.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
    v.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
    CU(cuStreamSetAttribute(hi, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
    memset(&back, 0, sizeof back);
    CU(cuStreamGetAttribute(hi, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &back));
    EXPECT(back.accessPolicyWindow.num_bytes > 0 &&
           back.accessPolicyWindow.num_bytes <= v.accessPolicyWindow.num_bytes);
    EXPECT(back.accessPolicyWindow.hitRatio == 0.5f);
    EXPECT_EQ(back.accessPolicyWindow.hitProp, CU_ACCESS_PROPERTY_PERSISTING);
    EXPECT_EQ(back.accessPolicyWindow.missProp, CU_ACCESS_PROPERTY_STREAMING);
    fill<<<n / 256, 256, 0, (cudaStream_t)hi>>>((unsigned *)buf, 9u, n);
    CU(cuStreamSynchronize(hi));
    CU(cuCtxResetPersistingL2Cache());
    memset(&v, 0, sizeof v); // window off again
    CU(cuStreamSetAttribute(hi, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
    std::vector<unsigned> h(n);
    CU(cuMemcpyDtoH(h.data(), buf, bytes));
    for (int i = 0; i < n; i++)
        EXPECT_EQ(h[i], want(i, 9u, 1));
    printf("access policy window: set and read back (hit ratio 0.5, persisting/streaming), a "
           "kernel under it correct, persisting lines reset\n");

    // ---- Wait/write value: lo waits for a flag that hi writes after its kernel.
    CUdeviceptr flag, done, batch;
    CU(cuMemAlloc(&flag, 64));
    CU(cuMemAlloc(&done, 64));
    CU(cuMemAlloc(&batch, 64));
    CU(cuMemsetD32(flag, 0, 16));
    CU(cuMemsetD32(done, 0, 16));
    CU(cuMemsetD32(batch, 0, 16));
    // Both kernels loaded first: with lazy loading, loading `fill` while `lo` waits for the flag
    // would wait for `lo` (a module load waits for the context's work), and hang natively.
    cudaFuncAttributes fa;
    RT(cudaFuncGetAttributes(&fa, triple));
    RT(cudaFuncGetAttributes(&fa, fill));
    CU(cuStreamWaitValue32(lo, flag, 1, CU_STREAM_WAIT_VALUE_GEQ));
    triple<<<n / 256, 256, 0, (cudaStream_t)lo>>>((unsigned *)buf, n);
    CU(cuStreamWriteValue64(lo, done, 0x0123456789abcdefull, CU_STREAM_WRITE_VALUE_DEFAULT));
    fill<<<n / 256, 256, 0, (cudaStream_t)hi>>>((unsigned *)buf, 21u, n);
    CU(cuStreamWriteValue32(hi, flag, 1, CU_STREAM_WRITE_VALUE_DEFAULT));
    CU(cuStreamSynchronize(lo));
    CU(cuStreamSynchronize(hi));
    unsigned long long done_value = 0;
    CU(cuMemcpyDtoH(&done_value, done, 8));
    EXPECT(done_value == 0x0123456789abcdefull);
    CU(cuMemcpyDtoH(h.data(), buf, bytes));
    for (int i = 0; i < n; i++)
        EXPECT_EQ(h[i], want(i, 21u, 3));
    // A batch: write 5, wait for >= 5, write a 64-bit value after it.
    CUstreamBatchMemOpParams ops[3];
    memset(ops, 0, sizeof ops);
    ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[0].writeValue.address = batch;
    ops[0].writeValue.value = 5;
    ops[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    ops[1].waitValue.address = batch;
    ops[1].waitValue.value = 5;
    ops[1].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
    ops[2].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    ops[2].writeValue.address = batch + 8;
    ops[2].writeValue.value64 = 0xfedcba9876543210ull;
    CU(cuStreamBatchMemOp(lo, 3, ops, 0));
    CU(cuStreamSynchronize(lo));
    unsigned long long bvals[2] = {0, 0};
    CU(cuMemcpyDtoH(bvals, batch, 16));
    EXPECT_EQ(bvals[0] & 0xffffffffull, 5);
    EXPECT(bvals[1] == 0xfedcba9876543210ull);
    printf("stream memory operations: a wait released by the other stream's write, 64-bit "
           "write %016llx, batch of 3 (%llu, %016llx), data checksum %016llx\n",
           done_value, bvals[0] & 0xffffffffull, bvals[1], api_fnv(h.data(), bytes));

    // ---- Managed memory attached to one stream.
    CUdeviceptr m;
    CU(cuMemAllocManaged(&m, bytes, CU_MEM_ATTACH_HOST));
    CU(cuStreamAttachMemAsync(lo, m, 0, CU_MEM_ATTACH_SINGLE));
    fill<<<n / 256, 256, 0, (cudaStream_t)lo>>>((unsigned *)m, 33u, n);
    triple<<<n / 256, 256, 0, (cudaStream_t)lo>>>((unsigned *)m, n);
    CU(cuStreamSynchronize(lo));
    const unsigned *hm = (const unsigned *)m;
    for (int i = 0; i < n; i++)
        EXPECT_EQ(hm[i], want(i, 33u, 3));
    printf("managed memory attached to a stream: kernels' output read on the host, checksum "
           "%016llx\n",
           api_fnv(hm, bytes));
    CU(cuMemFree(m));

    // ---- Events with flags and timing; a host function after a copy.
    CUevent e0, e1;
    CU(cuEventCreate(&e0, CU_EVENT_DEFAULT));
    CU(cuEventCreate(&e1, CU_EVENT_BLOCKING_SYNC));
    unsigned *pinned;
    CU(cuMemAllocHost((void **)&pinned, bytes));
    HostSum hs = {pinned, n, 0, 0};
    CU(cuProfilerStart());
    CU(cuEventRecordWithFlags(e0, hi, CU_EVENT_RECORD_DEFAULT));
    fill<<<n / 256, 256, 0, (cudaStream_t)hi>>>((unsigned *)buf, 45u, n);
    CU(cuMemcpyDtoHAsync(pinned, buf, bytes, hi));
    CU(cuLaunchHostFunc(hi, host_sum, &hs));
    CU(cuEventRecordWithFlags(e1, hi, CU_EVENT_RECORD_DEFAULT));
    CU(cuEventSynchronize(e1));
    CU(cuProfilerStop());
    EXPECT_EQ(cuEventQuery(e0), CUDA_SUCCESS);
    float ms = -1.0f;
    CU(cuEventElapsedTime(&ms, e0, e1));
    EXPECT(ms >= 0.0f);
    unsigned long long ref = 0;
    for (int i = 0; i < n; i++)
        ref += want(i, 45u, 1);
    EXPECT_EQ(hs.calls, 1);
    EXPECT(hs.sum == ref);
    printf("events: recorded with flags, elapsed time non-negative; host function saw sum %llu\n",
           hs.sum);

    // ---- Device identity.
    CUuuid uuid;
    CU(cuDeviceGetUuid(&uuid, dev));
    cudaDeviceProp prop;
    RT(cudaGetDeviceProperties(&prop, 0));
    EXPECT(memcmp(uuid.bytes, prop.uuid.bytes, 16) == 0);
    char luid[8];
    unsigned mask = 0;
    CUresult rl = cuDeviceGetLuid(luid, &mask, dev);
    char bus[64];
    CUdevice by_bus = -1;
    CU(cuDeviceGetPCIBusId(bus, sizeof bus, dev));
    CU(cuDeviceGetByPCIBusId(&by_bus, bus));
    EXPECT_EQ(by_bus, dev);
    int p2p = -1;
    CUresult rp = cuDeviceGetP2PAttribute(&p2p, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, dev, dev);
    printf("device: uuid matches the runtime's; pci bus id %s maps back; luid returns %d; p2p "
           "access with itself returns %d (value %d)\n",
           bus, (int)rl, (int)rp, rp == CUDA_SUCCESS ? p2p : -1);

    CU(cuMemFreeHost(pinned));
    CU(cuEventDestroy(e0));
    CU(cuEventDestroy(e1));
    CU(cuMemFree(flag));
    CU(cuMemFree(done));
    CU(cuMemFree(batch));
    CU(cuMemFree(buf));
    CU(cuStreamDestroy(hi));
    CU(cuStreamDestroy(lo));
    printf("stream_misc done\n");
    return 0;
}
