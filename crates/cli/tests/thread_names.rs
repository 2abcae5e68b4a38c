//! Thread names in CPU profiles, checked against the names the threads gave
//! themselves and the CPU time they measured: `tests/java/ThreadNames.java`
//! starts plain native threads (pthreads of `tests/c/thread_names.c`, never
//! attached to the JVM, built here with gcc) that name themselves at once,
//! or burn CPU under the name they inherited and then rename themselves, and
//! a Java thread whose name is longer than the kernel keeps (15 characters).
//! Each part burns in a leaf function of its own, so a sample's leaf says
//! which part of which thread it is, whatever the profile names the thread.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;

/// One JVM of this file at a time: on a 2-core machine three busy JVMs side
/// by side starve the itimer engine (see its test).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The JDK's `include` directory (for `jni.h`), beside the `javac` in use.
fn jdk_include() -> PathBuf {
    let javac = std::fs::canonicalize(tool("javac")).expect("javac");
    javac.parent().and_then(Path::parent).expect("JDK home").join("include")
}

/// Compiles ThreadNames.java and its JNI library into `dir`.
fn build(dir: &Path) {
    compile(dir, &["ThreadNames.java"]);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/thread_names.c");
    let inc = jdk_include();
    let out = dir.join("libthread_names.so");
    let o = Command::new("gcc")
        .args(["-O2", "-fno-omit-frame-pointer", "-g", "-shared", "-fPIC"])
        .arg(format!("-I{}", inc.display()))
        .arg(format!("-I{}", inc.join("linux").display()))
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .arg("-lpthread")
        .output()
        .expect("run gcc (the native tests need a C compiler)");
    assert!(o.status.success(), "gcc: {}", text(&o.stderr));
}

fn run(dir: &Path, opts: &str, phases: &[&str]) -> Output {
    Command::new(java())
        .current_dir(dir)
        .arg(format!("-agentpath:{}={opts}", agent().display()))
        .arg("-cp")
        .arg(dir)
        .arg("ThreadNames")
        .arg(dir)
        .args(phases)
        .output()
        .expect("run java")
}

/// The name the native threads started with (their creator's).
fn inherited(stdout: &str) -> String {
    stdout.lines().find_map(|l| l.strip_prefix("INHERITED ")).unwrap_or_else(|| panic!("no INHERITED line in {stdout}")).to_string()
}

/// The samples (weights with `total`: ns) whose leaf is `leaf`, by their
/// stack's root frame.
fn by_root(stacks: &Collapsed, leaf: &str) -> Vec<(String, u64)> {
    let mut roots: Vec<(String, u64)> = Vec::new();
    for (st, n) in stacks.iter().filter(|(s, _)| s.iter().any(|f| f == leaf)) {
        let root = st.first().cloned().unwrap_or_default();
        match roots.iter_mut().find(|(r, _)| *r == root) {
            Some((_, m)) => *m += n,
            None => roots.push((root, *n)),
        }
    }
    roots
}

/// Checks that every sample of `leaf` stands under a root frame that names
/// the thread `name` (`[name]`, or `[name tid=N]` with option `threads`),
/// and that they weigh (ms) between `low` and `high` times `truth_ms`.
fn check_named(stacks: &Collapsed, leaf: &str, name: &str, truth_ms: f64, (low, high): (f64, f64), label: &str) -> f64 {
    let roots = by_root(stacks, leaf);
    let named = |r: &str| r == format!("[{name}]") || r.starts_with(&format!("[{name} tid="));
    let wrong: Vec<_> = roots.iter().filter(|(r, _)| !named(r)).collect();
    assert!(wrong.is_empty(), "{label}: samples of {leaf} not under [{name}]: {wrong:?} (all: {roots:?})");
    let ms = roots.iter().map(|(_, n)| n).sum::<u64>() as f64 / 1e6;
    assert!(ms >= low * truth_ms && ms <= high * truth_ms, "{label}: {leaf} weighs {ms:.0} ms, the thread measured {truth_ms:.0} ms of CPU: {roots:?}");
    ms
}

