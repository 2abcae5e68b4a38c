#!/usr/bin/env python3
"""Hardening soak: a churning JVM profiled again and again by attach.

Runs Soak.java (bench/soak) with a class-unloading storm (CLASSES per
second defined by throw-away loaders), thread churn (a short-lived thread
every ~25 ms: tens of thousands over the run), lock contention (LOCKERS
threads on one monitor), allocation churn, a stable cache and a slow leak,
for MINUTES, with the agent loaded at start but idle (-agentpath without
start), beside an agent-less twin. Meanwhile it runs CYCLES attach cycles,
spread over the run:

    oxprof attach PID start --interval 1ms --wall 50ms --lock --alloc --live
    oxprof attach PID status
    oxprof attach PID dump -o DIR/dump.jfr      (every 4th cycle a JFR dump; else collapsed)
    oxprof attach PID stop -o DIR/stop.html

each command with a 120 s time-out (a hang is reported as a deadlock).
At the end it reports: cycles done, commands that failed or timed out,
whether the JVM is alive and exited normally, hs_err files, and the RSS
difference to the twin and the agent's heap (from `status`) over time, with
the trend after the first ten minutes; and the agent's heap between
recordings (a `status` after each stop), which shows what outlives them,
with its lows and highs per five minutes; every reading goes to
DIR/series.csv.

Plots both series to bench/soak/attach-<date>.png when matplotlib is
installed (`--plot DIR` plots a run's DIR/series.csv again).

Usage: bench/soak/attach_cycles.py [--minutes 30] [--cycles 200] [--classes 50]
                                   [--lockers 4] [--dir /tmp/oxprof-attach-soak]
       bench/soak/attach_cycles.py --plot DIR
"""
import argparse
import os
import re
import subprocess
import sys
import time

from soak import slope_per_hour  # bench/soak/soak.py, beside this script

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OXPROF = os.path.join(ROOT, "target", "release", "oxprof")
AGENT = os.path.join(ROOT, "target", "release", "liboxprof.so")
HEAP = ["-Xms2g", "-Xmx2g", "-XX:+AlwaysPreTouch", "-XX:-G1UseAdaptiveIHOP", "-XX:InitiatingHeapOccupancyPercent=30"]


def rss_mib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None



