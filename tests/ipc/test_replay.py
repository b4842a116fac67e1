# SPDX-License-Identifier: MIT
"""Runs of launches the server replays as graphs (src/server/replay.c; tests/cpu/replay_driver.c).

The driver double logs every kernel it ran, launched or as a graph's node (FAKECUDA_LAUNCH_LOG),
and every launch the driver was asked for (FAKECUDA_DRIVER_LOG: "kernel NAME" for a
cuLaunchKernel, "graph N" for a cuGraphLaunch of N nodes). Each test checks that the kernels ran
are exactly the ones the program launched, in its order, and counts what the replay saved."""
import os

from harness import check, driver_program, wait_for

LEN = 40     # launches a round: chunks of 16, 16 and 8 (OPENMPS_REPLAY_CHUNK's default)
ROUNDS = 6


def run(daemon, mode, rounds=ROUNDS, length=LEN, env=None, timeout=120):
    e = daemon(start=False)
    paths = {k: os.path.join(e.dir, k) for k in ("launches", "driver", "expect", "graphs")}
    e.env["FAKECUDA_LAUNCH_LOG"] = paths["launches"]
    e.env["FAKECUDA_DRIVER_LOG"] = paths["driver"]
    e.env["FAKECUDA_GRAPH_LOG"] = paths["graphs"]
    # one client: held as when launches contend (OPENMPS_REPLAY_MIN_CLIENTS, 2 by default)
    e.env["OPENMPS_REPLAY_MIN_CLIENTS"] = "1"
    # held up to 2 s without a record (100 us by default): a loaded machine that stops the
    # program between two launches must not change the counts (the idle test sets its own)
    e.env["OPENMPS_REPLAY_IDLE_US"] = "2000000"
    e.env.update(env or {})
    e.start()
    p = driver_program(e, "replay-driver", [mode, str(rounds), str(length)],
                       extra={"REPLAY_EXPECT": paths["expect"],
                              "REPLAY_LAUNCH_LOG": paths["launches"]})
    out, err = p.communicate(timeout=timeout)
    return e, p, out, err, paths


def read(path):
    return open(path).read().splitlines() if os.path.exists(path) else []


def counts(paths):
    lines = read(paths["driver"])
    kernels = sum(1 for l in lines if l.startswith("kernel "))
    graphs = [int(l.split()[1]) for l in lines if l.startswith("graph ")]
    return kernels, graphs


def same_order(paths):
    ran, sent = read(paths["launches"]), read(paths["expect"])
    ran = [l for l in ran if l.startswith("fill_u32 ")]
    check(ran == sent, "the kernels that ran are not the ones launched, in order: %d ran, %d "
          "launched; first difference at %s" % (len(ran), len(sent), next(
              (i for i, (a, b) in enumerate(zip(ran, sent)) if a != b), min(len(ran), len(sent)))))


def replayed(daemon, mode, kernels, graphs, **kw):
    """Runs the program in `mode`; it must pass, the kernels that ran must be the ones it
    launched, in order, and the driver must have been asked for `kernels` kernel launches and
    the graph launches `graphs` (their node counts, in order)."""
    e, p, out, err, paths = run(daemon, mode, **kw)
    check(p.returncode == 0 and "replay %s ok" % mode in out, "%s: %r %r" % (mode, out, err))
    same_order(paths)
    got_kernels, got_graphs = counts(paths)
    check(got_kernels == kernels and got_graphs == graphs,
          "%s: %d kernel launches (want %d), graph launches %r (want %r)"
          % (mode, got_kernels, kernels, got_graphs, graphs))
    return e, p, paths


