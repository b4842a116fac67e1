// SPDX-License-Identifier: MIT
// The libraries most programs use: a cuBLAS SGEMM (256 x 256, C = 1.5 A B - 0.5 C) and a
// cuFFT complex-to-complex transform of 1024 points forward and back, both checked against
// the CPU: the product and the forward transform within 1e-3 relative to max(1, |value|)
// (float arithmetic in another order), the round trip within 1e-4 of the input.
// openmps-gpu-link: -lcuda -lcublas -lcufft
#define PROG "libs"
#include "api.h"
#include <cmath>
#include <cublas_v2.h>
#include <cufft.h>
#include <vector>

#define BLAS(call)                                                                                 \
    do {                                                                                           \
        cublasStatus_t st_ = (call);                                                               \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                        \
            fprintf(stderr, "%s: line %d: %s returned %d\n", PROG, __LINE__, #call, (int)st_);     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define FFT(call)                                                                                  \
    do {                                                                                           \
        cufftResult r_ = (call);                                                                   \
        if (r_ != CUFFT_SUCCESS) {                                                                 \
            fprintf(stderr, "%s: line %d: %s returned %d\n", PROG, __LINE__, #call, (int)r_);      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static float value(unsigned i, unsigned salt)
{
    return (float)((i * 2654435761u + salt) % 2001u) / 1000.0f - 1.0f; // in [-1, 1]
}

int main()
{
    // ---- SGEMM, column-major.
    const int n = 256;
    std::vector<float> a(n * n), b(n * n), c(n * n), ref(n * n), got(n * n);
    for (int i = 0; i < n * n; i++) {
        a[i] = value(i, 1);
        b[i] = value(i, 2);
        c[i] = value(i, 3);
    }
    const float alpha = 1.5f, beta = -0.5f;
    for (int col = 0; col < n; col++)
        for (int row = 0; row < n; row++) {
            double s = 0;
            for (int k = 0; k < n; k++)
                s += (double)a[k * n + row] * b[col * n + k];
            ref[col * n + row] = (float)(alpha * s + beta * c[col * n + row]);
        }
    float *da, *db, *dc;
    RT(cudaMalloc(&da, n * n * sizeof(float)));
    RT(cudaMalloc(&db, n * n * sizeof(float)));
    RT(cudaMalloc(&dc, n * n * sizeof(float)));
    RT(cudaMemcpy(da, a.data(), n * n * sizeof(float), cudaMemcpyHostToDevice));
    RT(cudaMemcpy(db, b.data(), n * n * sizeof(float), cudaMemcpyHostToDevice));
    RT(cudaMemcpy(dc, c.data(), n * n * sizeof(float), cudaMemcpyHostToDevice));
    cublasHandle_t blas;
    cudaStream_t s;
    RT(cudaStreamCreate(&s));
    BLAS(cublasCreate(&blas));
    BLAS(cublasSetStream(blas, s));
    BLAS(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, da, n, db, n, &beta, dc, n));
    RT(cudaStreamSynchronize(s));
    RT(cudaMemcpy(got.data(), dc, n * n * sizeof(float), cudaMemcpyDeviceToHost));
    EXPECT_FLOATS("sgemm", got.data(), ref.data(), n * n, 1e-3f);
    BLAS(cublasDestroy(blas));
    printf("cublas: sgemm %dx%d within 1e-3 of the CPU\n", n, n);

    // ---- FFT: forward against a CPU DFT, inverse back to the input (scaled by N).
    const int N = 1024;
    std::vector<cufftComplex> x(N), X(N), back(N);
    std::vector<float> fre(2 * N), fref(2 * N), rt(2 * N), rtref(2 * N);
    for (int i = 0; i < N; i++) {
        x[i].x = value(i, 4);
        x[i].y = value(i, 5);
    }
    for (int k = 0; k < N; k++) {
        double re = 0, im = 0;
        for (int j = 0; j < N; j++) {
            double ang = -2.0 * M_PI * (double)((long long)j * k % N) / N;
            re += x[j].x * cos(ang) - x[j].y * sin(ang);
            im += x[j].x * sin(ang) + x[j].y * cos(ang);
        }
        fref[2 * k] = (float)re;
        fref[2 * k + 1] = (float)im;
    }
    cufftComplex *dx;
    RT(cudaMalloc(&dx, N * sizeof(cufftComplex)));
    RT(cudaMemcpy(dx, x.data(), N * sizeof(cufftComplex), cudaMemcpyHostToDevice));
    cufftHandle plan;
    FFT(cufftPlan1d(&plan, N, CUFFT_C2C, 1));
    FFT(cufftSetStream(plan, s));
    FFT(cufftExecC2C(plan, dx, dx, CUFFT_FORWARD));
    RT(cudaStreamSynchronize(s));
    RT(cudaMemcpy(X.data(), dx, N * sizeof(cufftComplex), cudaMemcpyDeviceToHost));
    for (int k = 0; k < N; k++) {
        fre[2 * k] = X[k].x;
        fre[2 * k + 1] = X[k].y;
    }
    // |X| reaches about sqrt(N) * 0.6: a tolerance relative to max(1, |value|) of 1e-3 allows
    // well over float rounding of 1024-point sums.
    EXPECT_FLOATS("fft forward", fre.data(), fref.data(), 2 * N, 1e-3f);
    FFT(cufftExecC2C(plan, dx, dx, CUFFT_INVERSE));
    RT(cudaStreamSynchronize(s));
    RT(cudaMemcpy(back.data(), dx, N * sizeof(cufftComplex), cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++) {
        rt[2 * i] = back[i].x / N;
        rt[2 * i + 1] = back[i].y / N;
        rtref[2 * i] = x[i].x;
        rtref[2 * i + 1] = x[i].y;
    }
    EXPECT_FLOATS("fft round trip", rt.data(), rtref.data(), 2 * N, 1e-4f);
    FFT(cufftDestroy(plan));
    printf("cufft: c2c %d points forward within 1e-3 of a CPU DFT, inverse / N within 1e-4 of "
           "the input\n",
           N);
    RT(cudaFree(dx));
    RT(cudaFree(da));
    RT(cudaFree(db));
    RT(cudaFree(dc));
    RT(cudaStreamDestroy(s));
    printf("libs done\n");
    return 0;
}
