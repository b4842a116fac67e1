#!/bin/sh
# SPDX-License-Identifier: MIT
# Several named servers for one user on a GPU (issue #26): a daemon of its own started with -p 3
# and a configuration file giving the running user two servers on device 0, "wide" (75 % of the
# SMs) and "narrow" (25 %), each its own server process; share.cu's GPU-filling kernel run
# through each server's socket ($CUDA_MPS_PIPE_DIRECTORY/<server>/) and natively (no daemon):
#   each server's SM count is its share of the native count within 10 % (servers.share.*);
#   get_server_list names two processes and `server list` both Ready (servers.processes); a
#   client on the main socket goes to the user's first named server, "wide" (servers.uid_route);
#   side by side, how much of their throughput alone each keeps is printed, not judged: two
#   server processes are two contexts, which the GPU time-slices (docs/operations.md).
# Usage: tests/gpu/limits/servers.sh BUILD_DIR [OUT_DIR]. Exit status: failures.
set -u
BUILD=$(cd "${1:-build}" && pwd)
OUT=${2:-$BUILD/gpu-tier/servers}
HERE=$(cd "$(dirname "$0")" && pwd)
ARCH=${OPENMPS_GPU_ARCH:-native}
mkdir -p "$OUT"
fails=0
passes=0
TMP=$(mktemp -d /tmp/openmps-gpu-servers.XXXXXX)
PIPE=$TMP/pipe
cat >"$TMP/config.toml" <<TOML
schema_version = "1.0"
[servers.wide]
uid = $(id -u)
allowed_devices = "0"
active_thread_percentage = "75"
[servers.narrow]
uid = $(id -u)
allowed_devices = "0"
active_thread_percentage = "25"
TOML
DAEMON_UNSET=CUDA_VISIBLE_DEVICES . "$HERE/v3_daemon.sh"
run_in() { # pipe directory [seconds]: "sms N blocks_per_s X"
    env -u CUDA_MPS_ACTIVE_THREAD_PERCENTAGE -u CUDA_VISIBLE_DEVICES CUDA_MPS_PIPE_DIRECTORY="$1" \
        LD_LIBRARY_PATH="$BUILD/lib" "$OUT/share" ${2:-}
}
native=$(run_in "$TMP/no-daemon-here")
nsms=$(echo "$native" | awk '{ print $2 }')
echo "natively: $native"
for s in wide narrow; do
    pct=75; [ $s = narrow ] && pct=25
    got=$(run_in "$PIPE/$s")
    echo "server $s ($pct %): $got"
    # only a program's "sms N ..." line counts (a failed run printed an error: no fraction)
    if echo "$got" | awk -v ns="$nsms" -v p="$pct" '$1 == "sms" { sms = $2 } END {
          frac = ns > 0 ? sms / ns : 0
          printf "    SM fraction %.3f (share %.2f)\n", frac, p / 100
          exit !(sms > 0 && frac >= p / 100 * 0.9 && frac <= p / 100 * 1.1) }'; then
        passes=$((passes + 1)); echo "PASS servers.share.$s"
    else
        fails=$((fails + 1)); echo "FAIL servers.share.$s: $got against $native"
    fi
done
ctl get_server_list >"$OUT/server_list" 2>&1
ctl server list >"$OUT/servers" 2>&1
if [ "$(wc -l <"$OUT/server_list")" -eq 2 ] && [ "$(grep -c ' Ready ' "$OUT/servers")" -eq 2 ]; then
    passes=$((passes + 1)); echo "PASS servers.processes: $(tr '\n' ' ' <"$OUT/server_list")"
else
    fails=$((fails + 1)); echo "FAIL servers.processes: $(cat "$OUT/server_list" "$OUT/servers")"
fi
main=$(run_in "$PIPE")
msms=$(echo "$main" | awk '$1 == "sms" && $2 > 0 { print $2 }')
if [ -n "$msms" ] && [ "$msms" = "$(run_in "$PIPE/wide" | awk '$1 == "sms" { print $2 }')" ]; then
    passes=$((passes + 1)); echo "PASS servers.uid_route: the main socket's client ran in wide"
else
    fails=$((fails + 1)); echo "FAIL servers.uid_route: $main"
fi
wa=$(run_in "$PIPE/wide" 6 | awk '{ print $4 }'); na=$(run_in "$PIPE/narrow" 6 | awk '{ print $4 }')
run_in "$PIPE/wide" 6 >"$OUT/pair.wide" 2>&1 &
p1=$!
sleep 1
run_in "$PIPE/narrow" 5 >"$OUT/pair.narrow" 2>&1
wait $p1
w=$(awk '{ print $4 }' "$OUT/pair.wide"); n=$(awk '{ print $4 }' "$OUT/pair.narrow")
echo "INFO servers.pair: alone: wide $wa, narrow $na; side by side: wide $w, narrow $n"
echo "gpu servers: $passes passed, $fails failed"
exit $fails
