//! The one shape every event source has. A source (CPU samples in
//! `sampling::cpu`, allocations and live objects in `heap::sources`; wall
//! clock, locks and safepoints next) is started from the recording's options
//! by a [`Starter`], records into stores of its own, is stopped, and builds
//! its profile, whose [`Meta`] says what it records and how a sample is
//! weighed (event, engine, interval, unit of its totals). The lifecycle in
//! `profiler.rs` runs the starters in order and the started sources as
//! trait objects, without knowing what they are; a new event is a new module
//! with a starter added to [`crate::profiler::STARTERS`].
//!
//! Also here, for every source's build: the recording the sources belong to,
//! and turning stored frames into named profile frames, with the names kept
//! from one interval to the next under `loop=` (`FrameNames`: checked
//! against unloaded classes and remapped code, aged and capped).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use jvmti_sys::asgct::{AsyncGetCallTraceFn, BCI_NATIVE_FRAME};
use jvmti_sys::{jmethodID, JavaVM};
use oxprof_profile::{Frame, FrameKind, Meta, Profile};

use crate::heap::alloc::AllocSampler;
use crate::hotspot::vmstructs::VmStructs;
use crate::jvmti::{Jni, Jvmti};
use crate::locks::sampler::LockSampler;
use crate::native::symbols as native_symbols;
use crate::options::Config;
use crate::output::Built;
use crate::sampling::store::{JavaFrameType, RawFrame};
use crate::sampling::threads::Threads;
use crate::symbols::Symbols;

/// What a starter gets: the recording's options and the JVM's handles.
pub struct StartContext<'a> {
    pub config: &'a Config,
    /// The process's JavaVM (valid for the process's life).
    pub vm: *mut JavaVM,
    pub asgct: Option<AsyncGetCallTraceFn>,
    /// The starting thread's environments.
    pub env: (Jvmti, Jni),
    /// Whether objects may be tagged.
    pub can_tag: bool,
    /// The sampled threads.
    pub threads: &'a Arc<Threads>,
    /// The allocation sampler the JVMTI callbacks feed.
    pub alloc: &'static AllocSampler,
    /// The lock sampler the monitor events and the park hook feed.
    pub locks: &'static LockSampler,
    /// HotSpot's structure table, when this JVM's may be used.
    pub vm_structs: Option<&'a VmStructs>,
}

/// A started source and one line for the log; `None` when the options do
/// not ask for it.
pub type Started = Option<(Box<dyn EventSource>, String)>;

/// Starts one kind of event source if the options ask for it.
pub type Starter = fn(&StartContext) -> Result<Started, String>;

/// What a build gets: the recording, the command that asked for it, and
/// what names frames.
pub struct BuildContext<'a> {
    pub rec: &'a Recording,
    /// The `dump`/`stop` command's options (the start options at JVM exit).
    pub command: &'a Config,
    pub symbols: &'a Symbols,
    pub jvmti: Jvmti,
    pub jni: Jni,
    pub threads: &'a Threads,
    pub vm_structs: Option<&'a VmStructs>,
    /// Continuous profiling (`loop=`): this build ends the current interval,
    /// so the next one counts from what it read (see `sampling::interval`).
    pub close_interval: bool,
}

/// A started event source.
pub trait EventSource: Send {
    /// Short name, used in the file names of extra outputs and summaries:
    /// "cpu", "alloc", "live".
    fn key(&self) -> &'static str;
    /// Its part of the status line, e.g. "cpu (perf_events, interval 10ms)".
    fn status(&self) -> String;
    /// Its settings for a JFR recording: (event type id, name, value).
    fn jfr_settings(&self) -> Vec<(u64, &'static str, String)> {
        Vec::new()
    }
    /// Called once every source of the recording has started (nothing can
    /// fail any more).
    fn all_started(&self) {}
    /// Stops sampling; what was recorded stays for [`EventSource::build`].
    /// Without a JNI environment (the VM is unloading) only what needs none
    /// is stopped.
    fn stop(&mut self, env: Option<(Jvmti, Jni)>);
    /// Builds its profile from what it recorded (also while it runs).
    fn build(&self, cx: &BuildContext) -> Built;
}

