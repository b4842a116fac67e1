# SPDX-License-Identifier: MIT
"""The uncapped neighbour of torch_memcap.py (tests/gpu/limits/run.sh): while a capped client
hits its cap, this one sees the whole GPU and goes on computing matrix products. Usage:
torch_uncapped.py SECONDS. Exit 1 when it sees a cap or a wrong product."""
import sys
import time

import torch

free, total = torch.cuda.mem_get_info()
props_total = torch.cuda.get_device_properties(0).total_memory
print("uncapped sees total %d (device %d)" % (total, props_total))
if total != props_total or total < (16 << 30):
    print("FAILED: the uncapped client sees a cap")
    sys.exit(1)
g = torch.Generator().manual_seed(7)
a = torch.rand(2048, 2048, generator=g)
ref = float((a.double() @ a.double()).sum())
da = a.cuda()
n = 0
end = time.time() + float(sys.argv[1])
while time.time() < end:
    got = float((da @ da).sum())
    if abs(got - ref) > 1e-3 * abs(ref):
        print("FAILED: product %r against %r" % (got, ref))
        sys.exit(1)
    n += 1
print("ok uncapped client computed %d products while the other hit its cap" % n)
