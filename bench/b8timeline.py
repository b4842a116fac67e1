#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Which server calls overlap B8's worst batches: reads a timeline that bench/run.py's B8 wrote
(b8-timeline-MODE[-fresh].csv: every batch of the 8 copies with its end instant and latency, and
the newcomer's start, import and first result) and the server.log of that mode, whose server
ran with OPENMPS_PROFILE=1 (each call longer than OPENMPS_PROFILE_SLOW_US logged with the
instant it started), and prints, for the K slowest batches while the newcomer starts, the slow
calls of any client that overlapped them, then the 8 copies' batches in windows of --window ms
from a second before the newcomer's start to its first result (count, median, 99th percentile,
longest): whether the slow batches are one stall of every copy at once, and when. Instants are
wall-clock ns since the epoch on both sides. Usage: bench/b8timeline.py TIMELINE.csv SERVER_LOG
[--worst 10] [--window 250]
"""
import argparse
import csv
import re
import sys

SLOW = re.compile(r"client (\d+): slow call (\w+) took (\d+) us from (\d+)")


def read_sched(timeline):
    """The scheduler's samples beside a timeline (bench/schedsample.py, written when
    BENCH_B8_SAMPLE was set): its path and its rows of integers, none when it is not there."""
    path = timeline[:-len(".csv")] + "-sched.csv"
    try:
        with open(path) as f:
            return path, [[int(x) for x in r.values()] for r in csv.DictReader(f)]
    except OSError:
        return path, []


def sched_around(timeline, n0, worst):
    """The scheduler's samples (bench/schedsample.py, beside the timeline when BENCH_B8_SAMPLE
    was set) from 10 ms before to the end of each of the given batches: per sample, the ms each
    set of threads ran and waited for a core since the previous sample."""
    path, rows = read_sched(timeline)
    if not rows:
        return
    print("who waited for a core (%s; ms in each interval: server ran/waited, copies' main "
          "threads ran/waited, newcomer's threads: count ran/waited; runnable threads):" % path)
    for start, end, ms in worst:
        print("  the batch of %.2f ms at %+.3f s:" % (ms, (start - n0) / 1e9))
        for prev, r in zip(rows, rows[1:]):
            if start - 10e6 <= r[0] and prev[0] <= end:
                d = [(r[i] - prev[i]) / 1e6 for i in range(1, 9)]
                print("    %+8.3f s: server %5.2f/%5.2f  copies %5.2f/%5.2f  newcomer %3d "
                      "%5.2f/%5.2f  running %d" % ((r[0] - n0) / 1e9, d[0], d[1], d[2], d[3],
                                                   r[5], d[5], d[6], r[8]))


def sched_summary(timeline, n0):
    """CPUs' worth each set of threads ran and waited for a core, averaged over the 0.8 s before
    the newcomer's start and the 1.2 s after it, from the scheduler's samples (how the fifteenth
    session compared openmps's server and copies with MPS's copies: docs/benchmarks.md)."""
    rows = read_sched(timeline)[1]
    names = ("server ran", "server waited", "copies ran", "copies waited", "newcomer ran",
             "newcomer waited")
    cols = (1, 2, 3, 4, 6, 7)
    for lo, hi, what in ((n0 - 0.8e9, n0, "before the newcomer"), (n0, n0 + 1.2e9, "after")):
        span = [r for r in rows if lo <= r[0] < hi or (r[0] == hi and lo == n0)]
        if len(span) < 2:
            continue
        dt = span[-1][0] - span[0][0]
        vals = ", ".join("%s %.2f" % (n, (span[-1][c] - span[0][c]) / dt)
                         for n, c in zip(names, cols))
        print("CPUs %s: %s; runnable threads %.1f on average"
              % (what, vals, sum(r[8] for r in span) / len(span)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("timeline")
    ap.add_argument("server_log")
    ap.add_argument("--worst", type=int, default=10)
    ap.add_argument("--window", type=float, default=250.0, help="ms per window")
    a = ap.parse_args()
    marks, batches, split = {}, [], {}
    with open(a.timeline) as f:
        for row in csv.DictReader(f):
            if row["what"] == "batch":
                end, ms = int(row["end_ns"]), float(row["ms"])
                batches.append((end - int(ms * 1e6), end, ms))
                if row.get("launch_ms") is not None:  # timelines since 2026-11-27 (third)
                    split[(end, ms)] = (float(row["launch_ms"]), float(row["cpu_ms"]),
                                        int(row["copy"]), float(row.get("wait_ms") or 0))
            else:
                marks[row["what"]] = int(row["end_ns"])
    if not {"newcomer_start", "newcomer_done"} <= set(marks):
        sys.exit("%s: no newcomer instants" % a.timeline)
    n0, n1 = marks["newcomer_start"], marks["newcomer_done"]
    calls = []
    with open(a.server_log, errors="replace") as f:
        for line in f:
            m = SLOW.search(line)
            if m:
                start = int(m.group(4))
                calls.append((start, start + int(m.group(3)) * 1000, m.group(1), m.group(2)))
    during = sorted((b for b in batches if b[1] >= n0 and b[0] <= n1), key=lambda b: -b[2])
    print("newcomer: start to first result %.2f s (import done after %.2f s); %d batches "
          "while it started, %d slow server calls in the log"
          % ((n1 - n0) / 1e9, (marks.get("newcomer_imported", n0) - n0) / 1e9, len(during),
             len(calls)))
    for start, end, ms in during[:a.worst]:
        over = [c for c in calls if c[0] < end and c[1] > start]
        print("batch of %.2f ms, %.3f s after the newcomer's start: %s"
              % (ms, (start - n0) / 1e9, ", ".join("%s %s %.1f ms" % (c[2], c[3],
                                                                    (c[1] - c[0]) / 1e6)
                                                    for c in over) or "no slow server call"))
    # Where a slow batch's time went: its launches (the Python thread's model(x), the answers
    # it waited for included) or its synchronize (the GPU, or the waits that end it), the
    # thread's CPU time in it (off its core, or asleep, for the rest), and how many of the other
    # copies were slow (over twice the median) at the same moment: one copy's or all's.
    if split:
        med = sorted(b[2] for b in batches)[len(batches) // 2]
        slow = [b for b in batches if b[2] > 2 * med]
        worst = sorted(batches, key=lambda b: -b[2])[:2 * a.worst]
        print("the %d slowest batches of the run (median %.2f ms): instant from the newcomer's "
              "start, ms = launch + synchronize, CPU ms, ms waiting for a core, copy, other "
              "copies slow with it" % (len(worst), med))
        for start, end, ms in worst:
            la, cpu, k, wait = split[(end, ms)]
            others = {split[(b[1], b[2])][2] for b in slow
                      if b[0] < end and b[1] > start and split[(b[1], b[2])][2] != k}
            print("  %+8.3f s: %6.2f = %6.2f + %6.2f, cpu %6.2f, wait %6.2f, copy %d, with %d"
                  % ((start - n0) / 1e9, ms, la, ms - la, cpu, wait, k, len(others)))
        sched_around(a.timeline, n0, worst[:3])
    sched_summary(a.timeline, n0)

    # Every copy's batches by the window they ended in (measured 2026-11-27: the worst ones of a
    # seen-code newcomer all fell in 130 ms of its PyTorch import, before it connected).
    step = int(a.window * 1e6)
    wins = {}
    for start, end, ms in batches:
        if n0 - 1e9 <= end <= n1:
            wins.setdefault((end - n0) // step, []).append(ms)
    print("batches by %g ms window from the newcomer's start (its import ended at %.2f s):"
          % (a.window, (marks.get("newcomer_imported", n0) - n0) / 1e9))
    for k in sorted(wins):
        v = sorted(wins[k])
        print("  %+7.0f ms: %4d batches, median %.2f ms, p99 %.2f, longest %.2f"
              % (k * a.window, len(v), v[len(v) // 2], v[min(len(v) - 1, int(len(v) * 0.99))],
                 v[-1]))


if __name__ == "__main__":
    main()
