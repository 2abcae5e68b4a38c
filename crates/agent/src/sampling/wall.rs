//! The wall-clock event source (`event=wall`, `wall=INTERVAL`): every Java
//! thread is sampled at the interval whatever it is doing (running,
//! sleeping, waiting, parked, blocked, in native code or the VM), so the
//! profile shows where time goes off the CPU too.
//!
//! A sampler thread ticks at the interval. Each tick it looks at every
//! thread of the process (the list is read again at most every 100 ms, less
//! often in a process of hundreds of threads, where listing them is dear;
//! Java threads started meanwhile join from the thread registry), in
//! small groups spread over the interval (see [`run`]), and:
//! - a thread whose CPU time has not moved since its last wall sample (it
//!   has not run: it is still sleeping, waiting or blocked where it was) is
//!   counted again with that sample's stack and state, without a signal
//!   (`wall_table`, `SampleStore::add_to_slot`);
//! - the others are signalled (`SIGVTALRM`, queued with oxprof's cookie), at
//!   most [`signals_per_tick`] per tick (10,000 a second); the signal handler
//!   walks the stack as for CPU samples and reads the thread's state (see
//!   `signal::wall_sample`).
//!
//! Every sample weighs the wall time since the thread was last accounted
//! for, so a thread left out of a tick (over the signal budget, or its
//! signal merged with an earlier one) loses no time: each thread's samples
//! sum to the time it was alive during the recording. Threads the JVM does
//! not run Java on answer their first signal as such and are left alone
//! afterwards.
//!
//! The sampler sleeps (parked) in steps of at most [`SLEEP_STEP_NS`]; a stop
//! (the JVM exiting, `stop`) unparks it at once. It also checks, at each
//! wake-up and every 100 ms at most, that the wall signal's handler is still
//! oxprof's (`taken`): when another component replaced it, the sampler
//! warns once and stops signalling. Runs outside the signal handler.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

use oxprof_profile::jfr::writer::event_type;
use oxprof_profile::Profile;

use crate::log;
use crate::native::unwind as native_unwind;
use crate::output::Built;
use crate::sampling::cpu::{trace_frames, Summary};
use crate::sampling::cputime::{monotonic_ns, thread_cpu_ns};
use crate::sampling::signal::{self, SignalContext, WALL_COOKIE, WALL_SIGNAL};
use crate::sampling::store::SampleStore;
use crate::sampling::taken::Taken;
use crate::sampling::threads::{self, Threads};
use crate::sampling::wall_table::{self, NOT_JAVA, NO_SLOT};
use crate::source::{fmt_interval, BuildContext, EventSource, FrameMemo, StartContext, Started};

const STORE_SLOTS: usize = 1 << 17;
const STORE_FRAMES: usize = 1 << 22;
/// Signals per second at most; the threads over a tick's share wait for a
/// later tick and their next sample covers the time meanwhile. A thread left
/// out of ticks gets its accumulated time booked to the stack and state it
/// has when it is finally signalled, which skews per-state shares (Jetty,
/// 200 busy pool threads, 64 per tick: sleep read 0.84 of the truth); the
/// budget is set so ordinary pools are reached every tick.
pub const MAX_SIGNALS_PER_SECOND: u64 = 10_000;

/// Threads signalled per tick at most: the per-second budget's share, at
/// least 16 and at most 1,024 (500 at 50 ms, 100 at 10 ms).
pub fn signals_per_tick(interval_ns: u64) -> usize {
    (MAX_SIGNALS_PER_SECOND.saturating_mul(interval_ns) / 1_000_000_000).clamp(16, 1024) as usize
}
/// CPU time a thread gains after its sample by returning from the signal
/// and re-entering its wait (1–4 µs on this 6.18 kernel); below it the
/// thread counts as not having run. Waking up and blocking again elsewhere
/// costs more (16 µs and up here). `OXPROF_WALL_SLACK_NS` overrides it, and
/// the debug log shows the deltas seen.
const IDLE_SLACK_NS: u64 = 10_000;

