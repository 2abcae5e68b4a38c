//! The CPU event source: choosing an engine, arming the signal handler and
//! starting each thread's timer, stopping them, and turning the CPU sample
//! store into a profile (failed walks under their reason's frame, JVM
//! threads under their kind's frame). Reading stored CPU stacks is here too,
//! for every output that reads them (`split_cpu_stack`, `failure_name`).
//! When another component replaces the engine's signal handler during the
//! recording (`taken`), the engine's timers are stopped and the summary says
//! so (`signal_taken=`). Runs outside the signal handler.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use jvmti_sys::asgct::ticks;
use oxprof_profile::jfr::writer::event_type;
use oxprof_profile::{Frame, FrameKind, Profile};

use crate::engine::{self, itimer, Engine};
use crate::hotspot::frames::ThreadState;
use crate::log;
use crate::native::dwarf as native_dwarf;
use crate::native::symbols as native_symbols;
use crate::native::unwind as native_unwind;
use crate::options::{CStack, Event};
use crate::output::Built;
use crate::sampling::signal::{self, SignalContext, MARK_NON_JAVA_THREAD, MARK_NO_JAVA_FRAME, MARK_OWN_WALK_DIFFERS, MARK_TRUNCATED};
use crate::sampling::store::{RawFrame, SampleStore, StoredTrace};
use crate::sampling::taken::Taken;
use crate::sampling::threads::{self, Threads};
use crate::source::{fmt_interval, BuildContext, EventSource, FrameMemo, StartContext, Started};

/// Distinct stacks the store can hold, and frames in all of them.
const STORE_SLOTS: usize = 1 << 18;
const STORE_FRAMES: usize = 1 << 23;

static STORE: OnceLock<&'static SampleStore> = OnceLock::new();

/// The CPU sample store, mapped on first use and kept for the process's
/// life (the signal handler may still hold it while a recording stops).
pub fn store() -> Result<&'static SampleStore, String> {
    SampleStore::leaked(&STORE, STORE_SLOTS, STORE_FRAMES, "the sample store")
}

/// The store, if a CPU recording ever made it.
pub fn stored() -> Option<&'static SampleStore> {
    STORE.get().copied()
}

/// Whether a CPU recording collects kernel frames: perf_events records
/// them beside the native stack, unless native stacks are off.
fn collects_kernel_stacks(engine: Engine, cstack: CStack) -> bool {
    engine == Engine::Perf && cstack != CStack::No
}

/// Counts gathered while building a profile.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub samples: u64,
    pub java_samples: u64,
    pub failed: u64,
    /// Samples of virtual threads whose lower frames were still frozen in
    /// their continuation (under [`FROZEN_FRAMES`]): whole at both ends,
    /// not failed, but cut from their callers.
    pub frozen: u64,
    pub dropped: u64,
    /// Samples that carry native or kernel frames.
    pub native_samples: u64,
    pub failed_by_reason: BTreeMap<&'static str, u64>,
}

impl Summary {
    /// Failed walks as a share of the Java threads' samples, in percent.
    pub fn failed_pct(&self) -> f64 {
        share_pct(self.failed, self.java_samples)
    }

    /// Samples under the frozen frames' marker as a share of the Java
    /// threads' samples, in percent.
    pub fn frozen_pct(&self) -> f64 {
        share_pct(self.frozen, self.java_samples)
    }
}

fn share_pct(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        100.0 * n as f64 / of as f64
    }
}

/// The profile header's line for the samples under the frozen frames'
/// marker (beside "failed walks"), for CPU and wall-clock profiles.
pub fn frozen_meta(summary: &Summary) -> (String, String) {
    ("frozen frames".into(), format!("{} ({:.2}% of Java samples, cut from their callers)", summary.frozen, summary.frozen_pct()))
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
        MARK_OWN_WALK_DIFFERS => "[own_walk_differs]",
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
    if trimmed.is_empty() {
        name.to_string()
    } else {
        trimmed.to_string()
    }
}

/// A running CPU recording.
pub struct CpuSource {
    event: Event,
    engine: Engine,
    /// Why perf_events was not used, when `cpu` fell back to ctimer.
    fallback: Option<String>,
    interval_ns: u64,
    cstack: CStack,
    threads: Arc<Threads>,
    /// Whether another component took the engine's signal.
    taken: Arc<Taken>,
    /// The own walk's process-wide counts when this recording started, so
    /// its summary counts its own walks only.
    walks_at_start: (u64, u64),
}

