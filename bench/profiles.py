#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Where the server's time went, over every session of a run: reads a server.log whose server
ran with OPENMPS_PROFILE=1 (src/server/profile.c: as each client leaves, a line with its driver
calls, server time, records, waits and its 12 entry points of most time, each as
"NAME CALLS x MEAN us (max MAX)") and prints the sum over the sessions: per entry point its calls,
server ms and mean µs, largest first, and, given --batches B (the batches every session ran,
e.g. B7's 300 + its warm-up), the server µs per batch of each. Entry points outside a session's
12 are not in its line: the sums are lower bounds, and the line "in the 12" says how much of the
sessions' server time they cover. Every session of the log counts (those of fewer than
--min-calls driver calls left out): give it one workload's log. Usage: bench/profiles.py
SERVER_LOG [--batches B] [--top N] [--min-calls N]
"""
import argparse
import re
import sys

LINE = re.compile(r"client (\d+): profile: (\d+) driver call\(s\) in ([\d.]+) ms of server time, "
                  r"(\d+) record\(s\), (\d+) wait\(s\) for one; most time: (.*)$")
ENTRY = re.compile(r"([\w:.]+) (\d+) x ([\d.]+) us \(max (\d+)\)")


def read(path):
    """[(pid, calls, ms, records, waits, {name: (calls, total µs)})] of the log's profile lines."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if not m:
                continue
            entries = {}
            for e in ENTRY.finditer(m.group(6)):
                n = int(e.group(2))
                entries[e.group(1)] = (n, n * float(e.group(3)))
            out.append((int(m.group(1)), int(m.group(2)), float(m.group(3)), int(m.group(4)),
                        int(m.group(5)), entries))
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--batches", type=int, default=0, help="batches each session ran")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--min-calls", type=int, default=1,
                    help="sessions with fewer driver calls are left out (probes, other work)")
    a = ap.parse_args(argv)
    every = read(a.log)
    sessions = [s for s in every if s[1] >= a.min_calls]
    if len(sessions) < len(every):
        print("%d session(s) of fewer than %d driver call(s) left out" %
              (len(every) - len(sessions), a.min_calls))
    if not sessions:
        print("no profile lines in %s (was OPENMPS_PROFILE=1 in the daemon's environment?)" % a.log)
        return 1
    total_ms = sum(s[2] for s in sessions)
    sums = {}
    for s in sessions:
        for name, (n, us) in s[5].items():
            c, t = sums.get(name, (0, 0.0))
            sums[name] = (c + n, t + us)
    covered = sum(t for _, t in sums.values()) / 1e3
    per = len(sessions) * a.batches
    print("%d session(s): %d driver call(s), %.1f ms of server time, %d record(s), %d wait(s) "
          "for one" % (len(sessions), sum(s[1] for s in sessions), total_ms,
                       sum(s[3] for s in sessions), sum(s[4] for s in sessions)))
    if per:
        print("per batch (%d batches a session): %.1f µs of server time, %.1f records" %
              (a.batches, total_ms * 1e3 / per, sum(s[3] for s in sessions) / per))
    print("in the 12 of each session: %.1f ms (%.0f %%)" %
          (covered, 100.0 * covered / total_ms if total_ms else 0))
    print("%-36s %12s %12s %10s%s" % ("entry point", "calls", "server ms", "mean µs",
                                      " %12s" % "µs a batch" if per else ""))
    for name, (n, us) in sorted(sums.items(), key=lambda kv: -kv[1][1])[:a.top]:
        print("%-36s %12d %12.1f %10.2f%s" % (name, n, us / 1e3, us / n if n else 0,
                                             " %12.1f" % (us / per) if per else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
