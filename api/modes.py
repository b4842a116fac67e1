#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Keeps the mode column of api/driver_api.tsv true to the code.

An entry point is `remote` when its remote-mode implementation (an r_<name> function
installed in src/client/remote_*.c) talks to the server, `local` when the client answers
it itself (contexts, device counts, the shim's cuInit and cuGetProcAddress), `passthrough`
when the table says so and nothing overrides it, and `unsupported` otherwise.

    api/modes.py            # exit 1 and list the differences
    api/modes.py --write    # rewrite the mode column
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src", "client")
SERVER_HELPERS = {"om_rcall", "om_rpost", "om_rcall_u64", "handle_call", "htod", "dtoh",
                  "memcpy_dd", "memset_d", "create_handle", "load_image",
                  "get_kernel", "attr_call", "uuid_of", "post_launch", "stream_query",
                  "memset_2d", "memcpy_2d", "memcpy_3d", "memcpy_any", "om_remote_entry", "om_rcall_staged",
                  "om_rcall_locked"}


def functions(text):
    """name -> body of every static function defined in text."""
    out = {}
    for m in re.finditer(r"\n(?:static )?CUresult (r_\w+)\([^)]*\)\s*\{", text):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out[m.group(1)] = text[m.end():i]
    return out


def derive():
    bodies, installed = {}, {}
    for name in ("remote_api.c", "remote_ctx.c", "remote_mem2d.c", "remote_hostmem.c"):
        text = open(os.path.join(SRC, name)).read()
        bodies.update(functions(text))
        for m in re.finditer(r"OM_X_SET\((\w+)\)", text):
            installed[m.group(1)] = "r_" + m.group(1)
        for m in re.finditer(r"om_remote_set\(OM_IDX_(\w+),\s*\(void \*\)(r_\w+)\)", text):
            installed[m.group(1)] = m.group(2)

    def talks(fn, seen=()):
        body = bodies.get(fn, "")
        calls = set(re.findall(r"\b(\w+)\(", body))
        if calls & SERVER_HELPERS:
            return True
        return any(c.startswith("r_") and c not in seen and talks(c, seen + (fn,)) for c in calls)

    modes = {sym: ("remote" if talks(fn) else "local") for sym, fn in installed.items()}
    shim = open(os.path.join(SRC, "shim.c")).read()
    for m in re.finditer(r"om_local_fn\[OM_IDX_(\w+)\]", shim):
        modes[m.group(1)] = "local"
    return modes


def main():
    path = os.path.join(HERE, "driver_api.tsv")
    lines = open(path).read().split("\n")
    modes = derive()
    diffs, out = [], []
    for line in lines:
        f = line.split("\t")
        if len(f) == 4 and not line.startswith("#"):
            want = modes.get(f[0], "passthrough" if f[1] == "passthrough" else "unsupported")
            if f[1] != want:
                diffs.append("%s: table says %s, code says %s" % (f[0], f[1], want))
                f[1] = want
            line = "\t".join(f)
        out.append(line)
    if "--write" in sys.argv:
        open(path, "w").write("\n".join(out))
        print("%d mode(s) updated" % len(diffs))
        return 0
    for d in diffs:
        print(d)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
