#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The harness's arithmetic and output without a GPU: medians, spreads and ratios in the table,
failed points shown as failures (never as figures), the plot's lines, and the exit status and
message of `bench/run.py` where no GPU is found."""
import importlib.util
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("bench_run", os.path.join(ROOT, "bench", "run.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL: " + what)


def row(w, m, n, ms, ok=None):
    return {"workload": w, "mode": m, "n": n, "slowest_ms": ms, "ok": n if ok is None else ok}


rows = [row("b1", "native", 1, 500.0), row("b1", "native", 1, 502.0), row("b1", "native", 1, 490.0),
        row("b1", "native", 5, 2500.0), row("b1", "native", 5, 2400.0), row("b1", "native", 5, 2600.0),
        row("b1", "mps", 1, 500.0), row("b1", "mps", 5, None, ok=3),
        row("b1", "openmps", 1, 400.0), row("b1", "openmps", 5, 440.0)]
table = bench.summarize(rows, ["b1"], ["native", "mps", "openmps"], [1, 5])
lines = table.splitlines()
n5 = next(l for l in lines if l.strip().startswith("5 "))
check("2500.0 (2400.0-2600.0) 5.00x" in n5, "native N=5: median of 3, spread, ratio to 500: %r" % n5)
check("FAIL 3/5 ran" in n5, "a failed point is shown as a failure: %r" % n5)
check("440.0 (440.0-440.0) 1.10x" in n5, "openmps ratio to its own N=1: %r" % n5)
check(bench.ratios(rows, "b1", "mps", [1, 5]) == [(1, 1.0)], "a failed point has no ratio")
with tempfile.TemporaryDirectory() as out:
    where = bench.plot(rows, ["b1"], ["native", "mps", "openmps"], [1, 5], out)
    path = where.split()[0]
    check(os.path.getsize(path) > 200, "a plot was written: %s" % where)
    if path.endswith(".svg"):
        svg = open(path).read()
        check(svg.count("<polyline") == 3, "one line per mode with figures: %d" % svg.count("<polyline"))
    env = dict(os.environ, PATH=out)  # no nvidia-smi on this PATH
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run.py"), "--out", out],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(p.returncode == 1 and "no NVIDIA GPU" in p.stderr,
          "without a GPU: exit 1 and says so (%d, %r)" % (p.returncode, p.stderr))
# B1's start protocol with stand-ins for spin: each takes a second to say "ready" (as a context
# takes its time), reads the common start time, and prints what spin prints, its kernel 100 ms
# plus how late it woke; a copy that fails before it is ready counts as not run.
with tempfile.TemporaryDirectory() as d:
    good = os.path.join(d, "spin-good")
    with open(good, "w") as f:
        f.write("#!%s\nimport os, sys, time\ntime.sleep(1.0)\nprint('ready', flush=True)\n"
                "at = int(sys.stdin.readline())\ntime.sleep(max(0, at / 1000 - time.time()))\n"
                "late = time.time() * 1000 - at\n"
                "print('kernel_ms %%.3f' %% (100 + late))\n"
                "print('gpu_start_ns 1000 gpu_end_ns 2000')\n"
                "print('host_a_ns 5 host_launched_ns 7 pid %%d' %% os.getpid())\n" % sys.executable)
    bad = os.path.join(d, "spin-bad")
    with open(bad, "w") as f:
        f.write("#!/bin/sh\necho 'spin: refused' >&2\nexit 1\n")
    os.chmod(good, 0o755)
    os.chmod(bad, 0o755)
    detail = {}
    slowest, ok, err = bench.run_copies(good, 1, 5, [], dict(os.environ), 30, detail)
    # a start time given before every copy is ready is 700 ms past when they read it; a loaded
    # machine wakes a sleeper far less late than that
    check(ok == 5 and slowest is not None and 100 <= slowest < 450,
          "five copies started together: %r %r %r" % (slowest, ok, err))
    check(detail.get("gpu_ms") == 0.001 and detail.get("pid"), "the slowest copy's detail: %r" % detail)
    slowest, ok, err = bench.run_copies(bad, 1, 3, [], dict(os.environ), 30)
    check(slowest is None and ok == 0 and "refused" in err, "refused copies: %r %r" % (ok, err))

# The timeline reader (bench/timeline.py): the calls of every client around one launch.
spec_t = importlib.util.spec_from_file_location("timeline", os.path.join(ROOT, "bench", "timeline.py"))
timeline = importlib.util.module_from_spec(spec_t)
spec_t.loader.exec_module(timeline)
with tempfile.TemporaryDirectory() as d:
    log = os.path.join(d, "server.log")
    with open(log, "w") as f:
        for t, pid, entry in ((1000, 7, "cuMemsetD8_v2"), (40000, 8, "cuEventRecord"),
                              (49000, 7, "cuLaunchKernel"), (50000, 9, "cuLaunchKernel"),
                              (50500, 8, "cuMemcpyDtoH_v2"), (90000, 9, "cuEventRecord")):
            f.write("[2026-11-22 14:00:00.000 Server  1] DEBUG: timeline client %d %s start_us %d "
                    "took_us 3 rc 0\n" % (pid, entry, t))
        f.write("a line of another kind\n")
    calls = timeline.read(log)
    check(len(calls) == 6, "six timeline lines read: %r" % calls)
    t0, rows = timeline.window(calls, 9, 1, before_ms=5, after_ms=1)
    check(t0 == 50000 and [(r[1], r[2]) for r in rows] ==
          [(7, "cuLaunchKernel"), (9, "cuLaunchKernel"), (8, "cuMemcpyDtoH_v2")],
          "the window around client 9's launch: %r" % rows)
    check(rows[0][0] == -1.0, "times relative to the launch, in ms: %r" % rows)
    check(timeline.window(calls, 8, 1) is None, "client 8 launched nothing")
    # --calls: per entry, how many and the median time; --slow: the late points of bench.csv,
    # with the calls begun before the window still running at the launch
    tool = os.path.join(ROOT, "bench", "timeline.py")
    out = subprocess.run([sys.executable, tool, "--calls", log], stdout=subprocess.PIPE,
                         text=True).stdout.split()
    i = out.index("cuLaunchKernel")
    check(out[i + 1:i + 4] == ["2", "3", "3"], "--calls: two launches of 3 us: %r" % out)
    with open(log, "a") as f:  # a call of client 7 begun long before 9's launch, still running
        f.write("[x] DEBUG: timeline client 7 cuEventCreate start_us 2000 took_us 60000 rc 0\n")
    csv_path = os.path.join(d, "bench.csv")
    with open(csv_path, "w") as f:
        f.write("time,workload,mode,n,repeat,slowest_ms,ok,error,slowest_gpu_ms,"
                "slowest_start_delay_ms,slowest_launch_call_ms,slowest_gpu_start_after_launch_ms,"
                "slowest_pid,copies_started_late\n"
                "t,b1,openmps,128,0,1000.0,128,,499.0,499.0,0.1,499.0,9,1\n"
                "t,b1,openmps,128,1,501.0,128,,499.0,1.0,0.1,-1.0,7,0\n")
    r = subprocess.run([sys.executable, tool, "--slow", csv_path, log], stdout=subprocess.PIPE,
                       text=True)
    check(r.returncode == 0 and "1 point(s) with a kernel started" in r.stdout and
          "(pid 9)" in r.stdout and "(pid 7)" not in r.stdout, "--slow: one late point: %r" %
          r.stdout)
    check("still running at the launch: 1" in r.stdout and "cuEventCreate" in r.stdout and
          "ends +12.000 ms" in r.stdout, "--slow: the call still running: %r" % r.stdout)

# B2-B6: the program's lines become figures; the table gives medians, ratios and the goal.
figs = bench.figures
v = figs.parse("launch_us 4.5\nfill_start_ms 100 fill_end_ms 350\nnoise here\n")
check(v == {"launch_us": 4.5, "fill_start_ms": 100.0, "fill_end_ms": 350.0}, "parse: %r" % v)
frows = [{"mode": m, "figure": f, "value": x} for m, f, x in (
    ("native", "launch_us", 3.0), ("native", "launch_us", 5.0), ("native", "launch_us", 4.0),
    ("mps", "launch_us", 4.0), ("openmps", "launch_us", 4.4), ("openmps", "launch_us", 3.6),
    ("openmps", "launch_us", 5.0), ("openmps", "h2d_pinned_gbs", 54.0),
    ("openmps", "b4_clients_ready", 128), ("openmps", "b4_clients_started", 128),
    ("mps", "b4_clients_ready", 48), ("mps", "b4_clients_started", 128))]
t = figs.table(frows, ["native", "mps", "openmps"]).splitlines()
launch = next(l for l in t if "empty-kernel launch" in l).split()
check(launch[-10:] == ["4", "[3-5]", "4", "4.4", "[3.6-5]", "1.10", "1.10", "<=", "4.0", "NO"],
      "launch: medians with spreads, ratio 1.10, goal missed: %r" % launch)
pinned = next(l for l in t if "host to device, pinned" in l)
check(pinned.split()[-1] == "yes" and " - " in pinned, "pinned: met, no native figure: %r" % pinned)
ready = next(l for l in t if "clients served" in l)
check("48/128" in ready and "128/128" in ready and ready.split()[-1] == "yes",
      "clients served, per mode: %r" % ready)
check(not any("copy4" in l or "4-byte" in l for l in t), "figures never measured are left out")

# bench/b8timeline.py on a made-up B8 timeline: the slowest batch is attributed to the slow
# server call that overlapped it, and the window summary shows the stall where it was.
with tempfile.TemporaryDirectory() as d:
    t0 = 1_000_000_000_000
    tl, log = os.path.join(d, "tl.csv"), os.path.join(d, "server.log")
    with open(tl, "w") as f:
        f.write("what,end_ns,ms\nnewcomer_start,%d,0\nnewcomer_imported,%d,0\n"
                "newcomer_done,%d,0\n" % (t0, t0 + 800_000_000, t0 + 900_000_000))
        for i in range(400):  # a batch every 2.5 ms, 2 ms long; one of 20 ms at +512.5 ms
            end = t0 - 100_000_000 + i * 2_500_000
            f.write("batch,%d,%.3f\n" % (end, 20.0 if i == 245 else 2.0))
    with open(log, "w") as f:
        f.write("[x] client 7: slow call cuLibraryLoadData took 15000 us from %d\n"
                % (t0 + 500_000_000))
        f.write("[x] client 7: slow call cuMemAlloc_v2 took 2000 us from %d\n" % (t0 + 5_000_000))
    # the scheduler's samples beside it: the server runs 2 CPUs' worth before the newcomer's
    # start and 1 after, the copies 8 throughout, waiting 0.5 after
    with open(os.path.join(d, "tl-sched.csv"), "w") as f:
        f.write("t_ns,srv_cpu,srv_wait,cli_cpu,cli_wait,nc_tasks,nc_cpu,nc_wait,running\n")
        srv = cli = wait = 0
        for k in range(-8, 13):
            f.write("%d,%d,0,%d,%d,0,0,0,%d\n" % (t0 + k * 100_000_000, srv, cli, wait,
                                                   10 if k < 0 else 16))
            srv += 200_000_000 if k < 0 else 100_000_000
            cli += 800_000_000
            wait += 0 if k < 0 else 50_000_000
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "b8timeline.py"), tl, log,
                          "--worst", "1", "--window", "250"], stdout=subprocess.PIPE, text=True)
    lines = out.stdout.splitlines()
    check(out.returncode == 0 and len(lines) > 3, "b8timeline runs: %r" % out.stdout)
    cpus = [l for l in lines if l.startswith("CPUs ")]
    check(len(cpus) == 2 and "server ran 2.00" in cpus[0] and "copies ran 8.00" in cpus[0] and
          "copies waited 0.00" in cpus[0] and "runnable threads 10.0" in cpus[0] and
          "server ran 1.00" in cpus[1] and "copies waited 0.50" in cpus[1],
          "the CPUs before and after the newcomer's start: %r" % cpus)
    check("batch of 20.00 ms" in lines[1] and "7 cuLibraryLoadData 15.0 ms" in lines[1] and
          "cuMemAlloc" not in lines[1], "the worst batch and the call that overlapped it: %r"
          % lines[1:2])
    win = [l for l in lines if "+500 ms" in l]
    check(win and "longest 20.00" in win[0] and
          all("longest 2.00" in l for l in lines[3:] if " ms:" in l and "+500 ms" not in l),
          "the stall in its window, and only there: %r" % lines[2:])

# bench/profiles.py sums the sessions' OPENMPS_PROFILE lines (src/server/profile.c's format)
with tempfile.TemporaryDirectory() as d:
    log = os.path.join(d, "server.log")
    with open(log, "w") as f:
        for pid, k in ((11, 1), (12, 3)):
            f.write("[2026-11-29 12:00:00.000 Server 1] client %d: profile: %d driver call(s) in "
                    "%.1f ms of server time, %d record(s), %d wait(s) for one; most time: "
                    "cuLaunchKernel %d x 10.00 us (max 50), op:ctx_sync_word %d x 5.00 us "
                    "(max 9)\n" % (pid, 300 * k, 4.0 * k, 320 * k, 7, 200 * k, 100 * k))
        f.write("[x] client 13: freed 1 allocation(s)\n")
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "profiles.py"), log,
                          "--batches", "100"], stdout=subprocess.PIPE, text=True)
    lines = out.stdout.splitlines()
    launch = next((l.split() for l in lines if l.startswith("cuLaunchKernel")), [])
    word = next((l.split() for l in lines if l.startswith("op:ctx_sync_word")), [])
    check(out.returncode == 0 and "2 session(s): 1200 driver call(s), 16.0 ms" in lines[0] and
          "80.0 µs of server time" in lines[1] and "10.0 ms (62 %)" in lines[2],
          "profiles.py's totals: %r" % lines[:3])
    # 800 launches of 10 µs: 8 ms, 40 µs a batch over 2 sessions x 100 batches; largest first
    order = [l.split()[0] for l in lines[4:]]
    check(launch == ["cuLaunchKernel", "800", "8.0", "10.00", "40.0"] and
          word == ["op:ctx_sync_word", "400", "2.0", "5.00", "10.0"] and
          order == ["cuLaunchKernel", "op:ctx_sync_word"],
          "profiles.py's entry points: %r" % lines)
    other = os.path.join(d, "other.log")
    with open(other, "w") as f:
        f.write("[x] client 13: freed 1 allocation(s)\n")
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "profiles.py"), other],
                         stdout=subprocess.PIPE, text=True)
    check(out.returncode == 1 and "no profile lines" in out.stdout,
          "profiles.py without profile lines: %r" % out.stdout)

print("bench checks: %d failure(s)" % failures)
sys.exit(1 if failures else 0)
