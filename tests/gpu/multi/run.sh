#!/bin/sh
# SPDX-License-Identifier: MIT
# The GPU tier's several-GPU checks (issue #12), on a machine with two GPUs or more (skipped,
# with the reason, on one):
#   peer:   one client using both devices (multi.cu peer), natively and under openmps: the
#           same lines (a peer copy, a kernel reading the other device's memory)
#   pair:   a GPU-filling kernel's rate on device 0 and on device 1, each client alone, then two
#           clients at once, one per device: each keeps at least 90 % of its rate alone; while
#           they run, get_device_client_list shows each under its device
#   b1:     B1 per GPU: 16 copies of a 500 ms one-thread kernel on each device at once; the
#           slowest at most 1.15 x one copy alone
#   visible: CUDA_VISIBLE_DEVICES on a client (the daemon has none, so the server's ordinals
#           are the machine's): for each of several values (ordinals, UUID prefixes in both
#           cases, repeats, spaces, an entry past the devices, empty) the program prints the
#           same lines under openmps as natively, and PyTorch's view (torch_visible.py) for 1 and
#           1,0; a client with CUDA_VISIBLE_DEVICES=1 working on its device 0 is listed under the
#           server's device 1 only
#   daemon_visible: CUDA_VISIBLE_DEVICES on the daemon (daemon_visible.sh, daemons of its own):
#           clients by ordinal and by UUID see what a native run of the same devices sees
#   ddp:    PyTorch DDP with the nccl backend, a rank per device (ddp.sh), natively and under
#           openmps: the same lines, no NCCL "Cuda failure"
# Usage: tests/gpu/multi/run.sh BUILD_DIR [OUT_DIR]. Under tests/gpu/run.sh's daemon when
# OPENMPS_GPU_DAEMON=running; alone, it starts its own. Exit status: failures.
set -u
BUILD=$(cd "${1:-build}" && pwd)
OUT=${2:-$BUILD/gpu-tier/multi}
HERE=$(cd "$(dirname "$0")" && pwd)
ARCH=${OPENMPS_GPU_ARCH:-native}
mkdir -p "$OUT"
fails=0
passes=0
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${ngpus:-0}" -lt 2 ]; then
    echo "SKIP multi: this machine has ${ngpus:-0} GPU(s); the several-GPU checks need two"
    echo "gpu multi: 0 passed, 0 failed"
    exit 0
fi
TAG=multi . "$HERE/../own_daemon.sh"
pass() { passes=$((passes + 1)); echo "PASS $*"; }
fail() { fails=$((fails + 1)); echo "FAIL $*"; }
om() { LD_LIBRARY_PATH="$BUILD/lib" "$@"; }
nvcc -O2 -arch="$ARCH" -o "$OUT/multi" "$HERE/multi.cu" >"$OUT/build.log" 2>&1 ||
    { fail "build: $(tail -n 3 "$OUT/build.log")"; echo "gpu multi: $passes passed, $fails failed"; exit 1; }
M=$OUT/multi

# peer
env CUDA_MPS_PIPE_DIRECTORY=/nonexistent "$M" peer >"$OUT/peer.native" 2>"$OUT/peer.native.err"
n=$?
om "$M" peer >"$OUT/peer.openmps" 2>"$OUT/peer.openmps.err"
o=$?
if [ $n -eq 0 ] && [ $o -eq 0 ] && cmp -s "$OUT/peer.native" "$OUT/peer.openmps"; then
    pass "peer: $(tr '\n' ' ' <"$OUT/peer.openmps")"
else
    fail "peer (native $n, openmps $o): $(diff "$OUT/peer.native" "$OUT/peer.openmps" | head -n 8 | tr '\n' ' ') $(tail -n 2 "$OUT/peer.openmps.err")"
fi

# pair
a0=$(om "$M" rate 0 4 | awk '{ print $3 }')
a1=$(om "$M" rate 1 4 | awk '{ print $3 }')
om "$M" rate 0 6 >"$OUT/pair0" 2>&1 &
p0=$!
om "$M" rate 1 6 >"$OUT/pair1" 2>&1 &
p1=$!
sleep 3
echo get_device_client_list | "$BUILD/openmps-control" >"$OUT/device_clients" 2>&1
wait $p0 $p1
b0=$(awk '{ print $3 }' "$OUT/pair0"); b1=$(awk '{ print $3 }' "$OUT/pair1")
echo "pair: device 0 alone $a0, beside device 1's client $b0; device 1 alone $a1, beside $b0 $b1"
if awk -v a="$a0" -v b="$b0" -v c="$a1" -v d="$b1" 'BEGIN { exit !(a > 0 && c > 0 && b >= 0.9 * a && d >= 0.9 * c) }'; then
    pass "pair: each device's client kept its rate ($b0 / $a0, $b1 / $a1)"
else
    fail "pair: $b0 / $a0 on device 0, $b1 / $a1 on device 1"
fi
echo "get_device_client_list while they ran:"; sed 's/^/    /' "$OUT/device_clients"
if grep -q '^\[0\]' "$OUT/device_clients" && grep -q '^\[1\]' "$OUT/device_clients"; then
    pass "device_clients: each device lists its client"
else
    fail "device_clients: $(tr '\n' ' ' <"$OUT/device_clients")"
fi

