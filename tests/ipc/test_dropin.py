# SPDX-License-Identifier: MIT
"""The drop-in name: openmps-control run as nvidia-cuda-mps-control (build/mps-bin, installed in
libexec/openmps/mps-bin with OPENMPS_MPS_NAMES=ON). NVIDIA's Kubernetes device plugin's exact
control sequence passes against it, and with no CUDA_MPS_* variables it takes NVIDIA's default
directories (docs/operations.md, "The drop-in name")."""
import os
import shutil
import subprocess
import tempfile

import harness
from harness import check, run_in_private_mounts, wait_for

DROPIN = os.path.join(harness.BIN, "mps-bin", "nvidia-cuda-mps-control")
NAME = "nvidia-cuda-mps-control"


def plugin_env(pipe, logs):
    """The device plugin's environment for every control process it runs: the two directory
    variables and nothing else (its daemon.go sets exec.Cmd.Env to them alone)."""
    return {"CUDA_MPS_PIPE_DIRECTORY": pipe, "CUDA_MPS_LOG_DIRECTORY": logs}


def echo_pipe_to_control(env, command):
    """The device plugin's EchoPipeToControl: the front-end run by its name, the command written
    on its stdin without a newline, stdin closed, stdout read. Returns (exit status, stdout)."""
    p = subprocess.Popen([NAME], executable=DROPIN, env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(command.encode(), timeout=60)
    return p.returncode, out.decode(), err.decode()


def clean_up(top, pipe, ok):
    """Kills a failed run's daemon (its pid file still there); removes top after a pass."""
    pidf = os.path.join(pipe, "openmps-control.pid")
    if os.path.exists(pidf):
        subprocess.run(["kill", "-9", open(pidf).read().strip()], capture_output=True)
    if ok:
        shutil.rmtree(top, ignore_errors=True)


def test_device_plugin_sequence():
    """Start (`nvidia-cuda-mps-control -d` with only the two variables), the per-device memory
    limit and the thread percentage set, the health probe `get_default_active_thread_percentage`
    answering, `quit`; after it the probe fails, as the plugin's health check must see."""
    check(os.path.islink(DROPIN) and os.readlink(DROPIN) == "../openmps-control",
          "the build's drop-in link: %s" % DROPIN)
    top = tempfile.mkdtemp(prefix="om-plugin-")
    os.chmod(top, 0o755)
    pipe, logs = os.path.join(top, "mps-pipe"), os.path.join(top, "mps-log")
    env = plugin_env(pipe, logs)
    ok = False
    try:
        for d in (pipe, logs):  # the plugin makes both before it starts the daemon
            os.makedirs(d, mode=0o755)
        p = subprocess.run([NAME, "-d"], executable=DROPIN, env=env, capture_output=True,
                           text=True, timeout=60)
        check(p.returncode == 0, "-d: %d %r" % (p.returncode, p.stderr))
        check(os.path.exists(os.path.join(pipe, "control.sock")), "the daemon listens in the pipe")
        for cmd, answer in (("set_default_device_pinned_mem_limit 0 1024M", ""),
                            ("set_default_active_thread_percentage 50", "50.0\n")):
            rc, out, err = echo_pipe_to_control(env, cmd)
            check(rc == 0 and out == answer and err == "", "%s: %d %r %r" % (cmd, rc, out, err))
        rc, out, err = echo_pipe_to_control(env, "get_default_active_thread_percentage")
        check(rc == 0 and out == "50.0\n", "the health probe: %d %r %r" % (rc, out, err))
        rc, out, err = echo_pipe_to_control(env, "get_default_device_pinned_mem_limit 0")
        check(rc == 0 and out == "1G\n", "the limit: %d %r %r" % (rc, out, err))
        clog = open(os.path.join(logs, "control.log")).read()
        check("get_default_active_thread_percentage" in clog, "commands logged: " + clog[-800:])
        rc, out, err = echo_pipe_to_control(env, "quit")
        check(rc == 0 and out == "", "quit: %d %r %r" % (rc, out, err))
        wait_for(lambda: not os.path.exists(os.path.join(pipe, "control.sock")),
                 what="the daemon to quit")
        rc, out, err = echo_pipe_to_control(env, "get_default_active_thread_percentage")
        check(rc != 0 and pipe in err, "no daemon, the probe fails: %d %r" % (rc, err))
        ok = True
    finally:
        clean_up(top, pipe, ok)


# Run by NVIDIA's name with no CUDA_MPS_* variables, in a mount namespace of its own (private,
# empty /run, /tmp and /var/log: harness.PRIVATE_MOUNTS): the daemon is in /tmp/nvidia-mps, its logs in
# /var/log/nvidia-mps; a program with no variables finds it there, as does the front-end under
# either name.
NVIDIA_DEFAULTS = r"""
ln -s openmps-control /run/omtest/nvidia-cuda-mps-control
export PATH=/run/omtest:$PATH
nvidia-cuda-mps-control -d
trap 'kill -9 $(cat /tmp/nvidia-mps/*.pid 2>/dev/null) 2>/dev/null || true' EXIT
echo "dirs $(stat -c '%n %U %a' /tmp/nvidia-mps /var/log/nvidia-mps | tr '
' ' ')"
ls /run/openmps /tmp/openmps 2>&1 | sed 's/^/other /'
"$(basename "$SMOKE")" > /tmp/remote.out 2> /tmp/remote.err || echo "smoke failed: $?"
echo "served $(grep -c 'Accepting client' /var/log/nvidia-mps/control.log)"
echo "probe $(printf get_default_active_thread_percentage | openmps-control)"
printf quit | nvidia-cuda-mps-control
for i in $(seq 600); do [ -S /tmp/nvidia-mps/control.sock ] || break; sleep 0.1; done
echo "remote $(head -1 /tmp/remote.out) / $(grep -c 'remote mode: server' /tmp/remote.err)"
"""


def test_nvidia_name_takes_nvidia_defaults():
    out = run_in_private_mounts(NVIDIA_DEFAULTS, "private /tmp and /var/log",
                                os.environ.get("OM_SHIM_SMOKE", "build/tests/shim-smoke"))
    check("dirs /tmp/nvidia-mps root 755 /var/log/nvidia-mps root 700" in out,
          "NVIDIA's directories: %r" % out)
    check("other ls: cannot access '/run/openmps'" in out and
          "other ls: cannot access '/tmp/openmps'" in out, "not openmps' own: %r" % out)
    check("served 1" in out and "remote cuInit 0 / 1" in out, "a program served: %r" % out)
    check("probe 100.0" in out, "openmps-control finds it too: %r" % out)


SLURM_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "dist",
                            "slurm", "openmps-slurm.sh")


