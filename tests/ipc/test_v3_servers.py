# SPDX-License-Identifier: MIT
"""Servers that are not one per user (src/control/v3.c, servers.c, daemon.c): protocol 3's named
servers, several for one user, each its own process with its own devices and limits, reached by
socket, cgroup or UID; and multi-user servers (-m), which serve several users in one process and
so one GPU address space, refused unless the operator opts in (docs/security.md, "Multi-user
servers")."""
import json
import os
import re
import subprocess

import harness
from harness import (as_user, check, ctl_as, need_binaries_for_other_users, proc_uid, wait_for)
from test_v3 import MEMORY_DRIVER, ctl_args, hold, own_cgroup, release, table, v3_daemon
from test_visible_daemon import list_devices, listing

TWO = """schema_version = "1.0"

[servers.first]
allowed_devices = "0"
active_thread_percentage = "50"

[servers.second]
allowed_devices = "1"
active_thread_percentage = "30"
pinned_memory_limit = "1G"

[servers.second.namespaces.small]
pinned_memory_limit = "64M"
"""


def ps_rows(e):
    return {r[0]: r for r in table(e.cmd("ps -v"))}


def test_v3_several_servers_for_one_user(daemon):
    """Two named servers of one user (the file's, then one `server create` makes) each run their
    own process, at once, with their own devices and limits: a client on the main socket goes to
    the user's first named server (by UID), one on a server's or namespace's socket to that
    server, one whose cgroup a namespace of the second names to that namespace; server list,
    get_server_list, ps, client list name each client's server; shutdown_server and server
    delete stop one process and leave the others."""
    e = v3_daemon(daemon, TWO, {"FAKECUDA_DEVICES": "2"})
    me = os.getuid()
    # by UID: the first named server, its device 0 only
    check(list_devices(e) == listing([0]), "the UID route's server has device 0: %r" %
          list_devices(e))
    a = hold(e)
    # by socket: the second server (its device 1, renumbered 0), and its namespace's socket
    b = hold(e, env={"CUDA_MPS_PIPE_DIRECTORY": os.path.join(e.pipe, "second")})
    c = hold(e, env={"CUDA_MPS_PIPE_DIRECTORY": os.path.join(e.pipe, "second", "small")})
    env2 = dict(e.env, CUDA_MPS_PIPE_DIRECTORY=os.path.join(e.pipe, "second"))
    check(list_devices(_with_env(e, env2)) == listing([1]), "the second server has device 1")
    rows = {r[0]: r for r in table(e.cmd("server list"))}
    check(set(rows) == {"first", "second"} and rows["first"][3] == rows["second"][3] == "Ready"
          and rows["first"][1] == rows["second"][1] == str(me), "server list: %r" % rows)
    p1, p2 = int(rows["first"][2]), int(rows["second"][2])
    check(p1 != p2 and sorted(e.servers()) == sorted([p1, p2]),
          "two processes, both in get_server_list: %r %r" % (rows, e.servers()))
    ps = ps_rows(e)
    check(ps[str(a.pid)][2] == str(p1) and ps[str(b.pid)][2] == str(p2) and
          ps[str(c.pid)][2] == str(p2), "ps: each client's server: %r" % ps)
    check(ps[str(a.pid)][-4] == "50.0" and ps[str(b.pid)][-4] == "30.0" and
          ps[str(b.pid)][-2] == "1G" and ps[str(c.pid)][-2] == "64M",
          "each server's limits, the namespace's within the second's: %r" % ps)
    clients = {r[0]: r for r in table(e.cmd("client list"))}
    check(clients[str(a.pid)][1:4:2] == ["first", "default"] and
          clients[str(b.pid)][1:4:2] == ["second", "default"] and
          clients[str(c.pid)][1:4:2] == ["second", "small"], "client list: %r" % clients)
    check(set(e.cmd("get_client_list %d" % p2).split()) == {str(b.pid), str(c.pid)},
          "get_client_list of the second")
    check(e.cmd("server get second pid") == str(p2) and e.cmd("server get first pid") == str(p1),
          "server get")
    out = e.cmd("device_query")
    check(out.count("GPU-") == 2, "device_query's default: every device, not one named server's "
          "allowed_devices: %r" % out)
    # server set reaches the second's process only
    check(e.cmd("server set second --active-thread-percentage=20") == "", "server set")
    check(e.cmd("get_active_thread_percentage %d" % p2) == "20.0" and
          e.cmd("get_active_thread_percentage %d" % p1) == "50.0", "set reached one process")

    # by cgroup: a namespace of the second names this test's cgroup: a main-socket client goes
    # there, not to the first
    check(e.cmd("namespace create mine --server=second --cgroup=%s "
                "--active-thread-percentage=10" % own_cgroup()) == "", "namespace create")
    d = hold(e)
    ps = ps_rows(e)
    clients = {r[0]: r for r in table(e.cmd("client list"))}
    check(ps[str(d.pid)][2] == str(p2) and clients[str(d.pid)][1:4:2] == ["second", "mine"] and
          ps[str(d.pid)][-4] == "10.0", "routed by cgroup to the second: %r %r" % (ps, clients))

    # a third, made by a command, for the same user: refused before, its own process now
    out, err, rc = ctl_args(e, "server", "create", "third", "--uid=%d" % me)
    check(rc == 0 and out == "", "server create of a user's third server: %d %r" % (rc, out))
    p3 = wait_for(lambda: [p for p in e.servers() if p not in (p1, p2)], what="the third")[0]
    wait_for(lambda: e.cmd("server get third status") == "Ready", what="the third ready")
    check(e.cmd("server get third pid") == str(p3), "the third's pid")

    # stopping one leaves the others and their clients
    check(e.cmd("shutdown_server %d -f" % p3) == "", "shutdown_server of the third")
    wait_for(lambda: p3 not in e.servers(), what="the third to stop")
    check(e.cmd("server get third status") == "Stopped" and
          sorted(e.servers()) == sorted([p1, p2]), "the others run")
    out, err, rc = ctl_args(e, "server", "delete", "second", "--force")
    check(rc == 0, "server delete --force: %r" % out)
    wait_for(lambda: e.servers() == [p1], what="the second's process to go")
    release(b, c, d)  # their sessions were ended: they carry on to their end
    check(a.poll() is None and str(a.pid) in e.cmd("ps"), "the first's client runs on")
    log = e.log()
    check(re.search(r"Starting new server %d for user %d \(named server second\)" % (p2, me), log),
          "control.log names the named server: %r" % log[-2000:])
    release(a)
    e.quit()


