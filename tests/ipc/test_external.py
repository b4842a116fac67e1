# SPDX-License-Identifier: MIT
"""External memory and semaphores (tests/cpu/external_driver.c)."""
import os
import re
import subprocess

from harness import Fail, check, driver_program, wait_for


def external_driver(e, *args, extra=None):
    return driver_program(e, "external-driver", args, extra, stdin=subprocess.PIPE)


def test_external_memory_and_semaphores(daemon):
    """A memfd imported through the server (the double sees a descriptor of the memfd's size),
    mapped buffers that copies read and write (the bytes are the memfd's), refused past their
    end and after cuMemFree; Win32, NvSci and unknown handle types refused with the documented
    errors, a failed import leaving the descriptor open; semaphores signalled and waited for on
    the client's own streams; the session's end frees the kept buffer and destroys the kept
    memory and semaphore (external_driver.c, the double's log)."""
    e = daemon(start=False)
    log = os.path.join(e.dir, "external")
    e.env["FAKECUDA_EXTERNAL_LOG"] = log
    e.start()
    p = external_driver(e, "basic")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "basic ok" in out, "basic: %r %r" % (out, err))
    keep = re.search(r"keep (0x[0-9a-f]+) (0x[0-9a-f]+) (0x[0-9a-f]+)", out)
    stream = re.search(r"stream (0x[0-9a-f]+)", out)
    check(keep and stream, "the kept objects and the stream printed: %r" % out)
    mem, sem, buf = keep.groups()
    lines = []
    def ended():
        nonlocal lines
        lines = open(log).read().splitlines() if os.path.exists(log) else []
        # the teardown's steps log these one after another (teardown.c: the semaphore and the
        # memory with the owned handles, the buffer with the allocations, later)
        return all(x in lines for x in ("cuDestroyExternalSemaphore %s" % sem,
                                        "cuDestroyExternalMemory %s" % mem,
                                        "cuMemFree_v2 buffer %s" % buf))
    try:
        wait_for(ended, what="the session's end destroys the kept semaphore and memory and "
                 "frees the buffer")
    except Fail:
        pass  # the checks below say which is missing
    check(any(l.startswith("cuImportExternalMemory %s type 1 size %d fdsize %d"
                           % (mem, 1 << 20, 1 << 20)) for l in lines),
          "the memfd reached the double: %r" % lines[:4])
    check("cuSignalExternalSemaphoresAsync %s value 7 stream %s" % (sem, stream.group(1))
          in lines, "the signal on the client's stream: %r" % lines)
    waits = [l for l in lines if l.startswith("cuWaitExternalSemaphoresAsync %s value 9 " % sem)]
    check(len(waits) == 1 and not waits[0].endswith("(nil)"),
          "the wait on the client's default stream, not the context's NULL stream: %r" % waits)
    check("cuDestroyExternalMemory %s" % mem in lines, "the kept memory destroyed")
    check("cuMemFree_v2 buffer %s" % buf in lines, "the kept buffer freed: %r" % lines)
    imports = [l for l in lines if l.startswith("cuImportExternalMemory")]
    check(len(imports) == 2, "the refused imports did not reach the driver: %r" % imports)


def test_external_objects_of_another_client_refused(daemon):
    """A client cannot map or destroy another client's external memory, signal, wait for or
    destroy its semaphore, or copy into, out of or free its mapped buffer."""
    e = daemon()
    holder = external_driver(e, "hold")
    line = holder.stdout.readline().split()
    check(len(line) == 3, "holder printed its objects: %r" % line)
    p = external_driver(e, "steal", *line)
    out, err = p.communicate(timeout=30)
    check(p.returncode == 0 and "steal refused" in out, "steal: %r %r" % (out, err))
    holder.communicate(input="end\n", timeout=30)
    check(holder.returncode == 0, "the holder's calls worked")
