# SPDX-License-Identifier: MIT
"""Remote mode on tests/cpu/remote_driver.c: data, copies, printf, threads, forks, pools, the
ring and what the server does under many clients.
"""
import os
import re
import signal
import subprocess
import time

from harness import (BIN, Env, REMOTE_DRIVER, SANITIZER, check, driver_program, fair_clients,
                     remote, remote_case, wait_for)


def test_kernel_printf_reaches_its_client(daemon):
    """What the driver prints for a kernel's printf in the server (vfprintf on stdout, in the
    worker of the call that flushed it) reaches that client's stdout, between the program's own
    lines as natively, and nowhere else: not another client's output (one connected the whole
    time, whose synchronous memset may flush the line), not the server's."""
    e = daemon()
    quiet = remote(e, "hold")  # another client, connected the whole time
    p = remote(e, "printf", "41", "marked")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0, "printf client: %r %r" % (out, err))
    check(out == "host before\nkernel printf 41\nhost after\n",
          "the kernel's line between the host's: %r" % out)
    check(not SANITIZER.search(err), "sanitizer: " + err)
    quiet.stdin = None
    quiet.terminate()
    qout, _ = quiet.communicate(timeout=60)
    check("kernel printf" not in qout, "the other client got it: %r" % qout)
    check("kernel printf" not in e.log("server.log"), "the server logged it")


def test_kernel_printf_at_a_stream_synchronize(daemon):
    """The driver prints kernel output at a synchronize, not at a query, and the server's wait for
    a short kernel ends in a query: a client owning printing kernels has them flushed after its
    wait, so its line comes before the host's next one at a stream synchronize and at an event
    synchronize as natively (it came at the next device synchronize, after "host after"). The
    server's threads may spin (a wait then ends in a query), whatever the cores."""
    e = daemon({"OPENMPS_SPIN_THREADS": "all"})
    for how in ([], ["event"]):
        p = remote(e, "printf_stream", "50", *how)
        out, err = p.communicate(timeout=60)
        check(p.returncode == 0, "printf client: %r %r" % (out, err))
        want = "".join("host before %d\nkernel printf %d\nhost after %d\n" % (i, 50 + i, i)
                       for i in range(3))
        check(out == want, "%s: each line between the host's: %r" % (how or "stream", out))


def test_kernel_printf_of_an_image_not_looked_into(daemon):
    """A printing kernel whose image does not name vprintf where openmps can see it (standing for
    a compressed entry it cannot read): its line still reaches its client, the only one, from
    whichever thread flushed it (the answer waits for a flush under way)."""
    e = daemon()
    for n in range(3):
        p = remote(e, "printf", str(n))
        out, err = p.communicate(timeout=60)
        check(p.returncode == 0, "printf client: %r %r" % (out, err))
        check(out == "host before\nkernel printf %d\nhost after\n" % n,
              "the kernel's line between the host's: %r" % out)
    check("kernel printf" not in e.log("server.log"), "the server logged it")


def test_kernel_printf_of_a_compressed_image_keeps_its_turn(daemon):
    """nvcc compresses fatbin entries (PyTorch's wheels: every one), so "vprintf" is not in the
    image's bytes: the server decompresses the entries the GPU may run (here an LZ4 block) and
    finds it, so the kernel takes the print turn, and another client's synchronizing calls while
    its line waits in the driver's buffer do not take it (before, the line went to whichever
    client's call flushed it)."""
    e = daemon()
    p = driver_program(e, REMOTE_DRIVER, ["printf_packed", "7"], stdin=subprocess.PIPE)
    line = p.stdout.readline()
    if line != "launched\n":
        p.kill()
        check(False, "launched: %r %r" % (line, p.communicate()[1][-2000:]))
    f = remote(e, "flusher")
    fout, ferr = f.communicate(timeout=60)
    check(f.returncode == 0 and fout == "flushed\n", "the other client's output: %r %r" %
          (fout, ferr))
    p.stdin.write("go\n")
    p.stdin.flush()
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0, "printf client: %r" % err)
    check(out == "kernel printf 7\nhost after\n", "its line before its own: %r" % out)
    check(not SANITIZER.search(err), "sanitizer: " + err)
    check("its kernels may print" in e.log("server.log"), e.log("server.log"))


def test_remote_data_round_trips(daemon):
    """Every copy and set kind, a module, launches with their argument bytes, streams, events
    and errors, through the server and the driver test double; the server never gives the
    driver pageable host memory to copy."""
    e = daemon(start=False)
    log = os.path.join(e.dir, "launches")
    e.env["FAKECUDA_LAUNCH_LOG"] = log  # the server launches: it inherits the daemon's env
    pageable = os.path.join(e.dir, "pageable")
    e.env["FAKECUDA_PAGEABLE_LOG"] = pageable
    e.start()
    p = remote(e, "roundtrip")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "roundtrip ok" in out, "roundtrip: %r %r" % (out, err))
    check(not SANITIZER.search(err), "sanitizer: " + err)
    lines = open(log).read().splitlines()
    check("attr 2 1" in lines, "the cooperative attribute reached the driver: %r" % lines)
    launches = [l for l in lines if l not in ("record", "wait") and not l.startswith("attr")]
    check(len(launches) == 8, "eight launches reached the driver: %r" % launches)
    name, grid, block, args = launches[0].split()
    check((name, grid, block) == ("fill_u32", "2,1,1", "128,1,1"), launches[0])
    check(args[16:] == "0403020100010000", "value and count bytes: " + args)
    check(launches[1] == "mix 1,2,3 4,5,6 7f000000000000008877665544332211efbe",
          "a char, a u64 at offset 8, a u16 at 16: " + launches[1])
    check(launches[5].startswith("fill_u32 1,1,1 1,1,1 ") and
          launches[5].endswith("feca000000020000"), "the managed fill: " + launches[5])
    slog = e.log("server.log")
    check("loaded a new module image of 43 bytes" in slog, "the module was loaded")
    # the server hands the driver pinned memory only (replybuf.c): every size and kind above
    seen = open(pageable).read() if os.path.exists(pageable) else ""
    check(not seen, "the server copied to or from pageable memory:\n" + seen[:2000])


