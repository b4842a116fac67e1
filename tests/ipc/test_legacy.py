# SPDX-License-Identifier: MIT
"""The legacy family and the _v1 entry points (tests/cpu/remote_legacy.c, remote_v1.c)."""
import os
import re
import struct

from harness import Env, check, remote, wait_for


def test_remote_legacy_family(daemon):
    """api/remote/legacy.tsv (remote_legacy.c): legacy launches' per-function state reaches the
    double as argument bytes (a float's bits intact), the multi-device cooperative launch as a
    cooperative launch, v1 array descriptors converted, tensor maps and logs answered by the
    client's own driver (not the server's), atomics capabilities and the RDMA flush through the
    server, and the client's own answers (notifications, coredump settings, peer access)."""
    e = daemon(start=False)
    launches = os.path.join(e.dir, "launches")
    legacy = os.path.join(e.dir, "legacy")
    e.env["FAKECUDA_LAUNCH_LOG"] = launches
    e.env["FAKECUDA_LEGACY_LOG"] = legacy
    e.start()
    p = remote(e, "legacy")
    out, err = p.communicate(timeout=120)
    check(p.returncode == 0 and "legacy ok" in out, "legacy: %r %r" % (out, err))
    cpid = int(re.search(r"pid (\d+)", out).group(1))
    lines = open(launches).read().splitlines()
    args = "44332211" + "0000c03f" + "1122334455667788"  # seti, setf(1.5), setv(u64)
    check("legacy 3,2,1 32,2,1 " + args in lines, "cuLaunchGrid's bytes: %r" % lines)
    check("legacy 1,1,1 32,2,1 " + args in lines, "cuLaunch's bytes: %r" % lines)
    check("other 5,1,1 8,1,1 " + "00000080" + "00" * 12 in lines,
          "cuLaunchGridAsync of another function, its own state (-0.0f): %r" % lines)
    coop = "legacy 2,1,1 16,1,1 " + "07000000" + "0000803f" + "1122334455667788"
    check(coop in lines and "attr 2 1" in lines,
          "the multi-device launch as a cooperative one: %r" % lines)
    check(len([l for l in lines if l.startswith(("legacy ", "other "))]) == 4,
          "no launch of a refused call reached the driver: %r" % lines)
    log = [l.split() for l in open(legacy).read().splitlines()]
    by = {l[0]: l for l in log}
    check("cuLogsCurrent" in by and int(by["cuLogsCurrent"][1]) == cpid,
          "cuLogsCurrent answered by the client's driver (pid %d): %r" % (cpid, log))
    for name in ("cuTensorMapEncodeTiled", "cuTensorMapReplaceAddress"):
        check(name in by and int(by[name][1]) != cpid,
              "%s answered by the server's driver, in its context: %r" % (name, log))
    check("cuFlushGPUDirectRDMAWrites" in by and int(by["cuFlushGPUDirectRDMAWrites"][1]) != cpid
          and by["cuFlushGPUDirectRDMAWrites"][3] == "c8",
          "cuFlushGPUDirectRDMAWrites through the server: %r" % log)
    check(by["cuTensorMapEncodeTiled"][2] == "7f0000001000", "the address encoded: %r" % log)
    check(len([l for l in log if l[0] == "cuTensorMapEncodeTiled"]) == 1,
          "no refused tensor map reached the driver: %r" % log)
    attrs = [l[2] for l in log if l[0] == "cuKernelGetAttribute"]
    # 4 once for each of two functions; 8 once by the client, then by the server before
    # each of the two sets that could lower it (the same value twice travels once)
    check(attrs.count("4") == 2 and attrs.count("8") == 3 and attrs.count("9") == 0,
          "an attribute asked once per function, fixed or settable: %r" % attrs)
    sets = [l[2:] for l in log if l[0] == "cuKernelSetAttribute"]
    check([x[0] for x in sets] == ["8", "9", "8"] and sets[0][2] == "2000"
          and sets[1][2] == "50" and sets[2][2] == "-1",
          "the permission raised once, never lowered, the hint set, the bad value "
          "refused by the driver: %r" % sets)
    f32 = lambda x: "%x" % struct.unpack("<I", struct.pack("<f", x))[0]
    check(by.get("cuTexRefSetMipmapLevelBias", [""] * 3)[2] == f32(-0.375),
          "the bias reached the driver bit for bit: %r" % log)
    check(by.get("cuTexRefSetMipmapLevelClamp", [""] * 4)[2:4] == [f32(1.0e-42), f32(16.5)],
          "the clamp (a subnormal) reached the driver bit for bit: %r" % log)
    check(by.get("cuTexRefSetAddress2D_v3", [""] * 4)[3] == "1000",
          "cuTexRefSetAddress2D: the 16 rows of 256 bytes reached the driver: %r" % log)
    check(len([l for l in log if l[0] == "cuTexRefSetAddress2D_v3"]) == 1,
          "no refused cuTexRefSetAddress2D reached the driver: %r" % log)
    kept = re.search(r"texref ([0-9a-f]+)", out).group(1)
    def destroyed():
        return any(l.split()[0] == "cuTexRefDestroy" and l.split()[2] == kept
                   for l in open(legacy).read().splitlines())
    wait_for(destroyed, what="the session's end destroys the kept texture reference")


def test_remote_v1_entry_points():
    """api/remote/v1.tsv (remote_v1.c): the 32-bit (v1) entry points. The aliases
    (cuEventDestroy, cuMemHostRegister) reach the server; cuMemGetInfo saturates at 4 GiB - 1.
    With the double's addresses above 4 GiB a v1 allocation is refused (out of memory, the
    allocation freed again: more refusals than the double holds allocations leave room); below 4 GiB
    (FAKECUDA_LOW_VA) every v1 copy, set and allocation round trips data through the server."""
    for low in (False, True):
        e = Env(extra_env={"FAKECUDA_LOW_VA": "1"} if low else None)
        ok = False
        try:
            p = remote(e, "v1", *(["low"] if low else []))
            out, err = p.communicate(timeout=120)
            check(p.returncode == 0 and "v1 ok" in out, "v1 low=%s: %r %r" % (low, out, err))
            ok = True
        finally:
            e.close(ok)
