# SPDX-License-Identifier: MIT
"""The client shim: passthrough without a daemon, remote mode, openmps run, and the cases where
it must run natively (another user's daemon, a squatted pipe directory).
"""
import os
import re
import subprocess
import sys

import harness

from harness import (BIN, Env, REMOTE_DRIVER, SANITIZER, SHIM_DIR, check, sanitized_build,
                     need_binaries_for_other_users, need_root, remote, run_in_private_mounts,
                     wait_for)


SHIM_SMOKE = os.environ.get("OM_SHIM_SMOKE", "build/tests/shim-smoke")


def run_shim(e, extra=None):
    env = dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR), OPENMPS_TRACE="1")
    env.update(extra or {})
    p = subprocess.run([SHIM_SMOKE], env=env, capture_output=True, text=True, timeout=30)
    check(not SANITIZER.search(p.stderr), "sanitizer report in the shim: " + p.stderr)
    check(p.returncode == 0, "shim-smoke rc %d: %s" % (p.returncode, p.stderr))
    return p.stdout.splitlines(), p.stderr


def test_shim_passthrough_without_daemon(daemon):
    """No daemon: every call reaches the real driver (here the test double) directly."""
    e = daemon(start=False)
    out, err = run_shim(e, {"FAKECUDA_DEVICES": "3"})
    check(out[:7] == ["cuInit 0", "cuDriverGetVersion 0 13000", "cuDeviceGetCount 0 3",
                      "cuDeviceGet 0 0", "cuDeviceGetName 0 openmps fake GPU 0",
                      "cuGetProcAddress_v2 cuDeviceGetCount 0 status 0 pointer",
                      "  through the pointer 0 3"], "passthrough answers: %r" % out)
    check("running on the real driver" in err, "trace says passthrough: " + err)
    # The pointer handed out is the driver's own function, not a wrapper.
    check("lookup cuNoSuchThing 13000 0 -> 0 status 1 null" in out, "miss: %r" % out)


def test_shim_remote_mode_with_daemon(daemon):
    """A daemon: the session is opened at cuInit; entry points not remoted yet answer
    NOT_SUPPORTED and are named once; cuGetProcAddress follows the measured table."""
    e = daemon()
    out, err = run_shim(e)
    want = [
        "cuInit 0",
        "cuDriverGetVersion 0 13000",  # passthrough: answered by the local driver
        "cuDeviceGetCount 0 1",  # the server's devices
        "cuDeviceGetName 0 openmps fake GPU 0",
        "lookup cuMemcpyHtoD 13000 2 -> 0 status 0 pointer",
        "lookup cuMemcpyHtoD 3020 2 -> 0 status 2 null",  # per-thread needs 7000
        "lookup cuNoSuchThing 13000 0 -> 0 status 1 null",
        "lookup cuMemAlloc 1000 0 -> 0 status 2 null",
        "cuGetProcAddress cuNoSuchThing 500",
    ]
    for w in want:
        check(w in out, "expected %r in %r" % (w, out))
    check(re.search(r"remote mode: server \d+, client id 1", err), "trace: " + err)
    check(out.count("cuGraphicsUnregisterResource 801") == 2,
          "unsupported: NOT_SUPPORTED: %r" % out)
    check(err.count("cuGraphicsUnregisterResource: not supported") == 1,
          "named once: " + err)
    wait_for(lambda: e.log("server.log").count("called cuGraphicsUnregisterResource, which "
                                               "openmps does "
                                               "not support yet") == 1,
             what="the unsupported call named once in server.log")
    # cuMemAlloc at version 1000 does not exist; the old cuMemAlloc (32-bit pointers)
    # is not remoted: NOT_SUPPORTED, named once.
    check("cuMemAlloc_v2" not in err, "cuMemAlloc_v2 is remoted: " + err)
    wait_for(lambda: "disconnected" in e.log("server.log"), what="the session to end")


FAILREALLOC = os.environ.get("OM_FAILREALLOC", "build/tests/libfailrealloc.so")


