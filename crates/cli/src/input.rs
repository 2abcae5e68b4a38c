//! Reading a profile file for `convert`, `diff` and `report`: JFR (from the
//! JDK or oxprof), pprof or an OTLP profiles request, or collapsed stacks
//! (each gzipped or not; an empty file is a profile of no samples),
//! detected from the content; and the selection options they share (kinds,
//! threads, thread states, time range, frame filters, context labels) that
//! turn a file into profiles, with the errors, naming the file, when they
//! leave no samples.

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};

use clap::Args;
use oxprof_profile::convert::{self, Options};
use oxprof_profile::jfr_read::{self, Recording};
use oxprof_profile::model::Meta;
use oxprof_profile::safepoint::Safepoint;
use oxprof_profile::{collapsed, labels, otlp, pprof, FrameKind, Profile, ThreadState};
use regex::Regex;

/// What a file held.
pub enum Input {
    Jfr(Box<Recording>),
    /// Profiles without timestamped samples: one from a pprof or
    /// collapsed file, one per kind from an OTLP request.
    Profiles(Vec<Profile>),
}

impl Input {
    /// Whether the input is one profile of counts only (collapsed stacks,
    /// or converted from them): it does not say what it sampled.
    pub fn counts_only(&self) -> bool {
        matches!(self, Input::Profiles(ps) if ps.len() == 1 && ps.iter().all(|p| p.meta.counts_only()))
    }

    /// Whether any sample of the input has context labels (before any
    /// selection).
    pub fn has_labels(&self) -> bool {
        match self {
            Input::Jfr(rec) => rec.label_sets.iter().any(|set| !set.is_empty()),
            Input::Profiles(ps) => ps.iter().any(labels::any),
        }
    }

    /// Whether the input holds any sample or event of a kind `convert`
    /// reads (a recording of safepoints alone holds none).
    pub fn has_samples(&self) -> bool {
        match self {
            Input::Jfr(rec) => !(rec.is_empty() && rec.lock.is_empty() && rec.parks.is_empty()),
            Input::Profiles(ps) => ps.iter().any(|p| !p.is_empty()),
        }
    }

    /// When the recording started, ns since the epoch (0 when unknown).
    pub fn start_ns(&self) -> u64 {
        match self {
            Input::Jfr(rec) if rec.start_ns != i64::MAX => rec.start_ns.max(0) as u64,
            Input::Jfr(_) => 0,
            Input::Profiles(ps) => ps.iter().map(|p| p.meta.start_ns).filter(|&t| t != 0).min().unwrap_or(0),
        }
    }
}

/// Which samples to take from an input, shared by convert, diff and report.
#[derive(Args, Clone, Debug, Default)]
pub struct Selection {
    /// CPU samples (jdk.ExecutionSample)
    #[arg(long)]
    pub cpu: bool,
    /// Wall-clock samples (oxprof's event=wall/wall=; with the JDK's own recordings,
    /// jdk.NativeMethodSample: threads in native code only)
    #[arg(long)]
    pub wall: bool,
    /// Allocation samples (jdk.ObjectAllocationSample, or the TLAB events on JDK 11)
    #[arg(long)]
    pub alloc: bool,
    /// Live objects (jdk.OldObjectSample)
    #[arg(long)]
    pub live: bool,
    /// Lock waits (jdk.JavaMonitorEnter and jdk.ThreadPark: oxprof's lock events, or the
    /// JDK's own, which it records above a threshold; parks with no blocker are no lock
    /// wait and left out)
    #[arg(long)]
    pub lock: bool,
    /// One root frame per thread (report: a table per thread for every kind)
    #[arg(long)]
    pub threads: bool,
    /// Keep only CPU and wall samples of threads in these states: running, native, vm,
    /// blocked, waiting, parked, sleeping, unknown (comma-separated)
    #[arg(long, value_name = "STATE[,STATE]")]
    pub state: Option<String>,
    /// One root frame per thread state ([running], [sleeping], ...) in CPU and wall profiles
    #[arg(long)]
    pub show_state: bool,
    /// Start of the time range: a duration from the recording's start (10s, 1.5m),
    /// from its end when negative (-30s), or a UTC time (12:04:05, 2024-05-01T12:04:05Z)
    #[arg(long, allow_hyphen_values = true)]
    pub from: Option<String>,
    /// End of the time range, in the same forms as --from
    #[arg(long, allow_hyphen_values = true)]
    pub to: Option<String>,
    /// Keep only stacks with a frame matching this regular expression
    #[arg(long)]
    pub include: Option<String>,
    /// Drop stacks with a frame matching this regular expression
    #[arg(long)]
    pub exclude: Option<String>,
    /// Keep only samples the application labelled KEY=VALUE (OxProfiler.context); repeat
    /// for more keys (all must match; a key given twice matches either value)
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub label: Vec<String>,
    /// Group by the value of context label KEY: its [KEY=value] frame at the root of every
    /// stack, [KEY=(none)] without one (report: a table of every kind per value)
    #[arg(long, value_name = "KEY")]
    pub by: Option<String>,
    /// Leave out the context-label frames ([KEY=value] roots)
    #[arg(long)]
    pub no_labels: bool,
}