def test_remote_copies_without_pinned_memory(daemon):
    """No pinned memory to be had: the server says so once, and every copy still arrives (through
    the driver's pageable path)."""
    e = daemon(start=False)
    pageable = os.path.join(e.dir, "pageable")
    e.env.update({"FAKECUDA_FAIL_HOST_ALLOC": "1", "FAKECUDA_PAGEABLE_LOG": pageable})
    e.start()
    for _ in range(2):
        p = remote(e, "roundtrip")
        out, err = p.communicate(timeout=60)
        check(p.returncode == 0 and "roundtrip ok" in out, "roundtrip: %r %r" % (out, err))
        check(not SANITIZER.search(err), "sanitizer: " + err)
    slog = e.log("server.log")
    check(slog.count("cannot pin a reply buffer") == 1, "said once: " + slog[-2000:])
    check(os.path.exists(pageable), "the copies took the pageable path")


def test_server_grows_driver_pools_unless_told_not_to():
    """At its start, before any client, the server grows the driver's stream and event pools
    (warm.c): 1 024 event records reach the driver first and the log says so;
    OPENMPS_SERVER_WARM=off leaves that out, and says so."""
    for warm in (None, "off"):
        e = Env(start=False)
        ok = False
        try:
            tlog = os.path.join(e.dir, "times")
            e.env["FAKECUDA_TIME_LOG"] = tlog
            if warm:
                e.env["OPENMPS_SERVER_WARM"] = warm
            e.start()
            p = remote(e, "hold")
            wait_for(lambda: "driver pools" in e.log("server.log"), what="the server's start")
            p.kill()
            p.communicate(timeout=30)
            slog = e.log("server.log")
            records = open(tlog).read().split().count("record") if os.path.exists(tlog) else 0
            if warm:
                check("not grown ahead (OPENMPS_SERVER_WARM=off)" in slog, slog[-1500:])
                check(records == 0, "no event recorded at the start: %d" % records)
            else:
                check("grew them with 128 streams and 1024 events" in slog, slog[-1500:])
                check(records == 1024, "1024 events recorded at the start: %d" % records)
            ok = True
        finally:
            e.close(ok)


def test_remote_legacy_default_stream(daemon):
    """Inside one client, the legacy default stream and its blocking streams wait for each
    other (events between its own server streams); non-blocking streams cost nothing."""
    e = daemon(start=False)
    log = os.path.join(e.dir, "launches")
    e.env["FAKECUDA_LAUNCH_LOG"] = log
    e.start()
    for flags, want_waits in (("0", True), ("1", False)):
        open(log, "w").close()
        p = remote(e, "legacy", flags)
        out, err = p.communicate(timeout=30)
        check(p.returncode == 0, "legacy %s: %r" % (flags, err))
        lines = open(log).read().split()
        waits = lines.count("wait")
        if want_waits:
            # the launch on the blocking stream waits for the default stream's memset,
            # the second memset waits for the launch
            k = lines.index("fill_u32")
            check(lines[k - 2:k] == ["record", "wait"] and "wait" in lines[k + 1:],
                  "blocking stream ordered with the default stream: %r" % lines)
        else:
            check(waits == 0, "non-blocking stream: no waits: %r" % lines)


def test_remote_spin_threads_limit_keeps_serving():
    """OPENMPS_SPIN_THREADS=0: no server thread spins (each waits in the kernel at once), =all:
    every one may, unset: while busy clients leave a CPU free, =load: that and while no thread of
    the machine waits for a CPU; three clients at once are served as before in each; a value that is none of
    these is refused with a warning that names it, and the server keeps the default."""
    for value, logged in (("0", "spinning: at most 0 server thread(s) at once"),
                          ("all", "spinning: every thread may spin"),
                          ("", "spinning: while busy clients and spinning threads leave one"),
                          ("load", "and no thread of the machine waits for a CPU (OPENMPS_SPIN_THREADS=load)"),
                          ("lots", "OPENMPS_SPIN_THREADS=lots is not auto, load, all or a count")):
        e = Env(start=False)
        ok = False
        try:
            e.env["OPENMPS_SPIN_THREADS"] = value
            e.start()
            procs = [remote(e, "chain", "2") for _ in range(3)]
            for p in procs:
                out, err = p.communicate(timeout=120)
                check(p.returncode == 0 and "chain ok" in out,
                      "OPENMPS_SPIN_THREADS=%s: %r %r" % (value, out, err))
            wait_for(lambda: logged in e.log("server.log"), what="the server's line: " + logged)
            ok = True
        finally:
            e.close(ok)


