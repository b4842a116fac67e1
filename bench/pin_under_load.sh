#!/bin/sh
# SPDX-License-Identifier: MIT
# An experiment for docs/benchmarks.md: while client A's 3 s kernel runs, 40 clients start at
# once, so that most of their sessions pin a reply buffer (the server pins 16 ahead) while a
# kernel runs. Prints every call that took over 20 ms in the server (its debug timeline),
# besides A's own synchronize. Usage: bench/pin_under_load.sh [BUILD_DIR] (needs a GPU).
set -eu
BUILD=${1:-build}
T=$(mktemp -d)
export CUDA_MPS_PIPE_DIRECTORY=$T/p CUDA_MPS_LOG_DIRECTORY=$T/l OPENMPS_LOG_LEVEL=3
mkdir -p "$T/p" "$T/l"
nvcc -O2 -arch=native -o "$T/calls" bench/calls.cu
"$BUILD/openmps-control" -d
export LD_LIBRARY_PATH="$PWD/$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$T/calls" long 1600000000 >"$T/a.out" &
sleep 1
i=0
while [ $i -lt 40 ]; do "$T/calls" isolation >"$T/b$i.out" 2>&1 & i=$((i + 1)); done
wait
echo quit | "$BUILD/openmps-control"
sleep 1
echo "A: $(cat "$T/a.out" | tr '\n' ' ')"
echo "B (first of 40): $(cat "$T/b0.out" | tr '\n' ' ')"
grep -c "Client .* connected" "$T/l/server.log" | sed 's/^/sessions: /'
grep "timeline" "$T/l/server.log" | awk '{for (i = 1; i <= NF; i++) if ($i == "took_us" && $(i + 1) > 20000) print}' |
    sed 's/.*timeline //' | head -20
rm -rf "$T"
