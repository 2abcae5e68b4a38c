//! The Java API (`oxprof.jar`, `one.oxprof.OxProfiler`): the agent loaded by
//! the jar, by `-agentpath` and by `oxprof attach`, always one agent with
//! one state; commands as attach takes them, errors as Java exceptions.

mod common;

use common::api::*;
use common::*;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::Command;

#[test]
fn the_jar_alone_loads_the_agent_and_runs_commands() {
    jar_alone_scenario(&java(), "jdk17");
    agentpath_status_scenario(&java(), "jdk17");
}

#[test]
fn the_jar_finds_the_library_beside_itself_or_on_the_library_path() {
    let s = Scratch::new("api-find");
    compile_with_jar(&s.0, &["ApiUser.java"]);
    let (beside, libpath, alone) = (s.path("beside"), s.path("libpath"), s.path("alone"));
    for d in [&beside, &libpath, &alone] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::copy(jar(), d.join("oxprof.jar")).unwrap();
    }
    std::fs::copy(agent(), beside.join("liboxprof.so")).unwrap();
    let lib_dir = s.path("lib");
    std::fs::create_dir_all(&lib_dir).unwrap();
    std::fs::copy(agent(), lib_dir.join("liboxprof.so")).unwrap();
    let cp = |d: &Path| format!("{}:{}", s.0.display(), d.join("oxprof.jar").display());

    let o = api_user(&java(), &s.0, &[], &cp(&beside), &["status"]);
    let st = steps(&text(&o.stdout));
    assert!(o.status.success(), "{}", text(&o.stderr));
    expect(&st.replies[0], "OK idle");
    assert_eq!(canonical(Path::new(&st.library)), canonical(&beside.join("liboxprof.so")));

    let o = api_user(&java(), &s.0, &[format!("-Djava.library.path={}", lib_dir.display())], &cp(&libpath), &["status"]);
    let st = steps(&text(&o.stdout));
    expect(&st.replies[0], "OK idle");
    assert_eq!(canonical(Path::new(&st.library)), canonical(&lib_dir.join("liboxprof.so")));

    let o = api_user(&java(), &s.0, &[], &cp(&alone), &["status"]);
    let st = steps(&text(&o.stdout));
    expect(
        &st.replies[0],
        "EXC java.lang.UnsatisfiedLinkError liboxprof.so not found: set -Doxprof.library=/path/to/liboxprof.so or put it next to the jar; tried ",
    );
    assert!(st.replies[0].contains(&alone.join("liboxprof.so").display().to_string()), "{}", st.replies[0]);
    assert!(o.status.success());
}

/// Loaded by `-agentpath` with a recording running: the API sees that
/// recording (no second agent), and its dump writes the JFR stream, which
/// reads back with the hot method.
#[test]
fn with_agentpath_the_api_drives_the_same_agent() {
    let s = Scratch::new("api-agentpath");
    compile_with_jar(&s.0, &["ApiUser.java"]);
    let rec = s.path("rec.jfr");
    let agentpath = format!("-agentpath:{}=start,event=cpu,interval=2ms,file={}", agent().display(), rec.display());
    let cmd = api_user_cmd(&java(), &[agentpath], &with_jar(&s.0), &["burn:1.5", "status", "dump", "wait", "stop", "status"]);
    let (mut jvm, mut lines, replies) = spawn_until_ready(cmd, &s.0);
    expect(&replies[0], "OK running: cpu");
    assert!(replies[0].contains(&format!("output {}", rec.display())), "{}", replies[0]);
    assert!(replies[1].starts_with("OK ") && replies[1].contains("jfr summary:"), "dump of a JFR recording: {}", replies[1]);
    // The JVM waits: the dumped recording is readable now.
    let collapsed = s.path("rec.collapsed");
    let convert = || {
        let o = oxprof_cmd().arg("convert").arg(&rec).arg("-o").arg(&collapsed).output().unwrap();
        assert!(o.status.success(), "convert: {}", text(&o.stderr));
        hot_share(&collapsed)
    };
    let (share, n) = convert();
    eprintln!("dumped JFR: ApiUser.apiHot {:.1}% of {n} samples", 100.0 * share);
    assert!(n >= 200 && share >= 0.8, "{n} samples, {:.1}% in ApiUser.apiHot", 100.0 * share);
    // Status from outside agrees with what the API saw.
    let o = oxprof_cmd().args(["attach", &jvm.pid().to_string(), "status"]).output().unwrap();
    expect(&text(&o.stdout), "running: cpu");
    let (replies, end) = go_on(&mut jvm, &mut lines);
    assert!(replies[0].starts_with("OK ") && replies[0].contains(&rec.display().to_string()), "{}", replies[0]);
    expect(&replies[1], "OK idle: profiling is not running");
    assert_eq!(canonical(Path::new(&end.expect("END"))), canonical(&agent()));
    let o = jvm.finish();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let (share, n) = convert();
    assert!(n >= 200 && share >= 0.8, "final recording: {n} samples, {:.1}% in ApiUser.apiHot", 100.0 * share);
}

