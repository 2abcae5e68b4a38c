#!/usr/bin/env python3
"""Wall-clock and lock profiling on a real server (issue 24): cost and accuracy.

Embedded Jetty 9 (Debian's jetty9 jars, 200 pool threads) runs OffCpuServer,
whose servlet spends its time off-CPU at named sites and measures that time
itself (nanoTime). wrk loads it on loopback (warm-up, then the measured run)
while one profiler, or none, records:

  scenario wall (GET /sleep: cpuWork + sleepSite = Thread.sleep(2 ms)), wrk -c200
    none
    oxprof       -agentpath:liboxprof.so=start,event=wall,interval=50ms,state,file=X.collapsed
    asprof       -agentpath:libasyncProfiler.so=start,event=wall,interval=50ms,file=X.collapsed
  scenario lock (GET /contend: cpuWork + monitorSite (synchronized) or lockSite
    (ReentrantLock), alternating per thread; the holder parks 250 us), wrk -c64
    none
    oxprof       ...liboxprof.so=start,event=lock,lock=1ms,total,file=X.collapsed
    oxprof-lock0 ...liboxprof.so=start,event=lock,lock=0,total,file=X.collapsed
    asprof       ...libasyncProfiler.so=start,event=lock,lock=1ms,total,file=X.collapsed

(`state` only changes oxprof's output: the state is read in every wall sample
anyway.) Arms alternate within a round, in reversed order every other round.
Per run: requests/s of the measured wrk run; oxprof's `wall summary:` /
`lock summary:` counters (JVM stderr); from the profile, the wall time under
sleepSite (samples x interval) against the servlet's own sleep time and its
share of the pool threads' wall time, or the lock wait under monitorSite /
lockSite (total ns, leaf = the lock's class) against the servlet's measured
waits. The truth and the profiles both cover the JVM's whole life (warm-up
included; the profilers start with the JVM).

Usage:  bench/offcpu/jetty/run.py [--quick] [--rounds N] [--duration S] [--warmup S]
        [--scenarios wall,lock] [--arms none,oxprof,oxprof-lock0,asprof]
        [--threads 200] [--keep DIR] [--out results.md]
Env:    OXPROF_AGENT (default target/release/liboxprof.so in this checkout),
        ASYNC_PROFILER (libasyncProfiler.so, default /work/async-profiler-src/build/lib/),
        JETTY_JARS (folder with jetty9-*.jar, default /usr/share/java)
Needs:  apt-get install jetty9 wrk; a JDK 17 with javac on PATH; async-profiler built
        from source (make), outside this repository, for the asprof arm.
"""
import argparse, json, os, re, shutil, signal, statistics, subprocess, sys, tempfile, threading, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
AGENT = os.environ.get("OXPROF_AGENT", os.path.join(ROOT, "target/release/liboxprof.so"))
ASPROF = os.environ.get("ASYNC_PROFILER", "/work/async-profiler-src/build/lib/libasyncProfiler.so")
JETTY = os.environ.get("JETTY_JARS", "/usr/share/java")
JARS = [f"jetty9-{m}.jar" for m in ("server", "servlet", "http", "io", "util", "security")] + ["servlet-api.jar"]
WALL_INTERVAL_NS = 50_000_000

SCENARIOS = {
    # name: (URL path, wrk connections, {arm: agent option or None})
    "wall": ("/sleep", 200, {
        "none": None,
        "oxprof": lambda f: f"-agentpath:{AGENT}=start,event=wall,interval=50ms,state,file={f}",
        "asprof": lambda f: f"-agentpath:{ASPROF}=start,event=wall,interval=50ms,file={f}",
    }),
    "lock": ("/contend", 64, {
        "none": None,
        "oxprof": lambda f: f"-agentpath:{AGENT}=start,event=lock,lock=1ms,total,file={f}",
        "oxprof-lock0": lambda f: f"-agentpath:{AGENT}=start,event=lock,lock=0,total,file={f}",
        "asprof": lambda f: f"-agentpath:{ASPROF}=start,event=lock,lock=1ms,total,file={f}",
    }),
}
WALL_FIELDS = ("handler_ns", "signalled", "reused", "deferred", "sampler_ns_per_thread_tick", "threads", "failed_pct")
LOCK_FIELDS = ("record_ns", "monitor_waits", "monitor_recorded", "parks", "park_recorded", "estimated_ns")
PROCS = []  # live child processes, killed on exit


def die(msg):
    sys.exit(f"run.py: {msg}")


