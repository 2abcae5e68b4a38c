#!/usr/bin/env bash
# Payload figure: size of the OTLP profiles request (raw and gzipped, as an
# OTLP/HTTP sender would POST it) next to the pprof files of the same
# profiles, for a realistic CPU + allocation recording.
#
# Records the javac workload (java.xml sources, see setup.sh) under the
# agent (-e cpu --alloc, 10 ms, 512 KiB, into JFR), then converts the whole
# recording and a 10-second window of it (what one push of a continuous
# profiler would carry), with and without thread names, to .otlp.pb and to
# pprof (two files: CPU, allocations).
#
#   bench/setup.sh            # once: the javac sources
#   bench/otlp_size.sh        # OXPROF=target/release/oxprof
#
# OXPROF_BENCH_WORK overrides the work directory (default bench/work).
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH")"
WORK="${OXPROF_BENCH_WORK:-$BENCH/work}"
OXPROF="${OXPROF:-$ROOT/target/release/oxprof}"
LIST="$WORK/javac-java.xml.list"
SRC="$WORK/jdk-src/java.xml"
OUT="$(mktemp -d "${TMPDIR:-/tmp}/oxprof-otlp-bench.XXXXXX")"
trap 'rm -rf "$OUT"' EXIT

[ -f "$LIST" ] || { echo "no $LIST: run bench/setup.sh first" >&2; exit 1; }
[ -x "$OXPROF" ] || { echo "no $OXPROF: cargo build --release" >&2; exit 1; }

echo "== recording javac (java.xml) with oxprof: CPU every 10 ms, allocations every 512 KiB"
"$OXPROF" record -e cpu --alloc -o "$OUT/rec.jfr" -- \
    java -m jdk.compiler/com.sun.tools.javac.Main -d "$OUT/classes" -nowarn -XDignore.symbol.file \
    --patch-module "java.xml=$SRC" "@$LIST" 2>&1 | grep -E "summary" | cut -c1-120

size() { stat -c %s "$1"; }
measure() {
    local tag=$1
    shift
    "$OXPROF" convert "$OUT/rec.jfr" -o "$OUT/$tag.otlp.pb" --cpu --alloc "$@" 2>/dev/null
    "$OXPROF" convert "$OUT/rec.jfr" -o "$OUT/$tag.pb.gz" --cpu --alloc "$@" 2>/dev/null
    local raw gz praw pgz
    raw=$(size "$OUT/$tag.otlp.pb")
    gz=$(gzip -6 -c "$OUT/$tag.otlp.pb" | wc -c)
    praw=$(( $(gunzip -c "$OUT/$tag.pb.gz" | wc -c) + $(gunzip -c "$OUT/$tag.alloc.pb.gz" | wc -c) ))
    pgz=$(( $(size "$OUT/$tag.pb.gz") + $(size "$OUT/$tag.alloc.pb.gz") ))
    printf '%-26s OTLP raw %8d gzip %7d   pprof raw %8d gzip %7d\n' "$tag" "$raw" "$gz" "$praw" "$pgz"
}
measure whole
measure whole+threads --threads
measure 10s-window --from 20s --to 30s
measure 10s-window+threads --from 20s --to 30s --threads
