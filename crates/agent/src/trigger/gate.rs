//! A recording's trigger gate: resolving `begin=`/`end=`/`ttsp` to
//! addresses, arming the breakpoints before any sampling starts, removing
//! them at stop, and turning the closed windows into safepoints (operation
//! names from their vtables) for the profiles, the JFR stream and the
//! summary line. Runs on JVMTI, attach and JFR-stream threads, never in a
//! signal handler.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use oxprof_profile::safepoint::{Safepoint, SafepointStats};

use crate::native::lookup::{self, Kind, VtableNames};
use crate::options::Config;
use crate::trigger::records::{self, Record};
use crate::trigger::traps::{self, Action, JvmVariables, PlannedStep};

/// Closed windows kept for the profile (the oldest are dropped past this;
/// the totals still count them).
const KEEP: usize = 100_000;
/// Records the ring holds between two reads.
const RING: usize = 1 << 14;
/// How often the follower thread moves records out of the ring.
const COLLECT_PERIOD: std::time::Duration = std::time::Duration::from_millis(100);

/// `ttsp`'s three functions, the same names on JDK 11, 17, 21 and 25
/// (`record_safepoint_synchronized` takes a `long` from JDK 13 on, none on
/// 11: the name without parameters finds either).
pub const TTSP_BEGIN: &str = "SafepointSynchronize::begin";
pub const TTSP_END: &str = "RuntimeService::record_safepoint_synchronized";
pub const TTSP_RELEASE: &str = "SafepointSynchronize::end";

/// The JVM's name of the VM operation a class implements: `VM_<name>`
/// for most; JFR's operations are classes of other names (HotSpot 11–25).
fn operation_name(class: &str) -> String {
    if let Some(name) = class.strip_prefix("VM_") {
        return name.to_string();
    }
    let known = if class.starts_with("JfrVMOperation<") {
        Some("JFRCheckpoint")
    } else {
        match class {
            "JfrSafepointWriteVMOperation" => Some("JFRSafepointWrite"),
            "JfrSafepointClearVMOperation" => Some("JFRSafepointClear"),
            "JfrClassLoaderStatsVMOperation" => Some("ClassLoaderStatsOperation"),
            // The old-object sampler's start and stop (JfrOldObjectSampler).
            "StartOperation" | "StopOperation" => Some("JFROldObject"),
            _ => None,
        }
    };
    known.map_or_else(|| class.to_string(), str::to_string)
}

/// A function a trigger stops at.
#[derive(Clone, Debug)]
pub struct Target {
    pub option: &'static str,
    pub found: lookup::Found,
}

struct Kept {
    /// Read cursor into the ring for the profile's list.
    cursor: u64,
    records: std::collections::VecDeque<Record>,
    dropped: u64,
    /// Records dropped from the front of `records` so far.
    popped: u64,
    /// The first record (counting popped ones) of the current interval of
    /// continuous profiling: records are given to the interval in which
    /// they are collected, so one still open at a cut goes to the next.
    cut: u64,
    /// Read cursor of the JFR stream.
    jfr_cursor: u64,
}

/// The armed triggers of one recording.
pub struct Gate {
    pub ttsp: bool,
    pub targets: Vec<Target>,
    start_mono: u64,
    start_wall_ns: u64,
    kept: Mutex<Kept>,
    vtables: OnceLock<VtableNames>,
    stopped: Mutex<Option<Vec<usize>>>,
    /// Whether the window was open when the triggers were removed.
    open_at_stop: std::sync::atomic::AtomicBool,
    /// The follower thread (see [`Gate::follow`]) and its stop flag.
    follower: Mutex<Option<std::thread::JoinHandle<()>>>,
    stop_following: Arc<std::sync::atomic::AtomicBool>,
    /// Timer switches the follower made (both ways).
    switches: Arc<std::sync::atomic::AtomicU64>,
}

/// What the follower does when the window opens (`true`) or closes.
pub type Apply = Box<dyn Fn(bool) + Send + 'static>;

static CURRENT: Mutex<Option<Arc<Gate>>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The gate of the running (or last stopped) recording, if it had triggers.
pub fn current() -> Option<Arc<Gate>> {
    lock(&CURRENT).clone()
}

/// Forgets the last recording's gate (a recording without triggers starts).
pub fn forget() {
    *lock(&CURRENT) = None;
}

fn resolve(option: &'static str, name: &str) -> Result<Target, String> {
    lookup::find(name, Kind::Function).map(|found| Target { option, found }).map_err(|e| format!("{option}={name}: {e}"))
}

