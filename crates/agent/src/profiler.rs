//! The recording lifecycle: start (choose an engine, arm the signal handler,
//! start timers), stop (disarm and wait for handlers), and dump (turn the
//! sample store into a [`Profile`] with resolved names).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use jvmti_sys::asgct::{ticks, AsyncGetCallTraceFn, BCI_NATIVE_FRAME};
use jvmti_sys::{jmethodID, JavaVM};
use oxprof_profile::{Frame, FrameKind, Meta, Profile};

use crate::heap::alloc::{AllocSampler, AllocStats, MARK_ALLOC_CLASS};
use crate::engine::{self, itimer, Engine};
use crate::jvmti::{Jni, Jvmti};
use crate::log;
use crate::native::dwarf as native_dwarf;
use crate::native::symbols as native_symbols;
use crate::native::unwind as native_unwind;
use crate::options::{CStack, Config, Event};
pub use crate::output::Built;
use crate::sampling::signal::{self, SignalContext, MARK_NON_JAVA_THREAD, MARK_NO_JAVA_FRAME, MARK_TRUNCATED};
use crate::sampling::store::{JavaFrameType, RawFrame, SampleStore, StoredTrace};
use crate::symbols::Symbols;
use crate::sampling::threads::Threads;

/// Distinct stacks the store can hold, and frames in all of them.
const STORE_SLOTS: usize = 1 << 18;
const STORE_FRAMES: usize = 1 << 23;

/// Bumped at every start and stop; the status thread runs while it sees its own.
static STATUS_GENERATION: AtomicU64 = AtomicU64::new(0);

/// The CPU part of a recording.
pub struct CpuRun {
    pub event: Event,
    pub engine: Engine,
    /// Why perf_events was not used, when `cpu` fell back to ctimer.
    pub fallback: Option<String>,
}

/// Whether a CPU recording collects kernel frames: perf_events records
/// them beside the native stack, unless native stacks are off.
fn collects_kernel_stacks(engine: Engine, cstack: CStack) -> bool {
    engine == Engine::Perf && cstack != CStack::No
}

/// A recording in progress.
pub struct Recording {
    pub config: Config,
    pub cpu: Option<CpuRun>,
    /// Allocation sampling runs (mean interval in bytes).
    pub alloc: Option<u64>,
    pub started: Instant,
    pub start_wall_ns: u64,
}

/// Counts gathered while building a profile.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub samples: u64,
    pub java_samples: u64,
    pub failed: u64,
    pub dropped: u64,
    /// Samples that carry native or kernel frames.
    pub native_samples: u64,
    pub failed_by_reason: BTreeMap<&'static str, u64>,
}

impl Summary {
    /// Failed walks as a share of the Java threads' samples, in percent.
    pub fn failed_pct(&self) -> f64 {
        if self.java_samples == 0 {
            0.0
        } else {
            100.0 * self.failed as f64 / self.java_samples as f64
        }
    }
}

pub struct Profiler {
    recording: Mutex<Option<Recording>>,
    store: OnceLock<&'static SampleStore>,
    pub threads: Arc<Threads>,
    pub alloc: AllocSampler,
}

/// Reads a stored CPU stack (leaf first): the frames above its marker (its
/// native and kernel frames, and the Java frames of a walk that stopped
/// short), and the marker code naming why the Java part is missing or
/// partial. A JVM-internal thread (JIT compiler, service threads) has no
/// Java frame: AsyncGetCallTrace reports that as unknown_not_Java (the own
/// walk as no Java frame), but it is neither a failed walk nor a Java
/// thread's sample, so it reads as [`MARK_NON_JAVA_THREAD`]. A stack
/// without a marker is returned whole with `None`. Every output (profile,
/// JFR) reads stacks through this one function.
pub fn split_cpu_stack<'a>(frames: &'a [RawFrame], tid: u32, threads: &Threads) -> (&'a [RawFrame], Option<i32>) {
    let (above, marker) = match frames.split_last() {
        Some((last, above)) if last.is_marker() => (above, last.bci),
        _ => return (frames, None),
    };
    let marker = match marker {
        ticks::UNKNOWN_NOT_JAVA | MARK_NO_JAVA_FRAME if above.iter().all(RawFrame::is_native) && !threads.is_java_visible(tid) => MARK_NON_JAVA_THREAD,
        m => m,
    };
    (above, Some(marker))
}

