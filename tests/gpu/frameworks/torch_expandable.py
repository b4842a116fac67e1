# SPDX-License-Identifier: MIT
"""The caching allocator with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (issue #11): a
segment grows by mapping more physical memory after what it already maps (cuMemCreate,
cuMemMap, cuMemSetAccess on one reserved range), so tensors, copies and kernels span mappings
side by side. Allocates int32 tensors of 8 MiB .. 1 GiB filled by arange, frees every other one,
allocates again in between, then a 1.5 GiB tensor after them and a torch.cat of several; every
value is checked exactly (int64 sums against the closed form, slices copied back and compared).
Then memory_stats, and empty_cache lowering memory_reserved. Prints only booleans; exit 77
when PyTorch or a GPU is missing."""
import os
import sys

os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"  # before torch is imported

try:
    import torch
except ImportError as e:
    print("SKIP: no PyTorch (%s)" % e, file=sys.stderr)
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP: torch.cuda.is_available() is False", file=sys.stderr)
    sys.exit(77)

MiB = 1 << 20
checks = []


def filled(nbytes, offset):
    """an int32 tensor of nbytes on the GPU holding offset, offset + 1, ..."""
    n = nbytes // 4
    return torch.arange(offset, offset + n, dtype=torch.int32, device="cuda")


def expected_sum(n, offset):
    return n * offset + n * (n - 1) // 2


def holds(t, offset):
    """t holds offset, offset + 1, ...: its sum on the GPU, and three slices copied back."""
    n = t.numel()
    if t.sum(dtype=torch.int64).item() != expected_sum(n, offset):
        return False
    for lo in (0, n // 2 - 512, n - 1024):
        got = t[lo:lo + 1024].cpu()
        if not torch.equal(got, torch.arange(offset + lo, offset + lo + 1024, dtype=torch.int32)):
            return False
    return True


torch.cuda.synchronize()
base_alloc = torch.cuda.memory_allocated()
sizes = [8 * MiB << i for i in range(8)]  # 8 MiB .. 1 GiB
tensors = {i: filled(s, 1000 * i) for i, s in enumerate(sizes)}
checks.append(("growing tensors hold their values",
               all(holds(t, 1000 * i) for i, t in tensors.items())))
snapshot = torch.cuda.memory_snapshot()
expandable = [seg.get("is_expandable") for seg in snapshot]
print("%d segments, is_expandable %s" % (len(snapshot), expandable), file=sys.stderr)
checks.append(("the segments are expandable", len(snapshot) > 0 and all(expandable)))
checks.append(("memory_allocated counts the tensors",
               torch.cuda.memory_allocated() - base_alloc >= sum(sizes)))

for i in range(1, 8, 2):  # free 16 MiB, 64 MiB, 256 MiB, 1 GiB
    del tensors[i]
again = {i: filled(s, 7 + 100 * i) for i, s in enumerate([24 * MiB, 96 * MiB, 384 * MiB])}
checks.append(("tensors allocated into freed space hold their values",
               all(holds(t, 7 + 100 * i) for i, t in again.items())))
checks.append(("the tensors kept hold their values",
               all(holds(t, 1000 * i) for i, t in tensors.items())))

big = filled(1536 * MiB, 5)  # after the others: likely on freshly mapped memory beside the old
checks.append(("a 1.5 GiB tensor allocated last holds its values", holds(big, 5)))
parts = [tensors[0], again[0], tensors[2], again[1], tensors[4]]
cat = torch.cat(parts)
ok = cat.numel() == sum(p.numel() for p in parts)
lo = 0
for p in parts:  # each piece of the concatenation equals its source, on the GPU
    ok = ok and torch.equal(cat[lo:lo + p.numel()], p)
    lo += p.numel()
checks.append(("torch.cat of tensors in several mappings equals its parts", ok))
# a kernel reading two large tensors and writing a third (int32: the sums stay below 2^31)
m = tensors[6].numel()
mixed = big[:m] + tensors[6]
checks.append(("arithmetic across tensors exact", mixed.sum(dtype=torch.int64).item()
               == expected_sum(m, 5) + expected_sum(m, 6000)))
copy = torch.empty_like(big)
copy.copy_(big)  # a device-to-device copy of 1.5 GiB
checks.append(("a device-to-device copy of the 1.5 GiB tensor exact", torch.equal(copy, big)))

stats = torch.cuda.memory_stats()
print("reserved %d MiB, allocated %d MiB, peak %d MiB"
      % (torch.cuda.memory_reserved() // MiB, torch.cuda.memory_allocated() // MiB,
         stats.get("allocated_bytes.all.peak", 0) // MiB), file=sys.stderr)
checks.append(("memory_stats agrees with memory_allocated",
               stats.get("allocated_bytes.all.current") == torch.cuda.memory_allocated()))
checks.append(("memory_stats peak covers the tensors",
               stats.get("allocated_bytes.all.peak", 0) >= 2 * 1536 * MiB + 8 * MiB))

del tensors, again, big, parts, p, cat, mixed, copy
torch.cuda.synchronize()
reserved = torch.cuda.memory_reserved()
torch.cuda.empty_cache()
after = torch.cuda.memory_reserved()
print("empty_cache: reserved %d MiB -> %d MiB" % (reserved // MiB, after // MiB),
      file=sys.stderr)
checks.append(("memory_allocated back to where it began",
               torch.cuda.memory_allocated() == base_alloc))
checks.append(("empty_cache unmaps at least 1 GiB", after <= reserved - 1024 * MiB))
# and memory mapped anew after the unmapping works as well
t = filled(512 * MiB, 3)
checks.append(("a tensor after empty_cache holds its values", holds(t, 3)))
free, total = torch.cuda.mem_get_info()
checks.append(("mem_get_info: 0 < free <= total", 0 < free <= total))

failed = 0
for name, ok in checks:
    print("%s: %s" % (name, bool(ok)))
    failed += not ok
sys.exit(1 if failed else 0)
