#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/plots.py without a GPU: from figures.csv files made here, the SVG pictures carry one bar
per mode at the median of its runs, the goal where it is a number, B7's lines with one point per
N; a later file replaces an earlier one's (workload, mode); bad input is refused by name; and,
where matplotlib is installed, the same files give PNG pictures."""
import csv
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLOTS = os.path.join(ROOT, "bench", "plots.py")
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL: " + what)


def write(path, rows, header=("time", "workload", "mode", "repeat", "figure", "value", "error")):
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(header)
        for r in rows:
            out.writerow(r)


def plots(*args):
    return subprocess.run([sys.executable, PLOTS] + list(args), text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def bars(svg):
    """{mode: value} of the bars of the first panel (launch_us comes first in FIGURES' b2)."""
    return [(m, float(v)) for m, v in re.findall(r'class="bar" data-mode="([^"]+)" '
                                                  r'data-value="([^"]+)"', svg)]


tmp = tempfile.mkdtemp(prefix="check-plots.")
a = os.path.join(tmp, "a.csv")
rows = []
for mode, vals in (("native", (4.0, 4.2, 4.4)), ("mps", (4.1, 4.1, 4.9)),
                   ("openmps", (3.0, 3.5, 9.0))):
    for rep, v in enumerate(vals):
        rows.append(("t", "b2", mode, rep, "launch_us", v, ""))
rows.append(("t", "b2", "openmps", 3, "", "", "a failed run: no value"))
for mode, base in (("mps", 1000.0), ("openmps", 1100.0)):
    for n in (1, 8, 32):
        rows.append(("t", "b7", mode, 0, "b7_n%d_img_s" % n, base * n ** 0.5, ""))
        rows.append(("t", "b7", mode, 0, "b7_n%d_server_cpu_ms" % n, 1.0, ""))
write(a, rows)
out = os.path.join(tmp, "svg")
p = plots("--svg", "--out", out, a)
check(p.returncode == 0, "plots ran: %s" % p.stderr)
names = sorted(os.listdir(out)) if os.path.isdir(out) else []
check(names == ["b2.svg", "b7.svg"], "one picture per workload: %s" % names)
if "b2.svg" in names:
    svg = open(os.path.join(out, "b2.svg")).read()
    got = bars(svg)
    check(got == [("native", 4.2), ("mps", 4.1), ("openmps", 3.5)],
          "one bar per mode, in the modes' order, at the median: %s" % got)
    check(svg.count('class="goal"') == 1, "B2's launch goal (<= 4.0) drawn once")
if "b7.svg" in names:
    svg = open(os.path.join(out, "b7.svg")).read()
    lines = re.findall(r'class="line" data-mode="([^"]+)"[^>]* points="([^"]+)"', svg)
    check([m for m, _ in lines] == ["mps", "openmps"], "a line per mode: %s" % lines)
    check(all(len(pts.split()) == 3 for _, pts in lines), "a point per N: %s" % lines)
    if len(lines) == 2:  # openmps is above mps at every N: its y is smaller
        ys = [[float(p.split(",")[1]) for p in pts.split()] for _, pts in lines]
        check(all(o < m for m, o in zip(ys[0], ys[1])), "openmps's line above mps's: %s" % ys)

# A later file's (workload, mode) replaces the earlier one's; other modes stay.
b = os.path.join(tmp, "b.csv")
write(b, [("t", "b2", "openmps", 0, "launch_us", 2.0, "")])
out2 = os.path.join(tmp, "svg2")
p = plots("--svg", "--out", out2, a, b)
got = bars(open(os.path.join(out2, "b2.svg")).read()) if p.returncode == 0 else []
check(got == [("native", 4.2), ("mps", 4.1), ("openmps", 2.0)],
      "the later file's openmps replaces the earlier's: %s" % got)

# --runs and --modes select; files of docs/results carry a run column.
c = os.path.join(tmp, "c.csv")
write(c, [(1, "x", "t", "b2", "native", 0, "launch_us", 5.0, ""),
          (2, "y", "t", "b2", "native", 0, "launch_us", 7.0, ""),
          (2, "y", "t", "b2", "mps", 0, "launch_us", 7.5, "")],
      header=("run", "commit", "time", "workload", "mode", "repeat", "figure", "value", "error"))
out3 = os.path.join(tmp, "svg3")
p = plots("--svg", "--runs", "2", "--modes", "native", "--out", out3, c)
got = bars(open(os.path.join(out3, "b2.svg")).read()) if p.returncode == 0 else []
check(got == [("native", 7.0)], "run 2's native only: %s" % got)

# Bad input: named.
d = os.path.join(tmp, "d.csv")
write(d, [("t", "b2", "native", 0, "launch_us", "fast", "")])
p = plots("--svg", "--out", out, d)
check(p.returncode != 0 and "launch_us" in p.stderr and "fast" in p.stderr,
      "a value that is not a number is named: %r" % p.stderr)
p = plots("--svg", "--out", out, os.path.join(tmp, "missing.csv"))
check(p.returncode != 0 and "missing.csv" in p.stderr, "a missing file is named: %r" % p.stderr)
e = os.path.join(tmp, "e.csv")
write(e, [("t", "b2", "native", 0, "", "", "every run failed")])
p = plots("--svg", "--out", out, e)
check(p.returncode != 0 and "no figure" in p.stderr, "no figure at all is said: %r" % p.stderr)

try:
    import matplotlib  # noqa: F401
    png = os.path.join(tmp, "png")
    p = plots("--out", png, a)
    for name in ("b2.png", "b7.png"):
        path = os.path.join(png, name)
        check(os.path.isfile(path) and open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n",
              "%s is a PNG: %s" % (name, p.stderr))
except ImportError:
    print("matplotlib is not installed: the PNG pictures are not checked (SVG is)")

if failures:
    print("%d check(s) failed" % failures)
    sys.exit(1)
print("plots: all checks passed")