/// A recording in progress: its options, when it started, its sources.
pub struct Recording {
    pub config: Config,
    pub started: Instant,
    pub start_wall_ns: u64,
    pub sources: Vec<Box<dyn EventSource>>,
    /// The triggers that choose when CPU samples are kept (`begin=`,
    /// `end=`, `ttsp`), armed before the sources started.
    pub gate: Option<Arc<crate::trigger::gate::Gate>>,
    /// When the current interval began (`loop=`; the recording's start
    /// until the first interval ends): wall-clock ns and the same instant.
    pub interval_start: std::sync::Mutex<(u64, Instant)>,
    /// When the profiles being built end (taken when a dump, stop or
    /// interval's end began, so that one interval's end is the next one's
    /// start); `None`: now.
    pub cut_at: std::sync::Mutex<Option<Instant>>,
}

impl Recording {
    /// When the current interval began (the recording's start without `loop=`).
    pub fn interval_start(&self) -> (u64, Instant) {
        *self.interval_start.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current interval ends now; the next begins.
    pub fn next_interval(&self, wall_ns: u64, at: Instant) {
        *self.interval_start.lock().unwrap_or_else(|e| e.into_inner()) = (wall_ns, at);
    }

    /// The profiles built next end at `at` (`None`: when built).
    pub fn set_cut(&self, at: Option<Instant>) {
        *self.cut_at.lock().unwrap_or_else(|e| e.into_inner()) = at;
    }

    /// The running source with this key.
    pub fn source(&self, key: &str) -> Option<&dyn EventSource> {
        self.sources.iter().find(|s| s.key() == key).map(|s| &**s)
    }

    /// A profile's metadata: what it shows and how its samples are weighed.
    pub fn meta(&self, title: &str, event: &str, engine: &str, interval: u64, unit: &str) -> Meta {
        Meta {
            title: self.config.title.clone().unwrap_or_else(|| title.to_string()),
            event: event.to_string(),
            engine: engine.to_string(),
            interval,
            total_unit: unit.to_string(),
            start_ns: self.interval_start().0,
            duration_ns: {
                let end = self.cut_at.lock().unwrap_or_else(|e| e.into_inner()).unwrap_or_else(Instant::now);
                end.saturating_duration_since(self.interval_start().1).as_nanos() as u64
            },
            extra: Vec::new(),
        }
    }
}

impl BuildContext<'_> {
    /// Whether CPU and wall stacks get state frames in this build: when
    /// option `state` asks, and always when the profile is written as
    /// pprof or OTLP, where they become the samples' `state` label or
    /// attribute rather than frames. The format is that of the file this
    /// build is for: the `dump`/`stop` command's own output when it names
    /// one, else the recording's.
    pub fn with_state(&self) -> bool {
        let own_output = self.command.file.is_some() || self.command.format.is_some();
        let written = if own_output { self.command } else { &self.rec.config };
        self.rec.config.state || matches!(written.output_format(), oxprof_profile::OutputFormat::Pprof | oxprof_profile::OutputFormat::Otlp)
    }

    /// The root frame of a thread (option `threads`).
    pub fn thread_root(&self, tid: u32) -> Frame {
        let name = self.threads.name(tid).unwrap_or_else(|| "thread".into());
        Frame::new(format!("[{name} tid={tid}]"), FrameKind::Thread)
    }

    /// Appends the root frames of a stored sample's context-label set
    /// (`labels.rs`; none for 0), outermost first: every source's stacks
    /// start with them.
    pub fn label_roots(&self, profile: &mut Profile, labels: u32, out: &mut Vec<u32>) {
        if labels != crate::labels::NONE {
            out.extend(crate::labels::frames(labels).into_iter().map(|f| profile.intern(f)));
        }
    }

    /// # Safety
    /// As [`Symbols::resolve`]'s `method`.
    unsafe fn java_frame(&self, method: usize, native: bool) -> Frame {
        // SAFETY: as this function's contract.
        let name = unsafe { self.symbols.resolve(self.jvmti, self.jni, method as jmethodID) };
        Frame::new(name.frame_name(), if native { FrameKind::Native } else { FrameKind::Java })
    }

