// SPDX-License-Identifier: MIT
// The math libraries beside cuBLAS and cuFFT, each against the CPU:
// * cuRAND: Philox4x32-10 and XORWOW device generators with a fixed seed give the same 32-bit
//   sequence as host generators of the same type and seed (exactly), the same uniform floats
//   (within 1e-6), and normal samples whose mean is within 0.01 of 0 and variance within 0.02
//   of 1 (2^20 samples: the standard error of the mean is 0.001);
// * cuSPARSE: a CSR SpMV (cusparseSpMV, generic API, 4096 x 4096, 12 values a row),
//   y = 2 A x - 0.5 y, within 1e-5 relative to max(1, |value|) of a CPU double result;
// * cuSOLVER: LU (getrf/getrs) of a general 192 x 192 matrix and Cholesky (potrf/potrs) of a
//   symmetric positive definite one, two right-hand sides: info 0, the residual
//   max |A x - b| / (max-row-sum(A) max |x|) below 5e-5, x within 1e-3 of a CPU double solve;
// * cuBLASLt: cublasLtMatmul in fp32 (D = A B + 0.5 C + bias, then ReLU, 200 x 168 x 264, a
//   32 MiB workspace) within 1e-4 relative of the CPU, and in bf16 inputs with fp32 output on
//   values exact in bf16 whose products and sums are exact in fp32: equal to the CPU result.
// openmps-gpu-link: -lcuda -lcurand -lcusparse -lcusolver -lcublasLt -lcublas
#define PROG "mathlibs"
#include "api.h"
#include <cmath>
#include <cstring>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <curand.h>
#include <cusolverDn.h>
#include <cusparse.h>
#include <vector>

