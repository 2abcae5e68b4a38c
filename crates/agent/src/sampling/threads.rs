//! The thread registry: which threads have a sampling timer, and every
//! thread's name for the profile.
//!
//! Java threads are registered from the JVMTI ThreadStart/ThreadEnd events
//! (their full Java names). A watcher thread scans `/proc/self/task` so that
//! threads the JVM does not report (GC, JIT compiler, VM threads, threads
//! started before the agent) are sampled too, and dead ones are released.
//!
//! Names: a thread JVMTI reported keeps its Java name (longer than the
//! kernel's 15 characters, and `Thread.setName` does not reach the kernel
//! for other threads). Any other thread (the JVM's own, native threads,
//! attached or not to the JVM) is named by its kernel name
//! (`/proc/self/task/TID/comm`), read again at every scan (every
//! [`SCAN_PERIOD`], less often with many threads: [`SCAN_BUDGET`]) so that
//! a thread that renames itself
//! (`pthread_setname_np`, often right after it starts, under the name it
//! inherited from its creator) is known by its new name, also once it has
//! ended. The profile shows one name per thread: its name at the dump
//! (read then for a live thread), or its last name seen before it ended.
//! The watcher runs for the per-thread engines ([`Threads::start`]), and
//! for names only with the process-wide itimer engine
//! ([`Threads::follow_names`]).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::engine::{Engine, ThreadTimer};
use crate::log;

/// How often the watcher wakes: it runs its caller's upkeep at every wake,
/// and looks for new and dead threads at most this often.
const SCAN_PERIOD: Duration = Duration::from_millis(100);
/// CPU time the watcher may spend listing threads, per [`SCAN_PERIOD`]:
/// 0.2% of a core. Listing `/proc/self/task` costs the kernel about 2 µs per
/// thread (it builds a directory entry for each, every time): 2.3 ms per
/// scan with 1,000 threads, 2.3% of a core at one scan every 100 ms. After
/// a listing that cost more than this, the next waits as many periods as
/// its cost holds budgets (see [`periods_until_next_scan`]); a few dozen
/// threads still scan at every wake. Reading names again is not counted:
/// it is paid only for threads that ran since (the JVM's busy threads).
const SCAN_BUDGET: Duration = Duration::from_micros(200);
/// At most this many periods between two scans, whatever their cost.
const MAX_PERIODS_BETWEEN_SCANS: u32 = 20;

/// How many [`SCAN_PERIOD`]s to wait after a scan that cost `cost` of CPU
/// before the next: its cost in [`SCAN_BUDGET`]s, rounded up, from 1 to
/// [`MAX_PERIODS_BETWEEN_SCANS`].
fn periods_until_next_scan(cost: Duration) -> u32 {
    let budgets = cost.as_nanos().div_ceil(SCAN_BUDGET.as_nanos());
    u32::try_from(budgets).unwrap_or(u32::MAX).clamp(1, MAX_PERIODS_BETWEEN_SCANS)
}

/// How long to wait after a listing of `/proc/self/task` that cost `cost`
/// of CPU before the next, by the same rule as the watcher's scans: 100 ms,
/// longer for a dear one (the wall sampler lists the threads too).
pub fn listing_pause(cost: Duration) -> Duration {
    SCAN_PERIOD * periods_until_next_scan(cost)
}

/// Names kept for threads that have ended, at most.
const MAX_DEAD_NAMES: usize = 65_536;
/// Ends of Java threads kept for the wall sampler, at most.
const MAX_ENDS_KEPT: usize = 4_096;

