#!/bin/sh
# SPDX-License-Identifier: MIT
# Protocol 3's namespaces on a GPU (issue #26): a daemon of its own started with -p 3 and a
# configuration file giving the running user's server two namespaces, "quarter" (25 % of the
# SMs) and "rest" (75 %); share.cu's GPU-filling kernel run through each namespace's socket
# ($CUDA_MPS_PIPE_DIRECTORY/main/<ns>/) and through the server's default one (100 %):
#   each namespace's SM count is its share within 10 % and its throughput within 10 % of its SM
#   fraction of the default's; `client list` names each client's namespace; side by side, how
#   much of their throughput alone each keeps is printed (not judged); a client running in "rest"
#   follows `namespace set rest --active-thread-percentage=25` and back to 75 while it runs
#   (namespace.live, as run.sh's share.live does for set_active_thread_percentage).
# Usage: tests/gpu/limits/namespaces.sh BUILD_DIR [OUT_DIR]. Exit status: failures.
set -u
BUILD=$(cd "${1:-build}" && pwd)
OUT=${2:-$BUILD/gpu-tier/namespaces}
HERE=$(cd "$(dirname "$0")" && pwd)
ARCH=${OPENMPS_GPU_ARCH:-native}
mkdir -p "$OUT"
fails=0
passes=0
TMP=$(mktemp -d /tmp/openmps-gpu-ns.XXXXXX)
PIPE=$TMP/pipe
cat >"$TMP/config.toml" <<TOML
schema_version = "1.0"
[servers.main]
uid = $(id -u)
[servers.main.namespaces.quarter]
active_thread_percentage = "25"
[servers.main.namespaces.rest]
active_thread_percentage = "75"
TOML
. "$HERE/v3_daemon.sh"
run_in() { # namespace ("" for the default) [seconds]: "sms N blocks_per_s X"
    env -u CUDA_MPS_ACTIVE_THREAD_PERCENTAGE CUDA_MPS_PIPE_DIRECTORY="$PIPE/main${1:+/$1}" \
        LD_LIBRARY_PATH="$BUILD/lib" "$OUT/share" ${2:-}
}
full=$(run_in "")
fsms=$(echo "$full" | awk '{ print $2 }'); frate=$(echo "$full" | awk '{ print $4 }')
echo "default namespace: $full"
for ns in quarter rest; do
    pct=25; [ $ns = rest ] && pct=75
    got=$(run_in $ns)
    echo "namespace $ns ($pct %): $got"
    # only a program's "sms N blocks_per_s X" line counts (a failed run printed an error)
    if echo "$got" | awk -v fs="$fsms" -v fr="$frate" -v p="$pct" '
        $1 == "sms" { sms = $2; r = $4 } END {
          frac = fs > 0 ? sms / fs : 0; ratio = fr > 0 ? r / fr : 0
          printf "    SM fraction %.3f (share %.2f), throughput %.3f of the default\n", frac, p / 100, ratio
          exit !(sms > 0 && frac >= p / 100 * 0.9 && frac <= p / 100 * 1.1 &&
                 ratio >= frac * 0.9 && ratio <= frac * 1.1) }'; then
        passes=$((passes + 1)); echo "PASS namespace.$ns"
    else
        fails=$((fails + 1)); echo "FAIL namespace.$ns: $got against $full"
    fi
done
qa=$(run_in quarter 6 | awk '{ print $4 }'); ra=$(run_in rest 6 | awk '{ print $4 }')
run_in quarter 6 >"$OUT/pair.quarter" 2>&1 &
p1=$!
sleep 1
ctl client list --all >"$OUT/clients" 2>&1
run_in rest 5 >"$OUT/pair.rest" 2>&1
wait $p1
q=$(awk '{ print $4 }' "$OUT/pair.quarter"); r=$(awk '{ print $4 }' "$OUT/pair.rest")
echo "alone: quarter $qa, rest $ra; side by side: quarter $q, rest $r"
# Informational: lanes of different SM counts come from different splits of the device
# (docs/architecture.md, "The SM share"), so a 25 % and a 75 % client may share SMs.
if awk -v qa="$qa" -v ra="$ra" -v q="$q" -v r="$r" 'BEGIN { exit !(qa > 0 && ra > 0 && q >= 0.9 * qa && r >= 0.9 * ra) }'; then
    echo "INFO namespace.pair: each kept at least 90 % of its throughput beside the other"
else
    echo "INFO namespace.pair: at least one lost more than 10 % beside the other (shared SMs)"
fi
if grep -q " quarter " "$OUT/clients"; then
    passes=$((passes + 1)); echo "PASS namespace.list: $(grep ' quarter ' "$OUT/clients" | head -n 1)"
else
    fails=$((fails + 1)); echo "FAIL namespace.list: $(cat "$OUT/clients")"
fi
# A namespace's new share reaches its running client (SRV_CLIENT_LIMITS): 75 -> 25 -> 75 %.
run_in rest "7 trace" >"$OUT/ns.live" 2>&1 &
lp=$!
sleep 1.5
ctl namespace set rest --server=main --active-thread-percentage=25 >"$OUT/ns.live.set" 2>&1
sleep 3
ctl namespace set rest --server=main --active-thread-percentage=75 >>"$OUT/ns.live.set" 2>&1
wait $lp
if awk -v fr="$frate" '/^at / { t = $2; r = $4; if (t >= 2.5 && t <= 4) { n1++; if (r > m1) m1 = r }
                                last[++n] = t; rate[n] = r }
    END { for (i = 1; i <= n; i++) if (last[i] >= last[n] - 1) { n2++; if (!lo || rate[i] < lo) lo = rate[i] }
          printf "    live: [2.5, 4] s at most %.3f of 100 %% (%d kernels), last second at least %.3f\n", m1 / fr, n1, lo / fr
          exit !(n1 > 0 && n2 > 0 && m1 <= 0.4 * fr && lo >= 0.55 * fr) }' "$OUT/ns.live"; then
    passes=$((passes + 1)); echo "PASS namespace.live: the running client followed 75 -> 25 -> 75"
else
    fails=$((fails + 1)); echo "FAIL namespace.live: $(cat "$OUT/ns.live.set") $(grep -c '^at' "$OUT/ns.live") kernels; $(tail -n 2 "$OUT/ns.live" | tr '\n' ' ')"
fi
echo "gpu namespaces: $passes passed, $fails failed"
exit $fails