def check_prereqs(arms):
    missing = [j for j in JARS if not os.path.exists(os.path.join(JETTY, j))]
    if missing:
        die(f"Jetty 9 jars missing in {JETTY}: {', '.join(missing)} (apt-get install --no-install-recommends jetty9)")
    if not shutil.which("wrk"):
        die("wrk not found (apt-get install --no-install-recommends wrk)")
    if not shutil.which("javac"):
        die("javac not found (a JDK 17, e.g. openjdk-17-jdk-headless)")
    if any(a.startswith("oxprof") for a in arms) and not os.path.exists(AGENT):
        die(f"oxprof agent {AGENT} missing (cargo build --release, or set OXPROF_AGENT)")
    if "asprof" in arms and not os.path.exists(ASPROF):
        die(f"async-profiler agent {ASPROF} missing: build async-profiler from its sources with make, "
            "outside this repository, and set ASYNC_PROFILER to build/lib/libasyncProfiler.so")


def frames_of(line):
    """(frames, count) of a collapsed line; async-profiler's `_[i]`/`_[j]`/`_[k]` suffixes dropped."""
    stack, _, n = line.rstrip("\n").rpartition(" ")
    if not n.isdigit():
        return None, 0
    return [re.sub(r"_\[\w\]$", "", f) for f in stack.split(";")], int(n)


def wall_sums(path):
    """Samples: all, on Jetty pool threads (a QueuedThreadPool frame), under sleepSite,
    and under sleepSite per root state frame (oxprof's `state`)."""
    s = {"all": 0, "pool": 0, "sleepSite": 0, "sleepSite_states": {}}
    with open(path) as f:
        for line in f:
            fr, n = frames_of(line)
            if fr is None:
                continue
            s["all"] += n
            if any("QueuedThreadPool" in x for x in fr):
                s["pool"] += n
            if "OffCpuServer.sleepSite" in fr:
                s["sleepSite"] += n
                st = fr[0] if fr[0].startswith("[") else "-"
                s["sleepSite_states"][st] = s["sleepSite_states"].get(st, 0) + n
    return s


def lock_sums(path):
    """Lock wait (the collapsed counter: ns with `total`) per site and leaf class."""
    s = {"monitor": 0, "monitor_obj": 0, "lock": 0, "lock_rl": 0, "other": 0}
    with open(path) as f:
        for line in f:
            fr, n = frames_of(line)
            if fr is None:
                continue
            leaf = fr[-1]
            if "OffCpuServer.monitorSite" in fr:
                s["monitor"] += n
                s["monitor_obj"] += n if leaf == "java.lang.Object" else 0
            elif "OffCpuServer.lockSite" in fr:
                s["lock"] += n
                s["lock_rl"] += n if leaf == "java.util.concurrent.locks.ReentrantLock$NonfairSync" else 0
            else:
                s["other"] += n
    return s


def http_get(port, path, timeout=30):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        return r.read().decode()


def wrk(port, path, threads, conns, secs):
    p = subprocess.run(["wrk", f"-t{threads}", f"-c{conns}", f"-d{secs}s", "--timeout", "10s",
                        f"http://127.0.0.1:{port}{path}"], capture_output=True, text=True, timeout=secs + 60)
    m = re.search(r"Requests/sec:\s+([\d.]+)", p.stdout)
    if p.returncode != 0 or not m:
        raise RuntimeError(f"wrk failed: rc={p.returncode} {p.stdout[-400:]} {p.stderr[-400:]}")
    errs = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: .*", p.stdout)
    return float(m.group(1)), (errs.group(0) if errs else "")


def stop(p, timeout=90):
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
        try:
            return p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            return p.wait()


def summary(err, what):
    m = re.search(rf"{what} summary: (.*)", err)
    return dict(kv.split("=", 1) for kv in m.group(1).split() if "=" in kv) if m else {}


def run_one(scenario, arm, tag, args, classes, out):
    path, conns, arms = SCENARIOS[scenario]
    conns = args.connections or conns
    base = os.path.join(out, tag)
    opt = arms[arm]
    prof = [opt(base + ".collapsed")] if opt else []
    cp = ":".join([classes] + [os.path.join(JETTY, j) for j in JARS])
    cmd = ["java", *prof, "-cp", cp, "OffCpuServer", "0", str(args.threads)]
    errf = open(base + ".stderr", "w")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errf, text=True)
    PROCS.append(p)
    try:
        got = []  # wait for READY on stdout, in a thread, to time out

        def ready():
            for line in p.stdout:
                got.append(line)
                if line.startswith("READY"):
                    return
        t = threading.Thread(target=ready, daemon=True)
        t.start()
        t.join(60)
        m = re.match(r"READY port=(\d+)", got[-1]) if got else None
        if not m:
            raise RuntimeError(f"server did not start (rc={p.poll()}); see {base}.stderr")
        port = int(m.group(1))
        wrk(port, path, args.wrk_threads, conns, args.warmup)
        rps, errs = wrk(port, path, args.wrk_threads, conns, args.duration)
        truth = json.loads(http_get(port, "/truth"))
        try:
            http_get(port, "/quit")
        except OSError:
            pass
        rest = p.stdout.read()
        rc = stop(p)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        PROCS.remove(p)
        errf.close()
    with open(base + ".stdout", "w") as f:
        f.write(rest)
    if rc != 0:
        raise RuntimeError(f"JVM exit status {rc}; see {base}.stderr")
    err = open(base + ".stderr").read()
    r = {"scenario": scenario, "arm": arm, "tag": tag, "rps": rps, "wrk_errors": errs, "truth": truth,
         "cmd": " ".join(cmd), "summary": summary(err, scenario), "est": None}
    if opt:
        if not os.path.exists(base + ".collapsed"):
            raise RuntimeError(f"no profile written: {base}.collapsed")
        r["est"] = (wall_sums if scenario == "wall" else lock_sums)(base + ".collapsed")
    return r


