# SPDX-License-Identifier: MIT
"""PyTorch DistributedDataParallel with the nccl backend, two ranks, one GPU each (issue #24:
under openmps the first all_reduce failed after cuMemGetAllocationGranularity answered 1). Rank
r trains a seeded linear model on its own data for a few steps; the gradients are averaged by
NCCL's all_reduce; an explicit all_reduce of each rank's rank+1 and a broadcast follow. Rank 0
prints the sums and the model's checksum, the same lines natively and under openmps (the
runner, ddp.sh, compares them). "no torch" / "no nccl" where PyTorch or its NCCL is missing.
Usage: python3 ddp_nccl.py [PORT]."""
import os
import sys

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError:
    print("no torch")
    raise SystemExit(0)


def rank_main(rank, world, port, q):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    dev = torch.device("cuda", rank)
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 8).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(5):
        x = torch.randn(32, 64, generator=g).to(dev)
        y = torch.randn(32, 8, generator=g).to(dev)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    t = torch.full((1024,), float(rank + 1), device=dev)
    dist.all_reduce(t)
    b = torch.arange(16, dtype=torch.float32, device=dev) * (7 if rank == 0 else 0)
    dist.broadcast(b, src=0)
    torch.cuda.synchronize()
    params = torch.cat([p.detach().flatten() for p in model.parameters()]).cpu()
    q.put((rank, float(t.sum()), float(b.sum()), round(float(params.double().sum()), 4)))
    dist.barrier()
    dist.destroy_process_group()


def main():
    if torch.cuda.device_count() < 2:
        print("SKIP: %d GPU(s), DDP across GPUs needs two" % torch.cuda.device_count())
        return 0
    if not dist.is_nccl_available():
        print("no nccl")
        return 0
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 29517
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, 2, port, q)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    codes = [p.exitcode for p in procs]
    if codes != [0, 0]:
        print("ranks ended with", codes, file=sys.stderr)
        return 1
    res = sorted(q.get(timeout=10) for _ in range(2))
    for rank, tsum, bsum, psum in res:
        print("rank %d: all_reduce %.1f broadcast %.1f params %.4f" % (rank, tsum, bsum, psum))
    # both ranks hold the same model after DDP's averaged steps
    return 0 if res[0][1:] == res[1][1:] else 1


if __name__ == "__main__":
    sys.exit(main())
