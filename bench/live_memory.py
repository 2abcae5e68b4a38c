#!/usr/bin/env python3
"""Agent memory over a steady leak with live-object tracking.

Runs the same steady leak (LeakChurn forever: RATE KiB/s kept in a static
list, ten times as much churned) twice side by side for N minutes: once
without the agent, once with event=alloc,live. Every SAMPLE seconds it prints:

  - the resident memory (VmRSS) of both JVMs and the difference;
  - the agent's own account of its tracking memory (entries, sites, growth
    series), tracked samples and thinnings, from `oxprof attach PID status`;
  - the size of a live profile dumped at that moment (`dump`, collapsed).

Isolating the agent's memory: both JVMs use a fixed, pre-touched heap
(-Xms = -Xmx, -XX:+AlwaysPreTouch), so the Java heap's resident size is
the same in both from the start and the leak does not show in RSS; what
remains in the difference is native memory the agent causes (its stores,
tracked entries, JNI weak handles, JVMTI bookkeeping) plus noise from
code-cache and metaspace differences. The agent's own figure counts only
the tracked set; the RSS difference bounds everything.

Usage: bench/live_memory.py [--minutes 10] [--sample 10] [--rate 512]
                            [--alloc 16k] [--livemem 256k]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def status_fields(oxprof, pid):
    """Tracked, sites, memory, budget, thinnings from the agent's status line."""
    out = subprocess.run([oxprof, "attach", str(pid), "status"], capture_output=True, text=True, timeout=60).stdout
    # "... live (N tracked in S sites, memory M of B budget, thinned T times, G GCs) ..."
    try:
        part = out.split("live (", 1)[1].split(")", 1)[0]
        w = part.replace(",", "").split()
        return {"tracked": int(w[0]), "sites": int(w[3]), "memory": int(w[6]), "budget": int(w[8]), "thinned": int(w[11]), "gcs": int(w[13])}
    except (IndexError, ValueError):
        return None


def start(java, cp, agent_opts, heap, rate):
    cmd = [java, "-Xms" + heap, "-Xmx" + heap, "-XX:+AlwaysPreTouch"]
    if agent_opts:
        cmd.append("-agentpath:%s=%s" % (agent_opts[0], agent_opts[1]))
    cmd += ["-cp", cp, "LeakChurn", "forever", str(rate)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline().strip()
    if line != "ready":
        p.kill()
        sys.exit("the leak program did not start: %r %s" % (line, p.stderr.read()))
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--sample", type=float, default=10, help="seconds between rows")
    ap.add_argument("--rate", type=int, default=512, help="KiB leaked per second")
    ap.add_argument("--alloc", default="16k", help="allocation sampling interval")
    ap.add_argument("--livemem", default="256k", help="live tracking budget")
    ap.add_argument("--heap", default="1g")
    args = ap.parse_args()
    oxprof = os.path.join(REPO, "target/release/oxprof")
    agent = os.path.join(REPO, "target/release/liboxprof.so")
    for f in (oxprof, agent):
        if not os.path.isfile(f):
            sys.exit("%s missing: run cargo build --release" % f)
    work = tempfile.mkdtemp(prefix="oxprof-live-memory-")
    subprocess.run(["javac", "--release", "11", "-d", work, os.path.join(REPO, "crates/cli/tests/java/LeakChurn.java")], check=True)
    opts = "event=alloc,alloc=%s,live,livemem=%s,file=%s/final.txt" % (args.alloc, args.livemem, work)
    plain = start("java", work, None, args.heap, args.rate)
    profiled = start("java", work, (agent, opts), args.heap, args.rate)
    print("steady leak %d KiB/s for %.1f min; heap %s pre-touched; agent opts %s" % (args.rate, args.minutes, args.heap, opts))
    print("%6s %10s %10s %9s %11s %8s %6s %8s %10s" % ("t_s", "rss_plain", "rss_agent", "diff_MB", "tracking_KB", "tracked", "sites", "thinned", "dump_B"))
    t0 = time.time()
    rows = []
    try:
        while True:
            time.sleep(args.sample)
            t = time.time() - t0
            a, b = rss_mb(plain.pid), rss_mb(profiled.pid)
            st = status_fields(oxprof, profiled.pid) or {}
            dump = os.path.join(work, "dump.collapsed")
            subprocess.run([oxprof, "attach", str(profiled.pid), "dump", "--no-gc", "-o", dump], capture_output=True, timeout=120)
            size = os.path.getsize(dump) if os.path.exists(dump) else -1
            row = (t, a, b, b - a, st.get("memory", -1) / 1024.0, st.get("tracked", -1), st.get("sites", -1), st.get("thinned", -1), size)
            rows.append(row)
            print("%6.0f %10.1f %10.1f %9.1f %11.1f %8d %6d %8d %10d" % row, flush=True)
            if t >= args.minutes * 60:
                break
    finally:
        for p in (plain, profiled):
            p.kill()
            p.wait()
        shutil.rmtree(work, ignore_errors=True)
    if len(rows) >= 2:
        half = rows[len(rows) // 2:]
        print("second half: diff_MB %.1f..%.1f, tracking_KB %.1f..%.1f, dump_B %d..%d"
              % (min(r[3] for r in half), max(r[3] for r in half), min(r[4] for r in half), max(r[4] for r in half),
                 min(r[8] for r in half), max(r[8] for r in half)))


if __name__ == "__main__":
    main()
