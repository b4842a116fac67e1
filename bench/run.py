#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The benchmark harness (issue #4): B1-B6 (docs/benchmark-definitions.md), 3 modes one after the other
on the same machine.

  native   every copy has its own context: the GPU time-slices between them
  mps      NVIDIA's MPS, when nvidia-cuda-mps-control exists: started with its own pipe and
           log directories, always told to quit at the end
  openmps  this project: a daemon in temporary directories, the shim first in LD_LIBRARY_PATH
  openmps-nosched  the same with the server's scheduler off (OPENMPS_SCHED=off): what the
           scheduler is worth, past 32 client streams
  openmps-noreplay  the same with the server's replay of repeated launches off (OPENMPS_REPLAY=off)
  openmps-latecopy  the same with small copies answered after their DMA (OPENMPS_COPY_ANSWER=late),
           as before the early answer (docs/architecture.md, "The life of a pageable copy")
  openmps-custom  the same with the settings of BENCH_CUSTOM_ENV ("K=V K=V", e.g.
           OPENMPS_REPLAY_MIN_CLIENTS=8): a trial of a setting without a mode of its own
  openmps-yield  the same with the server's waits spinning with sched_yield in the driver
           (OPENMPS_SERVER_SYNC=yield) instead of polling, then sleeping
  openmps-spincap  the same with at most BENCH_SPIN_THREADS (4) server threads spinning at once
           (OPENMPS_SPIN_THREADS): what spinning costs the framework clients of B7
  openmps-spinall  the same with every server thread allowed to spin (OPENMPS_SPIN_THREADS=all),
           as before the default left busy clients their cores
  openmps-spinload  the same with spinning only while the machine has an idle CPU
           (OPENMPS_SPIN_THREADS=load: B8's newcomer's burst stops it)
  openmps-nospin  the same with no server thread spinning (OPENMPS_SPIN_THREADS=0)
  openmps-word  the same with synchronizes answered by a completion word (OPENMPS_SYNC_WORD=on;
           the default since 2026-11-29, so the same as openmps)
  openmps-noword  the same with synchronizes answered after the work (OPENMPS_SYNC_WORD=off), as
           before the word
  openmps-slice  openmps-word, and session threads with a time slice of BENCH_SLICE_US (100) µs
           (OPENMPS_SERVER_SLICE_US; Linux 6.12 or later)
  openmps-clientspin  the same with each client spinning up to BENCH_CLIENT_SPIN_US (20 000) µs
           for an answer before it sleeps (OPENMPS_CLIENT_SPIN_US; 20 by default)
  openmps-spinwait  the same as openmps-clientspin, and nothing of the server sleeps: its waits
           spin in the driver (OPENMPS_SERVER_SYNC=spin), every thread may spin
  openmps-nap  the same with clients that, past 100 µs of waiting for their completion word,
           sleep BENCH_NAP_US (50) µs between looks instead of spinning (OPENMPS_WORD_NAP_US)

For each workload, mode and N, N copies of tests/gpu/spin.cu start their kernels at the same
moment (each says when its context exists; then all get one start time); the figure of one run is the slowest copy's kernel time (CUDA events). Each point is
repeated; the table gives the median, the spread (min-max) and the ratio of the median to the
mode's median at N = 1. Every run goes to bench.csv; the B1/B1c plot to b1.png (matplotlib) or,
without matplotlib, to b1.svg. B2-B6 (bench/calls.cu, bench/figures.py): one table of figures
(median of the repeats per mode, openmps over native and over MPS, the goal), every run in
figures.csv. B7, B8 and the tutorial with PyTorch (bench/frameworks.py, bench/torch_worker.py: copies
of a PyTorch process; left out, with the reason, where PyTorch or torchvision is missing) add
their figures to that table. Every workload of that table also gets its picture (bench/plots.py:
b2.png ... b8.png, tut.png; SVG without matplotlib), which `bench/plots.py figures.csv` draws
again from the CSV alone. Without an NVIDIA GPU or nvcc it says so and exits 1.

