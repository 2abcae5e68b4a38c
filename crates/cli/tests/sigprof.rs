//! oxprof beside JDK 25's own CPU-time sampler (JFR's `jdk.CPUTimeSample`,
//! JEP 509), which signals with SIGPROF from per-thread timers: each
//! profiler keeps its own signals, both profiles stay right, and SIGPROF is
//! given back when oxprof stops. Needs the JDK 25 runtime that
//! `scripts/test.sh` installs and lists in OXPROF_EXTRA_JDKS.

mod common;

use common::*;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

fn jdk25() -> PathBuf {
    extra_jdks()
        .into_iter()
        .find(|h| text(&Command::new(h.join("bin/java")).arg("-version").output().unwrap().stderr).contains("version \"25"))
        .expect("no JDK 25 runtime in OXPROF_EXTRA_JDKS")
}

/// The number of `jdk.CPUTimeSample` events in a recording, by JDK 25's `jfr summary`.
fn cpu_time_samples(home: &Path, rec: &Path) -> u64 {
    let o = Command::new(home.join("bin/jfr")).arg("summary").arg(rec).output().unwrap();
    assert!(o.status.success(), "jfr summary {}: {}", rec.display(), text(&o.stderr));
    let out = text(&o.stdout);
    out.lines()
        .find_map(|l| l.split_whitespace().collect::<Vec<_>>().get(..2).filter(|f| f[0] == "jdk.CPUTimeSample").map(|f| f[1].parse().unwrap()))
        .unwrap_or_else(|| panic!("no jdk.CPUTimeSample line in:\n{out}"))
}

/// `java` from JDK 25 running `CpuBurn SECONDS` with a JFR recording of
/// `jdk.CPUTimeSample` into `rec`, plus `extra` JVM options. The JVM's
/// warnings and errors go to stderr.
fn burn_with_jfr(home: &Path, dir: &Path, rec: &Path, extra: &[String], seconds: &str) -> Command {
    let mut cmd = Command::new(home.join("bin/java"));
    cmd.args(["-Xlog:disable", "-Xlog:all=warning:stderr", "-XX:+EnableDynamicAgentLoading"])
        .arg(format!("-XX:StartFlightRecording=filename={},jdk.CPUTimeSample#enabled=true", rec.display()))
        .args(extra)
        .args(["-cp", dir.to_str().unwrap(), "CpuBurn", seconds]);
    cmd
}

/// Starts `cmd` in `dir` and waits for the program's "ready" line; JFR
/// prints its start-up lines before it on stdout. Reads byte by byte, so
/// nothing after that line is taken from the pipe.
fn spawn(mut cmd: Command, dir: &Path) -> RunningJvm {
    use std::process::Stdio;
    let child = cmd.current_dir(dir).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start java");
    let mut jvm = RunningJvm { child };
    let (mut seen, mut byte) = (Vec::new(), [0u8]);
    while !seen.ends_with(b"ready\n") {
        let n = jvm.child.stdout.as_mut().unwrap().read(&mut byte).unwrap();
        assert_eq!(n, 1, "the JVM ended before its ready line: {}", text(&seen));
        seen.push(byte[0]);
    }
    jvm
}

/// Waits for the JVM to exit and returns its stdout after the ready line, and its stderr.
fn finish(mut jvm: RunningJvm) -> (String, String) {
    let (mut out, mut err) = (String::new(), String::new());
    jvm.child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    jvm.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(jvm.child.wait().unwrap().success(), "the JVM failed: {err}");
    (out, err)
}

fn assert_near(what: &str, got: f64, want: f64, tolerance: f64) {
    assert!((got - want).abs() <= want * tolerance, "{what}: {got:.0}, expected {want:.0} ± {:.0}%", tolerance * 100.0);
}

