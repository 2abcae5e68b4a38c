//! `oxprof report FILE`: a compact terminal summary of a recording: top
//! methods by self and total (ranked and shared by the kind's weight: time,
//! bytes; by samples when the samples carry none), where wall time went
//! by thread state (and per thread), every kind per thread with `--threads`,
//! top allocation sites (class and the
//! frame that allocated it), leak suspects (ranked as the agent's text leak
//! report when the recording has oxprof's `oxprof.LiveSite` events, with
//! their paths to GC roots when recorded, else live-object samples by
//! site), and
//! the safepoints: their times to safepoint, the slowest, and the methods
//! sampled while threads were being stopped. The same tables are
//! `convert`'s `text` format.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use oxprof_profile::flamegraph::format_quantity;
use oxprof_profile::jfr_read::Recording;
use oxprof_profile::leak::LeakReport;
use oxprof_profile::safepoint::{self, Safepoint, SafepointStats};
use oxprof_profile::{Counter, FrameKind, Profile, ThreadState};

use crate::input::{self, Input, Selection};

/// Print top methods, top allocation sites and leak suspects
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  oxprof report rec.jfr\n  oxprof report rec.jfr --top 20 --cpu --from 10s\n  oxprof report rec.jfr --wall --threads\n  oxprof report rec.jfr --wall --state blocked,waiting,parked\n  oxprof report rec.jfr --by endpoint\n  oxprof report rec.jfr --slowest-spans 10\n  oxprof report rec.jfr --label endpoint=\"GET /orders\""
)]
pub struct ReportArgs {
    /// A JFR recording, a pprof file or collapsed stacks
    pub file: PathBuf,
    /// Rows per table (at least 1)
    #[arg(long, default_value_t = 10, value_parser = parse_top)]
    pub top: usize,
    /// Only the N longest spans (OxProfiler.span, in oxprof's JFR recordings), with what
    /// their thread did meanwhile
    #[arg(long, value_name = "N")]
    pub slowest_spans: Option<usize>,
    #[command(flatten)]
    pub selection: Selection,
}

/// clap parser for `--top`: a whole number of rows, at least 1.
fn parse_top(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("'{s}': --top is a number of rows per table, at least 1")),
    }
}

pub fn run(args: ReportArgs) -> Result<std::process::ExitCode, String> {
    args.selection.check()?;
    if let Some(n) = args.slowest_spans {
        let input = input::load(&args.file)?;
        let Input::Jfr(rec) = &input else {
            return Err("--slowest-spans needs a JFR recording written by oxprof (spans are oxprof.Span events)".into());
        };
        let mut out = std::io::stdout().lock();
        return match slowest_spans(rec, &args.selection, n, &mut out).and_then(|()| out.flush()) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("cannot write the report: {e}")),
            _ => Ok(std::process::ExitCode::SUCCESS),
        };
    }
    let mut selection = args.selection.clone();
    selection.show_state = true; // for the state tables; the method tables skip them
    let input = input::load(&args.file)?;
    let safepoints = Safepoints::of(&input, &selection)?;
    let profiles = match selection.profiles(&input, &args.file) {
        // A recording of safepoints alone is still worth its section.
        Err(_) if safepoints.alone(&input, &selection) => Vec::new(),
        p => p?,
    };
    let leak = leak_report(&input, &selection)?;
    for note in selection.unread_kinds(&input, &profiles) {
        errln!("oxprof: note: {}: {note}", args.file.display());
    }
    let mut out = std::io::stdout().lock();
    let by = selection.by.as_deref().map(|key| by_label(&profiles, key, args.top, &mut out)).transpose();
    let tables = Tables { top: args.top, threads: selection.threads };
    match by.and_then(|_| write_report(&profiles, &safepoints, leak.as_ref(), tables, &mut out)).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(format!("cannot write the report: {e}")),
        _ => {}
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// `--by KEY`: per value of context label KEY, the total of every kind of
/// profile (CPU time, wall time, bytes allocated, lock waits...) and its
/// share, the values ordered by the first kind's total; then a blank line.
fn by_label(profiles: &[(&str, Profile)], key: &str, top: usize, out: &mut dyn Write) -> std::io::Result<()> {
    // Per profile: its key, itself, its total and its total per value.
    type Column<'a> = (&'a str, &'a Profile, u64, HashMap<Option<String>, u64>);
    let columns: Vec<Column> = profiles
        .iter()
        .map(|(k, p)| (*k, p, p.sum(Counter::Total), oxprof_profile::labels::by_value(p, key).into_iter().map(|(v, _, t)| (v, t)).collect()))
        .collect();
    let Some(first) = columns.first() else { return Ok(()) };
    let mut values: Vec<Option<String>> = oxprof_profile::labels::by_value(first.1, key).into_iter().map(|r| r.0).collect();
    for (_, _, _, by) in &columns[1..] {
        let mut more: Vec<&Option<String>> = by.keys().filter(|v| !values.contains(v)).collect();
        more.sort();
        values.extend(more.into_iter().cloned());
    }
    let names: Vec<String> =
        columns.iter().map(|(k, p, _, _)| format!("{} ({})", kind_name(k), if p.meta.counts_only() { "samples" } else { unit_of(p) })).collect();
    writeln!(out, "By {key}: {}", names.join(", "))?;
    let width =
        values.iter().take(top).map(|v| v.as_deref().unwrap_or(oxprof_profile::labels::NO_VALUE).chars().count().min(60)).max().unwrap_or(0).max(key.len());
    write!(out, "  {key:<width$}")?;
    for (k, _, _, _) in &columns {
        write!(out, " {:>12} {:>7}", kind_name(k), "share")?;
    }
    writeln!(out)?;
    for v in values.iter().take(top) {
        let name: String = v.as_deref().unwrap_or(oxprof_profile::labels::NO_VALUE).chars().take(60).collect();
        write!(out, "  {name:<width$}")?;
        for (_, p, total, by) in &columns {
            let t = by.get(v).copied().unwrap_or(0);
            write!(out, " {:>12} {:>6.2}%", format_quantity(t, unit_of(p)), pct(t, *total))?;
        }
        writeln!(out)?;
    }
    if values.len() > top {
        writeln!(out, "  ({} more values; --top shows more)", values.len() - top)?;
    }
    writeln!(out)
}

