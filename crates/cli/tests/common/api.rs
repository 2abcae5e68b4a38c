//! Helpers for the Java API tests (`tests/java/ApiUser.java` driving
//! `oxprof.jar`), shared by `java_api.rs` and `jdks.rs`.

use super::*;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// What `ApiUser` printed: one entry per command ("OK ..." / "EXC ...") and
/// the library path of its `END` line.
pub struct Steps {
    pub replies: Vec<String>,
    pub library: String,
}

pub fn steps(stdout: &str) -> Steps {
    let replies = stdout.lines().filter(|l| l.starts_with("OK ") || l.starts_with("EXC ")).map(str::to_string).collect();
    let library = stdout.lines().find_map(|l| l.strip_prefix("END ")).unwrap_or_else(|| panic!("ApiUser did not finish:\n{stdout}")).to_string();
    Steps { replies, library }
}

/// `java JVM_ARGS -cp CP ApiUser ARGS` as a command. Without cargo's
/// LD_LIBRARY_PATH (the JVM adds it to java.library.path, where the test
/// build's liboxprof.so would be found).
pub fn api_user_cmd(java: &Path, jvm_args: &[String], cp: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(java);
    cmd.env_remove("LD_LIBRARY_PATH").args(jvm_args).args(["-cp", cp, "ApiUser"]).args(args);
    cmd
}

pub fn api_user(java: &Path, cwd: &Path, jvm_args: &[String], cp: &str, args: &[&str]) -> Output {
    api_user_cmd(java, jvm_args, cp, args).current_dir(cwd).output().expect("run java")
}

/// Starts `ApiUser` (with a `wait` step among its arguments) and returns it
/// with its output lines, read up to its first `ready`, and the replies
/// printed before.
pub fn spawn_until_ready(cmd: Command, cwd: &Path) -> (RunningJvm, Lines, Vec<String>) {
    let mut cmd = cmd;
    let child = cmd.current_dir(cwd).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start java");
    let mut jvm = RunningJvm { child };
    let mut lines = BufReader::new(jvm.child.stdout.take().unwrap()).lines();
    let replies = until_ready(&mut lines);
    (jvm, lines, replies)
}

pub type Lines = std::io::Lines<BufReader<std::process::ChildStdout>>;

/// The replies up to the next `ready` line.
pub fn until_ready(lines: &mut Lines) -> Vec<String> {
    let mut replies = Vec::new();
    for l in lines.by_ref() {
        let l = l.unwrap();
        if l == "ready" {
            return replies;
        }
        assert!(!l.starts_with("END "), "the program ended before waiting: {replies:?}");
        if l.starts_with("OK ") || l.starts_with("EXC ") {
            replies.push(l);
        }
    }
    panic!("the program ended before waiting: {replies:?}")
}

/// Lets the program go on and reads its replies to the end (or the next `ready`).
pub fn go_on(jvm: &mut RunningJvm, lines: &mut Lines) -> (Vec<String>, Option<String>) {
    writeln!(jvm.child.stdin.as_mut().unwrap()).unwrap();
    let mut replies = Vec::new();
    for l in lines.by_ref() {
        let l = l.unwrap();
        if l == "ready" {
            return (replies, None);
        }
        if let Some(end) = l.strip_prefix("END ") {
            return (replies, Some(end.to_string()));
        }
        if l.starts_with("OK ") || l.starts_with("EXC ") {
            replies.push(l);
        }
    }
    panic!("the program ended without its END line: {replies:?}; stderr: {}", text(&jvm.finish().stderr))
}

pub fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

pub fn library_property() -> String {
    format!("-Doxprof.library={}", agent().display())
}

/// A reply that starts with `prefix` (after "OK " or "EXC ").
#[track_caller]
pub fn expect(reply: &str, prefix: &str) {
    assert!(reply.starts_with(prefix), "expected {prefix:?}, got {reply:?}");
}

/// The share of samples in `ApiUser.apiHot` in a collapsed file, with the total.
pub fn hot_share(path: &Path) -> (f64, u64) {
    let stacks = read_collapsed(path);
    (share_with(&stacks, "ApiUser.apiHot"), total(&stacks))
}

