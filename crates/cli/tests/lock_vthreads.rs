//! Lock profiling of `synchronized` monitors contended by virtual threads
//! (tests/java/VtMonitors.java), on JDK 21 (a virtual thread blocked on a
//! monitor stays pinned to its carrier) and JDK 25 (JEP 491: it unmounts,
//! and its wait may begin on one carrier and end on another), with platform
//! threads on the same JDKs for a control. Each waiter sums its own waiting;
//! the profile's monitor site must hold the same time.

mod common;

use std::path::Path;

use common::*;

/// Runs VtMonitors with every contended entry recorded; returns the
/// profile's waiting at the monitor site and the program's truth, in ns.
fn run(java: &Path, dir: &Path, mode: &str, label: &str) -> (f64, f64) {
    let out = dir.join(format!("{}-{mode}.collapsed", label.replace(' ', "_")));
    // 8 threads, 40 entries each, the holder inside for 5 ms.
    let o = run_java_in(java, dir, &format!("start,event=lock,lock=0,total,file={}", out.display()), &["VtMonitors", mode, "8", "40", "5"]);
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{label} {mode}: {err}");
    let t = truth_line(&stdout);
    // Enough real contention to measure: most entries waited.
    assert!(t["long_waits"] >= 100.0, "{label} {mode}: only {} entries waited over 1 ms\n{stdout}", t["long_waits"]);
    let stacks = read_collapsed(&out);
    let site = "VtMonitors.monitorSite";
    let est = samples_with(&stacks, site) as f64;
    // The monitor's class is the leaf of the site's waits.
    let under_class: u64 =
        stacks.iter().filter(|(st, _)| st.iter().any(|f| f == site) && st.last().is_some_and(|l| l == "java.lang.Object")).map(|(_, n)| n).sum();
    assert!(under_class as f64 >= 0.95 * est, "{label} {mode}: only {under_class} of {est:.0} ns under java.lang.Object\n{stacks:?}");
    (est, t["monitor_wait"])
}

#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn monitor_waits_of_virtual_threads_are_measured_whole() {
    let jdks = extra_jdks();
    let s = Scratch::new("lock-vthreads");
    compile(&s.0, &["VtMonitors.java"]);
    let mut tried = Vec::new();
    let mut failures = Vec::new();
    for home in &jdks {
        let java = home.join("bin/java");
        let major = java_major(&java);
        if major < 21 {
            continue;
        }
        tried.push(major);
        let label = format!("JDK {major}");
        for mode in ["virtual", "platform"] {
            let (est, truth) = run(&java, &s.0, mode, &label);
            let off = 100.0 * (est - truth).abs() / truth;
            eprintln!("{label} {mode} threads: monitor site {:.0} ms, truth {:.0} ms (ratio {:.3}, {off:.1}% off)", est / 1e6, truth / 1e6, est / truth);
            // Measured 0.1–0.8% off in 4 runs (2-core VM at load 5–7; what is
            // left is the JDK's own spinning before it posts the event);
            // before the fix, JDK 25's virtual threads got 3% of it (97% off).
            if off > 10.0 {
                failures.push(format!("{label} {mode} threads: monitor site {:.0} ms vs truth {:.0} ms ({off:.1}% off)", est / 1e6, truth / 1e6));
            }
        }
    }
    assert!(tried.contains(&21) && tried.iter().any(|&m| m >= 24), "need JDK 21 and JDK 24+ among OXPROF_EXTRA_JDKS ({jdks:?}); found {tried:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
