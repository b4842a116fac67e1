#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What every client of a server did around one client's kernel launch, from the timeline the
server writes at OPENMPS_LOG_LEVEL=3 ("timeline client PID ENTRY start_us T took_us D rc R").

  bench/timeline.py SERVER_LOG PID [--before-ms 50] [--after-ms 5] [--launch N]
  bench/timeline.py --calls SERVER_LOG
        per driver entry: how many calls, and the median and 90th percentile of their time in
        the server (what a round trip costs beyond the server's part is the transport's)
  bench/timeline.py --slow BENCH_CSV SERVER_LOG [--late-ms 100]
        the same for every B1 point of bench.csv whose slowest copy's kernel started on the
        GPU more than LATE_MS after its launch call returned

Finds the Nth launch (default: the first) of client PID and prints, in time order, every call
of every client that started in the window around it, with its time relative to that launch:
to see what was enqueued just before a kernel that started late on the GPU (B1 in
docs/benchmarks.md). Exit status 1 when the log has no launch of that client.
"""
import argparse
import re
import sys

LINE = re.compile(r"timeline client (\d+) (\S+) start_us (\d+) took_us (\d+) rc (-?\d+)")
LAUNCHES = ("cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchKernel_ptsz", "cuLaunchKernelEx_ptsz",
            "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz")


def read(path):
    calls = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if m:
                calls.append((int(m.group(3)), int(m.group(1)), m.group(2), int(m.group(4)),
                              int(m.group(5))))
    calls.sort()
    return calls


def window(calls, pid, nth=1, before_ms=50.0, after_ms=5.0):
    """The calls around client pid's nth launch: (launch start_us, [(dt_ms, pid, entry, took_us,
    rc)]), or None when it has no such launch."""
    launches = [c for c in calls if c[1] == pid and c[2] in LAUNCHES]
    if len(launches) < nth:
        return None
    t0 = launches[nth - 1][0]
    lo, hi = t0 - before_ms * 1000, t0 + after_ms * 1000
    return t0, [((t - t0) / 1000.0, p, e, took, rc) for t, p, e, took, rc in calls if lo <= t <= hi]


def show(calls, pid, nth, before_ms, after_ms, log):
    w = window(calls, pid, nth, before_ms, after_ms)
    if w is None:
        print("timeline: no launch %d of client %d in %s (was OPENMPS_LOG_LEVEL=3 set for the "
              "daemon?)" % (nth, pid, log), file=sys.stderr)
        return 1
    t0, rows = w
    print("client %d's launch %d at start_us %d; calls of every client from %.1f ms before to "
          "%.1f ms after:" % (pid, nth, t0, before_ms, after_ms))
    for dt, p, e, took, rc in rows:
        mark = "  <==" if p == pid and e in LAUNCHES and dt == 0 else ""
        print("%+10.3f ms  client %-7d %-28s %8d us  rc %d%s" % (dt, p, e, took, rc, mark))
    # what a call blocked in the driver may wait for: calls that began earlier and were still
    # running at the launch, by when they ended
    early = [c for c in calls if c[0] < t0 - before_ms * 1000 and c[0] + c[3] > t0]
    print("calls begun before the window and still running at the launch: %d" % len(early))
    for t, p, e, took, rc in sorted(early, key=lambda c: c[0] + c[3])[:40]:
        print("%+10.3f ms  client %-7d %-28s %8d us  rc %d  (ends %+.3f ms)"
              % ((t - t0) / 1000.0, p, e, took, rc, (t + took - t0) / 1000.0))
    return 0


def slow_points(csv_path, log, late_ms, before_ms, after_ms):
    """Every bench.csv row whose slowest copy started late on the GPU: its timeline."""
    import csv
    calls, found, status = read(log), 0, 0
    with open(csv_path) as f:
        for r in csv.DictReader(f):
            try:
                late = float(r["slowest_gpu_start_after_launch_ms"])
                pid = int(r["slowest_pid"])
            except (KeyError, ValueError):
                continue
            if late <= late_ms:
                continue
            found += 1
            print("\n== %s %s N=%s run %s: slowest %s ms, its kernel started %.1f ms after its "
                  "launch call returned (pid %d)" % (r["workload"], r["mode"], r["n"], r["repeat"],
                                                     r["slowest_ms"], late, pid))
            status |= show(calls, pid, 1, before_ms, after_ms, log)
    print("\n%d point(s) with a kernel started more than %.0f ms late" % (found, late_ms))
    return status


def call_summary(log):
    """Per entry: count, median and 90th percentile of took_us."""
    by = {}
    for _, _, e, took, _ in read(log):
        by.setdefault(e, []).append(took)
    print("%-32s %8s %10s %10s" % ("entry", "calls", "median_us", "p90_us"))
    for e, v in sorted(by.items(), key=lambda kv: -len(kv[1])):
        v.sort()
        print("%-32s %8d %10d %10d" % (e, len(v), v[len(v) // 2], v[min(len(v) - 1,
                                                                      len(v) * 9 // 10)]))
    return 0 if by else 1


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--calls":
        return call_summary(sys.argv[2])
    if len(sys.argv) > 1 and sys.argv[1] == "--slow":
        ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
        ap.add_argument("--slow", nargs=2, metavar=("BENCH_CSV", "SERVER_LOG"), required=True)
        ap.add_argument("--late-ms", type=float, default=100.0)
        ap.add_argument("--before-ms", type=float, default=20.0)
        ap.add_argument("--after-ms", type=float, default=5.0)
        a = ap.parse_args()
        return slow_points(a.slow[0], a.slow[1], a.late_ms, a.before_ms, a.after_ms)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("pid", type=int)
    ap.add_argument("--before-ms", type=float, default=50.0)
    ap.add_argument("--after-ms", type=float, default=5.0)
    ap.add_argument("--launch", type=int, default=1, help="which launch of the client (1 = first)")
    args = ap.parse_args()
    return show(read(args.log), args.pid, args.launch, args.before_ms, args.after_ms, args.log)


if __name__ == "__main__":
    sys.exit(main())
