#!/bin/sh
# SPDX-License-Identifier: MIT
# CUDA programs in a container made from `openmps cdi`'s spec alone, on the GPU (issue #25; the
# CPU tier's ipc.cdi_container_client_is_served does it on the driver double): vecadd.cu built
# with the static and the shared runtime runs natively, then in a bubblewrap container
# (tests/ipc/cdi_bwrap.py: every namespace new, the host's /usr read-only, which holds the real
# libcuda.so.1 as NVIDIA's toolkit would put it in, the GPUs' device files as the toolkit gives
# them, and the spec's mounts and variables), served by a daemon outside; the outputs must
# match and the client's trace say it was served. Needs bwrap (Debian: bubblewrap).
# Usage: tests/gpu/container.sh BUILD_DIR [OUT_DIR]. Exit status: failures.
set -u
BUILD=$(cd "${1:-build}" && pwd)
OUT=${2:-$BUILD/gpu-container}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
ARCH=${OPENMPS_GPU_ARCH:-native}
fails=0
command -v bwrap >/dev/null || { echo "FAIL bwrap is not installed (Debian: bubblewrap)"; exit 1; }
TAG=container
. "$HERE/own_daemon.sh"
chmod 755 "$(dirname "$CUDA_MPS_PIPE_DIRECTORY")"
SPEC=$OUT/openmps.json
"$BUILD/openmps" cdi --pipe-dir "$CUDA_MPS_PIPE_DIRECTORY" --container-pipe-dir /run/mps/pipe \
    --install-shim "$OUT/shim" -o "$SPEC" --env OPENMPS_TRACE=1 || exit 1
DEVS=
for d in /dev/nvidia*; do [ -c "$d" ] && DEVS="$DEVS --dev-bind $d $d"; done
for kind in static shared; do
    bin=$OUT/vecadd.$kind
    flags=; [ $kind = shared ] && flags="-cudart shared"
    nvcc -O2 -arch="$ARCH" $flags -o "$bin" "$HERE/vecadd.cu" || { fails=$((fails + 1)); continue; }
    "$bin" >"$OUT/native.$kind.out" 2>&1 || { echo "FAIL vecadd.$kind natively"; fails=$((fails + 1)); }
    # shellcheck disable=SC2086
    python3 "$HERE/../ipc/cdi_bwrap.py" "$SPEC" openmps/mps=client $DEVS \
        --ro-bind "$bin" /opt/prog/vecadd -- /opt/prog/vecadd \
        >"$OUT/container.$kind.out" 2>"$OUT/container.$kind.err"
    rc=$?
    if [ $rc -eq 0 ] && cmp -s "$OUT/native.$kind.out" "$OUT/container.$kind.out" &&
        grep -q 'remote mode: server' "$OUT/container.$kind.err"; then
        echo "PASS vecadd.$kind in the container: $(tr '\n' ' ' <"$OUT/container.$kind.out")"
    else
        echo "FAIL vecadd.$kind in the container (exit $rc): $(tail -c 800 "$OUT/container.$kind.err")"
        fails=$((fails + 1))
    fi
done
echo "container: $fails failure(s)"
exit $fails