def test_slurm_prolog_right_after_the_epilog():
    """dist/slurm/openmps-slurm.sh, three jobs in a row as slurmd runs them on a node (no Slurm
    here: the installed layout, libexec/openmps/{slurm,mps-bin}, in a temporary directory): each
    prolog starts the daemon, each epilog quits it and returns once the daemon is gone, its lock
    released and not only its socket removed: the next prolog, at once, starts a new daemon (one
    that still held the lock made its -d fail, "already running")."""
    top = tempfile.mkdtemp(prefix="om-slurm-")
    os.chmod(top, 0o755)
    here = os.path.join(top, "libexec", "openmps")
    os.makedirs(os.path.join(here, "slurm"))
    os.makedirs(os.path.join(here, "mps-bin"))
    for role in ("prolog", "epilog"):
        shutil.copy(SLURM_SCRIPT, os.path.join(here, "slurm", role))
    os.symlink(os.path.abspath(harness.CONTROL), os.path.join(here, "mps-bin", NAME))
    pipe = os.path.join(top, "pipe")
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=pipe,
               CUDA_MPS_LOG_DIRECTORY=os.path.join(top, "log"),
               OPENMPS_SLURM_STATE=os.path.join(top, "state"),
               SLURM_CONF=os.path.join(top, "etc", "slurm.conf"),  # no openmps.env beside it
               OPENMPS_DRIVER=os.path.abspath(harness.FAKECUDA))
    ok = False

    def run(role, job):
        p = subprocess.run([os.path.join(here, "slurm", role)], env=dict(env, SLURM_JOB_ID=job),
                           capture_output=True, text=True, timeout=120)
        check(p.returncode == 0, "job %s's %s: rc %d %r" % (job, role, p.returncode, p.stderr))

    try:
        for job in ("101", "102", "103"):
            run("prolog", job)
            rc, out, err = echo_pipe_to_control({"CUDA_MPS_PIPE_DIRECTORY": pipe},
                                                "get_server_list")
            check(rc == 0, "job %s: the daemon answers after the prolog: %d %r" % (job, rc, err))
            run("epilog", job)
            check(not os.path.exists(os.path.join(pipe, "control.sock")),
                  "job %s: the daemon's socket gone after the epilog" % job)
        log = open(os.path.join(top, "state", "log")).read()
        check(log.count("started the daemon") == 3 and log.count("quit the daemon") == 3,
              "three starts and quits: %r" % log)
        ok = True
    finally:
        clean_up(top, pipe, ok)
