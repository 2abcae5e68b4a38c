#!/usr/bin/env bash
# Prepare the oxprof real-application benchmark workloads under bench/work/ (gitignored).
# Idempotent: re-running only redoes what is missing or out of date.
#
#   - JDK 17 sources (Debian package openjdk-17-source, downloaded and unpacked,
#     NOT installed) -> bench/work/jdk-src/<module>/...  (workloads javac, javac-big,
#     and the Lucene text corpus)
#   - Lucene 4.10 (Debian package liblucene4.10-java, installed into /usr/share/java)
#     + bench/java/LuceneIndex.java compiled into bench/work/lucene-classes
#   - /usr/bin/time and unzip if missing
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK="$BENCH/work"
mkdir -p "$WORK"

log() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

for c in java javac python3 dpkg apt-get; do
    command -v "$c" >/dev/null || die "'$c' not found on PATH"
done
java -version 2>&1 | grep -q 'version "17' || log "WARNING: 'java' on PATH is not JDK 17: $(java -version 2>&1 | head -1)"

APT_UPDATED=0
apt_update_once() {
    if [ "$APT_UPDATED" = 0 ]; then
        log "apt-get update"
        apt-get update -qq
        APT_UPDATED=1
    fi
}

# Refuse to let apt touch the JDK: the benchmarks must run on the JDK that is installed now.
apt_install_safe() {
    apt_update_once
    local sim
    sim="$(apt-get install -s -y --no-install-recommends "$@" 2>&1 | grep -E '^Inst ' || true)"
    if printf '%s\n' "$sim" | grep -Eq '^Inst (openjdk|default-j|java-common)'; then
        printf '%s\n' "$sim" >&2
        die "installing '$*' would install/upgrade a JDK package; refusing (install it manually if intended)"
    fi
    log "apt-get install $*"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# ---------------------------------------------------------------- tools
[ -x /usr/bin/time ] || apt_install_safe time
command -v unzip >/dev/null || apt_install_safe unzip

# ---------------------------------------------------------------- JDK sources
SRC="$WORK/jdk-src"
if [ ! -f "$SRC/java.xml/javax/xml/parsers/DocumentBuilder.java" ] || [ ! -f "$SRC/.complete" ]; then
    mkdir -p "$WORK/debs"
    deb="$(ls "$WORK"/debs/openjdk-17-source_*.deb 2>/dev/null | head -1 || true)"
    if [ -z "$deb" ]; then
        apt_update_once
        # Prefer the source matching the installed JDK; Debian usually only carries the newest.
        jdkver="$(dpkg-query -W -f '${Version}' openjdk-17-jdk-headless 2>/dev/null || true)"
        ( cd "$WORK/debs" && { { [ -n "$jdkver" ] && apt-get download -q "openjdk-17-source=$jdkver" 2>/dev/null; } \
                               || apt-get download -q openjdk-17-source; } ) 2>&1 | grep -v 'unsandboxed' || true
        deb="$(ls "$WORK"/debs/openjdk-17-source_*.deb 2>/dev/null | head -1 || true)"
        [ -n "$deb" ] || die "apt-get download openjdk-17-source failed"
    fi
    log "unpacking $(basename "$deb")"
    rm -rf "$WORK/jdk-src-pkg"
    dpkg -x "$deb" "$WORK/jdk-src-pkg"
    srczip="$(find "$WORK/jdk-src-pkg" -name src.zip | head -1)"
    [ -n "$srczip" ] || die "no src.zip inside $deb"
    # The whole src.zip (~190 MB of .java) is the Lucene corpus; java.xml / java.desktop
    # are the javac workloads.
    rm -rf "$SRC"
    mkdir -p "$SRC"
    unzip -q -o "$srczip" -d "$SRC"
    rm -rf "$WORK/jdk-src-pkg"          # keep only the .deb and the unpacked tree
    basename "$deb" > "$SRC/.complete"
else
    log "JDK sources already unpacked ($(cat "$SRC/.complete"))"
fi

# Source lists for the javac workloads: every .java of the module except module-info.java
# (we patch the module the JDK already has, so its descriptor is not recompiled).
for m in java.xml java.desktop; do
    find "$SRC/$m" -name '*.java' ! -name module-info.java | LC_ALL=C sort > "$WORK/javac-$m.list"
done

# Verify the javac workloads compile cleanly (once; marker records the source package).
verify_javac() {
    local m="$1" marker="$WORK/.javac-$1.ok"
    if [ -f "$marker" ] && cmp -s "$marker" "$SRC/.complete"; then
        log "javac $m: verified earlier ($(wc -l < "$WORK/javac-$m.list") files)"
        return
    fi
    log "javac $m: test compile of $(wc -l < "$WORK/javac-$m.list") files ..."
    local out="$WORK/javac-verify-out"
    rm -rf "$out"
    local t0=$SECONDS
    if ! java -m jdk.compiler/com.sun.tools.javac.Main -d "$out" -nowarn -XDignore.symbol.file \
            --patch-module "$m=$SRC/$m" "@$WORK/javac-$m.list" > "$WORK/javac-verify-$m.log" 2>&1; then
        tail -30 "$WORK/javac-verify-$m.log" >&2
        die "javac $m test compile FAILED (log: $WORK/javac-verify-$m.log)"
    fi
    log "javac $m: OK, $(find "$out" -name '*.class' | wc -l) classes in $((SECONDS - t0)) s"
    rm -rf "$out"
    cp "$SRC/.complete" "$marker"
}
verify_javac java.xml
verify_javac java.desktop

# ---------------------------------------------------------------- Lucene
find_jar() {  # find_jar <module> : Debian jar for lucene 4.10 module
    local m="$1" j
    for j in /usr/share/java/lucene-"$m"-4.10*.jar /usr/share/java/lucene4-"$m"*.jar /usr/share/java/lucene-"$m".jar; do
        [ -f "$j" ] && { echo "$j"; return 0; }
    done
    return 1
}
if ! find_jar core >/dev/null; then
    apt_install_safe liblucene4.10-java
fi
cp=""
for m in core analyzers-common queryparser queries; do
    j="$(find_jar "$m")" || die "lucene jar '$m' not found in /usr/share/java (liblucene4.10-java installed?)"
    cp="${cp:+$cp:}$j"
done
echo "$cp" > "$WORK/lucene.classpath"
LC="$WORK/lucene-classes"
if [ ! -f "$LC/LuceneIndex.class" ] || [ "$BENCH/java/LuceneIndex.java" -nt "$LC/LuceneIndex.class" ]; then
    log "compiling bench/java/LuceneIndex.java"
    rm -rf "$LC"; mkdir -p "$LC"
    javac -nowarn -XDsuppressNotes -cp "$cp" -d "$LC" "$BENCH/java/LuceneIndex.java"
fi

# ---------------------------------------------------------------- stub agent (for testing run.py)
STUB="$WORK/stub_agent.so"
if command -v gcc >/dev/null; then
    if [ ! -f "$STUB" ] || [ "$BENCH/test/stub_agent.c" -nt "$STUB" ]; then
        jh="$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")"
        gcc -shared -fPIC -O2 -I"$jh/include" -I"$jh/include/linux" -o "$STUB" "$BENCH/test/stub_agent.c" \
            || log "WARNING: could not build the stub agent (only needed for testing run.py)"
    fi
fi

# ---------------------------------------------------------------- summary
corpus_mb=$(du -sm "$SRC" | cut -f1)
corpus_files=$(find "$SRC" -name '*.java' | wc -l)
cat <<EOF

[setup] prepared under $WORK:
  JDK sources    $SRC  ($(cat "$SRC/.complete"); $corpus_files .java files, ${corpus_mb} MB)
  javac          $(wc -l < "$WORK/javac-java.xml.list") files of java.xml      (list: $WORK/javac-java.xml.list)
  javac-big      $(wc -l < "$WORK/javac-java.desktop.list") files of java.desktop  (list: $WORK/javac-java.desktop.list)
  lucene         classpath: $cp
                 driver:    $LC/LuceneIndex.class (corpus: all .java under $SRC)
  stub agent     $( [ -f "$STUB" ] && echo "$STUB (fake summary line; for testing run.py)" || echo "not built (no gcc)")
  JDK            $(java -version 2>&1 | head -1)

Next: bench/run.sh --pairs 5 --workload all
EOF
