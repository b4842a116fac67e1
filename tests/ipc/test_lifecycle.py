# SPDX-License-Identifier: MIT
"""Servers' life: start failures and states, a hijacked server, limits and environment, stale and
concurrent daemons, quit.
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import harness

from harness import Env, Fail, as_user, check, need_binaries_for_other_users, proc_uid, wait_for
from protocol import MAGIC, MAJOR


def test_server_start_failure_and_states(daemon):
    e = daemon({"FAKECUDA_FAIL_INIT": "1"})
    rc, out, err = e.run_client("--pings", 1)
    check(rc == 3, "refused: rc %d" % rc)
    check("failed to start" in err and "server.log" in err, "reason: " + err)
    check("cuInit failed" in e.log("server.log"), "server.log says why")
    wait_for(lambda: e.servers() == [], what="no server left")
    e.quit()
    # the server's cuInit waits until the test opens the gate: INITIALIZING for as long as
    # the test needs to look, on any machine (a fixed delay ran out under load)
    gate = os.path.join(tempfile.mkdtemp(prefix="om-gate-"), "open")
    e2 = Env({"FAKECUDA_INIT_GATE": gate})
    try:
        e2.cmd("start_server -uid %d" % os.getuid())
        spid = wait_for(lambda: e2.servers(), what="the server")[0]
        check(e2.cmd("get_server_status %d" % spid) == "INITIALIZING", "INITIALIZING")
        c = e2.client("--pings", 3)  # waits for the server to be ready
        wait_for(lambda: "New client %d " % c.pid in e2.log() or c.poll() is not None,
                 what="the client to wait for the starting server")
        check(c.poll() is None, "the client waits while the server starts")
        check(e2.cmd("get_server_status %d" % spid) == "INITIALIZING", "still INITIALIZING")
        open(gate, "w").close()
        wait_for(lambda: e2.cmd("get_server_status %d" % spid) == "ACTIVE", what="ACTIVE")
        c.communicate(timeout=60)
        check(c.returncode == 0, "client served once ACTIVE")
        e2.quit()
    finally:
        shutil.rmtree(os.path.dirname(gate), ignore_errors=True)
        e2.close(True)


# A hijacked server (a user can take over their own server, which runs as them): the daemon
# execs this instead of openmps-server (OPENMPS_SERVER). Its first start sends the daemon a READY
# whose device name and bus id carry terminal escapes, then a second READY, answers each client
# handed to it with UP and no welcome, and waits for the test's go file; then it floods the
# daemon with 20 000 fault reports full of escapes and stays, deaf to SIGTERM. Its next start execs
# the real server, so the user's next clients are served.
HIJACKED_SERVER = r"""#!%(python)s
import os, signal, socket, struct, sys, time
STATE, GO, REAL = %(state)r, %(go)r, %(real)r
if os.path.exists(STATE):
    os.execv(REAL, [REAL] + sys.argv[1:])
open(STATE, "w").write(str(os.getpid()))
signal.signal(signal.SIGTERM, signal.SIG_IGN)
ch = socket.socket(fileno=3)
def msg(t, p): return struct.pack("<IHHHHI", %(magic)d, %(major)d, 0, t, 0, len(p)) + p
def ready(name, bus):
    # struct om_device_info: ordinal, reserved, uuid, bus id, name, SMs, chunk SMs, chunks
    return msg(20, struct.pack("<II", 1, 0) + struct.pack("<II16s32s96sIII", 0, 0, bytes(16), bus,
                                                            name, 0, 0, 0))
ch.send(ready(b"\x1b[31mEVIL\x1b]0;title\x07\rFORGED LINE", b"0000:\x1b[2J:00.0"))
ch.send(ready(b"LATE READY", b"0000:99:00.0"))
ch.settimeout(0.05)
while not os.path.exists(GO):
    try:
        data, fds, _, _ = socket.recv_fds(ch, 70000, 4)
    except socket.timeout:
        continue
    if len(data) >= 20 and struct.unpack("<H", data[8:10])[0] == 22:  # SRV_ADOPT: say UP
        cid, pid = struct.unpack("<II", data[16:24])
        ch.send(msg(23, struct.pack("<IIIIQ", cid, pid, 1, 1, 0)))