def test_client_reply_spin_setting_keeps_calls_answered(daemon):
    """OPENMPS_CLIENT_SPIN_US (how long a call spins for its answer before it sleeps): 0 (sleep
    at once), a long spin and the default each leave every call answered as before; a value
    that is not a count of microseconds is named on the program's stderr and the default
    kept."""
    e = daemon()
    for value in ("0", "200000", "", "soon"):
        p = remote(e, "roundtrip", extra={"OPENMPS_CLIENT_SPIN_US": value})
        out, err = p.communicate(timeout=120)
        check(p.returncode == 0 and "roundtrip ok" in out,
              "OPENMPS_CLIENT_SPIN_US=%s: %r %r" % (value, out, err))
        named = "OPENMPS_CLIENT_SPIN_US=soon is not a count" in err
        check(named == (value == "soon"), "the warning, for %r: %r" % (value, err))


def test_remote_profile_logs_server_time_per_entry_point():
    """OPENMPS_PROFILE=1: as a client leaves, the server logs its driver calls, records and
    waits, and the entry points that took most of its time, each with its count, mean and
    longest time; a call longer than OPENMPS_PROFILE_SLOW_US gets a line of its own with the
    wall-clock instant it started; unset, no profile line."""
    for value in ("1", None):
        e = Env(start=False)
        ok = False
        try:
            if value:
                e.env["OPENMPS_PROFILE"] = value
                e.env["OPENMPS_PROFILE_SLOW_US"] = "1"  # every call is slow
            t0 = time.time_ns()
            e.start()
            p = remote(e, "chain", "2")
            out, err = p.communicate(timeout=120)
            check(p.returncode == 0 and "chain ok" in out, "chain: %r %r" % (out, err))
            wait_for(lambda: "disconnected" in e.log("server.log"), what="the client's end")
            line = [l for l in e.log("server.log").splitlines() if "profile:" in l]
            if value:
                check(len(line) == 1 and re.search(
                    r"client %d: profile: \d+ driver call\(s\) in [\d.]+ ms of server time, "
                    r"\d+ record\(s\), \d+ wait\(s\) for one; most time: .*cuLaunchKernel "
                    r"4 x [\d.]+ us \(max \d+\)" % p.pid, line[0]), "profile line: %r" % line)
                # the double's calls take from under a microsecond to tens: some are logged
                slow = re.findall(r"client %d: slow call cu\w+ took \d+ us from (\d+)"
                                  % p.pid, e.log("server.log"))
                check(slow and all(t0 <= int(t) <= time.time_ns() for t in slow),
                      "slow calls, each started within the test: %r" % slow)
            else:
                check(not line, "no profile unless asked: %r" % line)
            ok = True
        finally:
            e.close(ok)


def test_remote_allocation_cache_is_the_clients_own(daemon):
    """A client's freed allocation comes back for its next one of the same size (never a managed
    one); the server frees what it kept when the client goes (the next client starts with as
    much free memory)."""
    e = daemon()
    frees = []
    for _ in range(2):
        p = remote(e, "cache")
        out, err = p.communicate(timeout=30)
        check(p.returncode == 0 and "cache ok" in out, "cache: %r %r" % (out, err))
        frees.append(int(re.search(r"free_at_start (\d+)", out).group(1)))
        wait_for(lambda: "Client %d disconnected" % p.pid in e.log("server.log"),
                 what="the client's session to end")
    check(frees[0] == frees[1], "nothing left behind: %r" % frees)


def test_server_timeline_at_debug_level():
    """OPENMPS_LOG_LEVEL=3: the server logs each call of each client with its start and length
    (the timeline for questions the benchmarks do not answer); at the default level it does not."""
    for level, want in (("3", True), (None, False)):
        e = Env(extra_env={"OPENMPS_LOG_LEVEL": level} if level else None)
        ok = False
        try:
            p = remote(e, "chain", "1")
            out, err = p.communicate(timeout=60)
            check(p.returncode == 0, "chain: %r" % err)
            lines = [l for l in e.log("server.log").splitlines() if "timeline client %d" % p.pid in l]
            check(bool(lines) == want, "timeline lines at level %s: %d" % (level, len(lines)))
            if want:
                check(any(re.search(r"cuLaunchKernel start_us \d+ took_us \d+ rc 0", l)
                          for l in lines), "a launch in the timeline: %r" % lines[:5])
            ok = True
        finally:
            e.close(ok)


