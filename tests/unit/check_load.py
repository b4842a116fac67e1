#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tests/load.py, the load generator of `make test`'s loaded IPC pass: its busy loops run while
the command does and are gone afterwards, whether the command succeeds, fails, or the generator
is stopped (SIGTERM, as a CI timeout does) or killed outright; the command's status comes back."""
import os
import re
import signal
import subprocess
import sys
import time

LOAD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "load.py")
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL: " + what)


def running(pid):
    """True while pid runs (a zombie, which nobody may reap here, has ended)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def gone(pids, timeout=60):
    end = time.monotonic() + timeout  # bounds a failing run only
    while time.monotonic() < end:
        if not any(running(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def start(cmd):
    """The generator around cmd; returns it, its loops' pids and the command's first line."""
    p = subprocess.Popen([sys.executable, LOAD, "--loops", "2", "--"] + cmd,
                         stdout=subprocess.PIPE, text=True)
    banner = p.stdout.readline()
    m = re.search(r"\(pids ([0-9 ]+)\)", banner)
    check(m is not None, "the generator names its loops: %r" % banner)
    loops = [int(x) for x in m.group(1).split()] if m else []
    check(len(loops) == 2, "two loops: %r" % banner)
    return p, loops, p.stdout.readline().strip()


# The command's status comes back; the loops are gone when it ends.
p, loops, _ = start(["sh", "-c", "exit 3"])
p.communicate(timeout=60)
check(p.returncode == 3, "the command's status: %r" % p.returncode)
check(gone(loops), "the loops end with a failing command")

# Stopped with SIGTERM while the command runs: the loops, the command and what the command
# started are ended (ctest, terminated, leaves its running tests behind).
p, loops, cmd_pid = start(["sh", "-c", "sleep 600 & echo $!; wait"])
check(all(running(x) for x in loops), "the loops run while the command does")
os.kill(p.pid, signal.SIGTERM)
p.wait(timeout=60)
check(p.returncode == 128 + signal.SIGTERM, "status after SIGTERM: %r" % p.returncode)
check(gone(loops), "the loops end when the generator is stopped")
check(cmd_pid.isdigit() and gone([int(cmd_pid)]), "what the command started ends too: %r" %
      cmd_pid)
if cmd_pid.isdigit() and running(int(cmd_pid)):
    os.kill(int(cmd_pid), signal.SIGKILL)
p.stdout.close()

# Killed outright (nothing of it runs to clean up): the loops notice and end.
p, loops, cmd_pid = start(["sh", "-c", "echo $$; exec sleep 600"])
os.kill(p.pid, signal.SIGKILL)
p.wait(timeout=60)
check(gone(loops), "the loops end when the generator is killed")
if cmd_pid.isdigit() and running(int(cmd_pid)):
    os.kill(int(cmd_pid), signal.SIGKILL)  # the command itself is the caller's (ctest's) to end
p.stdout.close()
print("load generator checks: %d failure(s)" % failures)
sys.exit(1 if failures else 0)
