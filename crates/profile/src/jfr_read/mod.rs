//! Reading JFR recordings, as written by the JDK (11 to 25) or by oxprof,
//! into a [`Recording`]: CPU samples (`jdk.ExecutionSample`, with their
//! thread state), wall-clock samples (oxprof's: `oxprof.WallClockSample`,
//! or `jdk.ExecutionSample` and `jdk.NativeMethodSample` of a recording
//! whose `jdk.ExecutionSample` setting `event` is `wall`), the JDK's own
//! `jdk.NativeMethodSample` kept apart, allocation samples
//! (`jdk.ObjectAllocationSample`, or on JDK 11
//! `jdk.ObjectAllocationInNewTLAB`/`OutsideTLAB`), live-object samples
//! (`jdk.OldObjectSample`), lock waits (`jdk.JavaMonitorEnter`,
//! `jdk.ThreadPark`; parks without a blocker kept apart), oxprof's leak-report sites
//! (`oxprof.LiveSite`, rebuilt into [`crate::leak::Site`]s), spans
//! (`oxprof.Span`), safepoints (`jdk.SafepointBegin`,
//! `jdk.SafepointStateSynchronization`, `jdk.SafepointEnd` and
//! `jdk.ExecuteVMOperation`, joined by `safepointId`, with the CPU samples
//! taken while threads were being stopped counted) and the sampling
//! periods, with interned threads, classes, frames and stacks. Turning a
//! recording into profiles is [`crate::convert`]'s job.
//!
//! The format is read generically from each chunk's own metadata, so new
//! fields in later JDKs are skipped rather than misread. Files are read one
//! chunk at a time; a truncated or corrupt chunk ends reading with a
//! warning and keeps every whole chunk before it. (The `jfrs` crate was
//! evaluated and read these JDKs' files correctly, but aborts the process
//! on a corrupt chunk size and decodes every event of every type; this
//! reader bounds every allocation by the bytes present.)

mod bytes;
mod chunk;
mod metadata;

pub(crate) use crate::hash::FastMap;

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

pub use chunk::{java_class_name, MAGIC, TRUNCATED_MARKER};

use crate::model::FrameKind;
use crate::safepoint::{self, Safepoint};
use crate::state::ThreadState;

/// The JDK's default `jdk.NativeMethodSample` period, assumed when the
/// recording does not say.
pub const DEFAULT_NATIVE_PERIOD_NS: u64 = 20_000_000;

/// The JDK's default `jdk.ExecutionSample` period, assumed when the
/// recording does not say.
pub const DEFAULT_CPU_PERIOD_NS: u64 = 20_000_000;

/// The events of async-profiler whose `interval` is in nanoseconds (the
/// others count hardware events or calls).
const TIME_BASED_EVENTS: [&str; 6] = ["cpu", "itimer", "ctimer", "wall", "cpu-clock", "task-clock"];

/// A frame of a recording: method name (`pkg.Class.method`), kind, line.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct JfrFrame {
    pub name: String,
    pub kind: FrameKind,
    pub line: u32,
}

/// A CPU sample: time (ns since the epoch), thread and stack ids, the
/// thread's state (the JDK always writes running) and the CPU time it
/// stands for.
#[derive(Clone, Copy, Debug)]
pub struct CpuSample {
    pub time: i64,
    pub thread: u32,
    pub stack: u32,
    pub state: ThreadState,
    /// Its context labels: an index into [`Recording::label_sets`] (0: none).
    pub labels: u32,
    /// The sampling period in force when it was taken (see
    /// [`Recording::cpu_periods`]), [`DEFAULT_CPU_PERIOD_NS`] when the
    /// recording does not say.
    pub weight_ns: u64,
}

/// A wall-clock sample: a thread sampled whatever it was doing, standing
/// for `weight_ns` of its wall time.
#[derive(Clone, Copy, Debug)]
pub struct WallSample {
    pub time: i64,
    pub thread: u32,
    pub stack: u32,
    pub state: ThreadState,
    pub weight_ns: u64,
    /// Its context labels (see [`CpuSample::labels`]).
    pub labels: u32,
}

/// An allocation sample: the allocated class and the bytes it stands for.
#[derive(Clone, Copy, Debug)]
pub struct AllocSample {
    pub time: i64,
    pub thread: u32,
    pub stack: u32,
    pub class: u32,
    pub bytes: u64,
    /// Its context labels (see [`CpuSample::labels`]).
    pub labels: u32,
}

/// A wait for a lock (`jdk.JavaMonitorEnter`, `jdk.ThreadPark`): the class
/// waited on and how long (for oxprof's sampled events, the waiting time
/// the event stands for).
#[derive(Clone, Copy, Debug)]
pub struct LockSample {
    pub time: i64,
    pub thread: u32,
    pub stack: u32,
    pub class: u32,
    pub duration_ns: u64,
    /// A park (`jdk.ThreadPark`) rather than a monitor.
    pub park: bool,
    /// Its context labels (see [`CpuSample::labels`]).
    pub labels: u32,
}

