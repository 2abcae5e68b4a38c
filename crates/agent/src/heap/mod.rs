//! The heap: allocation sampling through JEP 331 (`alloc`, the
//! SampledObjectAlloc callback; `allocstack`, its own stack walk; `accuracy`,
//! how far its estimates can be trusted), live-object
//! tracking (`live`), paths to GC roots (`gcroots`) and the leak report
//! (`live_report`). Runs in JVMTI callbacks and its own threads, never in a
//! signal handler. Uses `hotspot`, `sampling::store`, `jvmti`, `symbols`,
//! `output` (the `Built` type) and `log`.

pub mod accuracy;
pub mod alloc;
pub mod allocstack;
pub mod gcroots;
pub mod live;
pub mod live_report;
pub mod sources;
