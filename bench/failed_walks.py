#!/usr/bin/env python3
"""Failed stack walks per profiler, in alternating runs of one workload.

A Java-thread sample (CPU, or wall with --event wall) counts as failed when its stack carries a failure
marker (oxprof: `[unknown_Java]`, `[deopt]`, `[truncated]`, ...;
async-profiler: `[unknown_Java]`, `[break_*]`, `[deoptimization]`, ...) or
when it silently lost its root: its first Java frame is not where a thread
starts (the workload's `main`, the launcher's `LauncherHelper`, a `run`
method). Stacks of threads without Java frames (compiler, GC) are left out.

    bench/failed_walks.py --workload javac --interval 1ms --rounds 3 \\
        base=/tmp/base/liboxprof.so new=target/release/liboxprof.so \\
        asprof=/path/to/libasyncProfiler.so

Each ARM is NAME=PATH of an agent library; a NAME starting with `asprof`
is run with async-profiler's options (same ones here: start, event=cpu,
interval, file=*.collapsed). Workloads: `javac` (javac compiling
java.xml's sources; run bench/setup.sh first) and `throws` (the tests'
exception-heavy Throws.java, compiled here). Prints each run and, per arm,
the totals over all runs.
"""
import argparse
import collections
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "bench", "work")
MARKER_WORDS = ("unknown_", "not_walkable", "deopt", "truncated", "break_", "safepoint", "thread_exit", "no_class_load", "gc_active", "GC_active")


def is_java(frame):
    if frame.startswith("[") or "::" in frame or "@" in frame or frame.startswith("/") or "+0x" in frame or ".so" in frame:
        return False
    # GCC's local clones of C functions (`futex_wait.constprop.0`, `foo.isra.0`,
    # `bar.part.1`, `baz.cold`) have dots too.
    parts = frame.split(".")
    if any(p in ("constprop", "isra", "part", "cold", "lto_priv") or p.isdigit() for p in parts[1:]):
        return False
    return "." in frame


def is_root(frame, mains):
    return frame in mains or frame.startswith("sun.launcher.LauncherHelper.") or frame.endswith(".run")


def analyse(path, mains):
    java = failed = unrooted = 0
    kinds = collections.Counter()
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            n = int(count)
            frames = []
            for fr in stack.split(";"):
                if fr.endswith("_[k]"):
                    continue
                if fr[-4:] in ("_[j]", "_[i]", "_[0]", "_[1]"):
                    fr = fr[:-4]
                if not fr.startswith("[") and "::" not in fr and not fr.startswith("/"):
                    fr = fr.replace("/", ".")
                frames.append(fr)
            marks = [f for f in frames if f.startswith("[") and f.endswith("]") and any(w in f for w in MARKER_WORDS)]
            javaf = [f for f in frames if is_java(f)]
            if not javaf and not marks:
                continue
            java += n
            if marks:
                failed += n
                kinds[marks[0]] += n
            elif not is_root(javaf[0], mains):
                unrooted += n
                kinds["(no root)"] += n
    return java, failed, unrooted, kinds


def workload(name, scratch):
    out = os.path.join(scratch, "out")
    if name == "javac":
        listing = os.path.join(WORK, "javac-java.xml.list")
        if not os.path.isfile(listing):
            sys.exit("failed_walks.py: --workload javac needs bench/setup.sh run first (no bench/work/javac-java.xml.list)")
        args = ["-m", "jdk.compiler/com.sun.tools.javac.Main", "-nowarn", "-XDignore.symbol.file",
                "--patch-module", "java.xml=jdk-src/java.xml", "-d", out, "@javac-java.xml.list"]
        return args, WORK, ("com.sun.tools.javac.Main.main",)
    classes = os.path.join(scratch, "classes")
    os.makedirs(classes, exist_ok=True)
    java_dir = os.path.join(ROOT, "crates", "cli", "tests", "java")
    srcs = [os.path.join(java_dir, n) for n in ("Throws.java", "CpuBudget.java")]
    subprocess.run(["javac", "-d", classes, *srcs], check=True)
    return ["-cp", classes, "Throws", "8"], scratch, ("Throws.main",)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", choices=["javac", "throws"], default="javac")
    p.add_argument("--event", choices=["cpu", "wall"], default="cpu",
                   help="cpu (default) or wall: every Java thread sampled whatever its state")
    p.add_argument("--interval", default="1ms", help="sampling interval (default 1ms)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--java", default="java")
    p.add_argument("arms", nargs="+", metavar="NAME=PATH")
    a = p.parse_args()
    arms = []
    for arm in a.arms:
        name, sep, path = arm.partition("=")
        if not sep or not name or not os.path.isfile(path):
            sys.exit(f"failed_walks.py: arm '{arm}': expected NAME=PATH of an existing agent library")
        arms.append((name, os.path.abspath(path)))
    java_cmd = os.path.abspath(a.java) if os.sep in a.java else a.java
    scratch = tempfile.mkdtemp(prefix="failed-walks-")
    args, cwd, mains = workload(a.workload, scratch)
    totals = collections.defaultdict(list)
    for r in range(a.rounds):
        for name, path in arms:
            out = os.path.join(scratch, f"{name}-{r}.collapsed")
            agent = f"-agentpath:{path}=start,event={a.event},interval={a.interval},file={out}"
            run = subprocess.run([java_cmd, agent] + args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if run.returncode != 0 or not os.path.isfile(out):
                sys.exit(f"failed_walks.py: {name} run {r} failed (exit {run.returncode}): {run.stderr.strip()[-400:]}")
            java, failed, unrooted, kinds = analyse(out, mains)
            totals[name].append((java, failed, unrooted))
            share = 100.0 * (failed + unrooted) / max(java, 1)
            print(f"round {r} {name:8} java samples {java:6}  marked {failed:4}  unrooted {unrooted:4}  failed {share:.3f}%  {dict(kinds.most_common(4))}", flush=True)
    print(f"\n{a.workload}, {a.event} at {a.interval}, {a.rounds} rounds (failed = marked + unrooted, share of Java-thread samples):")
    for name, runs in totals.items():
        java = sum(x[0] for x in runs)
        failed = sum(x[1] for x in runs)
        unrooted = sum(x[2] for x in runs)
        per = ", ".join(f"{100.0 * (x[1] + x[2]) / max(x[0], 1):.2f}" for x in runs)
        print(f"  {name:8} {100.0 * (failed + unrooted) / max(java, 1):.3f}% (marked {100.0 * failed / max(java, 1):.3f}%, unrooted {100.0 * unrooted / max(java, 1):.3f}%); per run {per}")


if __name__ == "__main__":
    main()
