#!/bin/sh
# SPDX-License-Identifier: MIT
# The one script for the GPU machine: builds, runs the tests (the GPU tier
# joins them where a GPU is present) and the demo, and writes every log under
# $OUT (default ./gpu-logs). Usage: scripts/gpu.sh [test] [demo] [bench] [b1diag] [torture]
# [fault] [soak] [soak-start] [soak-collect] [api] [frameworks] [gputier] [before-after] [probe]
# [torchtrace] [b7diag] [b8diag] [limits] [probe-green] [share-api] [multi] [multigpu]
# [launchers] [replay] [suites] [container] [namespaces] [servers] [partitions] [stats]
# [probe-jit] [issue23] [primitives] [pack].
# stats: openmps stats against CUDA events timed inside 8 B7 clients, and one idle client
# (issue #27; tests/gpu/stats/check.py; STATS_ARGS: --clients N --batches B).
# api: only the driver-API family programs of the GPU tier (issue #10; tests/gpu/api/run.sh),
# natively and under openmps, stdout compared; one of them looked at closely:
# tests/gpu/api/debug.sh NAME. frameworks: only tests/gpu/frameworks/run.sh (issue #11; also
# part of the tier, gputier).
# probe: the private export tables the libraries and frameworks call, and the pool-trim probe.
# The stress steps (issue #9; tests/gpu/stress/):
#   torture       1000 clients killed with SIGKILL at random instants (TORTURE_* settings)
#   fault         a faulting kernel among working clients, the time to recover (FAULT_*)
#   soak          128 clients for SOAK_SECONDS (600) of mixed work, sampled (SOAK_*)
#   soak-start    the soak in the background (setsid), into SOAK_DIR (/tmp/openmps-soak)
#   soak-collect  waits up to SOAK_WAIT s (560) for it, copies it to $OUT/soak, prints it
# The stress drivers add STRESS_ARGS to their arguments (--fake: a dry run without a GPU).
# suites: CuPy's and PyTorch's own tests natively and under openmps (issue #24;
# tests/gpu/suites/suites.py): needs .suites/ carried (tests/gpu/suites/prepare.sh makes it),
# ends SUITES_SECONDS (550) after this script started, continues from .suites/results, and
# brings back suites.tgz (every run's results so far; prepare.sh --absorb takes it in).
# SUITES_ARGS: the selection and options (--suite pytorch, --files PATTERN, --shard K/N,
# --jobs J, --test-timeout S).
set -u
T0=$(date +%s)
OUT=${OUT:-$PWD/gpu-logs}
mkdir -p "$OUT"
STEPS=${*:-"test demo"}
status=0

{
    date -u
    nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader || true
    nvcc --version | tail -1 || true
    cmake --version | head -1
    echo "clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
    echo "kernel $(uname -r); autogroup $(cat /proc/sys/kernel/sched_autogroup_enabled 2>&1)"
} >"$OUT/machine.txt" 2>&1

