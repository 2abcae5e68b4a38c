//! signal-safe: The clocks the agent reads (the monotonic clock, thread CPU clocks), and
//! CPU time spent in a piece of the signal handler, for the summary line's
//! means (`native_ns=`, `handler_ns=`). Signal-safe: a `clock_gettime`
//! (async-signal-safe) and relaxed atomic adds.
//!
//! Reading a thread's CPU clock is a system call (no vDSO for it; about
//! 0.85 µs here), so only one call in [`TIMED_EVERY`] is timed: the mean
//! stays an unbiased estimate while the handler pays for the clock on a few
//! of its samples only. The handler's parts are timed on other samples than
//! the handler as a whole ([`Call::parts_timed`]), so that their clock reads
//! do not count in the handler's mean.

use std::sync::atomic::{AtomicU64, Ordering};

/// One call in this many is timed (a power of two).
pub const TIMED_EVERY: u64 = 32;

/// CLOCK_MONOTONIC in nanoseconds: the time of samples, events and JFR
/// ticks (0 if it cannot be read).
pub fn monotonic_ns() -> u64 {
    read_clock(libc::CLOCK_MONOTONIC).unwrap_or(0)
}

/// This thread's CPU time (also used for the JFR stream writer's cost). Wall
/// time would count the times the thread is preempted inside the handler,
/// which on a loaded machine dominate the mean.
pub fn thread_cpu_ns() -> u64 {
    read_clock(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0)
}

/// Reads `clock` in nanoseconds; `None` when it cannot be read (another
/// thread's clock once that thread has ended). Async-signal-safe.
fn read_clock(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime is async-signal-safe and writes only `ts`; a
    // bad clock id is an error.
    (unsafe { libc::clock_gettime(clock, &mut ts) } == 0).then(|| (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64))
}

/// The CPU-time clock Linux gives any thread of the process
/// (`MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`), to read or to time on.
pub fn thread_cpu_clock(tid: u32) -> libc::clockid_t {
    ((!tid) << 3) as libc::clockid_t | 6
}

/// `tid`'s CPU time, from its [`thread_cpu_clock`]; `None` when the thread
/// has ended. One system call, no file.
pub fn cpu_ns_of(tid: u32) -> Option<u64> {
    read_clock(thread_cpu_clock(tid))
}

/// CPU time summed over the timed calls, and how many calls in all.
pub struct CpuSpent {
    ns: AtomicU64,
    timed: AtomicU64,
    calls: AtomicU64,
}

/// The start of a timed call: the second of two clock reads. The first
/// system call a signal handler makes also runs the kernel's work left
/// pending for the thread's return to user space (about 3 µs a signal on
/// the perf_events engine here), which without it would run at the
/// handler's return, outside the handler: timed from one read, a native
/// part measured 6.9 µs, from the second 3.6 µs (javac, 10 ms).
fn start_ns() -> u64 {
    let _ = thread_cpu_ns();
    thread_cpu_ns()
}

/// The call number `n` mixed (splitmix64's finalizer), so that the calls
/// chosen for timing do not fall into step with a pattern in the calls:
/// every 32nd signal of two threads sampled in turn would always be the
/// same thread's.
fn scramble(mut n: u64) -> u64 {
    n = (n ^ (n >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    n = (n ^ (n >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    n ^ (n >> 31)
}

/// A call in progress: its start time when this call is one of the timed,
/// and whether its parts are to be timed instead.
#[must_use]
pub struct Call(Option<u64>, bool);

impl Call {
    /// Whether the parts of this call are the ones to time (a call whose
    /// whole is not timed: see the module's note).
    pub fn parts_timed(&self) -> bool {
        self.1
    }
}

impl CpuSpent {
    pub const fn new() -> CpuSpent {
        CpuSpent { ns: AtomicU64::new(0), timed: AtomicU64::new(0), calls: AtomicU64::new(0) }
    }

    /// Starts a call, counted; pass the result to [`CpuSpent::end`].
    pub fn begin(&self) -> Call {
        let call = self.calls.fetch_add(1, Ordering::Relaxed);
        let n = scramble(call) & (TIMED_EVERY - 1);
        // The first call times the whole and the second its parts, so that
        // a short recording has both means.
        Call((n == 0).then(start_ns), n != 0 && (n == TIMED_EVERY / 2 || call == 1))
    }

    /// Starts a part of a call, timed if `timed` (the whole call's
    /// [`Call::parts_timed`]) and not counted in [`CpuSpent::calls`].
    pub fn begin_if(&self, timed: bool) -> Call {
        Call(timed.then(start_ns), false)
    }

    /// Ends a call started with [`CpuSpent::begin`].
    pub fn end(&self, call: Call) {
        if let Call(Some(start), _) = call {
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
        let timed = spent.timed.load(Ordering::Relaxed);
        assert!((1..=8).contains(&timed), "about one call in {TIMED_EVERY}: {timed}");
        // A short run has both: the first call timed whole, the second its parts.
        let short = CpuSpent::new();
        let (first, second) = (short.begin(), short.begin());
        assert!(first.0.is_some() && !first.parts_timed() && second.parts_timed());
        // Parts are timed on other calls than the whole, about as often,
        // and not in step with the calls' parity (two threads in turn).
        let calls: Vec<Call> = (0..TIMED_EVERY * 256).map(|_| spent.begin()).collect();
        let (whole, parts) = (calls.iter().filter(|c| c.0.is_some()).count(), calls.iter().filter(|c| c.parts_timed()).count());
        assert!(calls.iter().all(|c| !(c.0.is_some() && c.parts_timed())));
        assert!((192..=320).contains(&whole) && (192..=320).contains(&parts), "{whole} and {parts} of {}", calls.len());
        let even = calls.iter().step_by(2).filter(|c| c.0.is_some()).count();
        assert!((64..=192).contains(&even), "{even} of the {whole} timed calls are even ones");
        for c in calls {
            spent.end(c);
        }
        let part = CpuSpent::new();
        part.end(part.begin_if(false));
        assert_eq!((part.calls(), part.mean_ns()), (0, None));
        part.end(part.begin_if(true));
        assert_eq!(part.timed.load(Ordering::Relaxed), 1);
        assert!(spent.mean_ns().is_some_and(|ns| ns > 0));
        spent.reset();
        assert_eq!((spent.calls(), spent.mean_ns()), (0, None));
    }
}
