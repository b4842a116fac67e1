#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""CuPy's loop over cuSOLVER's gesvd, as CuPy's own TestSVD::test_svd_rank4_loop runs it
(linalg/_decomposition.py's _gesvd_batched: one matrix at a time, with U and V): the test that
took 1.7 times as long under openmps in the suites' runs (docs/compatibility.md). Prints the
seconds per call of cupy.linalg.svd on a (3, 2, 64, 64) batch, with and without U and V, so
that a trace (scripts/gpu.sh torchtrace with TRACE_CMD) can say which driver calls cost it.
Usage: bench/cupy_svd.py [ROUNDS]
"""
import sys
import time

import cupy


def timed(f, rounds):
    f()  # the first call loads cuSOLVER's kernels
    cupy.cuda.runtime.deviceSynchronize()
    t = time.perf_counter()
    for _ in range(rounds):
        f()
    cupy.cuda.runtime.deviceSynchronize()
    return (time.perf_counter() - t) / rounds


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    a = cupy.random.rand(3, 2, 64, 64, dtype=cupy.float64)
    uv = timed(lambda: cupy.linalg.svd(a, full_matrices=True), rounds)
    s = timed(lambda: cupy.linalg.svd(a, compute_uv=False), rounds)
    print("svd (3, 2, 64, 64) float64: with U and V %.2f ms, values only %.2f ms"
          % (uv * 1e3, s * 1e3))


if __name__ == "__main__":
    main()
