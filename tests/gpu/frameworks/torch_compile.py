# SPDX-License-Identifier: MIT
"""torch.compile (issue #11): Inductor turns a small function (pointwise and a reduction) and a
small MLP into Triton kernels, which Triton loads and launches through the driver API
(cuModuleLoadData, cuLaunchKernel). Both compile afresh in each run: the Inductor and Triton
caches are new temporary folders. Checks: compiled against eager on the GPU (1e-5) and against
float64 on the CPU (1e-4), for two inputs each; Triton kernels were generated and built.
fp32, TF32 off. Prints only booleans; exit 77 when PyTorch, Triton, a C compiler (Triton builds
its launcher) or a GPU is missing."""
import os
import shutil
import sys
import tempfile
import time

CACHE = tempfile.mkdtemp(prefix="openmps-compile.")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(CACHE, "inductor")
os.environ["TRITON_CACHE_DIR"] = os.path.join(CACHE, "triton")
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # compile in this process


def skip(why):
    print("SKIP: %s" % why, file=sys.stderr)
    shutil.rmtree(CACHE, ignore_errors=True)
    sys.exit(77)


try:
    import torch
except ImportError as e:
    skip("no PyTorch (%s)" % e)
try:
    import triton
    del triton  # only its presence matters here
except ImportError as e:
    skip("no Triton (%s)" % e)
if not torch.cuda.is_available():
    skip("torch.cuda.is_available() is False")
if not any(shutil.which(c) for c in (os.environ.get("CC") or "gcc", "cc", "clang")):
    skip("no C compiler for Triton's launcher")

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
checks = []


def rel(got, ref):
    got, ref = got.detach().cpu().double(), ref.detach().cpu().double()
    return ((got - ref).norm() / ref.norm().clamp(min=1e-30)).item()


def f(x, y):
    return torch.sin(x) * y + torch.relu(x - y).sum(dim=-1, keepdim=True)


torch.manual_seed(41)
mlp = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 10))
mlp_ref = [p.detach().double() for p in mlp.parameters()]
mlp = mlp.cuda().eval()


def mlp_cpu(x):
    w1, b1, w2, b2 = mlp_ref
    return torch.nn.functional.gelu(x.double() @ w1.T + b1) @ w2.T + b2


cf = torch.compile(f, fullgraph=True, dynamic=False)
cmlp = torch.compile(mlp, fullgraph=True, dynamic=False)
g = torch.Generator().manual_seed(42)
ok_eager = ok_ref = True
t0 = time.perf_counter()
for call in range(2):  # the second call launches the kernels already built
    x, y = torch.randn(256, 512, generator=g), torch.randn(256, 512, generator=g)
    dx, dy = x.cuda(), y.cuda()
    with torch.no_grad():
        got = cf(dx, dy)
        e1, e2 = rel(got, f(dx, dy)), rel(got, f(x.double(), y.double()))
        xm = torch.randn(512, 64, generator=g)
        gotm = cmlp(xm.cuda())
        e3, e4 = rel(gotm, mlp(xm.cuda())), rel(gotm, mlp_cpu(xm))
    print("call %d (%.1f s): function %.2e from eager, %.2e from the CPU; MLP %.2e, %.2e"
          % (call, time.perf_counter() - t0, e1, e2, e3, e4), file=sys.stderr)
    ok_eager &= e1 < 1e-5 and e3 < 1e-5
    ok_ref &= e2 < 1e-4 and e4 < 1e-4
checks.append(("compiled within 1e-5 of eager", ok_eager))
checks.append(("compiled within 1e-4 of the CPU (float64)", ok_ref))

generated = built = 0
for root, _, files in os.walk(CACHE):
    for name in files:
        path = os.path.join(root, name)
        if name.endswith(".py"):
            with open(path, errors="replace") as src:
                generated += "@triton.jit" in src.read()
        built += name.endswith(".cubin")
print("%d generated sources with Triton kernels, %d cubins" % (generated, built), file=sys.stderr)
checks.append(("Inductor generated Triton kernels", generated > 0))
checks.append(("Triton built cubins in this run", built > 0))
shutil.rmtree(CACHE, ignore_errors=True)

failed = 0
for name, ok in checks:
    print("%s: %s" % (name, bool(ok)))
    failed += not ok
sys.exit(1 if failed else 0)
