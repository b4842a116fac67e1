#!/bin/sh
# SPDX-License-Identifier: MIT
# The one script for the GPU machine: builds, runs the tests (the GPU tier
# joins them where a GPU is present) and the demo, and writes every log under
# $OUT (default ./gpu-logs). Usage: scripts/gpu.sh [test] [demo] [bench]
set -u
OUT=${OUT:-$PWD/gpu-logs}
mkdir -p "$OUT"
STEPS=${*:-"test demo"}
status=0

{
    date -u
    nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader || true
    nvcc --version | tail -1 || true
    cmake --version | head -1
} >"$OUT/machine.txt" 2>&1

for step in $STEPS; do
    case $step in
    test) make test >"$OUT/test.log" 2>&1 ;;
    demo) make demo >"$OUT/demo.log" 2>&1 ;;
    bench) BENCH_OUT="$OUT/bench" make bench >"$OUT/bench.log" 2>&1 ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
    esac
    rc=$?
    echo "$step: exit $rc" | tee -a "$OUT/summary.txt"
    tail -5 "$OUT/$step.log"
    [ $rc -eq 0 ] || status=1
done
exit $status
