# SPDX-License-Identifier: MIT
# Sourced by namespaces.sh and servers.sh once BUILD, OUT, HERE, ARCH, TMP and PIPE are set and
# $TMP/config.toml is written: a daemon of protocol 3 of their own with that file (DAEMON_UNSET:
# more variables it starts without), quit at exit with its logs copied to OUT; ctl runs
# openmps-control against it; $OUT/share is share.cu built (an error here ends the script).
export CUDA_MPS_LOG_DIRECTORY=$TMP/log
ctl() { CUDA_MPS_PIPE_DIRECTORY=$PIPE "$BUILD/openmps-control" "$@"; }
cleanup() {
    ctl -q >/dev/null 2>&1
    sleep 0.5
    cp "$TMP"/log/*.log "$OUT/" 2>/dev/null
}
trap cleanup EXIT
unset_args="-u CUDA_MPS_PROTOCOL_VERSION"
for v in ${DAEMON_UNSET:-}; do unset_args="$unset_args -u $v"; done
# shellcheck disable=SC2086 # the options are words
env $unset_args CUDA_MPS_PIPE_DIRECTORY="$PIPE" "$BUILD/openmps-control" -d -p 3 \
    -a "$TMP/config.toml" || { echo "cannot start the daemon"; exit 1; }
if ! nvcc -O2 -arch="$ARCH" -o "$OUT/share" "$HERE/share.cu" >"$OUT/share.build.log" 2>&1; then
    echo "BUILD FAIL share"; cat "$OUT/share.build.log"; exit 1
fi
