//! `report` and `convert` on the JDK's own recordings (`settings=profile`,
//! which always holds safepoints) of a program that measures its own truth:
//! a filter that matches nothing is an error even beside safepoints, and the
//! Safepoints section counts only the samples the filter keeps; the
//! by-method tables rank and share by time waited, not by event count;
//! `--threads` gives per-thread figures for CPU samples without states;
//! live objects without sizes rank by samples and refuse `--total`; the
//! kinds asked for that have no events name the events not read; a gzipped
//! JFR reads as the plain one; an empty profile (the agent's, sampling
//! nothing) is "no samples in FILE".

mod common;

use common::*;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

/// Lock waits of very different lengths (2 of 500 ms in `fewLong`, 16 of
/// 25 ms in `manyShort`), CPU burnt by two named threads (1600 ms by
/// `burner-a`, 400 ms by `burner-b`), 2000 arrays kept alive; the TRUTH line
/// says what each measured.
const PROGRAM: &str = r#"
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;

public class ReportMore {
    static final List<Object> KEPT = new ArrayList<>();
    static volatile long sink;

    static void spin(long cpuNanos) {
        // The CPU clock is read about every half millisecond: the JDK's
        // sampler skips a thread caught in that native call.
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        long end = mx.getCurrentThreadCpuTime() + cpuNanos;
        long x = 1;
        while (mx.getCurrentThreadCpuTime() < end) {
            for (int i = 0; i < 500000; i++) x = x * 6364136223846793005L + 1442695040888963407L;
        }
        sink = x;
    }
    static void spinA(long ns) { spin(ns); }
    static void spinB(long ns) { spin(ns); }

    /** Waits on `lock` while a holder keeps it for `holdMs`, `times` times; returns ns waited. */
    static long contend(Object lock, long holdMs, int times, boolean longOnes) throws Exception {
        long waited = 0;
        for (int i = 0; i < times; i++) {
            CountDownLatch held = new CountDownLatch(1);
            Thread holder = new Thread(() -> {
                synchronized (lock) {
                    held.countDown();
                    try { Thread.sleep(holdMs); } catch (InterruptedException e) { }
                }
            });
            holder.start();
            held.await();
            waited += longOnes ? fewLong(lock) : manyShort(lock);
            holder.join();
        }
        return waited;
    }
    static long fewLong(Object lock) { long t = System.nanoTime(); synchronized (lock) { sink++; } return System.nanoTime() - t; }
    static long manyShort(Object lock) { long t = System.nanoTime(); synchronized (lock) { sink++; } return System.nanoTime() - t; }

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("quick")) return;
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        long[] cpu = new long[2];
        Thread a = new Thread(() -> { spinA(1_600_000_000L); cpu[0] = mx.getCurrentThreadCpuTime(); }, "burner-a");
        Thread b = new Thread(() -> { spinB(400_000_000L); cpu[1] = mx.getCurrentThreadCpuTime(); }, "burner-b");
        long[] waits = new long[2];
        Thread l1 = new Thread(() -> { try { waits[0] = contend(new Object(), 500, 2, true); } catch (Exception e) { throw new RuntimeException(e); } }, "few-long");
        Thread l2 = new Thread(() -> { try { waits[1] = contend(new Object(), 25, 16, false); } catch (Exception e) { throw new RuntimeException(e); } }, "many-short");
        for (Thread t : new Thread[] {a, b, l1, l2}) t.start();
        for (int i = 0; i < 2000; i++) KEPT.add(new long[1024]);
        System.gc();
        for (Thread t : new Thread[] {a, b, l1, l2}) t.join();
        System.out.println("TRUTH burner-a=" + cpu[0] / 1e6 + " burner-b=" + cpu[1] / 1e6 + " fewLong=" + waits[0] / 1e6 + " manyShort=" + waits[1] / 1e6 + " kept=" + KEPT.size());
    }
}
"#;

/// The program compiled into a scratch directory.
fn compiled(name: &str) -> Scratch {
    let s = Scratch::new(name);
    let src = s.path("ReportMore.java");
    std::fs::write(&src, PROGRAM).unwrap();
    let o = Command::new(tool("javac")).args(["--release", "11", "-d"]).arg(&s.0).arg(&src).output().unwrap();
    assert!(o.status.success(), "javac: {}", text(&o.stderr));
    s
}