def test_burst_of_clients_fills_the_server_channel():
    """Clients arriving while the server does not read its channel from the daemon (128 at once
    filled its buffer on the H200's soak; here the server is stopped and the buffer is 4 KiB,
    OPENMPS_CHAN_SNDBUF) wait for room and are all served once it reads again: none is refused
    (before: "cannot hand client N to server: Resource temporarily unavailable", cuInit 805)."""
    e = Env(extra_env={"OPENMPS_CHAN_SNDBUF": "4096"})
    ok = False
    spid = None
    try:
        first = remote(e, "image", "k0")  # the server up before the burst
        out, err = first.communicate(timeout=120)
        check(first.returncode == 0, "first client: %r" % err[-1000:])
        spid = e.servers()[0]
        os.kill(spid, signal.SIGSTOP)
        ps = [remote(e, "image", "k%d" % (i % 4)) for i in range(24)]
        deadline = time.time() + 60  # the hand-offs fill the channel while the server sleeps
        while time.time() < deadline and not re.search("wait for room|cannot hand client",
                                                         e.log("control.log")):
            time.sleep(0.2)
        time.sleep(1)
        os.kill(spid, signal.SIGCONT)
        spid = None
        failed = []
        for p in ps:
            out, err = p.communicate(timeout=300)
            if p.returncode != 0 or "image ok" not in out:
                failed.append((p.returncode, err[-300:]))
        check(not failed, "%d of 24 clients failed: %r" % (len(failed), failed[:3]))
        log = e.log("control.log")
        check("cannot hand client" not in log, "a hand-off failed: " + log[-2000:])
        ok = True
    finally:
        if spid:
            os.kill(spid, signal.SIGCONT)
        e.close(ok)


def test_remote_threads_of_one_client():
    """Eight threads of one client copying at once: each one's bytes arrive intact."""
    remote_case("threads", 120)


def test_remote_printf_of_two_clients_stays_theirs(daemon):
    """Two clients printing from their kernels at the same time, each synchronizing after every
    launch: each gets exactly its own 2 000 lines, in order, and none of the other's."""
    e = daemon()
    n = 2000
    ps = [remote(e, "printmany", str(n), str(base)) for base in (100000, 200000)]
    outs = []
    for p in ps:
        out, err = p.communicate(timeout=300)
        check(p.returncode == 0 and "printmany ok" in out, "client: %r" % err[-2000:])
        check(not SANITIZER.search(err), "sanitizer: " + err)
        outs.append(out)
    for base, out in zip((100000, 200000), outs):
        got = [l for l in out.splitlines() if l.startswith("kernel printf")]
        want = ["kernel printf %d" % (base + i) for i in range(n)]
        wanted = set(want)
        others = [l for l in got if l not in wanted]
        check(not others, "%d lines of the other client's among %d: %r" %
              (len(others), len(got), others[:5]))
        check(got == want, "%d of %d lines, in order: %s" % (len(got), n,
              "yes" if got == sorted(got) else "no"))


def test_remote_launch_with_a_short_argument_buffer(daemon):
    """NCCL's launches (issue #24): a kernel whose last parameter is 4 KiB, given by the bytes in
    use through CU_LAUNCH_PARAM_BUFFER_SIZE, by cuLaunchKernel and cuLaunchKernelEx: both run
    (the rest of the parameters zero) and the synchronisation after them succeeds, where the
    server refused the launch and the next synchronisation answered INVALID_VALUE."""
    p = remote(daemon(), "shortargs")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "shortargs ok" in out, "shortargs: %r %r" % (out, err))


def test_remote_fork_of_a_client():
    """A forked child cannot use its parent's session (the call fails with
    CUDA_ERROR_NOT_INITIALIZED, as natively); the parent goes on undisturbed."""
    remote_case("fork", 60)


def test_remote_ring_benchmark(daemon):
    """The ring's cost through the shim against the driver test double: posted launches
    (enqueue) and round trips. The figures are recorded (stdout and ring-benchmark.txt in the
    build directory), never judged: CI machines vary too much for a timing to fail a test."""
    e = daemon()
    p = remote(e, "bench", "200000")
    out, err = p.communicate(timeout=240)
    check(p.returncode == 0 and "bench ok" in out, "bench: %r %r" % (out, err))
    enq = re.search(r"enqueue_us ([0-9.]+) drained_us ([0-9.]+)", out)
    rt = re.search(r"round_trip_us ([0-9.]+)", out)
    b2 = re.search(r"launch_sync_us ([0-9.]+) copy4_us ([0-9.]+)", out)
    check(enq and rt and b2, "bench printed its figures: %r" % out)
    line = "%s ring benchmark (driver test double, %d CPUs): launch enqueue %s us, " \
           "enqueue+drain %s us, round trip %s us, B2's launch + synchronize %s us, " \
           "4-byte copy %s us" % (
               time.strftime("%Y-%m-%d %H:%M:%S"), os.cpu_count() or 0,
               enq.group(1), enq.group(2), rt.group(1), b2.group(1), b2.group(2))
    print(line)
    with open(os.path.join(BIN, "ring-benchmark.txt"), "a") as f:
        f.write(line + "\n")


def test_remote_ownership_between_clients(daemon):
    """A client cannot read, write or free another client's memory."""
    e = daemon()
    holder = remote(e, "hold")
    addr = holder.stdout.readline().strip()
    check(addr.isdigit(), "holder printed its address: %r" % addr)
    p = remote(e, "steal", addr)
    out, err = p.communicate(timeout=30)
    check(p.returncode == 0 and "steal refused" in out, "steal: %r %r" % (out, err))
    holder.kill()
    holder.wait()