/// The signal the engine's samples arrive with.
fn engine_signal(engine: Engine) -> libc::c_int {
    if engine == Engine::Perf && engine::perf::delivery() == engine::perf::Delivery::Trap {
        libc::SIGTRAP
    } else {
        libc::SIGPROF
    }
}

/// What the warning tells the user to do when the engine's signal is taken.
fn taken_advice(engine: Engine, signo: libc::c_int, fallback: Option<&str>) -> String {
    match (signo, engine, fallback) {
        (libc::SIGTRAP, ..) => "use event=ctimer or stop the other component that handles SIGTRAP".into(),
        (_, Engine::Perf, _) => "stop the other component that handles SIGPROF (perf_events signals with SIGTRAP on Linux 5.13 and later)".into(),
        (_, _, Some(why)) => {
            format!("stop the other profiler or component that handles SIGPROF (perf_events, which signals with SIGTRAP, is not available: {why})")
        }
        _ => "use event=cpu (perf_events, SIGTRAP) or stop the other profiler".into(),
    }
}

/// Stops ITIMER_PROF if it still runs at oxprof's interval: a component
/// that took SIGPROF may have armed it for itself.
fn stop_itimer_if_ours(interval_ns: u64) {
    // SAFETY: getitimer writes a plain itimerval.
    let mut now: libc::itimerval = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::getitimer(libc::ITIMER_PROF, &mut now) } != 0 {
        return;
    }
    let ns = interval_ns.max(1000);
    let ours = now.it_interval.tv_sec as u64 == ns / 1_000_000_000 && now.it_interval.tv_usec as u64 == (ns % 1_000_000_000) / 1000;
    if ours {
        itimer::stop();
    }
}

/// Starts CPU sampling when the options ask for it (`event=cpu|ctimer|itimer`).
pub fn start(cx: &StartContext) -> Result<Started, String> {
    let Some(event) = cx.config.cpu else { return Ok(None) };
    let config = cx.config;
    let asgct = cx.asgct.ok_or("this JVM does not export AsyncGetCallTrace; CPU profiling needs HotSpot (JDK 11 or later)")?;
    let store = store()?;
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
    let mut ctx = SignalContext::new(store, asgct, cx.vm, config.jstackdepth, config.interval_ns, config.threads);
    let kernel_stacks = collects_kernel_stacks(engine, config.cstack);
    if !native_unwind::init() && config.cstack != CStack::No {
        log::warn("no safe memory probe (pipe, process_vm_readv): native stacks keep only the interrupted function");
    }
    if config.cstack == CStack::Dwarf {
        let objects = native_dwarf::refresh();
        log::debug(&format!("DWARF unwind tables of {objects} objects loaded"));
        let registry = cx.threads.clone();
        if let Err(e) = native_dwarf::start_watcher(move || registry.exclude(threads::current_tid())) {
            log::warn(&format!("no thread to follow library loads for cstack=dwarf: {e}"));
        }
    }
    ctx.set_cstack(config.cstack, kernel_stacks);
    engine::perf::set_kernel_stacks(kernel_stacks);
    signal::arm(ctx);
    // Triggers armed before this source: timers run only inside their window.
    let gate = crate::trigger::gate::current().filter(|g| !g.is_stopped());
    if gate.is_some() {
        cx.threads.set_paused(true);
    }
    let signo = engine_signal(engine);
    let taken = Arc::new(Taken::new(signo, "CPU samples", engine.short(), taken_advice(engine, signo, fallback.as_deref())));
    let mut source = CpuSource {
        event,
        engine,
        fallback,
        interval_ns: config.interval_ns,
        cstack: config.cstack,
        threads: cx.threads.clone(),
        taken: taken.clone(),
        walks_at_start: crate::hotspot::fullwalk::signal_walks(),
    };
    // Both watchers below note the libraries loaded every 100 ms with
    // `cstack=fp`, so frames of one unloaded before the dump keep their
    // names (the `cstack=dwarf` watcher does it itself).
    let follow_libraries = config.cstack == CStack::Fp;
    let started = if engine.per_thread() {
        // The store's next pages are made resident ahead of the handler.
        store.prefault_ahead();
        let (taken, registry) = (taken.clone(), cx.threads.clone());
        // The watcher runs this every 100 ms: a taken signal stops every
        // timer, and the watcher with them.
        let upkeep = move || {
            store.prefault_ahead();
            if follow_libraries {
                crate::native::symbols::note_loaded_libraries();
            }
            if taken.check(true) {
                registry.stop();
            }
        };
        cx.threads.start(engine, config.interval_ns, upkeep).map(|n| format!("{n} threads"))
    } else {
        itimer::start(config.interval_ns).and_then(|()| {
            // The registry's watcher without timers: it keeps the threads'
            // names (a native thread that ends before the dump was
            // `[thread]`, as nothing read its name while it ran) and, every
            // 100 ms, looks whether SIGPROF was taken.
            let (registry, interval, taken) = (cx.threads.clone(), config.interval_ns, taken.clone());
            let upkeep = move || {
                if follow_libraries {
                    crate::native::symbols::note_loaded_libraries();
                }
                if taken.check(true) {
                    stop_itimer_if_ours(interval);
                    registry.stop();
                }
            };
            cx.threads.follow_names(upkeep)?;
            Ok("process-wide".to_string())
        })
    };
    let how = match started {
        Ok(t) => t,
        Err(e) => {
            source.stop(None);
            return Err(format!("cannot start the {} engine: {e}", engine.short()));
        }
    };
    if let Some(g) = gate {
        let (threads, registry, interval) = (cx.threads.clone(), cx.threads.clone(), config.interval_ns);
        let per_thread = engine.per_thread();
        if !per_thread {
            let _ = itimer::set_interval(0);
        }
        let apply: crate::trigger::gate::Apply = Box::new(move |open| {
            if per_thread {
                threads.set_paused(!open);
            } else if !taken.is_taken() {
                let _ = itimer::set_interval(if open { interval } else { 0 });
            }
        });
        let delay = std::time::Duration::from_nanos((config.interval_ns / 4).min(250_000));
        if let Err(e) = g.follow(delay, move || registry.exclude(threads::current_tid()), apply) {
            source.stop(None);
            return Err(e);
        }
    }
    // Why not perf_events goes into the line: attached, the log is not seen.
    let instead = source.fallback.as_ref().map(|why| format!(" instead of perf_events [{why}]")).unwrap_or_default();
    let line = format!(
        "started {} profiling: engine {} ({}){instead}, interval {}, {}",
        event.name(),
        engine.describe(),
        engine.signal_name(),
        fmt_interval(config.interval_ns),
        how
    );
    Ok(Some((Box::new(source), line)))
}