ch.setblocking(False)
n = 0
while n < 20000:
    try:
        ch.send(msg(21, b"\x1b[2J\x1b[HFAULT %%d\rFORGED\nLINE\x9b" %% n))
        n += 1
    except BlockingIOError:
        time.sleep(0.001)
open(GO + ".part", "w").write(str(n))
os.rename(GO + ".part", GO + ".sent")  # whole when it appears: the test reads it at once
while True:
    time.sleep(1)
"""


def test_hijacked_server_cannot_flood_or_inject(daemon):
    """The daemon treats its channel from a server as untrusted (the server runs as its user):
    a READY after the first is ignored and logged once, device names and bus ids reach
    device_query and get_device_client_list without control bytes, a flood of fault reports adds
    a few lines to control.log, and a server that reported a fault but does not exit is killed,
    so its user's next client gets a fresh server."""
    e = daemon(start=False)
    real = os.path.abspath(os.path.join(os.path.dirname(harness.CONTROL), "openmps-server"))
    fake = os.path.join(e.dir, "hijacked-server")
    go = os.path.join(e.dir, "go")
    state = os.path.join(e.dir, "hijacked.pid")
    with open(fake, "w") as f:
        f.write(HIJACKED_SERVER % {"python": sys.executable, "state": state, "go": go,
                                   "real": real, "magic": MAGIC, "major": MAJOR})
    os.chmod(fake, 0o755)
    e.env["OPENMPS_SERVER"] = fake
    e.start()
    e.cmd("start_server -uid %d" % os.getuid())
    wait_for(lambda: "Server %d is ACTIVE" % int(open(state).read() or 0) in e.log()
             if os.path.exists(state) and open(state).read() else False,
             what="the hijacked server to be ACTIVE")
    spid = int(open(state).read())
    c = e.client("--pings", 1, "--timeout-ms", 120000)  # handed over; never welcomed
    wait_for(lambda: "%d.1" % c.pid in e.cmd("get_device_client_list"),
             what="the client in get_device_client_list")
    answers = {}
    for line in ("device_query", "device_query %d" % spid, "get_device_client_list",
                 "get_device_client_list %d" % spid, "get_server_status %d" % spid):
        out, err, rc = e.ctl(line + "\n")
        answers[line] = out
        bad = sorted(set(ch for ch in out if (ord(ch) < 0x20 and ch != "\n") or
                         ord(ch) >= 0x7f))
        check(not bad, "control bytes %r in the answer to %s: %r" % (bad, line, out))
    check("EVIL" in answers["device_query %d" % spid] and
          "LATE READY" not in answers["device_query %d" % spid],
          "the first READY's devices, not the late one's: %r" % answers)
    log = e.log()
    check(log.count("READY") == 1 and "Server %d sent READY again" % spid in log,
          "the late READY logged once: %r" % log[-2000:])
    before = os.path.getsize(os.path.join(e.logs, "control.log"))
    t0 = time.monotonic()
    open(go, "w").close()  # the daemon drains the flood as it comes, whatever the load
    # renamed whole once all 20 000 went; 60 s ran out once at load 19, so 180
    wait_for(lambda: os.path.exists(go + ".sent"), timeout=180, what="the fault flood")
    sent = int(open(go + ".sent").read())
    # (the log, not get_server_list, is polled: each command would add a line)
    wait_for(lambda: "Server %d (uid %d) died" % (spid, os.getuid()) in e.log(), timeout=120,
             what="the server that reported a fault and stayed to be killed")
    took = time.monotonic() - t0
    log = e.log()
    grown = os.path.getsize(os.path.join(e.logs, "control.log")) - before
    print("%d fault reports grew control.log by %d bytes; the server was gone after %.1f s" %
          (sent, grown, took))
    check(grown < 4096, "%d fault reports grew control.log by %d bytes" % (sent, grown))
    check("Server %d (uid %d) died (signal 9)" % (spid, os.getuid()) in log,
          "killed with SIGKILL: %r" % log[-2000:])
    raw = open(os.path.join(e.logs, "control.log"), "rb").read()
    bad = sorted(set(b for b in raw if (b < 0x20 and b != 0x0a) or b >= 0x7f))
    check(not bad, "control bytes in control.log: %r" % bad)
    check(b"\nFORGED" not in raw, "no forged line in control.log")
    c.kill()
    c.wait()
    rc, out, err = e.run_client("--pings", 3, timeout=120)
    check(rc == 0, "the user's next client is served by a fresh server: %r %r" % (out, err))
    check(int(re.search(r"server=(\d+)", out).group(1)) != spid, "a fresh server")


