# SPDX-License-Identifier: MIT
"""Inference (issue #11): a torch.nn.TransformerEncoder (batch_first, 3 layers; its attention is
scaled_dot_product_attention) and torchvision's ResNet-18 with random weights, in eval mode on
the GPU in fp32 with TF32 off, each compared with the same model in float64 on the CPU
(norm-wise relative error: 1e-4 for the encoder, 3e-4 for ResNet-18, whose 20 convolutions may
run as Winograd or FFT in cuDNN); F.scaled_dot_product_attention directly, plain and causal in
fp32 (1e-4) and in bf16 (the flash kernel's type; 1e-2), against softmax(QK^T/sqrt(d))V written
out in float64 on the CPU. Prints only booleans; errors go to stderr. Exit 77 when PyTorch,
torchvision or a GPU is missing."""
import math
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torchvision
except ImportError as e:
    print("SKIP: no PyTorch or torchvision (%s)" % e, file=sys.stderr)
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP: torch.cuda.is_available() is False", file=sys.stderr)
    sys.exit(77)

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
checks = []


def rel(got, ref):
    got, ref = got.detach().cpu().double(), ref.detach().cpu().double()
    return ((got - ref).norm() / ref.norm().clamp(min=1e-30)).item()


def compare(name, got, ref, tol):
    err = rel(got, ref)
    ok = err < tol and bool(torch.isfinite(got).all())
    print("%s: relative error %.2e (tolerance %g)" % (name, err, tol), file=sys.stderr)
    checks.append(("%s within %g of the CPU (float64)" % (name, tol), ok))


def run_model(name, model, x, tol):
    """model (fp32, CPU, eval) on the GPU in fp32 against a float64 copy on the CPU."""
    model.eval()
    with torch.no_grad():
        ref = model.double()(x.double())
        model.float().cuda()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        got = model(x.cuda())
        torch.cuda.synchronize()
        print("%s on the GPU: %.1f ms (first call)" % (name, (time.perf_counter() - t0) * 1e3),
              file=sys.stderr)
        checks.append(("%s output shape" % name, tuple(got.shape) == tuple(ref.shape)))
        compare(name, got, ref, tol)


# a transformer encoder: 3 layers, d_model 128, 4 heads; batch 8, sequence 64
torch.manual_seed(21)
layer = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256, dropout=0.0,
                                   batch_first=True)
encoder = nn.TransformerEncoder(layer, num_layers=3, enable_nested_tensor=False)
g = torch.Generator().manual_seed(22)
run_model("transformer encoder", encoder, torch.randn(8, 64, 128, generator=g), 1e-4)

# torchvision's ResNet-18 with random weights (kaiming init, batch norm at its defaults): 4 images
torch.manual_seed(23)
resnet = torchvision.models.resnet18(weights=None)
run_model("resnet18", resnet, torch.rand(4, 3, 224, 224, generator=g), 3e-4)


def sdpa_reference(q, k, v, causal):
    q, k, v = q.double(), k.double(), v.double()
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


# scaled_dot_product_attention: batch 2, 8 heads, sequence 256, head size 64
q, k, v = (torch.randn(2, 8, 256, 64, generator=g) for _ in range(3))
for dtype, tol in ((torch.float32, 1e-4), (torch.bfloat16, 1e-2)):
    # the reference sees the inputs as the GPU does: rounded to dtype first
    qd, kd, vd = (t.to(dtype) for t in (q, k, v))
    for causal in (False, True):
        with torch.no_grad():
            got = F.scaled_dot_product_attention(qd.cuda(), kd.cuda(), vd.cuda(),
                                                 is_causal=causal)
        name = "sdpa %s%s" % (str(dtype).replace("torch.", ""), " causal" if causal else "")
        checks.append(("%s dtype" % name, got.dtype == dtype))
        compare(name, got, sdpa_reference(qd, kd, vd, causal), tol)

failed = 0
for name, ok in checks:
    print("%s: %s" % (name, bool(ok)))
    failed += not ok
sys.exit(1 if failed else 0)
