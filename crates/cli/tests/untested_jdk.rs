//! The agent on a JDK newer than the newest it was tested on. From JDK 26 a
//! `jmethodID` is a key into a table of the VM's (JDK-8268406), no longer a
//! pointer to a `Method*` slot, so everything that reads HotSpot's internals
//! (frame types, the own CPU walk, the own allocation walk, the structure
//! table) must stay off there and the pure JVMTI paths take over. No JDK 26
//! runtime can be fetched here: the hidden `OXPROF_ASSUME_JDK=26` makes the
//! agent decide as it would on JDK 26, on the JDKs at hand.

mod common;

use common::*;
use std::path::Path;
use std::process::{Command, Output};

/// The line the agent logs once when it refuses HotSpot's internals.
const GATED: &str = "[oxprof] JDK 26 is newer than the newest JDK oxprof was tested on (25)";

/// Samples whose stack has a Java frame with a frame type (interpreted,
/// compiled, inlined): only the physical walk behind them gives types.
fn typed_samples(stacks: &[(Vec<String>, u64)]) -> u64 {
    stacks.iter().filter(|(s, _)| s.iter().any(|f| ["_[0]", "_[j]", "_[i]"].iter().any(|t| f.ends_with(t)))).map(|(_, n)| n).sum()
}

fn run(java: &Path, assume: Option<&str>, opts: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(java);
    if let Some(v) = assume {
        cmd.env("OXPROF_ASSUME_JDK", v);
    }
    let o = cmd.arg(format!("-agentpath:{}={opts}", agent().display())).args(args).output().unwrap();
    assert!(o.status.success(), "{} {opts}: {}", java.display(), text(&o.stderr));
    o
}

/// The gated line, exactly once, and only when the release was assumed.
fn assert_gated(err: &str, gated: bool, who: &str) {
    let lines = err.lines().filter(|l| l.starts_with(GATED)).count();
    assert_eq!(lines, usize::from(gated), "{who}: gated lines in:\n{err}");
}

fn check(java: &Path, classes: &Path, out: &Path) {
    let who = java.display().to_string();
    let cp = classes.to_str().unwrap();
    let cpu = format!("start,interval=1ms,ann,file={}", out.display());
    let frame_types = ["-XX:CompileCommand=quiet", "-XX:CompileCommand=exclude,FrameTypes::cold", "-cp", cp, "FrameTypes", "2"];

    // Control: on the real release the same run has typed frames, so their
    // absence below is the gate's doing.
    let o = run(java, None, &cpu, &frame_types);
    assert_gated(&text(&o.stderr), false, &who);
    let s = read_collapsed(out);
    assert!(typed_samples(&s) * 2 >= total(&s), "{who}: control run without frame types: {s:?}");

    // CPU: stacks named by AsyncGetCallTrace alone, no frame typed.
    let o = run(java, Some("26"), &cpu, &frame_types);
    let err = text(&o.stderr);
    assert_gated(&err, true, &who);
    assert!(err.contains("profile written to"), "{who}: {err}");
    let s = read_collapsed(out);
    assert_eq!(typed_samples(&s), 0, "{who}: frame types claimed in gated mode: {s:?}");
    for (method, least) in [("FrameTypes.hot", 200), ("FrameTypes.callee", 50), ("FrameTypes.cold", 50)] {
        let n = samples_with(&s, method);
        assert!(n >= least, "{who}: {method} named in only {n} samples: {s:?}");
    }

    // The own walk stays off: where AsyncGetCallTrace refuses (the VM
    // allocating under -Xint), samples stay failed. With the walk, under
    // 5% fail here (see frames.rs).
    let o = run(java, Some("26"), &format!("start,interval=1ms,file={}", out.display()), &["-Xint", "-Xmx64m", "-cp", cp, "VmHeavy", "2"]);
    let err = text(&o.stderr);
    assert_gated(&err, true, &who);
    let sum = summary(&err);
    let (failed, failed_pct): (u64, f64) = (sum["failed"].parse().unwrap(), sum["failed_pct"].parse().unwrap());
    eprintln!("{who}: gated mode, VmHeavy under -Xint: {failed} failed walks ({failed_pct}%)");
    assert!(failed >= 50 && failed_pct >= 20.0, "{who}: only {failed} failed walks ({failed_pct}%): the own walk ran in gated mode");

    // Allocation stacks all come from GetStackTrace, named and untyped.
    let alloc = format!("event=alloc,alloc=8k,ann,file={}", out.display());
    let o = run(java, Some("26"), &alloc, &["-cp", cp, "AllocPaths", "40000"]);
    let err = text(&o.stderr);
    assert_gated(&err, true, &who);
    let counts = alloc_summary(&err);
    assert!(counts["samples"] > 1000, "{who}: {counts:?}");
    assert_eq!((counts["own_walks"], counts["jvmti_walks"]), (0, counts["samples"]), "{who}: own allocation walks in gated mode");
    let s = read_collapsed(out);
    assert_eq!(typed_samples(&s), 0, "{who}: typed allocation frames in gated mode: {s:?}");
    assert!(samples_with(&s, "AllocPaths.recurse") > 100, "{who}: allocation stacks not named: {s:?}");
}

/// Attached to a running JVM: the attach's reply says why (its log stays
/// quiet), nothing is typed, and code compiled before the attach is still
/// told from native code.
fn check_attach(java: &Path, classes: &Path, out: &Path) {
    let who = java.display().to_string();
    let mut cmd = Command::new(java);
    cmd.env("OXPROF_ASSUME_JDK", "26").args(["-cp", classes.to_str().unwrap(), "Spin", "forever"]);
    let mut jvm = RunningJvm::spawn(cmd, classes, "ready");
    // Until the JVM has had 1 s of CPU: about 500 samples at 2 ms.
    let o = attach_for_cpu(oxprof_cmd(), jvm.pid(), 1000, &["--interval", "2ms", "-o", out.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{who}: {err}");
    assert_gated(&err, true, &who);
    assert!(err.contains(&format!("profile written to {}", out.display())), "{who}: {err}");
    let s = read_collapsed(out);
    assert_eq!(typed_samples(&s), 0, "{who}: frame types claimed in gated mode: {s:?}");
    // Spin.loop was compiled before the attach: only the replayed code
    // events tell its code from native code without the structure table.
    let (all, spin, unknown) = (total(&s), samples_with(&s, "Spin.loop"), samples_with(&s, "[unknown]"));
    assert!(all > 100 && spin * 10 >= all * 8, "{who}: Spin.loop in {spin} of {all} samples: {s:?}");
    assert!(unknown * 20 <= all, "{who}: compiled Java code taken for unknown native code in {unknown} of {all} samples: {s:?}");
    assert!(jvm.alive(), "{who}: the JVM died");
}

fn compiled(s: &Scratch) {
    compile(&s.0, &["FrameTypes.java", "VmHeavy.java", "AllocPaths.java", "Spin.java"]);
}

#[test]
fn a_newer_jdk_gets_the_jvmti_paths_only() {
    let s = Scratch::new("untested-jdk");
    compiled(&s);
    check(&java(), &s.0, &s.path("out.collapsed"));
    check_attach(&java(), &s.0, &s.path("attach.collapsed"));
}

#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn a_newer_jdk_gets_the_jvmti_paths_only_on_every_supported_jdk() {
    let s = Scratch::new("untested-jdks");
    compiled(&s);
    for home in extra_jdks() {
        check(&home.join("bin/java"), &s.0, &s.path("out.collapsed"));
        check_attach(&home.join("bin/java"), &s.0, &s.path("attach.collapsed"));
    }
}