impl EventSource for CpuSource {
    fn key(&self) -> &'static str {
        "cpu"
    }

    fn status(&self) -> String {
        let n = stored().map(|s| s.stats().recorded).unwrap_or(0);
        let taken = self.taken.note().map(|n| format!("; {n}")).unwrap_or_default();
        format!("{} ({}, interval {}): {}{taken}", self.event.name(), self.engine.short(), fmt_interval(self.interval_ns), crate::source::fmt_samples(n))
    }

    fn jfr_settings(&self) -> Vec<(u64, &'static str, String)> {
        let id = event_type::EXECUTION_SAMPLE;
        vec![
            (id, "enabled", "true".to_string()),
            (id, "period", fmt_interval(self.interval_ns).replace("ms", " ms").replace("us", " us")),
            (id, "engine", self.engine.describe().to_string()),
            (id, "event", self.event.name().to_string()),
        ]
    }

    fn all_started(&self) {
        if collects_kernel_stacks(self.engine, self.cstack) {
            // Started only now that nothing can fail, so the table is
            // dropped by this recording's last dump (see `write_recording`).
            let registry = self.threads.clone();
            native_symbols::prefetch_kernel_table(move || registry.exclude(threads::current_tid()));
        }
    }

    fn stop(&mut self, _env: Option<(crate::jvmti::Jvmti, crate::jvmti::Jni)>) {
        native_dwarf::stop_watcher();
        // Taken since the last look: counted (and warned about) too.
        self.taken.check(true);
        // The per-thread engines' timers and watcher, or itimer's names' watcher.
        self.threads.stop();
        if !self.engine.per_thread() {
            itimer::stop();
        }
        drop(signal::disarm());
    }

    fn build(&self, cx: &BuildContext) -> Built {
        let started = Instant::now();
        let (profile, s) = self.profile(cx);
        log::debug(&format!("CPU profile built in {:.1} ms", started.elapsed().as_secs_f64() * 1e3));
        let [asgct, types, native, own] = signal::part_means_ns();
        let (walked, left) = crate::hotspot::fullwalk::signal_walks();
        let (walked, left) = (walked.saturating_sub(self.walks_at_start.0), left.saturating_sub(self.walks_at_start.1));
        log::debug(&format!(
            "handler parts (mean CPU ns): own walk {own}, AsyncGetCallTrace {asgct}, frame types {types}, native {native}; own walks {walked}, left to AsyncGetCallTrace {left} (why, signal and allocation walks:{}); Java callers found by the stack scan: {}; interrupted methods put back on top: {}; AsyncGetCallTrace stacks that stopped early, replaced: {}; own walks by AsyncGetCallTrace's code:{}; top frames in C2's exception blob (whole, pushed, none, rdx reused, not stepped): {:?}",
            crate::hotspot::fullwalk::left_why().iter().map(|(why, n)| format!(" {why}={n}")).collect::<String>(),
            crate::hotspot::javawalk::scan_found(),
            crate::hotspot::frametypes::restored_tops(),
            crate::hotspot::frametypes::replaced_stacks(),
            crate::hotspot::javawalk::walks_by_code(),
            crate::hotspot::javastack::exception_blob_steps()
        ));
        let (scans, scan_ns) = cx.threads.scan_cost();
        log::debug(&format!("thread watcher: {scans} scans of /proc/self/task since load, {} µs of CPU each on average", scan_ns / scans.max(1) / 1000));
        let mut summary_line = format!(
            "summary: samples={} java_samples={} failed={} failed_pct={:.2} frozen={} frozen_pct={:.2} dropped={} engine={} native_samples={} native_ns={} handler_ns={}",
            s.samples,
            s.java_samples,
            s.failed,
            s.failed_pct(),
            s.frozen,
            s.frozen_pct(),
            s.dropped,
            self.engine.short(),
            s.native_samples,
            native_unwind::mean_ns().unwrap_or(0),
            signal::handler_mean_ns().unwrap_or(0)
        );
        if walked + left > 0 {
            summary_line.push_str(&format!(" own_walks={walked} own_left={left}"));
        }
        if crate::hotspot::fullwalk::checking_signal() {
            let (checked, differed) = signal::checked_walks();
            summary_line.push_str(&format!(" walk_checked={checked} walk_differed={differed}"));
        }
        summary_line.push_str(&self.taken.summary_field());
        Built { label: "CPU".into(), key: "cpu", profile, summary_line, leak: None }
    }
}