def fmt_ratio(a, b):
    return f"{a / b:.3f}" if b else "—"


def run_row(r):
    t, e, s = r["truth"], r["est"], r["summary"]
    if r["scenario"] == "wall":
        cells = "— | — | —"
        if e:
            est_ns = e["sleepSite"] * WALL_INTERVAL_NS
            cells = (f"{est_ns / 1e9:.1f} / {t['sleep_ns'] / 1e9:.1f} | {fmt_ratio(est_ns, t['sleep_ns'])} | "
                     f"{100 * e['sleepSite'] / max(e['pool'], 1):.1f}%")
        ctr = " ".join(f"{k}={s[k]}" for k in WALL_FIELDS if k in s) or "—"
        return f"| wall | {r['arm']} | {r['round']} | {r['rps']:.0f} | {cells} | {ctr} |"
    cells = "— | — | — | —"
    if e:
        cells = (f"{e['monitor'] / 1e9:.1f} / {t['monitor_wait_ns'] / 1e9:.1f} | {fmt_ratio(e['monitor'], t['monitor_wait_ns'])} | "
                 f"{e['lock'] / 1e9:.1f} / {t['lock_wait_ns'] / 1e9:.1f} | {fmt_ratio(e['lock'], t['lock_wait_ns'])}")
    ctr = " ".join(f"{k}={s[k]}" for k in LOCK_FIELDS if k in s) or "—"
    return (f"| lock | {r['arm']} | {r['round']} | {r['rps']:.0f} | {cells} | "
            f"{t['monitor_slow']}/{t['monitor_acq']} {t['lock_slow']}/{t['lock_acq']} | {ctr} |")


