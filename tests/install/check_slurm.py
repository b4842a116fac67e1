#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A real single-node Slurm serving its jobs through openmps (CTest's install.slurm).

    check_slurm.py BUILD CMAKE

Installs the build into a fresh prefix (CMAKE --install into BUILD/slurm-prefix.XXXX), then
starts, in a fresh temporary directory, munged (its own key and socket), slurmctld and slurmd
(-D, their own slurm.conf, gres.conf, plugstack.conf, spool and state directories, free ports)
from Debian's packages, with the installed prolog and epilog (libexec/openmps/slurm/) and the
installed SPANK plugin (lib*/openmps/slurm/spank_openmps.so), as docs/operations.md's "Slurm"
recipe sets them up. The node has one GPU (a character device of NVIDIA's major that nothing
opens stands for it) shared as gres/mps:100; the jobs run
tests/cpu/device_limits.c, an unmodified program that finds the driver double as its
libcuda.so.1 (RUNPATH) and prints the SM count and memory it is shown. It checks:
  * srun --gres=mps:50 (with CUDA_MPS_PINNED_DEVICE_MEM_LIMIT in the job's environment): the
    prolog started the daemon, the program is served (the shim's "remote mode", the server's
    log line with the job's share) and sees 64 of the 132 SMs and a 2 GiB cap; the epilog quit
    the daemon;
  * srun without --gres=mps, and srun --gres=mps:50 --openmps=no: the program runs natively
    (132 SMs, 16 GiB, no remote mode), while the prolog and epilog still run;
  * srun --openmps without a share, and srun with nothing under plugstack.conf's default=on:
    served with the whole device; --openmps=maybe and a bad plugstack.conf argument: the job
    refused with the reason;
  * sbatch --wait --gres=mps:25 of a plain script that runs the program twice: both served at
    32 SMs;
  * SchedMD's prolog.example, unmodified, as the Prolog (schedmd_prolog below): two --gres=mps
    jobs served from the daemon it starts by NVIDIA's name.
Slurm needs root here (slurmd starts jobs as their user): not root, it exits 77 (CTest: skipped)
saying so. Slurm, munge or the plugin missing is a failure that names the package. Prints
"ok ..." and "FAIL ..." lines; the directory is kept when something failed.
"""
import glob
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1])
CMAKE = sys.argv[2] if len(sys.argv) > 2 else "cmake"
PROGRAM = os.path.join(BUILD, "tests", "device-limits")
DOUBLE = os.path.join(BUILD, "tests", "libfakecuda.so")
TOOLS = {"munged": "munge", "slurmctld": "slurmctld", "slurmd": "slurmd", "srun": "slurm-client",
         "sbatch": "slurm-client", "sinfo": "slurm-client", "scontrol": "slurm-client"}
NATIVE = ("132", str(16 << 30))  # the driver double's device 0

fails = []
procs = []


def ok(msg):
    print("ok   " + msg, flush=True)


def fail(msg):
    fails.append(msg)
    print("FAIL " + msg, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(cond, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def tail(path, n=5):
    return " | ".join(read(path).strip().splitlines()[-n:])


def main():
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    missing = sorted({pkg for tool, pkg in TOOLS.items() if not shutil.which(tool, path=path)})
    if missing:
        print("FAIL Slurm's test needs Debian's %s (not installed; .ci/run installs them)"
              % " ".join(missing))
        return 1
    if os.geteuid() != 0:
        print("SKIPPED (not a pass): Slurm's test runs slurmd, which needs root; run "
              "`ctest -R install.slurm` as root (CI does)")
        return 77
    plugin = os.path.join(BUILD, "lib", "slurm", "spank_openmps.so")
    if not os.path.exists(plugin):
        print("FAIL no SPANK plugin in this build (%s): configure with Slurm's header "
              "(Debian: libslurm-dev, which .ci/run installs)" % plugin)
        return 1

    t = tempfile.mkdtemp(prefix="om-slurm.")
    os.chmod(t, 0o755)
    try:
        run(t)
    finally:
        stop(t)
        if fails:
            print("kept for reading: " + t)
        else:
            if os.path.islink(os.path.join(t, "prefix")):
                shutil.rmtree(os.readlink(os.path.join(t, "prefix")), ignore_errors=True)
            shutil.rmtree(t, ignore_errors=True)
    print("slurm check: %d failure(s)" % len(fails))
    return 1 if fails else 0


def start(t, name, argv, env):
    out = open(os.path.join(t, "log", name + ".out"), "w")
    p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    out.close()
    procs.append((name, p))
    return p


def stop(t):
    pid = read(os.path.join(t, "pipe", "openmps-control.pid")).strip()
    if pid.isdigit() and os.path.exists(os.path.join(t, "pipe", "control.sock")):
        try:
            os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass
    for name, p in reversed(procs):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def run(t):
    for d in ("log", "state", "spool", "dev", "munge"):
        os.makedirs(os.path.join(t, d))
    os.chmod(os.path.join(t, "munge"), 0o700)

    # ---- openmps installed into a fresh prefix, in the build tree (slurmd runs the prolog and
    # loads the plugin from there: /tmp may be mounted noexec)
    prefix = tempfile.mkdtemp(prefix="slurm-prefix.", dir=BUILD)
    os.chmod(prefix, 0o755)
    os.symlink(prefix, os.path.join(t, "prefix"))  # removed with t
    r = subprocess.run([CMAKE, "--install", BUILD, "--prefix", prefix],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("cmake --install: " + r.stdout[-500:] + r.stderr[-500:])
        return
    plugins = glob.glob(os.path.join(prefix, "lib*", "**", "openmps", "slurm",
                                     "spank_openmps.so"), recursive=True)
    prolog = os.path.join(prefix, "libexec", "openmps", "slurm", "prolog")
    epilog = os.path.join(prefix, "libexec", "openmps", "slurm", "epilog")
    for f in [prolog, epilog]:
        if not os.access(f, os.X_OK):
            fail("not installed: " + f)
    if len(plugins) != 1:
        fail("the installed SPANK plugin: %r" % plugins)
    if fails:
        return
    ok("installed: %s, %s, %s" % (os.path.relpath(plugins[0], prefix),
                                  os.path.relpath(prolog, prefix), os.path.relpath(epilog, prefix)))

    # ---- munge with a key and a socket of its own
    key = os.path.join(t, "munge", "munge.key")
    with open(key, "wb") as f:
        f.write(os.urandom(1024))
    os.chmod(key, 0o600)
    sock = os.path.join(t, "munge", "socket")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "CUDA_", "OPENMPS_", "LD_"))}
    env["PATH"] = env.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"
    start(t, "munged", ["munged", "-F", "-f", "--socket=" + sock, "--key-file=" + key,
                        "--log-file=" + os.path.join(t, "log", "munged.log"),
                        "--pid-file=" + os.path.join(t, "munge", "pid"),
                        "--seed-file=" + os.path.join(t, "munge", "seed")], env)
    if not wait_for(lambda: os.path.exists(sock), 30):
        fail("munged did not start: " + tail(os.path.join(t, "log", "munged.out")))
        return

    # ---- Slurm's configuration: docs/operations.md's recipe, in t
    host = socket.gethostname().split(".")[0]
    # the GPU's device file: a character device of NVIDIA's major, which nothing opens (no
    # cgroup confines the job); Slurm numbers the GPU from its name, as it does /dev/nvidia0
    gpu = os.path.join(t, "dev", "nvidia0")
    try:
        os.mknod(gpu, 0o600 | stat.S_IFCHR, os.makedev(195, 0))
    except OSError as e:
        print("note: mknod %s: %s; a plain file instead (slurmd logs that it is no device)"
              % (gpu, e))
        open(gpu, "w").close()
    conf = os.path.join(t, "slurm.conf")
    with open(conf, "w") as f:
        f.write(conf_text := f"""ClusterName=openmps
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
StateSaveLocation={t}/state
SlurmdSpoolDir={t}/spool
SlurmctldPidFile={t}/slurmctld.pid
SlurmdPidFile={t}/slurmd.pid
SlurmctldLogFile={t}/log/slurmctld.log
SlurmdLogFile={t}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
GresTypes=gpu,mps
Prolog={prolog}
Epilog={epilog}
PlugStackConfig={t}/plugstack.conf
NodeName=node0 NodeHostname={host} NodeAddr=127.0.0.1 CPUs=1 RealMemory=1 Gres=gpu:1,mps:100 State=UNKNOWN
PartitionName=gpu Nodes=node0 Default=YES MaxTime=INFINITE State=UP
""")
    with open(os.path.join(t, "gres.conf"), "w") as f:
        f.write(f"AutoDetect=off\nName=gpu File={gpu}\nName=mps Count=100 File={gpu}\n")
    def plugstack(extra=""):  # read again by every srun, sbatch and slurmstepd
        with open(os.path.join(t, "plugstack.conf"), "w") as f:
            f.write(f"required {plugins[0]} pipe={t}/pipe log={t}/log{extra}\n")
    plugstack()
    # the prolog's settings, beside slurm.conf; the driver double stands for the GPU's driver
    with open(os.path.join(t, "openmps.env"), "w") as f:
        f.write(f"""# the daemon's environment (dist/slurm/openmps-slurm.sh)
CUDA_MPS_PIPE_DIRECTORY={t}/pipe
CUDA_MPS_LOG_DIRECTORY={t}/log
OPENMPS_SLURM_STATE={t}/jobs
OPENMPS_DRIVER={DOUBLE}
OPENMPS_SERVER_ENV=FAKECUDA_*
OPENMPS_MODULE_CACHE=off
""")
    env["SLURM_CONF"] = conf
    start(t, "slurmctld", ["slurmctld", "-D", "-i", "-f", conf], env)
    start(t, "slurmd", ["slurmd", "-D", "-f", conf, "-N", "node0"], env)

    def idle():
        r = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True)
        return r.returncode == 0 and r.stdout.strip() == "idle"
    if not wait_for(idle, 60):
        fail("the node never became idle: slurmctld: %s; slurmd: %s"
             % (tail(os.path.join(t, "log", "slurmctld.log")),
                tail(os.path.join(t, "log", "slurmd.log"))))
        return
    ok("slurmctld, slurmd and munged up; the node idle")

    # the jobs' environment: the driver double as the machine's driver, the shim's trace
    jenv = dict(env, OPENMPS_DRIVER=DOUBLE, OPENMPS_TRACE="1")
    sockpath = os.path.join(t, "pipe", "control.sock")
    jobs = os.path.join(t, "jobs")

    def quiet():  # the epilog ran: no job recorded, the daemon gone
        return (not os.path.exists(sockpath) and
                not glob.glob(os.path.join(jobs, "job.*")) and idle())

    def submit(argv, e):  # srun or sbatch --wait; one stuck past 120 s is a failure
        try:
            return subprocess.run(argv, env=e, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired as x:
            return subprocess.CompletedProcess(argv, -1, x.stdout or "", "%s timed out after "
                                               "120 s; slurmd: %s" % (argv[0], tail(
                                                   os.path.join(t, "log", "slurmd.log"))))

    def job(what, args, served, sms, total, extra_env=None):
        before = read(os.path.join(t, "log", "server.log"))
        r = submit(["srun", "-n1"] + args + [PROGRAM], dict(jenv, **(extra_env or {})))
        lines = r.stdout.split("\n")
        remote = "remote mode: server" in r.stderr
        got = ("cuInit 0" in lines and "sms " + sms in lines and "total " + total in lines)
        if r.returncode == 0 and got and remote == served:
            ok("%s: %s, sms %s, total %s" % (what, "served" if served else "native", sms, total))
        else:
            fail("%s: rc %d, served %s (wanted %s), stdout %r, stderr %s" %
                 (what, r.returncode, remote, served, r.stdout, r.stderr[-600:]))
        if not wait_for(quiet, 60):
            fail("%s: the epilog did not quit the daemon: jobs %r, prolog/epilog log: %s" %
                 (what, glob.glob(os.path.join(jobs, "job.*")), tail(os.path.join(jobs, "log"))))
        return read(os.path.join(t, "log", "server.log"))[len(before):]

    new = job("srun --gres=mps:50, a 2G cap in the job", ["--gres=mps:50"], True, "64",
              str(2 << 30), {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=2G"})
    if "active thread percentage 50.0" in new:
        ok("server.log: the client at the job's share (50.0)")
    else:
        fail("server.log has no client at 50.0: " + new[-600:])
    log = read(os.path.join(jobs, "log"))
    if "started the daemon" in log and "quit the daemon" in log:
        ok("the prolog started the daemon, the epilog quit it")
    else:
        fail("prolog/epilog log: " + log[-600:])
    job("srun, no --gres=mps", [], False, *NATIVE)
    job("srun --gres=mps:50 --openmps=no", ["--gres=mps:50", "--openmps=no"], False, *NATIVE)
    # and a job whose LD_LIBRARY_PATH is longer than a page (the plugin reads it whole)
    long_path = ":".join("/no/such/folder/%d" % i for i in range(600))
    job("srun --openmps, no share, a %d-byte LD_LIBRARY_PATH" % len(long_path), ["--openmps"],
        True, "132", NATIVE[1], {"LD_LIBRARY_PATH": long_path})

    # a bad value of the plugin's option stops the job, saying why
    r = submit(["srun", "-n1", "--openmps=maybe", PROGRAM], jenv)
    if r.returncode != 0 and "--openmps=maybe: say yes or no" in r.stderr:
        ok("srun --openmps=maybe: refused (%s)" % r.stderr.strip().splitlines()[0])
    else:
        fail("srun --openmps=maybe: rc %d, stderr %r" % (r.returncode, r.stderr[-400:]))
    if not wait_for(quiet, 60):
        fail("--openmps=maybe: the node did not come back: " + tail(os.path.join(jobs, "log")))

    # plugstack.conf's default=on serves a job that asked for nothing; a bad argument stops jobs
    plugstack(" default=on")
    job("default=on in plugstack.conf, srun with no option", [], True, "132", NATIVE[1])
    plugstack(" colour=blue")
    r = submit(["srun", "-n1", PROGRAM], jenv)
    if r.returncode != 0 and "'colour=blue' is not one of" in r.stderr:
        ok("plugstack.conf's colour=blue: the job refused, saying why")
    else:
        fail("plugstack.conf's colour=blue: rc %d, stderr %r" % (r.returncode, r.stderr[-400:]))
    plugstack()
    if not wait_for(quiet, 60):
        fail("colour=blue: the node did not come back: " + tail(os.path.join(jobs, "log")))

    # a batch job: a plain script whose two CUDA processes are both served
    script = os.path.join(t, "job.sh")
    with open(script, "w") as f:
        f.write(f"#!/bin/sh\n{PROGRAM}\n{PROGRAM}\n")
    os.chmod(script, 0o755)
    out = os.path.join(t, "batch.out")
    r = submit(["sbatch", "--wait", "--gres=mps:25", "-o", out, script], jenv)
    text = read(out)
    if (r.returncode == 0 and text.count("sms 32\n") == 2 and
            text.count("remote mode: server") == 2):
        ok("sbatch --gres=mps:25: both processes of the script served, sms 32")
    else:
        fail("sbatch: rc %d %s; output: %s" % (r.returncode, r.stderr.strip(), text[-800:]))
    if not wait_for(quiet, 60):
        fail("sbatch: the epilog did not quit the daemon: " + tail(os.path.join(jobs, "log")))

    schedmd_prolog(t, env, jenv, conf, conf_text, prolog, epilog, prefix, submit)


def schedmd_prolog(t, env, jenv, conf, conf_text, prolog, epilog, prefix, submit):
    """SchedMD's etc/prolog.example (Slurm 22.05, Debian 12's source package; fetched by
    tests/install/fetch_prolog_example.sh, never part of the repository), unmodified, as the
    node's Prolog: for a --gres=mps job it starts `nvidia-cuda-mps-control -d` in
    /tmp/nvidia-mps_<GPU> and asks for `start_server -uid <job's uid>`; a second job finds it
    running. Slurm gives a prolog no PATH, so a site has the command in /usr/bin; the test (which
    leaves /usr alone) runs the file through a two-line Prolog that gives it PATH with the
    drop-in name first and the driver double. The example's other branch (a whole-GPU job quits
    the daemon, and runs nvidia-smi -c) quits in NVIDIA's default directory, not the one it
    started in, and would down the node: not run."""
    example = os.environ.get("OPENMPS_PROLOG_EXAMPLE", "/var/cache/openmps-tests/prolog.example")
    if not os.path.exists(example):
        fail("SchedMD's prolog.example is not at %s: tests/install/fetch_prolog_example.sh "
             "fetches it (.ci/run runs it)" % example)
        return
    owned = ["/var/run/mps_dev_id", "/tmp/nvidia-mps_0", "/tmp/nvidia-log_0"]
    def mps_processes():  # the earlier jobs' daemon may take a moment to exit
        return subprocess.run(["pgrep", "-f", "nvidia-cuda-mps"], capture_output=True,
                              text=True).stdout.split()
    wait_for(lambda: not mps_processes(), 30)
    others = mps_processes()
    if any(os.path.exists(p) for p in owned) or others:
        print("note: prolog.example's part not run: this machine has an MPS daemon or its files "
              "(%s; processes %s), which the example would use" %
              (", ".join(p for p in owned if os.path.exists(p)), others))
        return
    site = os.path.join(t, "site-prolog")
    with open(site, "w") as f:
        f.write("#!/bin/sh\n# prolog.example, unmodified, with PATH (a site: /usr/bin)\n"
                f"PATH={prefix}/libexec/openmps/mps-bin:/usr/bin:/bin OPENMPS_DRIVER={DOUBLE} "
                f"OPENMPS_SERVER_ENV='FAKECUDA_*' OPENMPS_MODULE_CACHE=off "
                f"exec /bin/bash {example} >>{t}/log/prolog.example.out 2>&1\n")
    os.chmod(site, 0o755)
    try:
        with open(conf, "w") as f:
            f.write(conf_text.replace("Prolog=%s\nEpilog=%s\n" % (prolog, epilog),
                                      "Prolog=%s\n" % site))
        with open(os.path.join(t, "plugstack.conf"), "w") as f:
            f.write("required %s pipe=/tmp/nvidia-mps_0 log=/tmp/nvidia-log_0\n" % glob.glob(
                os.path.join(prefix, "lib*", "**", "openmps", "slurm", "spank_openmps.so"),
                recursive=True)[0])
        r = subprocess.run(["scontrol", "reconfigure"], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            fail("scontrol reconfigure: " + r.stderr)
            return
        time.sleep(2)  # slurmd takes the new Prolog
        for share, sms in (("50", "64"), ("25", "32")):
            r = submit(["srun", "-n1", "--gres=mps:" + share, PROGRAM], jenv)
            lines = r.stdout.split("\n")
            if (r.returncode == 0 and "remote mode: server" in r.stderr and
                    "sms " + sms in lines):
                ok("prolog.example, unmodified: srun --gres=mps:%s served, sms %s" % (share, sms))
            else:
                fail("prolog.example: --gres=mps:%s: rc %d, stdout %r, stderr %s; its output: %s"
                     % (share, r.returncode, r.stdout, r.stderr[-500:],
                        tail(os.path.join(t, "log", "prolog.example.out"))))
        out = read(os.path.join(t, "log", "prolog.example.out"))
        clog = read("/tmp/nvidia-log_0/control.log")
        if (out.count("MPS control daemon started") == 1 and
                out.count("MPS server started for 0") == 2 and "Starting new server" in clog):
            ok("prolog.example started the daemon once (the second job found it), and a server "
               "for the job's uid twice")
        else:
            fail("prolog.example's output: %r; control.log: %s" % (out[-800:], clog[-600:]))
    finally:
        e = dict(env, CUDA_MPS_PIPE_DIRECTORY="/tmp/nvidia-mps_0",
                 CUDA_MPS_LOG_DIRECTORY="/tmp/nvidia-log_0")
        ctl = os.path.join(prefix, "libexec", "openmps", "mps-bin", "nvidia-cuda-mps-control")
        subprocess.run([ctl], input="quit", env=e, capture_output=True, text=True, timeout=60)
        wait_for(lambda: not os.path.exists("/tmp/nvidia-mps_0/control.sock"), 30)
        for p in owned:
            if os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)
            elif os.path.exists(p):
                os.unlink(p)


if __name__ == "__main__":
    sys.exit(main())
