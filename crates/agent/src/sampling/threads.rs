//! The thread registry: which threads have a sampling timer, and every
//! thread's name for the profile.
//!
//! Java threads are registered from the JVMTI ThreadStart/ThreadEnd events
//! (their full Java names). A watcher thread scans `/proc/self/task` so that
//! threads the JVM does not report (GC, JIT compiler, VM threads, threads
//! started before the agent) are sampled too, and dead ones are released.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::engine::{Engine, ThreadTimer};
use crate::log;

/// How often the watcher looks for new and dead threads.
const SCAN_PERIOD: Duration = Duration::from_millis(100);
/// Names kept for threads that have ended, at most.
const MAX_DEAD_NAMES: usize = 65_536;

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
    java_visible: std::collections::HashSet<u32>,
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

fn comm(tid: u32) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).ok()?;
    Some(s.trim_end().to_string())
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
        }
        inner.java_visible.insert(tid);
        if let Some(id) = java_id {
            inner.java_ids.insert(tid, id);
        }
    }

    /// A Java thread's `java.lang.Thread` id, where known.
    pub fn java_id(&self, tid: u32) -> Option<i64> {
        self.lock().java_ids.get(&tid).copied()
    }

    pub fn is_java_visible(&self, tid: u32) -> bool {
        self.lock().java_visible.contains(&tid)
    }

    /// The best known name of a thread.
    pub fn name(&self, tid: u32) -> Option<String> {
        let inner = self.lock();
        inner.names.get(&tid).cloned().or_else(|| comm(tid))
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
        if inner.names.len() > MAX_DEAD_NAMES {
            let live: std::collections::HashSet<u32> = list_tasks().into_iter().collect();
            inner.names.retain(|t, _| live.contains(t));
            inner.java_visible.retain(|t| live.contains(t));
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
    /// at each of its scans (every [`SCAN_PERIOD`]).
    pub fn start(self: &Arc<Self>, engine: Engine, interval_ns: u64, upkeep: impl Fn() + Send + 'static) -> std::io::Result<usize> {
        {
            let mut inner = self.lock();
            inner.engine = Some((engine, interval_ns));
            inner.timer_errors = 0;
            for tid in list_tasks() {
                Self::add_locked(&mut inner, tid);
            }
        }
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let me = self.clone();
        std::thread::Builder::new().name("oxprof-threads".into()).spawn(move || {
            me.exclude(current_tid());
            while me.generation.load(Ordering::SeqCst) == generation {
                std::thread::sleep(SCAN_PERIOD);
                me.scan();
                upkeep();
            }
        })?;
        Ok(self.lock().timers.len())
    }

    fn scan(&self) {
        let tasks = list_tasks();
        let mut inner = self.lock();
        if inner.engine.is_none() {
            return;
        }
        inner.timers.retain(|tid, _| tasks.contains(tid));
        for tid in tasks {
            Self::add_locked(&mut inner, tid);
        }
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