def test_server_is_not_dumpable(daemon):
    """The server runs as its user but is not dumpable: that user cannot ptrace it, read its
    memory or take its descriptors (its /proc entries belong to root)."""
    need_binaries_for_other_users()
    e = daemon()
    a = e.client("--pings", 1, "--hold-ms", "eof", preexec=as_user(12007))
    check(a.stdout.readline().startswith("session"), "served")
    spid = e.servers()[0]
    check(proc_uid(spid) == 12007, "the server runs as its user")
    for entry in ("fd", "mem", "environ"):
        st = os.stat("/proc/%d/%s" % (spid, entry))
        check(st.st_uid == 0, "/proc/%d/%s belongs to uid %d: the server is dumpable" %
              (spid, entry, st.st_uid))
    a.communicate(timeout=60)


def proc_limits(pid):
    """/proc/PID/limits as {name: (soft, hard)}."""
    rows = {}
    with open("/proc/%d/limits" % pid) as f:
        next(f)
        for line in f:
            m = re.match(r"(.+?)\s{2,}(\S+)\s+(\S+)", line)
            if m:
                rows[m.group(1)] = (m.group(2), m.group(3))
    return rows


def test_server_starts_with_a_minimal_environment(daemon):
    """A server does not inherit the daemon's environment, working directory or resource
    limits: it gets the settings the documentation names (OPENMPS_*, the driver's CUDA_* but
    CUDA_MPS_*, LD_LIBRARY_PATH, TZ, the sanitizers' options, what OPENMPS_SERVER_ENV names),
    HOME of its user and PATH; it runs in that HOME (or /); and a root daemon gives it the
    limits of process 1 (the system's defaults), whatever its own are."""
    import pwd
    import resource
    e = daemon(start=False)
    work = os.path.join(e.dir, "daemon-cwd")
    os.mkdir(work)
    e.env.update({"OM_TEST_SECRET": "the daemon's secret", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE":
                  "", "OPENMPS_SCHED": "auto", "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                  "PATH": "/daemon/only/bin:" + os.environ.get("PATH", "/usr/bin:/bin")})
    e.env.pop("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")

    def lowered():
        os.chdir(work)
        # soft limits lowered and raised (raising a hard limit back takes CAP_SYS_RESOURCE,
        # which a container's root may lack: the daemon keeps its hard limits then)
        for r, soft in ((resource.RLIMIT_STACK, 4 << 20), (resource.RLIMIT_MSGQUEUE, 12345),
                        (resource.RLIMIT_CORE, resource.RLIM_INFINITY)):
            resource.setrlimit(r, (soft, resource.getrlimit(r)[1]))
    e.start(preexec=lowered)
    c = e.client("--pings", 1, "--hold-ms", "eof")
    check(c.stdout.readline().startswith("session"), "served")
    spid = e.servers()[0]
    env = dict(kv.split("=", 1) for kv in
               open("/proc/%d/environ" % spid).read().split("\0") if "=" in kv)
    check("OM_TEST_SECRET" not in env, "the daemon's secret reached the server: %r" % env)
    check(env.get("OPENMPS_SCHED") == "auto" and env.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID"
          and env.get("OPENMPS_DRIVER") == e.env["OPENMPS_DRIVER"],
          "documented settings reach it: %r" % env)
    check(not any(k.startswith("CUDA_MPS_") for k in env), "no CUDA_MPS_*: %r" % env)
    check("/daemon/only/bin" not in env.get("PATH", ""), "its own PATH: %r" % env)
    home = pwd.getpwuid(os.getuid()).pw_dir
    check(env.get("HOME") == home, "HOME of its user: %r" % env)
    allowed = re.compile(r"(OPENMPS_|CUDA_|FAKECUDA_)|(HOME|PATH|LD_LIBRARY_PATH|TZ|"
                         r"[A-Z]+SAN_OPTIONS)$")
    check(all(allowed.match(k) for k in env), "only documented settings: %r" %
          sorted(k for k in env if not allowed.match(k)))
    cwd = os.readlink("/proc/%d/cwd" % spid)
    check(cwd in (home, "/"), "the server runs in %s, not in HOME or /" % cwd)
    theirs, init = proc_limits(spid), proc_limits(1)
    for name in ("Max stack size", "Max msgqueue size", "Max core file size"):
        check(theirs[name][0] == init[name][0], "%s: %r, not process 1's %r" %
              (name, theirs[name], init[name]))
    c.communicate(timeout=60)


def test_stale_and_concurrent_daemons(daemon):
    e = daemon()
    # A second daemon on the same pipe directory is refused.
    p = subprocess.run([harness.CONTROL, "-d"], env=e.env, capture_output=True, text=True)
    check(p.returncode == 1 and "already running" in p.stderr and e.pipe in p.stderr,
          "second daemon refused: %r" % p.stderr)
    # A daemon killed hard leaves its socket and pid file; its server follows it.
    c = e.client("--hold-ms", 30000)
    check(c.stdout.readline().startswith("session"), "session")
    spid = e.servers()[0]
    e.daemon.kill()
    e.daemon.wait()
    check(os.path.exists(os.path.join(e.pipe, "control.sock")), "stale socket left")
    wait_for(lambda: not os.path.exists("/proc/%d/status" % spid) or
             "zombie" in open("/proc/%d/status" % spid).read(), what="orphaned server exit")
    c.communicate(timeout=30)
    check(c.returncode == 4, "the client was told")
    e.start()
    check(e.cmd("get_server_list") == "", "new daemon over stale files")
    e.quit()
    # Several daemons started at once: exactly one wins.
    ps = [subprocess.Popen([harness.CONTROL, "-d"], env=e.env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True) for _ in range(6)]
    rcs = [p.wait(timeout=20) for p in ps]
    check(sorted(rcs) == [0, 1, 1, 1, 1, 1], "one daemon wins: %r" % rcs)
    e.ctl("quit\n")
    wait_for(lambda: not os.path.exists(os.path.join(e.pipe, "control.sock")),
             what="the winner to quit")


def test_nvidia_pipe_directory_refused(daemon):
    e = daemon(start=False)
    os.makedirs(e.pipe, mode=0o755)
    with open(os.path.join(e.pipe, "nvidia-cuda-mps-control.pid"), "w") as f:
        f.write(str(os.getpid()))  # a live process stands in for NVIDIA's daemon
    p = subprocess.run([harness.CONTROL, "-d"], env=e.env, capture_output=True, text=True)
    check(p.returncode == 1 and "NVIDIA" in p.stderr and e.pipe in p.stderr,
          "refused: %r" % p.stderr)
    os.unlink(os.path.join(e.pipe, "nvidia-cuda-mps-control.pid"))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(os.path.join(e.pipe, "control"))
    s.listen(1)
    p = subprocess.run([harness.CONTROL, "-d"], env=e.env, capture_output=True, text=True)
    check(p.returncode == 1 and "control socket answers" in p.stderr, "socket: " + p.stderr)
    s.close()
    # NVIDIA's leftovers after its quit (socket files nobody listens on) are fine.
    p = subprocess.run([harness.CONTROL, "-d"], env=e.env, capture_output=True, text=True)
    check(p.returncode == 0, "leftovers do not block: " + p.stderr)
    e.ctl("quit\n")


def test_quit_with_timeout(daemon):
    e = daemon()
    c = e.client("--hold-ms", 60000)
    check(c.stdout.readline().startswith("session"), "session")
    t0 = time.monotonic()
    out, err, rc = e.ctl("quit -t 1\n")
    check(rc == 0 and out == "", "quit answers nothing")
    try:
        e.daemon.wait(timeout=45)
    except subprocess.TimeoutExpired:
        raise Fail("quit -t 1 still waits for the client after 45 s")
    took = time.monotonic() - t0
    # the client would hold 60 s: a quit that waits for it fails here, load does not
    check(0.8 < took < 30, "quit -t 1 took %.1f s" % took)
    c.communicate(timeout=30)
    check(c.returncode == 4, "client ended")
    check("Quit timeout reached" in e.log(), "logged")


def proc_nice(path):
    """The nice value in a /proc/.../stat file (field 19, after the command in parentheses)."""
    with open(path) as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])