def _with_env(e, env):
    """An object list_devices takes, with e's directories and another environment."""
    class View:
        pass
    v = View()
    v.env = env
    v.dir = e.dir
    return v


def test_v3_user_route_falls_back_to_the_plain_server(daemon):
    """A user without a named server keeps its plain server (protocol 2's), beside another
    user's... here: the daemon's own user with none, then one created while its plain server
    runs: the plain one keeps its clients, the next client goes to the named one (a process of
    its own), and server list shows both."""
    e = v3_daemon(daemon, 'schema_version = "1.0"\n')
    a = hold(e)
    plain = e.servers()
    check(len(plain) == 1, "one plain server: %r" % plain)
    rows = table(e.cmd("server list"))
    check(rows == [["-", str(os.getuid()), str(plain[0]), "Ready", e.pipe, "-", "-"]],
          "the plain server's row: %r" % rows)
    check(e.cmd("server create mine --active-thread-percentage=40") == "", "server create")
    named = wait_for(lambda: [p for p in e.servers() if p not in plain], what="the named one")[0]
    b = hold(e)
    ps = ps_rows(e)
    check(ps[str(a.pid)][2] == str(plain[0]) and ps[str(b.pid)][2] == str(named) and
          ps[str(b.pid)][-4] == "40.0", "old client on the plain, new on the named: %r" % ps)
    rows = {r[0]: r for r in table(e.cmd("server list"))}
    check(rows["mine"][2] == str(named) and rows["-"][2] == str(plain[0]), "both: %r" % rows)
    release(a, b)


