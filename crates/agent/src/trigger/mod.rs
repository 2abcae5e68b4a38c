//! signal-safe: Native-function triggers (`begin=`, `end=`, `ttsp`): a
//! recording's window, opened and closed when the JVM executes chosen native
//! functions, outside which CPU and wall samples are not kept; and the
//! safepoints the `ttsp` triggers time on the way. `traps` (breakpoints
//! patched into code, taken in the SIGTRAP handler; the window the sample
//! handler reads) and `records` (a preallocated ring of closed windows) run
//! in signal handlers; `gate` (resolving names, arming, stopping, turning
//! records into safepoints) does not. Uses `native::lookup`,
//! `hotspot::safemem`, `sampling::event_log`'s clock, `log`.

pub mod gate;
pub mod records;
pub mod traps;
