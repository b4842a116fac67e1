// SPDX-License-Identifier: MIT
// Shareable handles between two processes (under openmps: two clients of one server, so every
// import is an import in the exporting process, the server's): the parent makes an allocation
// handle (cuMemCreate, POSIX file descriptor type) mapped and filled by a kernel, and a pool
// (cuMemPoolCreate, same type) with memory filled by a kernel; it exports the handle and the
// pool as file descriptors and the pool memory as pointer data, and sends them over a unix
// socketpair (SCM_RIGHTS) to a child (itself, executed again). The child imports the handle
// (cuMemImportFromShareableHandle) and maps it (cuMemAddressReserve, cuMemMap, cuMemSetAccess),
// imports the pool and the pointer (cuMemPoolImportFromShareableHandle, cuMemPoolImportPointer),
// checks the parent's words in both, adds one to every word, frees what it imported and
// answers; the parent checks the child's change in both.
// openmps-gpu-link: -lcuda
#define PROG "shareable"
#include "api.h"
#include <cstring>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

struct Message {
    size_t vmm_bytes;  // the allocation's size (a multiple of the granularity)
    size_t pool_bytes; // the pool memory's size
    CUmemPoolPtrExportData data;
};

__global__ void fill(unsigned *p, unsigned seed, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = (unsigned)i * 2654435761u + seed;
}

__global__ void add_one(unsigned *p, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n)
        p[i] += 1;
}

static int check(const char *what, CUdeviceptr d, size_t bytes, unsigned seed, unsigned add)
{
    std::vector<unsigned> h(bytes / sizeof(unsigned));
    CU(cuMemcpyDtoH(h.data(), d, bytes));
    for (size_t i = 0; i < h.size(); i++)
        if (h[i] != (unsigned)i * 2654435761u + seed + add) {
            fprintf(stderr, "%s: %s: word %zu is %u, expected %u\n", PROG, what, i, h[i],
                    (unsigned)i * 2654435761u + seed + add);
            return 1;
        }
    return 0;
}

static void send_fds(int sock, const Message &m, int fd1, int fd2)
{
    char ctl[CMSG_SPACE(2 * sizeof(int))];
    memset(ctl, 0, sizeof ctl);
    iovec iov = {(void *)&m, sizeof m};
    msghdr h = {};
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    h.msg_control = ctl;
    h.msg_controllen = sizeof ctl;
    cmsghdr *c = CMSG_FIRSTHDR(&h);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(2 * sizeof(int));
    int fds[2] = {fd1, fd2};
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    EXPECT(sendmsg(sock, &h, 0) == (ssize_t)sizeof m);
}

static void recv_fds(int sock, Message &m, int &fd1, int &fd2)
{
    char ctl[CMSG_SPACE(2 * sizeof(int))];
    iovec iov = {&m, sizeof m};
    msghdr h = {};
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    h.msg_control = ctl;
    h.msg_controllen = sizeof ctl;
    EXPECT(recvmsg(sock, &h, 0) == (ssize_t)sizeof m);
    cmsghdr *c = CMSG_FIRSTHDR(&h);
    EXPECT(c && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(2 * sizeof(int)));
    int fds[2];
    memcpy(fds, CMSG_DATA(c), sizeof fds);
    fd1 = fds[0];
    fd2 = fds[1];
}

