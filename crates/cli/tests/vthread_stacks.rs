//! Virtual threads' CPU stacks on JDK 21 and 25: each is whole (from the
//! carrier through the continuation's entry to the thread's own frames) or
//! marked: under `[frames still frozen in the continuation]` where HotSpot
//! has not thawed the lower frames yet, or under a failure marker counted
//! in `failed=`. Never a stack that silently lost frames. The same in a
//! streamed JFR recording, which counts the frozen ones as the profile does.
//! `tests/java/VtStacks.java` knows what its threads' stacks hold.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

const FROZEN: &str = "[frames still frozen in the continuation]";
const ENTRY: [&str; 3] = ["jdk.internal.vm.Continuation.enterSpecial", "jdk.internal.vm.Continuation.enter", "jdk.internal.vm.Continuation.enter0"];

/// The JDK 21+ runtimes of OXPROF_EXTRA_JDKS, with their major versions.
fn virtual_thread_jdks() -> Vec<(u32, std::path::PathBuf)> {
    let jdks = extra_jdks();
    let found: Vec<(u32, std::path::PathBuf)> = jdks
        .iter()
        .map(|home| home.join("bin/java"))
        .filter_map(|java| {
            let major = java_major(&java);
            (major >= 21).then_some((major, java))
        })
        .collect();
    assert!(found.len() >= 2, "no JDK 21 and 25 among OXPROF_EXTRA_JDKS ({jdks:?})");
    found
}

/// What VtStacks printed: its threads' frames root first (`Thread.getStackTrace`,
/// which hides the continuation's frames), and the least `deep` recursion.
struct Truth {
    chain: Vec<String>,
    min_depth: usize,
}

fn run(java: &Path, dir: &Path, opts: &str, file: &Path) -> (Truth, String) {
    let o = Command::new(java)
        .current_dir(dir)
        .arg(format!("-agentpath:{}={opts},file={}", agent().display(), file.display()))
        .args(["-cp", dir.to_str().unwrap(), "VtStacks", "2000", "2"])
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "the JVM failed: {:?}\n{stderr}\n{stdout}", o.status);
    let line = stdout.lines().find_map(|l| l.strip_prefix("TRUTH ")).unwrap_or_else(|| panic!("no TRUTH line: {stdout}"));
    let field = |k: &str| line.split(' ').find_map(|kv| kv.strip_prefix(k)).unwrap_or_else(|| panic!("no {k} in {line}"));
    assert_eq!(field("threads="), "4000", "{line}");
    let truth = Truth { chain: field("chain=").split(';').map(str::to_string).collect(), min_depth: field("min_depth=").parse().unwrap() };
    (truth, stderr)
}

/// How a stack holding `VtStacks.work` reads against the truth.
#[derive(Debug, PartialEq)]
enum Read {
    Whole,
    Frozen,
    Failed,
    Broken,
    /// Whole at both ends, but with fewer `deep` frames than any thread
    /// has: frames lost in the middle, which no check of the continuation's
    /// frames can see (through AsyncGetCallTrace on JDK 25: 1-4% of the
    /// samples; JDK 21: about 0.1%; an open problem, counted and printed,
    /// not asserted).
    Shallow,
}

fn read(st: &[String], truth: &Truth) -> Read {
    if st.iter().any(|f| f == FROZEN) {
        let at = st.iter().position(|f| f == FROZEN).unwrap();
        assert!(at > 0 && st[at - 1] == ENTRY[0], "marker not above enterSpecial: {st:?}");
        return Read::Frozen;
    }
    // A failure marker: a synthetic frame below the first Java frame.
    let first_java = st.iter().position(|f| f.contains('.') && !f.starts_with('[')).unwrap_or(0);
    if st[..first_java].iter().any(|f| f.starts_with('[') && !f.contains(" tid=")) {
        return Read::Failed;
    }
    // Whole: the carrier's frames and the entry, or the virtual thread's
    // own frames from `Continuation.enter` (where the own walk ends them),
    // then the thread's frames of the truth in order (the frames
    // getStackTrace hides may lie between), ending in at least `min_depth`
    // deep frames and work.
    let Some(e) = st.windows(2).position(|w| w == &ENTRY[1..]) else { return Read::Broken };
    let from_entry = e > 0 && st[e - 1] == ENTRY[0] && e - 1 > first_java;
    if !from_entry && e != first_java {
        return Read::Broken;
    }
    let mut rest = st[e + 2..].iter();
    let (deep, body): (Vec<&String>, Vec<&String>) = truth.chain.iter().partition(|f| *f == "VtStacks.deep");
    let own = body.iter().filter(|f| **f != "VtStacks.work");
    let in_order = own.clone().all(|f| rest.any(|g| g == *f));
    let after_task: Vec<&String> = rest.take_while(|f| *f != "VtStacks.work").collect();
    let deep_only = after_task.iter().all(|f| *f == "VtStacks.deep") && !deep.is_empty();
    match (in_order && deep_only, after_task.len() >= truth.min_depth) {
        (true, true) => Read::Whole,
        (true, false) => Read::Shallow,
        _ => Read::Broken,
    }
}