    /// Turns one stored frame into a model frame (see [`RawFrame`]'s encoding).
    pub fn frame(&self, f: &RawFrame) -> Frame {
        match f.bci {
            RawFrame::NATIVE_PC => native_symbols::resolver().frame(f.method, false),
            RawFrame::KERNEL_PC => native_symbols::resolver().frame(f.method, true),
            // SAFETY: a stored Java frame's `method` is a jmethodID the
            // sampler recorded; Symbols keeps the names of those whose class
            // may unload, so the JVM is asked only about the others.
            BCI_NATIVE_FRAME => unsafe { self.java_frame(f.method, true) },
            _ => {
                // SAFETY: as above.
                let mut frame = unsafe { self.java_frame(f.method, false) };
                frame.kind = match f.java_type() {
                    JavaFrameType::Unknown => FrameKind::Java,
                    JavaFrameType::Interpreted => FrameKind::Interpreted,
                    JavaFrameType::Compiled => FrameKind::Jit,
                    JavaFrameType::Inlined => FrameKind::Inlined,
                };
                frame
            }
        }
    }
}

/// A fast hash for keys the agent makes itself (stored frames, thread
/// ids): a multiply per word and murmur3's finaliser. Not for keys read
/// from outside (no protection against chosen collisions).
#[derive(Default, Clone, Copy)]
pub struct WordHasher(u64);

impl std::hash::Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..b.len()].copy_from_slice(b);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_i32(&mut self, n: i32) {
        self.write_u64(n as u32 as u64);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// A map keyed by what the agent made itself, hashed with [`WordHasher`].
pub type WordMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<WordHasher>>;

/// Stored frames named at most this many at once between builds (a cached
/// name costs ~150 bytes: ~5 MB at the cap). javac, the busiest workload
/// measured, names ~1,400 distinct frames per 10 s interval.
pub const FRAME_NAMES_KEPT: usize = 32_768;
/// Intervals a kept name survives without its frame being seen.
pub const FRAME_NAMES_AGE: u64 = 30;

/// A stored frame's name, kept from one build to the next.
struct Named {
    frame: Frame,
    /// For a native frame: which mapping named it ([`native_symbols::NativeSymbols::mapping_id`]).
    mapping: u64,
    /// The interval it was last seen in (see [`FrameNames::intervals`]).
    seen: u64,
    /// The build that last interned it, and its id in that build's profile.
    stamp: u64,
    local: u32,
}

/// Names of stored frames (Java methods, native and kernel code), kept
/// between the builds of continuous profiling (`loop=`): every interval
/// meets mostly the frames of the one before, and naming one means a
/// lookup in [`Symbols`] or the native symbol tables and a new string.
/// Without `loop=` it is emptied after each build, as a build's own memo
/// would be. What keeps it right and bounded:
/// - a Java frame's name stays only while [`Symbols`] still has it: when
///   it forgets the names of unloaded classes ([`Symbols::prune`]), their
///   frames are forgotten here at the next build;
/// - a native frame's name stays while the mapping that held its address
///   is the same (start, offset, file): a library unloaded or another
///   mapped in its place names it again;
/// - a name not seen for [`FRAME_NAMES_AGE`] intervals goes, and past
///   [`FRAME_NAMES_KEPT`] names the oldest go.
struct FrameNames {
    by_raw: WordMap<RawFrame, Named>,
    /// Builds so far (each stamps the names it interns).
    builds: u64,
    /// Intervals that ended while names were kept.
    intervals: u64,
    /// The interval start the last closing build belonged to.
    interval_start: u64,
    /// Whether names are kept between builds.
    keep: bool,
    /// Native maps and pruned Java names last checked against.
    maps_seen: u64,
    prunes_seen: u64,
}

static FRAME_NAMES: std::sync::Mutex<FrameNames> = std::sync::Mutex::new(FrameNames::new());

fn frame_names() -> std::sync::MutexGuard<'static, FrameNames> {
    FRAME_NAMES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Continuous profiling keeps frame names between builds (`on`), or no
/// longer does (the names are forgotten).
pub fn keep_frame_names(on: bool) {
    let mut names = frame_names();
    names.keep = on;
    if !on {
        names.by_raw = WordMap::default();
    }
}

/// (names kept, intervals counted): for tests and the debug log.
pub fn frame_names_stats() -> (usize, u64) {
    let names = frame_names();
    (names.by_raw.len(), names.intervals)
}

impl FrameNames {
    const fn new() -> FrameNames {
        FrameNames {
            by_raw: HashMap::with_hasher(std::hash::BuildHasherDefault::new()),
            builds: 0,
            intervals: 0,
            interval_start: 0,
            keep: false,
            maps_seen: 0,
            prunes_seen: 0,
        }
    }

