//! Noticing that another component took one of oxprof's sampling signals:
//! an application's own handler (`sun.misc.Signal.handle`), another
//! profiler loaded later. Its handler replaces oxprof's without chaining,
//! so oxprof would record nothing while its timers flood the other handler
//! with signals it never asked for. The CPU source's thread watcher and the
//! wall sampler ask [`Taken::check`] every 100 ms or so (with `sigaction`,
//! never from a handler); the first time it finds the handler replaced it
//! logs one warning, and the caller stops arming that engine's timers. The
//! other component's handler is never replaced again. Runs outside the
//! signal handler.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::log;
use crate::sampling::signal;

/// How often at most the handler is looked at.
pub const CHECK_PERIOD_NS: u64 = 100_000_000;

/// Watches one sampling signal of one event source.
pub struct Taken {
    signo: libc::c_int,
    /// What stops: "CPU samples", "wall-clock samples".
    what: &'static str,
    /// The engine, as the warning names it ("ctimer", "wall").
    engine: &'static str,
    /// What the user can do about it.
    advice: String,
    started: Instant,
    /// When the handler was found replaced (ns since `started`, plus one);
    /// 0 while it is still oxprof's.
    at: AtomicU64,
    /// When it is next looked at (ns since `started`).
    next_check: AtomicU64,
}

impl Taken {
    pub fn new(signo: libc::c_int, what: &'static str, engine: &'static str, advice: String) -> Taken {
        Taken { signo, what, engine, advice, started: Instant::now(), at: AtomicU64::new(0), next_check: AtomicU64::new(0) }
    }

    /// The signal's name (`SIGPROF`).
    pub fn signal_name(&self) -> &'static str {
        signal::signal_name(self.signo)
    }

    /// Whether the signal was found taken (by an earlier [`Taken::check`]).
    pub fn is_taken(&self) -> bool {
        self.at.load(Ordering::Acquire) != 0
    }

    /// Looks at the signal's handler (at most every [`CHECK_PERIOD_NS`]
    /// unless `now`): true once it is no longer oxprof's. The first time,
    /// logs the warning; the caller then stops its timers.
    pub fn check(&self, now: bool) -> bool {
        if self.is_taken() {
            return true;
        }
        let elapsed = self.started.elapsed().as_nanos() as u64;
        if !now && elapsed < self.next_check.load(Ordering::Relaxed) {
            return false;
        }
        self.next_check.store(elapsed + CHECK_PERIOD_NS, Ordering::Relaxed);
        if !signal::handler_replaced(self.signo) {
            return false;
        }
        if self.at.compare_exchange(0, elapsed + 1, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            log::warn(&self.message());
        }
        true
    }

    /// When the handler was found replaced, in seconds since the start.
    fn at_secs(&self) -> f64 {
        self.at.load(Ordering::Acquire).saturating_sub(1) as f64 / 1e9
    }

    /// The warning line (without the log's prefix).
    pub fn message(&self) -> String {
        let at = self.at_secs();
        format!(
            "another handler replaced oxprof's {} handler at {at:.1} s; {} stopped (engine {}): {}",
            self.signal_name(),
            self.what,
            self.engine,
            self.advice
        )
    }

    /// ` signal_taken=SIGPROF` for the summary line, or nothing.
    pub fn summary_field(&self) -> String {
        if self.is_taken() {
            format!(" signal_taken={}", self.signal_name())
        } else {
            String::new()
        }
    }

    /// For the profile's metadata and `status`: when and what, if taken.
    pub fn note(&self) -> Option<String> {
        self.is_taken().then(|| {
            let at = self.at_secs();
            format!("{} handler replaced by another component at {at:.1} s; {} stopped there", self.signal_name(), self.what)
        })
    }
}