#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn jfr_cpu_time_samples_and_oxprof_keep_their_own_sigprofs() {
    let home = jdk25();
    let s = Scratch::new("sigprof");
    compile(&s.0, &["CpuBurn.java"]);
    let interval_ms = 10;

    // JFR alone: how many CPU-time samples 6 s of CPU give.
    let rec = s.path("alone.jfr");
    let (_, err) = finish(spawn(burn_with_jfr(&home, &s.0, &rec, &[], "6"), &s.0));
    assert!(!err.contains("Conflicting SIGPROF handler"), "{err}");
    let alone = cpu_time_samples(&home, &rec);
    eprintln!("JFR alone: {alone} CPU-time samples");
    assert!(alone > 500, "JFR alone recorded only {alone} CPU-time samples");

    // JFR from the start; oxprof attached for 3 s in the middle, with each
    // engine that signals with SIGPROF: JFR's handler is in place first, so
    // oxprof's hands it JFR's signals and gives SIGPROF back at the end.
    for (event, env) in [("ctimer", None), ("cpu", Some(("OXPROF_PERF_SIGNAL", "prof"))), ("itimer", None)] {
        let rec = s.path(&format!("{event}.jfr"));
        let mut cmd = burn_with_jfr(&home, &s.0, &rec, &[], "6");
        cmd.envs(env);
        let jvm = spawn(cmd, &s.0);
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let out = s.path(&format!("{event}.collapsed"));
        let before = process_cpu_ms(jvm.pid());
        let o = oxprof_cmd()
            .args(["attach", &jvm.pid().to_string(), "--duration", "3s", "-e", event, "-i", &format!("{interval_ms}ms"), "-o", out.to_str().unwrap()])
            .output()
            .unwrap();
        let cpu = process_cpu_ms(jvm.pid()) - before;
        assert!(o.status.success(), "{event}: {}", text(&o.stderr));
        assert!(text(&o.stderr).contains("(SIGPROF)"), "{event}: not the SIGPROF route: {}", text(&o.stderr));
        let (_, err) = finish(jvm);
        let jfr = cpu_time_samples(&home, &rec);
        let sampled_ms = total(&read_collapsed(&out)) * interval_ms;
        eprintln!("{event}: JFR {jfr} CPU-time samples; oxprof {sampled_ms} ms sampled, {cpu} ms of process CPU during the attach");
        assert!(!err.contains("Conflicting SIGPROF handler"), "{event}: {err}");
        assert_near(&format!("{event}: JFR's CPU-time samples beside oxprof"), jfr as f64, alone as f64, 0.2);
        assert_near(&format!("{event}: oxprof's sampled CPU ms"), sampled_ms as f64, cpu as f64, 0.25);
    }

    // oxprof from the start with perf_events over SIGTRAP (the default on
    // Linux 5.13+) does not take SIGPROF at all: JFR's sampler starts beside it.
    if kernel_at_least(5, 13) {
        let (rec, out) = (s.path("trap.jfr"), s.path("trap.collapsed"));
        let agent_opt = format!("-agentpath:{}=start,event=cpu,interval={interval_ms}ms,file={}", agent().display(), out.display());
        let (stdout, err) = finish(spawn(burn_with_jfr(&home, &s.0, &rec, &[agent_opt], "6"), &s.0));
        assert!(err.contains("(SIGTRAP)"), "{err}");
        assert!(!err.contains("Conflicting SIGPROF handler"), "{err}");
        let jfr = cpu_time_samples(&home, &rec);
        let cpu_ns: f64 = stdout.lines().find_map(|l| l.strip_prefix("CPU_NS ")).expect("CPU_NS line").parse().unwrap();
        let burn_ms = (samples_with(&read_collapsed(&out), "CpuBurn.main") * interval_ms) as f64;
        eprintln!("perf_events over SIGTRAP: JFR {jfr} CPU-time samples; oxprof {burn_ms} ms in CpuBurn.main, which measured {:.0} ms", cpu_ns / 1e6);
        assert_near("JFR's CPU-time samples beside oxprof over SIGTRAP", jfr as f64, alone as f64, 0.2);
        assert_near("oxprof's CpuBurn.main ms", burn_ms, cpu_ns / 1e6, 0.15);
    }

    // oxprof's ctimer from the start, stopped after 1.5 s: SIGPROF is given
    // back, so JFR's sampler can start afterwards.
    let out = s.path("stopped.collapsed");
    let mut cmd = Command::new(home.join("bin/java"));
    cmd.args(["-Xlog:disable", "-Xlog:all=warning:stderr"]);
    cmd.arg(format!("-agentpath:{}=start,event=ctimer,interval={interval_ms}ms", agent().display())).args(["-cp", s.0.to_str().unwrap(), "CpuBurn", "5"]);
    let jvm = spawn(cmd, &s.0);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let pid = jvm.pid().to_string();
    let o = oxprof_cmd().args(["attach", &pid, "stop", "-o", out.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "stop: {}", text(&o.stderr));
    let rec = s.path("after.jfr");
    let o = Command::new(home.join("bin/jcmd"))
        .args([&pid, "JFR.start", &format!("filename={}", rec.display()), "jdk.CPUTimeSample#enabled=true"])
        .output()
        .unwrap();
    assert!(o.status.success(), "JFR.start: {}", text(&o.stderr));
    let (_, err) = finish(jvm);
    assert!(!err.contains("Conflicting SIGPROF handler"), "JFR found oxprof's handler after oxprof stopped: {err}");
    let jfr = cpu_time_samples(&home, &rec);
    eprintln!("JFR started after oxprof stopped: {jfr} CPU-time samples");
    assert!(jfr > 100, "JFR recorded {jfr} CPU-time samples after oxprof stopped");
}