/// The synthetic frame name for an AsyncGetCallTrace error code.
pub fn failure_name(code: i32) -> &'static str {
    match code {
        ticks::NO_CLASS_LOAD => "[no_class_load]",
        ticks::GC_ACTIVE => "[gc_active]",
        ticks::UNKNOWN_NOT_JAVA => "[unknown_not_Java]",
        ticks::NOT_WALKABLE_NOT_JAVA => "[not_walkable_not_Java]",
        ticks::UNKNOWN_JAVA => "[unknown_Java]",
        ticks::NOT_WALKABLE_JAVA => "[not_walkable_Java]",
        ticks::UNKNOWN_STATE => "[unknown_state]",
        ticks::THREAD_EXIT => "[thread_exit]",
        ticks::DEOPT => "[deopt]",
        ticks::SAFEPOINT => "[safepoint]",
        MARK_TRUNCATED => "[truncated]",
        _ => "[unknown_error]",
    }
}

/// A thread name without its instance number: `GC Thread#3` → `GC Thread`,
/// `C2 CompilerThre` (kernel-truncated) → `C2 CompilerThread`.
pub fn thread_category(name: &str) -> String {
    if name.starts_with("C1 CompilerThre") || name.starts_with("C2 CompilerThre") {
        return format!("{}CompilerThread", &name[..3]);
    }
    let trimmed = name.trim_end_matches(|c: char| c.is_ascii_digit()).trim_end_matches(['#', '-', ' ']);
    if trimmed.is_empty() { name.to_string() } else { trimmed.to_string() }
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

impl Profiler {
    pub fn new() -> Profiler {
        Profiler { recording: Mutex::new(None), store: OnceLock::new(), threads: Arc::new(Threads::default()), alloc: AllocSampler::default() }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Recording>> {
        self.recording.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn store(&self) -> Result<&'static SampleStore, String> {
        if let Some(s) = self.store.get() {
            return Ok(s);
        }
        let s = SampleStore::new(STORE_SLOTS, STORE_FRAMES).ok_or("cannot map memory for the sample store")?;
        Ok(*self.store.get_or_init(|| Box::leak(Box::new(s))))
    }

    /// Runs `f` with the current recording (if any) while holding it.
    pub fn with_recording<T>(&self, f: impl FnOnce(Option<&Recording>) -> T) -> T {
        let rec = self.lock();
        f(rec.as_ref())
    }

    /// Starts a recording. Returns one line per part started, for the log.
    pub fn start(&'static self, mut config: Config, vm: *mut JavaVM, asgct: Option<AsyncGetCallTraceFn>, env: (Jvmti, Jni), can_tag: bool) -> Result<Vec<String>, String> {
        let mut rec = self.lock();
        if rec.is_some() {
            return Err("profiling is already running; stop it first".into());
        }
        if let (Some(_), false, Some(last)) = (config.alloc, config.alloc_interval_given, self.alloc.last_interval()) {
            config.alloc = Some(last);
        }
        let mut lines = Vec::new();
        let cpu = match config.cpu {
            Some(event) => {
                let (run, line) = self.start_cpu(event, &config, vm, asgct)?;
                lines.push(line);
                Some(run)
            }
            None => None,
        };
        if let Some(interval) = config.alloc {
            match self.alloc.start(env, interval, config.jstackdepth, config.threads, config.alloc_threads.as_deref(), can_tag) {
                Ok(line) => {
                    lines.push(line);
                    if config.live.enabled {
                        match crate::heap::live_report::start(&self.alloc.live, vm, env, interval, &config.live) {
                            Ok(line) => lines.push(line),
                            Err(e) => {
                                self.alloc.stop(env.0, env.1);
                                if let Some(run) = &cpu {
                                    self.stop_cpu(run);
                                }
                                return Err(e);
                            }
                        }
                    }
                }
                Err(e) => {
                    if let Some(run) = &cpu {
                        self.stop_cpu(run);
                    }
                    return Err(e);
                }
            }
        }
        if cpu.as_ref().is_some_and(|run| collects_kernel_stacks(run.engine, config.cstack)) {
            // Started only now that nothing can fail, so the table is
            // dropped by this recording's last dump (see `write_recording`).
            let registry = self.threads.clone();
            native_symbols::prefetch_kernel_table(move || registry.exclude(crate::sampling::threads::current_tid()));
        }
        if let Some(path) = config.status.clone() {
            self.publish_status(path);
        }
        *rec = Some(Recording { alloc: config.alloc, config, cpu, started: Instant::now(), start_wall_ns: now_ns() });
        Ok(lines)
    }

    fn start_cpu(&self, event: Event, config: &Config, vm: *mut JavaVM, asgct: Option<AsyncGetCallTraceFn>) -> Result<(CpuRun, String), String> {
        let asgct = asgct.ok_or("this JVM does not export AsyncGetCallTrace; CPU profiling needs HotSpot (JDK 11 or later)")?;
        let store = self.store()?;
        store.reset(); // no handler is armed: safe
        let (engine, fallback) = engine::choose(event, config.interval_ns);
        if let Some(why) = &fallback {
            log::warn(&format!("{why}; falling back to the ctimer engine"));
        }
        if engine == Engine::Perf && engine::perf::delivery() == engine::perf::Delivery::Trap {
            if let Err(e) = signal::install_trap() {
                log::warn(&format!("cannot install the SIGTRAP handler ({e}); perf_events will signal with SIGPROF"));
                engine::perf::set_delivery(engine::perf::Delivery::Prof);
            }
        }
        // SIGPROF is taken only when needed: JDK 25's JFR refuses to sample
        // CPU time (jdk.CPUTimeSample) while another SIGPROF handler is in place.
        if engine != Engine::Perf || engine::perf::delivery() == engine::perf::Delivery::Prof {
            signal::install().map_err(|e| format!("cannot install the SIGPROF handler: {e}"))?;
        }
        if signal::read_noop_switch() {
            log::warn("OXPROF_SIGNAL_NOOP=1: the signal handler returns at once and records nothing (a benchmark of the engine's own cost)");
        }
        let mut ctx = SignalContext::new(store, asgct, vm, config.jstackdepth, config.interval_ns, config.threads);
        let kernel_stacks = collects_kernel_stacks(engine, config.cstack);
        if !native_unwind::init() && config.cstack != CStack::No {
            log::warn("no safe memory probe (pipe, process_vm_readv): native stacks keep only the interrupted function");
        }
        if config.cstack == CStack::Dwarf {
            let objects = native_dwarf::refresh();
            log::debug(&format!("DWARF unwind tables of {objects} objects loaded"));
            let threads = self.threads.clone();
            if let Err(e) = native_dwarf::start_watcher(move || threads.exclude(crate::sampling::threads::current_tid())) {
                log::warn(&format!("no thread to follow library loads for cstack=dwarf: {e}"));
            }
        }
        ctx.set_cstack(config.cstack, kernel_stacks);
        engine::perf::set_kernel_stacks(kernel_stacks);
        signal::arm(ctx);
        let started = if engine.per_thread() {
            self.threads.start(engine, config.interval_ns).map(|n| format!("{n} threads"))
        } else {
            itimer::start(config.interval_ns).map(|()| "process-wide".to_string())
        };
        let threads = match started {
            Ok(t) => t,
            Err(e) => {
                self.threads.stop();
                drop(signal::disarm());
                return Err(format!("cannot start the {} engine: {e}", engine.short()));
            }
        };
        let line = format!(
            "started {} profiling: engine {} ({}), interval {}, {}",
            event.name(),
            engine.describe(),
            engine.signal_name(),
            fmt_interval(config.interval_ns),
            threads
        );
        Ok((CpuRun { event, engine, fallback }, line))
    }

    fn stop_cpu(&self, run: &CpuRun) {
        native_dwarf::stop_watcher();
        if run.engine.per_thread() {
            self.threads.stop();
        } else {
            itimer::stop();
        }
        drop(signal::disarm());
    }

    /// Rewrites `path` with `samples=N elapsed_ms=M` every 250 ms while this
    /// recording runs, for `oxprof record`'s live status line (each time a
    /// new file under a random name, renamed over `path`).
    fn publish_status(&'static self, path: std::path::PathBuf) {
        let generation = STATUS_GENERATION.fetch_add(1, Ordering::SeqCst) + 1;
        let started = Instant::now();
        let spawned = std::thread::Builder::new().name("oxprof-status".into()).spawn(move || {
            while STATUS_GENERATION.load(Ordering::SeqCst) == generation {
                let line = format!("samples={} elapsed_ms={}\n", self.recorded(), started.elapsed().as_millis());
                if crate::output::files::replace(&path, line.as_bytes()).is_err() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(250));
            }
        });
        if let Err(e) = spawned {
            log::debug(&format!("no status thread: {e}"));
        }
    }

    /// Stops sampling; the samples stay in the stores for [`Profiler::build`].
    /// Allocation sampling needs a JNI environment to stop; without one (VM
    /// unload) only CPU sampling is stopped.
    pub fn stop(&self, env: Option<(Jvmti, Jni)>) -> Option<Recording> {
        let rec = self.lock().take()?;
        STATUS_GENERATION.fetch_add(1, Ordering::SeqCst);
        if let Some(run) = &rec.cpu {
            self.stop_cpu(run);
        }
        if let Some((jvmti, jni)) = env {
            self.alloc.stop(jvmti, jni);
        }
        self.alloc.live.stop();
        Some(rec)
    }

    /// The jmethodIDs present in the sample store.
    pub fn sampled_methods(&self) -> std::collections::HashSet<usize> {
        let mut methods: std::collections::HashSet<usize> = std::collections::HashSet::new();
        for store in [self.store.get().copied(), self.alloc.stored()].into_iter().flatten() {
            methods.extend(store.snapshot().iter().flat_map(|t| t.frames.iter().map(|f| f.method)));
        }
        // Live sites keep the names of their methods while their objects live.
        self.alloc.live.methods(&mut methods);
        methods.remove(&0);
        methods
    }

    /// Samples recorded so far, CPU and allocation (for status lines).
    pub fn recorded(&self) -> u64 {
        let cpu = self.store.get().map(|s| s.stats().recorded).unwrap_or(0);
        cpu + self.alloc.stored().map(|s| s.stats().recorded).unwrap_or(0)
    }

    /// Builds the profiles of a (stopped or running) recording: CPU first.
    pub fn build(&self, rec: &Recording, symbols: &Symbols, jvmti: Jvmti, jni: Jni) -> Vec<Built> {
        let mut out = Vec::new();
        if let Some(run) = &rec.cpu {
            let started = Instant::now();
            let (profile, s) = self.build_cpu(rec, run, symbols, jvmti, jni);
            log::debug(&format!("CPU profile built in {:.1} ms", started.elapsed().as_secs_f64() * 1e3));
            let summary_line = format!(
                "summary: samples={} java_samples={} failed={} failed_pct={:.2} dropped={} engine={} native_samples={} native_ns={} handler_ns={}",
                s.samples,
                s.java_samples,
                s.failed,
                s.failed_pct(),
                s.dropped,
                run.engine.short(),
                s.native_samples,
                native_unwind::mean_ns().unwrap_or(0),
                crate::sampling::signal::handler_mean_ns().unwrap_or(0)
            );
            out.push(Built { label: "CPU".into(), key: "cpu", profile, summary_line, leak: None });
        }
        if let Some(interval) = rec.alloc {
            let (profile, st) = self.build_alloc(rec, interval, symbols, jvmti, jni);
            let mut summary_line = format!(
                "alloc summary: samples={} estimated_bytes={} dropped={} interval={interval} callback_ns={} callback_median_ns={} own_walks={} jvmti_walks={}",
                st.samples, st.estimated_bytes, st.dropped, st.callback_ns, st.callback_median_ns, st.own_walks, st.jvmti_walks
            );
            if st.checked > 0 {
                summary_line.push_str(&format!(" walk_checked={} walk_mismatched={}", st.checked, st.mismatched));
            }
            out.push(Built { label: "Allocations".into(), key: "alloc", profile, summary_line, leak: None });
        }
        out
    }

    pub(crate) fn meta(rec: &Recording, title: &str, event: &str, engine: &str, interval: u64, unit: &str) -> Meta {
        Meta {
            title: rec.config.title.clone().unwrap_or_else(|| title.to_string()),
            event: event.to_string(),
            engine: engine.to_string(),
            interval,
            total_unit: unit.to_string(),
            start_ns: rec.start_wall_ns,
            duration_ns: rec.started.elapsed().as_nanos() as u64,
            extra: Vec::new(),
        }
    }

    fn build_alloc(&self, rec: &Recording, interval: u64, symbols: &Symbols, jvmti: Jvmti, jni: Jni) -> (Profile, AllocStats) {
        let Some(store) = self.alloc.stored() else { return (Profile::default(), AllocStats::default()) };
        let mut profile = Profile::new(Self::meta(rec, "Allocation profile", "alloc", "JVMTI SampledObjectAlloc (JEP 331)", interval, "bytes"));
        let mut ids = Vec::new();
        let mut memo = FrameMemo::default();
        let (own_walks, jvmti_walks, checked, mismatched) = self.alloc.walk_counts();
        let mut st = AllocStats { dropped: store.stats().dropped, callback_ns: self.alloc.callback_ns_mean(), callback_median_ns: self.alloc.callback_ns_median(), own_walks, jvmti_walks, checked, mismatched, ..AllocStats::default() };
        for t in store.snapshot() {
            st.samples += t.samples;
            st.estimated_bytes += t.total;
            ids.clear();
            if rec.config.threads && t.tid != 0 {
                ids.push(profile.intern(self.thread_root(t.tid)));
            }
            let (class, stack) = match t.frames.split_first() {
                Some((c, rest)) if c.bci == MARK_ALLOC_CLASS => (Some(c.method), rest),
                _ => (None, &t.frames[..]),
            };
            for f in stack.iter().rev() {
                ids.push(memo.id(&mut profile, f, || self.frame(f, symbols, jvmti, jni)));
            }
            if let Some(id) = class {
                let class_frame = RawFrame { bci: MARK_ALLOC_CLASS, method: id };
                ids.push(memo.id(&mut profile, &class_frame, || Frame::new(self.alloc.class_name(id), FrameKind::Alloc)));
            }
            profile.add(ids.clone(), t.samples, t.total);
        }
        let m = &mut profile.meta;
        m.extra.push(("samples".into(), st.samples.to_string()));
        m.extra.push(("mean interval".into(), format!("{interval} bytes")));
        m.extra.push(("dropped".into(), st.dropped.to_string()));
        (profile, st)
    }

    fn thread_root(&self, tid: u32) -> Frame {
        let name = self.threads.name(tid).unwrap_or_else(|| "thread".into());
        Frame::new(format!("[{name} tid={tid}]"), FrameKind::Thread)
    }

    /// # Safety
    /// As [`Symbols::resolve`]'s `method`.
    unsafe fn java_frame(&self, method: usize, native: bool, symbols: &Symbols, jvmti: Jvmti, jni: Jni) -> Frame {
        // SAFETY: as this function's contract.
        let name = unsafe { symbols.resolve(jvmti, jni, method as jmethodID) };
        Frame::new(name.frame_name(), if native { FrameKind::Native } else { FrameKind::Java })
    }

    /// Turns one stored frame into a model frame (see [`RawFrame`]'s encoding).
    pub(crate) fn frame(&self, f: &RawFrame, symbols: &Symbols, jvmti: Jvmti, jni: Jni) -> Frame {
        match f.bci {
            RawFrame::NATIVE_PC => native_symbols::resolver().frame(f.method, false),
            RawFrame::KERNEL_PC => native_symbols::resolver().frame(f.method, true),
            // SAFETY: a stored Java frame's `method` is a jmethodID the
            // sampler recorded; Symbols keeps the names of those whose class
            // may unload, so the JVM is asked only about the others.
            BCI_NATIVE_FRAME => unsafe { self.java_frame(f.method, true, symbols, jvmti, jni) },
            _ => {
                // SAFETY: as above.
                let mut frame = unsafe { self.java_frame(f.method, false, symbols, jvmti, jni) };
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

    fn build_cpu(&self, rec: &Recording, run: &CpuRun, symbols: &Symbols, jvmti: Jvmti, jni: Jni) -> (Profile, Summary) {
        let Some(store) = self.store.get() else { return (Profile::default(), Summary::default()) };
        let traces = store.snapshot();
        native_symbols::resolver().refresh();
        let mut summary = Summary { dropped: store.stats().dropped, ..Summary::default() };
        let config = &rec.config;
        let mut profile = Profile::new(Self::meta(rec, "CPU profile", run.event.name(), run.engine.describe(), config.interval_ns, "ns"));
        let mut ids = Vec::new();
        let mut memo = FrameMemo::default();
        for t in &traces {
            summary.samples += t.samples;
            ids.clear();
            self.trace_frames(t, config.threads, (symbols, jvmti, jni), (&mut profile, &mut memo), &mut ids, &mut summary);
            profile.add(ids.clone(), t.samples, t.total);
        }
        native_symbols::resolver().clear();
        let m = &mut profile.meta;
        m.extra.push(("samples".into(), summary.samples.to_string()));
        m.extra.push(("failed walks".into(), format!("{} ({:.2}% of Java samples)", summary.failed, summary.failed_pct())));
        for (reason, n) in &summary.failed_by_reason {
            m.extra.push((format!("failed {reason}"), n.to_string()));
        }
        m.extra.push(("dropped".into(), summary.dropped.to_string()));
        let cost = native_unwind::mean_ns()
            .map(|ns| format!(", {ns} ns and {:.2} memory probes per sample to collect", native_unwind::probes_per_100_samples() as f64 / 100.0))
            .unwrap_or_default();
        m.extra.push(("native stacks".into(), format!("cstack={}, {} samples with native frames{cost}", config.cstack.name(), summary.native_samples)));
        if let Some(why) = &run.fallback {
            m.extra.push(("engine fallback".into(), why.clone()));
        }
        (profile, summary)
    }

    /// Appends the frame ids of one stored CPU trace to `out` (root first).
    fn trace_frames(&self, t: &StoredTrace, per_thread: bool, env: (&Symbols, Jvmti, Jni), into: (&mut Profile, &mut FrameMemo), out: &mut Vec<u32>, summary: &mut Summary) {
        let (symbols, jvmti, jni) = env;
        let (profile, memo) = into;
        let (above, marker) = split_cpu_stack(&t.frames, t.tid, &self.threads);
        if t.frames.first().is_some_and(RawFrame::is_native) {
            summary.native_samples += t.samples;
        }
        let mut push_raw = |profile: &mut Profile, out: &mut Vec<u32>, f: &RawFrame| out.push(memo.id(profile, f, || self.frame(f, symbols, jvmti, jni)));
        match marker {
            Some(code @ (MARK_NO_JAVA_FRAME | MARK_NON_JAVA_THREAD)) => {
                if code == MARK_NO_JAVA_FRAME {
                    summary.java_samples += t.samples;
                }
                if per_thread {
                    out.push(profile.intern(self.thread_root(t.tid)));
                } else {
                    let name = self.threads.name(t.tid).unwrap_or_else(|| "thread".into());
                    out.push(profile.intern(Frame::new(format!("[{}]", thread_category(&name)), FrameKind::Native)));
                }
                above.iter().rev().for_each(|f| push_raw(profile, out, f));
            }
            Some(code) => {
                summary.java_samples += t.samples;
                summary.failed += t.samples;
                *summary.failed_by_reason.entry(failure_name(code)).or_default() += t.samples;
                if per_thread && t.tid != 0 {
                    out.push(profile.intern(self.thread_root(t.tid)));
                }
                out.push(profile.intern(Frame::new(failure_name(code), FrameKind::Error)));
                // The Java frames of a partial walk, then native frames.
                above.iter().rev().for_each(|f| push_raw(profile, out, f));
            }
            None => {
                summary.java_samples += t.samples;
                if per_thread && t.tid != 0 {
                    out.push(profile.intern(self.thread_root(t.tid)));
                }
                t.frames.iter().rev().for_each(|f| push_raw(profile, out, f));
            }
        }
    }
}

/// Stored frames already turned into profile frames during one build: a
/// deep profile repeats the same few thousand frames hundreds of thousands
/// of times, and naming one means a symbol lookup and a new string.
#[derive(Default)]
struct FrameMemo(HashMap<RawFrame, u32>);

impl FrameMemo {
    fn id(&mut self, profile: &mut Profile, f: &RawFrame, make: impl FnOnce() -> Frame) -> u32 {
        *self.0.entry(*f).or_insert_with(|| profile.intern(make()))
    }
}

impl Default for Profiler {
    fn default() -> Self {
        Profiler::new()
    }
}

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

    #[test]
    fn thread_categories() {
        assert_eq!(thread_category("GC Thread#3"), "GC Thread");
        assert_eq!(thread_category("C2 CompilerThre"), "C2 CompilerThread");
        assert_eq!(thread_category("G1 Conc#0"), "G1 Conc");
        assert_eq!(thread_category("VM Thread"), "VM Thread");
        assert_eq!(thread_category("pool-1-thread-12"), "pool-1-thread");
        assert_eq!(thread_category("42"), "42");
    }

    /// A stored CPU stack is read back as the frames above its marker and
    /// the marker's code, whatever stands above it; a Java frame without a
    /// `jmethodID` is not a marker.
    #[test]
    fn cpu_stacks_split_at_their_marker() {
        let threads = Threads::default();
        threads.mark_java_visible(7);
        let native = RawFrame::native_pc(0x1000);
        let (a, b) = (RawFrame::java(0x10, 4, JavaFrameType::Compiled), RawFrame::java(0x20, 9, JavaFrameType::Interpreted));
        let whole = [native, a, b];
        assert_eq!(split_cpu_stack(&whole, 7, &threads), (&whole[..], None));
        // The own walk stopped short: its Java frames stay above the marker.
        let partial = [native, a, RawFrame::marker(ticks::UNKNOWN_JAVA)];
        assert_eq!(split_cpu_stack(&partial, 7, &threads), (&partial[..2], Some(ticks::UNKNOWN_JAVA)));
        let failed = [RawFrame::marker(ticks::GC_ACTIVE)];
        assert_eq!(split_cpu_stack(&failed, 7, &threads), (&failed[..0], Some(ticks::GC_ACTIVE)));
        // No Java frame: a JVM-internal thread, unless it is a Java thread.
        let internal = [native, RawFrame::marker(ticks::UNKNOWN_NOT_JAVA)];
        assert_eq!(split_cpu_stack(&internal, 8, &threads), (&internal[..1], Some(MARK_NON_JAVA_THREAD)));
        assert_eq!(split_cpu_stack(&internal, 7, &threads), (&internal[..1], Some(ticks::UNKNOWN_NOT_JAVA)));
        // A native Java method without a jmethodID at the root (its bci is
        // -3, which is also unknown_not_Java's code) is a frame, not a marker.
        let unnamed = [a, RawFrame { bci: BCI_NATIVE_FRAME, method: 0 }];
        assert_eq!(split_cpu_stack(&unnamed, 7, &threads), (&unnamed[..], None));
    }

    #[test]
    fn intervals() {
        assert_eq!(fmt_interval(10_000_000), "10ms");
        assert_eq!(fmt_interval(250_000), "250us");
        assert_eq!(fmt_interval(2_000_000_000), "2s");
        assert_eq!(fmt_interval(1234), "1234ns");
    }
}
