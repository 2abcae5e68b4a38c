//! Context labels (`OxProfiler.context`, docs/labels.md) on real samples:
//! two threads under their own labels in every kind of sample (CPU, wall,
//! allocation, lock) and every output (collapsed, JFR read by the JDK's
//! `jfr` and by oxprof, pprof read by `go tool pprof`); nesting and
//! out-of-order closing; odd characters and long values; the bound on
//! distinct label sets; bad keys; `--label` and `--by` in the CLI.

mod common;

use common::api::labels_of;
use common::*;
use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output};

const EVERY_KIND: &str = "start,event=cpu,interval=1ms,alloc=16k,wall=5ms,lock=0,threads";

fn labelled(dir: &Path, opts: &str, args: &[&str]) -> Output {
    let o = Command::new(java())
        .current_dir(dir)
        .arg(format!("-agentpath:{}={opts}", agent().display()))
        .args(["-cp", &with_jar(dir), "Labelled"])
        .args(args)
        .output()
        .expect("run java");
    assert!(o.status.success(), "{opts} {args:?}: {}\n{}", text(&o.stdout), text(&o.stderr));
    o
}

fn compiled(name: &str) -> Scratch {
    let s = Scratch::new(name);
    compile_with_jar(&s.0, &["Labelled.java"]);
    s
}

/// Per worker thread (`a`, `b`): (samples carrying its own label
/// `[worker=X]`, all its samples), from stacks with thread frames
/// (`[worker-X tid=N]` or `[worker-X]`).
fn own_label_shares(stacks: &[(Vec<String>, u64)]) -> HashMap<String, (u64, u64)> {
    let mut out: HashMap<String, (u64, u64)> = HashMap::new();
    for (stack, n) in stacks {
        let Some(thread) = stack.iter().find_map(|f| f.strip_prefix("[worker-").and_then(|r| r.get(..1))) else { continue };
        let e = out.entry(thread.to_string()).or_default();
        e.1 += n;
        if stack.iter().any(|f| *f == format!("[worker={thread}]")) {
            e.0 += n;
        }
    }
    out
}

#[track_caller]
fn check_shares(what: &str, shares: &HashMap<String, (u64, u64)>, min_samples: u64) {
    for w in ["a", "b"] {
        let (own, all) = shares.get(w).copied().unwrap_or_default();
        let share = own as f64 / all.max(1) as f64;
        eprintln!("{what}: worker-{w}: {own} of {all} ({:.1}%) carry worker={w}", 100.0 * share);
        assert!(all >= min_samples, "{what}: worker-{w} has only {all} samples");
        assert!(share >= 0.95, "{what}: worker-{w}: {:.1}% of its samples carry its label\n{shares:?}", 100.0 * share);
    }
}

#[test]
fn two_threads_carry_their_own_labels_in_collapsed_output() {
    let s = compiled("labels-collapsed");
    let out = s.path("two.collapsed");
    labelled(&s.0, &format!("{EVERY_KIND},file={}", out.display()), &["two", "1.5"]);
    for (kind, file, min) in
        [("cpu", "two.collapsed", 300), ("wall", "two.wall.collapsed", 100), ("alloc", "two.alloc.collapsed", 50), ("lock", "two.lock.collapsed", 50)]
    {
        let stacks = read_collapsed(&s.path(file));
        check_shares(&format!("collapsed {kind}"), &own_label_shares(&stacks), min);
        // The label is the root: before the thread frame.
        let (stack, _) = stacks.iter().find(|(st, _)| st.iter().any(|f| f == "[worker=a]")).unwrap();
        assert_eq!(stack[0], "[worker=a]", "{kind}: {stack:?}");
    }
}

