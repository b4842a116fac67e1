# SPDX-License-Identifier: MIT
"""openmps top (src/cli/top.c): the live view run in a real terminal, tmux's (new-session -d
-x 160 -y 40, send-keys, capture-pane), against clients of known work on the driver double
(tests/cpu/acct_driver.c, as test_stats.py runs them); and its batch mode (--once, -b), its
options' errors, a missing daemon. tmux is installed by .ci/run; where it is missing the tmux
test fails saying so."""
import os
import shlex
import shutil
import subprocess
import time

import harness
from harness import check, wait_for
from test_stats import OPENMPS, end_clients, openmps, start_clients

TMUX = shutil.which("tmux")
# kernels, us each, HtoD, DtoH, DtoD bytes, streams: GPU time A > C > B, memory B > C > A
WORKS = [(8, 100000, 1024, 0, 0, 0), (1, 1000, 8 << 20, 0, 0, 0), (4, 100000, 2 << 20, 0, 0, 0)]


class Tmux:
    """A tmux server of the test's own (-L), one session running `command` in e's environment;
    when the command ends its exit status is written to a file (the session then ends)."""

    def __init__(self, e, command):
        check(TMUX, "tmux is not installed (Debian: apt-get install tmux; .ci/run installs it)")
        self.sock = "om-top-%d-%d" % (os.getpid(), time.monotonic_ns())
        self.status = os.path.join(e.dir, "top.status")
        shell = "%s; echo $? > %s" % (" ".join(shlex.quote(a) for a in command),
                                      shlex.quote(self.status))
        env = dict(e.env, TERM="xterm")  # the outer terminal; inside, tmux's own
        self.env = env
        self.tmux("new-session", "-d", "-x", "160", "-y", "40", "-s", "top", shell)

    def tmux(self, *args):
        return subprocess.run([TMUX, "-L", self.sock] + list(args), env=self.env,
                              capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)

    def screen(self):
        p = self.tmux("capture-pane", "-p", "-t", "top")
        return p.stdout if p.returncode == 0 else ""

    def wait_screen(self, cond, what):
        """Polls the pane until cond(text) holds (60 s: a loaded machine); returns the text."""
        last = [""]

        def ok():
            last[0] = self.screen()
            return cond(last[0])
        try:
            wait_for(ok, timeout=60, what=what)
        except harness.Fail:
            raise harness.Fail("timed out waiting for %s; the screen:\n%s" % (what, last[0]))
        return last[0]

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "top", *keys)

    def exit_status(self):
        wait_for(lambda: os.path.exists(self.status) and open(self.status).read().strip(),
                 timeout=60, what="openmps top to exit")
        return int(open(self.status).read())

    def close(self):
        self.tmux("kill-server")


def rows(text, pids):
    """The screen's client rows of pids, in screen order: [(pid, fields)]."""
    out = []
    for line in text.splitlines():
        f = line.split()
        if f and f[0].isdigit() and int(f[0]) in pids and len(f) >= 13:
            out.append((int(f[0]), f))
    return out


