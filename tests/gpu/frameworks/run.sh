#!/bin/sh
# SPDX-License-Identifier: MIT
# The GPU tier's framework programs (issue #11): runs each tests/gpu/frameworks/*.py with the
# machine's python3, natively and under openmps (`openmps run`), and requires both to pass (exit 0) and to print
# the same stdout. A program that exits 77 is skipped, its reason (stderr) printed. Usage:
# tests/gpu/frameworks/run.sh BUILD_DIR [OUT_DIR]. Under tests/gpu/run.sh's daemon when
# OPENMPS_GPU_DAEMON=running; alone, it starts its own. Exit status: failures.
set -u
BUILD=$(cd "${1:-build}" && pwd)
OUT=${2:-$BUILD/gpu-tier/frameworks}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${OPENMPS_GPU_PYTHON:-python3}
LIMIT=${OPENMPS_GPU_FRAMEWORK_TIMEOUT:-600}
mkdir -p "$OUT"
fails=0
passes=0
TAG=fw . "$HERE/../own_daemon.sh"
for src in "$HERE"/*.py; do
    name=$(basename "$src" .py)
    skipped=0
    for mode in native openmps; do
        if [ "$mode" = openmps ]; then
            # as users run them: the shim preloaded and first in LD_LIBRARY_PATH (a library
            # with a DT_RPATH to the driver, Open MPI's, would otherwise load the driver first)
            timeout "$LIMIT" "$BUILD/openmps" run -- "$PY" "$src" >"$OUT/$name.$mode.out" \
                2>"$OUT/$name.$mode.err"
        else
            env CUDA_MPS_PIPE_DIRECTORY=/nonexistent timeout "$LIMIT" "$PY" "$src" \
                >"$OUT/$name.$mode.out" 2>"$OUT/$name.$mode.err"
        fi
        rc=$?
        if [ $rc -eq 77 ]; then
            echo "SKIP $name $mode: $(tail -n 1 "$OUT/$name.$mode.err")"
            skipped=1
        elif [ $rc -eq 0 ]; then
            passes=$((passes + 1)); echo "PASS $name $mode"
        else
            fails=$((fails + 1))
            echo "FAIL $name $mode (exit $rc): $(tail -n 3 "$OUT/$name.$mode.err" | tr '\n' ' ')"
        fi
    done
    if [ $skipped -eq 0 ] && ! cmp -s "$OUT/$name.native.out" "$OUT/$name.openmps.out"; then
        fails=$((fails + 1))
        echo "DIFF $name: native and openmps printed different lines"
        diff "$OUT/$name.native.out" "$OUT/$name.openmps.out" | head -n 20
    fi
done
echo "gpu frameworks: $passes passed, $fails failed"
exit $fails
