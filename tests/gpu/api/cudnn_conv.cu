// SPDX-License-Identifier: MIT
// cuDNN from C (the legacy API that PyTorch's fallback paths and many C programs use): a small
// convolution layer in NCHW float, each step against the CPU:
// * cudnnConvolutionForward, 2x3x17x15 input, 4x3x3x3 filters, padding 1, stride 1, FMA math,
//   implicit GEMM: within 1e-4 relative to max(1, |value|) of a CPU direct convolution; then
//   the heuristic's first algorithm (cudnnGetConvolutionForwardAlgorithm_v7, any math, with its
//   workspace): within 1e-2 (TF32 tensor cores are allowed there);
// * cudnnAddTensor of a per-channel bias and cudnnActivationForward (ReLU): exactly the CPU's
//   ReLU of the GPU's sum (a sum and a max are exact);
// * cudnnBatchNormalizationForwardTraining (spatial, factor 1): y within 1e-4, the saved mean
//   within 1e-5 and inverse deviation within 1e-4 of the CPU's, the running variance the
//   unbiased one within 1e-4.
// cuDNN comes from the pip package nvidia-cudnn-cu13 of the machine's python3 (run.sh adds its
// include/ and lib/ and an rpath); its wheel has only versioned libraries, hence -l:.
// openmps-gpu-pypkg: nvidia.cudnn
// openmps-gpu-link: -lcuda -l:libcudnn.so.9
#define PROG "cudnn_conv"
#include "api.h"
#include <cmath>
#include <cudnn.h>
#include <vector>