    /// Forgets what is no longer right: Java frames whose names [`Symbols`]
    /// dropped, native frames whose mapping changed.
    fn check(&mut self, cx: &BuildContext) {
        let maps = native_symbols::maps_generation();
        let prunes = cx.symbols.prunes();
        if maps == self.maps_seen && prunes == self.prunes_seen {
            return;
        }
        let check_maps = maps != self.maps_seen;
        let check_java = prunes != self.prunes_seen;
        let resolver = native_symbols::resolver();
        let (mut java, mut native) = (0usize, 0usize);
        self.by_raw.retain(|f, n| {
            let keep = match f.bci {
                RawFrame::NATIVE_PC => !check_maps || resolver.mapping_id(f.method) == n.mapping,
                RawFrame::KERNEL_PC => true,
                _ => !check_java || cx.symbols.has_name(f.method),
            };
            if !keep {
                *(if f.bci == RawFrame::NATIVE_PC { &mut native } else { &mut java }) += 1;
            }
            keep
        });
        drop(resolver);
        if java + native > 0 {
            crate::log::debug(&format!("kept frame names: forgot {java} of unloaded classes, {native} of remapped native code"));
        }
        self.maps_seen = maps;
        self.prunes_seen = prunes;
    }

    /// A new interval began: ages the names, and keeps at most
    /// [`FRAME_NAMES_KEPT`] (the most recently seen).
    fn next_interval(&mut self) {
        self.intervals += 1;
        let now = self.intervals;
        self.by_raw.retain(|_, n| now - n.seen <= FRAME_NAMES_AGE);
        if self.by_raw.len() > FRAME_NAMES_KEPT {
            let mut seen: Vec<u64> = self.by_raw.values().map(|n| n.seen).collect();
            let cut = seen.len() - FRAME_NAMES_KEPT * 3 / 4;
            let (_, &mut oldest_kept, _) = seen.select_nth_unstable(cut);
            self.by_raw.retain(|_, n| n.seen > oldest_kept);
        }
        if self.by_raw.capacity() > 4 * self.by_raw.len().max(1024) {
            self.by_raw.shrink_to_fit();
        }
    }
}

/// The stored frame standing for every frame [`BuildContext::frame`] names
/// alike: a Java frame's name and kind do not depend on its bytecode index,
/// only on its method and frame type.
fn name_key(f: &RawFrame) -> RawFrame {
    match f.bci {
        RawFrame::NATIVE_PC | RawFrame::KERNEL_PC | BCI_NATIVE_FRAME => *f,
        _ => RawFrame::java(f.method, 0, f.java_type()),
    }
}

/// Stored frames turned into profile frames during one build: a deep
/// profile repeats the same few thousand frames hundreds of thousands of
/// times. Names come from [`FrameNames`] (kept between builds under
/// `loop=`); frames named otherwise ([`FrameMemo::id_with`]), thread roots
/// and state frames are remembered for this build only.
pub struct FrameMemo {
    names: Names,
    stamp: u64,
    other: WordMap<RawFrame, u32>,
    threads: WordMap<(u32, bool), u32>,
    states: Vec<(oxprof_profile::state::ThreadState, u32)>,
}

impl FrameMemo {
    /// The memo of one build. Holds the kept names until dropped.
    pub fn new(cx: &BuildContext) -> FrameMemo {
        let mut names = frame_names();
        names.builds += 1;
        let stamp = names.builds;
        if names.keep {
            names.check(cx);
            let start = cx.rec.interval_start().0;
            if cx.close_interval && start != names.interval_start {
                names.interval_start = start;
                names.next_interval();
            }
        }
        FrameMemo { names: Names::Kept(names), stamp, other: WordMap::default(), threads: WordMap::default(), states: Vec::new() }
    }

    /// A memo that names every frame afresh, as before names were kept
    /// (for [`check_kept_names`]).
    pub fn fresh() -> FrameMemo {
        let names = Box::new(FrameNames { builds: 1, ..FrameNames::new() });
        FrameMemo { names: Names::Own(names), stamp: 1, other: WordMap::default(), threads: WordMap::default(), states: Vec::new() }
    }

