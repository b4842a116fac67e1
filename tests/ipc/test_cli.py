# SPDX-License-Identifier: MIT
"""The command lines of openmps and openmps-control: --version, help, and an error naming each
bad option or command (getopt_long in src/cli/openmps.c and src/control/main.c)."""
import os
import re
import subprocess

import harness
from harness import check

OPENMPS = os.path.join(harness.BIN, "openmps")
VERSION = re.compile(r"^openmps \d+\.\d+\.\d+\n$")


def run(prog, *args):
    p = subprocess.run([prog] + list(args), capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def test_openmps_version_and_help():
    for args in (["--version"], ["-V"], ["version"]):
        rc, out, err = run(OPENMPS, *args)
        check(rc == 0 and VERSION.match(out) and err == "", "%r: %r %r" % (args, out, err))
    for args in (["--help"], ["-h"], ["help"], ["run", "--help"], ["check", "-h"]):
        rc, out, err = run(OPENMPS, *args)
        check(rc == 0 and out.startswith("usage: openmps run") and "openmps check" in out and
              err == "", "%r: %r %r" % (args, out, err))


def test_openmps_bad_command_lines():
    """Each bad command line exits non-zero with a message naming what is wrong."""
    cases = [
        ([], 2, "openmps: no command given"),
        (["--bogus"], 2, "openmps: unknown option --bogus"),
        (["-x"], 2, "openmps: unknown option -x"),
        (["--version=2"], 2, "openmps: option --version takes no argument"),
        (["frob"], 2, "openmps: unknown command frob"),
        (["run"], 2, "openmps run: no COMMAND to run"),
        (["run", "--zap", "true"], 2, "openmps run: unknown option --zap"),
        (["check"], 3, "openmps check: no COMMAND to run"),
        (["check", "-o"], 3, "openmps check: option -o needs an argument"),
        (["check", "--bogus", "true"], 3, "openmps check: unknown option --bogus"),
        (["run", "--", "/nonexistent/prog"], 127, "openmps: cannot run /nonexistent/prog"),
    ]
    for args, want_rc, want in cases:
        rc, out, err = run(OPENMPS, *args)
        check(rc == want_rc and want in err and out == "",
              "%r: rc %d, %r %r (want %d, %r)" % (args, rc, out, err, want_rc, want))


def test_openmps_options_end_at_the_command():
    """The program's own options are its own: `openmps run sh -c ... --help` runs sh."""
    rc, out, err = run(OPENMPS, "run", "sh", "-c", "echo ran $0", "--help")
    check(rc == 0 and out == "ran --help\n", "run sh --help: %d %r %r" % (rc, out, err))
    rc, out, err = run(OPENMPS, "run", "sh", "-c", "echo $0", "-V")
    check(rc == 0 and out == "-V\n", "options after the command: %d %r %r" % (rc, out, err))


def test_openmps_check_output_option(tmp_path):
    f = tmp_path / "report.txt"
    for opt in (["-o", str(f)], ["--output", str(f)], ["--output=" + str(f)]):
        if f.exists():
            f.unlink()
        rc, out, err = run(OPENMPS, "check", *opt, "--", "true")
        check(rc == 0 and "true exited with status 0" in f.read_text(), "%r: %r" % (opt, err))


def test_control_command_line():
    ctl = harness.CONTROL
    for args in (["-v"], ["--version"]):
        rc, out, err = run(ctl, *args)
        check(rc == 0 and re.match(r"^openmps-control \d+\.\d+\.\d+ \(openmps protocol", out),
              "%r: %r" % (args, out))
    rc, out, err = run(ctl, "--help")
    check(rc == 0 and "--foreground" in out and "nvidia-cuda-mps-control" in out, out)
    cases = [
        (["--bogus"], "openmps-control: unknown option --bogus"),
        (["-x"], "openmps-control: unknown option -x"),
        (["--version=3"], "openmps-control: option --version takes no argument"),
        (["-d", "-f"], "openmps-control: -d and -f exclude each other"),
        (["-f", "extra"], "openmps-control: -f takes no command (got extra)"),
    ]
    for args, want in cases:
        rc, out, err = run(ctl, *args)
        check(rc == 2 and want in err and out == "", "%r: %d %r %r" % (args, rc, out, err))
