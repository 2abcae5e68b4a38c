//! `oxprof convert`, `diff` and `report` on real recordings: JFR files the
//! JDK wrote (checked against the JDK's own `jfr print`), pprof read by Go's
//! `go tool pprof`, filters, and bad input.

mod common;

use common::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Records `Convert` for `secs` with the JDK's own flight recorder.
fn jdk_recording(java: &Path, s: &Scratch, name: &str, secs: &str) -> PathBuf {
    jdk_flight_recording(java, s, name, &["Convert", secs])
}

fn oxprof_ok(args: &[&str]) -> Output {
    let o = oxprof_cmd().args(args).output().unwrap();
    assert!(o.status.success(), "oxprof {args:?}: {}", text(&o.stderr));
    o
}

/// Leaf method of each `jfr print` event of a type, counted: the first
/// frame line after `stackTrace = [`, without its signature.
fn jfr_print_leaves(jfr_tool: &Path, file: &Path, event: &str) -> HashMap<String, u64> {
    let o = Command::new(jfr_tool).args(["print", "--events", event]).arg(file).output().unwrap();
    assert!(o.status.success(), "jfr print: {}", text(&o.stderr));
    let out = text(&o.stdout);
    let mut leaves = HashMap::new();
    let mut lines = out.lines();
    while let Some(l) = lines.next() {
        if l.trim() == "stackTrace = [" {
            let frame = lines.next().unwrap().trim();
            if frame == "]" {
                continue; // an empty stack trace
            }
            // oxprof's JVM-thread frames have no class: jfr print shows ".[GC Thread]".
            let method = without_run_suffix(frame_method(frame).trim_start_matches('.'));
            *leaves.entry(method).or_insert(0) += 1;
        }
    }
    leaves
}

/// A `jfr print` method name without the per-run suffix and lambda counter
/// of its hidden or anonymous class, as profiles name it (so that two runs
/// compare): JDK 11's
/// identity hash (`Foo$$Lambda$62.917831210.get$Lambda`), later JDKs'
/// address (`Foo$$Lambda$14.0x0000000800c03000.run`, `+0x…`, `/0x…`).
fn without_run_suffix(name: &str) -> String {
    let Some((class, method)) = name.rsplit_once('.') else { return name.to_string() };
    let run_part = |p: &str| {
        !p.is_empty()
            && (p.bytes().all(|b| b.is_ascii_digit()) || p.strip_prefix("0x").is_some_and(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit())))
    };
    if !class.contains('$') {
        return name.to_string();
    }
    let kept: Vec<&str> = class.split(['.', '/', '+']).filter(|p| !run_part(p)).collect();
    let class = kept.join(".");
    // The lambda counter before JDK 21 (`$$Lambda$62`) changes from run to run too.
    let class = match class.rsplit_once("$$Lambda$") {
        Some((head, n)) if n.bytes().all(|b| b.is_ascii_digit()) => format!("{head}$$Lambda"),
        _ => class,
    };
    format!("{class}.{method}")
}

/// The class and method of a `jfr print` frame line, `Class.method(params)
/// line: N`: what precedes the last parenthesised group, which a C++ name
/// such as `{virtual override thunk({offset(-8)}, X::f)}` may itself contain.
fn frame_method(frame: &str) -> &str {
    let head = frame.split(" line:").next().unwrap_or(frame).trim_end();
    if !head.ends_with(')') {
        return head;
    }
    let mut depth = 0;
    for (i, c) in head.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    return &head[..i];
                }
            }
            _ => {}
        }
    }
    head
}

#[test]
fn jfr_print_frame_lines_give_class_and_method() {
    assert_eq!(frame_method("Convert.spin(int) line: 12"), "Convert.spin");
    assert_eq!(frame_method("java.lang.String.equals(Object) line: 10"), "java.lang.String.equals");
    assert_eq!(frame_method(".[GC Thread]()"), ".[GC Thread]");
    assert_eq!(
        frame_method(".{virtual override thunk({offset(-8)}, LIRGenerator::block_do)}()"),
        ".{virtual override thunk({offset(-8)}, LIRGenerator::block_do)}"
    );
}

