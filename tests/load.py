#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs a command while every core is kept busy: load.py [--loops N] -- COMMAND...

`make test` runs the IPC tests once this way, so that a test which leans on timing fails in CI
rather than in someone's submission on a busy machine. The busy loops run at normal priority.
They end with this process, however it ends: killed here when the command returns, fails or
this process is signalled (which also ends the command's whole process group, so tests that
ctest left running go too), and otherwise by the kernel (PR_SET_PDEATHSIG) or by themselves
once their parent is gone (each checks it between short bursts) or after --max-s seconds.
The exit status is the command's (128+N for a signal N).
"""
import os
import signal
import subprocess
import sys

# Each loop: die with the parent (prctl where libc has it, else the check between bursts).
LOOP = r"""
import ctypes, os, sys, time
parent, end = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
except (OSError, AttributeError):
    pass
while os.getppid() == parent and time.monotonic() < end:
    for _ in range(100000):
        pass
"""


def group_signal(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass  # the group is gone already


def main(argv):
    loops, max_s = os.cpu_count() or 2, 3600.0
    while argv and argv[0] != "--":
        opt = argv.pop(0)
        if opt == "--loops" and argv:
            loops = int(argv.pop(0))
        elif opt == "--max-s" and argv:
            max_s = float(argv.pop(0))
        else:
            print("usage: load.py [--loops N] [--max-s S] -- COMMAND...", file=sys.stderr)
            return 2
    cmd = argv[1:]
    if not cmd:
        print("load.py: no command given after --", file=sys.stderr)
        return 2
    busy = []
    child = None
    pending = []

    def stop(signum, frame):
        if child is None:
            # Not started yet, or started but not yet known here (Popen had not returned): the
            # stop waits until it is, so the finally below can end it.
            pending.append(signum)
            return
        raise SystemExit(128 + signum)  # the finally below ends the command and the loops

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    try:
        for _ in range(loops):
            busy.append(subprocess.Popen([sys.executable, "-c", LOOP, str(os.getpid()),
                                          str(max_s)]))
        print("load.py: %d busy loop(s) (pids %s) while: %s" %
              (loops, " ".join(str(p.pid) for p in busy), " ".join(cmd)), flush=True)
        # its own process group: ended as a whole below (ctest leaves its running tests
        # behind when it is itself terminated)
        child = subprocess.Popen(cmd, start_new_session=True)
        if pending:
            raise SystemExit(128 + pending[0])
        rc = child.wait()
        return 128 - rc if rc < 0 else rc
    finally:
        if child:
            group_signal(child.pid, signal.SIGTERM)
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
            group_signal(child.pid, signal.SIGKILL)  # whatever of the group is left
            child.wait()
        for p in busy:
            p.kill()
        for p in busy:
            p.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
