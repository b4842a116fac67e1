// SPDX-License-Identifier: MIT
// A process that forks after CUDA is initialised (issue #24). The parent launches and copies;
// its child prints what the driver and the runtime answer it (natively the driver's
// CUDA_ERROR_NOT_INITIALIZED to everything, cuInit included) and exits; the parent then starts
// threads, one with a 128 KiB stack, that launch and copy, and checks the results. The runner
// compares the printed answers with native.
// openmps-gpu-link: -lcuda
#define PROG "fork_child"
#include "api.h"
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

__global__ void scale(float *p, float k, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] *= k;
}

static void *work(void *arg)
{
    const int n = 1 << 16;
    float *d, *h = (float *)malloc(n * sizeof(float));
    float k = 1.0f + (float)(uintptr_t)arg;
    cudaStream_t s;
    for (int i = 0; i < n; i++)
        h[i] = (float)i;
    RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    RT(cudaMalloc(&d, n * sizeof(float)));
    RT(cudaMemcpyAsync(d, h, n * sizeof(float), cudaMemcpyHostToDevice, s));
    scale<<<n / 256, 256, 0, s>>>(d, k, n);
    RT(cudaMemcpyAsync(h, d, n * sizeof(float), cudaMemcpyDeviceToHost, s));
    RT(cudaStreamSynchronize(s));
    for (int i = 0; i < n; i += 997)
        EXPECT(h[i] == (float)i * k);
    RT(cudaFree(d));
    RT(cudaStreamDestroy(s));
    free(h);
    return nullptr;
}

int main()
{
    work((void *)0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int n = -1;
        void *p = nullptr;
        CUresult a = cuInit(0), b = cuDeviceGetCount(&n);
        cudaError_t c = cudaMalloc(&p, 4096);
        printf("child: cuInit %d, cuDeviceGetCount %d, cudaMalloc %d (%s)\n", (int)a, (int)b,
               (int)c, cudaGetErrorName(c));
        fflush(stdout);
        _exit(0);
    }
    int st = 0;
    EXPECT(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        EXPECT(pthread_create(&t[i], nullptr, work, (void *)(uintptr_t)(i + 1)) == 0);
    for (int i = 0; i < 4; i++)
        EXPECT(pthread_join(t[i], nullptr) == 0);
    pthread_attr_t attr;
    pthread_t small;
    EXPECT(pthread_attr_init(&attr) == 0);
    EXPECT(pthread_attr_setstacksize(&attr, 128u << 10) == 0);
    EXPECT(pthread_create(&small, &attr, work, (void *)5) == 0);
    EXPECT(pthread_join(small, nullptr) == 0);
    RT(cudaDeviceSynchronize());
    printf("parent: five threads after the fork, results right\n");
    return 0;
}