def device_row(text):
    """The fields of the first row under the devices' header."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("DEV "):
            return lines[i + 1].split()
    return []


def test_top_tmux(daemon):
    """openmps top in tmux: waits for a daemon that is not there yet (saying so on its screen),
    then shows the devices and three clients of known work with their commands and the device's
    totals; T and M sort by GPU time and by memory (the orders differ: the works are made so);
    q quits with status 0. The screen of this test is docs/operations.md's screenshot."""
    e = daemon(start=False)
    t = Tmux(e, [OPENMPS, "top", "-d", "0.5"])
    try:
        s = t.wait_screen(lambda s: "No answer from the daemon" in s, "the missing daemon's line")
        check("cannot find the control daemon" in s and "retrying every 0.5 s" in s,
              "the missing daemon, said: %r" % s)
        e.start()
        t.wait_screen(lambda s: "No clients." in s and "Servers: 0" in s, "the daemon's screen")
        clients = start_clients(e, WORKS)
        try:
            pids = [p.pid for p, _ in clients]
            # The screen of a refresh after the clients' work (an earlier one shows it going
            # on): the device's totals, 3 clients, 13 kernels, 2 x (1 KiB + 8 MiB + 2 MiB) of
            # memory; the three clients idle, with their command.
            def done(s):
                d = device_row(s)
                return (len(d) > 8 and (d[-8], d[-5], d[-4]) == ("3", "13", "20.0M") and
                        len(rows(s, pids)) == 3 and
                        all(f[4] == "idle" and f[-1].endswith("/acct-driver")
                            for _, f in rows(s, pids)))
            t.wait_screen(done, "the device's totals and the three clients, idle")
            t.keys("T")
            s = t.wait_screen(lambda s: "sort: GPU time" in s and len(rows(s, pids)) == 3,
                              "sort by GPU time")
            check([p for p, _ in rows(s, pids)] == [pids[0], pids[2], pids[1]],
                  "by GPU time A, C, B:\n%s" % s)
            t.keys("M")
            s = t.wait_screen(lambda s: "sort: memory" in s and len(rows(s, pids)) == 3,
                              "sort by memory")
            check([p for p, _ in rows(s, pids)] == [pids[1], pids[2], pids[0]],
                  "by memory B, C, A:\n%s" % s)
            t.keys("I")
            s = t.wait_screen(lambda s: "sort: memory (inverted)" in s and
                              len(rows(s, pids)) == 3, "the inverted order")
            check([p for p, _ in rows(s, pids)] == [pids[0], pids[2], pids[1]],
                  "by memory, inverted:\n%s" % s)
            t.keys("P")
            print("the screen (docs/operations.md):\n" +
                  t.wait_screen(lambda s: "sort: GPU%" in s and len(rows(s, pids)) == 3,
                                "sort by GPU%"))
            # a smaller window: drawn again at its size, the footer on its last line, the
            # client header cut before COMMAND (column 106)
            t.tmux("resize-window", "-t", "top", "-x", "100", "-y", "20")
            t.wait_screen(lambda s: len(s.splitlines()) == 20 and
                          s.splitlines()[-1].startswith("q quit") and "PID USER" in s and
                          "COMMAND" not in s, "the smaller window drawn")
            t.keys("q")
            check(t.exit_status() == 0, "q: exit status 0")
        finally:
            end_clients(clients)
    finally:
        t.close()


def test_top_batch(daemon):
    """openmps top --once and -b: the same screen as text; with -n 2 two screens; no clients;
    no daemon (exit status 1 and the reason); options' errors name the option."""
    e = daemon()
    rc, out, err = openmps(e, "top", "--once")
    check(rc == 0 and err == "" and "No clients." in out and "Servers: 0" in out and
          out.startswith("openmps top - "), "no clients: %d %r %r" % (rc, out, err))
    clients = start_clients(e, WORKS[:2])
    try:
        pids = [p.pid for p, _ in clients]
        rc, out, err = openmps(e, "top", "-b", "-n", "2", "-d", "0.2", "-s", "mem")
        check(rc == 0 and err == "" and out.count("openmps top - ") == 2,
              "two screens: %d %r %r" % (rc, out, err))
        last = out.split("\n\nopenmps top - ")[1]
        check("sort: memory" in last and [p for p, _ in rows(last, pids)] == [pids[1], pids[0]],
              "sorted by memory: %r" % last)
        spid = e.servers()[0]
        check("Servers: 1  %d " % spid in last and " ACTIVE" in last, "the server: %r" % last)
        rc, out, err = openmps(e, "top", "--once", "-s", "time", "-p", str(spid))
        check(rc == 0 and [p for p, _ in rows(out, pids)] == pids, "-p, by time: %r" % out)
    finally:
        end_clients(clients)
    for args, want in [
        (["-d", "0"], '-d "0": expected seconds, 0.1 to 3600'),
        (["-n", "x"], '-n "x": expected a count of 1 or more'),
        (["-s", "foo"], '-s "foo": expected gpu, time, mem, calls, kernels or pid'),
        (["-p", "-3"], '-p "-3": expected a server\'s PID'),
        (["--once", "extra"], 'unexpected argument "extra"'),
        (["-x"], "openmps top"),
    ]:
        rc, out, err = openmps(e, "top", *args)
        check(rc == 2 and want in err and out == "", "%r: %d %r %r" % (args, rc, out, err))
    rc, out, err = openmps(e, "top")  # no terminal: says so
    check(rc == 1 and "not a terminal" in err, "no terminal: %d %r" % (rc, err))
    gone = daemon(start=False)
    rc, out, err = openmps(gone, "top", "--once")
    check(rc == 1 and "No answer from the daemon" in out and
          "cannot find the control daemon" in out, "no daemon: %d %r %r" % (rc, out, err))