/// JFR: the JDK's `jfr print` shows each sample's thread and labels; oxprof's
/// reader turns them back into label frames (convert --threads).
#[test]
fn two_threads_carry_their_own_labels_in_jfr() {
    let s = compiled("labels-jfr");
    let rec = s.path("two.jfr");
    labelled(&s.0, &format!("{EVERY_KIND},file={}", rec.display()), &["two", "1.5"]);
    // The JDK's reader: every jdk.ExecutionSample of a worker thread.
    let o = Command::new(tool("jfr"))
        .args(["print", "--events", "jdk.ExecutionSample,oxprof.WallClockSample,jdk.ObjectAllocationSample"])
        .arg(&rec)
        .output()
        .unwrap();
    assert!(o.status.success(), "jfr print: {}", text(&o.stderr));
    let printed = text(&o.stdout);
    let mut by_event: HashMap<(String, String), (u64, u64)> = HashMap::new();
    for event in printed.split("\n\n").filter(|e| e.contains('{')) {
        let name = event.split_whitespace().next().unwrap_or("").to_string();
        let Some(thread) = event.split("\"worker-").nth(1).and_then(|r| r.get(..1)) else { continue };
        let e = by_event.entry((name, thread.to_string())).or_default();
        e.1 += 1;
        if event.contains(&format!("labels = \"worker={thread}\"")) {
            e.0 += 1;
        }
    }
    for name in ["jdk.ExecutionSample", "oxprof.WallClockSample", "jdk.ObjectAllocationSample"] {
        let shares: HashMap<String, (u64, u64)> =
            ["a", "b"].iter().map(|w| (w.to_string(), by_event.get(&(name.to_string(), w.to_string())).copied().unwrap_or_default())).collect();
        check_shares(&format!("jfr print {name}"), &shares, 20);
    }
    // oxprof's reader.
    for kind in ["cpu", "wall", "alloc", "lock"] {
        let out = s.path(&format!("{kind}.collapsed"));
        let o = oxprof_cmd().arg("convert").arg(&rec).args([&format!("--{kind}"), "--threads", "-o"]).arg(&out).output().unwrap();
        assert!(o.status.success(), "convert --{kind}: {}", text(&o.stderr));
        check_shares(&format!("JFR via oxprof convert --{kind}"), &own_label_shares(&read_collapsed(&out)), 20);
    }
    cli_selections(&s, &rec);
}