/// CPU-time deltas seen by the reuse test, by power of two of ns (diagnostic).
static DELTAS: [AtomicU64; 24] = [const { AtomicU64::new(0) }; 24];
/// Threads looked at back to back before the sampler pauses (see `run`),
/// and the most pauses a tick.
const THREAD_GROUP: usize = 8;
const MAX_GROUPS: usize = 20;
/// The sampler's longest sleep: how soon it notices a stop that did not
/// unpark it. Each wake-up costs the sampler CPU (20–70 µs here, in a
/// virtual machine), so it sleeps no more often than its work asks.
const SLEEP_STEP_NS: u64 = 200_000_000;

static STORE: OnceLock<&'static SampleStore> = OnceLock::new();

/// The wall sample store, mapped on first use and kept for the process's life.
pub fn store() -> Result<&'static SampleStore, String> {
    SampleStore::leaked(&STORE, STORE_SLOTS, STORE_FRAMES, "the wall-clock sample store")
}

/// The store, if a wall recording ever made it.
pub fn stored() -> Option<&'static SampleStore> {
    STORE.get().copied()
}

/// The sampler's counts, for the summary line.
#[derive(Default)]
struct Stats {
    ticks: AtomicU64,
    /// Threads signalled, and counted again without a signal.
    signalled: AtomicU64,
    reused: AtomicU64,
    /// Threads that wanted a signal but were over a tick's budget.
    deferred: AtomicU64,
    /// Signals the kernel refused (the thread had ended).
    failed: AtomicU64,
    /// Threads looked at in the last tick.
    threads: AtomicU64,
    /// The sampler thread's CPU time.
    sampler_ns: AtomicU64,
}

/// A running wall-clock recording.
pub struct WallSource {
    interval_ns: u64,
    /// A CPU source runs too: JFR output keeps wall samples apart
    /// (`oxprof.WallClockSample`) instead of writing them as the JDK's
    /// execution samples.
    with_cpu: bool,
    stop: Arc<AtomicBool>,
    sampler: Mutex<Option<JoinHandle<()>>>,
    stats: Arc<Stats>,
    /// Whether another component took the wall signal.
    taken: Arc<Taken>,
}

/// Starts wall-clock sampling when the options ask for it.
pub fn start(cx: &StartContext) -> Result<Started, String> {
    let Some(interval_ns) = cx.config.wall else { return Ok(None) };
    let config = cx.config;
    let asgct = cx.asgct.ok_or("this JVM does not export AsyncGetCallTrace; wall-clock profiling needs HotSpot (JDK 11 or later)")?;
    let store = store()?;
    store.reset(); // no wall handler is armed: safe
    signal::install_wall().map_err(|e| format!("cannot install the SIGVTALRM handler: {e}"))?;
    wall_table::clear();
    if !native_unwind::init() && config.cstack != crate::options::CStack::No {
        log::warn("no safe memory probe (pipe, process_vm_readv): native stacks keep only the interrupted function");
    }
    let mut ctx = SignalContext::new(store, asgct, cx.vm, config.jstackdepth, interval_ns, config.threads);
    ctx.set_cstack(config.cstack, false);
    signal::arm_wall(ctx);
    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(Stats::default());
    let advice = "stop the other component that handles SIGVTALRM, or profile without event=wall".to_string();
    let taken = Arc::new(Taken::new(WALL_SIGNAL, "wall-clock samples", "wall", advice));
    let (stop2, stats2, registry, taken2) = (stop.clone(), stats.clone(), cx.threads.clone(), taken.clone());
    let spawned = std::thread::Builder::new().name("oxprof-wall".into()).spawn(move || {
        registry.exclude(threads::current_tid());
        run(interval_ns, store, &stop2, &taken2, &stats2, &registry);
        stats2.sampler_ns.store(thread_cpu_ns(), Ordering::Relaxed);
    });
    let handle = match spawned {
        Ok(h) => h,
        Err(e) => {
            drop(signal::disarm_wall());
            return Err(format!("cannot start the wall-clock sampler thread: {e}"));
        }
    };
    let line = format!(
        "started wall-clock profiling: interval {}, SIGVTALRM, at most {} threads signalled per tick",
        fmt_interval(interval_ns),
        signals_per_tick(interval_ns)
    );
    let source = WallSource { interval_ns, with_cpu: config.cpu.is_some(), stop, sampler: Mutex::new(Some(handle)), stats, taken };
    Ok(Some((Box::new(source), line)))
}