# b1 per GPU
alone=$(om "$M" spin 0 500 | awk '{ print $3 }')
pids=
for d in 0 1; do
    for i in $(seq 1 16); do
        om "$M" spin $d 500 >"$OUT/b1.$d.$i" 2>&1 &
        pids="$pids $!"
    done
done
wait $pids
worst=$(cat "$OUT"/b1.*.* | awk 'BEGIN { m = 0 } /^spin/ { if ($3 > m) m = $3 } END { print m }')
count=$(cat "$OUT"/b1.*.* | grep -c '^spin')
echo "b1: one copy alone $alone ms; 16 per device on 2 devices: $count ran, slowest $worst ms"
if [ "$count" -eq 32 ] && awk -v a="$alone" -v w="$worst" 'BEGIN { exit !(a > 0 && w <= 1.15 * a) }'; then
    pass "b1: 32 copies over two devices, slowest $worst ms against $alone alone"
else
    fail "b1: $count copies, slowest $worst ms against $alone alone"
fi
# visible
u1=$(env CUDA_MPS_PIPE_DIRECTORY=/nonexistent "$M" uuid 1 | cut -c1-12)
U1=$(echo "$u1" | sed 's/^GPU-//' | tr 'a-f' 'A-F')
vfail=0
vn=0
for spec in 1 1,0 0,1 "$u1" "GPU-$U1" 0,0 "1,0,1" "0,5,0" "1, 0" " 1" "0,5,1" 5 "" -1; do
    vn=$((vn + 1))
    env CUDA_MPS_PIPE_DIRECTORY=/nonexistent CUDA_VISIBLE_DEVICES="$spec" "$M" visible >"$OUT/vis.native" 2>&1
    CUDA_VISIBLE_DEVICES="$spec" om "$M" visible >"$OUT/vis.openmps" 2>&1
    if cmp -s "$OUT/vis.native" "$OUT/vis.openmps"; then
        echo "visible '$spec': $(tr '\n' ' ' <"$OUT/vis.openmps" | cut -c1-160)"
    else
        vfail=$((vfail + 1))
        echo "visible '$spec' differs: native: $(tr '\n' ' ' <"$OUT/vis.native" | cut -c1-200) openmps: $(tr '\n' ' ' <"$OUT/vis.openmps" | cut -c1-200)"
    fi
done
if [ $vfail -eq 0 ]; then
    pass "visible: $vn values of CUDA_VISIBLE_DEVICES, the same lines as natively"
else
    fail "visible: $vfail of $vn values differ from native"
fi
tfail=0
for spec in 1 1,0; do
    env CUDA_MPS_PIPE_DIRECTORY=/nonexistent CUDA_VISIBLE_DEVICES="$spec" python3 "$HERE/torch_visible.py" >"$OUT/tvis.native" 2>&1
    CUDA_VISIBLE_DEVICES="$spec" om python3 "$HERE/torch_visible.py" >"$OUT/tvis.openmps" 2>&1
    echo "torch visible '$spec': native: $(tr '\n' ' ' <"$OUT/tvis.native" | cut -c1-240)"
    cmp -s "$OUT/tvis.native" "$OUT/tvis.openmps" || {
        tfail=$((tfail + 1))
        echo "    openmps differs: $(tail -n 4 "$OUT/tvis.openmps" | tr '\n' ' ' | cut -c1-400)"
    }
done
if [ $tfail -eq 0 ]; then
    pass "torch visible: PyTorch under CUDA_VISIBLE_DEVICES=1 and 1,0 prints what it prints natively"
else
    fail "torch visible: $tfail of 2 differ"
fi
# the only client now: the devices the daemon lists it under
CUDA_VISIBLE_DEVICES=1 om "$M" rate 0 4 >"$OUT/vis.rate" 2>&1 &
pv=$!
sleep 2
echo get_device_client_list | "$BUILD/openmps-control" >"$OUT/vis.clients" 2>&1
wait $pv
echo "get_device_client_list, a client with CUDA_VISIBLE_DEVICES=1 on its device 0:"
sed 's/^/    /' "$OUT/vis.clients"
where=$(awk '/^\[/ { printf "%s ", $1 }' "$OUT/vis.clients")
if [ "$where" = "[1] " ]; then
    pass "visible: the client is listed under the server's device 1 only ($(cat "$OUT/vis.rate"))"
else
    fail "visible: $(tr '\n' ' ' <"$OUT/vis.clients") $(cat "$OUT/vis.rate")"
fi
# daemon_visible
if sh "$HERE/daemon_visible.sh" "$BUILD" "$OUT" >"$OUT/daemon_visible.log" 2>&1; then
    pass "daemon_visible: $(tail -n 1 "$OUT/daemon_visible.log")"
else
    fail "daemon_visible: $(grep -E '^FAIL' "$OUT/daemon_visible.log" | head -n 4 | tr '\n' ' ') $(tail -n 1 "$OUT/daemon_visible.log")"
fi
# ddp: PyTorch DDP over NCCL, a rank per GPU (ddp.sh; alone: scripts/gpu.sh multigpu)
if OPENMPS_GPU_DAEMON=running sh "$HERE/ddp.sh" "$BUILD" "$OUT/ddp"; then
    passes=$((passes + 1))
else
    fails=$((fails + 1))
fi
echo "gpu multi: $passes passed, $fails failed"
exit $fails
