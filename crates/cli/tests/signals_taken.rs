//! oxprof's sampling signals and the wall sampler's lifetime, end to end:
//! - an application that takes a signal oxprof samples with (its own
//!   `sun.misc.Signal` handler, installed mid-run) gets a warning naming the
//!   signal and the engine, and is not flooded with oxprof's signals
//!   afterwards; the summary says `signal_taken=`;
//! - a long wall-clock interval neither holds the JVM at exit nor loses
//!   the profile;
//! - the CPU start line says why perf_events was not used.

mod common;

use common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `java` with the agent on `opts` and `args`, killing it (and
/// failing) if it has not exited within `limit`; returns its output and
/// how long it ran.
fn run_with_limit(
    dir: &std::path::Path,
    env: &[(&str, &str)],
    opts: &str,
    jvm_args: &[&str],
    args: &[&str],
    limit: Duration,
) -> (std::process::Output, Duration) {
    let started = Instant::now();
    let mut child = Command::new(java())
        .current_dir(dir)
        .envs(env.iter().copied())
        .arg(format!("-agentpath:{}={opts}", agent().display()))
        .args(jvm_args)
        .arg("-cp")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start java");
    // Drain the pipes meanwhile, so a chatty JVM never blocks on them.
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut out, &mut v).unwrap();
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut err, &mut v).unwrap();
        v
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let err = err_reader.join().unwrap();
            panic!("the JVM ({opts}) had not exited after {limit:?}: {}", text(&err));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = started.elapsed();
    let output = std::process::Output { status, stdout: out_reader.join().unwrap(), stderr: err_reader.join().unwrap() };
    (output, elapsed)
}

/// The `HANDLED total=N late=M` line of SigTaker.
fn handled(stdout: &str) -> (u64, u64) {
    let line = stdout.lines().find_map(|l| l.strip_prefix("HANDLED ")).unwrap_or_else(|| panic!("no HANDLED line in: {stdout}"));
    let field = |k: &str| line.split_whitespace().find_map(|kv| kv.strip_prefix(k)).unwrap().parse::<u64>().unwrap();
    (field("total="), field("late="))
}

/// The application takes SIGPROF from the ctimer engine 0.5 s into the
/// run. Before the fix its handler received every timer signal of both
/// busy threads (2 × 100 a second at 10 ms, some 300 in the 1.5 s after
/// the first half second) while oxprof recorded nothing and said nothing.
#[test]
fn an_application_that_takes_sigprof_gets_a_warning_and_no_flood() {
    let s = Scratch::new("sig-prof");
    compile(&s.0, &["SigTaker.java"]);
    let out = s.path("p.collapsed");
    let opts = format!("start,event=ctimer,interval=10ms,file={}", out.display());
    let (o, _) = run_with_limit(&s.0, &[], &opts, &[], &["SigTaker", "PROF", "0.5", "2"], Duration::from_secs(120));
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    let warning = err.lines().find(|l| l.contains("another handler replaced oxprof's SIGPROF handler")).unwrap_or_else(|| panic!("no warning: {err}"));
    assert!(warning.starts_with("[oxprof] warning:") && warning.contains("CPU samples stopped (engine ctimer)"), "{warning}");
    assert_eq!(summary(&err).get("signal_taken").map(String::as_str), Some("SIGPROF"), "{err}");
    let (total, late) = handled(&stdout);
    eprintln!("the application's SIGPROF handler got {total} signals, {late} of them after its first 0.5 s");
    assert!(late <= 5, "oxprof kept sending SIGPROF to the application's handler: {late} late signals ({total} in all)");
    assert!(total <= 60, "{total} signals reached the application's handler");
    // The samples from before the handler was taken are kept.
    assert!(total_samples(&out) > 10, "{err}");
}

