# SPDX-License-Identifier: MIT
"""Contexts and devices (tests/cpu/remote_contexts.c, remote_devices.c): bus ids, every device,
CUDA_VISIBLE_DEVICES.
"""
import os
import subprocess

from harness import Env, REMOTE_DRIVER, SHIM_DIR, check, remote, wait_for


def test_remote_contexts_and_device_queries(daemon):
    """Created contexts (every cuCtxCreate version) with their own tokens, flags and execution
    affinity, destroyed ones refused, the current context per thread; cuCtxRecordEvent and
    cuCtxWaitEvent over all of the client's streams; the device queries through the server and
    their refusals (remote_contexts.c)."""
    e = daemon({"FAKECUDA_KERNEL_MS": "3000", "FAKECUDA_WAITS_PROPAGATE": "1"})
    p = remote(e, "contexts")
    out, err = p.communicate(timeout=120)
    check(p.returncode == 0 and "contexts ok" in out, "contexts: %r %r" % (out, err))


def test_remote_bus_id_names_each_device(daemon):
    """A server with three devices: a client sees all three (device 2 by its bus id), and gets
    INVALID_DEVICE for the bus id of a device that is not there."""
    e = daemon({"FAKECUDA_DEVICES": "3"})
    p = remote(e, "contexts_bus")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "contexts_bus ok" in out, "contexts_bus: %r %r" % (out, err))


def test_remote_client_uses_every_device():
    """A server with two devices (FAKECUDA_DEVICES=2, the double's virtual-memory API): a client
    makes device 1's primary context current and its memory is made on device 1 (cuMemCreate's
    location), its stream in device 1's context, its kernel fills it; a function's attribute is
    set on the device current when asked; a context's event joins that device's streams; a peer copy brings device
    0's values over; peer access is answered as the driver does; the server logs the peer access
    it enabled between its contexts, and the daemon lists the client under both devices
    (get_device_client_list) once it used them."""
    e = Env(start=False)
    ok = False
    p = None
    try:
        slog, mlog = os.path.join(e.dir, "streams.log"), os.path.join(e.dir, "memory.log")
        alog = os.path.join(e.dir, "attrs.log")
        e.env.update({"FAKECUDA_DEVICES": "2", "FAKECUDA_VMM": "1", "FAKECUDA_STREAM_LOG": slog,
                      "FAKECUDA_MEMORY_LOG": mlog, "FAKECUDA_LEGACY_LOG": alog})
        e.start()
        p = subprocess.Popen([REMOTE_DRIVER, "devices"], env=dict(
            e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR)), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = []
        while True:
            line = p.stdout.readline()
            if not line:
                check(False, "the client ended early: %r" % p.stderr.read())
            lines.append(line.split())
            if line.startswith("devices ok"):
                break
        made = {l.split()[1]: l.split()[5] for l in open(slog).read().splitlines()}
        for f in lines[:2]:
            check(made.get(f[5]) == f[1], "device %s's stream made in device %s's context: %r"
                  % (f[1], made.get(f[5]), made))
        creates = [l.split() for l in open(mlog).read().splitlines() if l.startswith("vmmcreate")]
        check({c[3] for c in creates} == {"0", "1"}, "memory made on both devices: %r" % creates)
        sets = [l.split() for l in open(alog).read().splitlines()
                if l.startswith("cuKernelSetAttribute")]
        check(sorted(x[5] for x in sets if x[4] == "4096") == ["0", "1"],
              "a function's attribute set on each device it was asked on: %r" % sets)
        check("peer access: device 0 reaches device 1's memory" in e.log("server.log") and
              "peer access: device 1 reaches device 0's memory" in e.log("server.log"),
              "the server enabled peer access between its contexts")

        def listed():
            out = e.cmd("get_device_client_list")
            return out.count("%d.1" % p.pid) == 2 and out
        out = wait_for(listed, what="the client under both devices")
        check(out.startswith("[0] 0000:10:00.0") and "[1] 0000:11:00.0" in out, out)
        p.stdin.write("\n")
        p.stdin.flush()
        p.wait(timeout=60)
        check(p.returncode == 0, "the client ends well: %r" % p.stderr.read())
        ok = True
    finally:
        if p and p.poll() is None:
            p.kill()
        e.close(ok)


def test_client_visible_devices_pick_and_renumber(daemon):
    """CUDA_VISIBLE_DEVICES on a client picks and orders a subset of its server's devices, as
    the driver reads it (ordinals and UUID prefixes): with "2,GPU-f0f1" on a server of three it
    sees two, the server's 2 then 0, and every ordinal it passes or gets back is its own (names,
    bus ids, attributes, its memory caps "0=64M" and by UUID "GPU-f0f1=32M" (a UUID of no
    device is named in the daemon's log and ignored), pointer attributes, a physical allocation's
    location); its memory is made on the server's devices 2 and 0, never 1; the daemon logs the
    choice. A list that names no device ("", "7", "GPU-ff") leaves the client without devices:
    cuInit and later calls answer CUDA_ERROR_NO_DEVICE (INVALID_DEVICE for a device named twice,
    as the driver's), the daemon says why, and it serves the next client."""
    e = daemon(start=False)
    mlog = os.path.join(e.dir, "memory.log")
    e.env.update({"FAKECUDA_DEVICES": "3", "FAKECUDA_VMM": "1", "FAKECUDA_MEMORY_LOG": mlog})
    e.start()
    env = dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR),
               CUDA_VISIBLE_DEVICES="2,GPU-f0f1",
               CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="0=64M,GPU-f0f1=32M,GPU-99=1G")
    p = subprocess.run([REMOTE_DRIVER, "visible"], env=env, capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 0 and "visible ok" in p.stdout, "visible: %r %r"
          % (p.stdout, p.stderr))
    creates = [l.split() for l in open(mlog).read().splitlines() if l.startswith("vmmcreate")]
    devs = {c[3] for c in creates}
    check("2" in devs and "0" in devs and "1" not in devs,
          "memory made on the server's devices 2 and 0 only: %r" % creates)
    check("CUDA_VISIBLE_DEVICES=2,GPU-f0f1, 2 of 3 device(s)" in e.log("control.log"),
          "the daemon logs the client's devices")
    check("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT names 1 device(s) the server does not have "
          "(GPU-99)" in e.log("control.log"), "the daemon names a UUID of no device")
    for spec, rc in (("", 100), ("7", 100), ("GPU-ff", 100), ("-1,0", 100), ("0,0", 101)):
        env["CUDA_VISIBLE_DEVICES"] = spec
        p = subprocess.run([REMOTE_DRIVER, "novisible", str(rc)], env=env,
                           capture_output=True, text=True, timeout=120)
        check(p.returncode == 0 and "novisible ok" in p.stdout, "novisible %r: %r %r"
              % (spec, p.stdout, p.stderr))
    check("names none of the 3 device(s)" in e.log("control.log") and
          "names a device twice" in e.log("control.log"), e.log("control.log"))
    env["CUDA_VISIBLE_DEVICES"] = "1"  # the daemon still serves
    del env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"]
    p = subprocess.run([REMOTE_DRIVER, "image", "k"], env=env, capture_output=True,
                       text=True, timeout=120)
    check(p.returncode == 0 and "image ok" in p.stdout, "a client after them: %r" % p.stderr)