fn variable(name: &str) -> usize {
    lookup::find(name, Kind::Variable).map(|f| f.addr).unwrap_or(0)
}

/// Resolves the options' triggers (none: `Ok(None)`) and arms them. Call
/// before any sampling starts: from then on only samples inside the window
/// are kept.
pub fn start(config: &Config, start_wall_ns: u64) -> Result<Option<Arc<Gate>>, String> {
    let mut steps = Vec::new();
    let mut targets = Vec::new();
    let (cycle, open_now);
    let mut vars = JvmVariables::default();
    if config.ttsp {
        for (option, name, action) in [("ttsp", TTSP_BEGIN, Action::Open), ("ttsp", TTSP_END, Action::Close), ("ttsp", TTSP_RELEASE, Action::Release)] {
            let t = resolve(option, name).map_err(|e| format!("{e} (is this a HotSpot JVM?)"))?;
            steps.push(PlannedStep { addr: t.found.addr, action });
            targets.push(t);
        }
        vars = JvmVariables {
            cur_vm_operation: variable("VMThread::_cur_vm_operation"),
            number_of_threads: variable("Threads::_number_of_threads"),
            safepoint_counter: variable("SafepointSynchronize::_safepoint_counter"),
        };
        (cycle, open_now) = (true, false);
    } else {
        match (config.begin.as_deref(), config.end.as_deref()) {
            (None, None) => return Ok(None),
            (b, e) => {
                if let Some(b) = b {
                    let t = resolve("begin", b)?;
                    steps.push(PlannedStep { addr: t.found.addr, action: Action::Open });
                    targets.push(t);
                }
                if let Some(e) = e {
                    let t = resolve("end", e)?;
                    if steps.first().is_some_and(|s| s.addr == t.found.addr) {
                        return Err(format!("begin and end name the same function ({})", t.found.name));
                    }
                    steps.push(PlannedStep { addr: t.found.addr, action: Action::Close });
                    targets.push(t);
                }
                cycle = b.is_some() && e.is_some();
                open_now = b.is_none();
            }
        }
    }
    records::init(RING);
    records::reset_totals();
    let cursor = records::written();
    traps::arm(&steps, cycle, open_now, vars)?;
    let gate = Arc::new(Gate {
        ttsp: config.ttsp,
        targets,
        start_mono: crate::sampling::cputime::monotonic_ns(),
        start_wall_ns,
        kept: Mutex::new(Kept { cursor, records: Default::default(), dropped: 0, popped: 0, cut: 0, jfr_cursor: cursor }),
        vtables: OnceLock::new(),
        stopped: Mutex::new(None),
        open_at_stop: Default::default(),
        follower: Mutex::new(None),
        stop_following: Default::default(),
        switches: Default::default(),
    });
    *lock(&CURRENT) = Some(gate.clone());
    Ok(Some(gate))
}

impl Gate {
    /// The log line at start.
    pub fn started_line(&self) -> String {
        let what: Vec<String> = self.targets.iter().map(|t| format!("{}={} at 0x{:x}", t.option, t.found.name, t.found.addr)).collect();
        format!(
            "{}: samples kept only {}; {} (code written with {})",
            if self.ttsp { "time-to-safepoint profiling" } else { "triggers armed" },
            if self.ttsp { "while threads are being stopped for a safepoint" } else { "between the trigger functions" },
            what.join(", "),
            traps::write_method()
        )
    }

    /// The CPU profile's title and header line saying its samples are
    /// gated, so a page or report shared later says so.
    pub fn profile_note(&self) -> (&'static str, (String, String)) {
        if self.ttsp {
            (
                "CPU profile while threads are stopped for safepoints",
                ("samples kept".into(), "only while threads were being stopped for a safepoint (ttsp)".into()),
            )
        } else {
            let what: Vec<String> = self.targets.iter().map(|t| format!("{}={}", t.option, t.found.name)).collect();
            ("CPU profile inside trigger windows", ("samples kept".into(), format!("only inside the windows {}", what.join(" … "))))
        }
    }

    /// Whether its triggers were removed.
    pub fn is_stopped(&self) -> bool {
        lock(&self.stopped).is_some()
    }

