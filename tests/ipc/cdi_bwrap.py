# SPDX-License-Identifier: MIT
"""A container runtime in miniature: turns a CDI spec's device (what `openmps cdi` writes) into
the arguments of Debian's bubblewrap, as a CDI-aware runtime turns it into an OCI spec. What the
container sees is the runtime's base (the host's /usr read-only, its own /proc, a /dev without
the host's /dev/shm, an empty /tmp) plus the spec's mounts and environment, nothing else: every
namespace is new (no --ipc=host, no host network, its own pids). An edit this does not know
(hooks, device nodes, options other than bind mounts') is an error, never silently dropped, so a
spec that grows one fails the test that uses this until this learns it.

From a shell (tests/gpu/container.sh): cdi_bwrap.py SPEC VENDOR/CLASS=NAME [BWRAP_ARG...] --
COMMAND [ARG...] runs COMMAND so, the BWRAP_ARGs (what the program itself needs) before the
spec's edits; its exit status is the command's (bwrap's own failures are said first)."""
import json
import os
import shutil
import subprocess
import sys

# A minimal root: the host's /usr for the C library and a shell, the merged-/usr links.
BASE = ["--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
        "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib",
        "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
        "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
        "--setenv", "PATH", "/usr/bin:/bin"]

KNOWN_SPEC = {"cdiVersion", "kind", "devices", "containerEdits", "annotations"}
KNOWN_EDITS = {"env", "mounts"}
KNOWN_MOUNT = {"hostPath", "containerPath", "type", "options"}
# Mount options that bwrap's binds give anyway or that do not change what the program sees.
PLAIN_OPTIONS = {"bind", "rbind", "nosuid", "nodev", "noexec", "rw", "ro"}


class SpecError(Exception):
    pass


def edits_to_args(edits):
    """One containerEdits object as bwrap arguments: --setenv per env entry, a bind per mount
    (read-only with "ro")."""
    args = []
    unknown = set(edits) - KNOWN_EDITS
    if unknown:
        raise SpecError("containerEdits this runtime does not apply: %s" % sorted(unknown))
    for kv in edits.get("env", []):
        name, eq, value = kv.partition("=")
        if not eq or not name:
            raise SpecError("env entry %r is not NAME=VALUE" % kv)
        args += ["--setenv", name, value]
    for m in edits.get("mounts", []):
        if set(m) - KNOWN_MOUNT or not {"hostPath", "containerPath"} <= set(m):
            raise SpecError("mount %r: keys" % m)
        opts = m.get("options", [])
        if m.get("type", "bind") != "bind" or not {"bind", "rbind"} & set(opts):
            raise SpecError("mount %r is not a bind mount" % m)
        if set(opts) - PLAIN_OPTIONS or ("ro" in opts) == ("rw" in opts):
            raise SpecError("mount %r: options" % m)
        args += ["--ro-bind" if "ro" in opts else "--bind", m["hostPath"], m["containerPath"]]
    return args


def device_args(spec, qualified):
    """The bwrap arguments for the device VENDOR/CLASS=NAME of spec (a parsed JSON object): the
    spec-wide edits, then the device's."""
    if set(spec) - KNOWN_SPEC:
        raise SpecError("spec keys %s" % sorted(set(spec) - KNOWN_SPEC))
    kind, _, name = qualified.partition("=")
    if spec.get("kind") != kind:
        raise SpecError("the spec's kind is %r, not %r" % (spec.get("kind"), kind))
    devs = [d for d in spec.get("devices", []) if d.get("name") == name]
    if len(devs) != 1:
        raise SpecError("%d devices named %r" % (len(devs), name))
    return edits_to_args(spec.get("containerEdits", {})) + edits_to_args(
        devs[0].get("containerEdits", {}))


def command(spec_path, qualified, extra, argv):
    """The whole bwrap command line: BASE, extra (what the program itself needs: its own file),
    the device's edits, then argv."""
    with open(spec_path) as f:
        spec = json.load(f)
    return [shutil.which("bwrap")] + BASE + list(extra) + device_args(spec, qualified) + \
        ["--"] + list(argv)


def usable():
    """None when bwrap can make a container with every namespace new here, else why not."""
    if shutil.which("bwrap") is None:
        return "bwrap is not installed (Debian: bubblewrap; .ci/run installs it)"
    p = subprocess.run([shutil.which("bwrap")] + BASE + ["--", "/bin/true"],
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        return "bwrap cannot make its namespaces here (rc %d): %s" % (p.returncode,
                                                                     p.stderr.strip())
    return None


if __name__ == "__main__":
    if len(sys.argv) < 4 or "--" not in sys.argv[3:]:
        sys.exit("usage: cdi_bwrap.py SPEC VENDOR/CLASS=NAME [BWRAP_ARG...] -- COMMAND [ARG...]")
    cut = sys.argv.index("--", 3)
    why = usable()
    if why:
        sys.exit("cdi_bwrap.py: " + why)
    try:
        argv = command(sys.argv[1], sys.argv[2], sys.argv[3:cut], sys.argv[cut + 1:])
    except (OSError, ValueError, SpecError) as ex:
        sys.exit("cdi_bwrap.py: %s: %s" % (sys.argv[1], ex))
    os.execv(argv[0], argv)