#[derive(Default)]
struct Inner {
    /// Timers of the threads being sampled.
    timers: HashMap<u32, ThreadTimer>,
    /// Known thread names (kept after a thread ends, for the dump).
    names: HashMap<u32, String>,
    /// The running per-thread engine, if any.
    engine: Option<(Engine, u64)>,
    /// Threads never to sample (oxprof's own).
    excluded: Vec<u32>,
    /// Threads the JVM reported through JVMTI (application threads, as
    /// opposed to hidden JVM threads such as JIT compilers).
    java_visible: HashSet<u32>,
    /// Threads whose name came from JVMTI: never replaced by their kernel
    /// name (cut to 15 characters).
    java_named: HashSet<u32>,
    /// The Java threads JVMTI reported that have not ended (ThreadEnd),
    /// with when they were reported (`signal::monotonic_ns`).
    java_live: HashMap<u32, u64>,
    /// When Java threads ended (ThreadEnd), until the wall sampler takes it
    /// (see [`Threads::take_end`]).
    java_ended: HashMap<u32, u64>,
    /// The other threads' CPU time when their kernel name was last read:
    /// a thread that has not run since cannot have renamed itself.
    name_read_at_cpu: HashMap<u32, u64>,
    /// Their `java.lang.Thread` ids (`Thread.getId()`), where read.
    java_ids: HashMap<u32, i64>,
    timer_errors: u64,
    /// Timers are kept paused (triggers: outside their window).
    paused: bool,
}

/// Shared registry; clone the `Arc` to share it with the watcher.
#[derive(Default)]
pub struct Threads {
    inner: Mutex<Inner>,
    /// Bumped by every start and stop; a watcher runs while it sees its own.
    generation: AtomicU64,
    /// The watcher's scans and their CPU time, since the agent loaded.
    scans: AtomicU64,
    scan_ns: AtomicU64,
    /// Bumped when a Java thread is reported (see [`Threads::java_threads`]).
    java_generation: AtomicU64,
}

pub fn current_tid() -> u32 {
    // SAFETY: plain syscall.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// The process's threads now.
pub fn list_tasks() -> Vec<u32> {
    match std::fs::read_dir("/proc/self/task") {
        Ok(dir) => dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect(),
        Err(_) => Vec::new(),
    }
}

/// A thread's kernel name (one read: the file holds at most 16 bytes).
fn comm(tid: u32) -> Option<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(format!("/proc/self/task/{tid}/comm")).ok()?;
    let mut buf = [0u8; 64];
    let n = f.read(&mut buf).ok()?;
    let name = buf.get(..n)?;
    Some(String::from_utf8_lossy(name).trim_end().to_string())
}

