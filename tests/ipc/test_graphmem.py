# SPDX-License-Identifier: MIT
"""Graph memory nodes and conditional nodes (tests/cpu/remote_graphmem.c)."""
import os
import subprocess
import tempfile
import time

from harness import SHIM_DIR, check, driver_program


REMOTE_GRAPHMEM = os.environ.get("OM_REMOTE_GRAPHMEM", "build/tests/remote-graphmem")


def graphmem_client(e, *args):
    return driver_program(e, REMOTE_GRAPHMEM, args, stdin=subprocess.PIPE)


def test_remote_graphmem_nodes_ranges_and_conditionals(daemon):
    """Allocation and free nodes reach the double with the client's parameters; the allocation's
    range is the client's while a graph or executable graph holds it, released with the last;
    a captured cuMemAllocAsync/cuMemFreeAsync makes the same; conditional handles and bodies
    are the client's, checked per graph; the session's end frees what an executable graph may
    have left allocated."""
    log = os.path.join(tempfile.mkdtemp(prefix="om-graphmem-"), "graphmem.log")
    e = daemon(extra_env={"FAKECUDA_GRAPHMEM_LOG": log, "FAKECUDA_MEMORY_LOG": log + ".mem"})
    p = graphmem_client(e, "build")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "build ok" in out, "build: %r %r" % (out, err))
    left = [l.split()[1] for l in out.splitlines() if l.startswith("left ")][0]
    lines = open(log).read().splitlines()
    check("alloc %s 4096 0 1" % lines[0].split()[1] == lines[0], "alloc recorded: %r" % lines)
    check(sum(l.startswith("free ") for l in lines) == 1, "one free node: %r" % lines)
    check(any(l.startswith("capalloc ") for l in lines) and
          any(l.startswith("capfree ") for l in lines), "captured pair: %r" % lines)
    check(any(l.startswith("handle ") and l.endswith(" 3 1") for l in lines),
          "handle value and flags: %r" % lines)
    conds = [l.split()[1:3] for l in lines if l.startswith("cond ")]
    # the while and the switch, then 15 nested whiles (the 16th level is refused)
    check(conds == [["1", "1"], ["2", "4"]] + [["1", "1"]] * 15,
          "conditional nodes: %r" % conds)

    def freed():
        try:
            return any(l.startswith("freeasync %s " % left)
                       for l in open(log + ".mem").read().splitlines())
        except OSError:
            return False
    deadline = time.monotonic() + 30
    while not freed() and time.monotonic() < deadline:
        time.sleep(0.1)
    check(freed(), "the session's end freed the allocation its executable graph held")


def test_remote_graphmem_counts_against_the_memory_cap(daemon):
    """Under a 2 MiB device-memory cap a graph allocation counts from its node while the client
    holds it: one past the cap is refused with CUDA_ERROR_OUT_OF_MEMORY, one that fits shows in
    cuMemGetInfo, and the graph's destruction gives it back."""
    e = daemon()
    p = subprocess.Popen([REMOTE_GRAPHMEM, "capped"], env=dict(
        e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR),
        CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="0=2M"), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "capped ok" in out, "capped: %r %r" % (out, err))
    got = dict(l.split(" ", 1) for l in out.splitlines() if " " in l)
    want = {"graph1536k": "2", "held": "%d %d" % (512 << 10, 2 << 20),
            "destroyed": "%d %d" % (1 << 20, 2 << 20)}
    for k, v in want.items():
        check(got.get(k) == v, "%s is %r, want %r" % (k, got.get(k), v))


def test_remote_graphmem_of_another_client_refused(daemon):
    """Another client cannot reach a client's graph allocation (copies, free nodes), use its
    conditional handle, its graph or its conditional body graph."""
    e = daemon()
    holder = graphmem_client(e, "hold")
    handles = holder.stdout.readline().split()
    check(len(handles) == 4, "holder printed its handles: %r" % handles)
    p = graphmem_client(e, "steal", *handles)
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "steal refused" in out, "steal: %r %r" % (out, err))
    out, err = holder.communicate("go\n", timeout=60)
    check(holder.returncode == 0 and "hold ok" in out, "holder: %r %r" % (out, err))
