#!/usr/bin/env python3
"""What a misbehaving profile store costs the JVM's own work.

Runs bench/fleet/Work.java (fixed CPU and allocation work on two threads,
timing itself) under `start,event=cpu,alloc,loop=2s,file=...` with the
intervals pushed (OTLP) to a loopback store (crates/cli/tests/py/store.py)
that answers in one of several ways, arms alternating round by round:

  files     no upload at all (the baseline)
  ok        the store takes every payload
  down      nothing listens on the port (connection refused)
  hang      the store accepts and never answers (upload_timeout=2s)
  throttle  the store answers 429 with Retry-After: 1
  error     the store answers 503 (retried with backoff)

Prints per arm the median of the program's own elapsed time and its ratio to
the `files` arm (the target: within 2%), plus the number of intervals written
to disk per run (every arm must write all of them).

Usage: bench/fleet/upload_cost.py [--rounds 5] [--work 400]
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STORE = os.path.join(ROOT, "crates/cli/tests/py/store.py")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--work", type=int, default=400, help="rounds of work in Work.java (about 10 s here)")
    ap.add_argument("--arms", default="files,ok,down,hang,throttle,error")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="oxprof-upload-cost-")
    agent = os.path.join(tmp, "liboxprof.so")
    shutil.copy(os.path.join(ROOT, "target/release/liboxprof.so"), agent)
    subprocess.run(["javac", "-d", tmp, os.path.join(os.path.dirname(os.path.abspath(__file__)), "Work.java")], check=True)
    store_dir = os.path.join(tmp, "store")
    os.makedirs(store_dir)
    store = subprocess.Popen(["python3", STORE, "serve", store_dir])
    while not os.path.exists(os.path.join(store_dir, "port")):
        time.sleep(0.05)
    port = int(open(os.path.join(store_dir, "port")).read())
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead_port = s.getsockname()[1]
    s.close()
    arms = a.arms.split(",")
    results = {arm: [] for arm in arms}
    files = {arm: [] for arm in arms}
    modes = {"ok": "ok", "hang": "hang", "throttle": "429:1", "error": "500"}
    try:
        for r in range(a.rounds):
            for arm in arms:
                out = os.path.join(tmp, f"{arm}-{r}")
                os.makedirs(out)
                opts = f"start,event=cpu,alloc,loop=2s,file={out}/iv-%n.pb.gz"
                if arm in modes:
                    open(os.path.join(store_dir, "mode"), "w").write(modes[arm])
                    opts += f",upload=http://127.0.0.1:{port},format=otlp,upload_timeout=2s"
                    if arm == "error":
                        opts = opts.replace("format=otlp", "format=pyroscope")  # OTLP does not retry 500; Pyroscope does
                elif arm == "down":
                    opts += f",upload=http://127.0.0.1:{dead_port},format=otlp"
                o = subprocess.run(["java", f"-agentpath:{agent}={opts}", "-cp", tmp, "Work", str(a.work)], capture_output=True, text=True)
                ms = next((int(l.split()[1]) for l in o.stdout.splitlines() if l.startswith("ELAPSED_MS")), None)
                if o.returncode != 0 or ms is None:
                    sys.exit(f"{arm} round {r} failed: {o.stderr[-500:]}")
                results[arm].append(ms)
                files[arm].append(len([f for f in os.listdir(out) if not ".alloc." in f]))
                print(f"round {r} {arm:9s} {ms} ms, {files[arm][-1]} intervals on disk", flush=True)
    finally:
        store.kill()
    base = statistics.median(results["files"]) if "files" in results else None
    print()
    print("| arm | median work time (ms) | vs files only | intervals on disk per run |")
    print("|---|---|---|---|")
    for arm in arms:
        m = statistics.median(results[arm])
        ratio = f"{m / base:.3f}" if base else "-"
        print(f"| {arm} | {m:.0f} ({min(results[arm])}–{max(results[arm])}) | {ratio} | {min(files[arm])}–{max(files[arm])} |")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
