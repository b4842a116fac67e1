# SPDX-License-Identifier: MIT
"""Client sessions: many at once, killed mid-handshake, hostile peers and malformed messages
on the daemon's socket, the log's rate limit and escaping.
"""
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import time

import pytest
import harness

from harness import (Env, check, ctl_as, need_binaries_for_other_users, need_root, raw_conn,
                     raw_msg, recv_msg, wait_for)
from protocol import HELLO_SIZE, MAGIC, MAJOR, MINOR, MSG


def test_clients_128_at_once(daemon):
    e = daemon()
    # each holds its session until the test has counted all 128 (a fixed hold ran out
    # before the last had started on a loaded machine)
    procs = [e.client("--pings", 20, "--hold-ms", "eof") for _ in range(128)]
    for p in procs:
        line = p.stdout.readline()
        check(line.startswith("session server="), "session line: %r" % line)
    spid = e.servers()
    check(len(spid) == 1, "one server for one user: %r" % spid)
    listed = e.clients(spid[0])
    check(sorted(listed) == sorted(p.pid for p in procs), "128 clients listed (%d)" %
          len(listed))
    ps = e.cmd("ps").splitlines()
    check(len(ps) == 129, "ps lists 128 clients")
    for p in procs:
        p.communicate(timeout=60)
        check(p.returncode == 0, "client exit %d: %s" % (p.returncode, open(p.errpath).read()))
    wait_for(lambda: e.clients(spid[0]) == [], what="all clients gone")


def test_clients_killed_during_handshake(daemon):
    """Clients die after connect, after hello, after the welcome, and at random instants."""
    e = daemon()
    rc, out, err = e.run_client("--pings", 1)
    check(rc == 0, "first client: " + err)
    spid = e.servers()[0]
    for stage in ("connect", "hello", "welcome") * 5:
        rc, _, _ = e.run_client("--die-after", stage)
        check(rc == -signal.SIGKILL, "client died by SIGKILL after %s (rc %d)" % (stage, rc))
    rng = random.Random(2)
    victims = []
    for i in range(60):
        p = e.client("--pings", 200)
        time.sleep(rng.uniform(0, 0.004))
        p.kill()
        victims.append(p)
    for p in victims:
        p.wait(timeout=10)
    # Everything they held is freed: no clients listed, the server is the same.
    wait_for(lambda: e.clients(spid) == [], what="the killed clients to be forgotten")
    check(e.servers() == [spid], "server survived")
    rc, out, err = e.run_client("--pings", 100)
    check(rc == 0 and "pings ok 100" in out, "a client after the massacre: " + err)


def test_server_killed_under_clients(daemon):
    e = daemon()
    procs = [e.client("--pings", 1, "--hold-ms", 30000) for _ in range(4)]
    for p in procs:
        check(p.stdout.readline().startswith("session"), "session")
    spid = e.servers()[0]
    t0 = time.monotonic()
    os.kill(spid, signal.SIGKILL)
    for p in procs:
        out, _ = p.communicate(timeout=20)
        check(p.returncode == 4 and "session ended" in out, "client noticed: %r" % out)
    # they hold 30 s: noticing only when the hold ends (or never) fails here, load does not
    check(time.monotonic() - t0 < 15.0, "clients noticed the death (%.1f s), long before "
          "their 30 s hold ended" % (time.monotonic() - t0))
    wait_for(lambda: e.servers() == [], what="the dead server to be reaped")
    check("Server %d (uid %d) died (signal 9)" % (spid, os.getuid()) in e.log(),
          "death logged")
    rc, out, err = e.run_client("--pings", 5)
    check(rc == 0, "next client: " + err)
    new = int(re.search(r"server=(\d+)", out).group(1))
    check(new != spid, "a new server")