impl CpuSource {
    fn profile(&self, cx: &BuildContext) -> (Profile, Summary) {
        let Some(store) = stored() else { return (Profile::default(), Summary::default()) };
        let traces = crate::sampling::interval::read(store, cx.close_interval);
        native_symbols::resolver().refresh();
        let mut summary = Summary { dropped: store.stats().dropped, ..Summary::default() };
        // A gated recording (`ttsp`, `begin=`/`end=`) says so in its title
        // and header: its samples are only those inside the windows.
        let gated = crate::trigger::gate::current().map(|g| g.profile_note());
        let title = gated.as_ref().map_or("CPU profile", |(t, _)| *t);
        let mut meta = cx.rec.meta(title, self.event.name(), self.engine.describe(), cx.rec.config.interval_ns, "ns");
        if let Some((_, line)) = gated {
            meta.extra.push(line);
        }
        let build = |memo: &mut FrameMemo, summary: &mut Summary| {
            let config = &cx.rec.config;
            let mut profile = Profile::new(meta.clone());
            let mut ids = Vec::new();
            for t in &traces {
                summary.samples += t.samples;
                ids.clear();
                trace_frames(t, (config.threads, cx.with_state()), cx, (&mut profile, &mut *memo), &mut ids, summary);
                profile.add(ids.clone(), t.samples, t.total);
            }
            profile
        };
        let mut profile = build(&mut FrameMemo::new(cx), &mut summary);
        if crate::source::checks_kept_names() && cx.close_interval {
            let fresh = build(&mut FrameMemo::fresh(), &mut Summary::default());
            crate::source::check_kept_names("cpu", &profile, &fresh);
        }
        let config = &cx.rec.config;
        native_symbols::resolver().done();
        let m = &mut profile.meta;
        m.extra.push(("samples".into(), summary.samples.to_string()));
        m.extra.push(("failed walks".into(), format!("{} ({:.2}% of Java samples)", summary.failed, summary.failed_pct())));
        if summary.frozen > 0 {
            m.extra.push(frozen_meta(&summary));
        }
        for (reason, n) in &summary.failed_by_reason {
            m.extra.push((format!("failed {reason}"), n.to_string()));
        }
        m.extra.push(("dropped".into(), summary.dropped.to_string()));
        let cost = native_unwind::mean_ns()
            .map(|ns| format!(", {ns} ns and {:.2} memory probes per sample to collect", native_unwind::probes_per_100_samples() as f64 / 100.0))
            .unwrap_or_default();
        m.extra.push(("native stacks".into(), format!("cstack={}, {} samples with native frames{cost}", config.cstack.name(), summary.native_samples)));
        if let Some(why) = &self.fallback {
            m.extra.push(("engine fallback".into(), why.clone()));
        }
        if let Some(note) = self.taken.note() {
            m.extra.push(("signal taken".into(), note));
        }
        (profile, summary)
    }
}

