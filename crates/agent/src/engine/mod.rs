//! CPU sampling engines: how SIGPROF gets delivered to the threads.
//!
//! - `perf`: perf_events `cpu-clock`, one counter per thread, overflow signal
//!   sent to that thread (SIGTRAP from the counter's `sigtrap` attribute, or
//!   SIGPROF through `F_SETOWN_EX` on kernels before 5.13). Not limited by
//!   the kernel tick.
//! - `ctimer`: `timer_create` on each thread's CPU-time clock, signal sent to
//!   that thread (`SIGEV_THREAD_ID`). The fallback when perf_events is refused.
//!   The kernel checks it at its tick: below the tick a signal stands for
//!   several periods, and the handler weighs it by the timer's overrun.
//! - `itimer`: one process-wide `setitimer(ITIMER_PROF)`; limited by the tick.
//!
//! Per-thread engines hand out a [`ThreadTimer`] per thread; the thread
//! registry owns them and drops them when the thread ends.

pub mod ctimer;
pub mod itimer;
pub mod perf;
pub mod perf_ring;

use std::io;

use crate::options::Event;

/// The engine actually running (after any fallback).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Perf,
    Ctimer,
    Itimer,
}

impl Engine {
    /// A human-readable name for logs and profile metadata.
    pub fn describe(self) -> &'static str {
        match self {
            Engine::Perf => "perf_events cpu-clock",
            Engine::Ctimer => "timer_create thread CPU clock (ctimer)",
            Engine::Itimer => "setitimer ITIMER_PROF (itimer)",
        }
    }

    pub fn short(self) -> &'static str {
        match self {
            Engine::Perf => "perf_events",
            Engine::Ctimer => "ctimer",
            Engine::Itimer => "itimer",
        }
    }

    /// The signal that samples arrive with.
    pub fn signal_name(self) -> &'static str {
        match self {
            Engine::Perf => perf::delivery().signal_name(),
            Engine::Ctimer | Engine::Itimer => "SIGPROF",
        }
    }

    pub fn per_thread(self) -> bool {
        !matches!(self, Engine::Itimer)
    }

    /// Arms a timer for one thread (per-thread engines only).
    pub fn start_thread(self, tid: u32, interval_ns: u64) -> io::Result<ThreadTimer> {
        match self {
            Engine::Perf => perf::open(tid, interval_ns).map(ThreadTimer::Perf),
            Engine::Ctimer => ctimer::create(tid, interval_ns).map(ThreadTimer::Ctimer),
            Engine::Itimer => Err(io::Error::new(io::ErrorKind::Unsupported, "itimer is process-wide")),
        }
    }
}

/// Environment variable that makes `cpu` behave as if perf_events were
/// refused (for troubleshooting, and to test the fallback).
pub const DISABLE_PERF_ENV: &str = "OXPROF_DISABLE_PERF_EVENTS";

/// Chooses the engine for an event: `cpu` tries perf_events on the calling
/// thread and falls back to ctimer when the kernel refuses it. Returns the
/// engine and, on fallback, why perf_events was refused.
pub fn choose(event: Event, interval_ns: u64) -> (Engine, Option<String>) {
    match event {
        Event::Itimer => (Engine::Itimer, None),
        Event::Ctimer => (Engine::Ctimer, None),
        Event::Cpu if std::env::var_os(DISABLE_PERF_ENV).is_some_and(|v| v != "0") => {
            (Engine::Ctimer, Some(format!("perf_events disabled by {DISABLE_PERF_ENV}")))
        }
        Event::Cpu => match perf::probe(interval_ns) {
            Ok(_) => (Engine::Perf, None),
            Err(e) => (Engine::Ctimer, Some(e.to_string())),
        },
    }
}

/// A per-thread timer; dropping it stops and frees it.
#[derive(Debug)]
pub enum ThreadTimer {
    Perf(perf::PerfEvent),
    Ctimer(ctimer::CpuTimer),
}

impl ThreadTimer {
    /// Pauses or resumes the thread's timer (triggers keep timers paused
    /// outside their window, so a closed window costs no signal).
    pub fn set_running(&self, on: bool, interval_ns: u64) -> io::Result<()> {
        match self {
            ThreadTimer::Perf(p) => p.set_enabled(on),
            ThreadTimer::Ctimer(t) => t.set_interval(if on { interval_ns } else { 0 }),
        }
    }
}
