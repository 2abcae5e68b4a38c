//! Wall-clock samples and thread states in JFR and pprof output, end to
//! end: what the JDK's `jfr` tool and Go's pprof read from the agent's
//! files, and what `oxprof convert/report` make of them, against what
//! WallStates measures itself.

mod common;

use common::*;
use std::collections::HashMap;
use std::path::Path;
use std::process::Output;

/// `jfr print --events EVENT FILE`, one text block per event.
fn jfr_events(file: &Path, event: &str) -> Vec<String> {
    let o = std::process::Command::new(tool("jfr")).args(["print", "--stack-depth", "64", "--events", event]).arg(file).output().unwrap();
    assert!(o.status.success(), "jfr print: {}", text(&o.stderr));
    text(&o.stdout).split(&format!("{event} {{")).skip(1).map(str::to_string).collect()
}

fn oxprof(args: &[&str]) -> Output {
    oxprof_cmd().args(args).output().unwrap()
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "oxprof failed: {}", text(&o.stderr));
    text(&o.stdout)
}

/// Runs WallStates for `secs` seconds under `opts` (writing `file`), and
/// returns its truth line and the agent's log.
fn record(s: &Scratch, opts: &str, file: &Path, secs: &str) -> (HashMap<String, f64>, String) {
    compile(&s.0, &["WallStates.java"]);
    let o = run_java(&s.0, &format!("{opts},file={}", file.display()), &[], &s.0, &["WallStates", secs]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    (truth_line(&text(&o.stdout)), err)
}

/// Nanoseconds per (thread, state) of a collapsed file converted with
/// `--threads --show-state --total` (`[state];[thread];...`).
fn by_state(path: &Path) -> HashMap<(String, String), f64> {
    by_thread_and_state(path).into_iter().map(|((t, st), v)| ((t.trim_end_matches(']').to_string(), st), v)).fold(HashMap::new(), |mut m, (k, v)| {
        *m.entry(k).or_default() += v;
        m
    })
}

/// The mixed thread's share of its wall time per state, from a collapsed
/// file written with `--threads --show-state --total`.
fn mixed_shares(path: &Path) -> HashMap<String, f64> {
    let got = by_state(path);
    let mixed: f64 = got.iter().filter(|((t, _), _)| t == "mixed").map(|(_, v)| v).sum();
    got.into_iter().filter(|((t, _), _)| t == "mixed").map(|((_, st), v)| (st, 100.0 * v / mixed)).collect()
}

#[test]
fn wall_jfr_has_jdk_states_and_converts_by_state() {
    let s = Scratch::new("wall-jfr");
    let rec = s.path("rec.jfr");
    let (truth, err) = record(&s, "event=wall,interval=5ms", &rec, "4");
    let summary = summary_fields(&err, "jfr summary:");
    assert_eq!(summary["execution_samples"], "0", "{err}");
    assert!(summary["wall_samples"].parse::<u64>().unwrap() > 1000, "{err}");

    // The JDK's own tool reads the states, each where the program put it.
    let events = jfr_events(&rec, "jdk.ExecutionSample");
    let with = |state: &str, frame: &str| events.iter().filter(|e| e.contains(&format!("state = \"{state}\"")) && e.contains(frame)).count();
    let of_state = |state: &str| events.iter().filter(|e| e.contains(&format!("state = \"{state}\""))).count();
    assert!(with("STATE_SLEEPING", "WallStates.sleepFor") > 50, "no sleeping samples in sleepFor");
    assert_eq!(with("STATE_SLEEPING", "WallStates.sleepFor"), of_state("STATE_SLEEPING"), "sleeping outside sleepFor");
    assert!(with("STATE_IN_OBJECT_WAIT", "WallStates.waitFor") > 20);
    assert!(with("STATE_PARKED", "WallStates.parkFor") > 20);
    assert!(with("STATE_RUNNABLE", "WallStates.burn") > 20);
    assert!(with("STATE_BLOCKED_ON_MONITOR_ENTER", "WallStates.lambda$main$1") > 50);
    let native = jfr_events(&rec, "jdk.NativeMethodSample");
    assert!(native.iter().filter(|e| e.contains("STATE_IN_NATIVE") && e.contains("java.net.ServerSocket.accept")).count() > 50);
    let settings = jfr_events(&rec, "jdk.ActiveSetting");
    assert!(settings.iter().any(|e| e.contains("name = \"event\"") && e.contains("value = \"wall\"")), "no event=wall setting");

    // Only sleeping stacks with --state sleeping.
    let sleeping = s.path("sleeping.collapsed");
    ok(&oxprof(&["convert", rec.to_str().unwrap(), "--wall", "--state", "sleeping", "-o", sleeping.to_str().unwrap()]));
    let stacks = read_collapsed(&sleeping);
    assert!(!stacks.is_empty());
    for (stack, _) in &stacks {
        assert!(stack.iter().any(|f| f == "WallStates.sleepFor"), "not a sleeping stack: {stack:?}");
    }

    // Shares per state from the JFR, within 3 points of the truth.
    let all = s.path("states.collapsed");
    ok(&oxprof(&["convert", rec.to_str().unwrap(), "--wall", "--threads", "--show-state", "--total", "-o", all.to_str().unwrap()]));
    let shares = mixed_shares(&all);
    let phases = truth["burn"] + truth["sleep"] + truth["wait"] + truth["park"];
    for (state, key) in [("running", "burn"), ("sleeping", "sleep"), ("waiting", "wait"), ("parked", "park")] {
        let (share, truth_share) = (shares.get(state).copied().unwrap_or(0.0), 100.0 * truth[key] / phases);
        eprintln!("JFR: mixed {state}: {share:.1}% of its wall time, truth {truth_share:.1}%");
        assert!((share - truth_share).abs() <= 3.0, "mixed {state} {share:.1}% vs truth {truth_share:.1}%\n{shares:?}");
    }

    // The report: top methods and where the wall time went.
    let report = ok(&oxprof(&["report", rec.to_str().unwrap(), "--wall", "--threads", "--top", "30"]));
    assert!(report.contains("Wall clock: top methods"), "{report}");
    // Self is the innermost Java method, or in a stack without Java (a JVM
    // thread's) its innermost frame: the heading says both.
    let heading = report.lines().find(|l| l.starts_with("Wall clock: top methods")).unwrap();
    assert!(heading.ends_with("; self = the innermost Java method, or the innermost frame of a stack without Java"), "{heading}");
    assert!(report.contains("Wall clock by thread state"), "{report}");
    for state in ["running", "sleeping", "waiting", "parked", "blocked", "native"] {
        assert!(report.lines().any(|l| l.trim_start().starts_with(state)), "no {state} row:\n{report}");
    }
    assert!(report.contains("[mixed"), "no per-thread rows:\n{report}");
    // No kind given: every kind present, here the wall clock only.
    let report = ok(&oxprof(&["report", rec.to_str().unwrap()]));
    assert!(report.contains("Wall clock: top methods") && !report.contains("CPU: top methods"), "{report}");
}

#[test]
fn bad_state_words_are_one_line_errors() {
    let s = Scratch::new("wall-jfr-bad");
    let missing = s.path("none.jfr");
    for args in [
        vec!["convert", missing.to_str().unwrap(), "--state", "bogus", "-o", "x.collapsed"],
        vec!["report", missing.to_str().unwrap(), "--state", "running,bogus"],
        vec!["diff", missing.to_str().unwrap(), missing.to_str().unwrap(), "--state", "bogus", "-o", "d.html"],
    ] {
        let o = oxprof(&args);
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("--state") && err.contains("'bogus'"), "{err}");
        assert!(err.contains("running, native, vm, blocked, waiting, parked, sleeping, unknown"), "{err}");
    }
}