/// `--label`, `--by` and `--no-labels` of convert, report and diff on a
/// recording of the two workers.
fn cli_selections(s: &Scratch, rec: &Path) {
    let run = |args: &[&str]| {
        let o = oxprof_cmd().args(args).output().unwrap();
        (o.status.success(), text(&o.stdout), text(&o.stderr))
    };
    let rec = rec.to_str().unwrap();
    let only_a = s.path("a.collapsed");
    let (ok, _, err) = run(&["convert", rec, "--cpu", "--threads", "--label", "worker=a", "-o", only_a.to_str().unwrap()]);
    assert!(ok, "{err}");
    let stacks = read_collapsed(&only_a);
    assert!(total(&stacks) >= 300 && stacks.iter().all(|(st, _)| st[0] == "[worker=a]"), "--label keeps worker=a only");
    // All inside the worker's context (but for a failed walk now and then).
    assert!(samples_with(&stacks, "Labelled.worker") as f64 >= 0.98 * total(&stacks) as f64);
    let by = s.path("by.collapsed");
    let (ok, _, err) = run(&["convert", rec, "--wall", "--by", "worker", "-o", by.to_str().unwrap()]);
    assert!(ok, "{err}");
    let stacks = read_collapsed(&by);
    let roots: std::collections::BTreeSet<&str> = stacks.iter().map(|(st, _)| st[0].as_str()).collect();
    assert_eq!(roots.into_iter().collect::<Vec<_>>(), ["[worker=(none)]", "[worker=a]", "[worker=b]"]);
    let plain = s.path("plain.collapsed");
    let (ok, _, err) = run(&["convert", rec, "--cpu", "--no-labels", "-o", plain.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(read_collapsed(&plain).iter().all(|(st, _)| !st.iter().any(|f| f.starts_with("[worker="))));
    // report --by: CPU, wall, allocation and lock per worker; each burned
    // the same CPU time.
    let (ok, out, err) = run(&["report", rec, "--by", "worker"]);
    assert!(ok, "{err}");
    eprintln!("{}", out.lines().take(6).collect::<Vec<_>>().join("\n"));
    let header = out.lines().next().unwrap_or("");
    assert!(header.starts_with("By worker: CPU (ns), wall clock (ns), allocated (bytes), lock wait (ns)"), "{out}");
    for w in ["a", "b"] {
        let row = out.lines().find(|l| l.trim_start().starts_with(&format!("{w} "))).unwrap_or_else(|| panic!("no row for {w}:\n{out}"));
        let shares: Vec<f64> = row.split_whitespace().filter_map(|c| c.strip_suffix('%')?.parse().ok()).collect();
        assert_eq!(shares.len(), 4, "{row}");
        assert!((35.0..=60.0).contains(&shares[0]), "worker {w}'s CPU share: {row}");
    }
    // diff of one label between two recordings (here the same one twice).
    let d = s.path("d.html");
    let (ok, _, err) = run(&["diff", rec, rec, "--cpu", "--label", "worker=b", "-o", d.to_str().unwrap()]);
    assert!(ok, "{err}");
    // diff --by: each stack under its worker's root, before and after
    // counts side by side (equal here: the same recording twice).
    let d = s.path("d.collapsed");
    let (ok, _, err) = run(&["diff", rec, rec, "--cpu", "--by", "worker", "-o", d.to_str().unwrap()]);
    assert!(ok, "{err}");
    let lines = std::fs::read_to_string(&d).unwrap();
    let mut per_root: HashMap<String, (u64, u64)> = HashMap::new();
    for line in lines.lines() {
        let mut f = line.rsplitn(3, ' ');
        let (Some(after), Some(before), Some(stack)) = (f.next(), f.next(), f.next()) else { panic!("diff line without two counts: {line}") };
        let root = stack.split(';').next().unwrap_or("").to_string();
        assert!(root.starts_with("[worker="), "diff --by: a stack outside the worker roots: {line}");
        assert!(!stack.split(';').skip(1).any(|fr| fr.starts_with("[worker=")), "diff --by: a second label frame: {line}");
        let e = per_root.entry(root).or_default();
        e.0 += before.parse::<u64>().unwrap();
        e.1 += after.parse::<u64>().unwrap();
    }
    for w in ["[worker=a]", "[worker=b]"] {
        let (before, after) = per_root.get(w).copied().unwrap_or_default();
        assert!(before > 100 && before == after, "diff --by: {w}: before {before}, after {after}\n{per_root:?}");
    }
    // Bad selections.
    let (ok, _, err) = run(&["convert", rec, "--label", "worker", "-o", "x.collapsed"]);
    assert!(!ok && err.contains("--label: 'worker' is not KEY=VALUE"), "{err}");
    let (ok, _, err) = run(&["report", rec, "--by", "bad key"]);
    assert!(!ok && err.contains("--by: 'bad key' is not a label key"), "{err}");
}

/// `go tool pprof -traces` on the first sample type (counts): (labels,
/// count, frames leaf first) per distinct sample.
fn pprof_traces(file: &Path) -> Vec<(HashMap<String, String>, f64, Vec<String>)> {
    let o = Command::new("go").args(["tool", "pprof", "-traces", "-sample_index=0"]).arg(file).output().expect("go tool pprof (scripts/test.sh installs Go)");
    assert!(o.status.success(), "go tool pprof: {}", text(&o.stderr));
    let mut out = Vec::new();
    for block in text(&o.stdout).split("-----------+-------------------------------------------------------").skip(1) {
        let (mut labels, mut value, mut frames) = (HashMap::new(), None, Vec::new());
        for line in block.lines().filter(|l| !l.trim().is_empty()) {
            let t = line.trim();
            if value.is_none() {
                if let Some((k, v)) = t.split_once(":  ").filter(|(k, _)| !k.contains(' ')) {
                    labels.insert(k.to_string(), v.trim().to_string());
                    continue;
                }
                let (num, frame) = t.split_once(char::is_whitespace).unwrap_or((t, ""));
                value = Some(num.parse::<f64>().unwrap_or_else(|_| panic!("a count in {t:?}")));
                frames.push(frame.trim().to_string());
            } else {
                frames.push(t.to_string());
            }
        }
        out.push((labels, value.unwrap_or(0.0), frames));
    }
    out
}

#[test]
fn two_threads_carry_their_own_labels_in_pprof() {
    let s = compiled("labels-pprof");
    let out = s.path("two.pb.gz");
    labelled(&s.0, &format!("{EVERY_KIND},file={}", out.display()), &["two", "1.5"]);
    for file in ["two.pb.gz", "two.wall.pb.gz", "two.alloc.pb.gz", "two.lock.pb.gz"] {
        let mut shares: HashMap<String, (u64, u64)> = HashMap::new();
        let traces = pprof_traces(&s.path(file));
        for (labels, count, frames) in &traces {
            let Some(w) = frames.iter().find_map(|f| f.strip_prefix("[worker-").and_then(|r| r.get(..1))) else { continue };
            let e = shares.entry(w.to_string()).or_default();
            e.1 += *count as u64;
            if labels.get("worker").map(String::as_str) == Some(w) {
                e.0 += *count as u64;
            }
        }
        check_shares(&format!("go tool pprof {file}"), &shares, 10);
        assert!(traces.iter().all(|(_, _, frames)| !frames.iter().any(|f| f.starts_with("[worker="))), "{file}: labels are no frames in pprof");
    }
}

#[test]
fn nested_contexts_restore_the_outer_labels_and_out_of_order_closes_clear() {
    common::api::check_nested_labels(&java(), "jdk17");
}

#[test]
fn odd_characters_survive_and_long_values_are_cut_visibly() {
    let s = compiled("labels-odd");
    let odd = "a \"q\"; b=c, d\\e \u{e9} \u{1F600}";
    let long = format!("{}\u{2026}", "0123456789".repeat(26).get(..256).unwrap());
    // pprof keeps every character.
    let pb = s.path("o.pb.gz");
    labelled(&s.0, &format!("start,event=cpu,interval=1ms,file={}", pb.display()), &["odd", "0.5"]);
    let traces = pprof_traces(&pb);
    let with = |key: &str, method: &str| -> (f64, f64) {
        let on: Vec<_> = traces.iter().filter(|(_, _, f)| f.iter().any(|f| f == method)).collect();
        (on.iter().filter(|(l, _, _)| l.contains_key(key)).map(|t| t.1).sum(), on.iter().map(|t| t.1).sum())
    };
    let (odd_n, all_n) = with("odd", "Labelled.oddWork");
    assert!(all_n >= 100.0 && odd_n >= 0.95 * all_n, "oddWork: {odd_n} of {all_n} samples labelled");
    let values: std::collections::HashSet<&str> = traces.iter().filter_map(|(l, _, _)| l.get("odd").map(String::as_str)).collect();
    assert_eq!(values.into_iter().collect::<Vec<_>>(), [odd], "pprof keeps the value as set");
    let longs: std::collections::HashSet<&str> = traces.iter().filter_map(|(l, _, _)| l.get("long").map(String::as_str)).collect();
    assert_eq!(longs.into_iter().collect::<Vec<_>>(), [long.as_str()], "the long value: its first 256 characters and …");
    // JFR: the JDK's reader prints the set's text, oxprof's reads it back exactly.
    let rec = s.path("o.jfr");
    labelled(&s.0, &format!("start,event=cpu,interval=1ms,file={}", rec.display()), &["odd", "0.5"]);
    let o = Command::new(tool("jfr")).args(["print", "--events", "jdk.ExecutionSample"]).arg(&rec).output().unwrap();
    let printed = text(&o.stdout);
    // The JDK's tool prints strings as they are (quotes unescaped); the
    // set's text escapes `,` and `\` (see docs/labels.md).
    assert!(
        printed.contains("labels = \"odd=a \"q\"; b=c\\, d\\\\e \u{e9} \u{1F600}\""),
        "{}",
        printed.lines().filter(|l| l.contains("labels")).take(3).collect::<Vec<_>>().join("\n")
    );
    let o = oxprof_cmd().args(["report", rec.to_str().unwrap(), "--by", "odd"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains(odd), "report --by odd:\n{}", text(&o.stdout));
    // Collapsed stacks lose the separators only (`;` becomes `:`).
    let col = s.path("o.collapsed");
    labelled(&s.0, &format!("start,event=cpu,interval=1ms,file={}", col.display()), &["odd", "0.5"]);
    let stacks = read_collapsed(&col);
    assert!(
        samples_with(&stacks, &format!("[odd={}]", odd.replace(';', ":"))) > 50,
        "{:?}",
        stacks.iter().map(|s| &s.0[0]).collect::<std::collections::HashSet<_>>()
    );
    assert!(samples_with(&stacks, &format!("[long={long}]")) > 50);
}

#[test]
fn distinct_label_sets_are_bounded_and_the_rest_is_over_limit() {
    let s = compiled("labels-many");
    let out = s.path("m.collapsed");
    let o = labelled(&s.0, &format!("start,event=cpu,interval=1ms,file={}", out.display()), &["many", "10000"]);
    let stdout = text(&o.stdout);
    let stats: Vec<HashMap<String, u64>> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("STATS "))
        .map(|l| l.split_whitespace().filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_string(), v.parse().unwrap())).collect())
        .collect();
    eprintln!("{stdout}");
    assert_eq!(stats.len(), 2, "{stdout}");
    for st in &stats {
        assert_eq!(st["label_sets"], 4096, "the agent names at most 4096 sets: {st:?}");
        assert_eq!(st["limit"], 4096);
        assert!(st["cached"] <= 4096, "the Java side caches no more than the agent names: {st:?}");
    }
    assert!(stats[0]["refused"] >= 1, "{stats:?}");
    // The samples of a set past the limit say so.
    let stacks = read_collapsed(&out);
    let (ok, all) = labels_of(&stacks, "Labelled.overWork", &["[oxprof=labels over limit]"]);
    assert!(all >= 100 && ok as f64 >= 0.95 * all as f64, "overWork: {ok} of {all} samples over limit");
}