def test_multiuser_refused_without_the_opt_in(daemon, tmp_path):
    """-m is refused unless the operator opts in (OPENMPS_MULTIUSER_SHARED_ADDRESS_SPACE=1, or
    the file's [openmps] multiuser_shared_address_space), saying why; with it, a list of users is
    required, and root must not be in it; -m wants -d or -f."""
    e = daemon(start=False)
    env = dict(e.env)
    for k in ("OPENMPS_MULTIUSER_SHARED_ADDRESS_SPACE", "OPENMPS_MULTIUSER_UIDS"):
        env.pop(k, None)

    def run(args, **more):
        p = subprocess.run([harness.CONTROL] + args, env=dict(env, **more), capture_output=True,
                           text=True, timeout=30)
        return p.returncode, p.stderr

    rc, err = run(["-f", "-m"])
    check(rc == 2 and "share their server's GPU address space, so one user's kernels could read "
          "and write another user's memory" in err and
          "OPENMPS_MULTIUSER_SHARED_ADDRESS_SPACE=1" in err, "no opt-in: %d %r" % (rc, err))
    rc, err = run(["-f", "-m"], OPENMPS_MULTIUSER_SHARED_ADDRESS_SPACE="yes")
    check(rc == 2 and "is refused" in err, "an opt-in other than 1: %d %r" % (rc, err))
    rc, err = run(["-m", "ps"])
    check(rc == 2 and "-m starts the daemon in multi-user mode: give it with -d or -f" in err,
          "-m on a front-end: %r" % err)
    check(not os.path.exists(os.path.join(e.pipe, "control.sock")), "no daemon started")
    if os.getuid() != 0:
        rc, err = run(["-f", "-m"], OPENMPS_MULTIUSER_SHARED_ADDRESS_SPACE="1",
                      OPENMPS_MULTIUSER_UIDS="1000,1001")
        check(rc == 2 and "serves only its own user" in err, "a plain user's -m: %r" % err)
        return
    for uids, want in (("", "must name the users (two or more"),
                       ("1000", "must name the users (two or more"),
                       ("1000,x", "give the users' ids, comma-separated"),
                       ("0,1000", "names root (0)")):
        rc, err = run(["-f", "-m"], OPENMPS_MULTIUSER_SHARED_ADDRESS_SPACE="1",
                      OPENMPS_MULTIUSER_UIDS=uids)
        check(rc == 2 and want in err, "OPENMPS_MULTIUSER_UIDS=%r: %d %r" % (uids, rc, err))
    conf = tmp_path / "nope.toml"
    conf.write_text('schema_version = "1.0"\n[openmps]\nmultiuser_uids = "12031,12032"\n')
    rc, err = run(["-f", "-m", "-a", str(conf)])
    check(rc == 2 and "is refused" in err, "a file with the list but no opt-in: %r" % err)


def test_multiuser_server_serves_the_listed_users(daemon, tmp_path):
    """With the opt-in (here the file's [openmps] table) -m serves the listed users' clients in
    one server, at once, run as the first listed user, with no module cache; each client is
    accounted to its own uid (ps --json, the metrics' labels) and shown to its own user only; a user
    not listed still waits for that server to be idle and gets a server of its own."""
    harness.need_root()
    need_binaries_for_other_users()
    e = daemon(start=False)
    for k in ("OPENMPS_MULTIUSER_SHARED_ADDRESS_SPACE", "OPENMPS_MULTIUSER_UIDS"):
        e.env.pop(k, None)
    conf = tmp_path / "multi.toml"
    conf.write_text('schema_version = "1.0"\n[openmps]\nmultiuser_shared_address_space = true\n'
                    'multiuser_uids = "12031,12032"\n')
    os.chmod(tmp_path, 0o755)
    textfile = os.path.join(e.dir, "openmps.prom")
    e.env.update({"OPENMPS_METRICS_TEXTFILE": textfile, "OPENMPS_METRICS_TEXTFILE_S": "1"})
    e.daemon_args = ["-m", "-a", str(conf)]
    e.start()
    os.chmod(e.dir, 0o755)
    a = e.client("--pings", 1, "--hold-ms", "eof", preexec=as_user(12031))
    check(a.stdout.readline().startswith("session"), "user 12031 served")
    b = e.client("--pings", 1, "--hold-ms", "eof", preexec=as_user(12032))
    line = b.stdout.readline()
    check(line.startswith("session") and "queued=0" in line,
          "user 12032 served at once, beside 12031: %r %s" % (line, open(b.errpath).read()))
    spid = e.servers()
    check(len(spid) == 1 and re.search(r"server=%d " % spid[0], line), "one server: %r %r" %
          (spid, line))
    spid = spid[0]
    check(proc_uid(spid) == 12031, "it runs as the first listed user")
    environ = open("/proc/%d/environ" % spid, "rb").read().split(b"\0")
    check(b"OPENMPS_MODULE_CACHE=off" in environ and
          b"OPENMPS_SERVER_SHARED_USERS=12032" in environ, "its environment: %r" % environ)
    wait_for(lambda: {str(a.pid), str(b.pid)} <= set(e.cmd("ps").split()), what="both in ps")
    js = json.loads(e.cmd("ps --json"))["clients"]
    check({c["pid"]: c["uid"] for c in js} == {a.pid: 12031, b.pid: 12032} and
          all(c["server_pid"] == spid for c in js), "ps --json: each client's uid: %r" % js)
    check(set(e.clients(spid)) == {a.pid, b.pid}, "root sees both")

    def labelled():
        text = open(textfile).read() if os.path.exists(textfile) else ""
        return all(re.search(r'openmps_client_info\{pid="%d",uid="%d"' % (c.pid, uid), text)
                   for c, uid in ((a, 12031), (b, 12032)))
    wait_for(labelled, what="the metrics to label each client with its own uid")
    for uid, mine, other in ((12031, a, b), (12032, b, a)):
        out = ctl_as(e, uid, "ps\nget_client_list %d\n" % spid)
        check(out.count(str(mine.pid)) == 2 and str(other.pid) not in out,
              "uid %d sees its own client only: %r" % (uid, out))
    check("multi-user mode (-m" in e.log() and "Server %d is a multi-user server" % spid in e.log(),
          "control.log says so: %r" % e.log()[-1500:])
    check("multi-user: the clients of other users too" in e.log("server.log"),
          "server.log says so")
    # a user not listed sees nothing of the shared server, in its statistics either
    js = json.loads(ctl_as(e, 12033, "stats --json"))
    check(not js["servers"], "user 12033, not listed, sees the shared server: %r" % js)
    # a user not listed waits, as for any other user's server, then gets its own
    c = e.client("--pings", 1, preexec=as_user(12033))
    wait_for(lambda: "(uid 12033) queued behind" in e.log() or c.poll() is not None,
             what="user 12033 to be queued")
    check(c.poll() is None, "12033 waits while the shared server has clients")
    a.communicate(timeout=60)
    b.communicate(timeout=60)
    out, _ = c.communicate(timeout=60)
    check(c.returncode == 0 and "queued=1" in out, "12033 served after: %r %s" %
          (out, open(c.errpath).read()))
    spid_c = int(re.search(r"server=(\d+)", out).group(1))
    check(spid_c != spid, "a server of its own")


