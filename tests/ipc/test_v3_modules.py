# SPDX-License-Identifier: MIT
"""NVIDIA's MPS v3 modules past server, client and namespace (src/control/v3cmd.c): sm-partition
create|delete|list in NVIDIA's form and answers, device list, feature describe|enable|disable,
memacct describe|set (its audit log in control.log), context-share; server create's automatic
name and --locality-domains; server set --uid; the configuration file's features and
locality_domains."""
import csv
import io
import os
import re
import subprocess

import harness
from harness import check, wait_for
from test_partitions import FAKE_UUID, first_round
from test_v3 import ctl_args, hold, table, v3_daemon, write_conf
from test_v3_partitions import end, share_client

HEX12 = r"[0-9a-f]{12}"


def rows_csv(text):
    return list(csv.reader(io.StringIO(text)))


def test_sm_partition_module_in_nvidias_form(daemon):
    """sm-partition create NAME --server --device --chunks [--include-remainder=BOOL] makes a
    partition of a named server's device (no -S needed; a client that names none still runs, on
    the whole device), prints NVIDIA's
    two lines (its SM count, then the CUDA_MPS_SM_PARTITION value a client runs in); list shows
    NVIDIA's columns and what is left of the device as "unallocated"; delete prints NVIDIA's
    line; each bad input is refused with a line naming it."""
    e = v3_daemon(daemon, 'schema_version = "1.0"\n[servers.main]\n')
    out = e.cmd("sm-partition list")
    check(out.splitlines()[0].split() == ["SERVER", "DEVICE", "NAME", "CHUNKS", "SM-COUNT",
                                          "INCLUDE-REMAINDER", "STATUS", "VISIBLE-UUID"],
          "sm-partition list's header: %r" % out)
    check(table(out) == [["-", FAKE_UUID, "-", "16", "132", "-", "unallocated", "-"]],
          "before any partition the whole device is unallocated: %r" % out)

    out, err, rc = ctl_args(e, "sm-partition", "create", "small", "--server=main", "--device=0",
                            "--chunks=4")
    lines = out.splitlines()
    check(rc == 0 and len(lines) == 2 and
          lines[0] == "SM partition 'small' created on device %s (sm-count=32)" % FAKE_UUID and
          re.fullmatch(r"CUDA_MPS_SM_PARTITION=%s/%s" % (FAKE_UUID, HEX12), lines[1]),
          "sm-partition create: %d %r %r" % (rc, out, err))
    small = lines[1].split("=", 1)[1]
    out, err, rc = ctl_args(e, "sm-partition", "create", "big", "--server", "main",
                            "--device=" + FAKE_UUID[:12], "--chunks=12",
                            "--include-remainder=true")
    check(rc == 0 and "(sm-count=100)" in out, "12 chunks and the 4 SMs left over: %r" % out)
    big = out.splitlines()[1].split("=", 1)[1]
    # server main starts with its first client: its partitions are "configured" till then
    check(table(e.cmd("sm-partition list --server=main")) ==
          [["main", FAKE_UUID, "small", "4", "32", "false", "configured", small],
           ["main", FAKE_UUID, "big", "12", "100", "true", "configured", big]],
          "the two partitions, nothing unallocated: %r" % e.cmd("sm-partition list"))
    check(e.cmd("lspart").count(FAKE_UUID[:12]) >= 2, "lspart lists them too: %r" %
          e.cmd("lspart"))

    c = share_client(e, part=small)
    check(first_round(c) == (32, 32), "a client naming small runs on its 32 SMs")
    end(c)
    c = share_client(e)  # no -S: a client that names no partition runs as before them
    check(first_round(c) == (132, 132), "a client naming none runs on the whole device")
    end(c)
    check(e.cmd("sm-partition list --device=0 --all --format=csv,noheader").splitlines()[0] ==
          "main,%s,small,4,32,false,created,%s" % (FAKE_UUID, small),
          "created once its server runs (csv): %r" % e.cmd("sm-partition list"))

    cases = [
        (["sm-partition", "create", "x", "--device=0", "--chunks=1"],
         "Usage: sm-partition create NAME --server=SERVER --device=ORDINAL|UUID --chunks=N"),
        (["sm-partition", "create", "x", "--server=nope", "--device=0", "--chunks=1"],
         "Server nope not found"),
        (["sm-partition", "create", "x", "--server=main", "--device=0", "--chunks=0"],
         "Invalid number of chunks \"0\": a positive integer"),
        (["sm-partition", "create", "x", "--server=main", "--device=0", "--chunks=1",
          "--include-remainder=maybe"], "Invalid value \"maybe\" of include-remainder"),
        (["sm-partition", "create", "x", "--server=main", "--device=7", "--chunks=1"],
         "No device 7"),
        (["sm-partition", "create", "x", "--server=main", "--device=0", "--chunks=1"],
         "Failed to fulfill the requested SM partition of 1 chunks"),
        (["sm-partition", "create", "a/b", "--server=main", "--device=0", "--chunks=1"],
         "Invalid partition name"),
        (["sm-partition", "delete", "nope", "--server=main", "--device=0"],
         "No SM partition nope of server main on device " + FAKE_UUID),
        (["sm-partition", "delete", "small"], "Usage: sm-partition delete NAME"),
        (["sm-partition", "frob"], "Usage: sm-partition list|create|delete"),
    ]
    for args, want in cases:
        out, err, rc = ctl_args(e, *args)
        check(rc == 1 and out.startswith(want), "%r: rc %d %r (want %r)" % (args, rc, out, want))

    out, err, rc = ctl_args(e, "sm-partition", "delete", "small", "--server=main", "--device=0")
    check(rc == 0 and out == "SM partition 'small' deleted from device %s" % FAKE_UUID,
          "sm-partition delete: %d %r" % (rc, out))
    check(table(e.cmd("sm-partition list"))[-1] ==
          ["-", FAKE_UUID, "-", "4", "32", "-", "unallocated", "-"],
          "its 4 chunks are unallocated again: %r" % e.cmd("sm-partition list"))
    helps = e.cmd("sm-partition help").splitlines()
    check(len(helps) == 3 and all(h.startswith("sm-partition ") for h in helps) and
          not any("sm-partition" in h for h in e.cmd("partition help").splitlines()),
          "sm-partition help, and partition help without it: %r" % helps)


