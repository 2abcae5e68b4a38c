#!/usr/bin/env python3
"""Continuous-profiling soak: is the agent's memory flat over time, and how
soon does a slow leak top the leak report?

Runs Soak.java (bench/soak: a 1 GiB stable cache built at start, a slow leak
of 100 KiB/s, allocation, thread and class churn) twice side by side for N
minutes: once without the agent (the twin), once with

    start,event=cpu,alloc,live,loop=5s,file=DIR/iv-%n.jfr,keep=24,status=...

Both JVMs use a fixed, pre-touched heap (-Xms = -Xmx, -XX:+AlwaysPreTouch),
so the Java heap's resident size is the same in both and neither the cache
nor the leak shows in RSS: the RSS difference is native memory the agent
causes (its stores, logs, tables, tracked objects) plus code-cache and
metaspace noise. Every SAMPLE seconds it records both RSS and the agent's own
heap (its counting allocator, from the status file). Every 30 s it reads the
newest finished interval with `oxprof report` and notes where Soak.leak and
Soak.buildCache rank among the leak suspects.

Writes DIR/soak.csv, bench/soak/soak-<date>.png (RSS difference and agent
heap over time) and prints a summary: the largest difference after the first
ten minutes, the trend (least-squares slope, MiB per hour) after them, and
the time until Soak.leak was ranked first.

Usage: bench/soak/soak.py [--minutes 60] [--sample 10] [--dir /tmp/oxprof-soak] [--agent COPY.so]
Needs: a release build (cargo build --release), javac, matplotlib (pip).
"""
import argparse
import datetime
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AGENT = os.path.join(ROOT, "target", "release", "liboxprof.so")
OXPROF = os.path.join(ROOT, "target", "release", "oxprof")
HEAP = ["-Xms3g", "-Xmx3g", "-XX:+AlwaysPreTouch"]


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def status(path):
    try:
        with open(path) as f:
            return dict(kv.split("=", 1) for kv in f.read().split() if "=" in kv)
    except OSError:
        return {}


def leak_ranks(report_text):
    """(rank of Soak.leak, score text of Soak.buildCache) from `oxprof report`."""
    rank, cache_score = None, None
    in_table = False
    for line in report_text.splitlines():
        if line.startswith("Leak suspects"):
            in_table = True
            continue
        if not in_table:
            continue
        m = re.match(r"\s+(\d+)\s+(\S+ \S+|0 B)\s", line)
        if not m:
            continue
        if line.rstrip().endswith("Soak.leak") and rank is None:
            rank = int(m.group(1))
        if line.rstrip().endswith("Soak.buildCache"):
            cache_score = m.group(2)
    return rank, cache_score


def newest_finished(dirname):
    files = sorted((f for f in os.listdir(dirname) if re.fullmatch(r"iv-\d+\.jfr", f)), key=lambda f: int(f[3:-4]))
    return os.path.join(dirname, files[-2]) if len(files) >= 2 else None