    fn named<'m>(names: &'m mut FrameNames, cx: &BuildContext, f: &RawFrame) -> &'m mut Named {
        let now = names.intervals;
        let n = names.by_raw.entry(name_key(f)).or_insert_with(|| {
            let frame = cx.frame(f);
            // After naming, which may have reread the mappings.
            let mapping = if f.bci == RawFrame::NATIVE_PC { native_symbols::resolver().mapping_id(f.method) } else { 0 };
            Named { frame, mapping, seen: now, stamp: 0, local: 0 }
        });
        n.seen = now;
        n
    }

    /// The profile id of a stored frame named by [`BuildContext::frame`].
    pub fn id(&mut self, profile: &mut Profile, cx: &BuildContext, f: &RawFrame) -> u32 {
        let stamp = self.stamp;
        let n = Self::named(&mut self.names, cx, f);
        if n.stamp != stamp {
            n.stamp = stamp;
            n.local = profile.intern(n.frame.clone());
        }
        n.local
    }

    /// The name [`BuildContext::frame`] gives a stored frame.
    pub fn name(&mut self, cx: &BuildContext, f: &RawFrame) -> &str {
        &Self::named(&mut self.names, cx, f).frame.name
    }

    /// The profile id of a frame named by `make` (remembered for this build).
    pub fn id_with(&mut self, profile: &mut Profile, f: &RawFrame, make: impl FnOnce() -> Frame) -> u32 {
        *self.other.entry(*f).or_insert_with(|| profile.intern(make()))
    }

    /// The profile id of a thread's root frame ([`BuildContext::thread_root`]
    /// with `own`, else `make`'s frame for the thread).
    pub fn thread(&mut self, profile: &mut Profile, tid: u32, own: bool, make: impl FnOnce() -> Frame) -> u32 {
        *self.threads.entry((tid, own)).or_insert_with(|| profile.intern(make()))
    }

    /// The profile id of a thread state's frame.
    pub fn state(&mut self, profile: &mut Profile, state: oxprof_profile::state::ThreadState) -> u32 {
        if let Some(&(_, id)) = self.states.iter().find(|(s, _)| *s == state) {
            return id;
        }
        let id = profile.intern(state.frame());
        self.states.push((state, id));
        id
    }
}

/// The names a memo uses: the kept ones (locked while it builds), or its own.
enum Names {
    Kept(std::sync::MutexGuard<'static, FrameNames>),
    Own(Box<FrameNames>),
}

impl std::ops::Deref for Names {
    type Target = FrameNames;
    fn deref(&self) -> &FrameNames {
        match self {
            Names::Kept(g) => g,
            Names::Own(b) => b,
        }
    }
}

impl std::ops::DerefMut for Names {
    fn deref_mut(&mut self) -> &mut FrameNames {
        match self {
            Names::Kept(g) => g,
            Names::Own(b) => b,
        }
    }
}

/// Whether every interval's profile is also built with fresh names and
/// compared with the one built from kept names (`OXPROF_CHECK_KEPT_NAMES=1`,
/// for the tests: it doubles the cost of a build).
pub fn checks_kept_names() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("OXPROF_CHECK_KEPT_NAMES").is_ok_and(|v| v == "1"))
}

/// Compares a profile built with kept names with one built from the same
/// samples with fresh names, and logs the outcome: `kept names check
/// (KEY): same, ...` or an error naming the first difference.
pub fn check_kept_names(key: &str, kept: &Profile, fresh: &Profile) {
    let difference = if kept.frames() != fresh.frames() {
        let i = kept.frames().iter().zip(fresh.frames()).position(|(a, b)| a != b).unwrap_or(kept.frames().len().min(fresh.frames().len()));
        Some(format!(
            "frame {i}: kept {:?}, fresh {:?} ({} and {} frames)",
            kept.frames().get(i),
            fresh.frames().get(i),
            kept.frames().len(),
            fresh.frames().len()
        ))
    } else if kept.samples() != fresh.samples() {
        let i = kept.samples().iter().zip(fresh.samples()).position(|(a, b)| a != b).unwrap_or(kept.samples().len().min(fresh.samples().len()));
        Some(format!("stack {i}: kept {:?}, fresh {:?}", kept.samples().get(i), fresh.samples().get(i)))
    } else if kept.meta != fresh.meta {
        Some(format!("metadata: kept {:?}, fresh {:?}", kept.meta, fresh.meta))
    } else {
        None
    };
    let (names, intervals) = frame_names_stats();
    match difference {
        None => crate::log::debug(&format!(
            "kept names check ({key}): same, {} stacks, {} frames; {names} names kept after {intervals} intervals",
            kept.samples().len(),
            kept.frames().len()
        )),
        Some(d) => crate::log::error(&format!("kept names check ({key}): the profiles differ at {d}")),
    }
}