def test_malformed_ring_records(daemon):
    """A client that corrupts its ring loses its session; another client is not disturbed."""
    e = daemon()
    good = e.client("--pings", 1, "--hold-ms", "eof")  # in session all along
    check(good.stdout.readline().startswith("session"), "session")
    spid = e.servers()[0]
    for kind in ("tail", "len", "op"):
        rc, out, err = e.run_client("--garbage", kind, timeout=30)
        check(rc == 4, "garbage %s: rc %d out %r err %r" % (kind, rc, out, err))
    check(good.poll() is None, "the other client is still in its session")
    slog = wait_for(lambda: "protocol error" in e.log("server.log") and e.log("server.log"),
                    what="the session end reason in server.log")
    check("malformed record" in slog and "unknown operation" in slog, "logged: " + slog)
    good.communicate(timeout=30)
    check(good.returncode == 0, "the other client went on: " + open(good.errpath).read())
    check(e.servers() == [spid], "same server")


def test_client_hides_the_sleeping_worker(daemon):
    """A client that clears the ring's sleeper count and exits cannot hang the server."""
    e = daemon()
    rc, out, err = e.run_client("--pings", 1)
    spid = e.servers()[0]
    for _ in range(3):
        rc, out, err = e.run_client("--garbage", "sleepers", timeout=30)
        check(rc == 0, "garbage client exit %d: %s" % (rc, err))
    # a worker asleep for good never frees its session: this waits in vain
    wait_for(lambda: e.clients(spid) == [], what="the sessions to be freed")
    rc, out, err = e.run_client("--pings", 10, timeout=60)
    check(rc == 0, "the server still serves: " + err)


def test_connection_flood(daemon):
    """Connections that are not clients are capped per user and in total; the daemon
    neither spins nor floods its log, and goes on serving."""
    need_root()
    def limit_fds():
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (80, 80))
    e = daemon(start=False)
    e.start(preexec=limit_fds)  # 80 descriptors: 16 connections at most
    socks = []
    for _ in range(40):
        s = raw_conn(e)
        socks.append(s)
        try:
            s.send(raw_msg(MSG["COMMAND"], b"help"))
        except OSError:
            pass  # refused at once: the daemon already closed it
    answered = 0
    for s in socks:
        try:
            mtype, _ = recv_msg(s)
            answered += mtype == MSG["ANSWER"]
        except (socket.timeout, ConnectionResetError, struct.error):
            pass
    check(0 < answered <= 16, "total cap: %d of 40 answered" % answered)
    for s in socks:
        s.close()
    wait_for(lambda: "too many connections" in e.log(), what="the refusal in the log")
    time.sleep(0.5)  # a daemon that logs in a loop would write far more than this meanwhile
    check(len(e.log()) < 100000, "log size %d after the flood" % len(e.log()))
    check(e.cmd("get_default_client_priority") == "0", "still answers")
    # One user's front-ends are capped at 32 even with descriptors to spare.
    e.quit()
    e2 = Env()
    try:
        code = ("import os,socket,struct,sys\n"
                "os.setgroups([]); os.setgid(12008); os.setuid(12008)\n"
                "ok=0; ss=[]\n"
                "for i in range(40):\n"
                "  s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.settimeout(10)\n"
                "  s.connect(sys.argv[1]); ss.append(s)\n"
                "  try: s.send(struct.pack('<IHHHHI',%d,%d,0,%d,0,4)+b'help')\n"
                % (MAGIC, MAJOR, MSG["COMMAND"]) +
                "  except OSError: pass\n"
                "for s in ss:\n"
                "  try: d=s.recv(100); ok += len(d)>16 and d[8]==%d\n"  # ANSWER, not REFUSE
                % MSG["ANSWER"] +
                "  except OSError: pass\n"
                "print(ok)\n")
        p = subprocess.run([sys.executable, "-c", code, os.path.join(e2.pipe, "control.sock")],
                           capture_output=True, text=True, timeout=240)
        check(p.stdout.strip() == "32", "per-user cap: %r %r" % (p.stdout, p.stderr))
        check(e2.cmd("get_server_list") == "", "root still served")
        e2.quit()
    finally:
        e2.close(True)


