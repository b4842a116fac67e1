#!/bin/sh
# SPDX-License-Identifier: MIT
# Static SM partitions on a GPU (issue #26): the same commands under openmps and, where the
# installed NVIDIA MPS has them (nvidia-cuda-mps-control -v 13010 or later), under NVIDIA's MPS;
# each side's answers, the SM count its clients see and share.cu's throughput per partition,
# alone and side by side, printed next to each other.
#   openmps: a daemon of its own (-S) in a temporary pipe directory; partitions of A_CHUNKS (4)
#   and B_CHUNKS (8) chunks on GPU 0. PASS when each client sees its lspart row's SM count, a
#   client without CUDA_MPS_SM_PARTITION is refused, the two throughputs are within 15 % of
#   their SM ratio, each keeps at least 85 % of its throughput alone beside the other (their SMs
#   are disjoint), and rm works once they are gone; then, under protocol 3, a client of a
#   namespace whose sm_partition is a partition of A_CHUNKS sees that partition's SM count
#   without naming it. NVIDIA's side is printed, not judged, and its SM counts are compared with
#   openmps's (INFO).
# Usage: tests/gpu/limits/partitions.sh BUILD_DIR [OUT_DIR]. Exit status: failures.
set -u
BUILD=$(cd "${1:-build}" && pwd)
OUT=${2:-$BUILD/gpu-tier/partitions}
HERE=$(cd "$(dirname "$0")" && pwd)
ARCH=${OPENMPS_GPU_ARCH:-native}
A_CHUNKS=${A_CHUNKS:-4}
B_CHUNKS=${B_CHUNKS:-8}
mkdir -p "$OUT"
fails=0
passes=0
TMP=$(mktemp -d /tmp/openmps-gpu-parts.XXXXXX)
OM_PIPE=$TMP/om-pipe
NV_PIPE=$TMP/nv-pipe
NV_STARTED=0
om() { env -u CUDA_MPS_PROTOCOL_VERSION CUDA_MPS_PIPE_DIRECTORY=$OM_PIPE \
    CUDA_MPS_LOG_DIRECTORY=$TMP/om-log "$BUILD/openmps-control" "$@"; }
nv() { env -u CUDA_MPS_PROTOCOL_VERSION CUDA_MPS_PIPE_DIRECTORY=$NV_PIPE \
    CUDA_MPS_LOG_DIRECTORY=$TMP/nv-log nvidia-cuda-mps-control "$@"; }