/// The scenario run on every JDK: the jar alone loads the agent; bad
/// options and commands out of turn throw and the JVM goes on; start, dump
/// to a file, status and stop behave as through attach.
pub fn jar_alone_scenario(java: &Path, label: &str) {
    let s = Scratch::new("api-jar");
    compile_with_jar(&s.0, &["ApiUser.java"]);
    let (started, dumped) = (s.path("started.collapsed"), s.path("dumped.collapsed"));
    let start = format!("start,event=cpu,interval=2ms,file={}", started.display());
    let dump = format!("dump,file={}", dumped.display());
    let o = api_user(
        java,
        &s.0,
        &[library_property()],
        &with_jar(&s.0),
        &["status", "bogus", "event=cpu,interval=1", "stop", &start, "start", "burn:1.5", "status", &dump, "stop", "status"],
    );
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{label}: {out}\n{err}");
    let st = steps(&out);
    let r = &st.replies;
    assert_eq!(r.len(), 10, "{label}: {out}");
    expect(&r[0], "OK idle: profiling is not running");
    expect(&r[1], "EXC java.lang.IllegalArgumentException invalid agent option 'bogus': unknown option 'bogus'; accepted: start, stop");
    expect(&r[2], "EXC java.lang.IllegalArgumentException invalid agent option 'interval=1': the CPU interval must be at least 100us");
    expect(&r[3], "EXC java.lang.IllegalStateException profiling is not running; start it first");
    expect(&r[4], "OK started cpu profiling");
    expect(&r[5], "EXC java.lang.IllegalStateException profiling is already running; stop it first");
    expect(&r[6], "OK running: cpu");
    assert!(r[6].contains(&format!("output {}", started.display())), "{label}: {}", r[6]);
    assert!(r[7].contains(&format!("profile written to {}", dumped.display())), "{label}: {}", r[7]);
    assert!(r[8].contains(&format!("profile written to {}", started.display())), "{label}: {}", r[8]);
    expect(&r[9], "OK idle: profiling is not running");
    assert_eq!(canonical(Path::new(&st.library)), canonical(&agent()), "{label}");
    for file in [&dumped, &started] {
        let (share, n) = hot_share(file);
        eprintln!("{label}: {}: ApiUser.apiHot {:.1}% of {n} samples", file.display(), 100.0 * share);
        // 1.5 s of CPU at 2 ms: about 750 samples, nearly all in apiHot.
        assert!(n >= 200 && share >= 0.8, "{label}: {}: {n} samples, {:.1}% in ApiUser.apiHot", file.display(), 100.0 * share);
    }
    // The agent stays quiet on the JVM's console: the replies said it all.
    assert!(!err.contains("[oxprof]"), "{label}: {err}");
}

/// On `java`: the agent loaded by `-agentpath` (idle) is the one the API
/// drives: its status, a recording started and stopped from Java.
pub fn agentpath_status_scenario(java: &Path, label: &str) {
    let s = Scratch::new("api-agentpath-status");
    compile_with_jar(&s.0, &["ApiUser.java"]);
    let out = s.path("p.collapsed");
    let start = format!("start,interval=2ms,file={}", out.display());
    let o = api_user(java, &s.0, &[format!("-agentpath:{}", agent().display())], &with_jar(&s.0), &["status", &start, "burn:1", "status", "stop"]);
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{label}: {stdout}\n{err}");
    let st = steps(&stdout);
    expect(&st.replies[0], "OK idle: profiling is not running");
    expect(&st.replies[1], "OK started cpu profiling");
    expect(&st.replies[2], "OK running: cpu");
    assert!(st.replies[3].contains(&format!("profile written to {}", out.display())), "{label}: {stdout}");
    assert_eq!(canonical(Path::new(&st.library)), canonical(&agent()), "{label}");
    let (share, n) = hot_share(&out);
    assert!(n >= 100 && share >= 0.8, "{label}: {n} samples, {:.1}% in ApiUser.apiHot", 100.0 * share);
}

/// The samples whose stack holds `method`: (those carrying exactly the label
/// frames `want` and no other, all of them).
pub fn labels_of(stacks: &[(Vec<String>, u64)], method: &str, want: &[&str]) -> (u64, u64) {
    let mut all = 0;
    let mut ok = 0;
    for (st, n) in stacks.iter().filter(|(st, _)| st.iter().any(|f| f == method)) {
        all += n;
        let labels: Vec<&str> = st.iter().take_while(|f| f.starts_with('[') && f.contains('=')).map(String::as_str).collect();
        if labels == want {
            ok += n;
        }
    }
    (ok, all)
}

/// On `java`: `Labelled nested` (tests/java/Labelled.java) under a CPU
/// recording; each phase's samples carry exactly its labels (95%).
pub fn check_nested_labels(java: &Path, label: &str) {
    let s = Scratch::new("labels-nested");
    compile_with_jar(&s.0, &["Labelled.java"]);
    let out = s.path("n.collapsed");
    let o = Command::new(java)
        .current_dir(&s.0)
        .arg(format!("-agentpath:{}=start,event=cpu,interval=1ms,file={}", agent().display(), out.display()))
        .args(["-cp", &with_jar(&s.0), "Labelled", "nested", "0.5"])
        .output()
        .expect("run java");
    assert!(o.status.success(), "{label}: {}\n{}", text(&o.stdout), text(&o.stderr));
    let stacks = read_collapsed(&out);
    for (method, want) in [
        ("Labelled.outerWork", &["[endpoint=GET /orders]"][..]),
        ("Labelled.innerWork", &["[endpoint=GET /orders]", "[step=db]"][..]),
        ("Labelled.afterWork", &["[endpoint=GET /orders]"][..]),
        ("Labelled.unlabelledWork", &[][..]),
        ("Labelled.afterOverlap", &[][..]),
    ] {
        let (ok, all) = labels_of(&stacks, method, want);
        eprintln!("{label}: {method}: {ok} of {all} samples carry {want:?}");
        assert!(all >= 100 && ok as f64 >= 0.95 * all as f64, "{label}: {method}: {ok} of {all} carry {want:?}");
    }
}
