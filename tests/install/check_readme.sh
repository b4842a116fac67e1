#!/bin/sh
# SPDX-License-Identifier: MIT
# The README's "See it work, without a GPU" block, run as written (its `make` line aside: the
# build is BUILD) from a directory where build/ is BUILD, with HOME a fresh directory (the
# module cache goes there). Passes when the program was served ("remote mode: server N") and
# the daemon listed that server, then quit.   check_readme.sh SRC BUILD
set -u
SRC=$(cd "$1" && pwd)
BUILD=$(cd "$2" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/om-readme.XXXXXX")
block=$(awk '/^## See it work, without a GPU/ { on = 1 } on && /^```sh/ { take = 1; next }
    take && /^```/ { exit } take' "$SRC/README.md" | grep -v '^make')
if [ -z "$block" ]; then
    echo "FAIL no sh block under 'See it work, without a GPU' in README.md"
    exit 1
fi
ln -s "$BUILD" "$T/build"
mkdir "$T/home"
cleanup() {
    pid=$(cat /tmp/om-pipe/openmps-control.pid 2>/dev/null) && kill -9 "$pid" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
out=$(cd "$T" && env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY HOME="$T/home" \
    bash -c "$block" 2>&1)
echo "$out" | sed 's/^/    /' | head -n 30
i=0
while [ -S /tmp/om-pipe/control.sock ] && [ $i -lt 300 ]; do # quit returns before the exit
    sleep 0.1
    i=$((i + 1))
done
server=$(echo "$out" | sed -n 's/.*remote mode: server \([0-9]*\),.*/\1/p' | head -n 1)
if [ -n "$server" ] && echo "$out" | grep -qx "$server" && [ ! -S /tmp/om-pipe/control.sock ]; then
    echo "ok   the README's block: a program served by server $server, listed, the daemon quit"
    rm -rf /tmp/om-pipe /tmp/om-log
    exit 0
fi
echo "FAIL the README's block: no served program, or its server not listed, or the daemon stayed"
exit 1
