// SPDX-License-Identifier: MIT
// Pageable copies through every path of the shim, each checked byte for byte: bytes in the call
// (at most 4 KiB), the ring (under 256 KiB), the pipelined staging area (256 KiB and more, pieces
// wrapping around its slots); asynchronous pageable copies on two streams behind a kernel, the
// source overwritten as soon as the call returned (the copy has taken its bytes by then); two
// threads copying at once (one of them takes the ring while the other has the area).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

__global__ void spin(long long iterations, unsigned long long *out)
{
    unsigned long long x = 1;
    for (long long i = 0; i < iterations; i++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    *out = x;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "pageable: line %d: %s failed: %s\n", __LINE__, #call,                \
                    cudaGetErrorString(e_));                                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "pageable: line %d: %s\n", __LINE__, #cond);                           \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

// A pattern with no short period, different per salt.
static void fill(unsigned char *p, size_t n, unsigned salt)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)((unsigned)((i + salt) * 2654435761u) >> 24);
}

static void round_trip(size_t n, unsigned salt, cudaStream_t s)
{
    std::vector<unsigned char> h(n + 1), back(n + 3);
    void *d;
    fill(h.data() + 1, n, salt); // unaligned source and destination
    CHECK(cudaMalloc(&d, n));
    if (s) {
        CHECK(cudaMemcpyAsync(d, h.data() + 1, n, cudaMemcpyHostToDevice, s));
        CHECK(cudaMemcpyAsync(back.data() + 3, d, n, cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
    } else {
        CHECK(cudaMemcpy(d, h.data() + 1, n, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(back.data() + 3, d, n, cudaMemcpyDeviceToHost));
    }
    EXPECT(memcmp(h.data() + 1, back.data() + 3, n) == 0);
    CHECK(cudaFree(d));
}

int main()
{
    const size_t sizes[] = {4, 4096, 4097, 200000, 256 << 10, (4 << 20) + 1, (17 << 20) + 5,
                            64 << 20};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        round_trip(sizes[i], (unsigned)i, 0);

    // Two streams: X has a kernel of about 40 ms in front of its copy, Y does not.
    cudaStream_t x, y;
    unsigned long long *scratch;
    const size_t nx = (17 << 20) + 5, ny = (9 << 20) + 7;
    std::vector<unsigned char> hx(nx), hy(ny), want_x(nx), want_y(ny), back(nx);
    void *dx, *dy;
    CHECK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&y, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&scratch, sizeof(*scratch)));
    CHECK(cudaMalloc(&dx, nx));
    CHECK(cudaMalloc(&dy, ny));
    fill(hx.data(), nx, 11);
    fill(hy.data(), ny, 12);
    want_x = hx;
    want_y = hy;
    spin<<<1, 1, 0, x>>>(20000000, scratch);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(dx, hx.data(), nx, cudaMemcpyHostToDevice, x));
    memset(hx.data(), 0xee, nx); // pageable: the call has taken the bytes
    CHECK(cudaMemcpyAsync(dy, hy.data(), ny, cudaMemcpyHostToDevice, y));
    memset(hy.data(), 0xdd, ny);
    CHECK(cudaStreamSynchronize(x));
    CHECK(cudaStreamSynchronize(y));
    CHECK(cudaMemcpy(back.data(), dx, nx, cudaMemcpyDeviceToHost));
    EXPECT(memcmp(back.data(), want_x.data(), nx) == 0);
    CHECK(cudaMemcpy(back.data(), dy, ny, cudaMemcpyDeviceToHost));
    EXPECT(memcmp(back.data(), want_y.data(), ny) == 0);

    // Two threads, each on its own stream, copying large buffers at once.
    std::thread t1([&] {
        for (unsigned r = 0; r < 4; r++)
            round_trip((12 << 20) + r, 100 + r, x);
    });
    std::thread t2([&] {
        for (unsigned r = 0; r < 4; r++)
            round_trip((12 << 20) + 7 * r, 200 + r, y);
    });
    t1.join();
    t2.join();
    printf("pageable ok\n");
    return 0;
}
