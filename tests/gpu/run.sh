#!/bin/sh
# SPDX-License-Identifier: MIT
# The GPU tier: builds tests/gpu/*.cu twice (static and shared runtime), runs each natively and
# under openmps (a daemon in temporary directories, the shim first in LD_LIBRARY_PATH), and
# compares. Usage: tests/gpu/run.sh BUILD_DIR [OUT_DIR]. Exit status: failures.
set -u
BUILD=$(cd "${1:-build}" && pwd)
OUT=${2:-$BUILD/gpu-tier}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
ARCH=${OPENMPS_GPU_ARCH:-native}
fails=0
passes=0

TMP=$(mktemp -d /tmp/openmps-gpu.XXXXXX)
export CUDA_MPS_PIPE_DIRECTORY="$TMP/pipe" CUDA_MPS_LOG_DIRECTORY="$TMP/log"
cleanup() {
    echo quit | "$BUILD/openmps-control" >/dev/null 2>&1
    sleep 0.5
    cp "$TMP"/log/*.log "$OUT/" 2>/dev/null
}
trap cleanup EXIT

for src in "$HERE"/*.cu; do
    name=$(basename "$src" .cu)
    nvcc -O2 -arch="$ARCH" -o "$OUT/$name.static" "$src" >"$OUT/$name.build.log" 2>&1 &&
        nvcc -O2 -arch="$ARCH" -cudart shared -o "$OUT/$name.shared" "$src" \
            >>"$OUT/$name.build.log" 2>&1 || {
        echo "BUILD FAIL $name"; cat "$OUT/$name.build.log"; fails=$((fails + 1)); }
done

run() { # mode binary args...
    mode=$1; shift
    bin=$1; shift
    tag="$(basename "$bin") $mode"
    if [ "$mode" = openmps ]; then
        env LD_LIBRARY_PATH="$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$bin" "$@" \
            >"$OUT/run.out" 2>"$OUT/run.err"
    else
        "$bin" "$@" >"$OUT/run.out" 2>"$OUT/run.err"
    fi
    rc=$?
    if [ $rc -eq 0 ]; then
        passes=$((passes + 1)); echo "PASS $tag: $(tr '\n' ' ' <"$OUT/run.out")"
    else
        fails=$((fails + 1)); echo "FAIL $tag (exit $rc): $(tail -c 600 "$OUT/run.err")"
    fi
}

"$BUILD/openmps-control" -d || { echo "cannot start the daemon"; exit 1; }
for bin in "$OUT"/*.static "$OUT"/*.shared; do
    [ -x "$bin" ] || continue
    case $bin in *spin*) args=20000000 ;; *) args= ;; esac
    run native "$bin" $args
    run openmps "$bin" $args
done
echo "gpu tier: $passes passed, $fails failed"
exit $fails
