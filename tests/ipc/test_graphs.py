# SPDX-License-Identifier: MIT
"""Graphs and stream capture (tests/cpu/remote_graphs.c)."""
import os
import re
import subprocess
import tempfile
import time

from harness import SHIM_DIR, check, driver_program


REMOTE_GRAPHS = os.environ.get("OM_REMOTE_GRAPHS", "build/tests/remote-graphs")


def graphs_client(e, *args, extra=None):
    return driver_program(e, REMOTE_GRAPHS, args, extra)


def test_remote_graphs_build_launch_update(daemon):
    """A graph of empty, kernel, memset and event record nodes through the server: the kernel
    node's argument bytes reach the driver, the launch fills memory, per-node and whole updates
    take effect; lists of nodes and edges, clones; a memset range outside the client's memory,
    a dependency count past the maximum, flags and enums out of range are refused."""
    log = os.path.join(tempfile.mkdtemp(prefix="om-graphs-"), "graph.log")
    e = daemon(extra_env={"FAKECUDA_GRAPH_LOG": log})
    p = graphs_client(e, "build")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "build ok" in out and "copies ok" in out,
          "build: %r %r" % (out, err))
    lines = open(log).read().splitlines()
    # fill_u32(p, 7, 16): the pointer's 8 bytes, then 07000000 10000000
    check(any(l.startswith("kernelnode fill_u32 ") and l.endswith("0700000010000000")
              for l in lines), "the kernel node's argument bytes: %r" % lines)
    check(any(l.endswith("0b00000010000000") for l in lines), "the exec update's bytes")
    check(sum(l.startswith("launch ") for l in lines) == 5, "five launches: %r" % lines)


def test_remote_graphs_capture_keeps_the_default_stream_out(daemon):
    """Stream capture on a blocking stream while the client's default stream works: the
    server's hidden legacy ordering neither joins the default stream into the capture nor breaks
    it; the capture is begun relaxed in the server; the captured kernel runs at the launch."""
    log = os.path.join(tempfile.mkdtemp(prefix="om-graphs-"), "graph.log")
    e = daemon(extra_env={"FAKECUDA_GRAPH_LOG": log})
    p = graphs_client(e, "capture")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "capture ok" in out, "capture: %r %r" % (out, err))
    text = open(log).read()
    parts = text.split("capture ")
    # two of the per-thread stream first (the legacy stream's were refused before the driver)
    check(len(parts) == 6 and all(p.startswith("2\n") for p in parts[1:]),
          "five captures, each begun relaxed: %r" % text)
    # the last is broken on purpose (the program queries its stream), not the others
    check("invalidated" not in "".join(parts[:5]) and "invalidated query" in parts[5],
          "only the last capture was broken: %r" % text)


def test_remote_graphs_of_another_client_refused(daemon):
    """A client cannot use another client's graph, node (alone or in an array) or executable
    graph; the owner's session end destroys what it left (the double counts live graphs)."""
    log = os.path.join(tempfile.mkdtemp(prefix="om-graphs-"), "graph.log")
    e = daemon(extra_env={"FAKECUDA_GRAPH_LOG": log})
    holder = graphs_client(e, "hold")
    handles = holder.stdout.readline().split()
    check(len(handles) == 3, "holder printed its handles: %r" % handles)
    p = graphs_client(e, "steal", *handles)
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "steal refused" in out, "steal: %r %r" % (out, err))
    holder.kill()
    holder.wait()
    p = graphs_client(e, "leak")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "leak ok" in out, "leak: %r %r" % (out, err))

    def live():
        lines = open(log).read().splitlines()
        made = [l.split()[1] for l in lines if l.startswith("graph+")]
        gone = [l.split()[1] for l in lines if l.startswith("graph-")]
        execs = sum(l.startswith("exec+") for l in lines) - sum(
            l.startswith("exec-") for l in lines)
        return len(made) - len(gone), execs
    deadline = time.monotonic() + 30
    while live() != (0, 0) and time.monotonic() < deadline:
        time.sleep(0.1)
    check(live() == (0, 0), "graphs and executable graphs left: %r" % (live(),))


