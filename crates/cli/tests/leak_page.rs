//! The HTML page of a recording with live objects lists the leak report
//! above the live flame graph (`LeakPage.java`: a 64 MiB cache filled at
//! start and a steady leak, both measured by the program): before, the
//! *Live objects* tab was a flame graph of live bytes alone, where the
//! stable cache filled most of the width and nothing said which site grew,
//! the opposite of the text report's ranking. The same holds for
//! `oxprof convert rec.jfr -o page.html`, and `oxprof report rec.jfr`
//! prints what a report without a forced GC left out (it read back as 0
//! from `oxprof.LiveReport`, which did not carry it).

mod common;

use common::*;
use std::collections::HashMap;

/// JVM flags: young GCs every fraction of a second under the churn, and an
/// eden large enough that the 32 MiB tail triggers none.
const JVM: &[&str] = &["-Xmx512m", "-Xmn128m", "-XX:+UseParallelGC"];

fn truth(stdout: &str) -> HashMap<String, f64> {
    let line = stdout.lines().find(|l| l.starts_with("TRUTH")).unwrap_or_else(|| panic!("no TRUTH line in {stdout}"));
    line.split_whitespace().skip(1).filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_string(), v.parse().unwrap())).collect()
}

/// One row of the page's leak table, from its data attributes.
#[derive(Debug)]
struct Row {
    rank: usize,
    score: f64,
    live: f64,
    class: String,
    site: String,
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&#39;", "'").replace("&amp;", "&")
}

fn attr(tag: &str, name: &str) -> String {
    let key = format!(" {name}=\"");
    let from = tag.find(&key).unwrap_or_else(|| panic!("no {name} in {tag}")) + key.len();
    unescape(&tag[from..from + tag[from..].find('"').unwrap()])
}

/// The rows of the leak table, in page order.
fn rows(page: &str) -> Vec<Row> {
    page.match_indices("<tr tabindex=\"0\" data-rank=")
        .map(|(at, _)| {
            let tag = &page[at..at + page[at..].find('>').unwrap()];
            Row {
                rank: attr(tag, "data-rank").parse().unwrap(),
                score: attr(tag, "data-score").parse().unwrap(),
                live: attr(tag, "data-live").parse().unwrap(),
                class: attr(tag, "data-class"),
                site: attr(tag, "data-site"),
            }
        })
        .collect()
}

/// The page's table ranks the leak first with a positive score, the
/// cache (larger) with score 0, each within bounds of what the program
/// kept; the page says how to read the widths, and escapes the names.
fn check_page(page: &str, t: &HashMap<String, f64>, what: &str) -> Vec<Row> {
    let rows = rows(page);
    assert!(!rows.is_empty(), "{what}: no leak table in the page");
    eprintln!("{what}: {rows:#?}");
    assert!(t["cache_live"] > 2.0 * t["leak_live"], "the cache must be the larger: {t:?}");
    let leak = &rows[0];
    assert_eq!((leak.rank, leak.class.as_str(), leak.site.as_str()), (1, "byte[]", "LeakPage$Session.<init>"), "{what}: the leak must rank first: {rows:#?}");
    assert!(leak.score > 0.0, "{what}: {leak:?}");
    assert!(leak.live > 0.5 * t["leak_live"] && leak.live < 2.0 * t["leak_live"], "{what}: leak {} vs {} kept", leak.live, t["leak_live"]);
    let cache = rows.iter().find(|r| r.class == "long[]" && r.site == "LeakPage$CacheStore.fill").unwrap_or_else(|| panic!("{what}: no cache row: {rows:#?}"));
    assert_eq!(cache.score, 0.0, "{what}: a cache that stopped growing scores 0: {cache:?}");
    assert!(cache.rank > 1 && cache.live > leak.live, "{what}: {rows:#?}");
    assert!(cache.live > 0.7 * t["cache_live"] && cache.live < 1.4 * t["cache_live"], "{what}: cache {} vs {} kept", cache.live, t["cache_live"]);
    assert!(
        page.contains("ranked by leak score")
            && page.contains("The flame graph below is as wide as ")
            && page.contains(", not growth: its widest site, long[] \u{2190} LeakPage$CacheStore.fill ("),
        "{what}: no reading guide"
    );
    // `<init>` is text, never markup; the names JSON escapes it too.
    assert!(page.contains("LeakPage$Session.&lt;init&gt;") && !page.contains("Session.<init>"), "{what}: unescaped frame name");
    rows
}