/// `--slowest-spans N`: the N longest spans within the time range (and
/// with the `--label`s given), longest first: duration, start (from the
/// recording's start), thread, tag, labels, and what the thread did
/// meanwhile: the innermost Java method most of its CPU and wall samples
/// inside the span were in.
fn slowest_spans(rec: &Recording, selection: &Selection, n: usize, out: &mut dyn Write) -> std::io::Result<()> {
    let (from, to) = selection.range(rec).unwrap_or((None, None));
    let wanted = selection.labels().unwrap_or_default();
    let set = |id: u32| rec.label_sets.get(id as usize).map_or(&[][..], Vec::as_slice);
    // As `--label` selects samples: every key given, with one of its values.
    let labels_ok = |id: u32| {
        let mine = set(id);
        wanted.iter().all(|(k, _)| mine.iter().any(|(mk, mv)| mk == k && wanted.iter().any(|(wk, wv)| wk == k && wv == mv)))
    };
    let mut spans: Vec<&oxprof_profile::jfr_read::SpanEvent> =
        rec.spans.iter().filter(|s| from.is_none_or(|f| s.time >= f) && to.is_none_or(|t| s.time < t) && labels_ok(s.labels)).collect();
    if spans.is_empty() {
        return writeln!(
            out,
            "No spans in this recording{} (OxProfiler.span, recorded while a JFR recording runs)",
            if rec.spans.is_empty() { "" } else { " that match" }
        );
    }
    let count = spans.len();
    spans.sort_by(|a, b| b.duration_ns.cmp(&a.duration_ns).then(a.time.cmp(&b.time)));
    spans.truncate(n);
    // The samples of the spans' threads, in time order.
    let mut by_thread: HashMap<u32, Vec<(i64, u32)>> = spans.iter().map(|s| (s.thread, Vec::new())).collect();
    for (time, thread, stack) in rec.cpu.iter().map(|c| (c.time, c.thread, c.stack)).chain(rec.wall.iter().map(|w| (w.time, w.thread, w.stack))) {
        if let Some(v) = by_thread.get_mut(&thread) {
            v.push((time, stack));
        }
    }
    by_thread.values_mut().for_each(|v| v.sort_unstable());
    let start = if rec.start_ns == i64::MAX { 0 } else { rec.start_ns };
    writeln!(
        out,
        "Slowest spans ({} of {count}; top method: the innermost Java method of most of the thread's CPU and wall samples inside the span)",
        spans.len()
    )?;
    writeln!(out, "  {:>10} {:>10}  {:<16} {:<24} {:<32} {:>7}  top method", "duration", "start", "thread", "tag", "labels", "samples")?;
    for s in spans {
        let end = s.time.saturating_add(s.duration_ns.min(i64::MAX as u64) as i64);
        let inside = by_thread.get(&s.thread).map_or(&[][..], |v| {
            let a = v.partition_point(|(t, _)| *t < s.time);
            let b = v.partition_point(|(t, _)| *t <= end);
            &v[a..b]
        });
        let mut methods: HashMap<&str, u64> = HashMap::new();
        for (_, stack) in inside {
            let frames = rec.stacks.get(*stack as usize).map_or(&[][..], Vec::as_slice);
            let innermost = frames
                .iter()
                .rev()
                .map(|&f| &rec.frames[f as usize])
                // What the application's own code was doing: a `native`
                // method it called (`Thread.sleep`) says less than its caller.
                .find(|f| is_java(f.kind))
                .or_else(|| frames.last().map(|&f| &rec.frames[f as usize]));
            if let Some(f) = innermost {
                *methods.entry(f.name.as_str()).or_default() += 1;
            }
        }
        let top_method = methods.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).map_or(String::from("-"), |(m, k)| format!("{m} ({k})"));
        let thread = rec.threads.get(s.thread as usize).map_or("?", String::as_str);
        let labels = oxprof_profile::labels::encode_set(set(s.labels));
        let clip = |t: &str, w: usize| -> String {
            if t.chars().count() > w {
                t.chars().take(w - 1).chain(['…']).collect()
            } else {
                t.to_string()
            }
        };
        writeln!(
            out,
            "  {:>10} {:>10}  {:<16} {:<24} {:<32} {:>7}  {top_method}",
            format_quantity(s.duration_ns, "ns"),
            format!("{:+.3} s", (s.time - start) as f64 / 1e9),
            clip(thread, 16),
            clip(&s.tag, 24),
            clip(&labels, 32),
            inside.len()
        )?;
    }
    Ok(())
}