def test_remote_graphs_child_graph(daemon):
    """cuGraphChildGraphNodeGetGraph: the node's own copy becomes usable by the client, is not
    destroyable, and is forgotten when its node goes; the session's end destroys the parents
    and the double frees each copy once (no graph left, none freed twice)."""
    log = os.path.join(tempfile.mkdtemp(prefix="om-graphs-"), "graph.log")
    e = daemon(extra_env={"FAKECUDA_GRAPH_LOG": log})
    p = graphs_client(e, "child")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "child ok" in out, "child: %r %r" % (out, err))

    def live():
        """(graphs made, graphs freed, frees of a graph not live then)"""
        alive, made, gone, twice = set(), 0, 0, 0
        for l in open(log).read().splitlines():
            if l.startswith("graph+"):
                alive.add(l.split()[1])
                made += 1
            elif l.startswith("graph-"):
                twice += l.split()[1] not in alive
                alive.discard(l.split()[1])
                gone += 1
        return made, gone, twice
    deadline = time.monotonic() + 30
    while live()[0] != live()[1] and time.monotonic() < deadline:
        time.sleep(0.1)
    made, gone, twice = live()
    check(made == gone and twice == 0 and made >= 5, "graphs made/freed: %r" % (live(),))


def test_remote_graphs_kernel_node_params_back(daemon):
    """cuGraphKernelNodeGetParams(_v2): grid, block, shared memory and the kernel from the
    server; kernelParams pointing into the client's copy of the argument bytes (the same copy
    while unchanged, the new values after a set); a foreign or destroyed node refused."""
    e = daemon()
    p = graphs_client(e, "kernelparams")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "kernelparams ok" in out, "kernelparams: %r %r" % (out, err))


def test_remote_graphs_external_semaphore_nodes(daemon):
    """External semaphore nodes (add, set, exec set, get, signal and wait): the double records
    the semaphores and values the server passed; the answer's arrays are the client's own
    copy; more than 128 semaphores refused; another client's semaphore or node refused by
    every call."""
    log = os.path.join(tempfile.mkdtemp(prefix="om-graphs-"), "graph.log")
    e = daemon(extra_env={"FAKECUDA_GRAPH_LOG": log})
    holder = subprocess.Popen([REMOTE_GRAPHS, "semnodes"],
                              env=dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR)),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    handles = holder.stdout.readline().split()
    if len(handles) != 2:
        holder.kill()
    check(len(handles) == 2, "holder printed its semaphore and node: %r %r" % (
        handles, holder.communicate()[1] if len(handles) != 2 else ""))
    lines = open(log).read().splitlines()
    signals = [l for l in lines if l.startswith("semsignal")]
    waits = [l for l in lines if l.startswith("semwait")]
    check(len(signals) == 2 + 1 and signals[0].endswith("value 5") and
          signals[1].endswith("value 6") and signals[2].endswith("value 9"),
          "signal node parameters reached the driver: %r" % signals)
    check(any(l.split()[1] == handles[0] for l in signals), "the client's semaphore")
    check(len(waits) == 2 + 1 + 1, "wait node parameters reached the driver: %r" % waits)
    p = graphs_client(e, "semnodes", *handles)
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "semnodes foreign refused" in out, "foreign: %r %r" % (out, err))
    out, err = holder.communicate("done\n", timeout=60)
    check(holder.returncode == 0 and "semnodes ok" in out, "holder: %r %r" % (out, err))


def test_remote_graphs_batch_mem_op_nodes(daemon):
    """Batch memory op nodes (add, get, set, exec set): the double records the operations the
    server passed; an address past the caller's memory for the operation's width, an unknown
    kind or flag, a count past 256, node flags: refused by every call."""
    log = os.path.join(tempfile.mkdtemp(prefix="om-graphs-"), "graph.log")
    e = daemon(extra_env={"FAKECUDA_GRAPH_LOG": log})
    p = graphs_client(e, "batchnodes")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "batchnodes ok" in out, "batchnodes: %r %r" % (out, err))
    ops = [l.split() for l in open(log).read().splitlines() if l.startswith("batchop")]
    # add (3), set (1), exec set (1): kinds as sent, nothing refused reached the double
    check([o[3] for o in ops] == ["2", "1", "5", "2", "2"], "operations: %r" % ops)
    check(int(ops[1][1], 16) == int(ops[0][1], 16) + 60, "addresses as sent: %r" % ops)


