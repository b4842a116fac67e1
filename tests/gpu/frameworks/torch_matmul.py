# SPDX-License-Identifier: MIT
"""The tutorial's second exercise (issue #11): a 10000 x 10000 torch.matmul on the GPU, timed
(stderr), its result checked against the CPU on a slice. Prints only deterministic lines; exit
77 when PyTorch or a GPU is missing (the runner prints SKIP with the reason)."""
import sys
import time

try:
    import torch
except ImportError as e:
    print("SKIP: no PyTorch (%s)" % e, file=sys.stderr)
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP: torch.cuda.is_available() is False", file=sys.stderr)
    sys.exit(77)

N = 10000
g = torch.Generator().manual_seed(1234)
a = torch.rand(N, N, generator=g)
b = torch.rand(N, N, generator=g)
da, db = a.cuda(), b.cuda()
torch.cuda.synchronize()
t0 = time.perf_counter()
dc = torch.matmul(da, db)
torch.cuda.synchronize()
print("matmul %d x %d: %.1f ms on the GPU" % (N, N, (time.perf_counter() - t0) * 1e3),
      file=sys.stderr)
rows = slice(0, 64)
ref = torch.matmul(a[rows].double(), b.double())  # 64 rows on the CPU, in double
got = dc[rows].cpu().double()
err = ((got - ref).abs() / ref.abs().clamp(min=1.0)).max().item()
# float32 sums of 10000 products in another order: relative error well under 1e-3
print("matmul slice within 1e-3 of the CPU: %s" % (err < 1e-3))
if err >= 1e-3:
    print("largest relative error %g" % err, file=sys.stderr)
    sys.exit(1)
free, total = torch.cuda.mem_get_info()
print("mem_get_info answers: %s" % (0 < free <= total))
