# SPDX-License-Identifier: MIT
"""The module image cache: images carried to the next server, sent by their keys, evicted."""
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time

from harness import Env, REMOTE_DRIVER, SANITIZER, SHIM_DIR, check, ended, remote, wait_for


def cache_dir(cdir):
    """The one subdirectory (driver version and GPU kind) of a module cache, and its files."""
    subs = os.listdir(cdir) if os.path.isdir(cdir) else []
    check(len(subs) <= 1, "one kind of GPU, one subdirectory: %r" % subs)
    if not subs:
        return None, []
    d = os.path.join(cdir, subs[0])
    return d, sorted(f for f in os.listdir(d) if not f.startswith("."))


def cache_server(cdir, extra=None, before=None):
    """A daemon whose servers use the module cache cdir; before(e) runs before it starts."""
    e = Env(start=False)
    e.env["OPENMPS_MODULE_CACHE"] = cdir
    e.env.update(extra or {})
    if before:
        before(e)
    e.start()
    return e


def image_client(e, name):
    p = remote(e, "image", name)
    out, err = p.communicate(timeout=30)
    check(p.returncode == 0 and "image ok" in out, "image %s: %r %r" % (name, out, err))
    check(not SANITIZER.search(err), "sanitizer: " + err)


def test_module_images_carried_to_the_next_server():
    """A module image a server loaded is written to the user's cache (a subdirectory per driver
    and GPU kind, 0700) and loaded by the next server at its start, so the client's load finds
    it loaded; a file whose bytes do not match its name is removed; an image larger than the
    cache is not kept."""
    cache = tempfile.mkdtemp(prefix="om-cache-")
    try:
        os.chmod(cache, 0o700)
        cdir = os.path.join(cache, "modules")
        runs = []
        for extra in ({}, {}, {"OPENMPS_MODULE_CACHE_MAX": "0.04K"}):
            def before(e):
                d, files = cache_dir(cdir)
                if len(runs) == 1:  # before the second server: a file that lies about its bytes
                    with open(os.path.join(d, "0000000000000001-10.img"), "w") as f:
                        f.write("fakecubin\n")
                if len(runs) == 2:  # the third starts with an empty cache and a small limit
                    for name in files + ["0000000000000001-10.img"]:
                        if os.path.exists(os.path.join(d, name)):
                            os.unlink(os.path.join(d, name))
            e = cache_server(cdir, extra, before)
            ok = False
            try:
                p = remote(e, "roundtrip")
                out, err = p.communicate(timeout=60)
                check(p.returncode == 0 and "roundtrip ok" in out, "roundtrip: %r %r" % (out, err))
                check(not SANITIZER.search(err), "sanitizer: " + err)
                runs.append((e.log("server.log"), cache_dir(cdir)[1]))
                ok = True
            finally:
                e.close(ok)
        (log1, files1), (log2, files2), (log3, files3) = runs
        check("loaded a new module image of 43 bytes" in log1, "the first server loaded it")
        check(any(f.endswith("-43.img") for f in files1), "and kept it: %r" % files1)
        check(os.stat(cache_dir(cdir)[0]).st_mode & 0o777 == 0o700, "the user's alone")
        check("module cache: loaded 1 image(s), 43 bytes" in log2,
              "the second server loaded it at its start: " + log2[-1500:])
        check("loaded a new module image" not in log2, "so the client's load found it loaded")
        check("removed 0000000000000001-10.img (its bytes do not match its name)" in log2 and
              "0000000000000001-10.img" not in files2, "the lying file was removed: %r" % files2)
        check("loaded a new module image of 43 bytes" in log3 and files3 == [],
              "over the limit: loaded, not kept: %r" % files3)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def test_known_image_is_sent_by_its_keys(daemon):
    """A client loading a module image sends its keys first (om_image_keys): the first client's
    image travels and is loaded; a second client's same image is answered by its keys alone (no
    bytes staged, no second load: the shim says so under OPENMPS_TRACE); a different image
    travels and is loaded again."""
    e = daemon()
    env = dict(e.env, LD_LIBRARY_PATH=os.path.abspath(SHIM_DIR), OPENMPS_TRACE="1")
    outs = []
    for name in ("keyed_a", "keyed_a", "keyed_b"):
        p = subprocess.run([REMOTE_DRIVER, "image", name], env=env, capture_output=True,
                           text=True, timeout=120)
        check(p.returncode == 0 and "image ok" in p.stdout, "%s: %r" % (name, p.stderr[-300:]))
        outs.append("sent by its keys" in p.stderr)
    check(outs == [False, True, False], "by keys only where the server had it: %r" % outs)
    slog = wait_for(lambda: e.log("server.log").count("loaded a new module image") == 2 and
                    e.log("server.log"), what="two images loaded, one each")
    check(slog.count("loaded a new module image") == 2, slog)


