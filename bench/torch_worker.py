# SPDX-License-Identifier: MIT
"""One framework process of the B7/B8 workloads and of the tutorial's PyTorch experiment
(docs/benchmark-definitions.md; bench/frameworks.py starts them). Each role prints its figures as
`key value ...` lines; wall-clock instants are time.time_ns(), comparable across processes.

  resnet ROUNDS BATCHES  torchvision's ResNet-18, random weights, fp16, channels-last, batch 8
                         at 224 x 224, inference; 20 warm-up batches, then "ready"; per round:
                         reads a start instant (ms since the epoch) on stdin, waits for it, runs
                         BATCHES batches, each synchronised, and prints
                         "round R elapsed_s E worst_ms W"
  stream SECONDS         the same model; after "ready" and the start instant, batches back to
                         back for SECONDS, each synchronised; then one line per batch:
                         "lat END_NS MS LAUNCH_MS CPU_MS WAIT_MS" (its wall time, the part
                         before the synchronize, the thread's CPU time in it and its time
                         waiting for a core)
  newcomer               B8's 9th process: imports PyTorch, runs one 4096 x 4096 float32
                         matrix product; prints "newcomer START_NS END_NS IMPORTED_NS"
  matmul ROUNDS          the tutorial's exercise: a 10000 x 10000 float32 torch.matmul; one
                         warm-up product, "ready", then per round: waits for the start instant,
                         runs 10 products, synchronises, prints "round R elapsed_s E"
"""
import os
import sys
import time

T0 = time.time_ns()  # before PyTorch's import: the newcomer's start


_SCHEDSTAT = None


def run_delay():
    """Seconds this thread has waited for a core (runnable, not running) since it started;
    0 where the kernel does not say (no /proc/thread-self/schedstat)."""
    global _SCHEDSTAT
    try:
        if _SCHEDSTAT is None:
            _SCHEDSTAT = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        return int(os.pread(_SCHEDSTAT, 128, 0).split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def wait_start():
    line = sys.stdin.readline()
    if not line.strip():
        sys.exit(0)  # the harness gave up on this copy
    delay = int(line) / 1000.0 - time.time()
    if delay > 0:
        time.sleep(delay)


def resnet():
    import torch
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).cuda().half().eval()
    model = model.to(memory_format=torch.channels_last)
    x = torch.randn(8, 3, 224, 224, device="cuda").half().to(memory_format=torch.channels_last)
    return torch, model, x


def main():
    role = sys.argv[1]
    if role == "resnet":
        rounds, batches = int(sys.argv[2]), int(sys.argv[3])
        torch, model, x = resnet()
        with torch.inference_mode():
            for _ in range(20):
                model(x)
            torch.cuda.synchronize()
            print("ready", flush=True)
            for r in range(rounds):
                wait_start()
                worst = 0.0
                t0 = time.perf_counter()
                for _ in range(batches):
                    b0 = time.perf_counter()
                    model(x)
                    torch.cuda.synchronize()
                    worst = max(worst, time.perf_counter() - b0)
                print("round %d elapsed_s %.6f worst_ms %.3f"
                      % (r, time.perf_counter() - t0, worst * 1e3), flush=True)
    elif role == "stream":
        seconds = float(sys.argv[2])
        torch, model, x = resnet()
        lat = []
        with torch.inference_mode():
            for _ in range(20):
                model(x)
            torch.cuda.synchronize()
            print("ready", flush=True)
            wait_start()
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                b0, c0, w0 = time.perf_counter(), time.thread_time(), run_delay()
                model(x)
                b1 = time.perf_counter()
                torch.cuda.synchronize()
                b2 = time.perf_counter()
                lat.append((time.time_ns(), b2 - b0, b1 - b0, time.thread_time() - c0,
                            run_delay() - w0))
        print("\n".join("lat %d %.4f %.4f %.4f %.4f" % (t, s * 1e3, la * 1e3, cpu * 1e3, w * 1e3)
                        for t, s, la, cpu, w in lat), flush=True)
    elif role == "newcomer":
        import torch

        t_import = time.time_ns()
        a = torch.randn(4096, 4096, device="cuda")
        (a @ a).sum().item()
        print("newcomer %d %d %d" % (T0, time.time_ns(), t_import), flush=True)
    elif role == "matmul":
        import torch

        rounds = int(sys.argv[2])
        g = torch.Generator(device="cuda").manual_seed(1)
        a = torch.rand(10000, 10000, device="cuda", generator=g)
        b = torch.rand(10000, 10000, device="cuda", generator=g)
        torch.matmul(a, b)
        torch.cuda.synchronize()
        print("ready", flush=True)
        for r in range(rounds):
            wait_start()
            t0 = time.perf_counter()
            for _ in range(10):
                torch.matmul(a, b)
            torch.cuda.synchronize()
            print("round %d elapsed_s %.6f" % (r, time.perf_counter() - t0), flush=True)
    else:
        print("unknown role %r" % role, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