def test_device_feature_memacct_and_server_options(daemon):
    """device list: each named server's devices as its clients number them; feature describe
    shows memacct and context-share enabled, enable is accepted, disable refused with the
    reason; memacct set audit_log=true makes control.log say what a leaving client held;
    server create without a name is uid_<uid>; --locality-domains and SM partitions exclude
    each other; server set --uid of a running server is refused."""
    e = v3_daemon(daemon, 'schema_version = "1.0"\n[servers.main]\nallowed_devices = "2,0"\n'
                  '[servers.all]\n[servers.cut]\nallowed_devices = "1,7,0"\n'
                  '[servers.twice]\nallowed_devices = "0,0"\n', {"FAKECUDA_DEVICES": "3"})
    every = rows_csv(e.cmd("device list --server=all --format=csv"))
    check(every[0] == ["ordinal", "server", "pci-id", "device-uuid", "name", "total-sms",
                       "total-chunks", "attributes"], "device list's header: %r" % every[0])
    check([r[0] for r in every[1:]] == ["0", "1", "2"] and
          all(r[1] == "all" and r[3].startswith("GPU-") and r[5] == "132" and r[6] == "16" and
              r[7] == "-" for r in every[1:]), "server all sees the three devices: %r" % every)
    mine = rows_csv(e.cmd("device list --server=main --format=csv,noheader"))
    check([(r[0], r[3]) for r in mine] == [("0", every[3][3]), ("1", every[1][3])],
          "server main's clients see devices 2 and 0 as 0 and 1: %r" % mine)
    # read as the driver reads CUDA_VISIBLE_DEVICES: the list ends at a device that does not
    # exist; a device named twice leaves none
    cut = rows_csv(e.cmd("device list --server=cut --format=csv,noheader"))
    check([(r[0], r[3]) for r in cut] == [("0", every[2][3])], "1,7,0 is device 1: %r" % cut)
    check(e.cmd("device list --server=twice --format=csv,noheader") == "", "0,0 is none")
    check(len(rows_csv(e.cmd("device list --format=csv,noheader"))) == 6, "every server's rows")
    out, err, rc = ctl_args(e, "device", "list", "--server=nope")
    check(rc == 1 and out == "Server nope not found", out)

    check(rows_csv(e.cmd("feature describe --format=csv,noheader")) ==
          [["memacct", "enabled (default)", "memacct", "-"],
           ["context-share", "enabled (default)", "context-share", "-"]],
          "feature describe: %r" % e.cmd("feature describe"))
    one = e.cmd("feature describe memacct").splitlines()
    check(len(one) == 2 and one[1].split()[0] == "memacct", "feature describe memacct: %r" % one)
    for args, rc_want, want in (
            (["feature", "enable", "memacct"], 0, ""),
            (["feature", "disable", "memacct"], 1, "memacct cannot be disabled: openmps accounts"),
            (["feature", "disable", "context-share"], 1,
             "context-share cannot be disabled: every client of an openmps server shares"),
            (["feature", "enable", "frob"], 1, "Unknown feature \"frob\""),
            (["memacct", "set"], 1, "Usage: memacct set audit_log=true|false"),
            (["memacct", "set", "audit_log=maybe"], 1, "Invalid value \"maybe\" of audit_log"),
            (["memacct", "set", "audit_log=true", "audit-log=false"], 1, "Usage: memacct set"),
            (["context-share", "describe"], 1, "NVIDIA's MPS v3 documents no commands")):
        out, err, rc = ctl_args(e, *args)
        check(rc == rc_want and out.startswith(want), "%r: %d %r" % (args, rc, out))

    check(e.cmd("memacct describe --format=csv,noheader") == "enabled,true\naudit_log,false",
          "memacct describe")
    check(e.cmd("memacct set audit_log=true") == "" and
          e.cmd("memacct describe --format=csv,noheader").endswith("audit_log,true"),
          "memacct set audit_log=true")
    c = hold(e, env={"CUDA_MPS_PIPE_DIRECTORY": os.path.join(e.pipe, "main")})
    pid = c.pid
    c.stdin.close()  # end of input: it exits without freeing its 1 MiB
    c.wait(timeout=60)
    wait_for(lambda: re.search(r"memacct: client %d \(uid %d, server main, namespace default\) "
                               r"left holding 1M of device memory" % (pid, os.getuid()),
                               e.log()), what="the memacct audit line: the 1 MiB it held")

    # sm-partition's --device is the server's: main's device 1 is the machine's device 0, and the
    # machine's device 1 is not main's
    out, err, rc = ctl_args(e, "sm-partition", "create", "m", "--server=main", "--device=1",
                            "--chunks=1")
    check(rc == 0 and every[1][3] in out, "main's device 1 is device 0: %r" % out)
    out, err, rc = ctl_args(e, "sm-partition", "create", "n", "--server=main",
                            "--device=" + every[2][3], "--chunks=1")
    check(rc == 1 and out.startswith("No device %s among server main's" % every[2][3]), out)
    out, err, rc = ctl_args(e, "namespace", "create", "x", "--server=all",
                            "--sm-partition=" + every[1][3] + "/m")
    check(rc == 1 and "is an SM partition of server main, not of server all" in out,
          "another server's partition: %r" % out)
    # names are a server's: server all may have its own m on the same device
    out, err, rc = ctl_args(e, "sm-partition", "create", "m", "--server=all", "--device=0",
                            "--chunks=1")
    check(rc == 0 and every[1][3] in out, "all's m beside main's: %r" % out)
    out, err, rc = ctl_args(e, "sm-partition", "create", "m", "--server=all", "--device=0",
                            "--chunks=1")
    check(rc == 1 and "has an SM partition m of server all already" in out, out)
    mine = [r for r in rows_csv(e.cmd("sm-partition list --device=0 --format=csv,noheader"))
            if r[2] == "m"]
    check(sorted(r[0] for r in mine) == ["all", "main"] and mine[0][7] != mine[1][7],
          "two partitions m, one a server: %r" % mine)
    out, err, rc = ctl_args(e, "namespace", "create", "y", "--server=all",
                            "--sm-partition=" + every[1][3] + "/m")
    check(rc == 0, "all's namespace takes all's m by name: %r" % out)
    check(e.cmd("namespace get y all sm-partition") == [r[7] for r in mine if r[0] == "all"][0],
          "and it is all's, not main's: %r" % e.cmd("namespace get y all sm-partition"))
    check(e.cmd("namespace delete y --server=all") == "" and
          e.cmd("sm-partition delete m --server=all --device=0").startswith(
              "SM partition 'm' deleted"), "all's m deleted")
    check([r[0] for r in rows_csv(e.cmd("sm-partition list --format=csv,noheader"))
           if r[2] == "m"] == ["main"], "main's m stays")
    out, err, rc = ctl_args(e, "server", "delete", "main")
    check(rc == 1 and out.startswith("Server main has SM partitions"), out)
    check(e.cmd("sm-partition delete m --server=main --device=1").startswith(
        "SM partition 'm' deleted"), "m deleted")

    uid = os.getuid()
    if os.geteuid() == 0:  # the user of a server with no process changes; a running one's not
        check(e.cmd("server set all --uid=4242") == "" and
              e.cmd("server get all uid") == "4242", "server set --uid of a stopped server")
    check(e.cmd("server create --uid=%d" % uid) == "", "server create without a name")
    check("uid_%d" % uid in [r[0] for r in table(e.cmd("server list"))],
          "its name is uid_<uid>, as NVIDIA's: %r" % e.cmd("server list"))
    check(e.cmd("server create ld --locality-domains=true") == "", "--locality-domains=true")
    out, err, rc = ctl_args(e, "sm-partition", "create", "p", "--server=ld", "--device=0",
                            "--chunks=1")
    check(rc == 1 and "locality domains on" in out, "partitions refused beside them: %r" % out)
    check(e.cmd("server set ld --locality-domains=false") == "" and
          e.cmd("sm-partition create p --server=ld --device=0 --chunks=1").startswith(
              "SM partition 'p' created"), "after --locality-domains=false")
    for args, want in ((["server", "set", "ld", "--locality-domains=true"],
                        "Server ld has SM partitions"),
                       (["server", "set", "ld", "--locality-domains=yes"],
                        "Invalid value \"yes\" of locality-domains"),
                       (["server", "set", "main", "--uid=4242"],
                        "openmps-control runs as uid" if uid else "Server main runs as uid")):
        out, err, rc = ctl_args(e, *args)
        check(rc == 1 and out.startswith(want), "%r: %d %r" % (args, rc, out))


