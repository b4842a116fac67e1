# SPDX-License-Identifier: MIT
"""What PyTorch sees under CUDA_VISIBLE_DEVICES (tests/gpu/multi/run.sh): the device count,
each device's name and UUID, and a seeded matrix product on each, summed on the CPU. The same
lines natively and under openmps for the same variable; "no torch" where PyTorch is missing."""
try:
    import torch
except ImportError:
    print("no torch")
    raise SystemExit(0)

n = torch.cuda.device_count()
print("count", n)
for d in range(n):
    p = torch.cuda.get_device_properties(d)
    g = torch.Generator().manual_seed(d)
    a = torch.randn(256, 256, generator=g)
    c = (a.to("cuda:%d" % d) @ a.to("cuda:%d" % d)).cpu()
    ok = torch.allclose(c, a @ a, rtol=1e-3, atol=1e-3)
    print("device", d, p.name, str(p.uuid), "matmul", "ok" if ok else "WRONG")
