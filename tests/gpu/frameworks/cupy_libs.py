# SPDX-License-Identifier: MIT
"""CuPy with the CUDA libraries (issue #11), each checked on the host:
* cuRAND (cupy.random.RandomState): two generators of one seed give equal arrays; uniform
  mean within 0.005 of 1/2, normal mean within 0.01 of 0 and variance within 0.02 of 1 (2^20
  samples);
* cuSPARSE: a cupyx.scipy.sparse CSR matrix (2048 x 2048, about 1 % filled) times a vector and
  times a dense matrix, within rtol 1e-5 / atol 1e-5 of the float64 product on the host;
* cuSOLVER: linalg.solve (max |A x - b| / (|A| |x|) < 1e-5), cholesky (|L L^T - A| / |A|
  < 1e-5), eigh (|A V - V diag(w)| / |A| < 1e-4 and eigenvalues within 1e-3 relative of
  NumPy's), svd (|U diag(s) V^T - A| / |A| < 1e-5, singular values within 1e-4 relative);
* NVRTC: a RawModule compiled with -std=c++17 and a template kernel by name expression, and a
  RawModule with enable_cooperative_groups=True (a grid-wide sync, launched cooperatively),
  optional in a CuPy install (its headers), so where it does not compile "not available" is
  printed, and native and openmps must agree on it. (Not jitify: its one-time warm-up took
  over 150 s on the H100, natively as under openmps.)
Prints only deterministic lines; exit 77 when CuPy or a GPU is missing."""
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
import cupyx.scipy.sparse as cusparse

print("cupy %s" % cp.__version__.split(".")[0], file=sys.stderr)
checks = []


def check(name, ok, detail=""):
    checks.append((name, bool(ok)))
    if detail:
        print("%s: %s" % (name, detail), file=sys.stderr)


# ---- cuRAND
n = 1 << 20
a = cp.random.RandomState(1234).standard_normal(n, dtype=cp.float32)
b = cp.random.RandomState(1234).standard_normal(n, dtype=cp.float32)
check("curand same seed same sequence", bool(cp.array_equal(a, b)))
h = a.get().astype(np.float64)
check("curand normal moments", abs(h.mean()) < 0.01 and abs(h.var() - 1.0) < 0.02,
      "mean %.5f var %.5f" % (h.mean(), h.var()))
u = cp.random.RandomState(99).uniform(size=n, dtype=cp.float64).get()
check("curand uniform", u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.005,
      "mean %.5f" % u.mean())

# ---- cuSPARSE
rng = np.random.default_rng(11)
m = 2048
rows = rng.integers(0, m, 40000)
cols = rng.integers(0, m, 40000)
vals = rng.standard_normal(40000).astype(np.float32)
dense = np.zeros((m, m), dtype=np.float64)
np.add.at(dense, (rows, cols), vals.astype(np.float64))
coo = cusparse.coo_matrix((cp.asarray(vals), (cp.asarray(rows), cp.asarray(cols))),
                          shape=(m, m))
csr = coo.tocsr()  # duplicates summed
x = rng.standard_normal(m).astype(np.float32)
y = (csr @ cp.asarray(x)).get()
check("cusparse csr @ vector", np.allclose(y, dense @ x.astype(np.float64), rtol=1e-5,
                                           atol=1e-5))
xm = rng.standard_normal((m, 8)).astype(np.float32)
ym = (csr @ cp.asarray(xm)).get()
check("cusparse csr @ matrix", np.allclose(ym, dense @ xm.astype(np.float64), rtol=1e-5,
                                           atol=1e-5))

# ---- cuSOLVER
k = 256
g = rng.standard_normal((k, k))
A = (g + k ** 0.5 * 2 * np.eye(k)).astype(np.float32)  # general, well conditioned
S = (g @ g.T / k + np.eye(k)).astype(np.float32)  # symmetric positive definite
rhs = rng.standard_normal((k, 3)).astype(np.float32)
dA, dS = cp.asarray(A), cp.asarray(S)
A64, S64 = A.astype(np.float64), S.astype(np.float64)
xs = cp.linalg.solve(dA, cp.asarray(rhs)).get().astype(np.float64)
res = np.abs(A64 @ xs - rhs).max() / (np.abs(A64).sum(axis=1).max() * np.abs(xs).max())
check("cusolver solve", res < 1e-5, "residual %.3g" % res)
L = np.tril(cp.linalg.cholesky(dS).get().astype(np.float64))
res = np.abs(L @ L.T - S64).max() / np.abs(S64).max()
check("cusolver cholesky", res < 1e-5, "residual %.3g" % res)
w, V = cp.linalg.eigh(dS)
w, V = w.get().astype(np.float64), V.get().astype(np.float64)
res = np.abs(S64 @ V - V * w).max() / np.abs(S64).max()
wref = np.linalg.eigvalsh(S64)
check("cusolver eigh", res < 1e-4 and np.allclose(w, wref, rtol=1e-3, atol=1e-4),
      "residual %.3g" % res)