/// A profile kind's name in tables.
fn kind_name(key: &str) -> &str {
    match key {
        "cpu" => "CPU",
        "wall" => "wall clock",
        "alloc" => "allocated",
        "live" => "live",
        "lock" => "lock wait",
        k => k,
    }
}

/// What the Safepoints section shows: the safepoints in time order, when
/// the recording started (times are shown from there) and, for a JFR
/// recording, the CPU samples the selection keeps, whose times place them
/// in the window of the safepoint they were taken in.
pub struct Safepoints<'a> {
    pub list: Vec<Safepoint>,
    pub start_ns: u64,
    pub recording: Option<&'a Recording>,
    /// The recording's CPU samples the selection keeps (time range,
    /// `--state`, `--include`/`--exclude`, `--label`): (time, stack).
    pub cpu: Vec<(i64, u32)>,
}

impl<'a> Safepoints<'a> {
    /// The safepoints of an input within the selection's time range; from
    /// a JFR recording, each counts the CPU samples the selection keeps
    /// that were taken while threads were being stopped.
    pub fn of(input: &'a Input, selection: &Selection) -> Result<Safepoints<'a>, String> {
        let mut list = selection.safepoints(input)?;
        let (recording, cpu) = match input {
            Input::Jfr(rec) => {
                let cpu = selection.cpu_samples(rec)?;
                list.iter_mut().for_each(|s| s.samples = 0);
                safepoint::count_samples(&mut list, cpu.iter().map(|&(t, _)| t.max(0) as u64));
                (Some(&**rec), cpu)
            }
            Input::Profiles(_) => (None, Vec::new()),
        };
        Ok(Safepoints { list, start_ns: input.start_ns(), recording, cpu })
    }

    /// Whether the Safepoints section alone stands for the input when the
    /// selection gives no profile: a recording of safepoints and no
    /// samples, read with no kind asked for and no filter of samples (a
    /// filter that matches nothing is an error, safepoints or not).
    pub fn alone(&self, input: &Input, selection: &Selection) -> bool {
        !self.list.is_empty() && !input.has_samples() && !selection.kind_asked() && !selection.filters_samples()
    }
}

/// A leak report rebuilt from a recording, and whether the recording had
/// its facts (`oxprof.LiveReport`: duration, GCs, sampling).
pub struct LeakFacts {
    pub report: LeakReport,
    pub facts: bool,
}

/// The last leak report of a recording with `oxprof.LiveSite` events
/// (before `--to`), ranked as the agent ranks its text report; `None` for
/// other inputs.
pub fn leak_report(input: &Input, selection: &Selection) -> Result<Option<LeakFacts>, String> {
    let Input::Jfr(rec) = input else { return Ok(None) };
    let Some((mut report, facts)) = rec.leak_report(selection.range(rec)?.1) else { return Ok(None) };
    if report.sites.is_empty() {
        return Ok(None);
    }
    report.rank();
    Ok(Some(LeakFacts { report, facts }))
}

/// How the report's tables are drawn.
#[derive(Clone, Copy, Debug)]
pub struct Tables {
    /// Rows per table.
    pub top: usize,
    /// `--threads`: a table per thread for every kind.
    pub threads: bool,
}

/// Writes the tables for every profile (the live one as `leak`'s ranking
/// when there is one), then the Safepoints section when there are
/// safepoints.
pub fn write_report(
    profiles: &[(&str, Profile)],
    safepoints: &Safepoints,
    leak: Option<&LeakFacts>,
    tables: Tables,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    profile_tables(profiles, leak, tables, out)?;
    if !safepoints.list.is_empty() {
        if !profiles.is_empty() {
            writeln!(out)?;
        }
        safepoint_section(safepoints, tables.top, out)?;
    }
    Ok(())
}

/// The tables of every profile.
fn profile_tables(profiles: &[(&str, Profile)], leak: Option<&LeakFacts>, tables: Tables, out: &mut dyn Write) -> std::io::Result<()> {
    let top = tables.top;
    for (i, (key, p)) in profiles.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        // The per-thread figures of `--threads`: the state tables hold them
        // for CPU and wall samples with thread states.
        let state_table = match *key {
            "wall" => true,
            "cpu" => !p.meta.counts_only() && state_totals(p).keys().any(|s| *s != ThreadState::Running),
            _ => false,
        };
        let threads_shown = state_table && !state_totals(p).is_empty() && has_threads(p);
        match *key {
            "alloc" => {
                methods(p, "Allocations by method", top, out)?;
                writeln!(out)?;
                let unsure = misattributed(p).map(|m| 2.0 * m).filter(|&t| t > 0.0);
                sites(p, "Top allocation sites", "samples", top, unsure, out)?;
                accuracy(p, out)?;
            }
            "live" => match leak {
                Some(leak) => leak_suspects(leak, top, out)?,
                // Without oxprof's sites: one row per site of the samples
                // (a JDK OldObjectSample is one sampled object).
                None => sites(p, "Leak suspects (live objects by allocation site)", "samples", top, None, out)?,
            },
            "lock" => {
                methods_by(p, "Lock waits by method", top, true, out)?;
                writeln!(out)?;
                sites(p, "Top contended locks", "waits", top, None, out)?;
                if let Some((_, n)) = p.meta.extra.iter().find(|(k, _)| k == oxprof_profile::convert::PARKS_LEFT_OUT) {
                    writeln!(out, "  not counted: {n}")?;
                }
            }
            "wall" => {
                methods_by(p, "Wall clock: top methods", top, true, out)?;
                writeln!(out)?;
                states(p, "Wall clock by thread state", top, out)?;
            }
            // Collapsed stacks say not what they sampled.
            _ if p.meta.counts_only() => methods(p, "Top methods", top, out)?,
            _ => {
                methods(p, "CPU: top methods", top, out)?;
                // CPU samples off the running state are worth a table.
                if state_table {
                    writeln!(out)?;
                    states(p, "CPU by thread state", top, out)?;
                }
            }
        }
        if tables.threads && !threads_shown {
            writeln!(out)?;
            by_thread(p, &format!("{} by thread", thread_title(key, p)), top, out)?;
        }
    }
    Ok(())
}

