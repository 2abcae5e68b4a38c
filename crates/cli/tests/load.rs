//! The agent loaded more than once at startup: two copies of the library
//! (each would arm its own timers and take the other's signals), and the
//! same library twice (an idle agent installed for a whole fleet through
//! `JAVA_TOOL_OPTIONS`, then `-agentpath` with options). The JVM always
//! starts, one line says what runs, and the CPU the profile shows is the
//! CPU the program spent, once.

mod common;

use common::*;

/// `Hot 2` spends 2 s of its main thread's CPU (CpuBudget); the profile,
/// weighed in nanoseconds, must show that once, not twice.
fn assert_main_cpu_once(out: &std::path::Path, label: &str) {
    let stacks = read_collapsed(out);
    let main_s = samples_with(&stacks, "Hot.main") as f64 / 1e9;
    eprintln!("{label}: Hot.main {main_s:.2} s of CPU in the profile, 2 s spent");
    assert!((1.5..=2.5).contains(&main_s), "{label}: the profile shows {main_s:.2} s of CPU for Hot.main, which spent 2 s");
}

/// `java AGENT_ARGS -cp DIR Hot 2` in `s`, with `env` set.
fn run_hot(s: &Scratch, agent_args: &[String], env: &[(&str, String)]) -> std::process::Output {
    let mut cmd = java_cmd(agent_args);
    cmd.args(["-cp", s.0.to_str().unwrap(), "Hot", "2"]).current_dir(&s.0);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

#[test]
fn a_second_copy_of_the_library_stays_inactive() {
    let s = Scratch::new("two-copies");
    compile(&s.0, &["Hot.java", "CpuBudget.java"]);
    let copy = s.path("liboxprof-copy.so");
    std::fs::copy(agent(), &copy).unwrap();
    let (first, second) = (s.path("first.collapsed"), s.path("second.collapsed"));
    let o = run_hot(
        &s,
        &[
            format!("-agentpath:{}=start,event=cpu,total,file={}", agent().display(), first.display()),
            format!("-agentpath:{}=start,event=cpu,total,file={}", copy.display(), second.display()),
        ],
        &[],
    );
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("oxprof: already loaded in this JVM from") && err.contains("this copy stays inactive"), "{err}");
    assert!(!second.exists(), "the inactive copy wrote a profile");
    assert_main_cpu_once(&first, "two copies");
}

#[test]
fn an_idle_load_then_one_with_options_profiles_with_the_second() {
    let s = Scratch::new("idle-then-start");
    compile(&s.0, &["Hot.java", "CpuBudget.java"]);
    let out = s.path("p.collapsed");
    let o = run_hot(
        &s,
        &[format!("-agentpath:{}=start,event=cpu,total,file={}", agent().display(), out.display())],
        &[("JAVA_TOOL_OPTIONS", format!("-agentpath:{}", agent().display()))],
    );
    let err = text(&o.stderr);
    assert!(o.status.success(), "the JVM did not start: {err}");
    assert!(err.contains("the first load was idle, profiling starts with the second's options"), "{err}");
    assert_main_cpu_once(&out, "idle, then options");
}

#[test]
fn two_loads_with_options_profile_with_the_first_and_say_so() {
    let s = Scratch::new("start-twice");
    compile(&s.0, &["Hot.java", "CpuBudget.java"]);
    let (first, second) = (s.path("first.collapsed"), s.path("second.collapsed"));
    let o = run_hot(
        &s,
        &[
            format!("-agentpath:{}=start,event=cpu,total,file={}", agent().display(), first.display()),
            format!("-agentpath:{}=start,event=cpu,interval=1ms,file={}", agent().display(), second.display()),
        ],
        &[],
    );
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("profiling runs with the first load's, these are ignored: start,event=cpu,interval=1ms"), "{err}");
    assert!(!second.exists(), "the ignored load's file was written");
    assert_main_cpu_once(&first, "options twice");
    // Bad options on the second load refuse the start, as on a first.
    let o = java_cmd([format!("-agentpath:{}", agent().display()), format!("-agentpath:{}=start,interval=abc", agent().display()), "-version".into()])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(!o.status.success() && err.contains("invalid agent option 'interval=abc'"), "{err}");
}
