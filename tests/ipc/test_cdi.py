# SPDX-License-Identifier: MIT
"""openmps cdi (src/cli/cdi.c): the CDI spec it writes, its checks of what it is given, its
atomic writes; and a client in a container made from that spec alone (bubblewrap, every
namespace new: no host IPC, no host /dev/shm, no host network, its own pids) served by the
daemon outside (docs/operations.md, "Kubernetes and containers")."""
import json
import os
import shutil
import subprocess
import tempfile

import cdi_bwrap
import harness
from harness import check, sanitized_build, wait_for

OPENMPS = os.path.join(harness.BIN, "openmps")
MEMORY_DRIVER = os.environ.get("OM_MEMORY_DRIVER", "build/tests/memory-driver")
SHIM = os.path.join(harness.SHIM_DIR, "libcuda.so.1")


def cdi(*args, env=None):
    p = subprocess.run([OPENMPS, "cdi"] + list(args), capture_output=True, text=True,
                       timeout=30, stdin=subprocess.DEVNULL, env=env)
    return p.returncode, p.stdout, p.stderr


def test_cdi_spec_written_and_its_inputs_checked():
    """The spec: one device whose edits are the pipe directory's and the shim's bind mounts,
    CUDA_MPS_PIPE_DIRECTORY, LD_PRELOAD and the --env variables; written atomically to a *.json
    file. Each bad input is refused with a message naming it, and a refused run leaves the file
    it would have replaced as it was."""
    top = tempfile.mkdtemp(prefix="om-cdi-")
    ok = False
    try:
        pipe = os.path.join(top, "pipe")
        os.mkdir(pipe)
        out = os.path.join(top, "cdi", "openmps.json")
        os.mkdir(os.path.dirname(out))
        rc, so, se = cdi("--pipe-dir", pipe, "--shim", os.path.abspath(SHIM), "-o", out,
                         "--env", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25", "--kind", "example.com/gpu",
                         "--name", "mps0")
        check(rc == 0 and so == "" and se == "", "cdi: %d %r %r" % (rc, so, se))
        spec = json.load(open(out))
        check(os.stat(out).st_mode & 0o777 == 0o644, "the spec is 0644")
        check(os.listdir(os.path.dirname(out)) == ["openmps.json"], "no temporary file left")
        check(spec["cdiVersion"] == "0.5.0" and spec["kind"] == "example.com/gpu" and
              [d["name"] for d in spec["devices"]] == ["mps0"], "spec %r" % spec)
        edits = spec["devices"][0]["containerEdits"]
        check(edits["env"] == ["CUDA_MPS_PIPE_DIRECTORY=" + pipe,
                               "LD_PRELOAD=/opt/openmps/lib/libcuda.so.1",
                               "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25"], "env %r" % edits["env"])
        check(edits["mounts"] == [
            {"hostPath": os.path.abspath(SHIM), "containerPath": "/opt/openmps/lib/libcuda.so.1",
             "type": "bind", "options": ["ro", "nosuid", "nodev", "bind"]},
            {"hostPath": pipe, "containerPath": pipe, "type": "bind",
             "options": ["ro", "nosuid", "nodev", "noexec", "bind"]}], "mounts %r" % edits)
        # to stdout by default; the pipe directory from CUDA_MPS_PIPE_DIRECTORY; the shim found
        # beside the program, as openmps run finds it
        rc, so, se = cdi(env=dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=pipe))
        check(rc == 0 and json.loads(so)["devices"][0]["containerEdits"]["mounts"][1]["hostPath"]
              == pipe, "stdout: %d %r" % (rc, se))
        check(json.loads(so)["devices"][0]["containerEdits"]["mounts"][0]["hostPath"] ==
              os.path.realpath(SHIM) or os.path.samefile(
                  json.loads(so)["devices"][0]["containerEdits"]["mounts"][0]["hostPath"], SHIM),
              "the shim found: %r" % so)
        # a missing pipe directory is said, not refused (the daemon may make it later)
        rc, so, se = cdi("--pipe-dir", os.path.join(top, "later"))
        check(rc == 0 and "does not exist yet" in se, "later: %d %r" % (rc, se))

        before = open(out).read()
        notshim = os.path.join(top, "libcuda.so.1")
        with open(notshim, "wb") as f:
            f.write(b"\x7fELF not the shim" * 100)
        os.symlink(pipe, os.path.join(top, "link"))
        usage = [  # refused before anything is read: exit status 2
            (["--pipe-dir", "run/openmps"], "--pipe-dir \"run/openmps\" is not absolute"),
            (["--pipe-dir", "/run/../tmp"], "has a . or .. component"),
            (["--container-pipe-dir", "/mps/"], "has an empty component"),
            (["--container-shim", "lib/libcuda.so.1"], "--container-shim \"lib/libcuda.so.1\" "
                                                       "is not absolute"),
            (["--container-shim", "/opt/a b/libcuda.so.1"], "has a colon or a space"),
            (["--container-pipe-dir", "/mps", "--container-shim", "/mps/lib/libcuda.so.1"],
             "lies in the container's pipe directory /mps"),
            (["--kind", "mps"], "--kind \"mps\" is not VENDOR/CLASS"),
            (["--kind", "a.com/b/c"], "is not VENDOR/CLASS"),
            (["--kind", "a.com/-b"], "is not VENDOR/CLASS"),
            (["--name", "a b"], "--name \"a b\" is not a device name"),
            (["--env", "NOEQUALS"], "--env \"NOEQUALS\" is not NAME=VALUE"),
            (["--env", "1X=2"], "is not NAME=VALUE"),
            (["--env", "A=\x01"], "--env A: the value has a control"),
            (["--env", "LD_PRELOAD=/x.so"], "--env LD_PRELOAD: the spec sets it itself"),
            (["--env", "A=1", "--env", "A=2"], "--env A given twice"),
            (["-o", os.path.join(top, "cdi", "openmps.yaml")], "name it *.json"),
            (["--frob"], "unknown option --frob"),
            (["--pipe-dir"], "option --pipe-dir needs an argument"),
            (["extra"], "unexpected argument \"extra\""),
        ]
        found = [  # refused once looked at: exit status 1
            (["--pipe-dir", os.path.join(top, "link")], "is a symlink, not a directory"),
            (["--pipe-dir", out], "is a file, not a directory"),
            (["--shim", notshim], "is not the openmps shim (is it NVIDIA's libcuda.so.1?)"),
            (["--shim", os.path.join(top, "none")], "cannot read the shim"),
        ]
        for status, cases in ((2, usage), (1, found)):
            for args, why in cases:
                rc, so, se = cdi(*(["-o", out] + args))
                check(rc == status and why in se and so == "",
                      "%r: rc %d %r %r" % (args, rc, so, se))
                check(open(out).read() == before, "%r: the old spec left as it was" % args)
        # a directory that cannot be written: refused, nothing left behind
        if os.geteuid() != 0:
            os.chmod(os.path.dirname(out), 0o555)
            rc, so, se = cdi("--pipe-dir", pipe, "-o", out)
            check(rc == 1 and "cannot write " + out in se, "unwritable: %d %r" % (rc, se))
            os.chmod(os.path.dirname(out), 0o755)
        rc, so, se = cdi("--pipe-dir", pipe, "-o", os.path.join(top, "nodir", "x.json"))
        check(rc == 1 and "cannot write" in se and "No such file or directory" in se,
              "no directory: %d %r" % (rc, se))
        check(sorted(os.listdir(os.path.dirname(out))) == ["openmps.json"], "nothing left")
        ok = True
    finally:
        if ok:
            shutil.rmtree(top, ignore_errors=True)


