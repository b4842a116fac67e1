# SPDX-License-Identifier: MIT
"""The suites harness's health probe (tests/gpu/suites/suites.py): a client that initialises the
driver, makes the primary context current, allocates, sets and frees 1 MiB and synchronises.
Run under `openmps run` after a test that may have ended the server: exit 0 when all of it
succeeded, else 1 with the call that failed and its code on stderr."""
import ctypes
import sys


def main():
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        sys.stderr.write("probe: cannot load libcuda.so.1: %s\n" % e)
        return 1
    dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    steps = [
        ("cuInit", lambda: cu.cuInit(0)),
        ("cuDeviceGet", lambda: cu.cuDeviceGet(ctypes.byref(dev), 0)),
        ("cuDevicePrimaryCtxRetain", lambda: cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)),
        ("cuCtxSetCurrent", lambda: cu.cuCtxSetCurrent(ctx)),
        ("cuMemAlloc_v2", lambda: cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 20))),
        ("cuMemsetD8_v2", lambda: cu.cuMemsetD8_v2(ptr, ctypes.c_ubyte(7), ctypes.c_size_t(1 << 20))),
        ("cuCtxSynchronize", lambda: cu.cuCtxSynchronize()),
        ("cuMemFree_v2", lambda: cu.cuMemFree_v2(ptr)),
    ]
    for name, call in steps:
        rc = call()
        if rc != 0:
            sys.stderr.write("probe: %s answered %d\n" % (name, rc))
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
