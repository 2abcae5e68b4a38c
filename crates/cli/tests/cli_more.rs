//! The CLI's own checks and its behaviour at the edges: outputs that would
//! overwrite an input, a JVM that exits during `attach --duration`, flags an
//! attach action would ignore, closed or full stdout and stderr, flag errors
//! found before a JVM starts, and the smaller checks of convert, diff and
//! report.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn run(args: &[&str]) -> Output {
    oxprof_cmd().args(args).output().unwrap()
}

/// The command failed with exit code 2 and one line on stderr holding every
/// piece of `wanted`; returns that line.
fn one_line_error(o: &Output, wanted: &[&str]) -> String {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "exit code; stderr:\n{err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line expected:\n{err}");
    for w in wanted {
        assert!(lines[0].contains(w), "{w:?} missing in: {}", lines[0]);
    }
    assert!(!err.contains("panicked"), "{err}");
    lines[0].to_string()
}

/// A JFR recording of CPU and allocation samples (Convert, half a second of
/// CPU), made once for the tests of this file.
fn recording() -> &'static Path {
    static REC: OnceLock<PathBuf> = OnceLock::new();
    REC.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("oxprof-test-{}-cli-more-rec", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        compile(&dir, &["Convert.java"]);
        let rec = dir.join("rec.jfr");
        let o = run_java(&dir, &format!("start,event=cpu,alloc=64k,interval=2ms,file={}", rec.display()), &[], &dir, &["Convert", "0.5"]);
        assert!(o.status.success() && rec.is_file(), "{}", text(&o.stderr));
        rec
    })
}

/// A copy of the shared recording in `s`.
fn copy_of_recording(s: &Scratch, name: &str) -> PathBuf {
    let p = s.path(name);
    std::fs::copy(recording(), &p).unwrap();
    p
}

// 1. convert and diff never write over their input.

