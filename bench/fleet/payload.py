#!/usr/bin/env python3
"""Sized for a fleet (issue 26): what one JVM pushes per interval, and what it costs.

10,000 JVMs pushing every 10 s must not drown the store or the network. For
each workload (javac, an embedded H2 database, a Jetty servlet under wrk) this
runs the JVM under continuous profiling with CPU and allocation sampling at the
default intervals (CPU 10 ms, allocations 512 KiB), pushing every 10 s to a
loopback profile store (crates/cli/tests/py/store.py), and reports per interval:

  - the OTLP request (one per interval, every profile) as sent (gzip) and raw;
  - the pprof files of the same intervals, one per kind (CPU, allocations);
  - the CPU time of the agent's oxprof-loop (cuts intervals: builds profiles,
    writes files, encodes OTLP) and oxprof-upload (compresses, sends) threads,
    read from /proc/PID/task/TID/stat every 0.25 s while the JVM runs (the last
    values before it exits), divided by the JVM's wall time: "% of a core".

Targets: at most 50 KiB compressed per interval for cpu+alloc, at most 0.1% of
a core for encoding and upload. The first and last interval are partial
(startup, exit) and are left out of the medians; the first is shown apart.

Arms (--arms):
  otlp        start,event=cpu,alloc,loop=10s,file=DIR/iv-%n.pb.gz,upload=URL,format=otlp,service=W
              (sizes of both; the loop thread also writes the two pprof files)
  otlp-only   the same without file=: only what a fleet deployment would run,
              so its CPU figure is the one to hold against the target
  otlp-nocstack  otlp-only with cstack=no (Java frames only, no native/JVM
              frames): what the native frames cost in bytes and CPU
  pyroscope   start,event=cpu,alloc,loop=10s,file=DIR/iv-%n.jfr,upload=URL,format=pyroscope,service=W
              (the interval's JFR file is the body; oxprof-jfr writes it)
  pyroscope-pprof  the same without file=: one gzip pprof body per kind and
              interval (the sizes of an interval's requests are summed)

Usage:
  bench/fleet/payload.py [--workloads javac,h2,jetty] [--arms otlp,otlp-only,otlp-nocstack,pyroscope]
                         [--seconds 80] [--perf] [--loop 10s] [--extra-opts OPTS]
                         [--out results.md] [--keep DIR] [--report-only DIR]
Needs:  bench/setup.sh (the javac sources); apt-get install --no-install-recommends
        libh2-java libjetty9-java libservlet-api-java wrk; python3 with
        opentelemetry-proto (for the payload breakdown); a built agent
        (target/release/liboxprof.so, or OXPROF_AGENT). --perf needs perf.
"""
import argparse
import gzip
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WORK = os.path.join(ROOT, "bench", "work")
AGENT = os.environ.get("OXPROF_AGENT", os.path.join(ROOT, "target", "release", "liboxprof.so"))
STORE = os.path.join(ROOT, "crates", "cli", "tests", "py", "store.py")
JAVA_SHARE = os.environ.get("JAVA_JARS", "/usr/share/java")
JETTY_JARS = [f"jetty9-{m}.jar" for m in ("server", "servlet", "http", "io", "util", "security")] + ["servlet-api.jar"]
H2_JAR = "h2.jar"
TICK = os.sysconf("SC_CLK_TCK")
KIB = 1024.0
TARGET_BYTES = 50 * 1024
TARGET_CORE_PCT = 0.1
ARMS = ("otlp", "otlp-only", "otlp-nocstack", "pyroscope", "pyroscope-pprof")
PROCS = []


def die(msg):
    sys.exit(f"payload.py: {msg}")


# --------------------------------------------------------------------------- /proc
def proc_ticks(path):
    """utime+stime (clock ticks) of a /proc/.../stat file, or None."""
    try:
        with open(path) as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return int(rest[11]) + int(rest[12])
    except (OSError, IndexError, ValueError):
        return None


def busy_seconds():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)) / TICK


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def sched_ns(path):
    """Run time in ns (the first field of /proc/.../schedstat: exact, where
    utime+stime are charged a whole tick at a time), or None."""
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, IndexError, ValueError):
        return None


