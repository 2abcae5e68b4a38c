//! The recording lifecycle, the same for every kind of event: start the
//! event sources the options ask for (in [`STARTERS`] order; if one fails,
//! stop those already started), stop them, and build their profiles. What
//! each kind records and how is in its own module (see `source.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use jvmti_sys::asgct::AsyncGetCallTraceFn;
use jvmti_sys::JavaVM;

use crate::heap::alloc::AllocSampler;
use crate::heap::sources;
use crate::hotspot::vmstructs::VmStructs;
use crate::jvmti::{Jni, Jvmti};
use crate::locks::{self, sampler::LockSampler};
use crate::log;
use crate::options::Config;
use crate::output::Built;
use crate::sampling::threads::Threads;
use crate::sampling::{cpu, wall};
use crate::source::{BuildContext, Recording, StartContext, Starter};
use crate::symbols::Symbols;
use crate::trigger::gate;

/// Every kind of event source, in the order they start (and their profiles
/// are listed): CPU, allocations, live objects (which need allocations).
pub const STARTERS: [Starter; 5] = [cpu::start, wall::start, sources::start_alloc, sources::start_live, locks::source::start];

/// Bumped at every start and stop; the status thread runs while it sees its own.
static STATUS_GENERATION: AtomicU64 = AtomicU64::new(0);

