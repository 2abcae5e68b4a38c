#!/usr/bin/env bash
# Builds bench/live/track_cost.c and runs it in both modes on the
# LeakChurn test program, on each JDK given (default: the java on PATH).
# Usage: bench/live/track_cost.sh [JAVA_HOME...]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$here/../.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
jdk_inc="$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")/include"
gcc -O2 -shared -fPIC -I"$jdk_inc" -I"$jdk_inc/linux" -o "$work/track_cost.so" "$here/track_cost.c"
javac --release 11 -d "$work" "$repo/crates/cli/tests/java/LeakChurn.java"
homes=("$@")
[ ${#homes[@]} -eq 0 ] && homes=("$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")")
for home in "${homes[@]}"; do
    version="$("$home/bin/java" -version 2>&1 | head -1)"
    for mode in weak tag; do
        echo "$version: $("$home/bin/java" -Xmx512m -agentpath:"$work/track_cost.so=$mode,16384" -cp "$work" LeakChurn 128 | grep RESULT)"
    done
done