class ThreadPoller(threading.Thread):
    """Keeps the last CPU time of every oxprof-* thread of a process (by tid;
    utime+stime ticks and schedstat ns) and of the whole process, reading
    /proc every `period` s until stopped or the process is gone, and the
    series of oxprof-loop/-upload/-jfr run times (for the cost per cut)."""

    SERIES = ("oxprof-loop", "oxprof-upload", "oxprof-jfr")

    def __init__(self, pid, period=0.25):
        super().__init__(daemon=True)
        self.pid, self.period = pid, period
        self.t0 = time.monotonic()
        self.comm = {}      # tid -> (name, times read)
        self.ticks = {}     # tid -> last utime+stime of an oxprof thread
        self.ns = {}        # tid -> last schedstat run time (ns) of an oxprof thread
        self.series = {n: [] for n in self.SERIES}  # name -> [(seconds since start, ns)]
        self.proc_ticks = 0
        self.halt = threading.Event()

    def sample(self):
        base = f"/proc/{self.pid}/task"
        try:
            tids = os.listdir(base)
        except OSError:
            return False
        for tid in tids:
            name, seen = self.comm.get(tid, ("", 0))
            if seen < 3:  # a new thread may not have its name yet: read it a few times
                try:
                    with open(f"{base}/{tid}/comm") as f:
                        name = f.read().strip()
                except OSError:
                    continue
                self.comm[tid] = (name, seen + 1)
            if name.startswith("oxprof"):
                t = proc_ticks(f"{base}/{tid}/stat")
                if t is not None:
                    self.ticks[tid] = t
                ns = sched_ns(f"{base}/{tid}/schedstat")
                if ns is not None:
                    self.ns[tid] = ns
        now = time.monotonic() - self.t0
        for n in self.SERIES:
            tids = [tid for tid in self.ns if self.comm[tid][0] == n]
            if tids:
                self.series[n].append((now, sum(self.ns[tid] for tid in tids)))
        t = proc_ticks(f"/proc/{self.pid}/stat")
        if t is not None:
            self.proc_ticks = t
        return True

    def run(self):
        while not self.halt.is_set() and self.sample():
            self.halt.wait(self.period)

    def by_name(self):
        """CPU seconds per thread name (threads of one name summed): from
        utime+stime ticks, and from schedstat."""
        ticks, exact = {}, {}
        for tid, t in self.ticks.items():
            name = self.comm[tid][0]
            ticks[name] = ticks.get(name, 0.0) + t / TICK
        for tid, ns in self.ns.items():
            name = self.comm[tid][0]
            exact[name] = exact.get(name, 0.0) + ns / 1e9
        return ticks, exact

    def per_cut(self, every=10.0):
        """Run time (ms) of each SERIES thread around each interval boundary
        (k * every s after the JVM started, k = 1, 2, ...): the increments
        between polls, each given to the nearest boundary."""
        out = {}
        for n, pts in self.series.items():
            if not pts:
                continue
            cuts = {}
            prev_t, prev = 0.0, 0
            for t, ns in pts:
                k = max(1, round(((prev_t + t) / 2) / every))
                cuts[k] = cuts.get(k, 0) + (ns - prev)
                prev_t, prev = t, ns
            out[n] = [round(cuts.get(k, 0) / 1e6, 1) for k in range(1, max(cuts) + 1)]
        return out


# --------------------------------------------------------------------------- workloads
def javac_workload(args, run_dir, classes):
    lst = os.path.join(WORK, "javac-java.xml.list")
    src = os.path.join(WORK, "jdk-src", "java.xml")
    out = os.path.join(run_dir, "javac-out")
    # As bench/run.py runs it: the `javac` launcher, but through `java`.
    argv = ["java", "@AGENT@", "-m", "jdk.compiler/com.sun.tools.javac.Main", "-d", out, "-nowarn",
            "-XDignore.symbol.file", "--patch-module", f"java.xml={src}", "@" + lst]

    def drive(p, log):
        return None

    def check(stdout):
        n = sum(sum(1 for f in files if f.endswith(".class")) for _, _, files in os.walk(out))
        return None if n > 1000 else f"javac produced only {n} .class files"

    return argv, drive, check, 1800


def h2_workload(args, run_dir, classes):
    cp = classes + ":" + os.path.join(JAVA_SHARE, H2_JAR)
    argv = ["java", "@AGENT@", "-cp", cp, "H2Work", str(args.seconds), str(args.h2_threads)]

    def drive(p, log):
        return None

    def check(stdout):
        return None if "H2Work: ops=" in stdout else "H2Work printed no result line"

    return argv, drive, check, args.seconds + 300


def jetty_workload(args, run_dir, classes):
    cp = ":".join([classes] + [os.path.join(JAVA_SHARE, j) for j in JETTY_JARS])
    argv = ["java", "@AGENT@", "-cp", cp, "AllocServer", "0", "200"]

    def drive(p, log):
        # Reads stdout for READY, loads the server with wrk for --seconds, then /quit.
        got = []

        def ready():
            for line in p.stdout:
                got.append(line)
                if line.startswith("READY"):
                    return
        t = threading.Thread(target=ready, daemon=True)
        t.start()
        t.join(120)
        m = re.match(r"READY port=(\d+)", got[-1]) if got else None
        if not m:
            raise RuntimeError(f"Jetty did not start (rc={p.poll()})")
        port = int(m.group(1))
        w = subprocess.run(["wrk", "-t1", f"-c{args.connections}", f"-d{args.seconds}s", "--timeout", "10s",
                            f"http://127.0.0.1:{port}/"], capture_output=True, text=True, timeout=args.seconds + 120)
        log.write(w.stdout)
        rps = re.search(r"Requests/sec:\s+([\d.]+)", w.stdout)
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/quit", timeout=30).read()
        except OSError:
            pass
        return {"wrk_rps": float(rps.group(1)) if rps else None}

    def check(stdout):
        return None if "TRUTH" in stdout else "AllocServer did not quit cleanly (no TRUTH line)"

    return argv, drive, check, args.seconds + 300