/// `labelStats()` counts every context opened past the limit, including
/// repeated opens of a set refused before (the Java side stops asking the
/// agent once the table is full, so it counts them itself).
#[test]
fn every_context_refused_past_the_limit_is_counted() {
    let s = compiled("labels-refused");
    let o = labelled(&s.0, "start,event=cpu,interval=10ms", &["many", "5000", "7"]);
    let stdout = text(&o.stdout);
    let stat = |line: &str, key: &str| -> u64 {
        line.split_whitespace().find_map(|kv| kv.strip_prefix(&format!("{key}="))).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{key} in {line}"))
    };
    let lines: Vec<&str> = stdout.lines().filter_map(|l| l.strip_prefix("STATS ")).collect();
    eprintln!("{lines:?}");
    assert_eq!(lines.len(), 2, "{stdout}");
    assert_eq!(stat(lines[0], "label_sets"), 4096);
    // 5000 values: 4096 named, 904 refused, then 7 more opens of a refused one.
    assert_eq!(stat(lines[0], "refused"), 5000 - 4096 + 7, "{}", lines[0]);
    assert_eq!(stat(lines[1], "refused"), 5000 - 4096 + 7 + 1, "one more refused context: {}", lines[1]);
}

#[test]
fn bad_keys_are_refused_with_the_accepted_form() {
    let s = compiled("labels-bad");
    let o = labelled(&s.0, "start,event=cpu", &["bad"]);
    let lines: Vec<String> = text(&o.stdout).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    for (line, key) in lines.iter().zip(["has space", "", "oxprof", "k=v"]) {
        assert_eq!(line, &format!("EXC '{key}' is not a label key: 1 to 64 of A-Z a-z 0-9 _ . : / - (and not 'oxprof')"));
    }
}

