#!/bin/sh
# SPDX-License-Identifier: MIT
# The GPU tier's limit checks (issue #12), under openmps only (the limits are openmps's):
#   memcap:    a PyTorch client under CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4G (plain caching
#              allocator, then expandable segments) while an uncapped client computes beside it.
# Usage: tests/gpu/limits/run.sh BUILD_DIR [OUT_DIR]. Under tests/gpu/run.sh's daemon when
# OPENMPS_GPU_DAEMON=running; alone, it starts its own. Exit status: failures.
set -u
BUILD=$(cd "${1:-build}" && pwd)
OUT=${2:-$BUILD/gpu-tier/limits}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${OPENMPS_GPU_PYTHON:-python3}
mkdir -p "$OUT"
fails=0
passes=0
if [ "${OPENMPS_GPU_DAEMON:-}" != running ]; then
    TMP=$(mktemp -d /tmp/openmps-gpu-lim.XXXXXX)
    export CUDA_MPS_PIPE_DIRECTORY="$TMP/pipe" CUDA_MPS_LOG_DIRECTORY="$TMP/log"
    cleanup() {
        echo quit | "$BUILD/openmps-control" >/dev/null 2>&1
        sleep 0.5
        cp "$TMP"/log/*.log "$OUT/" 2>/dev/null
    }
    trap cleanup EXIT
    "$BUILD/openmps-control" -d || { echo "cannot start the daemon"; exit 1; }
fi
verdict() { # name rc file
    if [ "$2" -eq 77 ]; then
        echo "SKIP $1: $(tail -n 1 "$3.err")"
    elif [ "$2" -eq 0 ]; then
        passes=$((passes + 1)); echo "PASS $1: $(grep -c '^ok' "$3.out") checks"
    else
        fails=$((fails + 1))
        echo "FAIL $1 (exit $2): $(grep -v '^ok' "$3.out" | head -n 3 | tr '\n' ' ')$(tail -n 3 "$3.err" | tr '\n' ' ')"
    fi
}

for conf in plain expandable; do
    alloc=
    [ $conf = expandable ] && alloc=expandable_segments:True
    "$BUILD/openmps" run -- "$PY" "$HERE/torch_uncapped.py" 20 >"$OUT/uncapped.$conf.out" \
        2>"$OUT/uncapped.$conf.err" &
    upid=$!
    env PYTORCH_CUDA_ALLOC_CONF=$alloc CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4G \
        timeout 300 "$BUILD/openmps" run -- "$PY" "$HERE/torch_memcap.py" 4 \
        >"$OUT/memcap.$conf.out" 2>"$OUT/memcap.$conf.err"
    verdict "memcap.$conf" $? "$OUT/memcap.$conf"
    cat "$OUT/memcap.$conf.out" | sed 's/^/    /'
    wait $upid
    verdict "memcap.$conf.neighbour" $? "$OUT/uncapped.$conf"
done
echo "gpu limits: $passes passed, $fails failed"
exit $fails