def test_server_nice_setting(daemon):
    """OPENMPS_SERVER_NICE sets the server's nice value, every thread's, and, where the kernel
    has session groups (/proc/PID/autogroup), its own session group's, not the daemon's (7 here:
    raising it needs no privilege). A value that is not -20..19 is named in control.log and the
    server keeps the daemon's."""
    e = daemon({"OPENMPS_SERVER_NICE": "7"})
    c = e.client("--pings", 1, "--hold-ms", "eof")
    check(c.stdout.readline().startswith("session"), "served")
    spid = e.servers()[0]
    tasks = os.listdir("/proc/%d/task" % spid)
    nices = [proc_nice("/proc/%d/task/%s/stat" % (spid, t)) for t in tasks]
    check(len(tasks) > 1 and all(n == 7 for n in nices),
          "the server's threads run at nice %r, not 7" % nices)
    if os.path.exists("/proc/%d/autogroup" % spid):
        group = open("/proc/%d/autogroup" % spid).read().split()
        check(group[-1] == "7", "the server's session group: %r" % group)
        with open("/proc/%d/stat" % spid) as f:
            daemon_pid = int(f.read().rsplit(")", 1)[1].split()[1])  # its parent
        # A process that never left the kernel's first session group reads an empty file
        # there (the root group is no session group): different from the server's too.
        theirs = open("/proc/%d/autogroup" % daemon_pid).read().split()
        check(not theirs or (theirs[0] != group[0] and theirs[-1] != "7"),
              "the server's group %r is its daemon's %r" % (group, theirs))
    check("keeps the daemon's" not in e.log("server.log"), e.log("server.log"))
    c.communicate(timeout=60)
    e = daemon({"OPENMPS_SERVER_NICE": "-99"})
    c = e.client("--pings", 1, "--hold-ms", "eof")
    check(c.stdout.readline().startswith("session"), "served")
    spid = e.servers()[0]
    check(proc_nice("/proc/%d/stat" % spid) == proc_nice("/proc/self/stat"),
          "a bad value leaves the daemon's nice value")
    check("OPENMPS_SERVER_NICE=-99 is not a nice value from -20 to 19" in e.log("control.log"),
          "the bad value named: " + e.log("control.log"))
    c.communicate(timeout=60)