def test_client_in_another_pid_namespace(daemon):
    """A daemon that cannot see its client's pid refuses it with the reason."""
    need_root()
    probe = subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("cannot create a pid namespace here (unshare: %s)" %
                    probe.stderr.decode().strip())
    e = daemon(start=False)
    err = e.errfile("daemon")
    e.daemon = subprocess.Popen(["unshare", "--pid", "--fork", harness.CONTROL, "-f"], env=e.env,
                                stdout=subprocess.DEVNULL, stderr=open(err, "w"))
    e.children.append((e.daemon, err))
    wait_for(e.listening, what="the daemon in its namespace")
    rc, out, err = e.run_client("--pings", 1)
    check(rc == 3 and "another pid namespace" in err, "refused with the reason: " + err)
    check(e.cmd("ps") == "", "no phantom client")


def test_malformed_daemon_messages(daemon):
    """Garbage on the control socket drops that connection only."""
    # a silent connection is dropped after 2 s here (10 s by default, which the other tests
    # keep: a client stalled between its connect and its hello on a loaded machine is not
    # dropped)
    e = daemon({"OPENMPS_HELLO_TIMEOUT_MS": "2000"})
    cases = [
        b"\x00",
        b"hello there, daemon",
        raw_msg(MSG["COMMAND"], b"ps", magic=0xDEADBEEF),
        raw_msg(MSG["COMMAND"], b"ps", length=1),
        raw_msg(MSG["COMMAND"], b"ps", length=1 << 30),
        raw_msg(999, b""),
        raw_msg(MSG["HELLO"], b"\x01\x02"),
        raw_msg(MSG["HELLO"], b"\xff" * HELLO_SIZE),
        raw_msg(MSG["ANSWER"], b"I am not the daemon"),
        raw_msg(MSG["COMMAND"], b"ps\x00hidden"),
        raw_msg(MSG["COMMAND"], b"x" * 5000),
        raw_msg(MSG["HELLO"], b"\x00" * HELLO_SIZE)[:-7],
    ]
    for data in cases:
        s = raw_conn(e)
        s.send(data)
        try:
            got = s.recv(100)
        except socket.timeout:
            got = None
        check(got == b"", "connection dropped for %r (got %r)" % (data[:24], got))
        s.close()
    # Another major version gets a refusal naming both versions.
    s = raw_conn(e)
    s.send(raw_msg(MSG["HELLO"], b"\x00" * HELLO_SIZE, major=MAJOR + 1))
    mtype, text = recv_msg(s)
    check(mtype == MSG["REFUSE"], "version mismatch refused")
    check(("daemon speaks %d.%d" % (MAJOR, MINOR)).encode() in text and
          ("speaks %d.%d" % (MAJOR + 1, MINOR)).encode() in text, "names versions: %r" % text)
    s.close()
    # A descriptor sent to the daemon is not kept.
    s = raw_conn(e)
    r, w = os.pipe()
    socket.send_fds(s, [raw_msg(MSG["COMMAND"], b"get_server_list")], [w])
    mtype, text = recv_msg(s)
    check(mtype == MSG["ANSWER"], "command with an fd still answered")
    os.close(w)
    check(os.read(r, 1) == b"", "the daemon closed the descriptor it was sent")
    os.close(r)
    s.close()
    # A connection that says nothing is dropped after the hello timeout.
    s = raw_conn(e)
    s.settimeout(30)
    check(s.recv(10) == b"", "silent connection dropped")
    s.close()
    # A client that hangs up while waiting is forgotten.
    check("said nothing" in e.log(), "silence logged")
    check("malformed message from pid %d" % os.getpid() in e.log(), "logged with the pid")
    rc, out, err = e.run_client("--pings", 10)
    check(rc == 0, "daemon still serves clients: " + err)
    check(e.cmd("get_default_client_priority") == "0", "daemon still answers")