#define DNN(call)                                                                                  \
    do {                                                                                           \
        cudnnStatus_t st_ = (call);                                                                \
        if (st_ != CUDNN_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, "%s: line %d: %s returned %d (%s)\n", PROG, __LINE__, #call, (int)st_, \
                    cudnnGetErrorString(st_));                                                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static float value(unsigned i, unsigned salt)
{
    return (float)((i * 2654435761u + salt * 40503u) % 2001u) / 1000.0f - 1.0f; // in [-1, 1]
}

enum { N = 2, C = 3, H = 17, W = 15, K = 4, R = 3, S = 3, PAD = 1 };

static void conv_cpu(const std::vector<float> &x, const std::vector<float> &w,
                     std::vector<float> &y)
{
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            for (int h = 0; h < H; h++)
                for (int q = 0; q < W; q++) {
                    double acc = 0;
                    for (int c = 0; c < C; c++)
                        for (int r = 0; r < R; r++)
                            for (int s = 0; s < S; s++) {
                                int ih = h + r - PAD, iw = q + s - PAD;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                    continue;
                                acc += (double)x[((n * C + c) * H + ih) * W + iw] *
                                       w[((k * C + c) * R + r) * S + s];
                            }
                    y[((n * K + k) * H + h) * W + q] = (float)acc;
                }
}

int main()
{
    const size_t nx = N * C * H * W, nw = K * C * R * S, ny = N * K * H * W;
    std::vector<float> x(nx), w(nw), bias(K), ref(ny), got(ny), act(ny);
    for (size_t i = 0; i < nx; i++)
        x[i] = value((unsigned)i, 1);
    for (size_t i = 0; i < nw; i++)
        w[i] = value((unsigned)i, 2);
    for (int k = 0; k < K; k++)
        bias[k] = value((unsigned)k, 3) * 0.5f;
    conv_cpu(x, w, ref);

    size_t version = cudnnGetVersion();
    fprintf(stderr, "%s: cudnn %zu (headers %d.%d.%d)\n", PROG, version, CUDNN_MAJOR, CUDNN_MINOR,
            CUDNN_PATCHLEVEL);
    cudaStream_t st;
    RT(cudaStreamCreate(&st));
    cudnnHandle_t h;
    DNN(cudnnCreate(&h));
    DNN(cudnnSetStream(h, st));

    cudnnTensorDescriptor_t xd, yd, bd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    DNN(cudnnCreateTensorDescriptor(&xd));
    DNN(cudnnCreateTensorDescriptor(&yd));
    DNN(cudnnCreateTensorDescriptor(&bd));
    DNN(cudnnCreateFilterDescriptor(&wd));
    DNN(cudnnCreateConvolutionDescriptor(&cd));
    DNN(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, C, H, W));
    DNN(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, K, C, R, S));
    DNN(cudnnSetConvolution2dDescriptor(cd, PAD, PAD, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT));
    DNN(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));
    int on, oc, oh, ow;
    DNN(cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &on, &oc, &oh, &ow));
    EXPECT(on == N && oc == K && oh == H && ow == W);
    DNN(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, K, H, W));
    DNN(cudnnSetTensor4dDescriptor(bd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, K, 1, 1));

    float *dx, *dw, *dy, *db, *da, *dz;
    RT(cudaMalloc(&dx, nx * sizeof(float)));
    RT(cudaMalloc(&dw, nw * sizeof(float)));
    RT(cudaMalloc(&dy, ny * sizeof(float)));
    RT(cudaMalloc(&da, ny * sizeof(float)));
    RT(cudaMalloc(&dz, ny * sizeof(float)));
    RT(cudaMalloc(&db, K * sizeof(float)));
    RT(cudaMemcpy(dx, x.data(), nx * sizeof(float), cudaMemcpyHostToDevice));
    RT(cudaMemcpy(dw, w.data(), nw * sizeof(float), cudaMemcpyHostToDevice));
    RT(cudaMemcpy(db, bias.data(), K * sizeof(float), cudaMemcpyHostToDevice));
    const float one = 1.0f, zero = 0.0f;

    // ---- implicit GEMM, FMA math, no workspace
    size_t wsBytes = 0;
    const cudnnConvolutionFwdAlgo_t gemm = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    DNN(cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, gemm, &wsBytes));
    void *ws = nullptr;
    if (wsBytes)
        RT(cudaMalloc(&ws, wsBytes));
    RT(cudaMemsetAsync(dy, 0xff, ny * sizeof(float), st)); // NaN: an unwritten output shows
    DNN(cudnnConvolutionForward(h, &one, xd, dx, wd, dw, cd, gemm, ws, wsBytes, &zero, yd, dy));
    RT(cudaMemcpyAsync(got.data(), dy, ny * sizeof(float), cudaMemcpyDeviceToHost, st));
    RT(cudaStreamSynchronize(st));
    EXPECT_FLOATS("conv implicit gemm", got.data(), ref.data(), ny, 1e-4f);
    if (ws)
        RT(cudaFree(ws));
    printf("cudnn: convolution forward %dx%dx%dx%d * %dx%dx%dx%d (implicit gemm, fma) within "
           "1e-4 of the CPU\n",
           N, C, H, W, K, C, R, S);

    // ---- the heuristic's first choice, any math type, its workspace
    DNN(cudnnSetConvolutionMathType(cd, CUDNN_DEFAULT_MATH));
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    int found = 0;
    DNN(cudnnGetConvolutionForwardAlgorithm_v7(h, xd, wd, cd, yd, 8, &found, perf));
    int pick = -1;
    for (int i = 0; i < found && pick < 0; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS)
            pick = i;
    EXPECT(pick >= 0);
    DNN(cudnnSetConvolutionMathType(cd, perf[pick].mathType));
    DNN(cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, perf[pick].algo, &wsBytes));
    fprintf(stderr, "%s: heuristic algorithm %d, math %d, workspace %zu\n", PROG,
            (int)perf[pick].algo, (int)perf[pick].mathType, wsBytes);
    ws = nullptr;
    if (wsBytes)
        RT(cudaMalloc(&ws, wsBytes));
    RT(cudaMemsetAsync(dy, 0xff, ny * sizeof(float), st));
    DNN(cudnnConvolutionForward(h, &one, xd, dx, wd, dw, cd, perf[pick].algo, ws, wsBytes, &zero,
                                yd, dy));
    RT(cudaMemcpyAsync(got.data(), dy, ny * sizeof(float), cudaMemcpyDeviceToHost, st));
    RT(cudaStreamSynchronize(st));
    EXPECT_FLOATS("conv heuristic", got.data(), ref.data(), ny, 1e-2f);
    if (ws)
        RT(cudaFree(ws));
    printf("cudnn: convolution forward with the heuristic's algorithm within 1e-2 of the CPU\n");

    // ---- bias and ReLU
    DNN(cudnnAddTensor(h, &one, bd, db, &one, yd, dy));
    cudnnActivationDescriptor_t ad;
    DNN(cudnnCreateActivationDescriptor(&ad));
    DNN(cudnnSetActivationDescriptor(ad, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    DNN(cudnnActivationForward(h, ad, &one, yd, dy, &zero, yd, da));
    std::vector<float> sum(ny);
    RT(cudaMemcpyAsync(sum.data(), dy, ny * sizeof(float), cudaMemcpyDeviceToHost, st));
    RT(cudaMemcpyAsync(act.data(), da, ny * sizeof(float), cudaMemcpyDeviceToHost, st));
    RT(cudaStreamSynchronize(st));
    size_t positive = 0;
    for (size_t i = 0; i < ny; i++) {
        int k = (int)(i / (H * W)) % K;
        float want = got[i] + bias[k];
        EXPECT(sum[i] == want);
        EXPECT(act[i] == (want > 0 ? want : 0.0f));
        positive += want > 0;
    }
    EXPECT(positive > 0 && positive < ny); // the ReLU cut something and kept something
    printf("cudnn: add tensor (bias) and ReLU activation equal to the CPU's\n");

    // ---- batch norm, training, spatial
    cudnnTensorDescriptor_t sd;
    DNN(cudnnCreateTensorDescriptor(&sd));
    DNN(cudnnDeriveBNTensorDescriptor(sd, yd, CUDNN_BATCHNORM_SPATIAL));
    std::vector<float> gamma(K), beta(K), rmean(K, 0.0f), rvar(K, 1.0f), smean(K), sinv(K);
    for (int k = 0; k < K; k++) {
        gamma[k] = 1.0f + 0.25f * value((unsigned)k, 4);
        beta[k] = value((unsigned)k, 5);
    }
    float *dg, *dbeta, *drm, *drv, *dsm, *dsi;
    for (float **p : {&dg, &dbeta, &drm, &drv, &dsm, &dsi})
        RT(cudaMalloc(p, K * sizeof(float)));
    RT(cudaMemcpy(dg, gamma.data(), K * sizeof(float), cudaMemcpyHostToDevice));
    RT(cudaMemcpy(dbeta, beta.data(), K * sizeof(float), cudaMemcpyHostToDevice));
    RT(cudaMemcpy(drm, rmean.data(), K * sizeof(float), cudaMemcpyHostToDevice));
    RT(cudaMemcpy(drv, rvar.data(), K * sizeof(float), cudaMemcpyHostToDevice));
    const double eps = 1e-5;
    DNN(cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, yd, da, yd,
                                               dz, sd, dg, dbeta, 1.0, drm, drv, eps, dsm, dsi));
    std::vector<float> z(ny);
    RT(cudaMemcpyAsync(z.data(), dz, ny * sizeof(float), cudaMemcpyDeviceToHost, st));
    RT(cudaMemcpyAsync(rmean.data(), drm, K * sizeof(float), cudaMemcpyDeviceToHost, st));
    RT(cudaMemcpyAsync(rvar.data(), drv, K * sizeof(float), cudaMemcpyDeviceToHost, st));
    RT(cudaMemcpyAsync(smean.data(), dsm, K * sizeof(float), cudaMemcpyDeviceToHost, st));
    RT(cudaMemcpyAsync(sinv.data(), dsi, K * sizeof(float), cudaMemcpyDeviceToHost, st));
    RT(cudaStreamSynchronize(st));
    std::vector<float> zref(ny), mref(K), iref(K), vref(K);
    const int per = N * H * W;
    for (int k = 0; k < K; k++) {
        double s = 0, sq = 0;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < H * W; i++)
                s += act[(n * K + k) * H * W + i];
        double mean = s / per;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < H * W; i++) {
                double d = act[(n * K + k) * H * W + i] - mean;
                sq += d * d;
            }
        double var = sq / per, inv = 1.0 / sqrt(var + eps);
        mref[k] = (float)mean;
        iref[k] = (float)inv;
        vref[k] = (float)(sq / (per - 1));
        for (int n = 0; n < N; n++)
            for (int i = 0; i < H * W; i++) {
                size_t j = (size_t)(n * K + k) * H * W + i;
                zref[j] = (float)(gamma[k] * (act[j] - mean) * inv + beta[k]);
            }
    }
    EXPECT_FLOATS("batchnorm y", z.data(), zref.data(), ny, 1e-4f);
    EXPECT_FLOATS("batchnorm saved mean", smean.data(), mref.data(), K, 1e-5f);
    EXPECT_FLOATS("batchnorm saved inverse deviation", sinv.data(), iref.data(), K, 1e-4f);
    EXPECT_FLOATS("batchnorm running mean", rmean.data(), mref.data(), K, 1e-5f);
    EXPECT_FLOATS("batchnorm running variance", rvar.data(), vref.data(), K, 1e-4f);
    printf("cudnn: batch norm forward training (spatial) within 1e-4 of the CPU, its statistics "
           "too\n");

    for (float *p : {dg, dbeta, drm, drv, dsm, dsi, dx, dw, dy, db, da, dz})
        RT(cudaFree(p));
    DNN(cudnnDestroyActivationDescriptor(ad));
    DNN(cudnnDestroyTensorDescriptor(sd));
    DNN(cudnnDestroyTensorDescriptor(xd));
    DNN(cudnnDestroyTensorDescriptor(yd));
    DNN(cudnnDestroyTensorDescriptor(bd));
    DNN(cudnnDestroyFilterDescriptor(wd));
    DNN(cudnnDestroyConvolutionDescriptor(cd));
    DNN(cudnnDestroy(h));
    RT(cudaStreamDestroy(st));
    printf("cudnn_conv done\n");
    return 0;
}
