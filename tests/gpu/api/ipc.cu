// SPDX-License-Identifier: MIT
// Interprocess memory and event handles between two processes: the parent allocates device
// memory, fills it with a kernel, records an interprocess event after it, and sends both
// handles over a pipe to a child (itself, executed again); the child opens them, makes its
// stream wait for the event, checks the memory, adds one to every word, and closes them; the
// parent checks the child's change.
// openmps-gpu-link: -lcuda
#define PROG "ipc"
#include "api.h"
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

struct Message {
    CUipcMemHandle mem;
    CUipcEventHandle event;
    int n;
};

__global__ void fill(unsigned *p, unsigned seed, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = (unsigned)i * 40503u + seed;
}

__global__ void add_one(unsigned *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] += 1;
}

static int check(const char *who, const std::vector<unsigned> &h, unsigned seed, unsigned add)
{
    for (size_t i = 0; i < h.size(); i++)
        if (h[i] != (unsigned)i * 40503u + seed + add) {
            fprintf(stderr, "%s: %s: word %zu is %u, expected %u\n", PROG, who, i, h[i],
                    (unsigned)i * 40503u + seed + add);
            return 1;
        }
    return 0;
}

static int child(int fd)
{
    Message m;
    size_t got = 0;
    while (got < sizeof m) {
        ssize_t r = read(fd, (char *)&m + got, sizeof m - got);
        if (r <= 0) {
            fprintf(stderr, "%s: child: the pipe closed after %zu bytes\n", PROG, got);
            return 1;
        }
        got += (size_t)r;
    }
    RT(cudaSetDevice(0));
    RT(cudaFree(0));
    CUdeviceptr p;
    CUevent ev;
    CUstream s;
    CU(cuIpcOpenMemHandle(&p, m.mem, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CU(cuIpcOpenEventHandle(&ev, m.event));
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU(cuStreamWaitEvent(s, ev, 0));
    std::vector<unsigned> h(m.n);
    CU(cuMemcpyDtoHAsync(h.data(), p, m.n * sizeof(unsigned), s));
    CU(cuStreamSynchronize(s));
    EXPECT_EQ(cuEventQuery(ev), CUDA_SUCCESS);
    if (check("child reading the parent's memory", h, 77u, 0))
        return 1;
    add_one<<<(m.n + 255) / 256, 256, 0, (cudaStream_t)s>>>((unsigned *)p, m.n);
    CU(cuStreamSynchronize(s));
    CU(cuIpcCloseMemHandle(p));
    CU(cuEventDestroy(ev));
    CU(cuStreamDestroy(s));
    printf("child: opened both handles, waited for the event, read %d words correct, added one\n",
           m.n);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "child") == 0)
        return child(atoi(argv[2]));

    const int n = 1 << 20;
    CUdeviceptr d;
    CUevent ev;
    CUstream s;
    Message m;
    memset(&m, 0, sizeof m);
    RT(cudaSetDevice(0));
    RT(cudaFree(0));
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU(cuMemAlloc(&d, n * sizeof(unsigned)));
    CU(cuEventCreate(&ev, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
    fill<<<(n + 255) / 256, 256, 0, (cudaStream_t)s>>>((unsigned *)d, 77u, n);
    CU(cuEventRecord(ev, s));
    CU(cuIpcGetMemHandle(&m.mem, d));
    CU(cuIpcGetEventHandle(&m.event, ev));
    m.n = n;
    printf("parent: %d words filled, memory and event handles made\n", n);
    fflush(stdout);

    int fds[2];
    EXPECT(pipe(fds) == 0);
    pid_t pid = fork();
    EXPECT(pid >= 0);
    if (pid == 0) {
        close(fds[1]);
        char fd[16];
        snprintf(fd, sizeof fd, "%d", fds[0]);
        execl("/proc/self/exe", argv[0], "child", fd, (char *)nullptr);
        _exit(127);
    }
    close(fds[0]);
    EXPECT(write(fds[1], &m, sizeof m) == (ssize_t)sizeof m);
    close(fds[1]);
    int status = 0;
    EXPECT(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "%s: the child failed (status 0x%x)\n", PROG, status);
        return 1;
    }
    std::vector<unsigned> h(n);
    CU(cuMemcpyDtoH(h.data(), d, n * sizeof(unsigned)));
    if (check("parent reading the child's change", h, 77u, 1))
        return 1;
    printf("parent: the child's change seen in all %d words (checksum %016llx)\n", n,
           api_fnv(h.data(), n * sizeof(unsigned)));
    CU(cuEventDestroy(ev));
    CU(cuMemFree(d));
    CU(cuStreamDestroy(s));
    return 0;
}