/// Leaf frame counts of collapsed stacks (skipping allocated-class leaves when `skip_class`).
/// `ours` as the JDK's `jfr` tool shows it: from JDK 22 on it leaves out the
/// frames of hidden methods (`java.lang.invoke`'s LambdaForm holders such as
/// `Invokers$Holder.linkToTargetMethod`, lambda proxies), so a sample whose top frame is one
/// has its caller as leaf there (one CPU sample in a JDK 25 CI run). oxprof
/// keeps such frames. Samples under such a leaf that `jfr` never shows are
/// given to the leaves where `jfr` counts more than oxprof.
fn shown_by_jfr(ours: &HashMap<String, u64>, theirs: &HashMap<String, u64>) -> HashMap<String, u64> {
    let hidden = |k: &str| (k.starts_with("java.lang.invoke.") || k.contains("$$Lambda")) && !theirs.contains_key(k);
    let mut moved: u64 = ours.iter().filter(|(k, _)| hidden(k)).map(|(_, n)| n).sum();
    let mut shown: HashMap<String, u64> = ours.iter().filter(|(k, _)| !hidden(k)).map(|(k, n)| (k.clone(), *n)).collect();
    for (k, n) in theirs {
        let have = shown.entry(k.clone()).or_insert(0);
        let take = n.saturating_sub(*have).min(moved);
        *have += take;
        moved -= take;
    }
    shown.retain(|_, n| *n > 0);
    shown
}

fn leaves(stacks: &[(Vec<String>, u64)], skip_last: bool) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    for (s, n) in stacks {
        // An event without a stack trace (jfr print: `stackTrace = null`) has only the class frame.
        let Some(leaf) = s.len().checked_sub(if skip_last { 2 } else { 1 }).map(|i| &s[i]) else { continue };
        // Kernel frames carry collapsed output's `_[k]` mark; `jfr print` shows the bare name.
        let leaf = leaf.strip_suffix("_[k]").unwrap_or(leaf);
        *m.entry(leaf.to_string()).or_insert(0) += n;
    }
    m
}

/// The JDK's recording converted by oxprof has exactly the leaf methods and
/// counts `jfr print` shows, for CPU and allocation samples.
fn check_jdk_recording(java: &Path, jfr_tool: &Path, s: &Scratch, tag: &str) {
    let rec = jdk_recording(java, s, &format!("rec{tag}.jfr"), "2");
    check_against_jfr_print(&rec, jfr_tool, s, tag);
}

/// Converting `rec` gives the leaf methods and counts `jfr print` shows.
fn check_against_jfr_print(rec: &Path, jfr_tool: &Path, s: &Scratch, tag: &str) {
    let rec = rec.to_path_buf();
    let cpu = s.path(&format!("cpu{tag}.collapsed"));
    oxprof_ok(&["convert", rec.to_str().unwrap(), "-o", cpu.to_str().unwrap(), "--cpu"]);
    let stacks = read_collapsed(&cpu);
    let ours = leaves(&stacks, false);
    let theirs = jfr_print_leaves(jfr_tool, &rec, "jdk.ExecutionSample");
    assert_eq!(shown_by_jfr(&ours, &theirs), theirs, "{tag}: CPU leaf counts differ from jfr print (ours: {ours:?})");
    let top = ours.iter().max_by_key(|(_, n)| **n).unwrap();
    assert_eq!(top.0, "Convert.spin", "{tag}: {ours:?}");
    assert!(stacks.iter().all(|(s, _)| s.len() == 1 || !s[0].contains('(')), "frame names have no signatures");

    // Allocation samples: JDK 11 has only the TLAB events.
    let alloc = s.path(&format!("alloc{tag}.collapsed"));
    oxprof_ok(&["convert", rec.to_str().unwrap(), "-o", alloc.to_str().unwrap(), "--alloc"]);
    let stacks = read_collapsed(&alloc);
    let ours = leaves(&stacks, true);
    let mut theirs = jfr_print_leaves(jfr_tool, &rec, "jdk.ObjectAllocationSample");
    if theirs.is_empty() {
        theirs = jfr_print_leaves(jfr_tool, &rec, "jdk.ObjectAllocationInNewTLAB");
        for (k, v) in jfr_print_leaves(jfr_tool, &rec, "jdk.ObjectAllocationOutsideTLAB") {
            *theirs.entry(k).or_insert(0) += v;
        }
    }
    assert!(!theirs.is_empty(), "{tag}: no allocation events in the JDK's recording");
    assert_eq!(ours, theirs, "{tag}: allocation leaf counts differ from jfr print");
    assert!(samples_with(&stacks, "byte[]") > 0, "{tag}: no byte[] allocations");
    eprintln!("ok: {tag}");
}

#[test]
fn jdk17_recording_converts_to_the_methods_jfr_print_shows() {
    let s = Scratch::new("convert-jdk");
    compile(&s.0, &["Convert.java"]);
    check_jdk_recording(&java(), &tool("jfr"), &s, "17");
}

#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn jdk_recordings_of_11_21_25_convert_to_the_methods_jfr_print_shows() {
    let s = Scratch::new("convert-jdks");
    compile(&s.0, &["Convert.java"]);
    for (i, home) in extra_jdks().into_iter().enumerate() {
        // The runtime's own jfr tool where it has one (JDK 25's wheel does not).
        let own = home.join("bin/jfr");
        let jfr_tool = if own.is_file() { own } else { tool("jfr") };
        check_jdk_recording(&home.join("bin/java"), &jfr_tool, &s, &format!("-{i}-{}", home.display()).replace('/', "_"));
    }
}

