//! `oxprof record` and `oxprof demo` as a user runs them.

mod common;

use common::*;

/// A program that is not the java launcher (a wrapper script here) gets the
/// agent through JAVA_TOOL_OPTIONS, not an `-agentpath:` argument it would
/// take as its own: the JVM it starts is profiled.
#[test]
fn record_profiles_a_jvm_started_by_a_wrapper_script() {
    let s = Scratch::new("record-wrapper");
    compile(&s.0, &["Hot.java"]);
    let script = s.path("run hot.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ \"$1\" != go ]; then echo \"unexpected argument: $1\" >&2; exit 3; fi\nexec '{}' -cp '{}' Hot 1\n",
            java().display(),
            s.0.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = s.path("wrapped profile.collapsed");
    let o = oxprof_cmd().args(["record", "--interval", "2ms", "-o", out.to_str().unwrap(), "--"]).arg(&script).arg("go").output().unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("JAVA_TOOL_OPTIONS") && err.contains(&format!("profile written to {}", out.display())), "{err}");
    let stacks = read_collapsed(&out);
    assert!(samples_with(&stacks, "Hot.sqrtSin") > 50, "the wrapped JVM was not profiled: {stacks:?}");
}

#[test]
fn record_writes_an_html_flame_graph_with_the_hot_methods() {
    let s = Scratch::new("record");
    compile(&s.0, &["Hot.java"]);
    let out = s.path("profile.html");
    let o = oxprof_cmd()
        .current_dir(&s.0)
        .args(["record", "--interval", "2ms", "--title", "Hot test", "-o", "profile.html", "--"])
        .arg(java())
        .args(["-cp", s.0.to_str().unwrap(), "Hot", "1.5"])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(text(&o.stdout).contains("done"), "the program's output must pass through");
    assert!(err.contains(&format!("profile written to {}", out.display())), "{err}");
    assert!(err.contains("summary: samples="), "{err}");
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"), "not an HTML page");
    assert!(html.contains("Hot test"));
    for name in ["Hot.sqrtSin", "Hot.logs", "Hot.main"] {
        assert!(html.contains(name), "{name} missing from the flame graph");
    }
    assert!(!html.contains("http://") && !html.contains("https://"), "the page must be self-contained");
}