#[test]
fn the_live_tab_lists_the_leak_report_with_the_leak_first_and_the_cache_at_score_0() {
    let s = Scratch::new("leak-page");
    compile(&s.0, &["LeakPage.java"]);
    let out = s.path("page.html");
    let o = run_java(&s.0, &format!("event=alloc,alloc=64k,live,total,file={}", out.display()), JVM, &s.0, &["LeakPage", "4", "4096", "64", "0"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let t = truth(&text(&o.stdout));
    let page = std::fs::read_to_string(&out).unwrap();
    check_page(&page, &t, "agent page");
    // The table is on the live tab (the second); the first tab names the
    // top suspect and links to it.
    assert!(page.contains("<details class=\"leaks\" data-view=\"1\" hidden open>"), "the table must be on the Live objects tab");
    let hint = &page[page.find("<div class=\"leak-hint\" data-view=\"0\">").expect("no hint on the Allocations tab")..];
    let hint = &hint[..hint.find("</div>").unwrap()];
    assert!(hint.contains("LeakPage$Session.&lt;init&gt;") && hint.contains("data-goto-tab=\"1\""), "{hint}");
    // A forced GC before the report: nothing left out.
    assert!(!page.contains("left out:"), "a report after a forced GC leaves nothing out");
}

/// A page without a leak report is as before: no table, no hint.
#[test]
fn a_page_without_live_objects_has_no_leak_table() {
    let s = Scratch::new("leak-page-none");
    compile(&s.0, &["LeakPage.java"]);
    let out = s.path("alloc.html");
    let o = run_java(&s.0, &format!("event=alloc,alloc=64k,file={}", out.display()), JVM, &s.0, &["LeakPage", "1", "1024", "8", "0"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let page = std::fs::read_to_string(&out).unwrap();
    assert!(page.contains("LeakPage$Session.\\u003cinit\\u003e"), "the allocation profile has the leak's frame");
    assert!(!page.contains("class=\"leaks\"") && !page.contains("class=\"leak-hint\"") && rows(&page).is_empty());
}

/// Left out bytes on the `left out: 31.9 MiB in 510 tracked samples ...` line.
fn left_out_bytes(line: &str) -> f64 {
    let words: Vec<&str> = line.split_whitespace().collect();
    let v: f64 = words[2].parse().unwrap();
    v * match words[3] {
        "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1048576.0,
        "GiB" => 1073741824.0,
        u => panic!("unit {u} in {line}"),
    }
}

/// Through JFR: a recording with `nogc` (a report that forces no GC, after
/// the program dropped 32 MiB that no GC has judged) converts to the same
/// page, with the `left out:` line; `oxprof report` prints it as the agent's
/// text report does, and `jfr print` shows the fields.
#[test]
fn a_jfr_recording_converts_to_the_same_table_and_keeps_what_was_left_out() {
    let s = Scratch::new("leak-page-jfr");
    compile(&s.0, &["LeakPage.java"]);
    let rec = s.path("rec.jfr");
    let o = run_java(&s.0, &format!("event=alloc,alloc=64k,live,nogc,file={}", rec.display()), JVM, &s.0, &["LeakPage", "4", "4096", "64", "32"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let t = truth(&text(&o.stdout));
    let html = s.path("conv.html");
    let c = oxprof_cmd().arg("convert").arg(&rec).arg("-o").arg(&html).output().unwrap();
    assert!(c.status.success(), "{}", text(&c.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    check_page(&page, &t, "converted page");
    let left = |text: &str, what: &str| -> f64 {
        let line = text
            .lines()
            .find_map(|l| l.find("left out: ").map(|at| l[at..].split('<').next().unwrap_or_default().to_string()))
            .unwrap_or_else(|| panic!("{what}: no 'left out' line"));
        let bytes = left_out_bytes(&line);
        eprintln!("{what}: {line} (dropped {} bytes)", t["tail_alloc"]);
        assert!(bytes > 0.5 * t["tail_alloc"] && bytes < 1.5 * t["tail_alloc"], "{what}: left out {bytes} vs {} dropped", t["tail_alloc"]);
        bytes
    };
    let in_page = left(&page, "converted page");
    let r = oxprof_cmd().arg("report").arg(&rec).output().unwrap();
    assert!(r.status.success(), "{}", text(&r.stderr));
    let report = text(&r.stdout);
    eprintln!("{report}");
    assert!(report.contains("no GC forced"), "{report}");
    assert_eq!(left(&report, "oxprof report"), in_page);
    // The JDK's reader shows the fields of oxprof.LiveReport.
    let p = std::process::Command::new(tool("jfr")).args(["print", "--events", "oxprof.LiveReport"]).arg(&rec).output().unwrap();
    let printed = text(&p.stdout);
    assert!(p.status.success(), "{}", text(&p.stderr));
    let samples = printed.lines().find_map(|l| l.trim().strip_prefix("leftOutSamples = ")).unwrap_or_else(|| panic!("{printed}"));
    assert!(samples.trim().parse::<u64>().unwrap() > 0, "{printed}");
    assert!(printed.lines().any(|l| l.trim().starts_with("leftOutBytes = ") && l.contains("MB")), "{printed}");
}