def test_log_flood_is_rate_limited(daemon):
    """A user's flood of commands and malformed messages adds a bounded number of lines
    to control.log and a line saying how many were suppressed; other users' lines and,
    after a pause, the flooder's own are logged again."""
    need_binaries_for_other_users()
    e = daemon()
    path = os.path.join(e.logs, "control.log")
    before = os.path.getsize(path)
    code = ("import os,socket,struct,sys,time\n"
            "os.setgroups([]); os.setgid(12006); os.setuid(12006)\n"
            "def msg(t, p): return struct.pack('<IHHHHI',%d,%d,0,t,0,len(p))+p\n"
            % (MAGIC, MAJOR) +
            "ui=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); ui.connect(sys.argv[1])\n"
            "n=0; t0=time.monotonic()\n"
            "while (n < 3000 or time.monotonic() < t0+3) and time.monotonic() < t0+30:\n"
            "  ui.send(msg(%d, b'no_such_command %%d' %% n)); ui.recv(70000); n+=1\n"
            % MSG["COMMAND"] +
            "  if n % 20 == 0:\n"
            "    s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect(sys.argv[1])\n"
            "    s.send(b'garbage'); s.recv(100); s.close(); n+=1\n"
            "print(n)\n")
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", code, os.path.join(e.pipe, "control.sock")],
                       capture_output=True, text=True, timeout=120)
    flood_s = time.monotonic() - t0
    check(p.returncode == 0, "the flood ran: %r" % p.stderr)
    sent = int(p.stdout)
    # 300 lines at once, then 10 a second, under 200 bytes each.
    grown = os.path.getsize(path) - before
    bound = (300 + 10 * flood_s + 20) * 200
    print("%d messages in %.1f s grew control.log by %d bytes" % (sent, flood_s, grown))
    check(sent >= 3000, "the flood sent %d messages, too few to tell" % sent)
    check(grown < bound, "%d messages grew control.log by %d bytes" % (sent, grown))
    wait_for(lambda: re.search(r"uid 12006: \d+ log line\(s\) suppressed", e.log()),
             what="the suppressed lines' count")
    # Root's lines are not held back by another user's flood.
    e.cmd("root_marker_command")
    check('Unknown command \\"root_marker_command\\"' in e.log() or
          "root_marker_command" in e.log(), "root's command logged at once")
    # The flooder's lines come back once its allowance refills.
    def flooder_logged():
        ctl_as(e, 12006, "after_the_flood\n")
        return "after_the_flood" in e.log()
    wait_for(flooder_logged, timeout=20, what="the flooder's next command in the log")


def test_log_escapes_control_characters(daemon):
    """Escape sequences and control bytes a user types reach control.log escaped."""
    e = daemon()
    evil = b"\x1b[31mred\x1b]0;title\x07 \x9b2J\x7f\x01\rFAKE LINE \\x41"
    s = raw_conn(e)
    s.send(raw_msg(MSG["COMMAND"], evil))
    mtype, text = recv_msg(s)
    check(mtype == MSG["ANSWER"] and text.startswith(b'Unknown command "\x1b[31mred'),
          "the answer echoes the command: %r" % text)
    s.close()
    out, _, _ = e.ctl("set_default_active_thread_percentage \x1b[2J\x1b[H\n")
    check("Invalid percentage" in out, "an error that echoes its argument: %r" % out)
    e.cmd("get_server_list")
    raw = open(os.path.join(e.logs, "control.log"), "rb").read()
    bad = sorted(set(b for b in raw if (b < 0x20 and b != 0x0a) or b >= 0x7f))
    check(not bad, "control bytes in control.log: %r" % bad)
    check(b"(uid %d): " % os.getuid() + rb'\x1b[31mred\x1b]0;title\x07 \x9b2J\x7f\x01\x0dFAKE LINE \\x41 -> '
          rb'Unknown command "\x1b[31mred\x1b]0;title\x07"' in raw,
          "the command and its answer logged escaped: %r" % raw[-600:])
    check(rb'\x1b[2J\x1b[H", expected' in raw, "an argument echoed in an error: %r" %
          raw[-600:])
    check(b"\nFAKE LINE" not in raw and b"\rFAKE" not in raw, "no forged line")