def test_a_repeated_run_is_replayed_as_graphs(daemon):
    """Rounds 1 and 2 are launched one by one; round 2 is the run seen a second time, built as
    graphs of 16, 16 and 8 nodes; rounds 3-6 are three graph launches each, no kernel launch."""
    e, p, paths = replayed(daemon, "same", 2 * LEN,
                           [16, 16, 8] * (ROUNDS - 2))
    wait_for(lambda: "launches replayed" in e.log("server.log"), what="the session's replay line")
    check("client %d: %d launches replayed in %d graph launches" % (p.pid, (ROUNDS - 2) * LEN,
                                                                   3 * (ROUNDS - 2))
          in e.log("server.log"), "the session's line: %s" % e.log("server.log")[-600:])
    glog = read(paths["graphs"])
    check(sum(l.startswith("exec+") for l in glog) == 3 and
          sum(l.startswith("exec-") for l in glog) == 3,
          "three executable graphs made and destroyed with the session: %r" % glog)


def test_replay_off_launches_every_kernel(daemon):
    """OPENMPS_REPLAY=off: every launch is a driver launch, nothing is built."""
    e, p, paths = replayed(daemon, "same", ROUNDS * LEN, [], env={"OPENMPS_REPLAY": "off"})
    check("replay of repeated launches: off" in e.log("server.log"), "the server says it is off")


def test_changed_arguments_update_the_nodes(daemon):
    """Every value changes every round: the same shape is replayed, each node's parameters set
    before its chunk's launch, and every slot holds its round's value (the program checks)."""
    e, p, paths = replayed(daemon, "change", 2 * LEN,
                           [16, 16, 8] * (ROUNDS - 2))


def test_one_node_that_differs_falls_back_in_order(daemon):
    """Round 3's launch 5 runs on another grid: the five held launches before it go out one by
    one, then it, then the rest of the round as it comes (a new shape, learnt, not replayed);
    rounds 4-6 are replayed again."""
    e, p, paths = replayed(daemon, "shape", 3 * LEN,
                           [16, 16, 8] * (ROUNDS - 3))


def test_another_stream_ends_the_run(daemon):
    """Round 3 sends its launches from 8 on to another stream: the 8 held go out on the default
    stream first, the rest run on the other one, and the slots all hold their values."""
    e, p, paths = replayed(daemon, "stream", 3 * LEN,
                           [16, 16, 8] * (ROUNDS - 3))


def test_an_interleaved_call_sees_what_was_held(daemon):
    """Round 3, after launch 5: an event record, a query (which answers done), a host function
    and a copy into slot 2. The six held launches go out before the record; the copy lands after
    launch 2 (slot 2 holds the copy's 77, checked by the program). The round's other 34 launches
    have the template's shape (a shape ignores argument bytes): they are replayed as its first
    two chunks, their nodes' arguments updated, and the last two go out one by one at the
    next round's first call."""
    e, p, paths = replayed(daemon, "interleave", 2 * LEN + 6 + 2,
                           [16, 16] + [16, 16, 8] * (ROUNDS - 3))


def test_a_client_capture_is_never_mixed_in(daemon):
    """Round 3 captures the same launches on another stream: the capture's graph holds exactly
    the program's 40 nodes, and its launch runs them; the default stream's runs go on being
    replayed."""
    e, p, paths = replayed(daemon, "capture", 2 * LEN,
                           [16, 16, 8] + [LEN] + [16, 16, 8] * (ROUNDS - 2))


def test_held_launches_go_out_when_nothing_follows(daemon):
    """Round 3 stops with launches held: after OPENMPS_REPLAY_IDLE_US (100 ms here) they run,
    without any call from the program (it reads the double's log itself, up to 30 s)."""
    e, p, out, err, paths = run(daemon, "idle", env={"OPENMPS_REPLAY_IDLE_US": "100000"})
    check(p.returncode == 0 and "replay idle ok" in out, "idle: %r %r" % (out, err))
    same_order(paths)


