# SPDX-License-Identifier: MIT
"""B7, B8, the tutorial's PyTorch run (docs/benchmark-definitions.md): copies of bench/torch_worker.py
in one mode (bench/run.py starts and stops the modes). Each function returns its figures as a
dict (name -> value); a copy that fails raises RuntimeError with its last error line, except
where a refusal is itself the figure (NVIDIA MPS past 48 clients: the copies served count)."""
import os
import select
import statistics
import subprocess
import sys
import time

import figures
import schedsample

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "torch_worker.py")
PYTHON = os.environ.get("BENCH_PYTHON", sys.executable)


def have_torch():
    """None when PyTorch and torchvision import, otherwise why not."""
    r = subprocess.run([PYTHON, "-c", "import torch, torchvision"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[-1]


class Pool:
    """N copies of one role; each says "ready" after its warm-up, then runs a round per start
    instant it is given."""

    def __init__(self, n, args, env, ready_s=None, sessions=False):
        self.procs = [subprocess.Popen([PYTHON, WORKER] + args, env=env, stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       start_new_session=sessions)
                      for _ in range(n)]
        self.errors = []
        ready_by = time.time() + (ready_s or 120 + 3 * n)
        self.ready = []
        for p in self.procs:
            left = max(0.0, ready_by - time.time())
            if select.select([p.stdout], [], [], left)[0] and p.stdout.readline().strip() == "ready":
                self.ready.append(p)

    def start(self, delay=0.5):
        """Gives every ready copy one start instant; returns it (seconds since the epoch)."""
        at = time.time() + delay
        for p in self.ready:
            p.stdin.write("%d\n" % int(at * 1000))
            p.stdin.flush()
        return at

    def lines(self, p, prefix, count, timeout):
        got, deadline = [], time.time() + timeout
        while len(got) < count:
            left = deadline - time.time()
            if left <= 0 or not select.select([p.stdout], [], [], left)[0]:
                raise RuntimeError("a copy gave no %r line in %.0f s" % (prefix, timeout))
            line = p.stdout.readline()
            if not line:
                raise RuntimeError("a copy ended: " + self.last_error(p))
            if line.startswith(prefix):
                got.append(line.split())
        return got

    def last_error(self, p):
        try:
            p.wait(timeout=10)
            return ((p.stderr.read() or "").strip().splitlines() or ["exit %s" % p.returncode])[-1][:200]
        except subprocess.TimeoutExpired:
            return "still running"

    def close(self):
        for p in self.procs:
            try:
                p.stdin.close()
            except OSError:
                pass
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def refused(self):
        """The last error of a copy that never became ready (closing its stdin first)."""
        for p in self.procs:
            if p not in self.ready:
                try:
                    p.stdin.close()
                except OSError:
                    pass
                return self.last_error(p)
        return ""


def cpu_sample():
    """(busy jiffies, all jiffies) of the machine, the CPU jiffies of the MPS servers
    (openmps-server, nvidia-cuda-mps-server) and the nanoseconds every thread of the machine
    has spent runnable but waiting for a core (schedstat's run delay) now: where the cores
    went during a round, and whether threads queued for them."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    servers = waited = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                st = f.read()
            tasks = os.listdir("/proc/%s/task" % pid)
        except OSError:
            continue
        for tid in tasks:
            try:
                with open("/proc/%s/task/%s/schedstat" % (pid, tid)) as f:
                    waited += int(f.read().split()[1])
            except (OSError, IndexError, ValueError):
                pass
        name = st[st.index("(") + 1:st.rindex(")")]
        if name in ("openmps-server", "nvidia-cuda-mps"):  # comm is cut at 15 characters
            fields = st[st.rindex(")") + 2:].split()
            servers += int(fields[11]) + int(fields[12])  # utime, stime
    return sum(v) - v[3] - v[4], sum(v), servers, waited


def cpu_use(before, after):
    """Cores busy on average (all processes), cores the servers used, and threads waiting for
    a core on average (run delay over wall time)."""
    hz = os.sysconf("SC_CLK_TCK")
    total = max(1, after[1] - before[1])
    ncpu = os.cpu_count() or 1
    wall = max(total / ncpu / hz, 1e-9)
    return ((after[0] - before[0]) / total * ncpu, (after[2] - before[2]) / hz / wall,
            (after[3] - before[3]) / 1e9 / wall)


def b7(env, ns, rounds=2, batches=300, max_n=None):
    """Per N: aggregate images/s (sum over copies of 8 x batches / its time; median over
    rounds), the throughput over the window (all images of all copies / the time from the
    common start to the last copy's end: the sum overstates it when copies do not overlap) and
    the slowest copy's time (s); the host CPU per batch of the servers and of everything else
    (the copies). A mode that refuses copies (NVIDIA MPS past 48) reports how many it served
    instead."""
    vals = {}
    for n in ns:
        if max_n and n > max_n:
            continue
        pool = Pool(n, ["resnet", str(rounds), str(batches)], env)
        try:
            if len(pool.ready) < n:
                vals["b7_n%d_served" % n] = len(pool.ready)
                print("b7 N=%d: %d of %d copies ready; first refusal: %s"
                      % (n, len(pool.ready), n, pool.refused()), file=sys.stderr)
                continue
            # GPU memory with the N copies ready (models loaded, warmed up): all processes
            # nvidia-smi lists, the copies' own and any server's (the footprint figure)
            mem = figures.gpu_memory()
            vals["b7_n%d_gpu_mib" % n] = sum(mem.values())
            vals["b7_n%d_copy_mib" % n] = max([mem.get(p.pid, 0) for p in pool.ready] or [0])
            aggs, window, slowest, busy, server, queued = [], [], [], [], [], []
            server_ms, client_ms = [], []
            for _ in range(rounds):
                at = pool.start(0.5 + 0.01 * n)
                time.sleep(max(0.0, at - time.time()))
                c0 = cpu_sample()
                el = [float(pool.lines(p, "round", 1, 120 + 2 * n)[0][3]) for p in pool.ready]
                b, sv, q = cpu_use(c0, cpu_sample())
                busy.append(b)
                server.append(sv)
                queued.append(q)
                aggs.append(sum(8 * batches / e for e in el))
                window.append(8 * batches * len(el) / max(el))
                slowest.append(max(el))
                # cores x the round's wall time, per batch of all copies
                server_ms.append(sv * max(el) * 1000 / (batches * len(el)))
                client_ms.append(max(0.0, b - sv) * max(el) * 1000 / (batches * len(el)))
            vals["b7_n%d_img_s" % n] = statistics.median(aggs)
            vals["b7_n%d_window_img_s" % n] = statistics.median(window)
            vals["b7_n%d_slowest_s" % n] = statistics.median(slowest)
            vals["b7_n%d_server_cpu_ms" % n] = statistics.median(server_ms)
            vals["b7_n%d_other_cpu_ms" % n] = statistics.median(client_ms)
            # where the host's cores went (benchmark-definitions.md: one copy alone is host-bound)
            vals["b7_n%d_cores_busy" % n] = statistics.median(busy)
            vals["b7_n%d_server_cores" % n] = statistics.median(server)
            vals["b7_n%d_threads_queued" % n] = statistics.median(queued)
        finally:
            pool.close()
    return vals


def b8(env, fresh=False, seconds=20.0, newcomer_at=8.0, timeline=None):
    """8 copies run batches back to back; a 9th process starts `newcomer_at` s in. Figures: the
    8's median batch latency before it (after their first second), their worst before it, their
    worst while it starts (batches that end between its start and its first result, or that
    began before its result and ended after), the newcomer's time to its first result and the
    part of it after PyTorch's import (the CUDA part). fresh: the first newcomer of a server's
    life, whose float32 cuBLAS images the 8 (float16 ResNets) never loaded (measured: 7 images,
    22 MiB); otherwise a later one, which finds them loaded. timeline: a CSV file to write every
    batch (end instant, latency, the part before its synchronize, its CPU and its wait for a
    core) and the newcomer's instants to.

    For diagnosis (docs/benchmarks.md, "B8's newcomer"): BENCH_B8_SAMPLE=1 samples who waits
    for a core (bench/schedsample.py; BENCH_SERVER_NICE=N renices the server there),
    BENCH_B8_NEWCOMER_NICE=N and BENCH_B8_NEWCOMER_ENV="K=V ..." change the newcomer alone;
    bench/run.py's BENCH_B8_FRESH=0 leaves out the fresh newcomer's run. BENCH_B8_SESSIONS=1
    starts each copy and the newcomer in a session of its own (as separate jobs, pods or
    terminals are): Linux's autogroup scheduler shares the cores between sessions first, so by
    default the 8 and the newcomer share one session's part while openmps's server has a session
    of its own (a diagnosis: the figures of record keep the default)."""
    tag = "b8f" if fresh else "b8"
    sessions = os.environ.get("BENCH_B8_SESSIONS") == "1"
    pool = Pool(8, ["stream", str(seconds)], env, sessions=sessions)
    try:
        if len(pool.ready) < 8:
            raise RuntimeError("%d of 8 copies ready: %s" % (len(pool.ready), pool.refused()))
        at = pool.start(1.0)
        # BENCH_B8_SAMPLE=1: who waits for a core, from a second before the newcomer to its end
        # (bench/schedsample.py; written beside the timeline)
        sampler = None
        if timeline and os.environ.get("BENCH_B8_SAMPLE") == "1":
            time.sleep(max(0.0, at + newcomer_at - 1.0 - time.time()))
            sampler = schedsample.SchedSampler([p.pid for p in pool.ready])
            sampler.start()
        time.sleep(max(0.0, at + newcomer_at - time.time()))
        # BENCH_B8_NEWCOMER_NICE=N: the newcomer runs at nice N (is its import's CPU what
        # delays the 8's batches?)
        nice = os.environ.get("BENCH_B8_NEWCOMER_NICE")
        # BENCH_B8_NEWCOMER_ENV="K=V ...": variables of the newcomer alone (does its OpenMP
        # pool, which spins on every core during its import, delay the 8?)
        nc_env = dict(env, **dict(kv.split("=", 1) for kv in
                                  os.environ.get("BENCH_B8_NEWCOMER_ENV", "").split()))
        nc = subprocess.Popen((["nice", "-n", nice] if nice else []) + [PYTHON, WORKER, "newcomer"],
                              env=nc_env, start_new_session=sessions,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if sampler:
            sampler.newcomer = nc.pid
        try:
            out, err = nc.communicate(timeout=120)
        finally:
            if nc.poll() is None:
                nc.kill()
                nc.wait()
            if sampler:
                sampler.stop()
                sampler.write(timeline[:-len(".csv")] + "-sched.csv")
        line = [x.split() for x in out.splitlines() if x.startswith("newcomer ")]
        if nc.returncode or not line:
            raise RuntimeError("the newcomer failed: " +
                               ((err.strip().splitlines() or ["?"])[-1][:200]))
        n0, n1, n_import = int(line[0][1]), int(line[0][2]), int(line[0][3])
        # (end ns, ms, ms before its synchronize, CPU ms, ms waiting for a core, copy)
        lat = []
        for k, p in enumerate(pool.ready):
            lat += [(int(x[1]), float(x[2]), float(x[3]), float(x[4]), float(x[5]), k)
                    for x in pool.lines(p, "lat", 1, seconds + 60)]
            for x in p.stdout:  # the rest of its lines
                if x.startswith("lat "):
                    f = x.split()
                    lat.append((int(f[1]), float(f[2]), float(f[3]), float(f[4]), float(f[5]),
                                k))
        if timeline:  # every batch and the newcomer's instants, for bench/b8timeline.py
            with open(timeline, "w") as f:
                f.write("what,end_ns,ms,launch_ms,cpu_ms,wait_ms,copy\n")
                f.write("newcomer_start,%d,0,0,0,0,-1\nnewcomer_imported,%d,0,0,0,0,-1\n"
                        "newcomer_done,%d,0,0,0,0,-1\n" % (n0, n_import, n1))
                for row in sorted(lat):
                    f.write("batch,%d,%.3f,%.3f,%.3f,%.3f,%d\n" % row)
        before = [b[1] for b in lat if at + 1.0 <= b[0] / 1e9 and b[0] < n0]
        during = [b[1] for b in lat if b[0] >= n0 and b[0] - b[1] * 1e6 <= n1]
        if not before or not during:
            raise RuntimeError("no batch before or during the newcomer's start")
        return {tag + "_median_ms": statistics.median(before),
                tag + "_worst_before_ms": max(before),
                tag + "_worst_during_ms": max(during),
                tag + "_newcomer_s": (n1 - n0) / 1e9,
                tag + "_newcomer_cuda_s": (n1 - n_import) / 1e9}
    finally:
        pool.close()


def newcomer_alone(env):
    """B8's newcomer once, alone: the images it loads are the server's from then on."""
    nc = subprocess.run([PYTHON, WORKER, "newcomer"], env=env, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True, timeout=120)
    if nc.returncode:
        raise RuntimeError("the newcomer failed: " +
                           ((nc.stderr.strip().splitlines() or ["?"])[-1][:200]))


def tutorial(env, ns=(1, 2, 4, 8), rounds=2):
    """The tutorial's experiment with PyTorch: N copies of 10 products of 10000 x 10000 started
    at one instant; per N the slowest copy's time (s, median over rounds) and the aggregate
    products per second."""
    vals = {}
    for n in ns:
        pool = Pool(n, ["matmul", str(rounds)], env)
        try:
            if len(pool.ready) < n:
                raise RuntimeError("%d of %d copies ready: %s" % (len(pool.ready), n,
                                                                pool.refused()))
            slowest = []
            for _ in range(rounds):
                pool.start(0.5)
                slowest.append(max(float(pool.lines(p, "round", 1, 300)[0][3])
                                   for p in pool.ready))
            vals["tut_n%d_s" % n] = statistics.median(slowest)
            vals["tut_n%d_per_s" % n] = 10 * n / statistics.median(slowest)
        finally:
            pool.close()
    return vals
