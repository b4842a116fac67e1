# SPDX-License-Identifier: MIT
"""The server's scheduler: long kernels, fairness between clients, streams left alone."""
import os
import re

from harness import Env, SANITIZER, check, fair_clients, remote


def client_times(tlog):
    """The rows of the test double's time log after the 1024 event records of the server's start
    (warm.c grows the driver's pools before it takes clients): the clients' work."""
    rows = [l.split() for l in open(tlog).read().splitlines()]
    check(len(rows) > 1024 and all(r[0] == "record" for r in rows[:1024]),
          "the server's start recorded 1024 events first: %r" % rows[:3])
    return rows[1024:]


def chain_times(sched, kernel_ms=100, pairs=2):
    """Runs the remote driver's chain with kernels of kernel_ms in the test double; returns the
    times (ms) at which its launches and its event record reached the driver, and its output."""
    e = Env(start=False)
    ok = False
    try:
        tlog = os.path.join(e.dir, "times")
        e.env.update({"FAKECUDA_KERNEL_MS": str(kernel_ms), "FAKECUDA_TIME_LOG": tlog})
        if sched:
            e.env["OPENMPS_SCHED"] = sched
        e.start()
        p = remote(e, "chain", str(pairs))
        out, err = p.communicate(timeout=60)
        check(p.returncode == 0 and "chain ok" in out, "chain: %r %r" % (out, err))
        check(not SANITIZER.search(err), "sanitizer: " + err)
        rows = client_times(tlog)
        check([r[0] for r in rows] == ["long", "tiny"] * pairs + ["record"],
              "the chain reached the driver in order: %r" % rows)
        check("scheduling: %s" % (sched or "auto") in e.log("server.log"),
              "the server logged its scheduling mode")
        ok = True
        return [int(r[1]) for r in rows], out
    finally:
        e.close(ok)


def test_remote_scheduler_holds_work_behind_long_kernels():
    """With scheduling on (OPENMPS_SCHED=always; by default it turns on past 32 client
    streams), each operation after a running kernel waits in the server until that kernel is
    done, so nothing dependent sits in a shared hardware queue; a stream query still answers
    at once. With one client stream (auto) everything goes to the driver at once."""
    # 1 s kernels: a held operation waits at least that (load only adds); a query that waits for
    # the kernel answers 0, not NOT_READY, and takes a second, where a loaded machine's round
    # trip takes milliseconds
    t, out = chain_times("always", kernel_ms=1000)
    gaps = [b - a for a, b in zip(t, t[1:])]
    check(all(g >= 900 for g in gaps), "each operation waited for the 1 s kernel before it: "
          "gaps %r ms" % gaps)
    q = re.search(r"chain query (\d+) in (\d+) us", out)
    check(q and q.group(1) == "600" and int(q.group(2)) < 500000,
          "the stream query answered NOT_READY without waiting: %r" % out)
    # 400 ms kernels: one not held goes at once, where held it would wait 400 ms after each
    t, out = chain_times(None, kernel_ms=400)
    # held, the four operations after kernels would take 1 600 ms
    check(t[-1] - t[0] < 800, "without shared queues nothing waits: %r ms" % t)


def test_remote_scheduler_shares_the_gpu_fairly():
    """Fair share (sched.c): two clients of long kernels (1 s in the double) on their default
    streams, each with one launched, then each launching two more back to back: each one's next
    launch waits for its last kernel, so the four later launches reach the driver spread over
    at least a kernel's time; with OPENMPS_SCHED=off they all go at once. A client alone is not
    held (remote_scheduler_holds_work_behind_long_kernels)."""
    for sched in (None, "off"):
        e = Env(start=False)
        ok = False
        procs = []
        try:
            tlog = os.path.join(e.dir, "times")
            e.env.update({"FAKECUDA_KERNEL_MS": "1000", "FAKECUDA_TIME_LOG": tlog,
                          "OPENMPS_FAIR_WINDOW_MS": "600000"})
            if sched:
                e.env["OPENMPS_SCHED"] = sched
            e.start()
            for rc, out, err in fair_clients(e, 3, procs):
                check(rc == 0 and "fair ok" in out, "fair: %r %r" % (out, err))
            t = sorted(int(r[1]) for r in client_times(tlog) if r[0] == "long")
            check(len(t) == 6, "six launches: %r" % t)
            later = t[2:]
            if sched is None:
                check(later[-1] - later[0] >= 900, "held: the later launches spread over a "
                      "kernel's time at least: %r ms" % later)
                check("fair share" in e.log("server.log"), "fair share logged")
            else:
                check(later[-1] - later[0] < 900, "not held with scheduling off: %r ms" % later)
            ok = True
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
            e.close(ok)


def test_remote_scheduler_leaves_streams_alone(daemon):
    """Under the scheduler, a client with streams of its own is never held (its s2 kernel goes
    while s1's kernel runs, though an event record follows that kernel on s1); a stream query
    answers at once; a pageable copy never waits for staging slots that another stream's copy
    still uses behind a kernel."""
    e = daemon(start=False)
    tlog = os.path.join(e.dir, "times")
    # 4 s kernels: whatever waits for s1's kernel waits that long (or 2 s, where the
    # scheduler stops waiting for a kernel never measured), far more than a loaded machine
    # adds to work that waits for nothing (s1 was queried some 0.3-0.5 s after its launch
    # with both cores busy, up to 1.5 s on a machine five times overloaded)
    e.env.update({"FAKECUDA_KERNEL_MS": "4000", "FAKECUDA_TIME_LOG": tlog,
                  "OPENMPS_SCHED": "always"})
    e.start()
    p = remote(e, "streams2")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "streams2 ok" in out, "streams2: %r %r" % (out, err))
    rows = client_times(tlog)
    check([r[0] for r in rows[:3]] == ["long", "record", "tiny"], "order: %r" % rows)
    check(int(rows[2][1]) - int(rows[0][1]) < 1000,
          "the kernel on s2 was not held behind s1's 4 s kernel: %r" % rows)
    m = re.search(r"query_us (\d+) staged_ms ([0-9.]+) s1_busy (\d)", out)
    check(m and int(m.group(1)) < 1000000, "the query answered at once: %r" % out)
    # an event, not a time: s1 (its kernel, then its copy) was still busy when the copy on
    # s3 had been staged, so that copy did not wait for s1's slots
    check(m and m.group(3) == "1", "the copy did not wait for s1's slots: %r" % out)
    print("figures (bounds above): s2's kernel %d ms after s1's; %s" %
          (int(rows[2][1]) - int(rows[0][1]), out.splitlines()[0]))


def test_remote_scheduler_bounds_its_waits():
    """A kernel never measured is waited for at most 2 s (it might wait for work its own client
    submits later): past that the next operation goes to the driver anyway."""
    # 3.4 s kernels: a wait that does not give up lasts at least 3.4 s; one that gives up at 2 s
    # has 1.4 s to spare on a loaded machine
    t, out = chain_times("always", kernel_ms=3400, pairs=1)
    check(1900 <= t[1] - t[0] < 3000, "the wait behind the 3.4 s kernel gave up at 2 s: %r" % t)