/// What a profile kind's per-thread table is of.
fn thread_title(key: &str, p: &Profile) -> &'static str {
    match key {
        _ if p.meta.counts_only() => "Samples",
        "alloc" => "Allocations",
        "live" => "Live objects",
        "lock" => "Lock waits",
        "wall" => "Wall clock",
        _ => "CPU",
    }
}

/// Whether a profile has thread roots (`--threads`).
fn has_threads(p: &Profile) -> bool {
    p.frames().iter().any(|f| f.kind == FrameKind::Thread)
}

/// `--threads`: per thread, its weight (time, bytes; samples when the
/// profile has no weights), share and samples, heaviest first.
fn by_thread(p: &Profile, title: &str, top: usize, out: &mut dyn Write) -> std::io::Result<()> {
    let mut by: HashMap<&str, (u64, u64)> = HashMap::new();
    for s in p.samples() {
        let Some(thread) = s.stack.iter().map(|&f| p.frame(f)).find(|f| f.kind == FrameKind::Thread) else { continue };
        let e = by.entry(thread.name.as_str()).or_default();
        e.0 += s.samples;
        e.1 += s.total;
    }
    if by.is_empty() {
        return writeln!(out, "{title}: no thread names in this input");
    }
    let weighed = weighs(p);
    let weight = |v: &(u64, u64)| if weighed { v.1 } else { v.0 };
    let all: u64 = by.values().map(weight).sum();
    let mut rows: Vec<_> = by.into_iter().collect();
    rows.sort_by(|a, b| weight(&b.1).cmp(&weight(&a.1)).then(b.1 .0.cmp(&a.1 .0)).then(a.0.cmp(b.0)));
    writeln!(out, "{title} ({} threads)", rows.len())?;
    writeln!(out, "  {:>8}{} {:>7}  thread", "samples", if weighed { format!(" {:>12}", unit_of(p)) } else { String::new() }, "share")?;
    for (thread, v) in rows.iter().take(top) {
        let cell = if weighed { format!(" {:>12}", format_quantity(v.1, unit_of(p))) } else { String::new() };
        writeln!(out, "  {:>8}{cell} {:>6.2}%  {thread}", v.0, pct(weight(v), all))?;
    }
    if rows.len() > top {
        writeln!(out, "  ({} more threads; --top shows more)", rows.len() - top)?;
    }
    Ok(())
}