/// One JDK recording (`settings=profile`, native-method samples off, so
/// that no wall-clock samples can come from them) shared by the tests, and
/// the program's TRUTH line.
struct Recorded {
    _s: Scratch,
    jfr: PathBuf,
    truth: HashMap<String, f64>,
}

fn recorded() -> &'static Recorded {
    static REC: OnceLock<Recorded> = OnceLock::new();
    REC.get_or_init(|| {
        let s = compiled("report-more");
        let jfr = s.path("rec.jfr");
        // The JDK 17 recording dumped at exit now and then holds no
        // jdk.OldObjectSample at all (1 in about 20 here; the others hold
        // 250): the JDK's doing, not oxprof's input handling, so such a
        // recording is made again.
        let mut attempts = 0;
        let o = loop {
            attempts += 1;
            let o = Command::new(java())
                .current_dir(&s.0)
                .arg(format!("-XX:StartFlightRecording=filename={},settings=profile,jdk.NativeMethodSample#enabled=false", jfr.display()))
                .arg("-cp")
                .arg(&s.0)
                .arg("ReportMore")
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", text(&o.stderr));
            if jfr_count(&jfr, "jdk.OldObjectSample") > 0 || attempts == 3 {
                break o;
            }
        };
        let truth = truth_line(&text(&o.stdout));
        assert_eq!(truth.get("kept"), Some(&2000.0), "{}", text(&o.stdout));
        Recorded { _s: s, jfr, truth }
    })
}

fn run(args: &[&str]) -> Output {
    oxprof_cmd().args(args).output().unwrap()
}

fn report(args: &[&str]) -> String {
    let mut all = vec!["report", recorded().jfr.to_str().unwrap()];
    all.extend_from_slice(args);
    let o = run(&all);
    assert!(o.status.success(), "{all:?}: {}", text(&o.stderr));
    text(&o.stdout)
}

/// A failure with one line on stderr holding every `expected`, nothing on stdout.
fn assert_one_line_error(o: &Output, expected: &[&str]) {
    let err = text(&o.stderr);
    assert!(!o.status.success(), "succeeded: {}", text(&o.stdout));
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    for e in expected {
        assert!(err.contains(e), "'{e}' not in: {err}");
    }
    assert!(o.stdout.is_empty(), "{}", text(&o.stdout));
}

/// The rows of a report table: the lines after the first line holding
/// `heading` and the table's header (with its "share" column), up to a
/// blank line or `until`.
fn rows<'a>(report: &'a str, heading: &str, until: &str) -> Vec<&'a str> {
    report
        .lines()
        .skip_while(|l| !l.contains(heading))
        .skip(1)
        .skip_while(|l| l.contains("share"))
        .take_while(|l| !l.trim().is_empty() && !l.contains(until))
        .collect()
}

/// The share (in %) of a table row: its field that ends with '%'.
fn share(row: &str) -> f64 {
    row.split_whitespace().find_map(|w| w.strip_suffix('%')).and_then(|w| w.parse().ok()).unwrap_or_else(|| panic!("no share in {row}"))
}