def test_remote_client_killed_mid_copy(daemon):
    """A client killed while copying: the server frees what it held and serves the others."""
    e = daemon()
    victims = [remote(e, "copyloop") for _ in range(3)]
    for v in victims:
        line = v.stdout.readline().strip()
        if line != "copying":
            v.kill()
            check(False, "copy loop started: %r %r" % (line, v.communicate()[1][-3000:]))
    time.sleep(0.3)
    for v in victims:
        v.kill()
        v.wait()
    wait_for(lambda: e.log("server.log").count("freed 1 allocation(s)") == 3,
             what="the killed clients' memory to be freed")
    p = remote(e, "roundtrip")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0, "another client is served: %r" % err)


def test_streams_keep_the_drivers_order_where_kernels_write_late(daemon):
    """The order between a client's streams that the driver guarantees holds through the server
    where a kernel's writes land late (FAKECUDA_KERNEL_LATER: the double writes a fill_u32
    kernel's memory only when its stream is next waited for, asked about or given work, or
    everything is synchronized): an event recorded after the kernel and waited for by the reading
    stream; a blocking stream's kernel read by the legacy stream's synchronous copy and the other
    way round; the per-thread stream and the legacy stream; a context synchronize; one stream.
    The two reads that nothing orders (a race natively) read the old value under late writes —
    which shows the writes were late — and the new one without them. (make test-loaded runs the
    whole IPC tier with late writes and late DMA.)"""
    ordered = ["event 2", "blocking-then-legacy 3", "legacy-then-blocking 4",
               "per-thread-then-legacy 5", "legacy-then-per-thread 6", "ctx-synchronize 8",
               "same-stream 9"]
    for later in (True, False):  # "0": off, whatever make test-loaded sets
        e = daemon({"FAKECUDA_KERNEL_LATER": "1" if later else "0"})
        p = remote(e, "order")
        out, err = p.communicate(timeout=120)
        lines = out.splitlines()
        check(p.returncode == 0 and "order ok" in lines, "late=%s: %r %r" % (later, out, err))
        check(all(l in lines for l in ordered), "late=%s: %r" % (later, lines))
        # late: what the buffer held before (the memset's 0; step 6's value)
        want = ({"unordered-streams": "0", "unordered-legacy": "6"} if later else
                {"unordered-streams": "1", "unordered-legacy": "7"})
        got = dict(l.split() for l in lines if l.startswith("unordered-"))
        check(got == want, "late=%s: the unordered reads %r, want %r" % (later, got, want))


def test_small_copy_answered_before_its_dma(daemon):
    """A small synchronous host-to-device copy is answered once its DMA is enqueued (api/copies.c)
    and the worker waits for the DMA before the client's next call: with the driver double's DMA
    reading its source late (FAKECUDA_DMA_LATER), every value arrives whole though the next call's
    answer reuses the buffer the DMA reads; and the copy still waits for the stream's earlier
    kernel (FAKECUDA_KERNEL_MS), as the driver's synchronous copy does; a copy into pinned host
    memory holds its bytes when answered (the roundtrip program reads them so).
    OPENMPS_COPY_ANSWER=late (the answer after the DMA) passes the same."""
    for answer in ("early", "late"):
        e = daemon({"FAKECUDA_DMA_LATER": "1", "FAKECUDA_KERNEL_MS": "300",
                    "OPENMPS_COPY_ANSWER": answer})
        p = remote(e, "smallcopy")
        out, err = p.communicate(timeout=120)
        check(p.returncode == 0 and "smallcopy bad 0" in out, "%s: %r %r" % (answer, out, err))
        waited = [l.split() for l in out.splitlines() if l.startswith("waited ")]
        check(waited and int(waited[0][1]) >= 250 and waited[0][3] == "7",
              "%s: the copy behind a 300 ms kernel: %r" % (answer, out))
        check(not SANITIZER.search(err), "sanitizer: " + err)
        check(("answered after their DMA" in e.log("server.log")) == (answer == "late"),
              "%s: the server's setting" % answer)
        # the whole round trip of copies (pinned and registered host memory as device memory
        # too: those are answered after their DMA, the program reads them with no further call)
        p = remote(e, "roundtrip")
        out, err = p.communicate(timeout=120)
        check(p.returncode == 0 and "roundtrip ok" in out, "%s: %r %r" % (answer, out, err))
        # the answer comes before the DMA ends (early) or after it (late): a DMA of 1.5 s
        e = daemon({"FAKECUDA_DMA_MS": "1500", "OPENMPS_COPY_ANSWER": answer})
        p = remote(e, "onecopy")
        out, err = p.communicate(timeout=120)
        took = re.search(r"copy_ms (\d+) value_ok 1", out)
        check(p.returncode == 0 and took, "%s: %r %r" % (answer, out, err))
        check(int(took.group(1)) < 1000 if answer == "early" else int(took.group(1)) >= 1400,
              "%s: the copy's call took %s ms beside a DMA of 1 500" % (answer, took.group(1)))