/// Whether a profile's rows are ranked and shared by their weight (time,
/// bytes): not for counts only, nor when no sample has a weight (the JDK's
/// live-object samples without sizes), which rank by samples.
fn weighs(p: &Profile) -> bool {
    !p.meta.counts_only() && p.sum(Counter::Total) > 0
}

fn unit_of(p: &Profile) -> &str {
    &p.meta.total_unit
}

/// `N samples, TOTAL`, or for a profile of counts only (collapsed
/// stacks, which say not what they sampled) `N samples` and that.
fn amount(p: &Profile, samples: u64, total: u64) -> String {
    if p.meta.counts_only() {
        format!("{samples} samples; the file does not say what they measured")
    } else {
        format!("{samples} samples, {}", format_quantity(total, unit_of(p)))
    }
}

/// A table's column of totals (` {width} wide`, right-aligned), absent
/// from a profile of counts only, whose totals are its sample counts.
fn total_cell(p: &Profile, text: &str, width: usize) -> String {
    if p.meta.counts_only() {
        String::new()
    } else {
        format!(" {text:>width$}")
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// Self and total per method, for the non-class frames of each stack.
fn methods(p: &Profile, title: &str, top: usize, out: &mut dyn Write) -> std::io::Result<()> {
    methods_by(p, title, top, false, out)
}

/// [`methods`] with `self` going to the innermost Java method (a `native`
/// one included, as the lock table's "waited in") of a stack when `java_self` (wall clock and locks: every waiting thread's innermost
/// frame is the same futex call in libc, and the Java code under it is what
/// the reader looks for), else to the innermost frame.
fn methods_by(p: &Profile, title: &str, top: usize, java_self: bool, out: &mut dyn Write) -> std::io::Result<()> {
    let samples = p.sum(Counter::Samples);
    let total = p.sum(Counter::Total);
    let mut self_of: HashMap<&str, (u64, u64)> = HashMap::new();
    let mut total_of: HashMap<&str, (u64, u64)> = HashMap::new();
    let mut seen: Vec<&str> = Vec::new();
    for s in p.samples() {
        let kept: Vec<&oxprof_profile::Frame> = s
            .stack
            .iter()
            .map(|&f| p.frame(f))
            .filter(|f| !matches!(f.kind, FrameKind::Alloc | FrameKind::Lock | FrameKind::Thread | FrameKind::State | FrameKind::Label))
            .collect();
        let leaf = if java_self { kept.iter().rev().find(|f| is_java_frame(f)).or(kept.last()) } else { kept.last() };
        let frames: Vec<&str> = kept.iter().map(|f| f.name.as_str()).collect();
        if let Some(leaf) = leaf.map(|f| f.name.as_str()) {
            let e = self_of.entry(leaf).or_default();
            e.0 += s.samples;
            e.1 += s.total;
        }
        seen.clear();
        for name in frames {
            if !seen.contains(&name) {
                seen.push(name);
                let e = total_of.entry(name).or_default();
                e.0 += s.samples;
                e.1 += s.total;
            }
        }
    }
    let note = if java_self { "; self = the innermost Java method, or the innermost frame of a stack without Java" } else { "" };
    writeln!(out, "{title} ({}){note}", amount(p, samples, total))?;
    // Ranked and shared by the kind's weight (time waited, bytes), as the
    // sites are: samples of one stack can weigh very different amounts.
    let weighed = weighs(p);
    let weight = |v: &(u64, u64)| if weighed { v.1 } else { v.0 };
    let all = if weighed { total } else { samples };
    for (label, map) in [("self", &self_of), ("total", &total_of)] {
        let mut rows: Vec<(&&str, &(u64, u64))> = map.iter().collect();
        rows.sort_by(|a, b| weight(b.1).cmp(&weight(a.1)).then(b.1 .0.cmp(&a.1 .0)).then(a.0.cmp(b.0)));
        writeln!(out, "  by {label:<5}  {:>8}{} {:>7}  method", "samples", total_cell(p, unit_of(p), 12), "share")?;
        for (name, v) in rows.into_iter().take(top) {
            writeln!(out, "            {:>8}{} {:>6.2}%  {name}", v.0, total_cell(p, &format_quantity(v.1, unit_of(p)), 12), pct(weight(v), all))?;
        }
    }
    Ok(())
}

/// Whether a frame kind is a Java method's (a `native` Java method is
/// [`FrameKind::Native`], as C functions are: see [`is_java_frame`]).
fn is_java(kind: FrameKind) -> bool {
    matches!(kind, FrameKind::Interpreted | FrameKind::Jit | FrameKind::Inlined | FrameKind::Java)
}

/// Whether a frame is a Java method's, a `native` Java method
/// (`jdk.internal.misc.Unsafe.park`) included: a native frame named
/// `package.Class.method`, which no C function is (their local copies,
/// `memcpy.part.0`, end in a number or a compiler's suffix).
fn is_java_frame(f: &oxprof_profile::Frame) -> bool {
    is_java_method(f.kind, &f.name)
}

/// [`is_java_frame`] of a frame's kind and name.
fn is_java_method(kind: FrameKind, name: &str) -> bool {
    if is_java(kind) {
        return true;
    }
    if kind != FrameKind::Native || name.contains(['+', '@', ' ', '(', '/', ':', '`']) || name.contains(".so") {
        return false;
    }
    let parts: Vec<&str> = name.split('.').collect();
    let ident = |p: &&str| {
        p.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$') && p.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '$')
    };
    let suffix = ["part", "isra", "constprop", "cold", "lto_priv", "localalias", "plt"];
    parts.len() >= 2 && parts.iter().all(ident) && !parts[1..].iter().any(|p| suffix.contains(p))
}

/// A sample's thread state, from its state frame.
fn state_of(p: &Profile, s: &oxprof_profile::Sample) -> Option<ThreadState> {
    s.stack.iter().map(|&f| p.frame(f)).find(|f| f.kind == FrameKind::State).and_then(|f| ThreadState::from_frame_name(&f.name))
}

/// (samples, total) per thread state, of the samples that have one.
fn state_totals(p: &Profile) -> std::collections::BTreeMap<ThreadState, (u64, u64)> {
    let mut by = std::collections::BTreeMap::new();
    for s in p.samples() {
        if let Some(st) = state_of(p, s) {
            let e: &mut (u64, u64) = by.entry(st).or_default();
            e.0 += s.samples;
            e.1 += s.total;
        }
    }
    by
}

/// The share of the total per thread state and, when the profile has
/// thread roots (`--threads`), per thread: its total and its states' shares.
fn states(p: &Profile, title: &str, top: usize, out: &mut dyn Write) -> std::io::Result<()> {
    let by_state = state_totals(p);
    if by_state.is_empty() {
        return writeln!(out, "{title}: no thread states in this profile");
    }
    let total: u64 = by_state.values().map(|v| v.1).sum();
    let mut rows: Vec<_> = by_state.iter().collect();
    rows.sort_by(|a, b| b.1 .1.cmp(&a.1 .1).then(a.0.cmp(b.0)));
    let samples: u64 = by_state.values().map(|v| v.0).sum();
    if p.meta.counts_only() {
        writeln!(out, "{title} ({samples} samples)")?;
    } else {
        writeln!(out, "{title} ({})", format_quantity(total, unit_of(p)))?;
    }
    writeln!(out, "  {:<9} {:>8}{} {:>7}", "state", "samples", total_cell(p, unit_of(p), 12), "share")?;
    for (st, (n, t)) in &rows {
        writeln!(out, "  {:<9} {n:>8}{} {:>6.2}%", st.name(), total_cell(p, &format_quantity(*t, unit_of(p)), 12), pct(*t, total))?;
    }
    // Per thread, when thread roots are there.
    let mut by_thread: HashMap<&str, (u64, HashMap<ThreadState, u64>)> = HashMap::new();
    for s in p.samples() {
        let (Some(st), Some(thread)) = (state_of(p, s), s.stack.iter().map(|&f| p.frame(f)).find(|f| f.kind == FrameKind::Thread)) else { continue };
        let e = by_thread.entry(thread.name.as_str()).or_default();
        e.0 += s.total;
        *e.1.entry(st).or_default() += s.total;
    }
    if by_thread.is_empty() {
        return Ok(());
    }
    let columns: Vec<ThreadState> = rows.iter().map(|(st, _)| **st).collect();
    let mut threads: Vec<_> = by_thread.into_iter().collect();
    threads.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(b.0)));
    writeln!(out)?;
    write!(out, "  {:>12}", if p.meta.counts_only() { "samples" } else { unit_of(p) })?;
    for c in &columns {
        write!(out, " {:>8}", c.name())?;
    }
    writeln!(out, "  thread")?;
    for (thread, (t, states)) in threads.into_iter().take(top) {
        write!(out, "  {:>12}", format_quantity(t, unit_of(p)))?;
        for c in &columns {
            match states.get(c) {
                Some(&v) => write!(out, " {:>7.1}%", pct(v, t))?,
                None => write!(out, " {:>8}", "-")?,
            }
        }
        writeln!(out, "  {thread}")?;
    }
    Ok(())
}