WORKLOADS = {"javac": javac_workload, "h2": h2_workload, "jetty": jetty_workload}


def compile_classes(names, out):
    classes = os.path.join(out, "classes")
    os.makedirs(classes, exist_ok=True)
    if "h2" in names:
        subprocess.run(["javac", "--release", "17", "-d", classes, os.path.join(HERE, "H2Work.java")], check=True)
    if "jetty" in names:
        subprocess.run(["javac", "--release", "17", "-cp", ":".join(os.path.join(JAVA_SHARE, j) for j in JETTY_JARS),
                        "-d", classes, os.path.join(ROOT, "bench", "alloc_bias", "jetty", "AllocServer.java")], check=True)
    return classes


def check_prereqs(names, arms, want_perf):
    if not os.path.isfile(AGENT):
        die(f"agent {AGENT} missing (cargo build --release, or set OXPROF_AGENT)")
    for tool in ("java", "javac") + (("wrk",) if "jetty" in names else ()) + (("perf",) if want_perf else ()):
        if not shutil.which(tool):
            die(f"{tool} not found on PATH")
    if "javac" in names and not os.path.exists(os.path.join(WORK, "javac-java.xml.list")):
        die("javac workload not prepared: run bench/setup.sh")
    if "h2" in names and not os.path.exists(os.path.join(JAVA_SHARE, H2_JAR)):
        die(f"{JAVA_SHARE}/{H2_JAR} missing (apt-get install --no-install-recommends libh2-java)")
    if "jetty" in names:
        missing = [j for j in JETTY_JARS if not os.path.exists(os.path.join(JAVA_SHARE, j))]
        if missing:
            die(f"Jetty jars missing: {', '.join(missing)} (apt-get install --no-install-recommends libjetty9-java libservlet-api-java)")
    for a in arms:
        if a not in ARMS:
            die(f"unknown arm '{a}' (accepted: {', '.join(ARMS)})")


# --------------------------------------------------------------------------- one run
def start_store(d):
    os.makedirs(d, exist_ok=True)
    p = subprocess.Popen([sys.executable, STORE, "serve", d], stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "stderr"), "w"))
    PROCS.append(p)
    for _ in range(100):
        if os.path.exists(os.path.join(d, "port")):
            return p, int(open(os.path.join(d, "port")).read())
        time.sleep(0.05)
    die("the loopback store did not start")


def agent_options(arm, workload, run_dir, port, loop="10s"):
    iv = os.path.join(run_dir, "iv")
    os.makedirs(iv, exist_ok=True)
    url = f"upload=http://127.0.0.1:{port}"
    if arm == "otlp":
        return f"start,event=cpu,alloc,loop={loop},file={iv}/iv-%n.pb.gz,{url},format=otlp,service={workload}"
    if arm == "otlp-only":
        return f"start,event=cpu,alloc,loop={loop},{url},format=otlp,service={workload}"
    if arm == "otlp-nocstack":
        return f"start,event=cpu,alloc,loop={loop},{url},format=otlp,service={workload},cstack=no"
    if arm == "pyroscope-pprof":
        return f"start,event=cpu,alloc,loop={loop},{url},format=pyroscope,service={workload}"
    return f"start,event=cpu,alloc,loop={loop},file={iv}/iv-%n.jfr,{url},format=pyroscope,service={workload}"


def loop_seconds(text):
    m = re.fullmatch(r"(\d+)(s|m)", text)
    if not m:
        die(f"--loop takes seconds or minutes such as 10s or 1m, not '{text}'")
    return int(m.group(1)) * (60 if m.group(2) == "m" else 1)