#define LIB(call)                                                                                  \
    do {                                                                                           \
        int st_ = (int)(call);                                                                     \
        if (st_ != 0) {                                                                            \
            fprintf(stderr, "%s: line %d: %s returned %d\n", PROG, __LINE__, #call, st_);          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static float value(unsigned i, unsigned salt)
{
    return (float)((i * 2654435761u + salt * 40503u) % 2001u) / 1000.0f - 1.0f; // in [-1, 1]
}

// ---- cuRAND
static void rand_check(curandRngType_t type, const char *name, cudaStream_t s)
{
    const size_t n = 1 << 20;
    const unsigned long long seed = 20240611ull;
    curandGenerator_t dev, host;
    LIB(curandCreateGenerator(&dev, type));
    LIB(curandCreateGeneratorHost(&host, type));
    LIB(curandSetStream(dev, s));
    LIB(curandSetPseudoRandomGeneratorSeed(dev, seed));
    LIB(curandSetPseudoRandomGeneratorSeed(host, seed));
    unsigned *du;
    float *df;
    RT(cudaMalloc(&du, n * sizeof(unsigned)));
    RT(cudaMalloc(&df, n * sizeof(float)));
    std::vector<unsigned> gu(n), hu(n);
    std::vector<float> gf(n), hf(n);
    LIB(curandGenerate(dev, du, n));
    LIB(curandGenerate(host, hu.data(), n));
    RT(cudaMemcpyAsync(gu.data(), du, n * sizeof(unsigned), cudaMemcpyDeviceToHost, s));
    RT(cudaStreamSynchronize(s));
    for (size_t i = 0; i < n; i++)
        if (gu[i] != hu[i]) {
            fprintf(stderr, "%s: curand %s: device value %zu is %u, host %u\n", PROG, name, i,
                    gu[i], hu[i]);
            exit(1);
        }
    // The generators continue where the integers left them: the next floats are compared.
    LIB(curandGenerateUniform(dev, df, n));
    LIB(curandGenerateUniform(host, hf.data(), n));
    RT(cudaMemcpyAsync(gf.data(), df, n * sizeof(float), cudaMemcpyDeviceToHost, s));
    RT(cudaStreamSynchronize(s));
    EXPECT_FLOATS("curand uniform", gf.data(), hf.data(), n, 1e-6f);
    for (size_t i = 0; i < n; i++)
        EXPECT(gf[i] > 0.0f && gf[i] <= 1.0f);
    LIB(curandGenerateNormal(dev, df, n, 0.0f, 1.0f));
    RT(cudaMemcpyAsync(gf.data(), df, n * sizeof(float), cudaMemcpyDeviceToHost, s));
    RT(cudaStreamSynchronize(s));
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; i++) {
        sum += gf[i];
        sq += (double)gf[i] * gf[i];
    }
    double mean = sum / n, var = sq / n - mean * mean;
    fprintf(stderr, "%s: curand %s normal mean %.5f variance %.5f\n", PROG, name, mean, var);
    EXPECT(fabs(mean) < 0.01 && fabs(var - 1.0) < 0.02);
    LIB(curandDestroyGenerator(dev));
    LIB(curandDestroyGenerator(host));
    RT(cudaFree(du));
    RT(cudaFree(df));
    printf("curand %s: 2^20 integers equal to the host generator's, uniform floats within 1e-6, "
           "normal moments within 0.01 / 0.02\n",
           name);
}

// ---- cuSPARSE
static void sparse_check(cudaStream_t s)
{
    const int n = 4096, per = 12, nnz = n * per;
    std::vector<int> rowptr(n + 1), cols(nnz);
    std::vector<float> vals(nnz), x(n), y(n), ref(n), got(n);
    for (int r = 0; r < n; r++) {
        rowptr[r] = r * per;
        for (int j = 0; j < per; j++) { // distinct, increasing columns
            cols[r * per + j] = (int)((r * 7u + (unsigned)j * (n / per) + (unsigned)j) % n);
            vals[r * per + j] = value((unsigned)(r * per + j), 6);
        }
        // sort the row's columns (a small insertion sort keeps their values beside them)
        for (int a = r * per + 1; a < (r + 1) * per; a++)
            for (int b = a; b > r * per && cols[b - 1] > cols[b]; b--) {
                int c = cols[b];
                cols[b] = cols[b - 1];
                cols[b - 1] = c;
                float v = vals[b];
                vals[b] = vals[b - 1];
                vals[b - 1] = v;
            }
    }
    rowptr[n] = nnz;
    const float alpha = 2.0f, beta = -0.5f;
    for (int i = 0; i < n; i++) {
        x[i] = value((unsigned)i, 7);
        y[i] = value((unsigned)i, 8);
    }
    for (int r = 0; r < n; r++) {
        double acc = 0;
        for (int k = rowptr[r]; k < rowptr[r + 1]; k++)
            acc += (double)vals[k] * x[cols[k]];
        ref[r] = (float)(alpha * acc + beta * y[r]);
    }
    int *drow, *dcol;
    float *dval, *dx, *dy;
    RT(cudaMalloc(&drow, (n + 1) * sizeof(int)));
    RT(cudaMalloc(&dcol, nnz * sizeof(int)));
    RT(cudaMalloc(&dval, nnz * sizeof(float)));
    RT(cudaMalloc(&dx, n * sizeof(float)));
    RT(cudaMalloc(&dy, n * sizeof(float)));
    RT(cudaMemcpy(drow, rowptr.data(), (n + 1) * sizeof(int), cudaMemcpyHostToDevice));
    RT(cudaMemcpy(dcol, cols.data(), nnz * sizeof(int), cudaMemcpyHostToDevice));
    RT(cudaMemcpy(dval, vals.data(), nnz * sizeof(float), cudaMemcpyHostToDevice));
    RT(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    RT(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    cusparseHandle_t h;
    cusparseSpMatDescr_t A;
    cusparseDnVecDescr_t X, Y;
    LIB(cusparseCreate(&h));
    LIB(cusparseSetStream(h, s));
    LIB(cusparseCreateCsr(&A, n, n, nnz, drow, dcol, dval, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                          CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
    LIB(cusparseCreateDnVec(&X, n, dx, CUDA_R_32F));
    LIB(cusparseCreateDnVec(&Y, n, dy, CUDA_R_32F));
    size_t bytes = 0;
    LIB(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, A, X, &beta, Y,
                                CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, &bytes));
    void *buf = nullptr;
    if (bytes)
        RT(cudaMalloc(&buf, bytes));
    LIB(cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, A, X, &beta, Y, CUDA_R_32F,
                     CUSPARSE_SPMV_ALG_DEFAULT, buf));
    RT(cudaMemcpyAsync(got.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost, s));
    RT(cudaStreamSynchronize(s));
    EXPECT_FLOATS("cusparse spmv", got.data(), ref.data(), n, 1e-5f);
    LIB(cusparseDestroySpMat(A));
    LIB(cusparseDestroyDnVec(X));
    LIB(cusparseDestroyDnVec(Y));
    LIB(cusparseDestroy(h));
    if (buf)
        RT(cudaFree(buf));
    RT(cudaFree(drow));
    RT(cudaFree(dcol));
    RT(cudaFree(dval));
    RT(cudaFree(dx));
    RT(cudaFree(dy));
    printf("cusparse: csr spmv %dx%d, %d values, within 1e-5 of the CPU\n", n, n, nnz);
}

// ---- cuSOLVER
// Solves A X = B on the CPU in double (partial pivoting); a is column-major n x n.
static std::vector<double> cpu_solve(const std::vector<float> &a, const std::vector<float> &b,
                                     int n, int nrhs)
{
    std::vector<double> m(a.begin(), a.end()), x(b.begin(), b.end());
    for (int k = 0; k < n; k++) {
        int p = k;
        for (int i = k + 1; i < n; i++)
            if (fabs(m[k * n + i]) > fabs(m[k * n + p]))
                p = i;
        for (int j = 0; j < n; j++)
            std::swap(m[j * n + k], m[j * n + p]);
        for (int j = 0; j < nrhs; j++)
            std::swap(x[j * n + k], x[j * n + p]);
        for (int i = k + 1; i < n; i++) {
            double f = m[k * n + i] / m[k * n + k];
            for (int j = k; j < n; j++)
                m[j * n + i] -= f * m[j * n + k];
            for (int j = 0; j < nrhs; j++)
                x[j * n + i] -= f * x[j * n + k];
        }
    }
    for (int j = 0; j < nrhs; j++)
        for (int i = n - 1; i >= 0; i--) {
            double acc = x[j * n + i];
            for (int c = i + 1; c < n; c++)
                acc -= m[c * n + i] * x[j * n + c];
            x[j * n + i] = acc / m[i * n + i];
        }
    return x;
}

// The normwise residual max |A x - b| / (max row sum |A| * max |x|), and x against the CPU.
static void solver_verdict(const char *what, const std::vector<float> &a,
                           const std::vector<float> &b, const std::vector<float> &x, int n,
                           int nrhs)
{
    double anorm = 0;
    for (int i = 0; i < n; i++) {
        double r = 0;
        for (int j = 0; j < n; j++)
            r += fabs(a[j * n + i]);
        anorm = r > anorm ? r : anorm;
    }
    for (int j = 0; j < nrhs; j++) {
        double res = 0, xmax = 0;
        for (int i = 0; i < n; i++) {
            double acc = -b[j * n + i];
            for (int c = 0; c < n; c++)
                acc += (double)a[c * n + i] * x[j * n + c];
            res = fabs(acc) > res ? fabs(acc) : res;
            xmax = fabs(x[j * n + i]) > xmax ? fabs(x[j * n + i]) : xmax;
        }
        double rel = res / (anorm * xmax);
        fprintf(stderr, "%s: %s rhs %d relative residual %.3g\n", PROG, what, j, rel);
        if (!(rel < 5e-5)) {
            fprintf(stderr, "%s: %s residual %.3g over 5e-5\n", PROG, what, rel);
            exit(1);
        }
    }
    std::vector<double> ref = cpu_solve(a, b, n, nrhs);
    std::vector<float> reff(ref.begin(), ref.end());
    EXPECT_FLOATS(what, x.data(), reff.data(), (size_t)n * nrhs, 1e-3f);
}

static void solver_check(cudaStream_t s)
{
    const int n = 192, nrhs = 2;
    std::vector<float> ge(n * n), spd(n * n), b(n * nrhs), x(n * nrhs);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            // general: entries in [-1, 1] plus 12 on the diagonal (pivoting still happens)
            ge[j * n + i] = value((unsigned)(j * n + i), 9) + (i == j ? 12.0f : 0.0f);
            // symmetric, diagonally dominant with a positive diagonal: positive definite
            unsigned lo = (unsigned)(i < j ? i : j), hi = (unsigned)(i < j ? j : i);
            spd[j * n + i] = i == j ? (float)n + 1.0f : value(lo * n + hi, 10);
        }
    for (int i = 0; i < n * nrhs; i++)
        b[i] = value((unsigned)i, 11) * 4.0f;
    cusolverDnHandle_t h;
    LIB(cusolverDnCreate(&h));
    LIB(cusolverDnSetStream(h, s));
    float *da, *db, *work;
    int *ipiv, *info, hinfo = -1, lwork = 0, lwork2 = 0;
    RT(cudaMalloc(&da, n * n * sizeof(float)));
    RT(cudaMalloc(&db, n * nrhs * sizeof(float)));
    RT(cudaMalloc(&ipiv, n * sizeof(int)));
    RT(cudaMalloc(&info, sizeof(int)));
    LIB(cusolverDnSgetrf_bufferSize(h, n, n, da, n, &lwork));
    LIB(cusolverDnSpotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, da, n, &lwork2));
    lwork = lwork2 > lwork ? lwork2 : lwork;
    RT(cudaMalloc(&work, (size_t)(lwork > 0 ? lwork : 1) * sizeof(float)));

    // LU with partial pivoting
    RT(cudaMemcpy(da, ge.data(), n * n * sizeof(float), cudaMemcpyHostToDevice));
    RT(cudaMemcpy(db, b.data(), n * nrhs * sizeof(float), cudaMemcpyHostToDevice));
    LIB(cusolverDnSgetrf(h, n, n, da, n, work, ipiv, info));
    RT(cudaMemcpyAsync(&hinfo, info, sizeof(int), cudaMemcpyDeviceToHost, s));
    RT(cudaStreamSynchronize(s));
    EXPECT_EQ(hinfo, 0);
    LIB(cusolverDnSgetrs(h, CUBLAS_OP_N, n, nrhs, da, n, ipiv, db, n, info));
    RT(cudaMemcpyAsync(x.data(), db, n * nrhs * sizeof(float), cudaMemcpyDeviceToHost, s));
    RT(cudaMemcpyAsync(&hinfo, info, sizeof(int), cudaMemcpyDeviceToHost, s));
    RT(cudaStreamSynchronize(s));
    EXPECT_EQ(hinfo, 0);
    solver_verdict("cusolver getrs", ge, b, x, n, nrhs);
    printf("cusolver: getrf/getrs %dx%d, %d right-hand sides: residual below 5e-5, within 1e-3 "
           "of the CPU\n",
           n, n, nrhs);

    // Cholesky
    RT(cudaMemcpy(da, spd.data(), n * n * sizeof(float), cudaMemcpyHostToDevice));
    RT(cudaMemcpy(db, b.data(), n * nrhs * sizeof(float), cudaMemcpyHostToDevice));
    LIB(cusolverDnSpotrf(h, CUBLAS_FILL_MODE_LOWER, n, da, n, work, lwork, info));
    RT(cudaMemcpyAsync(&hinfo, info, sizeof(int), cudaMemcpyDeviceToHost, s));
    RT(cudaStreamSynchronize(s));
    EXPECT_EQ(hinfo, 0);
    LIB(cusolverDnSpotrs(h, CUBLAS_FILL_MODE_LOWER, n, nrhs, da, n, db, n, info));
    RT(cudaMemcpyAsync(x.data(), db, n * nrhs * sizeof(float), cudaMemcpyDeviceToHost, s));
    RT(cudaMemcpyAsync(&hinfo, info, sizeof(int), cudaMemcpyDeviceToHost, s));
    RT(cudaStreamSynchronize(s));
    EXPECT_EQ(hinfo, 0);
    solver_verdict("cusolver potrs", spd, b, x, n, nrhs);
    printf("cusolver: potrf/potrs %dx%d, %d right-hand sides: residual below 5e-5, within 1e-3 "
           "of the CPU\n",
           n, n, nrhs);
    LIB(cusolverDnDestroy(h));
    RT(cudaFree(da));
    RT(cudaFree(db));
    RT(cudaFree(work));
    RT(cudaFree(ipiv));
    RT(cudaFree(info));
}

// ---- cuBLASLt
// One column-major matmul D = alpha A B + beta C (+ bias, ReLU when bias is given); the types
// name A and B (C and D are fp32). The fastest algorithm the heuristic offers is used.
static void lt_matmul(cublasLtHandle_t lt, cudaStream_t s, cudaDataType ab, int m, int n, int k,
                      const void *A, const void *B, const float *C, float *D, const float *bias,
                      float alpha, float beta, void *ws, size_t wsBytes)
{
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc, ld;
    LIB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    if (bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_RELU_BIAS;
        LIB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        LIB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                           sizeof bias));
    }
    LIB(cublasLtMatrixLayoutCreate(&la, ab, m, k, m));
    LIB(cublasLtMatrixLayoutCreate(&lb, ab, k, n, k));
    LIB(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, m));
    LIB(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m));
    cublasLtMatmulPreference_t pref;
    LIB(cublasLtMatmulPreferenceCreate(&pref));
    LIB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &wsBytes, sizeof wsBytes));
    cublasLtMatmulHeuristicResult_t heur[4];
    int found = 0;
    LIB(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, ld, pref, 4, heur, &found));
    EXPECT(found > 0);
    EXPECT(heur[0].workspaceSize <= wsBytes);
    LIB(cublasLtMatmul(lt, op, &alpha, A, la, B, lb, &beta, C, lc, D, ld, &heur[0].algo, ws,
                       wsBytes, s));
    LIB(cublasLtMatmulPreferenceDestroy(pref));
    LIB(cublasLtMatrixLayoutDestroy(la));
    LIB(cublasLtMatrixLayoutDestroy(lb));
    LIB(cublasLtMatrixLayoutDestroy(lc));
    LIB(cublasLtMatrixLayoutDestroy(ld));
    LIB(cublasLtMatmulDescDestroy(op));
}

