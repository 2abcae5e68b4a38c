#!/usr/bin/env python3
"""Attach figures: latency of `oxprof attach PID start` (CLI start to profiling
started, reply received) and the longest stall of a busy Java thread while the
agent attaches to a JVM with many loaded classes (it pre-allocates jmethodIDs
for all of them). Usage: bench/attach.py [--classes 20000] [--runs 5]"""
import argparse, os, statistics, subprocess, sys, tempfile, time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OXPROF = os.path.join(REPO, "target", "release", "oxprof")

def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--classes", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--java", default="java")
    a = ap.parse_args()
    if not os.path.exists(OXPROF):
        sys.exit("build first: cargo build --release")
    work = tempfile.mkdtemp(prefix="oxprof-attach-bench-")
    subprocess.run(["javac", "--release", "11", "-d", work, os.path.join(REPO, "bench/java/ManyClasses.java"),
                    os.path.join(REPO, "bench/java/C00000.java")], check=True)
    first, later, pauses, baselines = [], [], [], []
    for run in range(a.runs):
        jvm = subprocess.Popen([a.java, "-cp", work, "ManyClasses", work, str(a.classes)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            line = jvm.stdout.readline().strip()
            if not line.startswith("ready"):
                sys.exit("the JVM did not start: " + line)
            def report():
                jvm.stdin.write("report\n"); jvm.stdin.flush()
                return int(jvm.stdout.readline().split("=")[1])
            time.sleep(1.0); report(); time.sleep(1.0)
            baselines.append(report())
            t = time.perf_counter()
            subprocess.run([OXPROF, "attach", str(jvm.pid), "start"], check=True, stdout=subprocess.DEVNULL)
            first.append(time.perf_counter() - t)
            pauses.append(report())
            t = time.perf_counter()
            subprocess.run([OXPROF, "attach", str(jvm.pid), "status"], check=True, stdout=subprocess.DEVNULL)
            later.append(time.perf_counter() - t)
            subprocess.run([OXPROF, "attach", str(jvm.pid), "stop", "-o", os.path.join(work, "p.collapsed")], check=True, stdout=subprocess.DEVNULL)
        finally:
            jvm.kill(); jvm.wait()
        print(f"run {run + 1}: first attach + start {first[-1]*1000:.0f} ms, later command {later[-1]*1000:.0f} ms, "
              f"busy thread's longest stall: {pauses[-1]/1000:.1f} ms during attach, {baselines[-1]/1000:.1f} ms in the second before")
    med = statistics.median
    print(f"\n{a.classes} classes loaded, {a.runs} runs (medians):")
    print(f"  attach latency, CLI start to profiling started: {med(first)*1000:.0f} ms (first attach, with SIGQUIT and class preparation)")
    print(f"  a later command (status) round trip:            {med(later)*1000:.0f} ms")
    print(f"  longest stall of a busy thread during attach:   {med(pauses)/1000:.1f} ms (baseline second before: {med(baselines)/1000:.1f} ms)")

if __name__ == "__main__":
    main()