def test_small_copies_in_a_row_do_not_wait_for_each_other(daemon):
    """Small copies in a row on one stream are answered without waiting for each other's DMA
    (api/copies.c: each takes one of 8 pinned slots; the stream's own earlier work is waited for
    once): with each DMA keeping the stream busy 150 ms (FAKECUDA_DMA_MS), the first 8 copies of
    20 answer at once and the 9th and 17th wait for the slots (8 DMAs each); every value
    arrives, also with the DMAs reading their source late (FAKECUDA_DMA_LATER). Answered late,
    every copy after the first waits for the one before."""
    for answer in ("early", "late"):
        e = daemon({"FAKECUDA_DMA_MS": "150", "OPENMPS_COPY_ANSWER": answer})
        p = remote(e, "copyburst")
        out, err = p.communicate(timeout=120)
        check(p.returncode == 0 and "burst ok" in out, "%s: %r %r" % (answer, out, err))
        # when each copy returned, ms after the first began
        at = [int(x) for x in re.search(r"burst_ms ([\d ]+)", out).group(1).split()]
        if answer == "early":
            # the first 8 at once (a generous bound for a busy machine); the 9th and the 17th
            # wait for 8 DMAs of 150 ms each (lower bounds a slow machine cannot break)
            check(at[7] < 600, "early: the first 8 copies returned at %r ms" % at[:8])
            check(at[8] >= 1150 and at[16] - at[8] >= 1150,
                  "early: the 9th and 17th copies should wait for the slots: %r" % at)
        else:
            check(all(b - a >= 140 for a, b in zip(at, at[1:])),
                  "late: every copy waits for its DMA: %r" % at)
    e = daemon({"FAKECUDA_DMA_LATER": "1"})
    p = remote(e, "copyburst")
    out, err = p.communicate(timeout=120)
    check(p.returncode == 0 and "burst ok" in out, "late DMAs: %r %r" % (out, err))
    check(not SANITIZER.search(err), "sanitizer: " + err)


def test_synchronize_answered_by_the_completion_word(daemon):
    """OPENMPS_SYNC_WORD=on (server/syncword.c): a cuCtxSynchronize behind a 40 ms kernel on one
    stream, and a cuStreamSynchronize behind one, are answered at once with a number, and the
    client spins on the word the GPU writes behind the kernel (the driver double writes it when
    the kernel ends): each call returns only after its kernel, and without a second call to the
    server (none of the fallback synchronizes the timeline would show; one is allowed, for a
    client descheduled past its 50 ms of spinning on a busy machine). With nothing to wait for,
    kernels on two streams, or an error kept (a kernel that failed: the synchronize answers its
    701), the server waits itself; a stream found idle and then given a long kernel is seen
    busy again ("again": the server queries only the streams calls named since they were idle,
    route.c). The same with the context's scheduling set to yield; set to
    blocking sync (the program asked its synchronizes to sleep), and off, the same answers and
    no deferral."""
    # A client spins for its word while the busy clients fit in the server's CPUs (one here,
    # on CI's 2 cores), whether server threads may spin or not (0: none may; the word took one
    # of their places until 2026-11-29, and in B8 found none). One CPU: every thread may spin.
    spin = "0" if len(os.sched_getaffinity(0)) >= 2 else "all"
    for setting, sched in ((None, None), ("on", "yield"), (None, "blocking"), ("off", None)):
        on = setting != "off" and sched != "blocking"
        what = "%s, %s" % (setting or "default", sched or "automatic scheduling")
        env = {"FAKECUDA_KERNEL_MS": "40", "OPENMPS_SPIN_THREADS": spin, "OPENMPS_LOG_LEVEL": "3"}
        if setting:
            env["OPENMPS_SYNC_WORD"] = setting  # on: the default
        e = daemon(env)
        p = remote(e, "syncword", extra={"SYNC_SCHED": sched} if sched else None)
        out, err = p.communicate(timeout=120)
        check(p.returncode == 0, "%s: %r %r" % (what, out, err))
        got = {m.group(1): (int(m.group(2)), int(m.group(3)))
               for m in re.finditer(r"(\w+)_ms (\d+) rc (-?\d+)", out)}
        for name in ("one", "stream", "two", "again"):  # from before the launch: the kernel
            check(got.get(name, (0, 1))[1] == 0 and got[name][0] >= 38,
                  "%s: %s: %r" % (what, name, got))
        check(got.get("idle", (0, 1))[1] == 0, "%s: nothing to wait for: %r" % (what, got))
        check(got.get("failed", (0, 0))[1] == 701, "%s: the kept error: %r" % (what, got))
        check(not SANITIZER.search(err), "sanitizer: " + err)
        # the count is logged as the session ends, after the client has exited
        log = wait_for(lambda: "Client %d disconnected" % p.pid in e.log("server.log") and
                       e.log("server.log"), what="the session's end")
        deferred = [int(n) for n in
                    re.findall(r"(\d+) synchronize\(s\) deferred to the completion word", log)]
        fallbacks = len(re.findall(r"timeline client %d cu(Ctx|Stream)Synchronize " % p.pid, log))
        if on:
            check(deferred and 1 <= deferred[0] <= 2 and fallbacks < deferred[0],
                  "%s: %r deferred, %d answered by the server after all" % (what, deferred, fallbacks))
        else:
            check(not deferred, "%s: %r deferred" % (what, deferred))  # (its syncs are the timeline's)