def test_allocation_the_shim_cannot_record_is_refused(daemon):
    """Issue #9, defect 12: when the shim's table of device ranges cannot grow, the allocation
    is freed and refused (CUDA_ERROR_OUT_OF_MEMORY) instead of handed out unrecorded, where a
    later cuMemcpy took it for host memory and wrote through the device address."""
    if sanitized_build():
        print("skipped: realloc cannot be interposed in front of the sanitizer's")
        return
    e = daemon()
    # 64 ranges fit the first table (32 bytes each: base, size, pool, device); growing it
    # to 128 asks for 4096.
    p = remote(e, "manyallocs", "80",
               extra={"LD_PRELOAD": os.path.abspath(FAILREALLOC),
                      "FAILREALLOC_BYTES": "4096"})
    out, err = p.communicate(timeout=30)
    check(p.returncode == 0 and "manyallocs ok" in out, "allocations: rc %d %r %r"
          % (p.returncode, out, err[-500:]))
    check("refused 0" not in out, "the failed growth was felt: %r" % out)


def test_openmps_run_wrapper(daemon):
    """openmps run -- CMD puts the shim first in LD_LIBRARY_PATH and in LD_PRELOAD and runs CMD
    as a client; a program whose DT_RPATH names another libcuda.so.1 (as Open MPI's CUDA support
    does) gets that one with LD_LIBRARY_PATH alone, and the shim under openmps run."""
    e = daemon()
    env = dict(e.env, LD_LIBRARY_PATH="/somewhere/else", LD_PRELOAD="")
    p = subprocess.run([os.path.join(BIN, "openmps"), "run", "--", REMOTE_DRIVER, "roundtrip"],
                       env=env, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and "roundtrip ok" in p.stdout, "run: %r" % p.stderr)
    p = subprocess.run([os.path.join(BIN, "openmps"), "run", "--", "sh", "-c",
                        "echo $LD_LIBRARY_PATH"], env=env, capture_output=True, text=True)
    want = os.path.abspath(SHIM_DIR) + ":/somewhere/else"
    check(p.stdout.strip() == want, "LD_LIBRARY_PATH %r, want %r" % (p.stdout, want))
    shim = os.path.realpath(os.path.join(SHIM_DIR, "libcuda.so.1"))
    p = subprocess.run([os.path.join(BIN, "openmps"), "run", "--", "sh", "-c",
                        "echo $LD_PRELOAD"], env=dict(env, LD_PRELOAD="/x/libother.so"),
                       capture_output=True, text=True)
    check(os.path.realpath(p.stdout.strip().split(":")[0]) == shim
          and p.stdout.strip().endswith(":/x/libother.so"),
          "LD_PRELOAD %r: the shim, then what was there" % p.stdout)
    probe = os.path.join(os.path.dirname(REMOTE_DRIVER), "rpath-probe")
    p = subprocess.run([probe], env=dict(env, LD_LIBRARY_PATH=SHIM_DIR), capture_output=True,
                       text=True, timeout=60)
    check(p.returncode == 0 and "libfakecuda" in p.stdout,
          "the DT_RPATH comes before LD_LIBRARY_PATH: %r %r" % (p.stdout, p.stderr))
    p = subprocess.run([os.path.join(BIN, "openmps"), "run", "--", probe], env=env,
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and p.stdout.strip() == "cuInit from " + shim,
          "under openmps run the shim, whatever the DT_RPATH: %r %r" % (p.stdout, p.stderr))
    p = subprocess.run([os.path.join(BIN, "openmps"), "run", "--", "/no/such/program"],
                       env=env, capture_output=True, text=True)
    check(p.returncode == 127 and "cannot run /no/such/program" in p.stderr, p.stderr)


def test_shim_sees_every_device(daemon):
    """A server with three GPUs: a client sees all three (remote_client_uses_every_device uses
    two of them)."""
    e = daemon({"FAKECUDA_DEVICES": "3"})
    out, err = run_shim(e)
    check("cuDeviceGetCount 0 3" in out, "three devices: %r" % out)
    check(len(e.cmd("device_query").splitlines()) == 5, "device_query lists all three")


def check_native_with_one_warning(out, err, why):
    check(out[:3] == ["cuInit 0", "cuDriverGetVersion 0 13000", "cuDeviceGetCount 0 1"],
          "the program runs on the real driver (here the double), not 805: %r" % out)
    check("running on the real driver" in err, "trace says passthrough: " + err)
    warnings = [l for l in err.splitlines() if l.startswith("openmps: ")]
    check(len(warnings) == 1 and why in warnings[0],
          "one warning naming %r on stderr: %r" % (why, warnings))


