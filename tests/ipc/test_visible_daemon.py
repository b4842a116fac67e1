# SPDX-License-Identifier: MIT
"""CUDA_VISIBLE_DEVICES on the daemon (as Slurm's per-GPU daemons and NVIDIA's device plugin set
it): its servers' driver sees only those devices, in that order, and every client sees them;
a client's own CUDA_VISIBLE_DEVICES, by ordinal or by UUID, picks among them. The driver double
honours the variable as the driver does (tests/cpu/fakecuda/fakecuda.c: the machine's device N
is "openmps fake GPU N", its UUID 16 bytes from (0xf0 + 0x10 N) up, its bus 0000:1N:00.0)."""
import os
import subprocess

from harness import REMOTE_DRIVER, SHIM_DIR, check

LIST = os.path.join(os.path.dirname(REMOTE_DRIVER), "list-devices")


def uuid(n):
    b = [(0xf0 + i + n * 0x10) & 0xff for i in range(16)]
    h = "".join("%02x" % x for x in b)
    return "GPU-%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


def line(ordinal, machine):
    return "%d openmps fake GPU %d %s 0000:%02x:00.0" % (ordinal, machine, uuid(machine),
                                                          0x10 + machine)


def listing(machines):
    return ["cuInit 0", "count %d" % len(machines)] + [line(i, m) for i, m in enumerate(machines)]


def list_devices(e, client_visible=None, native=False):
    env = dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    if client_visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = client_visible
    if native:  # no daemon in this directory: the shim passes through to the double
        env["CUDA_MPS_PIPE_DIRECTORY"] = os.path.join(e.dir, "nodaemon")
    p = subprocess.run([LIST], env=env, capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "list-devices: %r %r" % (p.stdout, p.stderr))
    return p.stdout.splitlines()


def test_double_honours_visible_devices(daemon):
    """The double alone (natively): ordinals and UUID prefixes pick and order the machine's
    devices; the first entry naming none ends the list; none left, or one named twice, and cuInit
    fails as the driver's does (100, 101)."""
    e = daemon(start=False)
    e.env["FAKECUDA_DEVICES"] = "4"
    cases = [(None, listing([0, 1, 2, 3])), ("2,0", listing([2, 0])),
             (" 3 , GPU-0001", listing([3, 1])), (uuid(2).upper(), listing([2])),
             ("1,9,0", listing([1])), ("1,GPU-ff,0", listing([1])),
             ("", ["cuInit 100"]), ("-1", ["cuInit 100"]), ("1,1", ["cuInit 101"])]
    for spec, want in cases:
        got = list_devices(e, spec, native=True)
        check(got == want, "CUDA_VISIBLE_DEVICES=%r: %r, want %r" % (spec, got, want))


def test_daemon_visible_devices_by_ordinal_and_uuid(daemon):
    """A daemon with CUDA_VISIBLE_DEVICES=3,1 on a machine of four: its clients see two devices,
    the machine's 3 then 1, the same lines a native process with that setting prints; a client's
    own CUDA_VISIBLE_DEVICES picks among the server's: by ordinal ("1": the machine's 1), by UUID
    (the machine's 3, the machine's 1); a UUID of a device the daemon does not see gives the
    client no device. The same with UUIDs on the daemon."""
    for spec in ("3,1", "%s,%s" % (uuid(3)[:12], uuid(1))):
        e = daemon(start=False)
        e.env.update({"FAKECUDA_DEVICES": "4", "CUDA_VISIBLE_DEVICES": spec})
        e.start()
        native = list_devices(e, spec, native=True)
        check(native == listing([3, 1]), "natively, with %r: %r" % (spec, native))
        got = list_devices(e)
        check(got == native, "served, the daemon's %r: %r" % (spec, got))
        for client, want in (("1", listing([1])), ("1,0", listing([1, 3])),
                             (uuid(3)[:9], listing([3])), (uuid(1), listing([1])),
                             ("%s,0" % uuid(1)[:8], listing([1])),  # an ordinal after a UUID ends it
                             ("0,%s" % uuid(1)[:8], listing([3, 1])), (uuid(2), ["cuInit 100"]),
                             ("2", ["cuInit 100"])):
            got = list_devices(e, client)
            check(got == want, "daemon %r, client %r: %r, want %r" % (spec, client, got, want))
        clog = e.log("control.log")
        check(clog.count("Accepting client") == 7, "every listing with devices was served: "
              + clog[-1500:])
        check("CUDA_VISIBLE_DEVICES=%s names none of the 2 device(s)" % uuid(2) in clog, clog)
        e.quit()