def slope_per_hour(points):
    """Least-squares slope of (seconds, MiB) points, in MiB per hour."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    sxy = sum((p[0] - mx) * (p[1] - my) for p in points)
    return sxy / sxx * 3600 if sxx else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--sample", type=float, default=10)
    ap.add_argument("--dir", default="/tmp/oxprof-soak")
    ap.add_argument("--cache-mib", type=int, default=1024)
    ap.add_argument("--leak-kib", type=int, default=100)
    ap.add_argument("--agent", default=AGENT, help="liboxprof.so to use (a copy, so rebuilding meanwhile is safe)")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    for f in os.listdir(a.dir):
        if f.startswith("iv-"):
            os.remove(os.path.join(a.dir, f))
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run(["javac", "-d", a.dir, os.path.join(here, "Soak.java"), os.path.join(here, "Churned.java")], check=True)
    args = ["-cp", a.dir, "Soak", str(a.minutes), str(a.cache_mib), str(a.leak_kib)]
    status_path = os.path.join(a.dir, "status")
    opts = f"start,event=cpu,alloc,live,loop=5s,file={a.dir}/iv-%n.jfr,keep=24,status={status_path},log={a.dir}/agent.log"
    twin = subprocess.Popen(["java", *HEAP, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    agent = subprocess.Popen(["java", *HEAP, f"-agentpath:{a.agent}={opts}", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for p in (twin, agent):
        line = p.stdout.readline().strip()
        if line != "ready":
            sys.exit(f"a JVM did not start: {line!r}")
    # Keep the pipes drained.
    import threading

    for p in (twin, agent):
        threading.Thread(target=lambda p=p: [None for _ in p.stdout], daemon=True).start()
    start = time.time()
    rows = []
    detected = None
    last_report = 0
    csv = open(os.path.join(a.dir, "soak.csv"), "w")
    csv.write("seconds,rss_twin_kib,rss_agent_kib,diff_mib,agent_heap_mib,agent_heap_peak_mib,leak_rank,cache_score\n")
    rank, cache = None, None
    while twin.poll() is None and agent.poll() is None:
        time.sleep(a.sample)
        t = time.time() - start
        r_twin, r_agent = rss_kib(twin.pid), rss_kib(agent.pid)
        if r_twin is None or r_agent is None:
            break
        st = status(status_path)
        heap = int(st.get("agent_heap_bytes", 0)) / 1048576
        peak = int(st.get("agent_heap_peak_bytes", 0)) / 1048576
        if t - last_report >= 30:
            last_report = t
            f = newest_finished(a.dir)
            if f:
                rep = subprocess.run([OXPROF, "report", f], capture_output=True, text=True)
                rank, cache = leak_ranks(rep.stdout)
                if rank == 1 and detected is None:
                    detected = t
        diff = (r_agent - r_twin) / 1024
        rows.append((t, diff, heap, peak))
        csv.write(f"{t:.0f},{r_twin},{r_agent},{diff:.1f},{heap:.2f},{peak:.2f},{rank},{cache}\n")
        csv.flush()
        print(f"{t/60:6.1f} min  RSS twin {r_twin/1024:7.1f} MiB  agent {r_agent/1024:7.1f} MiB  diff {diff:6.1f} MiB  agent heap {heap:5.1f} MiB (peak {peak:5.1f})  leak rank {rank}  cache score {cache}", flush=True)
    for p in (twin, agent):
        p.wait()
    after = [(t, d) for t, d, _, _ in rows if t >= 600]
    heap_after = [(t, h) for t, _, h, _ in rows if t >= 600]
    png = os.path.join(here, f"soak-{datetime.date.today().isoformat()}.png")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(9, 4.5))
        ax.plot([r[0] / 60 for r in rows], [r[1] for r in rows], label="RSS, agent JVM − twin (MiB)")
        ax.plot([r[0] / 60 for r in rows], [r[2] for r in rows], label="agent heap, own counter (MiB)")
        ax.axhline(32, color="grey", linestyle="--", linewidth=0.8, label="32 MiB target")
        ax.axvline(10, color="grey", linestyle=":", linewidth=0.8)
        ax.set_xlabel("minutes")
        ax.set_ylabel("MiB")
        ax.set_title(f"oxprof loop=5s soak: cpu,alloc,live, {a.cache_mib} MiB cache, {a.leak_kib} KiB/s leak, churn")
        ax.legend(loc="upper left")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(png, dpi=100)
    except ImportError:
        png = "(matplotlib missing: pip install matplotlib)"
    print()
    print(f"soak of {rows[-1][0]/60:.1f} min, {len(rows)} samples; plot {png}; data {a.dir}/soak.csv")
    if after:
        print(f"after 10 min: RSS difference max {max(d for _, d in after):.1f} MiB, trend {slope_per_hour(after):+.2f} MiB/h")
        print(f"after 10 min: agent heap max {max(h for _, h in heap_after):.1f} MiB, trend {slope_per_hour(heap_after):+.2f} MiB/h")
    print(f"overall: RSS difference max {max(r[1] for r in rows):.1f} MiB, agent heap peak {max(r[3] for r in rows):.1f} MiB")
    print(f"Soak.leak ranked first after {detected:.0f} s" if detected is not None else "Soak.leak never ranked first")
    print(f"last report: Soak.leak rank {rank}, Soak.buildCache score {cache}")


if __name__ == "__main__":
    main()
