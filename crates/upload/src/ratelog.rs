//! The uploader's log: lines go to the callback the caller gave, at most one
//! per kind of failure per interval (a minute by default); the next line of
//! that kind says how many were left out meanwhile.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How serious a log line is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
}

/// Where the uploader's lines go (the agent's own log). Called on the
/// sender thread; lines never hold a credential.
pub type LogFn = Arc<dyn Fn(LogLevel, &str) + Send + Sync>;

/// A duration for a log line: `250 ms`, `12 s`, `5 min`.
pub(crate) fn human(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else if d < Duration::from_secs(120) || !d.as_secs().is_multiple_of(60) {
        format!("{} s", d.as_secs())
    } else {
        format!("{} min", d.as_secs() / 60)
    }
}

pub(crate) struct RateLog {
    sink: LogFn,
    interval: Duration,
    kinds: HashMap<String, (Instant, u64)>,
}

impl RateLog {
    pub(crate) fn new(sink: LogFn, interval: Duration) -> RateLog {
        RateLog { sink, interval, kinds: HashMap::new() }
    }

    /// Logs `msg` unless a line of the same `kind` went out less than an
    /// interval ago (then it is counted).
    pub(crate) fn limited(&mut self, level: LogLevel, kind: &str, msg: &str) {
        let now = Instant::now();
        match self.kinds.get_mut(kind) {
            Some((last, suppressed)) if now.duration_since(*last) < self.interval => *suppressed += 1,
            Some((last, suppressed)) => {
                let line = if *suppressed > 0 {
                    format!("{msg} ({} similar message{} suppressed in the last {})", suppressed, if *suppressed == 1 { "" } else { "s" }, human(self.interval))
                } else {
                    msg.to_string()
                };
                *last = now;
                *suppressed = 0;
                self.emit(level, &line);
            }
            None => {
                self.kinds.insert(kind.to_string(), (now, 0));
                self.emit(level, msg);
            }
        }
    }

    /// Logs without limit (rare events: start, stop, recovery).
    pub(crate) fn always(&self, level: LogLevel, msg: &str) {
        self.emit(level, msg);
    }

    /// A callback that panics loses its line, not the sender thread.
    fn emit(&self, level: LogLevel, line: &str) {
        let sink = &self.sink;
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink(level, line)));
    }

    /// Lines of each kind still held back, for a last word at shutdown.
    pub(crate) fn suppressed(&self) -> u64 {
        self.kinds.values().map(|(_, n)| n).sum()
    }
}
