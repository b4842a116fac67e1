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
    # B1's late kernels at 127 and 128 copies (docs/benchmarks.md): openmps only, with the
    # server's per-call timeline, then the timeline around each slow point's slowest copy.
    b1diag)
        {
            BENCH_OUT="$OUT/b1diag" OPENMPS_LOG_LEVEL=3 BENCH_MODES=openmps BENCH_WORKLOADS=b1 \
                BENCH_N="${BENCH_N:-1 127 128}" BENCH_REPEATS="${BENCH_REPEATS:-4}" make bench
            python3 bench/timeline.py --slow "$OUT/b1diag/bench.csv" \
                "$OUT/b1diag/logs-openmps/server.log"
        } >"$OUT/b1diag.log" 2>&1 ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
    esac
    rc=$?
    echo "$step: exit $rc" | tee -a "$OUT/summary.txt"
    tail -5 "$OUT/$step.log"
    [ $rc -eq 0 ] || status=1
done
# The device tool brings back at most 8 files: each harness folder travels as one archive,
# without the workloads it built.
for d in "$OUT"/*/; do
    [ -d "$d" ] || continue
    name=$(basename "$d")
    rm -f "$d/spin" "$d/calls" "$d/calls-fresh" "$d/queues"
    tar czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -rf "$d"
done
exit $status