def child_pid(pid, timeout=10):
    """The first child of `pid` (java under perf)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            kids = open(f"/proc/{pid}/task/{pid}/children").read().split()
            if kids:
                return int(kids[0])
        except OSError:
            pass
        time.sleep(0.01)
    return pid


def run_one(args, arm, workload, agent, classes, out):
    run_dir = os.path.join(out, f"{workload}-{arm}")
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    store_dir = os.path.join(run_dir, "store")
    store, port = start_store(store_dir)
    argv, drive, check, timeout = WORKLOADS[workload](args, run_dir, classes)
    opts = agent_options(arm, workload, run_dir, port, args.loop) + (f",{args.extra_opts}" if args.extra_opts else "")
    argv = [f"-agentpath:{agent}={opts}" if a == "@AGENT@" else a for a in argv]
    perf_data = os.path.join(run_dir, "perf.data")
    if args.perf:
        argv = ["perf", "record", "-q", "-e", "cpu-clock", "-F", str(args.perf_hz), "-o", perf_data, "--"] + argv
    with open(os.path.join(run_dir, "cmd.txt"), "w") as f:
        f.write(shlex.join(argv) + "\n")
    err = open(os.path.join(run_dir, "stderr"), "w")
    log = open(os.path.join(run_dir, "driver.log"), "w")
    load0, busy0 = loadavg(), busy_seconds()
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True, cwd=run_dir)
    PROCS.append(p)
    jvm = child_pid(p.pid) if args.perf else p.pid
    poller = ThreadPoller(jvm)
    poller.start()
    extra, chunks = {}, []
    try:
        extra = drive(p, log) or {}
        reader = threading.Thread(target=lambda: chunks.append(p.stdout.read()), daemon=True)
        reader.start()
        _, status, ru = wait_timeout(p, timeout)
        reader.join(10)
        stdout = "".join(chunks)
    finally:
        if p.poll() is None and p.returncode is None:
            try:
                p.kill()
            except OSError:
                pass
        poller.halt.set()
        poller.join()
        store.terminate()
        store.wait()
        for q in (p, store):
            if q in PROCS:
                PROCS.remove(q)
        err.close()
        log.close()
    wall = time.monotonic() - t0
    busy1, load1 = busy_seconds(), loadavg()
    with open(os.path.join(run_dir, "stdout"), "w") as f:
        f.write(stdout)
    rc = os.waitstatus_to_exitcode(status) if status is not None else -1
    cpu = ru.ru_utime + ru.ru_stime if ru else None
    r = {"workload": workload, "arm": arm, "dir": run_dir, "cmd": shlex.join(argv), "rc": rc, "wall": wall,
         "jvm_cpu": cpu, "others_cores": (busy1 - busy0 - (cpu or 0)) / wall, "load": f"{load0} -> {load1}",
         "proc_cpu_polled": poller.proc_ticks / TICK, "per_cut_ms": poller.per_cut(loop_seconds(args.loop)),
         "loop_s": loop_seconds(args.loop), **extra}
    r["threads_ticks"], r["threads"] = poller.by_name()
    r["problem"] = (f"exit status {rc}" if rc else None) or check(stdout)
    r.update(collect(arm, run_dir))
    if args.perf and os.path.exists(perf_data):
        r["perf"] = perf_shares(perf_data)
    return r


def wait_timeout(p, timeout):
    end = time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            p.returncode = os.waitstatus_to_exitcode(status)
            return pid, status, ru
        if time.monotonic() > end:
            p.kill()
            pid, status, ru = os.wait4(p.pid, 0)
            p.returncode = -9
            return pid, None, ru
        time.sleep(0.05)


def perf_shares(path):
    """Shares of the process's cpu-clock samples: in liboxprof.so (any thread,
    e.g. the signal handler on application threads), and on oxprof-* threads
    in any object (their kernel time too)."""
    rep = subprocess.run(["perf", "report", "-i", path, "--stdio", "--sort", "comm,dso", "-F", "overhead,comm,dso"],
                         capture_output=True, text=True, timeout=600).stdout
    lib = threads = 0.0
    for line in rep.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S.*?)\s{2,}(\S+)\s*$", line)
        if not m:
            continue
        pct, comm, dso = float(m.group(1)), m.group(2).strip(), m.group(3)
        if comm.startswith("oxprof"):
            threads += pct
        elif dso == "liboxprof.so":
            lib += pct
    return {"lib_other_threads_pct": lib, "oxprof_threads_pct": threads}


# --------------------------------------------------------------------------- sizes
def body_sizes(store_dir):
    """[(n, sent bytes, raw bytes)] of the store's requests, in order; the
    requests of one interval (Pyroscope's pprof bodies, one per kind, share
    their `from=`) are summed into one."""
    out = []
    by_interval = {}
    for name in os.listdir(store_dir):
        m = re.fullmatch(r"req-(\d+)\.body", name)
        if not m:
            continue
        n = int(m.group(1))
        body = open(os.path.join(store_dir, name), "rb").read()
        meta = json.load(open(os.path.join(store_dir, f"req-{n}.json")))
        raw = len(gzip.decompress(body)) if meta["headers"].get("content-encoding") == "gzip" else None
        if raw is None and "multipart" in meta["headers"].get("content-type", ""):
            raw = jfr_part_len(body, meta)
        q = meta.get("query", {})
        if meta.get("path") == "/ingest" and q.get("format") == "pprof" and "from" in q:
            key = q["from"]
            if key in by_interval:
                i = by_interval[key]
                m0, s0, r0 = out[i]
                out[i] = (min(m0, n), s0 + len(body), (r0 or 0) + (raw or 0))
                continue
            by_interval[key] = len(out)
        out.append((n, len(body), raw))
    return sorted(out)


def jfr_part_len(body, meta):
    import email.parser
    import email.policy
    head = f"Content-Type: {meta['headers']['content-type']}\r\n\r\n".encode()
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    for part in msg.iter_parts():
        if part.get_param("name", header="content-disposition") == "jfr":
            data = part.get_payload(decode=True)
            return len(gzip.decompress(data)) if data[:2] == b"\x1f\x8b" else len(data)
    return None


def interval_files(iv_dir, suffix):
    out = {}
    if not os.path.isdir(iv_dir):
        return out
    for name in os.listdir(iv_dir):
        m = re.fullmatch(r"iv-(\d+)" + re.escape(suffix), name)
        if m:
            out[int(m.group(1))] = os.path.getsize(os.path.join(iv_dir, name))
    return out


def otlp_counts(path):
    """(CPU samples, CPU sample rows, allocation sample rows, stacks) of one
    OTLP request (a row is one stack's values), or None."""
    try:
        from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2
    except ImportError:
        return None
    body = open(path, "rb").read()
    req = profiles_service_pb2.ExportProfilesServiceRequest()
    req.ParseFromString(gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body)
    d = req.dictionary
    cpu = cpu_rows = alloc_rows = 0
    for rp in req.resource_profiles:
        for sp in rp.scope_profiles:
            for p in sp.profiles:
                kind = d.string_table[p.sample_type.type_strindex]
                if kind == "samples":
                    cpu += sum(sum(s.values) for s in p.samples)
                    cpu_rows += len(p.samples)
                elif kind == "alloc_objects":
                    alloc_rows += len(p.samples)
    return cpu, cpu_rows, alloc_rows, len(d.stack_table)


def collect(arm, run_dir):
    store = os.path.join(run_dir, "store")
    reqs = body_sizes(store)
    iv = os.path.join(run_dir, "iv")
    r = {"requests": [(s, raw) for _, s, raw in reqs]}
    if arm.startswith("otlp"):
        r["counts"] = [otlp_counts(os.path.join(store, f"req-{n}.body")) for n, _, _ in reqs]
    if arm == "otlp":
        r["cpu_files"] = [v for _, v in sorted(interval_files(iv, ".pb.gz").items())]
        r["alloc_files"] = [v for _, v in sorted(interval_files(iv, ".alloc.pb.gz").items())]
    elif arm == "pyroscope":
        r["jfr_files"] = [v for _, v in sorted(interval_files(iv, ".jfr").items())]
    err = open(os.path.join(run_dir, "stderr"), errors="replace").read()
    m = re.search(r"upload summary: (.*)", err)
    r["upload_summary"] = m.group(1) if m else None
    r["agent_warnings"] = [l for l in err.splitlines() if l.startswith("[oxprof]") and "summary" not in l
                           and re.search(r"error|warn|cannot|\b[1-9]\d* (failed|dropped)|(failed|dropped)=[1-9]", l, re.I)]
    m = re.search(r"\[oxprof\] summary: .*?samples=(\d+)", err)
    r["cpu_samples_summary"] = int(m.group(1)) if m else None
    return r


def middle(xs):
    """The intervals between the first and the last (both partial)."""
    return xs[1:-1] if len(xs) >= 3 else xs


def medmax(xs):
    xs = [x for x in middle(xs) if x is not None]
    return (statistics.median(xs), max(xs)) if xs else (None, None)


def kib(x):
    return "-" if x is None else f"{x / KIB:.1f}"


def mm(xs):
    m, x = medmax(xs)
    return f"{kib(m)} / {kib(x)}"


def counts_cell(r):
    counts = [c for c in middle(r.get("counts") or []) if c]
    if not counts:
        return "-"
    return ", ".join(f"{statistics.median(c[i] for c in counts):.0f}" for i in range(4))


def pct_core(seconds, wall):
    return 100.0 * seconds / wall if wall else None


def encode_threads(r, key="threads"):
    """CPU seconds of the threads that encode and upload: oxprof-loop and
    oxprof-upload (and oxprof-jfr, which writes the JFR recording, in the
    pyroscope arm)."""
    t = r[key]
    names = ["oxprof-loop", "oxprof-upload"] + (["oxprof-jfr"] if r["arm"] == "pyroscope" else [])
    return sum(t.get(n, 0.0) for n in names)


# --------------------------------------------------------------------------- breakdown
def breakdown(body):
    """Where the bytes of one OTLP request go: per dictionary table and per
    profile's samples, raw bytes and gzip -6 of that part alone."""
    from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2
    raw = gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body
    req = profiles_service_pb2.ExportProfilesServiceRequest()
    req.ParseFromString(raw)
    d = req.dictionary
    rows = []
    for f in d.DESCRIPTOR.fields:
        part = type(d)()
        getattr(part, f.name).extend(getattr(d, f.name))
        b = part.SerializeToString()
        rows.append((f"dictionary.{f.name}", len(getattr(d, f.name)), len(b), len(gzip.compress(b, 6))))
    stacks_by_kind = {}
    for rp in req.resource_profiles:
        for sp in rp.scope_profiles:
            for p in sp.profiles:
                kind = d.string_table[p.sample_type.type_strindex] + "/" + d.string_table[p.sample_type.unit_strindex]
                part = type(p)()
                part.samples.extend(p.samples)
                b = part.SerializeToString()
                rows.append((f"profile {kind}: samples", len(p.samples), len(b), len(gzip.compress(b, 6))))
                stacks_by_kind[kind] = {s.stack_index for s in p.samples}
    kinds = list(stacks_by_kind)
    # Frame types (profile.frame.type of each location: jvm = Java, native, kernel).
    type_of_attr = {i: a.value.string_value for i, a in enumerate(d.attribute_table)
                    if d.string_table[a.key_strindex] == "profile.frame.type"}
    loc_type = [next((type_of_attr[a] for a in loc.attribute_indices if a in type_of_attr), "?") for loc in d.location_table]
    by_type = {}
    for i, loc in enumerate(d.location_table):
        t = by_type.setdefault(loc_type[i], {"locations": 0, "functions": set()})
        t["locations"] += 1
        t["functions"].update(ln.function_index for ln in loc.lines)
    types = {t: {"locations": v["locations"], "functions": len(v["functions"]),
                 "name_bytes": sum(len(d.string_table[d.function_table[f].name_strindex].encode()) for f in v["functions"])}
             for t, v in sorted(by_type.items())}
    no_java = {i for i, st in enumerate(d.stack_table) if all(loc_type[l] != "jvm" for l in st.location_indices)}
    cpu_count = [p for rp in req.resource_profiles for sp in rp.scope_profiles for p in sp.profiles
                 if d.string_table[p.sample_type.type_strindex] == "samples"]
    cpu_no_java = (sum(sum(s.values) for s in cpu_count[0].samples if s.stack_index in no_java),
                   sum(sum(s.values) for s in cpu_count[0].samples)) if cpu_count else (0, 0)
    cpu = set().union(*(v for k, v in stacks_by_kind.items() if k.startswith(("cpu", "samples"))))
    alloc = set().union(*(v for k, v in stacks_by_kind.items() if k.startswith("alloc")))
    depth = [len(s.location_indices) for s in d.stack_table]
    fn_names = {d.function_table[i].name_strindex for i in range(len(d.function_table))}
    strings_bytes = sum(len(s.encode()) for s in d.string_table)
    facts = {
        "raw": len(raw), "gzip": len(body) if body[:2] == b"\x1f\x8b" else len(gzip.compress(raw, 6)),
        "strings": len(d.string_table), "string_bytes": strings_bytes, "function_name_strings": len(fn_names),
        "functions": len(d.function_table), "locations": len(d.location_table), "stacks": len(d.stack_table),
        "stack_depth_median": statistics.median(depth) if depth else 0, "stack_depth_max": max(depth) if depth else 0,
        "cpu_stacks": len(cpu), "alloc_stacks": len(alloc), "shared_stacks": len(cpu & alloc), "kinds": kinds,
        "samples": {k: len(v) for k, v in stacks_by_kind.items()},
        "frame_types": types, "stacks_without_java": len(no_java), "cpu_samples_without_java": cpu_no_java,
    }
    return rows, facts


def breakdown_md(r):
    """Breakdown of the request of median size among the middle intervals."""
    store = os.path.join(r["dir"], "store")
    reqs = middle(body_sizes(store))
    if not reqs:
        return ""
    med = sorted(reqs, key=lambda x: x[1])[len(reqs) // 2]
    body = open(os.path.join(store, f"req-{med[0]}.body"), "rb").read()
    try:
        rows, f = breakdown(body)
    except ImportError:
        return "(no breakdown: python3 -m pip install opentelemetry-proto)\n"
    out = [f"#### {r['workload']} / {r['arm']}: request {med[0]} (interval {med[0] - 1}), {f['gzip']} B gzip, {f['raw']} B raw\n",
           f"{f['strings']} strings ({f['string_bytes']} B of text, {f['function_name_strings']} function names), "
           f"{f['functions']} functions, {f['locations']} locations, {f['stacks']} stacks "
           f"(depth median {f['stack_depth_median']}, max {f['stack_depth_max']}); "
           f"stacks sampled by CPU {f['cpu_stacks']}, by allocations {f['alloc_stacks']}, by both {f['shared_stacks']}. "
           f"By frame type (profile.frame.type): " + "; ".join(f"{t}: {v['locations']} locations, {v['functions']} functions, "
                                                              f"{v['name_bytes']} B of names" for t, v in f["frame_types"].items()) + ". "
           f"{f['stacks_without_java']} stacks have no Java frame (JVM threads: JIT compilers, GC, ...), holding "
           f"{f['cpu_samples_without_java'][0]} of {f['cpu_samples_without_java'][1]} CPU samples.\n",
           "| part | entries | raw B | gzip -6 of the part alone B |", "|---|---|---|---|"]
    for name, n, raw, gz in rows:
        if n:
            out.append(f"| {name} | {n} | {raw} | {gz} |")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- report
def tables(results):
    size = ["| workload | arm | wall s | intervals (files) | requests | first request gzip KiB | request gzip KiB med / max "
            "| request raw KiB med / max | pprof CPU gzip KiB med / max | pprof alloc gzip KiB med / max | JFR file KiB med / max "
            "| ≤ 50 KiB (med / max) | per interval (med): CPU samples, CPU stacks, alloc stacks, stacks in the dictionary |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    cpu = ["| workload | arm | JVM cores | others' cores | load avg (start -> end) | oxprof-loop s | oxprof-upload s | oxprof-jfr s "
           "| encode+upload % of a core (schedstat / ticks) | ≤ 0.1% | after the first cut: (median cut + median push) / interval, % of a core "
           "| loop ms per cut: first, median of the rest, max "
           "| upload ms per push: median, max | other oxprof threads s | perf: agent share of the JVM's samples, as % of a core |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            size.append(f"| {r['workload']} | {r['arm']} | FAILED: {r['error'][:200]} |")
            continue
        sent = [s for s, _ in r["requests"]]
        raw = [x for _, x in r["requests"]]
        files = r.get("cpu_files") or r.get("jfr_files") or []
        n_iv = len(files) if files else "-"
        m, x = medmax(sent)
        ok = "-" if m is None else ("met" if m <= TARGET_BYTES else "NOT met") + " / " + ("met" if x <= TARGET_BYTES else "NOT met")
        size.append(f"| {r['workload']} | {r['arm']} | {r['wall']:.0f} | {n_iv} | {len(sent)} | {kib(sent[0]) if sent else '-'} "
                    f"| {mm(sent)} | {mm(raw)} | {mm(r.get('cpu_files', []))} | {mm(r.get('alloc_files', []))} "
                    f"| {mm(r.get('jfr_files', []))} | {ok} | {counts_cell(r)} |")
        t = r["threads"]
        p = pct_core(encode_threads(r), r["wall"])
        p_ticks = pct_core(encode_threads(r, "threads_ticks"), r["wall"])
        others = ", ".join(f"{k} {v:.2f}" for k, v in sorted(t.items()) if k not in ("oxprof-loop", "oxprof-upload", "oxprof-jfr"))
        cores = r["jvm_cpu"] / r["wall"] if r["jvm_cpu"] else 0.0
        perf = r.get("perf")
        if perf:
            share = perf["lib_other_threads_pct"] + perf["oxprof_threads_pct"]
            perf_s = (f"{share:.2f}% ({perf['lib_other_threads_pct']:.2f} liboxprof.so on other threads + "
                      f"{perf['oxprof_threads_pct']:.2f} oxprof threads) = {share * cores:.2f}% of a core")
        else:
            perf_s = "-"
        loop = r["per_cut_ms"].get("oxprof-loop", [])
        loop_s = f"{loop[0]:.0f}, {statistics.median(loop[1:]):.1f}, {max(loop[1:]):.0f}" if len(loop) > 1 else "-"
        up = [x for x in r["per_cut_ms"].get("oxprof-upload", []) if x > 0]
        up_s = f"{statistics.median(up):.1f}, {max(up):.1f}" if up else "-"
        # What a JVM that runs for days pays per interval: the first cut
        # (names every frame, loads libjvm's symbols) is paid once.
        steady = (f"{(statistics.median(loop[1:]) + (statistics.median(up) if up else 0)) / (r.get('loop_s', 10) * 10):.3f}"
                  if len(loop) > 1 else "-")
        cpu.append(f"| {r['workload']} | {r['arm']} | {cores:.2f} | {r['others_cores']:.2f} | {r['load']} "
                   f"| {t.get('oxprof-loop', 0):.3f} | {t.get('oxprof-upload', 0):.3f} | {t.get('oxprof-jfr', 0):.3f} "
                   f"| {p:.3f} / {p_ticks:.3f} | {'met' if p <= TARGET_CORE_PCT else 'NOT met'} | {steady} | {loop_s} | {up_s} "
                   f"| {others or '-'} | {perf_s} |")
    return "\n".join(size) + "\n\n" + "\n".join(cpu) + "\n"


def notes(results):
    out = []
    for r in results:
        if "error" in r:
            continue
        n_req = len(r["requests"])
        files = r.get("cpu_files") or r.get("jfr_files")
        line = f"- {r['workload']} / {r['arm']}: upload summary: {r['upload_summary'] or 'MISSING'}"
        if files is not None and len(files) != n_req:
            line += f"; {len(files)} interval files but {n_req} requests"
        if r.get("alloc_files") is not None and r.get("cpu_files") is not None and len(r["alloc_files"]) != len(r["cpu_files"]):
            line += f"; {len(r['cpu_files'])} CPU files, {len(r['alloc_files'])} alloc files"
        if r.get("wrk_rps"):
            line += f"; wrk {r['wrk_rps']:.0f} req/s"
        if r["problem"]:
            line += f"; PROBLEM: {r['problem']}"
        if r["agent_warnings"]:
            line += "; agent said: " + " | ".join(r["agent_warnings"][:5])
        out.append(line)
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="javac,h2,jetty", help="comma-separated: javac, h2, jetty")
    ap.add_argument("--arms", default="otlp,otlp-only,pyroscope", help="comma-separated: " + ", ".join(ARMS))
    ap.add_argument("--seconds", type=int, default=80, help="run time of h2 and the jetty load (javac runs to the end)")
    ap.add_argument("--loop", default="10s", help="the interval (loop=), default 10s; on a busy machine a longer one "
                    "holds as many samples as 10 s of an uncontended JVM")
    ap.add_argument("--h2-threads", type=int, default=2)
    ap.add_argument("--connections", type=int, default=16, help="wrk connections for jetty")
    ap.add_argument("--perf", action="store_true", help="also record the JVM with perf (cpu-clock) for the agent's total share")
    ap.add_argument("--perf-hz", type=int, default=199)
    ap.add_argument("--extra-opts", default="", help="agent options added to every arm's (e.g. cstack=no)")
    ap.add_argument("--out", help="write the report (markdown) here")
    ap.add_argument("--report-only", metavar="DIR", help="no runs: rewrite the report from DIR/results.json of an earlier run")
    ap.add_argument("--keep", help="folder for runs (default: a new folder under /tmp/fleet)")
    args = ap.parse_args()
    if args.report_only:
        with open(os.path.join(args.report_only, "results.json")) as f:
            saved = json.load(f)
        if isinstance(saved, list):  # written before the report-only mode
            saved = {"results": saved, "started": "?", "ended": "?", "agent": AGENT, "command": "?"}
        for r in saved["results"]:  # sizes and counts again from the stored requests and files
            if "error" not in r and os.path.isdir(r["dir"]):
                r.update(collect(r["arm"], r["dir"]))
        write_report(args, saved["results"], saved["started"], saved["ended"], saved["agent"], saved["command"], args.report_only)
        return
    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    for n in names:
        if n not in WORKLOADS:
            die(f"unknown workload '{n}' (accepted: {', '.join(WORKLOADS)})")
    check_prereqs(names, arms, args.perf)
    loop_seconds(args.loop)
    os.makedirs("/tmp/fleet", exist_ok=True)
    out = args.keep or tempfile.mkdtemp(prefix="run.", dir="/tmp/fleet")
    os.makedirs(out, exist_ok=True)
    # A private copy: a cargo build meanwhile cannot swap the library under a running JVM.
    agent = os.path.join(out, "liboxprof.so")
    shutil.copy2(AGENT, agent)
    classes = compile_classes(names, out)
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    results = []
    for w in names:
        for arm in arms:
            print(f"== {w} / {arm} ...", file=sys.stderr, flush=True)
            try:
                r = run_one(args, arm, w, agent, classes, out)
            except Exception as e:  # one failed run must not lose the others
                r = {"workload": w, "arm": arm, "error": f"{type(e).__name__}: {e}"}
            results.append(r)
            print(tables([r]), file=sys.stderr, flush=True)
    ended = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    command = shlex.join(["bench/fleet/payload.py"] + sys.argv[1:])
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"started": started, "ended": ended, "agent": AGENT, "command": command, "results": results}, f, indent=1)
    write_report(args, results, started, ended, AGENT, command, out)


