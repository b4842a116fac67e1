# SPDX-License-Identifier: MIT
"""What the GPU stress workloads (torture.py, fault.py, soak.py) share: a daemon of the build
under test in temporary directories, the stress client built with nvcc, the server's figures
(/proc and nvidia-smi), a sampler thread, and the summary table. Python 3 standard library only.

--fake runs everything against the CPU tier's driver test double (build/tests/libfakecuda.so)
with STRESS_FAKE=1, so the drivers can be checked on a machine without a GPU: no kernel
results are checked then, copies are, and there are no GPU memory figures."""
import argparse
import csv
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

METRICS = ("rss_mib", "shmem_mib", "fds", "threads", "gpu_server_mib", "gpu_total_mib")


class Stop(Exception):
    """A signal asked us to stop: the finally blocks clean up."""


def _on_signal(signum, frame):
    raise Stop("signal %d" % signum)


def env_int(name, default):
    v = os.environ.get(name, "")
    return int(v) if v.strip() else default


def idle_tolerances(prefix):
    """How far each idle figure may move, from PREFIX_RSS_MIB (32), _SHMEM_MIB (8), _GPU_MIB (64,
    the server's and the GPU's), _FDS (2), _THREADS (2)."""
    gpu = env_float(prefix + "_GPU_MIB", 64)
    return [("rss_mib", env_float(prefix + "_RSS_MIB", 32)),
            ("shmem_mib", env_float(prefix + "_SHMEM_MIB", 8)),
            ("gpu_server_mib", gpu), ("gpu_total_mib", gpu),
            ("fds", env_int(prefix + "_FDS", 2)),
            ("threads", env_int(prefix + "_THREADS", 2))]


def env_float(name, default):
    v = os.environ.get(name, "")
    return float(v) if v.strip() else default


class Parser(argparse.ArgumentParser):
    """Arguments, then the words of STRESS_ARGS (scripts/gpu.sh passes --fake that way)."""

    def parse_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        return argparse.ArgumentParser.parse_args(
            self, args + os.environ.get("STRESS_ARGS", "").split(), namespace)


def base_args(description, out_default):
    ap = Parser(description=description)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"),
                    help="the build directory (openmps-control, openmps-server, lib/)")
    ap.add_argument("--out", default=out_default, help="where logs, CSV and summary go")
    ap.add_argument("--fake", action="store_true",
                    help="use the CPU tier's driver test double instead of a GPU (a dry run)")
    ap.add_argument("--dry-config", action="store_true",
                    help="print the settings and exit")
    return ap


def now():
    return time.monotonic()


