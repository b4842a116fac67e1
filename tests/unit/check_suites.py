#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The suites harness (tests/gpu/suites/suites.py) without a GPU: a tiny fake CuPy and PyTorch
suite, run under a fake `openmps` (which marks the tests' environment) and a fake daemon (a
process, a pid file, an `alive` file the fake probe reads, a start count). Checks the outcomes
of each mode, the regressions and their re-runs alone, a crash and a hang followed by the rest
of the file, a process whose server went (a test ended it) ended and the rest of its file run
in a new one, the daemon restarted when the probe fails, a collection error under
openmps only, a run stopped at its deadline continued by the next, the sharding, and the
errors on bad selections. Usage: check_suites.py (with a python3 that has pytest)."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap

HARNESS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gpu",
                       "suites", "suites.py")
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL: " + what)


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text).lstrip())
    os.chmod(path, mode)


FAKE_OPENMPS = """
#!/bin/sh
# fake openmps: `run -- CMD` runs CMD with the mark the fake tests read
[ "$1" = run ] && [ "$2" = -- ] || { echo "fake openmps: bad arguments $*" >&2; exit 2; }
shift 2
OMSUITE_FAKE_MODE=openmps exec "$@"
"""

FAKE_CONTROL = """
#!PYTHON
# fake openmps-control: -d starts a sleeping process (the daemon) and marks it alive; quit on
# stdin ends it
import os, subprocess, sys, time
pipe = os.environ["CUDA_MPS_PIPE_DIRECTORY"]
pidf = os.path.join(pipe, "openmps-control.pid")
if sys.argv[1:] == ["-d"]:
    os.makedirs(pipe, exist_ok=True)
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                         start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    open(pidf, "w").write("%d\\n" % p.pid)
    n = int(open(os.path.join(pipe, "generation")).read()) if os.path.exists(
        os.path.join(pipe, "generation")) else 0
    open(os.path.join(pipe, "generation"), "w").write(str(n + 1))
    open(os.path.join(pipe, "alive"), "w").close()
    with open(os.path.join(pipe, "starts"), "a") as f:
        f.write("start\\n")
    sys.exit(0)
text = sys.stdin.read()
if text.startswith("get_server_list"):
    if os.path.exists(os.path.join(pipe, "alive")):
        print(open(pidf).read().strip())
    sys.exit(0)
if text.startswith("quit"):
    try:
        os.kill(int(open(pidf).read()), 15)
        os.unlink(pidf)
    except (OSError, ValueError):
        pass
    if os.path.exists(os.path.join(pipe, "alive")):
        os.unlink(os.path.join(pipe, "alive"))
"""

FAKE_PROBE = """
import os, sys
pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "")
ok = os.environ.get("OMSUITE_FAKE_MODE") == "openmps" and os.path.exists(pipe + "/alive")
sys.exit(0 if ok else 1)
"""

COMMON = """
import os, signal, time
import pytest
MODE = os.environ.get("OMSUITE_FAKE_MODE", "native")
PIPE = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "")
def generation():
    return open(PIPE + "/generation").read() if MODE == "openmps" else "0"
GEN0 = generation()
"""

TEST_A = COMMON + """
def test_pass(): pass
def test_fail_both(): assert False, "fails in both"
def test_skip(): pytest.skip("skips in both")
@pytest.mark.xfail(strict=True)
def test_xfail(): assert False
def test_regression(): assert MODE == "native", "differs under openmps"
def test_ends_server():
    if MODE == "openmps":
        os.unlink(PIPE + "/alive")
        time.sleep(3)  # the harness sees the server go meanwhile
def test_collateral():
    if MODE == "openmps":
        assert os.path.exists(PIPE + "/alive") and generation() == GEN0, "session ended"
def test_passes_alone():  # failed by the run around it, as by another test's device assert
    assert MODE == "native" or os.environ.get("OMSUITE_ONLY"), "cudaErrorAssert: device-side assert"
"""

TEST_B = COMMON + """
def test_intermittent():  # passes alone, no fault in its file's run: still a regression
    assert MODE == "native" or os.environ.get("OMSUITE_ONLY"), "fails beside the others"
def test_1(): pass
def test_crash():
    if MODE == "openmps":
        os.kill(os.getpid(), signal.SIGKILL)
def test_3(): pass
def test_hang():
    if MODE == "openmps":
        time.sleep(60)
def test_5(): pass
"""

