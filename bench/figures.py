# SPDX-License-Identifier: MIT
"""B2-B6 (docs/benchmark-definitions.md): runs of bench/calls.cu in one mode, the table of their
figures side by side (bench/run.py starts and stops the modes)."""
import select
import statistics
import subprocess
import time

# figure: (workload, what it is, unit, goal as text, goal test on the openmps median)
FIGURES = {
    "launch_us": ("b2", "asynchronous empty-kernel launch", "us", "<= 4.0", lambda v: v <= 4.0),
    "launch_sync_us": ("b2", "launch + stream synchronize", "us", "<= 12", lambda v: v <= 12),
    "copy4_us": ("b2", "4-byte cudaMemcpy host to device", "us", "<= 8", lambda v: v <= 8),
    "alloc_free_us": ("b2", "cudaMalloc + cudaFree, 1 MiB", "us", "<= 155", lambda v: v <= 155),
    "first_kernel_s": ("b2", "process start to first kernel done", "s", "<= 0.15",
                       lambda v: v <= 0.15),
    "h2d_pinned_gbs": ("b3", "64 MiB host to device, pinned", "GB/s", ">= 50", lambda v: v >= 50),
    "d2h_pinned_gbs": ("b3", "64 MiB device to host, pinned", "GB/s", ">= 50", lambda v: v >= 50),
    "h2d_pageable_gbs": ("b3", "64 MiB host to device, pageable", "GB/s", ">= 12",
                         lambda v: v >= 12),
    "d2h_pageable_gbs": ("b3", "64 MiB device to host, pageable", "GB/s", ">= 12",
                         lambda v: v >= 12),
    "b4_clients_ready": ("b4", "clients served (of those started)", "", "all", None),
    "b4_client_mib": ("b4", "GPU memory per client process (nvidia-smi)", "MiB", "<= 64",
                      lambda v: v <= 64),
    "b4_server_loaded_mib": ("b4", "GPU memory of the server with the clients (their memory "
                             "included)", "MiB", "", None),
    "b4_server_mib": ("b4", "GPU memory of the server once they left", "MiB", "<= 600",
                      lambda v: v <= 600),
    "b5_alone_per_s": ("b5", "launches/s, one client alone", "/s", "", None),
    "b5_agg4_per_s": ("b5", "aggregate launches/s, 4 clients", "/s", ">= 96", lambda v: v >= 96),
    "b5_agg8_per_s": ("b5", "aggregate launches/s, 8 clients", "/s", ">= 96", lambda v: v >= 96),
    "b5_fair8": ("b5", "slowest/fastest client, 8 clients", "x", "<= 1.10", lambda v: v <= 1.10),
    "b5_fair8_mixed": ("b5", "slowest/fastest client, 8 clients, half waiting for each kernel",
                       "x", "<= 1.10", lambda v: v <= 1.10),
    "b5_probe_alone_ms": ("b5", "a normal-priority client's 8-block kernel, alone", "ms", "", None),
    "b5_prio_ratio": ("b5", "its latency while 8 below-normal clients fill the GPU, over alone",
                      "x", "<= 1.5", lambda v: v <= 1.5),
    "b6_alloc_free_ms": ("b6", "B's worst cudaMalloc + cudaFree during A's kernel", "ms", "<= 1",
                         lambda v: v <= 1),
    "b6_host_alloc_free_ms": ("b6", "B's worst cudaMallocHost + cudaFreeHost", "ms", "<= 1",
                              lambda v: v <= 1),
    "b6_first_launch_ms": ("b6", "B's first launch + sync, module loaded", "ms", "<= 1",
                           lambda v: v <= 1),
    "b6_new_module_ms": ("b6", "B's first launch + sync, never-seen module", "ms", "reported",
                         None),
    "b6_overlapped": ("b6", "B's calls all ran during A's kernel (1 = yes)", "", "1",
                      lambda v: v == 1),
}

