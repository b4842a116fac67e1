# SPDX-License-Identifier: MIT
"""torch.multiprocessing (issue #11): CUDA tensors passed between processes through CUDA IPC
(cuIpcGetMemHandle, cuIpcOpenMemHandle, and an IPC event), with the 'spawn' start method. The
parent puts a tensor and a view of it at an offset on a queue; the child checks their values,
adds 1 to the view in place and answers; the parent sees the change, and only in the view's
range. The child sends a tensor of its own, and stays alive until the parent has read it (as
PyTorch's docs require of a producer). Exit codes checked. Only the parent prints; exit 77
when PyTorch or a GPU is missing."""
import sys

N, OFF = 1 << 20, 4096


def child(to_child, to_parent, parent_done):
    import torch
    ok = False
    try:
        whole, view = to_child.get(timeout=60)
        expect = torch.arange(N, dtype=torch.float32) * 0.5
        ok = (whole.is_cuda and torch.equal(whole.cpu(), expect)
              and torch.equal(view.cpu(), expect[OFF:]))
        view.add_(1)
        torch.cuda.synchronize()
        mine = torch.arange(N, dtype=torch.float32, device="cuda") * 3 - 7
        torch.cuda.synchronize()
        to_parent.put((ok, mine))
        del whole, view
        parent_done.wait(60)  # the parent reads mine before it goes
    finally:
        to_parent.put(("child exits", ok))
    sys.exit(0 if ok else 3)


def main():
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError as e:
        print("SKIP: no PyTorch (%s)" % e, file=sys.stderr)
        return 77
    if not torch.cuda.is_available():
        print("SKIP: torch.cuda.is_available() is False", file=sys.stderr)
        return 77
    checks = []
    ctx = mp.get_context("spawn")
    to_child, to_parent, parent_done = ctx.Queue(), ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=child, args=(to_child, to_parent, parent_done))
    proc.start()
    whole = torch.arange(N, dtype=torch.float32, device="cuda") * 0.5
    torch.cuda.synchronize()
    to_child.put((whole, whole[OFF:]))
    child_ok, theirs, last = False, None, None
    try:
        msg = to_parent.get(timeout=120)
        if msg[0] == "child exits":  # it failed before it answered
            last = msg
        else:
            child_ok, theirs = msg
    except Exception as e:  # noqa: BLE001 (queue.Empty, or the child's tensor not opened)
        print("no answer from the child: %r" % e, file=sys.stderr)
    checks.append(("the child saw the parent's tensor and its view", child_ok is True))
    expect = torch.arange(N, dtype=torch.float32) * 0.5
    got = whole.cpu()
    checks.append(("the parent sees the child's in-place add in the view",
                   torch.equal(got[OFF:], expect[OFF:] + 1)))
    checks.append(("and nothing before the view changed", torch.equal(got[:OFF], expect[:OFF])))
    ok = theirs is not None and theirs.is_cuda
    ok = ok and torch.equal(theirs.cpu(), torch.arange(N, dtype=torch.float32) * 3 - 7)
    checks.append(("the parent reads the child's tensor", bool(ok)))
    del theirs
    torch.cuda.synchronize()
    parent_done.set()
    if last is None:
        try:
            last = to_parent.get(timeout=60)
        except Exception:  # noqa: BLE001
            pass
    proc.join(60)
    if proc.is_alive():
        proc.terminate()
        proc.join(10)
    print("child: %r, exit code %r" % (last, proc.exitcode), file=sys.stderr)
    checks.append(("the child finished", last == ("child exits", True)))
    checks.append(("the child's exit code is 0", proc.exitcode == 0))
    failed = 0
    for name, ok in checks:
        print("%s: %s" % (name, bool(ok)))
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":  # the spawned child imports this file
    sys.exit(main())