TEST_C = COMMON + """
if MODE == "openmps":
    raise ImportError("cannot import under openmps")
def test_x(): pass
def test_y(): pass
"""

TEST_D = COMMON + """
if MODE == "openmps":
    time.sleep(120)  # collection stuck
def test_z(): pass
"""

TEST_TORCH = COMMON + """
import unittest
class TestCuda(unittest.TestCase):
    def test_first(self): pass
    def test_sub(self):
        for i in range(3):
            with self.subTest(i=i):
                self.assertTrue(MODE == "native" or i != 1)
    def test_slow(self):
        time.sleep(float(os.environ.get("FAKE_SLOW_" + MODE.upper(), os.environ.get("FAKE_SLOW", "0"))))
    def test_last(self): pass
"""


def harness(*args, env=None, timeout=240):
    r = subprocess.run([sys.executable, HARNESS] + list(args), capture_output=True, text=True,
                       timeout=timeout, env=dict(os.environ, **(env or {})))
    return r.returncode, r.stdout + r.stderr


def records(path):
    with open(path) as f:
        return [json.loads(x) for x in f if x.strip()]


def outcomes(path):
    return {r["id"]: r["outcome"] for r in records(path) if r["t"] == "end"}


def plugin_outcomes(t):
    """The plugin's outcome of one test from a sequence of reports, as pytest 9 sends them for a
    test with subtests (several call reports), without running pytest."""
    import types
    sys.path.insert(0, os.path.dirname(HARNESS))
    os.environ["OMSUITE_RESULTS"] = os.path.join(t, "plugin.jsonl")
    import omsuite_plugin as plug

    def rep(nodeid, when, outcome, msg=None):
        return types.SimpleNamespace(nodeid=nodeid, when=when, passed=outcome == "passed",
                                     skipped=outcome == "skipped", failed=outcome == "failed",
                                     longrepr=msg)
    cases = {"sub": ["passed", "failed", "passed", "passed"], "plain": ["passed"],
             "teardown": ["passed"], "skip": ["skipped"]}
    for name, calls in cases.items():
        plug.pytest_runtest_logstart(name, None)
        plug.pytest_runtest_logreport(rep(name, "setup", "passed"))
        for c in calls:
            plug.pytest_runtest_logreport(rep(name, "call", c, ("f", 1, "why") if c != "passed"
                                              else None))
        plug.pytest_runtest_logreport(rep(name, "teardown",
                                          "failed" if name == "teardown" else "passed",
                                          ("f", 1, "boom") if name == "teardown" else None))
        plug.pytest_runtest_logfinish(name, None)
    return {r["id"]: r["outcome"] for r in records(os.environ["OMSUITE_RESULTS"])
            if r["t"] == "end"}


