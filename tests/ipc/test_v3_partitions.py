# SPDX-License-Identifier: MIT
"""Protocol 3 and static SM partitions (control/v3.c, partition.c): a namespace's sm_partition
(its clients run in that partition as if they had set CUDA_MPS_SM_PARTITION; one naming another
is refused), from the configuration file and from namespace create|set --sm-partition; the
partition module (list, create, delete); client terminate PID."""
import os
import re
import subprocess

import harness
import test_partitions
from harness import REMOTE_DRIVER, SHIM_DIR, check, wait_for
from test_partitions import FAKE_UUID, first_round, launch_greens, owned


def answer(e, *args):
    """(stdout, rc) of one command given as arguments (exit 1 for a protocol-3 error)"""
    out, err, rc = e.ctl("", args=list(args))
    return out.rstrip("\n"), rc


def share_client(e, namespace=None, part=None):
    """remote-driver share through namespace's socket (None: the main one), with
    CUDA_MPS_SM_PARTITION=part (None: unset)"""
    env = dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR))
    env.pop("CUDA_MPS_SM_PARTITION", None)
    if namespace:
        env["CUDA_MPS_PIPE_DIRECTORY"] = os.path.join(e.pipe, "main", namespace)
    if part is not None:
        env["CUDA_MPS_SM_PARTITION"] = part
    p = subprocess.Popen([REMOTE_DRIVER, "share"], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    e.children.append((p, os.devnull))
    return p


def end(c):
    out, err = c.communicate("end\n", timeout=60)
    check(c.returncode == 0 and "share ok" in out, "the client ends: %r %r" % (out, err))


def refused(c):
    _, err = c.communicate(timeout=60)
    check(c.returncode != 0 and "915" in err, "the client is refused (915): %r" % err)
    return err


def green_sms(glog, llog):
    """green context -> how many SMs it owns, for those the launches so far went to"""
    sets = owned(glog)
    return {g: bin(sets[g]).count("1") for g in set(launch_greens(glog, llog)) if g}


# test_partitions.CONF's two partitions of device 0 (small: 4 chunks; rest: the others and the
# SMs left over), and two namespaces that route their clients into them
CONF = test_partitions.CONF.replace("%s", "%(uuid)s") + '''
[servers.main.namespaces.little]
[[servers.main.namespaces.little.devices]]
uuid = "%(uuid)s"
sm_partition = "%(little)s"

[servers.main.namespaces.big]
[[servers.main.namespaces.big.devices]]
uuid = "%(prefix)s"
sm_partition = "rest"
'''


def test_namespace_sm_partition_from_the_configuration_file(daemon):
    """[[servers.S.namespaces.N.devices]] uuid and sm_partition route N's clients into that
    partition: a client of namespace little (its socket) that names no partition sees small's 32
    SMs and its kernels run in a green context of 32 SMs; one of big, rest's 100 (the UUID given
    by a prefix); naming its own namespace's partition is taken, naming another is refused with
    a message naming both; a client of the default namespace, which has none, must name one;
    namespace get shows the partition; a partition a namespace uses cannot be deleted; a file
    whose namespace names a partition that does not exist fails the start naming its line."""
    e = daemon(start=False)
    glog, llog = os.path.join(e.dir, "green.log"), os.path.join(e.dir, "launch.log")
    e.env.update({"FAKECUDA_GREEN_LOG": glog, "FAKECUDA_LAUNCH_STREAM_LOG": llog})
    path = os.path.join(e.dir, "config.toml")
    conf = CONF % {"uuid": FAKE_UUID, "prefix": FAKE_UUID[:12], "little": "small"}
    open(path, "w").write(conf)
    e.daemon_args = ["-p", "3", "-a", path]
    e.start()
    rows = {r[1]: r for r in (l.split() for l in answer(e, "partition", "list")[0].splitlines()[1:])}
    small = "%s/%s" % (FAKE_UUID, rows["small"][0])
    rest = "%s/%s" % (FAKE_UUID, rows["rest"][0])
    check(answer(e, "namespace", "get", "little", "main", "sm-partition") == (small, 0) and
          answer(e, "namespace", "get", "big", "main", "sm-partition") == (rest, 0) and
          answer(e, "namespace", "get", "default", "main", "sm-partition") == ("-", 0),
          "namespace get NS main sm-partition")

    a = share_client(e, "little")
    check(first_round(a) == (32, 32), "a client of little sees small's 32 SMs")
    check(list(green_sms(glog, llog).values()) == [32],
          "its kernels ran in a green context of 32 SMs: %r" % green_sms(glog, llog))
    b = share_client(e, "big")
    check(first_round(b) == (100, 100), "a client of big sees rest's 100 SMs")
    check(sorted(green_sms(glog, llog).values()) == [32, 100], "and in one of 100: %r" %
          green_sms(glog, llog))
    sets = owned(glog)
    ga, gb = sorted(green_sms(glog, llog), key=lambda g: bin(sets[g]).count("1"))
    check(sets[ga] & sets[gb] == 0, "the two namespaces' SMs are disjoint")
    c = share_client(e, "little", part="small")  # its namespace's own, by name
    check(first_round(c) == (32, 32), "naming its namespace's partition is taken")
    clients = {r[0]: r for r in (l.split() for l in answer(e, "client", "list")[0].splitlines()[1:])}
    check(clients[str(a.pid)][3] == "little" and clients[str(b.pid)][3] == "big",
          "client list: %r" % clients)

    err = refused(share_client(e, "little", part=rest))
    check("CUDA_MPS_SM_PARTITION=%s is not the SM partition of its namespace little (%s)" %
          (rest, small) in err, "another partition than its namespace's: %r" % err)
    err = refused(share_client(e))  # the default namespace, no partition of its own
    check("every client names its partition in CUDA_MPS_SM_PARTITION" in err, err)
    check(re.search(r"Client %d: SM partition [0-9a-f]{12}, its namespace little: 32 SMs" %
                    a.pid, e.log()), "control.log names the namespace's partition")

    out, rc = answer(e, "partition", "delete", "small")
    check(rc == 1 and "is in use by 2 client(s)" in out, "delete of a partition in use: %r" % out)
    for x in (a, c):
        end(x)
    out, rc = wait_for(lambda: (lambda r: r if "client(s)" not in r[0] else None)(
        answer(e, "partition", "delete", "small")), what="its clients gone")
    check(rc == 1 and out == "Partition %s is the SM partition of namespace little of server "
          "main: change the namespace first (namespace set ... --sm-partition=none)" % small,
          "delete of a namespace's partition: %r" % out)
    end(b)
    e.quit()

    for text, want in (
            (CONF % {"uuid": FAKE_UUID, "prefix": FAKE_UUID, "little": "nope"},
             "line 14: namespace little: No SM partition %s/nope" % FAKE_UUID),
            ((CONF + '[[servers.main.namespaces.little.devices]]\nuuid = "%(uuid)s"\n'
              'sm_partition = "rest"\n') %
             {"uuid": FAKE_UUID, "prefix": FAKE_UUID, "little": "small"},
             "line 22: namespace little: %s/rest and partition" % FAKE_UUID),
            (CONF.replace('sm_partition = "rest"\n', '') %
             {"uuid": FAKE_UUID, "prefix": FAKE_UUID, "little": "small"},
             "line 19: a device of namespace big without its sm_partition")):
        open(path, "w").write(text)
        r = subprocess.run([harness.CONTROL, "-f", "-p", "3", "-a", path], env=e.env,
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 1 and want in r.stderr, "%r: %r" % (want, r.stderr))


def test_partition_module_and_namespace_sm_partition_commands(daemon):
    """partition create|list|delete (protocol 3's module over the partitions sm_partition makes):
    create prints the partition as CUDA_MPS_SM_PARTITION names it, list shows each with its
    chunks, SMs and clients; namespace create --sm-partition routes the namespace's clients
    there; namespace set --sm-partition moves the clients that come next (running ones keep
    theirs), =none clears it; every bad command names its problem; without static partitions the
    module says so; on a daemon of protocol 2 it is a command of protocol 3."""
    e = daemon(start=False)
    path = os.path.join(e.dir, "config.toml")
    open(path, "w").write('schema_version = "1.0"\n[servers.main]\n')
    e.daemon_args = ["-S", "-p", "3", "-a", path]
    e.start()
    u = FAKE_UUID
    out, rc = answer(e, "partition", "list")
    check(rc == 0 and out.split() == ["ID", "NAME", "DEVICE", "CHUNKS", "SMS", "CLIENTS"],
          "partition list, none: %r" % out)
    pa, rc = answer(e, "partition", "create", "--device=%s" % u, "--chunks=4", "--name=fast")
    check(rc == 0 and re.fullmatch(re.escape(u) + r"/[0-9a-f]{12}", pa), "create: %r" % pa)
    pb, rc = answer(e, "partition", "create", u[:12], "12")  # positional, a UUID's prefix
    check(rc == 0 and re.fullmatch(re.escape(u) + r"/[0-9a-f]{12}", pb), "create: %r" % pb)
    rows = [l.split() for l in answer(e, "partition", "list")[0].splitlines()[1:]]
    check(rows == [[pa.split("/")[1], "fast", u, "4", "32", "0"],
                   [pb.split("/")[1], "-", u, "12", "96", "0"]], "partition list: %r" % rows)
    out, _ = answer(e, "partition", "list", "--device=%s" % u[:8], "--format=csv,noheader")
    check(out.splitlines()[0] == "%s,fast,%s,4,32,0" % (pa.split("/")[1], u),
          "partition list --format=csv,noheader: %r" % out)
    check(e.cmd("lspart").splitlines()[3].split()[1] == pa.split("/")[1],
          "lspart lists what partition create made")

    check(answer(e, "namespace", "create", "fastns", "--server=main", "--sm-partition=fast") ==
          ("", 0), "namespace create --sm-partition")
    check(answer(e, "namespace", "get", "fastns", "main", "sm-partition") == (pa, 0),
          "namespace get: its partition")
    a = share_client(e, "fastns")
    check(first_round(a) == (32, 32), "the namespace's client runs in fast")
    check(answer(e, "partition", "list")[0].splitlines()[1].split()[-1] == "1",
          "partition list counts its client")
    check(answer(e, "namespace", "set", "fastns", "--server=main", "--sm-partition=" + pb) ==
          ("", 0), "namespace set --sm-partition")
    b = share_client(e, "fastns")
    check(first_round(b) == (96, 96), "the next client runs in the new partition")
    check([r.split()[-1] for r in answer(e, "partition", "list")[0].splitlines()[1:]] ==
          ["1", "1"], "the running one stays in fast")
    end(a)
    wait_for(lambda: answer(e, "partition", "delete", "fast") == ("", 0),
             what="delete once its client left and its namespace moved on")
    out, rc = answer(e, "partition", "delete", pb)
    check(rc == 1 and "is in use by 1 client(s)" in out, "a partition in use: %r" % out)
    end(b)
    out, rc = wait_for(lambda: (lambda r: r if "client(s)" not in r[0] else None)(
        answer(e, "partition", "delete", pb)), what="its client gone")
    check(rc == 1 and "is the SM partition of namespace fastns of server main" in out,
          "a namespace's partition: %r" % out)
    check(answer(e, "namespace", "set", "fastns", "--server=main", "--sm-partition=none") ==
          ("", 0) and answer(e, "namespace", "get", "fastns", "main", "sm-partition") ==
          ("-", 0), "--sm-partition=none")
    check(answer(e, "partition", "delete", pb.split("/")[1]) == ("", 0), "delete by its ID")
    check(answer(e, "partition", "list")[0].count("\n") == 0, "none left")

    pc, _ = answer(e, "partition", "create", "--device=%s" % u, "--chunks=2")
    pd, _ = answer(e, "partition", "create", "--device=%s" % u, "--chunks=2", "--name=two")
    for args, want in [
            (["partition", "create", "--device=%s" % u, "--chunks=13"],
             "Failed to fulfill the requested SM partition of 13 chunks"),
            (["partition", "create", "--device=%s" % u, "--chunks=x"],
             "Invalid number of chunks \"x\""),
            (["partition", "create", "--device=GPU-0000", "--chunks=1"],
             "No device has the UUID GPU-0000"),
            (["partition", "create", "--device=%s" % u, "--chunks=1", "--name=two"],
             "Device 0 has an SM partition two already"),
            (["partition", "create", "--device=%s" % u, "--chunks=1", "--name=a/b"],
             "Invalid partition name \"a/b\""),
            (["partition", "create", "--chunks=1"], "Usage: partition create --device=UUID"),
            (["partition", "delete", "nope"], "No SM partition nope"),
            (["partition", "delete"], "Usage: partition delete PARTITION"),
            (["partition", "frob"], "Usage: partition list|create|delete"),
            (["partition", "list", "--device=GPU-0000"], "No device has the UUID GPU-0000"),
            (["namespace", "create", "x", "--server=main", "--sm-partition=nope"],
             "Invalid --sm-partition: No SM partition nope"),
            (["namespace", "create", "x", "--server=main", "--sm-partition=%s,two" % pc],
             "Invalid --sm-partition: two and partition %s are both on device %s" %
             (pc.split("/")[1], u))]:
        out, rc = answer(e, *args)
        check(rc == 1 and out.startswith(want), "%r: %d %r (want %r)" % (args, rc, out, want))
    check(answer(e, "namespace", "list", "x", "--server=main")[0].count("\n") == 0,
          "a refused namespace create made nothing")
    check("partition create --device=UUID --chunks=N" in e.cmd("help") and
          answer(e, "partition", "help")[0].count("\n") == 2, "help")
    e.quit()

    plain = daemon(start=False)
    plain.daemon_args = ["-p", "3"]
    plain.start()
    out, rc = answer(plain, "partition", "list")
    check(rc == 1 and out.startswith("Static SM partitioning is not enabled"),
          "without static partitions: %r" % out)
    plain.quit()
    legacy = daemon()
    out, rc = answer(legacy, "partition", "list")
    check(rc == 1 and "is a command of protocol 3; this daemon runs protocol 2" in out,
          "on protocol 2: %r" % out)


def test_client_terminate(daemon):
    """client terminate PID (protocol 3) ends the client's session as terminate_client does:
    nothing answered, the client's next call fails with CUDA_ERROR_MPS_CLIENT_TERMINATED (810),
    it leaves client list and the server goes on; a pid that is no client, a bad pid, a missing
    one are each refused with exit status 1."""
    e = daemon(start=False)
    path = os.path.join(e.dir, "config.toml")
    open(path, "w").write('schema_version = "1.0"\n[servers.main]\n')
    e.daemon_args = ["-p", "3", "-a", path]
    e.start()
    env = dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR))
    p = subprocess.Popen([REMOTE_DRIVER, "until_ended"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    e.children.append((p, os.devnull))
    check(p.stdout.readline().strip() == "ready", "client ready")
    for args, want in ((["client", "terminate", "999999"], "Client 999999 not found"),
                       (["client", "terminate", "x1"], "Invalid pid \"x1\""),
                       (["client", "terminate"], "A client's pid is required"),
                       (["client", "terminate", "1", "2"], "Unexpected argument \"2\"")):
        out, rc = answer(e, *args)
        check(rc == 1 and out.startswith(want), "%r: %d %r" % (args, rc, out))
    check(answer(e, "client", "terminate", str(p.pid)) == ("", 0), "client terminate PID")
    out, _ = p.communicate(timeout=60)
    check("ended 810" in out, "the client's session ended: %r" % out)
    wait_for(lambda: answer(e, "client", "list")[0].count("\n") == 0,
             what="client list without it")
    check(answer(e, "server", "get", "main", "status") == ("Ready", 0), "the server goes on")
    check(answer(e, "client", "terminate", "help") == ("client terminate PID", 0), "help")
