# SPDX-License-Identifier: MIT
"""The front-end's commands and their answers, and the daemon's own start and stop."""
import os
import signal
import subprocess
import time

import harness

from harness import check, wait_for


def test_commands_transcript(daemon):
    """Every command of docs/operations.md with its answer, as one front-end session."""
    # A forced stop's server exits by itself: under the sanitizers on a loaded machine its exit
    # (LeakSanitizer's scan) took longer than the 3 s before SIGKILL, and "exited" was not logged.
    e = daemon(extra_env={"OPENMPS_SERVER_KILL_GRACE_MS": "60000"})
    script = "\n".join([
        "get_server_list",
        "get_default_active_thread_percentage",
        "set_default_active_thread_percentage 25",
        "set_default_active_thread_percentage 33.333",
        "set_default_active_thread_percentage 250",
        "set_default_active_thread_percentage abc",
        "get_default_active_thread_percentage",
        "get_default_device_pinned_mem_limit 0",
        "set_default_device_pinned_mem_limit 0 2G",
        "get_default_device_pinned_mem_limit 0",
        "set_default_device_pinned_mem_limit GPU-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff 1536M",
        "get_default_device_pinned_mem_limit 0",
        "set_default_device_pinned_mem_limit 0 lots",
        "set_default_device_pinned_mem_limit GPU-nope 1G",
        "set_default_client_priority 1",
        "get_default_client_priority",
        "set_default_client_priority 5",
        "device_query",
        "device_query --csv",
        "foo",
        "",
        "get_server_status",
        "get_server_status 12345",
        "start_server",
        "ps -x",
        "quit now",
    ]) + "\n"
    out, err, rc = e.ctl(script)
    check(rc == 0, "rc %d: %s" % (rc, err))
    expected = [
        "100.0", "25.0", "33.3",
        'Invalid percentage "250", expected between (0.0, 100.0]',
        'Invalid percentage "abc", expected between (0.0, 100.0]',
        "33.3",
        "2G",
        "1536M",
        'Invalid memory limit "lots" (examples: 2G, 512M; a plain number is MiB)',
        'Invalid device "GPU-nope": give an ordinal below 64 or a GPU UUID',
        "1",
        "Invalid priority value - must be 0 or 1!",
        "Default",
        "Device Ordinal  PCI IDs        UUID                                      Name"
        "                              Attributes",
        "0               0000:10:00.0   GPU-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff  "
        "openmps fake GPU 0                N/A",
        "Default",
        "Device Ordinal,PCI IDs,UUID,Name,Attributes",
        "0,0000:10:00.0,GPU-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff,openmps fake GPU 0,N/A",
        'Unknown command "foo" (help lists the commands)',
        "A server PID is required",
        "Server 12345 not found",
        "A user id (UID) is required to start a new server",
        "Usage: ps [-v|--json] [-p <server PID>]",
        "Usage: quit [-t <seconds>]",
    ]
    got = out.splitlines()
    check(got == expected, "transcript differs:\n" + "\n".join(
        "%s %r" % ("  " if i < len(expected) and g == expected[i] else "!!", g)
        for i, g in enumerate(got)) + "\nexpected:\n" + "\n".join(map(repr, expected)))

    # A server, its status and its clients.
    check(e.cmd("start_server -uid %d" % os.getuid()) == "", "start_server answers nothing")
    spid = wait_for(lambda: e.servers(), what="a server")[0]
    wait_for(lambda: e.cmd("get_server_status %d" % spid) == "ACTIVE", what="ACTIVE")
    check(e.cmd("start_server -uid %d" % os.getuid()) == "", "second start_server is quiet")
    check(e.servers() == [spid], "still one server")
    check(e.cmd("get_active_thread_percentage %d" % spid) == "33.3", "server inherits ATP")
    check(e.cmd("set_active_thread_percentage %d 50" % spid) == "50.0", "set ATP")
    check(e.cmd("get_active_thread_percentage %d" % spid) == "50.0", "get ATP")
    check(e.cmd("get_device_pinned_mem_limit %d 0" % spid) == "1536M", "inherits mem limit")
    check(e.cmd("set_device_pinned_mem_limit %d 0 1G" % spid) == "", "set mem limit")
    check(e.cmd("get_device_pinned_mem_limit %d 0" % spid) == "1G", "get mem limit")
    check(e.cmd("get_device_pinned_mem_limit %d 1" % spid) == "", "unset limit is empty")
    check(e.cmd("get_client_list %d" % spid) == "", "no clients yet")
    check(e.cmd("ps") == "", "ps without clients is empty")
    c1 = e.client("--hold-ms", "eof")
    c2 = e.client("--hold-ms", "eof")
    for c in (c1, c2):
        check(c.stdout.readline().startswith("session server=%d" % spid), "session")
    check(sorted(e.clients(spid)) == sorted([c1.pid, c2.pid]), "get_client_list")
    ps = e.cmd("ps").splitlines()
    check(ps[0] == "PID       ID        SERVER         DEVICE                    "
          "NAMESPACE      COMMAND        ", "ps header: %r" % ps[0])
    check(len(ps) == 3, "ps rows: %r" % ps)
    rows = {int(r.split()[0]): r.split() for r in ps[1:]}
    check(set(rows) == {c1.pid, c2.pid}, "ps pids")
    check(rows[c1.pid][2] == str(spid), "ps server column")
    check(rows[c1.pid][5].endswith("om-test-client"), "ps command column")
    check(rows[c1.pid][3] == "GPU-f0f1f2f3-f4f5-f6f7", "ps device column: %r" % rows[c1.pid])
    dcl = e.cmd("get_device_client_list %d" % spid).splitlines()
    check(dcl[0] == "[0] 0000:10:00.0, openmps fake GPU 0" and
          sorted(dcl[1:]) == sorted(["%d.1" % c1.pid, "%d.1" % c2.pid]),
          "get_device_client_list: %r" % dcl)
    check(e.cmd("ps -p %d" % spid).splitlines() == ps, "ps -p server")
    check(e.cmd("ps -p 1") == "Server 1 not found", "ps -p unknown")
    dq = e.cmd("device_query %d" % spid).splitlines()
    check(dq[4] == "Server %d" % spid and len(dq) == 7, "device_query PID: %r" % dq)
    check(e.cmd("terminate_client %d 999999" % spid) == "Invalid process 999999!\n1",
          "terminate unknown client")
    check(e.cmd("terminate_client %d %d" % (spid, c1.pid)) == "0", "terminate_client")
    out1 = e.ended(c1)
    check(c1.returncode == 4 and "terminated" in out1, "terminated client: %r" % out1)
    wait_for(lambda: e.clients(spid) == [c2.pid], what="client list without c1")
    check(e.cmd("get_server_status %d" % spid) == "ACTIVE", "server goes on")
    # Arguments form, and help.
    out, _, rc = e.ctl("", args=["get_server_list"])
    check(rc == 0 and out.strip() == str(spid), "command as arguments: %r" % out)
    check("terminate_client <server PID> <client PID>" in e.cmd("help"), "help")
    # Graceful shutdown waits for c2, which is then told the server went.
    check(e.cmd("shutdown_server %d" % spid) == "", "shutdown_server")
    time.sleep(0.3)
    check(e.servers() == [spid] and c2.poll() is None, "graceful shutdown waits for clients")
    check(e.cmd("shutdown_server %d -f" % spid) == "", "shutdown_server -f")
    out2 = e.ended(c2)
    check(c2.returncode == 4, "forced shutdown ends the client: %r" % out2)
    wait_for(lambda: e.servers() == [], what="the server to exit")
    check(e.cmd("shutdown_server %d" % spid) == "Server %d not found" % spid, "gone")
    log = e.log()
    check("set_default_active_thread_percentage 250 -> Invalid percentage" in log,
          "errors are logged with the command")
    check("Server %d exited" % spid in log, "server exit logged")
    slog = e.log("server.log")
    check("client %d: active thread percentage 50.0" % c1.pid in slog, "limits in server.log")
    check("Client %d connected" % c1.pid in slog and "Client %d disconnected" % c2.pid in slog,
          "server.log records clients")
    e.quit()
    check(e.daemon.returncode == 0, "daemon exit status %d" % e.daemon.returncode)