/// An interval the application timed (`oxprof.Span`, `OxProfiler.span`).
#[derive(Clone, Debug)]
pub struct SpanEvent {
    /// When it started, ns since the epoch.
    pub time: i64,
    pub duration_ns: u64,
    /// The thread that closed it.
    pub thread: u32,
    pub tag: String,
    /// Its thread's context labels (see [`CpuSample::labels`]).
    pub labels: u32,
}

/// A sampled object still alive when the recording ended.
#[derive(Clone, Copy, Debug)]
pub struct LiveSample {
    /// When the event was written (the end of the recording, usually).
    pub time: i64,
    /// When the object was allocated.
    pub allocated: i64,
    pub thread: u32,
    pub stack: u32,
    pub class: u32,
    /// The object's size, where the JDK records it (0 otherwise).
    pub bytes: u64,
}

/// One site of a leak report, as `oxprof.LiveSite` carries it (see
/// `docs/jfr.md`): the inputs of the site's leak score.
#[derive(Clone, Debug)]
pub struct LiveSiteEvent {
    /// When the report was written; every site of a report has this time.
    pub time: i64,
    pub stack: u32,
    pub class: u32,
    pub live_bytes: f64,
    pub live_objects: f64,
    /// Tracked (sampled) live objects.
    pub samples: u64,
    pub mean_age_ns: u64,
    pub mean_gcs_survived: f64,
    pub old_share: f64,
    /// The growth series as text (`leak::encode_series`).
    pub growth: String,
    /// Steps from a GC root to one instance, one a line.
    pub path_to_root: Option<String>,
    /// The score the agent computed (the report recomputes it from the rest).
    pub score: f64,
}

/// oxprof's `oxprof.LiveReport`: the facts of one leak report (its
/// `sites` empty), written at the same time as its `oxprof.LiveSite`s.
#[derive(Clone, Debug)]
pub struct LiveReportEvent {
    pub time: i64,
    pub report: crate::leak::LeakReport,
}

/// What the safepoint events of one `safepointId` said, until the whole
/// file is read: (start, duration) of `jdk.SafepointBegin` and of
/// `jdk.SafepointStateSynchronization`, the end of `jdk.SafepointEnd`, all
/// in ns since the epoch, and the VM operation run at it.
#[derive(Clone, Debug, Default)]
pub(crate) struct SafepointParts {
    pub begin: Option<(i64, u64)>,
    pub sync: Option<(i64, u64)>,
    pub end: Option<i64>,
    pub operation: Option<String>,
    pub threads: Option<u32>,
}

impl SafepointParts {
    /// The safepoint, when its begin or synchronisation was recorded (the
    /// JDK's thresholds can drop them while keeping the end or the
    /// operation): it starts when the begin event does; its time to
    /// safepoint ends with the synchronisation (else with the begin event,
    /// whose duration then stands for it), its total with the end event.
    fn join(self, id: u64) -> Option<Safepoint> {
        let start = self.begin.or(self.sync)?.0;
        let synced = match (self.sync, self.begin) {
            (Some((at, d)), _) | (None, Some((at, d))) => at.saturating_add(d as i64),
            (None, None) => return None,
        };
        let ns = |to: i64| to.saturating_sub(start).max(0) as u64;
        Some(Safepoint {
            id,
            start_ns: start.max(0) as u64,
            ttsp_ns: ns(synced),
            total_ns: self.end.map(ns),
            operation: self.operation,
            threads: self.threads,
            samples: 0,
        })
    }
}