#[test]
fn cpu_and_wall_jfr_keep_them_apart() {
    let s = Scratch::new("wall-jfr-both");
    let rec = s.path("both.jfr");
    let (truth, err) = record(&s, "event=cpu,interval=5ms,wall=20ms", &rec, "3");
    let summary = summary_fields(&err, "jfr summary:");
    // CPU samples depend on the CPU the program gets (96 on a busy machine).
    assert!(summary["execution_samples"].parse::<u64>().unwrap() > 40, "{err}");
    assert!(summary["wall_samples"].parse::<u64>().unwrap() > 300, "{err}");
    let wall_events = jfr_events(&rec, "oxprof.WallClockSample");
    assert!(wall_events.iter().any(|e| e.contains("STATE_SLEEPING") && e.contains("weight = ")), "no weighed wall samples");
    assert!(jfr_events(&rec, "jdk.NativeMethodSample").is_empty());

    let (cpu, wall) = (s.path("cpu.collapsed"), s.path("wall.collapsed"));
    ok(&oxprof(&["convert", rec.to_str().unwrap(), "--cpu", "--threads", "--show-state", "--total", "-o", cpu.to_str().unwrap()]));
    ok(&oxprof(&["convert", rec.to_str().unwrap(), "--wall", "--threads", "--show-state", "--total", "-o", wall.to_str().unwrap()]));
    let (cpu, wall) = (by_state(&cpu), by_state(&wall));
    let sum = |m: &HashMap<(String, String), f64>, thread: &str, state: &str| {
        m.iter().filter(|((t, st), _)| t == thread && (state.is_empty() || st == state)).map(|(_, v)| v).sum::<f64>()
    };
    assert!(sum(&cpu, "mixed", "running") > 0.8 * sum(&cpu, "mixed", ""), "{cpu:?}");
    assert!(sum(&wall, "mixed", "sleeping") > 0.25 * sum(&wall, "mixed", ""), "{wall:?}");
    assert!(sum(&wall, "blocked", "blocked") > 0.0 && sum(&cpu, "blocked", "") < 0.05 * sum(&wall, "blocked", ""), "cpu {cpu:?}\nwall {wall:?}");
    // The weights come through: the mixed thread's wall time is its life.
    let phases = truth["burn"] + truth["sleep"] + truth["wait"] + truth["park"];
    let ratio = sum(&wall, "mixed", "") / phases;
    assert!((0.93..=1.05).contains(&ratio), "the mixed thread's wall samples sum to {ratio:.3} of its time");

    let report = ok(&oxprof(&["report", rec.to_str().unwrap(), "--top", "3"]));
    assert!(report.contains("CPU: top methods") && report.contains("Wall clock: top methods"), "{report}");
}