def test_frontend_without_daemon(daemon):
    e = daemon(start=False)
    out, err, rc = e.ctl("get_server_list\n")
    check(rc == 1, "rc %d" % rc)
    check(out == "", "no stdout")
    check(e.pipe in err and "openmps-control -d" in err, "message names the pipe dir: " + err)
    out, _, rc = subprocess.run([harness.CONTROL, "-v"], capture_output=True,
                                text=True).stdout, 0, 0
    check(out.startswith("openmps-control "), "-v: " + out)
    p = subprocess.run([harness.CONTROL, "-h"], capture_output=True, text=True)
    check(p.returncode == 0 and "--daemon" in p.stdout, "-h")
    p = subprocess.run([harness.CONTROL, "-x"], capture_output=True, text=True)
    check(p.returncode == 2 and "unknown option -x" in p.stderr, "bad option")


def test_daemon_background_and_sigterm(daemon):
    """-d returns once the daemon listens; SIGTERM removes its files and stops the server."""
    e = daemon(start=False)
    p = subprocess.run([harness.CONTROL, "-d"], env=e.env, capture_output=True, text=True,
                       timeout=20)
    check(p.returncode == 0, "-d: %s" % p.stderr)
    check(os.path.exists(os.path.join(e.pipe, "control.sock")), "socket exists after -d")
    dpid = int(open(os.path.join(e.pipe, "openmps-control.pid")).read())
    check(os.stat(e.pipe).st_mode & 0o777 == (0o755 if os.getuid() == 0 else 0o700),
          "pipe directory mode")
    check(os.stat(os.path.join(e.pipe, "control.sock")).st_mode & 0o777 ==
          (0o666 if os.getuid() == 0 else 0o600), "socket mode")
    e.cmd("start_server -uid %d" % os.getuid())
    spid = wait_for(lambda: e.servers(), what="server")[0]
    c = e.client("--hold-ms", 30000)
    check(c.stdout.readline().startswith("session"), "session")
    os.kill(dpid, signal.SIGTERM)
    out, _ = c.communicate(timeout=30)
    check(c.returncode == 4, "client told its server stopped: %r" % out)
    wait_for(lambda: not os.path.exists("/proc/%d" % dpid), what="the daemon to exit")
    wait_for(lambda: not os.path.exists("/proc/%d" % spid), what="the server to exit")
    check(not os.path.exists(os.path.join(e.pipe, "control.sock")), "socket removed")
    check(not os.path.exists(os.path.join(e.pipe, "openmps-control.pid")), "pid removed")