def test_remote_graphs_generic_node_params(daemon):
    """cuGraphAddNode and cuGraph(Exec)NodeSetParams go through each kind's own checked path
    (empty, kernel, event record read back); host parameters checked (hostnodes_driver adds
    real ones), memory nodes refused as not supported, reserved fields and another client's
    event refused."""
    e = daemon()
    p = graphs_client(e, "addnode")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "addnode ok" in out, "addnode: %r %r" % (out, err))


def test_remote_graphs_pageable_copy_nodes(daemon):
    """Copy nodes of pageable host memory (src/client/api/pagecopy.c), which the server cannot
    reach: made by hand (2D rows into the device, the device out through a unified address) and
    captured (cuMemcpyHtoDAsync, cuMemcpyDtoHAsync), their bytes move at each launch and never
    at the making; the nodes answer as copy nodes with the program's parameters; parameters set
    on the graph leave an executable graph made before alone, set on an executable graph leave
    the graph alone; a node set to pinned memory and back; a clone launched after its original
    was destroyed; a pageable side's rows wider than their pitch refused. The driver saw host
    nodes (the client's copies through staging) inside child graph nodes."""
    log = os.path.join(tempfile.mkdtemp(prefix="om-graphs-"), "graph.log")
    e = daemon(extra_env={"FAKECUDA_GRAPH_LOG": log})
    p = graphs_client(e, "pageable")
    out, err = p.communicate(timeout=120)
    check(p.returncode == 0 and "pageable ok" in out, "pageable: %r %r" % (out, err))
    lines = open(log).read().splitlines()
    check(any(l.startswith("childgraph ") for l in lines), "child graph nodes: %r" % lines[:40])
    check(any(l.startswith("hostnode+ ") for l in lines), "host nodes: %r" % lines[:40])


def test_printing_graphs_of_two_clients_stay_theirs(daemon):
    """Kernel printf's turns hold for graphs: two clients at once, each launching, unchanged,
    executable graphs whose kernel prints (made by hand, through a child graph, captured from a
    printing launch) in turn with one that prints nothing, then the first with its argument set
    on the executable graph each round, each launch followed by its stream's synchronize: each
    gets exactly its own lines, in order, and none of the other's (before, a graph's lines were
    not flushed at all). The server's log says which executable graphs take the turn: the three
    printing ones of each client, found by walking their graphs when they were made, and not
    the fourth. The server's threads may spin (their waits then end in a query)."""
    e = daemon({"OPENMPS_SPIN_THREADS": "all", "OPENMPS_LOG_LEVEL": "3"})
    n = 150
    ps = [graphs_client(e, "printgraph", str(n), str(base)) for base in (100000, 200000)]
    for base, p in zip((100000, 200000), ps):
        out, err = p.communicate(timeout=300)
        check(p.returncode == 0 and "printgraph ok" in out, "client: %r" % err[-2000:])
        got = [l for l in out.splitlines() if l.startswith("kernel printf")]
        want = (["kernel printf %d" % (base + i % 3) for i in range(n)] +
                ["kernel printf %d" % (base + 1000 + i) for i in range(n)])
        others = [l for l in got if l not in set(want)]
        check(not others, "%d lines of the other client's among %d: %r" %
              (len(others), len(got), others[:5]))
        check(got == want, "%d of %d lines, in order: %r" % (len(got), len(want), got[:5]))
    log = e.log("server.log")
    for p in ps:
        marked = re.findall(r"client %d: executable graph (0x[0-9a-f]+) may print" % p.pid, log)
        check(len(marked) == 3 and len(set(marked)) == 3,
              "client %d: the three printing graphs take the turn: %r" % (p.pid, marked))