def test_module_cache_keeps_the_most_recently_used():
    """Past its size the cache keeps the images used last (a load of a known image counts as a
    use); a starting server loads the newest that fit; leftovers of dead writes, files whose
    size is not their name's, and the image a dead server's start was loading are removed."""
    cache = tempfile.mkdtemp(prefix="om-cache-")
    try:
        os.chmod(cache, 0o700)
        cdir = os.path.join(cache, "modules")
        e = cache_server(cdir, {"OPENMPS_MODULE_CACHE_MAX": "0.04K"})  # two of these images
        ok = False
        try:
            for name in ("k_a", "k_b", "k_a", "k_c"):
                image_client(e, name)
                time.sleep(0.05)  # distinct modification times
            d, files = cache_dir(cdir)
            sizes = {f.split("-")[1] for f in files}
            check(len(files) == 2 and len(sizes) == 1, "two images kept: %r" % files)
            kept = {open(os.path.join(d, f)).read().split("\n")[1] for f in files}
            check(kept == {"k_a:8", "k_c:8"}, "k_b, used least recently, went: %r" % kept)
            ok = True
        finally:
            e.close(ok)
        stale, fresh = os.path.join(d, ".new-stale1"), os.path.join(d, ".new-fresh1")

        def litter(_):
            for path in (stale, fresh):
                open(path, "w").close()
            os.utime(stale, (time.time() - 3600, time.time() - 3600))
            with open(os.path.join(d, "0000000000000002-99.img"), "w") as f:
                f.write("short")
        e = cache_server(cdir, {"OPENMPS_MODULE_CACHE_MAX": "0.02K"}, litter)  # one fits
        ok = False
        try:
            image_client(e, "k_c")
            image_client(e, "k_a")
            log = e.log("server.log")
            check("module cache: loaded 1 image(s)" in log, "only the newest fits: " + log[-1500:])
            check(log.count("loaded a new module image") == 1, "k_c was loaded, k_a was not")
            check("removed 0000000000000002-99.img (its size is not the one its name says)" in log,
                  "the file of the wrong size: " + log[-1500:])
            check(not os.path.exists(stale) and os.path.exists(fresh),
                  "an hour-old leftover went, a fresh one (a write under way) stayed")
            files = cache_dir(cdir)[1]
            check(len(files) == 1 and "\nk_a:8\n" in open(os.path.join(d, files[0])).read(),
                  "the start trimmed the cache to its new size, then k_a was written: %r" % files)
            ok = True
        finally:
            e.close(ok)

        def marked(_):  # as if the last start had died loading k_a's image
            with open(os.path.join(d, ".loading"), "w") as f:
                f.write(files[0] + "\n")
        e = cache_server(cdir, {}, marked)
        ok = False
        try:
            image_client(e, "k_a")
            log = e.log("server.log")
            check("removed %s (the last server's start did not get past loading it)" % files[0]
                  in log, "the image a dead start was loading: " + log[-1500:])
            check("module cache: loaded 0 image(s)" in log and "loaded a new module image" in log,
                  "so the client loaded it anew: " + log[-1500:])
            ok = True
        finally:
            e.close(ok)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def test_module_images_are_not_kept_in_server_memory(daemon):
    """Issue #9, defect 6: the server knows the images it loaded by their hashes, not by copies:
    64 distinct images of 1 MiB leave its resident memory far below 64 MiB more."""
    env = {"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=0"}
    e = daemon(extra_env=env)
    def rss(pid):
        for line in open("/proc/%d/status" % pid):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) << 10
        return 0
    p = remote(e, "bigimage", str(1 << 20))
    check("bigimage 0" in p.communicate(timeout=30)[0], "first image")
    spid = e.servers()[0]
    wait_for(lambda: ended(e, p.pid), what="the first session to end")
    before = rss(spid)
    for i in range(64):
        p = remote(e, "bigimage", str((1 << 20) + 8 * (i + 1)))  # a new image each time
        out, err = p.communicate(timeout=30)
        check("bigimage 0" in out, "image %d: %r %r" % (i, out, err))
    wait_for(lambda: ended(e, p.pid), what="the last session to end")
    grown = rss(spid) - before
    check(grown < (24 << 20), "the server grew by %d MiB for 64 MiB of images" % (grown >> 20))


def test_cache_on_for_a_daemon_without_home(daemon):
    """A daemon started with HOME unset and no OPENMPS_MODULE_CACHE (NVIDIA's device plugin
    starts a root daemon so): its server's HOME is the passwd entry's home of its user (uid 0
    included), so the module cache is on, in that home's .cache/openmps/modules."""
    home = pwd.getpwuid(os.geteuid()).pw_dir
    top = os.path.join(home, ".cache", "openmps")
    made = [p for p in (os.path.join(home, ".cache"), top, top + "/modules")
            if not os.path.exists(p)]
    e = daemon(start=False)
    e.env.pop("HOME", None)
    e.env.pop("OPENMPS_MODULE_CACHE", None)
    try:
        e.start()
        rc, out, err = e.run_client("--pings", 1)
        check(rc == 0, "client: %r" % err)
        slog = wait_for(lambda: "module cache:" in e.log("server.log") and e.log("server.log"),
                        what="the server's module cache line")
        # any count: a home that held a cache before this test (a developer's own runs) keeps it
        want = re.search(r"module cache: loaded \d+ image\(s\), \d+ bytes, \d+ bytes of device "
                         r"memory, in", slog)
        check(want and " from %s/modules/" % top in slog, "on, in the home: " + slog)
        spid = e.servers()[0]
        senv = open("/proc/%d/environ" % spid, "rb").read().split(b"\0")
        check(("HOME=" + home).encode() in senv, "the server's HOME: %r" % senv)
        check(os.stat(top + "/modules").st_uid == os.geteuid(), "made by the server's user")
    finally:
        e.quit()
        # What this test made in the real home, and only that: the deepest directory it made
        # (its cache), then each parent it made if nothing else came into it meanwhile.
        if made:
            shutil.rmtree(made[-1], ignore_errors=True)
        for p in reversed(made[:-1]):
            try:
                os.rmdir(p)
            except OSError:
                pass
