#!/bin/sh
# SPDX-License-Identifier: MIT
# The package.deb test: builds the Debian package as `make deb` does (scripts/deb.sh, a build of
# the programs alone for /usr in DEB_DIR, incremental after the first run), unpacks it with
# dpkg-deb -x into a fresh root (no root needed, nothing installed on the machine), and checks
# and runs it from there (check_install.sh ROOT/usr /usr/bin BUILD). The package's build must
# not have looked for Python.
#   check_package.sh BUILD DEB_DIR
# Exit status 77 (CTest: skipped) where cpack or dpkg-deb is missing.
set -u
BUILD=$(cd "$1" && pwd)
DEB_DIR=$2
HERE=$(cd "$(dirname "$0")" && pwd)
for tool in cpack dpkg-deb; do
    command -v $tool >/dev/null 2>&1 || { echo "skip: no $tool here (Debian: cmake, dpkg)"; exit 77; }
done
# One compile job: the test runs beside others on a machine of two cores.
deb=$(JOBS=${JOBS:-1} sh "$HERE/../../scripts/deb.sh" "$DEB_DIR" 2>"$DEB_DIR.err" | tail -n 1)
if [ ! -f "$deb" ]; then
    echo "FAIL scripts/deb.sh made no package: $(tail -n 20 "$DEB_DIR.err")"
    exit 1
fi
echo "package: $deb ($(stat -c %s "$deb") bytes)"
fails=0
# BUILD_TESTING=OFF needs no Python: the package's build never looked for it
if grep -q '^Python3_EXECUTABLE' "$DEB_DIR/CMakeCache.txt"; then
    echo "FAIL the package's build (BUILD_TESTING=OFF) looked for Python"
    fails=$((fails + 1))
fi
info=$(dpkg-deb -f "$deb" Package Version Architecture Depends)
echo "$info" | sed 's/^/    /'
echo "$info" | grep -q '^Depends: .*libc6' || { echo "FAIL the package depends on no libc6"; fails=$((fails + 1)); }
ROOT=$(mktemp -d "${TMPDIR:-/tmp}/om-deb-root.XXXXXX")
dpkg-deb -x "$deb" "$ROOT" || { echo "FAIL dpkg-deb -x"; exit 1; }
unexpected=$(cd "$ROOT" && find . -mindepth 1 -maxdepth 1 ! -name usr)
[ -z "$unexpected" ] || { echo "FAIL files outside /usr: $unexpected"; fails=$((fails + 1)); }
sh "$HERE/check_install.sh" "$ROOT/usr" /usr/bin "$BUILD"
rc=$?
rm -rf "$ROOT"
exit $((fails + rc))
