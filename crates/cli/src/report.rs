//! `oxprof report FILE`: a compact terminal summary of a recording: top
//! methods by self and total time (CPU, wall clock), where wall time went
//! by thread state (and per thread), top allocation sites (class and the
//! frame that allocated it) and, from live-object samples, leak suspects.
//! The same tables are `convert`'s `text` format.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use oxprof_profile::flamegraph::format_quantity;
use oxprof_profile::{Counter, FrameKind, Profile, ThreadState};

use crate::input::{self, Selection};

/// Print top methods, top allocation sites and leak suspects
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  oxprof report rec.jfr\n  oxprof report rec.jfr --top 20 --cpu --from 10s\n  oxprof report rec.jfr --wall --threads\n  oxprof report rec.jfr --wall --state blocked,waiting,parked"
)]
pub struct ReportArgs {
    /// A JFR recording, a pprof file or collapsed stacks
    pub file: PathBuf,
    /// Rows per table
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    #[command(flatten)]
    pub selection: Selection,
}

pub fn run(args: ReportArgs) -> Result<std::process::ExitCode, String> {
    args.selection.check()?;
    let mut selection = args.selection.clone();
    selection.show_state = true; // for the state tables; the method tables skip them
    let input = input::load(&args.file)?;
    let profiles = selection.profiles(&input)?;
    let mut out = std::io::stdout().lock();
    match write_report(&profiles, args.top, &mut out).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(format!("cannot write the report: {e}")),
        _ => {}
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// Writes the tables for every profile.
pub fn write_report(profiles: &[(&str, Profile)], top: usize, out: &mut dyn Write) -> std::io::Result<()> {
    for (i, (key, p)) in profiles.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        match *key {
            "alloc" => {
                methods(p, "Allocations by method", top, out)?;
                writeln!(out)?;
                let unsure = misattributed(p).map(|m| 2.0 * m).filter(|&t| t > 0.0);
                sites(p, "Top allocation sites", "samples", top, unsure, out)?;
                accuracy(p, out)?;
            }
            "live" => sites(p, "Leak suspects (live objects by allocation site)", "objects", top, None, out)?,
            "lock" => {
                methods_by(p, "Lock waits by method, self = innermost Java method", top, true, out)?;
                writeln!(out)?;
                sites(p, "Top contended locks", "waits", top, None, out)?;
            }
            "wall" => {
                methods_by(p, "Wall clock: top methods, self = innermost Java method", top, true, out)?;
                writeln!(out)?;
                states(p, "Wall clock by thread state", top, out)?;
            }
            _ => {
                methods(p, "CPU: top methods", top, out)?;
                // CPU samples off the running state are worth a table.
                if state_totals(p).keys().any(|s| *s != ThreadState::Running) {
                    writeln!(out)?;
                    states(p, "CPU by thread state", top, out)?;
                }
            }
        }
    }
    Ok(())
}

fn unit_of(p: &Profile) -> &str {
    &p.meta.total_unit
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

/// [`methods`] with `self` going to the innermost Java method of a stack
/// when `java_self` (wall clock and locks: every waiting thread's innermost
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
            .filter(|f| !matches!(f.kind, FrameKind::Alloc | FrameKind::Lock | FrameKind::Thread | FrameKind::State))
            .collect();
        let java = |f: &&&oxprof_profile::Frame| matches!(f.kind, FrameKind::Interpreted | FrameKind::Jit | FrameKind::Inlined | FrameKind::Java);
        let leaf = if java_self { kept.iter().rev().find(java).or(kept.last()) } else { kept.last() };
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
    writeln!(out, "{title} ({samples} samples, {})", format_quantity(total, unit_of(p)))?;
    for (label, map) in [("self", &self_of), ("total", &total_of)] {
        let mut rows: Vec<(&&str, &(u64, u64))> = map.iter().collect();
        rows.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(b.0)));
        writeln!(out, "  by {label:<5}  {:>8} {:>7} {:>12}  method", "samples", "share", unit_of(p))?;
        for (name, (n, t)) in rows.into_iter().take(top) {
            writeln!(out, "            {n:>8} {:>6.2}% {:>12}  {name}", pct(*n, samples), format_quantity(*t, unit_of(p)))?;
        }
    }
    Ok(())
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
    writeln!(out, "{title} ({})", format_quantity(total, unit_of(p)))?;
    writeln!(out, "  {:<9} {:>8} {:>12} {:>7}", "state", "samples", unit_of(p), "share")?;
    for (st, (n, t)) in &rows {
        writeln!(out, "  {:<9} {n:>8} {:>12} {:>6.2}%", st.name(), format_quantity(*t, unit_of(p)), pct(*t, total))?;
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
    write!(out, "  {:>12}", unit_of(p))?;
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
            .find(|f| !matches!(f.kind, FrameKind::Alloc | FrameKind::Lock | FrameKind::Thread | FrameKind::State))
            .map_or("[no stack]", |f| f.name.as_str());
        let e = by_site.entry((class, site)).or_default();
        e.0 += s.samples;
        e.1 += s.total;
    }
    let mut rows: Vec<_> = by_site.into_iter().collect();
    rows.sort_by(|a, b| b.1 .1.cmp(&a.1 .1).then(b.1 .0.cmp(&a.1 .0)).then(a.0.cmp(&b.0)));
    writeln!(out, "{title} ({samples} {what}, {})", format_quantity(total, unit_of(p)))?;
    writeln!(out, "  {:>8} {:>12} {:>7}  class  <-  {}", what, unit_of(p), "share", if what == "waits" { "waited in" } else { "allocated in" })?;
    let mut marked = false;
    for ((class, site), (n, t)) in rows.into_iter().take(top) {
        let share = pct(t, total);
        let mark = if unsure.is_some_and(|u| share < 100.0 * u) { "~" } else { " " };
        marked |= mark == "~";
        writeln!(out, "  {n:>8} {:>12} {share:>6.2}%{mark} {class}  <-  {site}", format_quantity(t, unit_of(p)))?;
    }
    if let (true, Some(u)) = (marked, unsure) {
        writeln!(out, "  ~ under {:.0}% of the total: this JVM's sampler may have put it off by half or more (see Accuracy)", 100.0 * u)?;
    }
    Ok(())
}
