//! signal-safe: sampling: the signal handler (`signal`) and what it writes
//! to, all preallocated and lock-free (`store`, the sample store; `event_log`,
//! timed events for JFR), its CPU-time accounting (`cputime`), and the
//! registry of sampled threads and their timers (`threads`), and the CPU
//! event source that arms the handler and builds the CPU profile (`cpu`);
//! these two never run in the handler. May use `engine`, `hotspot` and
//! `native` (the handler calls their signal-safe parts); `cpu` and `threads`
//! also `options`, `log`, `output` and `source`.

pub mod cpu;
pub mod cputime;
pub mod event_log;
pub mod signal;
pub mod store;
pub mod threads;
