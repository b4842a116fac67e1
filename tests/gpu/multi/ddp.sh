#!/bin/sh
# SPDX-License-Identifier: MIT
# NCCL across two GPUs (issue #24): tests/gpu/multi/ddp_nccl.py (PyTorch DDP, nccl backend, two
# ranks, one GPU each) natively and under openmps with NCCL_DEBUG=WARN; both must exit 0 and
# print the same lines, and openmps's run must log no "Cuda failure". Skipped, with the reason,
# on a machine with one GPU or without PyTorch. Usage: tests/gpu/multi/ddp.sh BUILD_DIR [OUT_DIR]
# (scripts/gpu.sh multigpu; also run by tests/gpu/multi/run.sh). Under tests/gpu/run.sh's daemon
# when OPENMPS_GPU_DAEMON=running; alone, it starts its own. Exit status: failures.
set -u
BUILD=$(cd "${1:-build}" && pwd)
OUT=${2:-$BUILD/gpu-tier/ddp}
HERE=$(cd "$(dirname "$0")" && pwd)
LIMIT=${OPENMPS_GPU_DDP_TIMEOUT:-400}
mkdir -p "$OUT"
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${ngpus:-0}" -lt 2 ]; then
    echo "SKIP ddp: this machine has ${ngpus:-0} GPU(s); DDP across GPUs needs two"
    echo "gpu ddp: 0 passed, 0 failed"
    exit 0
fi
if ! python3 -c 'import torch.distributed as d; assert d.is_nccl_available()' 2>/dev/null; then
    echo "SKIP ddp: python3 has no PyTorch with NCCL"
    echo "gpu ddp: 0 passed, 0 failed"
    exit 0
fi
TAG=ddp . "$HERE/../own_daemon.sh"
env CUDA_MPS_PIPE_DIRECTORY=/nonexistent NCCL_DEBUG=WARN timeout "$LIMIT" \
    python3 "$HERE/ddp_nccl.py" 29517 >"$OUT/ddp.native" 2>"$OUT/ddp.native.err"
n=$?
env LD_LIBRARY_PATH="$BUILD/lib" NCCL_DEBUG=WARN timeout "$LIMIT" \
    python3 "$HERE/ddp_nccl.py" 29518 >"$OUT/ddp.openmps" 2>"$OUT/ddp.openmps.err"
o=$?
if [ $n -eq 0 ] && [ $o -eq 0 ] && cmp -s "$OUT/ddp.native" "$OUT/ddp.openmps" &&
    ! grep -q "Cuda failure" "$OUT/ddp.openmps.err"; then
    echo "PASS ddp: $(tr '\n' ' ' <"$OUT/ddp.openmps")"
    echo "gpu ddp: 1 passed, 0 failed"
    exit 0
fi
echo "FAIL ddp (native $n, openmps $o): native: $(tr '\n' ' ' <"$OUT/ddp.native")"
echo "    openmps: $(tr '\n' ' ' <"$OUT/ddp.openmps")"
echo "    openmps stderr: $(grep -i "warn\|error\|fail" "$OUT/ddp.openmps.err" | head -n 12)"
# Once more with every driver call traced (the trace stays in /tmp: it is large): the failed
# calls, each with the three calls before it, into ddp.traced.failed
T=$(mktemp /tmp/openmps-ddp-trace.XXXXXX)
env LD_LIBRARY_PATH="$BUILD/lib" NCCL_DEBUG=WARN OPENMPS_TRACE=1 timeout "$LIMIT" \
    python3 "$HERE/ddp_nccl.py" 29519 >"$OUT/ddp.traced" 2>"$T"
echo "    traced again (exit $?): the first failed driver calls (ddp.traced.failed):"
grep -B3 '^openmps\[[0-9]*\] cu.*= [1-9][0-9]* (' "$T" | head -n 400 >"$OUT/ddp.traced.failed"
grep '^openmps\[[0-9]*\] cu.*= [1-9][0-9]* (' "$T" | head -n 20 | sed 's/^/      /'
rm -f "$T"
echo "gpu ddp: 0 passed, 1 failed"
exit 1
