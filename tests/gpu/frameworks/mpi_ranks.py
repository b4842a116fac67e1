# SPDX-License-Identifier: MIT
"""MPI (issue #11), as HPC sites share a GPU: 8 ranks of this program, each computing on the one
GPU with PyTorch (a 1024 x 1024 fp32 matrix product of rank-seeded data, TF32 off, summed in
float64) and reducing on the host with mpi4py (Allreduce, Gather of NumPy buffers). Rank 0
checks each rank's value and the sum against float64 on the CPU (relative 1e-4), that every
rank got the environment (CUDA_MPS_PIPE_DIRECTORY, LD_LIBRARY_PATH) and loaded the libcuda.so.1
that LD_LIBRARY_PATH names, and prints; the other ranks print nothing. Started plainly, it
re-runs itself under `mpirun -np 8` (Open MPI or MPICH's Hydra) and exits with its status.
Exit 77 when mpirun, mpi4py, PyTorch or a GPU is missing."""
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

RANKS = 8
TIMEOUT = 150
PASS_ON = ("LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY",
           "CUDA_VISIBLE_DEVICES", "PATH", "PYTHONPATH", "HOME")


def under_mpi():
    return any(k in os.environ for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"))


def libcuda_expected():
    """the libcuda.so.1 the dynamic loader finds first in LD_LIBRARY_PATH, or None."""
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        if d and os.path.exists(os.path.join(d, "libcuda.so.1")):
            return os.path.realpath(os.path.join(d, "libcuda.so.1"))
    return None


def launch():
    mpirun = shutil.which("mpirun") or shutil.which("mpiexec")
    if not mpirun:
        print("SKIP: no mpirun", file=sys.stderr)
        return 77
    if importlib.util.find_spec("mpi4py") is None:  # find it without initializing MPI here
        print("SKIP: no mpi4py for %s" % sys.executable, file=sys.stderr)
        return 77
    try:
        version = subprocess.run([mpirun, "--version"], capture_output=True, text=True,
                                 timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        print("SKIP: %s --version failed (%s)" % (mpirun, e), file=sys.stderr)
        return 77
    tmp = tempfile.mkdtemp(prefix="openmps-mpi.")
    env = dict(os.environ)
    env["OPENMPS_MPI_SKIP_FILE"] = os.path.join(tmp, "skip")
    env["OPENMPS_MPI_EXPECT"] = json.dumps({
        "pipe": os.environ.get("CUDA_MPS_PIPE_DIRECTORY"),
        "ld_path": os.environ.get("LD_LIBRARY_PATH", ""),
        "libcuda": libcuda_expected()})
    cmd = [mpirun, "-np", str(RANKS)]
    if "Open MPI" in version or "OpenRTE" in version:
        # a local launch inherits mpirun's environment; -x also names what a remote one needs
        cmd += ["--oversubscribe"]
        if os.geteuid() == 0:
            cmd += ["--allow-run-as-root"]
            env["OMPI_ALLOW_RUN_AS_ROOT"] = env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
        for var in sorted(env):
            if var in PASS_ON or var.startswith("OPENMPS_"):
                cmd += ["-x", var]
    # MPICH's Hydra passes the whole environment by default
    cmd += [sys.executable, os.path.abspath(__file__)]
    print("launch: %s" % " ".join(cmd), file=sys.stderr)
    sys.stdout.flush()
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    try:
        rc = proc.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        print("mpirun still running after %d s: stopped" % TIMEOUT, file=sys.stderr)
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        rc = 1
    skip = None
    if os.path.exists(env["OPENMPS_MPI_SKIP_FILE"]):
        with open(env["OPENMPS_MPI_SKIP_FILE"]) as f:
            skip = f.read().strip()
    shutil.rmtree(tmp, ignore_errors=True)
    if skip:
        print("SKIP: %s" % skip, file=sys.stderr)
        return 77
    print("mpirun exit status %d" % rc, file=sys.stderr)
    return rc if 0 <= rc < 256 else 1


def libcuda_loaded():
    """Every libcuda.so* mapped in this process (under openmps the shim and, behind it, the
    driver's own: the shim opens it for what it answers locally)."""
    found = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if os.path.basename(path).startswith("libcuda.so"):
                found.add(os.path.realpath(path))
    return found


def rank_main():
    from mpi4py import MPI
    import numpy as np
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    why = None
    try:
        import torch
        if not torch.cuda.is_available():
            why = "torch.cuda.is_available() is False"
    except ImportError as e:
        why = "no PyTorch (%s)" % e
    whys = comm.allgather(why)
    if any(whys):
        if rank == 0:
            with open(os.environ["OPENMPS_MPI_SKIP_FILE"], "w") as f:
                f.write(next(w for w in whys if w))
        return 77
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_num_threads(1)

    def data(r):
        g = torch.Generator().manual_seed(1000 + r)
        return torch.rand(1024, 1024, generator=g), torch.rand(1024, 1024, generator=g)

    a, b = data(rank)
    c = a.cuda() @ b.cuda()
    for _ in range(3):
        c = c @ b.cuda() / 256
    local = np.array([c.double().sum().item()], dtype=np.float64)

    expect = json.loads(os.environ.get("OPENMPS_MPI_EXPECT", "null") or "null")
    env_ok = expect is not None and os.environ.get("CUDA_MPS_PIPE_DIRECTORY") == expect["pipe"]
    if env_ok:  # Open MPI may put its own folders before ours, not drop ours
        have = os.environ.get("LD_LIBRARY_PATH", "").split(":")
        env_ok = all(d in have for d in expect["ld_path"].split(":") if d)
    lib_ok = expect is not None and (expect["libcuda"] is None
                                     or expect["libcuda"] in libcuda_loaded())

    total = np.zeros(1, dtype=np.float64)
    comm.Allreduce(local, total, op=MPI.SUM)
    values = np.zeros(size, dtype=np.float64) if rank == 0 else None
    comm.Gather(local, values, root=0)
    flags = comm.gather((bool(env_ok), bool(lib_ok), torch.cuda.device_count() > 0), root=0)
    code = 0
    if rank == 0:
        refs = []
        for r in range(size):
            ra, rb = data(r)
            rc = ra.double() @ rb.double()
            for _ in range(3):
                rc = rc @ rb.double() / 256
            refs.append(rc.sum().item())
        per_rank = [abs(v - w) / abs(w) for v, w in zip(values, refs)]
        err = abs(total[0] - sum(refs)) / abs(sum(refs))
        print("per-rank relative errors %s; sum %.2e" % (" ".join("%.1e" % e for e in per_rank),
                                                        err), file=sys.stderr)
        checks = [
            ("ranks", size == RANKS),
            ("every rank got the environment", all(f[0] for f in flags)),
            ("every rank loaded the libcuda.so.1 of LD_LIBRARY_PATH", all(f[1] for f in flags)),
            ("every rank sees the GPU", all(f[2] for f in flags)),
            ("each rank's GPU result within 1e-4 of the CPU (float64)",
             all(e < 1e-4 for e in per_rank)),
            ("Allreduce sum within 1e-4 of the CPU (float64)", err < 1e-4),
            ("Gather agrees with Allreduce",
             abs(values.sum() - total[0]) <= 1e-12 * abs(total[0])),
        ]
        print("ranks: %d" % size)
        for name, ok in checks:
            print("%s: %s" % (name, bool(ok)))
            code |= not ok
        sys.stdout.flush()
    code = comm.bcast(code, root=0)  # every rank exits alike, so mpirun's status is ours
    return 1 if code else 0


if __name__ == "__main__":
    sys.exit(rank_main() if under_mpi() else launch())
