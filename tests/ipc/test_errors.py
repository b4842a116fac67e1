# SPDX-License-Identifier: MIT
"""Errors: per stream, a fault that restarts the server, event codes, and logs that do not flood."""
import os
import re
import tempfile
import time

from harness import check, remote, remote_case, wait_for


def test_client_errors_do_not_flood_the_log(daemon):
    """A client that repeats a malformed request gets CUDA_ERROR_INVALID_VALUE each time and keeps
    its session; server.log (which every user's server shares) names 16 of them and says that
    the rest are not logged."""
    e = daemon()
    rc, out, err = e.run_client("--bad-requests", 500)
    check(rc == 0 and "bad requests refused 500" in out and "pings ok" in out,
          "500 malformed requests refused, then a ping: %r %r" % (out, err))
    log = e.log("server.log")
    check(log.count("malformed request") == 16, "16 logged: %d" % log.count("malformed request"))
    check(log.count("they are not logged") == 1, "and one line for the rest")


def test_unsupported_notes_do_not_flood_the_log(daemon):
    """The note naming an unsupported entry point is logged once per entry per session, however
    often a client sends it; and every line a user's clients cause in server.log goes through a
    token bucket (300 at once, then 10 a second, with a count of what was left out), so clients
    that name every entry in session after session add a bounded amount."""
    e = daemon()
    path = os.path.join(e.logs, "server.log")
    # The server is started and its first lines written before the size is taken.
    rc, out, err = e.run_client("--pings", 1)
    check(rc == 0, "a first client: %r" % err)
    before = os.path.getsize(path)
    # Every entry named some 31 times in one session (the records cycle through the 637
    # entries): each entry's note once, then nothing more for the rest of the session.
    rc, out, err = e.run_client("--unsupported-notes", 20000, timeout=120)
    check(rc == 0 and "unsupported notes sent 20000" in out, "notes sent: %r %r" % (out, err))
    log = e.log("server.log")
    n_cuinit = log.count("called cuInit, which openmps does not support yet")
    check(n_cuinit == 1, "cuInit's note logged %d times in one session" % n_cuinit)
    # Four more sessions naming every entry: 4 x 637 lines without the bucket.
    t0 = time.monotonic()
    for _ in range(4):
        rc, out, err = e.run_client("--unsupported-notes", 637 * 3, timeout=120)
        check(rc == 0, "notes sent: %r" % err)
    flood_s = time.monotonic() - t0
    grown = os.path.getsize(path) - before
    bound = (300 + 10 * flood_s + 20) * 200
    print("5 sessions naming every entry grew server.log by %d bytes in %.1f s (bound %d)" %
          (grown, flood_s, bound))
    check(grown < bound, "server.log grew by %d bytes (bound %d)" % (grown, bound))
    # The count is written with the next line the server logs a second later or more.
    def reported():
        e.run_client("--pings", 1)
        return re.search(r"\d+ log line\(s\) suppressed", e.log("server.log"))
    wait_for(reported, what="server.log to say how many lines it left out")


def test_event_record_flags_and_ending_codes(daemon):
    """Issue #9, defect 12: cuEventRecordWithFlags reaches the driver with its flags; a client
    ended by terminate_client gets CUDA_ERROR_MPS_CLIENT_TERMINATED (810) and one whose server
    stops gets CUDA_ERROR_MPS_CONNECTION_FAILED (805), from the server's code, not its text."""
    log = os.path.join(tempfile.mkdtemp(prefix="om-flags-"), "launch.log")
    e = daemon(extra_env={"FAKECUDA_LAUNCH_LOG": log})
    p = remote(e, "eventflags")
    out, err = p.communicate(timeout=30)
    check(p.returncode == 0 and "eventflags ok" in out, "eventflags: %r %r" % (out, err))
    check("record flags 1" in open(log).read(), "the flags reached the driver")
    p = remote(e, "until_ended")
    check(p.stdout.readline().strip() == "ready", "client ready")
    spid = e.servers()[0]
    e.cmd("terminate_client %d %d" % (spid, p.pid))
    out, _ = p.communicate(timeout=30)
    check("ended 810" in out, "terminated: %r" % out)
    p = remote(e, "until_ended")
    check(p.stdout.readline().strip() == "ready", "client ready")
    e.cmd("shutdown_server %d -f" % e.servers()[0])
    out, _ = p.communicate(timeout=30)
    check("ended 805" in out, "server shut down: %r" % out)


def fault_beside_another(e, mode):
    """A client that holds a session, then remote_driver MODE (a fatal fault) run to its end:
    (the holder, the server's pid, the faulting process, its stdout, its stderr)."""
    other = remote(e, "hold")
    check(other.stdout.readline().strip().isdigit(), "a second client holds a session")
    spid = e.servers()[0]
    p = remote(e, mode)
    out, err = p.communicate(timeout=30)
    return other, spid, p, out, err


def test_remote_assert_message_reaches_its_client(daemon):
    """A device-side assert (the double's "assert" kernel): the driver writes its message on
    stderr in the server, at the synchronisation that answers CUDA_ERROR_ASSERT and ends the
    server for every client; the message reaches the asserting client's stderr before its call
    returns, and the printf line before it its stdout. Another client is told and gets neither."""
    e = daemon()
    other, spid, p, out, err = fault_beside_another(e, "assert")
    msg = ("fake.cu:12: void asserting(const int *, int): block: [15,0,0], thread: [255,0,0] "
           "Assertion `v[i] != 12345` failed.\n")
    check(p.returncode == 0 and out == "host before\nkernel printf 7\nassert 710\n",
          "the asserting client's stdout: %r %r" % (out, err))
    check(msg + "host after\n" in err, "the assert's message on its stderr, first: %r" % err)
    wait_for(lambda: e.servers() != [spid], what="the server to end")
    other.kill()
    oout, oerr = other.communicate(timeout=30)
    check("Assertion" not in oout + oerr and "kernel printf" not in oout + oerr,
          "the other client got none of it: %r %r" % (oout, oerr))
    check("Assertion" not in e.log("server.log"), "the server kept it for itself")


def test_remote_fault_restarts_the_server(daemon):
    """A fatal GPU fault in one client: that client gets the error, the other clients are told
    the server restarts, and the next client gets a new server (MPS's FAULT, then recovery)."""
    e = daemon()
    other, spid, p, out, err = fault_beside_another(e, "fault")
    check(p.returncode == 0 and "fault 700" in out, "the faulting client: %r %r" % (out, err))
    wait_for(lambda: e.servers() != [spid], what="the faulted server to go")
    slog = e.log("server.log")
    check("FAULT: a fatal GPU fault (CUresult 700) in client %d" % p.pid in slog,
          "the fault is logged: " + slog[-800:])
    other.kill()
    other.wait()
    wait_for(lambda: "reports a fault" in e.log(), what="the daemon to log the fault")
    p = remote(e, "roundtrip")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0, "the next client is served: %r" % err)
    new = e.servers()
    check(new and new[0] != spid, "by a new server: %r" % new)


def test_remote_errors_by_stream():
    """A posted call's error reaches its own stream's synchronising calls (its synchronize, a
    synchronous copy on it, an event recorded behind it, the context's synchronize, its
    destruction), once, and never another thread's calls on other streams."""
    remote_case("errors", 120)