/// A filter that matches nothing fails with the one-line error naming the
/// file and the filter, though the recording has safepoints (which used to
/// be printed alone, exit 0); with a filter that matches, the Safepoints
/// section counts only the CPU samples the filter keeps.
#[test]
fn a_filter_matching_nothing_is_an_error_beside_safepoints() {
    let r = recorded().jfr.to_str().unwrap();
    let all = report(&[]);
    assert!(all.contains("Safepoints ("), "the JDK's profile settings record safepoints:\n{all}");
    for (args, said) in [
        (vec!["report", r, "--include", "NoSuchMethod"], "--include NoSuchMethod"),
        (vec!["report", r, "--cpu", "--state", "sleeping"], "--state sleeping"),
        (vec!["report", r, "--label", "a=b"], "--label"),
        (vec!["report", r, "--by", "endpoint"], "--by"),
        (vec!["convert", r, "--include", "NoSuchMethod", "-o", "-", "--format", "text"], "--include NoSuchMethod"),
    ] {
        let o = run(&args);
        assert_one_line_error(&o, &[said, "rec.jfr"]);
    }
    let page = recorded().jfr.with_file_name("nothing.html");
    let o = run(&["convert", r, "--include", "NoSuchMethod", "-o", page.to_str().unwrap()]);
    assert_one_line_error(&o, &["--include NoSuchMethod", "no samples left"]);
    assert!(!page.exists(), "a page of safepoints alone for a filter that matched nothing");

    // The in-window line counts the CPU samples of spinB only.
    let c = run(&["convert", r, "--cpu", "--include", r"ReportMore\.spinB", "-o", "-"]);
    assert!(c.status.success(), "{}", text(&c.stderr));
    let lines = text(&c.stdout);
    let spin_b: u64 = lines.lines().filter_map(|l| l.rsplit_once(' ')).map(|(_, n)| n.parse::<u64>().unwrap()).sum();
    let everything: u64 = {
        let c = run(&["convert", r, "--cpu", "-o", "-"]);
        text(&c.stdout).lines().filter_map(|l| l.rsplit_once(' ')).map(|(_, n)| n.parse::<u64>().unwrap()).sum()
    };
    assert!(spin_b > 0 && spin_b < everything, "spinB {spin_b} of {everything} CPU samples");
    let rep = report(&["--cpu", "--include", r"ReportMore\.spinB"]);
    let line = rep.lines().find(|l| l.contains("CPU samples taken while threads were being stopped")).unwrap_or_else(|| panic!("{rep}"));
    assert!(line.contains(&format!(" of {spin_b} (")), "the filter's {spin_b} samples: {line}");
}

/// Lock waits by method rank and share by time waited: `fewLong` waited
/// about 70% of the time in 2 events, `manyShort` 30% in 16 (by event count
/// it was 11% and 89%, and ranked first).
#[test]
fn method_tables_rank_by_time_waited() {
    let t = &recorded().truth;
    let (few, many) = (t["fewLong"], t["manyShort"]);
    let truth = 100.0 * few / (few + many);
    let rep = report(&["--lock"]);
    let by_self = rows(&rep, "Lock waits by method", "by total");
    assert!(by_self[0].ends_with("ReportMore.fewLong"), "fewLong waited longest ({few:.0} ms vs {many:.0} ms):\n{rep}");
    let row = |m: &str| *by_self.iter().find(|r| r.ends_with(m)).unwrap_or_else(|| panic!("no {m}:\n{rep}"));
    // The JDK records waits of 10 ms or more: these are all of them (a
    // holder's start may add a park in CountDownLatch.await).
    let (s_few, s_many) = (share(row("ReportMore.fewLong")), share(row("ReportMore.manyShort")));
    let got = 100.0 * s_few / (s_few + s_many);
    assert!((got - truth).abs() < 5.0, "fewLong {got:.1}% of the two's time waited, measured {truth:.1}%:\n{rep}");
    // The by-total rows are ranked the same way.
    let by_total = rows(&rep, "  by total", "Top contended");
    let pos = |m: &str| by_total.iter().position(|r| r.ends_with(m)).unwrap_or_else(|| panic!("no {m}:\n{rep}"));
    assert!(pos("ReportMore.fewLong") < pos("ReportMore.manyShort"), "{rep}");
}

/// `--threads` with the JDK's CPU samples (no thread states, so no state
/// table) gives the per-thread table: burner-a burnt four times what
/// burner-b did. Without it there is none.
#[test]
fn threads_gives_cpu_per_thread() {
    let t = &recorded().truth;
    let truth = t["burner-a"] / (t["burner-a"] + t["burner-b"]);
    let rep = report(&["--cpu", "--threads"]);
    let table = rows(&rep, "CPU by thread", "Safepoints");
    assert!(table[0].ends_with("[burner-a]"), "{rep}");
    let row = |th: &str| *table.iter().find(|r| r.ends_with(th)).unwrap_or_else(|| panic!("no {th}:\n{rep}"));
    let (a, b) = (share(row("[burner-a]")), share(row("[burner-b]")));
    // The JDK's sampler, not oxprof, decides how many samples each thread
    // gets (about 200 here, far fewer on a loaded 2-core machine: one CI run
    // had 13 and 16): the table must put burner-a, which burnt four times
    // burner-b's CPU, clearly ahead.
    let got = a / (a + b);
    assert!(got > 0.55 && (got - truth).abs() < 0.25, "burner-a's share of the two: {got:.2}, measured {truth:.2}:\n{rep}");
    assert!(!report(&["--cpu"]).contains("by thread"));
}

