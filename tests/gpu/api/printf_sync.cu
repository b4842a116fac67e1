// SPDX-License-Identifier: MIT
// Kernel printf where the driver prints it (its documented flush points): a kernel's lines come
// out at its stream's synchronize, at an event's synchronize after it and at a copy to the host,
// each before the host's next line; so do the lines of an executable graph whose kernel prints,
// built by hand and captured. stdout is compared with the native run's, line by line (the
// kernel lines of two clients at once: tests/gpu/run.sh's printmany).
#define PROG "printf_sync"
#include "api.h"

__global__ void say(int v)
{
    printf("kernel says %d\n", v);
}

int main()
{
    cudaStream_t s;
    cudaEvent_t ev;
    int *d, h = 0;
    RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    RT(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    RT(cudaMalloc(&d, sizeof(int)));
    RT(cudaMemset(d, 0, sizeof(int)));
    setvbuf(stdout, nullptr, _IOLBF, 0);

    printf("host: a stream synchronize\n");
    say<<<1, 1, 0, s>>>(1);
    RT(cudaStreamSynchronize(s));
    printf("host: after it\n");

    say<<<1, 1, 0, s>>>(2);
    RT(cudaEventRecord(ev, s));
    RT(cudaEventSynchronize(ev));
    printf("host: after an event synchronize\n");

    say<<<1, 1>>>(3); /* on the legacy stream, which the copy waits for */
    RT(cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost));
    printf("host: after a copy to the host\n");

    cudaGraph_t g;
    cudaGraphExec_t ge;
    RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    say<<<1, 1, 0, s>>>(4);
    RT(cudaStreamEndCapture(s, &g));
    RT(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 3; i++) {
        RT(cudaGraphLaunch(ge, s));
        RT(cudaStreamSynchronize(s));
        printf("host: after graph launch %d\n", i);
    }

    cudaGraph_t hg;
    cudaGraphNode_t kn;
    cudaGraphExec_t hge;
    int v = 5;
    void *args[] = {&v};
    cudaKernelNodeParams kp = {};
    kp.func = (void *)say;
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(1);
    kp.kernelParams = args;
    RT(cudaGraphCreate(&hg, 0));
    RT(cudaGraphAddKernelNode(&kn, hg, nullptr, 0, &kp));
    RT(cudaGraphInstantiate(&hge, hg, 0));
    for (v = 5; v < 8; v++) {
        RT(cudaGraphExecKernelNodeSetParams(hge, kn, &kp));
        RT(cudaGraphLaunch(hge, s));
        RT(cudaStreamSynchronize(s));
        printf("host: after the built graph's launch with %d\n", v);
    }
    RT(cudaDeviceSynchronize());
    printf("host: done\n");
    return 0;
}
