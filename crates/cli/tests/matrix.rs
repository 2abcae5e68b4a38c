//! The runtime configurations users run: every collector (G1, Parallel,
//! Serial, ZGC, Shenandoah), the interpreter only (-Xint) and compile-first
//! (-Xcomp), and virtual threads on JDK 21+, each with every event on at
//! once (CPU at 1 ms, wall clock, locks, allocations, live objects). Each
//! run must end normally, leave no hs_err file, and name the program's own
//! sites in every profile.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const ALL_EVENTS: &str = "start,event=cpu,interval=1ms,wall=20ms,lock=1ms,alloc=64k,live";

struct Run {
    cpu: Vec<(Vec<String>, u64)>,
    wall: Vec<(Vec<String>, u64)>,
    alloc: Vec<(Vec<String>, u64)>,
    lock: Vec<(Vec<String>, u64)>,
    failed_pct: f64,
    stdout: String,
    stderr: String,
}

fn run_matrix(java: &Path, dir: &Path, jvm_args: &[&str], program_args: &[&str], label: &str) -> Run {
    let out = dir.join(format!("{}.collapsed", label.replace(['+', ':', '-', ' '], "_")));
    let o = Command::new(java)
        .current_dir(dir)
        .arg(format!("-agentpath:{}={ALL_EVENTS},file={}", agent().display(), out.display()))
        .args(jvm_args)
        .arg("-cp")
        .arg(dir)
        .arg("Matrix")
        .args(program_args)
        .output()
        .unwrap();
    let stderr = text(&o.stderr);
    assert!(o.status.success(), "{label}: the JVM failed: {:?}\n{stderr}\n{}", o.status, text(&o.stdout));
    let crash_files: Vec<PathBuf> =
        std::fs::read_dir(dir).unwrap().filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.to_string_lossy().contains("hs_err")).collect();
    assert!(crash_files.is_empty(), "{label}: {crash_files:?}");
    // With live tracking, the file asked for holds live objects and each
    // other kind is beside it.
    let sib = |key: &str| read_collapsed(&out.with_extension(format!("{key}.collapsed")));
    let failed_pct = summary(&stderr).get("failed_pct").and_then(|v| v.parse().ok()).unwrap_or(100.0);
    Run { cpu: sib("cpu"), wall: sib("wall"), alloc: sib("alloc"), lock: sib("lock"), failed_pct, stdout: text(&o.stdout), stderr }
}

fn check_sites(r: &Run, label: &str, max_failed_pct: f64) {
    let err = &r.stderr;
    assert!(samples_with(&r.cpu, "Matrix.burn") > 200, "{label}: CPU samples in Matrix.burn: {}\n{err}", samples_with(&r.cpu, "Matrix.burn"));
    if r.failed_pct >= max_failed_pct {
        // Say where the walks failed: the failure's frame and what is above it.
        let mut failed: Vec<(String, u64)> = r
            .cpu
            .iter()
            .filter_map(|(st, n)| {
                let at = st.iter().position(|f| FAILURE_MARKERS.contains(&f.as_str()))?;
                Some((st[at..].iter().take(8).cloned().collect::<Vec<_>>().join(";"), *n))
            })
            .collect();
        failed.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        let shown: Vec<String> = failed.iter().take(12).map(|(st, n)| format!("{n} {st}")).collect();
        panic!("{label}: {:.2}% of CPU samples failed\n{}\n{err}", r.failed_pct, shown.join("\n"));
    }
    assert!(samples_with(&r.alloc, "Matrix.allocate") > 0, "{label}: no allocation sample in Matrix.allocate\n{err}");
    assert!(samples_with(&r.lock, "Matrix.contend") > 0, "{label}: no lock sample in Matrix.contend\n{err}");
    assert!(samples_with(&r.wall, "Matrix.contend") > 0, "{label}: no wall-clock sample of the contenders\n{err}");
    eprintln!(
        "{label}: CPU {} samples, {:.2}% failed; wall {}, alloc {}, lock {}",
        total(&r.cpu),
        r.failed_pct,
        total(&r.wall),
        total(&r.alloc),
        total(&r.lock)
    );
}

#[test]
fn every_collector_with_every_event_on() {
    let s = Scratch::new("matrix-gc");
    compile(&s.0, &["Matrix.java"]);
    for gc in ["-XX:+UseG1GC", "-XX:+UseParallelGC", "-XX:+UseSerialGC", "-XX:+UseZGC", "-XX:+UseShenandoahGC"] {
        let r = run_matrix(&java(), &s.0, &[gc, "-Xmx512m"], &["2"], gc);
        check_sites(&r, gc, 1.5);
    }
}

#[test]
fn interpreter_only_and_compile_first_with_every_event_on() {
    let s = Scratch::new("matrix-modes");
    compile(&s.0, &["Matrix.java"]);
    for mode in ["-Xint", "-Xcomp"] {
        let r = run_matrix(&java(), &s.0, &[mode], &["2"], mode);
        check_sites(&r, mode, 1.5);
    }
}

