#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Soak (issue #9): SOAK_SLOTS slots (128), each running one client after another, each client
a random short life of mixed checked work (launches, copies of every kind, allocations and
frees, streams and events, module loads; a quarter use the runtime API), for SOAK_SECONDS (600).
The server is sampled every 2 s (VmRSS, RssShmem, descriptors, threads, its GPU memory and the
GPU's) into soak.csv. Halfway, every client is let finish and the idle server is sampled. At
the end: any client error fails; the last minute of each half must agree within tolerances
(flat); the idle figures after the soak must equal those halfway (the second half's work adds
nothing; the first half's growth of the driver's and the server's pools to their high-water
mark is reported, after a warm-up burst of SOAK_SLOTS clients); a plot (soak.png) when
matplotlib is there. Writes OUT/summary.txt and then OUT/done (also after a failure).

  python3 tests/gpu/stress/soak.py [--build build] [--out DIR] [--seconds S] [--fake]

Settings (environment): SOAK_SECONDS (600; --seconds overrides), SOAK_SLOTS (128),
SOAK_LIFE_MIN / SOAK_LIFE_MAX (2 / 20 s), SOAK_PAUSE_MS (5: a random pause up to this between
a client's operations), SOAK_MAX_MIB (16: the largest buffer of a client), SOAK_PERIOD (2 s),
SOAK_SETTLE (10 s). Flatness: the second half's last-minute mean <= the first half's + max(floor,
SOAK_TOL_PCT (10) % of it), floors RSS 64, RssShmem 64, GPU 256 MiB, 64 fds, 32 threads. Idle
halfway/after:
SOAK_IDLE_TOL_RSS_MIB (32), _SHMEM_MIB (8), _GPU_MIB (64), _FDS (2), _THREADS (2)."""
import csv
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stresslib as sl  # noqa: E402

FLAT_FLOORS = {"rss_mib": 64, "shmem_mib": 64, "gpu_server_mib": 256, "gpu_total_mib": 256,
               "fds": 64, "threads": 32}


def settings(args):
    return {
        "seconds": args.seconds if args.seconds is not None else sl.env_float("SOAK_SECONDS", 600),
        "slots": sl.env_int("SOAK_SLOTS", 128),
        "life_min": sl.env_float("SOAK_LIFE_MIN", 2),
        "life_max": sl.env_float("SOAK_LIFE_MAX", 20),
        "pause_ms": sl.env_int("SOAK_PAUSE_MS", 5),
        "max_mib": sl.env_int("SOAK_MAX_MIB", 16),
        "period": sl.env_float("SOAK_PERIOD", 2),
        "settle": sl.env_float("SOAK_SETTLE", 10),
        "tol_pct": sl.env_float("SOAK_TOL_PCT", 10),
        "idle_tol": sl.idle_tolerances("SOAK_IDLE_TOL"),
    }


def main():
    ap = sl.base_args(__doc__.split("\n")[0], os.path.join(os.getcwd(), "soak-out"))
    ap.add_argument("--seconds", type=float, default=None, help="the soak's length")
    args = ap.parse_args()
    cfg = settings(args)
    if args.dry_config:
        print("soak settings: %r" % cfg)
        return 0
    sl.rand_seed()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    for f in ("done", "summary.txt"):
        try:
            os.unlink(os.path.join(out, f))
        except OSError:
            pass
    h = None
    summary, verdicts = [], []
    try:
        h = sl.Harness(args, "soak")
        return run(h, cfg, summary, verdicts)
    except sl.Stop as e:
        verdicts.append(("completed", False, "stopped by %s" % e))
        return 1
    except BaseException as e:  # the summary and the done marker come whatever happened
        verdicts.append(("completed", False, "%s: %s" % (type(e).__name__, e)))
        raise
    finally:
        if h:
            h.stop_daemon()
        lines = list(summary) + [""]
        lines.append(sl.table([[c, "PASS" if ok else "FAIL", d] for c, ok, d in verdicts],
                              ["check", "result", "detail"]))
        ok = bool(verdicts) and all(v[1] for v in verdicts)
        lines += ["", "SOAK %s" % ("PASS" if ok else "FAIL")]
        text = "\n".join(lines)
        with open(os.path.join(out, "summary.txt"), "w") as f:
            f.write(text + "\n")
        print(text, flush=True)
        if h:
            h.note(text)
            h.cleanup()
        with open(os.path.join(out, "done"), "w") as f:
            f.write("%s %s\n" % (time.strftime("%Y-%m-%d %H:%M:%S"), "PASS" if ok else "FAIL"))


def window_mean(samples, k, lo, hi):
    v = [s[k] for s in samples if lo <= s["t"] < hi and s.get(k) is not None]
    return (sum(v) / len(v), len(v)) if v else (None, 0)


def slope_per_10min(samples, k):
    pts = [(s["t"], s[k]) for s in samples if s.get(k) is not None]
    if len(pts) < 3:
        return None
    n = len(pts)
    mt = sum(t for t, _ in pts) / n
    mv = sum(v for _, v in pts) / n
    den = sum((t - mt) ** 2 for t, _ in pts)
    return sum((t - mt) * (v - mv) for t, v in pts) / den * 600 if den else None


def plot(samples, path, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:
        return "no plot: matplotlib is not available (%s)" % e
    t = [s["t"] for s in samples]

    def series(k):
        return [s.get(k) if s.get(k) is not None else float("nan") for s in samples]
    fig, ax = plt.subplots(4, 1, figsize=(10, 11), sharex=True)
    ax[0].plot(t, series("rss_mib"), label="VmRSS")
    ax[0].plot(t, series("shmem_mib"), label="RssShmem")
    ax[0].set_ylabel("server host memory (MiB)")
    ax[1].plot(t, series("gpu_server_mib"), label="server (nvidia-smi)")
    ax[1].plot(t, series("gpu_total_mib"), label="GPU in use")
    ax[1].set_ylabel("GPU memory (MiB)")
    ax[2].plot(t, series("fds"), label="open descriptors")
    ax[2].plot(t, series("threads"), label="threads")
    ax[2].set_ylabel("server")
    ax[3].plot(t, series("running"), label="clients running")
    ax[3].set_ylabel("clients")
    ax[3].set_xlabel("seconds since the soak started")
    for a in ax:
        a.legend(loc="upper left", fontsize=8)
        a.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    return "plot: %s" % path


def run(h, cfg, summary, verdicts):
    t_start = time.time()
    gpu = not h.args.fake
    h.build_stress()
    h.start_daemon()
    cdir = os.path.join(h.tmp, "c")
    os.makedirs(cdir)
    fdir = os.path.join(h.out, "failures")
    extra = ["--pause-ms", str(cfg["pause_ms"]), "--max-mib", str(cfg["max_mib"])]

    def pick_mode():
        return "rt" if gpu and random.random() < 0.25 else "mixed"

    # Warm-up: every slot at once, a few iterations, so that the baseline is the grown level.
    specs = [("rt" if gpu and i % 4 == 3 else "mixed", ["--iters", "3"] + extra,
              os.path.join(cdir, "warm%d" % i)) for i in range(cfg["slots"])]
    spid, idle_before = sl.warm_up_and_baseline(h, specs, cfg["settle"], verdicts, 600)
    if spid is None:
        return 1

    counts = {"started": 0, "ok": 0, "failed": 0, "running": 0}
    sampler = sl.Sampler(h, os.path.join(h.out, "soak.csv"), cfg["period"],
                         extra=lambda: dict(counts))
    cf = open(os.path.join(h.out, "clients.csv"), "w", newline="")
    cw = csv.writer(cf)
    cw.writerow(["n", "slot", "mode", "pid", "life_s", "start_s", "end_s", "exit", "result"])
    slots = {}
    failures = []
    n = 0
    t0 = sl.now()
    sampler.t0 = t0
    sampler.start()
    end = t0 + cfg["seconds"]
    # Halfway, every client is let finish and the idle server is sampled once more: the second
    # half's idle figures against these tell a leak (it grows with the work done) from pools
    # that reach their high-water mark in the first minutes (the driver's stream and event
    # pools, the server's kept reply buffers, the heap's arenas).
    mid = t0 + cfg["seconds"] / 2.0
    mid_state = {"done": False, "draining": False, "idle": None, "pause": 0.0, "at": None}
    server_gone = None
    aborted = None

    def reap(slot, force=False):
        p, mode, k, ts, life = slots[slot]
        rc = p.poll()
        hung = False
        if rc is None:
            if not force and sl.now() - ts < life + 120:
                return False
            p.kill()
            p.wait()
            rc = p.returncode
            hung = True
        o = os.path.join(cdir, "slot%d" % slot)
        lines = sl.read_lines(o)
        okl = [l for l in lines if l.startswith("ok ")]
        good = rc == 0 and bool(okl) and not hung
        counts["ok" if good else "failed"] += 1
        res = okl[0] if okl else ("hung, killed" if hung else " | ".join(lines[-2:]))
        cw.writerow([k, slot, mode, p.pid, "%.1f" % life, "%.1f" % (ts - t0),
                     "%.1f" % (sl.now() - t0), rc, res[:200]])
        if not good:
            failures.append("client %d (%s, pid %d, %.1f s after start): exit %s: %s"
                            % (k, mode, p.pid, ts - t0, rc, " | ".join(lines[-4:])))
            if len(failures) <= 50:
                os.makedirs(fdir, exist_ok=True)
                with open(os.path.join(fdir, "client%d.txt" % k), "w") as f:
                    f.write("\n".join(lines) + "\n")
        del slots[slot]
        counts["running"] = len(slots)
        return True

    last_check = 0.0
    while True:
        tnow = sl.now()
        if tnow - last_check >= 1.0:
            last_check = tnow
            if not sl.pid_alive(spid):
                server_gone = "%.1f s: server %d is gone (now %r)" % (tnow - t0, spid,
                                                                     h.servers())
                h.say(server_gone)
                break
            if sampler.abort:
                aborted = "%.1f s: %s" % (tnow - t0, sampler.abort)
                h.say("soak: stopping early: " + aborted)
                break
        for slot in list(slots):
            reap(slot)
        if not mid_state["done"] and tnow >= mid:
            mid_state["draining"] = True
            if not slots:
                t_pause = sl.now()
                h.wait_no_clients(spid, 60)
                time.sleep(cfg["settle"])
                mid_state["idle"] = h.sample(spid)
                mid_state["at"] = t_pause - t0
                mid_state["pause"] = sl.now() - t_pause
                end += mid_state["pause"]
                mid_state["done"], mid_state["draining"] = True, False
                h.say("halfway, idle (%.0f s of work done): %s" % (t_pause - t0, ", ".join(
                    "%s %s" % (k, sl.fmt(mid_state["idle"][k])) for k in sl.METRICS)))
            time.sleep(0.05)
            continue
        if tnow >= end:
            if not slots:
                break
        else:
            for slot in range(cfg["slots"]):
                if slot in slots:
                    continue
                life = random.uniform(cfg["life_min"], cfg["life_max"])
                life = min(life, max(0.5, (end if mid_state["done"] else mid) - tnow))
                mode = pick_mode()
                o = os.path.join(cdir, "slot%d" % slot)
                p = h.client(mode, ["--seconds", "%.2f" % life] + extra, o)
                slots[slot] = (p, mode, n, sl.now(), life)
                n += 1
                counts["started"] += 1
                counts["running"] = len(slots)
        time.sleep(0.05)
    for slot in list(slots):
        reap(slot, force=True)
    t_soak = sl.now() - t0
    alive = sl.pid_alive(spid)
    if alive:
        h.wait_no_clients(spid, 60)
        time.sleep(cfg["settle"])
    idle_after = h.sample(spid if alive else None)
    sampler.stop()
    cf.close()

    samples = sampler.samples
    T = cfg["seconds"] + mid_state["pause"]
    H = mid_state["at"] if mid_state["at"] is not None else T / 2.0
    win = 60.0 if cfg["seconds"] >= 240 else cfg["seconds"] / 6.0
    flat_rows, flat_ok = [], True
    for k in sl.METRICS:
        # the last minute of each half: both past the first minutes' growth of the pools
        first, nf = window_mean(samples, k, H - win, H + 0.5)
        last, nl = window_mean(samples, k, T - win, T + 0.5)  # not the drain after it
        sl_ = slope_per_10min([s for s in samples if s["t"] <= T], k)
        if first is None or last is None:
            flat_rows.append([k, sl.fmt(first), sl.fmt(last), "n/a", "n/a", sl.fmt(sl_), "n/a"])
            continue
        tol = max(FLAT_FLOORS[k], cfg["tol_pct"] / 100.0 * first)
        good = last <= first + tol
        flat_ok = flat_ok and good
        flat_rows.append([k, "%.1f" % first, "%.1f" % last, "%+.1f" % (last - first),
                          "+%.1f" % tol, sl.fmt(sl_), "ok" if good else "FAIL"])
    idle_rows, idle_ok = sl.compare(mid_state["idle"] or idle_before, idle_after,
                                    cfg["idle_tol"])
    warm_rows, _ = sl.compare(idle_before, mid_state["idle"] or idle_before, cfg["idle_tol"])
    try:
        plot_msg = plot(samples, os.path.join(h.out, "soak.png"),
                        "openmps soak: %d slots, %.0f s (%s)"
                        % (cfg["slots"], T, "fake" if h.args.fake else "GPU"))
    except Exception as e:  # the figures matter more than the picture
        plot_msg = "no plot: %s: %s" % (type(e).__name__, e)
    slog = h.log_text("server.log")
    clog = h.log_text("control.log")

    summary.append("soak: %s, %s" % (time.strftime("%Y-%m-%d %H:%M:%S"),
                                     "FAKE driver" if h.args.fake else "GPU"))
    summary.append("settings: %d slots, %.0f s, lives %.0f-%.0f s, pause up to %d ms, buffers up "
                   "to %d MiB, sample every %.0f s" % (cfg["slots"], T, cfg["life_min"],
                                                       cfg["life_max"], cfg["pause_ms"],
                                                       cfg["max_mib"], cfg["period"]))
    summary.append("clients: %d started, %d ok, %d failed; soak %.0f s, whole run %.0f s; "
                   "%d samples" % (counts["started"], counts["ok"], counts["failed"], t_soak,
                                   time.time() - t_start, len(samples)))
    summary.append("")
    summary.append("during the soak: mean of the last %.0f s of each half (flat: second <= "
                   "first + tolerance); slope: least squares, per 10 min" % win)
    summary.append(sl.table(flat_rows, ["figure", "first", "last", "delta", "tolerance",
                                        "slope/10min", "ok"]))
    summary.append("")
    summary.append("server %d with no clients, halfway (after %.0f s of work) and after the "
                   "soak: what grows with the work done" % (spid, H))
    summary.append(sl.table(idle_rows, ["figure", "halfway", "after", "delta", "tolerance", "ok"]))
    summary.append("")
    summary.append("the same, after the warm-up and halfway (the pools' growth to their "
                   "high-water mark in the first half; for the record, not a verdict):")
    summary.append(sl.table(warm_rows, ["figure", "warm-up", "halfway", "delta", "tolerance",
                                        "within"]))
    summary.append("descriptors by kind, before: %s; after: %s" % (sl.fd_line(idle_before),
                                                                   sl.fd_line(idle_after)))
    summary.append("")
    summary.append("server.log: %d sessions connected, %d disconnected, %d ERROR lines, "
                   "%d WARN lines; control.log: %d ERROR lines"
                   % (slog.count("connected (client id"), slog.count(" disconnected ("),
                      slog.count("ERROR:"), slog.count("WARN:"), clog.count("ERROR:")))
    summary.append(plot_msg)
    for f in failures[:10]:
        summary.append("failure: " + f[:400])
    verdicts.append(("server stayed up", alive and not server_gone and h.servers() == [spid],
                     server_gone or "pid %d" % spid))
    verdicts.append(("client errors", counts["failed"] == 0 and counts["ok"] > 0,
                     "%d failed of %d" % (counts["failed"], counts["started"])))
    verdicts.append(("flat during the soak", flat_ok, "last %.0f s of each half" % win))
    verdicts.append(("idle figures: second half adds nothing", idle_ok, "see the table"))
    if aborted:
        verdicts.append(("stayed within the machine's limits", False, aborted))
    return 0 if all(v[1] for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
