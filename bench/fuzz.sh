#!/usr/bin/env bash
# Runs oxprof's coverage-guided fuzz targets (fuzz/, cargo fuzz + libFuzzer)
# one after the other, each for a set time, and prints per target: seconds
# run, executions, executions per second, coverage, corpus size and the
# crashes, hangs and out-of-memory inputs found (in fuzz/artifacts/<target>/).
#
#   bench/fuzz.sh                 # every target, 10 minutes each
#   bench/fuzz.sh 15m             # every target, 15 minutes each
#   bench/fuzz.sh 90s jfr_read pprof_read
#   FUZZ_FLAGS=-max_len=20000 bench/fuzz.sh 15m jfr_read   # more libFuzzer flags
#
# One fuzzer at a time, one process (-jobs=1 -workers=1), niced; the CPU
# time it took (user + system, /usr/bin/time) is printed beside the wall
# time. Limits: 2 GiB RSS, 512 MiB for one allocation (so unbounded
# allocation from a length field is a finding), 10 s per input (a hang is a
# finding). Inputs
# that found new coverage go to fuzz/corpus/<target>/ (not committed); the
# seeds in fuzz/seeds/<target>/ are read, never written. Reproduce a
# finding with: cargo +nightly fuzz run <target> fuzz/artifacts/<target>/<file>
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FUZZ="$ROOT/fuzz"
ALL=(agent_options attach_reply jfr_read pprof_read otlp_read collapsed_read)

duration="${1:-10m}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${ALL[@]}")

case "$duration" in
    *h) seconds=$(( ${duration%h} * 3600 )) ;;
    *m) seconds=$(( ${duration%m} * 60 )) ;;
    *s) seconds=${duration%s} ;;
    *[!0-9]*|'') echo "fuzz.sh: '$duration' is not a duration; use e.g. 90s, 10m or 1h" >&2; exit 2 ;;
    *) seconds=$duration ;;
esac
for t in "${targets[@]}"; do
    if [[ ! " ${ALL[*]} " == *" $t "* ]]; then
        echo "fuzz.sh: unknown target '$t'; accepted: ${ALL[*]}" >&2
        exit 2
    fi
done

if ! rustup toolchain list | grep -q '^nightly'; then
    echo "fuzz.sh: installing the nightly toolchain (cargo fuzz needs it)" >&2
    rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked --version 0.13.2
fi

echo "building the fuzz targets (ASan, debug assertions, overflow checks)..." >&2
(cd "$ROOT" && nice cargo +nightly fuzz build >&2)
BIN="$FUZZ/target/x86_64-unknown-linux-gnu/release"

summary=()
for t in "${targets[@]}"; do
    corpus="$FUZZ/corpus/$t"
    artifacts="$FUZZ/artifacts/$t"
    logs="$FUZZ/logs/$t"
    mkdir -p "$corpus" "$artifacts" "$logs"
    before=$(find "$artifacts" -type f | sort)
    dict=()
    [ -f "$FUZZ/dicts/$t.dict" ] && dict=("-dict=$FUZZ/dicts/$t.dict")
    echo "== $t: ${seconds}s" >&2
    start=$(date +%s)
    # The binary built above, run directly (as `cargo fuzz run` would, but
    # never rebuilding: the times are the fuzzer's alone). -jobs=1
    # -workers=1: libFuzzer runs one child whose output goes to fuzz-0.log
    # in the working directory (logs/<target>/).
    rm -f "$logs/fuzz-0.log"
    status=0
    (cd "$logs" && nice /usr/bin/time -f '%U %S' -o "$logs/cpu" "$BIN/$t" "-artifact_prefix=$artifacts/" "$corpus" "$FUZZ/seeds/$t" \
        -max_total_time="$seconds" -jobs=1 -workers=1 \
        -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=10 \
        -print_final_stats=1 "${dict[@]}" ${FUZZ_FLAGS:-} >"$logs/driver.log" 2>&1) || status=$?
    elapsed=$(( $(date +%s) - start ))
    cpu=$(tail -1 "$logs/cpu" 2>/dev/null | awk '{ printf "%.0f", $1 + $2 }')
    log="$logs/fuzz-0.log"
    [ -f "$log" ] || log="$logs/driver.log"
    cp "$log" "$logs/last.log"
    stat() { awk -v k="stat::$1:" '$1 == k { v = $2 } END { print v }' "$log"; }
    runs=$(stat number_of_executed_units)
    speed=$(stat average_exec_per_sec)
    peak=$(stat peak_rss_mb)
    cov=$(grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*' "$log" | tail -1 | awk '{print $2 " " $4 " " $6}')
    read -r edges features units <<<"${cov:-? ? ?}"
    new=$(comm -13 <(echo "$before") <(find "$artifacts" -type f | sort) | sed '/^$/d')
    crashes=$(echo -n "$new" | grep -c . || true)
    line=$(printf '%-15s %6ss (cpu %5ss) %10s runs %7s exec/s  cov %6s edges %7s features  corpus %5s  peak %5s MB  findings %s' \
        "$t" "$elapsed" "$cpu" "${runs:-?}" "${speed:-?}" "$edges" "$features" "$units" "${peak:-?}" "$crashes")
    summary+=("$line")
    echo "$line"
    if [ -n "$new" ]; then
        echo "$new" | sed 's/^/    new: /'
        grep -E '^(==[0-9]+==ERROR|thread .* panicked|SUMMARY|.*out-of-memory|.*timeout after)' "$log" | head -5 | sed 's/^/    /'
    elif [ "$status" -ne 0 ]; then
        echo "    the fuzzer exited with status $status; see $logs/driver.log" >&2
    fi
done

echo
echo "summary (log of each target in fuzz/logs/<target>/last.log):"
printf '%s\n' "${summary[@]}"