    /// Keeps the CPU engine's timers running only while the window is open,
    /// so a closed window costs no signal at all: a thread (oxprof's own;
    /// `on_start` runs on it first) waits for the trap handler's wake-up and
    /// calls `apply(open)`. An opening is applied only if the window is
    /// still open after `delay`: the many safepoints that are reached in
    /// microseconds never switch the timers on (at a 1 ms interval they
    /// would rarely have been sampled anyway). The handler still refuses
    /// samples outside the window, so what is kept does not depend on how
    /// quickly this thread follows.
    pub fn follow(&self, delay: std::time::Duration, on_start: impl FnOnce() + Send + 'static, apply: Apply) -> Result<(), String> {
        use std::sync::atomic::Ordering;
        let stop = self.stop_following.clone();
        let switches = self.switches.clone();
        let handle = std::thread::Builder::new()
            .name("oxprof-trigger".into())
            .spawn(move || {
                on_start();
                let mut applied = traps::window_open();
                apply(applied);
                let mut collected = std::time::Instant::now();
                while !stop.load(Ordering::SeqCst) {
                    // The ring holds 16,384 records: thousands of safepoints a
                    // second would overwrite it between dumps.
                    if collected.elapsed() >= COLLECT_PERIOD {
                        if let Some(g) = current().filter(|g| !g.is_stopped()) {
                            g.collect();
                        }
                        collected = std::time::Instant::now();
                    }
                    let seen = traps::window_seq();
                    let open = traps::window_open();
                    if open != applied {
                        if open {
                            std::thread::sleep(delay);
                            if traps::window_seq() != seen {
                                continue; // closed (or reopened) meanwhile: look again
                            }
                        }
                        apply(open);
                        applied = open;
                        switches.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    traps::wait_for_move(seen, COLLECT_PERIOD);
                }
            })
            .map_err(|e| format!("cannot start the trigger thread: {e}"))?;
        *lock(&self.follower) = Some(handle);
        Ok(())
    }

    /// Stops the follower thread (before the engine stops: it must not
    /// switch a stopped engine's timers back on).
    pub fn stop_follower(&self) {
        self.stop_following.store(true, std::sync::atomic::Ordering::SeqCst);
        traps::wake_waiters();
        if let Some(h) = lock(&self.follower).take() {
            let _ = h.join();
        }
    }

    /// Its part of the status line.
    pub fn status(&self) -> String {
        let (count, sum, _) = records::totals();
        if self.ttsp {
            format!("ttsp ({count} safepoints, {:.1} ms to reach them)", sum as f64 / 1e6)
        } else {
            let names: Vec<&str> = self.targets.iter().map(|t| t.found.name.as_str()).collect();
            format!("triggers {} ({count} windows)", names.join(" → "))
        }
    }

    /// Removes the breakpoints (once); returns the addresses still patched
    /// afterwards (none unless something else wrote there).
    pub fn stop(&self) -> Vec<usize> {
        let mut stopped = lock(&self.stopped);
        if let Some(left) = stopped.as_ref() {
            return left.clone();
        }
        self.open_at_stop.store(traps::window_open(), std::sync::atomic::Ordering::Relaxed);
        self.stop_follower();
        let left = traps::disarm();
        self.collect();
        // Stays `current` until the next recording's gate replaces it: the
        // JFR stream's last drain comes after the stop.
        *stopped = Some(left.clone());
        left
    }

    /// Moves new records from the ring into the kept list (at stop, dump
    /// and interval ends, and every 100 ms from the follower thread, so the
    /// ring never overflows between them).
    pub fn collect(&self) {
        let mut kept = lock(&self.kept);
        let mut fresh = Vec::new();
        let (next, lost) = records::read_from(kept.cursor, &mut fresh);
        kept.cursor = next;
        kept.dropped += lost;
        kept.records.extend(fresh);
        while kept.records.len() > KEEP {
            kept.records.pop_front();
            kept.dropped += 1;
            kept.popped += 1;
        }
    }

    fn vtables(&self) -> &VtableNames {
        self.vtables.get_or_init(|| VtableNames::of_object("/libjvm.so"))
    }

    /// A VM operation's name from its vtable, as the JVM's own log
    /// (`-Xlog:safepoint`) and JFR name it (`VM_ThreadDump` → `ThreadDump`).
    pub fn operation(&self, vtable: u64) -> Option<String> {
        if vtable == 0 || !self.ttsp {
            return None;
        }
        let class = self.vtables().class_of(vtable as usize)?;
        Some(operation_name(class))
    }

    /// Wall-clock ns since the epoch of a monotonic time.
    fn wall_of(&self, mono: u64) -> u64 {
        (self.start_wall_ns as i128 + mono as i128 - self.start_mono as i128).max(0) as u64
    }

    /// A record as a safepoint of the model.
    pub fn safepoint(&self, r: &Record, seq: u64) -> Safepoint {
        Safepoint {
            id: if r.id != 0 { r.id } else { seq },
            start_ns: self.wall_of(r.begin),
            ttsp_ns: r.sync.saturating_sub(r.begin),
            total_ns: (r.end != 0).then(|| r.end.saturating_sub(r.begin)),
            operation: self.operation(r.vtable),
            threads: (r.threads != 0).then_some(r.threads as u32),
            samples: r.samples,
        }
    }

    /// Every kept window, as safepoints.
    pub fn safepoints(&self) -> Vec<Safepoint> {
        self.collect();
        self.kept_from(&lock(&self.kept), 0)
    }

    /// The kept records from index `first` on, as safepoints numbered by
    /// their place in the whole recording.
    fn kept_from(&self, kept: &Kept, first: usize) -> Vec<Safepoint> {
        kept.records.iter().enumerate().skip(first).map(|(i, r)| self.safepoint(r, kept.popped + i as u64 + 1)).collect()
    }

    /// The kept windows of the current interval of continuous profiling
    /// (all of them without `loop=`), as safepoints; with `close`, the
    /// interval ends here and the next starts with the next record.
    pub fn interval_safepoints(&self, close: bool) -> Vec<Safepoint> {
        self.collect();
        let mut kept = lock(&self.kept);
        let list = self.kept_from(&kept, kept.cut.saturating_sub(kept.popped) as usize);
        if close {
            kept.cut = kept.popped + kept.records.len() as u64;
        }
        list
    }

    /// Records not yet given to the JFR stream, with their operation names.
    pub fn new_for_jfr(&self) -> Vec<(Record, Option<String>)> {
        let mut fresh = Vec::new();
        let (next, _) = {
            let kept = lock(&self.kept);
            records::read_from(kept.jfr_cursor, &mut fresh)
        };
        lock(&self.kept).jfr_cursor = next;
        fresh.into_iter().map(|r| (r, self.operation(r.vtable))).collect()
    }

    /// The summary line: windows, times, samples kept and refused, and
    /// whether every patched byte was restored.
    pub fn summary_line(&self) -> String {
        let (count, sum, max) = records::totals();
        let (hits, resumed, skipped, failures) = traps::counters();
        let list = self.safepoints();
        let stats = SafepointStats::of(&list);
        let dropped = lock(&self.kept).dropped;
        // Closed windows' samples, and those of a window still open (no
        // record yet, but its samples are in the profile).
        let kept_samples: u64 = list.iter().map(|s| s.samples).sum::<u64>() + traps::open_window_samples();
        let left = lock(&self.stopped).clone();
        let switches = self.switches.load(std::sync::atomic::Ordering::Relaxed);
        let restored = match left {
            None => "armed".to_string(),
            Some(l) if l.is_empty() => "restored".to_string(),
            Some(l) => format!("NOT restored at {}", l.iter().map(|a| format!("0x{a:x}")).collect::<Vec<_>>().join(" ")),
        };
        let ms = |ns: u64| format!("{:.3}ms", ns as f64 / 1e6);
        let (what, counted, t) = if self.ttsp { ("safepoint", "safepoints", "ttsp") } else { ("trigger", "windows", "window") };
        let (p50, p99, longest, total) = (ms(stats.ttsp_p50_ns), ms(stats.ttsp_p99_ns), ms(max.max(stats.ttsp_max_ns)), ms(sum));
        format!(
            "{what} summary: {counted}={count} {t}_p50={p50} {t}_p99={p99} {t}_max={longest} {t}_total={total} samples_kept={kept_samples} samples_outside={skipped} hits={hits} resumed={resumed} write_failures={failures} timer_switches={switches} dropped_records={dropped} open_at_stop={} code={restored}",
            if self.open_at_stop.load(std::sync::atomic::Ordering::Relaxed) { "yes" } else { "no" },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_named_as_the_jvm_names_them() {
        assert_eq!(operation_name("VM_ThreadDump"), "ThreadDump");
        assert_eq!(operation_name("JfrVMOperation<JfrRecorderService, &JfrRecorderService::safepoint_write()>"), "JFRCheckpoint");
        assert_eq!(operation_name("JfrSafepointWriteVMOperation"), "JFRSafepointWrite");
        assert_eq!(operation_name("JfrClassLoaderStatsVMOperation"), "ClassLoaderStatsOperation");
        assert_eq!(operation_name("StopOperation"), "JFROldObject");
        assert_eq!(operation_name("SomethingNew"), "SomethingNew");
    }
}
