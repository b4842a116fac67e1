# SPDX-License-Identifier: MIT
"""openmps check and OPENMPS_TRACE in passthrough: tests/cpu/check_prog.c on the driver test double.

A daemon runs in most of them: openmps check must not use it (the double reports
FAKECUDA_DEVICES devices natively, remote mode shows one).
"""
import os
import re
import subprocess

from harness import BIN, SANITIZER, SHIM_DIR, check

OPENMPS = os.path.join(BIN, "openmps")
PROG = os.environ.get("OM_CHECK_PROG", "build/tests/check-prog")
ROW = re.compile(r"^\s+(\d+)\s+(supported|UNSUPPORTED)\s+(\w+)$")


def om_check(e, *args, devices="3"):
    """Runs openmps check -o REPORT -- check-prog ARGS; returns (rc, counts, report, stdout)."""
    rep = os.path.join(e.dir, "report-%d.txt" % len(os.listdir(e.dir)))
    env = dict(e.env, FAKECUDA_DEVICES=devices, OPENMPS_LIB=os.path.abspath(SHIM_DIR))
    env.pop("OPENMPS_TRACE", None)
    p = subprocess.run([OPENMPS, "check", "-o", rep, "--", PROG] + [str(a) for a in args],
                       env=env, capture_output=True, text=True, timeout=60)
    check(not SANITIZER.search(p.stderr), "sanitizer report: " + p.stderr)
    text = open(rep).read()
    counts = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            counts[m.group(3)] = (int(m.group(1)), m.group(2))
    return p.returncode, counts, text, p.stdout


def test_check_counts_supported_calls(daemon):
    """Supported calls only: exit 0, each entry point with its count (direct and through a
    cuGetProcAddress pointer), natively although a daemon runs."""
    e = daemon({"FAKECUDA_DEVICES": "1"})
    rc, counts, text, out = om_check(e, "calls", 7, 5)
    check(rc == 0, "rc %d: %s" % (rc, text))
    check("devices 3" in out, "ran natively, not through the daemon: %r" % out)
    check(counts.get("cuDeviceGetCount") == (12, "supported"), "7 + 5 calls: " + text)
    check(counts.get("cuInit") == (1, "supported"), text)
    check(counts.get("cuGetProcAddress_v2") == (1, "supported"), text)
    check(len(counts) == 3, "nothing else called: " + text)
    check("UNSUPPORTED" not in text and "1 process called" in text, text)
    check(e.servers() == [], "no server was started for the check")


def test_check_names_unsupported_calls(daemon):
    """A call openmps does not support: exit 1, the name in the table and the summary."""
    e = daemon({"FAKECUDA_DEVICES": "1"})
    rc, counts, text, _ = om_check(e, "unsupported")
    check(rc == 1, "rc %d: %s" % (rc, text))
    check(counts.get("cuGraphicsUnregisterResource") == (1, "UNSUPPORTED"), text)
    check(re.search(r"1 of the 2 entry points called is not supported .*: "
                    r"cuGraphicsUnregisterResource$",
                    text, re.M), text)


def test_check_counts_children(daemon):
    """A forked child that leaves with _exit and a forked-and-executed child: both counted,
    the parent's counts not counted twice."""
    e = daemon({"FAKECUDA_DEVICES": "1"})
    rc, counts, text, _ = om_check(e, "fork", 4)
    check(rc == 0, "rc %d: %s" % (rc, text))
    check(counts.get("cuDeviceGetCount") == (5, "supported"), "4 + 1: " + text)
    check(counts.get("cuInit") == (1, "supported"), "cuInit once, in the parent: " + text)
    check("2 processes called" in text, text)
    rc, counts, text, _ = om_check(e, "spawn", 6)
    check(rc == 0, "rc %d: %s" % (rc, text))
    check(counts.get("cuDeviceGetCount") == (7, "supported"), "6 + 1: " + text)
    check(counts.get("cuInit") == (2, "supported"), "both images call cuInit: " + text)
    check("2 processes called" in text, text)


def test_check_counts_threads(daemon):
    """Eight threads calling at once: no call lost."""
    e = daemon(start=False)
    rc, counts, text, _ = om_check(e, "threads", 8, 200000)
    check(rc == 0, "rc %d: %s" % (rc, text))
    check(counts.get("cuDeviceGetCount") == (1600000, "supported"), text)