/// A native thread that the registry's 100 ms scan saw under the name it
/// inherited from its creator (`java`), and that renamed itself
/// (`pthread_setname_np`) afterwards, is named by its new name, for all its
/// samples (as a Java thread is by its last name), whether it ended before
/// the dump or still lives: before, the first name seen was kept for good
/// (`[java tid=N]`). The per-thread engines' scan arms a thread's timer and
/// reads its name in one go, so samples in the part before the rename prove
/// that the scan saw the inherited name. A Java thread keeps its full Java
/// name, never its kernel name cut to 15 characters.
#[test]
fn native_threads_renamed_after_the_scan_saw_them_carry_their_new_name() {
    let _one_jvm = serial();
    let s = Scratch::new("thread-names-renamed");
    build(&s.0);
    let java_name = "tn-java-thread-with-a-long-name";
    let java_phase = format!("java:{java_name}:300");
    for event in ["ctimer", "cpu"] {
        let out = s.path(&format!("{event}.collapsed"));
        let opts = format!("start,event={event},interval=10ms,total,threads,file={}", out.display());
        let o = run(&s.0, &opts, &["renamed:tn-renamed:300:300", "live:tn-live:300:300", &java_phase]);
        let (stdout, err) = (text(&o.stdout), text(&o.stderr));
        assert!(o.status.success(), "{event}: {err}");
        let truth = truth_line(&stdout);
        let first = inherited(&stdout);
        assert!(!first.starts_with("tn-"), "{event}: the threads inherited {first:?}");
        let stacks = read_collapsed(&out);
        for (scenario, name) in [("renamed", "tn-renamed"), ("live", "tn-live")] {
            let label = format!("{event}, {scenario}");
            // Before the rename: the timer may start up to a scan (100 ms,
            // more on a loaded machine) after the thread.
            let before = check_named(&stacks, &format!("tn_{scenario}_before_leaf"), name, truth[&format!("{scenario}_before")], (0.05, 1.3), &label);
            let after = check_named(&stacks, &format!("tn_{scenario}_after_leaf"), name, truth[&format!("{scenario}_after")], (0.6, 1.3), &label);
            eprintln!("{label}: [{name}] {before:.0} ms before the rename, {after:.0} ms after (inherited name {first:?})");
        }
        let kernel_name = stdout.lines().find_map(|l| l.strip_prefix("JAVA_KERNEL_NAME ")).unwrap_or_default();
        assert!(kernel_name.len() <= 15 && kernel_name != java_name, "{event}: the Java thread's kernel name is {kernel_name:?}");
        let java_ms = check_named(&stacks, "ThreadNames.javaBurn", java_name, truth["java"], (0.6, 1.3), &format!("{event}, java"));
        eprintln!("{event}: [{java_name}] {java_ms:.0} ms");
    }
}

/// With the process-wide itimer engine (no per-thread scan) a native thread
/// that ended before the dump is named by its own name: it was `[thread]`
/// (names were read from `/proc` at the dump only). A thread that renamed
/// itself and ended carries its new name too.
#[test]
fn itimer_names_native_threads_that_ended_before_the_dump() {
    let _one_jvm = serial();
    let s = Scratch::new("thread-names-itimer");
    build(&s.0);
    let out = s.path("itimer.collapsed");
    let opts = format!("start,event=itimer,interval=10ms,total,file={}", out.display());
    let o = run(&s.0, &opts, &["own:tn-own:500", "renamed:tn-renamed:300:300"]);
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    assert!(err.contains("engine=itimer"), "not the itimer engine: {err}");
    let truth = truth_line(&stdout);
    let stacks = read_collapsed(&out);
    // itimer's signals carry no overrun, and the process timer is checked
    // only at ticks where one of its threads runs: beside the other tests'
    // JVMs on a loaded machine most can be lost (80, 230 of 500 ms; 160 of
    // 300), alone 490-500 of 500. The names are what this test is about;
    // the weights only have to be of the right thread and not above truth.
    let own = check_named(&stacks, "tn_own_leaf", "tn-own", truth["own"], (0.05, 1.5), "itimer, own");
    let before = check_named(&stacks, "tn_renamed_before_leaf", "tn-renamed", truth["renamed_before"], (0.05, 1.5), "itimer, renamed");
    let after = check_named(&stacks, "tn_renamed_after_leaf", "tn-renamed", truth["renamed_after"], (0.05, 1.5), "itimer, renamed");
    eprintln!(
        "itimer: [tn-own] {own:.0} ms (truth {:.0}), [tn-renamed] {before:.0} + {after:.0} ms (truth {:.0} + {:.0})",
        truth["own"], truth["renamed_before"], truth["renamed_after"]
    );
}

/// The itimer engine's watch for a taken SIGPROF now runs in the names'
/// watcher (before, a thread of its own): an application that takes
/// SIGPROF mid-run still gets the warning, and the itimer is stopped, so its
/// handler is not flooded (`SigTaker`, as `signals_taken.rs` checks for
/// ctimer).
#[test]
fn itimer_still_stops_when_sigprof_is_taken() {
    let _one_jvm = serial();
    let s = Scratch::new("thread-names-itimer-taken");
    compile(&s.0, &["SigTaker.java"]);
    let out = s.path("p.collapsed");
    let o = Command::new(java())
        .current_dir(&s.0)
        .arg(format!("-agentpath:{}=start,event=itimer,interval=10ms,file={}", agent().display(), out.display()))
        .arg("-cp")
        .arg(&s.0)
        .args(["SigTaker", "PROF", "0.5", "2"])
        .output()
        .expect("run java");
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    assert!(err.contains("another handler replaced oxprof's SIGPROF handler") && err.contains("CPU samples stopped (engine itimer)"), "no warning: {err}");
    assert_eq!(summary(&err).get("signal_taken").map(String::as_str), Some("SIGPROF"), "{err}");
    let line = stdout.lines().find_map(|l| l.strip_prefix("HANDLED ")).unwrap_or_else(|| panic!("no HANDLED line in: {stdout}"));
    let late: u64 = line.split_whitespace().find_map(|kv| kv.strip_prefix("late=")).and_then(|v| v.parse().ok()).expect("late=");
    assert!(late <= 5, "the itimer kept signalling the application's handler: {line}");
}
