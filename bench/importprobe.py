#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What a framework's import does to the machine's cores (B8's newcomer, docs/benchmarks.md):
runs `python3 -c "import MODULE"` and samples its threads every 5 ms (schedstat: ns on a CPU);
prints the number of threads over time and the CPU the extra threads took, in each 50 ms
window where they ran. Usage: bench/importprobe.py [MODULE] (torch by default); the variables
of the environment reach the import (try OMP_WAIT_POLICY=PASSIVE)."""
import os
import subprocess
import sys
import time


def main():
    mod = sys.argv[1] if len(sys.argv) > 1 else "torch"
    t0 = time.time()
    p = subprocess.Popen([sys.executable, "-c", "import %s" % mod])
    seen, windows = {}, {}
    while p.poll() is None:
        now = time.time() - t0
        try:
            tids = os.listdir("/proc/%d/task" % p.pid)
        except OSError:
            break
        for t in tids:
            try:
                with open("/proc/%d/task/%s/schedstat" % (p.pid, t)) as f:
                    ns = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            if t != str(p.pid):
                w = windows.setdefault(int(now * 20), [0, 0])
                w[0] += ns - seen.get(t, ns if t in seen else 0)
                w[1] = max(w[1], len(tids))
            seen[t] = ns
        time.sleep(0.005)
    print("import %s: %.2f s, %d threads in all, exit %s" % (mod, time.time() - t0, len(seen),
                                                            p.wait()))
    for k in sorted(windows):
        if windows[k][0] > 1e6:
            print("  %5.2f s: %2d threads; the extra ones ran %.1f ms (%.1f cores)"
                  % (k / 20, windows[k][1], windows[k][0] / 1e6, windows[k][0] / 50e6))


if __name__ == "__main__":
    main()
