# SPDX-License-Identifier: MIT
"""The memory family (tests/cpu/memory_driver.c): the cap, pools, IPC handles, VMM, managed
memory.
"""
import os
import re
import subprocess
import time

from harness import Env, SHIM_DIR, check, driver_program, wait_for


MEMORY_DRIVER = os.environ.get("OM_MEMORY_DRIVER", "build/tests/memory-driver")


def memory_driver(e, *args):
    return driver_program(e, MEMORY_DRIVER, args, stdin=subprocess.PIPE)


def test_memory_cap_refuses_past_it_and_shows():
    """A device-memory cap (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, or the daemon's default, the
    tighter of the two): cuMemGetInfo and cuDeviceTotalMem show the cap as the total and what
    the client does not hold as free; plain, managed and stream-ordered allocations, the
    virtual-memory API's physical allocations (until released) and arrays count; past the cap an allocation fails with CUDA_ERROR_OUT_OF_MEMORY and nothing else changes
    (a later one that fits succeeds); the first refusal is logged with the client's pid.
    Without a cap the device's own figures."""
    mib = 1 << 20
    want = {"totalmem": "%d" % (64 * mib), "start": "%d %d" % (64 * mib, 64 * mib),
            "after32": "%d %d" % (32 * mib, 64 * mib), "alloc40": "2", "managed40": "2",
            "async40": "2", "after48": "%d %d" % (16 * mib, 64 * mib), "alloc17": "2",
            "freed": "%d %d" % (64 * mib, 64 * mib), "alloc40again": "0",
            "created48": "%d %d" % (16 * mib, 64 * mib), "alloc32": "2", "create32": "2",
            "released32": "0", "array64": "2", "array4": "%d %d" % (58 * mib, 64 * mib),
            "arraygone": "%d %d" % (64 * mib, 64 * mib)}
    for how in ("client", "daemon", "none"):
        e = Env(start=False)
        ok = False
        try:
            e.env["FAKECUDA_VMM"] = "1"  # the double's virtual-memory API (the server's too)
            e.start()
            if how == "daemon":  # before the first client: its server gets it
                e.cmd("set_default_device_pinned_mem_limit 0 64M")
            p = memory_driver(e, "memcap") if how != "client" else subprocess.Popen(
                [MEMORY_DRIVER, "memcap"], env=dict(e.env, LD_LIBRARY_PATH=os.path.abspath(
                    SHIM_DIR), CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="0=64M"),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            out, err = p.communicate(timeout=60)
            check(p.returncode == 0 and "memcap ok" in out, "%s: %r %r" % (how, out, err))
            got = dict(l.split(" ", 1) for l in out.splitlines() if " " in l)
            if how == "none":
                check(got["totalmem"] == str(16 << 30) and got["alloc40"] == "0",
                      "no cap: the device's figures, every allocation fits: %r" % got)
            else:
                for k, v in want.items():
                    check(got.get(k) == v, "%s: %s is %r, want %r" % (how, k, got.get(k), v))
                check(re.search(r"client %d: device 0 memory limit 64M reached \(33554432 "
                                r"bytes held\): an allocation of 41943040 bytes refused" % p.pid,
                                e.log("server.log")), "the refusal logged for %s" % how)
            ok = True
        finally:
            e.close(ok)


def test_memory_freed_is_free_again(daemon):
    """cuMemGetInfo's free memory falls by an allocation and comes back when the program frees
    it, though the server keeps the freed allocation for the program's next of that size (and
    falls again when that takes it back): PyTorch's test_mem_get_info saw no change."""
    e = daemon()
    p = memory_driver(e, "memfree")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "memfree ok" in out, "%r %r" % (out, err))
    # what cuMemGetInfo promised: a managed allocation on a full device of 64 MiB gets the
    # freed allocation the server kept (which then goes)
    e2 = daemon({"FAKECUDA_TOTAL_MEM": str(64 << 20)})
    p = memory_driver(e2, "memkept")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "memkept ok" in out, "%r %r" % (out, err))


