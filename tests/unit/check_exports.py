#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The shim exports exactly the symbols of api/driver_api.tsv, each a function, nothing else; and
its thread-local storage stays small: static TLS is part of every thread of the program, whose
stack may be one it sized itself (issue #24: 360 KiB of buffers there)."""
import subprocess
import sys

lib, table = sys.argv[1], sys.argv[2]
want = {l.split("\t")[0] for l in open(table) if l.strip() and not l.startswith("#")}
out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True,
                     check=True).stdout
got = {}
for line in out.splitlines():
    f = line.split()
    if len(f) == 3:
        got[f[2]] = f[1]
missing = sorted(want - set(got))
extra = sorted(set(got) - want)
not_code = sorted(s for s in want & set(got) if got[s] != "T")
soname = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True).stdout
TLS_MAX = 4096
tls = 0
for line in subprocess.run(["readelf", "-lW", lib], capture_output=True, text=True,
                           check=True).stdout.splitlines():
    f = line.split()
    if f and f[0] == "TLS":
        tls = int(f[5], 16)  # MemSiz
ok = not missing and not extra and not not_code and "[libcuda.so.1]" in soname and tls <= TLS_MAX
print("%d symbols in the table, %d exported; missing %s; extra %s; not functions %s; soname %s; "
      "thread-local storage %d bytes (at most %d)" %
      (len(want), len(got), missing[:10], extra[:10], not_code[:10],
       "ok" if "[libcuda.so.1]" in soname else "WRONG", tls, TLS_MAX))
sys.exit(0 if ok else 1)
