#!/usr/bin/env python3
"""What the agent adds to a short JVM's start and exit.

Runs `java -version` (or --main CLASS with --cp) under several arms in
rotating order, round after round, and prints each arm's median wall time
and its median difference from the plain run of the same round (ms), with
the spread. Arms: plain (no agent), idle (agent loaded, no options), cpu
(start,event=cpu), all (start,event=cpu,alloc,live,file=x.jfr), and, when
ASYNC_PROFILER points at libasyncProfiler.so, asprof-cpu (start,event=cpu).

  bench/startup.py --rounds 21
  OXPROF_AGENT=target/release/liboxprof.so ASYNC_PROFILER=/path/libasyncProfiler.so bench/startup.py
"""

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--java", default=shutil.which("java"))
    ap.add_argument("--arm", action="append", default=[], metavar="NAME=AGENT_OPTIONS", help="an extra oxprof arm")
    args = ap.parse_args()
    agent = os.environ.get("OXPROF_AGENT", os.path.join(ROOT, "target/release/liboxprof.so"))
    work = tempfile.mkdtemp(prefix="oxprof-startup-")
    copy = os.path.join(work, "liboxprof.so")
    shutil.copy2(agent, copy)  # a rebuild during the run cannot change it
    arms = [
        ("plain", []),
        ("idle", [f"-agentpath:{copy}"]),
        ("cpu", [f"-agentpath:{copy}=start,event=cpu,file={work}/cpu.collapsed"]),
        ("all", [f"-agentpath:{copy}=start,event=cpu,alloc,live,file={work}/all.jfr"]),
    ]
    for a in args.arm:
        name, opts = a.split("=", 1)
        arms.append((name, [f"-agentpath:{copy}={opts},file={work}/{name}.out"]))
    ap_lib = os.environ.get("ASYNC_PROFILER")
    if ap_lib:
        arms.append(("asprof-cpu", [f"-agentpath:{ap_lib}=start,event=cpu,file={work}/asprof.collapsed"]))
    times = {n: [] for n, _ in arms}
    diffs = {n: [] for n, _ in arms}
    for r in range(args.rounds):
        order = arms[r % len(arms):] + arms[:r % len(arms)]
        got = {}
        for name, opts in order:
            t0 = time.perf_counter()
            p = subprocess.run([args.java] + opts + ["-version"], cwd=work, capture_output=True, text=True)
            dt = time.perf_counter() - t0
            if p.returncode != 0:
                raise SystemExit(f"{name} failed: {p.stderr[-2000:]}")
            got[name] = dt
        for name in got:
            times[name].append(got[name])
            diffs[name].append(got[name] - got["plain"])
    print(f"{args.rounds} rounds, `java -version`, {args.java}")
    print(f"{'arm':12} {'median':>9} {'+ vs plain':>11} {'p25..p75 of +':>17}")
    for name, _ in arms:
        d = sorted(diffs[name])
        q = lambda f: d[int(f * (len(d) - 1))] * 1e3
        print(f"{name:12} {statistics.median(times[name]) * 1e3:8.1f}ms {statistics.median(d) * 1e3:+10.1f}ms {q(0.25):+7.1f}..{q(0.75):+.1f}ms")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
