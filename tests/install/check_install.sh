#!/bin/sh
# SPDX-License-Identifier: MIT
# Checks an installed openmps and runs it: the tree `make install` made (the install.tree test)
# or the Debian package unpacked into a fresh root (the package.deb test, check_package.sh).
#   check_install.sh PREFIX UNIT_BINDIR BUILD
# PREFIX: the installed prefix on disk (a temporary copy of /usr/local, or ROOT/usr);
# UNIT_BINDIR: the bin directory the systemd unit must name (the prefix the build was configured
# for); BUILD: the build tree, for the driver double (tests/libfakecuda.so) and a client program
# (tests/shim-smoke). It checks the files (programs, shim, drop-in link, man pages, completion,
# unit, docs, Slurm's prolog, epilog and plugin), the man pages with mandoc -Tlint and the unit
# with systemd-analyze verify where those are installed (said when not), the completion's
# commands against the daemon's `help`; then starts the installed daemon (-d, private pipe and
# log directories, the double as its driver), runs a client through the installed `openmps run`
# and shim, probes the daemon by the drop-in name, and quits it by that name. Prints "FAIL ..."
# for each failure; exit status: the number of failures (0: all passed).
set -u
PREFIX=$(cd "$1" && pwd)
UNIT_BINDIR=$2
BUILD=$(cd "$3" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
fails=0
fail() { fails=$((fails + 1)); echo "FAIL $*"; }
ok() { echo "ok   $*"; }
T=$(mktemp -d "${TMPDIR:-/tmp}/om-install.XXXXXX")
chmod 755 "$T"
cleanup() {
    pid=$(cat "$T/pipe/openmps-control.pid" 2>/dev/null) && kill -9 "$pid" 2>/dev/null
    if [ "$fails" -eq 0 ]; then rm -rf "$T"; else echo "kept for reading: $T"; fi
}
trap cleanup EXIT

# ---- the files
for f in bin/openmps bin/openmps-control bin/openmps-server; do
    [ -x "$PREFIX/$f" ] && ok "$f" || fail "$f is missing or not executable"
done
SHIM=$(find "$PREFIX"/lib* -path '*/openmps/libcuda.so.1' 2>/dev/null | head -n 1)
[ -n "$SHIM" ] && ok "the shim: ${SHIM#"$PREFIX"/}" || fail "no lib*/openmps/libcuda.so.1"
DROPIN=$PREFIX/libexec/openmps/mps-bin/nvidia-cuda-mps-control
if [ -L "$DROPIN" ] && [ "$(readlink -f "$DROPIN")" = "$(readlink -f "$PREFIX/bin/openmps-control")" ]; then
    ok "the drop-in name -> $(readlink "$DROPIN")"
else
    fail "libexec/openmps/mps-bin/nvidia-cuda-mps-control is not a link to bin/openmps-control"
fi
for f in libexec/openmps/slurm/prolog libexec/openmps/slurm/epilog; do
    [ -x "$PREFIX/$f" ] && ok "$f" || fail "$f is missing or not executable"
done
# the SPANK plugin, where this build made one (Slurm's header found: tests/install/check_slurm.py)
if [ -e "$BUILD/lib/slurm/spank_openmps.so" ]; then
    SPANK=$(find "$PREFIX"/lib* -path '*/openmps/slurm/spank_openmps.so' 2>/dev/null | head -n 1)
    [ -n "$SPANK" ] && [ "$(dirname "$(dirname "$SPANK")")" = "$(dirname "$SHIM")" ] &&
        ok "the SPANK plugin: ${SPANK#"$PREFIX"/}" ||
        fail "no lib*/openmps/slurm/spank_openmps.so beside the shim's folder"
fi
for f in share/man/man1/openmps.1 share/man/man8/openmps-control.8 share/man/man8/openmps-server.8 \
    share/bash-completion/completions/openmps share/bash-completion/completions/openmps-control \
    share/bash-completion/completions/nvidia-cuda-mps-control \
    lib/systemd/system/openmps-control.service share/doc/openmps/README.md \
    share/doc/openmps/operations.md share/doc/openmps/LICENSE; do
    [ -f "$PREFIX/$f" ] && ok "$f" || fail "$f is missing"
done
for p in openmps openmps-control; do
    v=$("$PREFIX/bin/$p" --version 2>&1) && ok "$p --version: $v" || fail "$p --version: $v"
done

# ---- man pages
if command -v mandoc >/dev/null 2>&1; then
    # together in one directory: mandoc finds the pages' cross-references (Xr) there
    mkdir -p "$T/man"
    cp "$PREFIX"/share/man/man1/openmps.1 "$PREFIX"/share/man/man8/openmps-*.8 "$T/man/"
    out=$(cd "$T/man" && mandoc -Tlint openmps.1 openmps-control.8 openmps-server.8 2>&1) &&
        ok "mandoc -Tlint: clean" || fail "mandoc -Tlint: $out"
else
    echo "skip mandoc -Tlint: mandoc is not installed (Debian: mandoc)"
fi

# ---- the systemd unit: the daemon in the foreground from the configured bin directory
UNIT=$PREFIX/lib/systemd/system/openmps-control.service
exec_start=$(sed -n 's/^ExecStart=//p' "$UNIT")
[ "$exec_start" = "$UNIT_BINDIR/openmps-control -f" ] && ok "ExecStart=$exec_start" ||
    fail "the unit's ExecStart is '$exec_start', not '$UNIT_BINDIR/openmps-control -f'"
if command -v systemd-analyze >/dev/null 2>&1; then
    # verify checks that ExecStart exists and that man can open Documentation=: the copy names
    # the installed program, MANPATH the installed pages
    mkdir -p "$T/unit"
    sed "s|^ExecStart=$UNIT_BINDIR/|ExecStart=$PREFIX/bin/|" "$UNIT" >"$T/unit/openmps-control.service"
    out=$(MANPATH="$PREFIX/share/man" systemd-analyze verify "$T/unit/openmps-control.service" 2>&1) &&
        ok "systemd-analyze verify: clean" || fail "systemd-analyze verify: $out"
else
    echo "skip systemd-analyze verify: systemd-analyze is not installed (Debian: systemd)"
fi

# ---- run it: the installed daemon, server, shim, openmps run and drop-in name
export CUDA_MPS_PIPE_DIRECTORY="$T/pipe" CUDA_MPS_LOG_DIRECTORY="$T/log"
export OPENMPS_DRIVER="$BUILD/tests/libfakecuda.so" OPENMPS_SERVER_ENV='FAKECUDA_*'
export OPENMPS_MODULE_CACHE=off
unset OPENMPS_LIB OPENMPS_SERVER LD_PRELOAD LD_LIBRARY_PATH
if out=$("$PREFIX/bin/openmps-control" -d 2>&1); then
    ok "openmps-control -d"
else
    fail "openmps-control -d: $out"
fi

# the completion offers exactly the daemon's commands
cmds=$("$PREFIX/bin/openmps-control" help | awk '{ print $1 }' | sort | tr '\n' ' ')
comp=$(bash -c '. "$1"; COMP_WORDS=(openmps-control ""); COMP_CWORD=1; _openmps_control
    printf "%s\n" "${COMPREPLY[@]}"' - "$PREFIX/share/bash-completion/completions/openmps-control" |
    sort | tr '\n' ' ')
[ -n "$cmds" ] && [ "$cmds" = "$comp" ] && ok "completion: the daemon's $(echo "$cmds" | wc -w) commands" ||
    fail "completion offers '$comp', the daemon has '$cmds'"
# typed by the drop-in name, bash-completion loads completions/nvidia-cuda-mps-control: the same
# completion; and openmps's own commands, cdi's options among them
comp2=$(bash -c '. "$1"; COMP_WORDS=(nvidia-cuda-mps-control ""); COMP_CWORD=1
    $(complete -p nvidia-cuda-mps-control | sed "s/.*-F \([^ ]*\) .*/\1/")
    printf "%s\n" "${COMPREPLY[@]}"' - "$PREFIX/share/bash-completion/completions/nvidia-cuda-mps-control" |
    sort | tr '\n' ' ')
[ -n "$cmds" ] && [ "$comp2" = "$cmds" ] && ok "completion by the drop-in name" ||
    fail "completion of nvidia-cuda-mps-control offers '$comp2', the daemon has '$cmds'"
comp3=$(bash -c '. "$1"; COMP_WORDS=(openmps ""); COMP_CWORD=1; _openmps; echo "${COMPREPLY[*]}"
    COMP_WORDS=(openmps cdi --p); COMP_CWORD=2; _openmps; echo "${COMPREPLY[*]}"
    COMP_WORDS=(openmps top -s ""); COMP_CWORD=3; _openmps; echo "${COMPREPLY[*]}"' - \
    "$PREFIX/share/bash-completion/completions/openmps" | tr '\n' '/')
[ "$comp3" = "run check cdi stats ps smi top help version/--pipe-dir/gpu time mem calls kernels pid/" ] &&
    ok "completion of openmps, openmps cdi and openmps top" ||
    fail "completion of openmps: '$comp3'"
mancmds=$(sed -n 's/^\.It Cm \([a-z_]*\).*/\1/p' "$PREFIX/share/man/man8/openmps-control.8" | sort -u |
    tr '\n' ' ')
mandefault=$(grep -o 'Cm get_[a-z_]*' "$PREFIX/share/man/man8/openmps-control.8" |
    sed 's/Cm //' | sort -u | tr '\n' ' ')
all=$(printf '%s\n' $mancmds $mandefault | sort -u | tr '\n' ' ')
[ "$all" = "$cmds" ] && ok "openmps-control(8) describes every command" ||
    fail "openmps-control(8) describes '$all', the daemon has '$cmds'"

OPENMPS_TRACE=1 LD_DEBUG=libs LD_DEBUG_OUTPUT="$T/ld" "$PREFIX/bin/openmps" run \
    "$BUILD/tests/shim-smoke" >"$T/client.out" 2>"$T/client.err"
rc=$?
if [ $rc -eq 0 ] && grep -q 'remote mode: server' "$T/client.err" &&
    grep -q '^cuDeviceGetName 0 openmps fake GPU 0' "$T/client.out"; then
    ok "openmps run: a client served ($(grep -o 'remote mode: server [0-9]*' "$T/client.err"))"
else
    fail "openmps run (rc $rc): $(tail -n 3 "$T/client.err") $(head -n 3 "$T/client.out")"
fi
loaded=$(cat "$T"/ld.* 2>/dev/null | sed -n 's/.*calling init: \(.*libcuda\.so\.1\)$/\1/p' | head -n 1)
if [ -n "$loaded" ] && [ "$(readlink -f "$loaded")" = "$(readlink -f "$SHIM")" ]; then
    ok "the client's libcuda.so.1 was the installed shim"
else
    fail "the installed shim $SHIM was not the client's libcuda.so.1: '$loaded'"
fi
grep -q 'Accepting client' "$T/log/control.log" 2>/dev/null && ok "control.log: the client accepted" ||
    fail "control.log: no client: $(tail -n 3 "$T/log/control.log" 2>/dev/null)"
probe=$(printf get_default_active_thread_percentage | "$DROPIN" 2>&1)
[ "$probe" = "100.0" ] && ok "the drop-in name's health probe: $probe" || fail "the probe: $probe"
printf quit | "$DROPIN"
i=0
while [ -S "$T/pipe/control.sock" ] && [ $i -lt 600 ]; do
    sleep 0.1
    i=$((i + 1))
done
[ ! -S "$T/pipe/control.sock" ] && ok "quit by the drop-in name" || fail "the daemon did not quit"
echo "install check: $fails failure(s)"
exit $fails
