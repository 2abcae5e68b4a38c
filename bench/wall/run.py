#!/usr/bin/env python3
"""Cost of wall-clock sampling (issue 24): 1,000 idle threads, and 200 busy ones.

Arms, alternated over rounds: no agent; oxprof `event=wall,interval=50ms`;
async-profiler `event=wall,interval=50ms` when ASYNC_PROFILER points at its
libasyncProfiler.so (build it from its public sources, outside this repository).
For each run: process CPU per second of the measured window (the program's own
OperatingSystemMXBean reading, after a 1 s settle), busy-loop throughput, and
oxprof's in-agent counters (wall summary: handler_ns, sampler cost per thread
and tick, signals vs reused samples).

An earlier build joins as arm `oxprof-base` when OXPROF_BASE names its
liboxprof.so (a before/after comparison in the same rounds).

Usage: bench/wall/run.py [--rounds N] [--seconds S] [--scenarios idle1000,busy200]
"""
import argparse, os, re, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AGENT = os.path.join(ROOT, "target/release/liboxprof.so")
SCENARIOS = {"idle1000": (1000, 0), "busy200": (0, 200), "mixed": (1000, 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--scenarios", default="idle1000,busy200")
    ap.add_argument("--interval", default="50ms")
    a = ap.parse_args()
    if not os.path.exists(AGENT):
        sys.exit(f"no {AGENT}: run cargo build --release first")
    work = tempfile.mkdtemp(prefix="wall-bench.")
    subprocess.run(["javac", "-d", work, os.path.join(ROOT, "bench/wall/WallLoad.java")], check=True)
    arms = {"none": None, "oxprof": f"-agentpath:{AGENT}=start,event=wall,interval={a.interval},file={work}/ox.collapsed"}
    base_lib = os.environ.get("OXPROF_BASE")
    if base_lib and os.path.exists(base_lib):
        arms["oxprof-base"] = f"-agentpath:{base_lib}=start,event=wall,interval={a.interval},file={work}/base.collapsed"
    ap_lib = os.environ.get("ASYNC_PROFILER")
    if ap_lib and os.path.exists(ap_lib):
        arms["async-profiler"] = f"-agentpath:{ap_lib}=start,event=wall,interval={a.interval},file={work}/ap.collapsed"
    else:
        print("(ASYNC_PROFILER not set or missing: no async-profiler arm)")
    for sc in a.scenarios.split(","):
        idle, busy = SCENARIOS[sc]
        res = {k: [] for k in arms}
        for r in range(a.rounds):
            order = list(arms) if r % 2 == 0 else list(reversed(list(arms)))
            for arm in order:
                cmd = ["java", "-Xss256k"] + ([arms[arm]] if arms[arm] else []) + ["-cp", work, "WallLoad", str(idle), str(busy), str(a.seconds)]
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.seconds * 6 + 60)
                m = re.search(r"RESULT ops=(\d+) cpu_ns=(\d+) wall_ns=(\d+)", p.stdout)
                if not m:
                    print(f"{sc} {arm}: FAILED {p.stderr[-400:]}")
                    continue
                ops, cpu, wall = map(int, m.groups())
                w = dict(re.findall(r"(\w+)=(\S+)", (re.search(r"wall summary:(.*)", p.stderr) or ["", ""])[1]))
                res[arm].append((ops / wall * 1e9, cpu / wall * 1e3, w))
        print(f"\n## {sc}: {idle} idle + {busy} busy threads, {a.rounds} rounds x {a.seconds:g} s, interval {a.interval}\n")
        print("| arm | process CPU (ms per s) median | busy ops/s median | ratio to none | oxprof handler_ns | sampler ns per thread-tick | signalled / reused |")
        print("|---|---|---|---|---|---|---|")
        base = statistics.median([x[1] for x in res["none"]]) if res["none"] else None
        base_ops = statistics.median([x[0] for x in res["none"]]) if res["none"] else None
        for arm, xs in res.items():
            if not xs:
                continue
            cpu = statistics.median([x[1] for x in xs])
            ops = statistics.median([x[0] for x in xs])
            ratio = f"{ops / base_ops:.3f}" if base_ops else "—"
            w = xs[-1][2]
            print(f"| {arm} | {cpu:.1f} (+{cpu - base:.1f}) | {ops:.0f} | {ratio} | {w.get('handler_ns', '—')} | "
                  f"{w.get('sampler_ns_per_thread_tick', '—')} | {w.get('signalled', '—')} / {w.get('reused', '—')} |")


if __name__ == "__main__":
    main()