/// Everything read from a JFR file.
#[derive(Debug)]
pub struct Recording {
    pub frames: Vec<JfrFrame>,
    /// Frame ids, root first.
    pub stacks: Vec<Vec<u32>>,
    pub threads: Vec<String>,
    pub classes: Vec<String>,
    /// Context label sets (oxprof's `labels` field), outermost label
    /// first; set 0 is the empty one (samples without labels).
    pub label_sets: Vec<Vec<(String, String)>>,
    pub cpu: Vec<CpuSample>,
    /// Wall-clock samples (see the module comment for which events).
    pub wall: Vec<WallSample>,
    /// The JDK's `jdk.NativeMethodSample`s: threads found in native code,
    /// each weighing the native sampling period. Not wall-clock samples of
    /// every thread (the JDK samples a few threads in native code per
    /// period), so kept apart; `convert` counts them as wall samples only
    /// when asked (`Options::jdk_native`).
    pub native: Vec<WallSample>,
    pub alloc: Vec<AllocSample>,
    pub lock: Vec<LockSample>,
    /// The JDK's `jdk.ThreadPark`s without a `parkedClass` (a park with no
    /// blocker: a timed sleep, an idle pool thread): no lock contention,
    /// so kept apart from `lock`.
    pub parks: Vec<LockSample>,
    pub live: Vec<LiveSample>,
    /// oxprof's leak-report sites, every report's (see [`Recording::leak_sites`]).
    pub live_sites: Vec<LiveSiteEvent>,
    /// The facts of oxprof's leak reports (`oxprof.LiveReport`), one per
    /// report, in file order.
    pub live_reports: Vec<LiveReportEvent>,
    /// oxprof's spans (`oxprof.Span`), in file order.
    pub spans: Vec<SpanEvent>,
    /// The safepoints, in time order; `samples` counts the CPU samples
    /// taken inside each one's time to safepoint.
    pub safepoints: Vec<Safepoint>,
    /// The period of `jdk.ExecutionSample` most CPU samples were taken
    /// at, when recorded (and the samples are CPU samples).
    pub cpu_period_ns: Option<u64>,
    /// The `jdk.ExecutionSample` periods, each from its time on (ns since
    /// the epoch), in time order: one recording may run at several (the
    /// JDK's continuous recording at 20 ms while an ad-hoc one at 10 ms
    /// runs; each sample weighs the period in force at its time). The
    /// JDK's `period` settings, or async-profiler's `interval` of a
    /// time-based event.
    pub cpu_periods: Vec<(i64, u64)>,
    /// The wall-clock sampling interval, when recorded.
    pub wall_period_ns: Option<u64>,
    /// The `period` setting of `jdk.NativeMethodSample`, when recorded
    /// (the one most native samples were taken at).
    pub native_period_ns: Option<u64>,
    /// The `jdk.NativeMethodSample` periods over time, as [`Recording::cpu_periods`].
    pub native_periods: Vec<(i64, u64)>,
    /// async-profiler's `interval` settings of `jdk.ExecutionSample`, kept
    /// apart until its event is known (nanoseconds for time-based events).
    pub(crate) profiler_intervals: Vec<(i64, u64)>,
    /// async-profiler's event (`jdk.ActiveRecording` setting `event`).
    pub(crate) profiler_event: Option<String>,
    /// oxprof wrote this recording's `jdk.ExecutionSample`s from wall-clock
    /// sampling (setting `event` = `wall`); resolved when reading ends.
    execution_samples_are_wall: bool,
    /// oxprof's allocation-accuracy facts (`jdk.ActiveSetting` of
    /// `jdk.ObjectAllocationSample` named `allocation …`), the latest value
    /// of each: what the agent measured over the whole recording.
    pub alloc_facts: Vec<(String, String)>,
    /// Earliest chunk start and latest chunk end, ns since the epoch.
    pub start_ns: i64,
    pub end_ns: i64,
    pub chunks: usize,
    /// Why reading stopped early or what was skipped, one line each.
    pub warnings: Vec<String>,
    pub skipped_events: u64,
    pub missing_stacks: u64,
    /// Safepoint events by `safepointId`, joined once every chunk is read.
    pub(crate) safepoint_parts: FastMap<u64, SafepointParts>,
    frame_ids: FastMap<JfrFrame, u32>,
    stack_ids: FastMap<Vec<u32>, u32>,
    thread_ids: FastMap<String, u32>,
    class_ids: FastMap<String, u32>,
    label_set_ids: FastMap<Vec<(String, String)>, u32>,
}

impl Default for Recording {
    fn default() -> Recording {
        Recording {
            frames: Vec::new(),
            stacks: Vec::new(),
            threads: Vec::new(),
            classes: Vec::new(),
            label_sets: vec![Vec::new()],
            cpu: Vec::new(),
            wall: Vec::new(),
            native: Vec::new(),
            alloc: Vec::new(),
            lock: Vec::new(),
            parks: Vec::new(),
            live: Vec::new(),
            live_sites: Vec::new(),
            live_reports: Vec::new(),
            spans: Vec::new(),
            safepoints: Vec::new(),
            cpu_period_ns: None,
            cpu_periods: Vec::new(),
            wall_period_ns: None,
            native_period_ns: None,
            native_periods: Vec::new(),
            profiler_intervals: Vec::new(),
            profiler_event: None,
            execution_samples_are_wall: false,
            alloc_facts: Vec::new(),
            start_ns: i64::MAX,
            end_ns: i64::MIN,
            chunks: 0,
            warnings: Vec::new(),
            skipped_events: 0,
            missing_stacks: 0,
            safepoint_parts: FastMap::default(),
            frame_ids: FastMap::default(),
            stack_ids: FastMap::default(),
            thread_ids: FastMap::default(),
            class_ids: FastMap::default(),
            label_set_ids: std::iter::once((Vec::new(), 0)).collect(),
        }
    }
}

fn intern<K: std::hash::Hash + Eq + Clone>(ids: &mut FastMap<K, u32>, items: &mut Vec<K>, key: K) -> u32 {
    if let Some(&id) = ids.get(&key) {
        return id;
    }
    let id = items.len() as u32;
    items.push(key.clone());
    ids.insert(key, id);
    id
}

impl Recording {
    pub(crate) fn intern_frame(&mut self, name: String, kind: FrameKind, line: u32) -> u32 {
        intern(&mut self.frame_ids, &mut self.frames, JfrFrame { name, kind, line })
    }