#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn virtual_threads_with_every_event_on() {
    let jdks = extra_jdks();
    let s = Scratch::new("matrix-virtual");
    compile(&s.0, &["Matrix.java"]);
    let mut tried = 0;
    for home in &jdks {
        let java = home.join("bin/java");
        let major = java_major(&java);
        if major < 21 {
            continue;
        }
        tried += 1;
        let label = format!("JDK {major} virtual threads");
        let r = run_matrix(&java, &s.0, &["-Xmx1g"], &["3", "virtual"], &label);
        let started: u64 = r.stdout.lines().find_map(|l| l.strip_prefix("VIRTUAL ")).and_then(|n| n.trim().parse().ok()).unwrap_or(0);
        assert!(started >= 10_000, "{label}: {started} virtual threads");
        // Few walks fail, virtual threads included. On JDK 21 the own walk
        // leaves about a tenth of the virtual threads' samples to
        // AsyncGetCallTrace (mostly where frames are still frozen), and a
        // few of its stacks skip frames a virtual thread's stack must have
        // (counted as failed since session 32): 0.04-0.16% on a quiet
        // machine, 0.47% in one CI run on a loaded 2-core machine (session
        // 33). On JDK 25 (no own walk: AsyncGetCallTrace, which ends some
        // virtual threads' stacks at Continuation.enter or skips frames
        // above it) 1.4-3.3%.
        let limit = if major >= 25 { 5.0 } else { 1.0 };
        check_sites(&r, &label, limit);
        // The virtual threads' own frames sit above their carrier's: the
        // whole way down to VirtualThread.run, or, where HotSpot has not
        // thawed the lower frames yet, above a marker saying so (never as if
        // Continuation.enterSpecial called the top frames).
        let work = samples_with(&r.cpu, "Matrix.work");
        let whole = |st: &Vec<String>| st.iter().any(|f| f == "java.lang.VirtualThread.run");
        let frozen = |st: &Vec<String>| st.iter().any(|f| f == "[frames still frozen in the continuation]");
        let mounted: u64 = r.cpu.iter().filter(|(st, _)| st.iter().any(|f| f == "Matrix.work") && (whole(st) || frozen(st))).map(|(_, n)| n).sum();
        let marked: u64 = r.cpu.iter().filter(|(st, _)| st.iter().any(|f| f == "Matrix.work") && frozen(st)).map(|(_, n)| n).sum();
        eprintln!("{label}: {mounted} of {work} Matrix.work samples above the carrier, {marked} of them above the frozen-frames marker");
        for (st, _) in r.cpu.iter().filter(|(st, _)| frozen(st)) {
            let at = st.iter().position(|f| f.starts_with("[frames still frozen")).unwrap();
            assert!(at > 0 && st[at - 1] == "jdk.internal.vm.Continuation.enterSpecial", "{label}: marker not under enterSpecial: {st:?}");
        }
        let mut elsewhere: Vec<&(Vec<String>, u64)> =
            r.cpu.iter().filter(|(st, _)| st.iter().any(|f| f == "Matrix.work") && !whole(st) && !frozen(st)).collect();
        elsewhere.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        let shown: Vec<String> = elsewhere.iter().take(5).map(|(st, n)| format!("{n} ...{}", st[st.len().saturating_sub(12)..].join(";"))).collect();
        assert!(mounted as f64 >= 0.9 * work as f64, "{label}: {mounted} of {work} Matrix.work samples under VirtualThread.run; others:\n{}", shown.join("\n"));
    }
    assert!(tried >= 2, "no JDK 21+ among OXPROF_EXTRA_JDKS ({jdks:?})");
}

#[test]
fn beside_a_full_jfr_recording_and_the_debugger_agent() {
    // JFR with every event on (settings=profile) and JDWP, a second JVMTI
    // agent, in the same JVM as oxprof with every event on: both recordings
    // whole, the debugger listening, the program's sites in every profile.
    let s = Scratch::new("matrix-neighbours");
    compile(&s.0, &["Matrix.java"]);
    let jfr = s.path("jdk.jfr");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let start_jfr = format!("-XX:StartFlightRecording=filename={},settings=profile", jfr.display());
    let jdwp = format!("-agentlib:jdwp=transport=dt_socket,server=y,suspend=n,address=127.0.0.1:{port}");
    let r = run_matrix(&java(), &s.0, &[&start_jfr, &jdwp], &["2"], "jfr+jdwp");
    check_sites(&r, "beside JFR and JDWP", 1.5);
    assert!(r.stdout.contains("Listening for transport dt_socket"), "JDWP did not start: {}", r.stdout);
    let summary = Command::new(tool("jfr")).arg("summary").arg(&jfr).output().unwrap();
    let text_summary = text(&summary.stdout);
    assert!(summary.status.success(), "the JDK's recording: {}", text(&summary.stderr));
    for event in ["jdk.ExecutionSample", "jdk.ObjectAllocationSample", "jdk.JavaMonitorEnter"] {
        let count: u64 = text_summary
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{event} ")))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(count > 0, "the JDK's own recording has no {event} beside oxprof:\n{text_summary}");
    }
}
