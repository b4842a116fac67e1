#!/bin/sh
# SPDX-License-Identifier: MIT
# CUDA_VISIBLE_DEVICES on the daemon (issue #25), on a machine with two GPUs or more (skipped,
# with the reason, on one): as Slurm's per-GPU daemons and NVIDIA's device plugin run it. For each
# daemon setting (an ordinal, a reordering, a UUID prefix) a daemon of its own in temporary
# directories; under it clients that name no device, devices by ordinal (the server's, which are
# the daemon's list's) and by UUID; each client's `multi visible` lines (count, names, UUIDs,
# buses, a kernel on each device) must be those of a native run whose CUDA_VISIBLE_DEVICES names
# the same machine devices. A UUID of a device the daemon hides leaves the client no device, as
# natively an entry of no device does. An ordinal after a UUID ends the list (the driver under
# "GPU-<prefix of device 1>,0" sees device 1 alone).
# Usage: tests/gpu/multi/daemon_visible.sh BUILD_DIR [OUT_DIR] (tests/gpu/multi/run.sh runs it;
# it needs OUT/multi built by run.sh, or builds it). Exit status: failures.
set -u
BUILD=$(cd "${1:-build}" && pwd)
OUT=${2:-$BUILD/gpu-tier/multi}
HERE=$(cd "$(dirname "$0")" && pwd)
ARCH=${OPENMPS_GPU_ARCH:-native}
mkdir -p "$OUT"
fails=0
passes=0
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${ngpus:-0}" -lt 2 ]; then
    echo "SKIP daemon_visible: this machine has ${ngpus:-0} GPU(s); it needs two"
    echo "gpu daemon_visible: 0 passed, 0 failed"
    exit 0
fi
M=$OUT/multi
[ -x "$M" ] || nvcc -O2 -arch="$ARCH" -o "$M" "$HERE/multi.cu" >"$OUT/build.log" 2>&1 ||
    { echo "FAIL build: $(tail -n 3 "$OUT/build.log")"; echo "gpu daemon_visible: 0 passed, 1 failed"; exit 1; }
pass() { passes=$((passes + 1)); echo "PASS $*"; }
fail() { fails=$((fails + 1)); echo "FAIL $*"; }
u0=$(env CUDA_MPS_PIPE_DIRECTORY=/nonexistent "$M" uuid 0)
u1=$(env CUDA_MPS_PIPE_DIRECTORY=/nonexistent "$M" uuid 1)
u1short=$(echo "$u1" | cut -c1-12)
TMP=$(mktemp -d /tmp/openmps-gpu-dvis.XXXXXX)
n=0
# Each case: DAEMON'S SETTING | CLIENT'S (- for unset) | THE NATIVE SETTING OF THE SAME DEVICES
while IFS='|' read -r dspec cspec nspec; do
    [ -n "$dspec" ] || continue
    n=$((n + 1))
    D=$TMP/d$n
    mkdir -p "$D"
    export CUDA_MPS_PIPE_DIRECTORY="$D/pipe" CUDA_MPS_LOG_DIRECTORY="$D/log"
    if ! CUDA_VISIBLE_DEVICES="$dspec" "$BUILD/openmps-control" -d; then
        fail "daemon '$dspec': it did not start"
        continue
    fi
    if [ "$cspec" = - ]; then
        LD_LIBRARY_PATH="$BUILD/lib" env -u CUDA_VISIBLE_DEVICES "$M" visible >"$D/openmps" 2>&1
    else
        LD_LIBRARY_PATH="$BUILD/lib" CUDA_VISIBLE_DEVICES="$cspec" "$M" visible >"$D/openmps" 2>&1
    fi
    env CUDA_MPS_PIPE_DIRECTORY=/nonexistent CUDA_VISIBLE_DEVICES="$nspec" "$M" visible >"$D/native" 2>&1
    served=$(grep -c 'Accepting client' "$D/log/control.log" 2>/dev/null)
    echo quit | "$BUILD/openmps-control" >/dev/null 2>&1
    cp "$D/log/control.log" "$OUT/daemon_visible.$n.control.log" 2>/dev/null
    cp "$D/log/server.log" "$OUT/daemon_visible.$n.server.log" 2>/dev/null
    if cmp -s "$D/native" "$D/openmps"; then
        pass "daemon '$dspec', client '$cspec' (served ${served:-0}): as natively '$nspec': $(tr '\n' ' ' <"$D/openmps" | cut -c1-160)"
    else
        fail "daemon '$dspec', client '$cspec': native '$nspec': $(tr '\n' ' ' <"$D/native" | cut -c1-200) openmps: $(tr '\n' ' ' <"$D/openmps" | cut -c1-200)"
    fi
done <<CASES
1|-|1
1|0|1
1|$u1|$u1
1|$u0|-1
1,0|-|1,0
1,0|1|0
1,0|1,0|0,1
1,0|$u0|$u0
$u1short,0|-|$u1short,0
$u1short|0|1
CASES
rm -rf "$TMP"
echo "gpu daemon_visible: $passes passed, $fails failed"
exit $fails
