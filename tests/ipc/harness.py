# SPDX-License-Identifier: MIT
"""The IPC tests' harness: the real openmps-control and openmps-server in fresh pipe directories.

Env is one daemon's world (its pipe and log directories, its environment, the processes it ran);
tests get theirs from the `daemon` fixture (conftest.py), which closes it when the test ends, or
make and close one themselves where a test needs several in turn. The server loads the driver
test double (tests/cpu/fakecuda) through OPENMPS_DRIVER. A test fails when any child process
wrote a sanitizer report to its stderr. The paths come from the environment CTest gives each
test (tests/CMakeLists.txt, OM_IPC_ENV); the protocol's constants from protocol.h (protocol.py).
"""
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import time

import pytest

from protocol import MAGIC, MAJOR, MINOR

BIN = os.environ.get("OM_BIN_DIR", "build")
CLIENT = os.environ.get("OM_TEST_CLIENT", "build/tests/om-test-client")
FAKECUDA = os.environ.get("OM_FAKECUDA", "build/tests/libfakecuda.so")
CONTROL = os.path.join(BIN, "openmps-control")

SANITIZER = re.compile(r"ERROR: (Address|Leak|Memory|Thread)Sanitizer|runtime error:")


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


def wait_for(cond, timeout=60.0, what="condition"):
    """Polls cond until it is true. The deadline only bounds a failing run (a passing one
    returns as soon as cond holds), so it is generous: a loaded CI machine must not fail here."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    raise Fail("timed out waiting for " + what)


class Env:
    """A daemon in its own temporary pipe and log directories."""

    def __init__(self, extra_env=None, start=True, root_dir=None):
        self.dir = root_dir or tempfile.mkdtemp(prefix="om-ipc-")
        os.chmod(self.dir, 0o755)
        self.pipe = os.path.join(self.dir, "pipe")
        self.logs = os.path.join(self.dir, "log")
        self.env = dict(os.environ)
        self.env.update({
            "CUDA_MPS_PIPE_DIRECTORY": self.pipe,
            "CUDA_MPS_LOG_DIRECTORY": self.logs,
            "OPENMPS_DRIVER": os.path.abspath(FAKECUDA),
            # no module images carried from one test's server to the next (imgcache.c): a
            # test that wants the cache names a directory of its own
            "OPENMPS_MODULE_CACHE": "off",
            # servers get a minimal environment (servers.c): the driver double's settings are
            # passed to them by name, as an operator would pass another driver's
            "OPENMPS_SERVER_ENV": "FAKECUDA_*",
        })
        for k in ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
                  "CUDA_MPS_CLIENT_PRIORITY"):
            self.env.pop(k, None)
        if extra_env:
            self.env.update(extra_env)
        self.daemon = None
        self.daemon_args = []  # more options of `openmps-control -f` (-p 3, -a FILE)
        self.children = []  # (Popen, stderr path)
        self.n = 0
        if start:
            self.start()

    def errfile(self, tag):
        self.n += 1
        return os.path.join(self.dir, "%s-%d.err" % (tag, self.n))

    def start(self, preexec=None):
        err = self.errfile("daemon")
        self.daemon = subprocess.Popen([CONTROL, "-f"] + self.daemon_args, env=self.env, stdout=subprocess.DEVNULL,
                                       stderr=open(err, "w"), preexec_fn=preexec)
        self.children.append((self.daemon, err))
        wait_for(lambda: self.listening() or self.daemon.poll() is not None,
                 what="the daemon's socket")
        check(self.daemon.poll() is None, "daemon exited at start: " + open(err).read())

    def start_as_user(self, uid):
        """A daemon run by a plain user, in directories that user owns."""
        os.makedirs(self.pipe, mode=0o700)
        os.makedirs(self.logs, mode=0o755)
        os.chown(self.pipe, uid, uid)
        os.chown(self.logs, uid, uid)
        self.start(preexec=as_user(uid))

    def listening(self):
        """True when a daemon accepts connections (a stale socket file does not)."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            s.connect(os.path.join(self.pipe, "control.sock"))
            return True
        except OSError:
            return False
        finally:
            s.close()

    def ctl(self, text, args=None, env=None):
        """Runs the front-end; returns (stdout, stderr, rc)."""
        p = subprocess.run([CONTROL] + (args or []), input=text, env=env or self.env,
                           capture_output=True, text=True, timeout=30)
        for line in p.stderr.splitlines():
            check(not SANITIZER.search(line), "sanitizer report in the front-end: " + p.stderr)
        return p.stdout, p.stderr, p.returncode

    def cmd(self, line):
        out, err, rc = self.ctl(line + "\n")
        check(rc == 0, "front-end rc %d for %r: %s" % (rc, line, err))
        return out.rstrip("\n")

    def client(self, *args, env=None, preexec=None):
        err = self.errfile("client")
        # stdin a pipe: a client run with --hold-ms eof holds its session until the test
        # closes it (communicate() does), however long the test took to get there
        p = subprocess.Popen([CLIENT] + [str(a) for a in args], env=env or self.env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=open(err, "w"), text=True, preexec_fn=preexec)
        self.children.append((p, err))
        p.errpath = err
        return p

    def ended(self, p, timeout=60):
        """Waits for a client the daemon or server ends, its stdin left open (closing it would
        let a --hold-ms eof client leave on its own first); returns its stdout."""
        p.wait(timeout=timeout)
        return p.stdout.read()

    def run_client(self, *args, timeout=30, **kw):
        p = self.client(*args, **kw)
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out, open(p.errpath).read()

    def servers(self):
        return [int(x) for x in self.cmd("get_server_list").split()]

    def clients(self, spid):
        return [int(x) for x in self.cmd("get_client_list %d" % spid).split()]

    def log(self, name="control.log"):
        try:
            return open(os.path.join(self.logs, name)).read()
        except FileNotFoundError:
            return ""

    def quit(self):
        if self.daemon and self.daemon.poll() is None:
            out, err, rc = self.ctl("quit -t 2\n")
            try:
                self.daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                raise Fail("the daemon did not exit after quit -t 2 (front-end rc %d %s); log:\n%s"
                           % (rc, err, self.log()[-1500:]))

    def close(self, ok):
        try:
            self.quit()
        except Fail as ex:
            if ok:
                raise
            print("(after the failure) " + str(ex)[:300])  # the first failure is the one reported
        finally:
            for p, _ in self.children:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            reports = []
            for _, err in self.children:
                text = open(err, errors="replace").read()  # a daemon may echo any byte
                if SANITIZER.search(text):
                    reports.append("%s:\n%s" % (err, text[-4000:]))
            if reports:
                raise Fail("sanitizer report(s):\n" + "\n".join(reports))
            if ok:
                shutil.rmtree(self.dir, ignore_errors=True)