/// Live objects of a recording whose `jdk.OldObjectSample`s have no size
/// (JDK 17's): the leak table ranks by samples and says sizes were not
/// recorded, with no column of 0 B; `--total` is a one-line error instead
/// of an empty output. With sizes, `--total` converts.
#[test]
fn live_objects_without_sizes() {
    let r = recorded().jfr.to_str().unwrap();
    let printed = Command::new(tool("jfr")).args(["print", "--events", "jdk.OldObjectSample"]).arg(r).output().unwrap();
    assert!(printed.status.success(), "{}", text(&printed.stderr));
    let sized = text(&printed.stdout).contains("objectSize");
    let rep = report(&["--live"]);
    let o = run(&["convert", r, "--live", "--total", "-o", "-"]);
    if sized {
        assert!(o.status.success() && !o.stdout.is_empty(), "{}", text(&o.stderr));
        return;
    }
    assert_one_line_error(&o, &["--total", "live", "rec.jfr", "leave out --total"]);
    let table = rows(&rep, "Leak suspects", "Safepoints");
    assert!(rep.contains("no sizes recorded: ranked by samples"), "{rep}");
    assert!(!table.is_empty() && table.iter().all(|r| !r.contains(" B ") && !r.contains("0.00%")), "{rep}");
    assert!(table[0].ends_with("long[]  <-  ReportMore.main"), "2000 arrays kept by main:\n{rep}");
    let samples: Vec<u64> = table.iter().map(|r| r.split_whitespace().next().unwrap().parse().unwrap()).collect();
    assert!(samples.windows(2).all(|w| w[0] >= w[1]), "{rep}");
    // Without --total the samples convert.
    let o = run(&["convert", r, "--live", "-o", "-"]);
    assert!(o.status.success() && text(&o.stdout).contains("long[]"), "{}", text(&o.stderr));
}