def test_cdi_install_shim_replaces_by_rename():
    """--install-shim DIR copies the shim there (DIR made when missing) and the spec names the
    copy; a second run replaces it by a rename, so a container holding the first copy (a bind
    mount keeps the file it was given) keeps it whole."""
    top = tempfile.mkdtemp(prefix="om-cdi-")
    ok = False
    try:
        lib = os.path.join(top, "lib")
        rc, so, se = cdi("--pipe-dir", top, "--install-shim", lib)
        copy = os.path.join(lib, "libcuda.so.1")
        check(rc == 0 and json.loads(so)["devices"][0]["containerEdits"]["mounts"][0]
              ["hostPath"] == copy, "install: %d %r %r" % (rc, so, se))
        check(open(copy, "rb").read() == open(SHIM, "rb").read(), "the copy is the shim")
        check(os.stat(copy).st_mode & 0o777 == 0o644 and os.stat(lib).st_mode & 0o777 == 0o755,
              "modes")
        held = open(copy, "rb")  # a container's mount of it
        first = os.fstat(held.fileno()).st_ino
        rc, so, se = cdi("--pipe-dir", top, "--install-shim", lib)
        check(rc == 0, "again: %r" % se)
        check(os.stat(copy).st_ino != first and held.read() == open(SHIM, "rb").read(),
              "replaced by a rename, the held one intact")
        held.close()
        check(sorted(os.listdir(lib)) == ["libcuda.so.1"], "no temporary file left")
        rc, so, se = cdi("--pipe-dir", top, "--install-shim", os.path.join(top, "no", "dir"))
        check(rc == 1 and "cannot make --install-shim" in se, "missing parent: %r" % se)
        ok = True
    finally:
        if ok:
            shutil.rmtree(top, ignore_errors=True)


