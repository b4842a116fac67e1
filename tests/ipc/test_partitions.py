# SPDX-License-Identifier: MIT
"""Static SM partitions (-S; control/partition.c, server/share.c): partitions made, listed, used
by clients on disjoint SMs, removed; every refusal."""
import os
import re
import subprocess

from harness import CONTROL, Env, SHIM_DIR, REMOTE_DRIVER, check, wait_for


def uuid_of(e):
    m = re.search(r"GPU-[0-9a-f-]{36}", e.cmd("device_query"))
    check(m, "device_query names the device's UUID")
    return m.group(0)


def answer(e, line):
    """(stdout, rc) of one command"""
    out, err, rc = e.ctl(line + "\n")
    return out.rstrip("\n"), rc


def start_share_client(e, part):
    """remote-driver share (remote_share.c) with CUDA_MPS_SM_PARTITION=part (None: unset)."""
    env = dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR))
    env.pop("CUDA_MPS_SM_PARTITION", None)
    if part is not None:
        env["CUDA_MPS_SM_PARTITION"] = part
    return subprocess.Popen([REMOTE_DRIVER, "share"], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def first_round(p):
    line = p.stdout.readline().split()
    check(len(line) == 9 and line[-1] == "ok", "a round: %r (%s)" % (
        line, "" if line else p.stderr.read()))
    return int(line[3]), int(line[5])  # the SM count attribute, the SM resource's count


def owned(glog):
    """green context -> the set of SMs it owns (the double's log)"""
    sets = {}
    for l in open(glog).read().splitlines():
        f = l.split()
        if len(f) == 4 and f[2] == "owns":
            sets[f[1]] = int(f[3], 16)
    return sets


def launch_greens(glog, llog):
    """the green contexts the launches of the launch log went to (None: no green context)"""
    of = {}
    for l in open(glog).read().splitlines():
        f = l.split()
        if f[2] == "stream":
            of[f[3]] = f[1]
    return [of.get(l.split()[3]) for l in open(llog).read().splitlines()]


def test_partitions_made_used_on_disjoint_sms_and_removed():
    """On the double's device of 132 SMs (chunks of 8: 16 chunks, 4 SMs left over): two
    partitions of 4 and 12 chunks, NVIDIA's answers ("Partition UUID/ID created", lspart's
    table); a client of each sees 32 and 96 SMs and its kernels run in a green context of its
    partition's SMs only, the two disjoint; a partition in use cannot be removed; after its
    client it can; a client without a partition, or with an unknown one, is refused with
    CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION (915)."""
    e = Env(start=False)
    ok = False
    procs = []
    try:
        glog, llog = os.path.join(e.dir, "green.log"), os.path.join(e.dir, "launch.log")
        e.env.update({"FAKECUDA_GREEN_LOG": glog, "FAKECUDA_LAUNCH_STREAM_LOG": llog})
        e.daemon_args = ["-S"]
        e.start()
        u = uuid_of(e)
        out, rc = answer(e, "lspart")
        lines = out.splitlines()
        check(rc == 0 and len(lines) == 3 and lines[0].split() ==
              ["GPU", "Partition", "free", "used", "free", "used", "clients"] and
              lines[1].split() == ["chunks", "chunks", "SM", "SM"] and
              lines[2].split() == [u[:12], "16", "0", "132", "0"], "lspart, empty: %r" % out)

        a, rc = answer(e, "sm_partition add %s 4" % u)
        m = re.fullmatch(r"Partition (GPU-[0-9a-f-]{36})/([0-9a-f]{12}) created", a)
        check(rc == 0 and m and m.group(1) == u, "sm_partition add: %r" % a)
        pa = "%s/%s" % (u, m.group(2))
        b, rc = answer(e, "sm_partition add %s 12" % u[:12])  # a UUID's prefix, as lspart's
        m = re.fullmatch(r"Partition (GPU-[0-9a-f-]{36})/([0-9a-f]{12}) created", b)
        check(rc == 0 and m, "sm_partition add by a UUID's prefix: %r" % b)
        pb_id = m.group(2)
        full, _ = answer(e, "sm_partition add %s 1" % u)
        check(full.startswith("Failed to fulfill the requested SM partition of 1 chunks, error "
                              "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION"),
              "a 17th chunk: %r" % full)

        out, _ = answer(e, "lspart")
        rows = [l.split() for l in out.splitlines()[2:]]
        check(rows == [[u[:12], "0", "16", "4", "128"],
                       [u[:12], pa.split("/")[1], "4", "32", "No"],
                       [u[:12], pb_id, "12", "96", "No"]], "lspart, two partitions: %r" % out)

        ca = start_share_client(e, pa)
        cb = start_share_client(e, pb_id)  # the ID alone names it too
        procs += [ca, cb]
        check(first_round(ca) == (32, 32), "the client of 4 chunks sees 32 SMs")
        check(first_round(cb) == (96, 96), "the client of 12 chunks sees 96 SMs")
        greens = [g for g in launch_greens(glog, llog)]
        check(greens and None not in greens and len(set(greens)) == 2,
              "every launch in one of two green contexts: %r" % greens)
        sets = owned(glog)
        ga, gb = (sets[g] for g in sorted(set(greens), key=lambda g: bin(sets[g]).count("1")))
        check(bin(ga).count("1") == 32 and bin(gb).count("1") == 96 and ga & gb == 0,
              "the partitions' SMs are disjoint: %x %x" % (ga, gb))
        out, _ = answer(e, "lspart")
        check(out.splitlines()[3].split()[-1] == "Yes" and out.splitlines()[4].split()[-1] == "Yes",
              "lspart shows both in use: %r" % out)

        busy, rc = answer(e, "sm_partition rm %s %s" % (u, pa.split("/")[1]))
        check(rc == 0 and "is in use by 1 client(s)" in busy, "rm of a partition in use: %r" % busy)

        for p in (None, "%s/000000000000" % u, "nonsense"):
            c = start_share_client(e, p)
            _, err = c.communicate(timeout=60)
            check(c.returncode != 0 and "915" in err and "CUDA_MPS_SM_PARTITION" in err,
                  "a client naming %r is refused: %r" % (p, err))

        for c in (ca, cb):
            c.stdin.write("end\n")
            c.stdin.flush()
            out, err = c.communicate(timeout=60)
            check(c.returncode == 0 and "share ok" in out, "client ends: %r %r" % (out, err))

        def removed():
            return answer(e, "sm_partition rm %s" % pa)[0] == "Partition %s removed" % pa
        wait_for(removed, what="rm once its client left (the UUID/ID form)")
        gone, _ = answer(e, "sm_partition rm %s %s" % (u, pb_id))
        check(gone == "Partition %s/%s removed" % (u, pb_id), "rm UUID ID: %r" % gone)
        out, _ = answer(e, "lspart")
        check([l.split() for l in out.splitlines()[2:]] == [[u[:12], "16", "0", "132", "0"]],
              "lspart after both went: %r" % out)
        ok = True
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        e.close(ok)


def test_partition_refusals():
    """Every bad partition command names its problem; without -S the commands and the client's
    variable do nothing but say so; -S belongs to -d or -f."""
    e = Env(start=False)
    ok = False
    try:
        e.daemon_args = ["-S"]
        e.start()
        u = uuid_of(e)
        for line, want in [
            ("sm_partition add GPU-deadbeef 2", "No device has the UUID GPU-deadbeef"),
            ("sm_partition add %s 0" % u, "is not a number of chunks"),
            ("sm_partition add %s x" % u, "is not a number of chunks"),
            ("sm_partition add %s 17" % u, "Failed to fulfill the requested SM partition of 17"),
            ("sm_partition add nonsense 2", "is not a device UUID"),
            ("sm_partition add %s" % u, "Usage: sm_partition add"),
            ("sm_partition rm %s abc" % u, "No SM partition abc"),
            ("sm_partition rm %s" % u, "Usage: sm_partition rm"),
            ("sm_partition move %s 1" % u, "Usage: sm_partition add"),
            ("partition list", "sm_partition and lspart work on either"),
        ]:
            out, rc = answer(e, line)
            check(rc == 0 and want in out, "%s: %r" % (line, out))
        # the budget: 16 partitions of one chunk fill the device
        for i in range(16):
            check(answer(e, "sm_partition add %s 1" % u)[0].endswith(" created"), "add %d" % i)
        check("Failed to fulfill" in answer(e, "sm_partition add %s 1" % u)[0], "full")
        e.quit()

        plain = Env()
        try:
            for line in ("lspart", "sm_partition add %s 1" % u):
                out, rc = answer(plain, line)
                check("Static SM partitioning is not enabled" in out, "%s without -S: %r" %
                      (line, out))
            p = start_share_client(plain, "%s/abc" % u)
            out, err = p.communicate("end\n", timeout=60)
            check(p.returncode == 0 and "share ok" in out, "the client runs: %r" % err)
            wait_for(lambda: "CUDA_MPS_SM_PARTITION is set but the daemon runs without static"
                     in plain.log(), what="the variable ignored without -S, said in the log")
        finally:
            plain.close(True)
        r = subprocess.run([CONTROL, "-S"], input="", env=e.env, capture_output=True, text=True,
                           timeout=30)
        check(r.returncode == 2 and "give it with -d or -f" in r.stderr, "-S alone: %r" % r.stderr)
        ok = True
    finally:
        e.close(ok)


CONF = '''schema_version = "1.0"
[servers.main]
[[servers.main.devices]]
uuid = "%s"
[[servers.main.devices.sm_partitions]]
name = "small"
chunks = 4
[[servers.main.devices.sm_partitions]]
name = "rest"
chunks = 0
include_remainder = true
'''
FAKE_UUID = "GPU-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff"  # the double's device 0


def test_partitions_from_the_configuration_file():
    """The v3 file's [[servers.S.devices]] sm_partitions are made at the start (static
    partitioning on, as -S): 4 chunks named small, every other chunk with the 4 SMs left over
    named rest; clients name them by name; a partition the device cannot give, or a shareable
    one, fails the start naming its line."""
    e = Env(start=False)
    ok = False
    try:
        path = os.path.join(e.dir, "parts.toml")
        open(path, "w").write(CONF % FAKE_UUID)
        e.daemon_args = ["-p", "3", "-a", path]
        e.start()
        rows = [l.split() for l in answer(e, "lspart")[0].splitlines()[2:]]
        check(len(rows) == 3 and rows[0] == [FAKE_UUID[:12], "0", "16", "0", "132"] and
              rows[1][2:] == ["4", "32", "No"] and rows[2][2:] == ["12", "100", "No"],
              "lspart of the file's partitions: %r" % rows)
        for name, sms in (("small", 32), ("rest", 100)):
            c = start_share_client(e, name)
            check(first_round(c) == (sms, sms), "a client of %s sees %d SMs" % (name, sms))
            out, err = c.communicate("end\n", timeout=60)
            check(c.returncode == 0 and "share ok" in out, "%s: %r" % (name, err))
        e.quit()
        for text, want in (
                ((CONF % FAKE_UUID).replace("chunks = 4", "chunks = 17"),
                 "line 5: SM partition small: Failed to fulfill the requested SM partition of 17"),
                ((CONF % FAKE_UUID).replace("chunks = 4", "chunks = 4\nshareable = true"),
                 "line 5: SM partition small: shareable is not supported"),
                (CONF % "GPU-0000", "line 3: server main: No device has the UUID GPU-0000")):
            open(path, "w").write(text)
            r = subprocess.run([CONTROL, "-f", "-p", "3", "-a", path], env=e.env,
                               capture_output=True, text=True, timeout=30)
            check(r.returncode == 1 and want in r.stderr, "%r: %r" % (want, r.stderr))
        ok = True
    finally:
        e.close(ok)
