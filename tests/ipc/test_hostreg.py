# SPDX-License-Identifier: MIT
"""cuMemHostRegister keeps what the memory is (tests/cpu/hostreg_driver.c)."""
import os
import shutil
import subprocess
import tempfile

from harness import Env, SANITIZER, SHIM_DIR, check


HOSTREG_DRIVER = os.environ.get("OM_HOSTREG_DRIVER", "build/tests/hostreg-driver")


def hostreg_case(*args, extra=None):
    """Runs one case of tests/cpu/hostreg_driver.c against a fresh daemon: "CASE ok". The
    client's local driver (the double, which the shim initialises as it does the real one)
    starts a thread of its own at cuInit, as the real driver does: not one of the program's."""
    e = Env()
    ok = False
    try:
        p = subprocess.Popen([HOSTREG_DRIVER] + list(args),
                             env=dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR),
                                      FAKECUDA_INIT_THREAD="1", **(extra or {})),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = p.communicate(timeout=120)
        check(p.returncode == 0 and "%s ok" % args[0] in out,
              "%s: %r %r" % (args[0], out, err))
        check(not SANITIZER.search(err), "sanitizer: " + err)
        ok = True
    finally:
        e.close(ok)


def test_registered_file_mapping_reaches_the_file():
    """A registered MAP_SHARED file mapping stays the file's: a device copy into it and the
    program's own writes reach the file (pread), a write to the file is seen through it; the
    server cannot map it, so a device pointer is refused (INVALID_VALUE, as the driver answers
    for memory it cannot map)."""
    d = tempfile.mkdtemp(prefix="om-hostreg-")
    try:
        hostreg_case("file", os.path.join(d, "mapped"))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_registered_private_memory_is_private_after_fork():
    """Registered private memory moved onto shared memory is made private again in a forked
    child: neither the child's writes nor the parent's later ones cross over."""
    hostreg_case("fork")


def test_registered_shared_memory_stays_shared():
    """MAP_SHARED|MAP_ANONYMOUS memory shared with a child forked before the registration: the
    parent's writes (its own and a device copy's) reach the child and the child's the parent."""
    hostreg_case("shared")


def test_registered_read_only_memory_stays_read_only():
    """A PROT_READ range is refused without CU_MEMHOSTREGISTER_READ_ONLY; registered with it, it
    stays read-only (a write faults, /proc/self/maps says r--p), copies read it, copies into it
    are refused."""
    hostreg_case("readonly")


def test_registered_memory_is_not_moved_under_other_threads():
    """Private memory registered while another thread runs is left where it is (that thread's
    writes cannot be lost) and served by staged copies; alone again, it is moved and mapped, and
    unregistering gives it back to private memory."""
    hostreg_case("threads")


def test_registered_memory_is_moved_once_the_other_threads_ended():
    """The main thread ends (pthread_exit) and stays listed as a zombie; the one thread left
    registers private memory: it is moved and mapped for the device as in a program of one
    thread (an ended thread is not counted as one that may write). No leak check in the
    sanitized build: glibc keeps the ended main thread's dlerror record (the shim's constructor
    looked up entry points the driver lacks) where LeakSanitizer no longer sees it once that
    thread is gone, 24 bytes from dlsym in shim_load, not the code under test."""
    hostreg_case("mainexit", extra={
        "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"})