/// Queues oxprof's wall signal to `tid`; false when the thread is gone.
fn signal_thread(pid: i32, tid: u32) -> bool {
    // SAFETY: a zeroed siginfo_t is valid plain data.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    info.si_signo = WALL_SIGNAL;
    info.si_code = libc::SI_QUEUE;
    let p = &mut info as *mut libc::siginfo_t as *mut u8;
    // SAFETY: the SI_QUEUE fields (pid at 16, uid at 20, value at 24) lie
    // inside the 128-byte siginfo_t; unaligned writes are fine.
    unsafe {
        p.add(16).cast::<i32>().write_unaligned(pid);
        p.add(20).cast::<u32>().write_unaligned(libc::getuid());
        p.add(24).cast::<usize>().write_unaligned(WALL_COOKIE);
    }
    // SAFETY: rt_tgsigqueueinfo reads `info`; a thread of our own process.
    unsafe { libc::syscall(libc::SYS_rt_tgsigqueueinfo, pid, tid as libc::pid_t, WALL_SIGNAL, &info as *const libc::siginfo_t) == 0 }
}

/// Sleeps until `monotonic_ns()` reaches `until`, parked in steps of at most
/// [`SLEEP_STEP_NS`]; returns early (false) when `stop` is set (the stopper
/// unparks the sampler) or the wall signal was found taken.
fn sleep_until(until: u64, stop: &AtomicBool, taken: &Taken) -> bool {
    loop {
        if stop.load(Ordering::Acquire) || taken.check(false) {
            return false;
        }
        let left = until.saturating_sub(monotonic_ns());
        if left == 0 {
            return true;
        }
        std::thread::park_timeout(std::time::Duration::from_nanos(left.min(SLEEP_STEP_NS)));
    }
}

/// When group `k` of `groups` is due in a tick of `interval_ns` that began
/// at `tick_start` (no overflow, whatever the interval).
fn group_due(tick_start: u64, interval_ns: u64, k: u64, groups: u64) -> u64 {
    let offset = (interval_ns as u128 * k as u128 / groups.max(1) as u128).min(u64::MAX as u128) as u64;
    tick_start.saturating_add(offset)
}

/// The sampler loop (see the module comment). Each tick goes through the
/// threads in groups of [`THREAD_GROUP`] spread evenly over the interval, so
/// every thread is looked at (counted again, or signalled) at the same
/// point of every tick: its samples are one interval apart, and no burst of
/// signals wakes every waiting thread at once. Each group's moment costs
/// the sampler a wake-up (20–70 µs of CPU in a virtual machine), even when
/// all its threads are counted again without a signal. (Sending a tick's
/// signals in one burst made a saturated Jetty's 2 ms sleeps read 0.67–0.84
/// of their truth; spread out, 0.96, as async-profiler, which spreads them
/// too.)
/// Tick lengths drawn uniformly from half to one and a half intervals.
/// Fixed ticks would look at a thread at the same point of every cycle of
/// work that repeats at a divisor or multiple of the interval (busy 2 ms
/// every 20 ms, sampled every 50 ms: seen at two phases only, running
/// 13–33% of the time instead of 10%); random ones see every phase alike.
/// Each sample weighs the time since its thread was last accounted for, so
/// totals do not depend on the lengths.
struct Jitter(u64);

impl Jitter {
    fn new(seed: u64) -> Jitter {
        Jitter(seed | 1)
    }

    /// A length in [interval/2, 3·interval/2), xorshift64-drawn.
    fn around(&mut self, interval_ns: u64) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        let half = interval_ns / 2;
        half.saturating_add(x % interval_ns.max(1))
    }
}