/// `oxprof attach PID start` first, then the program's API: one agent, the
/// attach's recording; then the API's stop, seen by the next attach.
#[test]
fn after_attach_the_api_drives_the_attached_agent() {
    let s = Scratch::new("api-attach");
    compile_with_jar(&s.0, &["ApiUser.java"]);
    let dumped = s.path("d.collapsed");
    let dump = format!("dump,file={}", dumped.display());
    let cmd = api_user_cmd(&java(), &[], &with_jar(&s.0), &["wait", "burn:1", "status", &dump, "stop", "wait", "status"]);
    let (mut jvm, mut lines, _) = spawn_until_ready(cmd, &s.0);
    let pid = jvm.pid().to_string();
    let o = oxprof_cmd().args(["attach", &pid, "start", "--interval", "2ms"]).output().unwrap();
    assert!(o.status.success(), "attach start: {}", text(&o.stderr));
    let (replies, end) = go_on(&mut jvm, &mut lines);
    assert!(end.is_none(), "{replies:?}");
    expect(&replies[0], "OK running: cpu");
    assert!(replies[1].contains(&format!("profile written to {}", dumped.display())), "{}", replies[1]);
    let (share, n) = hot_share(&dumped);
    eprintln!("dump after attach: ApiUser.apiHot {:.1}% of {n} samples", 100.0 * share);
    assert!(n >= 100 && share >= 0.8, "{n} samples, {:.1}% in ApiUser.apiHot", 100.0 * share);
    expect(&replies[2], "OK ");
    // The program waits again: the attach side sees the API's stop.
    let o = oxprof_cmd().args(["attach", &pid, "status"]).output().unwrap();
    expect(&text(&o.stdout), "idle: profiling is not running");
    let o = oxprof_cmd().args(["attach", &pid, "stop"]).output().unwrap();
    assert!(!o.status.success() && text(&o.stderr).contains("not running"), "{}", text(&o.stderr));
    let (replies, end) = go_on(&mut jvm, &mut lines);
    expect(&replies[0], "OK idle: profiling is not running");
    assert_eq!(canonical(Path::new(&end.expect("END"))), canonical(&agent()));
}