def raw_msg(mtype, payload=b"", magic=MAGIC, major=MAJOR, length=None):
    return struct.pack("<IHHHHI", magic, major, MINOR, mtype, 0,
                       len(payload) if length is None else length) + payload


def raw_conn(e):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(os.path.join(e.pipe, "control.sock"))
    s.settimeout(20)  # bounds a failing run only: a drop or an answer ends the wait at once
    return s


def recv_msg(s):
    data = s.recv(70000)
    if not data:
        return None, b""
    _, _, _, mtype, _, length = struct.unpack("<IHHHHI", data[:16])
    return mtype, data[16:16 + length]


def proc_uid(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("Uid:"):
                return int(line.split()[1])
    return None


def as_user(uid):
    def fn():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    return fn


SHIM_DIR = os.environ.get("OM_SHIM_DIR", "build/lib")


REMOTE_DRIVER = os.environ.get("OM_REMOTE_DRIVER", "build/tests/remote-driver")


def sanitized_build():
    """True for the ASan+UBSan build (its CMakeCache says so)."""
    try:
        cache = open(os.path.join(BIN, "CMakeCache.txt")).read()
    except OSError:
        return False
    return "OPENMPS_SANITIZE:BOOL=ON" in cache


def driver_program(e, prog, args, extra=None, stdin=None):
    """Starts one of tests/cpu's driver-API programs on the shim (build/lib/libcuda.so.1), in
    e's environment plus extra; stdout and stderr are pipes, text. prog is a path, or the name
    of a program built beside remote-driver."""
    env = dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR))
    env.update(extra or {})
    if os.sep not in prog:
        prog = os.path.join(os.path.dirname(REMOTE_DRIVER), prog)
    return subprocess.Popen([prog] + list(args), env=env, stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def remote(e, *args, extra=None):
    return driver_program(e, REMOTE_DRIVER, args, extra)


def fair_clients(e, kernels, procs, n=2, timeout=60):
    """n clients of the remote driver's fair mode, each with a first long kernel launched, then
    released together to launch kernels - 1 more and synchronize. They are added to procs (the
    caller kills what is left when a check fails); returns each one's (returncode, out, err)."""
    for _ in range(n):
        procs.append(driver_program(e, REMOTE_DRIVER, ["fair", str(kernels)],
                                    stdin=subprocess.PIPE))
    for p in procs[-n:]:
        check(p.stdout.readline().strip() == "launched", "a fair-share client's first kernel")
    for p in procs[-n:]:
        p.stdin.write("go\n")
        p.stdin.flush()
    done = []
    for p in procs[-n:]:
        out, err = p.communicate(timeout=timeout)
        done.append((p.returncode, out, err))
    return done


def pinned_fds(spid, nbytes=False):
    """The server's pinned regions (one memfd mapping each, hostmem.c: openmps-pinned for those
    it made, openmps-registered for a client's own pages): how many, or their bytes. Counted in
    its maps, not its descriptors: a region's descriptor is closed once the client has it."""
    n = 0
    for line in open("/proc/%d/maps" % spid):
        f = line.split()
        if len(f) >= 6 and f[5].startswith(("/memfd:openmps-pinned",
                                            "/memfd:openmps-registered")):
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            n += hi - lo if nbytes else 1
    return n


def ended(e, pid):
    return "Client %d disconnected" % pid in e.log("server.log")


def remote_case(case, timeout):
    """Runs one case of the remote driver against a fresh daemon; it must print "CASE ok"."""
    e = Env()
    ok = False
    try:
        p = remote(e, case)
        out, err = p.communicate(timeout=timeout)
        check(p.returncode == 0 and "%s ok" % case in out, "%s: %r %r" % (case, out, err))
        ok = True
    finally:
        e.close(ok)


def need_root():
    if os.getuid() != 0:
        pytest.skip("needs root to run processes as other users (running as uid %d)" %
                    os.getuid())


# The start of run_in_private_mounts's scripts: a private /run, where what runs is copied (the
# build may lie under /tmp, a clone there, which the script's own mount of /tmp then hides);
# CONTROL, SMOKE, OPENMPS_DRIVER and LD_LIBRARY_PATH name the copies, /tmp and /var/log are
# empty private ones.
PRIVATE_MOUNTS = r"""
set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/omtest/lib
cp "$CONTROL" "$(dirname "$CONTROL")/openmps-server" "$SMOKE" "$OPENMPS_DRIVER" /run/omtest/
cp -a "$SHIMDIR"/. /run/omtest/lib/
CONTROL=/run/omtest/$(basename "$CONTROL")
SMOKE=/run/omtest/$(basename "$SMOKE")
export OPENMPS_DRIVER=/run/omtest/$(basename "$OPENMPS_DRIVER") LD_LIBRARY_PATH=/run/omtest/lib
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /var/log
"""


def run_in_private_mounts(script, why, smoke):
    """Runs PRIVATE_MOUNTS then the bash script as root in a mount namespace of its own, with no
    CUDA_MPS_* variables, the paths of the build in CONTROL, SMOKE (the client program) and
    SHIMDIR, and the double as the driver; skips when there is no such namespace (why: what the
    test needs it for). Returns its stdout, printed."""
    need_root()
    if shutil.which("unshare") is None or subprocess.run(
            ["unshare", "--mount", "true"], capture_output=True).returncode != 0:
        pytest.skip("no mount namespace for %s (unshare --mount)" % why)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_MPS_")}
    env.update({"CONTROL": os.path.abspath(CONTROL), "SMOKE": os.path.abspath(smoke),
                "OPENMPS_DRIVER": os.path.abspath(FAKECUDA), "OPENMPS_SERVER_ENV": "FAKECUDA_*",
                "OPENMPS_MODULE_CACHE": "off", "OPENMPS_TRACE": "1",
                "LD_LIBRARY_PATH": os.path.abspath(SHIM_DIR),
                "SHIMDIR": os.path.abspath(SHIM_DIR)})
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c",
                        PRIVATE_MOUNTS + script],
                       env=env, capture_output=True, text=True, timeout=240)
    print(p.stdout.strip())
    check(p.returncode == 0, "rc %d: %s %s" % (p.returncode, p.stdout, p.stderr[-2000:]))
    return p.stdout


