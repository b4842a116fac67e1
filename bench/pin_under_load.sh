#!/bin/sh
# SPDX-License-Identifier: MIT
# An experiment for docs/benchmarks.md: while client A's 3 s kernel runs, 40 clients start at
# once, so that most of their sessions pin a reply buffer (the server pins 16 ahead) while a
# kernel runs. Prints how many of them finished before A's kernel ended, the 10 longest calls
# in the server (its debug timeline; A's own synchronize among them) and how many took over 1 s. Usage: bench/pin_under_load.sh [BUILD_DIR] (needs a GPU).
set -eu
BUILD=${1:-build}
T=$(mktemp -d)
export CUDA_MPS_PIPE_DIRECTORY=$T/p CUDA_MPS_LOG_DIRECTORY=$T/l OPENMPS_LOG_LEVEL=3
export OPENMPS_MODULE_CACHE=$T/modules
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
a_done=$(sed -n 's/.*a_done_ms \([0-9]*\).*/\1/p' "$T/a.out")
echo "A's kernel ended at $a_done (epoch ms)"
cat "$T"/b*.out | sed -n 's/.*b_done_ms \([0-9]*\).*/\1/p' |
    awk -v a="$a_done" '{n++; if ($1 < a) early++} END {printf "B clients done: %d, of them before A: %d\n", n, early}'
grep -c "Client .* connected" "$T/l/server.log" | sed 's/^/sessions: /'
grep "timeline" "$T/l/server.log" | sed 's/.*timeline //' |
    awk '{for (i = 1; i <= NF; i++) if ($i == "took_us") print $(i + 1), $0}' | sort -rn |
    awk '$1 > 1000000 {long++} NR <= 10 {print} END {printf "calls over 1 s: %d\n", long}'
rm -rf "$T"