def thread_slice_ns(tid):
    """A thread's time slice as sched_getattr(2) reads it (sched_runtime: its slice for a
    SCHED_OTHER thread since Linux 6.12, 0 before)."""
    import ctypes
    import platform
    import struct
    nr = {"x86_64": 315, "aarch64": 275}.get(platform.machine())
    if nr is None:
        return None
    buf = ctypes.create_string_buffer(56)
    if ctypes.CDLL(None, use_errno=True).syscall(nr, tid, buf, 56, 0) != 0:
        return None
    return struct.unpack_from("IIQiIQ", buf.raw)[5]


def kernel_has_slices():
    """Whether this kernel keeps a slice per thread: a child process asks for one of its own."""
    probe = r"""
import ctypes, os, platform, struct, sys
nr = {"x86_64": (314, 315), "aarch64": (274, 275)}.get(platform.machine())
if not nr:
    sys.exit(1)
libc = ctypes.CDLL(None, use_errno=True)
a = ctypes.create_string_buffer(struct.pack("IIQiIQQQ", 48, 0, 0, os.getpriority(0, 0), 0,
                                            400000, 0, 0), 48)
got = ctypes.create_string_buffer(56)
ok = libc.syscall(nr[0], 0, a, 0) == 0 and libc.syscall(nr[1], 0, got, 56, 0) == 0
sys.exit(0 if ok and struct.unpack_from("IIQiIQ", got.raw)[5] == 400000 else 1)
"""
    return subprocess.run([sys.executable, "-c", probe]).returncode == 0


