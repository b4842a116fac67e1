# SPDX-License-Identifier: MIT
"""The GPU check of openmps stats (issue #27): 8 clients of B7 (ResNet-18 inference) and one idle
client under one openmps daemon. Between two `openmps stats --json` snapshots each busy client
runs BATCHES batches timed with CUDA events inside it (tests/gpu/stats/timed_worker.py); the GPU
time openmps counts for it in that window must be within 10 % of its events' total, and the idle
client's must be nearly nothing. Prints one line per client and exits 1 when a client is out.

  python3 tests/gpu/stats/check.py [--build build] [--clients 8] [--batches 200]
(scripts/gpu.sh stats runs it.)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--batches", type=int, default=200)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    here = os.path.dirname(os.path.abspath(__file__))
    tmp = tempfile.mkdtemp(prefix="openmps-stats-")
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=os.path.join(tmp, "pipe"),
               CUDA_MPS_LOG_DIRECTORY=os.path.join(tmp, "log"))
    ctl = os.path.join(build, "openmps-control")
    subprocess.run([ctl, "-d"], env=env, check=True)

    def stats():
        out = subprocess.run([os.path.join(build, "openmps"), "stats", "--json"], env=env,
                             check=True, capture_output=True, text=True).stdout
        return {c["pid"]: c for c in json.loads(out)["clients"]}

    def start(*args):
        return subprocess.Popen([os.path.join(build, "openmps"), "run", "--", sys.executable,
                                 os.path.join(here, "timed_worker.py")] + list(args), env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def wait_line(p, want):
        for line in p.stdout:
            if line.strip() == want:
                return
            if line.startswith("events_ms "):
                p.events_ms = float(line.split()[1])
        raise SystemExit("a client ended before %r" % want)

    failed = False
    procs = []
    try:
        busy = [start("busy", str(a.batches)) for _ in range(a.clients)]
        idle = start("idle")
        procs = busy + [idle]
        for p in procs:
            wait_line(p, "warm")
        before = stats()
        t0 = time.time()
        for p in busy:
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in busy:
            wait_line(p, "done")
        wall = time.time() - t0
        after = stats()
        print("%d busy clients x %d batches in %.1f s, one idle client" % (a.clients, a.batches,
                                                                           wall))
        print("%8s %12s %12s %7s %s" % ("pid", "events_ms", "openmps_ms", "ratio", "state"))
        for p in busy:
            got = (after[p.pid]["gpu_time_ns"] - before[p.pid]["gpu_time_ns"]) / 1e6
            ratio = got / p.events_ms if p.events_ms else float("inf")
            ok = 0.9 <= ratio <= 1.1
            failed |= not ok
            print("%8d %12.1f %12.1f %7.3f %s%s" % (p.pid, p.events_ms, got, ratio,
                                                   after[p.pid]["state"], "" if ok else "  OUT"))
        got = (after[idle.pid]["gpu_time_ns"] - before[idle.pid]["gpu_time_ns"]) / 1e6
        ok = got <= 5.0
        failed |= not ok
        print("%8d %12s %12.1f %7s %s (idle)%s" % (idle.pid, "-", got, "-",
                                                   after[idle.pid]["state"], "" if ok else "  OUT"))
        print(json.dumps({"kernels": sum(after[p.pid]["kernels"] for p in busy),
                          "calls_per_s": [after[p.pid]["calls_per_s"] for p in busy]}))
    finally:
        for p in procs:
            try:
                p.stdin.close()
                p.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                p.kill()
        subprocess.run([ctl], input="quit\n", env=env, text=True)
    print("stats check: %s" % ("FAILED" if failed else "passed"))
    return 1 if failed else 0


sys.exit(main())
