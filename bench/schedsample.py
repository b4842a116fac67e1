# SPDX-License-Identifier: MIT
"""Who waits for a core during B8 (bench/frameworks.py, BENCH_B8_SAMPLE=1): a thread of the
harness that, every few milliseconds, reads the scheduler's counters (/proc/PID/task/TID/
schedstat: ns on a CPU, ns runnable but waiting for one) summed over three sets of threads —
every thread of the server (openmps-server or NVIDIA's nvidia-cuda-mps-server), the copies'
main threads (the Python threads that launch), the newcomer's threads (with their count) —
and the machine's runnable threads (/proc/stat procs_running). Cumulative values, one CSV row
per sample; bench/b8timeline.py prints their differences around the worst batches.

BENCH_SERVER_NICE=N (a diagnosis; lowering it needs root): the server's threads and its
autogroup get nice N when the sampler starts."""
import os
import sys
import threading
import time

SERVERS = ("openmps-server", "nvidia-cuda-mps-server")


def _pids_named(names):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    argv0 = f.read().split(b"\0")[0].decode(errors="replace")
            except OSError:
                continue
            if os.path.basename(argv0) in names:
                out.append(int(d))
    return out


def _tasks(pid):
    try:
        return [int(t) for t in os.listdir("/proc/%d/task" % pid)]
    except OSError:
        return []


def _schedstat(pid, tid):
    """(ns on a CPU, ns waiting for one) of one thread; zeros once it is gone."""
    try:
        with open("/proc/%d/task/%d/schedstat" % (pid, tid)) as f:
            v = f.read().split()
        return int(v[0]), int(v[1])
    except (OSError, IndexError, ValueError):
        return 0, 0


def _autogroup(pid):
    try:
        with open("/proc/%d/autogroup" % pid) as f:
            return f.read().strip()
    except OSError:
        return "?"


def _running():
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("procs_running"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


class SchedSampler(threading.Thread):
    """Samples until stop(); rows() gives (t_ns, srv_cpu, srv_wait, cli_cpu, cli_wait,
    nc_tasks, nc_cpu, nc_wait, running), the times cumulative in ns."""

    def __init__(self, copies, period=0.005):
        super().__init__(daemon=True)
        self.copies = list(copies)
        self.period = period
        self.servers = _pids_named(SERVERS)
        self.newcomer = None
        self.samples = []
        self._done = threading.Event()
        sys.stderr.write("schedsample: server %s, its autogroup %s; the copies' autogroups %s\n"
                         % (self.servers, [_autogroup(p) for p in self.servers],
                            sorted({_autogroup(p) for p in self.copies})))
        nice = os.environ.get("BENCH_SERVER_NICE")
        for pid in self.servers if nice else []:
            for tid in _tasks(pid):
                try:
                    os.setpriority(os.PRIO_PROCESS, tid, int(nice))
                except OSError:
                    pass
            try:
                with open("/proc/%d/autogroup" % pid, "w") as f:
                    f.write(nice)
            except OSError:
                pass

    def run(self):
        # Threads that ended keep their last counters (a sum that falls would be nonsense).
        last = {}
        while not self._done.is_set():
            t = time.time_ns()
            row = [t]
            sets = [[(p, q) for p in self.servers for q in _tasks(p)],
                    [(p, p) for p in self.copies]]
            nc = self.newcomer
            sets.append([(nc, q) for q in _tasks(nc)] if nc else [])
            for k, s in enumerate(sets):
                cpu = wait = 0
                for key in s:
                    c, w = _schedstat(*key)
                    if c or w:
                        last[key] = (c, w)
                for key, (c, w) in last.items():
                    if (k == 0 and key[0] in self.servers) or (k == 1 and key[0] in
                                                               self.copies) or \
                            (k == 2 and key[0] == nc):
                        cpu += c
                        wait += w
                if k == 2:
                    row.append(len(s))
                row += [cpu, wait]
            row.append(_running())
            self.samples.append(row)
            self._done.wait(self.period)

    def stop(self):
        self._done.set()
        self.join()

    def write(self, path):
        with open(path, "w") as f:
            f.write("t_ns,srv_cpu,srv_wait,cli_cpu,cli_wait,nc_tasks,nc_cpu,nc_wait,running\n")
            for r in self.samples:
                f.write(",".join(str(x) for x in r) + "\n")