HEADERS = {
    "wall": ("| scenario | arm | round | req/s | sleepSite est / true (s) | est/true | sleepSite share of pool wall "
             "| oxprof wall summary |\n|---|---|---|---|---|---|---|---|"),
    "lock": ("| scenario | arm | round | req/s | monitorSite est / true (s) | est/true | lockSite est / true (s) | est/true "
             "| contended/all acq. (monitor, lock) | oxprof lock summary |\n|---|---|---|---|---|---|---|---|---|---|"),
}


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def summary_tables(results, scenarios):
    out = []
    for sc in scenarios:
        rs = [r for r in results if r["scenario"] == sc]
        if not rs:
            continue
        arms = list(dict.fromkeys(r["arm"] for r in rs))
        base = med([r["rps"] for r in rs if r["arm"] == "none"])
        out.append(f"\n### {sc}: median over rounds\n")
        if sc == "wall":
            out.append("| arm | runs | req/s median | min–max | spread | ratio to none | sleepSite est/true median "
                       "| sleepSite share of pool wall | handler_ns | signalled | reused | deferred | sampler ns/thread-tick |")
            out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        else:
            out.append("| arm | runs | req/s median | min–max | spread | ratio to none | monitorSite est/true | of it leaf "
                       "java.lang.Object | lockSite est/true | of it leaf ReentrantLock$NonfairSync | record_ns | monitor_waits "
                       "(recorded) | parks (recorded) |")
            out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for arm in arms:
            xs = [r for r in rs if r["arm"] == arm]
            rps = [r["rps"] for r in xs]
            m = med(rps)
            head = (f"| {arm} | {len(xs)} | {m:.0f} | {min(rps):.0f}–{max(rps):.0f} | {100 * (max(rps) - min(rps)) / m:.0f}% "
                    f"| {m / base:.3f} |")

            def sm(k):
                v = [float(r["summary"][k]) for r in xs if k in r["summary"] and r["summary"][k] not in ("n/a",)]
                return f"{med(v):.0f}" if v else "—"
            ests = [r for r in xs if r["est"]]
            if sc == "wall":
                if ests:
                    ratio = med([r["est"]["sleepSite"] * WALL_INTERVAL_NS / r["truth"]["sleep_ns"] for r in ests])
                    share = med([r["est"]["sleepSite"] / max(r["est"]["pool"], 1) for r in ests])
                    cells = f"{ratio:.3f} | {100 * share:.1f}%"
                else:
                    cells = "— | —"
                out.append(f"{head} {cells} | {sm('handler_ns')} | {sm('signalled')} | {sm('reused')} | {sm('deferred')} "
                           f"| {sm('sampler_ns_per_thread_tick')} |")
            else:
                if ests:
                    mr = med([r["est"]["monitor"] / r["truth"]["monitor_wait_ns"] for r in ests])
                    mo = med([r["est"]["monitor_obj"] / max(r["est"]["monitor"], 1) for r in ests])
                    lr = med([r["est"]["lock"] / r["truth"]["lock_wait_ns"] for r in ests])
                    lo = med([r["est"]["lock_rl"] / max(r["est"]["lock"], 1) for r in ests])
                    cells = f"{mr:.3f} | {100 * mo:.1f}% | {lr:.3f} | {100 * lo:.1f}%"
                else:
                    cells = "— | — | — | —"
                out.append(f"{head} {cells} | {sm('record_ns')} | {sm('monitor_waits')} ({sm('monitor_recorded')}) "
                           f"| {sm('parks')} ({sm('park_recorded')}) |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default="wall,lock")
    ap.add_argument("--arms", default="none,oxprof,oxprof-lock0,asprof",
                    help="subset of none,oxprof,oxprof-lock0,asprof (oxprof-lock0: lock scenario only)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--duration", type=int, default=15, help="measured wrk seconds")
    ap.add_argument("--warmup", type=int, default=5, help="warm-up wrk seconds (profiled, not measured)")
    ap.add_argument("--connections", type=int, default=0, help="override wrk -c (default: wall 200, lock 64)")
    ap.add_argument("--wrk-threads", type=int, default=2)
    ap.add_argument("--threads", type=int, default=200, help="Jetty pool threads")
    ap.add_argument("--quick", action="store_true", help="1 round, 5 s + 2 s warm-up")
    ap.add_argument("--out", help="also append the tables and raw JSON path here")
    ap.add_argument("--keep", help="folder for the profiles (default: a new temp folder)")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.duration, args.warmup = 1, 5, 2
    scenarios = args.scenarios.split(",")
    want = args.arms.split(",")
    for sc in scenarios:
        if sc not in SCENARIOS:
            die(f"unknown scenario {sc}")
    check_prereqs(want)
    out = args.keep or tempfile.mkdtemp(prefix="jetty_offcpu.")
    os.makedirs(out, exist_ok=True)
    classes = os.path.join(out, "classes")
    subprocess.run(["javac", "--release", "17", "-cp", ":".join(os.path.join(JETTY, j) for j in JARS),
                    "-d", classes, os.path.join(HERE, "OffCpuServer.java")], check=True)
    results = []
    lines = []
    for sc in scenarios:
        arms = [a for a in SCENARIOS[sc][2] if a in want]
        print(f"\n## scenario {sc}: GET {SCENARIOS[sc][0]}, wrk -t{args.wrk_threads} "
              f"-c{args.connections or SCENARIOS[sc][1]} -d{args.duration}s after {args.warmup} s warm-up, "
              f"{args.threads} pool threads\n", flush=True)
        print(HEADERS[sc], flush=True)
        lines += ["", HEADERS[sc]]
        for rnd in range(1, args.rounds + 1):
            order = arms if rnd % 2 else list(reversed(arms))  # alternate the arms' order per round
            for arm in order:
                tag = f"{sc}-{arm}-{rnd}"
                try:
                    r = run_one(sc, arm, tag, args, classes, out)
                except Exception as e:  # one failed run must not lose the others
                    msg = f"| {sc} | {arm} | {rnd} | FAILED: {str(e)[:300]} |"
                    print(msg, flush=True)
                    lines.append(msg)
                    continue
                r["round"] = rnd
                results.append(r)
                lines.append(run_row(r))
                print(lines[-1], flush=True)
                with open(os.path.join(out, "results.json"), "w") as f:
                    json.dump(results, f, indent=1)
    tables = summary_tables(results, scenarios)
    print(tables)
    print("\ncommands:")
    for r in results:
        if r["round"] == 1:
            print(f"  {r['scenario']} {r['arm']}: {r['cmd']}")
    print(f"\n(profiles, logs and results.json in {out})")
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n".join(lines) + "\n" + tables + f"\n\n(raw: {out}/results.json)\n")


def cleanup(*_):
    for p in list(PROCS):
        if p.poll() is None:
            p.kill()
    sys.exit(1)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, cleanup)
    try:
        main()
    except KeyboardInterrupt:
        cleanup()
    finally:
        for p in list(PROCS):
            if p.poll() is None:
                p.kill()