/// Reads a file, showing progress on a terminal for JFR files. An empty
/// file is a profile with no samples (the agent writes one when it
/// sampled nothing); a gzipped JFR recording or collapsed-stacks file is
/// read as the plain one.
pub fn load(path: &Path) -> Result<Input, String> {
    let mut file = std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut head = [0u8; 4];
    let n = file.read(&mut head).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if jfr_read::is_jfr(&head[..n]) {
        drop(file);
        return read_jfr(path, |progress| jfr_read::read_file(path, progress));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let gzipped = pprof::is_gzip(&bytes);
    if gzipped || std::str::from_utf8(&bytes).is_err() {
        // Gunzipped once, so that a cut-off stream is said once.
        let data = pprof::decompressed(&bytes).map_err(|e| format!("{}: {e}: not a readable pprof, OTLP, JFR or collapsed-stacks file", path.display()))?;
        if gzipped && jfr_read::is_jfr(&data) {
            return read_jfr(path, |progress| {
                jfr_read::read_from(&mut &data[..], data.len() as u64, progress).map_err(|e| format!("{} (gzipped JFR): {e}", path.display()))
            });
        }
        // pprof and OTLP are both protobuf: whichever reads it.
        let pprof_error = match pprof::read_all(&data) {
            Ok(ps) => return Ok(Input::Profiles(ps)),
            Err(e) => e,
        };
        let otlp_error = match otlp::read(&data) {
            Ok(d) if !d.profiles.is_empty() => return Ok(Input::Profiles(d.profiles)),
            Ok(_) => return Err(format!("{}: an OTLP profiles request with no profile in it", path.display())),
            Err(e) => e,
        };
        // Gzipped text: collapsed stacks (an empty one included).
        if let (true, Ok(text)) = (gzipped, std::str::from_utf8(&data)) {
            return read_collapsed(path, text);
        }
        return Err(format!(
            "{}: not a JFR file, nor a pprof or OTLP one{} (as pprof: {}; as OTLP: {})",
            path.display(),
            if gzipped { " (it is gzipped; gunzipped, it is none of them)" } else { "" },
            decode_error(&pprof_error),
            decode_error(&otlp_error)
        ));
    }
    read_collapsed(path, &String::from_utf8_lossy(&bytes))
}

/// A JFR recording read by `read` (given the progress callback), its
/// warnings shown.
fn read_jfr(path: &Path, read: impl FnOnce(&mut dyn FnMut(u64, u64)) -> Result<Recording, String>) -> Result<Input, String> {
    let tty = std::io::stderr().is_terminal();
    let mut last = 0u64;
    let mut progress = |done: u64, total: u64| {
        if tty && total > 0 && (done - last > total / 50 || done == total) {
            last = done;
            err_print!("\rreading {}: {:3}% ", path.display(), done * 100 / total);
            if done == total {
                errln!();
            }
        }
    };
    let rec = read(&mut progress)?;
    for w in &rec.warnings {
        errln!("oxprof: warning: {}: {w}", path.display());
    }
    Ok(Input::Jfr(Box::new(rec)))
}

/// Collapsed stacks (nothing, or blank lines only, is a profile of no
/// samples), refusing an HTML page.
fn read_collapsed(path: &Path, text: &str) -> Result<Input, String> {
    let head = text.trim_start().get(..15).unwrap_or("").to_ascii_lowercase();
    if head.starts_with("<!doctype html") || head.starts_with("<html") {
        return Err(format!(
            "{} is an HTML page (a flame graph); convert, diff and report read JFR, pprof, OTLP or collapsed stacks: record to a .jfr file to keep everything",
            path.display()
        ));
    }
    let meta = Meta { title: path.display().to_string(), event: "cpu".into(), ..Meta::default() };
    collapsed::read(text, meta)
        .map(|p| Input::Profiles(vec![p]))
        .map_err(|e| format!("{} is neither JFR, pprof, OTLP nor collapsed stacks ({e})", path.display()))
}

/// A protobuf reader's error, short: without the prefixes that say what
/// was being read, at most 60 characters.
fn decode_error(e: &str) -> String {
    let mut e = e;
    for prefix in ["not a pprof profile: ", "not an OTLP ExportProfilesServiceRequest: ", "failed to decode Protobuf message: "] {
        e = e.strip_prefix(prefix).unwrap_or(e);
    }
    if e.chars().count() > 60 {
        e.chars().take(59).chain(['…']).collect()
    } else {
        e.to_string()
    }
}

fn regex(flag: &str, pattern: &Option<String>) -> Result<Option<Regex>, String> {
    pattern
        .as_deref()
        .map(|p| Regex::new(p).map_err(|e| format!("{flag} '{p}' is not a valid regular expression: {}", e.to_string().lines().last().unwrap_or(""))))
        .transpose()
}

impl Selection {
    /// The same selection without kind flags: what a file that does not say
    /// its kind (collapsed stacks) is read with beside one that does.
    pub fn without_kinds(&self) -> Selection {
        Selection { cpu: false, wall: false, alloc: false, live: false, lock: false, ..self.clone() }
    }

    /// The states `--state` names (`None` when not given); checked before
    /// any file is read.
    pub fn states(&self) -> Result<Option<Vec<ThreadState>>, String> {
        self.state.as_deref().map(|s| ThreadState::parse_list(s).map_err(|e| format!("--state: {e}"))).transpose()
    }

    /// The `--label` filters as (key, value).
    pub fn labels(&self) -> Result<Vec<(String, String)>, String> {
        self.label.iter().map(|l| labels::parse_selector(l).map_err(|e| format!("--label: {e}"))).collect()
    }

    /// Checks the options that need no input (run before reading files).
    pub fn check(&self) -> Result<(), String> {
        self.states()?;
        regex("--include", &self.include)?;
        regex("--exclude", &self.exclude)?;
        self.labels()?;
        if let Some(k) = self.by.as_deref().filter(|k| !labels::valid_key(k)) {
            return Err(format!("--by: '{k}' is not a label key: 1 to {} of A-Z a-z 0-9 _ . : / -", labels::MAX_KEY_CHARS));
        }
        if self.by.is_some() && self.no_labels {
            return Err("--by groups by a label and --no-labels leaves labels out: give one of them".into());
        }
        Ok(())
    }

    /// The profiles of an input read from `file` ([`Selection::kinds`]),
    /// with the context-label selections applied: `--label` filters, `--by`
    /// groups, `--no-labels`. Every error names the file.
    pub fn profiles(&self, input: &Input, file: &Path) -> Result<Vec<(&'static str, Profile)>, String> {
        let wanted = self.labels()?;
        // Whether the input has labels at all: the filters may leave none.
        if (!wanted.is_empty() || self.by.is_some()) && !input.has_labels() {
            return Err(format!(
                "--label and --by need context labels, and {} has none (set them with OxProfiler.context, see docs/labels.md)",
                file.display()
            ));
        }
        let mut profiles = self.kinds(input, file)?;
        for (_, p) in &mut profiles {
            labels::retain(p, &wanted);
            if let Some(key) = &self.by {
                *p = labels::grouped_by(p, key);
            } else if self.no_labels {
                *p = labels::without(p);
            }
        }
        if profiles.iter().all(|(_, p)| p.is_empty()) {
            return Err(self.nothing_left(file));
        }
        Ok(profiles)
    }

    /// Whether a kind (`--cpu`, `--wall`, `--alloc`, `--live`, `--lock`)
    /// was asked for by name.
    pub fn kind_asked(&self) -> bool {
        self.cpu || self.wall || self.alloc || self.live || self.lock
    }

    /// For a JFR recording, a note per kind asked for by name that gives
    /// no profile (not among `profiles`): which events it is read from,
    /// and the events of other recorders that are not read.
    pub fn unread_kinds(&self, input: &Input, profiles: &[(&str, Profile)]) -> Vec<String> {
        let Input::Jfr(_) = input else { return Vec::new() };
        let mut notes = Vec::new();
        for (key, asked, note) in [
            ("cpu", self.cpu, "no CPU samples: they are read from jdk.ExecutionSample; JDK 25's CPU-time samples (jdk.CPUTimeSample) are not read"),
            (
                "wall",
                self.wall,
                "no wall-clock samples: they are read from oxprof.WallClockSample and the JDK's jdk.NativeMethodSample; async-profiler's wall clock (profiler.WallClockSample) is not read",
            ),
        ] {
            if asked && !profiles.iter().any(|(k, _)| *k == key) {
                notes.push(note.to_string());
            }
        }
        notes
    }

    /// Whether an option selects samples by what they hold: `--include`,
    /// `--exclude`, `--state`, `--label`, `--by`.
    pub fn filters_samples(&self) -> bool {
        self.include.is_some() || self.exclude.is_some() || self.state.is_some() || !self.label.is_empty() || self.by.is_some()
    }

    /// The times and stacks of a recording's CPU samples this selection
    /// keeps: within the time range, in the states of `--state`, whose
    /// stacks `--include`/`--exclude` keep, with the labels of `--label`
    /// (the kind options aside).
    pub fn cpu_samples(&self, rec: &Recording) -> Result<Vec<(i64, u32)>, String> {
        let (from, to) = self.range(rec)?;
        let include = regex("--include", &self.include)?;
        let exclude = regex("--exclude", &self.exclude)?;
        let states = self.states()?;
        let wanted = self.labels()?;
        let mut verdict: std::collections::HashMap<u32, bool> = std::collections::HashMap::new();
        let mut stack_ok = |stack: u32| {
            *verdict.entry(stack).or_insert_with(|| {
                let names = || rec.stacks.get(stack as usize).map_or(&[][..], Vec::as_slice).iter().map(|&f| rec.frames[f as usize].name.as_str());
                include.as_ref().is_none_or(|r| names().any(|n| r.is_match(n))) && !exclude.as_ref().is_some_and(|r| names().any(|n| r.is_match(n)))
            })
        };
        let labels_ok = |id: u32| {
            let set = rec.label_sets.get(id as usize).map_or(&[][..], Vec::as_slice);
            // As labels::retain: every key given, with one of its values.
            wanted.iter().all(|(k, _)| set.iter().any(|(sk, sv)| sk == k && wanted.iter().any(|(wk, wv)| wk == k && wv == sv)))
        };
        Ok(rec
            .cpu
            .iter()
            .filter(|s| from.is_none_or(|f| s.time >= f) && to.is_none_or(|t| s.time < t))
            .filter(|s| states.as_ref().is_none_or(|keep| keep.contains(&s.state)) && labels_ok(s.labels))
            .filter(|s| stack_ok(s.stack))
            .map(|s| (s.time, s.stack))
            .collect())
    }

    /// The error when the selection leaves no samples of `file`: the
    /// filters given, and which options to check.
    pub fn nothing_left(&self, file: &Path) -> String {
        let quoted = |flag: &str, v: &str| format!("{flag} {}", if v.contains([' ', '\'', '"']) || v.is_empty() { format!("{v:?}") } else { v.to_string() });
        let mut given: Vec<String> = Vec::new();
        for (flag, v) in [("--from", &self.from), ("--to", &self.to), ("--include", &self.include), ("--exclude", &self.exclude), ("--state", &self.state)] {
            if let Some(v) = v {
                given.push(quoted(flag, v));
            }
        }
        given.extend(self.label.iter().map(|l| quoted("--label", l)));
        if given.is_empty() {
            return format!("no samples in {}{}", file.display(), if self.kind_asked() { " of the kinds asked for" } else { "" });
        }
        format!("no samples left after filtering {} with {} (check --from/--to, --include/--exclude, --state and --label)", file.display(), given.join(", "))
    }

    /// The profiles of an input, one per kind asked for (all kinds present
    /// when none is asked for), as `(key, profile)`.
    fn kinds(&self, input: &Input, file: &Path) -> Result<Vec<(&'static str, Profile)>, String> {
        let include = regex("--include", &self.include)?;
        let exclude = regex("--exclude", &self.exclude)?;
        let inc = include.as_ref().map(|r| move |s: &str| r.is_match(s));
        let exc = exclude.as_ref().map(|r| move |s: &str| r.is_match(s));
        let states = self.states()?;
        let all = !(self.cpu || self.wall || self.alloc || self.live || self.lock);
        match input {
            Input::Jfr(rec) => {
                let (from_ns, to_ns) = self.range(rec)?;
                let opts = Options {
                    cpu: all || self.cpu,
                    wall: all || self.wall,
                    // The JDK's native-method samples cover only threads in
                    // native code: wall time only when asked for by name.
                    jdk_native: self.wall,
                    alloc: all || self.alloc,
                    live: all || self.live,
                    lock: all || self.lock,
                    threads: self.threads,
                    state: states.clone(),
                    show_state: self.show_state,
                    from_ns,
                    to_ns,
                    include: inc.as_ref().map(|f| f as &dyn Fn(&str) -> bool),
                    exclude: exc.as_ref().map(|f| f as &dyn Fn(&str) -> bool),
                };
                let profiles = convert::profiles(rec, &opts);
                if profiles.is_empty() {
                    let unread: String = self.unread_kinds(input, &[]).iter().map(|n| format!("; {n}")).collect();
                    return Err(format!(
                        "no samples in {}{} (CPU: {}, wall clock: {}, allocation: {}, live: {}, lock: {}{}{}){unread}",
                        file.display(),
                        if self.kind_asked() { " of the kinds asked for" } else { "" },
                        rec.cpu.len(),
                        rec.wall.len(),
                        rec.alloc.len(),
                        rec.live.len(),
                        rec.lock.len(),
                        if rec.native.is_empty() { String::new() } else { format!(", JDK native-method samples: {} (--wall reads them)", rec.native.len()) },
                        if rec.parks.is_empty() { String::new() } else { format!(", parks without a blocker: {} (no lock contention)", rec.parks.len()) }
                    ));
                }
                Ok(profiles)
            }
            Input::Profiles(ps) => {
                if self.from.is_some() || self.to.is_some() {
                    return Err(format!(
                        "--from/--to need a JFR recording; {} is a pprof, OTLP or collapsed file, which has no timestamped samples",
                        file.display()
                    ));
                }
                // Collapsed stacks (counts only) say not what they sampled:
                // a kind flag other than the default --cpu cannot select.
                if let [p] = &ps[..] {
                    let flags: Vec<&str> = [("--wall", self.wall), ("--alloc", self.alloc), ("--live", self.live), ("--lock", self.lock)]
                        .into_iter()
                        .filter_map(|(f, given)| given.then_some(f))
                        .collect();
                    if p.meta.counts_only() && !flags.is_empty() {
                        return Err(format!(
                            "{} cannot select from {}: it holds one profile of counts only (collapsed stacks, or converted from them), which does not say what it sampled; leave {} out",
                            flags.join("/"),
                            file.display(),
                            if flags.len() == 1 { "it" } else { "them" }
                        ));
                    }
                }
                let mut out: Vec<(&'static str, Profile)> = Vec::new();
                for p in ps {
                    let key = kind_key(&p.meta.event);
                    let asked = match key {
                        "alloc" => self.alloc,
                        "live" => self.live,
                        "wall" => self.wall,
                        "lock" => self.lock,
                        _ => self.cpu,
                    };
                    // A file of one profile (pprof, collapsed) gives it
                    // whatever kind is asked for (collapsed stacks do not
                    // say theirs).
                    if !(all || asked || ps.len() == 1) {
                        continue;
                    }
                    match out.iter_mut().find(|(k, _)| *k == key) {
                        // Two profiles of one kind (an OTLP request of two
                        // intervals): one profile of both.
                        Some((_, into)) => merge_into(into, p),
                        None => out.push((key, p.clone())),
                    }
                }
                if out.is_empty() {
                    let held: Vec<&str> = ps.iter().map(|p| kind_key(&p.meta.event)).collect();
                    return Err(format!("no samples in {} of the kinds asked for (it holds: {})", file.display(), held.join(", ")));
                }
                let state_of = |p: &Profile, s: &oxprof_profile::Sample| {
                    s.stack.iter().map(|&f| p.frame(f)).find(|f| f.kind == FrameKind::State).and_then(|f| ThreadState::from_frame_name(&f.name))
                };
                if states.is_some() && !out.iter().any(|(_, p)| p.samples().iter().any(|s| state_of(p, s).is_some())) {
                    let events: Vec<&str> = out.iter().map(|(_, p)| p.meta.event.as_str()).collect();
                    return Err(format!(
                        "--state needs thread states, and the {} profile of {} has none (record with the agent's `state` option, or as JFR or pprof)",
                        events.join("/"),
                        file.display()
                    ));
                }
                for (key, p) in &mut out {
                    // As for JFR: --state selects among CPU and wall samples
                    // (a single profile of unknown kind counts as one).
                    let by_state = states.as_ref().filter(|_| matches!(*key, "cpu" | "wall") || ps.len() == 1);
                    p.retain(|p, s| {
                        let names = || s.stack.iter().map(|&f| p.frame(f).name.as_str());
                        let state_ok = by_state.is_none_or(|keep| state_of(p, s).is_some_and(|st| keep.contains(&st)));
                        state_ok && (inc.is_none() || inc.as_ref().is_some_and(|f| names().any(f))) && !exc.as_ref().is_some_and(|f| names().any(f))
                    });
                    if !self.show_state {
                        *p = without_state_frames(p);
                    }
                }
                Ok(out)
            }
        }
    }

    /// `--from` and `--to` as ns since the epoch.
    pub fn range(&self, rec: &Recording) -> Result<(Option<i64>, Option<i64>), String> {
        let start = if rec.start_ns == i64::MAX { 0 } else { rec.start_ns };
        let from = self.from.as_deref().map(|t| parse_time(t, start, rec.end_ns)).transpose().map_err(|e| format!("--from: {e}"))?;
        let to = self.to.as_deref().map(|t| parse_time(t, start, rec.end_ns)).transpose().map_err(|e| format!("--to: {e}"))?;
        if let (Some(f), Some(t)) = (from, to) {
            if t <= f {
                return Err(format!(
                    "--to {} is not after --from {}: the range runs from --from to a later --to",
                    self.to.as_deref().unwrap_or(""),
                    self.from.as_deref().unwrap_or("")
                ));
            }
        }
        Ok((from, to))
    }

    /// The safepoints of an input requested within `--from`/`--to`, in
    /// time order: a JFR recording's, or those a profile carries.
    pub fn safepoints(&self, input: &Input) -> Result<Vec<Safepoint>, String> {
        match input {
            Input::Jfr(rec) => {
                let (from_ns, to_ns) = self.range(rec)?;
                Ok(convert::safepoints(rec, &Options { from_ns, to_ns, ..Options::default() }))
            }
            Input::Profiles(ps) => {
                let mut all: Vec<Safepoint> = ps.iter().flat_map(|p| p.safepoints.iter().cloned()).collect();
                all.sort_by_key(|s| s.start_ns);
                all.dedup();
                Ok(all)
            }
        }
    }
}

/// For `--total`: every profile of `file` with samples has weights (time,
/// bytes), else the one-line error naming the kind (the JDK's live-object
/// samples of some versions carry no size).
pub fn totals_recorded(profiles: &[(&str, Profile)], file: &Path) -> Result<(), String> {
    use oxprof_profile::Counter;
    let Some((key, p)) = profiles.iter().find(|(_, p)| !p.meta.counts_only() && !p.is_empty() && p.sum(Counter::Total) == 0) else { return Ok(()) };
    let others: Vec<String> = profiles.iter().filter(|(k, _)| k != key).map(|(k, _)| format!("--{k}")).collect();
    Err(format!(
        "--total: the {key} samples of {} record no {} (all {} are 0), so there is nothing to total: leave out --total to count samples{}",
        file.display(),
        if p.meta.total_unit == "bytes" { "sizes" } else { "durations" },
        p.sum(Counter::Samples),
        if others.is_empty() { String::new() } else { format!(", or select the other kinds ({})", others.join(", ")) }
    ))
}

/// The key of a profile's kind, from its event.
fn kind_key(event: &str) -> &'static str {
    match event {
        "alloc" => "alloc",
        "live" => "live",
        "wall" => "wall",
        "lock" => "lock",
        _ => "cpu",
    }
}

/// Adds `from`'s samples to `into` (the same kind).
fn merge_into(into: &mut Profile, from: &Profile) {
    let ids: Vec<u32> = from.frames().iter().map(|f| into.intern(f.clone())).collect();
    for s in from.samples() {
        into.add(s.stack.iter().map(|&f| ids[f as usize]).collect(), s.samples, s.total);
    }
    into.meta.duration_ns = into.meta.duration_ns.saturating_add(from.meta.duration_ns);
}

/// The profile without its thread-state frames (pprof's `state` labels,
/// collapsed stacks recorded with the agent's `state` option): they show
/// only with `--show-state`, as for JFR input.
fn without_state_frames(p: &Profile) -> Profile {
    if !p.frames().iter().any(|f| f.kind == FrameKind::State) {
        return p.clone();
    }
    let mut out = Profile::new(p.meta.clone());
    out.safepoints = p.safepoints.clone();
    let map: Vec<Option<u32>> = p.frames().iter().map(|f| (f.kind != FrameKind::State).then(|| out.intern(f.clone()))).collect();
    for s in p.samples() {
        out.add(s.stack.iter().filter_map(|&f| map[f as usize]).collect(), s.samples, s.total);
    }
    out
}

/// A time for --from/--to: a duration from the start (from the end when
/// negative), `HH:MM:SS[.fff]` (UTC, on the recording's first day) or
/// `YYYY-MM-DDTHH:MM:SS[.fff][Z]` (UTC).
pub fn parse_time(s: &str, start_ns: i64, end_ns: i64) -> Result<i64, String> {
    let s = s.trim();
    if s.contains(':') {
        let (date, time) = match s.split_once(['T', ' ']) {
            Some((d, t)) => (Some(d), t.trim_end_matches('Z')),
            None => (None, s.trim_end_matches('Z')),
        };
        let bad = || not_a_time(s);
        let mut hms = time.split(':');
        let h: i64 = hms.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
        let m: i64 = hms.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
        let sec: f64 = hms.next().map_or(Some(0.0), |v| v.parse().ok()).ok_or_else(bad)?;
        // A time of day: 00:00:00 to 23:59:59.999.
        if hms.next().is_some() || !(0..24).contains(&h) || !(0..60).contains(&m) || !(0.0..60.0).contains(&sec) {
            return Err(format!("'{s}' is not a time of day (00:00:00 to 23:59:59, UTC); {}", not_a_time(s)));
        }
        let day_ns = 86_400_000_000_000i64;
        let day_start = match date {
            Some(d) => {
                let mut p = d.split('-').map(|v| v.parse::<i64>().ok());
                let (Some(Some(y)), Some(Some(mo)), Some(Some(da)), None) = (p.next(), p.next(), p.next(), p.next()) else { return Err(bad()) };
                if !(1..=12).contains(&mo) || !(1..=31).contains(&da) {
                    return Err(format!("'{s}' is not a date and time: the month is 01 to 12, the day 01 to 31"));
                }
                days_from_civil(y, mo, da) * day_ns
            }
            None => start_ns.div_euclid(day_ns) * day_ns,
        };
        return Ok(day_start + (h * 3600 + m * 60) * 1_000_000_000 + (sec * 1e9) as i64);
    }
    // A zero duration (`0`, `0s`, `-0s`): the recording's start or end
    // (the duration parser takes only positive ones).
    let zero = |t: &str| {
        let num = t.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        num.parse::<f64>().is_ok_and(|v| v == 0.0) && ["", "ms", "s", "m", "min", "h"].contains(&&t[num.len()..])
    };
    if let Some(rest) = s.strip_prefix('-') {
        if zero(rest) {
            return Ok(end_ns);
        }
        let d = oxprof_profile::units::parse_wall_duration_ns(rest).map_err(|_| not_a_time(s))?;
        return Ok(end_ns - d as i64);
    }
    if zero(s) {
        return Ok(start_ns);
    }
    let d = oxprof_profile::units::parse_wall_duration_ns(s).map_err(|_| not_a_time(s))?;
    Ok(start_ns + d as i64)
}

/// The error for a --from/--to value that is none of the forms accepted.
fn not_a_time(s: &str) -> String {
    format!(
        "'{s}' is not a time; use a duration from the recording's start (10s, 1.5m, 500ms), from its end when negative (-30s), \
         or a UTC time (12:04:05, 2024-05-01T12:04:05Z)"
    )
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Refuses to write `output` (`-o` as given, or a side file written
/// beside it) when it is one of the `inputs` (the same file: device and
/// inode, so a hard link or another spelling is seen too): writing it
/// would destroy what was to be read.
pub fn not_an_input(given: &Path, output: &Path, inputs: &[&Path]) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    if output == Path::new("-") {
        return Ok(());
    }
    let Ok(out) = std::fs::metadata(output) else { return Ok(()) };
    for input in inputs {
        if std::fs::metadata(input).is_ok_and(|m| m.dev() == out.dev() && m.ino() == out.ino()) {
            return Err(if given == output {
                format!("-o {}: that is the input file {}; writing it would destroy the input: choose another output file", given.display(), input.display())
            } else {
                format!(
                    "-o {}: the side file {} written beside it is the input file {}; writing it would destroy the input: choose another output name",
                    given.display(),
                    output.display(),
                    input.display()
                )
            });
        }
    }
    Ok(())
}

/// `dir/name.ext` → `dir/name.KEY.ext` (`.pb.gz` kept whole), for the
/// second and later profiles of a one-profile-per-file format.
pub fn sibling(path: &Path, key: &str) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    for ext in [".pb.gz", ".collapsed", ".folded", ".txt", ".pprof", ".pb", ".html"] {
        if let Some(stem) = name.strip_suffix(ext) {
            return path.with_file_name(format!("{stem}.{key}{ext}"));
        }
    }
    path.with_file_name(format!("{name}.{key}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        let start = 1_700_000_000_000_000_000i64; // 2023-11-14T22:13:20Z
        let end = start + 60_000_000_000;
        assert_eq!(parse_time("10s", start, end), Ok(start + 10_000_000_000));
        assert_eq!(parse_time("-5s", start, end), Ok(end - 5_000_000_000));
        assert_eq!(parse_time("0", start, end), Ok(start));
        assert_eq!(parse_time("0s", start, end), Ok(start));
        assert_eq!(parse_time("0.0ms", start, end), Ok(start));
        assert_eq!(parse_time("-0s", start, end), Ok(end));
        assert!(parse_time("0x", start, end).is_err());
        assert_eq!(parse_time("22:13:30", start, end), Ok(start + 10_000_000_000));
        assert_eq!(parse_time("2023-11-14T22:13:21Z", start, end), Ok(start + 1_000_000_000));
        assert!(parse_time("soon", start, end).is_err());
        assert!(parse_time("12:xx", start, end).is_err());
        for bad in ["25:00:00", "23:60:00", "23:59:60", "-1:00:00", "2023-13-01T00:00:00Z", "2023-11-32T00:00:00Z"] {
            assert!(parse_time(bad, start, end).is_err(), "{bad} taken");
        }
        assert!(parse_time("25:00:00", start, end).unwrap_err().contains("not a time of day"));
        assert!(parse_time("23:59:59.5", start, end).is_ok());
    }

    #[test]
    fn siblings() {
        assert_eq!(sibling(Path::new("d/p.pb.gz"), "alloc"), PathBuf::from("d/p.alloc.pb.gz"));
        assert_eq!(sibling(Path::new("p.collapsed"), "live"), PathBuf::from("p.live.collapsed"));
    }
}
