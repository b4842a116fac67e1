#!/bin/sh
# SPDX-License-Identifier: MIT
# The GPU tier's driver-API families (issue #10): builds tests/gpu/api/*.cu twice (static and
# shared runtime) into BUILD_DIR/gpu-api, runs each natively and under openmps, and requires
# both to pass (exit 0) AND then to print the same stdout (a diff is shown otherwise). A source
# names its extra link flags on a line "// openmps-gpu-link: FLAGS" and its runs on a line
# "// openmps-gpu-runs: ARG ..." (one run per word, "-" for none; default one run without
# arguments). A line "// openmps-gpu-pypkg: PACKAGE" (e.g. nvidia.cudnn) names a Python package of
# the machine's python3 (OPENMPS_GPU_PYTHON) whose include/ and lib/ the source needs (-I, -L and
# an rpath are added); where it is missing the program is skipped ("SKIP name: reason"), neither
# passed nor failed. Usage: tests/gpu/api/run.sh BUILD_DIR [OUT_DIR]. Called from tests/gpu/run.sh
# with OPENMPS_GPU_DAEMON=running under that run's daemon; alone, it starts its own.
# Exit status: failures.
set -u
BUILD=$(cd "${1:-build}" && pwd)
OUT=${2:-$BUILD/gpu-tier/api}
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$BUILD/gpu-api # the programs, kept out of OUT (which travels back from the GPU machine)
mkdir -p "$OUT" "$BIN"
ARCH=${OPENMPS_GPU_ARCH:-native}
PY=${OPENMPS_GPU_PYTHON:-python3}
LIMIT=${OPENMPS_GPU_API_TIMEOUT:-300} # seconds per run: a hang fails instead of blocking
fails=0
passes=0

TAG=api OWN_MODULE_CACHE=1 . "$HERE/../own_daemon.sh"

# OPENMPS_GPU_API_ONLY="NAME ...": only those programs (a quick look at new ones).
SOURCES=
for src in "$HERE"/*.cu; do
    name=$(basename "$src" .cu)
    case " ${OPENMPS_GPU_API_ONLY:-$name} " in *" $name "*) SOURCES="$SOURCES $src" ;; esac
done

for src in $SOURCES; do
    name=$(basename "$src" .cu)
    link=$(sed -n 's|^// openmps-gpu-link:||p' "$src")
    skip=
    for pkg in $(sed -n 's|^// openmps-gpu-pypkg:||p' "$src"); do
        # the package's directory (a namespace package has no __file__: its first __path__)
        dir=$("$PY" -c 'import importlib, sys; print(list(importlib.import_module(sys.argv[1]).__path__)[0])' "$pkg" 2>&1 | tail -n 1)
        if [ ! -d "$dir/include" ] || [ ! -d "$dir/lib" ]; then
            skip="$PY has no package $pkg with include/ and lib/ ($dir)"; break
        fi
        link="$link -I$dir/include -L$dir/lib -Xlinker -rpath=$dir/lib"
    done
    if [ -n "$skip" ]; then
        echo "SKIP $name: $skip"; rm -f "$BIN/$name.static" "$BIN/$name.shared"; continue
    fi
    # shellcheck disable=SC2086 # the flags are words
    nvcc -O2 -arch="$ARCH" -I"$HERE" -o "$BIN/$name.static" "$src" $link \
        >"$OUT/$name.build.log" 2>&1 &&
        nvcc -O2 -arch="$ARCH" -I"$HERE" -cudart shared -o "$BIN/$name.shared" "$src" $link \
            >>"$OUT/$name.build.log" 2>&1 || {
        echo "BUILD FAIL $name"; cat "$OUT/$name.build.log"; fails=$((fails + 1)); }
done

run() { # mode binary tag args...: the output in $OUT/<tag>.<mode>.out and .err
    mode=$1; bin=$2; tag=$3; shift 3
    if [ "$mode" = openmps ]; then
        env LD_LIBRARY_PATH="$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
            timeout "$LIMIT" "$bin" "$@" >"$OUT/$tag.$mode.out" 2>"$OUT/$tag.$mode.err"
    else
        timeout "$LIMIT" "$bin" "$@" >"$OUT/$tag.$mode.out" 2>"$OUT/$tag.$mode.err"
    fi
    rc=$?
    if [ $rc -eq 0 ]; then
        passes=$((passes + 1)); echo "PASS $tag $mode"
    else
        fails=$((fails + 1))
        if [ $rc -eq 124 ]; then
            echo "FAIL $tag $mode (no end within $LIMIT s)"
        else
            echo "FAIL $tag $mode (exit $rc): $(tail -c 600 "$OUT/$tag.$mode.err")"
        fi
    fi
}

for src in $SOURCES; do
    name=$(basename "$src" .cu)
    runs=$(sed -n 's|^// openmps-gpu-runs:||p' "$src")
    for kind in static shared; do
        bin="$BIN/$name.$kind"
        [ -x "$bin" ] || continue
        for arg in ${runs:--}; do
            if [ "$arg" = - ]; then
                tag="$name.$kind"; set --
            else
                tag="$name.$kind.$arg"; set -- "$arg"
            fi
            before=$fails
            run native "$bin" "$tag" "$@"
            run openmps "$bin" "$tag" "$@"
            if [ $fails -ne "$before" ]; then
                : # a failed run: its output is not compared
            elif cmp -s "$OUT/$tag.native.out" "$OUT/$tag.openmps.out"; then
                passes=$((passes + 1))
                echo "SAME $tag: $(tr '\n' ' ' <"$OUT/$tag.native.out" | cut -c 1-400)"
            else
                fails=$((fails + 1))
                echo "DIFF $tag: stdout under openmps differs from native:"
                diff "$OUT/$tag.native.out" "$OUT/$tag.openmps.out" | head -n 40
            fi
        done
    done
done
echo "gpu api families: $passes passed, $fails failed"
[ $fails -le 255 ] || fails=255 # an exit status
exit $fails
