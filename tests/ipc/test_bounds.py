# SPDX-License-Identifier: MIT
"""Range checks of copies and sets (tests/cpu/bounds_driver.c)."""

from harness import SANITIZER, check, driver_program


def bounds_driver(e, *args):
    return driver_program(e, "bounds-driver", args)


def test_host_copy_past_its_allocation_is_refused_before_reading(daemon):
    """A host-to-device copy whose device range runs past its allocation, from a host buffer of
    the allocation's size that ends at a guard page (1D synchronous and asynchronous, cuMemcpy,
    2D; bytes inline, staged through the ring, through the staging area): CUDA_ERROR_INVALID_VALUE,
    as natively, and no host byte past the buffer is read (the client would die of SIGSEGV);
    nothing is written; the same buffer in range arrives whole. The server serves on."""
    e = daemon()
    p = bounds_driver(e, "htod")
    out, err = p.communicate(timeout=120)
    check(p.returncode == 0 and "htod ok" in out,
          "htod: exit %d: %r %r" % (p.returncode, out, err[-2000:]))
    check(not SANITIZER.search(err), "sanitizer: " + err)
    p = bounds_driver(e, "time", "10")  # the same server, another client
    out, err = p.communicate(timeout=120)
    check(p.returncode == 0 and "time ok" in out, "after: %r %r" % (out, err[-2000:]))


def test_memset_2d_pitch_and_empty_rows(daemon):
    """2D sets as the driver documents them: one row's pitch is unused (even 0); rows of no
    element, or no row, set nothing, however many rows are asked for (2^40: the server does not
    walk them, and answers at once); rows wider than their pitch or past the allocation are
    refused with CUDA_ERROR_INVALID_VALUE."""
    e = daemon()
    p = bounds_driver(e, "memset2d")
    out, err = p.communicate(timeout=120)
    check(p.returncode == 0 and "memset2d ok" in out,
          "memset2d: exit %d: %r %r" % (p.returncode, out, err[-2000:]))
    check(not SANITIZER.search(err), "sanitizer: " + err)
