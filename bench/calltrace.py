#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What one step of a program costs in driver calls: reads the trace OPENMPS_TRACE=1 writes
(stderr lines "openmps[PID] NAME(args...) = RC (T us)"), cuts it into steps at each
synchronize (cuCtxSynchronize, cuStreamSynchronize: torch.cuda.synchronize() ends a batch),
and prints, for the last K steps, each entry point's calls per step, its mean time, and its
form in remote mode (api/remote/*.tsv: gen/custom answer in the server, client may or may not,
local/passthrough never). The entry points that cost a framework's batch its time are at the
top. Usage: bench/calltrace.py TRACE [--last 10]
"""
import argparse
import collections
import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LINE = re.compile(r"^openmps\[\d+\] (\w+)\(.*\) = (-?\d+) \(([\d.]+) us\)$")
SYNCS = ("cuCtxSynchronize", "cuStreamSynchronize", "cuStreamSynchronize_ptsz")


def forms():
    out = {}
    for path in glob.glob(os.path.join(HERE, "..", "api", "remote", "*.tsv")):
        for line in open(path):
            f = line.rstrip("\n").split("\t")
            if len(f) >= 2 and not line.startswith("#"):
                out[f[0]] = f[1]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--last", type=int, default=10, help="steps to average over")
    args = ap.parse_args()
    steps, cur = [], []
    with open(args.trace, errors="replace") as f:
        for line in f:
            m = LINE.match(line.strip())
            if not m:
                continue
            cur.append((m.group(1), int(m.group(2)), float(m.group(3))))
            if m.group(1) in SYNCS:
                steps.append(cur)
                cur = []
    if len(steps) < args.last + 1:
        print("only %d steps in the trace" % len(steps), file=sys.stderr)
        return 1
    last = steps[-args.last:]
    count, time, errors = collections.Counter(), collections.Counter(), collections.Counter()
    for step in last:
        for name, rc, us in step:
            count[name] += 1
            time[name] += us
            if rc not in (0, 600):  # 600: CUDA_ERROR_NOT_READY, a query's answer
                errors[name] += 1
    form = forms()
    k = len(last)
    print("%d steps; per step: %.0f calls, %.0f us in calls" %
          (k, sum(count.values()) / k, sum(time.values()) / k))
    print("%-44s %8s %9s %10s  %s" % ("entry point", "per step", "mean us", "us/step", "form"))
    for name, t in time.most_common():
        print("%-44s %8.1f %9.2f %10.1f  %s%s" % (
            name, count[name] / k, t / count[name], t / k, form.get(name, "?"),
            "  (%d errors)" % errors[name] if errors[name] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