--alternate (BENCH_ALTERNATE=1): the repeats become passes, and each pass runs every mode once
(a fresh daemon each time), modes alternating, every other pass in the reverse order — native,
MPS, openmps, openmps, MPS, native, ... — so that a machine's drift spreads over all modes
instead of landing on one, and no mode always runs first (issue #27's allocate + free was
higher in 8 of 9 passes for the mode that always ran first: the fixed order could not tell
the accounting's cost from the order's); B7 runs one set of copies per
pass (2 rounds each), B8 once per pass. The table's medians are then over the passes. figures.csv
is written as each workload ends, so a run cut short keeps what it measured. BENCH_STOP_AT
(seconds since the epoch): no pass and mode is begun that would end past it, judged by the
longest one so far (a caller with a time limit keeps its figures and its own later steps).
B8's diagnosis settings are in bench/frameworks.py (b8: BENCH_B8_SESSIONS, BENCH_B8_SAMPLE, ...).

Usage: bench/run.py [--build DIR] [--out DIR] [--n "1 5 16 32 48 64 128"] [--repeats 3]
                    [--modes native,mps,openmps] [--workloads b1,b1c,b2,...,b8,tut]
                    [--seconds 0.5] [--native-max-n 64] [--b4-clients 128]
                    [--b7-n "1 4 8 16 32 64"] [--b7-native-max-n 16] [--b7-mps-max-n N]
                    [--alternate]