U, s, Vt = cp.linalg.svd(dA, full_matrices=False)
U, s, Vt = U.get().astype(np.float64), s.get().astype(np.float64), Vt.get().astype(np.float64)
res = np.abs((U * s) @ Vt - A64).max() / np.abs(A64).max()
sref = np.linalg.svd(A64, compute_uv=False)
check("cusolver svd", res < 1e-5 and np.allclose(s, sref, rtol=1e-4, atol=1e-4),
      "residual %.3g" % res)

# ---- NVRTC: C++17 and a template kernel by name expression
code = r'''
template <typename... Ts>
__device__ constexpr int sizes() { return (0 + ... + (int)sizeof(Ts)); }  // a C++17 fold
template <typename T>
__global__ void affine(const T *in, T *out, T a, T b, int n)
{
    static_assert(sizes<char, short, int>() == 7, "a C++17 fold");
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        if constexpr (sizeof(T) == 8)
            out[i] = a * in[i] + b;
        else
            out[i] = fmaf(a, in[i], b);
    }
}
'''
names = ("affine<float>", "affine<double>")
mod = cp.RawModule(code=code, options=("-std=c++17",), name_expressions=names)
v = rng.standard_normal(10000)
for name, dt in zip(names, (np.float32, np.float64)):
    src = cp.asarray(v.astype(dt))
    out = cp.empty_like(src)
    mod.get_function(name)(((v.size + 255) // 256,), (256,),
                           (src, out, dt(1.5), dt(-0.25), np.int32(v.size)))
    want = 1.5 * v.astype(dt).astype(np.float64) - 0.25
    check("nvrtc c++17 %s" % name, np.allclose(out.get(), want, rtol=1e-6, atol=1e-6))

# ---- NVRTC with cooperative groups: a grid-wide sync between two phases
coop = r'''
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void two_phase(float *buf, float *out, int n)
{
    cg::grid_group grid = cg::this_grid();
    for (int i = grid.thread_rank(); i < n; i += grid.size())
        buf[i] = (float)i;
    grid.sync();
    for (int i = grid.thread_rank(); i < n; i += grid.size())
        out[i] = buf[n - 1 - i] * 2.0f;
}
'''


def optional(what, run):
    """Runs an optional feature (its headers or jitify may be missing from a CuPy install): a
    compile failure prints "not available"; a failure of the driver (openmps's part) fails."""
    try:
        ok = run()
    except (cp.cuda.driver.CUDADriverError, cp.cuda.runtime.CUDARuntimeError):
        raise
    except Exception as e:  # noqa: BLE001 (a compiler or CuPy without the feature)
        print("%s: not available" % what)
        print("%s: %s: %s" % (what, type(e).__name__, (str(e).splitlines() or [""])[0]),
              file=sys.stderr)
        return
    print("%s: %s" % (what, "ran" if ok else "ran, result DIFFERENT"))
    checks.append((what, ok))


def cooperative():
    cmod = cp.RawModule(code=coop, enable_cooperative_groups=True)
    nn = 1 << 16
    buf = cp.zeros(nn, dtype=cp.float32)
    out = cp.zeros(nn, dtype=cp.float32)
    cmod.get_function("two_phase")((8,), (128,), (buf, out, np.int32(nn)))
    return np.array_equal(out.get(), 2.0 * np.arange(nn - 1, -1, -1, dtype=np.float32))


optional("nvrtc cooperative grid sync", cooperative)

failed = 0
for name, ok in checks:
    print("%s: %s" % (name, ok))
    failed += not ok
sys.exit(1 if failed else 0)