cleanup() {
    om -q >/dev/null 2>&1
    [ $NV_STARTED = 1 ] && echo quit | nv >/dev/null 2>&1
    sleep 0.5
    mkdir -p "$OUT/om-log" "$OUT/nv-log"
    cp "$TMP"/om-log/*.log "$OUT/om-log/" 2>/dev/null
    cp "$TMP"/nv-log/*.log "$OUT/nv-log/" 2>/dev/null
}
trap cleanup EXIT
pass() { passes=$((passes + 1)); echo "PASS $*"; }
fail() { fails=$((fails + 1)); echo "FAIL $*"; }

if ! nvcc -O2 -arch="$ARCH" -o "$OUT/share" "$HERE/share.cu" >"$OUT/share.build.log" 2>&1; then
    echo "BUILD FAIL share"; cat "$OUT/share.build.log"; exit 1
fi
UUID=$(nvidia-smi -i 0 --query-gpu=uuid --format=csv,noheader | tr -d '[:space:]')
case $UUID in GPU-*) ;; *) echo "cannot read GPU 0's UUID: $UUID"; exit 1 ;; esac
echo "GPU 0: $UUID"

# side SIDE PIPE SHIM: the commands, the clients; writes $OUT/SIDE.* and prints a summary line
# per partition: "SIDE partition X chunks C lspart_sms S client_sms N alone R pair P".
side() {
    s=$1 pipe=$2 shim=$3
    ctl=om; [ "$s" = nvidia ] && ctl=nv
    client() { # partition [seconds]
        if [ -n "$shim" ]; then
            env -u CUDA_MPS_ACTIVE_THREAD_PERCENTAGE CUDA_MPS_PIPE_DIRECTORY="$pipe" \
                CUDA_MPS_SM_PARTITION="$1" LD_LIBRARY_PATH="$shim" "$OUT/share" ${2:-}
        else
            env -u CUDA_MPS_ACTIVE_THREAD_PERCENTAGE -u LD_LIBRARY_PATH \
                CUDA_MPS_PIPE_DIRECTORY="$pipe" CUDA_MPS_SM_PARTITION="$1" "$OUT/share" ${2:-}
        fi
    }
    echo "== $s: lspart before"
    echo lspart | $ctl | tee "$OUT/$s.lspart0"
    a=$(echo "sm_partition add $UUID $A_CHUNKS" | $ctl 2>&1); echo "$a"
    b=$(echo "sm_partition add $UUID $B_CHUNKS" | $ctl 2>&1); echo "$b"
    pa=$(echo "$a" | sed -n 's/^Partition \(GPU-[^ ]*\) created$/\1/p')
    pb=$(echo "$b" | sed -n 's/^Partition \(GPU-[^ ]*\) created$/\1/p')
    if [ -z "$pa" ] || [ -z "$pb" ]; then
        [ "$s" = openmps ] && fail "$s.add: $a / $b"
        return
    fi
    echo "== $s: lspart with two partitions"
    echo lspart | $ctl | tee "$OUT/$s.lspart"
    none=$(client "" 2>&1 | head -n 3)
    echo "a client without a partition: $none"
    if [ "$s" = openmps ]; then
        case $none in *FAILED*) pass "$s.refused" ;; *) fail "$s.refused: $none" ;; esac
    fi
    alone_a=$(client "$pa" 4); alone_b=$(client "$pb" 4)
    client "$pa" 6 >"$OUT/$s.pair.a" 2>&1 &
    p1=$!
    sleep 1
    client "$pb" 4 >"$OUT/$s.pair.b" 2>&1
    wait $p1
    for x in a b; do
        if [ $x = a ]; then p=$pa c=$A_CHUNKS got=$alone_a; else p=$pb c=$B_CHUNKS got=$alone_b; fi
        id=${p#*/}
        lsms=$(awk -v id="$id" '$2 == id { print $4 }' "$OUT/$s.lspart")
        csms=$(echo "$got" | awk '{ print $2 }'); rate=$(echo "$got" | awk '{ print $4 }')
        pair=$(awk '{ print $4 }' "$OUT/$s.pair.$x")
        echo "$s partition $x chunks $c lspart_sms ${lsms:-?} client_sms ${csms:-?}" \
            "alone ${rate:-?} pair ${pair:-?}" | tee -a "$OUT/summary"
        if [ "$s" = openmps ]; then
            if [ -n "$csms" ] && [ "$csms" = "$lsms" ]; then pass "$s.sms.$x: $csms"; else
                fail "$s.sms.$x: client $csms, lspart $lsms ($got)"; fi
            if awk -v r="$rate" -v p="$pair" 'BEGIN { exit !(r > 0 && p >= 0.85 * r) }'; then
                pass "$s.disjoint.$x: $pair of $rate alone"
            else
                fail "$s.disjoint.$x: $pair beside the other, $rate alone"
            fi
        fi
    done
    if [ "$s" = openmps ]; then
        if awk -v a="$alone_a" -v b="$alone_b" 'BEGIN { split(a, x, " "); split(b, y, " ");
                sr = x[2] / y[2]; tr = x[4] / y[4]
                printf "    SM ratio %.3f, throughput ratio %.3f\n", sr, tr
                exit !(x[4] > 0 && y[4] > 0 && tr >= sr * 0.85 && tr <= sr * 1.15) }'; then
            pass "$s.proportional"
        else
            fail "$s.proportional: $alone_a / $alone_b"
        fi
    fi
    for p in "$pa" "$pb"; do
        r=$(echo "sm_partition rm ${p%%/*} ${p#*/}" | $ctl 2>&1); echo "$r"
    done
    echo lspart | $ctl | tee "$OUT/$s.lspart1"
    if [ "$s" = openmps ]; then
        if cmp -s "$OUT/$s.lspart0" "$OUT/$s.lspart1"; then pass "$s.rm"; else
            fail "$s.rm: lspart differs from before"; fi
    fi
}

