#!/bin/sh
# SPDX-License-Identifier: MIT
# One program of tests/gpu/api, looked at closely on the GPU machine: built (static runtime),
# run natively, then under openmps with OPENMPS_TRACE=1 (the last 40 lines of its trace kept) and,
# when it dies of a signal, again under gdb for a backtrace. Usage (repository root, after
# `make`): tests/gpu/api/debug.sh NAME [OUT_DIR]. Prints what it saw.
set -u
NAME=$1
OUT=${2:-/tmp/openmps-debug}
BUILD=$PWD/build
mkdir -p "$OUT"
link=$(sed -n 's|^// openmps-gpu-link:||p' "tests/gpu/api/$NAME.cu")
# shellcheck disable=SC2086 # the flags are words
nvcc -O2 -g -arch=native -Itests/gpu/api -o "$OUT/$NAME" "tests/gpu/api/$NAME.cu" $link || exit 1
echo "== $NAME natively"
"$OUT/$NAME"
echo "exit $?"
T=$(mktemp -d /tmp/openmps-debug.XXXXXX)
export CUDA_MPS_PIPE_DIRECTORY="$T/pipe" CUDA_MPS_LOG_DIRECTORY="$T/log"
"$BUILD/openmps-control" -d || exit 1
echo "== $NAME under openmps"
LD_LIBRARY_PATH="$BUILD/lib" OPENMPS_TRACE=1 "$OUT/$NAME" 2>"$OUT/$NAME.trace"
rc=$?
echo "exit $rc; the trace's end:"
tail -n 40 "$OUT/$NAME.trace"
if [ $rc -gt 128 ] && command -v gdb >/dev/null; then
    echo "== backtrace"
    LD_LIBRARY_PATH="$BUILD/lib" gdb -q -batch -ex run -ex bt "$OUT/$NAME" 2>&1 | tail -n 30
fi
echo quit | "$BUILD/openmps-control" >/dev/null 2>&1
sleep 0.5
tail -n 20 "$T"/log/server.log
