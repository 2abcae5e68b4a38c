#!/usr/bin/env python3
"""oxprof overhead benchmark driver (stdlib only).

Runs each real-application workload plain and profiled, alternately
(plain, profiled, plain, profiled, ... for N pairs), measures wall time and the
child's CPU time (user+sys, via wait4 rusage), and reports per-run numbers, the
median profiled/plain ratios, and the agent's failed-stack-walk share parsed from
its "[oxprof] summary: k=v ..." line.

Prepare the workloads first with bench/setup.sh.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
WORK = os.path.join(BENCH, "work")
SRC = os.path.join(WORK, "jdk-src")
DEFAULT_AGENT = os.path.join(REPO, "target", "release", "liboxprof.so")
DEFAULT_AGENT_OPTS = "start,event=cpu,interval=10ms"

QUIET = 0.15   # a run is "quiet" if other processes used < this many cores on average
SUMMARY_RE = re.compile(r"\[oxprof\]\s*summary:\s*(.*)")
ALLOC_SUMMARY_RE = re.compile(r"\[oxprof\]\s*alloc summary:\s*(.*)")


# --------------------------------------------------------------------------- workloads
class Workload:
    def __init__(self, name, desc, build, prepare=None, check=None, needs=()):
        self.name = name
        self.desc = desc
        self.build = build          # (jvm_opts: list, scratch: str) -> argv
        self.prepare = prepare      # (scratch) -> None, run before every run (untimed)
        self.check = check          # (stdout_text, scratch) -> error string or None
        self.needs = needs          # files that setup.sh must have produced


def _javac_workload(name, module, desc):
    lst = os.path.join(WORK, "javac-%s.list" % module)

    def build(jvm, scratch):
        # Same as the `javac` launcher, but through `java` so JVM options (and the
        # agent) are passed plainly instead of as -J flags.
        return (["java"] + jvm + ["-m", "jdk.compiler/com.sun.tools.javac.Main",
                                  "-d", os.path.join(scratch, "out"), "-nowarn",
                                  "-XDignore.symbol.file",
                                  "--patch-module", "%s=%s" % (module, os.path.join(SRC, module)),
                                  "@" + lst])

    def prepare(scratch):
        shutil.rmtree(os.path.join(scratch, "out"), ignore_errors=True)

    def check(stdout, scratch):
        n = 0
        for _, _, files in os.walk(os.path.join(scratch, "out")):
            n += sum(1 for f in files if f.endswith(".class"))
        return None if n > 1000 else "javac produced only %d .class files" % n

    return Workload(name, desc, build, prepare, check, needs=(lst,))


def _lucene_workload():
    cpf = os.path.join(WORK, "lucene.classpath")
    classes = os.path.join(WORK, "lucene-classes")

    def build(jvm, scratch):
        with open(cpf) as f:
            cp = f.read().strip()
        return (["java"] + jvm + ["-cp", cp + ":" + classes, "LuceneIndex",
                                  "--index", os.path.join(scratch, "index"),
                                  "--passes", "2", "--queries", "4000", SRC])

    def prepare(scratch):
        shutil.rmtree(os.path.join(scratch, "index"), ignore_errors=True)

    def check(stdout, scratch):
        return None if "LuceneIndex: docs=" in stdout else "LuceneIndex did not print its result line"

    return Workload("lucene",
                    "Lucene 4.10: index all JDK .java sources (~190 MB, 2 passes) on disk "
                    "with StandardAnalyzer, forceMerge, then 4000 queries",
                    build, prepare, check,
                    needs=(cpf, os.path.join(classes, "LuceneIndex.class"), SRC))


WORKLOADS = {
    "javac": _javac_workload("javac", "java.xml",
                             "javac: full compile of the java.xml module sources (~1850 files)"),
    "lucene": _lucene_workload(),
    "javac-big": _javac_workload("javac-big", "java.desktop",
                                 "javac: full compile of the java.desktop module sources (~2800 files)"),
}
ALL = ["javac", "lucene"]          # "all"; javac-big is opt-in


# --------------------------------------------------------------------------- helpers
def parse_summary(text, regex=SUMMARY_RE):
    """Return dict of the last '[oxprof] summary:' line's key=value pairs, or None."""
    found = None
    for line in text.splitlines():
        m = regex.search(line)
        if m:
            found = m.group(1)
    if found is None:
        return None
    d = {}
    for tok in found.split():
        if "=" not in tok:
            continue
        k, v = tok.split("=", 1)
        try:
            d[k] = int(v)
        except ValueError:
            try:
                d[k] = float(v)
            except ValueError:
                d[k] = v
    return d


