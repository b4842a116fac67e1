#!/bin/sh
# SPDX-License-Identifier: MIT
# B6's never-seen module against one an earlier server loaded (src/server/imgcache.c): builds
# two new images of bench/calls.cu; runs the first once on a server, which keeps it in a module
# cache of its own; quits that server; then, on a new server, while client A's 3 s kernel runs,
# runs the first (its image loaded at the server's start) and the second (never seen), and
# prints each one's first launch + sync. Needs a GPU. Usage: bench/imgcache_check.sh [BUILD_DIR]
set -eu
BUILD=${1:-build}
T=$(mktemp -d)
export CUDA_MPS_PIPE_DIRECTORY=$T/p CUDA_MPS_LOG_DIRECTORY=$T/l OPENMPS_MODULE_CACHE=$T/cache
mkdir -p "$T/p" "$T/l"
salt=$(date +%s)
nvcc -O2 -arch=native -o "$T/calls" bench/calls.cu
nvcc -O2 -arch=native -o "$T/seen" -DSALT=$((salt % 100000 + 1)) bench/calls.cu
nvcc -O2 -arch=native -o "$T/new" -DSALT=$((salt % 100000 + 2)) bench/calls.cu
export LD_LIBRARY_PATH="$PWD/$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$BUILD/openmps-control" -d
"$T/seen" isolation >/dev/null
echo quit | "$BUILD/openmps-control"
sleep 2
echo "cache: $(ls "$T/cache" | wc -l) image(s)"
"$BUILD/openmps-control" -d
"$T/calls" long 1600000000 >"$T/a.out" &
sleep 1
echo "seen by the earlier server: $("$T/seen" isolation | tr '\n' ' ')"
echo "never seen:                 $("$T/new" isolation | tr '\n' ' ')"
wait
echo quit | "$BUILD/openmps-control"
sleep 1
grep -h "module cache" "$T/l/server.log" || true
rm -rf "$T"