/// Spans: `oxprof.Span` events read by the JDK's tool and oxprof's reader,
/// as long as the program measured them; `report --slowest-spans` lists the
/// longest first with their labels and what the thread did meanwhile.
#[test]
fn spans_are_jfr_events_and_report_lists_the_slowest() {
    let s = Scratch::new("spans");
    compile_with_jar(&s.0, &["Spans.java"]);
    let rec = s.path("s.jfr");
    let o = Command::new(java())
        .current_dir(&s.0)
        .arg(format!("-agentpath:{}=start,event=cpu,interval=1ms,wall=5ms,file={}", agent().display(), rec.display()))
        .args(["-cp", &with_jar(&s.0), "Spans", "1"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let truth = truth_line(&text(&o.stdout));
    assert!(summary_fields(&text(&o.stderr), "[oxprof] jfr summary:")["spans"] == "22", "{}", text(&o.stderr));
    let o = Command::new(tool("jfr")).args(["print", "--events", "oxprof.Span"]).arg(&rec).output().unwrap();
    let printed = text(&o.stdout);
    assert_eq!(printed.matches("oxprof.Span {").count(), 22, "{printed}");
    assert!(printed.contains("tag = \"slow\"") && printed.contains("labels = \"endpoint=GET /orders\""), "{printed}");
    let o = oxprof_cmd().args(["report", rec.to_str().unwrap(), "--slowest-spans", "30"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let report = text(&o.stdout);
    eprintln!("{report}");
    let rows: Vec<&str> = report.lines().skip(2).collect();
    assert!(report.starts_with("Slowest spans (22 of 22;"), "{report}");
    assert_eq!(rows.len(), 22, "{report}");
    let ms = |row: &str| -> f64 {
        let w: Vec<&str> = row.split_whitespace().collect();
        let v: f64 = w[0].parse().unwrap();
        match w[1] {
            "s" => v * 1e3,
            "ms" => v,
            "µs" => v / 1e3,
            u => panic!("unit {u} in {row}"),
        }
    };
    assert!(rows.windows(2).all(|w| ms(w[0]) >= ms(w[1])), "longest first:\n{report}");
    // One second of CPU against about a millisecond each: `slow` leads.
    assert!(rows[0].contains(" slow "), "{report}");
    // Durations as the program measured them around each span (within 2% + 2 ms).
    for (tag, key, method) in [("slow", "slow", "Spans.burn"), ("sleepy", "sleepy", "Spans.nap")] {
        let row = rows.iter().find(|r| r.contains(&format!(" {tag} "))).unwrap_or_else(|| panic!("no {tag} row:\n{report}"));
        let truth_ms = truth[key] / 1e6;
        assert!((ms(row) - truth_ms).abs() <= 0.02 * truth_ms + 2.0, "{tag}: {row} vs {truth_ms} ms");
        assert!(row.contains(method), "{tag}: the thread was in {method}: {row}");
        assert_eq!(row.contains("endpoint=GET /orders"), tag == "slow", "{row}");
    }
    assert_eq!(rows.iter().filter(|r| r.contains(" fast ")).count(), 20);
    // Every span began after the recording did (the agent was loaded with
    // the JVM): starts count from the recording's start, none negative.
    assert!(rows.iter().all(|r| r.split_whitespace().nth(2).is_some_and(|t| !t.starts_with('-'))), "a span before the start:\n{report}");
    // The recording starts where its first chunk says: no sample before it.
    let early = s.path("early.collapsed");
    let o = oxprof_cmd().args(["convert", rec.to_str().unwrap(), "--cpu", "--to", "0s", "-o", early.to_str().unwrap()]).output().unwrap();
    assert!(!o.status.success() && text(&o.stderr).contains("no samples"), "samples before the recording's start: {}", text(&o.stderr));
    // --label selects spans as it selects samples.
    let o = oxprof_cmd().args(["report", rec.to_str().unwrap(), "--slowest-spans", "3", "--label", "endpoint=GET /orders"]).output().unwrap();
    let report = text(&o.stdout);
    assert!(report.starts_with("Slowest spans (3 of 21;") && !report.contains("sleepy"), "{report}");
    assert!(report.lines().nth(2).is_some_and(|r| r.contains(" slow ")), "{report}");
}

/// Contexts on virtual threads (JDK 21+) label nothing, as documented, and
/// cost nothing per virtual thread: a context on each of thousands of
/// short virtual threads allocates no more on the carriers than none (it
/// made a 2 KiB per-thread table for every virtual thread before), while a
/// platform thread's context still labels its samples.
#[test]
#[ignore = "needs OXPROF_EXTRA_JDKS; run by scripts/test.sh"]
fn contexts_on_virtual_threads_cost_nothing_per_thread() {
    let jdks = extra_jdks();
    let s = Scratch::new("labels-virtual");
    compile_with_jar(&s.0, &["VtLabels.java"]);
    let mut tried = 0;
    for home in &jdks {
        let java = home.join("bin/java");
        let major = java_major(&java);
        if major < 21 {
            continue;
        }
        tried += 1;
        let out = s.path(&format!("vt{major}.collapsed"));
        let o = Command::new(&java)
            .current_dir(&s.0)
            .arg(format!("-agentpath:{}=start,event=cpu,interval=5ms,threads,file={}", agent().display(), out.display()))
            .args(["-cp", &with_jar(&s.0), "VtLabels", "2000"])
            .output()
            .expect("run java");
        let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
        assert!(o.status.success(), "JDK {major}: {stdout}\n{stderr}");
        let truth = truth_line(&stdout);
        let extra = truth["context_bytes"] - truth["plain_bytes"];
        eprintln!("JDK {major}: {truth:?}");
        assert!(extra < 256.0, "JDK {major}: a context costs {extra} bytes per virtual thread ({truth:?})");
        let stacks = read_collapsed(&out);
        // The platform thread's samples inside its context (label frames
        // come first, then the thread's).
        let burning = |st: &Vec<String>| st.iter().any(|f| f.starts_with("[platform-worker")) && st.iter().any(|f| f == "VtLabels.burn");
        let platform: u64 = stacks.iter().filter(|(st, _)| burning(st)).map(|(_, n)| n).sum();
        let labelled: u64 = stacks.iter().filter(|(st, _)| burning(st) && st.iter().any(|f| f == "[worker=platform]")).map(|(_, n)| n).sum();
        assert!(platform > 10 && labelled == platform, "JDK {major}: {labelled} of the platform thread's {platform} samples in its context labelled");
    }
    assert!(tried >= 1, "no JDK 21+ among OXPROF_EXTRA_JDKS ({jdks:?})");
}
