#!/bin/sh
# An example benchmark harness around trapdetect: a preflight gate, load steps with
# wait-drain between them, a trace of the server under load, and every artifact kept as JSON
# next to a one-line-per-step summary, then a gate after the run that compares the environment
# with the one saved before it (`preflight --save` / `--since`). Copy it and adapt the steps.
#
# Exit codes of this harness: 0 measured, and the environment held; 1 preflight refused the
# environment before measuring; 3 a step's measurement cannot be trusted; 5 the environment
# drifted during the run (an env.drift `fail`: a reboot, another binary or configuration,
# throttling, swapping): the artifacts are kept, but the results must not be published.
# trapdetect's own exit codes are the documented ones (0 ok, 1 a fail finding, 2 bad usage,
# 3 untrusted measurement, 4 privilege).
#
#   docs/harness.sh URL PORT SERVER_PID OUT_DIR
#
# Environment: RATES (load steps, req/s; default "200 400"), DURATION (per step; default 10s),
# TRAPDETECT (the binary; default trapdetect), PREFLIGHT_FLAGS (extra preflight flags, e.g.
# site-specific `--ignore ID`). The trace step needs root; without it the step is skipped and
# the summary says so.
set -u

url=$1 port=$2 pid=$3 out=$4
rates=${RATES:-"200 400"}
duration=${DURATION:-10s}
td=${TRAPDETECT:-trapdetect}
mkdir -p "$out"
summary="$out/summary.txt"
: > "$summary"

# Runs one step: its name, then the command; records the exit code.
step() {
    name=$1; shift
    "$@"
    rc=$?
    echo "$name exit $rc" >> "$summary"
    return $rc
}

"$td" --version > "$out/version.txt"

# 1. Gate: refuse a bad environment before measuring it (exit 1: a fail finding; stop).
# shellcheck disable=SC2086 # PREFLIGHT_FLAGS is a list of flags
#    --save keeps the environment's fingerprint and moving counters for the gate after the run.
step preflight "$td" preflight --pid "$pid" --port "$port" ${PREFLIGHT_FLAGS:-} \
    --save "$out/env-before.json" --json-out "$out/preflight.json" -q > "$out/preflight.txt" || {
    echo "harness: preflight refused this environment; see $out/preflight.txt" >&2
    exit 1
}

# 2. Load steps, each from a drained port so one step's TIME_WAIT cannot cap the next.
for rate in $rates; do
    step "wait-drain before $rate/s" "$td" wait-drain --port "$port" --below 1000 --timeout 65s -q \
        > /dev/null || exit 1
    step "load $rate/s" "$td" load --url "$url" --rate "$rate" --duration "$duration" \
        --json-out "$out/load-$rate.json" -q > "$out/load-$rate.txt"
    case $? in
        0|1) ;;                        # a fail finding is a result: keep going
        *) echo "harness: load at $rate/s could not be measured; see $out/load-$rate.txt" >&2
           exit 3 ;;
    esac
done

# 3. Trace the server while trapdetect drives a light probe load: what each request costs
#    the kernel, and the trap that caps it.
if [ "$(id -u)" = 0 ]; then
    step trace "$td" trace --pid "$pid" --url "$url" --duration "$duration" \
        --json-out "$out/trace.json" -q > "$out/trace.txt"
    [ $? -le 1 ] || { echo "harness: trace untrusted; see $out/trace.txt" >&2; exit 3; }
else
    echo "trace skipped: needs root" >> "$summary"
fi

# 4. Gate after the run: what drifted since step 1 (exit 1 from --since: an env.drift fail).
# shellcheck disable=SC2086
step "preflight --since" "$td" preflight --pid "$pid" --port "$port" --no-sample ${PREFLIGHT_FLAGS:-} \
    --since "$out/env-before.json" --json-out "$out/preflight-after.json" -q > "$out/preflight-after.txt"
drift=$?

echo "harness: artifacts in $out:" >&2
cat "$summary" >&2
if [ "$drift" = 1 ]; then
    echo "harness: the environment drifted during the run; see $out/preflight-after.txt" >&2
    exit 5
fi
