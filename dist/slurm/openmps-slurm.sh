#!/bin/sh
# SPDX-License-Identifier: MIT
# openmps's Slurm prolog and epilog (docs/operations.md, "Slurm"), one script installed under
# both names (libexec/openmps/slurm/prolog and epilog): slurm.conf's Prolog= and Epilog= name
# them. The prolog starts the node's daemon by the drop-in name (nvidia-cuda-mps-control -d,
# from ../mps-bin beside this script) unless it runs already, and records the job; the epilog
# forgets the job and, when no job of the node is left, quits the daemon. Jobs reach the daemon
# through the SPANK plugin (src/slurm/spank_openmps.c), which gives their tasks the same pipe
# directory and the shim.
#
# Settings: openmps.env in slurm.conf's directory (the prolog's SLURM_CONF; /etc/slurm/ on
# Debian), optional, owned by root and writable by root alone (it names programs root runs).
# Lines NAME=VALUE (no quotes, no expansion; # comments), names CUDA_* or OPENMPS_* only, given
# to the daemon's environment: CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY (default
# /run/openmps and /var/log/openmps, a root daemon's own, as the plugin's pipe= and log=; not
# the drop-in name's /tmp/nvidia-mps, which any user could create first and so keep the daemon
# from starting), CUDA_VISIBLE_DEVICES, OPENMPS_*; and OPENMPS_SLURM_STATE, the directory of
# the job records and of this script's log (default /run/openmps-slurm).
# Exit status 0, or 1 with the reason on stderr and in STATE/log (slurmd then drains the node).
set -u
PATH=/usr/sbin:/usr/bin:/sbin:/bin
here=$(dirname "$(readlink -f "$0")")
case "$(basename "$0")" in
prolog*) role=prolog ;;
epilog*) role=epilog ;;
*)
    echo "openmps-slurm: run me as prolog or epilog, not as $(basename "$0")" >&2
    exit 1
    ;;
esac
job=${SLURM_JOB_ID:-}
STATE=/run/openmps-slurm
log() { # a line on stderr and, once STATE exists, in STATE/log
    echo "openmps $role job $job: $*" >&2
    [ -d "$STATE" ] && echo "$(date '+%F %T') $role job $job: $*" >>"$STATE/log"
}
die() {
    log "$*"
    exit 1
}
case "$job" in
'' | *[!0-9]*) die "SLURM_JOB_ID is '$job', not a job id: run me from slurmd" ;;
esac

# ---- the settings
settings=$(dirname "${SLURM_CONF:-/etc/slurm/slurm.conf}")/openmps.env
if [ -e "$settings" ]; then
    owner=$(stat -L -c %u "$settings") || die "cannot stat $settings"
    mode=$(stat -L -c %a "$settings")
    [ "$owner" = "$(id -u)" ] || die "$settings belongs to uid $owner, not to $(id -un)"
    case "$mode" in
    *[2367]? | *[2367]) die "$settings is writable by others than its owner (mode $mode)" ;;
    esac
    n=0
    while IFS= read -r line || [ -n "$line" ]; do
        n=$((n + 1))
        case "$line" in '' | '#'*) continue ;; esac
        name=${line%%=*}
        case "$name" in
        "$line" | '' | *[!A-Za-z0-9_]*) die "$settings:$n: not NAME=VALUE: $line" ;;
        CUDA_* | OPENMPS_*) export "$name=${line#*=}" ;;
        *) die "$settings:$n: $name is neither CUDA_* nor OPENMPS_*" ;;
        esac
    done <"$settings"
fi
STATE=${OPENMPS_SLURM_STATE:-/run/openmps-slurm}
unset OPENMPS_SLURM_STATE
export CUDA_MPS_PIPE_DIRECTORY="${CUDA_MPS_PIPE_DIRECTORY:-/run/openmps}"
export CUDA_MPS_LOG_DIRECTORY="${CUDA_MPS_LOG_DIRECTORY:-/var/log/openmps}"
case "$STATE" in /*) ;; *) die "OPENMPS_SLURM_STATE=$STATE is not an absolute path" ;; esac
if [ ! -d "$STATE" ]; then
    mkdir -p "$STATE" || die "cannot make $STATE"
    chmod 0755 "$STATE" || die "cannot chmod $STATE"
fi
if [ -L "$STATE" ] || [ "$(stat -c %u "$STATE")" != "$(id -u)" ]; then
    die "$STATE is not a directory of $(id -un)'s own"
fi

# ---- the daemon, by the drop-in name; one prolog or epilog of the node at a time
dropin=$here/../mps-bin/nvidia-cuda-mps-control
[ -x "$dropin" ] || die "no $dropin (openmps installed without OPENMPS_MPS_NAMES?)"
exec 9>>"$STATE/lock" || die "cannot open $STATE/lock"
flock -w 120 9 || die "waited 120 s for $STATE/lock"
running() { printf get_server_list | "$dropin" >/dev/null 2>&1; }
if [ $role = prolog ]; then
    : >"$STATE/job.$job" || die "cannot write $STATE/job.$job"
    if running; then
        log "the daemon runs already"
        exit 0
    fi
    # fd 9 (the lock) closed: the daemon would hold it for its whole life
    out=$("$dropin" -d 2>&1 9>&-) || die "nvidia-cuda-mps-control -d failed: $out"
    log "started the daemon (pipe $CUDA_MPS_PIPE_DIRECTORY)"
    exit 0
fi
rm -f "$STATE/job.$job"
for f in "$STATE"/job.*; do
    [ -e "$f" ] && exit 0 # another job of the node still uses the daemon
done
running || exit 0
out=$(printf quit | "$dropin" 2>&1) || die "quit failed: $out"
# the daemon stops its servers, removes its socket, then releases its lock as it exits: the next
# prolog must find neither (a daemon still holding the lock makes the next one's -d fail, "already
# running", though its socket is gone)
sock=$CUDA_MPS_PIPE_DIRECTORY/control.sock
lock=$CUDA_MPS_PIPE_DIRECTORY/control.lock
gone() { [ ! -S "$sock" ] && { [ ! -e "$lock" ] || flock -n "$lock" true; }; }
i=0
until gone; do
    [ $i -lt 600 ] || die "quit, but the daemon still runs after 60 s ($sock or its lock $lock)"
    sleep 0.1
    i=$((i + 1))
done
log "quit the daemon: no job of the node left"
exit 0
