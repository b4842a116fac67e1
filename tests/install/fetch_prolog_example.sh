#!/bin/sh
# SPDX-License-Identifier: MIT
# Fetches SchedMD's etc/prolog.example, the sample Slurm prolog that starts NVIDIA's MPS for
# --gres=mps jobs, for install.slurm to run unmodified (tests/install/check_slurm.py). Debian 12
# ships it in no binary package, only in the slurm-wlm source package, which apt fetches here
# from the machine's own Debian mirror (its signed Sources index; a deb-src list of our own in a
# temporary directory, the system's apt configuration untouched). Nothing of it enters the
# repository. Usage: tests/install/fetch_prolog_example.sh [DEST]
# (default /var/cache/openmps-tests/prolog.example; .ci/run runs it as root).
set -eu
DEST=${1:-/var/cache/openmps-tests/prolog.example}
[ -s "$DEST" ] && { echo "prolog.example: already at $DEST"; exit 0; }
T=$(mktemp -d /tmp/om-prolog-example.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/lists/partial" "$T/parts"
# The mirror the system's apt uses for bookworm's main (deb.debian.org where none is found).
uri=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' |
    grep -v security | head -n 1)
[ -n "$uri" ] || uri=$(grep -h '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
    2>/dev/null | grep -v security | grep ' bookworm ' | tr ' ' '\n' | grep -m 1 '^http')
uri=${uri:-http://deb.debian.org/debian}
cat >"$T/parts/src.sources" <<END
Types: deb-src
URIs: $uri
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
END
O="-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$T/parts -o Dir::State::Lists=$T/lists"
# shellcheck disable=SC2086 # O is a list of options
apt-get $O update >"$T/update.log" 2>&1 || { cat "$T/update.log"; exit 1; }
# shellcheck disable=SC2086
(cd "$T" && apt-get $O source --download-only slurm-wlm >"$T/source.log" 2>&1) ||
    { cat "$T/source.log"; exit 1; }
tarball=$(ls "$T"/slurm-wlm_*.orig.tar.* | head -n 1)
member=$(tar tf "$tarball" | grep '/etc/prolog.example$' | head -n 1)
[ -n "$member" ] || { echo "no etc/prolog.example in $tarball"; exit 1; }
tar xf "$tarball" -C "$T" "$member"
mkdir -p "$(dirname "$DEST")"
cp "$T/$member" "$DEST"
echo "prolog.example: $(basename "$tarball") -> $DEST"