om -d -S || { echo "cannot start openmps's daemon with -S"; exit 1; }
side openmps "$OM_PIPE" "$BUILD/lib"
om -q >/dev/null 2>&1
sleep 1

# openmps, protocol 3, in NVIDIA's v3 form: a namespace's partition (sm-partition create, which
# needs no -S, then namespace create --sm-partition); a client of the namespace's socket that
# names no partition runs in it.
if om -d -p 3; then
    om server create main >/dev/null
    pn=$(om sm-partition create nsa --server=main --device="$UUID" --chunks="$A_CHUNKS" 2>&1)
    echo "sm-partition create: $pn"
    pv=$(echo "$pn" | sed -n 's/^CUDA_MPS_SM_PARTITION=//p')
    om namespace create nsa --server=main --sm-partition="${pv:-nsa}"
    om sm-partition list | tee "$OUT/openmps.partition-list"
    lsms=$(awk '$3 == "nsa" { print $5 }' "$OUT/openmps.partition-list")
    got=$(env -u CUDA_MPS_ACTIVE_THREAD_PERCENTAGE -u CUDA_MPS_SM_PARTITION \
        CUDA_MPS_PIPE_DIRECTORY="$OM_PIPE/main/nsa" LD_LIBRARY_PATH="$BUILD/lib" "$OUT/share" 2)
    csms=$(echo "$got" | awk '{ print $2 }')
    echo "openmps namespace nsa: partition_sms ${lsms:-?} client_sms ${csms:-?} ($got)" |
        tee -a "$OUT/summary"
    if [ -n "$csms" ] && [ "$csms" = "$lsms" ]; then pass "openmps.namespace.sms: $csms"; else
        fail "openmps.namespace.sms: client $csms, partition list $lsms ($got)"; fi
    om -q >/dev/null 2>&1
    sleep 1
else
    fail "openmps.namespace: the daemon did not start with -p 3"
fi

# NVIDIA's MPS, where its version has static partitioning (skipped cleanly otherwise).
# (its -v prints "Binary version: N" among other lines, as NVIDIA's Isaac ROS package reads it)
nvraw=$(nvidia-cuda-mps-control -v 2>&1 | tr '\n' ' ')
nvver=$(echo "$nvraw" | sed -n 's/.*Binary version: *\([0-9][0-9]*\).*/\1/p')
if ! command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
    echo "SKIP nvidia: nvidia-cuda-mps-control is not installed"
elif [ -z "$nvver" ] || [ "$nvver" -lt 13010 ]; then
    echo "SKIP nvidia: nvidia-cuda-mps-control -v gives binary version '${nvver:-none}'" \
        "($nvraw): static SM partitioning needs 13010 or later"
else
    mkdir -p "$NV_PIPE" "$TMP/nv-log"
    if nv -d -S; then
        NV_STARTED=1
        side nvidia "$NV_PIPE" ""
        echo quit | nv >/dev/null 2>&1
        NV_STARTED=0
        for x in a b; do
            o=$(awk -v x=$x '$1 == "openmps" && $3 == x { print $9 }' "$OUT/summary")
            n=$(awk -v x=$x '$1 == "nvidia" && $3 == x { print $9 }' "$OUT/summary")
            echo "INFO sms.$x: openmps ${o:-?}, NVIDIA ${n:-?}$([ "$o" = "$n" ] && echo ' (same)')"
        done
    else
        echo "SKIP nvidia: its daemon did not start with -S"
    fi
fi
echo "== side by side"
cat "$OUT/summary" 2>/dev/null
echo "gpu partitions: $passes passed, $fails failed"
exit $fails