def test_a_session_that_ends_mid_run(daemon):
    """The program ends in round 3 with launches held: what ran is what it launched, in order
    (records it left in its ring when its end was noticed are dropped, as before), the server
    frees the session's graphs and serves the next client."""
    e, p, out, err, paths = run(daemon, "exit")
    check(p.returncode == 0, "exit: %r %r" % (out, err))
    wait_for(lambda: "Client %d disconnected" % p.pid in e.log("server.log"),
             what="the session's end")
    ran = [l for l in read(paths["launches"]) if l.startswith("fill_u32 ")]
    sent = read(paths["expect"])
    check(len(ran) >= 2 * LEN and ran == sent[:len(ran)],
          "what ran (%d) is the start of what was launched (%d)" % (len(ran), len(sent)))
    glog = read(paths["graphs"])
    check(sum(l.startswith("exec+") for l in glog) == sum(l.startswith("exec-") for l in glog) == 3,
          "its executable graphs destroyed: %r" % glog)
    p = driver_program(e, "replay-driver", ["same", "3", str(LEN)])
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "replay same ok" in out, "the next client: %r %r" % (out, err))


def test_a_fault_in_a_replayed_kernel_reaches_the_client(daemon):
    """Round 4's launch 7 faults (the double's fill_u32 of 0xdeadbeef) inside a replayed graph:
    the program's synchronize reports CUDA_ERROR_ILLEGAL_ADDRESS, the server ends as for any
    fatal fault, and the next client gets a new server."""
    e, p, out, err, paths = run(daemon, "fault")
    check(p.returncode == 0 and "replay fault reported" in out, "fault: %r %r" % (out, err))
    kernels, graphs = counts(paths)
    ran = [l for l in read(paths["launches"]) if l.startswith("fill_u32 ")]
    sent = read(paths["expect"])
    at = 3 * LEN + 7  # what the server launched after the fault, before it ended, may run too
    check(kernels == 2 * LEN and graphs[:4] == [16, 16, 8, 16] and ran[:at] == sent[:at]
          and sent[at] not in ran,
          "the fault came from the first graph of round 4, at its node 7 (%d kernels ran, graphs "
          "%r)" % (len(ran), graphs))
    wait_for(lambda: "FAULT: a fatal GPU fault (CUresult 700)" in e.log("server.log"),
             what="the fault in the log")
    p = driver_program(e, "replay-driver", ["same", "3", str(LEN)])
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "replay same ok" in out, "the next client: %r %r" % (out, err))


def test_launch_attributes_are_the_nodes_attributes(daemon):
    """Launches with attributes (cuLaunchKernelEx): a cluster dimension on every launch, and
    programmatic stream serialization on every other one. Their runs are replayed; each node
    carries the cluster dimension (the double logs a node's attributes as a launch's), and the
    permission to overlap, which a chain of nodes never uses, is dropped."""
    e, p, paths = replayed(daemon, "attrs", 2 * LEN, [16, 16, 8] * (ROUNDS - 2))
    log = read(paths["launches"])
    check(log.count("attr 4 1") == ROUNDS * LEN and log.count("attr 6 1") == 2 * LEN // 2,
          "cluster dimensions %d (want %d), serialization %d (want %d: launched rounds only)"
          % (log.count("attr 4 1"), ROUNDS * LEN, log.count("attr 6 1"), LEN))


def test_a_client_alone_is_not_held(daemon):
    """With fewer busy clients than OPENMPS_REPLAY_MIN_CLIENTS (2 by default), holding a chunk
    would only delay its kernels: a client alone has its runs learnt and built, but every launch
    goes out as it comes."""
    e, p, paths = replayed(daemon, "same", ROUNDS * LEN, [], env={"OPENMPS_REPLAY_MIN_CLIENTS": "2"})
    check(sum(l.startswith("exec+") for l in read(paths["graphs"])) == 3,
          "its run was built all the same: %r" % read(paths["graphs"]))


def test_launches_under_an_sm_share_are_not_replayed(daemon):
    """Under an SM share a client's kernels go to a shadow stream in its green context
    (share.c); a kernel node would carry the server's own context instead, so those launches
    are never held or replayed, and the log counts them."""
    e, p, paths = replayed(daemon, "same", ROUNDS * LEN,
                           [], env={"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50"})


