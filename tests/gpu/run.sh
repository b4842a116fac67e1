#!/bin/sh
# SPDX-License-Identifier: MIT
# The GPU tier: builds tests/gpu/*.cu twice (static and shared runtime), runs each natively and
# under openmps (a daemon in temporary directories, the shim first in LD_LIBRARY_PATH), and
# compares. Usage: tests/gpu/run.sh BUILD_DIR [OUT_DIR]. Exit status: failures.
set -u
BUILD=$(cd "${1:-build}" && pwd)
OUT=${2:-$BUILD/gpu-tier}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
ARCH=${OPENMPS_GPU_ARCH:-native}
fails=0
passes=0

TMP=$(mktemp -d /tmp/openmps-gpu.XXXXXX)
export CUDA_MPS_PIPE_DIRECTORY="$TMP/pipe" CUDA_MPS_LOG_DIRECTORY="$TMP/log"
export OPENMPS_MODULE_CACHE="$TMP/modules" # not the user's: each run starts from an empty one
cleanup() {
    echo quit | "$BUILD/openmps-control" >/dev/null 2>&1
    sleep 0.5
    cp "$TMP"/log/*.log "$OUT/" 2>/dev/null
}
trap cleanup EXIT

for src in "$HERE"/*.cu; do
    name=$(basename "$src" .cu)
    nvcc -O2 -arch="$ARCH" -o "$OUT/$name.static" "$src" >"$OUT/$name.build.log" 2>&1 &&
        nvcc -O2 -arch="$ARCH" -cudart shared -o "$OUT/$name.shared" "$src" \
            >>"$OUT/$name.build.log" 2>&1 || {
        echo "BUILD FAIL $name"; cat "$OUT/$name.build.log"; fails=$((fails + 1)); }
done
# The printing program once more with every fatbin entry compressed, as PyTorch's wheels are
# built (nvcc 13: Zstandard): the server looks into the entries to give its kernels the print turn.
nvcc -O2 -arch="$ARCH" -Xfatbin -compress-all -o "$OUT/printmany.packed" \
    "$HERE/printmany.cu" >>"$OUT/printmany.build.log" 2>&1 || fails=$((fails + 1))
# The 8-stream program once more with the per-thread default stream.
nvcc -O2 -arch="$ARCH" --default-stream per-thread -o "$OUT/streams_ptds.static" \
    "$HERE/streams.cu" >>"$OUT/streams.build.log" 2>&1 || fails=$((fails + 1))

run() { # mode binary args...
    mode=$1; shift
    bin=$1; shift
    tag="$(basename "$bin") $mode"
    if [ "$mode" = openmps ]; then
        env LD_LIBRARY_PATH="$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$bin" "$@" \
            >"$OUT/run.out" 2>"$OUT/run.err"
    else
        "$bin" "$@" >"$OUT/run.out" 2>"$OUT/run.err"
    fi
    rc=$?
    if [ $rc -eq 0 ]; then
        passes=$((passes + 1)); echo "PASS $tag: $(tr '\n' ' ' <"$OUT/run.out")"
    else
        fails=$((fails + 1)); echo "FAIL $tag (exit $rc): $(tail -c 600 "$OUT/run.err")"
    fi
}

"$BUILD/openmps-control" -d || { echo "cannot start the daemon"; exit 1; }
for bin in "$OUT"/*.static "$OUT"/*.shared; do
    [ -x "$bin" ] || continue
    case $bin in
    *spin*) args=20000000 ;;
    *stall* | *launch_rate*) continue ;; # below
    *) args= ;;
    esac
    run native "$bin" $args
    run openmps "$bin" $args
    case $bin in
    *spin*) # the managed-memory variant, and the chain of B1c (4 kernels, 4 dependent tiny ones)
        run native "$bin" 20000000 0 --managed
        run openmps "$bin" 20000000 0 --managed
        run native "$bin" 20000000 0 --chain
        run openmps "$bin" 20000000 0 --chain ;;
    esac
done

# No client stalls another: B's calls while A's kernel runs for about 3 s.
for kind in static shared; do
    bin="$OUT/stall.$kind"
    [ -x "$bin" ] || continue
    LD_LIBRARY_PATH="$BUILD/lib" "$bin" long 1600000000 >"$OUT/stall.a" 2>&1 &
    apid=$!
    while ! grep -q launched "$OUT/stall.a" 2>/dev/null && kill -0 $apid 2>/dev/null; do
        sleep 0.05
    done
    sleep 0.3
    LD_LIBRARY_PATH="$BUILD/lib" "$bin" calls >"$OUT/stall.b" 2>&1
    wait $apid
    worst=$(awk '/^worst_ms/ { m = $3; for (i = 5; i <= NF; i += 2) if ($i > m) m = $i; print m }' "$OUT/stall.b")
    a_done=$(awk '/^a_done_ms/ { print $2 }' "$OUT/stall.a")
    b_done=$(awk '/^b_done_ms/ { print $2 }' "$OUT/stall.b")
    if [ -n "$worst" ] && [ -n "$a_done" ] && [ -n "$b_done" ] &&
        awk -v w="$worst" -v a="$a_done" -v b="$b_done" 'BEGIN { exit !(w <= 1.0 && b < a) }'; then
        passes=$((passes + 1))
        echo "PASS stall.$kind openmps: $(grep worst_ms "$OUT/stall.b"); B done $(awk -v a="$a_done" -v b="$b_done" 'BEGIN { printf "%.0f", a - b }') ms before A"
    else
        fails=$((fails + 1))
        echo "FAIL stall.$kind openmps: $(cat "$OUT/stall.b" "$OUT/stall.a" | tr '\n' ' ')"
    fi
done

# Kernel printf of two clients at once: each gets exactly its own 2 000 lines (issue #22), also
# from compressed fatbin entries (packed).
for kind in static shared packed; do
    bin="$OUT/printmany.$kind"
    [ -x "$bin" ] || continue
    LD_LIBRARY_PATH="$BUILD/lib" "$bin" 2000 100000 >"$OUT/printmany.a" 2>&1 &
    apid=$!
    LD_LIBRARY_PATH="$BUILD/lib" "$bin" 2000 200000 >"$OUT/printmany.b" 2>&1
    brc=$?
    wait $apid
    arc=$?
    verdict=$(for f in a b; do
        base=100000; [ $f = b ] && base=200000
        awk -v base=$base -v n=2000 '
            /^printmany line / { v = $3; if (v < base || v >= base + n) other++; else if (v != base + mine) disorder++; else mine++ }
            END { printf "%s own %d/%d other %d out-of-order %d; ", FILENAME, mine, n, other + 0, disorder + 0 }' "$OUT/printmany.$f"
    done)
    good=$(echo "$verdict" | grep -o 'own 2000/2000 other 0 out-of-order 0' | wc -l)
    if [ $arc -eq 0 ] && [ $brc -eq 0 ] && [ "$good" -eq 2 ]; then
        passes=$((passes + 1)); echo "PASS printmany.$kind two clients: $verdict"
    else
        fails=$((fails + 1)); echo "FAIL printmany.$kind two clients (exit $arc $brc): $verdict"
    fi
done

# Passthrough costs nothing: launches natively and with the shim but no daemon, interleaved,
# 7 processes each. That the shim hands out the driver's own function pointers is checked
# exactly in the CPU tier (ipc.shim_passthrough_without_daemon). Here one process's figure
# moves by up to 30% from run to run (3.4-4.7 us measured natively on the H100), so a 5% bound
# fails on noise: the best of each must be within 20%. That catches only gross regressions
# (a round trip to a server per call costs about 1 us); the exact check is the CPU tier's. The
# figures are printed for the record.
if [ -x "$OUT/launch_rate.static" ]; then
    for i in 1 2 3 4 5 6 7; do
        n=$("$OUT/launch_rate.static" | awk '{ print $2 }')
        p=$(CUDA_MPS_PIPE_DIRECTORY="$TMP/none" LD_LIBRARY_PATH="$BUILD/lib" "$OUT/launch_rate.static" | awk '{ print $2 }')
        r=$(LD_LIBRARY_PATH="$BUILD/lib" "$OUT/launch_rate.static" | awk '{ print $2 }')
        echo "launch_us native $n passthrough $p openmps $r"
    done | tee "$OUT/launch_rate.txt"
    best() { sort -n | head -1; }
    n=$(awk '{ print $3 }' "$OUT/launch_rate.txt" | best)
    p=$(awk '{ print $5 }' "$OUT/launch_rate.txt" | best)
    r=$(awk '{ print $7 }' "$OUT/launch_rate.txt" | best)
    if awk -v n="$n" -v p="$p" 'BEGIN { exit !(n > 0 && p > 0 && p <= n * 1.20) }'; then
        passes=$((passes + 1)); echo "PASS launch_rate passthrough: best $p us vs native $n us (remote $r us)"
    else
        fails=$((fails + 1)); echo "FAIL launch_rate passthrough: best $p us vs native $n us (remote $r us)"
    fi
fi
# GPU memory held by a client process (B4): one client holding its session.
if [ -x "$OUT/stall.static" ]; then
    LD_LIBRARY_PATH="$BUILD/lib" "$OUT/stall.static" long 1600000000 >"$OUT/b4.out" 2>&1 &
    cpid=$!
    while ! grep -q launched "$OUT/b4.out" 2>/dev/null && kill -0 $cpid 2>/dev/null; do
        sleep 0.05
    done
    echo "B4: GPU memory per process while one client runs (client pid $cpid):"
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sed 's/^/  /'
    wait $cpid
fi
# The driver-API families (issue #10): their own runner, under this daemon.
OPENMPS_GPU_DAEMON=running sh "$HERE/api/run.sh" "$BUILD" "$OUT/api"
fails=$((fails + $?))
# Several GPUs (issue #12): skipped with the reason on a machine of one.
OPENMPS_GPU_DAEMON=running sh "$HERE/multi/run.sh" "$BUILD" "$OUT/multi"
fails=$((fails + $?))
# The limits (issue #12): caps and shares under openmps, beside clients without them.
OPENMPS_GPU_DAEMON=running sh "$HERE/limits/run.sh" "$BUILD" "$OUT/limits"
fails=$((fails + $?))
# The libraries and frameworks (issue #11): PyTorch, CuPy, JAX, MPI with the machine's python3,
# each natively and under openmps (a framework that is missing is skipped with its reason).
# OPENMPS_GPU_FRAMEWORKS=off leaves them out (a quick run of the rest; they have their own
# runner, scripts/gpu.sh frameworks).
if [ "${OPENMPS_GPU_FRAMEWORKS:-on}" = off ]; then
    echo "SKIP frameworks: OPENMPS_GPU_FRAMEWORKS=off"
else
    OPENMPS_GPU_DAEMON=running sh "$HERE/frameworks/run.sh" "$BUILD" "$OUT/frameworks"
    fails=$((fails + $?))
fi
echo "gpu tier: $passes passed, $fails failed"
exit $fails
