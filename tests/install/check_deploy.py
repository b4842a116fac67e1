#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks deploy/kubernetes/ against the tree `make install` makes and runs what it says.

    check_deploy.py SOURCE BUILD

Installs BUILD with DESTDIR into a temporary root under the prefix the Containerfile's build
uses (/usr), then:
* the Containerfile: its stages, the install it copies, its PATH and ENTRYPOINT found in the
  tree;
* the DaemonSet (python3-yaml): parses; selector and labels agree; hostPID; every volume mount
  names a volume, every hostPath volume is mounted at its own path (so the paths the commands
  name are the host's, as `openmps cdi` needs); every command of every container (command,
  probes, hooks, and the programs of their `sh -c` scripts) is in the installed tree under the
  container's PATH, or a base command of the Debian image;
* example-pod.yaml asks for the device the DaemonSet's spec names, as a non-root user;
* then runs them, in that order, on the driver double, with /run/nvidia/mps, /var/lib/openmps
  and /var/run/cdi moved under a temporary directory: the init containers (directories, the
  CDI spec: its host pipe directory must be the daemon's), the daemon (its command and
  environment), the startup probe, postStart (.started appears), the liveness probe, preStop
  (.started gone, the daemon exits).
Prints "ok ..." and "FAIL ..." lines; exit status 1 when something failed."""
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time

SRC, BUILD = (os.path.abspath(a) for a in sys.argv[1:3])
DEPLOY = os.path.join(SRC, "deploy", "kubernetes")
PREFIX = "/usr"
# Commands the Debian base image has, not openmps's (found on this Debian machine too).
BASE_COMMANDS = {"sh", "mkdir", "rm", "touch", "printf", "sleep"}
# Host paths the DaemonSet names, moved under the temporary directory when run here.
HOST_PATHS = ("/run/nvidia/mps", "/var/lib/openmps", "/var/run/cdi")

fails = []


def answers(path):
    """Whether a daemon accepts connections on the socket at path (a file alone is not one)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def ok(what):
    print("ok   " + what)


def fail(what):
    fails.append(what)
    print("FAIL " + what)


def expect(cond, what):
    (ok if cond else fail)(what)
    return cond


