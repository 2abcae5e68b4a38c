//! A Java service profiled the way an operator does it (helper J of sweep
//! 6): a pool of reused worker threads labels each request, and the JVM
//! is profiled several times in its life, each recording started and
//! stopped by command (the Java API here; `oxprof attach` sends the same
//! commands through the same `commands::run`).

mod common;

use common::*;
use std::collections::HashMap;
use std::process::Command;

/// Label sets are per request; each recording names fewer than the limit
/// (4096), the recordings together more. Every recording's labels must be
/// the requests' own: before the fix the table only grew across
/// recordings, so the third one's requests were `oxprof=labels over
/// limit` (and every set after, for the JVM's life).
#[test]
fn label_sets_of_earlier_recordings_do_not_count_against_later_ones() {
    let s = Scratch::new("service-recordings");
    compile_with_jar(&s.0, &["ServiceSweepRecordings.java"]);
    let o = Command::new(java())
        .current_dir(&s.0)
        .env_remove("LD_LIBRARY_PATH")
        .arg(format!("-Doxprof.library={}", agent().display()))
        .args(["-cp", &with_jar(&s.0), "ServiceSweepRecordings"])
        .args([s.0.to_str().unwrap(), "3", "1500"])
        .output()
        .expect("run java");
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", text(&o.stderr));
    for rec in 0..3 {
        let stats = stdout.lines().find_map(|l| l.strip_prefix(&format!("labels {rec} "))).unwrap_or_else(|| panic!("no labels line for {rec}:\n{stdout}"));
        eprintln!("recording {rec}: {stats}");
        assert!(stats.contains(" refused=0 "), "recording {rec}: contexts were refused: {stats}");
        let stacks = read_collapsed(&s.path(&format!("rec-{rec}.collapsed")));
        let mut counts: HashMap<&str, u64> = HashMap::new();
        for (stack, n) in &stacks {
            let burn = if stack.iter().any(|f| f == "ServiceSweepRecordings.burnEven") {
                0
            } else if stack.iter().any(|f| f == "ServiceSweepRecordings.burnOdd") {
                1
            } else {
                continue;
            };
            let request = stack.iter().find_map(|f| f.strip_prefix("[request=").and_then(|r| r.strip_suffix(']')));
            let own = request.and_then(|r| r.strip_prefix(&format!("r{rec}-"))).and_then(|i| i.parse::<u64>().ok());
            let verdict = match own {
                Some(i) if i % 2 == burn => "own",
                _ if stack.iter().any(|f| f.contains("oxprof=labels over limit")) => "over limit",
                _ => "wrong",
            };
            *counts.entry(verdict).or_default() += n;
        }
        eprintln!("recording {rec}: burn samples {counts:?}");
        let own = counts.get("own").copied().unwrap_or(0);
        assert!(own >= 40, "recording {rec}: too few burn samples under their request's label: {counts:?}");
        assert_eq!(counts.get("over limit"), None, "recording {rec}: requests over the label-set limit: {counts:?}");
        assert_eq!(counts.get("wrong"), None, "recording {rec}: samples under another request's label: {counts:?}");
    }
}

