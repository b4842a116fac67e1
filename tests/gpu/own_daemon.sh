# SPDX-License-Identifier: MIT
# Sourced by the GPU tier's runners (tests/gpu/*/run.sh) after BUILD and OUT are set: unless
# tests/gpu/run.sh's daemon serves them (OPENMPS_GPU_DAEMON=running), a daemon of their own in
# temporary directories (TAG names them), quit at the runner's exit with its logs copied to OUT.
# OWN_MODULE_CACHE=1: a module cache of its own too (each run starts from an empty one).
if [ "${OPENMPS_GPU_DAEMON:-}" != running ]; then
    TMP=$(mktemp -d "/tmp/openmps-gpu-${TAG:-run}.XXXXXX")
    export CUDA_MPS_PIPE_DIRECTORY="$TMP/pipe" CUDA_MPS_LOG_DIRECTORY="$TMP/log"
    [ "${OWN_MODULE_CACHE:-}" = 1 ] && export OPENMPS_MODULE_CACHE="$TMP/modules"
    cleanup() {
        echo quit | "$BUILD/openmps-control" >/dev/null 2>&1
        sleep 0.5
        cp "$TMP"/log/*.log "$OUT/" 2>/dev/null
    }
    trap cleanup EXIT
    "$BUILD/openmps-control" -d || { echo "cannot start the daemon"; exit 1; }
fi