def test_completion_word_waited_for_in_naps(daemon):
    """OPENMPS_WORD_NAP_US (a client's setting): past 100 µs of waiting for its word, the client
    sleeps between looks instead of spinning. The synchronizes still return only after their
    kernels (40 ms each), are still deferred to the word, and the waiting thread's CPU time in
    each deferred wait ("one", "stream") stays under a quarter of it (measured: about 40 ms of
    CPU per wait spinning, about 3 ms napping; a loaded machine or a sanitizer's build only
    lowers the share); a bad value is named and the client spins."""
    spin = "0" if len(os.sched_getaffinity(0)) >= 2 else "all"
    e = daemon({"FAKECUDA_KERNEL_MS": "40", "OPENMPS_SPIN_THREADS": spin})
    for nap in ("200", "lots"):
        p = remote(e, "syncword", extra={"OPENMPS_WORD_NAP_US": nap})
        out, err = p.communicate(timeout=120)
        check(p.returncode == 0, "nap %s: %r %r" % (nap, out, err))
        got = {m.group(1): (int(m.group(2)), int(m.group(3)), int(m.group(4)))
               for m in re.finditer(r"(\w+)_ms (\d+) rc (-?\d+) cpu_us (\d+)", out)}
        for name in ("one", "stream", "two", "again"):
            check(got.get(name, (0, 1))[1] == 0 and got[name][0] >= 38,
                  "nap %s: %s: %r" % (nap, name, got))
        if nap == "lots":
            check("OPENMPS_WORD_NAP_US=lots is not a count of microseconds" in err,
                  "the bad value named: %r" % err[-1000:])
            continue
        # this client's deferred synchronizes: both ("one", "stream"), or one on a machine so
        # busy that a 40 ms kernel ended before its synchronize came (then answered at once)
        m = wait_for(lambda: re.search(r"client %d: (\d+) synchronize\(s\) deferred to the "
                                       r"completion word" % p.pid, e.log("server.log")),
                     what="client %d's count of deferred synchronizes" % p.pid)
        deferred = int(m.group(1))
        napped = [n for n in ("one", "stream") if got[n][2] < got[n][0] * 1000 // 4]
        check(1 <= deferred <= 2 and len(napped) >= deferred,
              "nap %s: %d deferred, the waits under a quarter of their time in CPU: %r of %r"
              % (nap, deferred, napped, got))


def test_completion_word_under_the_scheduler(daemon):
    """While client streams share the hardware queues (OPENMPS_SCHED=always stands for more
    streams than queues), the word's write goes where the scheduler would let a dependent
    operation go, and is never held (server/sched.c, om_sched_may_follow): a client with a
    stream of its own, never held by the scheduler, still has its synchronizes deferred to the
    word (until 2026-11-29 none were, and B8's copies never used it); a client with only its
    default stream, whose 40 ms kernel was never measured, has its synchronize answered after
    the work, counted as behind a long kernel in a shared queue. Fair share alone (two such
    clients of 300 ms kernels, fewer streams than queues) does not stop the word: a held write
    would only bring back the wake-ups it removes."""
    spin = "0" if len(os.sched_getaffinity(0)) >= 2 else "all"
    e = daemon({"OPENMPS_SYNC_WORD": "on", "FAKECUDA_KERNEL_MS": "40", "OPENMPS_SCHED": "always",
                "OPENMPS_SPIN_THREADS": spin})
    said = {}
    for mode in ("syncword", "syncheld"):
        p = remote(e, mode)
        out, err = p.communicate(timeout=120)
        m = re.search(r"one_ms (\d+) rc (-?\d+)", out)
        check(p.returncode == 0 and m and int(m.group(2)) == 0 and int(m.group(1)) >= 38,
              "%s: %r %r" % (mode, out, err))
        check(not SANITIZER.search(err), "sanitizer: " + err)
        said[mode] = wait_for(lambda: re.search(
            r"client %d: (\d+) synchronize\(s\) deferred to the completion word; answered "
            r"after the work: (\d+) with nothing left to do.* (\d+) behind a long kernel in a "
            r"shared queue" % p.pid, e.log("server.log")),
            what="the session's count of %s" % mode)
    deferred, idle, sched = (int(x) for x in said["syncword"].groups())
    check(deferred >= 1 and sched == 0,
          "a client of its own streams: %d deferred, %d declined" % (deferred, sched))
    deferred, idle, sched = (int(x) for x in said["syncheld"].groups())
    # idle: its first synchronize, before the launch
    check(deferred == 0 and idle == 1 and sched == 1,
          "a holdable client: %d deferred, %d with nothing left, %d behind a long kernel" %
          (deferred, idle, sched))
    # fair share
    # (two busy clients fill CI's 2 cores: every thread may spin, so that the cores' rule does
    # not decline the word first)
    e = daemon({"OPENMPS_SYNC_WORD": "on", "FAKECUDA_KERNEL_MS": "300",
                "OPENMPS_FAIR_WINDOW_MS": "600000", "OPENMPS_SPIN_THREADS": "all"})
    procs = []
    try:
        for rc, out, err in fair_clients(e, 2, procs, timeout=120):
            check(rc == 0 and "fair ok" in out, "fair share: %r %r" % (out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    log = wait_for(lambda: all("Client %d disconnected" % p.pid in e.log("server.log")
                               for p in procs) and e.log("server.log"), what="the sessions' ends")
    check("clients of long kernels contend" in log, "fair share began: %r" % log[-2000:])
    for p in procs:
        m = re.search(r"client %d: (\d+) synchronize\(s\) deferred.*" % p.pid, log)
        check(m and int(m.group(1)) == 1, "fair share: client %d: %r" % (p.pid, m and m.group(0)))


def test_completion_word_of_a_server_that_ends(daemon):
    """A client whose synchronize was deferred to its completion word, when another client's
    fault ends the server (the GPU stops before the write), learns of it through the server
    (its synchronize after the 50 ms of spinning) instead of waiting for its 20 s kernel. The
    fault comes after those 50 ms: that the spin itself ends is the bound's, not timed here."""
    e = daemon({"OPENMPS_SYNC_WORD": "on", "FAKECUDA_KERNEL_MS": "20000",
                "OPENMPS_SPIN_THREADS": "all"})
    a = remote(e, "syncwait")
    check(a.stdout.readline().strip() == "waiting", "the waiting client started")
    time.sleep(0.3)
    b = remote(e, "faultnow")
    b.communicate(timeout=120)
    out, err = a.communicate(timeout=120)
    m = re.search(r"one_ms (\d+) rc (-?\d+)", out)
    check(m and int(m.group(2)) != 0 and int(m.group(1)) < 10000,
          "the synchronize of a client whose server ended: %r %r" % (out, err))


def test_completion_word_of_two_threads(daemon):
    """One word serves every thread of a client: while one thread waits on it for a 40 ms
    kernel, another thread's synchronize of a 1 ms kernel on another stream, 10 ms later, is
    answered by the server's own wait (its word would land first and end the first thread's wait
    early). Lower bounds only: a slow machine makes the first wait longer, never shorter."""
    # the scheduler off: it would hold the second kernel behind the first (a shared queue)
    e = daemon({"OPENMPS_SYNC_WORD": "on", "OPENMPS_SPIN_THREADS": "all", "OPENMPS_SCHED": "off"})
    p = remote(e, "syncthreads")
    out, err = p.communicate(timeout=120)
    got = dict((m.group(1), int(m.group(2))) for m in re.finditer(r"(\w+)_ms (\d+)", out))
    check(p.returncode == 0 and got.get("first", 0) >= 38 and "second" in got,
          "two threads' synchronizes: %r %r" % (out, err))
    check(not SANITIZER.search(err), "sanitizer: " + err)


def test_async_sets_and_the_sm_count_need_no_answer(daemon):
    """An asynchronous set of memory the client allocated is posted, as a launch is, and the SM
    count is kept by the shim while the server's limits_epoch stays: neither costs a round trip
    (PyTorch makes about 8 of them per ResNet-18 batch). The server's line for each client says
    how many calls it answered: N sets and N queries add no answer as N grows from 10 to 400
    (every set still lands, in order, remote_driver checks the words). A set past the
    allocation's end is refused at the call, and a set of pinned host memory is answered, as
    before. That the kept SM count follows a share changed while the client runs is checked by
    test_green's and test_v3's share tests."""
    e = daemon()
    answered = {}
    for n in (10, 400):
        p = remote(e, "roundtrips", str(n))
        out, err = p.communicate(timeout=120)
        check(p.returncode == 0 and "roundtrips ok sms 132" in out,
              "roundtrips %d: exit %d: %r %r" % (n, p.returncode, out, err[-2000:]))
        line = wait_for(lambda: re.search(r"Client %d disconnected \(.*; (\d+) call\(s\) served, "
                                          r"(\d+) answered" % p.pid, e.log("server.log")),
                        what="client %d's last line" % p.pid)
        answered[n] = int(line.group(2))
        check(int(line.group(1)) >= n, "every set reached the server: %s" % line.group(0))
    check(answered[400] - answered[10] < 10,
          "answered calls grew with the sets and queries: %r" % answered)


def test_managed_memory_at_an_address_taken_in_the_client(daemon):
    """Managed memory is shadowed in the client at the server's device address; where that
    address is taken in the client's process (the GPU tier met it once: cudaMallocManaged
    answered out of memory), the shim keeps that allocation aside, asks for another, and frees
    the ones it could not use. remote_driver blocks the addresses the double's next answers will
    have (FAKECUDA_VMM=1: reserves follow each other); the allocation lands elsewhere and works
    on both sides, and the shim's trace says it asked again. Nothing stays allocated."""
    e = daemon({"FAKECUDA_VMM": "1"})
    p = remote(e, "managed_taken", extra={"OPENMPS_TRACE": "1"})
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "managed_taken ok predicted" in out,
          "managed_taken: exit %d: %r %r" % (p.returncode, out, err[-3000:]))
    check(len(re.findall(r"is taken in this process; asking for another", err)) == 3,
          "the shim asked again for each blocked address: %r" % err[-3000:])
    line = wait_for(lambda: re.search(r"client %d: freed (\d+) allocation" % p.pid,
                                      e.log("server.log")) or
                    re.search(r"Client %d disconnected" % p.pid, e.log("server.log")),
                    what="client %d's end" % p.pid)
    check(not line.group(0).startswith("client"),
          "allocations left at the end: %s" % line.group(0))
