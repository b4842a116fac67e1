# SPDX-License-Identifier: MIT
"""NVIDIA's MPS v3 interface (src/control/v3.c, conffile.c, main.c): protocol selection, the
configuration file applied at the start, the module-verb commands and their effect on clients
(routed to a namespace by their cgroup), and what is refused with a message (-m, -S,
partitions, a malformed file)."""
import os
import re
import subprocess
import sys

import harness
from harness import check, wait_for

MEMORY_DRIVER = os.environ.get("OM_MEMORY_DRIVER", "build/tests/memory-driver")
MIB = 1 << 20


def own_cgroup():
    """This process's cgroup (v2 line of /proc/self/cgroup): clients it starts are in it."""
    for line in open("/proc/self/cgroup").read().splitlines():
        if line.startswith("0::"):
            return line[3:]
    raise harness.Fail("no cgroup v2 line in /proc/self/cgroup: the cgroup routing test needs "
                       "one (a cgroup v2 or hybrid host)")


def write_conf(e, text):
    path = os.path.join(e.dir, "config.toml")
    with open(path, "w") as f:
        f.write(text)
    return path


def v3_daemon(daemon, text, extra_env=None):
    e = daemon(extra_env, start=False)
    e.daemon_args = ["-p", "3", "-a", write_conf(e, text)]
    e.start()
    return e


def ctl_args(e, *args, env=None):
    out, err, rc = e.ctl("", args=list(args), env=env)
    return out.rstrip("\n"), err, rc


def table(text):
    return [l.split() for l in text.splitlines()[1:]]


