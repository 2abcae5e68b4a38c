//! Safepoints in `oxprof report` and `oxprof convert`: a recording the
//! JDK's own flight recorder made with its safepoint events on while a
//! program forced known VM operations (checked against the JDK's `jfr`
//! tool), and a file written by oxprof's JFR writer with CPU samples placed
//! inside and outside the safepoints' windows.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use oxprof_profile::jfr::{FrameType, JfrFrame, JfrWriter, SafepointEvent, ThreadState};

fn oxprof_ok(args: &[&str]) -> Output {
    let o = oxprof_cmd().args(args).output().unwrap();
    assert!(o.status.success(), "oxprof {args:?}: {}", text(&o.stderr));
    o
}

fn report(file: &Path, extra: &[&str]) -> String {
    let mut args = vec!["report", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    text(&oxprof_ok(&args).stdout)
}

/// One row of the report's table of the slowest safepoints, with the
/// methods listed under it.
#[derive(Debug)]
struct Row {
    at: String,
    ttsp: String,
    total: String,
    samples: u64,
    operation: String,
    methods: Vec<(u64, String)>,
}

/// The report's Safepoints section.
#[derive(Debug)]
struct Section {
    /// Its first line.
    title: String,
    count: usize,
    rows: Vec<Row>,
    /// "CPU samples taken while threads were being stopped: X of Y".
    in_windows: Option<(u64, u64)>,
    /// The methods of all in-window samples: (samples, share, method).
    methods: Vec<(u64, String, String)>,
}

fn section(report: &str) -> Section {
    let mut lines = report.lines().skip_while(|l| !l.starts_with("Safepoints (")).peekable();
    let title = lines.next().unwrap_or_else(|| panic!("no Safepoints section in\n{report}")).to_string();
    let count = title["Safepoints (".len()..].split(',').next().unwrap().parse().unwrap();
    let mut s = Section { title, count, rows: Vec::new(), in_windows: None, methods: Vec::new() };
    assert!(lines.next().unwrap().contains("slowest"), "{report}");
    assert!(lines.next().unwrap().trim_start().starts_with("at (s)"), "{report}");
    for l in lines {
        let t: Vec<&str> = l.split_whitespace().collect();
        if let Some(rest) = l.trim_start().strip_prefix("CPU samples taken while threads were being stopped: ") {
            let mut n = rest.split(' ');
            let inside = n.next().unwrap().parse().unwrap();
            let all = n.nth(1).unwrap().replace(',', "").parse().unwrap();
            s.in_windows = Some((inside, all));
        } else if s.in_windows.is_some() {
            if t[0] != "samples" {
                s.methods.push((t[0].parse().unwrap(), t[1].to_string(), t[2..].join(" ")));
            }
        } else if t.len() == 2 {
            s.rows.last_mut().unwrap().methods.push((t[0].parse().unwrap(), t[1].to_string()));
        } else {
            // at, ttsp (value unit), total (value unit, or -), samples, operation
            let (total, next) = if t[3] == "-" { ("-".to_string(), 4) } else { (format!("{} {}", t[3], t[4]), 5) };
            s.rows.push(Row {
                at: t[0].into(),
                ttsp: format!("{} {}", t[1], t[2]),
                total,
                samples: t[next].parse().unwrap(),
                operation: t[next + 1..].join(" "),
                methods: Vec::new(),
            });
        }
    }
    s
}

/// A quantity the report printed (`1.52 ms`) in ns.
fn ns(q: &str) -> f64 {
    let (v, unit) = q.split_once(' ').unwrap();
    let v: f64 = v.parse().unwrap();
    v * match unit {
        "ns" => 1.0,
        "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        u => panic!("unit {u} in {q}"),
    }
}

/// The rows of the HTML page's safepoint table: the text of each cell.
fn html_rows(page: &str) -> Vec<Vec<String>> {
    let Some(open) = page.find("<tbody>") else { return Vec::new() };
    let body = &page[open + 7..open + page[open..].find("</tbody>").unwrap()];
    body.split("</tr>")
        .filter(|r| !r.is_empty())
        .map(|r| {
            r.split("</td>")
                .filter(|c| c.contains("<td"))
                .map(|c| {
                    let c = &c[c.rfind("<td").unwrap()..];
                    c[c.find('>').unwrap() + 1..].to_string()
                })
                .collect()
        })
        .collect()
}

/// Events of one type in `jfr print` output, each as its field lines.
fn jfr_print_events(file: &Path, event: &str) -> Vec<String> {
    let o = Command::new(tool("jfr")).args(["print", "--events", event]).arg(file).output().unwrap();
    assert!(o.status.success(), "jfr print: {}", text(&o.stderr));
    text(&o.stdout).split("\n\n").filter(|e| e.trim_start().starts_with(&format!("{event} {{"))).map(str::to_string).collect()
}

/// A program forces thread dumps and full collections under the JDK's own
/// flight recorder with the four safepoint events on: the report counts
/// every safepoint the JDK recorded (at least one per forced operation)
/// and names their operations as the JDK does; the HTML page shows the
/// same.
#[test]
fn jdk_safepoint_events_show_in_report_and_html() {
    let s = Scratch::new("safepoints-jdk");
    compile(&s.0, &["Safepoints.java"]);
    let rec = s.path("rec.jfr");
    let events = ["jdk.SafepointBegin", "jdk.SafepointStateSynchronization", "jdk.SafepointEnd", "jdk.ExecuteVMOperation"];
    let settings: String = events.iter().map(|e| format!(",{e}#enabled=true,{e}#threshold=0ms")).collect();
    let o = Command::new(java())
        .arg("-XX:+UseG1GC")
        .arg(format!("-XX:StartFlightRecording=filename={},settings=profile{settings}", rec.display()))
        .args(["-cp", s.0.to_str().unwrap(), "Safepoints", "12", "3"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    // What the program did, by its own count.
    let said = text(&o.stdout);
    let counted =
        |key: &str| -> usize { said.split_whitespace().find_map(|w| w.strip_prefix(key)).unwrap_or_else(|| panic!("no {key} in {said:?}")).parse().unwrap() };
    let (dumps, gcs) = (counted("dumps="), counted("gcs="));
    assert_eq!((dumps, gcs), (12, 3));

    // The JDK's own account: one jdk.SafepointBegin per safepoint, and
    // the operations run at safepoints.
    let begins = jfr_print_events(&rec, "jdk.SafepointBegin").len();
    let mut jdk_ops: BTreeMap<String, usize> = BTreeMap::new();
    for e in jfr_print_events(&rec, "jdk.ExecuteVMOperation").iter().filter(|e| e.contains("safepoint = true")) {
        let op = e.lines().find_map(|l| l.trim().strip_prefix("operation = ")).unwrap().trim_matches('"');
        *jdk_ops.entry(op.to_string()).or_default() += 1;
    }

    let rep = report(&rec, &["--top", "500"]);
    let sec = section(&rep);
    assert_eq!(sec.count, begins, "every safepoint the JDK recorded, once\n{rep}");
    assert!(sec.count >= dumps + gcs, "{rep}");
    assert_eq!(sec.rows.len(), sec.count, "--top 500 lists them all\n{rep}");
    let mut ops: BTreeMap<String, usize> = BTreeMap::new();
    for r in sec.rows.iter().filter(|r| r.operation != "-") {
        *ops.entry(r.operation.clone()).or_default() += 1;
    }
    assert_eq!(ops, jdk_ops, "the operations the JDK ran at safepoints\n{rep}");
    assert!(ops.get("ThreadDump").copied().unwrap_or(0) >= dumps, "{rep}");
    assert!(ops.get("G1CollectFull").copied().unwrap_or(0) >= gcs, "{rep}");
    // The JDK ends every safepoint with jdk.SafepointEnd, the last perhaps after the recording.
    assert!(sec.rows.iter().filter(|r| r.total == "-").count() <= 1, "{rep}");
    for r in sec.rows.iter().filter(|r| r.total != "-") {
        assert!(ns(&r.ttsp) <= ns(&r.total), "time to safepoint within the total: {r:?}");
    }
    // Slowest first.
    assert!(sec.rows.windows(2).all(|w| ns(&w[0].ttsp) >= ns(&w[1].ttsp)), "{rep}");
    let slowest = ns(&sec.rows[0].ttsp);
    assert!(sec.title.contains(&format!("max {}", sec.rows[0].ttsp)) && slowest > 0.0, "{}", sec.title);
    // The in-window line is there exactly when the JDK's sampler took CPU
    // samples (on a short run it may take none), and counts all of them.
    let samples = jfr_print_events(&rec, "jdk.ExecutionSample").len() as u64;
    match sec.in_windows {
        Some((_, cpu)) => assert_eq!(cpu, samples, "the in-window line's CPU samples against the recording's\n{rep}"),
        None => assert_eq!(samples, 0, "no in-window line for a recording with {samples} CPU samples\n{rep}"),
    }

    // The HTML page: the same count, the table of the slowest.
    let html = s.path("rec.html");
    oxprof_ok(&["convert", rec.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains(&format!("<b>Safepoints</b> {} · time to safepoint", sec.count)), "{}", &page[..page.len().min(4000)]);
    let rows = html_rows(&page);
    assert_eq!(rows.len(), sec.count.min(50));
    assert_eq!(rows[0][1], sec.rows[0].ttsp, "the slowest first");
    if sec.count <= 50 {
        let page_ops = |op: &str| rows.iter().filter(|r| r[3] == op).count();
        assert_eq!(page_ops("ThreadDump"), ops["ThreadDump"]);
        assert_eq!(page_ops("G1CollectFull"), ops["G1CollectFull"]);
    }
}

fn frame(class: &str, method: &str, kind: FrameType) -> JfrFrame {
    JfrFrame { class: class.into(), method: method.into(), descriptor: "()V".into(), line: 1, bci: 0, kind }
}

const T0: i64 = 5_000_000_000;
const WALL0: i64 = 1_700_000_000_000_000_000;
const MS: i64 = 1_000_000;

/// Three safepoints (ids 1 to 3) of 5 ms, 0.5 ms and 30 ms to safepoint,
/// at 10, 100 and 200 ms; with `samples`, CPU samples of two stacks inside
/// the first and third windows and outside any.
fn write_recording(path: &Path, samples: bool) {
    let mut w = JfrWriter::new(std::fs::File::create(path).unwrap());
    w.begin_chunk(T0, WALL0).unwrap();
    w.thread(1, "VM Thread", None);
    w.thread(2, "worker", Some("worker"));
    let sp = |id, begin: i64, sync: i64, end: Option<i64>, operation| SafepointEvent {
        id,
        begin_ticks: T0 + begin,
        sync_ticks: T0 + sync,
        end_ticks: end.map(|e| T0 + e),
        operation,
        threads: Some(9),
        vm_tid: 1,
    };
    w.safepoint(&sp(1, 10 * MS, 15 * MS, Some(16 * MS), Some("G1CollectForAllocation"))).unwrap();
    w.safepoint(&sp(2, 100 * MS, 100 * MS + MS / 2, Some(101 * MS), Some("ThreadDump"))).unwrap();
    w.safepoint(&sp(3, 200 * MS, 230 * MS, None, None)).unwrap();
    if samples {
        // The innermost Java method of stack 2 is Copy.bytes, under a native frame.
        w.stack(1, &[frame("com.example.Spin", "loop", FrameType::Jit), frame("com.example.Main", "main", FrameType::Interpreted)], false);
        w.stack(
            2,
            &[
                frame("", "memcpy", FrameType::Native),
                frame("com.example.Copy", "bytes", FrameType::Jit),
                frame("com.example.Main", "main", FrameType::Interpreted),
            ],
            false,
        );
        let at = |ms: f64| T0 + (ms * 1e6) as i64;
        for (t, stack) in [(11.0, 1), (12.0, 1), (15.0, 1), (14.0, 2), (201.0, 2), (229.0, 2), (230.0, 1)] {
            w.execution_sample(at(t), 2, stack, ThreadState::Running, 0).unwrap();
        }
        for t in [5.0, 15.5, 50.0, 100.6, 230.5] {
            w.execution_sample(at(t), 2, 1, ThreadState::Running, 0).unwrap();
        }
    }
    w.end_chunk(T0 + 300 * MS, true).unwrap();
}

/// The report places each CPU sample in the window of the safepoint it was
/// taken in and names its innermost Java method, per safepoint and over
/// all windows; `--top` and `--from` select; the HTML page has the same
/// figures.
#[test]
fn report_names_what_ran_while_threads_were_being_stopped() {
    let s = Scratch::new("safepoints-windows");
    let rec = s.path("sp.jfr");
    write_recording(&rec, true);

    let rep = report(&rec, &[]);
    let sec = section(&rep);
    assert_eq!(sec.title, "Safepoints (3, time to safepoint p50 5.00 ms, p99 30.00 ms, max 30.00 ms, total 35.50 ms)", "{rep}");
    let rows: Vec<(&str, &str, &str, u64, &str)> =
        sec.rows.iter().map(|r| (r.at.as_str(), r.ttsp.as_str(), r.total.as_str(), r.samples, r.operation.as_str())).collect();
    assert_eq!(
        rows,
        [("0.200", "30.00 ms", "-", 3, "-"), ("0.010", "5.00 ms", "6.00 ms", 4, "G1CollectForAllocation"), ("0.100", "500.00 µs", "1.00 ms", 0, "ThreadDump"),],
        "{rep}"
    );
    let methods = |i: usize| sec.rows[i].methods.iter().map(|(n, m)| (*n, m.as_str())).collect::<Vec<_>>();
    assert_eq!(methods(0), [(2, "com.example.Copy.bytes"), (1, "com.example.Spin.loop")], "{rep}");
    assert_eq!(methods(1), [(3, "com.example.Spin.loop"), (1, "com.example.Copy.bytes")], "{rep}");
    assert!(methods(2).is_empty(), "{rep}");
    assert_eq!(sec.in_windows, Some((7, 12)), "{rep}");
    let shares: Vec<(u64, &str, &str)> = sec.methods.iter().map(|(n, p, m)| (*n, p.as_str(), m.as_str())).collect();
    assert_eq!(shares, [(4, "57.14%", "com.example.Spin.loop"), (3, "42.86%", "com.example.Copy.bytes")], "{rep}");

    // --top: the slowest only; --from: the safepoints requested from then on.
    let top = section(&report(&rec, &["--top", "1"]));
    assert_eq!((top.count, top.rows.len(), top.rows[0].at.as_str()), (3, 1, "0.200"));
    let late = section(&report(&rec, &["--from", "0.05s"]));
    assert_eq!(late.count, 2);
    assert_eq!(late.in_windows, Some((3, 6)), "the windows of the safepoints kept, of the samples from 50 ms on");

    // The page: summary and rows as the report has them.
    let html = s.path("sp.html");
    oxprof_ok(&["convert", rec.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<b>Safepoints</b> 3 · time to safepoint p50 5.00 ms · p99 30.00 ms · max 30.00 ms · total 35.50 ms</summary>"));
    assert_eq!(
        html_rows(&page),
        [
            ["0.200", "30.00 ms", "-", "-", "3"],
            ["0.010", "5.00 ms", "6.00 ms", "G1CollectForAllocation", "4"],
            ["0.100", "500.00 µs", "1.00 ms", "ThreadDump", "0"],
        ]
    );
    // The text format is the report.
    let txt = s.path("sp.txt");
    oxprof_ok(&["convert", rec.to_str().unwrap(), "-o", txt.to_str().unwrap(), "--format", "text"]);
    assert_eq!(section(&std::fs::read_to_string(&txt).unwrap()).rows.len(), 3);
}

/// A recording of safepoints and no samples still reports and converts
/// to a page; formats that cannot hold safepoints say there is nothing.
#[test]
fn safepoints_alone_report_and_convert_to_html() {
    let s = Scratch::new("safepoints-alone");
    let rec = s.path("sp.jfr");
    write_recording(&rec, false);
    let rep = report(&rec, &[]);
    assert!(rep.starts_with("Safepoints (3, "), "{rep}");
    let sec = section(&rep);
    assert_eq!(sec.rows.len(), 3);
    assert_eq!(sec.in_windows, None, "no CPU samples, no in-window line\n{rep}");
    let html = s.path("sp.html");
    oxprof_ok(&["convert", rec.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(html_rows(&page).len(), 3);
    assert!(page.contains("No samples were recorded."));
    let o = oxprof_cmd().args(["convert", rec.to_str().unwrap(), "-o", s.path("sp.collapsed").to_str().unwrap()]).output().unwrap();
    assert!(!o.status.success(), "collapsed stacks cannot hold safepoints");
    assert!(text(&o.stderr).contains("no samples"), "{}", text(&o.stderr));
}
