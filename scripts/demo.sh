#!/bin/sh
# SPDX-License-Identifier: MIT
# make demo: the concurrency experiment B1 (docs/benchmark-definitions.md). N copies of a
# program whose kernel runs one thread for about half a second start at once; each prints its kernel time.
# Natively the GPU time-slices between their contexts; under openmps their kernels share the
# server's context and run side by side. Prints each N's slowest copy against one copy.
# Usage: scripts/demo.sh [BUILD_DIR] (N list in $DEMO_N, default "1 5 32").
set -u
BUILD=$(cd "${1:-build}" && pwd)
NS=${DEMO_N:-"1 5 32"}
SECONDS_PER_KERNEL=${DEMO_SECONDS:-0.5}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "make demo: no NVIDIA GPU here (nvidia-smi finds none); the demo needs one." >&2
    exit 1
fi
if ! command -v nvcc >/dev/null 2>&1; then
    echo "make demo: nvcc is needed to build the experiment's program." >&2
    exit 1
fi

TMP=$(mktemp -d /tmp/openmps-demo.XXXXXX)
export CUDA_MPS_PIPE_DIRECTORY="$TMP/pipe" CUDA_MPS_LOG_DIRECTORY="$TMP/log"
cleanup() {
    echo quit | "$BUILD/openmps-control" >/dev/null 2>&1
    # the daemon stops its servers, then exits, releasing its lock: wait for that (30 s at most),
    # not a fixed time that a busy machine outlasts
    lock=$CUDA_MPS_PIPE_DIRECTORY/control.lock i=0
    while [ $i -lt 300 ] && [ -e "$lock" ] && ! flock -n "$lock" true 2>/dev/null; do
        sleep 0.1
        i=$((i + 1))
    done
}
trap cleanup EXIT

nvcc -O2 -arch=native -o "$TMP/spin" "$(dirname "$0")/../tests/gpu/spin.cu" || exit 1

# Runs N copies at once; prints the slowest kernel time in ms, or FAIL with the first error.
slowest() { # mode n [--managed]
    i=0
    # Every copy creates its context, then launches at the same moment.
    start=$(($(date +%s%3N) + 2000 + 60 * $2))
    while [ $i -lt "$2" ]; do
        if [ "$1" = openmps ]; then
            LD_LIBRARY_PATH="$BUILD/lib" "$TMP/spin" "$ITERS" "$start" ${3:-} >"$TMP/out.$i" 2>&1 &
        else
            "$TMP/spin" "$ITERS" "$start" ${3:-} >"$TMP/out.$i" 2>&1 &
        fi
        i=$((i + 1))
    done
    wait
    n_ok=$(cat "$TMP"/out.* | grep -c '^kernel_ms')
    max=$(cat "$TMP"/out.* | awk '/^kernel_ms/ { if ($2 > m) m = $2 } END { printf "%.1f", m }')
    if [ "$n_ok" -ne "$2" ]; then
        echo "FAIL($n_ok/$2): $(grep -hvE '^(kernel_ms|gpu_start_ns|host_a_ns) ' "$TMP"/out.* |
            head -1)"
    else
        echo "$max"
    fi
    rm -f "$TMP"/out.*
}

ITERS=$("$TMP/spin" --calibrate "$SECONDS_PER_KERNEL") || exit 1
"$BUILD/openmps-control" -d || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "B1: one thread, $ITERS dependent steps (${SECONDS_PER_KERNEL} s alone); slowest copy's kernel time (ms), ratio to one copy"
for variant in plain managed; do
    flag=
    [ $variant = managed ] && flag=--managed && echo "Managed-memory variant: the thread first adds two arrays the host filled in managed memory"
    printf '%6s  %14s %8s  %14s %8s\n' N native ratio openmps ratio
    base_native=""
    base_openmps=""
    for n in $NS; do
        nat=$(slowest native "$n" $flag)
        omp=$(slowest openmps "$n" $flag)
        [ -z "$base_native" ] && base_native=$nat
        [ -z "$base_openmps" ] && base_openmps=$omp
        rn=$(awk -v a="$nat" -v b="$base_native" 'BEGIN { if (a+0 > 0 && b+0 > 0) printf "%.2fx", a / b; else print "-" }')
        ro=$(awk -v a="$omp" -v b="$base_openmps" 'BEGIN { if (a+0 > 0 && b+0 > 0) printf "%.2fx", a / b; else print "-" }')
        printf '%6s  %14s %8s  %14s %8s\n' "$n" "$nat" "$rn" "$omp" "$ro"
    done
done