/// Books a Java thread's wall time from its last sample up to its end
/// (ThreadEnd) to that sample's stack, once the sampler found it gone.
fn account_end(registry: &Threads, store: &SampleStore, tid: u32) {
    // Read before the slot: a slot from before the store was emptied
    // (continuous profiling) is then refused.
    let generation = store.generation();
    let Some(end) = registry.take_end(tid) else { return };
    match wall_table::last(tid) {
        Some((slot, _)) if slot != NO_SLOT && slot != NOT_JAVA => {
            if let Some(weight) = wall_table::take_weight(tid, end).filter(|&w| w > 0) {
                store.add_to_slot(slot, generation, tid, weight);
            }
        }
        _ => {}
    }
}

fn run(interval_ns: u64, store: &'static SampleStore, stop: &AtomicBool, taken: &Taken, stats: &Stats, registry: &Threads) {
    // SAFETY: getpid cannot fail.
    let pid = unsafe { libc::getpid() };
    let start = monotonic_ns();
    // Threads known: whether the JVM runs Java on them.
    let mut known: HashMap<u32, bool> = HashMap::new();
    let mut tids: Vec<u32> = Vec::new();
    // The same threads, to add the Java threads started since the listing.
    let mut listed: std::collections::HashSet<u32> = std::collections::HashSet::new();
    // Those added so, with when they started: their time counts from then.
    let mut joined_at: HashMap<u32, u64> = HashMap::new();
    let mut java_generation = registry.java_generation();
    let mut next_list = 0;
    let mut first_list = true;
    // Where the pass through the list starts; it moves on only when the
    // budget left threads out, so phases stay put otherwise.
    let mut rotation = 0usize;
    let mut tick_start = start;
    let mut jitter = Jitter::new(start ^ u64::from(pid.unsigned_abs()));
    let budget = signals_per_tick(interval_ns);
    let slack = std::env::var("OXPROF_WALL_SLACK_NS").ok().and_then(|v| v.parse().ok()).unwrap_or(IDLE_SLACK_NS);
    while !stop.load(Ordering::Acquire) && !taken.check(false) {
        let now = monotonic_ns();
        if now >= next_list {
            // The store's next pages resident before the handler gets there.
            store.prefault_ahead();
            java_generation = registry.java_generation();
            let excluded = registry.excluded();
            let cost_from = thread_cpu_ns();
            tids = threads::list_tasks().into_iter().filter(|t| !excluded.contains(t)).collect();
            let cost = std::time::Duration::from_nanos(thread_cpu_ns().saturating_sub(cost_from));
            listed = tids.iter().copied().collect();
            // Threads joined from the registry that ended before their first visit.
            joined_at.retain(|tid, _| listed.contains(tid));
            known.retain(|tid, _| {
                let alive = listed.contains(tid);
                if !alive {
                    account_end(registry, store, *tid);
                    wall_table::release(*tid);
                }
                alive
            });
            // The names of the threads that may have samples (not those
            // found without Java): kept for a thread that ends before the
            // dump and not reported by JVMTI (a JIT compiler thread), and
            // read again for one that renamed itself.
            registry.note_names(tids.iter().copied().filter(|t| known.get(t) != Some(&false)));
            // Every 100 ms at most; listing costs the kernel about 2 µs a
            // thread, so with hundreds of threads it waits longer (see
            // `threads::listing_pause`), while Java threads started
            // meanwhile join from the registry.
            let pause = u64::try_from(threads::listing_pause(cost).as_nanos()).unwrap_or(u64::MAX);
            next_list = now.saturating_add(interval_ns.max(pause));
        } else if registry.java_generation() != java_generation {
            java_generation = registry.java_generation();
            for (tid, at) in registry.java_threads() {
                if listed.insert(tid) {
                    tids.push(tid);
                    joined_at.insert(tid, at.max(start));
                }
            }
        }
        let count = tids.len();
        // Groups of THREAD_GROUP, but no more than MAX_GROUPS pauses a tick
        // (each costs the sampler a wake-up).
        let group = THREAD_GROUP.max(count.div_ceil(MAX_GROUPS));
        let groups = count.div_ceil(group).max(1) as u64;
        let (mut sent, mut deferred) = (0usize, 0u64);
        let mut ended: Vec<u32> = Vec::new();
        // This tick's length: the interval on average, drawn afresh each tick.
        let tick_len = jitter.around(interval_ns);
        for i in 0..count {
            // This group's moment in the tick. Every thread is looked at
            // (counted again, or signalled) at its group's moment: deciding
            // earlier (at the tick's start) whether a thread ran, and
            // signalling it only at its moment, read a thread that burns 20
            // ms, then sleeps, waits and parks as running 19.5–20.7% of
            // its wall time against a truth of 23.4% (`wall_jfr`).
            if i > 0 && i % group == 0 && !sleep_until(group_due(tick_start, tick_len, (i / group) as u64, groups), stop, taken) {
                break;
            }
            let Some(&tid) = tids.get((rotation + i) % count) else { continue };
            let seen_at = monotonic_ns();
            let java = known.entry(tid).or_insert_with(|| {
                let since = joined_at.remove(&tid).unwrap_or(if first_list { start } else { seen_at });
                wall_table::claim(tid, since);
                true
            });
            if !*java {
                continue;
            }
            // Read before the slot: a slot from before the store was
            // emptied (continuous profiling) is then refused.
            let generation = store.generation();
            match wall_table::last(tid) {
                Some((NOT_JAVA, _)) => {
                    *java = false;
                    continue;
                }
                Some((slot, cpu_then)) if slot != NO_SLOT => {
                    let Some(cpu) = crate::sampling::cputime::cpu_ns_of(tid) else {
                        // Ended since the listing.
                        ended.push(tid);
                        continue;
                    };
                    let d = cpu.saturating_sub(cpu_then);
                    DELTAS[(64 - d.leading_zeros() as usize).min(23)].fetch_add(1, Ordering::Relaxed);
                    if d <= slack {
                        if let Some(weight) = wall_table::take_weight(tid, seen_at).filter(|&w| w > 0) {
                            store.add_to_slot(slot, generation, tid, weight);
                            stats.reused.fetch_add(1, Ordering::Relaxed);
                        }
                        continue;
                    }
                }
                _ => {}
            }
            if sent >= budget {
                deferred += 1;
                continue;
            }
            sent += 1;
            if signal_thread(pid, tid) {
                stats.signalled.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let gone = std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            stats.failed.fetch_add(1, Ordering::Relaxed);
            if gone {
                // Ended since the listing.
                ended.push(tid);
            } else {
                known.remove(&tid);
                wall_table::release(tid);
            }
        }
        // Threads that ended between two listings leave the list now; a
        // Java thread's time up to its end (ThreadEnd) goes to its last
        // sample's stack.
        if !ended.is_empty() {
            for tid in ended.drain(..) {
                account_end(registry, store, tid);
                known.remove(&tid);
                joined_at.remove(&tid);
                wall_table::release(tid);
                listed.remove(&tid);
            }
            tids.retain(|t| listed.contains(t));
        }
        first_list = false;
        if deferred > 0 {
            rotation = rotation.wrapping_add(sent);
        }
        stats.deferred.fetch_add(deferred, Ordering::Relaxed);
        stats.threads.store(count as u64, Ordering::Relaxed);
        stats.ticks.fetch_add(1, Ordering::Relaxed);
        tick_start = tick_start.saturating_add(tick_len);
        let now = monotonic_ns();
        if tick_start <= now {
            tick_start = now; // late: skip the missed ticks (the weights cover them)
        }
        sleep_until(tick_start, stop, taken);
    }
}

impl EventSource for WallSource {
    fn key(&self) -> &'static str {
        "wall"
    }

    fn status(&self) -> String {
        let n = stored().map(|s| s.stats().recorded).unwrap_or(0);
        let taken = self.taken.note().map(|n| format!("; {n}")).unwrap_or_default();
        format!(
            "wall (interval {}, {} threads): {}{taken}",
            fmt_interval(self.interval_ns),
            self.stats.threads.load(Ordering::Relaxed),
            crate::source::fmt_samples(n)
        )
    }

    /// Alone, wall samples are written as the JDK's `jdk.ExecutionSample`
    /// (`jdk.NativeMethodSample` in native code), so JFR tools show them;
    /// the setting `event` = `wall` tells oxprof's reader what they are.
    /// Beside a CPU source they are `oxprof.WallClockSample` events.
    fn jfr_settings(&self) -> Vec<(u64, &'static str, String)> {
        let period = fmt_interval(self.interval_ns).replace("ms", " ms").replace("us", " us");
        let engine = "SIGVTALRM wall-clock sampler".to_string();
        if self.with_cpu {
            let id = event_type::WALL_CLOCK_SAMPLE;
            return vec![(id, "enabled", "true".into()), (id, "period", period), (id, "engine", engine)];
        }
        let (id, native) = (event_type::EXECUTION_SAMPLE, event_type::NATIVE_METHOD_SAMPLE);
        vec![
            (id, "enabled", "true".into()),
            (id, "period", period.clone()),
            (id, "engine", engine),
            (id, "event", "wall".into()),
            (native, "enabled", "true".into()),
            (native, "period", period),
        ]
    }

    fn stop(&mut self, _env: Option<(crate::jvmti::Jvmti, crate::jvmti::Jni)>) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.sampler.lock().unwrap_or_else(|e| e.into_inner()).take() {
            h.thread().unpark();
            let _ = h.join();
        }
        // Taken since the sampler last looked: counted (and warned about) too.
        self.taken.check(true);
        drop(signal::disarm_wall());
    }

    fn build(&self, cx: &BuildContext) -> Built {
        let started = Instant::now();
        let (profile, s, held) = self.profile(cx);
        log::debug(&format!("wall profile built in {:.1} ms", started.elapsed().as_secs_f64() * 1e3));
        let st = &self.stats;
        let (signalled, reused) = (st.signalled.load(Ordering::Relaxed), st.reused.load(Ordering::Relaxed));
        let sampler_ns = match st.sampler_ns.load(Ordering::Relaxed) {
            0 => None,
            ns => Some(ns),
        };
        // `samples=` is what the profile holds (intervals of wall time, as
        // the flame graph's header and JFR's events count them); `recorded=`
        // the stack records behind them: `walked=` by the signal handler,
        // `reused=` counted again without a signal (idle threads).
        let mut summary_line = format!(
            "wall summary: samples={held} recorded={} walked={} reused={reused} signalled={signalled} deferred={} failed_signals={} ticks={} threads={} failed={} failed_pct={:.2} frozen={} frozen_pct={:.2} dropped={} handler_ns={} sampler_ns_per_thread_tick={}",
            s.samples,
            s.samples.saturating_sub(reused),
            st.deferred.load(Ordering::Relaxed),
            st.failed.load(Ordering::Relaxed),
            st.ticks.load(Ordering::Relaxed),
            st.threads.load(Ordering::Relaxed),
            s.failed,
            s.failed_pct(),
            s.frozen,
            s.frozen_pct(),
            s.dropped,
            signal::wall_handler_mean_ns().unwrap_or(0),
            sampler_ns.map_or("n/a".to_string(), |ns| (ns / (signalled + reused).max(1)).to_string()),
        );
        summary_line.push_str(&self.taken.summary_field());
        log::debug(&format!("wall reuse test CPU deltas (log2 ns buckets): {:?}", DELTAS.iter().map(|a| a.load(Ordering::Relaxed)).collect::<Vec<_>>()));
        Built { label: "Wall clock".into(), key: "wall", profile, summary_line, leak: None }
    }
}

