//! Recordings made by others than the agent, read by `oxprof`: the JDK's
//! own flight recorder (names in modified UTF-8, hidden classes, stacks cut
//! at its stack depth, two sampling periods in one recording), checked
//! against what the program measures itself.

mod common;

use common::*;

const SUPP: &str = r#"
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import jdk.jfr.Configuration;
import jdk.jfr.Recording;

public class Supp {
    static volatile long sink;
    static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();

    static long cpuMs() { return MX.getCurrentThreadCpuTime() / 1_000_000; }

    static void spin(long ms) {
        long end = cpuMs() + ms, x = 0;
        while (cpuMs() < end) {
            for (int i = 0; i < 200_000; i++) x += i * 31 ^ x;
        }
        sink += x;
    }

    static class 𝑥Class { static void 𝑥method(long ms) { spin(ms); } }

    static void rec(int depth, long ms) {
        if (depth == 0) spin(ms); else rec(depth - 1, ms);
        sink++;
    }

    static void spinA(long ms) { spin(ms); }
    static void spinB(long ms) { spin(ms); }

    public static void main(String[] args) throws Exception {
        Runnable r = () -> 𝑥Class.𝑥method(200);
        r.run();
        // Long enough for the JDK's sampler (every 20 ms) to catch it on a busy machine.
        rec(150, 600);
        long a0 = cpuMs();
        spinA(600);
        long a1 = cpuMs();
        // A second recording at the profile settings' 10 ms for a while,
        // as `jcmd JFR.start settings=profile` would run one.
        try (Recording second = new Recording(Configuration.getConfiguration("profile"))) {
            second.start();
            long b0 = cpuMs();
            spinB(600);
            long b1 = cpuMs();
            second.stop();
            System.out.println("TRUTH a_ms=" + (a1 - a0) + " b_ms=" + (b1 - b0));
        }
    }
}
"#;

/// The JDK's own recording of `Supp` (its default settings, 20 ms, then
/// 10 ms while a second recording runs), with the program's truth.
fn supp_recording(s: &Scratch) -> (std::path::PathBuf, std::collections::HashMap<String, f64>) {
    std::fs::write(s.path("Supp.java"), SUPP).unwrap();
    let o = std::process::Command::new(tool("javac")).args(["-encoding", "UTF-8", "-d"]).arg(&s.0).arg(s.path("Supp.java")).output().unwrap();
    assert!(o.status.success(), "javac: {}", text(&o.stderr));
    let jfr = s.path("supp.jfr");
    let o = java_cmd([format!("-XX:StartFlightRecording=filename={}", jfr.display()), "-cp".into(), s.0.display().to_string(), "Supp".into()])
        .current_dir(&s.0)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    (jfr, truth_line(&text(&o.stdout)))
}

/// Tester's findings on the JDK's recordings: a method and class named
/// with a supplementary character (U+1D465, written by HotSpot in modified
/// UTF-8) came out as replacement characters; a lambda kept its per-run
/// suffixes (`Supp$$Lambda$14+0x…/123456.run`), so two runs' profiles
/// matched nothing; stacks cut at the JDK's depth of 64 were read as whole
/// stacks rooted mid-stack; and a recording that sampled at 20 ms, then at
/// 10 ms while a second recording ran, weighed every sample by the last
/// period set (the 10 ms phase counted double).
#[test]
fn the_jdks_recording_reads_with_names_cut_stacks_and_periods() {
    let s = Scratch::new("foreign-jdk");
    let (jfr, truth) = supp_recording(&s);
    let out = s.path("supp.collapsed");
    let o = oxprof_cmd().args(["convert", "--cpu", "--total"]).arg(&jfr).arg("-o").arg(&out).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stacks = read_collapsed(&out);
    let all = std::fs::read_to_string(&out).unwrap();
    assert!(!all.contains('\u{FFFD}'), "replacement characters in names");

    // Names.
    assert!(samples_with(&stacks, "Supp$\u{1D465}Class.\u{1D465}method") > 0, "no Supp$𝑥Class.𝑥method frame:\n{all}");
    let lambdas: Vec<&String> = stacks.iter().flat_map(|(s, _)| s).filter(|f| f.starts_with("Supp$$Lambda")).collect();
    assert!(!lambdas.is_empty(), "no lambda frame:\n{all}");
    for f in lambdas {
        let counter = f.strip_prefix("Supp$$Lambda").and_then(|r| r.strip_suffix(".run")).unwrap_or_else(|| panic!("{f}"));
        assert!(counter.is_empty(), "per-run suffix or lambda counter kept: {f}");
    }

    // Stacks deeper than 64 frames: marked cut, at the root.
    let deep: Vec<&(Vec<String>, u64)> = stacks.iter().filter(|(s, _)| s.iter().filter(|f| *f == "Supp.rec").count() > 10).collect();
    assert!(!deep.is_empty(), "no deep stacks:\n{all}");
    for (s, _) in &deep {
        assert_eq!(s[0], "[truncated]", "a cut stack not marked: {}", s.join(";"));
    }
    assert!(stacks.iter().all(|(s, _)| s[0] != "Supp.rec"), "a stack rooted mid-stack");

    // Each phase weighs its own period: the estimated CPU time per sample
    // is 20 ms in phase A and 10 ms in phase B (one period for every sample
    // made one of them wrong by 2x). Per sample, not against the program's
    // own measure: how many samples the JDK's sampler takes on a busy
    // machine is its business.
    let counts = s.path("supp-counts.collapsed");
    let o = oxprof_cmd().args(["convert", "--cpu"]).arg(&jfr).arg("-o").arg(&counts).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let counted = read_collapsed(&counts);
    let per_sample = |m: &str| {
        let n = samples_with(&counted, m);
        assert!(n > 0, "no samples of {m}:\n{all}");
        samples_with(&stacks, m) as f64 / n as f64 / 1e6
    };
    let (a, b) = (per_sample("Supp.spinA"), per_sample("Supp.spinB"));
    assert!((a - 20.0).abs() < 0.01 && (b - 10.0).abs() < 0.01, "ms per sample: phase A {a} (20 ms), phase B {b} (10 ms)");
    // And the time is the program's own, roughly (the JDK samples what
    // runs Java; a loaded machine loses some).
    let est = |m: &str| samples_with(&stacks, m) as f64 / 1e6;
    let b_over_truth = est("Supp.spinB") / truth["b_ms"];
    assert!((0.1..1.5).contains(&b_over_truth), "phase B's estimate over the program's CPU: {b_over_truth:.2}");
}