#[test]
fn record_passes_the_exit_code_and_reports_bad_input() {
    let s = Scratch::new("record-bad");
    compile(&s.0, &["Hot.java"]);
    let o = oxprof_cmd()
        .current_dir(&s.0)
        .args(["record", "-o", "p.collapsed", "--"])
        .arg(java())
        .args(["-cp", s.0.to_str().unwrap(), "Hot", "0.3", "exit3"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(read_collapsed(&s.path("p.collapsed")).iter().any(|(st, _)| st.iter().any(|f| f == "Hot.main")));

    let o = oxprof_cmd().args(["record", "--interval", "-5ms", "--", "java"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("'-5ms' is not a duration"), "{}", text(&o.stderr));

    let o = oxprof_cmd().args(["record", "--event", "walls", "--", "java"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("possible values: cpu, itimer, ctimer, wall, lock"), "{}", text(&o.stderr));
    let o = oxprof_cmd().args(["record", "--wall", "50us", "--", "java"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("the wall-clock interval must be at least 100us"), "{}", text(&o.stderr));

    let o = oxprof_cmd().args(["record", "-o", "/nonexistent-oxprof/p.html", "--"]).arg(java()).args(["-version"]).output().unwrap();
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("directory /nonexistent-oxprof does not exist"), "{}", text(&o.stderr));

    let o = oxprof_cmd().args(["record", "--", "/nonexistent/java"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("cannot run `/nonexistent/java`"), "{}", text(&o.stderr));
}

#[test]
fn demo_compiles_and_profiles_the_bundled_program() {
    let s = Scratch::new("demo");
    let o = oxprof_cmd().current_dir(&s.0).args(["demo", "--seconds", "2", "-o", "demo.collapsed"]).output().unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let stacks = read_collapsed(&s.path("demo.collapsed"));
    for m in ["Demo.sortLoop", "Demo.hashLoop", "Demo.parseLoop"] {
        assert!(samples_with(&stacks, m) > 5, "{m} missing from the demo profile");
    }
}

/// The demo's files go to a fresh private directory, not the predictable
/// `oxprof-demo-<uid>` where anybody could have planted a symlink first;
/// that directory is removed afterwards.
#[test]
fn demo_ignores_a_planted_directory() {
    use std::os::unix::fs::PermissionsExt;
    let s = Scratch::new("demo-planted");
    // SAFETY: getuid cannot fail.
    let planted = s.path(&format!("oxprof-demo-{}", unsafe { libc::getuid() }));
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o777)).unwrap();
    let victim = s.path("victim");
    std::fs::write(&victim, "victim").unwrap();
    std::os::unix::fs::symlink(&victim, planted.join("Demo.java")).unwrap();
    let o = oxprof_cmd().env("TMPDIR", &s.0).current_dir(&s.0).args(["demo", "--seconds", "1", "-o", "demo.collapsed"]).output().unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(samples_with(&read_collapsed(&s.path("demo.collapsed")), "Demo.main") > 0, "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "victim", "the demo wrote through the planted symlink");
    let planted_now: Vec<_> = std::fs::read_dir(&planted).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(planted_now, ["Demo.java"], "the demo used the planted directory");
    let left: Vec<_> = std::fs::read_dir(&s.0).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).filter(|n| n.starts_with("oxprof-")).collect();
    assert_eq!(left, [planted.file_name().unwrap().to_str().unwrap()], "a temporary directory was left behind");
}

/// `record` names every file the agent wrote in this run (CPU and
/// allocations go to two files), and never a file an earlier run left when
/// this run's JVM wrote nothing.
#[test]
fn record_names_every_file_written_and_none_left_from_earlier() {
    let s = Scratch::new("record-files");
    compile(&s.0, &["Hot.java"]);
    let record = |extra: &[&str], jvm_args: &[&str]| {
        let o = oxprof_cmd()
            .current_dir(&s.0)
            .arg("record")
            .args(extra)
            .arg("--")
            .arg(java())
            .args(jvm_args)
            .args(["-cp", s.0.to_str().unwrap(), "Hot", "0.3"])
            .output()
            .unwrap();
        (o.status.code(), text(&o.stderr))
    };
    let (cpu, alloc) = (s.path("ca.collapsed"), s.path("ca.alloc.collapsed"));
    let (code, err) = record(&["-e", "cpu", "--alloc", "1k", "-o", "ca.collapsed"], &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(samples_with(&read_collapsed(&cpu), "Hot.main") > 0 && !read_collapsed(&alloc).is_empty(), "{err}");
    for f in [&cpu, &alloc] {
        assert!(err.contains(&format!("[oxprof] profile written to {}\n", f.display())), "{} not named:\n{err}", f.display());
    }
    // The JVM never starts (an option it does not know): ca.collapsed from
    // the run above is not this run's profile.
    let (code, err) = record(&["-o", "ca.collapsed"], &["-XX:+OxprofNoSuchOption"]);
    assert_ne!(code, Some(0), "{err}");
    assert!(!err.contains("profile written to"), "{err}");
    assert!(err.contains("[oxprof] no profile was written"), "{err}");
    // A directory as the output is refused before any JVM runs.
    let (code, err) = record(&["-o", "."], &[]);
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains("-o .: is a directory") && !err.contains("profile written to") && err.lines().count() == 1, "{err}");
}

/// `--jstackdepth` outside the agent's range and an empty `--title` are
/// refused by `record` in one line naming the option, before any JVM runs;
/// the range's ends are the agent's.
#[test]
fn record_checks_stack_depth_and_title_itself() {
    let s = Scratch::new("record-depth");
    compile(&s.0, &["Hot.java"]);
    let record = |extra: &[&str]| {
        oxprof_cmd()
            .current_dir(&s.0)
            .arg("record")
            .args(extra)
            .args(["-o", "p.collapsed", "--"])
            .arg(java())
            .args(["-cp", s.0.to_str().unwrap(), "Hot", "0.3"])
            .output()
            .unwrap()
    };
    for (args, expected) in [
        (&["--jstackdepth", "70000"][..], "invalid value '70000' for '--jstackdepth <JSTACKDEPTH>': 70000 is not in 1..=65536"),
        (&["--jstackdepth", "0"], "invalid value '0' for '--jstackdepth <JSTACKDEPTH>': 0 is not in 1..=65536"),
        (&["--title", ""], "invalid value '' for '--title <TITLE>': the title must not be empty"),
    ] {
        let o = record(args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().filter(|l| l.starts_with("error:")).count(), 1, "{args:?}: {err}");
        assert!(err.lines().next().unwrap().contains(expected), "{args:?}: {err}");
        assert!(text(&o.stdout).is_empty() && !s.path("p.collapsed").exists(), "{args:?}: the program ran");
    }
    // The agent takes both ends of the range.
    for depth in ["1", "65536"] {
        let o = record(&["--jstackdepth", depth]);
        assert!(o.status.success(), "--jstackdepth {depth}: {}", text(&o.stderr));
        assert!(total(&read_collapsed(&s.path("p.collapsed"))) > 0, "--jstackdepth {depth}: no samples");
        std::fs::remove_file(s.path("p.collapsed")).unwrap();
    }
}

/// `--alloc` or `--wall` alone records that alone (as async-profiler), but
/// a CPU interval beside them asks for CPU samples too; the wall clock
/// alone keeps its own 50ms default.
#[test]
fn an_interval_beside_other_events_keeps_cpu_sampling() {
    let s = Scratch::new("record-events");
    compile(&s.0, &["Hot.java"]);
    let run = |args: &[&str], out: &std::path::Path| {
        let o = oxprof_cmd()
            .arg("record")
            .args(args)
            .args(["-o", out.to_str().unwrap(), "--", java().to_str().unwrap(), "-cp", s.0.to_str().unwrap(), "Hot", "1"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stderr)
    };
    let both = s.path("both.collapsed");
    let err = run(&["--interval", "2ms", "--alloc"], &both);
    let java_samples: u64 = summary(&err).get("java_samples").and_then(|v| v.parse().ok()).unwrap_or(0);
    assert!(java_samples > 200, "CPU at 2ms: about 500 samples a CPU second: {err}");
    assert!(samples_with(&read_collapsed(&both), "Hot.sqrtSin") > 100, "{err}");
    assert!(s.path("both.alloc.collapsed").exists(), "{err}");
    let alone = s.path("alone.collapsed");
    let err = run(&["--alloc"], &alone);
    assert!(!err.contains("[oxprof] summary:") && err.contains("[oxprof] alloc summary:"), "allocations alone: {err}");
    let wall = s.path("wall.collapsed");
    let err = run(&["--wall"], &wall);
    assert!(!err.contains("[oxprof] summary:"), "the wall clock alone: {err}");
    // About a second of run: some 25 ticks at 50ms, not 100 or more at 10ms.
    let ticks: u64 = summary_fields(&err, "[oxprof] wall summary:").get("ticks").and_then(|v| v.parse().ok()).unwrap_or(0);
    assert!((5..60).contains(&ticks), "the wall clock's default is 50ms: {ticks} ticks\n{err}");
}