def test_server_slice_setting(daemon):
    """OPENMPS_SERVER_SLICE_US asks the kernel for that time slice on every session thread
    (named om-session), its policy and nice value kept (a daemon started under SCHED_BATCH,
    OPENMPS_SERVER_NICE=3); a kernel without a slice per thread (before Linux 6.12) is named
    once in server.log. A value out of 100..100000 µs is named there too, and the session
    thread keeps the slice its server's main thread has."""
    def session_threads(spid):
        return [int(t) for t in os.listdir("/proc/%d/task" % spid)
                if open("/proc/%d/task/%s/comm" % (spid, t)).read().strip() == "om-session"]

    before = os.sched_getscheduler(0)
    os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))  # the daemon inherits it
    try:
        e = daemon({"OPENMPS_SERVER_SLICE_US": "300", "OPENMPS_SERVER_NICE": "3"})
    finally:
        os.sched_setscheduler(0, before, os.sched_param(0))
    c = e.client("--pings", 1, "--hold-ms", "eof")
    check(c.stdout.readline().startswith("session"), "served")
    spid = e.servers()[0]
    sessions = session_threads(spid)
    check(len(sessions) == 1, "one session thread named om-session: %r" % sessions)
    log = e.log("server.log")
    if kernel_has_slices():
        slices = [thread_slice_ns(t) for t in sessions]
        check(slices == [300000], "the session thread's slice: %r ns, not 300 µs; %s"
              % (slices, log))
        check("time slice of 300 µs" in log, log)
    else:
        check("keeps its own slice" in log, "a kernel without slices named: " + log)
    check(os.sched_getscheduler(sessions[0]) == os.SCHED_BATCH,
          "the slice kept the thread's policy: %d" % os.sched_getscheduler(sessions[0]))
    check(proc_nice("/proc/%d/task/%d/stat" % (spid, sessions[0])) == 3,
          "the slice kept the thread's nice value")
    c.communicate(timeout=60)
    e = daemon({"OPENMPS_SERVER_SLICE_US": "50"})
    c = e.client("--pings", 1, "--hold-ms", "eof")
    check(c.stdout.readline().startswith("session"), "served")
    check(wait_for(lambda: "OPENMPS_SERVER_SLICE_US=50 is not a slice from 100 to 100000"
                   in e.log("server.log"), what="the bad value named"), e.log("server.log"))
    spid = e.servers()[0]
    sessions = session_threads(spid)
    check(sessions and all(thread_slice_ns(t) == thread_slice_ns(spid) for t in sessions),
          "a refused value leaves the kernel's slice: %r against the main thread's %r"
          % ([thread_slice_ns(t) for t in sessions], thread_slice_ns(spid)))
    c.communicate(timeout=60)


