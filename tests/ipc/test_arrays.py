# SPDX-License-Identifier: MIT
"""Arrays, textures and surfaces (tests/cpu/arrays_driver.c)."""
import os
import re
import subprocess

from harness import check, driver_program, wait_for


def arrays_driver(e, *args, extra=None):
    return driver_program(e, "arrays-driver", args, extra, stdin=subprocess.PIPE)


def test_arrays_copies_objects_and_session_end(daemon):
    """Arrays with host, device and array copies (1D, 2D), regions outside an array or device
    memory refused, texture objects over an array and over linear memory (a range past the
    allocation refused), surface objects, a mipmapped array's level usable but not destroyable
    and gone with its parent; at the session's end the texture object is destroyed before its
    array (the driver double's log)."""
    e = daemon(start=False)
    log = os.path.join(e.dir, "arrays")
    e.env["FAKECUDA_ARRAY_LOG"] = log
    e.start()
    p = arrays_driver(e, "basic")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "basic ok" in out, "basic: %r %r" % (out, err))
    keep = re.search(r"keep (0x[0-9a-f]+) (\d+)", out)
    check(keep, "the kept array and object printed: %r" % out)
    lines = []
    def ended():
        nonlocal lines
        lines = open(log).read().splitlines() if os.path.exists(log) else []
        return "cuArrayDestroy %s" % keep.group(1) in lines
    wait_for(ended, what="the session's end destroys the kept array")
    obj = lines.index("cuTexObjectDestroy %s" % keep.group(2))
    arr = lines.index("cuArrayDestroy %s" % keep.group(1))
    check(obj < arr, "the object before its array: %r" % lines[-6:])
    check(any(l.startswith("cuTexObjectCreate type 2 ") for l in lines),
          "a texture object over linear memory reached the driver")
    check(any(l.startswith("cuMemcpy3DAsync_v2 1 0 0 0 -> 3 8 1 0 : 32 3 1") for l in lines),
          "the 2D copy into the array reached the driver as one 3D copy: %r" % lines)


def test_arrays_of_another_client_refused(daemon):
    """A client cannot copy from or to another client's array, view it through a texture or
    surface object, read or destroy another client's texture object, or destroy its array."""
    e = daemon()
    holder = arrays_driver(e, "hold")
    line = holder.stdout.readline().split()
    check(len(line) == 2, "holder printed its array and object: %r" % line)
    p = arrays_driver(e, "steal", *line)
    out, err = p.communicate(timeout=30)
    check(p.returncode == 0 and "steal refused" in out, "steal: %r %r" % (out, err))
    holder.communicate(input="end\n", timeout=30)
    check(holder.returncode == 0, "the holder's calls worked")