def failed_share(s):
    """Failed-walk share in percent from a parsed summary, or None."""
    if not s:
        return None
    # The agent's share is of the Java threads' samples (JVM-internal threads
    # such as GC and JIT compilers have no Java stack to walk).
    samples, failed = s.get("java_samples", s.get("samples")), s.get("failed")
    if isinstance(samples, (int, float)) and isinstance(failed, (int, float)):
        return 100.0 * failed / samples if samples else 0.0
    pct = s.get("failed_pct")
    return float(pct) if isinstance(pct, (int, float)) else None


def agent_opts_with_file(opts, path):
    keys = [o.split("=", 1)[0].strip() for o in opts.split(",") if o.strip()]
    if "file" in keys:
        for o in opts.split(","):
            if o.strip().startswith("file="):
                return opts, o.strip()[5:]
    return (opts + "," if opts else "") + "file=" + path, path


def collapsed_leaves(path, counter):
    """Add leaf-frame sample counts of a collapsed-stacks file to counter; return total."""
    total = 0
    try:
        with open(path, errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                stack, _, cnt = line.rpartition(" ")
                if not stack:
                    continue
                try:
                    n = int(cnt)
                except ValueError:
                    continue
                counter[stack.rsplit(";", 1)[-1]] += n
                total += n
    except OSError:
        return None
    return total


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec=".2f", none="-"):
    return none if x is None else format(x, spec)


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError):
        return None


