#!/usr/bin/env bash
# Converter figure: time and peak memory of `oxprof convert` on a ~100 MB JFR
# recording made by the JDK itself.
#
# Records the javac workload (java.xml sources, see setup.sh and run.py) with
# the JDK's flight recorder, profile settings with jdk.ExecutionSample every
# 1 ms, then concatenates that recording's chunks until the file reaches
# TARGET_MB (concatenated chunks form a valid multi-chunk JFR file), and
# converts it to HTML, collapsed stacks and pprof under /usr/bin/time -v.
#
#   bench/setup.sh            # once: the javac sources
#   bench/convert.sh          # TARGET_MB=100 OXPROF=target/release/oxprof
#
# OXPROF_BENCH_WORK overrides the work directory (default bench/work).
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH")"
WORK="${OXPROF_BENCH_WORK:-$BENCH/work}"
OXPROF="${OXPROF:-$ROOT/target/release/oxprof}"
TARGET_MB="${TARGET_MB:-100}"
LIST="$WORK/javac-java.xml.list"
SRC="$WORK/jdk-src/java.xml"
OUT="$(mktemp -d "${TMPDIR:-/tmp}/oxprof-convert-bench.XXXXXX")"
trap 'rm -rf "$OUT"' EXIT

[ -f "$LIST" ] || { echo "no $LIST: run bench/setup.sh first" >&2; exit 1; }
[ -x "$OXPROF" ] || { echo "no $OXPROF: cargo build --release" >&2; exit 1; }
JAVA_HOME="${JAVA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")}"

# profile.jfc with the execution sampler at 1 ms.
sed 's|<setting name="period" control="method-sampling-java-interval">[^<]*</setting>|<setting name="period" control="method-sampling-java-interval">1 ms</setting>|' \
    "$JAVA_HOME/lib/jfr/profile.jfc" > "$OUT/1ms.jfc"
grep -q '>1 ms<' "$OUT/1ms.jfc" || { echo "could not set the sampling period in profile.jfc" >&2; exit 1; }

echo "== recording javac (java.xml) with JFR, jdk.ExecutionSample every 1 ms"
java -XX:StartFlightRecording=filename="$OUT/javac.jfr",settings="$OUT/1ms.jfc" \
    -m jdk.compiler/com.sun.tools.javac.Main -d "$OUT/classes" -nowarn -XDignore.symbol.file \
    --patch-module "java.xml=$SRC" "@$LIST" >/dev/null 2>&1
one=$(stat -c %s "$OUT/javac.jfr")
jfr summary "$OUT/javac.jfr" | grep -E "Chunks|jdk.ExecutionSample |jdk.ObjectAllocationSample "

copies=$(( (TARGET_MB * 1000000 + one - 1) / one ))
for _ in $(seq "$copies"); do cat "$OUT/javac.jfr"; done > "$OUT/big.jfr"
echo "== input: $copies copies of a $one-byte recording = $(stat -c %s "$OUT/big.jfr") bytes"

for out in big.html big.collapsed big.pb.gz; do
    /usr/bin/time -v "$OXPROF" convert "$OUT/big.jfr" -o "$OUT/$out" --cpu 2> "$OUT/time.txt" || { cat "$OUT/time.txt"; exit 1; }
    wall=$(grep 'Elapsed (wall clock)' "$OUT/time.txt" | awk '{print $NF}')
    user=$(grep 'User time' "$OUT/time.txt" | awk '{print $NF}')
    sys=$(grep 'System time' "$OUT/time.txt" | awk '{print $NF}')
    rss=$(grep 'Maximum resident set size' "$OUT/time.txt" | awk '{print $NF}')
    printf '%-14s wall %s  user %ss sys %ss  peak RSS %d MB  output %d bytes\n' "$out" "$wall" "$user" "$sys" $((rss / 1024)) "$(stat -c %s "$OUT/$out")"
done
/usr/bin/time -v "$OXPROF" report "$OUT/big.jfr" --top 5 > "$OUT/report.txt" 2> "$OUT/time.txt"
printf '%-14s wall %s  peak RSS %d MB\n' "report" "$(grep 'Elapsed (wall clock)' "$OUT/time.txt" | awk '{print $NF}')" $(( $(grep 'Maximum resident set size' "$OUT/time.txt" | awk '{print $NF}') / 1024 ))
