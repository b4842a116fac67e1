#!/bin/sh
# SPDX-License-Identifier: MIT
# Builds the Debian package: a build of the programs alone (BUILD_TESTING=OFF: no Python needed)
# for the prefix /usr in DIR, then `cpack -G DEB` there. Prints the package's path last.
# Usage: scripts/deb.sh [DIR] (default build-deb); `make deb` and the package.deb test run it.
# JOBS: parallel compile jobs (default: the number of CPUs).
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-build-deb}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
GEN=
command -v ninja >/dev/null 2>&1 && GEN="-G Ninja"
if [ ! -f "$DIR/CMakeCache.txt" ]; then
    # shellcheck disable=SC2086 # GEN is empty or two words
    cmake -S "$SRC" -B "$DIR" $GEN -DCMAKE_INSTALL_PREFIX=/usr -DBUILD_TESTING=OFF \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$DIR" -j "$JOBS"
rm -f "$DIR"/openmps_*.deb
(cd "$DIR" && cpack -G DEB >/dev/null)
ls "$DIR"/openmps_*.deb
