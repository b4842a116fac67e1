# SPDX-License-Identifier: MIT
"""Several users: queued servers, floods from other users, a plain user's daemon, what each
user may see and change (most need root).
"""
import os
import re
import socket
import struct
import subprocess
import sys
import time

import pytest

from harness import (Env, as_user, check, ctl_as, need_binaries_for_other_users, proc_uid,
                     raw_conn, raw_msg, recv_msg, wait_for)
from protocol import HELLO_SIZE, MAGIC, MAJOR, MSG


def test_two_users_queued(daemon):
    """A client of a second user waits until the first user's server has no clients."""
    need_binaries_for_other_users()
    e = daemon()
    os.chmod(e.dir, 0o755)
    # A holds its session until the test lets it go (a fixed hold could end before B came)
    a = e.client("--pings", 1, "--hold-ms", "eof", preexec=as_user(12001))
    check(a.stdout.readline().startswith("session"), "user A served")
    spid_a = e.servers()[0]
    check(proc_uid(spid_a) == 12001, "server runs as user A")
    b = e.client("--pings", 3, preexec=as_user(12002))
    wait_for(lambda: "(uid 12002) queued behind" in e.log() or b.poll() is not None,
             what="user B to be queued")
    check(b.poll() is None and e.servers() == [spid_a],
          "B is not served while A holds its session (B's exit %r, servers %r): %s"
          % (b.poll(), e.servers(), open(b.errpath).read()))
    a.communicate(timeout=60)  # A lets go, its server stops when idle, B is served
    check(a.returncode == 0, "A finished normally")
    out, _ = b.communicate(timeout=60)
    check(b.returncode == 0 and "queued=1" in out,
          "user B queued then served: %r %r" % (out, open(b.errpath).read()))
    spid_b = int(re.search(r"server=(\d+)", out).group(1))
    check(spid_b != spid_a, "B has its own server")
    log = e.log()
    check(log.index("(uid 12002) queued behind") <
          log.index("Starting new server %d for user 12002" % spid_b), "order in the log")
    check("Server %d exited" % spid_a in log, "A's server stopped when idle")


# A plain user's script that opens connections and holds them until its stdin closes:
# per connection it sends one message and reports the first answer's type and text.
FLOOD = r"""
import json, os, socket, struct, sys
uid, path, count, mtype, payload = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), \
    int(sys.argv[4]), bytes.fromhex(sys.argv[5])
MAGIC, MAJOR = int(sys.argv[6]), int(sys.argv[7])
os.setgroups([]); os.setgid(uid); os.setuid(uid)
held, got = [], []
for i in range(count):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path); s.settimeout(20); held.append(s)
    try: s.send(struct.pack('<IHHHHI', MAGIC, MAJOR, 0, mtype, 0, len(payload)) + payload)
    except OSError: pass
    try:
        d = s.recv(70000)
        got.append([struct.unpack('<H', d[8:10])[0], d[16:].decode(errors='replace')]
                   if d else ['eof', ''])
    except OSError as ex: got.append(['error', str(ex)])
print(json.dumps(got), flush=True)
sys.stdin.read()
"""


