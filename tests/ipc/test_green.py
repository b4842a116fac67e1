# SPDX-License-Identifier: MIT
"""Green contexts, SM shares and client priority (tests/cpu/remote_green.c)."""
import os
import re
import subprocess

from harness import Env, REMOTE_DRIVER, SHIM_DIR, check, remote, wait_for


def test_remote_green_contexts(daemon):
    """api/remote/green.tsv (remote_green.c) on the double's device of 132 SMs: device
    resources by reference (a changed or forged struct refused, never reaching the driver),
    splits by count, descriptors, real green contexts with their streams (the double logs in
    which green context each stream was made), the context token of a green context (streams
    made while it is current are the green context's, and so is its NULL stream, in order with
    the NULL-stream work before), events of green contexts; what the
    client leaves is destroyed at the session's end."""
    e = daemon({"FAKECUDA_KERNEL_MS": "2000", "FAKECUDA_WAITS_PROPAGATE": "1"}, start=False)
    log = os.path.join(e.dir, "green.log")
    e.env["FAKECUDA_GREEN_LOG"] = log  # the server makes them: it inherits the daemon's env
    e.start()
    p = remote(e, "green")
    out, err = p.communicate(timeout=120)
    check(p.returncode == 0 and "green ok" in out, "green: %r %r" % (out, err))
    lines = open(log).read().splitlines()
    created = [l.split()[1] for l in lines if l.endswith("created sms 64")]
    check(len(created) == 2, "two green contexts of 64 SMs each: %r" % lines)
    streams = {}
    for l in lines:
        f = l.split()
        if f[2] == "stream":
            streams.setdefault(f[1], []).append(f[3])
    check(len(streams.get(created[0], [])) == 1,
          "one stream in the first green context (cuGreenCtxStreamCreate): %r" % lines)
    check(len(streams.get(created[1], [])) == 4,
          "four in the second: the client's NULL stream while its token was current, "
          "cuStreamCreateWithPriority and cuStreamCreate then, and cuGreenCtxStreamCreate: "
          "%r" % lines)
    check("green %s destroyed sms 64" % created[0] in lines,
          "cuGreenCtxDestroy reached the driver: %r" % lines)

    def released():
        return "green %s destroyed sms 64" % created[1] in open(log).read().splitlines()
    wait_for(released, what="the session's end destroys the green context left")


def launch_green_sms(glog, llog):
    """The SM count of the green context each launch in the double's FAKECUDA_LAUNCH_STREAM_LOG
    went to (None: a stream of no green context), from its FAKECUDA_GREEN_LOG."""
    sms, of = {}, {}
    for l in open(glog).read().splitlines() if os.path.exists(glog) else []:
        f = l.split()
        if f[2] == "created":
            sms[f[1]] = int(f[4])
        elif f[2] == "stream":
            of[f[3]] = f[1]
    return [sms.get(of.get(l.split()[3])) for l in open(llog).read().splitlines()]


