# SPDX-License-Identifier: MIT
"""CuPy (issue #11): an elementwise and a reduction kernel compiled at run time, a RawKernel,
cuBLAS (a matrix product), cuFFT, the memory pool; each checked against NumPy. Prints only
deterministic lines; exit 77 when CuPy or a GPU is missing."""
import sys

try:
    import cupy as cp
    import numpy as np
except ImportError as e:
    print("SKIP: no CuPy (%s)" % e, file=sys.stderr)
    sys.exit(77)
try:
    cp.cuda.runtime.getDeviceCount()
except Exception as e:  # noqa: BLE001 (any CUDA error means no usable GPU)
    print("SKIP: no GPU for CuPy (%s)" % e, file=sys.stderr)
    sys.exit(77)

rng = np.random.default_rng(7)
x = rng.random((512, 512), dtype=np.float32)
y = rng.random((512, 512), dtype=np.float32)
dx, dy = cp.asarray(x), cp.asarray(y)
checks = []
axpy = cp.ElementwiseKernel("float32 a, float32 x, float32 y", "float32 z", "z = a * x + y",
                            "openmps_axpy")
checks.append(("elementwise", np.allclose(axpy(np.float32(2.5), dx, dy).get(), 2.5 * x + y,
                                          rtol=1e-6)))
ssq = cp.ReductionKernel("float32 x", "float32 s", "x * x", "a + b", "s = a", "0",
                         "openmps_ssq")
checks.append(("reduction", np.isclose(float(ssq(dx)), float((x.astype(np.float64) ** 2).sum()),
                                       rtol=1e-4)))
raw = cp.RawKernel(r'''
extern "C" __global__ void twice(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = 2.0f * in[i];
}''', "twice")
flat = dx.ravel()
out = cp.empty_like(flat)
raw(((flat.size + 255) // 256,), (256,), (flat, out, np.int32(flat.size)))
checks.append(("rawkernel", np.array_equal(out.get(), 2.0 * x.ravel())))
checks.append(("cublas", np.allclose((dx @ dy).get(), x.astype(np.float64) @ y, rtol=1e-3,
                                     atol=1e-3)))
f = cp.fft.fft(dx[0]).get()
checks.append(("cufft", np.allclose(f, np.fft.fft(x[0].astype(np.float64)), rtol=1e-3,
                                    atol=1e-2)))
pool = cp.get_default_memory_pool()
checks.append(("memory pool", pool.used_bytes() > 0))
del dx, dy, out, flat
pool.free_all_blocks()
checks.append(("memory pool freed", pool.total_bytes() <= pool.used_bytes() + (64 << 20)))
failed = 0
for name, ok in checks:
    print("%s: %s" % (name, bool(ok)))
    failed += not ok
sys.exit(1 if failed else 0)