def write_report(args, results, started, ended, agent_path, command, out):
    report = [f"Runs started {started}, ended {ended}; agent {agent_path} (copied into the run folder); run folders in {out}.\n\n",
              f"Command: `{command}`\n\n",
              "Sizes: medians and maxima over the intervals between the first and the last (both partial); "
              "\"first request\" is interval 0 (JVM startup). KiB = 1024 bytes. Request bytes as sent (gzip, or the "
              "multipart body for pyroscope); raw = after gunzip (for pyroscope: the JFR part).\n\n",
              "CPU: run time of the agent's threads, read every 0.25 s while the JVM ran (the last values before it "
              "exited), from /proc/PID/task/TID/schedstat (exact, ns) and /proc/PID/task/TID/stat (utime+stime, whole "
              "10 ms ticks), divided by the JVM's wall time; encode+upload = oxprof-loop + oxprof-upload (+ oxprof-jfr, "
              "which writes the JFR recording, in the pyroscope arm). The cut at exit runs on the exiting thread and is "
              "not counted. Per cut / per push: the loop and upload threads' run time around each interval boundary. "
              "\"others' cores\" = the machine's busy CPU during the run minus the JVM's own (other processes). "
              "perf (cpu-clock, 199 Hz): the agent's share of the JVM's samples = liboxprof.so on any non-oxprof thread "
              "(the signal handler, allocation callbacks) + every sample of an oxprof-* thread (its kernel time too); "
              "times the JVM's cores = the agent's whole CPU in % of a core.\n\n",
              tables(results), "\n", notes(results)]
    bd = [breakdown_md(r) for r in results if r.get("arm", "").startswith("otlp") and "error" not in r]
    if any(bd):
        report += ["\n### Where the bytes go (one OTLP request per workload and arm, median size)\n\n", "\n".join(b for b in bd if b)]
    report += ["\n### Commands (agent options as run)\n\n"] + [f"- {r['workload']} / {r['arm']}: `{r['cmd']}`\n" for r in results if "cmd" in r]
    text = "".join(report)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


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
