# SPDX-License-Identifier: MIT
"""Shareable allocation handles between clients (tests/cpu/shareable_driver.c)."""
import os
import subprocess

from harness import Env, Fail, REMOTE_DRIVER, SHIM_DIR, check, wait_for


def shareable_run(extra):
    """shareable-driver pair on a server of its own with the double's VMM; its output, the
    double's memory log, and the server's log once both sessions ended."""
    e = Env(start=False)
    ok = False
    try:
        mlog = os.path.join(e.dir, "memory")
        e.env.update({"FAKECUDA_MEMORY_LOG": mlog, "FAKECUDA_VMM": "1",
                      "OPENMPS_CLIENT_MAX_HANDLES": "4"})
        e.env.update(extra)
        e.start()
        env = dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR))
        prog = os.path.join(os.path.dirname(REMOTE_DRIVER), "shareable-driver")
        p = subprocess.Popen([prog, "pair"], env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = p.communicate(timeout=120)
        check(p.returncode == 0 and "pair ok" in out, "pair: %r %r" % (out, err))
        lines = []

        def count(w):
            return sum(l.split()[0] == w for l in lines if l.strip())

        def released():
            nonlocal lines
            lines = open(mlog).read().splitlines()
            return (count("vmmcreate") + count("vmmimport") == count("vmmrelease") and
                    count("poolcreate") + count("poolimport") == count("pooldestroy") and
                    count("ptrimport") == count("ptrfree") and
                    "2 client(s) left" not in e.log("server.log") and
                    e.log("server.log").count("disconnected (") >= 2)
        try:
            wait_for(released, what="both sessions' ends")
        except Fail:
            raise Fail("not everything released: %r" % lines)
        ok = True
        return out, lines, e.log("server.log")
    finally:
        e.close(ok)


def test_shareable_handles_between_clients():
    """Shareable handles (api/remote/shareable.tsv, shareable_driver.c): an allocation handle and
    a pool exported as POSIX descriptors reach the exporting program as working descriptors
    (SCM_RIGHTS from the server), travel to another client of the same server and are imported
    there as that client's own (the bytes the exporter wrote read back through a mapping and
    through an imported pool pointer); each client is refused the other's handles and pools;
    a pipe reaches the driver and is refused with its error, a number that is no descriptor, Win32
    and unknown types are refused, and the server goes on; imports stop at the handle budget;
    the session's end releases imported handles, pools and pointers."""
    out, lines, slog = shareable_run({})
    check("fabric import rc 0" in out, "a fabric handle imported: %r" % out)
    check("imported 3 more" in out, "the budget of 4 allocation handles: %r" % out)
    check(sum(l.startswith("refused vmmimport") for l in lines) == 1 and
          sum(l.startswith("refused poolimport") for l in lines) == 1,
          "the pipe reached the driver once for a handle, once for a pool: %r" % lines)
    check(sum(l.startswith("vmmexport ") for l in lines) == 2 and
          sum(l.startswith("poolexport ") for l in lines) == 1 and
          sum(l.startswith("ptrexport ") for l in lines) == 1, "the exports: %r" % lines)
    check(sum(l.startswith("ptrimport ") for l in lines) == 3, "the pointer imports: %r" % lines)
    addr = [l.split()[1] for l in lines if l.startswith("ptrimport ")][0]
    check(sum(l.startswith("freeasync %s " % addr) for l in lines) == 4,
          "the importer's three frees of pool memory in stream order (its cuMemFree, the refused "
          "second import, its session's end), then the exporter's: %r" % lines)


def test_shareable_import_of_an_exporters_own_handle_refused():
    """Where the driver answers an import with the exporter's very handle (one process: the
    server's), the importer is refused (NOT_SUPPORTED, logged) rather than given an object
    another client destroys; both sessions' ends still release everything once."""
    out, lines, slog = shareable_run({"FAKECUDA_SHAREABLE_SAME": "1"})
    check("fabric import rc 801" in out, "the exporter's own handle refused: %r" % out)
    check("already holds; refused" in slog, "the refusal logged: %r" % slog[-2000:])
    check(sum(l.startswith("same vmmimport") for l in lines) == 1, "the driver's answer: %r" % lines)
