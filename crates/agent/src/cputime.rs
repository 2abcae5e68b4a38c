//! CPU time spent in a piece of the signal handler, summed for the summary
//! line's mean (`native_ns=`, `handler_ns=`). Signal-safe: a
//! `clock_gettime` (async-signal-safe) and relaxed atomic adds.

use std::sync::atomic::{AtomicU64, Ordering};

/// This thread's CPU time: wall time would count the times the thread is
/// preempted inside the handler, which on a loaded machine dominate the mean.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime is async-signal-safe and writes only `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

/// CPU time summed over calls, and how many calls.
pub struct CpuSpent {
    ns: AtomicU64,
    calls: AtomicU64,
}

impl CpuSpent {
    pub const fn new() -> CpuSpent {
        CpuSpent { ns: AtomicU64::new(0), calls: AtomicU64::new(0) }
    }

    /// Counts one call that started at `start` (a [`thread_cpu_ns`] reading).
    pub fn add_since(&self, start: u64) {
        self.ns.fetch_add(thread_cpu_ns().wrapping_sub(start), Ordering::Relaxed);
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Mean nanoseconds per call, if any.
    pub fn mean_ns(&self) -> Option<u64> {
        let calls = self.calls();
        (calls > 0).then(|| self.ns.load(Ordering::Relaxed) / calls)
    }

    /// Starts over (call off the signal path, before a recording).
    pub fn reset(&self) {
        self.ns.store(0, Ordering::Relaxed);
        self.calls.store(0, Ordering::Relaxed);
    }
}

impl Default for CpuSpent {
    fn default() -> Self {
        CpuSpent::new()
    }
}
