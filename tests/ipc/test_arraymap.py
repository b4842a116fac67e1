# SPDX-License-Identifier: MIT
"""Sparse array tiles and module texture references (tests/cpu/arraymap_driver.c)."""
import os
import re
import subprocess

from harness import check, driver_program, wait_for


def arraymap_driver(e, *args):
    return driver_program(e, "arraymap-driver", args, stdin=subprocess.PIPE)


def test_arraymap_tiles_and_module_references(daemon):
    """api/remote/arraymap.tsv and texrefs.tsv (arraymap_driver.c): cuMemMapArrayAsync's elements
    reach the double as sent (an array's level and a mipmapped array's tail mapped onto the
    client's tile pool, then unmapped), every refused element (enums out of range, another
    device's bit, reserved words, foreign handles, more than 256) never reaches it; a module's
    texture and surface references bound and used, never destroyed (cuTexRefDestroy refused),
    released at the module's unload; another client's array, allocation handle and module texref
    refused, the same image's texref its own copy; a module's texref not destroyed at the
    session's end."""
    e = daemon(start=False)
    log = os.path.join(e.dir, "arraymap")
    legacy = os.path.join(e.dir, "legacy")
    arrays = os.path.join(e.dir, "arrays")
    e.env.update({"FAKECUDA_ARRAYMAP_LOG": log, "FAKECUDA_LEGACY_LOG": legacy,
                  "FAKECUDA_ARRAY_LOG": arrays, "FAKECUDA_VMM": "1"})
    e.start()
    p = arraymap_driver(e, "basic")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "basic ok" in out, "basic: %r %r" % (out, err))
    lines = open(log).read().splitlines()
    maps = [l for l in lines if l.startswith("cuMemMapArrayAsync")]
    check(len(maps) == 4, "only the two good calls' elements reached the driver: %r" % maps)
    check(" type 0 " in maps[0] and " sub 0 op 1 " in maps[0] and " w 64 " in maps[0]
          and maps[0].endswith("stream set"), "the array's level mapped: %r" % maps)
    check(" type 1 " in maps[1] and " sub 1 op 1 " in maps[1] and " offset 4096 " in maps[1],
          "the mipmapped array's tail mapped: %r" % maps)
    check(all(" op 2 handle 0 " in l for l in maps[2:]), "then unmapped: %r" % maps)
    check(all(not l.endswith("stream null") for l in maps),
          "the client's stream, never the NULL stream: %r" % maps)
    check(any(l.startswith("cuParamSetTexRef ") and " -1 " in l for l in lines),
          "cuParamSetTexRef reached the driver: %r" % lines)
    check(len([l for l in lines if l.startswith("cuSurfRefSetArray")]) == 2,
          "the surface reference bound twice, the bad flags refused: %r" % lines)
    t = re.search(r"texref ([0-9a-f]+)", out).group(1)
    holder = arraymap_driver(e, "hold")
    line = holder.stdout.readline().split()
    check(len(line) == 3, "holder printed its array, handle and texref: %r" % line)
    q = arraymap_driver(e, "steal", *line)
    out2, err2 = q.communicate(timeout=30)
    check(q.returncode == 0 and "steal refused" in out2, "steal: %r %r" % (out2, err2))
    holder.communicate(input="end\n", timeout=30)
    check(holder.returncode == 0, "the holder's calls worked")
    held = "%x" % int(line[2])
    gone = "cuArrayDestroy 0x%x" % int(line[0])
    wait_for(lambda: gone in open(arrays).read().splitlines(),
             what="the holder's session ends (its array destroyed)")
    destroyed = [l.split()[2] for l in open(legacy).read().splitlines()
                 if l.startswith("cuTexRefDestroy")] if os.path.exists(legacy) else []
    check(t not in destroyed and held not in destroyed,
          "a module's texture reference is never destroyed: %r" % destroyed)
