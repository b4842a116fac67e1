# SPDX-License-Identifier: MIT
"""openmps stats, ps --json and smi: what the server accounts per client and device
(src/server/account.c), asked through the daemon (src/control/stats.c), against known work: the
driver double's "sleep" kernels of known duration and copies of known sizes (tests/cpu/
acct_driver.c)."""
import json
import os
import subprocess

import harness
from harness import check, driver_program, wait_for

OPENMPS = os.path.join(harness.BIN, "openmps")


def openmps(e, *args):
    """Runs the openmps command line in e's environment: (rc, stdout, stderr)."""
    p = subprocess.run([OPENMPS] + list(args), env=e.env, capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def stats_json(e):
    rc, out, err = openmps(e, "stats", "--json")
    check(rc == 0 and err == "", "openmps stats --json: rc %d %r" % (rc, err))
    return json.loads(out)


def start_clients(e, works, extra=None):
    """Starts one acct-driver per work tuple (KERNELS, US, HTOD, DTOH, DTOD, STREAMS) and waits
    until each has done its work ("ready"): they hold their sessions until their stdin closes.
    Returns [(process, its events' milliseconds)]."""
    procs = [driver_program(e, "acct-driver", [str(x) for x in w], extra=extra,
                            stdin=subprocess.PIPE) for w in works]
    out = []
    for p in procs:
        events_ms = None
        for line in p.stdout:
            if line.startswith("events_ms "):
                events_ms = float(line.split()[1])
            if line.strip() == "ready":
                break
        if events_ms is None:
            check(False, "acct-driver did not get ready: %r" % p.stderr.read())
        out.append((p, events_ms))
    return out


def end_clients(clients):
    for p, _ in clients:
        p.stdin.close()
        p.wait(timeout=60)
        if p.returncode != 0:
            check(False, "acct-driver failed: %r" % p.stderr.read())


def within(got, want, pct, what):
    check(abs(got - want) <= want * pct / 100.0,
          "%s: %s, expected %s within %d %%" % (what, got, want, pct))


def test_stats_three_clients_known_work(daemon):
    """Three clients of known work: kernels of known duration (the double runs a "sleep" kernel
    for the microseconds its argument says, its events timed by the same clock), copies of known
    sizes each way. Kernels and bytes are exact; GPU time within 5 % of the kernels' time (one
    client runs two streams side by side: the union of their busy time is counted, its
    events measure each stream's); the device's totals are the clients' sums."""
    e = daemon()
    # Long enough that a wake-up late on a loaded machine (the server sees a stream done when its
    # wait returns: tens of ms with every core busy) stays within the 5 %.
    works = [  # kernels, us each, HtoD, DtoH, DtoD bytes, streams of its own
        (8, 200000, 3 << 20, 1 << 20, 4096, 0),  # 1.6 s; pageable copies through staging
        (4, 300000, 1000, 2000, 3000, 0),        # 1.2 s; small copies in the ring
        (6, 350000, 0, 0, 1 << 20, 2),           # 2 streams x 3 x 350 ms: 1.05 s of union
    ]
    want_gpu = [1.6, 1.2, 1.05]
    clients = start_clients(e, works)
    try:
        s = stats_json(e)
        check(s["version"] == 1 and len(s["servers"]) == 1 and s["servers"][0]["answered"],
              "one server, answered: %r" % s["servers"])
        by_pid = {c["pid"]: c for c in s["clients"]}
        check(len(by_pid) == 3, "three clients: %r" % list(by_pid))
        for (p, events_ms), w, g in zip(clients, works, want_gpu):
            c = by_pid.get(p.pid)
            check(c is not None, "client %d listed" % p.pid)
            check(c["kernels"] == w[0], "kernels of %d: %r" % (p.pid, c["kernels"]))
            check((c["htod_bytes"], c["dtoh_bytes"], c["dtod_bytes"]) == w[2:5],
                  "bytes of %d: %r" % (p.pid, (c["htod_bytes"], c["dtoh_bytes"],
                                              c["dtod_bytes"])))
            within(c["gpu_time_ns"] / 1e9, g, 5, "GPU time of client %d" % p.pid)
            if not w[5]:  # one stream: its own events time the same kernels
                within(c["gpu_time_ns"] / 1e6, events_ms, 5, "against its events")
            check(c["state"] == "idle", "done: idle, not %r" % c["state"])
            check(c["calls"] > w[0] and c["serve_time_ns"] >= c["gpu_wait_time_ns"] > 0,
                  "calls and times of %d: %r" % (p.pid, c))
            check(c["device_memory_bytes"] >= 2 * max(w[2], w[3], w[4], 1),
                  "memory it holds: %r" % c["device_memory_bytes"])
            check(len(c["devices"]) == 1 and c["devices"][0]["ordinal"] == 0 and
                  c["devices"][0]["kernels"] == w[0], "its device: %r" % c["devices"])
            check(c["command"].endswith("acct-driver") and c["uid"] == os.getuid() and
                  c["cgroup"].startswith("/"), "identity: %r" % c)
        d = s["devices"]
        check(len(d) == 1 and d[0]["clients"] == 3, "one device, three clients: %r" % d)
        for k in ("kernels", "gpu_time_ns", "htod_bytes", "dtoh_bytes", "dtod_bytes",
                  "device_memory_bytes"):
            check(d[0][k] == sum(c[k] for c in s["clients"]), "device total of %s" % k)
        # the human table and the ps view name the same clients
        rc, out, err = openmps(e, "stats")
        check(rc == 0 and all(str(p.pid) in out for p, _ in clients), "stats table: %r" % out)
        rc, out, err = openmps(e, "ps", "--json")
        ps = json.loads(out)
        check(rc == 0 and sorted(c["pid"] for c in ps["clients"]) == sorted(by_pid),
              "ps --json: %r" % out)
        check(all(c["active_thread_percentage"] == 100.0 and c["priority"] == 0
                  for c in ps["clients"]), "ps --json's limits: %r" % ps)
    finally:
        end_clients(clients)
    wait_for(lambda: not stats_json(e)["clients"], what="the clients gone from stats")


def test_stats_after_answer_wait_and_accounting_off(daemon):
    """A small copy's DMA (1.5 s on the driver double) is the client's wait for the GPU
    (gpu_wait_time_ns) where the client waits for it: in the copy's call when answered after it
    (OPENMPS_COPY_ANSWER=late), in the cuCtxSynchronize after the copy when answered before it
    (api/copies.c: the server waits for the DMA before the client's next call, which natively
    waits for it too). OPENMPS_ACCOUNT=off counts nothing but calls (for measuring the
    accounting's cost against the same build)."""
    for answer in ("early", "late"):
        e = daemon({"FAKECUDA_DMA_MS": "1500", "OPENMPS_COPY_ANSWER": answer})
        clients = start_clients(e, [(0, 0, 1000, 0, 0, 0)])
        try:
            c = stats_json(e)["clients"][0]
            waited = c["gpu_wait_time_ns"] / 1e9
            check(1.4 <= waited < 2.9,
                  "%s: the client waited %.3f s for the GPU beside a DMA of 1.5 s"
                  % (answer, waited))
            check(c["htod_bytes"] == 1000 and c["state"] == "idle", "%s: %r" % (answer, c))
        finally:
            end_clients(clients)
    e = daemon({"OPENMPS_ACCOUNT": "off"})
    clients = start_clients(e, [(2, 1000, 1000, 0, 0, 0)])
    try:
        c = stats_json(e)["clients"][0]
        check(c["calls"] > 2 and c["kernels"] == 0 and c["htod_bytes"] == 0 and
              c["gpu_time_ns"] == 0 and c["gpu_wait_time_ns"] == 0 and c["serve_time_ns"] == 0,
              "accounting off: %r" % c)
        check("accounting off" in e.log("server.log"), "the server's setting")
    finally:
        end_clients(clients)
    e = daemon({"OPENMPS_ACCOUNT": "maybe"})
    clients = start_clients(e, [(2, 1000, 0, 0, 0, 0)])
    try:
        check(stats_json(e)["clients"][0]["kernels"] == 2, "a bad value leaves it on")
        check("OPENMPS_ACCOUNT=maybe is not on or off" in e.log("server.log"), "its warning")
    finally:
        end_clients(clients)


def test_stats_smi_view(daemon):
    """openmps smi: nvidia-smi's process table as under NVIDIA's MPS: the server as a C process,
    each client as M+C with the device memory it holds, in MiB."""
    e = daemon()
    clients = start_clients(e, [(1, 1000, 3 << 20, 0, 0, 0)])
    try:
        rc, out, err = openmps(e, "smi")
        lines = out.splitlines()
        check(rc == 0 and all(len(l) == 91 for l in lines), "91 columns: %r" % out)
        spid = e.servers()[0]
        check(any(" %d " % spid in l and "C   openmps-server" in l for l in lines),
              "the server's row: %r" % out)
        p = clients[0][0]
        row = [l for l in lines if " %d " % p.pid in l]
        check(len(row) == 1 and "M+C" in row[0] and "6MiB" in row[0], "its row: %r" % out)
    finally:
        end_clients(clients)
    rc, out, err = openmps(e, "smi")
    check(rc == 0 and "No running processes found" in out, "no clients: %r" % out)


def cgroup_of(pid):
    """The path openmps reports (src/control/stats.c's om_stats_cgroup, the same rule)."""
    v2 = systemd = other = None
    for line in open("/proc/%d/cgroup" % pid):
        num, ctl, path = line.rstrip("\n").split(":", 2)
        if num == "0" and ctl == "":
            v2 = path
        elif "name=systemd" in ctl.split(","):
            systemd = path
        elif other is None and path != "/":
            other = path
    for p in (v2 if v2 != "/" else None, systemd if systemd != "/" else None, other, v2,
              systemd):
        if p:
            return p
    return ""


def make_cgroup(name):
    """A cgroup of our own where this machine lets us make one: (its directory, its path as
    /proc/PID/cgroup names it), or None."""
    mounts = []
    for line in open("/proc/self/mountinfo"):
        f = line.split()
        fstype = f[f.index("-") + 1]
        if fstype == "cgroup2" or (fstype == "cgroup" and "pids" in f[-1].split(",")):
            mounts.append((f[4], f[3]))  # mount point, root within the hierarchy
    for point, root in mounts:
        d = os.path.join(point, name)
        try:
            os.mkdir(d)
            return d, os.path.join(root, name)
        except OSError:
            continue
    return None


def test_stats_client_cgroup(daemon):
    """A client's cgroup (the Slurm job or the Kubernetes pod it runs in) is reported. Where a
    cgroup can be made (root, a writable cgroup hierarchy), the client runs in one made for it and
    stats and ps --json name it; elsewhere the path its /proc/PID/cgroup gives is checked."""
    e = daemon()
    made = make_cgroup("openmps-test-%d" % os.getpid())
    try:
        if made:
            procs_file = os.path.join(made[0], "cgroup.procs")

            def enter():
                with open(procs_file, "w") as f:
                    f.write("0")  # this process, before it runs the client
            p = subprocess.Popen(
                [os.path.join(os.path.dirname(harness.REMOTE_DRIVER), "acct-driver"),
                 "1", "1000", "0", "0", "0"],
                env=dict(e.env, LD_LIBRARY_PATH=os.path.abspath(harness.SHIM_DIR)),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                preexec_fn=enter)
        else:
            print("NOTE: no cgroup can be made here (not root, or no writable cgroup hierarchy): "
                  "the client's own cgroup path is checked instead")
            p = driver_program(e, "acct-driver", ["1", "1000", "0", "0", "0"],
                               stdin=subprocess.PIPE)
        try:
            if not (p.stdout.readline().startswith("events_ms") and
                    p.stdout.readline().strip() == "ready"):
                check(False, "client not ready: %r" % p.stderr.read())
            want = cgroup_of(p.pid)
            if made:
                check(want.endswith("/openmps-test-%d" % os.getpid()),
                      "the client is in the test's cgroup: %r" % want)
            c = [c for c in stats_json(e)["clients"] if c["pid"] == p.pid]
            check(len(c) == 1 and c[0]["cgroup"] == want,
                  "stats names its cgroup %r: %r" % (want, c))
            rc, out, err = openmps(e, "ps", "--json")
            check([c["cgroup"] for c in json.loads(out)["clients"]] == [want], "ps --json: %r"
                  % out)
        finally:
            p.stdin.close()
            p.wait(timeout=60)
    finally:
        if made:  # empty once the kernel has taken the ended client out of it
            wait_for(lambda: not open(os.path.join(made[0], "cgroup.procs")).read().strip(),
                     what="the test's cgroup empty")
            os.rmdir(made[0])


def test_stats_bad_requests(daemon):
    """Bad requests get an error naming the problem (exit status 1), from both front-ends; a
    daemon with no server answers an empty report."""
    e = daemon()
    for args, want in [
        (["stats", "--bogus"], 'Usage: stats [--json|--smi] [-p <server PID>] ("--bogus"'),
        (["stats", "-p", "abc"], 'Invalid server PID "abc"'),
        (["stats", "-p", "4194000"], "Server 4194000 not found"),
        (["stats", "--json", "--smi"], '("--smi" is not one of them)'),
        (["ps", "--json", "-x"], "Usage: ps [-v|--json] [-p <server PID>]"),
    ]:
        rc, out, err = openmps(e, *args)
        check(rc == 1 and want in err and out == "", "%r: rc %d %r %r" % (args, rc, out, err))
        check(want in e.cmd(" ".join(args)), "openmps-control %r" % args)
    s = stats_json(e)
    check(s["servers"] == [] and s["devices"] == [] and s["clients"] == [], "empty: %r" % s)
    rc, out, err = openmps(daemon(start=False), "stats")
    check(rc == 1 and "cannot find the control daemon" in err, "no daemon: %d %r" % (rc, err))