# B7 (bench/frameworks.py): per N, aggregate images/s; the goal is NVIDIA MPS's anchor on the
# H100 (docs/benchmark-definitions.md; 26 900/s from 16 copies on, 64 served), the slowest copy.
for _n, _anchor in ((1, 5000), (4, 17200), (8, 26800), (16, 26900), (32, 26900), (64, 26900),
                    (128, 26900)):
    FIGURES["b7_n%d_img_s" % _n] = ("b7", "ResNet-18 fp16 batch 8, %d cop%s: images/s"
                                    % (_n, "y" if _n == 1 else "ies"), "/s", ">= %d" % _anchor,
                                    lambda v, a=_anchor: v >= a)
    FIGURES["b7_n%d_window_img_s" % _n] = ("b7", "%d cop%s: images/s over the window (all "
                                           "images / common start to last end)"
                                           % (_n, "y" if _n == 1 else "ies"), "/s", "", None)
    FIGURES["b7_n%d_server_cpu_ms" % _n] = ("b7", "%d cop%s: server CPU per batch"
                                            % (_n, "y" if _n == 1 else "ies"), "ms", "", None)
    FIGURES["b7_n%d_other_cpu_ms" % _n] = ("b7", "%d cop%s: all other CPU (the copies) per batch"
                                           % (_n, "y" if _n == 1 else "ies"), "ms", "", None)
    FIGURES["b7_n%d_served" % _n] = ("b7", "%d copies: copies served (when not all)" % _n, "",
                                     "all", None)
    FIGURES["b7_n%d_slowest_s" % _n] = ("b7", "%d cop%s: slowest copy's 300 batches"
                                        % (_n, "y" if _n == 1 else "ies"), "s", "", None)
    FIGURES["b7_n%d_gpu_mib" % _n] = ("b7", "%d cop%s: GPU memory of all processes (nvidia-smi)"
                                      % (_n, "y" if _n == 1 else "ies"), "MiB", "", None)
    FIGURES["b7_n%d_copy_mib" % _n] = ("b7", "%d cop%s: GPU memory of the largest copy process"
                                       % (_n, "y" if _n == 1 else "ies"), "MiB", "", None)
    FIGURES["b7_n%d_cores_busy" % _n] = ("b7", "%d cop%s: host cores busy (all processes)"
                                         % (_n, "y" if _n == 1 else "ies"), "", "", None)
    FIGURES["b7_n%d_server_cores" % _n] = ("b7", "%d cop%s: host cores the server used"
                                           % (_n, "y" if _n == 1 else "ies"), "", "", None)
    FIGURES["b7_n%d_threads_queued" % _n] = ("b7", "%d cop%s: threads waiting for a core (avg)"
                                             % (_n, "y" if _n == 1 else "ies"), "", "", None)
for _tag, _what in (("b8", "a newcomer (its code seen before)"),
                    ("b8f", "a newcomer loading never-seen images")):
    FIGURES[_tag + "_median_ms"] = ("b8", "8 copies' median batch latency, before " + _what,
                                    "ms", "<= 2.3", lambda v: v <= 2.3)
    FIGURES[_tag + "_worst_before_ms"] = ("b8", "8 copies' worst batch, before " + _what, "ms",
                                          "", None)
    FIGURES[_tag + "_worst_during_ms"] = ("b8", "8 copies' worst batch while " + _what +
                                          " starts", "ms", "<= 10" if _tag == "b8" else "reported",
                                          (lambda v: v <= 10) if _tag == "b8" else None)
    FIGURES[_tag + "_newcomer_s"] = ("b8", "the newcomer's start to first result (" + _what +
                                     ")", "s", "", None)
    FIGURES[_tag + "_newcomer_cuda_s"] = ("b8", "the newcomer's PyTorch import to first result ("
                                          + _what + ")", "s", "", None)
for _n in (1, 2, 4, 8):
    FIGURES["tut_n%d_s" % _n] = ("tut", "tutorial: %d cop%s of 10 matmuls 10000^2, slowest"
                                 % (_n, "y" if _n == 1 else "ies"), "s", "", None)
    FIGURES["tut_n%d_per_s" % _n] = ("tut", "tutorial: %d cop%s, matmuls/s together"
                                     % (_n, "y" if _n == 1 else "ies"), "/s", "", None)