def flood_as(e, uid, count, mtype, payload=b""):
    """Starts FLOOD as uid; returns (Popen, [[type, text] per connection])."""
    p = subprocess.Popen([sys.executable, "-c", FLOOD, str(uid), os.path.join(e.pipe, "control.sock"),
                          str(count), str(mtype), payload.hex(), str(MAGIC), str(MAJOR)],
                         stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    import json
    line = p.stdout.readline()
    check(line, "the flood as uid %d ended early" % uid)
    return p, json.loads(line)


def hello_payload(pid):
    return struct.pack("<II", pid, 0) + b"\0" * (HELLO_SIZE - 8)


def test_queued_flood_leaves_room_for_root_and_served_user():
    """Users without a server who flood waiting clients are held to a budget: root's
    front-end and the served user's new clients still get in, the flooders get a refusal
    naming the limit. (The served user's new client then waits its turn behind the older
    clients of the others, as every client does, and is served once they have gone.)"""
    need_binaries_for_other_users()
    def limit_fds():
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (80, 80))  # 16 connections in all
    e = Env(start=False)
    ok = False
    floods = []
    try:
        e.start(preexec=limit_fds)
        a = e.client("--pings", 1, "--hold-ms", 60000, preexec=as_user(12001))
        check(a.stdout.readline().startswith("session"), "user A served")
        for uid in (12002, 12009):
            p, got = flood_as(e, uid, 40, MSG["HELLO"], hello_payload(0))
            floods.append(p)
            queued = [g for g in got if g[0] == MSG["QUEUED"]]
            refused = [g for g in got if g[0] == MSG["REFUSE"]]
            # A hello that reaches the daemon just as it closes a refused connection turns
            # the refusal into a reset (the kernel's rule for unread data).
            reset = [g for g in got if g[0] == "error" and "reset" in g[1]]
            check(0 < len(queued) <= 8 and refused and
                  len(queued) + len(refused) + len(reset) == 40,
                  "uid %d: %d queued, %d refused, %d reset of 40: %r" %
                  (uid, len(queued), len(refused), len(reset), got))
            check("uid %d" % uid in refused[0][1] and "limit" in refused[0][1],
                  "the refusal names the user and the limit: %r" % refused[0][1])
        check(e.cmd("get_server_list") != "", "root's front-end still answers")
        a2 = e.client("--pings", 3, preexec=as_user(12001))
        wait_for(lambda: "Client %d (uid 12001) queued" % a2.pid in e.log() or
                 a2.poll() is not None, what="A's second client to be queued")
        check(a2.poll() is None, "the served user's new client got in: %s" %
              open(a2.errpath).read())
        check("holds" in e.log(), "the refusal is logged")
        for p in floods:
            p.stdin.close()
            p.wait(timeout=30)
        floods = []
        out, _ = a2.communicate(timeout=30)
        check(a2.returncode == 0 and "queued=1" in out,
              "served once the flooders' clients left, while A's first still runs: %r" % out)
        check(a.poll() is None, "A's first client still runs")
        ok = True
    finally:
        for p in floods:
            p.stdin.close()
            p.wait(timeout=30)
        e.close(ok)


def test_queue_of_thousands_is_linear():
    """Queueing costs the daemon linear time in the queue's length: 1 000 more waiting
    clients on top of 4 000 are queued in seconds (the quadratic scan took about a minute)."""
    need_binaries_for_other_users()
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    total, batch = 5000, 1000
    if hard != resource.RLIM_INFINITY and hard < total + 500:
        pytest.skip("needs %d descriptors, the hard limit is %d" % (total + 500, hard))
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    e = Env({"OPENMPS_HELLO_TIMEOUT_MS": "300000"})  # measure the queue, not the time-out
    ok = False
    held = []
    try:
        a = e.client("--pings", 1, "--hold-ms", 600000, preexec=as_user(12001))
        check(a.stdout.readline().startswith("session"), "user A served")
        path = os.path.join(e.pipe, "control.sock")
        hello = raw_msg(MSG["HELLO"], hello_payload(os.getpid()))
        times = []
        for start in range(0, total, batch):
            t0 = time.monotonic()
            socks = []
            for _ in range(batch):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                s.connect(path)  # blocking: waits while the listen backlog is full
                s.settimeout(300)
                s.send(hello)
                socks.append(s)
            for s in socks:
                mtype, _ = recv_msg(s)
                check(mtype == MSG["QUEUED"], "queued (got %r)" % mtype)
            times.append(time.monotonic() - t0)
            held += socks
            print("queued %d..%d in %.2f s" % (start, start + batch, times[-1]))
        check(times[-1] < 10.0, "1 000 more clients at %d queued took %.1f s" %
              (total - batch, times[-1]))
        for s in held:
            s.close()
        held = []
        check(e.cmd("get_server_list") != "", "the daemon answers after they left")
        ok = True
    finally:
        for s in held:
            s.close()
        e.close(ok)


def test_plain_user_daemon_serves_only_its_user(daemon):
    need_binaries_for_other_users()
    e = daemon(start=False)
    e.start_as_user(12003)
    rc, out, err = e.run_client("--pings", 1, preexec=as_user(12003))
    check(rc == 0, "own user served: " + err)
    spid = int(re.search(r"server=(\d+)", out).group(1))
    check(proc_uid(spid) == 12003, "server runs as the daemon's user")
    # Root can reach the socket despite its mode. Our client will not talk to
    # a daemon of another (non-root) user...
    rc, out, err = e.run_client("--pings", 1)
    check(rc == 3 and "belongs to uid 12003, neither root nor this user" in err,
          "client refuses a stranger's daemon: " + err)
    # ...and the daemon would not serve another user anyway.
    s = raw_conn(e)
    s.send(raw_msg(MSG["HELLO"], struct.pack("<II", os.getpid(), 0) + b"\0" * (HELLO_SIZE - 8)))
    mtype, text = recv_msg(s)
    check(mtype == MSG["REFUSE"] and b"runs as uid 12003" in text and
          b"uid 0 was refused" in text, "daemon refuses other users: %r" % text)
    s.close()
    out, _, _ = e.ctl("start_server -uid 12004\n")
    check("can start servers only for that user" in out, "start_server refused: " + out)
    out, _, _ = e.ctl("quit\n", env=dict(e.env))  # root may always quit
    e.daemon.wait(timeout=60)  # its server exits first (LeakSanitizer: seconds)