/// A stored sample's state, told apart by its innermost Java frame where
/// HotSpot's own states do not (see [`ThreadState::refine`]).
pub fn refine_state(t: &StoredTrace, cx: &BuildContext, memo: &mut FrameMemo) -> ThreadState {
    let leaf_java = t.frames.iter().find(|f| !f.is_native() && !f.is_marker()).map(|f| memo.name(cx, f));
    ThreadState::from_u8(t.state).refine(leaf_java.and_then(|n| n.rsplit_once('.')))
}

/// Appends the frame ids of one stored CPU or wall trace to `out` (root
/// first): its context labels, its state when `with_state` (see
/// `BuildContext::with_state`), then its frames.
pub fn trace_frames(
    t: &StoredTrace,
    (per_thread, with_state): (bool, bool),
    cx: &BuildContext,
    into: (&mut Profile, &mut FrameMemo),
    out: &mut Vec<u32>,
    summary: &mut Summary,
) {
    let (profile, memo) = into;
    let first = out.len();
    cx.label_roots(profile, t.labels, out);
    if with_state {
        let state = refine_state(t, cx, memo);
        out.push(memo.state(profile, state));
    }
    let (above, marker) = split_cpu_stack(&t.frames, t.tid, cx.threads);
    if t.frames.first().is_some_and(RawFrame::is_native) {
        summary.native_samples += t.samples;
    }
    match marker {
        Some(code @ (MARK_NO_JAVA_FRAME | MARK_NON_JAVA_THREAD)) => {
            if code == MARK_NO_JAVA_FRAME {
                summary.java_samples += t.samples;
            }
            out.push(memo.thread(profile, t.tid, per_thread, || {
                if per_thread {
                    cx.thread_root(t.tid)
                } else {
                    let name = cx.threads.name(t.tid).unwrap_or_else(|| "thread".into());
                    Frame::new(format!("[{}]", thread_category(&name)), FrameKind::Native)
                }
            }));
            above.iter().rev().for_each(|f| out.push(memo.id(profile, cx, f)));
        }
        Some(code) => {
            summary.java_samples += t.samples;
            summary.failed += t.samples;
            *summary.failed_by_reason.entry(failure_name(code)).or_default() += t.samples;
            if per_thread && t.tid != 0 {
                out.push(memo.thread(profile, t.tid, true, || cx.thread_root(t.tid)));
            }
            out.push(profile.intern(Frame::new(failure_name(code), FrameKind::Error)));
            // The Java frames of a partial walk, then native frames.
            above.iter().rev().for_each(|f| out.push(memo.id(profile, cx, f)));
        }
        None => {
            summary.java_samples += t.samples;
            if per_thread && t.tid != 0 {
                out.push(memo.thread(profile, t.tid, true, || cx.thread_root(t.tid)));
            }
            t.frames.iter().rev().for_each(|f| out.push(memo.id(profile, cx, f)));
        }
    }
    let failed = matches!(marker, Some(code) if code != MARK_NO_JAVA_FRAME && code != MARK_NON_JAVA_THREAD);
    match mark_virtual_thread_frames(profile, out, first, failed) {
        VirtualGap::None => {}
        VirtualGap::Frozen(_) => summary.frozen += t.samples,
        VirtualGap::Broken(_) => {
            summary.failed += t.samples;
            *summary.failed_by_reason.entry(failure_name(MARK_TRUNCATED)).or_default() += t.samples;
        }
    }
}

/// The frame a virtual thread's stack shows where frames were left out.
pub const FROZEN_FRAMES: &str = "[frames still frozen in the continuation]";

const ENTER_SPECIAL: &str = "jdk.internal.vm.Continuation.enterSpecial";
const ENTER: &str = "jdk.internal.vm.Continuation.enter";
const ENTER0: &str = "jdk.internal.vm.Continuation.enter0";
const CONTINUATION_RUN: &str = "jdk.internal.vm.Continuation.run";
const CONTINUATION: &str = "jdk.internal.vm.Continuation.";
/// The carrier's task that mounts a virtual thread and runs its continuation.
const RUN_CONTINUATION: &str = "java.lang.VirtualThread.runContinuation";
/// The starts of the names of HotSpot's (JDK 21+) functions that thaw a
/// continuation.
const THAW_FRAMES: [&str; 5] = ["thaw<", "Thaw<", "ThawBase::", "Continuation::prepare_thaw", "prepare_thaw_internal"];