for step in $STEPS; do
    case $step in
    test) make test >"$OUT/test.log" 2>&1 ;;
    demo) make demo >"$OUT/demo.log" 2>&1 ;;
    bench) BENCH_OUT="${BENCH_OUT:-$OUT/bench}" make bench >"$OUT/bench.log" 2>&1 ;;
    # Issue #23's comparison as the issue asks for it, in one call: B7 at I23_N copies and B2
    # (I23_WORKLOADS), openmps and NVIDIA MPS (I23_MODES) alternating, 3 passes (I23_PASSES), MPS
    # not past its 48 clients; figures.csv is written as each workload ends, so a call cut
    # short keeps what it measured. B8 is the same with I23_WORKLOADS=b8 (about 50 s a pass
    # and mode). Best followed by `pack`. I23_TAG names a second run of one call apart
    # (issue23-TAG); I23_SECONDS: no pass begun that would end later than that after this script
    # started (BENCH_STOP_AT), so that the steps after it still run within the device's limit.
    issue23)
        {
            make >/dev/null && BENCH_OUT="$OUT/issue23${I23_TAG:+-$I23_TAG}" BENCH_ALTERNATE=1 \
                BENCH_STOP_AT=$([ -n "${I23_SECONDS:-}" ] && echo $((T0 + I23_SECONDS))) \
                BENCH_MODES="${I23_MODES:-openmps,mps}" BENCH_WORKLOADS="${I23_WORKLOADS:-b2,b7}" \
                BENCH_B7_N="${I23_N:-1 4 8 16 32 64 128}" BENCH_B7_MPS_MAX_N=48 \
                BENCH_REPEATS="${I23_PASSES:-3}" python3 bench/run.py --build build
        } >"$OUT/issue23${I23_TAG:+-$I23_TAG}.log" 2>&1 ;;
    # Everything under $OUT but summary.txt and machine.txt into $OUT/logs.tgz: the device tool
    # brings back at most 8 files, 2 folders down. Last on the command line.
    pack)
        (cd "$OUT" && tar czf /tmp/om-logs.tgz --exclude=./summary.txt --exclude=./machine.txt . &&
            find . -mindepth 1 -maxdepth 1 ! -name summary.txt ! -name machine.txt \
                -exec rm -rf {} + && mv /tmp/om-logs.tgz logs.tgz) ;;
    # B1's late kernels at 127 and 128 copies (docs/benchmarks.md): openmps only, with the
    # server's per-call timeline, then the timeline around each slow point's slowest copy.
    b1diag)
        {
            BENCH_OUT="$OUT/b1diag" OPENMPS_LOG_LEVEL=3 BENCH_MODES=openmps BENCH_WORKLOADS=b1 \
                BENCH_N="${BENCH_N:-1 127 128}" BENCH_REPEATS="${BENCH_REPEATS:-4}" make bench
            python3 bench/timeline.py --slow "$OUT/b1diag/bench.csv" \
                "$OUT/b1diag/logs-openmps/server.log"
        } >"$OUT/b1diag.log" 2>&1 ;;
    api)
        { make && tests/gpu/api/run.sh build "$OUT/api"; } >"$OUT/api.log" 2>&1 ;;
    # B7 where openmps fell (16 copies) beside where it held (8), in the variants that tell the
    # suspects apart: the scheduler off, spinning capped (B7DIAG_MODES, B7DIAG_N).
    b7diag)
        {
            make && BENCH_OUT="$OUT/b7diag" BENCH_WORKLOADS=b7 BENCH_REPEATS=2 \
                BENCH_MODES="${B7DIAG_MODES:-openmps,openmps-spincap,openmps-nosched}" \
                BENCH_B7_N="${B7DIAG_N:-8 16}" make bench
        } >"$OUT/b7diag.log" 2>&1 ;;
    # The replay of repeated launches (issue #23): the framework programs, then B7 (and
    # REPLAY_WORKLOADS) with replay on and off beside NVIDIA MPS (REPLAY_MODES, REPLAY_N).
    replay)
        {
            make && tests/gpu/frameworks/run.sh build "$OUT/frameworks"
            BENCH_OUT="$OUT/replay" BENCH_WORKLOADS="${REPLAY_WORKLOADS:-b7}" \
                BENCH_REPEATS="${REPLAY_REPEATS:-2}" \
                BENCH_MODES="${REPLAY_MODES:-openmps,openmps-noreplay,mps}" \
                BENCH_B7_N="${REPLAY_N:-8 32}" make bench
            grep -h "launches replayed\|runs ended\|replay of" \
                "$OUT"/replay/logs-openmps*/server.log | head -n 40
        } >"$OUT/replay.log" 2>&1 ;;
    # B8's worst batches while the newcomer starts, and the server calls (of any client) that
    # overlapped them: B8 under openmps with every call over 1 ms logged (OPENMPS_PROFILE),
    # then bench/b8timeline.py on each timeline (B8DIAG_MODES: more modes beside).
    b8diag)
        {
            make && OPENMPS_PROFILE=1 OPENMPS_PROFILE_SLOW_US=${B8DIAG_SLOW_US:-1000} \
                BENCH_OUT="$OUT/b8diag" BENCH_WORKLOADS=b8 BENCH_REPEATS=1 \
                BENCH_MODES="${B8DIAG_MODES:-openmps}" make bench
            for t in $(ls "$OUT"/b8diag/b8-timeline-*.csv | grep -v -- -sched.csv); do
                m=${t##*/b8-timeline-}; m=${m%.csv}; m=${m%-fresh}
                l="$OUT/b8diag/logs-$m/server.log"
                echo "== $t"
                python3 bench/b8timeline.py "$t" "$([ -f "$l" ] && echo "$l" || echo /dev/null)"
            done
        } >"$OUT/b8diag.log" 2>&1 ;;
    # What one launch costs a thread while T threads of one process launch: in one context (the
    # server today), in a green context each, in a context each (bench/launchers.cu).
    launchers)
        {
            nvcc -O2 -o "$OUT/launchers.bin" bench/launchers.cu -lcuda -lpthread &&
                "$OUT/launchers.bin" "${LAUNCHERS_N:-20000}" && rm -f "$OUT/launchers.bin"
        } >"$OUT/launchers.log" 2>&1 ;;
    # The driver's primitives under B2's copy and synchronize (bench/primitives.cu), in a
    # context scheduled as the server's and in one as a program's natively (issue #23).
    primitives)
        {
            nvcc -O2 -o "$OUT/primitives.bin" bench/primitives.cu -lcuda &&
                echo "blocking-sync context (the server's)" &&
                "$OUT/primitives.bin" "${PRIMITIVES_N:-2000}" &&
                echo "default context (a program's)" &&
                "$OUT/primitives.bin" "${PRIMITIVES_N:-2000}" auto && rm -f "$OUT/primitives.bin"
        } >"$OUT/primitives.log" 2>&1 ;;
    # One ResNet-18 batch in driver calls (bench/calltrace.py), through the shim in passthrough
    # (what the driver sees natively) and under openmps: which calls cost a batch its time.
    # TRACE_CMD traces another program the same way (e.g. "python3 bench/cupy_svd.py 5": CuPy's
    # gesvd loop, the suites' slowest test under openmps).
    torchtrace)
        {
            make && T=$(mktemp -d /tmp/openmps-tt.XXXXXX)
            [ -n "${T:-}" ] && for mode in passthrough openmps; do
                if [ $mode = openmps ]; then
                    export CUDA_MPS_PIPE_DIRECTORY="$T/pipe" CUDA_MPS_LOG_DIRECTORY="$T/log"
                    build/openmps-control -d
                else
                    export CUDA_MPS_PIPE_DIRECTORY=/nonexistent
                fi
                date +%s%3N | LD_LIBRARY_PATH="$PWD/build/lib" OPENMPS_TRACE=1 timeout 300 \
                    ${TRACE_CMD:-python3 bench/torch_worker.py resnet 1 40} >"$OUT/torchtrace.$mode.out" \
                    2>"$T/trace.$mode"
                echo "== $mode: $(cat "$OUT/torchtrace.$mode.out" | tr '\n' ' ')"
                python3 bench/calltrace.py "$T/trace.$mode" --last 20 | head -n 40
                [ $mode = openmps ] && echo quit | build/openmps-control
            done
            unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
            rm -rf "$T"
        } >"$OUT/torchtrace.log" 2>&1 ;;
    # The framework programs (issue #11; tests/gpu/frameworks/run.sh), natively and under openmps.
    frameworks)
        { make && tests/gpu/frameworks/run.sh build "$OUT/frameworks"; } >"$OUT/frameworks.log" 2>&1 ;;
    torture | fault)
        { make && python3 "tests/gpu/stress/$step.py" --build build --out "$OUT/$step"; } \
            >"$OUT/$step.log" 2>&1 ;;
    soak)
        { make && python3 tests/gpu/stress/soak.py --build build --out "$OUT/soak" \
            --seconds "${SOAK_SECONDS:-600}"; } >"$OUT/soak.log" 2>&1 ;;
    soak-start)
        # Detached: the next call collects it. Its output goes to SOAK_DIR only.
        sdir=${SOAK_DIR:-/tmp/openmps-soak}
        {
            if make && rm -rf "$sdir" && mkdir -p "$sdir"; then
                setsid python3 tests/gpu/stress/soak.py --build build --out "$sdir" \
                    --seconds "${SOAK_SECONDS:-600}" </dev/null >"$sdir/console.txt" 2>&1 &
                # its log once it runs (a fixed 5 s ran out on a busy machine), 60 s at most
                i=0
                while [ ! -f "$sdir/soak.log" ] && [ $i -lt 120 ]; do
                    sleep 0.5
                    i=$((i + 1))
                done
                if [ -f "$sdir/soak.log" ]; then
                    echo "soak started in the background into $sdir:"
                    cat "$sdir/soak.log"
                else
                    echo "the soak did not start:"; cat "$sdir/console.txt"; false
                fi
            else
                echo "cannot build or make $sdir"; false
            fi
        } >"$OUT/soak-start.log" 2>&1 ;;
    soak-collect)
        sdir=${SOAK_DIR:-/tmp/openmps-soak}
        {
            waited=0
            while [ ! -f "$sdir/done" ] && [ "$waited" -lt "${SOAK_WAIT:-560}" ] &&
                [ -d "$sdir" ]; do
                sleep 5; waited=$((waited + 5))
            done
            rm -rf "$OUT/soak" && mkdir -p "$OUT/soak"
            for f in "$sdir"/*; do [ -f "$f" ] && cp "$f" "$OUT/soak/"; done
            [ -d "$sdir/failures" ] && cp -r "$sdir/failures" "$OUT/soak/"
            if [ -f "$sdir/done" ]; then
                cat "$sdir/summary.txt"
                grep -q PASS "$sdir/done"
            else
                echo "the soak is not done after ${waited} s (or $sdir is missing); so far:"
                tail -n 20 "$sdir/console.txt" 2>/dev/null
                tail -n 3 "$sdir/soak.csv" 2>/dev/null
                false
            fi
        } >"$OUT/soak-collect.log" 2>&1 ;;
    # Diagnostics (issues #10, #11): the private export tables the CUDA libraries and the
    # frameworks call (OPENMPS_TRACE_TABLES in passthrough: no daemon runs), and the pool-trim
    # probe natively and under openmps. Into $OUT/probe.
    probe)
        {
            make >/dev/null && mkdir -p "$OUT/probe" /tmp/om-probe &&
                nvcc -O2 -arch=native -o /tmp/om-probe/libs tests/gpu/api/libs.cu -Itests/gpu/api \
                    -lcuda -lcublas -lcufft &&
                nvcc -O2 -arch=native -o /tmp/om-probe/pool_trim tests/gpu/probe/pool_trim.cu -lcuda &&
                nvcc -O2 -arch=native -o /tmp/om-probe/tools_tables tests/gpu/probe/tools_tables.cu \
                    -lcuda
            echo "tools_tables natively:"; /tmp/om-probe/tools_tables
            L="LD_LIBRARY_PATH=$PWD/build/lib CUDA_MPS_PIPE_DIRECTORY=/tmp/om-probe/none"
            env $L OPENMPS_TRACE=1 OPENMPS_TRACE_TABLES=1 /tmp/om-probe/libs \
                >"$OUT/probe/libs.out" 2>"$OUT/probe/libs.trace"
            echo "libs passthrough traced: exit $?"
            for fw in torch cupy; do
                case $fw in
                torch) code="import torch; a = torch.randn(512, 512, device='cuda'); print(float((a @ a).sum()))" ;;
                cupy) code="import cupy; a = cupy.random.rand(512, 512, dtype=cupy.float32); print(float((a @ a).sum())); print(float(cupy.fft.fft(a).real.sum()))" ;;
                esac
                env $L OPENMPS_TRACE_TABLES=1 timeout 120 python3 -c "$code" \
                    >"$OUT/probe/$fw.out" 2>"$OUT/probe/$fw.tables"
                echo "$fw passthrough traced: exit $?"
                env $L OPENMPS_TRACE=1 timeout 120 python3 -c "$code" 2>&1 | \
                    sed -n 's/^openmps\[[0-9]*\] \([A-Za-z0-9_]*\)(.*/\1/p' | sort | uniq -c | \
                    sort -rn >"$OUT/probe/$fw.calls"
            done
            echo "pool_trim natively:"; /tmp/om-probe/pool_trim
            T=/tmp/om-probe/d && mkdir -p $T/pipe $T/log
            CUDA_MPS_PIPE_DIRECTORY=$T/pipe CUDA_MPS_LOG_DIRECTORY=$T/log build/openmps-control -d
            echo "pool_trim under openmps:"
            CUDA_MPS_PIPE_DIRECTORY=$T/pipe LD_LIBRARY_PATH=$PWD/build/lib /tmp/om-probe/pool_trim
            CUDA_MPS_PIPE_DIRECTORY=$T/pipe LD_LIBRARY_PATH=$PWD/build/lib OPENMPS_TRACE_TABLES=1 \
                OPENMPS_TRACE=1 /tmp/om-probe/libs >"$OUT/probe/libs.remote.out" \
                2>"$OUT/probe/libs.remote.trace"
            echo "libs under openmps: exit $?"
            echo quit | CUDA_MPS_PIPE_DIRECTORY=$T/pipe build/openmps-control
            # the logs once the daemon has exited (its lock released), 30 s at most
            i=0
            while [ $i -lt 300 ] && ! flock -n $T/pipe/control.lock true 2>/dev/null; do
                sleep 0.1
                i=$((i + 1))
            done
            cp $T/log/*.log "$OUT/probe/" 2>/dev/null
            grep -h "table\|slots" "$OUT/probe/libs.trace" | grep -v " slot [0-9]* (" | head -80
        } >"$OUT/probe.log" 2>&1 ;;
    # Several GPUs alone (issue #12; tests/gpu/multi/run.sh, also part of the tier).
    multi)
        { make && sh tests/gpu/multi/run.sh build "$OUT/multi"; } >"$OUT/multi.log" 2>&1 ;;
    # NCCL across two GPUs alone (issue #24; tests/gpu/multi/ddp.sh, also part of multi and of
    # the tier): PyTorch DDP, a rank per GPU; skipped on a machine with one GPU.
    multigpu)
        { make && sh tests/gpu/multi/ddp.sh build "$OUT/multigpu"; } >"$OUT/multigpu.log" 2>&1 ;;
    # The limits alone (issue #12; tests/gpu/limits/run.sh, also part of the tier).
    limits)
        { make && sh tests/gpu/limits/run.sh build "$OUT/limits"; } >"$OUT/limits.log" 2>&1 ;;
    # Protocol 3's namespaces at 25 % and 75 % (issue #26; tests/gpu/limits/namespaces.sh): a
    # daemon of its own, the kernel's throughput through each namespace's socket.
    namespaces)
        { make && sh tests/gpu/limits/namespaces.sh build "$OUT/namespaces"; } \
            >"$OUT/namespaces.log" 2>&1 ;;
    # Two named servers of one user, each its own process at 75 % and 25 % (issue #26;
    # tests/gpu/limits/servers.sh): a daemon of its own, the SM count through each one's socket.
    servers)
        { make && sh tests/gpu/limits/servers.sh build "$OUT/servers"; } \
            >"$OUT/servers.log" 2>&1 ;;
    # Static SM partitions (issue #26; tests/gpu/limits/partitions.sh): the same commands under
    # openmps -S and, where its version has them, under NVIDIA's MPS (its own directories in a
    # temporary one, always quit); answers, SM counts and throughput per partition side by side.
    partitions)
        { make && sh tests/gpu/limits/partitions.sh build "$OUT/partitions"; } \
            >"$OUT/partitions.log" 2>&1 ;;
    # The driver-API families under a 50 % SM share: every kernel of the openmps runs goes
    # through a shadow stream in a green context (server/share.c), so any order lost between a
    # stream and its shadow shows as a difference from native. green and occupancy print the
    # SM count, which differs there by design.
    share-api)
        { make && CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 sh tests/gpu/api/run.sh build "$OUT/api-share"; } \
            >"$OUT/share-api.log" 2>&1 ;;
    # What green contexts give the SM share (issue #12): throughput at a share, side by side,
    # launch cost from many threads (tests/gpu/probe/green_share.cu).
    probe-green)
        {
            nvcc -O2 -arch=native -o /tmp/om-green tests/gpu/probe/green_share.cu -lcuda &&
                /tmp/om-green
        } >"$OUT/probe-green.log" 2>&1 ;;
    # A PTX that does not compile, through cuModuleLoadDataEx and cuLibraryLoadData, lazy and
    # eager (docs/driver-facts.md, "Loading a PTX that does not compile").
    probe-jit)
        {
            nvcc -O2 -arch=native -o /tmp/om-jit tests/gpu/probe/jit_library.cu -lcuda &&
                for m in LAZY EAGER; do
                    echo "CUDA_MODULE_LOADING=$m"
                    CUDA_MODULE_LOADING=$m /tmp/om-jit
                done
        } >"$OUT/probe-jit.log" 2>&1 ;;
    # A second suites step of one call continues from the first's results (archived as
    # suites.tgz when its gpu.sh ended), not from the carried ones, which it would replace.
    suites)
        {
            seed=.suites/results
            if [ -f "$OUT/suites.tgz" ] && [ ! -d "$OUT/suites" ]; then
                rm -rf /tmp/om-suites-seed && mkdir -p /tmp/om-suites-seed &&
                    tar xzf "$OUT/suites.tgz" -C /tmp/om-suites-seed &&
                    seed=/tmp/om-suites-seed/suites
            fi
            make && python3 tests/gpu/suites/suites.py run --build build --suites-dir .suites/src \
                --results "$OUT/suites" --seed "$seed" \
                --deadline $((T0 + ${SUITES_SECONDS:-550})) ${SUITES_ARGS:-}
        } >"$OUT/suites.log" 2>&1 ;;
    # GPU time per client (openmps stats) against the clients' own CUDA events (issue #27).
    stats)
        { make && python3 tests/gpu/stats/check.py --build build ${STATS_ARGS:-}; } \
            >"$OUT/stats.log" 2>&1 ;;
    # The GPU tier alone (tests/gpu/run.sh, the api programs included), without the CPU tier.
    gputier)
        { make && sh tests/gpu/run.sh build "$OUT/gputier"; } >"$OUT/gputier.log" 2>&1 ;;
    # CUDA programs in a container made from openmps cdi's spec (issue #25; needs bwrap).
    container)
        { make && sh tests/gpu/container.sh build "$OUT/container"; } >"$OUT/container.log" 2>&1 ;;
    # B1, B1c and B2 of a tree before a change (BEFORE_TGZ, a `git archive` of it) and of this
    # one, on this one machine: host-to-host differences exceed what a change moves.
    before-after)
        {
            rm -rf /tmp/om-before && mkdir -p /tmp/om-before &&
                tar xzf "${BEFORE_TGZ:-bench-before.tgz}" -C /tmp/om-before &&
                (cd /tmp/om-before && make >/dev/null) && make >/dev/null &&
                for round in $(seq 1 "${BA_ROUNDS:-1}"); do
                    (cd /tmp/om-before && BENCH_OUT="$OUT/before-after/before-$round" \
                        BENCH_MODES=openmps BENCH_WORKLOADS=${BA_WORKLOADS:-b1,b1c,b2} \
                        BENCH_N="${BA_N:-1 5 32}" BENCH_REPEATS=${BA_REPEATS:-2} make bench) &&
                    BENCH_OUT="$OUT/before-after/after-$round" BENCH_MODES=openmps \
                        BENCH_WORKLOADS=${BA_WORKLOADS:-b1,b1c,b2} BENCH_N="${BA_N:-1 5 32}" \
                        BENCH_REPEATS=${BA_REPEATS:-2} make bench
                done
        } >"$OUT/before-after.log" 2>&1 ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
    esac
    rc=$?
    echo "$step: exit $rc" | tee -a "$OUT/summary.txt"
    case $step in
    torture | fault | soak* | api | frameworks | gputier | probe | torchtrace | b7diag | multigpu | \
        replay | suites | stats | partitions | issue23 | primitives)
        tail -n 90 "$OUT/$step${I23_TAG:+-$I23_TAG}.log" 2>/dev/null || tail -n 90 "$OUT/$step.log" ;;
    before-after) grep "^|\|^==\|B2\|µs\|us " "$OUT/before-after.log" | tail -n 120 ;;
    pack) ls -l "$OUT" ;;
    *) tail -5 "$OUT/$step.log" ;;
    esac
    [ $rc -eq 0 ] || status=1
done
# The device tool brings back at most 8 files: each harness folder travels as one archive,
# without the workloads it built.
for d in "$OUT"/*/; do
    [ -d "$d" ] || continue
    name=$(basename "$d")
    rm -f "$d/spin" "$d/calls" "$d/calls-fresh" "$d/queues"
    tar czf "$OUT/$name.tgz" -C "$OUT" "$name" && rm -rf "$d"
done
exit $status