impl WallSource {
    /// The profile, the counts of its stack records, and the samples it
    /// holds (wall time in whole intervals).
    fn profile(&self, cx: &BuildContext) -> (Profile, Summary, u64) {
        let Some(store) = stored() else { return (Profile::default(), Summary::default(), 0) };
        let traces = crate::sampling::interval::read(store, cx.close_interval);
        crate::native::symbols::resolver().refresh();
        let mut summary = Summary { dropped: store.stats().dropped, ..Summary::default() };
        let config = &cx.rec.config;
        let mut profile = Profile::new(cx.rec.meta("Wall-clock profile", "wall", "SIGVTALRM wall-clock sampler", self.interval_ns, "ns"));
        let mut ids = Vec::new();
        let mut memo = FrameMemo::new(cx);
        let mut held = 0u64;
        for t in &traces {
            summary.samples += t.samples;
            ids.clear();
            trace_frames(t, (config.threads, cx.with_state()), cx, (&mut profile, &mut memo), &mut ids, &mut summary);
            // A sample weighs the time since the thread's previous one: it
            // counts as that many intervals, as ticks of a wall clock.
            let ticks = ((t.total + self.interval_ns / 2) / self.interval_ns.max(1)).max(u64::from(t.total > 0));
            profile.add(ids.clone(), ticks, t.total);
            held += ticks;
        }
        drop(memo);
        crate::native::symbols::resolver().done();
        let m = &mut profile.meta;
        m.extra.push(("samples".into(), held.to_string()));
        m.extra.push((
            "stack records".into(),
            format!(
                "{} ({} walked, the rest counted again without a signal)",
                summary.samples,
                summary.samples.saturating_sub(self.stats.reused.load(Ordering::Relaxed))
            ),
        ));
        m.extra.push(("failed walks".into(), format!("{} ({:.2}% of Java samples)", summary.failed, summary.failed_pct())));
        if summary.frozen > 0 {
            m.extra.push(crate::sampling::cpu::frozen_meta(&summary));
        }
        m.extra.push(("dropped".into(), summary.dropped.to_string()));
        if let Some(note) = self.taken.note() {
            m.extra.push(("signal taken".into(), note));
        }
        (profile, summary, held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_lengths_average_the_interval_and_cover_its_range() {
        let mut j = Jitter::new(12345);
        let n = 100_000u64;
        let lens: Vec<u64> = (0..n).map(|_| j.around(50_000_000)).collect();
        assert!(lens.iter().all(|&l| (25_000_000..75_000_000).contains(&l)));
        let mean = lens.iter().sum::<u64>() / n;
        assert!((49_500_000..50_500_000).contains(&mean), "{mean}");
        // Every tenth of the range drawn about as often.
        let mut bins = [0u64; 10];
        for l in &lens {
            bins[((l - 25_000_000) / 5_000_000) as usize] += 1;
        }
        assert!(bins.iter().all(|&b| (9_000..11_000).contains(&b)), "{bins:?}");
    }

    #[test]
    fn the_signal_budget_follows_the_interval() {
        assert_eq!(signals_per_tick(50_000_000), 500);
        assert_eq!(signals_per_tick(10_000_000), 100);
        assert_eq!(signals_per_tick(100_000), 16);
        assert_eq!(signals_per_tick(1_000_000_000), 1024);
    }

    /// Groups are spread over the tick; an interval of years (the options
    /// take up to u64 nanoseconds) neither overflows nor wraps around.
    #[test]
    fn group_moments_do_not_overflow() {
        assert_eq!(group_due(1_000, 30_000_000, 1, 3), 10_001_000);
        assert_eq!(group_due(1_000, 30_000_000, 2, 3), 20_001_000);
        let huge = 999_999_999 * 1_000_000_000;
        assert_eq!(group_due(5, huge, 19, 20), 5 + huge / 20 * 19);
        assert_eq!(group_due(5, u64::MAX, 3, 3), u64::MAX);
    }

    /// A stop is noticed within a sleep step, whatever is left to sleep.
    #[test]
    fn sleeps_end_soon_after_a_stop() {
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        // A signal oxprof never installs: never found taken.
        let taken = Taken::new(libc::SIGUSR1, "wall-clock samples", "wall", String::new());
        let stop2 = stop.clone();
        let setter = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            stop2.store(true, Ordering::Release);
        });
        let started = Instant::now();
        assert!(!sleep_until(monotonic_ns() + 3_600_000_000_000, &stop, &taken));
        setter.join().unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
        stop.store(false, Ordering::Release);
        assert!(sleep_until(monotonic_ns() + 30_000_000, &stop, &taken));
    }
}