static int child(int sock)
{
    Message m;
    int vfd = -1, pfd = -1;
    recv_fds(sock, m, vfd, pfd);
    RT(cudaSetDevice(0));
    RT(cudaFree(0));
    CUstream s;
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

    // the allocation: imported, mapped, read, changed
    CUmemGenericAllocationHandle h;
    CU(cuMemImportFromShareableHandle(&h, (void *)(intptr_t)vfd,
                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    CUdeviceptr va;
    CU(cuMemAddressReserve(&va, m.vmm_bytes, 0, 0, 0));
    CU(cuMemMap(va, m.vmm_bytes, 0, h, 0));
    CUmemAccessDesc acc = {};
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = 0;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(cuMemSetAccess(va, m.vmm_bytes, &acc, 1));
    if (check("child reading the parent's allocation", va, m.vmm_bytes, 11u, 0))
        return 1;
    size_t n = m.vmm_bytes / sizeof(unsigned);
    add_one<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)s>>>((unsigned *)va, n);
    CU(cuStreamSynchronize(s));
    CU(cuMemUnmap(va, m.vmm_bytes));
    CU(cuMemAddressFree(va, m.vmm_bytes));
    CU(cuMemRelease(h));
    close(vfd);
    printf("child: imported the allocation handle, read %zu words correct, added one\n", n);

    // the pool and its pointer
    CUmemoryPool pool;
    CU(cuMemPoolImportFromShareableHandle(&pool, (void *)(intptr_t)pfd,
                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    // the device's access to the imported pool: read-write, set where it is not
    CUmemLocation dev0 = acc.location;
    CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    CU(cuMemPoolGetAccess(&flags, pool, &dev0));
    if (flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
        CU(cuMemPoolSetAccess(pool, &acc, 1));
    CUdeviceptr p;
    CU(cuMemPoolImportPointer(&p, pool, &m.data));
    if (check("child reading the parent's pool memory", p, m.pool_bytes, 22u, 0))
        return 1;
    n = m.pool_bytes / sizeof(unsigned);
    add_one<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)s>>>((unsigned *)p, n);
    CU(cuMemFreeAsync(p, s)); // the importer frees before the exporter
    CU(cuStreamSynchronize(s));
    CU(cuMemPoolDestroy(pool));
    close(pfd);
    printf("child: imported the pool and the pointer, read %zu words correct, added one\n", n);
    CU(cuStreamDestroy(s));
    fflush(stdout);
    char done = 'd';
    EXPECT(write(sock, &done, 1) == 1);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "child") == 0)
        return child(atoi(argv[2]));

    RT(cudaSetDevice(0));
    RT(cudaFree(0));
    CUstream s;
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    Message m;
    memset(&m, 0, sizeof m);

    // an allocation handle shareable as a file descriptor, mapped and filled
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t gran = 0;
    CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    m.vmm_bytes = ((size_t)(4 << 20) + gran - 1) / gran * gran;
    CUmemGenericAllocationHandle h;
    CU(cuMemCreate(&h, m.vmm_bytes, &prop, 0));
    CUdeviceptr va;
    CU(cuMemAddressReserve(&va, m.vmm_bytes, 0, 0, 0));
    CU(cuMemMap(va, m.vmm_bytes, 0, h, 0));
    CUmemAccessDesc acc = {};
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(cuMemSetAccess(va, m.vmm_bytes, &acc, 1));
    size_t n = m.vmm_bytes / sizeof(unsigned);
    fill<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)s>>>((unsigned *)va, 11u, n);
    int vfd = -1;
    CU(cuMemExportToShareableHandle(&vfd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    EXPECT(vfd >= 0);

    // a pool shareable as a file descriptor, memory from it filled
    CUmemPoolProps props = {};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    props.location = prop.location;
    CUmemoryPool pool;
    CU(cuMemPoolCreate(&pool, &props));
    m.pool_bytes = 1 << 20;
    CUdeviceptr p;
    CU(cuMemAllocFromPoolAsync(&p, m.pool_bytes, pool, s));
    size_t np = m.pool_bytes / sizeof(unsigned);
    fill<<<(unsigned)((np + 255) / 256), 256, 0, (cudaStream_t)s>>>((unsigned *)p, 22u, np);
    CU(cuStreamSynchronize(s)); // the allocation and the words are there before the export
    int pfd = -1;
    CU(cuMemPoolExportToShareableHandle(&pfd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    EXPECT(pfd >= 0);
    CU(cuMemPoolExportPointer(&m.data, p));
    printf("parent: an allocation of %zu words and pool memory of %zu words filled, exported\n", n,
           np);
    fflush(stdout);

    int sv[2];
    EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    pid_t pid = fork();
    EXPECT(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        char fd[16];
        snprintf(fd, sizeof fd, "%d", sv[1]);
        execl("/proc/self/exe", argv[0], "child", fd, (char *)nullptr);
        _exit(127);
    }
    close(sv[1]);
    send_fds(sv[0], m, vfd, pfd);
    close(vfd); // the child has its own
    close(pfd);
    char done = 0;
    ssize_t got = read(sv[0], &done, 1); // the child freed what it imported (or failed)
    int status = 0;
    EXPECT(waitpid(pid, &status, 0) == pid);
    if (got != 1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "%s: the child failed (status 0x%x)\n", PROG, status);
        return 1;
    }
    if (check("parent reading the child's change to the allocation", va, m.vmm_bytes, 11u, 1) ||
        check("parent reading the child's change to the pool memory", p, m.pool_bytes, 22u, 1))
        return 1;
    printf("parent: the child's change seen in both\n");
    CU(cuMemFreeAsync(p, s));
    CU(cuStreamSynchronize(s));
    CU(cuMemPoolDestroy(pool));
    CU(cuMemUnmap(va, m.vmm_bytes));
    CU(cuMemAddressFree(va, m.vmm_bytes));
    CU(cuMemRelease(h));
    CU(cuStreamDestroy(s));
    return 0;
}
