//! signal-safe: CPU time spent in a piece of the signal handler, for the summary line's
//! means (`native_ns=`, `handler_ns=`). Signal-safe: a `clock_gettime`
//! (async-signal-safe) and relaxed atomic adds.
//!
//! Reading a thread's CPU clock is a system call (no vDSO for it), so only
//! one call in [`TIMED_EVERY`] is timed: the mean stays an unbiased estimate
//! while the handler pays for the clock on a few of its samples only.

use std::sync::atomic::{AtomicU64, Ordering};

/// One call in this many is timed (a power of two).
pub const TIMED_EVERY: u64 = 8;

/// This thread's CPU time (also used for the JFR stream writer's cost). Wall
/// time would count the times the thread is preempted inside the handler,
/// which on a loaded machine dominate the mean.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime is async-signal-safe and writes only `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

/// CPU time summed over the timed calls, and how many calls in all.
pub struct CpuSpent {
    ns: AtomicU64,
    timed: AtomicU64,
    calls: AtomicU64,
}

/// A call in progress: its start time when this call is one of the timed.
#[must_use]
pub struct Call(Option<u64>);

impl CpuSpent {
    pub const fn new() -> CpuSpent {
        CpuSpent { ns: AtomicU64::new(0), timed: AtomicU64::new(0), calls: AtomicU64::new(0) }
    }

    /// Starts a call; pass the result to [`CpuSpent::end`].
    pub fn begin(&self) -> Call {
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        Call((n & (TIMED_EVERY - 1) == 0).then(thread_cpu_ns))
    }

    /// Ends a call started with [`CpuSpent::begin`].
    pub fn end(&self, call: Call) {
        if let Call(Some(start)) = call {
            self.ns.fetch_add(thread_cpu_ns().wrapping_sub(start), Ordering::Relaxed);
            self.timed.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Mean nanoseconds per call, estimated from the timed calls, if any.
    pub fn mean_ns(&self) -> Option<u64> {
        let timed = self.timed.load(Ordering::Relaxed);
        (timed > 0).then(|| self.ns.load(Ordering::Relaxed) / timed)
    }

    /// Starts over (call off the signal path, before a recording).
    pub fn reset(&self) {
        self.ns.store(0, Ordering::Relaxed);
        self.timed.store(0, Ordering::Relaxed);
        self.calls.store(0, Ordering::Relaxed);
    }
}

impl Default for CpuSpent {
    fn default() -> Self {
        CpuSpent::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_is_counted_and_one_in_timed_every_is_timed() {
        let spent = CpuSpent::new();
        assert_eq!(spent.mean_ns(), None);
        for _ in 0..TIMED_EVERY * 3 + 1 {
            let call = spent.begin();
            // Burn some CPU so a timed call measures more than zero.
            let mut x = 1u64;
            for i in 0..200_000u64 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
            }
            spent.end(call);
        }
        assert_eq!(spent.calls(), TIMED_EVERY * 3 + 1);
        assert_eq!(spent.timed.load(Ordering::Relaxed), 4);
        assert!(spent.mean_ns().is_some_and(|ns| ns > 0));
        spent.reset();
        assert_eq!((spent.calls(), spent.mean_ns()), (0, None));
    }
}