def hold(e, nbytes=MIB, env=None):
    p = subprocess.Popen([MEMORY_DRIVER, "hold", str(nbytes)], env=dict(
        e.env, LD_LIBRARY_PATH=os.path.abspath(harness.SHIM_DIR), **(env or {})),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(p.stdout.readline().strip() == "held", "the client holds its memory")
    return p


def release(*clients):
    for c in clients:
        c.stdin.write("\n")
        c.stdin.flush()
        c.wait(timeout=60)


CONF = """# two servers, three namespaces
schema_version = "1.0"

[servers.training]
active_thread_percentage = "50"
pinned_memory_limit      = "1G"

[servers.training.namespaces.high_priority]
active_thread_percentage = "25"
pinned_memory_limit      = "64M"
cgroup                   = "%s"

[servers.training.namespaces.batch]
active_thread_percentage = 10
client_priority          = "1"
cgroup                   = "/openmps-test-nowhere"

%s
[openmps]
log_level = 3
"""


# The second server: another user's, which only a root daemon may serve.
INFER = """[servers.infer]
uid = 4242

[servers.infer.namespaces.small]
pinned_memory_limit = "0=1G,1=512M"
"""


def test_v3_sockets_are_there_once_the_daemon_answers(daemon):
    """The daemon's control socket takes connections only once every server's and namespace's
    socket of the configuration exists: whatever starts clients on a namespace as soon as the
    daemon answers (a test, a job script, a pod's readiness probe) finds the namespace. Each start
    is watched from a subprocess that looks for the socket's file in a tight loop, connects at
    once when it is there (the file appears only once the daemon listens: it is bound under
    another name and renamed then), and lists the sockets (before the fix, a client let in by the daemon's socket could find its
    namespace's missing and ran natively: CI, 2026-11-28), and reads the daemon's pid file
    (written after the socket listened before, 2026-11-28)."""
    names = ["n%02d" % i for i in range(15)]
    text = 'schema_version = "1.0"\n' + "".join(
        "[servers.s%d]\n" % k + "".join("[servers.s%d.namespaces.%s]\n" % (k, n) for n in names)
        for k in range(4))
    watch = ("import os,socket,sys,time\n"
             "pipe=sys.argv[1]; end=time.time()+60\n"
             "print('spinning', flush=True)\n"
             "while time.time()<end:\n"
             "    if not os.path.exists(os.path.join(pipe,'control.sock')): continue\n"
             "    s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
             "    try: s.connect(os.path.join(pipe,'control.sock'))\n"
             "    except OSError as ex: print('there but refused: %s' % ex); sys.exit(1)\n"
             "    s.close(); break\n"
             "else: print('never there'); sys.exit(1)\n"
             "print(sum(os.path.exists(os.path.join(pipe,'s%d' % k,n,'control.sock'))\n"
             "          for k in range(4) for n in sys.argv[2:]))\n"
             "try: print(open(os.path.join(pipe,'openmps-control.pid')).read().strip())\n"
             "except OSError as ex: print('no pid file: %s' % ex)\n")
    for attempt in range(3):
        e = daemon(start=False)
        e.daemon_args = ["-p", "3", "-a", write_conf(e, text)]
        w = subprocess.Popen([sys.executable, "-c", watch, e.pipe] + names,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        check(w.stdout.readline().strip() == "spinning", "the watcher runs")  # before the start
        e.start()
        out, err = w.communicate(timeout=90)
        check(w.returncode == 0 and out.split()[:1] == [str(4 * len(names))],
              "start %d: namespace sockets there at the first connection: %r %r (want %d)" %
              (attempt, out, err, 4 * len(names)))
        check(out.splitlines()[1:] == [str(e.daemon.pid)],
              "start %d: the pid file there at the first connection: %r" % (attempt, out))
        e.quit()


def test_v3_configuration_at_start_and_routing_by_cgroup(daemon):
    """A file with two servers and three namespaces (as root; a plain user's daemon serves only
    that user: then one server) is applied at the start: server list and
    namespace list show them; a client of the daemon's user lands, by its cgroup, in the
    namespace whose cgroup holds it and gets its limits (the SM share and memory cap ps -v shows,
    and the memory total it sees); once that namespace's cgroup is moved away, the next client
    lands in the default namespace with the server's limits; clients connecting to a server's or
    namespace's socket land there. [openmps] settings reach the
    daemon's environment where it has none (seen in its server's log)."""
    root = os.getuid() == 0  # as a plain user, the file has one server (infer is another's)
    if not root:
        print("not root: the second server (another user's) is left out of the file")
    e = v3_daemon(daemon, CONF % (own_cgroup(), INFER if root else ""))
    out, err, rc = ctl_args(e, "server", "list")
    rows = table(out)
    # NVIDIA's columns (docs/operations.md, "Protocol 3")
    check(rc == 0 and out.split("\n")[0].split() ==
          ["NAME", "UID", "PID", "STATUS", "PIPE-DIRECTORY", "ALLOWED-DEVICES", "CONTEXT-IDS"],
          "server list: %r" % out)
    check([r[0] for r in rows] == ["training", "infer"][:2 if root else 1] and
          rows[0][1:5] == [str(os.getuid()), "-", "Stopped", os.path.join(e.pipe, "training")]
          and (not root or rows[1][1] == "4242"), "server list: %r" % rows)
    out = e.cmd("server list training --format=csv,noheader")
    check(out == "training,%d,-,Stopped,%s,-,-" % (os.getuid(), os.path.join(e.pipe, "training")),
          "server list NAME --format=csv,noheader: %r" % out)
    out = e.cmd("namespace list")
    check(out.split("\n")[0].split() ==
          ["NAME", "SERVER", "SERVER-STATUS", "PINNED-MEMORY-LIMIT", "ACTIVE-THREAD-PERCENTAGE",
           "CLIENT-PRIORITY", "PIPE-DIRECTORY"], "namespace list's header: %r" % out)
    ns = table(out)
    check([r[:6] for r in ns] == [["default", "training", "Stopped", "-", "-", "0"],
                                  ["high_priority", "training", "Stopped", "64M", "25.0", "0"],
                                  ["batch", "training", "Stopped", "-", "10.0", "1"]] +
          ([["default", "infer", "Stopped", "-", "-", "0"],
            ["small", "infer", "Stopped", "0=1G,1=512M", "-", "0"]]
           if root else []), "namespace list %r" % ns)
    check(ns[2][6] == os.path.join(e.pipe, "training", "batch"), "pipe-directory: %r" % ns)
    out = e.cmd("namespace list batch --server=training --format=csv")
    check(out.splitlines() == ["name,server,server-status,pinned-memory-limit,"
                               "active-thread-percentage,client-priority,pipe-directory",
                               "batch,training,Stopped,-,10.0,1," +
                               os.path.join(e.pipe, "training", "batch")],
          "namespace list NAME --format=csv: %r" % out)
    check(e.cmd("namespace get --server=training --name=batch").splitlines() ==
          ["name=batch", "server=training", "server-status=Stopped", "pinned-memory-limit=-",
           "active-thread-percentage=10.0", "client-priority=1",
           "pipe-directory=" + os.path.join(e.pipe, "training", "batch"),
           "cgroup=/openmps-test-nowhere", "cgroup-depth=0", "sm-partition=-"], "namespace get")
    check(e.cmd("namespace get high_priority training pinned-memory-limit") == "64M",
          "namespace get NAMESPACE SERVER FIELD (NVIDIA's form)")

    # Routed by cgroup to high_priority: 25 % and a 64M cap (tighter than the server's).
    a = hold(e)
    rows = {r[0]: r for r in table(e.cmd("ps -v"))}
    check(rows[str(a.pid)][-4] == "25.0" and rows[str(a.pid)][-2] == "64M",
          "the namespace's limits apply: %r" % rows)
    out = e.cmd("client list --all")
    check(out.split("\n")[0].split() == ["PID", "SERVER", "DEVICE", "NAMESPACE", "CMD"],
          "client list's header: %r" % out)
    clients = {r[0]: r for r in table(out)}
    check(clients[str(a.pid)][1:5] == ["training", "0", "high_priority", MEMORY_DRIVER],
          "client list: %r" % clients)
    check(e.cmd("client get %d namespace" % a.pid) == "high_priority" and
          e.cmd("client get %d device" % a.pid) == "0" and
          e.cmd("client get %d cmd" % a.pid) == MEMORY_DRIVER and
          re.fullmatch(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9]",
                       e.cmd("client get %d pci-id" % a.pid)), "client get PID FIELD: %r" %
          e.cmd("client get %d" % a.pid))
    out, err, rc = ctl_args(e, "client", "get", "1")
    check(rc == 1 and out == "Client 1 not found", "client get of no client: %r" % out)
    out = e.cmd("client list --format=csv,noheader")
    check("%d,training,0,high_priority,%s" % (a.pid, MEMORY_DRIVER) in out.splitlines(),
          "client list --format=csv,noheader: %r" % out)
    memcap = subprocess.run([MEMORY_DRIVER, "memcap"], env=dict(
        e.env, LD_LIBRARY_PATH=os.path.abspath(harness.SHIM_DIR)), capture_output=True,
        text=True, timeout=60)
    got = dict(l.split(" ", 1) for l in memcap.stdout.splitlines() if " " in l)
    check(got.get("totalmem") == str(64 * MIB), "the client sees the namespace's memory total: "
          "%r %r" % (memcap.stdout, memcap.stderr))
    srv = table(e.cmd("server list"))[0]
    check(srv[3] == "Ready" and srv[2] == str(e.servers()[0]), "server list: running %r" % srv)
    check(e.cmd("server get training status") == "Ready" and
          e.cmd("server get training pid") == srv[2], "server get NAME FIELD")
    # [openmps] log_level = 3 reached the server (from the daemon's environment, servers.c):
    # its timeline lines (docs/operations.md, "Environment")
    check("timeline client %d " % a.pid in e.log("server.log"),
          "[openmps] sets the daemon's environment: %r" % e.log("server.log")[-1500:])

    # Its cgroup moved away: the next client is the default namespace's, with the server's.
    check(e.cmd("namespace set --server=training --name=high_priority --cgroup=/elsewhere") == "",
          "namespace set")
    b = hold(e)
    rows = {r[0]: r for r in table(e.cmd("ps -v"))}
    check(rows[str(b.pid)][-4] == "50.0" and rows[str(b.pid)][-2] == "1G",
          "the server's limits in the default namespace: %r" % rows)
    clients = {r[0]: r for r in table(e.cmd("client list"))}
    check(clients[str(b.pid)][3] == "default" and clients[str(a.pid)][3] == "high_priority",
          "client list: %r" % clients)

    # Routed by the socket it connects to: $CUDA_MPS_PIPE_DIRECTORY/<server>/<namespace>/, whose
    # cgroup does not hold it, and <server>/ (its default namespace).
    c = hold(e, env={"CUDA_MPS_PIPE_DIRECTORY": os.path.join(e.pipe, "training", "batch")})
    d = hold(e, env={"CUDA_MPS_PIPE_DIRECTORY": os.path.join(e.pipe, "training")})
    rows = {r[0]: r for r in table(e.cmd("ps -v"))}
    check(rows[str(c.pid)][-4:-1] == ["10.0", "1", "1G"], "batch's limits: %r" % rows)
    check(rows[str(d.pid)][-4:-1] == ["50.0", "0", "1G"], "the default's: %r" % rows)
    clients = {r[0]: r for r in table(e.cmd("client list --server=training"))}
    check(clients[str(c.pid)][3] == "batch" and clients[str(d.pid)][3] == "default",
          "client list --server: %r" % clients)
    check(os.path.exists(os.path.join(e.pipe, "training", "high_priority", "control.sock")) and
          (not root or os.path.exists(os.path.join(e.pipe, "infer", "small", "control.sock"))),
          "every namespace has its socket")
    check(e.cmd("namespace delete --server=training --name=batch --force") == "",
          "namespace delete (--force: its client c runs)")
    check(not os.path.exists(os.path.join(e.pipe, "training", "batch")),
          "a deleted namespace's socket and directory are gone")
    check(re.search(r"Accepting client %d \(uid %d\) for server %s as client \d+, namespace "
                    r"batch\n" % (c.pid, os.getuid(), srv[2]), e.log()),
          "control.log names the namespace: %r" % e.log()[-2000:])
    release(a, b, c, d)
    e.quit()
    check(not os.path.exists(os.path.join(e.pipe, "training")), "the daemon removes them at exit")


def test_v3_namespace_and_server_commands(daemon):
    """namespace create/set/get/delete/list and server create/delete change what they say; errors
    are answered with a message and, given as arguments, exit 1; the default namespace stays;
    the partition module says static partitioning is off; legacy commands still answer; -q stops the daemon."""
    e = v3_daemon(daemon, 'schema_version = "1.0"\n[servers.main]\n')
    check(e.cmd("namespace create --server=main --name=small --active-thread-percentage=20 "
                "--pinned-memory-limit=2G --client-priority=1") == "", "namespace create")
    check(e.cmd("namespace get --server=main --name=small").splitlines()[3:6] ==
          ["pinned-memory-limit=2G", "active-thread-percentage=20.0", "client-priority=1"],
          "namespace get after create")
    check(e.cmd("namespace set small --server=main --active-thread-percentage 30") == "",
          "namespace set (the namespace positional, a value as the next word)")
    check(e.cmd("namespace get small main active-thread-percentage") == "30.0",
          "namespace get after set")
    check(e.cmd("namespace create tiny server=main client-priority=1") == "" and
          e.cmd("namespace get tiny main client-priority") == "1", "key=value without dashes")
    cases = [
        (["namespace", "create", "--server=main", "--name=small"],
         "Namespace small already exists in server main"),
        (["namespace", "create", "--server=nope", "--name=x"], "Server nope not found"),
        (["namespace", "create", "--server=main", "--name=a/b"], "Invalid namespace name"),
        (["namespace", "set", "--server=main", "--name=small", "--active-thread-percentage=0"],
         "Invalid active thread percentage \"0\""),
        (["namespace", "set", "--server=main", "--name=small", "--bogus=1"],
         "Unknown option \"--bogus\""),
        (["namespace", "delete", "--server=main", "--name=default"],
         "The default namespace of a server cannot be deleted"),
        (["namespace", "get", "--server=main"], "A namespace and its server are required"),
        (["namespace", "get", "small", "main", "colour"], "Unknown field \"colour\" (fields: "
         "name, server, server-status,"),
        (["namespace", "list", "--format=xml"], "Invalid format \"xml\": table or csv"),
        (["server", "list", "--format=csv,nohead"], "Invalid format \"csv,nohead\""),
        (["server", "list", "nope"], "Server nope not found"),
        (["server", "get", "main", "a", "b"], "Unexpected argument \"b\""),
        (["namespace", "create", "x", "--server=main", "--name=y"], "The name is given twice"),
        (["server", "create", "--name=main"], "Server main already exists"),
        (["server", "create", "--name=" + "a" * 70], "Invalid server name"),  # not cut to 63
        (["server", "frob"], "Unknown command \"server frob\""),
        (["partition", "list"], "Static SM partitioning is not enabled"),
        (["client", "list", "--all=yes"], "Option --all takes no value"),
        # NVIDIA's other modules: a verb they do not have is answered with their usage;
        # context-share, which NVIDIA documents no verb of, with where its state shows
        (["device", "frob"], "Usage: device list"),
        (["feature", "list"], "Usage: feature describe"),
        (["memacct", "get"], "Usage: memacct describe"),
        (["context-share", "get"], "NVIDIA's MPS v3 documents no commands of the context-share"),
        # a set with nothing to set
        (["server", "set", "main"], "server set main: give at least one option to set"),
        (["namespace", "set", "small", "--server=main"],
         "namespace set small: give at least one option to set"),
    ]
    for args, want in cases:
        out, err, rc = ctl_args(e, *args)
        check(rc == 1 and out.startswith(want), "%r: rc %d %r (want %r)" % (args, rc, out, want))
    check(e.cmd("namespace delete --server=main --name=small") == "" and
          e.cmd("namespace delete tiny --server=main") == "", "namespace delete")
    check([r[0] for r in table(e.cmd("namespace list --server=main"))] == ["default"],
          "namespace list after delete")
    # server create starts the server as start_server does; delete stops it.
    check(e.cmd("server delete --name=main") == "", "server delete")
    out, err, rc = ctl_args(e, "server", "create", "--name=other")
    check(rc == 0 and out == "", "server create: %d %r %r" % (rc, out, err))
    spid = wait_for(lambda: e.servers(), what="the created server")[0]
    rows = table(e.cmd("server list"))
    check(rows[0][0] == "other" and rows[0][2] == str(spid), "server list: %r" % rows)
    check(e.cmd("get_default_active_thread_percentage") == "100.0", "legacy commands answer")
    helptext = e.cmd("help")
    check("start_server -uid <UID> [-mlopart]" in helptext and "server list" in helptext and
          "namespace delete NAMESPACE --server=NAME [--force]" in helptext, "help: %r" % helptext)
    check(e.cmd("namespace get help") == "namespace get NAMESPACE SERVER [FIELD]" and
          e.cmd("client help").startswith("client list [--all]") and
          len(e.cmd("server help").splitlines()) == 5, "MODULE [VERB] help: %r" %
          e.cmd("server help"))
    out, err, rc = ctl_args(e, "namespace", "frob", "help")
    check(rc == 1 and out.startswith("Unknown command \"namespace frob\""), "frob help: %r" % out)
    check(e.cmd("server delete other --force") == "", "server delete --force")
    wait_for(lambda: e.servers() == [], what="the deleted server to stop")
    out, err, rc = e.ctl("", args=["-q"])
    check(rc == 0, "-q: %d %r" % (rc, err))
    e.daemon.wait(timeout=30)


def test_v3_protocol_selection(daemon):
    """v2 is the default: a module-verb command is refused with the way to protocol 3; the
    variable wins over -p; a front-end follows the running daemon whatever -p it is given."""
    e = daemon()
    out, err, rc = ctl_args(e, "-p", "3", "server", "list")
    check(rc == 1 and "this daemon runs protocol 2: start it with -p 3" in out,
          "a v2 daemon refuses v3 commands, whatever the front-end's -p: %r" % out)
    for cmd in ("lspart", "sm_partition add 0 2"):
        out = e.cmd(cmd)
        check(out.startswith("Static SM partitioning is not enabled: start the daemon with -S"),
              "%s on a daemon of protocol 2: %r" % (cmd, out))
    e.quit()
    e2 = daemon(dict(CUDA_MPS_PROTOCOL_VERSION="3"), start=False)
    e2.daemon_args = ["-p", "2"]
    e2.start()
    env2 = dict(e2.env)
    env2.pop("CUDA_MPS_PROTOCOL_VERSION")
    out, err, rc = ctl_args(e2, "-p", "2", "server", "list", env=env2)
    check(rc == 0 and out.startswith("NAME"), "the variable won over -p 2: %r %r" % (out, err))
    out, err, rc = ctl_args(e2, "-p", "7", "server", "list", env=dict(
        env2, CUDA_MPS_PROTOCOL_VERSION="9"))
    check(rc == 2 and "protocol \"9\" (CUDA_MPS_PROTOCOL_VERSION): give 2 or 3" in err,
          "a bad protocol: %r" % err)


def test_v3_refusals_name_the_reason(daemon, tmp_path):
    """A malformed file is refused at the start with its line named, and so is what openmps
    cannot do (SM partitions) and servers on a daemon of protocol 2; -m says why it is refused (the shared address space), -S what is
    missing; -a wants -d or -f."""
    e = daemon(start=False)
    bad = tmp_path / "bad.toml"
    bad.write_text('schema_version = "1.0"\n\n[servers.a]\nuid = 0\nfrobnicate = true\n')
    p = subprocess.run([harness.CONTROL, "-f", "-p", "3", "-a", str(bad)], env=e.env,
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 1 and "bad.toml: line 5: unknown key \"frobnicate\" in [servers.a]"
          in p.stderr, "malformed file: %d %r" % (p.returncode, p.stderr))
    check(not os.path.exists(os.path.join(e.pipe, "control.sock")), "no daemon left listening")
    parts = tmp_path / "parts.toml"
    parts.write_text('schema_version = "1.0"\n[servers.a]\n[[servers.a.devices]]\n'
                     'uuid = "GPU-1"\n')
    p = subprocess.run([harness.CONTROL, "-f", "-p", "3", "-a", str(parts)], env=e.env,
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 1 and "line 3: server a: No device has the UUID GPU-1" in p.stderr,
          p.stderr)
    p = subprocess.run([harness.CONTROL, "-f", "-a", str(parts)], env=e.env, capture_output=True,
                       text=True, timeout=30)
    check(p.returncode == 1 and "line 2: [servers.a]: named servers and namespaces need protocol "
          "3" in p.stderr, "a file with servers on a daemon of protocol 2: %r" % p.stderr)
    for args, want in ((["-m", "-d"], "share their server's GPU address space"),
                       (["-S"], "-S starts the daemon with static SM partitioning: give it with"),
                       (["-a", str(bad)], "-a applies a configuration at the daemon's start"),
                       (["-p"], "option -p needs an argument")):
        p = subprocess.run([harness.CONTROL] + args, env=e.env, capture_output=True, text=True,
                           timeout=30)
        check(p.returncode == 2 and want in p.stderr, "%r: %d %r" % (args, p.returncode, p.stderr))


def test_v3_server_devices_and_limits(daemon):
    """A named server's allowed_devices become its process's devices (the client sees only
    those, renumbered); server set changes the running server's limits as set_* do, server get
    reads them; allowed_devices beside the daemon's own CUDA_VISIBLE_DEVICES is refused."""
    from test_visible_daemon import list_devices, listing
    e = v3_daemon(daemon, 'schema_version = "1.0"\n[servers.main]\nallowed_devices = "1"\n'
                  'active_thread_percentage = "60"\n', {"FAKECUDA_DEVICES": "3"})
    check(list_devices(e) == listing([1]), "the client sees the allowed device only: %r" %
          list_devices(e))
    spid = e.servers()[0]
    check(e.cmd("get_active_thread_percentage %d" % spid) == "60.0", "the server's share")
    check(e.cmd("server set --name=main --active-thread-percentage=40 --client-priority=1") == "",
          "server set")
    check(e.cmd("get_active_thread_percentage %d" % spid) == "40.0", "server set reaches it")
    check(e.cmd("server get --name=main").splitlines() ==
          ["name=main", "uid=%d" % os.getuid(), "pid=%d" % spid, "status=Ready",
           "pipe-directory=" + os.path.join(e.pipe, "main"), "allowed-devices=1",
           "active-thread-percentage=40.0", "pinned-memory-limit=-", "client-priority=1"],
          "server get: %r" % e.cmd("server get --name=main"))
    check(e.cmd("server get main allowed-devices") == "1", "server get NAME FIELD")
    out, err, rc = ctl_args(e, "server", "set", "--name=main", "--allowed-devices=1;2")
    check(rc == 1 and out.startswith("Invalid devices"), "bad devices: %r" % out)
    e.quit()
    f = daemon({"CUDA_VISIBLE_DEVICES": "0"}, start=False)
    path = write_conf(f, 'schema_version = "1.0"\n[servers.main]\nallowed_devices = "1"\n')
    p = subprocess.run([harness.CONTROL, "-f", "-p", "3", "-a", path], env=f.env,
                       capture_output=True, text=True, timeout=30)
    check(p.returncode == 1 and "line 3: server main: allowed_devices and the daemon's "
          "CUDA_VISIBLE_DEVICES both choose devices" in p.stderr, p.stderr)


def test_v3_another_users_socket_is_refused(daemon):
    """A named server's and its namespaces' sockets take only their user's (and root's)
    connections: another user is refused at once with a message naming the server's uid, and
    the daemon goes on serving; the server's own user gets in (docs/security.md)."""
    harness.need_root()
    e = v3_daemon(daemon, 'schema_version = "1.0"\n[servers.infer]\nuid = 12011\n'
                  '[servers.infer.namespaces.small]\npinned_memory_limit = "1G"\n')
    code = ("import os,socket,sys\n"
            "os.setgroups([]); os.setgid(int(sys.argv[2])); os.setuid(int(sys.argv[2]))\n"
            "s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
            "s.settimeout(float(sys.argv[3]))\n"
            "s.connect(sys.argv[1])\n"
            "try: d=s.recv(70000)\n"
            "except socket.timeout: d=b'(nothing: let in)'\n"
            "print(repr(d))\n")
    for sock in (os.path.join(e.pipe, "infer", "control.sock"),
                 os.path.join(e.pipe, "infer", "small", "control.sock")):
        p = subprocess.run([sys.executable, "-c", code, sock, "12010", "20"],
                           capture_output=True, text=True, timeout=60)
        check("server infer's, which serves uid 12011" in p.stdout,
              "uid 12010 on %s: %r %r" % (sock, p.stdout, p.stderr))
    # its own user is let in: the daemon waits for its hello (no refusal within 2 s)
    p = subprocess.run([sys.executable, "-c", code, sock, "12011", "2"],
                       capture_output=True, text=True, timeout=60)
    check("let in" in p.stdout, "uid 12011 on %s: %r %r" % (sock, p.stdout, p.stderr))
    check("refusing pid" in e.log(), "the refusal is logged: %r" % e.log()[-1000:])
    check(table(e.cmd("server list"))[0][:2] == ["infer", "12011"], "still serving")


class ShareClient:
    """remote_driver share (tests/cpu/remote_share.c) on a namespace's socket: each round says
    the SM count and the memory total the client is shown."""

    def __init__(self, e, sock_dir):
        self.p = subprocess.Popen([harness.REMOTE_DRIVER, "share"], env=dict(
            e.env, LD_LIBRARY_PATH=os.path.abspath(harness.SHIM_DIR),
            CUDA_MPS_PIPE_DIRECTORY=sock_dir), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        self.pid = self.p.pid
        self.last = self.read()

    def read(self):
        f = self.p.stdout.readline().split()
        check(len(f) == 9 and f[-1] == "ok", "a round: %r (%s)" % (
            f, "" if f else self.p.stderr.read()))
        return int(f[3]), int(f[7])  # SMs, memory total

    def again(self):
        self.p.stdin.write("again\n")
        self.p.stdin.flush()
        self.last = self.read()
        return self.last

    def settled(self, want, what):
        """A change reaches the server after the daemon's answer: rounds until one shows it."""
        wait_for(lambda: self.again() == want, what=what + " (last round: %r)" % (self.last,))

    def end(self):
        self.p.stdin.write("end\n")
        self.p.stdin.flush()
        out, err = self.p.communicate(timeout=60)
        check(self.p.returncode == 0 and "share ok" in out, "client ends: %r %r" % (out, err))


def test_v3_namespace_set_and_delete_reach_running_clients(daemon):
    """namespace set reaches the namespace's running clients through their server (SRV_CLIENT_
    LIMITS): the SM share (the SM count shown), the memory cap (the memory total shown) and the
    priority (the server's log) change at their next call, ps -v and client list follow; a client
    of another namespace does not change. server set reaches both namespaces' clients. A cap set
    below what a client holds takes nothing back. namespace delete of a namespace with running
    clients is refused without --force; with it the clients carry on in the default namespace,
    with its limits. Bad values are refused by name and change nothing."""
    e = v3_daemon(daemon, 'schema_version = "1.0"\n[servers.main]\n'
                  '[servers.main.namespaces.small]\nactive_thread_percentage = "50"\n'
                  '[servers.main.namespaces.other]\npinned_memory_limit = "2G"\n'
                  '[servers.main.namespaces.held]\n')
    gib = 1 << 30
    a = ShareClient(e, os.path.join(e.pipe, "main", "small"))
    b = ShareClient(e, os.path.join(e.pipe, "main", "other"))
    check(a.last == (64, 16 * gib) and b.last == (132, 2 * gib), "at first: %r %r" %
          (a.last, b.last))

    check(e.cmd("namespace set --server=main --name=small --active-thread-percentage=25 "
                "--pinned-memory-limit=1G --client-priority=1") == "", "namespace set")
    a.settled((32, gib), "small's client at 25 % and 1G")
    check(b.again() == (132, 2 * gib), "other's client unchanged: %r" % (b.last,))
    rows = {r[0]: r for r in table(e.cmd("ps -v"))}
    check(rows[str(a.pid)][-4:-1] == ["25.0", "1", "1G"] and
          rows[str(b.pid)][-4:-1] == ["100.0", "0", "2G"], "ps -v: %r" % rows)
    # the server logs a change once it made all of it: the client may see it first
    slog = wait_for(lambda: re.search(r"client %d: priority 0 -> 1" % a.pid,
                                      e.log("server.log")) and e.log("server.log"),
                    what="the server's lines of a's change")
    check(re.search(r"client %d: device 0 pinned memory limit none -> 1G" % a.pid, slog) and
          not re.search(r"client %d: .* -> " % b.pid, slog),
          "the server applied a's changes, none of b's: %r" % slog[-2000:])

    # bad values: refused by name, nothing changes
    for args, want in (
            (["--active-thread-percentage=101"], "Invalid active thread percentage \"101\""),
            (["--pinned-memory-limit=lots"], "Invalid pinned memory limit \"lots\""),
            (["--client-priority=2"], "Invalid client priority \"2\""),
            (["--force"], "Unknown option \"--force\"")):
        out, err, rc = ctl_args(e, "namespace", "set", "--server=main", "--name=small", *args)
        check(rc == 1 and out.startswith(want), "%r: %d %r" % (args, rc, out))
    check(e.cmd("namespace get --server=main --name=small").splitlines()[3:6] ==
          ["pinned-memory-limit=1G", "active-thread-percentage=25.0", "client-priority=1"],
          "unchanged by the refused sets")

    # server set: its limits reach every namespace's clients (each keeps its namespace's)
    check(e.cmd("server set --name=main --active-thread-percentage=50") == "", "server set")
    b.settled((64, 2 * gib), "other's client at the server's 50 %")
    check(a.again() == (32, gib), "small's client keeps its tighter 25 %%: %r" % (a.last,))

    # a cap below what a client holds: nothing taken back, the client carries on
    h = hold(e, 64 * MIB, env={"CUDA_MPS_PIPE_DIRECTORY": os.path.join(e.pipe, "main", "held")})
    check(e.cmd("namespace set --server=main --name=held --pinned-memory-limit=16M") == "",
          "a cap below what its client holds")
    wait_for(lambda: re.search(r"client %d: device 0 pinned memory limit none -> 16M" % h.pid,
                               e.log("server.log")), what="the server to apply the 16M cap")
    release(h)
    check(h.returncode == 0, "the client over its new cap ran on and ended: %r" %
          h.stderr.read())

    # delete: refused while clients run there, unless --force; then they go to the default one
    out, err, rc = ctl_args(e, "namespace", "delete", "--server=main", "--name=small")
    check(rc == 1 and out.startswith("Namespace small of server main has 1 running client(s): "
                                     "give --force"), "delete refused: %d %r" % (rc, out))
    out, err, rc = ctl_args(e, "namespace", "delete", "--server=main", "--name=small",
                            "--force=yes")
    check(rc == 1 and out.startswith("Option --force takes no value"), "--force=yes: %r" % out)
    check(e.cmd("namespace delete --server=main --name=small --force") == "", "delete --force")
    a.settled((64, 16 * gib), "small's client in the default namespace (the server's 50 %)")
    clients = {r[0]: r for r in table(e.cmd("client list"))}
    check(clients[str(a.pid)][3] == "default" and clients[str(b.pid)][3] == "other",
          "client list after the delete: %r" % clients)
    check("namespace small of server main deleted: its 1 client(s) go to the default namespace"
          in e.log(), "control.log says so: %r" % e.log()[-1500:])
    wait_for(lambda: re.search(r"client %d: priority 1 -> 0" % a.pid, e.log("server.log")),
             what="a's priority back to the default namespace's (server.log)")
    check(not os.path.exists(os.path.join(e.pipe, "main", "small")), "small's socket is gone")
    out, err, rc = ctl_args(e, "server", "delete", "main")
    check(rc == 1 and out.startswith("Server main has 2 running client(s): give --force"),
          "server delete refused while its clients run: %d %r" % (rc, out))
    a.end()
    b.end()
