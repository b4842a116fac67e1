# SPDX-License-Identifier: MIT
"""A PyTorch client under a device-memory cap (issue #12), run by tests/gpu/limits/run.sh under
openmps with CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=<cap>. Checks what a framework sees and does:
torch.cuda.mem_get_info reports the cap as the total, a tensor past the cap raises PyTorch's
out-of-memory error, and afterwards the client goes on allocating and computing below it.
Usage: torch_memcap.py CAP_GIB. Prints one line per check; exit 1 on the first failure, 77 when
PyTorch or a GPU is missing."""
import sys

try:
    import torch
except ImportError as e:
    print("SKIP: no PyTorch (%s)" % e, file=sys.stderr)
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP: torch.cuda.is_available() is False", file=sys.stderr)
    sys.exit(77)

GIB = 1 << 30
cap = int(float(sys.argv[1]) * GIB)


def check(what, ok, detail=""):
    print("%s %s%s" % ("ok" if ok else "FAILED", what, (": " + detail) if detail else ""))
    sys.stdout.flush()
    if not ok:
        sys.exit(1)


free, total = torch.cuda.mem_get_info()
check("mem_get_info total is the cap", total == cap, "total %d, cap %d" % (total, cap))
check("mem_get_info free is at most the total", 0 < free <= total, "free %d" % free)
props = torch.cuda.get_device_properties(0)
check("device properties' total memory is the cap", props.total_memory == cap,
      "total_memory %d" % props.total_memory)

a = torch.ones(GIB // 4, device="cuda")  # 1 GiB of float32
free_after, _ = torch.cuda.mem_get_info()
check("1 GiB allocated under the cap, free fell by at least 1 GiB", free - free_after >= GIB,
      "free %d -> %d" % (free, free_after))

try:
    big = torch.empty(int(cap * 1.25) // 4, device="cuda")
    check("a tensor of 1.25 x the cap raises out-of-memory", False, "it was allocated")
except torch.cuda.OutOfMemoryError as e:
    check("a tensor of 1.25 x the cap raises torch.cuda.OutOfMemoryError", True,
          str(e).splitlines()[0][:120])

b = torch.full((GIB // 4,), 2.0, device="cuda")  # another GiB: the client goes on
s = float((a * b).sum())
check("after the refusal it allocates and computes", s == 2.0 * (GIB // 4), "sum %.0f" % s)
del a, b
torch.cuda.empty_cache()
free_end, _ = torch.cuda.mem_get_info()
check("after empty_cache free is back near the total", free_end >= total - 64 * (1 << 20),
      "free %d of %d" % (free_end, total))