def test_limits_reach_the_server(daemon):
    e = daemon({"FAKECUDA_DEVICES": "2"})  # the client's limit for device 1 names one it has
    e.cmd("set_default_active_thread_percentage 40")
    e.cmd("set_default_device_pinned_mem_limit 0 4G")
    env = dict(e.env, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="10",
               CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="0=8G,1=1G", CUDA_MPS_CLIENT_PRIORITY="1")
    rc, out, err = e.run_client("--pings", 1, env=env)
    check(rc == 0, err)
    pid = int(re.search(r"server=(\d+)", out).group(1))
    # the server logs the limits just after its welcome: wait for the lines
    slog = wait_for(lambda: "priority 1 (below normal)" in e.log("server.log") and
                    e.log("server.log"), what="the limits in server.log")
    m = re.findall(r"client (\d+): (.*)", slog)
    got = [t for _, t in m]
    check("active thread percentage 10.0" in got, "client tightens ATP: %r" % got)
    check("device 0 pinned memory limit 4G" in got, "client cannot loosen: %r" % got)
    check("device 1 pinned memory limit 1G" in got, "client adds a limit: %r" % got)
    check("priority 1 (below normal)" in got, "priority: %r" % got)
    e.cmd("set_active_thread_percentage %d 20" % pid)
    rc, out, err = e.run_client("--pings", 1)
    wait_for(lambda: "active thread percentage 20.0" in e.log("server.log"),
             what="the live server's new limit")
    bad = dict(e.env, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="0")
    rc, out, err = e.run_client("--pings", 1, env=bad)
    check(rc == 6 and "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=0" in err, "bad env named: " + err)


def test_systemd_is_told_once_the_daemon_answers(daemon):
    """Under systemd (the unit's Type=notify) the daemon says READY=1, with its pid, on
    NOTIFY_SOCKET (a path, or "@" and an abstract name) once it answers on its socket and its pid
    file is there: `systemctl start`, and what is ordered after the unit, go on then, not at the
    daemon's exec (Type=simple: a job started right after could find no daemon). Received here
    on a datagram socket of the test's, the daemon's socket and pid file are looked at at once."""
    for kind in ("path", "abstract"):
        e = daemon(start=False)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if kind == "path":
            name = os.path.join(e.dir, "notify")
            s.bind(name)
        else:
            name = "@om-notify-%d-%s" % (os.getpid(), os.path.basename(e.dir))
            s.bind("\0" + name[1:])
        s.settimeout(60)  # bounds a failing run only: the datagram ends the wait
        err = e.errfile("daemon")
        e.daemon = subprocess.Popen([harness.CONTROL, "-f"], env=dict(e.env, NOTIFY_SOCKET=name),
                                    stdout=subprocess.DEVNULL, stderr=open(err, "w"))
        e.children.append((e.daemon, err))
        try:
            data = s.recv(4096)
        except socket.timeout:
            raise Fail("%s: no READY=1 on NOTIFY_SOCKET in 60 s: %s" % (kind, open(err).read()))
        answers = e.listening()
        pidf = os.path.join(e.pipe, "openmps-control.pid")
        pid = open(pidf).read().strip() if os.path.exists(pidf) else None
        s.close()
        check(data == b"READY=1\nMAINPID=%d" % e.daemon.pid, "%s: the message: %r" % (kind, data))
        check(answers, "%s: the daemon answers once it said READY=1" % kind)
        check(pid == str(e.daemon.pid), "%s: its pid file then: %r" % (kind, pid))
        check(e.cmd("get_server_list") == "", "%s: it serves" % kind)
        e.quit()
