//! Lock profiling (`event=lock`, `lock=DURATION`): where threads wait to
//! acquire a contended lock, and for how long. Java monitors through the
//! JVMTI MonitorContendedEnter/Entered events (`monitors`);
//! `java.util.concurrent` locks by timing `Unsafe.park` through a native
//! rebinding that exists only while lock profiling runs (`park`). Both feed
//! one sampler (`sampler`: duration-weighted sampling, the lock's class as
//! the leaf frame, the waiting thread's stack) and one event source
//! (`source`). Runs in JVMTI callbacks and in the hooked native method on
//! the waiting thread, never in a signal handler. Uses `heap::allocstack`
//! (the own Java walk from a callback), `hotspot`, `sampling::store`,
//! `jvmti`, `output` (the `Built` type), `source` and `log`.

pub mod monitors;
pub mod owners;
pub mod park;
pub mod sampler;
pub mod source;
