// SPDX-License-Identifier: MIT
// Capture and the default streams (issue #24): beginning a capture on the legacy NULL stream
// (the runtime's 0 and cudaStreamLegacy, the driver's NULL and CU_STREAM_LEGACY) is refused with
// cudaErrorStreamCaptureUnsupported / CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and leaves nothing
// capturing: the legacy stream's work runs after it. The per-thread default stream can be
// captured (cudaStreamPerThread, and NULL of the driver's _ptsz form through cuGetProcAddress's
// per-thread flag); its graph runs. While a blocking stream captures, the legacy stream, which
// waits for every blocking stream, cannot be used, not even asked whether it captures
// (cudaErrorStreamCaptureImplicit), and the capture stays whole; the per-thread stream, which
// waits only for the legacy one, can (CuPy's test_null_stream_cannot_capture).
// openmps-gpu-link: -lcuda
#define PROG "capture_legacy"
#include "api.h"

__global__ void add(int *p, int v)
{
    p[threadIdx.x] += v;
}

typedef CUresult (*begin_fn)(CUstream, CUstreamCaptureMode);

int main()
{
    int *d, h[32];
    RT(cudaMalloc(&d, sizeof(h)));
    RT(cudaMemset(d, 0, sizeof(h)));
    cudaStreamCaptureStatus st;

    EXPECT_EQ(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal),
              cudaErrorStreamCaptureUnsupported);
    EXPECT_EQ(cudaGetLastError(), cudaErrorStreamCaptureUnsupported);
    EXPECT_EQ(cudaStreamBeginCapture(cudaStreamLegacy, cudaStreamCaptureModeRelaxed),
              cudaErrorStreamCaptureUnsupported);
    cudaGetLastError();
    EXPECT_EQ(cuStreamBeginCapture(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL),
              CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    EXPECT_EQ(cuStreamBeginCapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
              CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    RT(cudaStreamIsCapturing(0, &st));
    EXPECT_EQ(st, cudaStreamCaptureStatusNone);
    add<<<1, 32>>>(d, 1); // the legacy stream works: nothing is capturing
    RT(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
    EXPECT_EQ(h[31], 1);
    printf("legacy stream: capture refused, work runs\n");

    // the per-thread default stream: captured, its graph launched
    cudaGraph_t g;
    cudaGraphExec_t ge;
    RT(cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeRelaxed));
    RT(cudaStreamIsCapturing(cudaStreamPerThread, &st));
    EXPECT_EQ(st, cudaStreamCaptureStatusActive);
    add<<<1, 32, 0, cudaStreamPerThread>>>(d, 10);
    RT(cudaStreamEndCapture(cudaStreamPerThread, &g));
    RT(cudaGraphInstantiate(&ge, g, 0));
    RT(cudaGraphLaunch(ge, cudaStreamPerThread));
    RT(cudaStreamSynchronize(cudaStreamPerThread));
    // the driver's _ptsz form: its NULL is the per-thread stream
    void *fn = nullptr;
    CUdriverProcAddressQueryResult q;
    CU(cuGetProcAddress("cuStreamBeginCapture", &fn, 13000,
                        CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &q));
    EXPECT(fn != nullptr);
    CU(((begin_fn)fn)(nullptr, CU_STREAM_CAPTURE_MODE_RELAXED));
    add<<<1, 32, 0, cudaStreamPerThread>>>(d, 100);
    cudaGraph_t g2;
    RT(cudaStreamEndCapture(cudaStreamPerThread, &g2));
    RT(cudaGraphDestroy(g2));
    RT(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
    EXPECT_EQ(h[0], 11);
    printf("per-thread stream: captured, graph ran: %d\n", h[0]);

    // a blocking stream captures: the legacy stream refuses even a query, the capture survives
    cudaStream_t sb;
    cudaGraph_t g3;
    cudaGraphExec_t ge3;
    RT(cudaStreamCreate(&sb));
    RT(cudaStreamBeginCapture(sb, cudaStreamCaptureModeRelaxed));
    add<<<1, 32, 0, sb>>>(d, 1000);
    EXPECT_EQ(cudaStreamIsCapturing(0, &st), cudaErrorStreamCaptureImplicit);
    cudaGetLastError();
    EXPECT_EQ(cudaStreamIsCapturing(cudaStreamLegacy, &st), cudaErrorStreamCaptureImplicit);
    cudaGetLastError();
    st = cudaStreamCaptureStatusActive;
    RT(cudaStreamIsCapturing(cudaStreamPerThread, &st));
    EXPECT_EQ(st, cudaStreamCaptureStatusNone);
    RT(cudaStreamIsCapturing(sb, &st));
    EXPECT_EQ(st, cudaStreamCaptureStatusActive);
    RT(cudaStreamEndCapture(sb, &g3));
    RT(cudaGraphInstantiate(&ge3, g3, 0));
    RT(cudaGraphLaunch(ge3, sb));
    RT(cudaStreamSynchronize(sb));
    RT(cudaStreamIsCapturing(0, &st));
    EXPECT_EQ(st, cudaStreamCaptureStatusNone);
    RT(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
    EXPECT_EQ(h[0], 1011);
    printf("blocking stream capturing: the legacy stream refused (implicit), capture ran: %d\n",
           h[0]);
    RT(cudaGraphExecDestroy(ge3));
    RT(cudaGraphDestroy(g3));
    RT(cudaStreamDestroy(sb));
    RT(cudaGraphExecDestroy(ge));
    RT(cudaGraphDestroy(g));
    RT(cudaFree(d));
    return 0;
}