/// The agent's estimate of the share of allocation bytes that may sit on
/// the wrong site (recorded with the profile on JDK 11–24).
fn misattributed(p: &Profile) -> Option<f64> {
    p.meta.extra.iter().find(|(k, _)| k == "allocation misattributed share").and_then(|(_, v)| v.parse().ok())
}

/// How far the allocation figures can be trusted, as the agent measured it.
fn accuracy(p: &Profile, out: &mut dyn Write) -> std::io::Result<()> {
    let facts: Vec<_> =
        p.meta.extra.iter().filter(|(k, _)| k.starts_with("allocation ") && k != "allocation misattributed share" || k == "sampler byte count").collect();
    if facts.is_empty() {
        return Ok(());
    }
    writeln!(out, "Accuracy")?;
    for (k, v) in facts {
        writeln!(out, "  {k}: {v}")?;
    }
    Ok(())
}

/// Leak suspects from oxprof's leak-report sites, ranked and computed by the
/// same code as the agent's text report.
fn leak_suspects(leak: &LeakFacts, top: usize, out: &mut dyn Write) -> std::io::Result<()> {
    let LeakFacts { report, facts } = leak;
    let samples: u64 = report.sites.iter().map(|s| s.tracked).sum();
    writeln!(
        out,
        "Leak suspects ({} sites, {} live, {samples} samples; ranked as the text leak report: score = recent growth x steadiness (R^2) x old share)",
        report.sites.len(),
        oxprof_profile::leak::fmt_bytes(report.live_bytes())
    )?;
    if *facts {
        report.write_facts(&mut *out)?;
        if let Some(note) = &report.gc_roots_note {
            writeln!(out, "paths to GC roots: {note}")?;
        }
    }
    report.write_table(top, &mut *out)?;
    report.write_paths(top, &mut *out)
}