def test_ps_verbose_shows_limits_and_memory(daemon):
    """ps -v (openmps) adds, per client, its active thread percentage, priority, device-memory
    cap and the device memory it holds (reported by the server within a second); caps on
    several devices are shown as the variable writes them; plain ps keeps NVIDIA's columns; a
    bad option gets the usage."""
    e = daemon({"FAKECUDA_DEVICES": "2"})
    p = subprocess.Popen([MEMORY_DRIVER, "hold", str(32 << 20)], env=dict(
        e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR),
        CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="0=1G", CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="25",
        CUDA_MPS_CLIENT_PRIORITY="1"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    check(p.stdout.readline().strip() == "held", "the client holds its memory")

    def row():
        lines = e.cmd("ps -v").splitlines()
        mine = [l.split() for l in lines[1:] if l.split()[0] == str(p.pid)]
        return lines[0].split(), mine[0] if mine else None
    head, mine = wait_for(lambda: row()[1] and row()[1][-1] == "32M" and row(),
                          what="ps -v showing the client's 32M")
    check(head[-4:] == ["SHARE", "PRIORITY", "MEMLIMIT", "MEMORY"], "ps -v header %r" % head)
    check(mine[-4:] == ["25.0", "1", "1G", "32M"], "ps -v row %r" % mine)
    plain = e.cmd("ps").splitlines()
    check(plain[0].split() == ["PID", "ID", "SERVER", "DEVICE", "NAMESPACE", "COMMAND"],
          "plain ps keeps NVIDIA's columns: %r" % plain[0])
    check(e.cmd("ps -x") == "Usage: ps [-v|--json] [-p <server PID>]", "bad option: usage")
    q = subprocess.Popen([MEMORY_DRIVER, "hold", str(1 << 20)], env=dict(
        e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR),
        CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="0=1G,1=512M"), stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(q.stdout.readline().strip() == "held", "the second client holds its memory")
    rows = [l.split() for l in e.cmd("ps -v").splitlines()[1:]]
    theirs = [r for r in rows if r[0] == str(q.pid)]
    check(theirs and theirs[0][-2] == "0=1G,1=512M", "caps on two devices: %r" % rows)
    for c in (p, q):
        c.stdin.write("\n")
        c.stdin.flush()
        c.wait(timeout=60)


def test_memory_pools_are_each_clients_own(daemon):
    """Stream-ordered allocation and pools through the server: each client has a default pool
    of its own (never the device's, which every client shares), allocations are its memory
    until freed (cuMemFreeAsync or cuMemFree), foreign pools and pools past the budget are
    refused, and the session's end frees what it left and destroys its pools."""
    e = daemon(start=False)
    mlog = os.path.join(e.dir, "memory")
    e.env.update({"FAKECUDA_MEMORY_LOG": mlog, "OPENMPS_CLIENT_MAX_HANDLES": "4"})
    e.start()
    p = memory_driver(e, "pools")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "pools ok" in out, "pools: %r %r" % (out, err))
    check("created 2 more pool(s)" in out, "the budget of 4 pools: default, p1, two more: "
          + out)
    q = memory_driver(e, "pools")  # a second client: another default pool
    out2, err2 = q.communicate(timeout=60)
    check(q.returncode == 0 and "pools ok" in out2, "pools 2: %r %r" % (out2, err2))
    pool1 = re.search(r"pool (\d+)", out).group(1)
    pool2 = re.search(r"pool (\d+)", out2).group(1)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        lines = open(mlog).read().splitlines()
        if sum(l.startswith("pooldestroy") for l in lines) >= 10:
            break
        time.sleep(0.05)
    lines = open(mlog).read().splitlines()
    creates = [l.split()[1] for l in lines if l.startswith("poolcreate")]
    destroys = [l.split()[1] for l in lines if l.startswith("pooldestroy")]
    check(len(creates) == 10, "five pools per client reached the driver: %r" % lines)
    check(len(destroys) == 10 and sorted(set(creates)) == sorted(set(destroys)),
          "every pool destroyed (p2 early, the rest at the session's end): %r" % lines)
    check(pool1 != pool2 or creates.count(creates[0]) > 1,
          "the two clients' default pools differ")
    check(any(l.startswith("setattr") and l.split()[2:] == ["4", "12345"] for l in lines),
          "the release threshold reached the driver: %r" % lines)
    check(any(l.startswith("trim") and l.endswith(" 777") for l in lines), "trim: %r" % lines)
    check(any(l.startswith("setaccess") and l.split()[2:] == ["1", "3"] for l in lines),
          "set access: %r" % lines)
    allocs = [l for l in lines if l.startswith("poolalloc")]
    check(len(allocs) == 8 and all("stream (nil)" not in l for l in allocs),
          "every allocation on a client stream, never the context's NULL stream: %r" % allocs)
    frees = [l for l in lines if l.startswith("freeasync")]
    check(len(frees) == 8 and all(l.endswith("rc 0") for l in frees) and
          all("stream (nil)" not in l for l in frees),
          "every allocation freed in stream order, the kept one at the session's end: %r"
          % frees)