"""
import argparse
import csv
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import figures  # noqa: E402  (bench/figures.py: B2-B6)
import plots  # noqa: E402  (bench/plots.py: the pictures of B2-B8)
import frameworks  # noqa: E402  (bench/frameworks.py: B7, B8, the tutorial with PyTorch)
WORKLOAD_FLAGS = {"b1": [], "b1m": ["--managed"], "b1c": ["--chain"]}
WORKLOAD_TITLES = {
    "b1": "B1: one thread, one kernel",
    "b1m": "B1, managed-memory variant",
    "b1c": "B1c: 4 x [kernel -> dependent tiny kernel]",
}


def progress(text):
    """One updating line on a terminal; in a log, one plain line per point."""
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K" + text)
    elif text:
        sys.stderr.write(text + "\n")
    sys.stderr.flush()


class Mode:
    """Starts and stops what a mode needs; env() is what its clients run with."""

    def __init__(self, name, build, tmp):
        self.name = name
        self.build = build
        self.pipe = os.path.join(tmp, name, "pipe")
        self.log = os.path.join(tmp, name, "log")
        os.makedirs(self.pipe)
        os.makedirs(self.log)
        self.started = False

    def env(self):
        env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=self.pipe,
                   CUDA_MPS_LOG_DIRECTORY=self.log,
                   # a module cache of the run's own (the user's would carry images from one
                   # run to the next, and B6's never-seen module must be never seen)
                   OPENMPS_MODULE_CACHE=os.path.join(os.path.dirname(self.pipe), "modules"))
        if self.name.startswith("openmps"):
            if self.name == "openmps-nosched":
                env["OPENMPS_SCHED"] = "off"  # the daemon passes it on to the server
            if self.name == "openmps-noreplay":
                env["OPENMPS_REPLAY"] = "off"
            if self.name == "openmps-latecopy":
                env["OPENMPS_COPY_ANSWER"] = "late"
            if self.name == "openmps-custom":  # the daemon's (and so its server's) settings
                env.update(kv.split("=", 1) for kv in
                           os.environ.get("BENCH_CUSTOM_ENV", "").split() if "=" in kv)
            if self.name == "openmps-yield":
                env["OPENMPS_SERVER_SYNC"] = "yield"
            if self.name == "openmps-spincap":
                env["OPENMPS_SPIN_THREADS"] = os.environ.get("BENCH_SPIN_THREADS", "4")
            if self.name == "openmps-spinall":
                env["OPENMPS_SPIN_THREADS"] = "all"
            if self.name == "openmps-spinload":
                env["OPENMPS_SPIN_THREADS"] = "load"
            if self.name == "openmps-nospin":
                env["OPENMPS_SPIN_THREADS"] = "0"
            if self.name in ("openmps-word", "openmps-slice"):
                env["OPENMPS_SYNC_WORD"] = "on"
            if self.name == "openmps-noword":
                env["OPENMPS_SYNC_WORD"] = "off"
            if self.name == "openmps-slice":
                env["OPENMPS_SERVER_SLICE_US"] = os.environ.get("BENCH_SLICE_US", "100")
            if self.name in ("openmps-clientspin", "openmps-spinwait"):
                env["OPENMPS_CLIENT_SPIN_US"] = os.environ.get("BENCH_CLIENT_SPIN_US", "20000")
            if self.name == "openmps-nap":
                nap = os.environ.get("BENCH_NAP_US", "50")
                if not nap.isdigit() or not 1 <= int(nap) <= 10000:
                    # the shim would name it and spin: the mode would measure something else
                    sys.exit("BENCH_NAP_US=%s: not a count of microseconds from 1 to 10000" % nap)
                env["OPENMPS_WORD_NAP_US"] = nap
            if self.name == "openmps-spinwait":
                env["OPENMPS_SERVER_SYNC"] = "spin"
                env["OPENMPS_SPIN_THREADS"] = "all"
            lib = os.path.join(self.build, "lib")
            env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"]
                                            if env.get("LD_LIBRARY_PATH") else "")
        return env

    def control(self):
        if self.name == "mps":
            return ["nvidia-cuda-mps-control"]
        return [os.path.join(self.build, "openmps-control")]  # openmps, openmps-nosched

    def start(self):
        if self.name == "native":
            return
        subprocess.run(self.control() + ["-d"], env=self.env(), check=True)
        self.started = True

    def stop(self, keep_logs=None):
        if not self.started:
            return
        subprocess.run(self.control(), input="quit\n", env=self.env(), text=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        self.started = False
        if keep_logs:  # the daemon's and the server's logs, for what the figures do not say
            time.sleep(1)  # the server writes its last lines as it exits
            shutil.copytree(self.log, os.path.join(keep_logs, "logs-" + self.name),
                            dirs_exist_ok=True)


def run_copies(binary, iterations, n, flags, env, timeout, detail=None):
    """N copies at once; returns (slowest kernel ms or None, copies that succeeded, first error).
    detail (a dict) gets, for the slowest copy, its kernel's own time on the GPU's clock and how
    long after the first copy's kernel it started: a late start (queued behind other work)
    tells apart from a slow run (sharing an SM)."""
    procs = [subprocess.Popen([binary, str(iterations), "stdin"] + flags, env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for _ in range(n)]
    # Every copy creates its context (or its session) and says "ready"; then all get one start
    # time, shortly after the last is ready. A copy that fails first (refused) says nothing.
    ready_by, ready = time.time() + 60 + 0.5 * n, set()
    for p in procs:
        left = max(0.0, ready_by - time.time())  # past the deadline: only those ready already
        if select.select([p.stdout], [], [], left)[0] and p.stdout.readline().strip() == "ready":
            ready.add(p.pid)
    start_at = int(time.time() * 1000) + 300
    for p in procs:
        try:
            if p.pid in ready:
                p.stdin.write("%d\n" % start_at)
            p.stdin.close()  # a copy not ready reads no start time and gives up
        except OSError:
            pass
        p.stdin = None
    times, gpu, error = [], [], ""
    deadline = time.time() + timeout
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            err = "timed out after %.0f s" % timeout
        got = [float(line.split()[1]) for line in out.splitlines() if line.startswith("kernel_ms ")]
        g = [line.split() for line in out.splitlines() if line.startswith("gpu_start_ns ")]
        h = [line.split() for line in out.splitlines() if line.startswith("host_a_ns ")]
        if p.returncode == 0 and got:
            times.append(got[0])
            if g and h:
                pid = int(h[0][5]) if len(h[0]) > 5 else p.pid
                gpu.append((got[0], int(g[0][1]), int(g[0][3]), int(h[0][1]), int(h[0][3]), pid))
        elif not error:
            error = (err.strip().splitlines() or ["exit %d" % p.returncode])[-1][:200]
    if detail is not None and gpu:
        worst = max(gpu)
        detail["gpu_ms"] = (worst[2] - worst[1]) / 1e6
        detail["start_delay_ms"] = (worst[1] - min(x[1] for x in gpu)) / 1e6
        # the host's side of it (the GPU's global timer follows the host's real-time clock)
        detail["launch_call_ms"] = (worst[4] - worst[3]) / 1e6
        detail["gpu_after_launch_ms"] = (worst[1] - worst[4]) / 1e6
        detail["pid"] = worst[5]  # for the server's timeline (OPENMPS_LOG_LEVEL=3)
        # copies whose kernel started over 100 ms after the first one's: one wave or several
        first = min(x[1] for x in gpu)
        detail["late"] = sum(1 for x in gpu if x[1] - first > 100e6)
    return (max(times) if len(times) == n else None), len(times), error


def nvcc(src, binary, *flags):
    arch = os.environ.get("OPENMPS_GPU_ARCH", "native")
    subprocess.run(["nvcc", "-O2", "-arch=" + arch, "-o", binary, src] + list(flags), check=True)
    return binary


def build_workloads(out):
    """spin (B1), calls (B2-B6) and fresh(): a build of calls with a module image no server has
    seen yet (a new salt each time: B6 runs it once per repeat, and the server keeps every
    image it loaded)."""
    salt = [int(time.time()) % 1000000]

    def fresh():
        salt[0] += 1
        return nvcc(os.path.join(HERE, "calls.cu"), os.path.join(out, "calls-fresh"),
                     "-DSALT=%d" % salt[0])

    return (nvcc(os.path.join(ROOT, "tests", "gpu", "spin.cu"), os.path.join(out, "spin")),
            nvcc(os.path.join(HERE, "calls.cu"), os.path.join(out, "calls")), fresh)


def calibrate(binary, seconds):
    out = subprocess.run([binary, "--calibrate", str(seconds)], check=True, text=True,
                         stdout=subprocess.PIPE).stdout
    return int(out.split()[0])


def summarize(rows, workloads, modes, ns):
    """The table: per workload, per N, per mode the median (spread) and the ratio to N = 1."""
    lines = []
    for w in workloads:
        lines.append(WORKLOAD_TITLES[w] + "; slowest copy's kernel time, ms: median (min-max), "
                     "ratio to one copy")
        header = "%5s" % "N" + "".join("  %-34s" % m for m in modes)
        lines.append(header)
        base = {}
        for n in ns:
            cells = []
            for m in modes:
                runs = [r for r in rows if r["workload"] == w and r["mode"] == m and r["n"] == n]
                if not runs:
                    cells.append("%-34s" % "-")
                    continue
                good = [r["slowest_ms"] for r in runs if r["slowest_ms"] is not None]
                if len(good) < len(runs):
                    bad = next(r for r in runs if r["slowest_ms"] is None)
                    cells.append("%-34s" % ("FAIL %d/%d ran" % (bad["ok"], n)))
                    continue
                med = statistics.median(good)
                base.setdefault(m, med if n == ns[0] else None)
                ratio = ("%.2fx" % (med / base[m])) if base.get(m) else "-"
                cells.append("%-34s" % ("%.1f (%.1f-%.1f) %s" % (med, min(good), max(good), ratio)))
            lines.append("%5d" % n + "".join("  " + c for c in cells))
        lines.append("")
    return "\n".join(lines)


def ratios(rows, workload, mode, ns):
    pts, base = [], None
    for n in ns:
        good = [r["slowest_ms"] for r in rows if r["workload"] == workload and r["mode"] == mode
                and r["n"] == n]
        if not good or None in good:
            continue
        med = statistics.median(good)
        if base is None and n == ns[0]:
            base = med
        if base:
            pts.append((n, med / base))
    return pts


def plot(rows, workloads, modes, ns, out):
    """b1.png with matplotlib; otherwise an SVG of the same lines, written here."""
    series = [(w, m, ratios(rows, w, m, ns)) for w in workloads for m in modes]
    series = [s for s in series if s[2]]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        path = os.path.join(out, "b1.svg")
        write_svg(series, ns, path)
        return path + " (matplotlib is not installed: SVG instead of PNG)"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for w, m, pts in series:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                linestyle="-" if w == "b1" else "--", label="%s %s" % (w.upper(), m))
    ax.set_xlabel("copies (N)")
    ax.set_ylabel("slowest kernel time / one copy's")
    ax.set_yscale("log")
    ax.set_xticks(ns)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    ax.set_title("B1: N copies of a one-thread kernel on one GPU")
    path = os.path.join(out, "b1.png")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    return path


def write_svg(series, ns, path):
    import math
    w, h, pad = 640, 400, 50
    top = max([p[1] for _, _, pts in series for p in pts] + [2.0])
    x_of = lambda n: pad + (w - 2 * pad) * (ns.index(n) / max(1, len(ns) - 1))
    y_of = lambda r: h - pad - (h - 2 * pad) * (math.log(max(r, 1e-3)) / math.log(top))
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d">' % (w, h),
             '<rect width="100%" height="100%" fill="white"/>',
             '<text x="%d" y="20" font-size="14">B1: slowest kernel time / one copy\'s '
             '(log scale) against N</text>' % pad]
    for n in ns:
        parts.append('<text x="%.0f" y="%d" font-size="11" text-anchor="middle">%d</text>'
                     % (x_of(n), h - pad + 16, n))
    for r in (1, 2, 5, 10, 20, 50, 100):
        if r <= top:
            parts.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>'
                         '<text x="%d" y="%.1f" font-size="11" text-anchor="end">%dx</text>'
                         % (pad, w - pad, y_of(r), y_of(r), pad - 4, y_of(r) + 4, r))
    for i, (wl, mode, pts) in enumerate(series):
        c = colours[i % len(colours)]
        d = " ".join("%.1f,%.1f" % (x_of(n), y_of(r)) for n, r in pts)
        dash = "" if wl == "b1" else ' stroke-dasharray="6,4"'
        parts.append('<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>'
                     % (c, dash, d))
        parts.append('<text x="%d" y="%d" font-size="12" fill="%s">%s %s</text>'
                     % (w - pad - 120, pad + 16 * i, c, wl.upper(), mode))
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.environ.get("BENCH_OUT", os.path.join(ROOT, "bench-out")))
    ap.add_argument("--n", default=os.environ.get("BENCH_N", "1 5 16 32 48 64 128"))
    ap.add_argument("--repeats", type=int, default=int(os.environ.get("BENCH_REPEATS", "3")))
    ap.add_argument("--modes", default=os.environ.get("BENCH_MODES", "native,mps,openmps"))
    ap.add_argument("--workloads",
                    default=os.environ.get("BENCH_WORKLOADS",
                                           "b1,b1c,b2,b3,b4,b5,b6,b7,b8,tut"))
    ap.add_argument("--b4-clients", type=int, default=int(os.environ.get("BENCH_B4_N", "128")),
                    help="clients B4 starts at once (natively at most 16: each holds a context)")
    ap.add_argument("--seconds", type=float, default=0.5, help="one copy's kernel time alone")
    ap.add_argument("--native-max-n", type=int,
                    default=int(os.environ.get("BENCH_NATIVE_MAX_N", "64")),
                    help="largest N run natively (time-slicing 128 copies takes over a minute)")
    ap.add_argument("--b7-n", default=os.environ.get("BENCH_B7_N", "1 4 8 16 32 64"),
                    help="copies of B7's ResNet-18 process")
    ap.add_argument("--b7-native-max-n", type=int,
                    default=int(os.environ.get("BENCH_B7_NATIVE_MAX_N", "16")),
                    help="largest B7 N run natively (time-slicing saturates at 4 copies)")
    ap.add_argument("--b7-mps-max-n", type=int,
                    default=int(os.environ.get("BENCH_B7_MPS_MAX_N", "0")) or None,
                    help="largest B7 N run under NVIDIA MPS (default: all; it refuses past 48 "
                         "clients, which the table then shows)")
    ap.add_argument("--alternate", action="store_true",
                    default=os.environ.get("BENCH_ALTERNATE", "") not in ("", "0"),
                    help="modes alternate: each repeat a pass over every mode")
    args = ap.parse_args()
    b7_ns = sorted({int(x) for x in args.b7_n.split()})

    if shutil.which("nvidia-smi") is None or subprocess.run(
            ["nvidia-smi", "-L"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode:
        print("bench: no NVIDIA GPU here (nvidia-smi finds none); the benchmarks need one.",
              file=sys.stderr)
        return 1
    if shutil.which("nvcc") is None:
        print("bench: nvcc is needed to build the workloads.", file=sys.stderr)
        return 1
    ns = sorted({int(x) for x in args.n.split()})
    workloads = [w for w in args.workloads.split(",") if w]
    modes = [m for m in args.modes.split(",") if m]
    others = {"b2": "b2", "b3": "b3", "b4": "b4", "b5": "b5", "b6": "b6", "b7": "b7", "b8": "b8",
              "tut": "tut"}
    for w in workloads:
        if w not in WORKLOAD_FLAGS and w not in others:
            print("bench: unknown workload %r (known: %s)"
                  % (w, ", ".join(list(WORKLOAD_FLAGS) + list(others))), file=sys.stderr)
            return 2
    fig_workloads = [w for w in workloads if w in others]
    torch_missing = frameworks.have_torch() if {"b7", "b8", "tut"} & set(fig_workloads) else None
    if torch_missing:
        print("bench: B7, B8 and the tutorial need PyTorch and torchvision (%s): left out"
              % torch_missing, file=sys.stderr)
        fig_workloads = [w for w in fig_workloads if w not in ("b7", "b8", "tut")]
    workloads = [w for w in workloads if w in WORKLOAD_FLAGS]
    if "mps" in modes and shutil.which("nvidia-cuda-mps-control") is None:
        print("bench: nvidia-cuda-mps-control not found: the NVIDIA MPS column is left out",
              file=sys.stderr)
        modes.remove("mps")
    os.makedirs(args.out, exist_ok=True)
    binary, calls, calls_fresh = build_workloads(args.out)
    iterations = calibrate(binary, args.seconds)
    fill_iters = int(subprocess.run([calls, "fill-calibrate", "12"], check=True, text=True,
                                    stdout=subprocess.PIPE).stdout.split()[0])
    fig_rows = []
    fig_csv = open(os.path.join(args.out, "figures.csv"), "w", newline="")
    fig_out = csv.writer(fig_csv)
    fig_out.writerow(["time", "workload", "mode", "repeat", "figure", "value", "error"])
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         text=True, stdout=subprocess.PIPE).stdout.strip()
    rows = []
    tmp = tempfile.mkdtemp(prefix="openmps-bench.")
    csv_path = os.path.join(args.out, "bench.csv")
    with open(csv_path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["time", "workload", "mode", "n", "repeat", "slowest_ms", "ok", "error",
                      "slowest_gpu_ms", "slowest_start_delay_ms", "slowest_launch_call_ms",
                      "slowest_gpu_start_after_launch_ms", "slowest_pid",
                      "copies_started_late"])
        # Alternating: the repeats are passes over the modes, each mode once per pass, the odd
        # passes in the reverse order (ABBA): the mode after another is not always the same.
        passes, reps = (args.repeats, 1) if args.alternate else (1, args.repeats)
        stop_at = float(os.environ.get("BENCH_STOP_AT", "0") or 0)
        last_took = 0.0
        for p, m in [(p, m) for p in range(passes)
                     for m in (modes[::-1] if args.alternate and p % 2 else modes)]:
            # BENCH_STOP_AT (seconds since the epoch): no pass and mode is begun that would end
            # past it, judged by the longest one so far, so that a caller with a time limit
            # (the device tool's 600 s) keeps what was measured and its own steps after
            if stop_at and time.time() + last_took > stop_at:
                print("bench: BENCH_STOP_AT reached: pass %d of %s and the rest left out"
                      % (p + 1, m), file=sys.stderr)
                break
            began = time.time()
            if args.alternate:
                progress("pass %d/%d: %s" % (p + 1, passes, m))
            mode = Mode(m, args.build, os.path.join(tmp, "pass%d" % (p + 1)))
            try:
                mode.start()
                env = mode.env()
                run_copies(binary, iterations, 1, [], env, 120)  # warm-up, not recorded
                for w in workloads:
                    for n in ns:
                        if m == "native" and n > args.native_max_n:
                            continue
                        for rep in range(p, p + reps):
                            progress("%s %s N=%d run %d/%d" % (m, w, n, rep + 1, args.repeats))
                            detail = {}
                            slowest, ok, err = run_copies(binary, iterations, n, WORKLOAD_FLAGS[w],
                                                          env, 60 + 2 * args.seconds * n, detail)
                            row = {"workload": w, "mode": m, "n": n, "slowest_ms": slowest,
                                   "ok": ok}
                            rows.append(row)
                            out.writerow([time.strftime("%Y-%m-%dT%H:%M:%S"), w, m, n, rep,
                                          "" if slowest is None else "%.3f" % slowest, ok, err,
                                          "%.3f" % detail.get("gpu_ms", -1),
                                          "%.3f" % detail.get("start_delay_ms", -1),
                                          "%.3f" % detail.get("launch_call_ms", -1),
                                          "%.3f" % detail.get("gpu_after_launch_ms", -1),
                                          detail.get("pid", ""), detail.get("late", "")])
                            f.flush()
                            if slowest is None and err:
                                progress("")
                                print("%s %s N=%d: %d of %d copies ran; first error: %s"
                                      % (m, w, n, ok, n, err), file=sys.stderr)
                                break  # a refusal (NVIDIA MPS past 48) repeats: one run shows it
                for w in fig_workloads:
                    # B4 and B7 once (B7 repeats its rounds inside one set of copies)
                    for rep in range(p, p + (1 if w in ("b4", "b7") else reps)):
                        progress("%s %s run %d/%d" % (m, w, rep + 1, args.repeats))
                        try:
                            if w == "b2":
                                vals = figures.b2(calls, env)
                            elif w == "b3":
                                vals = figures.b3(calls, env)
                            elif w == "b4":
                                n4 = min(args.b4_clients, 16) if m == "native" else args.b4_clients
                                vals = figures.b4(calls, env, n4)
                            elif w == "b5":
                                vals = figures.b5(calls, env, fill_iters)
                            elif w == "b7":
                                vals = frameworks.b7(env, b7_ns, rounds=max(2, reps),
                                                     max_n=args.b7_native_max_n
                                                     if m == "native" else
                                                     args.b7_mps_max_n if m == "mps" else None)
                            elif w == "b8":
                                # the first newcomer of the server's life loads never-seen
                                # images; the next one finds them loaded
                                # (BENCH_B8_FRESH=0: a newcomer alone loads them instead,
                                # for the second figure only: a shorter run)
                                tl = os.path.join(args.out, "b8-timeline-%s%s.csv")
                                if os.environ.get("BENCH_B8_FRESH") == "0":
                                    frameworks.newcomer_alone(env)
                                    vals = {}
                                else:
                                    vals = frameworks.b8(env, fresh=True,
                                                         timeline=tl % (m, "-fresh"))
                                vals.update(frameworks.b8(env, timeline=tl % (m, "")))
                            elif w == "tut":
                                vals = frameworks.tutorial(env)
                            else:
                                vals = figures.b6(calls, calls_fresh(), env, iterations * 6)
                            err = ""
                        except (RuntimeError, subprocess.TimeoutExpired, KeyError) as e:
                            vals, err = {}, str(e)[:200]
                            progress("")
                            print("%s %s: %s" % (m, w, err), file=sys.stderr)
                        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
                        for k, v in vals.items():
                            fig_rows.append({"workload": w, "mode": m, "figure": k, "value": v})
                            fig_out.writerow([stamp, w, m, rep, k, "%.4f" % v, ""])
                        if err:
                            fig_out.writerow([stamp, w, m, rep, "", "", err])
                        fig_csv.flush()
            finally:
                # each pass's logs apart (logs-MODE, then pass2/logs-MODE, ...)
                mode.stop(keep_logs=args.out if p == 0 else
                          os.path.join(args.out, "pass%d" % (p + 1)))
                last_took = max(last_took, time.time() - began)
    fig_csv.close()
    progress("")
    print("%s; one copy %.2f s alone (%d steps); %d repeat(s) per point" %
          (gpu, args.seconds, iterations, args.repeats))
    if workloads:
        print(summarize(rows, workloads, modes, ns))
        print("every run: %s" % csv_path)
        print("plot: %s" % plot(rows, workloads, modes, ns, args.out))
    if fig_workloads:
        print("\nB2-B8: median of %d %s (B4: one run, natively at most 16 clients; B7: "
              "one set of copies per N%s, the median of its rounds)"
              % (args.repeats, "passes, modes alternating" if args.alternate else "repeat(s)",
                 " and pass" if args.alternate else ""))
        print(figures.table(fig_rows, modes))
        print("every run: %s" % os.path.join(args.out, "figures.csv"))
        for path in plots.draw(fig_rows, args.out):
            print("plot: %s" % path)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