def test_shim_ignores_a_daemon_of_another_user(daemon):
    """A daemon run by another user (its directory and socket neither root's nor ours) is no
    daemon for us: the program runs natively, with one warning, instead of failing with 805."""
    need_binaries_for_other_users()
    e = daemon(start=False)
    e.start_as_user(12005)
    out, err = run_shim(e)
    check_native_with_one_warning(out, err, "belongs to uid 12005, neither root nor this user")


def test_squatted_pipe_directory_runs_natively():
    """Another user who creates the pipe directory, or a socket in a directory anyone may write
    (as /tmp), and listens there: the program runs natively with one warning, not 805, and
    never talks to that listener."""
    need_root()
    e = Env(start=False)
    ok = False
    listener = None
    try:
        listen = ("import os,socket,sys\n"
                  "os.setgroups([]); os.setgid(12009); os.setuid(12009)\n"
                  "os.makedirs(sys.argv[1], exist_ok=True)\n"
                  "s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
                  "s.bind(os.path.join(sys.argv[1], 'control.sock')); s.listen(64)\n"
                  "print('listening', flush=True)\n"
                  "conns=[]\n"
                  "while True:\n"
                  "  c, _ = s.accept(); conns.append(c)\n"
                  "  open(sys.argv[2], 'a').write('accepted\\n')\n")
        talked = os.path.join(e.dir, "talked")
        shared = os.path.join(e.dir, "shared")  # a directory anyone may write, as /tmp
        os.mkdir(shared)
        os.chmod(shared, 0o1777)
        open(talked, "w").close()
        os.chmod(talked, 0o666)
        for where, why in ((os.path.join(shared, "openmps"), "belongs to uid 12009"),
                           (shared, "belongs to uid 12009")):
            listener = subprocess.Popen([sys.executable, "-c", listen, where, talked],
                                        stdout=subprocess.PIPE, text=True)
            check(listener.stdout.readline().strip() == "listening", "the squatter listens")
            out, err = run_shim(e, {"CUDA_MPS_PIPE_DIRECTORY": where})
            check_native_with_one_warning(out, err, why)
            listener.kill()
            listener.wait()
            listener = None
        check(open(talked).read() == "", "the program never connected to the squatter")
        ok = True
    finally:
        if listener:
            listener.kill()
        e.close(ok)


# A root daemon started with no CUDA_MPS_* directories, in a mount namespace of its own (so that
# /run, /tmp and /var/log are empty private ones: harness.PRIVATE_MOUNTS) where another user
# squatted /tmp/openmps.
ROOT_DEFAULTS = r"""
mkdir -m 0755 /tmp/openmps
chown 12010:12010 /tmp/openmps
"$CONTROL" -d
trap 'kill -9 $(cat /run/openmps/*.pid 2>/dev/null) 2>/dev/null || true' EXIT
echo "dirs $(stat -c '%n %U %a' /run/openmps /var/log/openmps | tr '
' ' ')"
"$SMOKE" > /tmp/remote.out 2> /tmp/remote.err || echo "smoke failed: $?"
echo "served $(grep -c 'Accepting client' /var/log/openmps/control.log)"
echo quit | "$CONTROL"
for i in $(seq 600); do [ -S /run/openmps/control.sock ] || break; sleep 0.1; done
"$SMOKE" > /tmp/native.out 2> /tmp/native.err || echo "smoke failed: $?"
echo "remote $(head -1 /tmp/remote.out) / $(grep -c 'remote mode: server' /tmp/remote.err)"
echo "native $(head -3 /tmp/native.out | tr '
' ',') / $(grep '^openmps: ' /tmp/native.err)"
"""


def test_root_daemon_defaults_to_run_openmps():
    """With no CUDA_MPS_PIPE_DIRECTORY, a root daemon uses /run/openmps (and its logs
    /var/log/openmps), which only root can create, so another user who made /tmp/openmps first
    does not keep it from starting; programs find it there; once it is gone they run natively,
    told once that /tmp/openmps is not to be trusted."""
    out = run_in_private_mounts(ROOT_DEFAULTS, "a private /run", SHIM_SMOKE)
    check("dirs /run/openmps root 755 /var/log/openmps root 700" in out,
          "the root daemon's directories: %r" % out)
    check("remote cuInit 0 / 1" in out and "served 1" in out, "a program served: %r" % out)
    check("native cuInit 0,cuDriverGetVersion 0 13000,cuDeviceGetCount 0 1," in out and
          "/tmp/openmps" in out and "belongs to uid 12010" in out,
          "then natively, with one warning: %r" % out)
