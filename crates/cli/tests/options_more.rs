//! Agent options under a real JVM: `%p`/`%t` in `file=` outside `loop=`,
//! where a command's reply says the profile went when it could not go where
//! asked, and the line an idle load prints.

mod common;

use common::*;
use std::io::Write;

fn attach(pid: u32, args: &[&str]) -> std::process::Output {
    oxprof_cmd().arg("attach").arg(pid.to_string()).args(args).output().unwrap()
}

fn two_phases(s: &Scratch, agent_opts: Option<&str>) -> RunningJvm {
    let mut args = Vec::new();
    if let Some(o) = agent_opts {
        args.push(format!("-agentpath:{}={o}", agent().display()));
    }
    args.extend(["-cp".to_string(), s.0.display().to_string(), "TwoPhases".into(), "0.05".into()]);
    RunningJvm::spawn(java_cmd(args), &s.0, "ready")
}

fn end(jvm: &mut RunningJvm) -> (bool, String) {
    let stdin = jvm.child.stdin.as_mut().unwrap();
    stdin.write_all(b"next\n").unwrap();
    stdin.flush().unwrap();
    let o = jvm.finish();
    (o.status.success(), text(&o.stderr))
}

/// `YYYYMMDD-HHMMSS`.
fn is_timestamp(t: &str) -> bool {
    t.len() == 15 && t.as_bytes()[8] == b'-' && t.chars().filter(char::is_ascii_digit).count() == 14
}

/// async-profiler's `%p` and `%t` in `file=` without `loop=`: two JVMs
/// with `file=/tmp/prof-%p.html` must not overwrite each other.
#[test]
fn percent_p_and_t_in_file_are_expanded_without_loop() {
    let s = Scratch::new("opts-percent");
    compile(&s.0, &["TwoPhases.java"]);
    let mut jvm = two_phases(&s, Some("start,interval=5ms,file=%p-%t.html"));
    let pid = jvm.pid();
    let (ok, err) = end(&mut jvm);
    assert!(ok, "{err}");
    assert!(!s.path("%p-%t.html").exists(), "a file named literally %p-%t.html: {err}");
    let written = err.lines().find_map(|l| l.strip_prefix("[oxprof] profile written to ")).unwrap_or_else(|| panic!("{err}"));
    let name = written.strip_prefix(&format!("{pid}-")).and_then(|n| n.strip_suffix(".html")).unwrap_or_else(|| panic!("{written}: {err}"));
    assert!(is_timestamp(name), "{written}");
    assert!(s.path(written).is_file(), "{written} reported but not there");
    // An unknown sequence is refused, in one line naming file= and the accepted ones.
    let o = run_java(&s.0, "loop=2s,file=l-%x.jfr", &[], &s.0, &["TwoPhases", "0"]);
    assert_refused(&o, "loop=2s,file=l-%x.jfr", "invalid agent option 'file=l-%x.jfr': unknown '%x' in the file name; accepted: %p");
    assert!(!s.path("l-%x-0.jfr").exists());
    // And through attach: start and stop with %p.
    let mut jvm = two_phases(&s, None);
    let pid = jvm.pid();
    let o = attach(pid, &["start", "--interval", "5ms", "-o", s.path("a-%p.html").to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = attach(pid, &["stop"]);
    let reply = text(&o.stdout);
    assert!(o.status.success(), "{}{reply}", text(&o.stderr));
    let expected = s.path(&format!("a-{pid}.html"));
    assert!(reply.contains(&format!("profile written to {}", expected.display())), "{reply}");
    assert!(expected.is_file() && !s.path("a-%p.html").exists(), "{reply}");
    end(&mut jvm);
}

/// The reply to `stop -o FILE` when FILE cannot be written says so, as the
/// log of an `-agentpath` JVM does, and names the files by absolute paths
/// (a default name is relative to the JVM's working directory).
#[test]
fn a_stop_reply_says_why_the_profile_went_elsewhere_and_where() {
    let s = Scratch::new("opts-reply");
    compile(&s.0, &["TwoPhases.java"]);
    let mut jvm = two_phases(&s, None);
    let pid = jvm.pid();
    let o = attach(pid, &["start", "--interval", "5ms"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = attach(pid, &["stop", "-o", "/dev/full", "--format", "flamegraph"]);
    let reply = text(&o.stdout);
    assert!(o.status.success(), "{}{reply}", text(&o.stderr));
    let warning = reply.lines().find(|l| l.contains("could not write the profile to /dev/full")).unwrap_or_else(|| panic!("{reply}"));
    let fallback = reply.lines().find_map(|l| l.strip_prefix("profile written to ")).unwrap_or_else(|| panic!("{reply}"));
    assert!(warning.contains(&format!("wrote it to {fallback} instead")), "{reply}");
    assert!(fallback.starts_with(s.0.to_str().unwrap()) && std::path::Path::new(fallback).is_file(), "{reply}");
    // The default output, by its absolute path.
    let o = attach(pid, &["start", "--interval", "5ms"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = attach(pid, &["stop"]);
    let reply = text(&o.stdout);
    let expected = s.path(&format!("oxprof-{pid}.html"));
    assert!(reply.contains(&format!("profile written to {}", expected.display())), "{reply}");
    assert!(expected.is_file());
    end(&mut jvm);
}

/// Options that start nothing load the agent idle, and one line says so
/// (at `-agentpath` load only); no options at all stay silent.
#[test]
fn options_that_start_nothing_say_so_in_one_line() {
    let s = Scratch::new("opts-idle");
    compile(&s.0, &["TwoPhases.java"]);
    for (opts, shown) in [("interval=1ms", "'interval=1ms'"), ("threads,title=x", "'threads', 'title=x'"), ("format=leaks", "'format=leaks'")] {
        let o = run_java(&s.0, opts, &[], &s.0, &["TwoPhases", "0"]);
        let err = text(&o.stderr);
        assert!(o.status.success(), "{opts}: {err}");
        let ours: Vec<&str> = err.lines().filter(|l| l.starts_with("oxprof:") || l.starts_with("[oxprof]")).collect();
        assert_eq!(ours.len(), 1, "{opts}: {err}");
        assert!(ours[0].starts_with("oxprof: loaded idle: ") && ours[0].contains(shown) && ours[0].contains("add start"), "{opts}: {}", ours[0]);
        assert!(std::fs::read_dir(&s.0).unwrap().all(|e| !e.unwrap().file_name().to_string_lossy().starts_with("oxprof-")), "{opts}: a profile was written");
    }
    for opts in ["", "loglevel=warn"] {
        let o = run_java(&s.0, opts, &[], &s.0, &["TwoPhases", "0"]);
        let err = text(&o.stderr);
        assert!(o.status.success() && !err.contains("oxprof"), "{opts:?}: {err}");
    }
}