    pub(crate) fn intern_stack(&mut self, frames: Vec<u32>) -> u32 {
        intern(&mut self.stack_ids, &mut self.stacks, frames)
    }

    pub(crate) fn intern_thread(&mut self, name: &str) -> u32 {
        intern(&mut self.thread_ids, &mut self.threads, name.to_string())
    }

    pub(crate) fn intern_class(&mut self, name: &str) -> u32 {
        intern(&mut self.class_ids, &mut self.classes, name.to_string())
    }

    pub(crate) fn intern_labels(&mut self, labels: Vec<(String, String)>) -> u32 {
        intern(&mut self.label_set_ids, &mut self.label_sets, labels)
    }

    /// The sites of the last leak report written before `to_ns` (the whole
    /// recording without it), rebuilt from `oxprof.LiveSite` events: the
    /// agent writes every site at each report, so the last report is the
    /// state of the heap then (a site missing from it had no live objects
    /// left). Frames are root first with the allocated class last, as
    /// [`crate::leak::Site`] holds them. Empty when the recording has no
    /// such events (the JDK's own recordings, older oxprof files).
    pub fn leak_sites(&self, to_ns: Option<i64>) -> Vec<crate::leak::Site> {
        let Some(last) = self.last_leak_report(to_ns) else { return Vec::new() };
        self.live_sites
            .iter()
            .filter(|s| s.time == last)
            .map(|s| {
                let stack = self.stacks.get(s.stack as usize).map_or(&[][..], Vec::as_slice);
                let mut frames: Vec<crate::model::Frame> = stack
                    .iter()
                    .map(|&f| {
                        let f = &self.frames[f as usize];
                        crate::model::Frame::new(f.name.clone(), f.kind).with_line(f.line)
                    })
                    .collect();
                let class = self.classes.get(s.class as usize).map_or("[unknown class]", String::as_str);
                frames.push(crate::model::Frame::new(class, FrameKind::Alloc));
                crate::leak::Site {
                    frames,
                    live_bytes: s.live_bytes,
                    live_objects: s.live_objects,
                    tracked: s.samples,
                    mean_age_secs: s.mean_age_ns as f64 / 1e9,
                    mean_gcs_survived: s.mean_gcs_survived,
                    old_share: s.old_share,
                    series: crate::leak::parse_series(&s.growth),
                    path_to_root: s.path_to_root.as_ref().map(|p| p.lines().map(str::to_string).collect()),
                }
            })
            .collect()
    }

    /// The last leak report written before `to_ns` (the whole recording
    /// without it): its sites as [`Recording::leak_sites`] rebuilds them,
    /// and its facts (duration, GCs, sampling) from the `oxprof.LiveReport`
    /// of the same time; the flag says whether the recording had them
    /// (files of oxprof before that event carry sites only). `None` without
    /// sites.
    pub fn leak_report(&self, to_ns: Option<i64>) -> Option<(crate::leak::LeakReport, bool)> {
        let last = self.last_leak_report(to_ns)?;
        let sites = self.leak_sites(to_ns);
        let facts = self.live_reports.iter().rev().find(|r| r.time == last);
        let mut report = facts.map(|f| f.report.clone()).unwrap_or_default();
        report.sites = sites;
        Some((report, facts.is_some()))
    }

    /// When the last leak report before `to_ns` was written (its sites'
    /// time), if there is one.
    fn last_leak_report(&self, to_ns: Option<i64>) -> Option<i64> {
        self.live_sites.iter().map(|s| s.time).filter(|&t| to_ns.is_none_or(|to| t < to)).max()
    }

    /// Whether the recording holds no samples of any kind.
    pub fn is_empty(&self) -> bool {
        self.cpu.is_empty() && self.wall.is_empty() && self.native.is_empty() && self.alloc.is_empty() && self.live.is_empty()
    }