def test_configuration_features_and_locality_domains(daemon, tmp_path):
    """[features.memacct] audit_log = true turns the audit log on; a feature turned off
    (enabled = false, default_socket = "off") is refused at the start naming its line, as is
    locality_domains = true beside SM partitions; locality_domains = true alone is taken."""
    e = daemon(start=False)
    for text, want in (
            ('[features.memacct]\nenabled = false\n', "line 3: openmps cannot turn this feature "
             "off"),
            ('[features.context-share]\ndefault_socket = "off"\n', "line 3: openmps cannot"),
            ('[features.context-share]\nenabled = false\n', "line 3: openmps cannot"),
            ('[servers.a]\nlocality_domains = true\n[[servers.a.devices]]\nuuid = "%s"\n'
             '[[servers.a.devices.sm_partitions]]\nname = "p"\nchunks = 1\n' % FAKE_UUID,
             "line 3: server a: locality_domains = true beside SM partitions")):
        path = tmp_path / "c.toml"
        path.write_text('schema_version = "1.0"\n' + text)
        p = subprocess.run([harness.CONTROL, "-f", "-p", "3", "-a", str(path)], env=e.env,
                           capture_output=True, text=True, timeout=30)
        check(p.returncode == 1 and want in p.stderr, "%r: %d %r" % (text, p.returncode,
                                                                     p.stderr))
    e.daemon_args = ["-p", "3", "-a", write_conf(
        e, 'schema_version = "1.0"\n[features.memacct]\naudit_log = true\n'
        '[servers.a]\nlocality_domains = true\n')]
    e.start()
    check(e.cmd("memacct describe --format=csv,noheader") == "enabled,true\naudit_log,true",
          "the file's audit_log")
    check("locality domains asked for; openmps serves each GPU as one device" in e.log(),
          "locality_domains = true is taken, and the log says what it does")
