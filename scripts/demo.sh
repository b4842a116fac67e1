#!/bin/sh
# SPDX-License-Identifier: MIT
# make demo: the main job. Needs an NVIDIA GPU.
#
# Today it shows the control plane on the real driver: a daemon in its own
# temporary directories, a server that owns the GPU's primary context, test
# clients holding sessions, the front-end's view of them, and a clean quit.
# The concurrency experiment (BENCHMARKS.md B1: N copies of a one-block
# program, natively and under openmps) needs the data plane of issue #3 and
# is reported as not available until it exists.
set -eu
BUILD=${1:-build}
BIN=$(cd "$BUILD" && pwd)

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "make demo: no NVIDIA GPU here (nvidia-smi finds none); the demo needs one." >&2
    exit 1
fi

TMP=$(mktemp -d /tmp/openmps-demo.XXXXXX)
export CUDA_MPS_PIPE_DIRECTORY="$TMP/pipe" CUDA_MPS_LOG_DIRECTORY="$TMP/log"
cleanup() {
    echo quit | "$BIN/openmps-control" >/dev/null 2>&1 || true
    sleep 1
}
trap cleanup EXIT

echo "== GPU"
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
echo "== openmps-control -d (pipe directory $CUDA_MPS_PIPE_DIRECTORY)"
"$BIN/openmps-control" -d
echo device_query | "$BIN/openmps-control"
echo "== 8 clients hold sessions with the server"
i=0
while [ $i -lt 8 ]; do
    "$BIN/tests/om-test-client" --pings 1000 --hold-ms 3000 >"$TMP/client.$i" 2>&1 &
    i=$((i + 1))
done
sleep 1.5
SERVER=$(echo get_server_list | "$BIN/openmps-control")
printf 'get_server_status %s\nps\n' "$SERVER" | "$BIN/openmps-control"
echo "== GPU memory held by the server process (nvidia-smi)"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader || true
wait
grep -h "pings ok" "$TMP"/client.* | sort | uniq -c
echo "== server.log"
cat "$CUDA_MPS_LOG_DIRECTORY/server.log"
echo
echo "The concurrency experiment (B1) needs the data plane (issue #3), which is not built yet."
exit 2