    /// Once every chunk is read: in a recording of oxprof's wall-clock
    /// sampling alone, `jdk.ExecutionSample` and `jdk.NativeMethodSample`
    /// are wall samples weighing the period; the JDK's native samples weigh
    /// their period and are in native code.
    fn settle(&mut self) {
        // async-profiler's interval is a time for its time-based events only.
        let timed = self.profiler_event.as_deref().is_none_or(|e| TIME_BASED_EVENTS.contains(&e));
        if timed {
            self.cpu_periods.append(&mut self.profiler_intervals);
        }
        // Settings of one time keep their order in the file: the last wins.
        self.cpu_periods.sort_by_key(|p| p.0);
        self.native_periods.sort_by_key(|p| p.0);
        for s in &mut self.cpu {
            s.weight_ns = period_at(&self.cpu_periods, s.time).unwrap_or(DEFAULT_CPU_PERIOD_NS);
        }
        self.cpu_period_ns = usual(self.cpu.iter().map(|s| s.weight_ns), &self.cpu_periods);
        if self.execution_samples_are_wall {
            let fallback = self.cpu_period_ns.take().or(self.wall_period_ns).unwrap_or(DEFAULT_NATIVE_PERIOD_NS);
            let recorded = !self.cpu_periods.is_empty();
            self.wall_period_ns.get_or_insert(fallback);
            let cpu = std::mem::take(&mut self.cpu);
            let wall = cpu.into_iter().map(|s| WallSample {
                time: s.time,
                thread: s.thread,
                stack: s.stack,
                state: s.state,
                weight_ns: if recorded { s.weight_ns } else { fallback },
                labels: s.labels,
            });
            let native_periods = std::mem::take(&mut self.native_periods);
            let native =
                std::mem::take(&mut self.native).into_iter().map(|s| WallSample { weight_ns: period_at(&native_periods, s.time).unwrap_or(fallback), ..s });
            self.wall.extend(wall.chain(native));
            self.wall.sort_by_key(|s| s.time);
            self.native_periods = native_periods;
        } else {
            // The JDK writes the Java state (runnable); they are threads in native code.
            for s in &mut self.native {
                (s.weight_ns, s.state) = (period_at(&self.native_periods, s.time).unwrap_or(DEFAULT_NATIVE_PERIOD_NS), ThreadState::Native);
            }
        }
        self.native_period_ns = usual(self.native.iter().map(|s| s.weight_ns), &self.native_periods);
        self.safepoints = std::mem::take(&mut self.safepoint_parts).into_iter().filter_map(|(id, parts)| parts.join(id)).collect();
        self.safepoints.sort_by_key(|s| (s.start_ns, s.id));
        safepoint::count_samples(&mut self.safepoints, self.cpu.iter().map(|s| s.time.max(0) as u64));
    }
}

/// The period in force at `time` of a time-ordered list of (from, period):
/// the last set at or before it, else (a sample before any setting) the
/// first.
fn period_at(periods: &[(i64, u64)], time: i64) -> Option<u64> {
    let i = periods.partition_point(|p| p.0 <= time);
    periods.get(i.saturating_sub(1)).map(|p| p.1)
}

/// The period most samples weighed (the earliest of equals), when periods
/// were recorded; the last one set when there are no samples.
fn usual(weights: impl Iterator<Item = u64>, periods: &[(i64, u64)]) -> Option<u64> {
    let last = periods.last()?.1;
    let mut counts: Vec<(u64, usize)> = Vec::new();
    for w in weights {
        match counts.iter_mut().find(|c| c.0 == w) {
            Some(c) => c.1 += 1,
            None => counts.push((w, 1)),
        }
    }
    let best = counts.iter().map(|c| c.1).max();
    Some(counts.iter().find(|c| Some(c.1) == best).map_or(last, |c| c.0))
}