def test_sm_share_runs_kernels_in_a_lane_and_follows_changes():
    """An SM share (server/share.c) on the double's device of 132 SMs: a client at 25 % (its
    environment) is shown 32 SMs (the attribute and the SM resource) and its kernels go to
    streams of a green context of 32 SMs; two clients at 50 % get different green contexts of
    64; a client without a share, 132 and no green context. The stream's order holds across
    the shadow stream (a set, a kernel, a copy: remote_share.c checks the values).
    set_active_thread_percentage on the running server moves its running clients at their next
    launch (a client's own tighter value stays), and 100 back to every SM; the server logs each
    change with the client's pid, and ps -v follows. set_device_pinned_mem_limit reaches the
    running clients too (cuMemGetInfo's total)."""
    e = Env(start=False)
    ok = False
    clients, mem = {}, {}
    try:
        glog, llog = os.path.join(e.dir, "green.log"), os.path.join(e.dir, "launch.log")
        e.env.update({"FAKECUDA_GREEN_LOG": glog, "FAKECUDA_LAUNCH_STREAM_LOG": llog})
        e.start()

        def start(name, pct):
            extra = {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": pct} if pct else {}
            env = dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR), **extra)
            p = subprocess.Popen([REMOTE_DRIVER, "share"], env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            clients[name] = p
            return p

        def round_(p):
            line = p.stdout.readline().split()
            check(len(line) == 9 and line[-1] == "ok", "a round: %r (%s)" % (
                line, "" if line else p.stderr.read()))
            mem[p.pid] = int(line[7])
            return int(line[3]), int(line[5])

        def again(p):
            open(llog, "w").close()  # this round's launches only
            p.stdin.write("again\n")
            p.stdin.flush()
            return round_(p)

        def settled(p, want, what):
            """A change reaches the server after the daemon's answer (SRV_LIMITS): the client's
            rounds until one shows it (a loaded machine may take a round or two)."""
            return wait_for(lambda: again(p) == want, what=what) and want

        def lanes():
            """green context -> SMs, and stream -> green context, from the double's log"""
            sms, of = {}, {}
            for l in open(glog).read().splitlines():
                f = l.split()
                if f[2] == "created":
                    sms[f[1]] = int(f[4])
                elif f[2] == "stream":
                    of[f[3]] = f[1]
            return sms, of

        def launched_in(p):
            """the green contexts (SM counts) this round's launches of p went to (None: a
            stream of no green context)"""
            sms, of = lanes()
            streams = [l.split()[3] for l in open(llog).read().splitlines()]
            return [(of.get(s), sms.get(of.get(s))) for s in streams]

        a = start("a", "25")
        check(round_(a) == (32, 32), "25 %: 32 SMs shown")
        for name in ("b", "c"):
            p = start(name, "50")
            check(round_(p) == (64, 64), "50 %: 64 SMs shown")
        d = start("d", None)
        check(round_(d) == (132, 132), "no share: 132 SMs")
        got = {}
        for name in ("a", "b", "c", "d"):
            check(again(clients[name]) == {"a": (32, 32), "b": (64, 64), "c": (64, 64),
                                             "d": (132, 132)}[name], "round 2 of " + name)
            got[name] = launched_in(clients[name])
            check(len(got[name]) == 3, "three launches a round: %r" % got[name])
        check(all(x[1] == 32 for x in got["a"]), "a's kernels on 32 SMs: %r" % got["a"])
        check(all(x[1] == 64 for x in got["b"] + got["c"]), "b and c on 64: %r" % got)
        check({x[0] for x in got["b"]}.isdisjoint({x[0] for x in got["c"]}),
              "b and c in different green contexts (different halves): %r" % got)
        check(all(x[0] is None for x in got["d"]), "d on no green context: %r" % got["d"])

        spid = e.servers()[0]
        check(e.cmd("set_active_thread_percentage %d 25" % spid) == "25.0", "set 25")
        check(e.cmd("get_active_thread_percentage %d" % spid) == "25.0", "get 25")
        for name in ("a", "b", "c", "d"):
            check(settled(clients[name], (32, 32), "%s at 25 %%" % name) == (32, 32),
                  "%s at 25 %% after the change" % name)
            check(all(x[1] == 32 for x in launched_in(clients[name])),
                  "%s's kernels on 32 SMs now: %r" % (name, launched_in(clients[name])))
        # logged once the server made the whole change: d may have seen it first
        wait_for(lambda: re.search(r"client %d: active thread percentage 100\.0 -> 25\.0" %
                                   d.pid, e.log("server.log")),
                 what="the change logged with d's pid")
        rows = {l.split()[0]: l.split() for l in e.cmd("ps -v").splitlines()[1:]}
        check(rows[str(d.pid)][-4] == "25.0", "ps -v shows d's new share: %r" % rows)

        check(e.cmd("set_active_thread_percentage %d 100" % spid) == "100.0", "set 100")
        want = {"a": 32, "b": 64, "c": 64, "d": 132}  # each back to its own
        for name in ("a", "b", "c", "d"):
            check(settled(clients[name], (want[name], want[name]), name) ==
                  (want[name], want[name]), "%s back to its own share" % name)
        check(all(x[0] is None for x in launched_in(d)), "d back on no green context")
        # the memory cap too, for running clients: cuMemGetInfo's total follows
        check(mem[d.pid] == 16 << 30, "no cap: the device's 16 GiB")
        check(e.cmd("set_device_pinned_mem_limit %d 0 1G" % spid) == "", "set the cap")
        wait_for(lambda: again(d)[0] == 132 and mem[d.pid] == 1 << 30, what="d's new 1G cap")
        check(mem[d.pid] == 1 << 30, "d's total is the new 1G cap")
        wait_for(lambda: re.search(r"client %d: device 0 pinned memory limit none -> 1G" %
                                   d.pid, e.log("server.log")),
                 what="the cap's change logged with d's pid")
        check(e.cmd("set_active_thread_percentage %d 0" % spid).startswith("Invalid"),
              "0 refused")
        for p in clients.values():
            p.stdin.write("end\n")
            p.stdin.flush()
            out, err = p.communicate(timeout=60)
            check(p.returncode == 0 and "share ok" in out, "client ends: %r %r" % (out, err))
        ok = True
    finally:
        for p in clients.values():
            if p.poll() is None:
                p.kill()
        e.close(ok)


def test_context_sm_partitions_with_mps_variable():
    """CUDA_MPS_ENABLE_PER_CTX_DEVICE_MULTIPROCESSOR_PARTITIONING=1 (the client's): a context
    created with an execution affinity of 16 SMs (cuCtxCreate_v3) runs its kernels in a green
    context of 16 SMs, and the primary context's kernels after it on every SM; without the
    variable the affinity is recorded only (every SM), as before."""
    for var in ("1", None):
        e = Env(start=False)
        ok = False
        try:
            glog, llog = os.path.join(e.dir, "green.log"), os.path.join(e.dir, "launch.log")
            e.env.update({"FAKECUDA_GREEN_LOG": glog, "FAKECUDA_LAUNCH_STREAM_LOG": llog})
            e.start()
            extra = {"CUDA_MPS_ENABLE_PER_CTX_DEVICE_MULTIPROCESSOR_PARTITIONING": var} if var \
                else {}
            p = remote(e, "partition", extra=extra)
            out, err = p.communicate(timeout=60)
            check(p.returncode == 0 and "partition ok" in out, "partition: %r %r" % (out, err))
            got = launch_green_sms(glog, llog)
            want = [16, None] if var else [None, None]
            check(got == want, "launches' SMs %r, want %r" % (got, want))
            if var:
                check(re.search(r"client %d: a context of 16 SMs \(execution affinity\)" % p.pid,
                                e.log("server.log")), "the partition logged with the pid")
            ok = True
        finally:
            e.close(ok)


def test_daemon_takes_its_defaults_from_its_environment():
    """CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and CUDA_MPS_CLIENT_PRIORITY in the daemon's own
    environment are its defaults (as set_default_* would set them): get_default_* answer them
    and a client without variables of its own runs at that share (32 of 132 SMs at 25) and
    priority; values that are neither are logged with their name and ignored."""
    for pct, prio, want in (("25", "1", ("25.0", "1", 32)), ("abc", "7", ("100.0", "0", 132))):
        e = Env(start=False)
        ok = False
        p = None
        try:
            e.env.update({"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": pct,
                          "CUDA_MPS_CLIENT_PRIORITY": prio})
            e.start()
            check(e.cmd("get_default_active_thread_percentage") == want[0], "share default")
            check(e.cmd("get_default_client_priority") == want[1], "priority default")
            env = dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR))
            for k in ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_CLIENT_PRIORITY"):
                env.pop(k)  # the client's own: none
            p = subprocess.Popen([REMOTE_DRIVER, "share"], env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            out, err = p.communicate(input="end\n", timeout=60)
            check(p.returncode == 0 and "share ok" in out, "client: %r %r" % (out, err))
            check(out.split()[3] == str(want[2]), "the client's SMs: %r" % out)
            if pct == "25":
                # logged after the client's welcome, by the server's main thread: the client
                # may have run and ended first
                wait_for(lambda: "client %d: priority 1" % p.pid in e.log("server.log"),
                         what="the priority applied to the client (server.log)")
            else:
                log = e.log("control.log")
                check("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=abc is not a percentage" in log and
                      "CUDA_MPS_CLIENT_PRIORITY=7 is neither 0 nor 1" in log, "bad values named")
            ok = True
        finally:
            if p and p.poll() is None:
                p.kill()
            e.close(ok)


def test_client_priority_orders_streams_and_reserves_sms():
    """CUDA_MPS_CLIENT_PRIORITY (server/priority.c) on the double (stream priorities 0 to -5): a
    normal client's streams are made one level above what it asked (0 -> -1, -2 -> -3, -5
    stays; 3 is clamped to 0 first), a below-normal client's all at the least (0); each is
    answered the priority it asked for, the NULL stream 0. While a normal client is connected,
    a below-normal client's kernels run in a lane of the SMs minus the reserve (12.5 %: 112 of
    132) and it is still shown 132 SMs; alone before, and after the normal client left, every
    SM."""
    e = Env(start=False)
    ok = False
    procs = []
    try:
        slog, glog = os.path.join(e.dir, "streams.log"), os.path.join(e.dir, "green.log")
        llog = os.path.join(e.dir, "launch.log")
        e.env.update({"FAKECUDA_STREAM_LOG": slog, "FAKECUDA_GREEN_LOG": glog,
                      "FAKECUDA_LAUNCH_STREAM_LOG": llog})
        e.start()
        for prio, real in (("0", {0: -1, -2: -3, -5: -5, 3: -1}), ("1", {0: 0, -2: 0, -5: 0, 3: 0})):
            p = remote(e, "priority", extra={"CUDA_MPS_CLIENT_PRIORITY": prio})
            out, err = p.communicate(timeout=60)
            check(p.returncode == 0 and "priority ok" in out, "priority %s: %r %r" % (prio, out, err))
            check("range 0 -5" in out, "the driver's range shown: %r" % out)
            made = {}
            for l in open(slog).read().splitlines():
                f = l.split()
                made[f[1]] = int(f[3])
            for l in out.splitlines():
                f = l.split()
                if f[0] == "stream":
                    asked, answered = int(f[3]), int(f[5])
                    check(answered == min(asked, 0), "priority %s: asked %d answered %d"
                          % (prio, asked, answered))
                    check(made.get(f[1]) == real[asked], "priority %s: asked %d made %r, want %d"
                          % (prio, asked, made.get(f[1]), real[asked]))
            check("null answered 0" in out, "the NULL stream: 0: %r" % out)

        def start(extra):
            env = dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR), **extra)
            p = subprocess.Popen([REMOTE_DRIVER, "share"], env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            procs.append(p)
            return p

        def round_(p, again=True):
            if again:
                p.stdin.write("again\n")
                p.stdin.flush()
            line = p.stdout.readline().split()
            check(len(line) == 9 and line[-1] == "ok", "a round: %r" % line)
            return int(line[3])

        def green_sms():
            return launch_green_sms(glog, llog)

        low = start({"CUDA_MPS_CLIENT_PRIORITY": "1"})
        check(round_(low, again=False) == 132, "below normal, alone: 132 SMs shown")
        check(set(green_sms()) == {None}, "alone, its kernels on every SM: %r" % green_sms())
        normal = start({})
        check(round_(normal, again=False) == 132, "the normal client launched")
        open(llog, "w").close()
        check(round_(low) == 132, "below normal beside it: still shown 132 SMs")
        check(set(green_sms()) == {112}, "its kernels in the lane of 112 SMs: %r" % green_sms())
        open(llog, "w").close()
        round_(normal)
        check(set(green_sms()) == {None}, "the normal client's kernels on every SM")
        check(re.search(r"client %d: below normal priority: kernels on 112 of 132 SMs" % low.pid,
                        e.log("server.log")), "the reserve logged once with the client's pid")
        normal.stdin.write("end\n")
        normal.stdin.flush()
        out, err = normal.communicate(timeout=60)
        check(normal.returncode == 0 and "share ok" in out, "the normal one ends: %r" % err)
        wait_for(lambda: "Client %d disconnected" % normal.pid in e.log("server.log"),
                 what="the normal client's end")
        open(llog, "w").close()
        round_(low)
        check(set(green_sms()) == {None}, "alone again: every SM: %r" % green_sms())
        low.stdin.write("end\n")
        low.stdin.flush()
        out, err = low.communicate(timeout=60)
        check(low.returncode == 0 and "share ok" in out, "ends: %r %r" % (out, err))
        ok = True
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        e.close(ok)


def test_remote_green_handles_are_each_clients_own(daemon):
    """Another client's descriptor, green context, stream of a green context, event and device
    resource are refused (green_hold / green_steal)."""
    e = daemon()
    holder = subprocess.Popen([REMOTE_DRIVER, "green_hold"],
                              env=dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR)),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    line = holder.stdout.readline().split()
    check(len(line) == 5, "holder printed its handles and resource: %r" % line)
    p = remote(e, "green_steal", *line)
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "steal refused" in out, "steal: %r %r" % (out, err))
    out, err = holder.communicate(input="end\n", timeout=30)
    check(holder.returncode == 0 and "held ok" in out, "the holder's calls worked: %r" % err)
