# SPDX-License-Identifier: MIT
"""Pictures of B2-B8 and the tutorial from figures.csv files (bench/run.py writes one per run).

    python3 bench/plots.py [--out DIR] [--svg] FIGURES.csv [FIGURES.csv ...]

One picture per workload present: B7 as lines (images/s against the number of copies, one line
per mode); every other workload as small panels, one per figure, with one bar per mode (the median
of its runs, a whisker from the lowest run to the highest) and the goal as a dashed line where it
is a number. PNG with matplotlib; without it (or with --svg) SVG, drawn here, so that a machine
without matplotlib still gets the pictures. Rows of several files are pooled, a later file's
(workload, mode) replacing an earlier one's, so that a run of one workload can update one picture.
Prints the path of each picture it writes."""
import argparse
import csv
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from figures import FIGURES  # noqa: E402  (the figures' titles, units and goals)

MODE_ORDER = ["native", "mps", "openmps", "openmps-noreplay"]
COLOURS = {"native": "#7f7f7f", "mps": "#76b900", "openmps": "#1f77b4",
           "openmps-noreplay": "#9ecae1"}
OTHER_COLOURS = ["#ff7f0e", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
                 "#393b79"]
B7_FIGURE = re.compile(r"^b7_n(\d+)_(img_s|window_img_s)$")


def load(paths, runs=None):
    """[{workload, mode, figure, value}] of the files' rows that carry a value (of those runs,
    where given: the `run` column of files that pool several runs, as docs/results' do)."""
    by_key = {}
    for path in paths:
        with open(path, newline="") as f:
            rows = [r for r in csv.DictReader(f) if r.get("figure") and r.get("value") and
                    (not runs or r.get("run") in runs)]
        keys = {(r["workload"], r["mode"]) for r in rows}
        for k in keys:  # a later file's (workload, mode) replaces an earlier one's
            by_key[k] = []
        for r in rows:
            try:
                by_key[(r["workload"], r["mode"])].append(
                    {"workload": r["workload"], "mode": r["mode"], "figure": r["figure"],
                     "value": float(r["value"])})
            except ValueError:
                raise SystemExit("plots: %s: figure %s has value %r, not a number"
                                 % (path, r["figure"], r["value"]))
    return [r for rows in by_key.values() for r in rows]


def modes_of(rows):
    seen = {r["mode"] for r in rows}
    return [m for m in MODE_ORDER if m in seen] + sorted(seen - set(MODE_ORDER))


def colour(mode, modes):
    if mode in COLOURS:
        return COLOURS[mode]
    extra = [m for m in modes if m not in COLOURS]
    return OTHER_COLOURS[extra.index(mode) % len(OTHER_COLOURS)]


def goal_value(goal):
    m = re.match(r"^\s*(<=|>=)\s*([0-9.]+)\s*$", goal or "")
    return float(m.group(2)) if m else None


def stats(rows, figure, mode):
    v = [r["value"] for r in rows if r["figure"] == figure and r["mode"] == mode]
    return (statistics.median(v), min(v), max(v)) if v else None


def panels(rows, workload):
    """[(figure, title, unit, goal)] of the workload's figures present, in FIGURES' order."""
    present = {r["figure"] for r in rows if r["workload"] == workload}
    out = []
    for name, (w, title, unit, goal, _ok) in FIGURES.items():
        if w == workload and name in present and not B7_FIGURE.match(name):
            out.append((name, title, unit, goal_value(goal)))
    return out


def b7_lines(rows, modes, which):
    """{mode: [(N, median images/s)]} of B7's figure `which` (img_s or window_img_s)."""
    lines = {}
    for r in rows:
        m = B7_FIGURE.match(r["figure"])
        if r["workload"] == "b7" and m and m.group(2) == which:
            lines.setdefault(r["mode"], {}).setdefault(int(m.group(1)), []).append(r["value"])
    return {mode: sorted((n, statistics.median(v)) for n, v in pts.items())
            for mode, pts in lines.items() if mode in modes}


def wrap(text, width):
    words, lines, cur = text.split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = (cur + " " + w).strip()
    return lines + ([cur] if cur else [])


# ---------------------------------------------------------------------------- matplotlib


