#!/usr/bin/env python3
"""What an operator sees attaching oxprof again and again to a busy server.

Embedded Jetty 9 runs HashServer (bench/operator): every request hashes a
buffer with SHA-256 under HashServer.doGet, the program's only caller of
MessageDigest. wrk loads it on loopback. The script then alternates, for
ATTACHES rounds, a plain window (wrk alone for DURATION) and an attached
window (wrk for DURATION while `oxprof attach PID --duration DURATION`
writes a profile: collapsed, or JFR converted to collapsed with `oxprof
convert` every other round), in swapped order every other round.

It reports:
  - attaches that failed or printed an error or warning, JVM crashes
    (hs_err files, the JVM's exit status after GET /quit);
  - throughput: median requests/s of the attached windows over the plain ones;
  - from each profile, the CPU samples inside SHA-256 (sun.security.provider
    .SHA2 / DigestBase) and how many of them sit under HashServer.doGet (the
    truth: all), the rest split into marked stacks (a `[...]` marker frame
    says frames were lost) and unmarked ones (frames lost silently: the
    defect an operator reported as a second Thread.run tower);
  - samples whose root is not a thread's first frame.

Usage: bench/operator/attach20.py [--attaches 20] [--duration 4] [--interval 10ms]
                                  [--connections 16] [--keep DIR]
Needs: apt-get install libjetty9-java libservlet-api-java wrk; javac.
Env:   OXPROF (default target/release/oxprof), JETTY_JARS (default /usr/share/java)
"""
import argparse
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OXPROF = os.environ.get("OXPROF", os.path.join(ROOT, "target/release/oxprof"))
JETTY = os.environ.get("JETTY_JARS", "/usr/share/java")
JARS = [f"jetty9-{m}.jar" for m in ("server", "servlet", "http", "io", "util", "security")] + ["servlet-api.jar"]
SHA = ("sun.security.provider.SHA2", "sun.security.provider.DigestBase")
# First frames of a thread's stack: Java threads start in Thread.run (runWith
# on 21+) or a main method; JVM-internal threads are named by a [bracketed] frame.
ROOTS = re.compile(r"^(java\.lang\.Thread\.(run|runWith)|[\w$.]+\.main|\[.*\]|start_thread|clone3?|_start|thread_native_entry)")


def wrk(port, seconds, connections):
    o = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", f"http://127.0.0.1:{port}/h"], capture_output=True, text=True)
    m = re.search(r"Requests/sec:\s+([\d.]+)", o.stdout)
    if not m:
        sys.exit(f"wrk failed: {o.stdout}{o.stderr}")
    return float(m.group(1))


def read_collapsed(path):
    stacks = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, n = line.rpartition(" ")
            stacks.append((stack.split(";"), int(n)))
    return stacks


