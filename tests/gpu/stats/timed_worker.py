# SPDX-License-Identifier: MIT
"""One client of the GPU check of openmps stats (tests/gpu/stats/check.py): B7's ResNet-18
inference (fp16, channels-last, batch 8, random weights), each batch timed with CUDA events
inside the client.

  timed_worker.py busy BATCHES   warm-up (20 batches), "warm", waits for a line on stdin, runs
                                 BATCHES batches, each between two events on the current stream
                                 and synchronised on the second, prints "events_ms TOTAL" (the
                                 sum of the batches' event times), "done", waits for stdin's end
  timed_worker.py idle           one small product, "warm", then waits for stdin's end
"""
import sys

import torch


def main():
    role = sys.argv[1]
    if role == "idle":
        a = torch.ones(64, 64, device="cuda")
        float((a @ a).sum())
        print("warm", flush=True)
        sys.stdin.read()
        return
    import torchvision
    batches = int(sys.argv[2])
    model = torchvision.models.resnet18().half().cuda().eval().to(memory_format=torch.channels_last)
    x = torch.randn(8, 3, 224, 224, device="cuda").half().to(memory_format=torch.channels_last)
    with torch.no_grad():
        for _ in range(20):
            model(x)
        torch.cuda.synchronize()
        print("warm", flush=True)
        sys.stdin.readline()
        total = 0.0
        for _ in range(batches):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            model(x)
            end.record()
            end.synchronize()
            total += start.elapsed_time(end)
    print("events_ms %.3f" % total, flush=True)
    print("done", flush=True)
    sys.stdin.read()


main()