/// A kind asked for whose events are not in the recording names what is
/// read and what is not: wall clock from a recording without wall samples
/// names async-profiler's profiler.WallClockSample, as an error when it is
/// the only kind, as a note beside the CPU tables.
#[test]
fn kinds_without_events_name_the_events_not_read() {
    let r = recorded().jfr.to_str().unwrap();
    let o = run(&["report", r, "--wall"]);
    assert_one_line_error(&o, &["rec.jfr", "wall clock: 0", "profiler.WallClockSample", "not read"]);
    let o = run(&["report", r, "--wall", "--cpu"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("CPU: top methods"));
    assert!(text(&o.stderr).contains("profiler.WallClockSample"), "{}", text(&o.stderr));
}

/// JDK 25's CPU-time samples (jdk.CPUTimeSample), the only CPU events of a
/// recording: `--cpu` names them as not read.
#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn jdk25_cpu_time_samples_are_named() {
    let Some(home) = extra_jdks().into_iter().find(|p| p.to_string_lossy().contains("25")) else { panic!("no JDK 25 among OXPROF_EXTRA_JDKS") };
    let s = compiled("cputime");
    let jfr = s.path("cpu25.jfr");
    let o = Command::new(home.join("bin/java"))
        .current_dir(&s.0)
        .arg(format!("-XX:StartFlightRecording=filename={},settings=profile,jdk.ExecutionSample#enabled=false,jdk.CPUTimeSample#enabled=true", jfr.display()))
        .args(["-cp", s.0.to_str().unwrap(), "ReportMore"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let summary = text(&Command::new(home.join("bin/jfr")).arg("summary").arg(&jfr).output().unwrap().stdout);
    assert!(summary.lines().any(|l| l.trim_start().starts_with("jdk.CPUTimeSample") && !l.trim_end().ends_with(" 0")), "{summary}");
    let o = run(&["report", jfr.to_str().unwrap(), "--cpu"]);
    assert_one_line_error(&o, &["cpu25.jfr", "CPU: 0", "jdk.CPUTimeSample", "not read"]);
}

/// A gzipped JFR recording reads as the plain one.
#[test]
fn gzipped_jfr_reads_as_the_plain_one() {
    let rec = recorded();
    let gz = rec.jfr.with_file_name("copy.jfr.gz");
    let o = Command::new("sh").arg("-c").arg(format!("gzip -c '{}' > '{}'", rec.jfr.display(), gz.display())).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = run(&["report", gz.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), report(&[]));
}

/// Profiles of no samples, as the agent writes them for a program it never
/// sampled (an empty collapsed file, a pprof file and a JFR recording of
/// no sample): report, convert and diff say "no samples in FILE".
#[test]
fn empty_profiles_are_no_samples_in_the_file() {
    let s = compiled("empty");
    for name in ["e.collapsed", "e.pb.gz", "e.jfr"] {
        let file = s.path(name);
        let o = run_java(&s.0, &format!("event=cpu,interval=1s,file={}", file.display()), &[], &s.0, &["ReportMore", "quick"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(file.exists(), "{name}: {}", text(&o.stderr));
        let f = file.to_str().unwrap();
        let page = s.path("p.html");
        for args in [vec!["report", f], vec!["convert", f, "-o", page.to_str().unwrap()], vec!["diff", f, f, "-o", page.to_str().unwrap()]] {
            let o = run(&args);
            assert_one_line_error(&o, &[&format!("oxprof: no samples in {}", file.display())]);
        }
        assert!(!page.exists());
    }
}

/// Idle pool threads waiting on an empty queue (`Condition.await`, parked
/// on an `AbstractQueuedSynchronizer$ConditionObject`) next to a contended
/// `ReentrantLock`; the TRUTH line gives the lock's waits.
const IDLE_PROGRAM: &str = r#"
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.locks.ReentrantLock;

public class IdleParks {
    public static void main(String[] args) throws Exception {
        LinkedBlockingQueue<Runnable> queue = new LinkedBlockingQueue<>();
        for (int i = 0; i < 4; i++) {
            Thread t = new Thread(() -> { try { queue.take().run(); } catch (InterruptedException e) { } }, "idle-" + i);
            t.setDaemon(true);
            t.start();
        }
        ReentrantLock lock = new ReentrantLock();
        long waited = 0;
        for (int i = 0; i < 6; i++) {
            CountDownLatch held = new CountDownLatch(1);
            Thread holder = new Thread(() -> { lock.lock(); try { held.countDown(); Thread.sleep(150); } catch (InterruptedException e) { } finally { lock.unlock(); } });
            holder.start();
            held.await();
            long t = System.nanoTime();
            lock.lock();
            waited += System.nanoTime() - t;
            lock.unlock();
            holder.join();
        }
        System.out.println("TRUTH lockWaitMs=" + waited / 1e6);
    }
}
"#;

#[test]
fn idle_condition_waits_in_jdk_recordings_are_not_lock_contention() {
    let s = Scratch::new("report-idle-parks");
    let src = s.path("IdleParks.java");
    std::fs::write(&src, IDLE_PROGRAM).unwrap();
    let o = Command::new(tool("javac")).args(["--release", "11", "-d"]).arg(&s.0).arg(&src).output().unwrap();
    assert!(o.status.success(), "javac: {}", text(&o.stderr));
    let jfr = s.path("idle.jfr");
    let o = Command::new(java())
        .current_dir(&s.0)
        .arg(format!("-XX:StartFlightRecording=filename={},settings=profile", jfr.display()))
        .args(["-cp"])
        .arg(&s.0)
        .arg("IdleParks")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let truth = truth_line(&text(&o.stdout))["lockWaitMs"];
    let o = run(&["report", jfr.to_str().unwrap(), "--lock"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(!out.contains("ConditionObject"), "idle pool threads counted as lock waits:\n{out}");
    assert!(out.contains("ReentrantLock"), "the contended lock is missing:\n{out}");
    // The waits the report counts are the ReentrantLock's: its total time.
    let line = out.lines().find(|l| l.contains("Top contended locks")).unwrap_or_else(|| panic!("no lock table:\n{out}"));
    let total = line.rsplit(", ").next().unwrap_or("").trim_end_matches(')');
    let (n, unit) = total.split_once(' ').unwrap_or_else(|| panic!("no total in {line:?}"));
    let scale = match unit {
        "s" => 1e3,
        "ms" => 1.0,
        "µs" | "us" => 1e-3,
        _ => panic!("unit {unit:?} in {line:?}"),
    };
    let ms = n.parse::<f64>().unwrap_or_else(|_| panic!("no total in {line:?}")) * scale;
    assert!((ms / truth - 1.0).abs() < 0.2, "lock waits {ms} ms against the program's {truth} ms:\n{out}");
}