def plot(series, title):
    """Draws DIR/series.csv (see main) to bench/soak/attach-<date>.png."""
    import datetime
    rec, idle = [], []
    for line in open(series).read().splitlines()[1:]:
        t, kind, d, h = line.split(",")
        if kind == "recording":
            rec.append((float(t) / 60, float(d), float(h)))
        else:
            idle.append((float(t) / 60, float(h)))
    png = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"attach-{datetime.date.today().isoformat()}.png")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "(matplotlib missing: pip install matplotlib)"
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.plot([r[0] for r in rec], [r[1] for r in rec], linewidth=0.8, label="RSS, agent JVM − twin, during recordings (MiB)")
    ax.plot([r[0] for r in rec], [r[2] for r in rec], linewidth=0.8, label="agent heap during recordings (MiB)")
    ax.plot([r[0] for r in idle], [r[1] for r in idle], linewidth=1.2, label="agent heap between recordings (MiB)")
    ax.set_xlabel("minutes")
    ax.set_ylabel("MiB")
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    return png


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--cycles", type=int, default=200)
    ap.add_argument("--classes", type=int, default=50)
    ap.add_argument("--lockers", type=int, default=4)
    ap.add_argument("--dir", default="/tmp/oxprof-attach-soak")
    ap.add_argument("--agent", default=AGENT, help="liboxprof.so to load (use a copy: rebuilding meanwhile is then safe)")
    ap.add_argument("--plot", metavar="DIR", help="only plot DIR/series.csv of an earlier run")
    a = ap.parse_args()
    if a.plot:
        print(plot(os.path.join(a.plot, "series.csv"), "oxprof attach cycles: agent memory"))
        return
    os.makedirs(a.dir, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run(["javac", "-d", a.dir, os.path.join(here, "Soak.java"), os.path.join(here, "Churned.java")], check=True)
    args = ["-cp", a.dir, "Soak", str(a.minutes), "512", "50", str(a.classes), str(a.lockers)]
    twin = subprocess.Popen(["java", *HEAP, *args], cwd=a.dir, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    jvm = subprocess.Popen(["java", *HEAP, f"-agentpath:{a.agent}", *args], cwd=a.dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for p in (twin, jvm):
        if p.stdout.readline().strip() != "ready":
            sys.exit("a JVM did not start")
    import threading

    for p in (twin, jvm):
        threading.Thread(target=lambda p=p: [None for _ in p.stdout], daemon=True).start()
    err_lines = []
    threading.Thread(target=lambda: [err_lines.append(l) for l in jvm.stderr], daemon=True).start()
    start = time.time()
    period = a.minutes * 60 * 0.95 / max(a.cycles, 1)
    failures, timeouts, done = [], 0, 0
    mem, idle = [], []

    def attach(*cmd):
        nonlocal timeouts
        try:
            o = subprocess.run([OXPROF, "attach", str(jvm.pid), *cmd], capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            timeouts += 1
            failures.append(f"timeout: {' '.join(cmd)}")
            return ""
        if o.returncode != 0:
            failures.append(f"{' '.join(cmd)}: {o.stderr.strip()[-300:]}")
        return o.stdout + o.stderr

    for i in range(a.cycles):
        if jvm.poll() is not None:
            break
        cycle_start = time.time()
        attach("start", "--interval", "1ms", "--wall", "50ms", "--lock", "--alloc", "--live")
        st = attach("status")
        m = re.search(r"agent_heap=([\d.]+)MiB", st)
        r_twin, r_jvm = rss_mib(twin.pid), rss_mib(jvm.pid)
        if r_twin and r_jvm:
            mem.append((time.time() - start, r_jvm - r_twin, float(m.group(1)) if m else 0.0))
        dump = os.path.join(a.dir, "dump.jfr" if i % 4 == 0 else "dump.collapsed")
        time.sleep(max(0.5, period / 3))
        attach("dump", "-o", dump)
        time.sleep(max(0.5, period / 3))
        attach("stop", "-o", os.path.join(a.dir, "stop.html"))
        # Between recordings: what the agent keeps (method names of classes
        # that can unload, pruned past 20,000; caches), without a recording's.
        m = re.search(r"agent_heap=([\d.]+)MiB", attach("status"))
        if m:
            idle.append((time.time() - start, float(m.group(1))))
        done += 1
        if i % 10 == 0:
            t, d, h = mem[-1] if mem else (0, 0, 0)
            print(f"{(time.time()-start)/60:5.1f} min  cycle {i+1}/{a.cycles}  RSS diff {d:6.1f} MiB  agent heap {h:5.1f} MiB  failures {len(failures)}", flush=True)
        left = period - (time.time() - cycle_start)
        if left > 0:
            time.sleep(left)
    jvm_rc = jvm.wait()
    twin.wait()
    hs_err = [f for f in os.listdir(a.dir) if f.startswith("hs_err")]
    after = [(t, d) for t, d, _ in mem if t >= 600]
    heap_after = [(t, h) for t, _, h in mem if t >= 600]
    print()
    print(f"{done} attach cycles in {(time.time()-start)/60:.1f} min; JVM exit status {jvm_rc}; hs_err files: {hs_err or 'none'}; "
          f"failed commands {len(failures)} (time-outs {timeouts})")
    for f in failures[:10]:
        print("  " + f)
    if mem:
        print(f"RSS difference: max {max(d for _, d, _ in mem):.1f} MiB; agent heap max {max(h for _, _, h in mem):.1f} MiB")
    if after:
        print(f"after 10 min: RSS difference trend {slope_per_hour(after):+.1f} MiB/h, agent heap trend {slope_per_hour(heap_after):+.2f} MiB/h")
    if idle:
        idle_after = [(t, h) for t, h in idle if t >= 600]
        trend = f", trend after 10 min {slope_per_hour(idle_after):+.2f} MiB/h" if idle_after else ""
        print(f"agent heap between recordings: first {idle[0][1]:.1f} MiB, max {max(h for _, h in idle):.1f} MiB, last {idle[-1][1]:.1f} MiB{trend}")
        # The names kept for unloadable classes are pruned past a threshold,
        # so this heap is a sawtooth: a trend line through it says little.
        # Its lows and highs per five minutes show whether it levels off.
        print("agent heap between recordings per 5 min (low / high MiB): " + ", ".join(
            f"{int(w * 5)}-{int(w * 5 + 5)} min {min(hs):.1f} / {max(hs):.1f}"
            for w in sorted({int(t // 300) for t, _ in idle})
            for hs in [[h for t, h in idle if int(t // 300) == w]]))
    series = os.path.join(a.dir, "series.csv")
    with open(series, "w") as f:
        f.write("seconds,kind,rss_diff_mib,agent_heap_mib\n")
        for t, d, h in mem:
            f.write(f"{t:.1f},recording,{d:.2f},{h:.2f}\n")
        for t, h in idle:
            f.write(f"{t:.1f},between,,{h:.2f}\n")
    print(f"series: {series}; plot: {plot(series, f'oxprof attach cycles: {done} in {a.minutes:g} min, {a.classes} classes/s churned')}")
    errs = [l.rstrip() for l in err_lines if "error" in l.lower() or "panic" in l.lower()]
    print(f"agent error/panic lines: {len(errs)}")
    for l in errs[:5]:
        print("  " + l)


if __name__ == "__main__":
    main()