def test_cdi_container_client_is_served(daemon):
    """A client in a bubblewrap container made from the spec alone (cdi_bwrap: the spec's
    mounts and environment, the host's /usr, the program's own file; every namespace new) is
    served by the daemon outside: it allocates, the daemon's `ps -v` shows it (the cap the
    spec's --env gave it, the memory it holds) under its host pid, whose IPC, mount and pid
    namespaces are not the daemon's; its trace says remote mode; it exits 0. The container's
    pipe directory is at another path than the host's, as in a pod."""
    why = cdi_bwrap.usable()
    check(why is None, "no container for this test: %s" % why)
    e = daemon()
    top = tempfile.mkdtemp(prefix="om-cdi-")
    os.chmod(top, 0o755)
    spec = os.path.join(top, "openmps.json")
    # a sanitizer build's shim, preloaded, comes before its runtime (as under openmps run)
    asan = ["--env", "ASAN_OPTIONS=verify_asan_link_order=0"] if sanitized_build() else []
    rc, so, se = cdi("--pipe-dir", e.pipe, "--container-pipe-dir", "/run/mps/pipe",
                     "--install-shim", os.path.join(top, "shim"), "-o", spec,
                     "--env", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1G", "--env", "OPENMPS_TRACE=1",
                     *asan)
    check(rc == 0, "openmps cdi: %r" % se)
    prog = os.path.abspath(MEMORY_DRIVER)
    argv = cdi_bwrap.command(spec, "openmps/mps=client",
                             ["--ro-bind", prog, "/opt/prog/memory-driver"],
                             ["/opt/prog/memory-driver", "hold", str(32 << 20)])
    err = e.errfile("container-client")
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=open(err, "w"), text=True)
    e.children.append((p, err))
    line = p.stdout.readline().strip()
    check(line == "held", "the client in the container: %r %s" % (line, open(err).read()))

    def row():
        rows = [r.split() for r in e.cmd("ps -v").splitlines()[1:]]
        mine = [r for r in rows if r[5].endswith("memory-driver")]
        return mine[0] if mine and mine[0][-1] == "32M" else None
    mine = wait_for(row, what="ps -v showing the container's client holding 32M")
    check(mine[-2] == "1G", "the spec's cap applied: %r" % mine)
    pid = int(mine[0])
    for ns in ("ipc", "mnt", "pid", "net"):
        check(os.readlink("/proc/%d/ns/%s" % (pid, ns)) != os.readlink("/proc/self/ns/" + ns),
              "the client runs in a %s namespace of its own" % ns)
    nspid = [l for l in open("/proc/%d/status" % pid) if l.startswith("NSpid:")][0].split()
    check(len(nspid) == 3 and nspid[1] == str(pid), "seen from the daemon by its host pid: %r"
          % nspid)
    p.stdin.write("\n")
    p.stdin.flush()
    check(p.wait(timeout=60) == 0, "the client's exit status %d: %s" % (p.returncode,
                                                                        open(err).read()))
    trace = open(err).read()
    check("remote mode: server" in trace, "served (its trace): %s" % trace[-2000:])
    check("Client %d connected" % pid in e.log("server.log") or str(pid) in e.log(),
          "the daemon's log names it")
    # What the container saw: the spec's pipe directory at its path with the daemon's socket,
    # the shim, an empty /dev/shm and /tmp, none of the host's build.
    argv = cdi_bwrap.command(spec, "openmps/mps=client", [], [
        "/bin/sh", "-c", 'ls -A /run/mps/pipe /dev/shm /tmp /opt/openmps/lib; echo "$LD_PRELOAD";'
        ' ls %s 2>&1; rm /run/mps/pipe/control.sock 2>&1; echo "$CUDA_MPS_PIPE_DIRECTORY"'
        % os.path.dirname(prog)])
    seen = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    check(seen.returncode == 0, "the look around: %r" % seen.stderr)
    listed = seen.stdout.split("\n\n")  # ls: one block per directory, in name order
    check(len(listed) >= 4 and listed[0] == "/dev/shm:" and
          listed[1] == "/opt/openmps/lib:\nlibcuda.so.1" and
          listed[2].startswith("/run/mps/pipe:\n") and "control.sock" in listed[2].split() and
          listed[3].startswith("/tmp:\n/opt/openmps"), "saw %r" % seen.stdout)
    # the pipe directory is read-only there: a container's root cannot put a listener of its
    # own in the daemon's place for the other containers (a socket on a read-only mount still
    # takes connections)
    check("Read-only file system" in seen.stdout and e.listening(), "saw %r" % seen.stdout)
    check("/opt/openmps/lib/libcuda.so.1\n" in seen.stdout and "No such file" in seen.stdout and
          seen.stdout.endswith("/run/mps/pipe\n"), "saw %r" % seen.stdout)
    shutil.rmtree(top, ignore_errors=True)