impl Drop for FrameMemo {
    fn drop(&mut self) {
        if !self.names.keep {
            self.names.by_raw = WordMap::default();
        }
    }
}

/// `1 sample`, `85 samples`: a source's count in a status line.
pub fn fmt_samples(n: u64) -> String {
    if n == 1 {
        "1 sample".into()
    } else {
        format!("{n} samples")
    }
}

/// An interval for people: `10ms`, `250us`, `2s`, `1234ns`.
pub fn fmt_interval(ns: u64) -> String {
    if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1000) {
        format!("{}us", ns / 1000)
    } else {
        format!("{ns}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(seen: u64) -> Named {
        Named { frame: Frame::new("A.f", FrameKind::Jit), mapping: 0, seen, stamp: 0, local: 0 }
    }

    /// Kept names age out after FRAME_NAMES_AGE intervals unseen, and no
    /// more than FRAME_NAMES_KEPT stay: the most recently seen.
    #[test]
    fn kept_names_age_and_are_capped() {
        let mut n = FrameNames::new();
        // The interval that begins is 101: a name last seen in 71 (30
        // intervals before) stays, one seen in 70 goes.
        n.intervals = 100;
        n.by_raw.insert(RawFrame::native_pc(1), named(101 - FRAME_NAMES_AGE));
        n.by_raw.insert(RawFrame::native_pc(2), named(100 - FRAME_NAMES_AGE));
        n.next_interval();
        assert!(n.by_raw.contains_key(&RawFrame::native_pc(1)) && !n.by_raw.contains_key(&RawFrame::native_pc(2)));
        let mut n = FrameNames::new();
        n.intervals = 10;
        for i in 0..FRAME_NAMES_KEPT + 100 {
            // Seen in intervals 1..=10, the last 100 in interval 10.
            let seen = if i >= FRAME_NAMES_KEPT { 10 } else { 1 + (i as u64 % 9) };
            n.by_raw.insert(RawFrame::native_pc(i), named(seen));
        }
        n.next_interval();
        assert!(n.by_raw.len() <= FRAME_NAMES_KEPT && n.by_raw.len() >= FRAME_NAMES_KEPT / 2, "{}", n.by_raw.len());
        assert!((FRAME_NAMES_KEPT..FRAME_NAMES_KEPT + 100).all(|i| n.by_raw.contains_key(&RawFrame::native_pc(i))), "the latest stay");
        let oldest_left = n.by_raw.values().map(|v| v.seen).min().unwrap();
        assert!(n.by_raw.values().all(|v| v.seen >= oldest_left) && oldest_left > 1);
    }

    /// Java frames differing only in bytecode index share a name; frame
    /// types, native methods and native code do not.
    #[test]
    fn name_keys() {
        let a = RawFrame::java(0x10, 4, JavaFrameType::Compiled);
        assert_eq!(name_key(&a), name_key(&RawFrame::java(0x10, 9, JavaFrameType::Compiled)));
        assert_ne!(name_key(&a), name_key(&RawFrame::java(0x10, 4, JavaFrameType::Inlined)));
        assert_eq!(name_key(&RawFrame { bci: -1, method: 0x10 }), name_key(&RawFrame::java(0x10, 0, JavaFrameType::Unknown)));
        let native_method = RawFrame { bci: BCI_NATIVE_FRAME, method: 0x10 };
        assert_eq!(name_key(&native_method), native_method);
        assert_eq!(name_key(&RawFrame::native_pc(0x10)), RawFrame::native_pc(0x10));
        assert_ne!(name_key(&RawFrame::kernel_pc(0x10)), name_key(&RawFrame::native_pc(0x10)));
    }

    #[test]
    fn intervals() {
        assert_eq!(fmt_interval(10_000_000), "10ms");
        assert_eq!(fmt_interval(250_000), "250us");
        assert_eq!(fmt_interval(2_000_000_000), "2s");
        assert_eq!(fmt_interval(1234), "1234ns");
    }
}
