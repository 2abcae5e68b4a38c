//! `convert`, `report` and `diff` on recordings of real programs: the live
//! flame graph converted from oxprof's JFR weighs each site by its tracked
//! objects; `report` shows paths to GC roots; a selection that leaves no
//! samples is an error naming the filters; `.txt` is the text summary;
//! stdout closed by its reader ends quietly; `diff -o -` writes the
//! collapsed form; a cut-off gzip file is one short error.

mod common;

use common::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// `oxprof record --alloc 64k --live [--gc-roots] -o rec.jfr -- java LeakChurn 48`:
/// 48 MiB kept by LeakChurn.leakSite in a static list, ten times as much
/// dropped at once by LeakChurn.churnSite.
fn leak_recording(s: &Scratch, name: &str, gc_roots: bool) -> PathBuf {
    let rec = s.path(name);
    let mut cmd = oxprof_cmd();
    cmd.current_dir(&s.0).args(["record", "--alloc", "64k", "--live"]);
    if gc_roots {
        cmd.arg("--gc-roots");
    }
    let o = cmd.arg("-o").arg(&rec).arg("--").arg(java()).args(["-Xmx256m", "-cp", s.0.to_str().unwrap(), "LeakChurn", "48"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    rec
}

/// `jfr print --events oxprof.LiveSite`: per (allocated class, top frame),
/// the `samples` of its sites and the first one's `pathToRoot` lines, as
/// the JDK's tool reads them.
fn jfr_live_sites(rec: &Path) -> HashMap<(String, String), (u64, Vec<String>)> {
    let p = Command::new(tool("jfr")).args(["print", "--events", "oxprof.LiveSite"]).arg(rec).output().unwrap();
    assert!(p.status.success(), "{}", text(&p.stderr));
    let printed = text(&p.stdout);
    let mut out = HashMap::new();
    for event in printed.split("oxprof.LiveSite {").skip(1) {
        let field = |name: &str| event.lines().find_map(|l| l.trim().strip_prefix(&format!("{name} = ")).map(str::to_string));
        let class = field("objectClass").unwrap().split(" (").next().unwrap().to_string();
        let samples: u64 = field("samples").unwrap().parse().unwrap();
        let top = event.split("stackTrace = [").nth(1).and_then(|t| t.lines().nth(1)).unwrap().trim().trim_end_matches("()").to_string();
        let path = match event.split("pathToRoot = \"").nth(1) {
            Some(rest) => rest.split('"').next().unwrap().lines().map(str::to_string).collect(),
            None => Vec::new(),
        };
        // Two sites may share a class and top frame (their stacks differ
        // below it): their samples add up, the first one's path is kept.
        let e = out.entry((class, top)).or_insert((0, path));
        e.0 += samples;
    }
    out
}

fn run(args: &[&str]) -> Output {
    oxprof_cmd().args(args).output().unwrap()
}

/// The live flame graph converted from oxprof's own JFR weighs each site
/// by the tracked objects behind it (`oxprof.LiveSite`'s `samples`), as
/// the agent's own live profile does, not 1 per site; totals stay the live
/// bytes.
#[test]
fn converted_live_graph_counts_the_tracked_objects_of_each_site() {
    let s = Scratch::new("live-convert");
    compile(&s.0, &["LeakChurn.java"]);
    let rec = leak_recording(&s, "rec.jfr", false);
    let sites = jfr_live_sites(&rec);
    let (leak_samples, _) = sites[&("byte[]".to_string(), "LeakChurn.leakSite".to_string())];
    let all_samples: u64 = sites.values().map(|v| v.0).sum();
    // 48 MiB sampled every 64 KiB on average: about 768 tracked objects.
    assert!((500..=1100).contains(&leak_samples), "leak site tracked {leak_samples}: {sites:?}");

    let live = s.path("live.collapsed");
    let o = run(&["convert", rec.to_str().unwrap(), "--live", "-o", live.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stacks = read_collapsed(&live);
    let leak: u64 = stacks.iter().filter(|(st, _)| st.ends_with(&["LeakChurn.leakSite".to_string(), "byte[]".to_string()])).map(|(_, n)| n).sum();
    assert_eq!(leak, leak_samples, "{stacks:?}");
    assert_eq!(total(&stacks), all_samples, "{stacks:?}");

    // The agent's own live profile of the same program: the same weighing.
    let own = s.path("own.collapsed");
    let o = run_java(&s.0, &format!("event=alloc,alloc=64k,live,file={}", own.display()), &["-Xmx256m"], &s.0, &["LeakChurn", "48"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let own_leak: u64 =
        read_collapsed(&own).iter().filter(|(st, _)| st.ends_with(&["LeakChurn.leakSite".to_string(), "byte[]".to_string()])).map(|(_, n)| n).sum();
    assert!((leak as f64 - own_leak as f64).abs() < 0.25 * own_leak as f64, "converted {leak} tracked objects, the agent's own profile {own_leak}");

    // --total: live bytes, about the 48 MiB kept.
    let o = run(&["convert", rec.to_str().unwrap(), "--live", "--total", "-o", "-"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let bytes: u64 =
        text(&o.stdout).lines().filter(|l| l.contains("LeakChurn.leakSite;byte[] ")).map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap()).sum();
    assert!((bytes as f64 - (48u64 << 20) as f64).abs() < 0.15 * (48u64 << 20) as f64, "leak site {bytes} bytes, 48 MiB kept");

    // The page's header counts the same samples.
    let html = s.path("live.html");
    let o = run(&["convert", rec.to_str().unwrap(), "--live", "-o", html.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    let grouped = all_samples.to_string().as_bytes().rchunks(3).rev().map(|c| std::str::from_utf8(c).unwrap()).collect::<Vec<_>>().join(",");
    assert!(page.contains(&format!("{grouped} samples")), "no '{grouped} samples' in the page");
}

/// `report` on a recording made with `--gc-roots` shows, under the leak
/// table, each ranked site's path from a GC root, as `jfr print` reads it
/// from `oxprof.LiveSite` (the static list LeakChurn.RETAINED for the
/// leak); without `--gc-roots`, nothing about paths.
#[test]
fn report_shows_each_ranked_sites_path_to_a_gc_root() {
    let s = Scratch::new("live-report-paths");
    compile(&s.0, &["LeakChurn.java"]);
    let rec = leak_recording(&s, "roots.jfr", true);
    let sites = jfr_live_sites(&rec);
    let (_, path) = &sites[&("byte[]".to_string(), "LeakChurn.leakSite".to_string())];
    assert!(path.iter().any(|l| l == "static field LeakChurn.RETAINED -> java.util.ArrayList"), "{path:?}");

    let o = run(&["report", rec.to_str().unwrap(), "--live"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let shown = text(&o.stdout);
    let section = shown.split("Paths from a GC root to one instance\n").nth(1).unwrap_or_else(|| panic!("no paths section:\n{shown}"));
    let mut lines = section.lines();
    let head = lines.next().unwrap();
    assert_eq!(head, "  #1 byte[]  <-  LeakChurn.leakSite", "{shown}");
    let printed: Vec<&str> = lines.take_while(|l| !l.starts_with("  #")).map(str::trim).collect();
    assert_eq!(printed, path.iter().map(|l| l.trim()).collect::<Vec<_>>(), "{shown}");
    // The same section in convert's text summary.
    let o = run(&["convert", rec.to_str().unwrap(), "--live", "--format", "text", "-o", "-"]);
    assert!(o.status.success() && text(&o.stdout).contains("  #1 byte[]  <-  LeakChurn.leakSite\n     GC root"), "{}", text(&o.stdout));

    let plain = leak_recording(&s, "plain.jfr", false);
    let o = run(&["report", plain.to_str().unwrap(), "--live"]);
    let shown = text(&o.stdout);
    assert!(o.status.success() && shown.contains("LeakChurn.leakSite") && !shown.contains("GC root"), "{shown}");
}

/// Two worker threads under their own context labels (worker=a, worker=b),
/// every kind of sample.
fn labelled_recording(s: &Scratch) -> PathBuf {
    compile_with_jar(&s.0, &["Labelled.java"]);
    let rec = s.path("labels.jfr");
    let o = Command::new(java())
        .current_dir(&s.0)
        .arg(format!("-agentpath:{}=start,event=cpu,interval=1ms,alloc=16k,wall=5ms,lock=0,file={}", agent().display(), rec.display()))
        .args(["-cp", &with_jar(&s.0), "Labelled", "two", "0.5"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    rec
}

/// One line on stderr, exit code 2, and what it must say.
#[track_caller]
fn assert_one_line_error(o: &Output, expected: &[&str]) {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    for e in expected {
        assert!(err.contains(e), "'{e}' not in: {err}");
    }
}

/// A selection that leaves no samples of a recording that has context
/// labels: `report` and `diff` fail as `convert` does, naming the filters
/// (not "this input has no labels"), and write nothing.
#[test]
fn a_selection_that_leaves_nothing_is_an_error_naming_the_filters() {
    let s = Scratch::new("nothing-left");
    let rec = labelled_recording(&s);
    let r = rec.to_str().unwrap();
    // The labels are there: one of them selects samples.
    let o = run(&["report", r, "--label", "worker=a"]);
    assert!(o.status.success() && text(&o.stdout).contains("Labelled.burn"), "{}", text(&o.stderr));

    let left = "no samples left after filtering";
    for (args, filter) in [
        (vec!["report", r, "--by", "worker", "--include", "nomatch"], "--include nomatch"),
        (vec!["report", r, "--by", "worker", "--from", "100s"], "--from 100s"),
        (vec!["report", r, "--label", "worker=nope"], "--label worker=nope"),
        (vec!["convert", r, "--label", "worker=nope", "-o", "-"], "--label worker=nope"),
    ] {
        let o = run(&args);
        assert_one_line_error(&o, &[left, filter]);
        assert!(!text(&o.stderr).contains("need context labels"), "{args:?}: {}", text(&o.stderr));
        assert!(o.stdout.is_empty(), "{args:?}: {}", text(&o.stdout));
    }
    let page = s.path("dz.html");
    let o = run(&["diff", r, r, "--label", "worker=zzz", "-o", page.to_str().unwrap()]);
    assert_one_line_error(&o, &[left, "--label worker=zzz", "labels.jfr"]);
    assert!(!page.exists(), "diff wrote a page of nothing");
}

/// `diff` to a file whose extension names no diff form is refused, naming
/// the forms, before anything is read or written.
#[test]
fn diff_to_an_unknown_extension_is_refused() {
    let s = Scratch::new("diff-ext");
    let out = s.path("d.png");
    let o = run(&["diff", "/nonexistent/a.jfr", "/nonexistent/b.jfr", "-o", out.to_str().unwrap()]);
    assert_one_line_error(&o, &["-o ", "d.png", ".html", ".collapsed"]);
    assert!(!out.exists());
}

/// `convert -o x.txt` writes the text summary (as `--format text`), in one
/// file; an extension it does not know is refused naming `.txt` with the
/// others.
#[test]
fn convert_to_txt_writes_the_text_summary() {
    let s = Scratch::new("txt");
    let rec = labelled_recording(&s);
    let r = rec.to_str().unwrap();
    let txt = s.path("o.txt");
    let o = run(&["convert", r, "-o", txt.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let summary = std::fs::read_to_string(&txt).unwrap();
    let o = run(&["convert", r, "--format", "text", "-o", "-"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(summary, text(&o.stdout));
    for section in ["CPU: top methods", "Wall clock: top methods", "Top allocation sites", "Lock waits by method"] {
        assert!(summary.contains(section), "no {section} in:\n{summary}");
    }
    assert!(summary.contains("Labelled.burn"), "{summary}");
    let mut names: Vec<String> = std::fs::read_dir(&s.0).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.retain(|n| n.starts_with("o."));
    assert_eq!(names, ["o.txt"]);

    let o = run(&["convert", r, "-o", s.path("o.bin").to_str().unwrap()]);
    assert_one_line_error(&o, &["o.bin", ".html", ".collapsed", ".txt", ".pb.gz", ".otlp.pb", "--format"]);
}

/// A reader that closes stdout before oxprof writes (`| head`): `convert`
/// and `diff` end quietly, with exit code 0.
#[test]
fn stdout_closed_by_its_reader_ends_quietly() {
    let s = Scratch::new("closed-stdout");
    let rec = labelled_recording(&s);
    let r = rec.to_str().unwrap();
    for args in [vec!["convert", r, "--cpu", "-o", "-"], vec!["convert", r, "--format", "text", "-o", "-"], vec!["diff", r, r, "--cpu", "-o", "-"]] {
        let mut child = oxprof_cmd().args(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        let err = text(&o.stderr);
        assert!(o.status.code() == Some(0) && !err.contains("Broken pipe") && !err.contains("cannot write"), "{args:?}: {:?} {err}", o.status);
    }
}

/// `diff -o -` writes the collapsed form (two counts per line), as the
/// `.collapsed` file has it and as `convert -o -` writes collapsed stacks;
/// its counts are the recording's CPU samples.
#[test]
fn diff_to_stdout_writes_the_collapsed_form() {
    let s = Scratch::new("diff-stdout");
    let rec = labelled_recording(&s);
    let r = rec.to_str().unwrap();
    let o = run(&["diff", r, r, "--cpu", "-o", "-"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let piped = text(&o.stdout);
    assert!(!piped.contains("<html") && !text(&o.stderr).contains("wrote"), "{}", text(&o.stderr));
    let file = s.path("d.collapsed");
    let o = run(&["diff", r, r, "--cpu", "-o", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(piped, std::fs::read_to_string(&file).unwrap());
    let mut samples = 0u64;
    for line in piped.lines() {
        let mut f = line.rsplitn(3, ' ');
        let (after, before) = (f.next().unwrap().parse::<u64>().unwrap(), f.next().unwrap().parse::<u64>().unwrap());
        assert_eq!(before, after, "the same recording twice: {line}");
        samples += after;
    }
    let cpu = s.path("cpu.collapsed");
    assert!(run(&["convert", r, "--cpu", "-o", cpu.to_str().unwrap()]).status.success());
    assert!(samples > 0);
    assert_eq!(samples, total(&read_collapsed(&cpu)));
}

/// A `.pb.gz` cut off in the middle is one short line naming the file and
/// the truncated gzip stream once; a cut-off uncompressed OTLP file is one
/// line under 200 characters besides its name.
#[test]
fn a_cut_off_gzip_file_is_said_once_and_short() {
    let s = Scratch::new("cut-file");
    let rec = labelled_recording(&s);
    let r = rec.to_str().unwrap();
    for (name, cut) in [("cpu.pb.gz", "cut.pb.gz"), ("cpu.otlp.pb", "cut.otlp.pb")] {
        let whole = s.path(name);
        let o = run(&["convert", r, "--cpu", "-o", whole.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let bytes = std::fs::read(&whole).unwrap();
        // The whole file reads back.
        assert!(run(&["report", whole.to_str().unwrap()]).status.success());
        let f = s.path(cut);
        std::fs::write(&f, &bytes[..bytes.len() / 2]).unwrap();
        for cmd in ["report", "convert"] {
            let o = if cmd == "report" { run(&["report", f.to_str().unwrap()]) } else { run(&["convert", f.to_str().unwrap(), "-o", "-"]) };
            assert_one_line_error(&o, &[f.to_str().unwrap()]);
            let err = text(&o.stderr);
            let without_name = err.trim().replace(f.to_str().unwrap(), "");
            assert!(without_name.chars().count() < 200, "{cmd} {cut}: {} characters: {err}", without_name.chars().count());
            if cut.ends_with(".gz") {
                assert!(without_name.contains("truncated or corrupt") && without_name.matches("gzip").count() == 1, "{cmd} {cut}: {err}");
            }
        }
    }
}