#[test]
fn convert_and_diff_never_overwrite_an_input() {
    let s = Scratch::new("no-overwrite");
    let rec = copy_of_recording(&s, "k2.jfr");
    let original = std::fs::read(&rec).unwrap();
    let r = rec.to_str().unwrap();
    // The output named as the input, as text and as collapsed stacks (which
    // would also have written k2.jfr.alloc beside it).
    one_line_error(&run(&["convert", r, "-o", r, "--format", "text", "--cpu"]), &["-o ", "k2.jfr", "input"]);
    one_line_error(&run(&["convert", r, "-o", r, "--format", "collapsed"]), &["-o ", "input"]);
    assert!(!s.path("k2.jfr.alloc").exists(), "a side file was written");
    // Another name for the same file (a hard link).
    let link = s.path("link.collapsed");
    std::fs::hard_link(&rec, &link).unwrap();
    one_line_error(&run(&["convert", r, "-o", link.to_str().unwrap()]), &["-o ", "input"]);
    // A side file (the second kind's, out.alloc.collapsed) that is the input.
    let side = s.path("out.alloc.collapsed");
    std::fs::hard_link(&rec, &side).unwrap();
    one_line_error(&run(&["convert", r, "-o", s.path("out.collapsed").to_str().unwrap()]), &["side file", "out.alloc.collapsed", "input"]);
    assert!(!s.path("out.collapsed").exists(), "the first file was written before the refusal");
    assert_eq!(std::fs::read(&rec).unwrap(), original, "the recording changed");

    // diff: the output is either input.
    let a = s.path("a.collapsed");
    let b = s.path("b.collapsed");
    std::fs::write(&a, "main;x 60\nmain;y 40\n").unwrap();
    std::fs::write(&b, "main;x 20\nmain;y 80\n").unwrap();
    for out in [&a, &b] {
        let o = run(&["diff", a.to_str().unwrap(), b.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        one_line_error(&o, &["-o ", "input"]);
    }
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "main;x 60\nmain;y 40\n");
    assert_eq!(std::fs::read_to_string(&b).unwrap(), "main;x 20\nmain;y 80\n");
    // And a fresh output still works.
    let o = run(&["diff", a.to_str().unwrap(), b.to_str().unwrap(), "-o", s.path("d.collapsed").to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

// 2. A JVM that exits during `attach --duration`.

#[test]
fn attach_duration_notices_the_jvm_exit_and_says_where_the_profile_went() {
    let s = Scratch::new("attach-exit");
    compile(&s.0, &["SpinUntilEof.java"]);
    let mut jvm = RunningJvm::spawn(java_cmd(["-cp", s.0.to_str().unwrap(), "SpinUntilEof"]), &s.0, "ready");
    let pid = jvm.pid();
    let out = s.path("x.collapsed");
    let mut cli = oxprof_cmd()
        .current_dir(&s.0)
        .args(["attach", &pid.to_string(), "--duration", "30s", "--interval", "2ms", "-o", out.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let cli_pid = cli.id();
    let lines = stderr_lines(&mut cli);
    // The start's reply, then half a second of profiling, then the JVM ends.
    let first = lines.recv_timeout(Duration::from_secs(30)).expect("the start's reply");
    std::thread::sleep(Duration::from_millis(500));
    drop(jvm.child.stdin.take());
    let ended = Instant::now();
    let status = loop {
        if let Some(st) = cli.try_wait().unwrap() {
            break st;
        }
        assert!(ended.elapsed() < Duration::from_secs(10), "oxprof still waits after the JVM exited");
        std::thread::sleep(Duration::from_millis(50));
    };
    // The process has exited, but the reader thread may not have passed on its
    // last lines yet: read until the stream closes.
    let mut err = vec![first];
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(10)) {
        err.push(line);
    }
    let err = err.join("\n");
    assert!(ended.elapsed() < Duration::from_secs(5), "noticed after {:?}:\n{err}", ended.elapsed());
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(err.contains(&format!("JVM {pid} exited")), "{err}");
    assert!(err.contains(&format!("profile written to {}", out.display())), "{err}");
    assert!(!err.contains("no process with pid"), "{err}");
    assert!(samples_with(&read_collapsed(&out), "SpinUntilEof.spin") > 0, "the profile lacks the program's method");
    let status_file = PathBuf::from(format!("/tmp/oxprof-status-{cli_pid}-{pid}"));
    assert!(!status_file.exists(), "{} left behind", status_file.display());
}

// 3. Flags an attach action would ignore.

#[test]
fn attach_actions_refuse_flags_they_would_ignore() {
    // Refused before any JVM is reached: the pid need not be a JVM's.
    let pid = std::process::id().to_string();
    let e = one_line_error(&run(&["attach", &pid, "start", "--duration", "2s", "-o", "x.html"]), &["--duration", "cannot be used with start"]);
    assert!(e.contains(&format!("oxprof attach {pid} --duration 2s")), "{e}");
    one_line_error(&run(&["attach", &pid, "status", "--duration", "5s"]), &["--duration", "status"]);
    one_line_error(&run(&["attach", &pid, "stop", "--interval", "1ms", "--event", "wall"]), &["--event/--interval apply to start, not to stop"]);
    one_line_error(&run(&["attach", &pid, "dump", "--alloc", "-o", "x.html"]), &["--alloc apply to start, not to dump"]);
    one_line_error(&run(&["attach", &pid, "status", "-o", "x.html"]), &["-o", "status"]);
    one_line_error(&run(&["attach", &pid, "start", "-o", "x.weird"]), &["-o x.weird", "cannot tell the format", "--format"]);
}

// 4. A closed or full stdout or stderr.

#[test]
fn a_full_stdout_is_one_error_line_not_a_panic() {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let o = oxprof_cmd().arg("list").stdout(full).output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot write to stdout"), "{err}");
    // A reader that goes away ends the output quietly.
    let mut child = oxprof_cmd().arg("list").stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success() && !text(&o.stderr).contains("panicked"), "{}", text(&o.stderr));
}

#[test]
fn record_passes_on_the_exit_code_when_its_stderr_is_closed() {
    let s = Scratch::new("closed-stderr");
    compile(&s.0, &["ExitsWith.java"]);
    let out = s.path("x.html");
    // oxprof's stderr is a pipe whose reader has gone.
    let script = format!(
        "{} record -o {} -- {} -cp {} ExitsWith 3 2>&1 >/dev/null | head -c0; echo \"status=${{PIPESTATUS[0]}}\"",
        oxprof().display(),
        out.display(),
        java().display(),
        s.0.display()
    );
    let o = Command::new("bash").arg("-c").arg(&script).env("OXPROF_AGENT", agent()).current_dir(&s.0).output().unwrap();
    let said = text(&o.stdout);
    assert!(said.contains("status=3"), "not the program's exit code: {said} {}", text(&o.stderr));
    assert!(out.is_file(), "no profile written");
}

// 5. Flag errors found before a JVM starts.

#[test]
fn record_refuses_an_output_it_cannot_name_before_starting_the_program() {
    let s = Scratch::new("weird-output");
    // Were the program started, it would leave a file.
    let o = oxprof_cmd().current_dir(&s.0).args(["record", "-o", "x.weird", "--", "/bin/sh", "-c", "touch started"]).output().unwrap();
    one_line_error(&o, &["-o x.weird", ".html", "--format"]);
    assert!(!s.path("started").exists(), "the program was started");
    let o = oxprof_cmd().current_dir(&s.0).args(["record", "-o", "/nonexistent-dir/x.html", "--", "/bin/sh", "-c", "touch started"]).output().unwrap();
    one_line_error(&o, &["-o /nonexistent-dir/x.html", "does not exist"]);
    assert!(!s.path("started").exists(), "the program was started");
    // clap's refusals name the flag (and exit 2, the program unstarted).
    for (args, flag) in [
        (&["record", "--live", "--live-budget", "1k", "--", "/bin/sh", "-c", "touch started"][..], "--live-budget"),
        (&["record", "--begin", "foo", "--", "/bin/sh", "-c", "touch started"][..], "--end"),
        (&["demo", "-i", "0"][..], "--interval"),
        (&["demo", "-i", "50us"][..], "--interval"),
    ] {
        let o = oxprof_cmd().current_dir(&s.0).args(args).output().unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(flag) && err.starts_with("error: "), "{args:?}: {err}");
        assert!(!err.contains("compiling"), "{args:?}: the demo was compiled first: {err}");
    }
    assert!(!s.path("started").exists(), "the program was started");
}

// 6. The smaller checks.

#[test]
fn times_of_day_must_be_times_of_day() {
    let r = recording().to_str().unwrap();
    one_line_error(&run(&["report", r, "--from", "25:00:00"]), &["--from", "not a time of day"]);
}

#[test]
fn kind_flags_cannot_select_from_collapsed_stacks() {
    let s = Scratch::new("collapsed-kinds");
    let c = s.path("rec.collapsed");
    std::fs::write(&c, "main;a 60\nmain;b 40\n").unwrap();
    let c = c.to_str().unwrap();
    let out = s.path("x.collapsed");
    one_line_error(&run(&["convert", c, "--alloc", "-o", out.to_str().unwrap()]), &["--alloc", "counts only"]);
    one_line_error(&run(&["report", c, "--wall"]), &["--wall", "counts only"]);
    // --cpu (what collapsed stacks are read as) compares.
    let o = run(&["diff", recording().to_str().unwrap(), c, "--cpu", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// `diff` of collapsed stacks beside a recording of several kinds: the kind
/// flag picks from the recording, the collapsed file is read as it is (an
/// allocation profile converted to collapsed stacks compares with the
/// recording's allocations, not with its CPU samples).
#[test]
fn diff_takes_the_kind_from_the_file_that_has_kinds() {
    let s = Scratch::new("diff-collapsed-kind");
    let r = recording().to_str().unwrap();
    let alloc = s.path("alloc.collapsed");
    let o = run(&["convert", r, "--alloc", "-o", alloc.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = s.path("d.collapsed");
    for (before, after) in [(alloc.to_str().unwrap(), r), (r, alloc.to_str().unwrap())] {
        let o = run(&["diff", before, after, "--alloc", "-o", out.to_str().unwrap()]);
        assert!(o.status.success() && text(&o.stderr).contains("alloc samples compared"), "{}", text(&o.stderr));
        // The same samples on both sides: every stack's two counts equal.
        let diff = std::fs::read_to_string(&out).unwrap();
        assert!(diff.lines().count() > 1, "{diff}");
        for line in diff.lines() {
            let mut it = line.rsplitn(3, ' ');
            let (a, b) = (it.next().unwrap(), it.next().unwrap());
            assert_eq!(a, b, "{line}");
        }
    }
}

#[test]
fn diff_of_several_kinds_says_which_to_compare() {
    let s = Scratch::new("diff-kinds");
    let r = recording().to_str().unwrap();
    let out = s.path("d.collapsed");
    one_line_error(&run(&["diff", r, r, "-o", out.to_str().unwrap()]), &["several kinds", "cpu, alloc", "--cpu, --alloc"]);
    let o = run(&["diff", r, r, "--alloc", "-o", out.to_str().unwrap()]);
    assert!(o.status.success() && text(&o.stderr).contains("alloc samples compared"), "{}", text(&o.stderr));
    one_line_error(&run(&["diff", r, r, "--alloc", "--cpu", "-o", out.to_str().unwrap()]), &["one kind"]);
}

#[test]
fn binary_output_to_a_terminal_is_refused() {
    let s = Scratch::new("binary-tty");
    let r = recording().to_str().unwrap();
    // `script` gives the command a terminal for its stdout.
    let cmd = format!("OXPROF_AGENT={} {} convert {r} --cpu --format pprof -o -; echo status=$?", agent().display(), oxprof().display());
    let o = Command::new("script").args(["-qec", &cmd, "/dev/null"]).current_dir(&s.0).stdin(Stdio::null()).output().unwrap();
    let said = text(&o.stdout);
    assert!(said.contains("binary output") && said.contains("terminal") && said.contains("status=2"), "{said}");
    assert!(said.len() < 2000, "binary written to the terminal: {} bytes", said.len());
}

#[test]
fn report_top_must_be_at_least_one() {
    let o = run(&["report", recording().to_str().unwrap(), "--top", "0"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--top") && err.contains("at least 1"), "{err}");
    assert!(o.stdout.is_empty(), "tables printed: {}", text(&o.stdout));
}

#[test]
fn help_texts_keep_examples_whole_and_state_defaults() {
    let o = oxprof_cmd().args(["record", "--help"]).env("COLUMNS", "80").output().unwrap();
    let help = text(&o.stdout);
    for line in help.lines().filter(|l| l.trim_start().starts_with("oxprof record")) {
        assert!(line.ends_with("MyMain") || line.ends_with("app.jar"), "an example cut: {line:?}\n{help}");
    }
    let help = text(&oxprof_cmd().args(["attach", "--help"]).output().unwrap().stdout);
    assert!(help.contains("profile.html in this directory") && help.contains("oxprof-<pid>.html"), "{help}");
    assert!(help.contains("[default: 10ms"), "{help}");
    assert!(help.contains("--agent-opts"), "{help}");
    let help = text(&oxprof_cmd().args(["diff", "--help"]).output().unwrap().stdout);
    assert!(help.contains("The baseline") && help.contains("compared with BEFORE"), "{help}");
}

/// The lock report's "by self" column and its "waited in" column name the
/// same innermost Java method: a `native` one (`Unsafe.park`) included.
#[test]
fn lock_report_columns_agree_on_the_innermost_java_method() {
    let s = Scratch::new("lock-self");
    compile(&s.0, &["LockContention.java"]);
    let rec = s.path("l.jfr");
    let o = run_java(&s.0, &format!("event=lock,lock=0,file={}", rec.display()), &[], &s.0, &["LockContention", "1"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = run(&["report", rec.to_str().unwrap(), "--lock"]);
    let report = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let rows = |from: &str, to: &str| -> Vec<String> {
        report.lines().skip_while(|l| !l.contains(from)).skip(1).take_while(|l| !l.contains(to) && !l.trim().is_empty()).map(str::to_string).collect()
    };
    let by_self: Vec<String> = rows("by self", "by total").iter().filter_map(|l| l.split_whitespace().last().map(str::to_string)).collect();
    let waited_in: Vec<String> = rows("waited in", "\u{0}").iter().filter_map(|l| l.rsplit("<-  ").next().map(|s| s.trim().to_string())).collect();
    assert!(!waited_in.is_empty(), "{report}");
    for site in &waited_in {
        assert!(by_self.contains(site), "{site} waited in, but not a self method {by_self:?}:\n{report}");
    }
    assert!(by_self.iter().any(|m| m == "jdk.internal.misc.Unsafe.park"), "{report}");
}

/// Two runs of the same code compare stack by stack: what differs from run
/// to run without the code changing (the agent's ` tid=N` in thread roots,
/// the lambda counter of JDKs before 21, whether the JIT had compiled or
/// inlined a method yet) must not make `diff` show the same work as gone
/// from one side and new in the other.
#[test]
fn diff_of_two_runs_of_the_same_code_matches_their_stacks() {
    let s = Scratch::new("diff-runs");
    compile(&s.0, &["DiffRuns.java"]);
    let mut files = Vec::new();
    for (name, arg) in [("a", "same"), ("b", "flip")] {
        let out = s.path(&format!("{name}.collapsed"));
        let o = run_java(&s.0, &format!("start,event=cpu,interval=5ms,threads,file={}", out.display()), &[], &s.0, &["DiffRuns", arg]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        files.push(out);
    }
    let tids = |f: &Path| std::fs::read_to_string(f).unwrap().lines().filter(|l| l.starts_with("[worker tid=")).count();
    assert!(tids(&files[0]) > 0 && tids(&files[1]) > 0, "the worker's thread root should carry its tid");
    let d = s.path("d.collapsed");
    let o = run(&["diff", files[0].to_str().unwrap(), files[1].to_str().unwrap(), "-o", d.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // `stack before after` per stack; the worker's spin on both sides.
    let (mut both, mut one_side) = (0u64, 0u64);
    for line in std::fs::read_to_string(&d).unwrap().lines().filter(|l| l.contains("DiffRuns.spin")) {
        let mut it = line.rsplitn(3, ' ');
        let after: u64 = it.next().unwrap().parse().unwrap();
        let before: u64 = it.next().unwrap().parse().unwrap();
        if before > 0 && after > 0 {
            both += before + after;
        } else {
            one_side += before + after;
        }
    }
    // 1.5 s of spin at 5 ms in each run: up to 600 samples in all, fewer on
    // a busy machine. Rare leaves (a timer read caught in the vDSO) may sit
    // on one side only.
    assert!(both >= 60, "too few spin samples on both sides: {both} (one side only: {one_side})");
    assert!(one_side * 10 < both, "{one_side} spin samples on one side only, {both} on both:\n{}", std::fs::read_to_string(&d).unwrap());
}