impl Threads {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a thread JVMTI reported (ThreadStart, VMInit, the threads
    /// running when profiling starts): its Java name, replacing a truncated
    /// kernel name, and, where read, its `java.lang.Thread` id.
    pub fn name_java_thread(&self, tid: u32, name: String, java_id: Option<i64>) {
        let mut inner = self.lock();
        if !name.is_empty() {
            inner.names.insert(tid, name);
            inner.java_named.insert(tid);
        }
        inner.java_visible.insert(tid);
        if let std::collections::hash_map::Entry::Vacant(e) = inner.java_live.entry(tid) {
            e.insert(crate::sampling::cputime::monotonic_ns());
            self.java_generation.fetch_add(1, Ordering::Release);
        }
        if let Some(id) = java_id {
            inner.java_ids.insert(tid, id);
        }
    }

    /// A number that changes whenever a Java thread is reported: a caller
    /// holding the list from [`Threads::java_threads`] reads it again only then.
    pub fn java_generation(&self) -> u64 {
        self.java_generation.load(Ordering::Acquire)
    }

    /// The live Java threads JVMTI reported (ThreadStart, or running when
    /// profiling started), but not oxprof's own, with when they were
    /// reported (`signal::monotonic_ns`).
    pub fn java_threads(&self) -> Vec<(u32, u64)> {
        let inner = self.lock();
        inner.java_live.iter().map(|(&t, &at)| (t, at)).filter(|(t, _)| !inner.excluded.contains(t)).collect()
    }

    /// When Java thread `tid` ended (ThreadEnd), once: for the wall sampler,
    /// which accounts a thread's time up to its end.
    pub fn take_end(&self, tid: u32) -> Option<u64> {
        self.lock().java_ended.remove(&tid)
    }

    /// A Java thread's `java.lang.Thread` id, where known.
    pub fn java_id(&self, tid: u32) -> Option<i64> {
        self.lock().java_ids.get(&tid).copied()
    }

    pub fn is_java_visible(&self, tid: u32) -> bool {
        self.lock().java_visible.contains(&tid)
    }

    /// The best known name of a thread: its Java name, else its kernel
    /// name now, else (it ended) the last one seen.
    pub fn name(&self, tid: u32) -> Option<String> {
        let (known, java) = {
            let inner = self.lock();
            (inner.names.get(&tid).cloned(), inner.java_named.contains(&tid))
        };
        if java {
            return known;
        }
        comm(tid).or(known)
    }

    /// Reads the kernel names of `tasks` that have no Java name and keeps
    /// them, replacing the names kept before (a thread renamed itself).
    /// A thread whose name is known and that has not run since it was read
    /// (same CPU time: one `clock_gettime`, ~1 µs) is skipped; the others
    /// cost one read of `/proc/self/task/TID/comm`. Reads are made outside
    /// the lock (JVMTI's ThreadStart takes it).
    pub fn note_names(&self, tasks: impl IntoIterator<Item = u32>) {
        let wanted: Vec<(u32, Option<u64>)> = {
            let inner = self.lock();
            tasks
                .into_iter()
                .filter(|t| !inner.java_named.contains(t) && !inner.excluded.contains(t))
                .map(|t| (t, inner.names.contains_key(&t).then(|| inner.name_read_at_cpu.get(&t).copied()).flatten()))
                .collect()
        };
        if wanted.is_empty() {
            return;
        }
        // (tid, CPU time before the read, the name; None: it ended).
        let mut read: Vec<(u32, Option<(u64, String)>)> = Vec::new();
        for (tid, cpu_then) in wanted {
            // The CPU time first: a rename after the name's read moves it.
            match crate::sampling::cputime::cpu_ns_of(tid) {
                Some(cpu) if cpu_then == Some(cpu) => {}
                Some(cpu) => read.push((tid, comm(tid).map(|n| (cpu, n)))),
                None => read.push((tid, None)),
            }
        }
        let mut inner = self.lock();
        for (tid, got) in read {
            let Some((cpu, name)) = got else {
                inner.name_read_at_cpu.remove(&tid);
                continue;
            };
            // Named through JVMTI meanwhile: that name stays.
            if inner.java_named.contains(&tid) || name.is_empty() {
                continue;
            }
            inner.name_read_at_cpu.insert(tid, cpu);
            match inner.names.get_mut(&tid) {
                Some(kept) if *kept == name => {}
                Some(kept) => *kept = name,
                None => {
                    inner.names.insert(tid, name);
                }
            }
        }
    }

    /// Starts sampling a thread with the running engine (no-op if none or
    /// already sampled).
    pub fn add(&self, tid: u32) {
        let mut inner = self.lock();
        Self::add_locked(&mut inner, tid);
    }

    fn add_locked(inner: &mut Inner, tid: u32) {
        let Some((engine, interval)) = inner.engine else { return };
        if inner.timers.contains_key(&tid) || inner.excluded.contains(&tid) {
            return;
        }
        if let std::collections::hash_map::Entry::Vacant(e) = inner.names.entry(tid) {
            if let Some(n) = comm(tid) {
                e.insert(n);
            }
        }
        match engine.start_thread(tid, interval) {
            Ok(t) => {
                if inner.paused {
                    let _ = t.set_running(false, interval);
                }
                inner.timers.insert(tid, t);
            }
            Err(e) => {
                // The thread may have ended between listing and arming.
                inner.timer_errors += 1;
                if inner.timer_errors <= 3 && std::path::Path::new(&format!("/proc/self/task/{tid}")).exists() {
                    log::warn(&format!("cannot start {} timer on thread {tid}: {e}", engine.short()));
                }
            }
        }
    }

    /// Stops sampling a thread (it ended).
    pub fn remove(&self, tid: u32) {
        let mut inner = self.lock();
        inner.timers.remove(&tid);
        if inner.java_live.remove(&tid).is_some() {
            // The wall sampler takes each within a listing period (at most
            // 2 s); without it they pile up: kept to a few dozen KiB.
            if inner.java_ended.len() >= MAX_ENDS_KEPT {
                inner.java_ended.clear();
            }
            inner.java_ended.insert(tid, crate::sampling::cputime::monotonic_ns());
        }
        if inner.names.len() > MAX_DEAD_NAMES {
            let live: HashSet<u32> = list_tasks().into_iter().collect();
            inner.names.retain(|t, _| live.contains(t));
            inner.java_visible.retain(|t| live.contains(t));
            inner.java_named.retain(|t| live.contains(t));
            inner.name_read_at_cpu.retain(|t, _| live.contains(t));
            inner.java_ids.retain(|t, _| live.contains(t));
        }
    }

    /// oxprof's own threads (never sampled).
    pub fn excluded(&self) -> Vec<u32> {
        self.lock().excluded.clone()
    }

    /// Never sample this thread (oxprof's own threads).
    pub fn exclude(&self, tid: u32) {
        let mut inner = self.lock();
        let tasks = list_tasks();
        inner.excluded.retain(|t| tasks.contains(t));
        inner.excluded.push(tid);
        inner.timers.remove(&tid);
    }

    /// Starts a per-thread engine on every current thread and keeps watching
    /// for new ones until [`Threads::stop`]; the watcher also runs `upkeep`
    /// every [`SCAN_PERIOD`].
    pub fn start(self: &Arc<Self>, engine: Engine, interval_ns: u64, upkeep: impl Fn() + Send + 'static) -> std::io::Result<usize> {
        {
            let mut inner = self.lock();
            inner.engine = Some((engine, interval_ns));
            inner.timer_errors = 0;
            for tid in list_tasks() {
                Self::add_locked(&mut inner, tid);
            }
        }
        self.watch(upkeep)?;
        Ok(self.lock().timers.len())
    }

    /// Keeps the names of the process's threads up to date (as often as
    /// [`SCAN_BUDGET`] allows) until [`Threads::stop`], without sampling
    /// timers, and runs `upkeep` every [`SCAN_PERIOD`]: for the process-wide itimer engine,
    /// whose samples may be of threads that end before the dump.
    pub fn follow_names(self: &Arc<Self>, upkeep: impl Fn() + Send + 'static) -> std::io::Result<()> {
        self.note_names(list_tasks());
        self.watch(upkeep)
    }

    /// Starts the watcher thread: it runs `upkeep` every [`SCAN_PERIOD`]
    /// and scans as often as [`SCAN_BUDGET`] allows, until the next start
    /// or stop. Java threads do not wait for a scan: ThreadStart arms them.
    fn watch(self: &Arc<Self>, upkeep: impl Fn() + Send + 'static) -> std::io::Result<()> {
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let me = self.clone();
        std::thread::Builder::new().name("oxprof-threads".into()).spawn(move || {
            me.exclude(current_tid());
            let mut wait = 1;
            loop {
                std::thread::sleep(SCAN_PERIOD);
                // Stopped (or started again) during the sleep: nothing more.
                if me.generation.load(Ordering::SeqCst) != generation {
                    break;
                }
                wait -= 1;
                if wait == 0 {
                    let cost = me.scan();
                    wait = periods_until_next_scan(cost);
                    me.scans.fetch_add(1, Ordering::Relaxed);
                    me.scan_ns.fetch_add(u64::try_from(cost.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
                }
                upkeep();
            }
        })?;
        Ok(())
    }

    /// The watcher's scans so far and their CPU time in all (for the log).
    pub fn scan_cost(&self) -> (u64, u64) {
        (self.scans.load(Ordering::Relaxed), self.scan_ns.load(Ordering::Relaxed))
    }

    /// Arms timers on new threads and releases dead ones (when an engine
    /// runs), and reads the kernel names of the threads that ran since (see
    /// [`Threads::note_names`]). Returns the CPU time the listing and the
    /// timers took, not the names' reads.
    fn scan(&self) -> Duration {
        let before = crate::sampling::cputime::thread_cpu_ns();
        let tasks = list_tasks();
        {
            let mut inner = self.lock();
            if inner.engine.is_some() {
                let live: HashSet<u32> = tasks.iter().copied().collect();
                inner.timers.retain(|tid, _| live.contains(tid));
                for &tid in &tasks {
                    Self::add_locked(&mut inner, tid);
                }
            }
        }
        let cost = Duration::from_nanos(crate::sampling::cputime::thread_cpu_ns().saturating_sub(before));
        self.note_names(tasks);
        cost
    }

    /// Stops every timer and the watcher.
    pub fn stop(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        let mut inner = self.lock();
        inner.engine = None;
        inner.timers.clear();
        inner.paused = false;
    }

    /// Pauses or resumes every thread's timer, and those of threads found
    /// later. Returns how many timers were switched.
    pub fn set_paused(&self, paused: bool) -> usize {
        let mut inner = self.lock();
        inner.paused = paused;
        let Some((_, interval)) = inner.engine else { return 0 };
        inner.timers.values().filter(|t| t.set_running(!paused, interval).is_ok()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Renames the calling thread (at most 15 bytes).
    fn set_own_name(name: &str) {
        let c = std::ffi::CString::new(name).unwrap();
        // SAFETY: a NUL-terminated name for the calling thread.
        unsafe { libc::prctl(libc::PR_SET_NAME, c.as_ptr() as libc::c_ulong, 0, 0, 0) };
    }

    /// Burns a little CPU, so that the thread's CPU time moves.
    fn burn() {
        let start = std::time::Instant::now();
        let mut x = 1.0f64;
        while start.elapsed() < Duration::from_millis(2) {
            x = std::hint::black_box(x * 1.000_001 + 0.5 / x);
        }
    }

    #[test]
    fn scans_are_rationed_by_their_cost() {
        let ms = Duration::from_millis;
        assert_eq!(periods_until_next_scan(Duration::ZERO), 1);
        assert_eq!(periods_until_next_scan(Duration::from_micros(200)), 1);
        assert_eq!(periods_until_next_scan(Duration::from_micros(201)), 2);
        // 1,000 threads: about 2.2 ms a listing, one in 1.2 s.
        assert_eq!(periods_until_next_scan(Duration::from_micros(2_300)), 12);
        assert_eq!(periods_until_next_scan(Duration::from_micros(4_001)), MAX_PERIODS_BETWEEN_SCANS);
        assert_eq!(periods_until_next_scan(ms(60_000)), MAX_PERIODS_BETWEEN_SCANS);
    }

    /// A thread's kernel name is read again after it renamed itself, also
    /// once it has ended; a Java name is never replaced by the kernel's.
    #[test]
    fn names_follow_renames_but_not_over_java_names() {
        let threads = Threads::default();
        let (to_thread, commands) = mpsc::channel::<&'static str>();
        let (to_test, replies) = mpsc::channel::<u32>();
        let worker = std::thread::spawn(move || {
            for name in commands {
                if name.is_empty() {
                    break;
                }
                set_own_name(name);
                burn();
                to_test.send(current_tid()).unwrap();
            }
        });
        to_thread.send("tn-first").unwrap();
        let tid = replies.recv().unwrap();
        threads.note_names([tid]);
        assert_eq!(threads.name(tid).as_deref(), Some("tn-first"));
        to_thread.send("tn-second").unwrap();
        replies.recv().unwrap();
        threads.note_names([tid]);
        to_thread.send("tn-third").unwrap();
        replies.recv().unwrap();
        threads.note_names([tid]);
        to_thread.send("").unwrap();
        worker.join().unwrap();
        // Gone: the last name read stays.
        assert_eq!(threads.name(tid).as_deref(), Some("tn-third"));
        threads.note_names([tid]);
        assert_eq!(threads.name(tid).as_deref(), Some("tn-third"));

        // A Java name, longer than the kernel keeps, stays.
        let me = current_tid();
        threads.name_java_thread(me, "a-java-name-longer-than-fifteen".into(), None);
        burn();
        threads.note_names([me]);
        assert_eq!(threads.name(me).as_deref(), Some("a-java-name-longer-than-fifteen"));
    }
}