/// Rows of (allocated class, allocating frame): samples and total. Rows
/// whose share is under `unsure` are marked as possibly off by half or more.
fn sites(p: &Profile, title: &str, what: &str, top: usize, unsure: Option<f64>, out: &mut dyn Write) -> std::io::Result<()> {
    let samples = p.sum(Counter::Samples);
    let total = p.sum(Counter::Total);
    let mut by_site: HashMap<(&str, &str), (u64, u64)> = HashMap::new();
    for s in p.samples() {
        let frames: Vec<_> = s.stack.iter().map(|&f| p.frame(f)).collect();
        let class = frames.iter().rev().find(|f| matches!(f.kind, FrameKind::Alloc | FrameKind::Lock)).map_or("?", |f| f.name.as_str());
        let site = frames
            .iter()
            .rev()
            .find(|f| !matches!(f.kind, FrameKind::Alloc | FrameKind::Lock | FrameKind::Thread | FrameKind::State | FrameKind::Label))
            .map_or("[no stack]", |f| f.name.as_str());
        let e = by_site.entry((class, site)).or_default();
        e.0 += s.samples;
        e.1 += s.total;
    }
    // Without weights (the JDK's live-object samples of some versions
    // carry no size): ranked and shared by samples, and said so.
    let weighed = weighs(p);
    let weight = |v: &(u64, u64)| if weighed { v.1 } else { v.0 };
    let all = if weighed { total } else { samples };
    let mut rows: Vec<_> = by_site.into_iter().collect();
    rows.sort_by(|a, b| weight(&b.1).cmp(&weight(&a.1)).then(b.1 .0.cmp(&a.1 .0)).then(a.0.cmp(&b.0)));
    let unit_cell = |text: &str| if weighed { format!(" {text:>12}") } else { String::new() };
    if weighed {
        writeln!(out, "{title} ({samples} {what}, {})", format_quantity(total, unit_of(p)))?;
    } else {
        writeln!(out, "{title} ({samples} {what}; no {} recorded: ranked by {what})", if unit_of(p) == "bytes" { "sizes" } else { "durations" })?;
    }
    writeln!(out, "  {:>8}{} {:>7}  class  <-  {}", what, unit_cell(unit_of(p)), "share", if what == "waits" { "waited in" } else { "allocated in" })?;
    let mut marked = false;
    for ((class, site), v) in rows.into_iter().take(top) {
        let share = pct(weight(&v), all);
        let mark = if unsure.is_some_and(|u| share < 100.0 * u) { "~" } else { " " };
        marked |= mark == "~";
        writeln!(out, "  {:>8}{} {share:>6.2}%{mark} {class}  <-  {site}", v.0, unit_cell(&format_quantity(v.1, unit_of(p))))?;
    }
    if let (true, Some(u)) = (marked, unsure) {
        writeln!(out, "  ~ under {:.0}% of the total: this JVM's sampler may have put it off by half or more (see Accuracy)", 100.0 * u)?;
    }
    Ok(())
}

/// The CPU samples taken inside safepoint windows, counted by innermost
/// Java method (the innermost frame when none is Java), per safepoint id
/// and over all windows.
struct WindowMethods<'r> {
    by_safepoint: HashMap<u64, HashMap<&'r str, u64>>,
    all: HashMap<&'r str, u64>,
    samples: u64,
}