/// What a stack says about a virtual thread's frames (see
/// [`virtual_thread_gap`]); positions are indices in the frames read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VirtualGap {
    /// Nothing missing (or no virtual thread).
    None,
    /// HotSpot has not thawed the frames below the top ones yet: the
    /// [`FROZEN_FRAMES`] marker goes right after this frame
    /// (`Continuation.enterSpecial`).
    Frozen(usize),
    /// Frames a virtual thread's stack must have are missing, at its root
    /// or in its middle: the stack counts as a failed walk, under the
    /// `[truncated]` marker, which goes before this frame (its first Java frame).
    Broken(usize),
}

/// Reads a stack (root first; each frame's name and whether it is a
/// (non-`native`) Java method's) for what a whole virtual thread's stack
/// must look like: its carrier's frames, `Continuation.run`, then
/// `Continuation.enterSpecial`, `Continuation.enter`, `Continuation.enter0`
/// and the thread's own frames. HotSpot thaws a continuation lazily: after a
/// virtual thread resumes, only its top frames are back on the carrier's
/// stack, the rest stay in a heap stack chunk until returned into, and no
/// stack walk sees them; such a stack jumps from `enterSpecial` straight to
/// the top frames ([`VirtualGap::Frozen`]). A stack may end at
/// `enterSpecial` or at `enter` (the own walk's end there, as
/// `GetStackTrace`'s do: the virtual thread's own frames). Other gaps
/// cannot be: only `enterSpecial` calls `enter`,
/// only `enter` calls `enter0`, `enter` calls nothing but `enter0` and the
/// continuation's own methods, and `Continuation.run` reaches the
/// thread's code only through `enterSpecial`. AsyncGetCallTrace was seen to
/// return such stacks on JDK 25 (ending, without an error, at
/// `Continuation.enter`, named without the `enter0` it called, or jumping
/// from it to the top frames): they are
/// [`VirtualGap::Broken`], never passed off as whole.
pub fn virtual_thread_gap(frames: &[(&str, bool)]) -> VirtualGap {
    // Where a failure marker goes: before the first Java frame, counting
    // the continuation's `native` entry (a walk may stop at `enterSpecial`).
    let first_java = frames.iter().position(|&(name, java)| java || name.starts_with(CONTINUATION));
    // HotSpot's thaw, entered from `enterSpecial` or from the return
    // barrier a thawed frame returns into: either way `enterSpecial` is below.
    let thawing = frames.iter().any(|&(name, java)| !java && THAW_FRAMES.iter().any(|p| name.starts_with(p)));
    let reaches_entry = || frames.iter().any(|&(name, _)| name == CONTINUATION_RUN || name == ENTER_SPECIAL);
    if let Some(i) = first_java.filter(|_| thawing && !reaches_entry()) {
        return VirtualGap::Broken(i);
    }
    let jdk_code = |name: &str| name.starts_with("java.") || name.starts_with("jdk.") || name.starts_with("sun.");
    // Above the carrier's task (`VirtualThread.runContinuation`, which
    // mounts the thread, then `Continuation.run`), the thread's code only
    // after the entry. A walk that crossed into the carrier's stale frames
    // (seen on JDK 21: `mount;Thread.setCurrentThread;App.work`, with no
    // continuation frame at all) is not whole.
    let app_before_entry =
        |from: usize| frames.iter().skip(from + 1).take_while(|&&(n, _)| n != ENTER_SPECIAL && n != ENTER).any(|&(n, java)| java && !jdk_code(n));
    if let Some(task) = frames.iter().position(|&(name, _)| name == RUN_CONTINUATION) {
        if app_before_entry(task) {
            return VirtualGap::Broken(first_java.unwrap_or(0));
        }
    }
    if !frames.iter().any(|(name, _)| name.starts_with(CONTINUATION)) {
        return VirtualGap::None;
    }
    let mut frozen = VirtualGap::None;
    for (i, &(name, _)) in frames.iter().enumerate() {
        let before = i.checked_sub(1).and_then(|b| frames.get(b)).map(|&(n, _)| n);
        // The next frame when it is a Java method's (not native code the
        // method called).
        let next = frames.get(i + 1);
        let next_java = next.filter(|&&(_, java)| java).map(|&(n, _)| n);
        let broken = match name {
            // A stack may end at `enter` (the own walk's do, as
            // `GetStackTrace`'s), but not with another caller.
            ENTER => before.is_some_and(|b| b != ENTER_SPECIAL && !b.starts_with('[')) || next_java.is_some_and(|n| !n.starts_with(CONTINUATION)),
            ENTER0 => before != Some(ENTER),
            // Above `Continuation.run`, the thread's code only after the entry.
            CONTINUATION_RUN => next_java.is_some_and(|n| n.starts_with("java.lang.VirtualThread")) || app_before_entry(i),
            _ => false,
        };
        if broken {
            return VirtualGap::Broken(first_java.unwrap_or(0));
        }
        if name == ENTER_SPECIAL && frozen == VirtualGap::None && next.is_some_and(|(n, _)| !n.starts_with(ENTER)) {
            frozen = VirtualGap::Frozen(i);
        }
    }
    frozen
}

