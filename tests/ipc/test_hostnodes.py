# SPDX-License-Identifier: MIT
"""Host nodes and user objects: host functions run in the client (tests/cpu/hostnodes_driver.c)."""
import os
import re
import subprocess
import tempfile

from harness import Env, check, driver_program, wait_for


HOSTNODES_DRIVER = os.environ.get("OM_HOSTNODES_DRIVER", "build/tests/hostnodes-driver")


def hostnodes_driver(e, *args, stdin=None):
    return driver_program(e, HOSTNODES_DRIVER, args, stdin=stdin)


def test_hostnodes_run_in_the_client(daemon):
    """api/remote/hostnodes.tsv: a host node of a hand-built graph runs in the client (its own
    function and argument), between the kernels around it, at each of several launches; its
    parameters back, set on the graph (a new instantiation) and on the executable graph; the
    generic cuGraphAddNode / cuGraph(Exec)NodeSetParams of the host type; a missing function,
    a dependency count past the maximum and distinct host functions past the server's 4096
    records refused. The driver got the server's trampoline, never the client's address."""
    log = os.path.join(tempfile.mkdtemp(prefix="om-hostnodes-"), "graph.log")
    e = daemon(extra_env={"FAKECUDA_GRAPH_LOG": log})
    p = hostnodes_driver(e, "nodes")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "nodes ok" in out, "nodes: %r %r" % (out, err))
    made = [l for l in open(log).read().splitlines() if l.startswith("hostnode+")]
    check(len(made) == 2, "two host nodes reached the driver: %r" % made)


def test_hostnodes_captured_host_function_runs_at_replay(daemon):
    """cuLaunchHostFunc on a capturing stream becomes a host node of the captured graph: it does
    not run at capture, it runs (between the captured kernels) at each replay; off capture it
    runs once the stream is done; cuStreamAddCallback on a capturing stream is refused (900),
    as the driver refuses it, and works again after the capture."""
    log = os.path.join(tempfile.mkdtemp(prefix="om-hostnodes-"), "graph.log")
    e = daemon(extra_env={"FAKECUDA_GRAPH_LOG": log})
    p = hostnodes_driver(e, "capture")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "capture ok" in out, "capture: %r %r" % (out, err))
    text = open(log).read()
    check(text.count("hostfunc captured") == 1, "one captured host function: %r" % text)


def test_hostnodes_user_objects(daemon):
    """User objects: the destructor runs exactly once, when the last reference goes (the
    caller's, a graph's, its clone's, an executable graph's after its launches); moved
    references; an executable graph's replaced by the new graph's at cuGraphExecUpdate; flags,
    counts and over-releases refused."""
    e = daemon()
    p = hostnodes_driver(e, "uobj")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "uobj ok" in out, "uobj: %r %r" % (out, err))


def test_hostnodes_of_another_client_refused():
    """A client cannot add a host node to another client's graph or after its node, read or set
    another client's host node's parameters, use its node in an executable graph, or capture a
    host function on its stream."""
    e = Env()
    ok = False
    holder = None
    try:
        holder = hostnodes_driver(e, "hold", stdin=subprocess.PIPE)
        handles = holder.stdout.readline().split()
        check(len(handles) == 3, "holder printed its handles: %r" % handles)
        p = hostnodes_driver(e, "steal", *handles)
        out, err = p.communicate(timeout=60)
        check(p.returncode == 0 and "steal refused" in out, "steal: %r %r" % (out, err))
        out, err = holder.communicate(input="end\n", timeout=30)
        check(holder.returncode == 0 and "hold ok" in out, "holder: %r %r" % (out, err))
        ok = True
    finally:
        if holder and holder.poll() is None:
            holder.kill()
            holder.wait()
        e.close(ok)


def test_hostnodes_client_killed_in_its_host_function():
    """A client killed while the server waits for its host function: the server's wait ends
    with the session (the graph's work completes, the session is freed) and another client is
    served, host nodes included."""
    e = Env()
    ok = False
    hung = None
    try:
        hung = hostnodes_driver(e, "hang")
        line = hung.stdout.readline()
        check(line.strip() == "blocked", "the host function started: %r" % line)
        hung.kill()
        hung.wait()
        wait_for(lambda: re.search(r"Client %d disconnected" % hung.pid, e.log("server.log")),
                 what="the killed client's session freed")
        p = hostnodes_driver(e, "nodes")
        out, err = p.communicate(timeout=60)
        check(p.returncode == 0 and "nodes ok" in out, "second client: %r %r" % (out, err))
        ok = True
    finally:
        if hung and hung.poll() is None:
            hung.kill()
            hung.wait()
        e.close(ok)


def test_hostnodes_host_function_past_its_time_ends_the_session():
    """A client whose host function does not return (alive, not killed) holds the driver's
    host-callback thread, which every client's host functions share: past
    OPENMPS_HOST_FN_TIMEOUT_S the server ends that client's session, says why, and serves the
    next client, host nodes included."""
    e = Env({"OPENMPS_HOST_FN_TIMEOUT_S": "1"})
    ok = False
    hung = None
    try:
        hung = hostnodes_driver(e, "hang")
        line = hung.stdout.readline()
        check(line.strip() == "blocked", "the host function started: %r" % line)
        wait_for(lambda: re.search(r"client %d: its host function ran past 1 s" % hung.pid,
                                   e.log("server.log")),
                 what="the timeout said")
        wait_for(lambda: re.search(r"Client %d disconnected" % hung.pid, e.log("server.log")),
                 what="the stuck client's session ended")
        p = hostnodes_driver(e, "nodes")
        out, err = p.communicate(timeout=60)
        check(p.returncode == 0 and "nodes ok" in out, "next client: %r %r" % (out, err))
        ok = True
    finally:
        if hung and hung.poll() is None:
            hung.kill()
            hung.wait()
        e.close(ok)