/// Whether the bytes start like a JFR file.
pub fn is_jfr(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// Reads a JFR file chunk by chunk. `progress(done, total)` is called after
/// each chunk with bytes read so far. Errors only when not even one chunk
/// could be read; later problems become [`Recording::warnings`].
pub fn read_file(path: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<Recording, String> {
    let mut file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let total = file.metadata().map(|m| m.len()).unwrap_or(0);
    read_from(&mut file, total, progress).map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads JFR chunks from a stream of `total` bytes.
pub fn read_from(input: &mut dyn Read, total: u64, progress: &mut dyn FnMut(u64, u64)) -> Result<Recording, String> {
    let mut rec = Recording::default();
    let mut buf: Vec<u8> = Vec::new();
    let mut offset = 0u64;
    loop {
        let mut header = [0u8; chunk::HEADER_SIZE];
        let got = read_full(input, &mut header).map_err(|e| format!("read error: {e}"))?;
        if got == 0 {
            break;
        }
        let n = rec.chunks + 1;
        let stop = |rec: &mut Recording, why: String| -> Result<(), String> {
            if rec.chunks == 0 {
                return Err(why);
            }
            rec.warnings.push(format!("{why}; kept the {} whole chunk(s) before it", rec.chunks));
            Ok(())
        };
        if got < chunk::HEADER_SIZE {
            if offset == 0 && !header[..got].starts_with(MAGIC) && !MAGIC.starts_with(&header[..got.min(4)]) {
                return Err("not a JFR file (no 'FLR' magic)".into());
            }
            stop(&mut rec, format!("chunk {n} is truncated (file ends inside its header at byte {})", offset + got as u64))?;
            break;
        }
        let h = match chunk::Header::parse(&header) {
            Ok(h) => h,
            Err(e) => {
                stop(&mut rec, format!("chunk {n} at byte {offset}: {e}"))?;
                break;
            }
        };
        if total > 0 && h.size > total - offset {
            stop(&mut rec, format!("chunk {n} is truncated: it needs {} bytes, the file ends after {}", h.size, total - offset))?;
            break;
        }
        buf.clear();
        buf.extend_from_slice(&header);
        let body = h.size - chunk::HEADER_SIZE as u64;
        let read = input.take(body).read_to_end(&mut buf).map_err(|e| format!("read error: {e}"))?;
        if (read as u64) < body {
            stop(&mut rec, format!("chunk {n} is truncated: it needs {} bytes, only {} are there", h.size, chunk::HEADER_SIZE + read))?;
            break;
        }
        // A corrupt chunk is reported and skipped: its header told where the next starts.
        let mut scratch = std::mem::take(&mut rec);
        let before = (
            scratch.cpu.len(),
            scratch.alloc.len(),
            scratch.live.len(),
            scratch.wall.len(),
            scratch.native.len(),
            scratch.live_sites.len(),
            scratch.live_reports.len(),
        );
        match chunk::read_chunk(&buf, &mut scratch) {
            Ok(()) => scratch.chunks += 1,
            Err(e) => {
                scratch.cpu.truncate(before.0);
                scratch.alloc.truncate(before.1);
                scratch.live.truncate(before.2);
                scratch.wall.truncate(before.3);
                scratch.native.truncate(before.4);
                scratch.live_sites.truncate(before.5);
                scratch.live_reports.truncate(before.6);
                scratch.warnings.push(format!("skipped chunk {n} at byte {offset}: {e}"));
            }
        }
        rec = scratch;
        offset += h.size;
        progress(offset, total);
    }
    if rec.chunks == 0 {
        return Err(match rec.warnings.first() {
            Some(w) => format!("no readable chunk ({w})"),
            None => "empty file: no JFR chunk in it".into(),
        });
    }
    rec.settle();
    Ok(rec)
}

fn read_full(input: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8]) -> Result<Recording, String> {
        read_from(&mut &bytes[..], bytes.len() as u64, &mut |_, _| {})
    }

    #[test]
    fn bad_inputs_are_one_line_errors() {
        assert_eq!(read(b"").unwrap_err(), "empty file: no JFR chunk in it");
        assert!(read(b"hello world, this is not a recording at all, no no no no no no no no no").unwrap_err().contains("not a JFR file"));
        assert!(read(b"FLR\0\0\x02").unwrap_err().contains("truncated"));
        assert!(read(b"PK").unwrap_err().contains("not a JFR file"));
    }

    /// Two leak reports, each with its facts and one site: the last one
    /// before `--to` is rebuilt with its own facts, and a recording of
    /// sites without facts says so.
    #[test]
    fn leak_reports_come_back_with_their_facts() {
        use crate::jfr::{FrameType, JfrFrame};
        use crate::leak::{LeakReport, Site};
        let frame = JfrFrame { class: "a.B".into(), method: "leak".into(), descriptor: "()V".into(), line: 7, bci: 3, kind: FrameType::Jit };
        let site = |bytes: f64| Site {
            frames: vec![
                crate::model::Frame::new("a.B.leak", crate::model::FrameKind::Jit),
                crate::model::Frame::new("byte[]", crate::model::FrameKind::Alloc),
            ],
            live_bytes: bytes,
            live_objects: bytes / 1024.0,
            tracked: 3,
            ..Site::default()
        };
        let facts = |secs: f64, gcs: u64| LeakReport {
            duration_secs: secs,
            gcs,
            forced_gc: gcs.is_multiple_of(2),
            no_gc_reason: (!gcs.is_multiple_of(2)).then(|| "live_gc=no".to_string()),
            interval: 65536,
            effective_interval: 131072,
            thinnings: 1,
            budget_bytes: 1 << 24,
            used_bytes: 40_000,
            tracked: 3,
            gc_roots_note: Some("not asked for".into()),
            unjudged_bytes: gcs as f64 * 1e6,
            unjudged_tracked: gcs * 10,
            ..LeakReport::default()
        };
        let mut w = crate::jfr::JfrWriter::new(Vec::new());
        w.begin_chunk(0, 1_700_000_000_000_000_000).unwrap();
        w.stack(1, &[frame], false);
        for (ticks, secs, gcs, bytes) in [(1_000, 1.5, 3, 4096.0), (2_000, 2.5, 4, 8192.0)] {
            w.live_report(ticks, 1, &facts(secs, gcs)).unwrap();
            w.live_site(ticks, 1, 1, &site(bytes)).unwrap();
        }
        w.end_chunk(3_000, true).unwrap();
        let rec = read(&w.into_inner()).unwrap();
        let (last, known) = rec.leak_report(None).unwrap();
        assert!(known);
        assert_eq!((last.duration_secs, last.gcs, last.forced_gc, last.no_gc_reason.as_deref()), (2.5, 4, true, None));
        assert_eq!(
            (last.interval, last.effective_interval, last.thinnings, last.budget_bytes, last.used_bytes, last.tracked),
            (65536, 131072, 1, 1 << 24, 40_000, 3)
        );
        assert_eq!(last.gc_roots_note.as_deref(), Some("not asked for"));
        // What the report left out comes back too (F5: it read back as 0).
        assert_eq!((last.unjudged_bytes, last.unjudged_tracked), (4e6, 40));
        assert_eq!(last.sites.len(), 1);
        assert_eq!(last.sites[0].live_bytes, 8192.0);
        let between = rec.live_sites.iter().map(|s| s.time).max().unwrap();
        let (first, _) = rec.leak_report(Some(between)).unwrap();
        assert_eq!((first.duration_secs, first.gcs, first.no_gc_reason.as_deref(), first.sites[0].live_bytes), (1.5, 3, Some("live_gc=no"), 4096.0));
        assert_eq!((first.unjudged_bytes, first.unjudged_tracked), (3e6, 30));
        let mut bare = rec;
        bare.live_reports.clear();
        let (sites_only, known) = bare.leak_report(None).unwrap();
        assert!(!known && sites_only.gcs == 0 && sites_only.sites.len() == 1);
    }

    const T0: i64 = 1_700_000_000_000_000_000;

    fn hot() -> Vec<crate::jfr::JfrFrame> {
        use crate::jfr::{FrameType, JfrFrame};
        let f = |class: &str, method: &str, kind| JfrFrame { class: class.into(), method: method.into(), descriptor: "()V".into(), line: 1, bci: 0, kind };
        vec![f("Hot", "spin", FrameType::Jit), f("Main", "main", FrameType::Interpreted)]
    }

    /// CPU totals of a recording's CPU profile, and its samples.
    fn cpu_of(rec: &Recording) -> (u64, u64, crate::model::Meta) {
        let ps = crate::convert::profiles(rec, &crate::convert::Options { cpu: true, ..Default::default() });
        let p = &ps.iter().find(|(k, _)| *k == "cpu").expect("a CPU profile").1;
        (p.sum(crate::model::Counter::Samples), p.sum(crate::model::Counter::Total), p.meta.clone())
    }

    /// Tester's finding: async-profiler records its sampling interval as
    /// the setting `interval` of `jdk.ExecutionSample` (bare nanoseconds);
    /// only `period` was read, so its CPU samples weighed the JDK default
    /// of 20 ms, twice its 10 ms. A non-time event's interval (`cycles`)
    /// is no time.
    #[test]
    fn async_profiler_interval_weighs_cpu_samples() {
        use crate::jfr::metadata::id::ACTIVE_RECORDING;
        use crate::jfr::writer::event_type::EXECUTION_SAMPLE;
        let recording = |event: &str, interval: &str| {
            let mut w = crate::jfr::JfrWriter::new(Vec::new());
            w.begin_chunk(0, T0).unwrap();
            w.thread(1, "main", Some("main"));
            w.stack(1, &hot(), false);
            w.setting(0, 1, ACTIVE_RECORDING, "event", event).unwrap();
            w.setting(0, 1, EXECUTION_SAMPLE, "enabled", "true").unwrap();
            w.setting(0, 1, EXECUTION_SAMPLE, "interval", interval).unwrap();
            for t in 1..=4 {
                w.execution_sample(t * 10_000_000, 1, 1, crate::jfr::ThreadState::Running, 0).unwrap();
            }
            w.end_chunk(50_000_000, true).unwrap();
            read(&w.into_inner()).unwrap()
        };
        let rec = recording("cpu", "10000000");
        assert_eq!(rec.cpu_period_ns, Some(10_000_000));
        let (samples, total, meta) = cpu_of(&rec);
        assert_eq!((samples, total, meta.interval), (4, 40_000_000, 10_000_000));
        // 0: async-profiler's default, 10 ms; itimer is time too.
        assert_eq!(cpu_of(&recording("itimer", "0")).1, 40_000_000);
        assert_eq!(cpu_of(&recording("itimer", "5000000")).1, 20_000_000);
        // Cycles: no period known; the JDK default, said so.
        let (_, total, meta) = cpu_of(&recording("cycles", "1000000"));
        assert_eq!(total, 80_000_000);
        assert!(meta.extra.iter().any(|(k, _)| k == "period"), "{:?}", meta.extra);
    }

    /// Tester's finding: one recording at two periods (the JDK's continuous
    /// recording at 20 ms, an ad-hoc `settings=profile` one at 10 ms for a
    /// while) weighed every sample by the last setting read. Each sample
    /// weighs the period in force at its time: settings apply from their
    /// time, whatever their place in the file, across chunks.
    #[test]
    fn each_sample_weighs_the_period_in_force_at_its_time() {
        use crate::jfr::writer::event_type::{EXECUTION_SAMPLE, NATIVE_METHOD_SAMPLE};
        use crate::jfr::ThreadState::Running;
        const MS: i64 = 1_000_000;
        let mut w = crate::jfr::JfrWriter::new(Vec::new());
        w.begin_chunk(0, T0).unwrap();
        w.thread(1, "main", Some("main"));
        w.stack(1, &hot(), false);
        w.setting(0, 1, EXECUTION_SAMPLE, "period", "20 ms").unwrap();
        w.setting(0, 1, NATIVE_METHOD_SAMPLE, "period", "20 ms").unwrap();
        // Before the 10 ms setting in the file, after it in time.
        w.execution_sample(150 * MS, 1, 1, Running, 0).unwrap();
        w.execution_sample(50 * MS, 1, 1, Running, 0).unwrap();
        w.native_method_sample(150 * MS, 1, 1, Running, 0).unwrap();
        w.setting(100 * MS, 1, EXECUTION_SAMPLE, "period", "10 ms").unwrap();
        w.setting(100 * MS, 1, NATIVE_METHOD_SAMPLE, "period", "10 ms").unwrap();
        w.execution_sample(160 * MS, 1, 1, Running, 0).unwrap();
        w.execution_sample(170 * MS, 1, 1, Running, 0).unwrap();
        w.end_chunk(200 * MS, false).unwrap();
        // Chunk 2: the settings again at its start, then 20 ms from 300 ms.
        w.begin_chunk(200 * MS, T0 + 200 * MS).unwrap();
        w.thread(1, "main", Some("main"));
        w.stack(1, &hot(), false);
        w.setting(200 * MS, 1, EXECUTION_SAMPLE, "period", "10 ms").unwrap();
        w.execution_sample(250 * MS, 1, 1, Running, 0).unwrap();
        w.execution_sample(350 * MS, 1, 1, Running, 0).unwrap();
        w.setting(300 * MS, 1, EXECUTION_SAMPLE, "period", "20 ms").unwrap();
        w.end_chunk(400 * MS, true).unwrap();
        let rec = read(&w.into_inner()).unwrap();
        let mut weights: Vec<(i64, u64)> = rec.cpu.iter().map(|s| ((s.time - T0) / MS, s.weight_ns / MS as u64)).collect();
        weights.sort();
        assert_eq!(weights, [(50, 20), (150, 10), (160, 10), (170, 10), (250, 10), (350, 20)]);
        let (samples, total, meta) = cpu_of(&rec);
        assert_eq!((samples, total), (6, 80 * MS as u64));
        // Most samples were taken at 10 ms; the profile says periods changed.
        assert_eq!(meta.interval, 10 * MS as u64);
        assert!(meta.extra.iter().any(|(k, v)| k == "periods" && v.starts_with("10 ms, 20 ms")), "{:?}", meta.extra);
        // The JDK's native samples too.
        assert_eq!(rec.native.iter().map(|s| s.weight_ns).collect::<Vec<_>>(), [10 * MS as u64]);
    }

    /// Tester's finding: stack traces the JVM cut short (`truncated`, the
    /// JDK's stackdepth=64) were read as whole stacks rooted mid-stack.
    /// They get the agent's marker for a cut stack at the root; a stack
    /// oxprof wrote with its marker keeps one, of the same kind.
    #[test]
    fn truncated_stacks_are_marked_at_the_root() {
        use crate::jfr::{FrameType, JfrFrame, ThreadState::Running};
        let marker = JfrFrame { class: String::new(), method: TRUNCATED_MARKER.into(), descriptor: String::new(), line: -1, bci: -1, kind: FrameType::Native };
        let mut w = crate::jfr::JfrWriter::new(Vec::new());
        w.begin_chunk(0, T0).unwrap();
        w.thread(1, "main", Some("main"));
        w.stack(1, &hot(), true);
        w.stack(2, &hot(), false);
        let marked: Vec<JfrFrame> = hot().into_iter().chain([marker]).collect();
        w.stack(3, &marked, true);
        w.stack(4, &marked, false);
        for stack in 1..=4 {
            w.execution_sample(stack as i64, 1, stack, Running, 0).unwrap();
        }
        w.end_chunk(10, true).unwrap();
        let rec = read(&w.into_inner()).unwrap();
        let stacks: Vec<String> = rec
            .cpu
            .iter()
            .map(|s| {
                rec.stacks[s.stack as usize]
                    .iter()
                    .map(|&f| format!("{}:{:?}", rec.frames[f as usize].name, rec.frames[f as usize].kind))
                    .collect::<Vec<_>>()
                    .join(";")
            })
            .collect();
        let cut = "[truncated]:Error;Main.main:Interpreted;Hot.spin:Jit";
        assert_eq!(stacks, [cut, "Main.main:Interpreted;Hot.spin:Jit", cut, cut]);
    }

    /// Review finding (jfr_read): a second chunk whose header claims nearly
    /// 2^64 bytes overflowed the offset arithmetic (a panic with overflow
    /// checks); it is a truncated chunk.
    #[test]
    fn a_chunk_size_near_the_limit_is_a_truncated_chunk() {
        let mut w = crate::jfr::JfrWriter::new(Vec::new());
        w.begin_chunk(0, 1_700_000_000_000_000_000).unwrap();
        w.end_chunk(1_000, true).unwrap();
        let mut bytes = w.into_inner();
        let mut header = bytes[..chunk::HEADER_SIZE].to_vec();
        header[8..16].copy_from_slice(&(-16i64).to_be_bytes());
        bytes.extend(header);
        let rec = read(&bytes).unwrap();
        assert_eq!(rec.chunks, 1);
        assert!(rec.warnings[0].starts_with("chunk 2 is truncated"), "{:?}", rec.warnings);
    }
}
