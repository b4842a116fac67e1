# SPDX-License-Identifier: MIT
"""Training (issue #11): a small CNN (cuDNN convolutions, batch norm, ReLU, max and average
pooling, a linear layer) trained for 40 Adam steps under torch.autocast in bf16 on fixed
synthetic data whose labels the network can learn. Checks: the first step's forward output and
gradients in fp32 (TF32 off) against the same model and batch in float64 on the CPU (norm-wise
relative 1e-4 for the loss, 1e-3 for each parameter's gradient: cuDNN may pick Winograd or FFT
algorithms and batch norm's backward cancels), the first autocast loss within bf16's 1e-2 of
the CPU's, every loss finite, the last loss below half the first. Prints only booleans; the
losses go to stderr. Exit 77 when PyTorch or a GPU is missing."""
import copy
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print("SKIP: no PyTorch (%s)" % e, file=sys.stderr)
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP: torch.cuda.is_available() is False", file=sys.stderr)
    sys.exit(77)

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

N, CLASSES, BATCH, STEPS = 512, 10, 128, 40


def make_data():
    """512 images 3 x 32 x 32: a fixed random template per class plus noise; the label is the
    class whose template the image was made from (a deterministic function of the data)."""
    g = torch.Generator().manual_seed(11)
    templates = torch.randn(CLASSES, 3, 32, 32, generator=g)
    labels = torch.randint(0, CLASSES, (N,), generator=g)
    images = templates[labels] + 1.0 * torch.randn(N, 3, 32, 32, generator=g)
    return images, labels


def make_model():
    torch.manual_seed(5)
    # convolutions before batch norm carry no bias: its gradient would be zero up to rounding,
    # and a relative comparison of rounding noise means nothing
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, CLASSES))


def rel(got, ref):
    got, ref = got.detach().cpu().double(), ref.detach().cpu().double()
    return ((got - ref).norm() / ref.norm().clamp(min=1e-30)).item()


images, labels = make_data()
base = make_model()
ref_model = copy.deepcopy(base).double()
model = copy.deepcopy(base).cuda()
dimages, dlabels = images.cuda(), labels.cuda()
checks = []

# the first step in fp32 (no autocast) against float64 on the CPU, same batch, same weights
xb, yb = images[:BATCH], labels[:BATCH]
ref_loss = F.cross_entropy(ref_model(xb.double()), yb)
ref_loss.backward()
loss32 = F.cross_entropy(model(dimages[:BATCH]), dlabels[:BATCH])
loss32.backward()
loss_err = rel(loss32, ref_loss)
grad_errs = [(name, rel(p.grad, q.grad))
             for (name, p), (_, q) in zip(model.named_parameters(), ref_model.named_parameters())]
worst = max(grad_errs, key=lambda t: t[1])
print("fp32 loss %.6f, CPU float64 %.6f, relative error %.2e; worst gradient %s %.2e"
      % (loss32.item(), ref_loss.item(), loss_err, worst[0], worst[1]), file=sys.stderr)
checks.append(("fp32 first loss within 1e-4 of the CPU (float64)", loss_err < 1e-4))
checks.append(("fp32 first gradients within 1e-3 of the CPU (float64)",
               all(e < 1e-3 for _, e in grad_errs)))
model.zero_grad(set_to_none=True)

# training in bf16 autocast
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
losses = []
torch.cuda.synchronize()
t0 = time.perf_counter()
for step in range(STEPS):
    lo = (step * BATCH) % N
    x, y = dimages[lo:lo + BATCH], dlabels[lo:lo + BATCH]
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
        out = model(x)
        loss = F.cross_entropy(out, y)
    if step == 0:
        checks.append(("autocast output is bf16", out.dtype == torch.bfloat16))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    losses.append(loss.item())
torch.cuda.synchronize()
print("%d steps in %.1f ms; losses %s" % (STEPS, (time.perf_counter() - t0) * 1e3,
                                          " ".join("%.4f" % v for v in losses)), file=sys.stderr)
# the first autocast step saw the same weights and batch as the fp32 step above
checks.append(("bf16 first loss within 1e-2 of the CPU (float64)",
               abs(losses[0] - ref_loss.item()) / ref_loss.item() < 1e-2))
checks.append(("loss finite at every step", all(v == v and abs(v) != float("inf")
                                                for v in losses)))
checks.append(("last loss below half the first", losses[-1] < 0.5 * losses[0]))
model.eval()
with torch.no_grad():
    acc = (model(dimages).argmax(1) == dlabels).float().mean().item()
print("training accuracy %.3f" % acc, file=sys.stderr)
checks.append(("training accuracy above 0.5", acc > 0.5))

failed = 0
for name, ok in checks:
    print("%s: %s" % (name, bool(ok)))
    failed += not ok
sys.exit(1 if failed else 0)
