#!/bin/sh
# SPDX-License-Identifier: MIT
# The suites harness's luggage, made on the development machine (the GPU machine reaches no
# registry, and only the repository's own folder travels to it): .suites/ in the repository
# root, ignored by git, which the lead names in the device tool's `carry`.
#
#   tests/gpu/suites/prepare.sh [SUITES]      SUITES (default: shared/suites in the checkout,
#                                            else ../shared/suites) copied to .suites/src,
#                                            then .suites/extra/ (files the shared suites
#                                            lack, in their layout) over it;
#                                            PyTorch's test helpers need expecttest, which the
#                                            GPU machine lacks: Debian's python3-expecttest
#                                            (pure Python) downloaded with apt-get into
#                                            .suites/deb and unpacked into .suites/site
#   tests/gpu/suites/prepare.sh --absorb TGZ  a run's suites.tgz (its results, those of the
#                                            runs before included) becomes .suites/results,
#                                            which the next run continues from
#
# python3-expecttest is in Debian 13 (trixie) and later, not in 12: on an older system the
# package lists of trixie are fetched into a private folder, from the mirror the system's own
# apt sources name, and only that one package is downloaded. EXPECTTEST_DEB=FILE uses a .deb at
# hand instead.
set -eu
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
DOT=$ROOT/.suites

if [ "${1:-}" = --absorb ]; then
    tgz=${2:?"--absorb needs the suites.tgz a run brought back"}
    [ -f "$tgz" ] || { echo "prepare.sh: no file $tgz" >&2; exit 2; }
    tmp=$(mktemp -d)
    tar xzf "$tgz" -C "$tmp"
    [ -d "$tmp/suites" ] || { echo "prepare.sh: $tgz holds no suites/ folder" >&2; exit 2; }
    rm -rf "$DOT/results"
    mkdir -p "$DOT"
    mv "$tmp/suites" "$DOT/results"
    rm -rf "$tmp"
    echo "results of $(grep -c run-start "$DOT/results/events.jsonl" 2>/dev/null || echo 0) run(s) in $DOT/results"
    python3 "$ROOT/tests/gpu/suites/suites.py" report --results "$DOT/results" | tail -n +3 | head -n 12
    exit 0
fi

src=${1:-}
if [ -z "$src" ]; then
    for d in "$ROOT/shared/suites" "$ROOT/../shared/suites"; do
        [ -d "$d" ] && { src=$d; break; }
    done
fi
[ -n "$src" ] && [ -d "$src/cupy/tests" ] && [ -f "$src/pytorch/test_cuda.py" ] || {
    echo "prepare.sh: no suites folder (with cupy/tests and pytorch/test_cuda.py) at '${src:-shared/suites or ../shared/suites}'" >&2
    exit 2
}
rm -rf "$DOT/src"
mkdir -p "$DOT/src" "$DOT/deb"
cp -a "$src/." "$DOT/src/"
# Files the shared suites lack (PyTorch's multi-GPU and NCCL tests), kept in .suites/extra/ in
# the suites' layout (extra/pytorch/test_cuda_multigpu.py, extra/pytorch/distributed/...),
# go over them each time.
[ -d "$DOT/extra" ] && cp -a "$DOT/extra/." "$DOT/src/"

deb=${EXPECTTEST_DEB:-}
if [ -z "$deb" ]; then
    deb=$(ls "$DOT"/deb/python3-expecttest_*_all.deb 2>/dev/null | tail -n 1 || true)
fi
if [ -z "$deb" ]; then
    (cd "$DOT/deb" && apt-get download python3-expecttest >/dev/null 2>&1) || {
        # not in this system's release: trixie's lists, from this system's own Debian mirror
        lists=$(mktemp -d)
        mkdir -p "$lists/lists/partial" "$lists/archives/partial" "$lists/parts"
        main=$(grep -l '^Suites:' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
        [ -n "$main" ] || { echo "prepare.sh: no deb822 apt sources to find the Debian mirror in" >&2; exit 1; }
        uri=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' "$main" | head -n 1)
        key=$(sed -n 's/^Signed-By: *//p' "$main" | head -n 1)
        printf 'Types: deb\nURIs: %s\nSuites: trixie\nComponents: main\nSigned-By: %s\n' \
            "$uri" "$key" >"$lists/parts/trixie.sources"
        o="-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$lists/parts"
        o="$o -o Dir::State::Lists=$lists/lists -o Dir::Cache::Archives=$lists/archives"
        o="$o -o Debug::NoLocking=1"
        apt-get $o update >"$lists/update.log" 2>&1 || {
            echo "prepare.sh: apt-get update of trixie's lists failed:" >&2
            tail -n 5 "$lists/update.log" >&2; exit 1; }
        (cd "$DOT/deb" && apt-get $o download python3-expecttest) || {
            echo "prepare.sh: apt-get download python3-expecttest failed" >&2; exit 1; }
        rm -rf "$lists"
    }
    deb=$(ls "$DOT"/deb/python3-expecttest_*_all.deb | tail -n 1)
fi
tmp=$(mktemp -d)
dpkg-deb -x "$deb" "$tmp"
[ -f "$tmp/usr/lib/python3/dist-packages/expecttest/__init__.py" ] || {
    echo "prepare.sh: $deb holds no usr/lib/python3/dist-packages/expecttest" >&2; exit 1; }
rm -rf "$DOT/site"
mv "$tmp/usr/lib/python3/dist-packages" "$DOT/site"
rm -rf "$tmp"
echo "prepare.sh: $DOT ready ($(du -sh "$DOT" | cut -f1)): suites from $src, expecttest from $(basename "$deb")"
echo "  results to continue from: $([ -d "$DOT/results" ] && echo "$DOT/results" || echo none)"
echo "  on the GPU machine: scripts/gpu.sh suites, with .suites carried"