/// The same with the wall sampler's SIGVTALRM, beside a CPU recording,
/// which goes on. Before the fix, the wall samples stopped without a word
/// and the application's handler got 100 signals a second per busy thread.
#[test]
fn an_application_that_takes_the_wall_signal_gets_a_warning_and_no_flood() {
    let s = Scratch::new("sig-wall");
    compile(&s.0, &["SigTaker.java"]);
    let out = s.path("w.collapsed");
    let opts = format!("start,event=cpu,wall=10ms,interval=10ms,file={}", out.display());
    let (o, _) = run_with_limit(&s.0, &[], &opts, &[], &["SigTaker", "VTALRM", "0.5", "2"], Duration::from_secs(120));
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    let warning = err.lines().find(|l| l.contains("another handler replaced oxprof's SIGVTALRM handler")).unwrap_or_else(|| panic!("no warning: {err}"));
    assert!(warning.contains("wall-clock samples stopped (engine wall)"), "{warning}");
    let wall = summary_fields(&err, "[oxprof] wall summary:");
    assert_eq!(wall.get("signal_taken").map(String::as_str), Some("SIGVTALRM"), "{err}");
    assert!(!summary(&err).contains_key("signal_taken"), "the CPU engine's signal was not taken: {err}");
    let (total, late) = handled(&stdout);
    eprintln!("the application's SIGVTALRM handler got {total} signals, {late} of them after its first 0.5 s");
    assert!(late <= 5, "oxprof kept sending SIGVTALRM to the application's handler: {late} late signals ({total} in all)");
    // Until the agent notices, ticks go on: every thread whose CPU time
    // moved (two burners and the JVM's own) at ticks drawn from 5 to 15 ms.
    // A clean-clone CI run saw 62; a flood would be 400 (2 s, 2 burners).
    assert!(total <= 120, "{total} signals reached the application's handler");
    // CPU sampling goes on for the whole run: both threads burn 2.5 s.
    let burner = samples_with(&read_collapsed(&out), "SigTaker.burn");
    assert!(burner > 50, "{burner} CPU samples in SigTaker.burn: {err}");
}

fn total_samples(path: &std::path::Path) -> u64 {
    total(&read_collapsed(path))
}

/// A minute's wall-clock interval and a program of a third of a second:
/// the JVM exits at once and writes its profile. Before the fix the
/// sampler slept between its groups of threads for a third of the
/// interval in one piece (20 s), and the JVM waited for it at exit.
#[test]
fn a_long_wall_interval_does_not_hold_the_jvm_at_exit() {
    let s = Scratch::new("sig-wall-long");
    compile(&s.0, &["Hot.java"]);
    let out = s.path("long.collapsed");
    let opts = format!("start,event=wall,interval=60s,file={}", out.display());
    let (o, took) = run_with_limit(&s.0, &[], &opts, &[], &["Hot", "0.3"], Duration::from_secs(90));
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(text(&o.stdout).contains("done"), "{err}");
    eprintln!("the JVM ran {took:?}");
    assert!(took < Duration::from_secs(8), "the JVM took {took:?} to run 0.3 s of work and exit: {err}");
    assert!(out.is_file(), "no profile written: {err}");
    assert!(err.contains("[oxprof] wall summary:"), "{err}");
}

/// With perf_events turned off, `event=cpu` falls back to ctimer, and the
/// start line itself (which `oxprof attach` shows, unlike the log) says why.
#[test]
fn the_start_line_says_why_perf_events_was_not_used() {
    let s = Scratch::new("sig-fallback");
    compile(&s.0, &["Hot.java"]);
    let out = s.path("f.collapsed");
    let opts = format!("start,event=cpu,interval=10ms,file={}", out.display());
    let (o, _) = run_with_limit(&s.0, &[("OXPROF_DISABLE_PERF_EVENTS", "1")], &opts, &[], &["Hot", "0.3"], Duration::from_secs(60));
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let line = err.lines().find(|l| l.contains("started cpu profiling:")).unwrap_or_else(|| panic!("no start line: {err}"));
    assert!(line.contains("(ctimer)") && line.contains("instead of perf_events [perf_events disabled by OXPROF_DISABLE_PERF_EVENTS]"), "{line}");
}