pub struct Profiler {
    recording: Mutex<Option<Recording>>,
    pub threads: Arc<Threads>,
    pub alloc: AllocSampler,
    pub locks: LockSampler,
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

impl Profiler {
    pub fn new() -> Profiler {
        Profiler { recording: Mutex::new(None), threads: Arc::new(Threads::default()), alloc: AllocSampler::default(), locks: LockSampler::default() }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Recording>> {
        self.recording.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` with the current recording (if any) while holding it.
    pub fn with_recording<T>(&self, f: impl FnOnce(Option<&Recording>) -> T) -> T {
        let rec = self.lock();
        f(rec.as_ref())
    }

    /// Starts a recording. Returns one line per source started, for the log.
    pub fn start(
        &'static self,
        mut config: Config,
        vm: *mut JavaVM,
        asgct: Option<AsyncGetCallTraceFn>,
        env: (Jvmti, Jni),
        can_tag: bool,
        vm_structs: Option<&VmStructs>,
    ) -> Result<Vec<String>, String> {
        let mut rec = self.lock();
        if rec.is_some() {
            return Err("profiling is already running; stop it first".into());
        }
        if let (Some(_), false, Some(last)) = (config.alloc, config.alloc_interval_given, self.alloc.last_interval()) {
            config.alloc = Some(last);
        }
        let cx = StartContext { config: &config, vm, asgct, env, can_tag, threads: &self.threads, alloc: &self.alloc, locks: &self.locks, vm_structs };
        let mut sources = Vec::new();
        let mut lines = Vec::new();
        let start_wall_ns = now_ns();
        // The same moment on the monotonic clock: the first interval's
        // length counts from it (samples come while the sources start).
        let start_instant = Instant::now();
        // Triggers are armed first: no sample is kept before they say so.
        let gate = if config.ttsp || config.begin.is_some() || config.end.is_some() {
            crate::sampling::signal::install_trap().map_err(|e| format!("cannot install the SIGTRAP handler the triggers need: {e}"))?;
            let gate = gate::start(&config, start_wall_ns)?;
            if let Some(g) = &gate {
                lines.push(g.started_line());
            }
            gate
        } else {
            gate::forget();
            None
        };
        for start in STARTERS {
            match start(&cx) {
                Ok(Some((source, line))) => {
                    sources.push(source);
                    lines.push(line);
                }
                Ok(None) => {}
                Err(e) => {
                    for s in sources.iter_mut().rev() {
                        s.stop(Some(env));
                    }
                    if let Some(g) = &gate {
                        g.stop();
                    }
                    return Err(e);
                }
            }
        }
        sources.iter().for_each(|s| s.all_started());
        if let Some(path) = config.status.clone() {
            self.publish_status(path);
        }
        crate::sampling::interval::forget();
        let started = Instant::now();
        *rec = Some(Recording {
            config,
            started,
            start_wall_ns,
            sources,
            gate,
            interval_start: Mutex::new((start_wall_ns, start_instant)),
            cut_at: Mutex::new(None),
        });
        crate::sampling::label_slots::set_active(true);
        Ok(lines)
    }

    /// Rewrites `path` with `samples=N elapsed_ms=M` every 250 ms while this
    /// recording runs, for `oxprof record`'s live status line (each time a
    /// new file under a random name, renamed over `path`).
    fn publish_status(&'static self, path: std::path::PathBuf) {
        let generation = STATUS_GENERATION.fetch_add(1, Ordering::SeqCst) + 1;
        let started = Instant::now();
        let spawned = std::thread::Builder::new().name("oxprof-status".into()).spawn(move || {
            while STATUS_GENERATION.load(Ordering::SeqCst) == generation {
                let line = format!(
                    "samples={} elapsed_ms={} agent_heap_bytes={} agent_heap_peak_bytes={}\n",
                    self.recorded(),
                    started.elapsed().as_millis(),
                    crate::memory::live_bytes(),
                    crate::memory::peak_bytes()
                );
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
        let mut rec = self.lock().take()?;
        crate::sampling::label_slots::set_active(false);
        STATUS_GENERATION.fetch_add(1, Ordering::SeqCst);
        if let Some(g) = &rec.gate {
            g.stop_follower();
        }
        for s in rec.sources.iter_mut() {
            s.stop(env);
        }
        if let Some(g) = &rec.gate {
            let left = g.stop();
            if !left.is_empty() {
                log::error(&format!("{} patched code bytes could not be restored", left.len()));
            }
        }
        Some(rec)
    }

    /// The jmethodIDs present in the sample store.
    pub fn sampled_methods(&self) -> std::collections::HashSet<usize> {
        let mut methods: std::collections::HashSet<usize> = std::collections::HashSet::new();
        for store in [cpu::stored(), self.alloc.stored()].into_iter().flatten() {
            methods.extend(store.snapshot().iter().flat_map(|t| t.frames.iter().map(|f| f.method)));
        }
        // Live sites keep the names of their methods while their objects live.
        self.alloc.live.methods(&mut methods);
        methods.remove(&0);
        methods
    }

    /// Every sample store that exists (CPU, wall, allocations, locks).
    fn stores(&self) -> Vec<(&'static str, &'static crate::sampling::store::SampleStore)> {
        [("cpu", cpu::stored()), ("wall", wall::stored()), ("alloc", self.alloc.stored()), ("lock", self.locks.stored())]
            .into_iter()
            .filter_map(|(k, s)| s.map(|s| (k, s)))
            .collect()
    }

    /// Continuous profiling, after an interval was built: when a sample
    /// store is more than `threshold` full (its distinct stacks only grow
    /// while profiling runs), every store is emptied so that the next weeks
    /// of intervals find room. Writers are turned away meanwhile (their
    /// samples counted as dropped, typically for well under a millisecond),
    /// `before` runs first (the JFR stream writes what its logs hold, whose
    /// slots are about to change meaning), and what was recorded since the
    /// interval's profile was built is put back, so the next interval loses
    /// nothing. Returns a line for the log when stores were emptied.
    pub fn empty_full_stores(&self, threshold: f64, before: impl FnOnce()) -> Option<String> {
        let stores = self.stores();
        let fullest = stores.iter().map(|(_, s)| s.fill()).fold(0.0, f64::max);
        if fullest <= threshold {
            return None;
        }
        let started = Instant::now();
        let dropped_before: u64 = stores.iter().map(|(_, s)| s.stats().dropped).sum();
        stores.iter().for_each(|(_, s)| s.pause());
        before();
        let mut kept = 0usize;
        let mut lost = 0usize;
        for (_, s) in &stores {
            let carry = crate::sampling::interval::read(s, false);
            let dropped = s.stats().dropped;
            s.reset();
            for t in &carry {
                if s.restore(t) {
                    kept += 1;
                } else {
                    lost += 1;
                }
            }
            // `reset` cleared the counter: keep the store's drops counted.
            s.add_dropped(dropped);
        }
        crate::sampling::wall_table::forget_slots();
        let paused = started.elapsed();
        stores.iter().for_each(|(_, s)| s.resume());
        let dropped_after: u64 = stores.iter().map(|(_, s)| s.stats().dropped).sum();
        Some(format!(
            "sample stores emptied (the fullest was {:.0}% full): {} stacks since the interval carried over{}, writers paused {:.2} ms, {} samples dropped meanwhile",
            fullest * 100.0,
            kept,
            if lost > 0 { format!(", {lost} lost") } else { String::new() },
            paused.as_secs_f64() * 1e3,
            dropped_after.saturating_sub(dropped_before)
        ))
    }

    /// Samples recorded so far, CPU and allocation (for status lines).
    pub fn recorded(&self) -> u64 {
        let cpu = cpu::stored().map(|s| s.stats().recorded).unwrap_or(0);
        cpu + self.alloc.stored().map(|s| s.stats().recorded).unwrap_or(0)
    }

    /// Builds the profiles of a (stopped or running) recording, one per
    /// source, in start order. `command` holds the options of the command
    /// that asked (the start options at JVM exit).
    /// With `close_interval`, the profiles hold the current interval
    /// (`loop=`) and it ends here.
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        &self,
        rec: &Recording,
        command: &Config,
        symbols: &Symbols,
        vm_structs: Option<&VmStructs>,
        jvmti: Jvmti,
        jni: Jni,
        close_interval: bool,
    ) -> Vec<Built> {
        // A thread renamed since it started (pool threads often are, per
        // task) is shown by its name now.
        let naming = std::time::Instant::now();
        let named = crate::locks::owners::name_running_threads(jvmti, jni, &self.threads);
        crate::log::debug(&format!("named {named} running Java threads in {:.2} ms", naming.elapsed().as_secs_f64() * 1e3));
        let cx = BuildContext { rec, command, symbols, jvmti, jni, threads: &self.threads, vm_structs, close_interval };
        let mut built: Vec<Built> = rec.sources.iter().map(|s| s.build(&cx)).collect();
        if let Some(g) = rec.gate.as_ref().filter(|g| g.ttsp) {
            // With `loop=`, the interval's own.
            let safepoints = g.interval_safepoints(close_interval);
            for b in built.iter_mut().filter(|b| b.key == "cpu") {
                b.profile.safepoints = safepoints.clone();
            }
        }
        built
    }
}

impl Default for Profiler {
    fn default() -> Self {
        Profiler::new()
    }
}