def test_named_servers_of_one_user_wait_behind_another_users_client(daemon):
    """User U has named servers a and b; its client x runs on a; user V's client y waits behind
    it; a later client z of U on b's socket waits too, behind y (one user at a time, oldest
    first), and b is not started meanwhile (it once was, then stopped idle by y's pass, then
    started again by z's, hundreds of times a second). Then y is served, then z."""
    harness.need_root()
    need_binaries_for_other_users()
    e = v3_daemon(daemon, 'schema_version = "1.0"\n[servers.a]\nuid = 12041\n'
                  '[servers.b]\nuid = 12041\n')
    os.chmod(e.dir, 0o755)
    x = e.client("--pings", 1, "--hold-ms", "eof", preexec=as_user(12041))
    check(x.stdout.readline().startswith("session"), "x served")
    y = e.client("--pings", 1, preexec=as_user(12042))
    wait_for(lambda: "(uid 12042) queued behind" in e.log(), what="12042 queued")
    envb = dict(e.env, CUDA_MPS_PIPE_DIRECTORY=os.path.join(e.pipe, "b"))
    z = e.client("--pings", 1, env=envb, preexec=as_user(12041))
    wait_for(lambda: "(uid 12041) queued behind" in e.log(), what="z queued")
    started = e.log().count("Starting new server")
    import time
    time.sleep(1.5)  # a loop started tens of servers in this time
    check(e.log().count("Starting new server") == started == 1,
          "servers started while y waits: %d" % e.log().count("Starting new server"))
    check(y.poll() is None and z.poll() is None, "y and z wait")
    x.communicate(timeout=60)
    out_y, _ = y.communicate(timeout=60)
    out_z, _ = z.communicate(timeout=60)
    check(y.returncode == 0 and "queued=1" in out_y, "y served after x: %r %s" %
          (out_y, open(y.errpath).read()))
    check(z.returncode == 0 and "queued=1" in out_z, "z served after y: %r %s" %
          (out_z, open(z.errpath).read()))
    check(e.log().count("Starting new server") == 3, "a, then y's, then b: %r" % e.log()[-2000:])


def test_a_starting_server_is_not_stopped_by_another_users_client(daemon):
    """User U's client starts U's server (a slow start, as a GPU's); user V's client arrives
    meanwhile: it waits behind U's (whose turn has begun) instead of stopping the starting server,
    which has no client yet (U's client was then refused with "failed to start")."""
    harness.need_root()
    need_binaries_for_other_users()
    e = daemon({"FAKECUDA_INIT_DELAY_MS": "1500"})
    os.chmod(e.dir, 0o755)
    u = e.client("--pings", 1, preexec=as_user(12051))
    wait_for(lambda: "Starting new server" in e.log(), what="U's server to start")
    v = e.client("--pings", 1, preexec=as_user(12052))
    out_u, _ = u.communicate(timeout=120)
    out_v, _ = v.communicate(timeout=120)
    check(u.returncode == 0 and out_u.startswith("session"), "U served: %r %s" %
          (out_u, open(u.errpath).read()))
    check(v.returncode == 0 and "queued=1" in out_v, "V served after U: %r %s" %
          (out_v, open(v.errpath).read()))
    check(e.log().count("Starting new server") == 2 and "failed to start" not in e.log(),
          "one start each: %r" % e.log()[-2000:])