/// `go tool pprof -raw FILE`, or `None` without Go.
fn pprof_raw(file: &Path) -> Option<String> {
    let o = std::process::Command::new("go").args(["tool", "pprof", "-raw"]).arg(file).output().ok()?;
    assert!(o.status.success(), "go tool pprof: {}", text(&o.stderr));
    Some(text(&o.stdout))
}

#[test]
fn pprof_has_wall_type_and_state_labels() {
    let s = Scratch::new("wall-pprof");
    let out = s.path("p.pb.gz");
    record(&s, "event=cpu,interval=5ms,wall=20ms", &out, "1");
    let wall = s.path("p.wall.pb.gz");
    assert!(wall.is_file());
    // Converted from JFR too.
    let rec = s.path("w.jfr");
    record(&s, "event=wall,interval=10ms", &rec, "1");
    let converted = s.path("c.pb.gz");
    ok(&oxprof(&["convert", rec.to_str().unwrap(), "--wall", "-o", converted.to_str().unwrap()]));
    for (file, kind, state) in [(&wall, "wall/nanoseconds", "sleeping"), (&converted, "wall/nanoseconds", "sleeping"), (&out, "cpu/nanoseconds", "running")] {
        // oxprof's own reader: the labels come back as state frames.
        let back = s.path("back.collapsed");
        let _ = std::fs::remove_file(&back);
        ok(&oxprof(&["convert", file.to_str().unwrap(), "--show-state", "-o", back.to_str().unwrap()]));
        let stacks = read_collapsed(&back);
        assert!(stacks.iter().any(|(st, _)| st[0] == format!("[{state}]")), "{}: no [{state}] state in {stacks:?}", file.display());
        // Without --show-state no state frame remains.
        ok(&oxprof(&["convert", file.to_str().unwrap(), "-o", back.to_str().unwrap()]));
        assert!(read_collapsed(&back).iter().all(|(st, _)| !st[0].starts_with("[running]")));
        let Some(raw) = pprof_raw(file) else {
            eprintln!("no `go`: pprof files checked with oxprof's reader only");
            continue;
        };
        assert!(raw.contains(&format!("samples/count {kind}")), "{}: {raw}", file.display());
        assert!(raw.contains(&format!("state:[{state}]")), "{}: no state label {state}:\n{raw}", file.display());
        assert!(!raw.contains("[sleeping]\n") || raw.contains("state:[sleeping]"));
    }
    // --state on the pprof file's labels.
    let slept = s.path("slept.collapsed");
    ok(&oxprof(&["convert", wall.to_str().unwrap(), "--state", "sleeping", "-o", slept.to_str().unwrap()]));
    assert!(read_collapsed(&slept).iter().all(|(st, _)| st.iter().any(|f| f == "WallStates.sleepFor")));
}

#[test]
fn jdk_native_method_samples_are_wall_time_only_when_asked() {
    let s = Scratch::new("wall-jdk-native");
    compile(&s.0, &["WallStates.java"]);
    let rec = jdk_flight_recording(&java(), &s, "jdk.jfr", &["WallStates", "2"]);
    let report = ok(&oxprof(&["report", rec.to_str().unwrap()]));
    assert!(report.contains("CPU: top methods") && !report.contains("Wall clock"), "{report}");
    let report = ok(&oxprof(&["report", rec.to_str().unwrap(), "--wall"]));
    assert!(report.contains("Wall clock: top methods") && report.contains("java.net.ServerSocket.accept"), "{report}");
    let native_row = report.lines().find(|l| l.trim_start().starts_with("native")).unwrap_or_else(|| panic!("{report}"));
    assert!(native_row.contains("100.00%"), "{report}");
}
