//! The agent under JVM options that change what it may assume:
//! - the Epsilon collector never collects: a live report says so, forces
//!   no GC and does not claim one (`forced_gc=false`);
//! - `-Xcheck:jni` finds nothing to complain about in the agent's JNI use
//!   (local references beyond a frame's capacity, from the loaded-class
//!   enumeration at start-up).

mod common;

use common::*;

#[test]
fn a_live_report_under_epsilon_warns_and_claims_no_gc() {
    let s = Scratch::new("live-epsilon");
    compile(&s.0, &["NoLeak.java"]);
    let out = s.path("e.txt");
    let jvm = ["-XX:+UnlockExperimentalVMOptions", "-XX:+UseEpsilonGC", "-Xmx512m", "-Xlog:disable"];
    let o = run_java(&s.0, &format!("event=alloc,alloc=64k,live,file={}", out.display()), &jvm, &s.0, &["NoLeak", "20", "3"]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let warning = err.lines().find(|l| l.contains("Epsilon never collects")).unwrap_or_else(|| panic!("no Epsilon warning: {err}"));
    assert!(
        warning.starts_with("[oxprof] warning: live: no GC forced before the report:") && warning.contains("every sampled object counts as live"),
        "{warning}"
    );
    let live = summary_fields(&err, "[oxprof] live summary:");
    assert_eq!(live.get("forced_gc").map(String::as_str), Some("false"), "{err}");
    assert_eq!(live.get("gcs").map(String::as_str), Some("0"), "{err}");
    let report = std::fs::read_to_string(&out).unwrap();
    let header = report.lines().nth(1).unwrap_or_default();
    assert!(header.contains("no GC forced") && header.contains("Epsilon"), "{header}");
}

/// `-Xcheck:jni` warns when a native frame holds more local references
/// than it planned for; before the fix the enumeration of the classes
/// loaded at VMInit held one per class (443 on JDK 17) at once.
#[test]
fn xcheck_jni_finds_nothing_with_every_event() {
    let s = Scratch::new("xcheck-jni");
    compile(&s.0, &["Hot.java"]);
    let out = s.path("x.collapsed");
    let o = run_java(&s.0, &format!("start,event=cpu,alloc,wall,lock,file={}", out.display()), &["-Xcheck:jni"], &s.0, &["Hot", "0.5"]);
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    for text in [&stdout, &err] {
        assert!(!text.contains("JNI local refs"), "{text}");
        assert!(!text.contains("WARNING in native method"), "{text}");
    }
    assert!(err.contains("started wall-clock profiling") && err.contains("started lock profiling"), "{err}");
}

/// Loops over every live thread (the allocation thread filter at start,
/// the owners of `java.util.concurrent` locks) hold one local reference per
/// thread: with 48 threads, past JNI's default 32, `-Xcheck:jni` still
/// finds nothing to say.
#[test]
fn xcheck_jni_finds_nothing_with_many_threads() {
    let s = Scratch::new("xcheck-jni-threads");
    compile(&s.0, &["LockContention.java"]);
    let out = s.path("x.collapsed");
    let opts = format!("start,event=cpu,alloc=64k,alloc_threads=Thread-*,lock=0,file={}", out.display());
    let o = run_java(&s.0, &opts, &["-Xcheck:jni"], &s.0, &["LockContention", "1", "24"]);
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    for text in [&stdout, &err] {
        assert!(!text.contains("JNI local refs"), "{text}");
        assert!(!text.contains("WARNING in native method"), "{text}");
    }
    assert!(err.contains("threads matching 'Thread-*' (") && err.contains("lock summary:"), "{err}");
}