#[test]
fn agent_jfr_converts_to_the_methods_jfr_print_shows() {
    let s = Scratch::new("convert-agent-jfr");
    compile(&s.0, &["Convert.java"]);
    let rec = s.path("agent.jfr");
    let o = run_java(&s.0, &format!("start,event=cpu,alloc=64k,interval=5ms,file={}", rec.display()), &[], &s.0, &["Convert", "2"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    check_against_jfr_print(&rec, &tool("jfr"), &s, "agent");
    // The recorded interval is the CPU period: 5 ms per sample.
    let o = oxprof_ok(&["report", rec.to_str().unwrap(), "--cpu", "--top", "1"]);
    let rep = text(&o.stdout);
    let first = rep.lines().next().unwrap();
    let n: f64 = first.split('(').nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    let mut q = first.split(", ").nth(1).unwrap().split(' ');
    let value: f64 = q.next().unwrap().parse().unwrap();
    let secs = match q.next().unwrap().trim_end_matches(')') {
        "s" => value,
        "ms" => value / 1e3,
        unit => panic!("unexpected unit {unit} in {first}"),
    };
    assert!((secs - n * 0.005).abs() < 0.01, "{first}");
}

fn go() -> PathBuf {
    tool("go")
}

fn pprof_top(file: &Path, flags: &str) -> String {
    let o = Command::new(go()).args(["tool", "pprof"]).args(flags.split(' ')).arg(file).env("HOME", std::env::temp_dir()).output().unwrap();
    assert!(o.status.success(), "go tool pprof {flags}: {}", text(&o.stderr));
    text(&o.stdout)
}

/// First function of `go tool pprof -top`'s table.
fn top_function(top: &str) -> String {
    let mut rows = top.lines().skip_while(|l| !l.trim_start().starts_with("flat")).skip(1);
    rows.next().unwrap_or_else(|| panic!("no rows in {top}")).split_whitespace().last().unwrap().to_string()
}

#[test]
fn agent_pprof_is_read_by_go_pprof_with_go_sample_types() {
    let s = Scratch::new("pprof");
    compile(&s.0, &["Convert.java"]);
    let out = s.path("prof.pb.gz");
    let o = run_java(&s.0, &format!("start,event=cpu,alloc=64k,interval=5ms,file={}", out.display()), &[], &s.0, &["Convert", "2"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let alloc = s.path("prof.alloc.pb.gz");
    assert!(out.is_file() && alloc.is_file(), "CPU and allocation pprof files: {}", text(&o.stderr));

    let top = pprof_top(&out, "-top");
    assert!(top.contains("Type: cpu"), "{top}");
    assert_eq!(top_function(&top), "Convert.spin", "{top}");
    let raw = pprof_top(&out, "-raw");
    assert!(raw.contains("PeriodType: cpu nanoseconds"), "{raw}");
    assert!(raw.contains("samples/count cpu/nanoseconds"), "{raw}");

    let top = pprof_top(&alloc, "-top");
    // Go's pprof shows the last sample type by default.
    assert!(top.contains("Type: alloc_space"), "{top}");
    let raw = pprof_top(&alloc, "-raw");
    assert!(raw.contains("alloc_objects/count alloc_space/bytes"), "{raw}");
    let space = pprof_top(&alloc, "-top -sample_index=alloc_space");
    // The allocated class is the leaf frame; byte[] from allocBytes dominates.
    assert_eq!(top_function(&space), "byte[]", "{space}");
    let cum = pprof_top(&alloc, "-top -cum -focus=byte");
    assert!(cum.contains("Convert.allocBytes"), "{cum}");

    // Allocations and live objects: one heap profile with Go's four sample
    // types, inuse_space shown by default; the retained int[] leads what is
    // in use, the churned byte[] what was allocated.
    let heap = s.path("live.pb.gz");
    let o = run_java(&s.0, &format!("start,event=alloc,live,file={}", heap.display()), &[], &s.0, &["Convert", "2"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!s.path("live.live.pb.gz").exists(), "live objects went to a file of their own");
    let raw = pprof_top(&heap, "-raw");
    assert!(raw.contains("alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes"), "{raw}");
    let top = pprof_top(&heap, "-top");
    assert!(top.contains("Type: inuse_space"), "{top}");
    assert_eq!(top_function(&top), "int[]", "{top}");
    let inuse = pprof_top(&heap, "-top -sample_index=inuse_space");
    assert_eq!(top_function(&inuse), "int[]", "{inuse}");
    let allocated = pprof_top(&heap, "-top -sample_index=alloc_space");
    assert_eq!(top_function(&allocated), "byte[]", "{allocated}");
    // The converter does the same from a recording.
    let rec = s.path("heap.jfr");
    let o = run_java(&s.0, &format!("start,event=alloc,live,file={}", rec.display()), &[], &s.0, &["Convert", "2"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let converted = s.path("converted.pb.gz");
    oxprof_ok(&["convert", rec.to_str().unwrap(), "--alloc", "--live", "-o", converted.to_str().unwrap()]);
    assert!(!s.path("converted.live.pb.gz").exists());
    let raw = pprof_top(&converted, "-raw");
    assert!(raw.contains("alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes"), "{raw}");
    assert_eq!(top_function(&pprof_top(&converted, "-top -sample_index=alloc_space")), "byte[]");

    // oxprof reads its own pprof back.
    let back = s.path("back.collapsed");
    oxprof_ok(&["convert", out.to_str().unwrap(), "-o", back.to_str().unwrap()]);
    let stacks = read_collapsed(&back);
    assert!(samples_with(&stacks, "Convert.spin") * 2 > total(&stacks));
    // And its heap profile as two kinds: the same collapsed stacks, kind by
    // kind, as the recording converted directly, the class the leaf (`_[a]`).
    for kind in ["--alloc", "--live"] {
        let (from_pprof, from_jfr) = (s.path(&format!("pprof{kind}.collapsed")), s.path(&format!("jfr{kind}.collapsed")));
        oxprof_ok(&["convert", converted.to_str().unwrap(), kind, "-o", from_pprof.to_str().unwrap()]);
        oxprof_ok(&["convert", rec.to_str().unwrap(), kind, "-o", from_jfr.to_str().unwrap()]);
        let (got, want) = (leaves(&read_collapsed(&from_pprof), false), leaves(&read_collapsed(&from_jfr), false));
        assert!(want.contains_key("int[]"), "{kind}: {want:?}");
        assert_eq!(got, want, "{kind}: leaves read back from the heap pprof");
    }
    let report = text(&oxprof_ok(&["report", converted.to_str().unwrap(), "--live"]).stdout);
    let first = report.lines().skip_while(|l| !l.contains("allocated in")).nth(1).unwrap_or("");
    assert!(first.contains("int[]  <-  Convert."), "the retained int[] leads the leak suspects with its site:\n{report}");
}

#[test]
fn jfr_to_pprof_live_and_html_and_filters_and_report() {
    let s = Scratch::new("convert-filters");
    compile(&s.0, &["Convert.java"]);
    let rec = jdk_recording(&java(), &s, "rec.jfr", "2");
    let r = rec.to_str().unwrap();

    // pprof of live objects, with the inuse sample types.
    let live = s.path("live.pb.gz");
    oxprof_ok(&["convert", r, "-o", live.to_str().unwrap(), "--live"]);
    let raw = pprof_top(&live, "-raw");
    assert!(raw.contains("inuse_objects/count inuse_space/bytes"), "{raw}");
    // pprof from a JFR recording carries line numbers.
    let cpu = s.path("cpu.pb.gz");
    oxprof_ok(&["convert", r, "-o", cpu.to_str().unwrap(), "--cpu"]);
    let lines = pprof_top(&cpu, "-top -lines");
    assert!(lines.lines().any(|l| l.contains("Convert.spin") && l.contains(":1")), "{lines}");

    // HTML with every kind as a tab.
    let html = s.path("all.html");
    oxprof_ok(&["convert", r, "-o", html.to_str().unwrap()]);
    let page = std::fs::read_to_string(&html).unwrap();
    for tab in [">CPU (samples)</button>", ">Allocations (samples)</button>", ">Live objects (samples)</button>"] {
        assert!(page.contains(tab), "missing tab {tab}");
    }

    let collapsed = |extra: &[&str]| {
        let out = s.path("f.collapsed");
        let mut args = vec!["convert", r, "-o", out.to_str().unwrap(), "--cpu"];
        args.extend_from_slice(extra);
        oxprof_ok(&args);
        read_collapsed(&out)
    };
    let all = collapsed(&[]);
    let inc = collapsed(&["--include", r"Convert\.spin"]);
    assert!(inc.iter().all(|(st, _)| st.iter().any(|f| f == "Convert.spin")));
    assert_eq!(total(&inc), samples_with(&all, "Convert.spin"));
    let exc = collapsed(&["--exclude", r"Convert\.spin"]);
    assert_eq!(total(&exc), total(&all) - samples_with(&all, "Convert.spin"));
    let threads = collapsed(&["--threads"]);
    assert_eq!(total(&threads), total(&all));
    assert!(samples_with(&threads, "[main]") > 0, "no [main] thread root");
    // Time ranges: the two halves add up to the whole.
    let first = collapsed(&["--to", "1s"]);
    let rest = collapsed(&["--from", "1s"]);
    assert!(total(&first) > 0 && total(&rest) > 0);
    assert_eq!(total(&first) + total(&rest), total(&all));
    let o = oxprof_cmd().args(["convert", r, "-o", s.path("x.html").to_str().unwrap(), "--from", "1h"]).output().unwrap();
    assert!(!o.status.success() && text(&o.stderr).contains("no samples"), "{}", text(&o.stderr));
    // A range that ends before it starts, and times in none of the forms
    // --help gives: one line saying what is accepted.
    for (range, expected) in [
        (["--from", "2s", "--to", "1s"], "oxprof: --to 1s is not after --from 2s"),
        (["--from", "1s", "--to", "1s"], "oxprof: --to 1s is not after --from 1s"),
        (["--from", "abc", "--to", "1s"], "oxprof: --from: 'abc' is not a time; use a duration from the recording's start (10s, 1.5m, 500ms), from its end when negative (-30s), or a UTC time (12:04:05, 2024-05-01T12:04:05Z)"),
        (["--from", "1s", "--to", "-x"], "oxprof: --to: '-x' is not a time; use a duration"),
        (["--from", "1s", "--to", "25:ab"], "oxprof: --to: '25:ab' is not a time; use a duration"),
    ] {
        let o = oxprof_cmd().args(["convert", r, "-o", s.path("x.html").to_str().unwrap()]).args(range).output().unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{range:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{range:?}: {err}");
        assert!(err.starts_with(expected), "{range:?}: {err}");
    }
    let o = oxprof_cmd().args(["convert", r, "-o", s.path("x.html").to_str().unwrap(), "--include", "("]).output().unwrap();
    assert!(!o.status.success() && text(&o.stderr).contains("--include '(' is not a valid regular expression"), "{}", text(&o.stderr));

    // The report: hot method first, the allocation site, leak suspects.
    let o = oxprof_ok(&["report", r, "--top", "3"]);
    let rep = text(&o.stdout);
    let after = |title: &str| rep.split(title).nth(1).unwrap_or_else(|| panic!("no '{title}' in {rep}")).lines().nth(2).unwrap().to_string();
    assert!(after("CPU: top methods").ends_with("Convert.spin"), "{rep}");
    assert!(after("Top allocation sites").ends_with("byte[]  <-  Convert.allocBytes"), "{rep}");
    assert!(after("Leak suspects").contains("int[]  <-  Convert.main"), "{rep}");
}

/// `-o -`: collapsed stacks on stdout unless --format says otherwise, one
/// profile only: with several kinds and none chosen, a one-line error
/// naming them, and never a file named after `-`.
#[test]
fn stdout_gets_one_profile_and_no_side_files() {
    let s = Scratch::new("convert-stdout");
    compile(&s.0, &["Convert.java"]);
    let rec = jdk_recording(&java(), &s, "rec.jfr", "1");
    let r = rec.to_str().unwrap();
    let files = || {
        let mut v: Vec<String> = std::fs::read_dir(&s.0).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        v.sort();
        v
    };
    let before = files();
    let convert = |args: &[&str]| oxprof_cmd().current_dir(&s.0).arg("convert").arg(r).args(args).output().unwrap();
    // The recording holds CPU, allocation and live-object samples.
    for args in [&["-o", "-"][..], &["--format", "collapsed", "-o", "-"], &["--format", "pprof", "-o", "-"], &["--cpu", "--alloc", "-o", "-"]] {
        let o = convert(args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}: wrote to stdout anyway");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("-o - writes one profile to stdout") && err.contains("pick one with --cpu, --alloc"), "{args:?}: {err}");
    }
    assert_eq!(files(), before, "files appeared beside the recording");
    // One kind: collapsed stacks without --format, the same as in a file.
    let o = convert(&["--cpu", "-o", "-"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let file = s.path("cpu.collapsed");
    oxprof_ok(&["convert", r, "--cpu", "-o", file.to_str().unwrap()]);
    assert_eq!(text(&o.stdout), std::fs::read_to_string(&file).unwrap());
    assert!(samples_with(&read_collapsed(&file), "Convert.spin") > 0);
    // Allocations and live objects make one heap profile in pprof.
    let o = convert(&["--alloc", "--live", "--format", "pprof", "-o", "-"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let heap = s.path("heap.pb.gz");
    std::fs::write(&heap, &o.stdout).unwrap();
    let raw = pprof_top(&heap, "-raw");
    assert!(raw.contains("alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes"), "{raw}");
    std::fs::remove_file(&heap).unwrap();
    std::fs::remove_file(&file).unwrap();
    assert_eq!(files(), before, "files appeared beside the recording");
}

/// Collapsed stacks hold counts only: their pprof has one sample type,
/// `samples/count` (no CPU time made up from the counts), reads back to the
/// same stacks, and the report's tables show the counts once, saying the
/// file does not tell what they measured.
#[test]
fn collapsed_input_stays_counts() {
    let s = Scratch::new("convert-counts");
    compile(&s.0, &["Convert.java"]);
    let rec = jdk_recording(&java(), &s, "rec.jfr", "1");
    let col = s.path("cpu.collapsed");
    oxprof_ok(&["convert", rec.to_str().unwrap(), "--cpu", "-o", col.to_str().unwrap()]);
    let stacks = read_collapsed(&col);
    let n = total(&stacks);
    assert!(n > 10, "{n} samples");

    let pb = s.path("cpu.pb.gz");
    oxprof_ok(&["convert", col.to_str().unwrap(), "-o", pb.to_str().unwrap()]);
    let raw = pprof_top(&pb, "-raw");
    assert!(raw.contains("PeriodType: samples count") && raw.contains("Period: 1\n"), "{raw}");
    let types = raw.lines().skip_while(|l| !l.starts_with("Samples:")).nth(1).unwrap_or("");
    assert_eq!(types.trim(), "samples/count", "{raw}");
    assert!(!raw.contains("nanoseconds"), "{raw}");
    let top = pprof_top(&pb, "-top");
    assert!(top.contains(&format!("Showing nodes accounting for {n}, 100% of {n} total")), "{top}");
    assert_eq!(top_function(&top), "Convert.spin", "{top}");
    // Read back: the same stacks and counts.
    let back = s.path("back.collapsed");
    oxprof_ok(&["convert", pb.to_str().unwrap(), "-o", back.to_str().unwrap()]);
    let sorted = |mut v: Collapsed| {
        v.sort();
        v
    };
    assert_eq!(sorted(read_collapsed(&back)), sorted(stacks.clone()));

    for file in [&col, &pb] {
        let report = text(&oxprof_ok(&["report", file.to_str().unwrap()]).stdout);
        let mut lines = report.lines();
        assert_eq!(lines.next(), Some(format!("Top methods ({n} samples; the file does not say what they measured)").as_str()), "{report}");
        assert_eq!(lines.next().map(|l| l.split_whitespace().collect::<Vec<_>>()), Some(vec!["by", "self", "samples", "share", "method"]), "{report}");
        let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        assert_eq!(row.len(), 3, "one count, its share, the method: {report}");
        assert_eq!(row[2], "Convert.spin", "{report}");
    }
}

#[test]
fn diff_of_two_profiles() {
    let s = Scratch::new("diff");
    let before = s.path("before.collapsed");
    let after = s.path("after.collapsed");
    std::fs::write(&before, "main;a 60\nmain;b 40\n").unwrap();
    std::fs::write(&after, "main;a 20\nmain;b 60\nmain;c 20\n").unwrap();
    let out = s.path("diff.collapsed");
    oxprof_ok(&["diff", before.to_str().unwrap(), after.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let mut lines: Vec<String> = std::fs::read_to_string(&out).unwrap().lines().map(str::to_string).collect();
    lines.sort();
    assert_eq!(lines, ["main;a 60 20", "main;b 40 60", "main;c 0 20"]);

    let html = s.path("diff.html");
    oxprof_ok(&["diff", before.to_str().unwrap(), after.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("\"diff\":true"), "diff view flag");
    assert!(page.contains("before: 100 samples · after: 100 samples"), "subtitle");

    // Real recordings: a recording against itself filtered to its hot method.
    compile(&s.0, &["Convert.java"]);
    let rec = jdk_recording(&java(), &s, "rec.jfr", "1");
    let hot = s.path("hot.collapsed");
    oxprof_ok(&["convert", rec.to_str().unwrap(), "-o", hot.to_str().unwrap(), "--cpu", "--include", "Convert.spin"]);
    oxprof_ok(&["diff", rec.to_str().unwrap(), hot.to_str().unwrap(), "-o", out.to_str().unwrap(), "--cpu"]);
    let d = std::fs::read_to_string(&out).unwrap();
    let spin: Vec<&str> = d.lines().filter(|l| l.contains("Convert.spin")).collect();
    assert!(!spin.is_empty());
    for l in spin {
        let mut n = l.rsplit(' ');
        let (a, b) = (n.next().unwrap(), n.next().unwrap());
        assert_eq!(a, b, "hot stacks unchanged: {l}");
    }
}

#[test]
fn bad_input_gives_one_line_errors_and_keeps_whole_chunks() {
    let s = Scratch::new("bad-input");
    compile(&s.0, &["Convert.java"]);
    let rec = jdk_recording(&java(), &s, "rec.jfr", "1");
    let bytes = std::fs::read(&rec).unwrap();
    let out = s.path("o.collapsed");
    let convert = |file: &Path| oxprof_cmd().args(["convert", file.to_str().unwrap(), "-o", out.to_str().unwrap(), "--cpu"]).output().unwrap();
    let one = {
        assert!(convert(&rec).status.success());
        total(&read_collapsed(&out))
    };

    // Two chunks, the second cut off: the first is kept, with a warning.
    let cut = s.path("cut.jfr");
    let mut two = bytes.clone();
    two.extend_from_slice(&bytes[..bytes.len() / 2]);
    std::fs::write(&cut, &two).unwrap();
    let o = convert(&cut);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("chunk 2 is truncated"), "{}", text(&o.stderr));
    assert_eq!(total(&read_collapsed(&out)), one);

    // Two whole chunks: twice the samples.
    let mut whole = bytes.clone();
    whole.extend_from_slice(&bytes);
    std::fs::write(&cut, &whole).unwrap();
    assert!(convert(&cut).status.success());
    assert_eq!(total(&read_collapsed(&out)), 2 * one);

    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        // An empty file is a profile of no samples (the agent writes one).
        ("empty.jfr", Vec::new(), "no samples in "),
        ("text.jfr", b"hello, I am not a profile\n".to_vec(), "neither JFR, pprof, OTLP nor collapsed"),
        ("half.jfr", bytes[..bytes.len() / 2].to_vec(), "chunk 1 is truncated"),
        ("header.jfr", bytes[..40].to_vec(), "truncated"),
        ("zip.jfr", b"PK\x03\x04\x00\x00binary\xff\xfe".to_vec(), "not a JFR file"),
    ];
    for (name, data, expected) in cases {
        let f = s.path(name);
        std::fs::write(&f, data).unwrap();
        let o = convert(&f);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(expected), "{name}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }

    // Corrupt bytes inside the chunk: no panic, whatever is readable is used.
    for seed in 0..20u64 {
        let mut b = bytes.clone();
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for _ in 0..8 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x % b.len() as u64) as usize;
            b[i] = (x >> 32) as u8;
        }
        let f = s.path("corrupt.jfr");
        std::fs::write(&f, &b).unwrap();
        let o = convert(&f);
        let err = text(&o.stderr);
        assert!(!err.contains("panicked"), "seed {seed}: {err}");
        assert!(o.status.code() == Some(0) || o.status.code() == Some(2), "seed {seed}: {:?} {err}", o.status);
    }
}

/// Leaf frame totals of a model profile for a counter (thread and state
/// roots are never leaves of a Java stack).
fn model_leaves(p: &oxprof_profile::Profile, counter: oxprof_profile::Counter) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    for s in p.samples() {
        if let Some(&leaf) = s.stack.last() {
            *m.entry(p.frame(leaf).name.clone()).or_insert(0) += oxprof_profile::Profile::value(s, counter);
        }
    }
    m
}

/// The agent writes one OTLP request (CPU and allocations in one file,
/// its resource from OpenTelemetry's variables), and the converter turns a
/// JDK recording into a request whose CPU samples are those of the
/// collapsed stacks of the same recording.
#[test]
fn agent_and_converter_write_otlp() {
    use oxprof_profile::otlp;
    use oxprof_profile::Counter;
    let s = Scratch::new("otlp");
    compile(&s.0, &["Convert.java"]);
    let out = s.path("prof.otlp.pb");
    let env = [("OTEL_SERVICE_NAME", "convert-test"), ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci")];
    let o = run_java_env(&s.0, &env, &format!("start,event=cpu,alloc=64k,interval=5ms,threads,file={}", out.display()), &[], &s.0, &["Convert", "2"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!s.path("prof.alloc.otlp.pb").exists(), "allocations went to a file of their own");
    let got = otlp::decode(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(got.resource.service, "convert-test");
    assert!(got.resource.attributes.contains(&("deployment.environment".into(), otlp::Value::Str("ci".into()))));
    assert!(got.resource.attributes.iter().any(|(k, v)| k == "process.pid" && matches!(v, otlp::Value::Int(p) if *p > 0)));
    let events: Vec<&str> = got.profiles.iter().map(|p| p.meta.event.as_str()).collect();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[1], "alloc");
    let (cpu, alloc) = (&got.profiles[0], &got.profiles[1]);
    let top = |m: HashMap<String, u64>| m.into_iter().max_by_key(|(_, n)| *n).unwrap().0;
    assert_eq!(top(model_leaves(cpu, Counter::Samples)), "Convert.spin");
    assert_eq!(top(model_leaves(alloc, Counter::Total)), "byte[]");
    // Thread names and (for pprof and OTLP always) states are attributes,
    // read back as root frames.
    let roots =
        |p: &oxprof_profile::Profile, kind| p.samples().iter().filter(|x| x.stack.iter().any(|&f| p.frame(f).kind == kind)).map(|x| x.samples).sum::<u64>();
    assert_eq!(roots(cpu, oxprof_profile::FrameKind::Thread), cpu.sum(Counter::Samples), "every CPU sample names its thread");
    assert_eq!(roots(cpu, oxprof_profile::FrameKind::State), cpu.sum(Counter::Samples), "every CPU sample has its state");
    // The agent's `[name tid=N]` roots become `thread.name` without the tid
    // (the main thread is `DestroyJavaVM` by the time the JVM exits).
    let threads: Vec<&str> = cpu.frames().iter().filter(|f| f.kind == oxprof_profile::FrameKind::Thread).map(|f| f.name.as_str()).collect();
    assert!(threads.len() > 1 && threads.iter().all(|t| !t.contains("tid=")), "{threads:?}");

    // The converter: the same CPU leaves as collapsed stacks of the recording.
    let rec = jdk_recording(&java(), &s, "rec.jfr", "2");
    let converted = s.path("rec.otlp.pb");
    let o = oxprof_cmd()
        .args(["convert", rec.to_str().unwrap(), "-o", converted.to_str().unwrap(), "--cpu", "--alloc", "--threads"])
        .env_remove("OTEL_SERVICE_NAME")
        .env_remove("OTEL_RESOURCE_ATTRIBUTES")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let collapsed = s.path("rec.collapsed");
    oxprof_ok(&["convert", rec.to_str().unwrap(), "-o", collapsed.to_str().unwrap(), "--cpu"]);
    let got = otlp::decode(&std::fs::read(&converted).unwrap()).unwrap();
    assert_eq!(got.resource.service, "unknown_service:java");
    assert_eq!(got.profiles[0].meta.event, "cpu");
    assert_eq!(model_leaves(&got.profiles[0], Counter::Samples), leaves(&read_collapsed(&collapsed), false));
    assert_eq!(got.profiles[1].meta.event, "alloc");
    let o = oxprof_cmd().args(["diff", rec.to_str().unwrap(), rec.to_str().unwrap(), "-o", s.path("d.otlp.pb").to_str().unwrap()]).output().unwrap();
    assert!(!o.status.success() && text(&o.stderr).contains("OTLP have no diff form"), "{}", text(&o.stderr));

    // And the CLI reads OTLP back: the converted request gives the same
    // collapsed stacks as the recording it came from, kind by kind.
    for kind in ["--cpu", "--alloc"] {
        let from_jfr = s.path(&format!("jfr{kind}.collapsed"));
        let from_otlp = s.path(&format!("otlp{kind}.collapsed"));
        oxprof_ok(&["convert", rec.to_str().unwrap(), "-o", from_jfr.to_str().unwrap(), kind]);
        oxprof_ok(&["convert", converted.to_str().unwrap(), "-o", from_otlp.to_str().unwrap(), kind]);
        let (want, got) = (leaves(&read_collapsed(&from_jfr), false), leaves(&read_collapsed(&from_otlp), false));
        assert!(!want.is_empty(), "{kind}: no stacks in the recording");
        assert_eq!(got, want, "{kind}: leaves read back from OTLP");
    }
    // The agent's own file, as written and gzipped (a spooled interval):
    // report names the hot method and the allocated class.
    let gz = s.path("prof.otlp.pb.gz");
    assert!(Command::new("gzip").arg("-k").arg(&out).status().unwrap().success());
    for file in [&out, &gz] {
        let report = text(&oxprof_ok(&["report", file.to_str().unwrap()]).stdout);
        let cpu_top = report.lines().skip_while(|l| !l.contains("by self")).nth(1).unwrap_or("");
        assert!(cpu_top.ends_with("Convert.spin"), "{}: CPU top method is not Convert.spin:\n{report}", file.display());
        assert!(report.contains("byte[]"), "{}: no allocation section:\n{report}", file.display());
    }
    // --state selects CPU samples and leaves allocations as they are.
    let report = text(&oxprof_ok(&["report", out.to_str().unwrap(), "--state", "running"]).stdout);
    assert!(report.contains("Convert.spin") && report.contains("byte[]"), "{report}");
    // A kind the file does not hold, and an HTML page given as input.
    let o = oxprof_cmd().args(["convert", out.to_str().unwrap(), "--lock", "-o", s.path("x.collapsed").to_str().unwrap()]).output().unwrap();
    assert!(!o.status.success() && text(&o.stderr).contains("it holds: cpu, alloc"), "{}", text(&o.stderr));
    let html = s.path("prof.html");
    oxprof_ok(&["convert", out.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    let o = oxprof_cmd().args(["report", html.to_str().unwrap()]).output().unwrap();
    assert!(!o.status.success() && text(&o.stderr).contains("is an HTML page"), "{}", text(&o.stderr));
}
