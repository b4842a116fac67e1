# SPDX-License-Identifier: MIT
"""A process that forks after CUDA is initialised (issue #24: under openmps the parent died with
SIGSEGV in pthread_create). PyTorch's own test (test_multiprocessing.py's test_wrong_cuda_fork)
as a program: the parent puts a tensor on the GPU, then forks children with multiprocessing's
'fork' start method; each child touches CUDA and must get "Cannot re-initialize CUDA in forked
subprocess"; a child that touches the driver directly through ctypes gets
CUDA_ERROR_NOT_INITIALIZED (3) from cuInit. Meanwhile and afterwards the parent keeps working
from new threads (one with a small stack) and checks its results. Only the parent prints; exit
77 when PyTorch or a GPU is missing."""
import sys
import threading

try:
    import torch
    import torch.multiprocessing as mp
except ImportError:
    print("no torch", file=sys.stderr)
    sys.exit(77)
if not torch.cuda.is_available():
    print("no GPU", file=sys.stderr)
    sys.exit(77)


def touch_cuda(rank, q):
    try:
        torch.cuda.set_device(rank % torch.cuda.device_count())
        q.put("no error")
    except RuntimeError as e:
        q.put("refused" if "Cannot re-initialize CUDA in forked subprocess" in str(e) else str(e))


def touch_driver(q):
    import ctypes
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        q.put("cuInit %d" % cuda.cuInit(0))
    except OSError as e:
        q.put("no libcuda: %s" % e)


def work(seed, out):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(256, 256, generator=g)
    c = (a.cuda() @ a.cuda()).cpu()
    out.append(bool(torch.allclose(c, a @ a, rtol=1e-3, atol=1e-3)))


def main():
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    answers = []
    for rank in range(2):
        x = torch.rand(20, 2).cuda()  # initialised before each fork
        p = ctx.Process(target=touch_cuda, args=(rank, q))
        p.start()
        p.join(120)
        answers.append("child %d: %s (exit %s)" % (rank, q.get(timeout=30), p.exitcode))
        # the parent's CUDA still works after the fork (GPU and CPU sum in different orders)
        assert torch.allclose(x.sum().cpu(), x.cpu().sum())
    p = ctx.Process(target=touch_driver, args=(q,))
    p.start()
    p.join(120)
    answers.append("driver child: %s (exit %s)" % (q.get(timeout=30), p.exitcode))
    results = []
    threads = [threading.Thread(target=work, args=(i, results)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    threading.stack_size(256 << 10)
    t = threading.Thread(target=work, args=(9, results))
    t.start()
    t.join()
    torch.cuda.synchronize()
    for a in answers:
        print(a)
    print("parent: %d of %d matrix products right" % (sum(results), len(results)))
    return 0 if all(results) and len(results) == 5 else 1


if __name__ == "__main__":
    sys.exit(main())