/// Marks a virtual thread's stack (from `first` in `out`, root first) as
/// [`virtual_thread_gap`] reads it: the frozen frames' marker after
/// `enterSpecial`, or, unless the stack is already a failed walk's
/// (`failed`), the `[truncated]` marker before its first Java frame.
fn mark_virtual_thread_frames(profile: &mut Profile, out: &mut Vec<u32>, first: usize, failed: bool) -> VirtualGap {
    let Some(stack) = out.get(first..) else { return VirtualGap::None };
    let frames: Vec<(&str, bool)> = stack
        .iter()
        .map(|&id| {
            let f = profile.frame(id);
            (f.name.as_str(), matches!(f.kind, FrameKind::Java | FrameKind::Interpreted | FrameKind::Jit | FrameKind::Inlined))
        })
        .collect();
    let gap = virtual_thread_gap(&frames);
    let (marker, at) = match gap {
        VirtualGap::None => return gap,
        VirtualGap::Broken(_) if failed => return VirtualGap::None,
        VirtualGap::Frozen(i) => (Frame::new(FROZEN_FRAMES, FrameKind::Error), i + 1),
        VirtualGap::Broken(i) => (Frame::new(failure_name(MARK_TRUNCATED), FrameKind::Error), i),
    };
    let marker = profile.intern(marker);
    out.insert(first + at, marker);
    gap
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::store::JavaFrameType;
    use jvmti_sys::asgct::BCI_NATIVE_FRAME;

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
        threads.name_java_thread(7, String::new(), None);
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

    /// Virtual threads' stacks, from what HotSpot's frames must look like:
    /// frozen frames above `enterSpecial`, and the gaps no walk may pass off
    /// as whole (as AsyncGetCallTrace returned them on JDK 25).
    #[test]
    fn virtual_thread_gaps() {
        fn java(names: &str) -> Vec<(&str, bool)> {
            names.split(';').map(|n| (n, !n.starts_with('[') && !n.contains('<') && !n.contains("::"))).collect()
        }
        let carrier = "[w tid=1];java.util.concurrent.ForkJoinWorkerThread.run;java.lang.VirtualThread.runContinuation;jdk.internal.vm.Continuation.run";
        let entry = "jdk.internal.vm.Continuation.enterSpecial;jdk.internal.vm.Continuation.enter;jdk.internal.vm.Continuation.enter0";
        let body = "java.lang.VirtualThread$VThreadContinuation$1.run;java.lang.VirtualThread.run;App.task;App.deep;App.work";
        assert_eq!(virtual_thread_gap(&java(&format!("{carrier};{entry};{body}"))), VirtualGap::None);
        assert_eq!(virtual_thread_gap(&java("[w tid=1];App.main;App.work")), VirtualGap::None, "no virtual thread");
        // Lower frames frozen: the marker goes after enterSpecial, with or without the carrier.
        assert_eq!(virtual_thread_gap(&java(&format!("{carrier};jdk.internal.vm.Continuation.enterSpecial;App.deep;App.work"))), VirtualGap::Frozen(4));
        assert_eq!(virtual_thread_gap(&java("jdk.internal.vm.Continuation.enterSpecial;App.work")), VirtualGap::Frozen(0));
        // enterSpecial calling into the thaw: frozen too (nothing thawed yet).
        assert_eq!(virtual_thread_gap(&java(&format!("{carrier};jdk.internal.vm.Continuation.enterSpecial;thaw<G1>"))), VirtualGap::Frozen(4));
        // The virtual thread's own frames, from enter (as the own walk ends them).
        assert_eq!(virtual_thread_gap(&java(&format!("[w tid=1];{};{body}", &entry[42..]))), VirtualGap::None);
        assert_eq!(virtual_thread_gap(&java(&format!("{};{body}", &entry[42..]))), VirtualGap::None);
        // enter called by anything but enterSpecial, enter0 by anything but enter.
        assert_eq!(virtual_thread_gap(&java(&format!("{carrier};{};{body}", &entry[42..]))), VirtualGap::Broken(1));
        assert_eq!(virtual_thread_gap(&java(&format!("{carrier};jdk.internal.vm.Continuation.enter0;{body}"))), VirtualGap::Broken(1));
        // enter jumping to the top frames, or without enter0.
        assert_eq!(
            virtual_thread_gap(&java(&format!("{carrier};jdk.internal.vm.Continuation.enterSpecial;jdk.internal.vm.Continuation.enter;App.deep"))),
            VirtualGap::Broken(1)
        );
        assert_eq!(
            virtual_thread_gap(&java(&format!("{carrier};jdk.internal.vm.Continuation.enterSpecial;jdk.internal.vm.Continuation.enter;{body}"))),
            VirtualGap::Broken(1)
        );
        // enter calling the continuation's own methods, or native code, is whole.
        assert_eq!(
            virtual_thread_gap(&java(&format!(
                "{carrier};jdk.internal.vm.Continuation.enterSpecial;jdk.internal.vm.Continuation.enter;jdk.internal.vm.Continuation.finish"
            ))),
            VirtualGap::None
        );
        assert_eq!(
            virtual_thread_gap(&java(&format!("{carrier};jdk.internal.vm.Continuation.enterSpecial;jdk.internal.vm.Continuation.enter;thaw<G1>"))),
            VirtualGap::None
        );
        // Continuation.run straight into the thread's code.
        assert_eq!(virtual_thread_gap(&java(&format!("{carrier};App.work"))), VirtualGap::Broken(1));
        assert_eq!(virtual_thread_gap(&java(&format!("{carrier};java.lang.VirtualThread.parkNanos"))), VirtualGap::Broken(1));
        assert_eq!(virtual_thread_gap(&java(&format!("{carrier};jdk.internal.vm.Continuation.mount"))), VirtualGap::None);
        let jdk_then_app = "jdk.internal.vm.Continuation.compareAndSetMounted;jdk.internal.misc.Unsafe.compareAndSetByte;App$$Lambda.run;App.work";
        assert_eq!(virtual_thread_gap(&java(&format!("{carrier};{jdk_then_app}"))), VirtualGap::Broken(1));
        // Inside the thaw with no continuation below.
        assert_eq!(virtual_thread_gap(&java("App.work;thaw<G1>;Thaw<G1>::thaw_slow")), VirtualGap::Broken(0));
        assert_eq!(virtual_thread_gap(&java(&format!("{carrier};thaw<G1>"))), VirtualGap::None);
        // The return barrier's thaw under stale carrier frames (JDK 21, seen in CI).
        let stale = "[w tid=1];java.util.concurrent.ForkJoinWorkerThread.run;java.lang.VirtualThread.runContinuation;java.lang.VirtualThread.mount;java.lang.Thread.setCurrentThread;App.work;Continuation::prepare_thaw";
        assert_eq!(virtual_thread_gap(&java(stale)), VirtualGap::Broken(1));
        // The same with no thaw frame: a VM function on top (JDK 21, seen in CI).
        let stale = "[w tid=1];java.util.concurrent.ForkJoinWorkerThread.run;java.lang.VirtualThread.runContinuation;java.lang.VirtualThread.mount;java.lang.Thread.setCurrentThread;App.work;AccessInternal::PostRuntimeDispatch<G1BarrierSet::AccessBarrier<286822, G1BarrierSet>>::oop_access_barrier";
        assert_eq!(virtual_thread_gap(&java(stale)), VirtualGap::Broken(1));
        // The carrier mounting the thread, or running JDK code, is whole.
        let mounting = "[w tid=1];java.util.concurrent.ForkJoinWorkerThread.run;java.lang.VirtualThread.runContinuation;java.lang.VirtualThread.mount;java.lang.Thread.setCurrentThread";
        assert_eq!(virtual_thread_gap(&java(mounting)), VirtualGap::None);
        // A walk ending at enterSpecial (a `native` method, not a Java frame
        // in the flag) with a garbled middle: the marker goes below it.
        let garbled =
            "jdk.internal.vm.Continuation.enterSpecial;App.work;java.lang.System.nanoTime;jdk.internal.vm.Continuation.enter;thaw<G1>;ThawBase::thaw_slow";
        let mut frames = java(garbled);
        frames[0].1 = false;
        assert_eq!(virtual_thread_gap(&frames), VirtualGap::Broken(0));
    }
}