def install(root):
    env = dict(os.environ, DESTDIR=root)
    p = subprocess.run([os.environ.get("CMAKE", "cmake"), "--install", BUILD, "--prefix", PREFIX], env=env,
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        fail("make install DESTDIR: %s" % p.stderr)
        sys.exit(1)


def resolve(root, name, path):
    """Where name is in the installed tree under PATH path (a host path), or None."""
    for d in path.split(":"):
        f = os.path.join(root + d, name)
        if os.path.isfile(f) and os.access(f, os.X_OK):
            return f
    return None


def check_command(root, argv, path, where):
    """argv[0] in the tree (or a base command); for `sh -c SCRIPT`, each program of SCRIPT."""
    names = [argv[0]]
    if argv[0] == "sh" and argv[1:2] == ["-c"]:
        names, prev = [], None
        for w in shlex.split(argv[2].replace(";", " ; ").replace("|", " | ")):
            if prev in (None, ";", "|", "do", "until") and w not in (";", "|", "until", "do",
                                                                     "done"):
                names.append(w)
            prev = w
    for n in names:
        if n in BASE_COMMANDS:
            expect(shutil.which(n) is not None, "%s: %s, a base command" % (where, n))
        else:
            expect(resolve(root, n, path) is not None,
                   "%s: %s in the installed tree under PATH=%s" % (where, n, path))


def containerfile(root):
    lines = open(os.path.join(DEPLOY, "Containerfile")).read().replace("\\\n", " ").splitlines()
    lines = [l.strip() for l in lines if l.strip() and not l.strip().startswith("#")]
    froms = [l for l in lines if l.startswith("FROM ")]
    expect(len(froms) == 2 and froms[0].endswith(" AS build"), "Containerfile: two stages")
    expect(any("-DCMAKE_INSTALL_PREFIX=%s" % PREFIX in l and "DESTDIR=/install" in l
               for l in lines), "Containerfile: installs for %s into /install" % PREFIX)
    expect("COPY --from=build /install/ /" in lines, "Containerfile: copies the install")
    path = [l.split("=", 1)[1] for l in lines if l.startswith("ENV PATH=")]
    expect(len(path) == 1, "Containerfile: one ENV PATH")
    entry = [json.loads(l.split(None, 1)[1]) for l in lines if l.startswith("ENTRYPOINT ")]
    expect(len(entry) == 1, "Containerfile: one ENTRYPOINT")
    if path and entry:
        check_command(root, entry[0], path[0], "Containerfile ENTRYPOINT")
        return path[0]
    return "/usr/bin:/bin"


def containers_of(spec):
    return [("init " + c["name"], c) for c in spec.get("initContainers", [])] + \
        [(c["name"], c) for c in spec["containers"]]


def commands_of(c):
    """(where, argv) of a container: its command, probes' and hooks' exec commands."""
    out = [("command", c["command"])] if "command" in c else []
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        if probe in c:
            out.append((probe, c[probe]["exec"]["command"]))
    for hook, h in c.get("lifecycle", {}).items():
        out.append((hook, h["exec"]["command"]))
    return out


def env_of(c, default_path):
    env = {e["name"]: e["value"] for e in c.get("env", [])}
    env.setdefault("PATH", default_path)
    return env


def load_yaml(name):
    """The documents of deploy/kubernetes/NAME, or None (said) without python3-yaml."""
    try:
        import yaml
    except ImportError:
        fail("python3-yaml is not installed (Debian: python3-yaml; .ci/run installs it)")
        return None
    return list(yaml.safe_load_all(open(os.path.join(DEPLOY, name))))


def example_pod():
    docs = load_yaml("example-pod.yaml")
    pods = [d for d in docs or [] if d and d.get("kind") == "Pod"]
    return pods[0] if expect(len(pods) == 1, "example-pod.yaml: one Pod") else None


def daemonset(root, image_path):
    docs = load_yaml("openmps-daemonset.yaml")
    if docs is None:
        return None
    ds = [d for d in docs if d and d.get("kind") == "DaemonSet"]
    if not expect(len(ds) == 1 and ds[0]["apiVersion"] == "apps/v1", "one apps/v1 DaemonSet"):
        return None
    ds = ds[0]
    tmpl = ds["spec"]["template"]
    spec = tmpl["spec"]
    sel = ds["spec"]["selector"]["matchLabels"]
    expect(all(tmpl["metadata"]["labels"].get(k) == v for k, v in sel.items()),
           "the selector matches the template's labels")
    expect(spec.get("hostPID") is True, "hostPID: the daemon sees the pods' pids")
    vols = {v["name"]: v for v in spec["volumes"]}
    for v in vols.values():
        hp = v.get("hostPath", {}).get("path", "")
        expect(hp.startswith("/") and hp in HOST_PATHS, "volume %s: host path %s" % (v["name"], hp))
    for where, c in containers_of(spec):
        expect(c.get("image") == "openmps:0.1.0", "%s: the Containerfile's image" % where)
        for m in c.get("volumeMounts", []):
            v = vols.get(m["name"])
            expect(v is not None and v["hostPath"]["path"] == m["mountPath"],
                   "%s: %s mounted at its host path" % (where, m["name"]))
        env = env_of(c, image_path)
        for what, argv in commands_of(c):
            check_command(root, argv, env["PATH"], "%s %s" % (where, what))
    return spec


def moved(s, tmp):
    for p in HOST_PATHS:
        s = s.replace(p, tmp + p)
    return s


def run_env(root, env, tmp):
    """A container's environment run here: host paths moved, PATH into the tree, the driver
    double for the servers."""
    out = {k: moved(v, tmp) for k, v in env.items()}
    dirs = env["PATH"].split(":")  # the tree's first, then the host's for the base commands
    out["PATH"] = ":".join([root + d for d in dirs] + dirs)
    out.update({"OPENMPS_DRIVER": os.path.join(BUILD, "tests", "libfakecuda.so"),
                "OPENMPS_SERVER_ENV": "FAKECUDA_*", "OPENMPS_MODULE_CACHE": "off"})
    return out


def run(root, argv, env, tmp, what):
    p = subprocess.run([moved(a, tmp) for a in argv], env=run_env(root, env, tmp),
                       capture_output=True, text=True, timeout=120)
    expect(p.returncode == 0, "%s: rc %d %s" % (what, p.returncode, p.stderr.strip()[-500:]))
    return p


def run_it(root, spec, image_path):
    tmp = tempfile.mkdtemp(prefix="om-deploy-")
    os.chmod(tmp, 0o755)
    daemon = None
    try:
        for p in HOST_PATHS:  # the hostPath volumes, DirectoryOrCreate
            os.makedirs(tmp + p)
        for where, c in containers_of(spec)[:-1]:
            run(root, c["command"], env_of(c, image_path), tmp, where)
        main = spec["containers"][0]
        env = env_of(main, image_path)
        pipe, logs = env["CUDA_MPS_PIPE_DIRECTORY"], env["CUDA_MPS_LOG_DIRECTORY"]
        cdi = json.load(open(tmp + "/var/run/cdi/openmps.json"))
        edits = cdi["devices"][0]["containerEdits"]
        pod_pipe = [e.split("=", 1)[1] for e in edits["env"]
                    if e.startswith("CUDA_MPS_PIPE_DIRECTORY=")]
        mount = [m for m in edits["mounts"] if [m["containerPath"]] == pod_pipe]
        expect(mount and mount[0]["hostPath"] == tmp + pipe,
               "the CDI spec gives pods the daemon's pipe directory %s (at %s)" % (pipe, pod_pipe))
        pod = example_pod()
        if pod:
            notes = pod["metadata"].get("annotations", {})
            asked = [v for k, v in notes.items() if k.startswith("cdi.k8s.io/")]
            expect(asked == ["%s=%s" % (cdi["kind"], cdi["devices"][0]["name"])],
                   "example-pod.yaml asks for the spec's device: %r" % asked)
            expect(pod["spec"].get("securityContext", {}).get("runAsNonRoot") is True,
                   "example-pod.yaml runs as non-root")
        shim = [m["hostPath"] for m in edits["mounts"] if m["containerPath"].endswith(".so.1")]
        expect(shim == [tmp + "/var/lib/openmps/libcuda.so.1"] and os.path.isfile(shim[0]),
               "the shim copied to the host's /var/lib/openmps")
        err = open(os.path.join(tmp, "daemon.err"), "w")
        daemon = subprocess.Popen([moved(a, tmp) for a in main["command"]],
                                  env=run_env(root, env, tmp), stdout=err, stderr=err)
        started = os.path.join(os.path.dirname(tmp + pipe), ".started")
        end = time.monotonic() + 60
        # until it answers: its socket's file is there from its set-up, before it listens (the
        # probe run once at the file's sight could be refused)
        while time.monotonic() < end and daemon.poll() is None and \
                not answers(tmp + pipe + "/control.sock"):
            time.sleep(0.05)
        probe = run(root, main["startupProbe"]["exec"]["command"], env, tmp, "startupProbe")
        expect(probe.stdout.strip() == env.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "100") +
               ".0", "the probe answers the share %r" % probe.stdout)
        run(root, main["lifecycle"]["postStart"]["exec"]["command"], env, tmp, "postStart")
        expect(os.path.exists(started), "postStart: .started, as the plugin waits for it")
        run(root, main["livenessProbe"]["exec"]["command"], env, tmp, "livenessProbe")
        expect(os.path.exists(tmp + logs + "/control.log"), "the daemon logs in %s" % logs)
        run(root, main["lifecycle"]["preStop"]["exec"]["command"], env, tmp, "preStop")
        try:
            rc = daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            rc = None
        expect(rc == 0 and not os.path.exists(started),
               "preStop: the daemon exits (%r), .started gone" % rc)
    finally:
        if daemon and daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        if not fails:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("kept for reading: " + tmp)


def main():
    root = tempfile.mkdtemp(prefix="om-deploy-root-")
    try:
        install(root)
        image_path = containerfile(root)
        spec = daemonset(root, image_path)
        if spec is not None and not fails:
            run_it(root, spec, image_path)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("%d failure(s)" % len(fails) if fails else "all passed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