def main():
    t = tempfile.mkdtemp(prefix="check-suites.")
    # the harness's own temporary directories (its fake daemons' pipe directories) go under
    # this test's, where the check below looks, not among other runs' in /tmp
    own_tmp = os.path.join(t, "tmp")
    os.makedirs(own_tmp)
    os.environ["TMPDIR"] = own_tmp
    got = plugin_outcomes(t)
    check(got == {"sub": "failed", "plain": "passed", "teardown": "error", "skip": "skipped"},
          "the plugin's outcomes from reports: %r" % got)
    src, build, res = os.path.join(t, "src"), os.path.join(t, "build"), os.path.join(t, "res")
    write(os.path.join(build, "openmps"), FAKE_OPENMPS, 0o755)
    write(os.path.join(build, "openmps-control"),
          FAKE_CONTROL.replace("PYTHON", sys.executable), 0o755)
    write(os.path.join(t, "probe.py"), FAKE_PROBE)
    write(os.path.join(src, "cupy/tests/cupy_tests/cuda_tests/test_a.py"), TEST_A)
    write(os.path.join(src, "cupy/tests/cupy_tests/core_tests/test_b.py"), TEST_B)
    write(os.path.join(src, "cupy/tests/cupyx_tests/test_c.py"), TEST_C)
    write(os.path.join(src, "cupy/tests/cupy_tests/fft_tests/test_d.py"), TEST_D)
    write(os.path.join(src, "cupy/tests/cupy_tests/io_tests/test_notselected.py"), TEST_C)
    write(os.path.join(src, "pytorch/test_cuda.py"), TEST_TORCH)
    base = ["--suites-dir", src, "--build", build, "--results", res, "--python", sys.executable,
            "--probe-cmd", "%s %s" % (sys.executable, os.path.join(t, "probe.py"))]

    # the selection, the shards, bad selections
    rc, out = harness("list", "--suites-dir", src)
    listed = out.split("\n")
    check(rc == 0 and listed[:5] == ["cupy tests/cupy_tests/cuda_tests/test_a.py",
                                     "cupy tests/cupy_tests/core_tests/test_b.py",
                                     "cupy tests/cupy_tests/fft_tests/test_d.py",
                                     "cupy tests/cupyx_tests/test_c.py",
                                     "pytorch test_cuda.py"], "the default selection: " + out)
    rc1, s1 = harness("list", "--suites-dir", src, "--shard", "1/2")
    rc2, s2 = harness("list", "--suites-dir", src, "--shard", "2/2")
    a, b = set(s1.split()), set(s2.split())
    check(rc1 == 0 and rc2 == 0 and sorted(s1.splitlines() + s2.splitlines()) ==
          sorted(listed[:5]) and len(s1.splitlines()) == 3, "shards 1/2 and 2/2: %r %r" % (s1, s2))
    rc, out = harness("list", "--suites-dir", src, "--shard", "3/2")
    check(rc == 2 and "K must be between 1 and N" in out, "--shard 3/2: " + out)
    rc, out = harness("list", "--suites-dir", src, "--files", "nothing_like_this*")
    check(rc == 2 and "nothing_like_this*" in out and "matches" in out, "--files no match: " + out)
    rc, out = harness("list", "--suites-dir", src, "--suite", "jax")
    check(rc == 2 and "unknown suite 'jax'" in out, "--suite jax: " + out)
    rc, out = harness("list", "--suites-dir", src, "--files", "tests/cupy_tests/io_tests")
    check(rc == 0 and out.strip() == "cupy tests/cupy_tests/io_tests/test_notselected.py",
          "--files names a folder outside the default selection: " + out)

    # the fake CuPy: both modes, crashes, a hang, a server ended, a collection error
    rc, out = harness("run", *base, "--suite", "cupy", "--test-timeout", "10", "--grace", "10",
                      "--budget", "200")
    check(rc == 1, "a run with regressions exits 1, not %d:\n%s" % (rc, out))
    nat_a = outcomes(os.path.join(res, "cupy/tests/cupy_tests/cuda_tests/test_a.py.native.jsonl"))
    omp_a = outcomes(os.path.join(res, "cupy/tests/cupy_tests/cuda_tests/test_a.py.openmps.jsonl"))
    p = "tests/cupy_tests/cuda_tests/test_a.py::"
    check(nat_a == {p + "test_pass": "passed", p + "test_fail_both": "failed",
                    p + "test_skip": "skipped", p + "test_xfail": "xfailed",
                    p + "test_regression": "passed", p + "test_ends_server": "passed",
                    p + "test_collateral": "passed", p + "test_passes_alone": "passed"},
          "test_a natively: %r" % nat_a)
    # the process that lost its server ends; the next test runs in a new one
    check(omp_a.get(p + "test_regression") == "failed" and
          omp_a.get(p + "test_ends_server") == "crashed" and
          omp_a.get(p + "test_collateral") == "passed" and omp_a.get(p + "test_pass") == "passed",
          "test_a under openmps: %r" % omp_a)
    omp_b = outcomes(os.path.join(res, "cupy/tests/cupy_tests/core_tests/test_b.py.openmps.jsonl"))
    q = "tests/cupy_tests/core_tests/test_b.py::"
    check(omp_b == {q + "test_intermittent": "failed", q + "test_1": "passed",
                    q + "test_crash": "crashed", q + "test_3": "passed",
                    q + "test_hang": "timeout", q + "test_5": "passed"},
          "test_b under openmps (the rest of the file after a crash and a hang): %r" % omp_b)
    omp_c = outcomes(os.path.join(res, "cupy/tests/cupyx_tests/test_c.py.openmps.jsonl"))
    check(list(omp_c.values()) == ["error"], "test_c under openmps: %r" % omp_c)
    reruns = {r["id"]: r["outcome"] for r in records(os.path.join(res, "reruns.jsonl"))}
    check(reruns == {p + "test_regression": "failed", p + "test_ends_server": "crashed",
                     p + "test_passes_alone": "passed", q + "test_intermittent": "passed",
                     q + "test_crash": "crashed", q + "test_hang": "timeout",
                     "tests/cupyx_tests/test_c.py::test_x": "error",
                     "tests/cupyx_tests/test_c.py::test_y": "error",
                     "tests/cupy_tests/fft_tests/test_d.py::test_z": "timeout"},
          "the re-runs alone: %r" % reruns)
    with open(os.path.join(t, "build", "..", "res", "events.jsonl")) as f:
        events = [json.loads(x) for x in f]
    check(sum(e["event"] == "daemon-restarted" for e in events) == 2,
          "two daemon restarts (after test_ends_server, and after it alone): %r" % events)
    regs = open(os.path.join(res, "regressions.txt")).read()
    check(regs.count("\n") == 9 and "test_passes_alone\tfailed\talone: passed" in regs and "test_d.py::test_z\tnot run\talone: timeout" in regs and "test_ends_server\tcrashed\talone: crashed" in regs and
          "test_c.py::test_x\tnot run\talone: error" in regs, "regressions.txt:\n" + regs)
    rep = open(os.path.join(res, "report.md")).read()
    check("| cupy | native | 4 | 17 | 14 | 1 | 0 | 1 | 1 | 0 | 0 |" in rep,
          "the native row of the report:\n" + rep)
    check("| cupy | openmps | 4 | 16 | 5 | 4 | 1 | 1 | 1 | 2 | 2 |" in rep,
          "the openmps row of the report:\n" + rep)
    # a test that met another client's fault and passes alone is listed apart; one that passes
    # alone with no fault around it stays a regression
    regs_part, _, alone_part = rep.partition("## Failed by another client's fault")
    check("test_passes_alone" in alone_part and "test_passes_alone" not in regs_part and
          "test_intermittent" in regs_part and "test_intermittent" not in alone_part and
          "test_regression" in regs_part, "the passed-alone section:\n" + rep)
    # the fake daemon is gone
    starts = open(os.path.join(t, "res", "..", "res", "events.jsonl")).read()
    check(starts.count("run-end") == 1, "one run-end event")
    # no process of this run is left: none has this test's directories in its environment (the
    # harness removed its own directory, pid file included)
    for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                left = own_tmp.encode() in f.read()
        except OSError:
            continue
        check(not left, "process %s of the run still runs: %r" % (
            pid, open("/proc/%s/cmdline" % pid, "rb").read()[:200]))

    # a run stopped at its deadline, continued by the next; the first file is not run again
    # (a budget a loaded machine does not spend before the slow test starts: 18 s was, once)
    rc, out = harness("run", *base, "--suite", "pytorch", "--budget", "60",
                      env={"FAKE_SLOW": "600"})
    unit = os.path.join(res, "pytorch/test_cuda.py.native.jsonl")
    recs = records(unit)
    check("1 units of them not done" in out or "2 units of them not done" in out,
          "the deadline stops the run:\n" + out)
    # unittest's order: test_first, test_last, test_slow
    check([r["t"] for r in recs if r["t"] in ("start", "end")] == ["start", "end"] * 2 + ["start"],
          "the test in progress at the deadline is not recorded: %r" % recs)
    rc, out = harness("run", *base, "--suite", "pytorch", "--budget", "200",
                      env={"FAKE_SLOW": "0", "FAKE_SLOW_OPENMPS": "1.5"})
    recs = records(unit)
    starts = [r["id"] for r in recs if r["t"] == "start"]
    check(starts.count("test_cuda.py::TestCuda::test_first") == 1 and
          starts.count("test_cuda.py::TestCuda::test_slow") == 2 and
          outcomes(unit) == {"test_cuda.py::TestCuda::test_first": "passed",
                             "test_cuda.py::TestCuda::test_slow": "passed",
                             "test_cuda.py::TestCuda::test_last": "passed",
                             "test_cuda.py::TestCuda::test_sub": "passed"},
          "the continued run: %r" % recs)
    check(rc == 1 and "all done" in out, "the second run finishes:\n" + out)
    rc, out = harness("report", "--results", res)
    omp = outcomes(os.path.join(res, "pytorch/test_cuda.py.openmps.jsonl"))
    check(omp.get("test_cuda.py::TestCuda::test_sub") == "failed",
          "a failed subtest fails its test: %r" % omp)
    check(rc == 0 and "| pytorch | openmps | 1 | 4 | 3 | 1 |" in out and
          "## Tests that pass natively but not under openmps (9)" in out,
          "report of both runs:\n" + out)
    # where the time went: test_slow, 1.5 s longer under openmps, leads its file's line
    slow = [l for l in out.splitlines() if l.startswith("| pytorch:test_cuda.py |")]
    check("## Where openmps took longer" in out and len(slow) == 1 and
          "`TestCuda::test_slow` +1." in slow[0], "where openmps took longer:\n" + out)
    # a unit not begun whose expected wall (an earlier process of its file took 1000 s) does
    # not fit in the time left is left for a later run; the run's first unit is always begun
    seg = {"suite": "pytorch", "file": "test_cuda.py", "mode": "openmps", "wall": 1000.0, "rc": 0,
           "finished": True, "ended": 4, "deadline": False, "ts": 1.0}
    res2 = os.path.join(t, "res2")
    os.makedirs(res2)
    write(os.path.join(res2, "segments.jsonl"), json.dumps(seg) + "\n")
    base2 = [a if a != res else res2 for a in base]
    rc, out = harness("run", *base2, "--suite", "pytorch", "--budget", "200",
                      env={"FAKE_SLOW": "0"})
    events = records(os.path.join(res2, "events.jsonl"))
    left = [e for e in events if e.get("event") == "unit-left-for-later"]
    check(len(outcomes(os.path.join(res2, "pytorch/test_cuda.py.native.jsonl"))) == 4 and
          not os.path.exists(os.path.join(res2, "pytorch/test_cuda.py.openmps.jsonl")) and
          len(left) == 1 and left[0]["mode"] == "openmps" and left[0]["expected"] == 1200.0 and
          "1 units of them not done" in out,
          "the unit that does not fit is left for later: %r\n%s" % (left, out))
    # the next run begins it: its first unit (test_sub fails under openmps: rc 1)
    rc, out = harness("run", *base2, "--suite", "pytorch", "--budget", "200",
                      env={"FAKE_SLOW": "0"})
    check(rc == 1 and "all done" in out and
          len(outcomes(os.path.join(res2, "pytorch/test_cuda.py.openmps.jsonl"))) == 4,
          "the next run begins it:\n" + out)
    # --split begins every unit
    res3 = os.path.join(t, "res3")
    os.makedirs(res3)
    write(os.path.join(res3, "segments.jsonl"), json.dumps(seg) + "\n")
    rc, out = harness("run", *[a if a != res else res3 for a in base], "--suite", "pytorch",
                      "--budget", "200", "--split", env={"FAKE_SLOW": "0"})
    check(rc == 1 and "all done" in out and
          len(outcomes(os.path.join(res3, "pytorch/test_cuda.py.openmps.jsonl"))) == 4 and
          len(outcomes(os.path.join(res3, "pytorch/test_cuda.py.native.jsonl"))) == 4,
          "--split begins it in the same run:\n" + out)
    # this run's own processes count: natively the file takes 20 s, so with 50 s of budget
    # the openmps unit (expected 24 s and the margin) is left for later, with no earlier record
    res4 = os.path.join(t, "res4")
    rc, out = harness("run", *[a if a != res else res4 for a in base], "--suite", "pytorch",
                      "--budget", "50", env={"FAKE_SLOW": "0", "FAKE_SLOW_NATIVE": "20"})
    left = [e for e in records(os.path.join(res4, "events.jsonl"))
            if e.get("event") == "unit-left-for-later"]
    check(len(outcomes(os.path.join(res4, "pytorch/test_cuda.py.native.jsonl"))) == 4 and
          not os.path.exists(os.path.join(res4, "pytorch/test_cuda.py.openmps.jsonl")) and
          len(left) == 1 and left[0]["expected"] >= 24.0,
          "the estimate from this run's native process: %r\n%s" % (left, out))
    if failures == 0:
        subprocess.run(["rm", "-rf", t])
    print("suites harness: %s" % ("ok" if failures == 0 else "%d failed (%s)" % (failures, t)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