/// The jar loads the agent and starts; `oxprof attach` (same library) then
/// sees that recording and dumps it.
#[test]
fn after_the_jar_attach_drives_the_same_agent() {
    let s = Scratch::new("api-then-attach");
    compile_with_jar(&s.0, &["ApiUser.java"]);
    let (from_attach, from_api) = (s.path("attach.collapsed"), s.path("api.collapsed"));
    let stop = format!("stop,file={}", from_api.display());
    let cmd = api_user_cmd(&java(), &[library_property()], &with_jar(&s.0), &["start,event=cpu,interval=2ms", "burn:1", "wait", &stop]);
    let (mut jvm, mut lines, replies) = spawn_until_ready(cmd, &s.0);
    expect(&replies[0], "OK started cpu profiling");
    let pid = jvm.pid().to_string();
    let o = oxprof_cmd().args(["attach", &pid, "status"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    expect(&text(&o.stdout), "running: cpu");
    let o = oxprof_cmd().args(["attach", &pid, "dump", "-o", from_attach.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = oxprof_cmd().args(["attach", &pid, "start"]).output().unwrap();
    assert!(!o.status.success() && text(&o.stderr).contains("already running"), "{}", text(&o.stderr));
    let (replies, end) = go_on(&mut jvm, &mut lines);
    assert!(replies[0].contains(&format!("profile written to {}", from_api.display())), "{replies:?}");
    assert!(end.is_some());
    for f in [&from_attach, &from_api] {
        let (share, n) = hot_share(f);
        assert!(n >= 100 && share >= 0.8, "{}: {n} samples, {:.1}% in ApiUser.apiHot", f.display(), 100.0 * share);
    }
}

/// A second copy of the library (another file) is not a second agent: the
/// API says which file the JVM runs, and the JVM goes on.
#[test]
fn a_second_copy_of_the_library_is_refused_by_name() {
    let s = Scratch::new("api-copy");
    compile_with_jar(&s.0, &["ApiUser.java"]);
    let copy = s.path("copy");
    std::fs::create_dir_all(&copy).unwrap();
    std::fs::copy(agent(), copy.join("liboxprof.so")).unwrap();
    let args = [format!("-agentpath:{}", agent().display()), format!("-Doxprof.library={}", copy.join("liboxprof.so").display())];
    let o = api_user(&java(), &s.0, &args, &with_jar(&s.0), &["status", "status", "burn:0.1"]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}\n{}", text(&o.stderr));
    let st = steps(&out);
    let loaded = canonical(&agent()).display().to_string();
    for r in &st.replies {
        expect(r, &format!("EXC java.lang.IllegalStateException oxprof is already loaded in this JVM from {loaded}; load that file"));
    }
    // Without the property, the loaded copy is used.
    let o = api_user(&java(), &s.0, &args[..1], &with_jar(&s.0), &["status"]);
    let st = steps(&text(&o.stdout));
    expect(&st.replies[0], "OK idle");
    assert_eq!(canonical(Path::new(&st.library)), canonical(&agent()));
}

/// The OpenTelemetry example of docs/opentelemetry.md, taken from the page
/// itself and compiled against stand-ins of the SDK interfaces it uses
/// (same packages, names and signatures) into `dir`.
fn compile_otel_example(dir: &Path) {
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/opentelemetry.md")).unwrap();
    let after = page.split("<!-- example: OxProfilerSpanProcessor.java").nth(1).expect("the example's marker in docs/opentelemetry.md");
    let code = after.split("```java\n").nth(1).and_then(|c| c.split("\n```").next()).expect("the example's code block");
    std::fs::write(dir.join("OxProfilerSpanProcessor.java"), code).unwrap();
    let stubs = [
        "otel/io/opentelemetry/context/Context.java",
        "otel/io/opentelemetry/api/trace/SpanContext.java",
        "otel/io/opentelemetry/sdk/trace/ReadableSpan.java",
        "otel/io/opentelemetry/sdk/trace/ReadWriteSpan.java",
        "otel/io/opentelemetry/sdk/trace/SpanProcessor.java",
    ];
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java");
    let o = Command::new(tool("javac"))
        .args(["--release", "11", "-cp"])
        .arg(jar())
        .arg("-d")
        .arg(dir)
        .args(stubs.iter().map(|p| src.join(p)))
        .arg(src.join("OtelTraced.java"))
        .arg(dir.join("OxProfilerSpanProcessor.java"))
        .output()
        .unwrap();
    assert!(o.status.success(), "the docs' example does not compile: {}", text(&o.stderr));
}

/// Runs `OtelTraced` with `args` (seconds, burn ms) under `opts`; returns the program's
/// output and, per thread, the (trace, span) pairs of its working spans.
fn run_otel(dir: &Path, opts: &str, args: &[&str]) -> (String, HashMap<String, HashSet<(String, String)>>) {
    let o = Command::new(java())
        .current_dir(dir)
        .arg(format!("-agentpath:{}={opts}", agent().display()))
        .args(["-cp", &with_jar(dir), "OtelTraced"])
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", text(&o.stdout), text(&o.stderr));
    let mut truth: HashMap<String, HashSet<(String, String)>> = HashMap::new();
    for line in std::fs::read_to_string(dir.join("spans.txt")).unwrap().lines() {
        let f: Vec<&str> = line.split(' ').collect();
        truth.entry(f[0].to_string()).or_default().insert((f[1].to_string(), f[2].to_string()));
    }
    (text(&o.stdout), truth)
}

fn label_of(stack: &[String], key: &str) -> Option<String> {
    stack.iter().find_map(|f| f.strip_prefix(&format!("[{key}=")).and_then(|r| r.strip_suffix(']')).map(str::to_string))
}

/// Samples in each thread's burn method carry the ids of one of that
/// thread's spans; after the spans ended (one on another thread) samples
/// carry none.
fn check_otel_labels(stacks: &[(Vec<String>, u64)], truth: &HashMap<String, HashSet<(String, String)>>, min: u64) {
    for (thread, method) in [("orders", "OtelTraced.burnOrders"), ("search", "OtelTraced.burnSearch")] {
        let spans = &truth[thread];
        let (mut own, mut all) = (0, 0);
        for (stack, n) in stacks.iter().filter(|(st, _)| st.iter().any(|f| f == method)) {
            all += n;
            if let (Some(t), Some(sp)) = (label_of(stack, "trace_id"), label_of(stack, "span_id")) {
                if spans.contains(&(t, sp)) {
                    own += n;
                }
            }
        }
        eprintln!("{method}: {own} of {all} samples carry the ids of one of {} {thread} spans", spans.len());
        assert!(all >= min, "{method}: only {all} samples");
        assert!(own as f64 >= 0.95 * all as f64, "{method}: {own} of {all} samples carry their span's ids");
    }
    let over: u64 = stacks.iter().filter(|(st, _)| st.iter().any(|f| f.starts_with("[oxprof="))).map(|(_, n)| n).sum();
    assert_eq!(over, 0, "samples over the label-set limit");
    let (mut bare, mut all) = (0, 0);
    for (stack, n) in stacks.iter().filter(|(st, _)| st.iter().any(|f| f == "OtelTraced.burnAfter")) {
        all += n;
        if label_of(stack, "trace_id").is_none() {
            bare += n;
        }
    }
    eprintln!("burnAfter: {bare} of {all} samples carry no trace");
    assert!(all >= 20 && bare as f64 >= 0.95 * all as f64, "after the spans ended (one on another thread): {bare} of {all} samples unlabelled");
}

/// The docs' OpenTelemetry example, driven as the SDK drives a span
/// processor: samples taken inside a span carry that span's trace and span
/// ids (checked against the ids the program wrote down), and a span that
/// another thread ended stops labelling its thread.
#[test]
fn the_opentelemetry_span_processor_of_the_docs_labels_samples_with_their_span() {
    let s = Scratch::new("api-otel");
    compile_otel_example(&s.0);
    let out = s.path("otel.collapsed");
    let (_, truth) = run_otel(&s.0, &format!("start,event=cpu,interval=1ms,file={}", out.display()), &["3"]);
    check_otel_labels(&read_collapsed(&out), &truth, 50);
}

/// Continuous profiling recycles label-set ids: a trace id per request for
/// many more requests than the 4096-set limit, every interval's file still
/// names each sample's own span, nothing is over the limit, and the
/// agent's counters show ids were recycled.
#[test]
fn per_request_trace_ids_outlast_the_label_set_limit_under_continuous_profiling() {
    let s = Scratch::new("api-otel-loop");
    compile_otel_example(&s.0);
    let pattern = s.path("iv-%n.collapsed");
    let (stdout, truth) = run_otel(&s.0, &format!("start,event=cpu,interval=1ms,loop=1s,file={}", pattern.display()), &["10", "3", "2300"]);
    let spans: usize = truth.values().map(HashSet::len).sum();
    let stats = stdout.lines().find_map(|l| l.strip_prefix("labels ")).unwrap_or_default().to_string();
    eprintln!("{spans} spans; {stats}");
    // Two label sets per request (the root span and its child).
    assert!(2 * spans > 4096, "too few spans to pass the limit: {spans}");
    let recycled: u64 = stats.split_whitespace().find_map(|kv| kv.strip_prefix("recycled=")).and_then(|v| v.parse().ok()).unwrap_or(0);
    assert!(recycled > 0, "no label set was recycled: {stats}");
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&s.0)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("iv-") && n.to_string_lossy().ends_with(".collapsed")))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "{files:?}");
    let mut all: Vec<(Vec<String>, u64)> = Vec::new();
    for f in &files {
        all.extend(read_collapsed(f));
    }
    check_otel_labels(&all, &truth, 200);
}