def draw_bars_mpl(plt, rows, workload, modes, path):
    ps = panels(rows, workload)
    cols = min(3, len(ps))
    nrows = (len(ps) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.2 * nrows), squeeze=False)
    for ax in axes.flat[len(ps):]:
        ax.axis("off")
    for ax, (name, title, unit, goal) in zip(axes.flat, ps):
        for i, m in enumerate(modes):
            st = stats(rows, name, m)
            if not st:
                continue
            med, lo, hi = st
            ax.bar(i, med, color=colour(m, modes), yerr=[[med - lo], [hi - med]], capsize=3)
        if goal is not None:
            ax.axhline(goal, color="black", linestyle="--", linewidth=1)
        ax.set_xticks(range(len(modes)))
        ax.set_xticklabels(modes, fontsize=8)
        ax.set_ylabel(unit, fontsize=8)
        ax.set_title("\n".join(wrap(title, 40)), fontsize=8)
        ax.tick_params(axis="y", labelsize=8)
    fig.suptitle("%s (median of the runs; whiskers: lowest to highest; dashed: the goal)"
                 % workload.upper(), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


B7_PANELS = (("img_s", "each copy's rate x N (slowest copy)"),
             ("window_img_s", "all images / common window"))


def draw_b7_mpl(plt, rows, modes, path):
    shown = [(w, t) for w, t in B7_PANELS if b7_lines(rows, modes, w)]
    fig, axes = plt.subplots(1, len(shown), figsize=(5 * len(shown), 4), squeeze=False)
    for ax, (which, title) in zip(axes.flat, shown):
        lines = b7_lines(rows, modes, which)
        for m in [m for m in modes if m in lines]:
            pts = lines[m]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=m,
                    color=colour(m, modes))
        ax.set_xscale("log", base=2)
        ax.set_xlabel("copies (N)")
        ax.set_ylabel("images/s")
        ax.set_title(title, fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("B7: N copies of ResNet-18 fp16 inference, batch 8", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------- SVG


def svg_text(x, y, text, size=11, anchor="start", fill="black"):
    esc = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return ('<text x="%.1f" y="%.1f" font-size="%d" text-anchor="%s" fill="%s" '
            'font-family="sans-serif">%s</text>' % (x, y, size, anchor, fill, esc))


def nice_top(v):
    if v <= 0:
        return 1.0
    for step in (1, 2, 2.5, 5, 10):
        e = 10 ** int(("%e" % v).split("e")[1])
        if step * e >= v:
            return step * e
    return v


def draw_bars_svg(rows, workload, modes, path):
    ps = panels(rows, workload)
    cols = min(3, len(ps))
    pw, ph, head = 300, 230, 30
    nrows = (len(ps) + cols - 1) // cols
    w, h = pw * cols, head + ph * nrows
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d">' % (w, h),
           '<rect width="100%" height="100%" fill="white"/>',
           svg_text(10, 20, "%s (median of the runs; whiskers: lowest to highest; dashed: the "
                    "goal)" % workload.upper(), 13)]
    for k, (name, title, unit, goal) in enumerate(ps):
        x0, y0 = (k % cols) * pw, head + (k // cols) * ph
        left, right, top, bottom = x0 + 50, x0 + pw - 10, y0 + 44, y0 + ph - 30
        for j, line in enumerate(wrap(title, 46)[:3]):
            out.append(svg_text(x0 + pw / 2, y0 + 12 + 12 * j, line, 10, "middle"))
        st = {m: stats(rows, name, m) for m in modes}
        peak = max([s[2] for s in st.values() if s] + ([goal] if goal is not None else []))
        ymax = nice_top(peak * 1.05)
        y_of = lambda v: bottom - (bottom - top) * (v / ymax)
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>'
                   % (left, bottom, right, bottom))
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>'
                   % (left, top, left, bottom))
        for t in (0, ymax / 2, ymax):
            out.append(svg_text(left - 4, y_of(t) + 4, "%g" % t, 9, "end"))
        out.append(svg_text(x0 + 4, top - 4, unit, 9))
        slot = (right - left) / max(1, len(modes))
        for i, m in enumerate(modes):
            cx = left + slot * (i + 0.5)
            out.append(svg_text(cx, bottom + 14, m, 9, "middle"))
            if not st[m]:
                continue
            med, lo, hi = st[m]
            out.append('<rect class="bar" data-mode="%s" data-value="%g" x="%.1f" y="%.1f" '
                       'width="%.1f" height="%.1f" fill="%s"/>'
                       % (m, med, cx - slot * 0.3, y_of(med), slot * 0.6,
                          max(0.0, bottom - y_of(med)), colour(m, modes)))
            out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>'
                       % (cx, y_of(lo), cx, y_of(hi)))
        if goal is not None:
            out.append('<line class="goal" x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black" '
                       'stroke-dasharray="5,3"/>' % (left, y_of(goal), right, y_of(goal)))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def draw_b7_svg(rows, modes, path):
    import math
    pw, h, pad = 420, 340, 55
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d">' % (2 * pw, h),
           '<rect width="100%" height="100%" fill="white"/>',
           svg_text(10, 20, "B7: N copies of ResNet-18 fp16 inference, batch 8", 13)]
    shown = [(w, t) for w, t in B7_PANELS if b7_lines(rows, modes, w)]
    out[0] = '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d">' % (
        pw * len(shown), h)
    for k, (which, title) in enumerate(shown):
        lines = b7_lines(rows, modes, which)
        x0 = k * pw
        ns = sorted({n for pts in lines.values() for n, _ in pts})
        ymax = nice_top(max(v for pts in lines.values() for _, v in pts) * 1.05)
        span = math.log2(ns[-1] / ns[0]) if ns[-1] > ns[0] else 1.0
        x_of = lambda n: x0 + pad + (pw - pad - 15) * (math.log2(n / ns[0]) / span)
        y_of = lambda v: h - pad - (h - 2 * pad) * (v / ymax)
        out.append(svg_text(x0 + pw / 2, 40, title, 11, "middle"))
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>'
                   % (x0 + pad, h - pad, x0 + pw - 15, h - pad))
        for n in ns:
            out.append(svg_text(x_of(n), h - pad + 15, str(n), 10, "middle"))
        for t in (0, ymax / 2, ymax):
            out.append(svg_text(x0 + pad - 4, y_of(t) + 4, "%g" % t, 10, "end"))
        out.append(svg_text(x0 + pw / 2, h - 15, "copies (N); images/s", 10, "middle"))
        for i, (m, pts) in enumerate(sorted(lines.items(), key=lambda e: modes.index(e[0]))):
            c = colour(m, modes)
            out.append('<polyline class="line" data-mode="%s" fill="none" stroke="%s" '
                       'stroke-width="2" points="%s"/>'
                       % (m, c, " ".join("%.1f,%.1f" % (x_of(n), y_of(v)) for n, v in pts)))
            out.append(svg_text(x0 + pad + 10, 60 + 14 * i, m, 10, "start", c))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def draw(rows, out, svg=False, prefix="", only_modes=None):
    """The pictures of every workload in rows (of only_modes, where given), written under out:
    their paths."""
    if only_modes:
        rows = [r for r in rows if r["mode"] in only_modes]
    plt = None
    if not svg:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            plt = None
    ext = "png" if plt else "svg"
    os.makedirs(out, exist_ok=True)
    paths = []
    workloads = sorted({r["workload"] for r in rows})
    for w in workloads:
        wrows = [r for r in rows if r["workload"] == w]
        modes = modes_of(wrows)
        path = os.path.join(out, "%s%s.%s" % (prefix, w, ext))
        if w == "b7":
            if not any(B7_FIGURE.match(r["figure"]) for r in wrows):
                continue
            (draw_b7_mpl(plt, wrows, modes, path) if plt else draw_b7_svg(wrows, modes, path))
        else:
            if not panels(wrows, w):
                continue
            (draw_bars_mpl(plt, wrows, w, modes, path) if plt
             else draw_bars_svg(wrows, w, modes, path))
        paths.append(path)
    return paths


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="+", help="figures.csv files (bench/run.py's)")
    ap.add_argument("--out", default=".", help="where the pictures go")
    ap.add_argument("--svg", action="store_true", help="SVG even where matplotlib is installed")
    ap.add_argument("--prefix", default="", help="put before each picture's name")
    ap.add_argument("--modes", help="only these modes, comma-separated (default: every one)")
    ap.add_argument("--runs", help="only these values of the files' run column, comma-separated")
    args = ap.parse_args()
    for p in args.csv:
        if not os.path.isfile(p):
            ap.error("%s: no such file" % p)
    rows = load(args.csv, args.runs.split(",") if args.runs else None)
    if not rows:
        ap.error("no figure with a value in %s" % ", ".join(args.csv))
    only = [m for m in args.modes.split(",") if m] if args.modes else None
    for p in draw(rows, args.out, args.svg, args.prefix, only):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
