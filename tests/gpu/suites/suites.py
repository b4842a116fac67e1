#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Other projects' test suites as the judge (issue #24): runs CuPy's and PyTorch's own tests
natively and under `openmps run`, test by test, and lists the tests that pass natively but not
under openmps. docs/operations.md, "Other projects' test suites", says how to run it.

  suites.py run --results DIR [selection] [--deadline EPOCH | --budget S] ...
  suites.py report --results DIR          the tables and the regressions, again
  suites.py list [selection]              the files a selection names

Selection: --suite cupy,pytorch (default both), --files PATTERN (repeatable; fnmatch on the path
in the suite, or a folder), --shard K/N (every N-th file of the selection, from the K-th).

The unit of work is one test file in one mode. Each runs as a pytest process (natively, or
under `openmps run` with a daemon of the harness's own) with omsuite_plugin.py recording each
test as it ends. A process that ends early (a crash, the server ending the client, a test past
its time limit) is followed by another for the tests not yet run; the test it was in is recorded
as crashed (or timeout). Under openmps the harness watches the daemon's servers while pytest
runs: when the server goes (a fault ends every client, as under NVIDIA's MPS), the pytest
process is ended too, its test recorded as crashed, and the rest of the file runs in a new
process with a new session (else every later test of the file would fail for it). A segment
that ended early or had failures is followed by a health probe (probe.py), and the daemon is
restarted when the probe fails. Once a file is done
in both modes, each regression is run again alone in a fresh process under openmps; the report
says whether it passed there (an earlier test in the same process broke it) or not.

Everything is kept in the results folder, as JSON lines, so that a run stopped at its deadline
(the running pytest killed, the test in progress run again next time) is continued by the next
run with the same folder: the GPU machine's calls last 10 minutes at most. A unit split so
takes longer than whole (a second process, its imports, the test in progress run again), which
would blur the comparison of wall times: so a unit not begun whose expected wall (the longest
any mode of its file took before, from segments.jsonl, plus a fifth) does not fit in the time
left is left for a later run, and the run goes on with other files. The first unit a run
begins is never left so (no run could hold it whole otherwise); --split begins every unit.

  RESULTS/SUITE/FILE.MODE.jsonl  the plugin's records for one unit, plus the harness's:
                                 {"t": "end", ..., "outcome": "crashed"} for the test a process
                                 died in, {"t": "unit-crash"} for a file that cannot run
  RESULTS/segments.jsonl         one line per pytest process: unit, mode, wall, exit, finished
  RESULTS/reruns.jsonl           the regressions' runs alone
  RESULTS/events.jsonl           daemon restarts, probes that failed, runs started and ended
  RESULTS/report.md              the tables (for docs/compatibility.md) and the regressions
  RESULTS/logs/                  pytest's output of the units with regressions (tails)
"""
import argparse
import fnmatch
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

# The selection: CuPy's cuda_tests, core, linalg, fft, random and sorting tests and
# cupyx's (those that need a package the machine lacks skip themselves, in both modes alike);
# PyTorch's CUDA and multiprocessing tests; on a machine with two GPUs, its multi-GPU CUDA tests
# and its NCCL tests (test_cuda_multigpu.py, distributed/test_c10d_nccl.py and the module that
# one imports, distributed/test_c10d_common.py: not among the suites' files the project is given;
# put into .suites/extra/pytorch/ from PyTorch's repository, test/, of the same cycle, which
# prepare.sh lays over the shared suites in .suites/src/).
SUITES = {
    "cupy": ("cupy", ["tests/cupy_tests/cuda_tests", "tests/cupy_tests/core_tests",
                      "tests/cupy_tests/linalg_tests", "tests/cupy_tests/fft_tests",
                      "tests/cupy_tests/random_tests", "tests/cupy_tests/sorting_tests",
                      "tests/cupyx_tests"]),
    "pytorch": ("pytorch", ["test_cuda.py", "test_multiprocessing.py"]),
    "pytorch-multigpu": ("pytorch", ["test_cuda_multigpu.py", "distributed/test_c10d_nccl.py"]),
}
MODES = ("native", "openmps")
GOOD = ("passed", "xfailed")
OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed", "crashed", "timeout")
MAX_SEGMENTS = 200  # pytest processes one unit may take before the harness gives up on it
KILL_MARGIN = 10  # seconds before the deadline at which a running pytest is stopped
LOG_TAIL = 20000  # bytes of a unit's pytest output kept when it has a regression


class Fatal(Exception):
    pass


# ---- the selection ----

def default_suites_dir():
    for d in (os.path.join(REPO, ".suites", "src"), os.path.join(REPO, "shared", "suites"),
              os.path.join(os.path.dirname(REPO), "shared", "suites")):
        if os.path.isdir(d):
            return d
    return os.path.join(REPO, ".suites", "src")


def test_files(root, top):
    """The test_*.py files under root/top (a file or a folder), relative to root, sorted."""
    path = os.path.join(root, top)
    if os.path.isfile(path):
        return [top]
    found = []
    for d, dirs, files in os.walk(path):
        dirs.sort()
        for f in files:
            if f.startswith("test_") and f.endswith(".py"):
                found.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(found)


def matches(rel, pat):
    pat = pat.rstrip("/")
    return rel == pat or fnmatch.fnmatch(rel, pat) or rel.startswith(pat + "/")


def parse_shard(text):
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise Fatal("--shard %r: expected K/N, as 2/5" % text)
    if n < 1 or not 1 <= k <= n:
        raise Fatal("--shard %r: K must be between 1 and N" % text)
    return k, n


def select(suites_dir, suites, patterns, shard):
    """[(suite, file relative to the suite's folder)] in a fixed order."""
    out = []
    used = set()
    for s in suites:
        if s not in SUITES:
            raise Fatal("unknown suite %r (known: %s)" % (s, ", ".join(SUITES)))
        sub, tops = SUITES[s]
        root = os.path.join(suites_dir, sub)
        if not os.path.isdir(root):
            raise Fatal("suite %s: no folder %s (tests/gpu/suites/prepare.sh makes it)" % (s, root))
        if not patterns and not any(os.path.exists(os.path.join(root, t)) for t in tops):
            raise Fatal("suite %s: none of %s in %s" % (s, ", ".join(tops), root))
        cands = [f for top in (["."] if patterns else tops) for f in test_files(root, top)]
        # another suite's files in the same folder are that suite's (pytorch, pytorch-multigpu)
        others = {os.path.normpath(t) for o, (osub, otops) in SUITES.items()
                  if o != s and osub == sub for t in otops}
        cands = [os.path.normpath(f) for f in cands if os.path.normpath(f) not in others]
        for rel in cands:
            hit = [p for p in patterns if matches(rel, p)]
            if patterns and not hit:
                continue
            used.update(hit)
            out.append((s, rel))
    missing = [p for p in patterns if p not in used]
    if missing:
        raise Fatal("--files %s: no test file of the suites %s matches" %
                    (" ".join(missing), ",".join(suites)))
    if shard:
        k, n = shard
        out = [u for i, u in enumerate(out) if i % n == k - 1]
    return out


# ---- the results folder ----

def unit_path(results, suite, rel, mode):
    return os.path.join(results, suite, rel + "." + mode + ".jsonl")


def read_jsonl(path):
    recs = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    recs.append(json.loads(line))
                except ValueError:
                    pass  # a line cut by a killed process
    except FileNotFoundError:
        pass
    return recs


class Unit:
    """What one unit's records say: each test's last outcome, the test a process was in when
    it ended (pending), whether the unit is done."""

    def __init__(self, path):
        self.outcomes = {}  # id -> (outcome, msg, dur)
        self.pending = None
        self.finished = False
        self.filled = set()  # names of torch the plugin filled in (omsuite_plugin.py)
        self.server_ended = False  # a server ended while one of its processes ran
        for r in read_jsonl(path):
            t = r.get("t")
            if t == "server-ended":
                self.server_ended = True
            elif t == "filled":
                self.filled.update(r.get("names", []))
            elif t == "start":
                self.pending = r["id"]
            elif t == "end":
                self.outcomes[r["id"]] = (r["outcome"], r.get("msg", ""), r.get("dur", 0.0))
                if self.pending == r["id"]:
                    self.pending = None
            elif t in ("finished", "unit-crash"):
                self.finished = True
                self.pending = None


def append(path, rec, lock):
    with lock:
        with open(path, "a") as f:
            f.write(json.dumps(rec) + "\n")


# ---- running ----

class Harness:
    def __init__(self, a):
        self.a = a
        self.results = a.results
        self.lock = threading.Lock()
        self.daemon_lock = threading.Lock()
        self.tmp = tempfile.mkdtemp(prefix="omsuites.")
        self.pipe = os.path.join(self.tmp, "pipe")
        self.logdir = os.path.join(self.tmp, "log")
        self.restarts = 0
        self.stopped = False  # the deadline came
        self.openmps = os.path.join(a.build, "openmps")
        self.control = os.path.join(a.build, "openmps-control")
        self.begun = False  # this run began a unit
        self.walls = {}  # (suite, file, mode) -> the walls of its earlier processes, summed
        for r in read_jsonl(os.path.join(self.results, "segments.jsonl")):
            k = (r.get("suite"), r.get("file"), r.get("mode"))
            self.walls[k] = self.walls.get(k, 0.0) + float(r.get("wall") or 0)

    # -- time --
    def left(self):
        return self.a.deadline - time.time()

    def out_of_time(self):
        if self.left() < KILL_MARGIN + 5:
            self.stopped = True
        return self.stopped

    def fits_whole(self, suite, rel, mode, path):
        """Whether to begin a unit now: begun already, the run's first, no wall known for its
        file, or its expected wall fits in the time left (see the top)."""
        with self.lock:
            first = not self.begun
            self.begun = True
            if self.a.split or first or os.path.exists(path):
                return True
            known = [w for (s, f, m), w in self.walls.items() if s == suite and f == rel]
            if not known or max(known) * 1.2 + KILL_MARGIN + 5 <= self.left():
                return True
        self.event(event="unit-left-for-later", suite=suite, file=rel, mode=mode,
                   expected=round(max(known) * 1.2, 1), left=round(self.left(), 1))
        return False

    def event(self, **rec):
        rec["ts"] = round(time.time(), 1)
        append(os.path.join(self.results, "events.jsonl"), rec, self.lock)
        print("suites: %s" % " ".join("%s=%s" % kv for kv in rec.items() if kv[0] != "ts"),
              flush=True)

    # -- the daemon --
    def control_cmd(self, text, timeout=20):
        env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=self.pipe,
                   CUDA_MPS_LOG_DIRECTORY=self.logdir)
        try:
            return subprocess.run([self.control], input=text, env=env, capture_output=True,
                                  text=True, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            return -1

    def start_daemon(self):
        os.makedirs(self.pipe, exist_ok=True)
        os.makedirs(self.logdir, exist_ok=True)
        env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=self.pipe,
                   CUDA_MPS_LOG_DIRECTORY=self.logdir)
        # its output to a file: a daemon keeps no pipe of ours open, but a file is safe anyway
        with tempfile.TemporaryFile(dir=self.tmp) as f:
            try:
                rc = subprocess.run([self.control, "-d"], env=env, stdout=f, stderr=f,
                                    stdin=subprocess.DEVNULL, timeout=60).returncode
            except subprocess.TimeoutExpired:
                rc = "no answer in 60 s"
            f.seek(0)
            text = f.read().decode(errors="replace").strip()
        if rc != 0:
            raise Fatal("cannot start the daemon (%s -d, %s): %s" % (self.control, rc, text))

    def daemon_pid(self):
        try:
            with open(os.path.join(self.pipe, "openmps-control.pid")) as f:
                return int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop_daemon(self):
        pid = self.daemon_pid()
        self.control_cmd("quit -t 5\n")
        for _ in range(100):
            if pid is None or not alive(pid):
                break
            time.sleep(0.1)
        if pid is not None and alive(pid):
            os.kill(pid, signal.SIGTERM)  # immediate shutdown, servers forced down
            for _ in range(50):
                if not alive(pid):
                    break
                time.sleep(0.1)
            if alive(pid):
                os.kill(pid, signal.SIGKILL)

    def servers(self):
        """The daemon's servers (pids), or None when it does not answer."""
        env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=self.pipe,
                   CUDA_MPS_LOG_DIRECTORY=self.logdir)
        try:
            r = subprocess.run([self.control], input="get_server_list\n", env=env,
                               capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired:
            return None
        if r.returncode != 0:
            return None
        return {int(x) for x in r.stdout.split() if x.isdigit()}

    def probe(self):
        cmd = [self.openmps, "run", "--"] + self.a.probe_cmd
        env = self.mode_env("openmps")
        try:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
            return r.returncode == 0, (r.stdout + r.stderr).strip()[-300:]
        except subprocess.TimeoutExpired:
            return False, "the probe took more than 60 s"

    def ensure_daemon(self, why):
        """After a unit that may have ended the server: probe, restart the daemon if needed."""
        with self.daemon_lock:
            ok, text = self.probe()
            if ok:
                return
            self.event(event="probe-failed", after=why, output=text)
            self.stop_daemon()
            self.start_daemon()
            self.restarts += 1
            ok, text = self.probe()
            self.event(event="daemon-restarted", after=why, probe="ok" if ok else text)

    # -- pytest --
    def mode_env(self, mode):
        env = dict(os.environ)
        for k in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY", "LD_PRELOAD"):
            env.pop(k, None)
        path = [HERE] + ([self.a.site] if self.a.site else [])
        if env.get("PYTHONPATH"):
            path.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(path)
        env["PYTHONUNBUFFERED"] = "1"
        # each mode compiles its own kernels: neither finds the other's in a cache
        cache = os.path.join(self.tmp, "cache-" + mode)
        env["CUPY_CACHE_DIR"] = os.path.join(cache, "cupy")
        env["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
        if mode == "openmps":
            env["CUDA_MPS_PIPE_DIRECTORY"] = self.pipe
        else:
            env["CUDA_MPS_PIPE_DIRECTORY"] = os.path.join(self.tmp, "no-daemon-here")
        return env

    def segment(self, suite, rel, mode, results_file, skip=None, only=None):
        """One pytest process: (its exit status, its wall time, its records (Tail), whether
        the deadline stopped it, its log). A process that writes no record for the per-test limit
        and --grace more (a test whose own timer cannot run, the GIL held; collection or exit
        stuck) is killed: the test in progress, or else the file, is recorded as timed out."""
        root = os.path.join(self.a.suites_dir, SUITES[suite][0])
        cmd = [self.a.python, "-m", "pytest", "-p", "omsuite_plugin", "-p", "no:cacheprovider",
               "-q", rel] + self.a.pytest_arg
        if mode == "openmps":
            cmd = [self.openmps, "run", "--"] + cmd
        env = self.mode_env(mode)
        env["OMSUITE_RESULTS"] = results_file
        env["OMSUITE_TIMEOUT"] = str(self.a.test_timeout)
        for var, ids in (("OMSUITE_SKIP", skip), ("OMSUITE_ONLY", only)):
            if ids is not None:
                fd, p = tempfile.mkstemp(dir=self.tmp, suffix=".ids")
                with os.fdopen(fd, "w") as f:
                    f.write("".join(i + "\n" for i in sorted(ids)))
                env[var] = p
        log = os.path.join(self.tmp, "%s__%s.%s.log" % (suite, rel.replace("/", "__"), mode))
        tail = Tail(results_file)
        # Under openmps: the servers before it starts; one that goes while it runs (a fault ends
        # every client, as under NVIDIA's MPS) ends this process too, as the test it was in
        # would have ended it: the rest of the file runs in a new process, with a new session.
        watch = self.servers() if mode == "openmps" else None
        checked = time.time()
        t0 = time.time()
        with open(log, "ab") as lf:
            lf.write(("\n== %s %s\n" % (mode, " ".join(cmd))).encode())
            lf.flush()
            p = subprocess.Popen(cmd, cwd=root, env=env, stdout=lf, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
            killed = None
            while p.poll() is None:
                time.sleep(0.2)
                tail.poll()
                if time.time() > self.a.deadline - KILL_MARGIN:
                    killed = "deadline"
                elif time.time() - tail.last > self.a.test_timeout + self.a.grace:
                    killed = "watchdog"
                elif watch is not None and time.time() - checked > 1.0:
                    checked = time.time()
                    now = self.servers()
                    if now is not None and not watch:
                        watch = now
                    elif now is not None and not (watch & now):
                        tail.poll()
                        killed = "server"
                if killed:
                    kill_group(p)
                    break
            rc = p.wait()
        tail.poll()
        wall = time.time() - t0
        if killed == "server":  # the report may then waive failures that pass alone
            with open(results_file, "a") as f:
                f.write(json.dumps({"t": "server-ended"}) + "\n")
        if killed == "server" and tail.pending:
            with open(results_file, "a") as f:
                f.write(json.dumps({"t": "end", "id": tail.pending, "outcome": "crashed",
                                    "dur": 0.0, "msg": "the server ended during this test (a "
                                    "fault ends every client)"}) + "\n")
            tail.poll()
        if killed == "watchdog":
            quiet = self.a.test_timeout + self.a.grace
            with open(results_file, "a") as f:
                if tail.pending:
                    f.write(json.dumps({"t": "end", "id": tail.pending, "outcome": "timeout",
                                        "dur": self.a.test_timeout,
                                        "msg": "took more than %g s (killed by the harness)" %
                                        quiet}) + "\n")
                else:
                    f.write(json.dumps({"t": "end", "id": rel, "outcome": "timeout", "dur": 0.0,
                                        "msg": "pytest wrote nothing for %g s outside any test "
                                        "(collecting, or ending)" % quiet}) + "\n")
                    f.write(json.dumps({"t": "unit-crash"}) + "\n")
            tail.poll()
        return rc, wall, tail, killed == "deadline", log

    def run_unit(self, suite, rel, mode):
        """Runs what is left of one unit; True when it is done."""
        path = unit_path(self.results, suite, rel, mode)
        if os.path.exists(path) and Unit(path).finished:
            return True
        if not self.fits_whole(suite, rel, mode, path):
            return False
        os.makedirs(os.path.dirname(path), exist_ok=True)
        for n in range(MAX_SEGMENTS):
            u = Unit(path)
            if u.finished:
                return True
            if self.out_of_time():
                return False
            rc, wall, tail, at_deadline, log = self.segment(suite, rel, mode, path,
                                                            skip=set(u.outcomes))
            append(os.path.join(self.results, "segments.jsonl"),
                   {"suite": suite, "file": rel, "mode": mode, "wall": round(wall, 2), "rc": rc,
                    "finished": tail.finished, "ended": tail.ended, "deadline": at_deadline,
                    "ts": round(time.time(), 1)}, self.lock)
            with self.lock:  # this run's processes count for the other mode's estimate too
                k = (suite, rel, mode)
                self.walls[k] = self.walls.get(k, 0.0) + wall
            self.keep_log(suite, rel, mode, log)
            if at_deadline:
                self.stopped = True
                return False
            bad = not tail.finished or any(o not in GOOD + ("skipped",) for o in tail.outcomes)
            if not tail.finished:
                if tail.pending:
                    with open(path, "a") as f:
                        f.write(json.dumps({"t": "end", "id": tail.pending, "outcome": "crashed",
                                            "dur": 0.0, "msg": "the process ended (%s) in this test"
                                            % exit_text(rc)}) + "\n")
                elif not tail.ended:
                    # nothing ran: the file cannot be collected or pytest cannot start
                    with open(path, "a") as f:
                        f.write(json.dumps({"t": "end", "id": rel, "outcome": "crashed", "dur": 0.0,
                                            "msg": "pytest ended (%s) before any test: %s" %
                                            (exit_text(rc), last_line(log))}) + "\n")
                        f.write(json.dumps({"t": "unit-crash"}) + "\n")
            if mode == "openmps" and bad:
                self.ensure_daemon("%s/%s" % (suite, rel))
        with open(path, "a") as f:
            f.write(json.dumps({"t": "unit-crash", "msg": "gave up after %d processes" %
                                MAX_SEGMENTS}) + "\n")
        return True

    def keep_log(self, suite, rel, mode, log):
        """pytest's output of a unit goes to the results (its tail) once something failed."""
        dst = os.path.join(self.results, "logs", suite, rel + "." + mode + ".log")
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        try:
            with open(log, "rb") as f:
                f.seek(max(0, os.path.getsize(log) - LOG_TAIL))
                data = f.read()
        except OSError:
            return
        if b"omsuite:" in data or b"FAILED" in data or b"ERROR" in data or b"Error" in data:
            with open(dst, "wb") as f:
                f.write(data)

    def rerun(self, suite, rel):
        """Each regression of one file, alone in a fresh process under openmps."""
        done = {(r["suite"], r["id"]) for r in read_jsonl(os.path.join(self.results,
                                                                       "reruns.jsonl"))}
        for tid in regressions_of(self.results, suite, rel):
            if (suite, tid) in done:
                continue
            if self.out_of_time():
                return
            fd, tmp = tempfile.mkstemp(dir=self.tmp, suffix=".jsonl")
            os.close(fd)
            rc, wall, tail, at_deadline, log = self.segment(suite, rel, "openmps", tmp, only={tid})
            if at_deadline:
                return
            u = Unit(tmp)
            if tid in u.outcomes:
                o, msg, _ = u.outcomes[tid]
            elif tail.pending:
                o, msg = "crashed", "the process ended (%s) in this test" % exit_text(rc)
            elif rel in u.outcomes:  # the file cannot be collected
                o, msg, _ = u.outcomes[rel]
            else:
                o, msg = "not found", "pytest did not run it alone (%s): %s" % (
                    exit_text(rc), last_line(log))
            rec = {"outcome": o, "msg": msg, "wall": round(wall, 2)}
            if o not in GOOD:
                self.ensure_daemon("re-run of " + tid)
            rec.update(suite=suite, file=rel, id=tid)
            append(os.path.join(self.results, "reruns.jsonl"), rec, self.lock)

    def run_file(self, suite, rel):
        done = True
        for mode in self.a.modes:
            if not self.run_unit(suite, rel, mode):
                done = False
                break
        if done and not self.a.no_rerun and set(MODES) <= set(self.a.modes):
            self.rerun(suite, rel)


class Tail:
    """Follows a unit's records while its pytest runs."""

    def __init__(self, path):
        self.path = path
        self.off = os.path.getsize(path) if os.path.exists(path) else 0
        self.buf = b""
        self.pending = None
        self.last = time.time()  # of the last record
        self.finished = False
        self.ended = 0
        self.outcomes = []

    def poll(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.off)
                data = f.read()
        except FileNotFoundError:
            return
        self.off += len(data)
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        if lines:
            self.last = time.time()
        for line in lines:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("t") == "start":
                self.pending = r["id"]
            elif r.get("t") == "end":
                self.ended += 1
                self.outcomes.append(r["outcome"])
                if r["id"] == self.pending:
                    self.pending = None
            elif r.get("t") == "finished":
                self.finished = True


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def exit_text(rc):
    if rc is None:
        return "no exit status"
    if rc < 0:
        try:
            return "signal " + signal.Signals(-rc).name
        except ValueError:
            return "signal %d" % -rc
    if rc == 86:
        return "exit 86, a test past its time limit"
    return "exit %d" % rc


def last_line(log):
    try:
        with open(log, "rb") as f:
            f.seek(max(0, os.path.getsize(log) - 4000))
            lines = [x for x in f.read().decode(errors="replace").splitlines() if x.strip()]
        return lines[-1][:300] if lines else ""
    except OSError:
        return ""


# ---- what the results say ----

def compare(nat, omp):
    """The tests of one file that pass natively but not under openmps, with what openmps said:
    {id: (outcome, msg)}; omp a finished unit's. A test openmps did not run at all (its file
    could not be collected, or collected other tests) counts, as "not run"."""
    whole = [o for t, o in omp.outcomes.items() if "::" not in t]
    out = {}
    for t, (o, _, _) in nat.outcomes.items():
        if o not in GOOD:
            continue
        if t in omp.outcomes:
            if omp.outcomes[t][0] not in GOOD:
                out[t] = omp.outcomes[t][:2]
        elif omp.finished:
            out[t] = ("not run", whole[0][1] if whole else "openmps did not collect it")
    return out


def regressions_of(results, suite, rel):
    return list(compare(Unit(unit_path(results, suite, rel, "native")),
                        Unit(unit_path(results, suite, rel, "openmps"))))


def units_in(results):
    """{(suite, rel): {mode: path}} of every unit the results hold."""
    found = {}
    for suite in sorted(SUITES):
        top = os.path.join(results, suite)
        for d, dirs, files in os.walk(top):
            dirs.sort()
            for f in sorted(files):
                for mode in MODES:
                    if f.endswith("." + mode + ".jsonl"):
                        rel = os.path.relpath(os.path.join(d, f), top)[:-len(mode) - 7]
                        found.setdefault((suite, rel), {})[mode] = os.path.join(d, f)
    return dict(sorted(found.items()))


def summarize(results):
    units = units_in(results)
    segs = read_jsonl(os.path.join(results, "segments.jsonl"))
    reruns = {(r["suite"], r["id"]): r for r in read_jsonl(os.path.join(results, "reruns.jsonl"))}
    # the machine each pytest process ran on: that of the last run begun before it
    starts = sorted((e["ts"], e.get("machine", "?"))
                    for e in read_jsonl(os.path.join(results, "events.jsonl"))
                    if e.get("event") == "run-start" and "ts" in e)
    wall, machines = {}, {}
    for s in segs:
        k = (s["suite"], s["file"], s["mode"])
        wall[k] = wall.get(k, 0.0) + s["wall"]
        on = [m for ts, m in starts if ts <= s.get("ts", 0)]
        machines.setdefault((s["suite"], s["file"]), set()).add(on[-1] if on else "?")
    rows, regs, incomplete, filled, slower = {}, [], [], {}, []
    for (suite, rel), paths in units.items():
        us = {m: Unit(p) for m, p in paths.items()}
        for u in us.values():
            if u.filled:
                filled.setdefault((suite, rel), set()).update(u.filled)
        # wall times compare only where both modes ran on one machine
        both = (all(m in us and us[m].finished for m in MODES) and
                len(machines.get((suite, rel), ())) == 1)
        for m, u in us.items():
            if not u.finished:
                incomplete.append("%s %s %s" % (suite, rel, m))
            row = rows.setdefault((suite, m), dict({o: 0 for o in OUTCOMES}, files=0, tests=0,
                                                   wall=0.0, wall_both=0.0))
            row["files"] += 1 if u.finished else 0
            for o, _, _ in u.outcomes.values():
                row[o] += 1
                row["tests"] += 1
            row["wall"] += wall.get((suite, rel, m), 0.0)
            if both:
                row["wall_both"] += wall.get((suite, rel, m), 0.0)
        if both:  # where the time went: the tests that passed in both modes, by their durations
            n, o = us["native"].outcomes, us["openmps"].outcomes
            common = [t for t in n if t in o and n[t][0] == o[t][0] == "passed"]
            if common:
                worst = max(common, key=lambda t: o[t][2] - n[t][2])
                slower.append((sum(o[t][2] for t in common) - sum(n[t][2] for t in common),
                               suite, rel, sum(n[t][2] for t in common),
                               sum(o[t][2] for t in common), worst,
                               o[worst][2] - n[worst][2]))
        if "native" in us and "openmps" in us:
            for t, (o, msg) in compare(us["native"], us["openmps"]).items():
                r = reruns.get((suite, t))
                regs.append({"suite": suite, "id": t, "native": us["native"].outcomes[t][0],
                             "openmps": o, "msg": msg,
                             "alone": r["outcome"] if r else "not yet re-run",
                             "server_ended": us["openmps"].server_ended})
    for s in segs:
        row = rows.get((s["suite"], s["mode"]))
        if row is None:
            continue
        row["procs"] = row.get("procs", 0) + 1
        if not s["finished"] and not s["deadline"]:
            row["died"] = row.get("died", 0) + 1
        elif s["finished"] and s["rc"] not in (0, 1, 2, 5):
            row["bad_exit"] = row.get("bad_exit", 0) + 1
    return rows, regs, incomplete, filled, sorted(slower, reverse=True)


def report(results):
    rows, regs, incomplete, filled, slower = summarize(results)
    events = read_jsonl(os.path.join(results, "events.jsonl"))
    runs = [e for e in events if e.get("event") == "run-start"]
    restarts = sum(1 for e in events if e.get("event") == "daemon-restarted")
    out = ["# Other projects' test suites, natively and under openmps", ""]
    if runs:
        machines = []
        for r in runs:
            if r.get("machine", "?") not in machines:
                machines.append(r.get("machine", "?"))
        out.append("Machine%s: %s; %d run(s), %s to %s (UTC)." % (
            "s" if len(machines) > 1 else "", " | ".join(machines), len(runs),
            fmt_ts(runs[0]["ts"]), fmt_ts(max(e["ts"] for e in events))))
        if len(machines) > 1:
            out.append("Runs on different machines: the wall-time ratios count only the files "
                       "whose two modes ran on one.")
        out.append("")
    out += ["| suite | mode | files done | tests | passed | failed | errors | skipped | xfailed |"
            " crashed | timed out | wall (s) | wall of files done in both modes on one machine (s) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (suite, m) in sorted(rows):
        r = rows[(suite, m)]
        out.append("| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %.0f | %.0f |" % (
            suite, m, r["files"], r["tests"], r["passed"], r["failed"] + r["xpassed"], r["error"],
            r["skipped"], r["xfailed"], r["crashed"], r["timeout"], r["wall"], r["wall_both"]))
    out.append("")
    for suite in sorted({s for s, _ in rows}):
        n, o = rows.get((suite, "native")), rows.get((suite, "openmps"))
        if n and o and n["wall_both"] > 0:
            out.append("%s: openmps / native wall time, files done in both modes on one machine: "
                       "%.2f" %
                       (suite, o["wall_both"] / n["wall_both"]))
    for (suite, m) in sorted(rows):
        r = rows[(suite, m)]
        out.append("%s %s: %d pytest processes, %d ended before pytest did (a crash, a test past "
                   "its limit), %d ended with a bad status after pytest had finished." % (
                       suite, m, r.get("procs", 0), r.get("died", 0), r.get("bad_exit", 0)))
    out.append("Daemon restarts after a failed probe: %d." % restarts)
    # A test that failed in the run and passed when re-run alone in a fresh process is waived
    # only where a fault of another client explains it: a server of its file's run ended (a
    # device-side assert ends every client, as under NVIDIA's MPS), or its failure is the
    # assert's error. Anything else that passes alone stays a regression (intermittent, or
    # broken by an earlier test of its process): one re-run proves little.
    def fault_around(g):
        return g["alone"] == "passed" and (g["server_ended"] or any(
            w in g["msg"] for w in ("device-side assert", "CUDA_ERROR_ASSERT", "cudaErrorAssert",
                                    "the server ended")))
    alone_ok = [g for g in regs if fault_around(g)]
    regs[:] = [g for g in regs if not fault_around(g)]

    def table(rows):
        lines = ["| test | native | openmps | alone, fresh process | openmps said |",
                 "|---|---|---|---|---|"]
        for g in rows:
            lines.append("| `%s` | %s | %s | %s | %s |" % (
                g["suite"] + ":" + g["id"], g["native"], g["openmps"], g["alone"],
                g["msg"].replace("|", "\\|").replace("\n", " ")[:200]))
        return lines

    out += ["", "## Tests that pass natively but not under openmps (%d)" % len(regs), ""]
    if regs:
        out += table(regs)
    if alone_ok:
        out += ["", "## Failed by another client's fault, passed when re-run alone under openmps "
                "(%d)" % len(alone_ok), "",
                "Not regressions: the test passes under openmps alone; in the run a server ended "
                "or the test met a device-side assert's error: another test's assert ends every "
                "client of the server, as under NVIDIA's MPS.", ""]
        out += table(alone_ok)
    if slower:
        total = sum(x[0] for x in slower)
        out += ["", "## Where openmps took longer (%d files done in both modes on one machine; "
                "the durations of their tests that passed in both, %+.0f s in all)" % (len(slower), total), "",
                "| file | native (s) | openmps (s) | difference (s) | its test with the largest "
                "difference (s) |", "|---|---|---|---|---|"]
        for diff, suite, rel, nat, omp, worst, wdiff in slower[:8]:
            out.append("| %s:%s | %.1f | %.1f | %+.1f | `%s` %+.1f |" % (
                suite, rel, nat, omp, diff, worst.split("::", 1)[-1], wdiff))
    if filled:
        out += ["", "## Names the test files import that the installed torch lacks", "",
                "Filled in by the harness's plugin before the file was imported, in both modes "
                "alike (tests/gpu/suites/omsuite_plugin.py: a flag by its later definition or "
                "False, anything else by a stand-in that skips the tests using it):", ""]
        out += ["* %s:%s: %s" % (suite, rel, ", ".join("`%s`" % n for n in sorted(names)))
                for (suite, rel), names in sorted(filled.items())]
    if incomplete:
        out += ["", "## Not done yet (%d units; a later run with these results continues)" %
                len(incomplete), ""] + ["* " + x for x in incomplete]
    text = "\n".join(out) + "\n"
    with open(os.path.join(results, "report.md"), "w") as f:
        f.write(text)
    with open(os.path.join(results, "regressions.txt"), "w") as f:
        for g in regs + alone_ok:
            f.write("%s:%s\t%s\talone: %s\n" % (g["suite"], g["id"], g["openmps"], g["alone"]))
    return text, regs, incomplete


def fmt_ts(ts):
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ts))


def machine_line(python):
    parts = []
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
        gpus = [x.strip() for x in r.stdout.splitlines() if x.strip()]
        if gpus:
            parts.append("%d× %s (driver %s)" % (len(gpus), gpus[0].split(",")[0].strip(),
                                                  gpus[0].split(",")[-1].strip()))
    except (OSError, subprocess.TimeoutExpired):
        pass
    code = ("import importlib, sys\nv = ['Python %d.%d' % sys.version_info[:2]]\n"
            "for m in ('torch', 'cupy', 'pytest'):\n"
            "    try: v.append(m + ' ' + importlib.import_module(m).__version__)\n"
            "    except Exception: pass\nprint(', '.join(v))")
    try:
        r = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120)
        parts.append(r.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        pass
    return "; ".join(p for p in parts if p) or "unknown"


# ---- the command line ----

def add_selection(p):
    p.add_argument("--suites-dir", default=default_suites_dir(),
                   help="where cupy/ and pytorch/ are (default: .suites/src, shared/suites, "
                        "../shared/suites, the first that exists)")
    p.add_argument("--suite", default="cupy,pytorch")
    p.add_argument("--files", action="append", default=[], metavar="PATTERN")
    p.add_argument("--shard", type=str, default=None, metavar="K/N")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run (or continue) a selection in both modes")
    add_selection(r)
    r.add_argument("--results", required=True)
    r.add_argument("--seed", help="results of earlier runs, copied in when --results is empty")
    r.add_argument("--build", default=os.path.join(REPO, "build"))
    r.add_argument("--site", default=None,
                   help="a folder put on PYTHONPATH (expecttest; default .suites/site if there)")
    r.add_argument("--python", default=sys.executable)
    r.add_argument("--modes", default=",".join(MODES))
    r.add_argument("--jobs", type=int, default=1, help="files run at once (default 1)")
    r.add_argument("--test-timeout", type=float, default=300.0)
    r.add_argument("--grace", type=float, default=30.0,
                   help="seconds past --test-timeout with no record before pytest is killed")
    r.add_argument("--deadline", type=float, help="epoch seconds by which the run ends")
    r.add_argument("--budget", type=float, help="seconds from now by which the run ends")
    r.add_argument("--pytest-arg", action="append", default=[])
    r.add_argument("--no-rerun", action="store_true")
    r.add_argument("--split", action="store_true",
                   help="begin every unit, even one whose expected wall does not fit in the "
                        "time left (it is then split over runs)")
    r.add_argument("--probe-cmd", default=None,
                   help="the health probe, run under openmps (default: python3 probe.py)")
    rp = sub.add_parser("report", help="the tables and regressions of a results folder")
    rp.add_argument("--results", required=True)
    ls = sub.add_parser("list", help="the files a selection names")
    add_selection(ls)
    a = ap.parse_args(argv)

    if a.cmd == "report":
        if not os.path.isdir(a.results):
            raise Fatal("no results folder %s" % a.results)
        text, regs, incomplete = report(a.results)
        print(text, end="")
        return 0
    shard = parse_shard(a.shard) if a.shard else None
    files = select(a.suites_dir, [s for s in a.suite.split(",") if s], a.files, shard)
    if a.cmd == "list":
        for s, rel in files:
            print("%s %s" % (s, rel))
        return 0

    a.modes = [m for m in a.modes.split(",") if m]
    for m in a.modes:
        if m not in MODES:
            raise Fatal("--modes: unknown mode %r (native, openmps)" % m)
    if a.jobs < 1:
        raise Fatal("--jobs must be at least 1")
    if a.test_timeout <= 0 or a.grace <= 0:
        raise Fatal("--test-timeout and --grace must be positive")
    if a.deadline is None:
        a.deadline = time.time() + (a.budget if a.budget is not None else 540)
    if a.site is None:
        site = os.path.join(REPO, ".suites", "site")
        a.site = site if os.path.isdir(site) else ""
    elif not os.path.isdir(a.site):
        raise Fatal("--site %s: no such folder" % a.site)
    a.probe_cmd = (shlex.split(a.probe_cmd) if a.probe_cmd else
                   [a.python, os.path.join(HERE, "probe.py")])
    a.build = os.path.abspath(a.build)
    if "openmps" in a.modes:
        for b in ("openmps", "openmps-control"):
            if not os.access(os.path.join(a.build, b), os.X_OK):
                raise Fatal("no %s in %s: build first" % (b, a.build))
    r = subprocess.run([a.python, "-c", "import pytest"], capture_output=True, text=True)
    if r.returncode != 0:
        raise Fatal("%s cannot import pytest (--python names another): %s" %
                    (a.python, (r.stderr.strip().splitlines() or [""])[-1]))
    if a.seed and not os.path.isdir(a.results) and os.path.isdir(a.seed):
        shutil.copytree(a.seed, a.results)
    os.makedirs(a.results, exist_ok=True)

    h = Harness(a)
    h.event(event="run-start", machine=machine_line(a.python), files=len(files),
            selection=" ".join(sys.argv[2:]))
    try:
        if "openmps" in a.modes:
            h.start_daemon()
            ok, text = h.probe()
            if not ok:
                raise Fatal("the daemon answers, but a client cannot work: %s" % text)
        queue = list(files)
        qlock = threading.Lock()

        def worker():
            while True:
                with qlock:
                    if not queue or h.out_of_time():
                        return
                    s, rel = queue.pop(0)
                h.run_file(s, rel)

        threads = [threading.Thread(target=worker) for _ in range(min(a.jobs, len(files)) or 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        if "openmps" in a.modes:
            h.stop_daemon()
            for f in ("control.log", "server.log"):
                src = os.path.join(h.logdir, f)
                if os.path.exists(src):
                    os.makedirs(os.path.join(a.results, "logs"), exist_ok=True)
                    with open(src, "rb") as fi, open(os.path.join(
                            a.results, "logs", "%s.%d" % (f, int(time.time()))), "wb") as fo:
                        fi.seek(max(0, os.path.getsize(src) - 200000))
                        fo.write(fi.read())
        shutil.rmtree(h.tmp, ignore_errors=True)
    h.event(event="run-end", stopped_at_deadline=h.stopped, restarts=h.restarts)
    text, regs, incomplete = report(a.results)
    print(text, end="")
    left = [(s, rel, m) for s, rel in files for m in a.modes
            if not Unit(unit_path(a.results, s, rel, m)).finished]
    print("suites: %d files selected; %s; %d regressions in the results" % (
        len(files), "%d units of them not done: run again with these results" % len(left)
        if left else "all done", len(regs)))
    return 1 if regs else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Fatal as e:
        sys.stderr.write("suites: %s\n" % e)
        sys.exit(2)