/// A service ships `oxprof.jar` alone (no `liboxprof.so` beside it, no
/// `-Doxprof.library`): its first contexts find no agent and label
/// nothing. An operator then runs `oxprof attach PID start`: the jar
/// finds the attached copy (docs/java-api.md, "Finding the library") and
/// the requests served afterwards carry their labels. Before the fix the
/// first failure was kept for the JVM's life: `labels unavailable` and
/// not one labelled sample after the attach.
#[test]
fn contexts_label_once_the_agent_is_attached_after_the_first_ones_found_none() {
    let s = Scratch::new("service-late-agent");
    let alone = s.path("jar-alone");
    std::fs::create_dir_all(&alone).unwrap();
    std::fs::copy(jar(), alone.join("oxprof.jar")).unwrap();
    compile_with_jar(&s.0, &["ServiceSweepLateAgent.java"]);
    let cp = format!("{}:{}", s.0.display(), alone.join("oxprof.jar").display());
    let mut cmd = java_cmd(["-cp", &cp, "ServiceSweepLateAgent"]);
    cmd.env_remove("LD_LIBRARY_PATH");
    let mut jvm = RunningJvm::spawn(cmd, &s.0, "ready");
    let mut out = std::io::BufReader::new(jvm.child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert!(line.starts_with("before labels unavailable"), "the program found an agent before the attach: {line}");
    let pid = jvm.pid().to_string();
    let profile = s.path("after.collapsed");
    let o = oxprof_cmd().args(["attach", &pid, "start", "--event", "cpu", "--interval", "1ms", "-o", profile.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "attach start: {}", text(&o.stderr));
    std::io::Write::write_all(jvm.child.stdin.as_mut().unwrap(), b"go\n").unwrap();
    let mut rest = String::new();
    loop {
        let mut l = String::new();
        if std::io::BufRead::read_line(&mut out, &mut l).unwrap() == 0 || l.trim() == "done" {
            break;
        }
        rest.push_str(&l);
    }
    let o = oxprof_cmd().args(["attach", &pid, "stop"]).output().unwrap();
    assert!(o.status.success(), "attach stop: {}", text(&o.stderr));
    std::io::Write::write_all(jvm.child.stdin.as_mut().unwrap(), b"end\n").unwrap();
    eprintln!("{line}{rest}");
    assert!(!rest.contains("after labels unavailable"), "the jar never found the attached agent:\n{rest}");
    let mut counts: HashMap<&str, u64> = HashMap::new();
    for (stack, n) in &read_collapsed(&profile) {
        let burn = if stack.iter().any(|f| f == "ServiceSweepLateAgent.burnEven") {
            0
        } else if stack.iter().any(|f| f == "ServiceSweepLateAgent.burnOdd") {
            1
        } else {
            continue;
        };
        let own = stack.iter().find_map(|f| f.strip_prefix("[request=r").and_then(|r| r.strip_suffix(']'))).and_then(|i| i.parse::<u64>().ok());
        let verdict = match own {
            Some(i) if i % 2 == burn => "own",
            Some(_) => "wrong",
            None => "unlabelled",
        };
        *counts.entry(verdict).or_default() += n;
    }
    eprintln!("burn samples after the attach: {counts:?}");
    assert_eq!(counts.get("wrong"), None, "samples under another request's label: {counts:?}");
    // 1.5 s of CPU under known labels at 1 ms: far more than 300 samples.
    assert!(counts.get("own").copied().unwrap_or(0) >= 300, "too few burn samples under their request's label: {counts:?}");
}

/// `oxprof attach PID dump -o other.jfr` while a JFR recording streams to
/// the file chosen at start writes nothing to `other.jfr` (the agent says
/// so in a note). The CLI must fail then, as the Java API's `execute`
/// throws: it exited 0, and a script's next step found no file.
#[test]
fn a_dump_that_did_not_write_the_file_asked_for_fails() {
    let s = Scratch::new("service-dump-other-jfr");
    compile(&s.0, &["Spin.java"]);
    let rec = s.path("rec.jfr");
    let cmd = java_cmd([
        format!("-agentpath:{}=start,event=cpu,file={}", agent().display(), rec.display()),
        "-cp".into(),
        s.0.display().to_string(),
        "Spin".into(),
        "forever".into(),
    ]);
    let _jvm = RunningJvm::spawn(cmd, &s.0, "ready");
    let pid = _jvm.pid().to_string();
    let other = s.path("other.jfr");
    let o = oxprof_cmd().args(["attach", &pid, "dump", "-o", other.to_str().unwrap()]).output().unwrap();
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(!other.exists(), "{} was written", other.display());
    assert!(!o.status.success(), "exit 0 though {} was not written:\n{out}{err}", other.display());
    assert!(err.contains("was not written"), "{err}");
    assert!(out.contains("jfr summary:"), "the reply (what the dump did) is printed: {out}");
    // A dump of the recording's own file, and stop, succeed.
    let o = oxprof_cmd().args(["attach", &pid, "dump"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = oxprof_cmd().args(["attach", &pid, "stop"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains(&format!("profile written to {}", rec.display())), "{}", text(&o.stdout));
}