/// The issue's own story: start from code without choosing a file, label
/// the work, dump to `now.jfr`. The dump is a JFR recording (made from the
/// counts: a note says the times are spread) that the JDK's `jfr` reads,
/// and `report --by endpoint` and `convert --label` split by its labels.
#[test]
fn a_dump_to_jfr_of_a_recording_started_without_a_file_is_a_jfr_recording() {
    let s = Scratch::new("api-dump-jfr");
    compile_with_jar(&s.0, &["ApiUser.java"]);
    let now = s.path("now.jfr");
    let dump = format!("dump,file={}", now.display());
    let o = api_user(
        &java(),
        &s.0,
        &[format!("-Doxprof.library={}", agent().display())],
        &with_jar(&s.0),
        &["start,event=cpu,wall=50ms,alloc", "label:endpoint=GET /orders:1", "label:endpoint=GET /search:1", &dump, "stop"],
    );
    let st = steps(&text(&o.stdout));
    assert!(o.status.success(), "{}\n{}", text(&o.stdout), text(&o.stderr));
    let dumped = &st.replies[1];
    assert!(dumped.starts_with("OK") && dumped.contains(&now.display().to_string()) && dumped.contains("without their times"), "{dumped}");
    let summary = Command::new(tool("jfr")).arg("summary").arg(&now).output().unwrap();
    let summary = text(&summary.stdout);
    let events = |name: &str| {
        summary.lines().find(|l| l.trim_start().starts_with(name)).and_then(|l| l.split_whitespace().nth(1)).and_then(|n| n.parse::<u64>().ok()).unwrap_or(0)
    };
    assert!(events("jdk.ExecutionSample") >= 100 && events("oxprof.WallClockSample") > 0, "jfr summary:\n{summary}");
    let o = oxprof_cmd().args(["report", now.to_str().unwrap(), "--by", "endpoint"]).output().unwrap();
    let report = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    eprintln!("{}", report.lines().take(5).collect::<Vec<_>>().join("\n"));
    for value in ["GET /orders", "GET /search"] {
        let row = report.lines().find(|l| l.trim_start().starts_with(value)).unwrap_or_else(|| panic!("no row for {value}:\n{report}"));
        let cpu: f64 = row.split_whitespace().find_map(|c| c.strip_suffix('%')?.parse().ok()).unwrap_or(0.0);
        assert!((30.0..=65.0).contains(&cpu), "{value}'s CPU share: {row}");
    }
    let orders = s.path("orders.collapsed");
    let o = oxprof_cmd().args(["convert", now.to_str().unwrap(), "--cpu", "--label", "endpoint=GET /orders", "-o", orders.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stacks = read_collapsed(&orders);
    assert!(samples_with(&stacks, "ApiUser.apiHot") >= 50, "{stacks:?}");
}

/// Null arguments get an exception naming the argument, whether or not a
/// recording runs: context labels an `IllegalArgumentException` with the
/// accepted form (as a bad key), commands a `NullPointerException`; a
/// null value is the text `null`; `start(null)` starts nothing.
#[test]
fn null_arguments_are_refused_by_name() {
    let s = Scratch::new("api-nulls");
    compile_with_jar(&s.0, &["ApiNulls.java"]);
    let rec = s.path("n.collapsed");
    let o = Command::new(java())
        .current_dir(&s.0)
        .env_remove("LD_LIBRARY_PATH")
        .arg(library_property())
        .args(["-cp", &with_jar(&s.0), "ApiNulls"])
        .arg(&rec)
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}\n{}", text(&o.stderr));
    eprintln!("{out}");
    let case = |name: &str| -> String {
        out.lines().find_map(|l| l.strip_prefix(&format!("CASE {name} "))).unwrap_or_else(|| panic!("no case {name}:\n{out}")).to_string()
    };
    let key_form = "keys are 1 to 64 of A-Z a-z 0-9 _ . : / - (and not 'oxprof')";
    for when in ["idle", "running"] {
        for name in ["null-key", "null-key2", "null-in-array"] {
            assert_eq!(case(&format!("{when}-{name}")), format!("EXC java.lang.IllegalArgumentException a label key is null: {key_form}"), "{when}-{name}");
        }
        assert_eq!(case(&format!("{when}-null-array")), "EXC java.lang.IllegalArgumentException the labels array is null: give key, value pairs");
        assert_eq!(case(&format!("{when}-null-value")), "OK");
    }
    assert_eq!(case("execute-null"), "EXC java.lang.NullPointerException command is null");
    expect(&case("start-null"), "EXC java.lang.NullPointerException options is null");
    expect(&case("dump-null"), "EXC java.lang.NullPointerException file is null");
    expect(&case("dump-null-running"), "EXC java.lang.NullPointerException file is null");
    assert!(out.contains("STATUS idle: profiling is not running"), "start(null) started nothing:\n{out}");
    assert_eq!(case("start"), "OK");
    assert_eq!(case("stop"), "OK");
    assert!(rec.is_file());
}

/// A command that ran but did not write what was asked throws with the
/// agent's message: a dump, and a stop, to another `.jfr` file than the one
/// a JFR recording streams to (the recording goes on, and is stopped).
#[test]
fn a_dump_that_did_not_write_the_file_asked_for_throws() {
    let s = Scratch::new("api-dump-other");
    compile_with_jar(&s.0, &["ApiUser.java"]);
    let (rec, other, html) = (s.path("rec.jfr"), s.path("other.jfr"), s.path("d.html"));
    let o = api_user(
        &java(),
        &s.0,
        &[library_property()],
        &with_jar(&s.0),
        &[
            &format!("start,event=cpu,interval=2ms,file={}", rec.display()),
            "burn:0.5",
            &format!("dump,file={}", other.display()),
            &format!("dump,file={}", html.display()),
            "dump",
            "status",
            &format!("stop,file={}", other.display()),
            "status",
        ],
    );
    let st = steps(&text(&o.stdout));
    assert!(o.status.success(), "{}\n{}", text(&o.stdout), text(&o.stderr));
    let not_written = format!("EXC java.lang.IllegalStateException a JFR recording streams to the file chosen at start; {} was not written", other.display());
    expect(&st.replies[1], &not_written);
    assert!(st.replies[1].contains("the agent's reply:"), "{}", st.replies[1]);
    assert!(st.replies[2].starts_with("OK ") && st.replies[2].contains(&format!("profile written to {}", html.display())), "{}", st.replies[2]);
    assert!(st.replies[3].starts_with("OK ") && st.replies[3].contains("jfr summary:"), "{}", st.replies[3]);
    expect(&st.replies[4], "OK running: cpu");
    expect(&st.replies[5], &not_written);
    assert!(st.replies[5].contains(&format!("profile written to {}", rec.display())), "the stop's reply says where the recording went: {}", st.replies[5]);
    expect(&st.replies[6], "OK idle");
    assert!(!other.exists() && rec.is_file() && html.is_file());
}
