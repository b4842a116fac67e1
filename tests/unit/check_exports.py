#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The shim exports exactly the symbols of api/driver_api.tsv, each a function, nothing else."""
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
ok = not missing and not extra and not not_code and "[libcuda.so.1]" in soname
print("%d symbols in the table, %d exported; missing %s; extra %s; not functions %s; soname %s" %
      (len(want), len(got), missing[:10], extra[:10], not_code[:10],
       "ok" if "[libcuda.so.1]" in soname else "WRONG"))
sys.exit(0 if ok else 1)