static void lt_check(cudaStream_t s)
{
    const int m = 200, n = 168, k = 264;
    const size_t wsBytes = 32 << 20;
    std::vector<float> a(m * k), b(k * n), c(m * n), bias(m), ref(m * n), got(m * n);
    for (int i = 0; i < m * k; i++)
        a[i] = value((unsigned)i, 12);
    for (int i = 0; i < k * n; i++)
        b[i] = value((unsigned)i, 13);
    for (int i = 0; i < m * n; i++)
        c[i] = value((unsigned)i, 14);
    for (int i = 0; i < m; i++)
        bias[i] = value((unsigned)i, 15);
    const float alpha = 1.0f, beta = 0.5f;
    for (int col = 0; col < n; col++)
        for (int row = 0; row < m; row++) {
            double acc = 0;
            for (int q = 0; q < k; q++)
                acc += (double)a[q * m + row] * b[col * k + q];
            double v = alpha * acc + beta * c[col * m + row] + bias[row];
            ref[col * m + row] = (float)(v > 0 ? v : 0);
        }
    cublasLtHandle_t lt;
    LIB(cublasLtCreate(&lt));
    float *da, *db, *dc, *dd, *dbias;
    void *ws;
    RT(cudaMalloc(&da, m * k * sizeof(float)));
    RT(cudaMalloc(&db, k * n * sizeof(float)));
    RT(cudaMalloc(&dc, m * n * sizeof(float)));
    RT(cudaMalloc(&dd, m * n * sizeof(float)));
    RT(cudaMalloc(&dbias, m * sizeof(float)));
    RT(cudaMalloc(&ws, wsBytes));
    RT(cudaMemcpy(da, a.data(), m * k * sizeof(float), cudaMemcpyHostToDevice));
    RT(cudaMemcpy(db, b.data(), k * n * sizeof(float), cudaMemcpyHostToDevice));
    RT(cudaMemcpy(dc, c.data(), m * n * sizeof(float), cudaMemcpyHostToDevice));
    RT(cudaMemcpy(dbias, bias.data(), m * sizeof(float), cudaMemcpyHostToDevice));
    RT(cudaMemset(dd, 0xff, m * n * sizeof(float))); // NaN: an unwritten D shows
    lt_matmul(lt, s, CUDA_R_32F, m, n, k, da, db, dc, dd, dbias, alpha, beta, ws, wsBytes);
    RT(cudaMemcpyAsync(got.data(), dd, m * n * sizeof(float), cudaMemcpyDeviceToHost, s));
    RT(cudaStreamSynchronize(s));
    EXPECT_FLOATS("cublasLt fp32", got.data(), ref.data(), (size_t)m * n, 1e-4f);
    printf("cublasLt: fp32 matmul %dx%dx%d with bias and ReLU within 1e-4 of the CPU\n", m, n, k);

    // bf16 inputs, multiples of 1/8 in [-1, 1]: each product is a multiple of 1/64 of at most
    // 1, a sum of 264 of them is exact in fp32, so the result equals the CPU's exactly.
    std::vector<__nv_bfloat16> ha(m * k), hb(k * n);
    for (int i = 0; i < m * k; i++) {
        a[i] = (float)((int)((i * 2654435761u) % 17u) - 8) / 8.0f;
        ha[i] = __float2bfloat16(a[i]);
    }
    for (int i = 0; i < k * n; i++) {
        b[i] = (float)((int)((i * 40503u + 7u) % 17u) - 8) / 8.0f;
        hb[i] = __float2bfloat16(b[i]);
    }
    for (int col = 0; col < n; col++)
        for (int row = 0; row < m; row++) {
            double acc = 0;
            for (int q = 0; q < k; q++)
                acc += (double)a[q * m + row] * b[col * k + q];
            ref[col * m + row] = (float)(2.0 * acc - 1.0 * c[col * m + row]);
        }
    RT(cudaMemcpy(da, ha.data(), m * k * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));
    RT(cudaMemcpy(db, hb.data(), k * n * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice));
    RT(cudaMemset(dd, 0xff, m * n * sizeof(float)));
    lt_matmul(lt, s, CUDA_R_16BF, m, n, k, da, db, dc, dd, nullptr, 2.0f, -1.0f, ws, wsBytes);
    RT(cudaMemcpyAsync(got.data(), dd, m * n * sizeof(float), cudaMemcpyDeviceToHost, s));
    RT(cudaStreamSynchronize(s));
    // 2 acc and -c are exact in fp32: their sum rounds once, as the CPU's double rounded to float
    EXPECT_FLOATS("cublasLt bf16", got.data(), ref.data(), (size_t)m * n, 1e-6f);
    printf("cublasLt: bf16 matmul %dx%dx%d into fp32 equal to the CPU within 1e-6\n", m, n, k);
    LIB(cublasLtDestroy(lt));
    RT(cudaFree(da));
    RT(cudaFree(db));
    RT(cudaFree(dc));
    RT(cudaFree(dd));
    RT(cudaFree(dbias));
    RT(cudaFree(ws));
}

int main()
{
    cudaStream_t s;
    RT(cudaStreamCreate(&s));
    rand_check(CURAND_RNG_PSEUDO_PHILOX4_32_10, "philox4x32-10", s);
    rand_check(CURAND_RNG_PSEUDO_XORWOW, "xorwow", s);
    sparse_check(s);
    solver_check(s);
    lt_check(s);
    RT(cudaStreamDestroy(s));
    printf("mathlibs done\n");
    return 0;
}