/// Every event on (CPU at 1 ms with allocations sampled, whose callback
/// walks the stack in a JVMTI handshake): each `VtStacks.work` sample is
/// whole or marked, the failed ones are counted in `failed=`, the frozen
/// ones in `frozen=`. AsyncGetCallTrace on JDK 25 ended 12% of these
/// stacks at `Continuation.enter` (no carrier, no `enterSpecial`, often no
/// `enter0` and no frames between it and the top ones), unmarked.
#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn virtual_thread_stacks_are_whole_or_marked() {
    let s = Scratch::new("vthread-stacks");
    compile(&s.0, &["VtStacks.java"]);
    for (major, java) in virtual_thread_jdks() {
        let label = format!("JDK {major}");
        let out = s.path(&format!("all-{major}.collapsed"));
        let (truth, err) = run(&java, &s.0, "start,event=cpu,interval=1ms,wall=10ms,alloc=16k,lock=0", &out);
        let cpu = read_collapsed(&out);
        let mut by = std::collections::BTreeMap::<String, u64>::new();
        let mut broken = Vec::new();
        for (st, n) in cpu.iter().filter(|(st, _)| st.iter().any(|f| f == "VtStacks.work")) {
            let r = read(st, &truth);
            *by.entry(format!("{r:?}")).or_default() += n;
            if r == Read::Broken {
                broken.push(format!("{n} {}", st.join(";")));
            }
        }
        let work: u64 = by.values().sum();
        let got = |k: &str| by.get(k).copied().unwrap_or(0);
        eprintln!("{label}: {work} VtStacks.work samples: {by:?}");
        assert!(work >= 300, "{label}: only {work} samples in VtStacks.work\n{err}");
        assert!(got("Whole") >= work / 3, "{label}: {by:?}\n{err}");
        assert!(broken.is_empty(), "{label}: {} of {work} samples lost frames without a marker:\n{}", broken.len(), broken.join("\n"));
        // Not asserted: frames lost in the middle, whole at both ends (see `Read::Shallow`).
        eprintln!("{label}: {} of {work} samples whole at both ends but with fewer deep frames than any thread has", got("Shallow"));
        // The markers are counted in the summary line.
        let sum = summary(&err);
        let field = |k: &str| sum.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or_else(|| panic!("{label}: no {k}= in the summary\n{err}"));
        assert_eq!(field("frozen"), samples_with(&cpu, FROZEN), "{label}: frozen= against the profile's marked samples\n{err}");
        assert!(field("failed") >= got("Failed"), "{label}: failed={} below the {} failed VtStacks.work samples\n{err}", field("failed"), got("Failed"));
    }
}

/// A recording streamed to JFR marks lazily thawed stacks as the collapsed
/// output does (no unmarked stack reads as if `enterSpecial` called the top
/// frames),
/// and its summary counts them (`frozen=`) as the CPU summary does.
#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn streamed_jfr_marks_and_counts_frozen_frames() {
    let s = Scratch::new("vthread-jfr");
    compile(&s.0, &["VtStacks.java"]);
    for (major, java) in virtual_thread_jdks() {
        let label = format!("JDK {major}");
        let rec = s.path(&format!("rec-{major}.jfr"));
        let (truth, err) = run(&java, &s.0, "start,event=cpu,interval=1ms", &rec);
        let collapsed = s.path(&format!("rec-{major}.collapsed"));
        let o = oxprof_cmd().args(["convert", rec.to_str().unwrap(), "-o", collapsed.to_str().unwrap()]).output().unwrap();
        assert!(o.status.success(), "{label}: convert: {}", text(&o.stderr));
        let cpu = read_collapsed(&collapsed);
        // Unmarked ones: a stack under a failure marker (a walk inside
        // HotSpot's thaw, which can meet the carrier's stale frames) is not
        // passed off as whole.
        let jumps: Vec<String> = cpu
            .iter()
            .filter(|(st, _)| read(st, &truth) != Read::Failed && st.windows(2).any(|w| w[0] == ENTRY[0] && w[1].starts_with("VtStacks.")))
            .map(|(st, n)| format!("{n} {}", st.join(";")))
            .collect();
        let marked = samples_with(&cpu, FROZEN);
        let work = samples_with(&cpu, "VtStacks.work");
        eprintln!("{label}: {marked} of {work} VtStacks.work samples above the frozen frames' marker in the JFR");
        assert!(jumps.is_empty(), "{label}: {} stacks jump from enterSpecial to the top frames:\n{}", jumps.len(), jumps.join("\n"));
        assert!(marked > 0, "{label}: no stack above the marker in {work} samples of VtStacks.work\n{err}");
        let unmarked: Vec<String> = cpu
            .iter()
            .filter(|(st, _)| st.iter().any(|f| f == "VtStacks.work") && read(st, &truth) == Read::Broken)
            .map(|(st, n)| format!("{n} {}", st.join(";")))
            .collect();
        assert!(unmarked.is_empty(), "{label}: stacks that lost frames without a marker:\n{}", unmarked.join("\n"));
        let jfr = summary_fields(&err, "[oxprof] jfr summary:");
        let cpu_summary = summary(&err);
        assert_eq!(jfr.get("frozen").map(String::as_str), Some(marked.to_string().as_str()), "{label}: the JFR's frozen= against its marked samples\n{err}");
        assert_eq!(jfr.get("frozen"), cpu_summary.get("frozen"), "{label}: the JFR's and the CPU summary's frozen=\n{err}");
    }
}
