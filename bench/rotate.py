#!/usr/bin/env python3
"""Overhead with more than two arms, run in rotation, with confidence intervals.

Each round runs every arm once, in an order that rotates from round to round
(so every arm runs in every position; the rotation is cyclic, so within a
round an arm mostly follows the same neighbour), and the ratio of each arm to
the first arm is taken within the round. Arms whose options equal the first
arm's (null arms, such as plain-again=) get a second line too: each other
arm against the mean of all plain runs of its round, a steadier reference.
On this project's VMs the host's speed drifts by 5-15% over tens of
seconds, so ratios of neighbouring runs are what can be compared; the
report gives each arm's median ratio with a 90% bootstrap interval over the
rounds, so a figure comes with how sure it is.

Arms are NAME=JVM_OPTIONS; in the options, @AGENT stands for the oxprof agent
and @EMPTY for bench/empty_agent.c (the JEP 331 floor: sampling on, a callback
that does nothing), built here with the JDK's headers. Example:

  bench/rotate.py --rounds 20 --workload javac \\
      plain= \\
      jvm-sampling=-agentpath:@EMPTY \\
      alloc=-agentpath:@AGENT=start,event=alloc,file=@OUT.collapsed \\
      cpu+alloc=-agentpath:@AGENT=start,event=cpu,interval=10ms,alloc,file=@OUT.collapsed

@OUT is replaced by a per-run path in the results directory. A word
env:NAME=VALUE in an arm's options sets that environment variable for its
runs instead of passing a JVM option, for example
  cpu-noop+alloc='env:OXPROF_SIGNAL_NOOP=1 -agentpath:@AGENT=start,event=cpu,...'
(the handler returns at once: what the engine's timers and signals cost). Prepare the
workloads first with bench/setup.sh.

--side-by-side runs the reference arm and one other arm at the same time,
each pinned to a CPU of its own (swapped every round), and takes their
ratio; each round does this once per non-reference arm. Both runs then see
the same host slowdowns, which removes most of the drift between runs that
follow each other. Each JVM sees one CPU (its ergonomics pick accordingly),
so the figures are for a one-CPU JVM; needs at least two CPUs.
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


def run_side_by_side(jobs, timeout):
    """Start every (argv, log_base, cpu) at once, each pinned to its CPU;
    return their results (as run.run_one) in order."""
    procs = []
    for argv, base, cpu in jobs:
        out, err = open(base + ".out", "wb"), open(base + ".err", "wb")
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                             preexec_fn=lambda cpu=cpu: os.sched_setaffinity(0, {cpu}))
        procs.append({"p": p, "t0": t0, "files": (out, err), "base": base})
    left = {d["p"].pid: d for d in procs}
    deadline = time.monotonic() + timeout
    while left:
        pid, status, ru = os.wait4(-1, os.WNOHANG)
        if pid == 0:
            if time.monotonic() > deadline:
                for d in left.values():
                    d["p"].kill()
                deadline = float("inf")
            time.sleep(0.01)
            continue
        d = left.pop(pid, None)
        if d is None:
            continue
        d["wall"] = time.monotonic() - d["t0"]
        d["p"].returncode = 0  # reaped here
        for f in d["files"]:
            f.close()
        if os.WIFSIGNALED(status):
            rc, why = -os.WTERMSIG(status), "killed by signal %d" % os.WTERMSIG(status)
        else:
            rc = os.WEXITSTATUS(status)
            why = "exit status %d" % rc if rc else ""
        d.update(rc=rc, why=why, cpu=ru.ru_utime + ru.ru_stime)
    return [{"wall": d["wall"], "cpu": d["cpu"], "rc": d["rc"], "why": d["why"] or "", "stderr": d["base"] + ".err"} for d in procs]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("arms", nargs="+", metavar="NAME=JVM_OPTIONS", help="the first arm is the reference")
    ap.add_argument("--rounds", type=int, default=10, help="rounds (each runs every arm once; default 10)")
    ap.add_argument("--workload", default="javac", choices=sorted(runpy.WORKLOADS))
    ap.add_argument("--agent", default=runpy.DEFAULT_AGENT, help="oxprof agent (default %(default)s)")
    ap.add_argument("--label", default=None, help="results directory name")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--scratch", default=None,
                    help="where the workload writes (javac's classes, Lucene's index); default "
                         "bench/work/scratch. A tmpfs such as /dev/shm takes out the file system's "
                         "noise: on ext4, creating files soon after deleting as many costs ~1 s of "
                         "CPU per javac run, and how much varies from run to run")
    ap.add_argument("--side-by-side", action="store_true",
                    help="run the reference and each other arm at the same time, one CPU each (see above)")
    args = ap.parse_args()

    arms = []
    for a in args.arms:
        if "=" not in a:
            sys.exit("rotate.py: an arm is NAME=JVM_OPTIONS (options may be empty): %r" % a)
        name, opts = a.split("=", 1)
        arms.append((name, opts))
    if len(arms) < 2:
        sys.exit("rotate.py: give at least two arms")
    if args.side_by_side and len(os.sched_getaffinity(0)) < 2:
        sys.exit("rotate.py: --side-by-side needs two CPUs; this process may use %d" % len(os.sched_getaffinity(0)))
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
    if args.scratch:
        scratch = os.path.join(args.scratch, "oxprof-bench-" + args.workload)
    else:
        scratch = os.path.join(runpy.WORK, "scratch", args.workload)
    os.makedirs(scratch, exist_ok=True)

    walls = {name: [] for name, _ in arms}
    cpus = {name: [] for name, _ in arms}
    # Side by side, each arm has its own reference run (the ref lists hold
    # one entry per other arm per round, in the same order).
    refs = {name: {"wall": [], "cpu": []} for name, _ in arms[1:]}
    mode = "side by side, one CPU each" if args.side_by_side else "one after another"
    print("workload %s, %d rounds of %d arms (%s), results in %s" % (args.workload, args.rounds, len(arms), mode, rundir), flush=True)
    cpu_ids = sorted(os.sched_getaffinity(0))[:2]

    def job(r, name, opts, slot):
        base = os.path.join(rundir, "%s-%02d-%s" % (args.workload, r + 1, name.replace("/", "_")))
        opts = opts.replace("@AGENT", agent).replace("@OUT", base)
        if empty:
            opts = opts.replace("@EMPTY", empty)
        where = os.path.join(scratch, str(slot))
        os.makedirs(where, exist_ok=True)
        if wl.prepare:
            wl.prepare(where)
        words = shlex.split(opts)
        env = [w[len("env:"):] for w in words if w.startswith("env:")]
        argv = wl.build([w for w in words if not w.startswith("env:")], where)
        return (["env"] + env + argv if env else argv), base

    for r in range(args.rounds):
        order = arms[r % len(arms):] + arms[:r % len(arms)]
        line = []
        if args.side_by_side:
            ref_name, ref_opts = arms[0]
            for name, opts in [a for a in order if a[0] != ref_name]:
                pair = [job(r, ref_name + "-for-" + name, ref_opts, 0), job(r, name, opts, 1)]
                swap = r % 2
                jobs = [(argv, base, cpu_ids[(i + swap) % 2]) for i, (argv, base) in enumerate(pair)]
                res_ref, res = run_side_by_side(jobs, args.timeout)
                for n, x in ((ref_name, res_ref), (name, res)):
                    if x["rc"] != 0:
                        sys.exit("rotate.py: %s failed in round %d (%s); see %s" % (n, r + 1, x["why"], x["stderr"]))
                refs[name]["wall"].append(res_ref["wall"])
                refs[name]["cpu"].append(res_ref["cpu"])
                walls[ref_name].append(res_ref["wall"])
                cpus[ref_name].append(res_ref["cpu"])
                walls[name].append(res["wall"])
                cpus[name].append(res["cpu"])
                line.append("%s %.2fs|%s %.2fs" % (name, res["wall"], ref_name, res_ref["wall"]))
        else:
            for name, opts in order:
                argv, base = job(r, name, opts, 0)
                res = runpy.run_one(argv, base, args.timeout)
                if res["rc"] != 0:
                    sys.exit("rotate.py: %s failed in round %d (%s); see %s.err" % (name, r + 1, res["why"], base))
                walls[name].append(res["wall"])
                cpus[name].append(res["cpu"])
                line.append("%s %.2fs" % (name, res["wall"]))
            for name, _ in arms[1:]:
                refs[name]["wall"].append(walls[arms[0][0]][-1])
                refs[name]["cpu"].append(cpus[arms[0][0]][-1])
        print("round %2d: %s" % (r + 1, "  ".join(line)), flush=True)

    ref = arms[0][0]
    summary = {"workload": args.workload, "rounds": args.rounds, "side_by_side": args.side_by_side,
               "arms": dict(arms), "wall": walls, "cpu": cpus, "ratios": {}}
    print("\nmedian wall: " + "  ".join("%s %.2fs" % (n, statistics.median(walls[n])) for n, _ in arms))
    for name, _ in arms[1:]:
        for what, data in (("wall", walls), ("cpu", cpus)):
            ratios = [b / a for a, b in zip(refs[name][what], data[name])]
            m = statistics.median(ratios)
            lo, hi = bootstrap_median(ratios)
            summary["ratios"]["%s/%s %s" % (name, ref, what)] = {"median": m, "ci90": [lo, hi], "per_round": ratios}
            print("%-28s median %.3f  90%% interval %.3f-%.3f  (per round %.3f-%.3f)"
                  % ("%s/%s %s" % (name, ref, what), m, lo, hi, min(ratios), max(ratios)))
    # Arms with the reference's own options (null arms, e.g. plain-again=)
    # measure nothing but noise; the mean of all such runs in a round is a
    # steadier reference than the one plain run.
    nulls = [n for n, o in arms if o == arms[0][1]]
    if len(nulls) > 1 and not args.side_by_side:
        for name, _ in arms:
            if name in nulls:
                continue
            for what, data in (("wall", walls), ("cpu", cpus)):
                ratios = [data[name][r] / statistics.mean(data[n][r] for n in nulls) for r in range(args.rounds)]
                m = statistics.median(ratios)
                lo, hi = bootstrap_median(ratios)
                key = "%s/mean(%s) %s" % (name, ",".join(nulls), what)
                summary["ratios"][key] = {"median": m, "ci90": [lo, hi], "per_round": ratios}
                print("%-28s median %.3f  90%% interval %.3f-%.3f  (per round %.3f-%.3f)"
                      % (key, m, lo, hi, min(ratios), max(ratios)))
    with open(os.path.join(rundir, "rotate.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print("results: %s/rotate.json" % rundir)


if __name__ == "__main__":
    main()