def parse(out):
    vals = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            try:
                vals[parts[0]] = float(parts[1])
            except ValueError:
                pass
        if len(parts) == 4 and parts[0] == "fill_start_ms":
            vals["fill_end_ms"] = float(parts[3])
    return vals


def run_one(cmd, env, timeout=120):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd[1:]), p.returncode,
                                                 (p.stderr.strip().splitlines() or [""])[-1]))
    return parse(p.stdout)


def b2(calls, env):
    vals = run_one([calls, "overheads"], env)
    spawn = time.time_ns()
    vals.update(run_one([calls, "first", str(spawn)], env))
    return {k: vals[k] for k in ("launch_us", "launch_sync_us", "copy4_us", "alloc_free_us",
                                 "first_kernel_s") if k in vals}


def b3(calls, env):
    return run_one([calls, "bandwidth"], env)


def gpu_memory():
    """{pid: MiB} of the processes nvidia-smi lists on the GPU."""
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                          "--format=csv,noheader,nounits"], text=True,
                         stdout=subprocess.PIPE).stdout
    mem = {}
    for line in out.splitlines():
        try:
            pid, mib = [int(x) for x in line.split(",")]
            mem[pid] = mem.get(pid, 0) + mib
        except ValueError:
            pass
    return mem


def b4(calls, env, n):
    procs = [subprocess.Popen([calls, "hold"], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for _ in range(n)]
    try:
        ready, deadline = 0, time.time() + 120
        for p in procs:  # each prints "ready", or exits (refused); a client left waiting is not
            left = deadline - time.time()
            if left > 0 and select.select([p.stdout], [], [], left)[0] and \
                    p.stdout.readline().strip() == "ready":
                ready += 1
        mem = gpu_memory()
        pids = {p.pid for p in procs}
        client = max([mem.get(pid, 0) for pid in pids] or [0])
        others = sum(m for pid, m in mem.items() if pid not in pids)
    finally:
        for p in procs:
            try:
                p.stdin.close()
            except OSError:
                pass
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
    time.sleep(2)  # the server frees what the clients held
    pids = {p.pid for p in procs}
    idle = sum(m for pid, m in gpu_memory().items() if pid not in pids)
    return {"b4_clients_ready": ready, "b4_clients_started": n, "b4_client_mib": client,
            "b4_server_loaded_mib": others, "b4_server_mib": idle}


def fill_round(calls, env, n, iters, mixed=False):
    """n clients of 20 B5 kernels from one instant: aggregate kernels/s and the slowest
    client's time over the fastest's. mixed: half of them wait for each kernel before the next
    (launch rates that differ)."""
    start = int(time.time() * 1000) + 2000 + 60 * n
    procs = [subprocess.Popen([calls, "fill", str(iters), str(start)] +
                              (["sync"] if mixed and i % 2 else []), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(n)]
    spans = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        v = parse(out)
        if p.returncode != 0 or "fill_end_ms" not in v:
            raise RuntimeError("fill: %s" % (err.strip().splitlines() or ["no output"])[-1])
        spans.append((v["fill_start_ms"], v["fill_end_ms"]))
    total = max(e for _, e in spans) - min(s for s, _ in spans)
    each = [e - s for s, e in spans]
    return 20.0 * n / (total / 1000.0), max(each) / min(each)


def probe_latency(calls, env, iters, start):
    v = run_one([calls, "probe", str(iters), str(start)], env)
    return v["probe_median_ms"]


def b5_priority(calls, env, iters):
    """A normal-priority client's kernel latency (8 blocks, about 1 ms: the probe) alone, and
    while 8 clients of below normal priority (CUDA_MPS_CLIENT_PRIORITY=1) fill the GPU with
    B5's kernels: the ratio."""
    probe_iters = max(1, iters // 12)
    alone = probe_latency(calls, env, probe_iters, 0)
    low = dict(env, CUDA_MPS_CLIENT_PRIORITY="1")
    start = int(time.time() * 1000) + 2000 + 60 * 8
    procs = [subprocess.Popen([calls, "fill", str(iters), str(start)], env=low,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(8)]
    try:
        loaded = probe_latency(calls, env, probe_iters, start + 300)
    finally:
        for p in procs:
            p.communicate(timeout=120)
    return alone, loaded / alone


def b5(calls, env, iters):
    alone, _ = fill_round(calls, env, 1, iters)
    agg4, _ = fill_round(calls, env, 4, iters)
    agg8, fair8 = fill_round(calls, env, 8, iters)
    _, mixed8 = fill_round(calls, env, 8, iters, mixed=True)
    probe_alone, prio = b5_priority(calls, env, iters)
    return {"b5_alone_per_s": alone, "b5_agg4_per_s": agg4, "b5_agg8_per_s": agg8,
            "b5_fair8": fair8, "b5_fair8_mixed": mixed8, "b5_probe_alone_ms": probe_alone,
            "b5_prio_ratio": prio}


def b6(calls, calls_fresh, env, long_iters):
    a = subprocess.Popen([calls, "long", str(long_iters)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        if a.stdout.readline().strip() != "launched":
            raise RuntimeError("b6: client A did not launch")
        time.sleep(0.3)  # A's kernel is running
        loaded = run_one([calls, "isolation"], env)
        fresh = run_one([calls_fresh, "isolation"], env)
        out, _ = a.communicate(timeout=120)
    finally:
        if a.poll() is None:
            a.kill()
    a_done = parse(out).get("a_done_ms", 0)
    return {"b6_alloc_free_ms": max(loaded["alloc_free_worst_ms"], fresh["alloc_free_worst_ms"]),
            "b6_host_alloc_free_ms": max(loaded["host_alloc_free_worst_ms"],
                                         fresh["host_alloc_free_worst_ms"]),
            "b6_first_launch_ms": loaded["first_launch_sync_ms"],
            "b6_new_module_ms": fresh["first_launch_sync_ms"],
            "b6_overlapped": 1 if max(loaded["b_done_ms"], fresh["b_done_ms"]) < a_done else 0}


def table(rows, modes):
    """rows: dicts with workload, mode, figure, value. One line per figure: the median per mode
    with the spread [min-max] of its runs, openmps over native and over NVIDIA MPS (medians),
    the goal and whether the openmps median meets it."""
    cols = ["figure", "unit"] + modes + ["vs native", "vs MPS", "goal", "met"]
    out = [cols]
    for name, (w, title, unit, goal, ok) in FIGURES.items():
        med, spread = {}, {}
        for m in modes:
            v = [r["value"] for r in rows if r["figure"] == name and r["mode"] == m]
            if v:
                med[m] = statistics.median(v)
                if min(v) != max(v):
                    spread[m] = " [%.3g-%.3g]" % (min(v), max(v))
        if not med:
            continue
        cell = lambda m: ("%.3g%s" % (med[m], spread.get(m, ""))) if m in med else "-"
        if name == "b4_clients_ready":
            started = {r["mode"]: r["value"] for r in rows if r["figure"] == "b4_clients_started"}
            cell = lambda m: ("%d/%d" % (med[m], started.get(m, 0))) if m in med else "-"
        ratio = lambda ref: ("%.2f" % (med["openmps"] / med[ref])
                             if "openmps" in med and med.get(ref) else "-")
        met = "-"
        if ok and "openmps" in med:
            met = "yes" if ok(med["openmps"]) else "NO"
        if name == "b4_clients_ready" and "openmps" in med:
            met = "yes" if med["openmps"] == started.get("openmps") else "NO"
        out.append(["%s %s" % (w.upper(), title), unit] + [cell(m) for m in modes] +
                   [ratio("native"), ratio("mps"), goal, met])
    widths = [max(len(str(r[i])) for r in out) for i in range(len(cols))]
    return "\n".join("  ".join(str(c).ljust(wd) for c, wd in zip(r, widths)) for r in out)
