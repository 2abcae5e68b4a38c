//! signal-safe: sampling: the signal handler (`signal`) and what it writes
//! to, all preallocated and lock-free (`store`, the sample store; `event_log`,
//! timed events for JFR), its CPU-time accounting (`cputime`), and the
//! registry of sampled threads and their timers (`threads`, not reachable
//! from the handler). May use `engine`, `hotspot` and `native` (the handler
//! calls their signal-safe parts), `options` and `log` (outside the handler).

pub mod cputime;
pub mod event_log;
pub mod signal;
pub mod store;
pub mod threads;
