#!/usr/bin/env python3
"""CPU per CPU sample inside the profiler's signal handler, oxprof against
async-profiler, on javac (issue 24's handler target).

Each arm profiles the same javac compile (bench/setup.sh's source list) at
the same interval; the arms run in alternation for --rounds rounds. Per run:

- perf (`perf record -e cpu-clock -F 4999 -g`, frame-pointer call chains):
  the samples whose chain passes through the arm's signal handler (its
  `--parent` symbol), times perf's period, divided by the samples the
  profiler took: microseconds of CPU per sample, measured the same way for
  every arm. oxprof must be built with frame pointers for this
  (RUSTFLAGS="-C force-frame-pointers=yes"); libjvm and async-profiler keep
  them. Also the share of those samples that are in the kernel.
- the system calls the whole JVM made that only a profiler makes here
  (`process_vm_readv`, `rt_sigqueueinfo`), per sample, from a second,
  `perf stat` run of the arm (tracepoints; not counted under perf record);
- for oxprof arms, the agent's own counters from its summary line
  (`handler_ns=`, `native_ns=`), which include perf's sampling interrupts
  inside the handler in the perf run and so come from the `perf stat` run.

Arms: NAME=PARENT_SYMBOL=AGENT_PATH, e.g.
  bench/handler_cost.py --rounds 4 \\
      base=take_sample=/tmp/fp-base/release/liboxprof.so \\
      new=take_sample=/tmp/fp-target/release/liboxprof.so \\
      asprof=signalHandler=/path/to/libasyncProfiler.so

Prints one table of medians (and ranges) per arm, plus every run.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
WORK = ROOT / "work"
PERIOD_HZ = 4999


def javac_cmd(agent: str, opts: str, out: Path):
    classes = out / "classes"
    shutil.rmtree(classes, ignore_errors=True)
    return [
        "java",
        f"-agentpath:{agent}={opts}",
        "-m",
        "jdk.compiler/com.sun.tools.javac.Main",
        "-d",
        str(classes),
        "-nowarn",
        "-XDignore.symbol.file",
        "--patch-module",
        f"java.xml={WORK / 'jdk-src' / 'java.xml'}",
        f"@{WORK / 'javac-java.xml.list'}",
    ]


def samples_taken(collapsed: Path) -> int:
    n = 0
    for line in collapsed.read_text(errors="replace").splitlines():
        head, _, count = line.rpartition(" ")
        if head and count.isdigit():
            n += int(count)
    return n


def summary(stderr: str) -> dict:
    m = re.search(r"\[oxprof\] summary: (.*)", stderr)
    out = {}
    if m:
        for kv in m.group(1).split():
            k, _, v = kv.partition("=")
            out[k] = v
    return out


def perf_run(name, parent, agent, opts, out: Path) -> dict:
    collapsed = out / f"{name}.collapsed"
    data = out / f"{name}.perf"
    cmd = ["perf", "record", "-q", "-o", str(data), "-e", "cpu-clock", "-F", str(PERIOD_HZ), "-g", "--"]
    cmd += javac_cmd(agent, f"{opts},file={collapsed}", out)
    started = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - started
    if p.returncode != 0:
        raise SystemExit(f"{name}: perf record of javac failed ({p.returncode}): {p.stderr[-800:]}")
    if not any((out / "classes").rglob("*.class")):
        raise SystemExit(f"{name}: javac wrote no class files: {p.stderr[-800:]}")
    rep = subprocess.run(
        ["perf", "report", "-i", str(data), "--no-children", "--sort", "sym", "-p", parent, "-x", "-n", "--stdio"],
        capture_output=True,
        text=True,
    )
    inside = kernel = 0
    for line in rep.stdout.splitlines():
        f = line.split()
        if len(f) >= 4 and f[0].endswith("%") and f[1].isdigit():
            inside += int(f[1])
            if f[2] == "[k]":
                kernel += int(f[1])
    data.unlink(missing_ok=True)
    taken = samples_taken(collapsed)
    us = inside * 1e6 / PERIOD_HZ / taken if taken else float("nan")
    return {"samples": taken, "perf_in_handler": inside, "us_per_sample": us, "kernel_share": kernel / inside if inside else 0.0, "wall_s": wall}


def stat_run(name, agent, opts, out: Path) -> dict:
    collapsed = out / f"{name}-stat.collapsed"
    events = "syscalls:sys_enter_process_vm_readv,syscalls:sys_enter_rt_sigqueueinfo"
    cmd = ["perf", "stat", "-x", ",", "-e", events, "--"] + javac_cmd(agent, f"{opts},file={collapsed}", out)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{name}: perf stat run failed ({p.returncode}): {p.stderr[-800:]}")
    counts = {}
    for line in p.stderr.splitlines():
        f = line.split(",")
        if len(f) > 2 and f[2].startswith("syscalls:sys_enter_"):
            counts[f[2].removeprefix("syscalls:sys_enter_")] = int(f[0]) if f[0].isdigit() else 0
    taken = samples_taken(collapsed)
    s = summary(p.stderr)
    return {
        "stat_samples": taken,
        "vm_readv_per_sample": counts.get("process_vm_readv", 0) / taken if taken else float("nan"),
        "sigqueue_per_sample": counts.get("rt_sigqueueinfo", 0) / taken if taken else float("nan"),
        "handler_ns": int(s["handler_ns"]) if "handler_ns" in s else None,
        "native_ns": int(s["native_ns"]) if "native_ns" in s else None,
    }


def med(values):
    v = [x for x in values if x is not None]
    if not v:
        return "—"
    m = statistics.median(v)
    return f"{m:.1f} ({min(v):.1f}–{max(v):.1f})" if len(v) > 1 else f"{m:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("arms", nargs="+", help="NAME=PARENT_SYMBOL=AGENT_PATH")
    ap.add_argument("--rounds", type=int, default=4, help="rounds of alternating arms (default 4)")
    ap.add_argument("--opts", default="start,event=cpu,interval=10ms", help="agent options of every arm (default: %(default)s)")
    args = ap.parse_args()
    if not (WORK / "javac-java.xml.list").exists():
        sys.exit("handler_cost: no javac source list: run bench/setup.sh first")
    if args.rounds < 1:
        sys.exit("handler_cost: --rounds must be at least 1")
    arms = []
    for a in args.arms:
        parts = a.split("=", 2)
        if len(parts) != 3 or not all(parts):
            sys.exit(f"handler_cost: arm {a!r}: expected NAME=PARENT_SYMBOL=AGENT_PATH")
        if not os.path.exists(parts[2]):
            sys.exit(f"handler_cost: arm {parts[0]}: no agent at {parts[2]}")
        arms.append(parts)
    out = Path(tempfile.mkdtemp(prefix="handler-cost."))
    # Copy the agents: a build during the run must not swap a library.
    for arm in arms:
        copy = out / f"{arm[0]}.so"
        shutil.copy(arm[2], copy)
        arm[2] = str(copy)
    print(f"handler_cost: {len(arms)} arms x {args.rounds} rounds, options {args.opts}, runs in {out}", flush=True)
    print(f"load average at start: {os.getloadavg()[0]:.2f}", flush=True)
    runs = {a[0]: [] for a in arms}
    for r in range(args.rounds):
        order = arms[r % len(arms):] + arms[: r % len(arms)]
        for name, parent, agent in order:
            res = perf_run(name, parent, agent, args.opts, out)
            res.update(stat_run(name, agent, args.opts, out))
            res["load"] = os.getloadavg()[0]
            runs[name].append(res)
            print(
                f"round {r + 1} {name}: {res['us_per_sample']:.1f} µs/sample ({res['perf_in_handler']} perf samples in the handler / {res['samples']} samples), "
                f"kernel {100 * res['kernel_share']:.0f}%, process_vm_readv {res['vm_readv_per_sample']:.2f}/sample, rt_sigqueueinfo {res['sigqueue_per_sample']:.2f}/sample, "
                f"handler_ns={res['handler_ns']} native_ns={res['native_ns']}, load {res['load']:.1f}",
                flush=True,
            )
    print()
    print("| arm | µs of CPU per sample in the handler (perf) | kernel share % | process_vm_readv / sample | rt_sigqueueinfo / sample | agent's handler_ns (µs) | agent's native_ns (µs) |")
    print("|---|---|---|---|---|---|---|")
    for name, _, _ in arms:
        rs = runs[name]
        hn = [x["handler_ns"] / 1000 if x["handler_ns"] is not None else None for x in rs]
        nn = [x["native_ns"] / 1000 if x["native_ns"] is not None else None for x in rs]
        print(
            f"| {name} | {med([x['us_per_sample'] for x in rs])} | {med([100 * x['kernel_share'] for x in rs])} | "
            f"{med([x['vm_readv_per_sample'] for x in rs])} | {med([x['sigqueue_per_sample'] for x in rs])} | {med(hn)} | {med(nn)} |"
        )
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