def test_logs_readable_by_root_only(daemon):
    """The log directory and its logs are not world-readable (an older daemon's 0644 logs
    are tightened), and a user's server still writes server.log."""
    need_binaries_for_other_users()
    e = daemon(start=False)
    os.makedirs(e.logs, mode=0o755)
    os.chmod(e.logs, 0o755)
    for name in ("control.log", "server.log"):
        with open(os.path.join(e.logs, name), "w") as f:
            f.write("old line\n")
        os.chmod(os.path.join(e.logs, name), 0o644)
    e.start()
    check(os.stat(e.logs).st_mode & 0o777 == 0o700, "log directory mode %o" %
          (os.stat(e.logs).st_mode & 0o777))
    for name in ("control.log", "server.log"):
        mode = os.stat(os.path.join(e.logs, name)).st_mode & 0o777
        check(mode == 0o600, "%s mode %o" % (name, mode))
    rc, out, err = e.run_client("--pings", 1, preexec=as_user(12001))
    check(rc == 0, "user served: " + err)
    spid = int(re.search(r"server=(\d+)", out).group(1))
    check(re.search(r"Server +%d\]" % spid, e.log("server.log")),
          "the user's server wrote server.log")
    p = subprocess.run([sys.executable, "-c", "import os; os.setgroups([]); os.setgid(12002); "
                        "os.setuid(12002); open(%r).read()" %
                        os.path.join(e.logs, "control.log")], capture_output=True, text=True)
    check(p.returncode != 0 and "Permission denied" in p.stderr,
          "another user cannot read control.log: %r" % p.stderr[-200:])


def test_clients_shown_to_their_user_and_root(daemon):
    """ps, get_client_list and get_device_client_list show a plain user its own clients
    only; root sees every user's."""
    need_binaries_for_other_users()
    e = daemon()
    a = e.client("--pings", 1, "--hold-ms", 30000, preexec=as_user(12001))
    check(a.stdout.readline().startswith("session"), "user A served")
    spid = e.servers()[0]
    wait_for(lambda: str(a.pid) in e.cmd("ps"), what="root sees A's client in ps")
    check(e.clients(spid) == [a.pid], "root: get_client_list")
    check("%d.1" % a.pid in e.cmd("get_device_client_list"), "root: get_device_client_list")
    own = ctl_as(e, 12001, "ps\nget_client_list %d\nget_device_client_list\n" % spid)
    check(own.count(str(a.pid)) == 3 and "om-test-client" in own,
          "A sees its own client everywhere: %r" % own)
    other = ctl_as(e, 12002, "ps\nps -p %d\nget_client_list %d\nget_device_client_list\n"
                   "get_device_client_list %d\nget_server_list\n" % (spid, spid, spid))
    check(str(a.pid) not in other and "om-test-client" not in other,
          "another user sees none of A's clients: %r" % other)
    check(other.strip() == str(spid), "but the server is listed: %r" % other)


def test_changes_refused_for_other_users(daemon):
    """Commands that change anything (quit, start_server, shutdown_server, terminate_client, the
    set_ commands) are refused for a user who is neither root nor the daemon's, with the reason;
    the daemon and its clients go on."""
    need_binaries_for_other_users()
    e = daemon()
    a = e.client("--pings", 1, "--hold-ms", "eof")
    check(a.stdout.readline().startswith("session"), "root's client served")
    spid = e.servers()[0]
    cmds = ["quit", "start_server -uid 12011", "shutdown_server %d -f" % spid,
            "terminate_client %d %d" % (spid, a.pid), "set_default_active_thread_percentage 10",
            "set_active_thread_percentage %d 10" % spid, "set_default_client_priority 1",
            "set_default_device_pinned_mem_limit 0 1G",
            "set_device_pinned_mem_limit %d 0 1G" % spid]
    out = ctl_as(e, 12011, "".join(c + "\n" for c in cmds))
    check(out.count("Permission denied") == len(cmds),
          "every change refused for uid 12011: %r" % out)
    check(e.servers() == [spid] and a.poll() is None, "the server and its client go on")
    check(e.cmd("get_default_active_thread_percentage") == "100.0", "nothing changed")
    a.communicate(timeout=30)  # closes its stdin: it ends its session