class Harness:
    """A daemon in a temporary directory, with the stress client built beside it."""

    def __init__(self, args, name):
        self.args = args
        self.name = name
        self.out = os.path.abspath(args.out)
        os.makedirs(self.out, exist_ok=True)
        self.tmp = tempfile.mkdtemp(prefix="openmps-%s." % name)
        os.chmod(self.tmp, 0o755)
        self.procs = []  # every client we started, killed at the end if still running
        self.daemon_pid = None
        self.nvsmi = shutil.which("nvidia-smi") is not None and not args.fake
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(s, _on_signal)
        self.log = open(os.path.join(self.out, "%s.log" % name), "a")
        self.note("%s: start %s, tmp %s, out %s%s" % (name, time.strftime("%Y-%m-%d %H:%M:%S"),
                                                      self.tmp, self.out,
                                                      " (FAKE driver)" if args.fake else ""))
        # The programs under test are copied: a rebuild of build/ while a long soak runs in the
        # background does not change them under it. The server is found beside the daemon.
        build = os.path.abspath(args.build)
        self.bindir = os.path.join(self.tmp, "bin")
        os.makedirs(os.path.join(self.bindir, "lib"))
        for f in ("openmps-control", "openmps-server"):
            src = os.path.join(build, f)
            if not os.path.isfile(src):
                raise SystemExit("%s: %s is missing: run make first" % (name, src))
            shutil.copy2(src, self.bindir)
        libdir = os.path.join(build, "lib")
        for f in os.listdir(libdir):
            p = os.path.join(libdir, f)
            if os.path.islink(p):
                os.symlink(os.readlink(p), os.path.join(self.bindir, "lib", f))
            else:
                shutil.copy2(p, os.path.join(self.bindir, "lib"))
        self.control = os.path.join(self.bindir, "openmps-control")
        self.env = dict(os.environ)
        for k in ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
                  "CUDA_MPS_CLIENT_PRIORITY", "OPENMPS_TRACE", "STRESS_FAKE", "OPENMPS_DRIVER"):
            self.env.pop(k, None)
        self.env.update({
            "CUDA_MPS_PIPE_DIRECTORY": os.path.join(self.tmp, "pipe"),
            "CUDA_MPS_LOG_DIRECTORY": os.path.join(self.tmp, "log"),
            "OPENMPS_MODULE_CACHE": os.path.join(self.tmp, "modules"),
        })
        if args.fake:
            fake = os.path.join(build, "tests", "libfakecuda.so")
            if not os.path.isfile(fake):
                raise SystemExit("%s: --fake needs %s" % (name, fake))
            self.env["OPENMPS_DRIVER"] = fake
            self.env["STRESS_FAKE"] = "1"
        self.client_env = dict(self.env)
        ld = self.env.get("LD_LIBRARY_PATH", "")
        self.client_env["LD_LIBRARY_PATH"] = os.path.join(self.bindir, "lib") + (":" + ld if ld
                                                                                 else "")
        self.stress = None

    def note(self, line):
        self.log.write(line + "\n")
        self.log.flush()

    def say(self, line):
        print(line, flush=True)
        self.note(line)

    # ------------------------------------------------------------------ building
    def build_stress(self):
        """nvcc -arch=native (OPENMPS_GPU_ARCH overrides), sm_90 when that fails."""
        src = os.path.join(HERE, "stress.cu")
        binary = os.path.join(self.bindir, "stress")
        blog = os.path.join(self.out, "build.log")
        archs = [os.environ.get("OPENMPS_GPU_ARCH", "native")]
        if archs[0] != "sm_90":
            archs.append("sm_90")
        with open(blog, "w") as f:
            for arch in archs:
                cmd = ["nvcc", "-O2", "-arch=" + arch, "-o", binary, src, "-lcuda"]
                f.write("$ %s\n" % " ".join(cmd))
                f.flush()
                rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT)
                if rc == 0:
                    self.note("built stress with -arch=%s" % arch)
                    self.stress = binary
                    return binary
        raise SystemExit("%s: cannot build %s (see %s)" % (self.name, src, blog))

    # ------------------------------------------------------------------ daemon
    def start_daemon(self):
        with open(os.path.join(self.out, "daemon.out"), "a") as f:
            rc = subprocess.call([self.control, "-d"], env=self.env, stdout=f,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if rc != 0:
            raise SystemExit("%s: the daemon did not start (exit %d; see daemon.out)"
                             % (self.name, rc))
        try:
            with open(os.path.join(self.env["CUDA_MPS_PIPE_DIRECTORY"],
                                   "openmps-control.pid")) as f:
                self.daemon_pid = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            self.daemon_pid = None
        self.note("daemon pid %s" % self.daemon_pid)

    def ctl(self, command, timeout=15):
        """One front-end command; its answer's lines (empty on any trouble)."""
        try:
            p = subprocess.run([self.control], input=command + "\n", env=self.env,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               universal_newlines=True, timeout=timeout)
        except (subprocess.TimeoutExpired, OSError):
            return []
        return [l.strip() for l in p.stdout.splitlines() if l.strip()]

    def servers(self):
        return [int(x) for x in self.ctl("get_server_list") if x.isdigit()]

    def clients_of(self, spid):
        return [x for x in self.ctl("get_client_list %d" % spid) if x.isdigit()]

    def wait_no_clients(self, spid, timeout):
        """Until the server lists no client (or timeout seconds); True when none is left."""
        end = now() + timeout
        while now() < end:
            if not self.clients_of(spid):
                return True
            time.sleep(0.5)
        return False

    def stop_daemon(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.kill()
                except OSError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if self.daemon_pid:
            self.ctl("quit -t 5")
            end = now() + 20
            while now() < end and pid_alive(self.daemon_pid):
                time.sleep(0.2)
            if pid_alive(self.daemon_pid):
                self.note("the daemon is still up 20 s after quit: SIGTERM")
                try:
                    os.kill(self.daemon_pid, signal.SIGTERM)
                except OSError:
                    pass
                time.sleep(2)
        logdir = self.env["CUDA_MPS_LOG_DIRECTORY"]
        for f in ("control.log", "server.log"):
            try:
                shutil.copy(os.path.join(logdir, f), self.out)
            except OSError:
                pass

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def log_text(self, name):
        try:
            with open(os.path.join(self.env["CUDA_MPS_LOG_DIRECTORY"], name),
                      errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    # ------------------------------------------------------------------ clients
    def client(self, mode, extra=(), out=None):
        """Starts one stress client; its stdout and stderr go to the file out (or nowhere)."""
        f = open(out, "w") if out else subprocess.DEVNULL
        try:
            p = subprocess.Popen([self.stress, mode] + list(extra), env=self.client_env,
                                 stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
        finally:
            if out:
                f.close()
        self.procs.append(p)
        if len(self.procs) > 4096:  # keep only what may still run
            self.procs = [q for q in self.procs if q.returncode is None]
        return p

    # ------------------------------------------------------------------ figures
    def sample(self, spid):
        """The server's figures now: MiB of resident and shared memory, descriptors, threads,
        its GPU memory (nvidia-smi, by pid) and the GPU's in all. Missing figures are None."""
        s = {"t": now(), "spid": spid}
        for k in METRICS + FD_KINDS:
            s[k] = None
        if spid:
            try:
                with open("/proc/%d/status" % spid) as f:
                    for line in f:
                        k, _, v = line.partition(":")
                        if k == "VmRSS":
                            s["rss_mib"] = int(v.split()[0]) / 1024.0
                        elif k == "RssShmem":
                            s["shmem_mib"] = int(v.split()[0]) / 1024.0
                        elif k == "Threads":
                            s["threads"] = int(v.split()[0])
                s.update(fd_kinds(spid))
            except (OSError, ValueError, IndexError):
                pass
        if self.nvsmi:
            apps = smi(["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"])
            for line in apps:
                parts = [x.strip() for x in line.split(",")]
                if len(parts) >= 2 and parts[0] == str(spid) and parts[1].isdigit():
                    s["gpu_server_mib"] = float(parts[1])
            tot = smi(["--query-gpu=memory.used", "--format=csv,noheader,nounits"])
            if tot and tot[0].strip().isdigit():
                s["gpu_total_mib"] = float(tot[0].strip())
        return s


FD_KINDS = ("fd_memfd", "fd_socket", "fd_pipe", "fd_nvidia", "fd_other")


def warm_up_and_baseline(h, specs, settle, verdicts, timeout):
    """Runs the warm-up clients `specs` ((mode, args, out) each) at once, all of which must
    pass, so that the server's pools, images and caches grow to the level the baseline then
    measures: once they are gone and `settle` seconds later, the server with no clients.
    Returns (server pid, that sample), or (None, None) when there is not exactly one server."""
    h.say("warm-up: %d clients at once" % len(specs))
    ps = [(h.client(mode, args, out), out) for mode, args, out in specs]
    bad = []
    for p, out in ps:
        try:
            rc = p.wait(timeout=timeout)
        except Exception:
            p.kill()
            rc = "hung"
        if rc != 0:
            bad.append("%s: exit %s: %s" % (os.path.basename(out), rc,
                                            " | ".join(read_lines(out)[-3:])))
    verdicts.append(("warm-up clients", not bad, "%d of %d ok" % (len(ps) - len(bad), len(ps))))
    for b in bad[:10]:
        h.say("warm-up failure: " + b)
    servers = h.servers()
    if len(servers) != 1:
        verdicts.append(("one server", False, "get_server_list: %r" % servers))
        return None, None
    spid = servers[0]
    h.wait_no_clients(spid, 60)
    time.sleep(settle)
    before = h.sample(spid)
    h.say("baseline (server %d, no clients): %s" % (
        spid, ", ".join("%s %s" % (k, fmt(before[k])) for k in METRICS)))
    return spid, before


def fd_kinds(pid):
    """The process's descriptors: how many, and of which kind (memfd: the pinned regions)."""
    d = "/proc/%d/fd" % pid
    k = dict.fromkeys(FD_KINDS, 0)
    names = os.listdir(d)
    for n in names:
        try:
            t = os.readlink(os.path.join(d, n))
        except OSError:
            continue
        if t.startswith("/memfd:"):
            k["fd_memfd"] += 1
        elif t.startswith("socket:"):
            k["fd_socket"] += 1
        elif t.startswith("pipe:"):
            k["fd_pipe"] += 1
        elif t.startswith("/dev/nvidia"):
            k["fd_nvidia"] += 1
        else:
            k["fd_other"] += 1
    k["fds"] = len(names)
    return k


def mem_available_mib():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    return None


def fd_line(s):
    return ", ".join("%s %s" % (k[3:], fmt(s.get(k))) for k in FD_KINDS)


def smi(args):
    try:
        p = subprocess.run(["nvidia-smi"] + args, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, universal_newlines=True, timeout=20)
    except (subprocess.TimeoutExpired, OSError):
        return []
    return [l for l in p.stdout.splitlines() if l.strip()]


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of ours counts as gone
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


class Sampler(threading.Thread):
    """Samples the server every period seconds into a CSV (and a list), with the figures the
    caller adds (extra() returns a dict). It also guards the machine: when the server holds
    more than STRESS_ABORT_RSS_MIB (32768) resident or STRESS_ABORT_FDS (200000) descriptors,
    or the machine has less than STRESS_MIN_AVAIL_MIB (16384) available, abort says why and
    the workload stops early (and fails)."""

    def __init__(self, h, path, period, extra=None):
        threading.Thread.__init__(self, daemon=True)
        self.h, self.period, self.extra = h, period, extra
        self.abort = None
        self.max_rss = env_float("STRESS_ABORT_RSS_MIB", 32768)
        self.max_fds = env_int("STRESS_ABORT_FDS", 200000)
        self.min_avail = env_float("STRESS_MIN_AVAIL_MIB", 16384)
        self.samples = []
        self.t0 = now()
        self.stop_ev = threading.Event()
        self.f = open(path, "w", newline="")
        self.w = None

    def run(self):
        while not self.stop_ev.is_set():
            t = now()
            try:
                sv = self.h.servers()
                s = self.h.sample(sv[0] if sv else None)
                s["nservers"] = len(sv)
                s["avail_mib"] = mem_available_mib()
                if self.extra:
                    s.update(self.extra())
                s["t"] = round(t - self.t0, 2)
                self.samples.append(s)
                if s.get("rss_mib") is not None and s["rss_mib"] > self.max_rss:
                    self.abort = "the server's VmRSS is %.0f MiB (limit %.0f)" % (s["rss_mib"],
                                                                                 self.max_rss)
                elif s.get("fds") is not None and s["fds"] > self.max_fds:
                    self.abort = "the server holds %d descriptors (limit %d)" % (s["fds"],
                                                                                self.max_fds)
                elif s["avail_mib"] is not None and s["avail_mib"] < self.min_avail:
                    self.abort = "the machine has %.0f MiB available (limit %.0f)" % (
                        s["avail_mib"], self.min_avail)
                if self.w is None:
                    self.w = csv.DictWriter(self.f, fieldnames=list(s.keys()),
                                            extrasaction="ignore")
                    self.w.writeheader()
                self.w.writerow(s)
                self.f.flush()
            except Exception as e:  # a sampler must not take the run down
                self.h.note("sampler: %r" % e)
            self.stop_ev.wait(max(0.0, self.period - (now() - t)))

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=30)
        self.f.close()


def fmt(v, nd=1):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return "%.*f" % (nd, v)
    return str(v)


def table(rows, header):
    """Plain text table; rows are lists of strings."""
    rows = [header] + [[str(c) for c in r] for r in rows]
    w = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * x for x in w))
    return "\n".join(lines)


def compare(before, after, tolerances):
    """Rows (metric, before, after, delta, tolerance, verdict) and whether all held. A figure
    missing on either side is reported n/a and does not fail."""
    rows, ok = [], True
    for k, tol in tolerances:
        b, a = before.get(k), after.get(k)
        if b is None or a is None:
            rows.append([k, fmt(b), fmt(a), "n/a", "+%s" % fmt(tol), "n/a"])
            continue
        d = a - b
        good = d <= tol
        ok = ok and good
        rows.append([k, fmt(b), fmt(a), ("%+.1f" % d) if isinstance(d, float) else "%+d" % d,
                     "+%s" % fmt(tol), "ok" if good else "FAIL"])
    return rows, ok


def read_lines(path):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def field(lines, key):
    """The first value after key at the start of a line ("up 123.4" -> "123.4")."""
    for l in lines:
        parts = l.split()
        if parts and parts[0] == key and len(parts) > 1:
            return parts[1:]
    return None


def rand_seed():
    random.seed(int(os.environ.get("STRESS_SEED", "0")) or None)