def test_check_reports_a_failing_program(daemon):
    """The program's own failure: exit 2, its status or signal named, the counts still there."""
    e = daemon(start=False)
    rc, counts, text, _ = om_check(e, "fail", 3)
    check(rc == 2, "rc %d: %s" % (rc, text))
    check("exited with status 3" in text and "the program failed" in text, text)
    check(counts.get("cuDeviceGetCount") == (1, "supported"), text)
    rc, counts, text, _ = om_check(e, "abort")
    check(rc == 2, "rc %d: %s" % (rc, text))
    check("killed by signal 6" in text, text)
    check(counts.get("cuDeviceGetCount") == (2, "supported"), text)


def test_trace_in_passthrough(daemon):
    """OPENMPS_TRACE=1 without a daemon: one line per call, from the first cuInit on, the calls
    through cuGetProcAddress pointers included; the same counts as openmps check."""
    e = daemon(start=False)
    env = dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR), OPENMPS_TRACE="1")
    p = subprocess.run([PROG, "calls", "3", "4"], env=env,
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, "rc %d: %s" % (p.returncode, p.stderr))
    check("running on the real driver" in p.stderr, p.stderr)
    calls = re.findall(r"^openmps\[\d+\] (\w+)\(.*\) = (-?\d+) \(", p.stderr, re.M)
    names = [c[0] for c in calls]
    check(names == ["cuInit"] + ["cuDeviceGetCount"] * 3 + ["cuGetProcAddress_v2"] +
          ["cuDeviceGetCount"] * 4, "trace lines: %r" % names)
    check(all(c[1] == "0" for c in calls), "results: %r" % calls)
    _, counts, text, _ = om_check(e, "calls", 3, 4)
    check({n: names.count(n) for n in names} == {k: v[0] for k, v in counts.items()},
          "trace and check agree: %r, %s" % (names, text))


def test_tables_traced(daemon):
    """OPENMPS_TRACE_TABLES=1: a private export table comes back watched: its code slots log
    their first calls (arguments and result) and are counted at exit, its data slot and its
    results are unchanged, the same table gives the same copy, a table without a size header is
    handed out as it is; without the variable, nothing is said."""
    e = daemon(start=False)
    base = dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR))
    want = "sum 21 mul 42 datum 42 same 1 headless 5"
    p = subprocess.run([PROG, "tables", "6"], env=base, capture_output=True, text=True,
                       timeout=60)
    check(p.returncode == 0 and p.stdout.strip() == want, "plain: %r %r" % (p.stdout, p.stderr))
    check("table" not in p.stderr, "plain run says nothing: %r" % p.stderr)
    p = subprocess.run([PROG, "tables", "6"], env=dict(base, OPENMPS_TRACE_TABLES="1"),
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and p.stdout.strip() == want, "traced: %r %r" % (p.stdout, p.stderr))
    err = p.stderr
    check(re.search(r"table 01020304-05060708…: 3 slots, 2 watched", err), err)
    check(re.search(r"table 100f0e0d: first word 0x[0-9a-f]+ is not a size: not watched", err),
          err)
    calls = re.findall(r"table 01020304 slot (\d+) \((0x[0-9a-f]+), (0x[0-9a-f]+),.*\) = (0x[0-9a-f]+)",
                       err)
    check(calls == [("1", hex(i), "0x1", hex(i + 1)) for i in range(4)] + [("3", "0x6", "0x7", "0x2a")],
          "first calls logged: %r" % calls)
    check(re.search(r"table 01020304 slot 1: 6 calls", err) and
          re.search(r"table 01020304 slot 3: 1 calls", err) and
          not re.search(r"slot 2: ", err), "counts at exit: %s" % err)
    p = subprocess.run([PROG, "tables", "3"],
                       env=dict(base, OPENMPS_TRACE_TABLES="1", OPENMPS_TRACE_TABLES_FIRST="0"),
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and not re.search(r"slot 1 \(", p.stderr) and
          "slot 1: 3 calls" in p.stderr, "FIRST=0 only counts: %r" % p.stderr)
