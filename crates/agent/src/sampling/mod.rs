//! signal-safe: sampling: the signal handler (`signal`) and what it writes
//! to, all preallocated and lock-free (`store`, the sample store; `event_log`,
//! timed events for JFR), its CPU-time accounting (`cputime`), and the
//! registry of sampled threads and their timers (`threads`), each thread's
//! wall-clock bookkeeping (`wall_table`), each thread's context-label slot
//! (`label_slots`), and the CPU and wall-clock event
//! sources that arm the handler and build their profiles (`cpu`, `wall`),
//! and what each store held when the last interval ended (`interval`),
//! noticing that another component replaced a sampling signal's handler
//! (`taken`); these never run in the handler. May use `engine`, `hotspot` and
//! `native` (the handler calls their signal-safe parts); `cpu`, `wall`,
//! `threads` and `taken` also `options`, `log`, `output` and `source`.

pub mod cpu;
pub mod cputime;
pub mod event_log;
pub mod interval;
pub mod label_slots;
pub mod signal;
pub mod store;
pub mod taken;
pub mod threads;
pub mod wall;
pub mod wall_table;
