# SPDX-License-Identifier: MIT
"""A process that forks after CUDA is initialised (tests/cpu/fork_driver.c)."""
import os
import subprocess

from harness import Env, SANITIZER, SHIM_DIR, check


FORK_DRIVER = os.environ.get("OM_FORK_DRIVER", "build/tests/fork-driver")


def test_fork_after_init_child_refused_parent_goes_on():
    """Children forked while the parent's threads copy and set: every driver call of a child
    fails with CUDA_ERROR_NOT_INITIALIZED, as natively, and touches nothing of the parent's
    session (its ring, its socket); the children end with exit() or _exit(); the parent starts
    new threads and its copies come back right. The server still serves the parent's session
    alone: one session, ended once."""
    e = Env()
    ok = False
    try:
        p = subprocess.Popen([FORK_DRIVER, "4"],
                             # No leak check in the sanitizer build: a child forked from a
                             # process with running threads has only the forking thread, and
                             # LeakSanitizer at its exit() reports the others' heap as leaked.
                             env=dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR),
                                      FAKECUDA_INIT_THREAD="1", LSAN_OPTIONS="detect_leaks=0"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = p.communicate(timeout=120)
        check(p.returncode == 0 and "fork ok" in out, "fork: %d %r %r" % (p.returncode, out, err))
        check(not SANITIZER.search(err), "sanitizer: " + err)
        ok = True
    finally:
        e.close(ok)