def cpu_busy_seconds():
    """System-wide busy CPU seconds (user+nice+system+irq+softirq+steal) from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return (v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def is_noisy(r):
    """True if other processes used >= QUIET cores on average during run r."""
    return r.get("other_cpu") is not None and r["wall"] > 0 and r["other_cpu"] / r["wall"] >= QUIET


def wait_quiet(max_wait):
    """Wait (up to max_wait s) until other processes use < QUIET cores over a 2 s window."""
    t0 = time.monotonic()
    while True:
        b0 = cpu_busy_seconds()
        time.sleep(2.0)
        b1 = cpu_busy_seconds()
        if b0 is None or b1 is None:
            return None
        used = (b1 - b0) / 2.0
        if used < QUIET or time.monotonic() - t0 >= max_wait:
            return used


def run_one(argv, log_base, timeout):
    """Run argv, stdout/stderr to files; return dict with wall/user/sys/rss/rc."""
    out_path, err_path = log_base + ".out", log_base + ".err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        busy0 = cpu_busy_seconds()
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        try:
            # wait4 gives the rusage of exactly this child (incl. all its threads).
            deadline = t0 + timeout if timeout else None
            while True:
                pid, status, ru = os.wait4(p.pid, os.WNOHANG if deadline else 0)
                if pid:
                    break
                if time.monotonic() > deadline:
                    p.kill()
                    pid, status, ru = os.wait4(p.pid, 0)
                    status = -1
                    break
                time.sleep(0.02)
        except KeyboardInterrupt:
            p.kill()
            os.wait4(p.pid, 0)
            raise
        wall = time.monotonic() - t0
        busy1 = cpu_busy_seconds()
        p.returncode = 0  # reaped by us; keep Popen from trying again
    if status == -1:
        rc, why = -1, "timed out after %ss" % timeout
    elif os.WIFSIGNALED(status):
        rc, why = -os.WTERMSIG(status), "killed by signal %d" % os.WTERMSIG(status)
    else:
        rc = os.WEXITSTATUS(status)
        why = "exit status %d" % rc if rc else ""
    cpu = ru.ru_utime + ru.ru_stime
    # CPU time burnt by everything else on the machine during this run (noise indicator).
    other = None if busy0 is None or busy1 is None else max(0.0, busy1 - busy0 - cpu)
    return {"wall": wall, "user": ru.ru_utime, "sys": ru.ru_stime,
            "cpu": cpu, "maxrss_mb": ru.ru_maxrss / 1024.0,
            "rc": rc, "why": why, "other_cpu": other, "stdout": out_path, "stderr": err_path}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(
        description="oxprof overhead benchmark: alternating plain/profiled runs of real workloads")
    ap.add_argument("--pairs", type=int, default=5, help="plain/profiled pairs per workload (default 5)")
    ap.add_argument("--workload", default="all",
                    help="javac | lucene | javac-big | all (= javac,lucene); comma-separated list ok")
    ap.add_argument("--agent-opts", default=DEFAULT_AGENT_OPTS,
                    help="agent options (default %r); ',file=<run dir>/...collapsed' is appended "
                         "unless a file= is given" % DEFAULT_AGENT_OPTS)
    ap.add_argument("--agent", default=DEFAULT_AGENT, help="agent library (default %(default)s)")
    ap.add_argument("--label", default=None, help="name for this benchmark (results dir, header)")
    ap.add_argument("--jvm-opts", default="",
                    help="extra JVM options for both plain and profiled runs "
                         "(write --jvm-opts='-Xmx2g ...' since the value starts with '-')")
    ap.add_argument("--baseline-agent-opts", default=None, metavar="OPTS",
                    help="load the agent with OPTS in the baseline ('plain') runs too, so the ratios compare "
                         "two agent configurations, e.g. --agent-opts event=alloc,live --baseline-agent-opts event=alloc")
    ap.add_argument("--plain-only", action="store_true", help="only plain runs (no agent needed)")
    ap.add_argument("--warmup", type=int, default=0, help="unmeasured plain runs before each workload")
    ap.add_argument("--timeout", type=float, default=600, help="per-run timeout in seconds (default 600)")
    ap.add_argument("--wait-quiet", type=float, default=0, metavar="SECONDS",
                    help="before each run, wait up to SECONDS for the machine to be idle "
                         "(other processes < %.2f cores); default 0 = off" % QUIET)
    ap.add_argument("--retry-noisy", type=int, default=0, metavar="N",
                    help="repeat a pair (discarding it) when other processes used >= %.2f cores "
                         "during either run; at most N extra pairs per workload (default 0)" % QUIET)
    ap.add_argument("--top", type=int, default=5, help="top-N leaf frames from collapsed output (0 = off)")
    args = ap.parse_args()

    names = []
    for w in args.workload.split(","):
        w = w.strip()
        if w == "all":
            names += ALL
        elif w in WORKLOADS:
            names.append(w)
        else:
            sys.exit("run.py: unknown workload %r (choose from %s, all)" % (w, ", ".join(WORKLOADS)))
    names = list(dict.fromkeys(names))
    if args.pairs < 1:
        sys.exit("run.py: --pairs must be >= 1")

    for n in names:
        for need in WORKLOADS[n].needs:
            if not os.path.exists(need):
                sys.exit("run.py: workload %s is not prepared (%s missing) -- run bench/setup.sh first"
                         % (n, need))

    if not args.plain_only and not os.path.isfile(args.agent):
        sys.exit("run.py: agent library not found: %s\n"
                 "         build it (cargo build --release) or pass --agent PATH, "
                 "or use --plain-only for baseline timings" % args.agent)

    label = args.label or time.strftime("run-%Y%m%d-%H%M%S")
    safe_label = re.sub(r"[^A-Za-z0-9._-]+", "_", label)
    rundir = os.path.join(WORK, "results", safe_label)
    if os.path.exists(rundir):
        rundir += time.strftime("-%H%M%S")
    os.makedirs(rundir)
    jvm = args.jvm_opts.split()

    # Freeze the agent: copy it into the run dir so a concurrent `cargo build`
    # cannot swap the library between profiled runs.
    agent_copy, agent_info = None, None
    if not args.plain_only:
        agent_copy = os.path.join(rundir, os.path.basename(args.agent))
        shutil.copy2(args.agent, agent_copy)
        agent_info = {"path": os.path.abspath(args.agent), "sha256": sha256(agent_copy),
                      "mtime": time.strftime("%Y-%m-%d %H:%M:%S",
                                             time.localtime(os.path.getmtime(args.agent)))}

    try:
        git = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                             capture_output=True, text=True).stdout.strip()
    except OSError:
        git = ""
    jv = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    print("== oxprof benchmark %r  (repo %s %s)" % (label, REPO, git))
    print("   java: %s | cpus: %d | load: %s | results: %s"
          % (jv[0] if jv else "?", os.cpu_count() or 0, fmt(loadavg()), rundir))
    if agent_info:
        print("   agent: %s (mtime %s, sha256 %s) opts: %s"
              % (agent_info["path"], agent_info["mtime"], agent_info["sha256"][:12], args.agent_opts))
    if args.baseline_agent_opts:
        print("   baseline ('plain') runs load the agent too, opts: %s" % args.baseline_agent_opts)
    if (loadavg() or 0) > 0.7:
        print("   WARNING: machine is busy (load %.2f); timings will be noisy" % loadavg())
    print()

    results = {"label": label, "git": git, "agent": agent_info, "agent_opts": args.agent_opts,
               "baseline_agent_opts": args.baseline_agent_opts,
               "jvm_opts": args.jvm_opts, "pairs": args.pairs, "workloads": {}}
    exit_code = 0

    for name in names:
        wl = WORKLOADS[name]
        scratch = os.path.join(WORK, "scratch", name)
        os.makedirs(scratch, exist_ok=True)
        print("== workload %s: %s" % (name, wl.desc))
        for i in range(args.warmup):
            if wl.prepare:
                wl.prepare(scratch)
            r = run_one(wl.build(jvm, scratch), os.path.join(rundir, "%s-warmup%d" % (name, i)),
                        args.timeout)
            print("   warmup %d: %.2f s wall" % (i + 1, r["wall"]))

        hdr = "%4s %-8s %8s %8s %7s %8s %6s %7s %9s %7s %8s %s" % (
            "pair", "mode", "wall_s", "user_s", "sys_s", "cpu_s", "rss_MB", "other_s",
            "samples", "failed", "failed%", "summary")
        print("     (other_s = CPU seconds used by other processes during the run; high = noisy)")
        print(hdr)
        runs = []
        leaves = Counter()
        leaf_total = 0
        failure = None
        modes = ["plain"] if args.plain_only else ["plain", "profiled"]
        accepted, pair, retries_left = 0, 0, args.retry_noisy
        while accepted < args.pairs:
            pair += 1
            pair_runs = []
            for mode in modes:
                base = os.path.join(rundir, "%s-%02d-%s" % (name, pair, mode))
                run_jvm = list(jvm)
                collapsed = None
                if mode == "profiled":
                    opts, collapsed = agent_opts_with_file(args.agent_opts, base + ".collapsed")
                    run_jvm = ["-agentpath:%s=%s" % (agent_copy, opts)] + run_jvm
                    if os.path.exists(collapsed):
                        os.remove(collapsed)
                elif args.baseline_agent_opts:
                    opts, _ = agent_opts_with_file(args.baseline_agent_opts, base + ".collapsed")
                    run_jvm = ["-agentpath:%s=%s" % (agent_copy, opts)] + run_jvm
                if wl.prepare:
                    wl.prepare(scratch)
                argv = wl.build(run_jvm, scratch)
                if args.wait_quiet > 0:
                    wait_quiet(args.wait_quiet)
                r = run_one(argv, base, args.timeout)
                r.update({"pair": pair, "mode": mode, "argv": argv})
                with open(r["stdout"], errors="replace") as f:
                    out_text = f.read()
                with open(r["stderr"], errors="replace") as f:
                    err_text = f.read()
                summ = None
                if mode == "profiled":
                    summ = parse_summary(err_text) or parse_summary(out_text)
                    r["summary"] = summ
                    r["failed_share"] = failed_share(summ)
                    r["alloc_summary"] = parse_summary(err_text, ALLOC_SUMMARY_RE)
                    if collapsed:
                        r["collapsed"] = collapsed
                        t = collapsed_leaves(collapsed, leaves)
                        if t:
                            leaf_total += t
                err = r["why"] or (wl.check(out_text, scratch) if wl.check else None)
                s = summ or {}
                print("%4d %-8s %8.2f %8.2f %7.2f %8.2f %6.0f %7s %9s %7s %8s %s" % (
                    pair, mode, r["wall"], r["user"], r["sys"], r["cpu"], r["maxrss_mb"],
                    fmt(r["other_cpu"]), s.get("samples", "-"), s.get("failed", "-"),
                    fmt(r.get("failed_share"), ".3f"),
                    "" if mode == "plain" else ("-" if summ is None else
                                                " ".join("%s=%s" % kv for kv in s.items()
                                                         if kv[0] not in ("samples", "failed", "failed_pct")))),
                    flush=True)
                runs.append(r)
                pair_runs.append(r)
                if err:
                    failure = (mode, err, r)
                    break
            if failure:
                break
            if retries_left > 0 and any(is_noisy(r) for r in pair_runs):
                retries_left -= 1
                for r in pair_runs:
                    r["discarded"] = True
                print("     ^ noisy pair (other processes >= %.2f cores), discarded and repeated "
                      "(%d retries left)" % (QUIET, retries_left), flush=True)
                continue
            accepted += 1

        wres = {"runs": [{k: v for k, v in r.items()} for r in runs]}
        results["workloads"][name] = wres
        if failure:
            mode, err, r = failure
            exit_code = 1
            who = ("the workload itself is broken" if mode == "plain"
                   else "the PROFILED run failed (plain runs were fine) -- agent problem?")
            print("\n!! %s %s run (pair %d) FAILED: %s -- %s" % (name, mode, r["pair"], err, who))
            print("   command: %s" % " ".join(r["argv"]))
            print("   stderr (%s), last lines:" % r["stderr"])
            for line in tail(r["stderr"]).splitlines():
                print("     | " + line)
            print()
            wres["error"] = "%s run failed: %s" % (mode, err)
            continue

        kept = [r for r in runs if not r.get("discarded")]
        plain = [r for r in kept if r["mode"] == "plain"]
        prof = [r for r in kept if r["mode"] == "profiled"]
        print()
        if len(kept) < len(runs):
            print("   (%d noisy runs discarded; statistics below use the %d kept pairs)"
                  % (len(runs) - len(kept), len(plain)))
        noise = med([r["other_cpu"] / r["wall"] for r in kept
                     if r.get("other_cpu") is not None and r["wall"] > 0])
        if noise is not None:
            print("   noise: other processes used a median %.2f of %d cores during the runs%s"
                  % (noise, os.cpu_count() or 0,
                     "  <-- WARNING: contended machine, ratios are unreliable" if noise > 0.25 else ""))
            wres["median_other_cores"] = noise
        print("   plain    median: wall %.2f s  cpu %.2f s  (wall min %.2f max %.2f)" % (
            med([r["wall"] for r in plain]), med([r["cpu"] for r in plain]),
            min(r["wall"] for r in plain), max(r["wall"] for r in plain)))
        wres["plain_median_wall"] = med([r["wall"] for r in plain])
        wres["plain_median_cpu"] = med([r["cpu"] for r in plain])
        if prof:
            pairs = [(p, q) for p, q in zip(plain, prof)]
            wall_r = [q["wall"] / p["wall"] for p, q in pairs]
            cpu_r = [q["cpu"] / p["cpu"] for p, q in pairs]
            mpw, mqw = med([r["wall"] for r in plain]), med([r["wall"] for r in prof])
            mpc, mqc = med([r["cpu"] for r in plain]), med([r["cpu"] for r in prof])
            print("   profiled median: wall %.2f s  cpu %.2f s  (wall min %.2f max %.2f)" % (
                mqw, mqc, min(r["wall"] for r in prof), max(r["wall"] for r in prof)))
            print("   per-pair wall ratios: %s" % " ".join("%.3f" % x for x in wall_r))
            print("   per-pair cpu  ratios: %s" % " ".join("%.3f" % x for x in cpu_r))
            print("   >> MEDIAN WALL RATIO (profiled/plain): %.3f   (ratio of medians %.3f)"
                  % (med(wall_r), mqw / mpw))
            print("   >> MEDIAN CPU  RATIO (profiled/plain): %.3f   (ratio of medians %.3f)"
                  % (med(cpu_r), mqc / mpc))
            quiet = [(p, q) for p, q in pairs if not is_noisy(p) and not is_noisy(q)]
            if quiet and len(quiet) < len(pairs):
                print("   >> quiet pairs only (other < %.2f cores in both runs, n=%d of %d): "
                      "wall %.3f  cpu %.3f" % (QUIET, len(quiet), len(pairs),
                                               med([q["wall"] / p["wall"] for p, q in quiet]),
                                               med([q["cpu"] / p["cpu"] for p, q in quiet])))
                wres["quiet_pairs"] = len(quiet)
                wres["quiet_median_wall_ratio"] = med([q["wall"] / p["wall"] for p, q in quiet])
                wres["quiet_median_cpu_ratio"] = med([q["cpu"] / p["cpu"] for p, q in quiet])
            wres.update({"median_wall_ratio": med(wall_r), "median_cpu_ratio": med(cpu_r),
                         "wall_ratio_of_medians": mqw / mpw, "cpu_ratio_of_medians": mqc / mpc,
                         "profiled_median_wall": mqw, "profiled_median_cpu": mqc})
            with_summary = [r for r in prof if r.get("summary")]
            if not with_summary:
                print("   >> failed walks: no '[oxprof] summary:' line in any profiled run's output "
                      "(agent too old or crashed at exit?)")
            else:
                shares = [r["failed_share"] for r in with_summary if r["failed_share"] is not None]
                tot_s = sum(r["summary"].get("samples", 0) for r in with_summary
                            if isinstance(r["summary"].get("samples"), (int, float)))
                tot_f = sum(r["summary"].get("failed", 0) for r in with_summary
                            if isinstance(r["summary"].get("failed"), (int, float)))
                tot_j = sum(r["summary"].get("java_samples", 0) for r in with_summary
                            if isinstance(r["summary"].get("java_samples"), (int, float)))
                agg = (100.0 * tot_f / tot_j) if tot_j else ((100.0 * tot_f / tot_s) if tot_s else None)
                print("   >> FAILED WALKS: aggregate %s%% of Java-thread samples (%d of %d; %s%% of all %d samples), per-run median %s%%%s"
                      % (fmt(agg, ".3f"), tot_f, tot_j, fmt(100.0 * tot_f / tot_s if tot_s else None, ".3f"), tot_s, fmt(med(shares), ".3f"),
                         "" if len(with_summary) == len(prof) else
                         "  [summary missing in %d of %d runs]" % (len(prof) - len(with_summary),
                                                                   len(prof))))
                wres.update({"failed_share_aggregate_pct": agg, "failed_share_median_pct": med(shares),
                             "samples_total": tot_s, "failed_total": tot_f})
                tot_n = sum(r["summary"].get("native_samples", 0) for r in with_summary
                            if isinstance(r["summary"].get("native_samples"), (int, float)))
                if any("native_samples" in r["summary"] for r in with_summary):
                    # Samples that carry native or kernel frames (cstack=fp; 0 with cstack=no).
                    print("   >> NATIVE PART: %s%% of all samples (%d of %d)"
                          % (fmt(100.0 * tot_n / tot_s if tot_s else None, ".2f"), tot_n, tot_s))
                    wres["native_samples_total"] = tot_n
                handler = [100.0 * r["summary"]["samples"] * r["summary"]["handler_ns"] / 1e9 / r["cpu"]
                           for r in with_summary if isinstance(r["summary"].get("handler_ns"), (int, float)) and r.get("cpu")]
                if handler:
                    # The signal handler's own CPU time (walks, native part, store).
                    print("   >> HANDLER: mean %s ns per sample (per-run median), %s%% of process CPU"
                          % (fmt(med([r["summary"]["handler_ns"] for r in with_summary if "handler_ns" in r["summary"]]), ".0f"), fmt(med(handler), ".2f")))
                    wres["handler_cpu_pct"] = med(handler)
            allocs = [r for r in prof if r.get("alloc_summary")]
            if allocs:
                # The allocation callback's own time: samples x mean callback
                # time, against the process's CPU time and the run's wall time
                # (the callback runs on the allocating thread, so on a
                # single-threaded workload like javac its time is wall time).
                cpu_share = [100.0 * a["alloc_summary"].get("samples", 0) * a["alloc_summary"].get("callback_ns", 0) / 1e9 / a["cpu"]
                             for a in allocs if a.get("cpu")]
                wall_share = [100.0 * a["alloc_summary"].get("samples", 0) * a["alloc_summary"].get("callback_ns", 0) / 1e9 / a["wall"]
                              for a in allocs if a.get("wall")]
                means = [a["alloc_summary"].get("callback_ns", 0) for a in allocs]
                medians = [a["alloc_summary"].get("callback_median_ns", 0) for a in allocs]
                own = sum(a["alloc_summary"].get("own_walks", 0) for a in allocs)
                total = sum(a["alloc_summary"].get("samples", 0) for a in allocs)
                print("   >> ALLOC CALLBACK: mean %s ns (per-run median of means), median %s ns; %s%% of process CPU, %s%% of wall; own stack walks %s%% of %d samples"
                      % (fmt(med(means), ".0f"), fmt(med(medians), ".0f"), fmt(med(cpu_share), ".2f"), fmt(med(wall_share), ".2f"),
                         fmt(100.0 * own / total if total else None, ".1f"), total))
                wres.update({"alloc_callback_ns_median": med(means), "alloc_callback_cpu_pct": med(cpu_share),
                             "alloc_callback_wall_pct": med(wall_share)})
            if args.top and leaf_total:
                print("   top %d leaf frames (all profiled runs, %d samples in collapsed files):"
                      % (args.top, leaf_total))
                for frame, n in leaves.most_common(args.top):
                    print("     %6.2f%%  %s" % (100.0 * n / leaf_total, frame))
                wres["top_leaves"] = leaves.most_common(args.top)
            elif args.top:
                print("   (no collapsed stacks found)")
        print()

    with open(os.path.join(rundir, "results.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    print("results: %s/results.json" % rundir)
    if exit_code:
        print("FAILED: at least one workload run failed (see above)", file=sys.stderr)
    return exit_code


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
