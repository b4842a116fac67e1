# SPDX-License-Identifier: MIT
"""The daemon's metrics (src/control/metrics.c): the Prometheus text format over HTTP
(OPENMPS_METRICS) and in a textfile for node_exporter (OPENMPS_METRICS_TEXTFILE), checked by
Debian's promtool and scraped by a real Prometheus; its HTTP answers to bad requests, a flood of
idle connections, and bad settings refused at start; the Grafana dashboard's queries run by that
Prometheus."""
import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

from harness import Fail, check, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")


def need(tool, path):
    # .ci/run installs Debian's prometheus package (promtool and prometheus): a missing tool
    # fails here rather than leaving the format unchecked
    check(path, "%s is not installed (Debian: apt-get install prometheus; .ci/run installs it)"
          % tool)


def metrics_addr(e):
    m = wait_for(lambda: re.search(r"metrics: serving Prometheus's format on "
                                   r"http://([0-9.]+):(\d+)/metrics", e.log()),
                 what="the metrics address in control.log")
    return m.group(1), int(m.group(2))


def get(addr, path="/metrics", method="GET"):
    req = urllib.request.Request("http://%s:%d%s" % (addr[0], addr[1], path), method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as ex:
        return ex.code, ex.headers, ex.read().decode()


def samples(text):
    """{(name, frozenset of label items): value} of the exposition's samples."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-z_]+)(?:\{(.*)\})? (\S+)$', line)
        check(m, "a sample line: %r" % line)
        labels = frozenset(re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def value(s, name, **labels):
    want = {(k, str(v)) for k, v in labels.items()}
    got = [v for (n, lab), v in s.items() if n == name and want <= lab]
    check(len(got) == 1, "one %s%s: %r" % (name, labels, got))
    return got[0]


def promtool_ok(text):
    need("promtool", PROMTOOL)
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True,
                       timeout=60)
    check(p.returncode == 0, "promtool check metrics: %s%s" % (p.stdout, p.stderr))


def test_metrics_http_and_textfile(daemon):
    need("promtool", PROMTOOL)
    e = daemon(start=False)
    textfile = os.path.join(e.dir, "openmps.prom")
    e.env.update({"OPENMPS_METRICS": "127.0.0.1:0", "OPENMPS_METRICS_TEXTFILE": textfile,
                  "OPENMPS_METRICS_TEXTFILE_S": "1"})
    e.start()
    addr = metrics_addr(e)
    status, headers, body = get(addr)
    check(status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4"),
          "answer %d %s" % (status, headers["Content-Type"]))
    promtool_ok(body)
    s = samples(body)
    check(value(s, "openmps_clients") == 0 and value(s, "openmps_servers") == 0, "empty at start")

    env = dict(e.env, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="25",
               CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="0=512M")
    c1 = e.client("--hold-ms", "eof", env=env)
    c2 = e.client("--hold-ms", "eof")
    # A command name with what the format must escape, and bytes that are not UTF-8 (a name cut
    # inside a character; Prometheus drops a whole scrape with one such label).
    odd = os.path.join(os.fsencode(e.dir), b'om "odd\\ \xc3\xa9\xff\xe2\x82')
    os.symlink(os.path.abspath(os.environ.get("OM_TEST_CLIENT", "build/tests/om-test-client")),
               odd)
    c3 = subprocess.Popen([odd, "--hold-ms", "eof"], env=e.env, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    e.children.append((c3, e.errfile("odd")))
    open(e.children[-1][1], "w").close()
    for c in (c1, c2, c3):
        check(c.stdout.readline().startswith("session server="), "session")
    spid = e.servers()[0]
    status, _, body = get(addr)
    promtool_ok(body)
    check('command="%s/om \\"odd\\\\ \u00e9???"' % e.dir in body,
          "the odd command escaped: %r" % [l for l in body.splitlines() if "odd" in l][:1])
    c3.communicate(timeout=60)
    wait_for(lambda: value(samples(get(addr)[2]), "openmps_clients") == 2, what="c3 gone")
    status, _, body = get(addr)
    promtool_ok(body)
    s = samples(body)
    check(value(s, "openmps_clients") == 2, "two clients")
    check(value(s, "openmps_server_clients", pid=spid) == 2, "the server's clients")
    check(value(s, "openmps_server_info", pid=spid, state="active") == 1, "the server")
    for c in (c1, c2):
        check(value(s, "openmps_client_info", pid=c.pid, server=spid) == 1, "client %d" % c.pid)
    check(value(s, "openmps_client_active_thread_percentage", pid=c1.pid) == 25, "c1's share")
    check(value(s, "openmps_client_active_thread_percentage", pid=c2.pid) == 100, "c2's share")
    check(value(s, "openmps_client_memory_limit_bytes", pid=c1.pid, device=0) == 512 << 20,
          "c1's cap")
    check(not [k for k in s if k[0] == "openmps_client_memory_limit_bytes" and
               ("pid", str(c2.pid)) in k[1]], "c2 has no cap")
    check(value(s, "openmps_device_info", device=0, uuid="GPU-f0f1f2f3-f4f5-f6f7-f8f9-fafbfcfdfeff")
          == 1, "the device: %r" % [k for k in s if k[0] == "openmps_device_info"])
    check(value(s, "openmps_metrics_scrapes_total") >= 4, "scrapes counted")

    # The textfile: written within its period, in the same format, with the clients.
    def file_has(n):
        try:
            t = open(textfile).read()
        except FileNotFoundError:
            return None
        return t if "openmps_clients %d\n" % n in t else None
    promtool_ok(wait_for(lambda: file_has(2), what="the textfile with two clients"))

    # What is not a scrape: answered and named; HEAD: the head only.
    check(get(addr, "/nothing")[0] == 404, "404")
    check(get(addr, method="POST")[0] == 405, "405")
    status, headers, body = get(addr, method="HEAD")
    check(status == 200 and body == "" and int(headers["Content-Length"]) > 100, "HEAD")
    with socket.create_connection(addr, timeout=30) as k:
        k.sendall(b"hello there\r\n\r\n")
        check(k.recv(4096).startswith(b"HTTP/1.1 400"), "a request line that is not HTTP: 400")
    with socket.create_connection(addr, timeout=30) as k:
        k.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 9000)
        check(k.recv(4096).startswith(b"HTTP/1.1 431"), "a head past 8 KiB: 431")
    # Idle connections that never send a request do not keep a scraper out.
    idle = [socket.create_connection(addr, timeout=30) for _ in range(40)]
    try:
        status, _, body = get(addr)
        check(status == 200 and "openmps_clients 2" in body, "a scrape past 40 idle connections")
    finally:
        for k in idle:
            k.close()
    check(e.cmd("get_server_list") == str(spid), "the daemon goes on")

    # The clients leave: the figures follow; the daemon's end removes the textfile.
    c1.communicate(timeout=60)
    c2.communicate(timeout=60)
    wait_for(lambda: value(samples(get(addr)[2]), "openmps_clients") == 0, what="no client")
    wait_for(lambda: file_has(0), what="the textfile with no client")
    e.quit()
    check(not os.path.exists(textfile), "the daemon's end removes its textfile")


def test_metrics_bad_settings(daemon):
    e = daemon(start=False)
    for k, v, said in (("OPENMPS_METRICS", "nonsense", "is not HOST:PORT"),
                       ("OPENMPS_METRICS", "127.0.0.1:99999", "past 65535"),
                       ("OPENMPS_METRICS", "127.0.0.1:9x", "is not a number"),
                       ("OPENMPS_METRICS", "no.such.host.invalid:9400", "cannot resolve"),
                       ("OPENMPS_METRICS_TEXTFILE", "relative.prom", "not an absolute path")):
        env = dict(e.env, **{k: v})
        p = subprocess.run([os.path.join(os.environ.get("OM_BIN_DIR", "build"),
                                         "openmps-control"), "-f"],
                           env=env, capture_output=True, text=True, timeout=60)
        check(p.returncode == 1 and said in p.stderr and k in p.stderr,
              "%s=%s refused at start naming it: rc %d %r" % (k, v, p.returncode, p.stderr))
    env = dict(e.env, OPENMPS_METRICS_TEXTFILE="/tmp/x.prom", OPENMPS_METRICS_TEXTFILE_S="0")
    p = subprocess.run([os.path.join(os.environ.get("OM_BIN_DIR", "build"), "openmps-control"),
                        "-f"], env=env, capture_output=True, text=True, timeout=60)
    check(p.returncode == 1 and "OPENMPS_METRICS_TEXTFILE_S" in p.stderr,
          "a period of 0 s refused: %r" % p.stderr)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_metrics_scraped_by_prometheus(daemon):
    need("prometheus", PROMETHEUS)
    e = daemon(start=False)
    e.env.update({"OPENMPS_METRICS": "127.0.0.1:0", "OPENMPS_METRICS_REFRESH_S": "1"})
    e.start()
    addr = metrics_addr(e)
    # a client with kernels, copies and a wait (acct_driver.c), for the dashboard's rates
    from harness import driver_program
    c = driver_program(e, "acct-driver", ["3", "10000", "65536", "65536", "4096"],
                       stdin=subprocess.PIPE)
    for line in c.stdout:
        if line.strip() == "ready":
            break
    pdir = os.path.join(e.dir, "prometheus")
    os.makedirs(pdir)
    with open(os.path.join(pdir, "prometheus.yml"), "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                "scrape_configs:\n  - job_name: openmps\n    static_configs:\n"
                "      - targets: ['%s:%d']\n" % addr)
    port = free_port()
    log = open(os.path.join(pdir, "prometheus.log"), "w")
    prom = subprocess.Popen([PROMETHEUS, "--config.file", os.path.join(pdir, "prometheus.yml"),
                             "--storage.tsdb.path", os.path.join(pdir, "data"),
                             "--web.listen-address", "127.0.0.1:%d" % port],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        def scraped():
            if prom.poll() is not None:
                raise Fail("prometheus exited: " + open(log.name).read()[-2000:])
            url = ("http://127.0.0.1:%d/api/v1/query?query=openmps_client_info" % port)
            try:
                with urllib.request.urlopen(url, timeout=10) as r:
                    body = r.read().decode()
            except (urllib.error.URLError, ConnectionError, socket.timeout):
                return None
            return body if '"pid":"%d"' % c.pid in body else None
        body = wait_for(scraped, timeout=120, what="Prometheus to scrape the client's series")
        check('"job":"openmps"' in body and '"command":' in body, "labels kept: %s" % body)
        # Every query of the Grafana dashboard (docs/grafana/openmps.json) is PromQL that this
        # Prometheus runs, and each finds series (the cap's panel: none without a cap).
        dash = json.load(open(os.path.join(ROOT, "docs", "grafana", "openmps.json")))
        exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
        check(len(exprs) >= 6, "the dashboard's queries: %r" % exprs)
        for expr in exprs:
            q = urllib.parse.quote(expr.replace("$instance", ".*"))

            def query():
                with urllib.request.urlopen("http://127.0.0.1:%d/api/v1/query?query=%s"
                                            % (port, q), timeout=30) as r:
                    ans = json.loads(r.read().decode())
                check(ans["status"] == "success", "%s: %r" % (expr, ans))
                # a rate needs two scrapes; the cap's panel has no series without a cap
                return ans["data"]["result"] or "memory_limit" in expr
            wait_for(query, timeout=60, what="series for the dashboard's %s" % expr)
    finally:
        prom.terminate()
        try:
            prom.wait(timeout=30)
        except subprocess.TimeoutExpired:
            prom.kill()
            prom.wait()
        log.close()
    c.stdin.close()
    c.wait(timeout=60)
    check(c.returncode == 0, "acct-driver: %r" % c.stderr.read())


def test_metrics_carry_the_accounting(daemon):
    """The servers' accounting (openmps stats) in the metrics, asked every
    OPENMPS_METRICS_REFRESH_S: a client's kernels, its copies each way and its GPU time as
    counters per device, its state, and its identity's labels (cgroup, Slurm job, pod)."""
    from harness import driver_program
    e = daemon(start=False)
    e.env.update({"OPENMPS_METRICS": "127.0.0.1:0", "OPENMPS_METRICS_REFRESH_S": "1"})
    e.start()
    addr = metrics_addr(e)
    # 5 kernels of 20 ms, 3 MiB to the device, 1 MiB back, 4 KiB within it (acct_driver.c)
    p = driver_program(e, "acct-driver", ["5", "20000", str(3 << 20), str(1 << 20), "4096"],
                       stdin=subprocess.PIPE)
    try:
        for line in p.stdout:
            if line.strip() == "ready":
                break

        copies = (("htod", 3 << 20), ("dtoh", 1 << 20), ("dtod", 4096))
        last = []

        def counted():
            """The body once a refresh after the client's work shows all of it: one during its
            work (the refresh is every second, whenever the client runs) shows its kernels and
            not yet its copies, and stays until the next."""
            body = get(addr)[2]
            last[:] = [body]
            s = samples(body)
            try:
                whole = (value(s, "openmps_client_kernels_total", pid=p.pid, device=0) == 5 and
                         all(value(s, "openmps_client_copied_bytes_total", pid=p.pid, device=0,
                                   direction=d) == n for d, n in copies))
            except Fail:
                return None  # its series not there yet
            return body if whole else None
        try:
            body = wait_for(counted, timeout=60,
                            what="the client's 5 kernels and its copies in the metrics")
        except Fail as ex:
            raise Fail("%s; the last scrape's client lines: %r" % (ex, [
                l for l in (last or [""])[0].splitlines() if 'pid="%d"' % p.pid in l]))
        promtool_ok(body)
        s = samples(body)
        gpu = value(s, "openmps_client_gpu_seconds_total", pid=p.pid, device=0)
        check(0.09 <= gpu <= 5.0, "GPU time %.3f s for 5 kernels of 20 ms" % gpu)
        check(value(s, "openmps_client_calls_total", pid=p.pid) > 0, "calls")
        check(sum(value(s, "openmps_client_state", pid=p.pid, state=st)
                  for st in ("idle", "running", "waiting")) == 1, "one state")
        check(value(s, "openmps_accounting_age_seconds") < 30, "the accounting's age")
        info = [k for k in s if k[0] == "openmps_client_info" and ("pid", str(p.pid)) in k[1]]
        check(len(info) == 1 and {"cgroup", "slurm_job", "pod_uid", "namespace"} <=
              {n for n, _ in info[0][1]}, "identity labels: %r" % info)
    finally:
        p.stdin.close()
        p.wait(timeout=60)
    check(p.returncode == 0, "acct-driver: %r" % p.stderr.read())
    # gone from the metrics once the next refresh has run
    wait_for(lambda: 'openmps_client_kernels_total{pid="%d"' % p.pid not in get(addr)[2],
             timeout=60, what="the client's series to go")
