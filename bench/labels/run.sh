#!/usr/bin/env bash
# The cost of OxProfiler.context per set/clear pair, recording on and off
# (bench/labels/LabelBench.java). Needs `cargo build --release` first
# (target/release/liboxprof.so and oxprof.jar) and a JDK.
#   bench/labels/run.sh [ROUNDS] [ITERATIONS] [JAVA]
set -euo pipefail
cd "$(dirname "$0")/../.."
rel=target/release
java=${3:-java}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
javac --release 11 -cp "$rel/oxprof.jar" -d "$work" bench/labels/LabelBench.java
"$java" -Doxprof.library="$PWD/$rel/liboxprof.so" -cp "$work:$rel/oxprof.jar" LabelBench "${1:-20}" "${2:-5000000}"