def test_a_template_that_begins_another(daemon):
    """Rounds 1-2 launch 20 kernels, rounds 3-6 the same 20 and 20 more. Round 3 replays the
    template of 20 (graphs of 16 and 4) and launches the rest one by one; round 4 does the same
    and makes the run of 40 a template; rounds 5-6 begin with the longest template that fits and
    replay it whole. No kernel runs twice (a run never switches templates inside a chunk, whose
    graph would run launches 16-19 again)."""
    e, p, paths = replayed(daemon, "prefix", 2 * (LEN // 2) + 2 * (LEN // 2),
                           [16, 4] * 2 + [16, 16, 8] * (ROUNDS - 4))


def test_more_runs_than_templates(daemon):
    """Rounds of 80 runs of 5 launches, each run of its own grid, the same in rounds 1-2 and in
    rounds 3-4: 160 runs are built, at most 64 templates live at once (the least recently used
    replaced, their executable graphs destroyed), and every kernel runs once, in order."""
    e, p, out, err, paths = run(daemon, "many", rounds=4, length=400)
    check(p.returncode == 0 and "replay many ok" in out, "many: %r %r" % (out, err))
    wait_for(lambda: "Client %d disconnected" % p.pid in e.log("server.log"),
             what="the session's end")
    same_order(paths)
    live = most = made = 0
    for line in read(paths["graphs"]):
        if line.startswith("exec+"):
            live, made = live + 1, made + 1
            most = max(most, live)
        elif line.startswith("exec-"):
            live -= 1
    check(made == 160 and most == 64 and live == 0,
          "executable graphs: %d made, at most %d at once, %d left" % (made, most, live))


def test_a_run_longer_than_a_template_is_never_held(daemon):
    """A run of 1 100 launches, past the 1 024 a run keeps: launched as it comes, never learnt."""
    e, p, paths = replayed(daemon, "same", 3 * 1100, [], rounds=3, length=1100)
    check(not any(l.startswith("exec+") for l in read(paths["graphs"])), "nothing built")


def test_templates_past_the_server_budget_are_not_built(daemon):
    """OPENMPS_SERVER_REPLAY_MAX bounds what all sessions' templates hold in the server: past it
    a run is not built (launched one by one, in order), and the log says so once."""
    e, p, paths = replayed(daemon, "same", ROUNDS * LEN, [],
                           env={"OPENMPS_SERVER_REPLAY_MAX": "1K"})
    check(not any(l.startswith("exec+") for l in read(paths["graphs"])), "nothing built")
    wait_for(lambda: "reached OPENMPS_SERVER_REPLAY_MAX" in e.log("server.log"),
             what="the refusal in the log")
    check(e.log("server.log").count("reached OPENMPS_SERVER_REPLAY_MAX") == 1, "said once")


def test_a_sessions_templates_are_given_back_to_the_server_budget(daemon):
    """With room for one template of 40 launches in all (4K), a second client after the first
    builds its own: the first's were counted out of OPENMPS_SERVER_REPLAY_MAX at its end."""
    e, p, paths = replayed(daemon, "same", 2 * LEN, [16, 16, 8] * (ROUNDS - 2),
                           env={"OPENMPS_SERVER_REPLAY_MAX": "4K"})
    wait_for(lambda: "Client %d disconnected" % p.pid in e.log("server.log"),
             what="the first session's end")
    q = driver_program(e, "replay-driver", ["same", str(ROUNDS), str(LEN)])
    out, err = q.communicate(timeout=120)
    check(q.returncode == 0 and "replay same ok" in out, "the second client: %r %r" % (out, err))
    kernels, graphs = counts(paths)
    check(kernels == 4 * LEN and graphs == [16, 16, 8] * (ROUNDS - 2) * 2,
          "both clients replayed: %d kernels, graphs %r" % (kernels, graphs))