def test_daemon_visible_devices_naming_none(daemon):
    """A daemon whose CUDA_VISIBLE_DEVICES names no device, or one twice: its server cannot
    start (the driver's cuInit fails), and the client, refused, is told why with the value."""
    for spec, why in (("7", "names no device"), ("", "names no device"),
                      ("1,1", "names a device twice")):
        e = daemon(start=False)
        e.env.update({"FAKECUDA_DEVICES": "2", "CUDA_VISIBLE_DEVICES": spec})
        e.start()
        env = dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR))
        env.pop("CUDA_VISIBLE_DEVICES")
        p = subprocess.run([LIST], env=env, capture_output=True, text=True, timeout=120)
        want = "CUDA_VISIBLE_DEVICES=%s %s" % (spec, why)
        check(p.returncode == 0 and not p.stdout.startswith("cuInit 0") and
              "cannot use the openmps server" in p.stderr and want in p.stderr,
              "daemon %r: %r %r" % (spec, p.stdout, p.stderr))
        check(want in e.log("server.log"), "server.log: " + e.log("server.log")[-600:])
        e.quit()


def test_client_local_driver_sees_the_served_devices(daemon):
    """The client's own (local) driver, which the shim initialises for the runtime's export
    tables, sees exactly the devices the server gives the client, in its order: the CUDA
    runtime fails every call (cudaErrorSoftwareValidityNotEstablished) where the two differ, as
    it did on two H200s with the daemon under CUDA_VISIBLE_DEVICES=1. The program's own
    CUDA_VISIBLE_DEVICES is as it was after cuInit."""
    for daemon_spec in ("3,1", None):
        e = daemon(start=False)
        e.env["FAKECUDA_DEVICES"] = "4"
        e.env.pop("CUDA_VISIBLE_DEVICES", None)
        if daemon_spec:
            e.env["CUDA_VISIBLE_DEVICES"] = daemon_spec
        e.start()
        seen = [3, 1] if daemon_spec else [0, 1, 2, 3]
        for client in (None, "1", "1,0", uuid(seen[0])[:9], " 0 "):
            env = dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR), FAKECUDA_REPORT_INIT="1")
            env.pop("CUDA_VISIBLE_DEVICES", None)
            if client is not None:
                env["CUDA_VISIBLE_DEVICES"] = client
            p = subprocess.run([LIST], env=env, capture_output=True, text=True, timeout=120)
            if client is None:
                want = seen
            elif client.startswith("GPU-"):
                want = [seen[0]]
            else:
                want = [seen[int(x)] for x in client.split(",")]
            check(p.returncode == 0 and p.stdout.splitlines() == listing(want),
                  "daemon %r, client %r: %r %r" % (daemon_spec, client, p.stdout, p.stderr))
            local = [line for line in p.stderr.splitlines() if line.startswith("fakecuda cuInit")]
            check(local == ["fakecuda cuInit: machine devices " + ",".join(map(str, want))],
                  "daemon %r, client %r: the local driver saw %r" % (daemon_spec, client, local))
            check("CUDA_VISIBLE_DEVICES after cuInit: %s" % (client if client is not None
                                                             else "(unset)") in p.stderr,
                  "daemon %r, client %r: the program's variable changed: %r"
                  % (daemon_spec, client, p.stderr))
        e.quit()