def test_memory_ipc_handles_between_clients():
    """cuIpcGetMemHandle in one client, cuIpcOpenMemHandle in another client of the same
    server: the same memory at the same address, not the opener's to free; handles that are
    not the server's refused; the memory stays while open after its exporter freed it, and the
    last close frees it. An IPC event handle opens the exporter's event in the other client;
    its destroy there lets go of its hold only."""
    e = Env()
    ok = False
    exporter = importer = None
    try:
        exporter = memory_driver(e, "export")
        line = exporter.stdout.readline().split()
        check(len(line) == 4 and line[0] == "handle", "exporter: %r" % line)
        importer = memory_driver(e, "import", line[1], line[2], line[3])
        got = importer.stdout.readline().strip()
        check(got == "opened", "importer: %r %r" % (got, importer.stderr.read()
                                                   if importer.poll() is not None else ""))
        exporter.stdin.write("free\n")
        exporter.stdin.flush()
        check(exporter.stdout.readline().strip() == "freed", "the exporter freed it")
        importer.stdin.write("read\n")
        importer.stdin.flush()
        out, err = importer.communicate(timeout=60)
        check(importer.returncode == 0 and "import ok" in out, "import: %r %r" % (out, err))
        # the importer opened the exporter's event and let go of it: the exporter's is intact
        exporter.stdin.write("event\n")
        exporter.stdin.flush()
        check(exporter.stdout.readline().strip() == "event ok", "the exporter's event lives on")
        exporter.stdin.write("exit\n")
        exporter.stdin.flush()
        out, err = exporter.communicate(timeout=60)
        check(exporter.returncode == 0 and "export ok" in out, "export: %r %r" % (out, err))
        ok = True
    finally:
        for p in (exporter, importer):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        e.close(ok)


def test_memory_vmm_is_each_clients_own():
    """The virtual memory management API through the server (the double's, FAKECUDA_VMM: the
    server's own allocations take it too): a client maps only its own handles into its own
    reservations, another client's handle and ranges are refused, reservations have a budget,
    and the session's end unmaps, frees and releases what was left."""
    e = Env(start=False)
    ok = False
    owner = None
    try:
        mlog = os.path.join(e.dir, "memory")
        e.env.update({"FAKECUDA_MEMORY_LOG": mlog, "FAKECUDA_VMM": "1",
                      "OPENMPS_CLIENT_MAX_HANDLES": "4"})
        e.start()
        owner = memory_driver(e, "vmm")
        out = owner.stdout.readline()
        check(out.startswith("reserved 3 more"), "budget of 4 reservations: %r" % out)
        line = owner.stdout.readline().split()
        check(len(line) == 4 and line[0] == "vmm", "owner: %r" % line)
        p = memory_driver(e, "vmmforeign", line[1], line[2], line[3])
        out, err = p.communicate(timeout=60)
        check(p.returncode == 0 and "foreign ok" in out, "foreign: %r %r" % (out, err))
        owner.stdin.write("exit\n")
        owner.stdin.flush()
        out, err = owner.communicate(timeout=60)
        check(owner.returncode == 0 and "vmm ok" in out, "vmm: %r %r" % (out, err))
        lines = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            lines = open(mlog).read().splitlines()
            n = lambda w: sum(l.startswith(w + " ") for l in lines)
            if n("vmmcreate") + n("vmmretain") == n("vmmrelease") and \
                    n("reserve") == n("addrfree"):
                break
            time.sleep(0.05)
        n = lambda w: sum(l.startswith(w + " ") for l in lines)
        check(n("vmmcreate") >= 3 and n("vmmcreate") + n("vmmretain") == n("vmmrelease"),
              "every allocation handle released: %r" % lines)
        check(n("reserve") >= 7 and n("reserve") == n("addrfree") and
              all(l.endswith("rc 0") for l in lines if l.startswith("addrfree")),
              "every reservation freed: %r" % lines)
        check(n("map") == n("unmap") and
              all(l.endswith("rc 0") for l in lines if l.startswith(("map ", "unmap "))),
              "every mapping unmapped: %r" % lines)
        check(any(l.split()[0] == "setaccess" and l.split()[1].startswith("5") and
                  l.split()[3:] == ["1", "3"] for l in lines), "set access of a mapping: %r" % lines)
        ok = True
    finally:
        if owner and owner.poll() is None:
            owner.kill()
            owner.wait()
        e.close(ok)


def test_memory_managed_hints_and_3d_peer_copies(daemon):
    """Advice and prefetches (single and batched, 13.0's discards) on managed memory are checked
    in the client and recorded: cuMemRangeGetAttribute(s) answers what was asked for, piece by
    piece; ranges that are not the client's managed memory, bad location indices, flags,
    attributes and sizes are refused; a freed range forgets its hints. cuPointerSetAttribute
    accepts SYNC_MEMOPS on the client's memory only. cuMemcpy3DPeer(Async) copies through
    cuMemcpy3D's path, its ranges checked, an unknown context refused. Batches of copies
    (cuMemcpyBatchAsync, cuMemcpy3DBatchAsync) check every copy before issuing any.
    cuMemGetHandleForAddressRange: the server's dma-buf descriptor reaches the client; what is
    refused never reaches the driver."""
    e = daemon(start=False)
    mlog = os.path.join(e.dir, "memory")
    e.env.update({"FAKECUDA_MEMORY_LOG": mlog})
    e.start()
    p = memory_driver(e, "hints")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "hints ok" in out, "hints: %r %r" % (out, err))
    dmabufs = [l for l in open(mlog).read().splitlines() if l.startswith("dmabuf")]
    check(len(dmabufs) == 1 and dmabufs[0].endswith(" 4096 flags 1"),
          "one dma-buf reached the driver: %r" % dmabufs)
