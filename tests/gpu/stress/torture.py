#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Crash torture (issue #9): clients killed with SIGKILL at random instants while a few others
run checked work. The server must stay up (one pid throughout), the survivors' results must be
right, and the server's memory, descriptors and threads must come back to what they were.

  python3 tests/gpu/stress/torture.py [--build build] [--out DIR] [--fake]

Settings (environment): TORTURE_KILLS (1000) victims to kill, TORTURE_SECONDS (210) at most
for the killing, TORTURE_PARALLEL (32) victims at once, TORTURE_SURVIVORS (4),
TORTURE_MAX_DELAY_MS (300): a victim is killed after a random delay up to this, one in ten
after 0-2 ms (mid-handshake); TORTURE_SETTLE (10) seconds of quiet before each measurement;
tolerances TORTURE_TOL_RSS_MIB (32), _SHMEM_MIB (8), _GPU_MIB (64), _FDS (2), _THREADS (2).
Victim modes: launch pageable staged pinned module alloc streams mixed rt (rt: the runtime
API; not with --fake). Writes DIR/victims.csv, samples.csv, summary.txt, the daemon's logs.
Exit status 0 when everything held."""
import csv
import os
import random
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stresslib as sl  # noqa: E402

MODES = ["launch", "pageable", "staged", "pinned", "module", "alloc", "streams", "mixed", "rt"]


def settings():
    return {
        "kills": sl.env_int("TORTURE_KILLS", 1000),
        "seconds": sl.env_float("TORTURE_SECONDS", 210),
        "parallel": sl.env_int("TORTURE_PARALLEL", 32),
        "survivors": sl.env_int("TORTURE_SURVIVORS", 4),
        "max_delay_ms": sl.env_float("TORTURE_MAX_DELAY_MS", 300),
        "settle": sl.env_float("TORTURE_SETTLE", 10),
        "tol": sl.idle_tolerances("TORTURE_TOL"),
    }


def phase_of(lines):
    """How far a victim got before it died: its markers (stress.cu)."""
    if sl.field(lines, "ready"):
        return "working"
    if sl.field(lines, "up"):
        return "first-op"
    if sl.field(lines, "start"):
        return "init"
    return "exec"


def main():
    ap = sl.base_args(__doc__.split("\n")[0], os.path.join(os.getcwd(), "torture-out"))
    args = ap.parse_args()
    cfg = settings()
    modes = [m for m in MODES if not (args.fake and m == "rt")]
    if args.dry_config:
        print("torture settings: %r\nmodes: %s" % (cfg, " ".join(modes)))
        return 0
    sl.rand_seed()
    h = sl.Harness(args, "torture")
    summary = []
    verdicts = []  # (check, ok, detail)
    try:
        return run(h, cfg, modes, summary, verdicts)
    except sl.Stop as e:
        h.say("torture: stopped by %s" % e)
        verdicts.append(("completed", False, "stopped by %s" % e))
        return 1
    finally:
        h.stop_daemon()
        write_summary(h, summary, verdicts)
        h.cleanup()


def write_summary(h, summary, verdicts):
    lines = list(summary)
    lines.append("")
    lines.append(sl.table([[c, "PASS" if ok else "FAIL", d] for c, ok, d in verdicts],
                          ["check", "result", "detail"]))
    ok = verdicts and all(v[1] for v in verdicts)
    lines.append("")
    lines.append("TORTURE %s" % ("PASS" if ok else "FAIL"))
    text = "\n".join(lines)
    with open(os.path.join(h.out, "summary.txt"), "w") as f:
        f.write(text + "\n")
    print(text, flush=True)
    h.note(text)


def run(h, cfg, modes, summary, verdicts):
    t_start = time.time()
    h.build_stress()
    h.start_daemon()
    vdir = os.path.join(h.tmp, "v")
    os.makedirs(vdir)

    # Warm-up: a burst at least as wide as the torture's, every mode a few iterations, all must
    # pass; the server's pools, module images and caches grow here, so that the baseline is
    # their level. At least 72 at once: the server keeps up to 64 pinned reply buffers of
    # 512 KiB for its next sessions (replybuf.c), and killed sessions still being freed add to
    # the torture's own width.
    nwarm = max(cfg["parallel"] + cfg["survivors"], 72)
    specs = [(modes[i % len(modes)], ["--iters", "3"], os.path.join(vdir, "warm%d" % i))
             for i in range(nwarm)]
    spid, before = sl.warm_up_and_baseline(h, specs, cfg["settle"], verdicts, 300)
    if spid is None:
        return 1

    sampler = sl.Sampler(h, os.path.join(h.out, "samples.csv"), 2.0)
    sampler.start()

    # Survivors: checked work until the stop file appears.
    stop = os.path.join(h.tmp, "stop")
    surv = []
    smodes = ["mixed"] * max(cfg["survivors"], 0)
    if smodes and "rt" in modes:
        smodes[-1] = "rt"
    for i, m in enumerate(smodes):
        out = os.path.join(h.out, "survivor%d.out" % i)
        surv.append((h.client(m, ["--stop", stop, "--max-mib", "32"], out), m, out))

    # Victims.
    vf = open(os.path.join(h.out, "victims.csv"), "w", newline="")
    vw = csv.writer(vf)
    vw.writerow(["n", "mode", "pid", "delay_ms", "killed_at_ms", "phase", "outcome", "last"])
    running = {}  # slot -> (proc, mode, n, t0, delay)
    st = {"started": 0, "killed": 0, "self_exit": 0}
    phases = {}
    bad_victims = []
    server_changes = []
    aborted = None
    lateness = []

    def sweep():
        """Kills the victims whose time has come, records those gone."""
        tnow = sl.now()
        for slot in list(running):
            p, mode, k, ts, delay = running[slot]
            rc = p.poll()
            after = (tnow - ts) * 1000
            if rc is None and after >= delay:
                try:
                    p.send_signal(signal.SIGKILL)
                except OSError:
                    pass
                p.wait()
                rc = p.returncode
                outcome = "killed" if rc == -signal.SIGKILL else "exit %s" % rc
            elif rc is None:
                continue
            else:
                outcome = "exit %s (before its kill)" % rc
            lateness.append(after - delay)
            lines = sl.read_lines(os.path.join(vdir, "slot%d" % slot))
            ph = phase_of(lines)
            if outcome == "killed":
                st["killed"] += 1
            else:
                st["self_exit"] += 1
                bad_victims.append("victim %d (%s, pid %d) %s: %s" % (k, mode, p.pid, outcome,
                                                                     " | ".join(lines[-3:])))
            phases[(mode, ph)] = phases.get((mode, ph), 0) + 1
            vw.writerow([k, mode, p.pid, "%.1f" % delay, "%.1f" % after, ph, outcome,
                         lines[-1][:200] if lines else ""])
            del running[slot]

    t0 = sl.now()
    last_check = 0.0
    deadline = t0 + cfg["seconds"]
    while True:
        tnow = sl.now()
        # The server: the same process all along.
        if tnow - last_check >= 1.0:
            last_check = tnow
            if not sl.pid_alive(spid):
                server_changes.append("%.1f s: server %d is gone (now %r)"
                                      % (tnow - t0, spid, h.servers()))
                break
            if sampler.abort:
                aborted = sampler.abort
                h.say("torture: stopping early: " + aborted)
                break
        sweep()
        if st["started"] >= cfg["kills"] and not running:
            break
        if tnow >= deadline:
            if not running:
                break
        else:
            for slot in range(cfg["parallel"]):
                if slot in running or st["started"] >= cfg["kills"]:
                    continue
                n = st["started"]
                mode = modes[n % len(modes)]
                delay = (random.uniform(0, 2) if random.random() < 0.1
                         else random.uniform(0, cfg["max_delay_ms"]))
                p = h.client(mode, [], os.path.join(vdir, "slot%d" % slot))
                running[slot] = (p, mode, n, sl.now(), delay)
                st["started"] += 1
                sweep()  # between starts too: a short delay is kept even in a burst
        time.sleep(0.001)
    for slot in list(running):  # left by an early stop
        p = running[slot][0]
        p.kill()
        p.wait()
    vf.close()
    t_kill = sl.now() - t0
    started, killed, self_exit = st["started"], st["killed"], st["self_exit"]
    h.say("victims: %d started, %d killed, %d exited by themselves, in %.1f s"
          % (started, killed, self_exit, t_kill))
    for b in bad_victims[:20]:
        h.say("  " + b)

    # The survivors finish their iteration and check it.
    open(stop, "w").close()
    surv_rows, surv_ok = [], True
    for p, m, out in surv:
        try:
            rc = p.wait(timeout=120)
        except Exception:
            p.kill()
            rc = "hung"
        lines = sl.read_lines(out)
        okl = [l for l in lines if l.startswith("ok ")]
        good = rc == 0 and bool(okl)
        surv_ok = surv_ok and good
        surv_rows.append([str(p.pid), m, str(rc), okl[0] if okl else " | ".join(lines[-2:])])

    alive = sl.pid_alive(spid)
    servers_now = h.servers()
    same_server = alive and servers_now == [spid] and not server_changes
    # Quiet: no clients, then the settle time, then three samples 2 s apart (the last counts).
    if alive:
        h.wait_no_clients(spid, 60)
    time.sleep(cfg["settle"])
    after = None
    for _ in range(3):
        after = h.sample(spid if alive else None)
        time.sleep(2)
    sampler.stop()

    # A fresh client after all that: still served, results right.
    post = os.path.join(h.out, "post.out")
    p = h.client("mixed", ["--iters", "30", "--max-mib", "32"], post)
    try:
        prc = p.wait(timeout=300)
    except Exception:
        p.kill()
        prc = "hung"
    probe_out = os.path.join(h.out, "post_probe.out")
    q = h.client("probe", [], probe_out)
    try:
        qrc = q.wait(timeout=120)
    except Exception:
        q.kill()
        qrc = "hung"
    post_same = h.servers() == [spid]

    # The figures.
    rows, res_ok = sl.compare(before, after, cfg["tol"])
    slog = h.log_text("server.log")
    clog = h.log_text("control.log")
    summary.append("torture: %s, %s" % (time.strftime("%Y-%m-%d %H:%M:%S"),
                                        "FAKE driver" if h.args.fake else "GPU"))
    summary.append("settings: kills %d, budget %.0f s, %d at once, %d survivors, delay 0-%.0f ms"
                   " (10%% at 0-2 ms), settle %.0f s"
                   % (cfg["kills"], cfg["seconds"], cfg["parallel"], cfg["survivors"],
                      cfg["max_delay_ms"], cfg["settle"]))
    summary.append("victims: %d started, %d killed, %d exited by themselves; killing took "
                   "%.1f s; whole run %.0f s" % (started, killed, self_exit, t_kill,
                                                 time.time() - t_start))
    if lateness:
        lateness.sort()
        summary.append("kills came %.1f ms after their planned instant (median; 95th percentile "
                       "%.1f ms, the poll loop's and process starts' delay)"
                       % (lateness[len(lateness) // 2], lateness[int(len(lateness) * 0.95)]))
    prow = []
    for m in modes:
        prow.append([m] + [str(phases.get((m, ph), 0))
                           for ph in ("exec", "init", "first-op", "working")])
    summary.append("")
    summary.append("where the victims were when killed (exec: before main; init: in cuInit / "
                   "the handshake / module load; first-op: before the first checked iteration "
                   "ended; working: later):")
    summary.append(sl.table(prow, ["mode", "exec", "init", "first-op", "working"]))
    summary.append("")
    summary.append("survivors:")
    summary.append(sl.table(surv_rows, ["pid", "mode", "exit", "result"]))
    summary.append("")
    summary.append("server %d, before (after warm-up) and after (no clients, %.0f s settled):"
                   % (spid, cfg["settle"]))
    summary.append(sl.table(rows, ["figure", "before", "after", "delta", "tolerance", "ok"]))
    summary.append("descriptors by kind, before: %s; after: %s" % (sl.fd_line(before),
                                                                   sl.fd_line(after)))
    summary.append("")
    summary.append("server.log: %d sessions connected, %d disconnected, %d ERROR lines, "
                   "%d WARN lines; control.log: %d ERROR lines"
                   % (slog.count("connected (client id"), slog.count(" disconnected ("),
                      slog.count("ERROR:"), slog.count("WARN:"), clog.count("ERROR:")))
    verdicts.append(("server stayed up", same_server,
                     "pid %d; now %r%s" % (spid, servers_now,
                                           "; " + "; ".join(server_changes) if server_changes
                                           else "")))
    verdicts.append(("victims killed", killed >= min(cfg["kills"], 1) and self_exit == 0,
                     "%d killed (target %d), %d exited by themselves" % (killed, cfg["kills"],
                                                                         self_exit)))
    verdicts.append(("survivors' results", surv_ok and bool(surv),
                     "%d of %d ok" % (sum(1 for r in surv_rows if r[2] == "0"), len(surv))))
    verdicts.append(("resources back to baseline", res_ok, "see the table"))
    if aborted:
        verdicts.append(("stayed within the machine's limits", False, aborted))
    verdicts.append(("a new client afterwards", prc == 0 and qrc == 0 and post_same,
                     "mixed exit %s, probe exit %s, server %r" % (prc, qrc, h.servers())))
    return 0 if all(v[1] for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