impl<'r> WindowMethods<'r> {
    fn of(rec: &'r Recording, list: &[Safepoint], cpu: &[(i64, u32)]) -> WindowMethods<'r> {
        let mut w = WindowMethods { by_safepoint: HashMap::new(), all: HashMap::new(), samples: 0 };
        let mut names: HashMap<u32, &'r str> = HashMap::new();
        for &(time, stack) in cpu {
            let Some(i) = safepoint::window_of(list, time.max(0) as u64) else { continue };
            let name = *names.entry(stack).or_insert_with(|| innermost_java(rec, stack));
            *w.by_safepoint.entry(list[i].id).or_default().entry(name).or_default() += 1;
            *w.all.entry(name).or_default() += 1;
            w.samples += 1;
        }
        w
    }
}

/// The innermost Java method of a recording's stack, else its innermost
/// frame.
fn innermost_java(rec: &Recording, stack: u32) -> &str {
    let frames = rec.stacks.get(stack as usize).map_or(&[][..], Vec::as_slice);
    let frame = |f: &u32| &rec.frames[*f as usize];
    frames.iter().rev().map(frame).find(|f| is_java_method(f.kind, &f.name)).or(frames.last().map(frame)).map_or("[no stack]", |f| f.name.as_str())
}

/// Rows of a (name, count) map, largest first, then by name.
fn ranked<'m>(map: &HashMap<&'m str, u64>) -> Vec<(&'m str, u64)> {
    let mut rows: Vec<(&str, u64)> = map.iter().map(|(k, v)| (*k, *v)).collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    rows
}

/// Safepoints: how many, their times to safepoint, the `top` slowest (when
/// each started, its time to safepoint and total, the VM operation, the
/// CPU samples taken while threads were being stopped and, from a JFR
/// recording, the methods those samples were in), and which methods the
/// samples inside all windows were in.
fn safepoint_section(sp: &Safepoints, top: usize, out: &mut dyn Write) -> std::io::Result<()> {
    let stats = SafepointStats::of(&sp.list);
    let ns = |v: u64| format_quantity(v, "ns");
    writeln!(
        out,
        "Safepoints ({}, time to safepoint p50 {}, p99 {}, max {}, total {})",
        stats.count,
        ns(stats.ttsp_p50_ns),
        ns(stats.ttsp_p99_ns),
        ns(stats.ttsp_max_ns),
        ns(stats.ttsp_sum_ns)
    )?;
    let windows = sp.recording.map(|rec| WindowMethods::of(rec, &sp.list, &sp.cpu));
    let slowest = safepoint::slowest(&sp.list, top);
    writeln!(out, "  the {} slowest to stop all threads, and what ran meanwhile", slowest.len())?;
    writeln!(out, "  {:>10} {:>10} {:>10} {:>8}  operation", "at (s)", "ttsp", "total", "samples")?;
    for s in slowest {
        let at = s.start_ns.saturating_sub(sp.start_ns) as f64 / 1e9;
        let total = s.total_ns.map_or_else(|| "-".to_string(), ns);
        writeln!(out, "  {at:>10.3} {:>10} {total:>10} {:>8}  {}", ns(s.ttsp_ns), s.samples, s.operation.as_deref().unwrap_or("-"))?;
        if let Some(methods) = windows.as_ref().and_then(|w| w.by_safepoint.get(&s.id)) {
            for (name, n) in ranked(methods).into_iter().take(3) {
                writeln!(out, "  {:>32} {n:>8}    {name}", "")?;
            }
        }
    }
    let cpu = sp.cpu.len() as u64;
    if let Some(w) = windows.filter(|_| cpu > 0) {
        writeln!(out, "  CPU samples taken while threads were being stopped: {} of {} ({:.2}%)", w.samples, cpu, pct(w.samples, cpu))?;
        if w.samples > 0 {
            writeln!(out, "  {:>8} {:>7}  innermost Java method", "samples", "share")?;
            for (name, n) in ranked(&w.all).into_iter().take(top) {
                writeln!(out, "  {n:>8} {:>6.2}%  {name}", pct(n, w.samples))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_java_methods_are_java_methods() {
        assert!(is_java_method(FrameKind::Native, "jdk.internal.misc.Unsafe.park"));
        assert!(is_java_method(FrameKind::Native, "java.lang.Thread.sleep0"));
        assert!(is_java_method(FrameKind::Jit, "anything"));
        for c in ["__futex_abstimed_wait_common", "memcpy.part.0", "foo.isra.0", "bar.cold", "libc.so.6+0x1234", "pthread_cond_wait@@GLIBC_2.3.2"] {
            assert!(!is_java_method(FrameKind::Native, c), "{c}");
        }
        assert!(!is_java_method(FrameKind::Cpp, "JVM_Sleep.x"));
    }
}