def analyse(stacks):
    r = {"samples": 0, "sha": 0, "sha_under_doget": 0, "sha_marked": 0, "sha_lost": 0, "unrooted": 0}
    lost_examples = []
    for frames, n in stacks:
        r["samples"] += n
        # Labels and thread states are roots of their own ([state=...]); skip them.
        body = [f for f in frames if not re.match(r"^\[(\w+)=", f)]
        if body and not ROOTS.match(body[0]):
            r["unrooted"] += n
            lost_examples.append(("unrooted", n, frames))
        if any(f.startswith(SHA) for f in frames):
            r["sha"] += n
            if "HashServer.doGet" in frames:
                r["sha_under_doget"] += n
            elif any(f.startswith("[") and f.endswith("]") and "=" not in f for f in frames):
                r["sha_marked"] += n
            else:
                r["sha_lost"] += n
                lost_examples.append(("sha", n, frames))
    return r, lost_examples


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attaches", type=int, default=20)
    ap.add_argument("--duration", type=int, default=4, help="seconds per window")
    ap.add_argument("--interval", default="10ms")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--keep", help="keep the profiles in this directory")
    args = ap.parse_args()
    for tool in ("java", "javac", "wrk"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found (see Needs: in --help)")
    missing = [j for j in JARS if not os.path.exists(os.path.join(JETTY, j))]
    if missing:
        sys.exit(f"Jetty jars missing in {JETTY}: {', '.join(missing)} (apt-get install libjetty9-java libservlet-api-java)")
    work = args.keep or tempfile.mkdtemp(prefix="oxprof-operator-")
    os.makedirs(work, exist_ok=True)
    classes = os.path.join(work, "classes")
    cp = ":".join(os.path.join(JETTY, j) for j in JARS)
    subprocess.run(["javac", "--release", "11", "-cp", cp, "-d", classes, os.path.join(HERE, "HashServer.java")], check=True)
    server = subprocess.Popen(["java", "-cp", f"{classes}:{cp}", "HashServer"], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    m = re.match(r"READY port=(\d+)", line)
    if not m:
        server.kill()
        sys.exit(f"the server did not start: {line}{server.stderr.read()}")
    port = int(m.group(1))
    jvm_err = []
    threading.Thread(target=lambda: jvm_err.extend(server.stderr), daemon=True).start()
    print(f"server pid {server.pid} port {port}; warm-up 10 s", flush=True)
    wrk(port, 10, args.connections)

    plain, attached, problems, totals = [], [], [], {}
    examples = []
    for i in range(args.attaches):
        fmt = "jfr" if i % 2 else "collapsed"
        out = os.path.join(work, f"attach-{i:02}.{fmt}")
        order = ["plain", "attached"] if i % 2 == 0 else ["attached", "plain"]
        for arm in order:
            if arm == "plain":
                plain.append(wrk(port, args.duration, args.connections))
                continue
            cmd = [OXPROF, "attach", str(server.pid), "--duration", f"{args.duration}s", "--interval", args.interval, "-o", out]
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            attached.append(wrk(port, args.duration, args.connections))
            so, se = p.communicate(timeout=120)
            said = [l for l in (so + se).splitlines() if re.search(r"error|warn|panic", l, re.I)]
            if p.returncode != 0 or said:
                problems.append(f"attach {i}: exit {p.returncode}: {' | '.join(said) or se.strip()}")
        if fmt == "jfr":
            conv = out[:-4] + ".collapsed"
            c = subprocess.run([OXPROF, "convert", out, "-o", conv], capture_output=True, text=True)
            if c.returncode != 0:
                problems.append(f"convert {i}: exit {c.returncode}: {c.stderr.strip()}")
                continue
            out = conv
        if not os.path.exists(out):
            problems.append(f"attach {i}: no profile at {out}")
            continue
        r, ex = analyse(read_collapsed(out))
        examples.extend(ex)
        for k, v in r.items():
            totals[k] = totals.get(k, 0) + v
        print(f"  attach {i + 1:2}/{args.attaches} {fmt:9} samples {r['samples']:6}  SHA-256 {r['sha']:5}, under doGet {r['sha_under_doget']:5}, "
              f"marked {r['sha_marked']}, lost {r['sha_lost']}; unrooted {r['unrooted']}", flush=True)
        if server.poll() is not None:
            problems.append(f"the JVM died after attach {i} (exit {server.returncode})")
            break
    alive = server.poll() is None
    if alive:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/quit", timeout=10).read()
        except Exception:
            pass
    try:
        rc = server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        rc = "hung at exit"
    crashes = glob.glob(os.path.join(work, "hs_err*"))
    print()
    print(f"attaches: {len(attached)} of {args.attaches}, problems: {len(problems)}")
    for p in problems:
        print("  " + p)
    print(f"JVM exit after /quit: {rc}; hs_err files: {len(crashes)}")
    for l in jvm_err:
        if re.search(r"error|warn|exception", l, re.I):
            print("  jvm: " + l.rstrip())
    if plain and attached:
        ratio = statistics.median(attached) / statistics.median(plain)
        print(f"throughput: plain median {statistics.median(plain):.0f} req/s, attached {statistics.median(attached):.0f} req/s: {100 * (ratio - 1):+.1f}%")
    if totals:
        sha = max(totals["sha"], 1)
        print(f"SHA-256 samples: {totals['sha']}, under HashServer.doGet {100 * totals['sha_under_doget'] / sha:.2f}%, "
              f"marked {totals['sha_marked']}, lost unmarked {totals['sha_lost']}; unrooted samples {totals['unrooted']} of {totals['samples']}")
    for kind, n, frames in sorted(examples, key=lambda e: -e[1])[:5]:
        print(f"  {kind} {n}: {';'.join(frames[:4])} ... {';'.join(frames[-3:])}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