def reachable_by_others(path, mode):
    """Whether a user other than root can reach path with the given permission bits (0o5: read
    and run, 0o4: read): every directory above it searchable by others, path itself allowed."""
    path = os.path.realpath(path)
    d = os.path.dirname(path)
    while True:
        if not os.stat(d).st_mode & 0o001:
            return False
        if d == os.path.dirname(d):
            break
        d = os.path.dirname(d)
    return os.stat(path).st_mode & mode == mode


def need_binaries_for_other_users():
    """Processes run as other users (the daemon, the server it starts for a user, the test
    client, the driver test double the server loads) need their files reachable. A checkout in
    a directory others cannot enter (root's home, 0700) is not: the files are then copied to a
    temporary directory they can enter, with the libraries they load from such a directory, and
    the test runs those copies. Skips, saying why, where even that cannot be done."""
    global CONTROL, CLIENT, FAKECUDA
    need_root()
    tmp = tempfile.gettempdir()
    if not reachable_by_others(tmp, 0o1):
        pytest.skip("other users cannot enter the temporary directory %s (set TMPDIR to one "
                    "they can)" % tmp)
    files = {"control": CONTROL, "server": os.path.join(os.path.dirname(CONTROL), "openmps-server"),
             "client": CLIENT, "fakecuda": FAKECUDA}
    if all(reachable_by_others(f, 0o4 if k == "fakecuda" else 0o5) for k, f in files.items()):
        return
    copy = tempfile.mkdtemp(prefix="om-bin-")
    os.chmod(copy, 0o755)
    import atexit
    atexit.register(shutil.rmtree, copy, True)
    libs = set()
    for f in files.values():
        # the libraries a file loads from a place others cannot reach go beside the copies
        p = subprocess.run(["ldd", f], capture_output=True, text=True)
        for lib in re.findall(r"=> (/\S+)", p.stdout):
            if not reachable_by_others(lib, 0o4):
                libs.add(lib)
    for f in list(files.values()) + sorted(libs):
        shutil.copy(f, copy)  # the daemon finds openmps-server beside itself: both go here
        os.chmod(os.path.join(copy, os.path.basename(f)), 0o755)
    if libs:
        os.environ["LD_LIBRARY_PATH"] = copy + (":" + os.environ["LD_LIBRARY_PATH"]
                                                if os.environ.get("LD_LIBRARY_PATH") else "")
    CONTROL, CLIENT, FAKECUDA = (os.path.join(copy, os.path.basename(files[k]))
                                 for k in ("control", "client", "fakecuda"))
    print("the build is not reachable by other users: running copies in %s" % copy)


def ctl_as(e, uid, text):
    """The front-end run as another user: its stdout."""
    p = subprocess.run([CONTROL], input=text, env=e.env, capture_output=True, text=True,
                       timeout=30, preexec_fn=as_user(uid))
    check(p.returncode == 0, "front-end as uid %d: rc %d %s" % (uid, p.returncode, p.stderr))
    return p.stdout.rstrip("\n")
