# SPDX-License-Identifier: MIT
"""Per-client budgets: refusals that leave the session going, hostile clients kept in budget."""
import os
import subprocess

from harness import Env, Fail, REMOTE_DRIVER, SHIM_DIR, check, ended, pinned_fds, remote, wait_for


BUDGETS = {"OPENMPS_CLIENT_PINNED_MAX": "1M", "OPENMPS_CLIENT_MAX_STREAMS": "4",
           "OPENMPS_CLIENT_MAX_EVENTS": "4", "OPENMPS_CLIENT_MAX_IMAGES": "2"}


def test_client_budgets_refuse_and_the_session_goes_on():
    """What one client can make the server hold has a budget: pinned memory, streams, events,
    new module images. Past each the call fails with CUDA_ERROR_OUT_OF_MEMORY, the refusal is
    logged once per kind, the session and the other clients go on; a 1 TiB pinned allocation
    is refused with the default budgets."""
    e = Env(extra_env=BUDGETS)
    ok = False
    try:
        other = remote(e, "hold")
        check(other.stdout.readline().strip().isdigit(), "the other client allocated")
        p = remote(e, "budgets")
        out, err = p.communicate(timeout=30)
        check(p.returncode == 0 and "budgets ok" in out, "budgets: %r %r" % (out, err))
        log = e.log("server.log")
        for kind in ("pinned host memory", "streams", "events", "module images"):
            check(log.count("over its budget of " + kind) == 1,
                  "one refusal of %s logged: %s" % (kind, log[-2000:]))
        check(other.poll() is None, "the other client is still served")
        other.kill()
        ok = True
    finally:
        e.close(ok)
    e = Env()
    ok = False
    try:
        # a deadline for a failing run only: under ASan on a loaded machine the client's exit
        # (LeakSanitizer's scan) took over 30 s once (2026-11-28)
        p = subprocess.run([REMOTE_DRIVER, "pinned", str(1 << 40)], capture_output=True,
                           text=True, timeout=120,
                           env=dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR)))
        check(p.returncode != 0 and "cuMemHostAlloc(&h, n, 0)" in p.stderr,
              "1 TiB of pinned memory refused: %r %r" % (p.stdout, p.stderr))
        check("budget" in e.log("server.log"), "the refusal is logged")
        ok = True
    finally:
        e.close(ok)


def proc_status(pid, key):
    for line in open("/proc/%d/status" % pid):
        if line.startswith(key + ":"):
            return int(line.split()[1]) << 10
    return 0


def test_thirty_two_hostile_clients_stay_in_budget(daemon):
    """32 clients each take all they can of every budget at once (pinned memory, streams,
    events, new module images, a 64 MiB staged image): each gets exactly its budget, the
    server's memory stays under the sum of its budgets, and once they are killed its
    descriptors and pinned memory return to where they were."""
    budgets = {"OPENMPS_CLIENT_PINNED_MAX": "4M", "OPENMPS_SERVER_PINNED_MAX": "64M",
               "OPENMPS_CLIENT_MAX_STREAMS": "16", "OPENMPS_CLIENT_MAX_EVENTS": "64",
               "OPENMPS_CLIENT_MAX_IMAGES": "8", "OPENMPS_SERVER_STAGE_MAX": "32M",
               "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=0"}
    e = daemon(extra_env=budgets)
    first = remote(e, "hold")
    check(first.stdout.readline().strip().isdigit(), "a first client")
    spid = e.servers()[0]
    fds0, rss0 = len(os.listdir("/proc/%d/fd" % spid)), proc_status(spid, "VmRSS")
    ps = [remote(e, "hostile") for _ in range(32)]
    lines = []
    for p in ps:
        line = p.stdout.readline()
        check(line.startswith("hostile"), "a hostile client: %r %r" % (line, p.poll()))
        lines.append(dict(zip(line.split()[1::2], map(int, line.split()[2::2]))))
    peak_rss = proc_status(spid, "VmRSS")
    pinned = sum(x["pinned_mib"] for x in lines)
    check(pinned <= 64 and all(x["pinned_mib"] <= 4 for x in lines),
          "pinned within the budgets: %d MiB in all" % pinned)
    check(all(x["streams"] == 16 and x["events"] == 64 and x["images"] == 8 for x in lines),
          "every client got exactly its budget of streams, events, images: %r" % lines[:3])
    grown = peak_rss - rss0
    print("32 hostile clients: server RSS %d -> %d MiB, pinned %d MiB, big images loaded %d"
          % (rss0 >> 20, peak_rss >> 20, pinned, sum(x["big_image"] == 0 for x in lines)))
    check(grown < (64 + 32 + 48) << 20, "the server grew by %d MiB" % (grown >> 20))
    for p in ps:
        p.kill()
    for p in ps:
        p.communicate(timeout=30)
        wait_for(lambda: ended(e, p.pid), what="a hostile client's session to end")
    first.kill()
    first.communicate(timeout=30)
    wait_for(lambda: ended(e, first.pid), what="the first client's session to end")
    try:
        wait_for(lambda: len(os.listdir("/proc/%d/fd" % spid)) <= fds0 and
                 pinned_fds(spid) == 0, timeout=20)
    except Fail:
        raise Fail("after the clients: %d descriptors (%d before), %d pinned bytes"
                   % (len(os.listdir("/proc/%d/fd" % spid)), fds0,
                      pinned_fds(spid, True)))
