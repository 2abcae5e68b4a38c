#!/usr/bin/env python3
"""Overhead with more than two arms, run in rotation, with confidence intervals.

Each round runs every arm once, in an order that rotates from round to round
(so no arm always follows another), and the ratio of each arm to the first
arm is taken within the round. On this project's VMs the host's speed drifts
by 5-15% over tens of seconds, so ratios of neighbouring runs are what can
be compared; the report gives each arm's median ratio with a 90% bootstrap
interval over the rounds, so a figure comes with how sure it is.

Arms are NAME=JVM_OPTIONS; in the options, @AGENT stands for the oxprof agent
and @EMPTY for bench/empty_agent.c (the JEP 331 floor: sampling on, a callback
that does nothing), built here with the JDK's headers. Example:

  bench/rotate.py --rounds 20 --workload javac \\
      plain= \\
      jvm-sampling=-agentpath:@EMPTY \\
      alloc=-agentpath:@AGENT=start,event=alloc,file=@OUT.collapsed \\
      cpu+alloc=-agentpath:@AGENT=start,event=cpu,interval=10ms,alloc,file=@OUT.collapsed

@OUT is replaced by a per-run path in the results directory. Prepare the
workloads first with bench/setup.sh.
"""

import argparse
import json
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
import run as runpy  # noqa: E402  (the workloads and the runner)


def build_empty_agent(outdir):
    javac = shutil.which("javac")
    if not javac:
        sys.exit("rotate.py: javac not found; the JDK headers are needed to build bench/empty_agent.c")
    home = os.path.dirname(os.path.dirname(os.path.realpath(javac)))
    so = os.path.join(outdir, "empty_agent.so")
    cmd = ["cc", "-O2", "-shared", "-fPIC", "-I", os.path.join(home, "include"),
           "-I", os.path.join(home, "include", "linux"), "-o", so, os.path.join(BENCH, "empty_agent.c")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("rotate.py: building empty_agent.c failed: %s" % r.stderr.strip())
    return so


def bootstrap_median(xs, reps=4000, seed=1):
    """90% percentile-bootstrap interval of the median of xs."""
    rnd = random.Random(seed)
    meds = sorted(statistics.median(rnd.choices(xs, k=len(xs))) for _ in range(reps))
    return meds[int(0.05 * reps)], meds[int(0.95 * reps) - 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("arms", nargs="+", metavar="NAME=JVM_OPTIONS", help="the first arm is the reference")
    ap.add_argument("--rounds", type=int, default=10, help="rounds (each runs every arm once; default 10)")
    ap.add_argument("--workload", default="javac", choices=sorted(runpy.WORKLOADS))
    ap.add_argument("--agent", default=runpy.DEFAULT_AGENT, help="oxprof agent (default %(default)s)")
    ap.add_argument("--label", default=None, help="results directory name")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()

    arms = []
    for a in args.arms:
        if "=" not in a:
            sys.exit("rotate.py: an arm is NAME=JVM_OPTIONS (options may be empty): %r" % a)
        name, opts = a.split("=", 1)
        arms.append((name, opts))
    if len(arms) < 2:
        sys.exit("rotate.py: give at least two arms")
    wl = runpy.WORKLOADS[args.workload]
    missing = [n for n in wl.needs if not os.path.exists(n)]
    if missing:
        sys.exit("rotate.py: run bench/setup.sh first (missing %s)" % ", ".join(missing))
    if not os.path.exists(args.agent):
        sys.exit("rotate.py: no agent at %s; run cargo build --release first" % args.agent)

    label = args.label or time.strftime("rotate-%Y%m%d-%H%M%S")
    rundir = os.path.join(runpy.WORK, "results", label)
    os.makedirs(rundir, exist_ok=True)
    agent = os.path.join(rundir, "liboxprof.so")
    shutil.copy2(args.agent, agent)   # a rebuild during the run cannot change it
    empty = build_empty_agent(rundir) if any("@EMPTY" in o for _, o in arms) else None
    scratch = os.path.join(runpy.WORK, "scratch", args.workload)
    os.makedirs(scratch, exist_ok=True)

    walls = {name: [] for name, _ in arms}
    cpus = {name: [] for name, _ in arms}
    print("workload %s, %d rounds of %d arms, results in %s" % (args.workload, args.rounds, len(arms), rundir), flush=True)
    for r in range(args.rounds):
        order = arms[r % len(arms):] + arms[:r % len(arms)]
        line = []
        for name, opts in order:
            base = os.path.join(rundir, "%s-%02d-%s" % (args.workload, r + 1, name.replace("/", "_")))
            opts = opts.replace("@AGENT", agent).replace("@OUT", base)
            if empty:
                opts = opts.replace("@EMPTY", empty)
            if wl.prepare:
                wl.prepare(scratch)
            res = runpy.run_one(wl.build(shlex.split(opts), scratch), base, args.timeout)
            if res["rc"] != 0:
                sys.exit("rotate.py: %s failed in round %d (%s); see %s.err" % (name, r + 1, res["why"], base))
            walls[name].append(res["wall"])
            cpus[name].append(res["cpu"])
            line.append("%s %.2fs" % (name, res["wall"]))
        print("round %2d: %s" % (r + 1, "  ".join(line)), flush=True)

    ref = arms[0][0]
    summary = {"workload": args.workload, "rounds": args.rounds, "arms": dict(arms), "wall": walls, "cpu": cpus, "ratios": {}}
    print("\nmedian wall: " + "  ".join("%s %.2fs" % (n, statistics.median(walls[n])) for n, _ in arms))
    for name, _ in arms[1:]:
        for what, data in (("wall", walls), ("cpu", cpus)):
            ratios = [b / a for a, b in zip(data[ref], data[name])]
            m = statistics.median(ratios)
            lo, hi = bootstrap_median(ratios)
            summary["ratios"]["%s/%s %s" % (name, ref, what)] = {"median": m, "ci90": [lo, hi], "per_round": ratios}
            print("%-28s median %.3f  90%% interval %.3f-%.3f  (per round %.3f-%.3f)"
                  % ("%s/%s %s" % (name, ref, what), m, lo, hi, min(ratios), max(ratios)))
    with open(os.path.join(rundir, "rotate.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print("results: %s/rotate.json" % rundir)


if __name__ == "__main__":
    main()
