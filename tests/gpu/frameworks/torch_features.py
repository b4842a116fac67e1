# SPDX-License-Identifier: MIT
"""PyTorch's CUDA features (issue #11): a CUDA graph captured with torch.cuda.graph and replayed
with new inputs (against eager, 1e-5, and float64 on the CPU, 1e-4); two side streams joined
through events, timed by events; non-blocking copies to and from pinned memory (exact); a
DataLoader with pin_memory=True, without and with 2 worker processes, its batches moved with
non_blocking=True and summed on the GPU (float64, 1e-12); the caching allocator's counters,
memory_stats, empty_cache and mem_get_info. fp32 with TF32 off. Prints only booleans and
counts; exit 77 when PyTorch or a GPU is missing."""
import sys

checks = []


def rel(got, ref):
    got, ref = got.detach().cpu().double(), ref.detach().cpu().double()
    return ((got - ref).norm() / ref.norm().clamp(min=1e-30)).item()


def graphs(torch):
    g = torch.Generator().manual_seed(31)
    w = torch.randn(256, 256, generator=g) / 16
    dw = w.cuda()

    def f(x):
        return torch.tanh(x @ dw) * 2 + torch.sin(x)

    static_in = torch.zeros(64, 256, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as PyTorch's docs ask
        for _ in range(3):
            f(static_in)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = f(static_in)
    eager_ok = ref_ok = True
    for _ in range(5):
        x = torch.randn(64, 256, generator=g)
        static_in.copy_(x.cuda())
        graph.replay()
        got = static_out.clone()
        eager = f(x.cuda())
        ref = torch.tanh(x.double() @ w.double()) * 2 + torch.sin(x.double())
        e1, e2 = rel(got, eager), rel(got, ref)
        print("graph replay: %.2e from eager, %.2e from the CPU" % (e1, e2), file=sys.stderr)
        eager_ok &= e1 < 1e-5
        ref_ok &= e2 < 1e-4
    checks.append(("graph replays within 1e-5 of eager", eager_ok))
    checks.append(("graph replays within 1e-4 of the CPU (float64)", ref_ok))


def streams(torch):
    g = torch.Generator().manual_seed(32)
    a, b = torch.rand(1024, 1024, generator=g), torch.rand(1024, 1024, generator=g)
    da, db = a.cuda(), b.cuda()
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e1, e2 = torch.cuda.Event(), torch.cuda.Event()
    main = torch.cuda.current_stream()
    start.record(main)
    s1.wait_stream(main)  # da and db were written on the main stream
    s2.wait_stream(main)
    with torch.cuda.stream(s1):
        r1 = da @ db
        for _ in range(4):
            r1 = r1 @ db / 512
        e1.record()
    with torch.cuda.stream(s2):
        r2 = db @ da
        for _ in range(4):
            r2 = r2 @ da / 512
        e2.record()
    main.wait_event(e1)
    main.wait_event(e2)
    total = r1 + r2
    end.record(main)
    end.synchronize()
    ms = start.elapsed_time(end)
    print("two streams: %.3f ms between the events" % ms, file=sys.stderr)
    checks.append(("events done after synchronize", start.query() and end.query()
                   and e1.query() and e2.query()))
    checks.append(("streams idle after the join", s1.query() and s2.query()))
    checks.append(("elapsed_time > 0", ms > 0))
    A, B = a.double(), b.double()
    R1, R2 = A @ B, B @ A
    for _ in range(4):
        R1, R2 = R1 @ B / 512, R2 @ A / 512
    err = rel(total, R1 + R2)
    print("two streams: relative error %.2e" % err, file=sys.stderr)
    checks.append(("two streams joined within 1e-4 of the CPU (float64)", err < 1e-4))


def pinned(torch):
    g = torch.Generator().manual_seed(33)
    h = torch.randn(1 << 22, generator=g).pin_memory()
    out = torch.empty(1 << 22, pin_memory=True)
    checks.append(("pin_memory gives pinned tensors", h.is_pinned() and out.is_pinned()))
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        d = h.to("cuda", non_blocking=True)
        d.mul_(2)
        out.copy_(d, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
    done.synchronize()  # only the event: the host reads out after it
    checks.append(("non-blocking copies through pinned memory exact", torch.equal(out, h * 2)))


def dataloader(torch):
    from torch.utils.data import DataLoader, TensorDataset
    g = torch.Generator().manual_seed(34)
    x = torch.randn(1000, 64, generator=g)
    y = torch.randint(0, 100, (1000,), generator=g)
    ref = x.double().sum().item()
    for workers in (0, 2):
        loader = DataLoader(TensorDataset(x, y), batch_size=100, shuffle=False,
                            num_workers=workers, pin_memory=True)
        total = torch.zeros((), dtype=torch.float64, device="cuda")
        labels = torch.zeros((), dtype=torch.int64, device="cuda")
        batches, all_pinned = 0, True
        for xb, yb in loader:
            all_pinned &= xb.is_pinned() and yb.is_pinned()
            total += xb.to("cuda", non_blocking=True).double().sum()
            labels += yb.to("cuda", non_blocking=True).sum()
            batches += 1
        tag = "DataLoader num_workers=%d" % workers
        checks.append(("%s batches" % tag, batches == 10))
        checks.append(("%s batches pinned" % tag, all_pinned))
        checks.append(("%s sum within 1e-12 of the CPU" % tag,
                       abs(total.item() - ref) <= 1e-12 * x.abs().double().sum().item()))
        checks.append(("%s labels sum exact" % tag, labels.item() == y.sum().item()))


def allocator(torch):
    MiB = 1 << 20
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    a0 = torch.cuda.memory_allocated()
    t = torch.empty(64 * MiB // 4, dtype=torch.float32, device="cuda")
    a1 = torch.cuda.memory_allocated()
    r1 = torch.cuda.memory_reserved()
    stats = torch.cuda.memory_stats()
    print("allocated %d -> %d, reserved %d" % (a0, a1, r1), file=sys.stderr)
    checks.append(("memory_allocated grows by the tensor's 64 MiB", a1 - a0 == 64 * MiB))
    checks.append(("memory_reserved >= memory_allocated", r1 >= a1))
    keys = ("allocated_bytes.all.current", "reserved_bytes.all.current",
            "active_bytes.all.current", "num_alloc_retries", "num_ooms")
    checks.append(("memory_stats has its keys", all(k in stats for k in keys)))
    checks.append(("memory_stats agrees with memory_allocated",
                   stats.get("allocated_bytes.all.current") == a1))
    checks.append(("max_memory_allocated covers the tensor",
                   torch.cuda.max_memory_allocated() >= a1))
    t.fill_(0.5)  # every partial sum of 16 Mi halves is exact in fp32
    checks.append(("the 64 MiB tensor holds its values", t.sum().item() == 0.5 * (16 * MiB)))
    del t
    torch.cuda.synchronize()
    a2, r2 = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    torch.cuda.empty_cache()
    r3 = torch.cuda.memory_reserved()
    print("after del: allocated %d reserved %d; after empty_cache reserved %d" % (a2, r2, r3),
          file=sys.stderr)
    checks.append(("memory_allocated back after del", a2 == a0))
    checks.append(("empty_cache lowers memory_reserved by the freed 64 MiB",
                   r3 <= r2 - 64 * MiB))
    free, total = torch.cuda.mem_get_info()
    print("mem_get_info: free %d total %d" % (free, total), file=sys.stderr)
    checks.append(("mem_get_info: 0 < free <= total", 0 < free <= total))


def main():
    try:
        import torch
    except ImportError as e:
        print("SKIP: no PyTorch (%s)" % e, file=sys.stderr)
        return 77
    if not torch.cuda.is_available():
        print("SKIP: torch.cuda.is_available() is False", file=sys.stderr)
        return 77
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    graphs(torch)
    streams(torch)
    pinned(torch)
    dataloader(torch)
    allocator(torch)
    failed = 0
    for name, ok in checks:
        print("%s: %s" % (name, bool(ok)))
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":  # DataLoader workers may import this file (spawn, forkserver)
    sys.exit(main())
