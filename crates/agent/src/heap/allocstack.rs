//! The allocating thread's Java stack, for the SampledObjectAlloc callback.
//!
//! JVMTI's `GetStackTrace` costs about 0.5 µs per frame (it builds a
//! `javaVFrame` object for each, with register maps), which on javac's
//! 40-frame stacks made the callback 25–45 µs. This module walks the
//! thread's own frames instead, from the last-Java-frame anchor the thread
//! left when it entered the VM to allocate (see `javastack`), decoding the
//! inlining of compiled frames from their debug information (see `scopes`),
//! and turns each `Method*` into its `jmethodID` through a small cache;
//! decoded call sites are cached by return address. It produces what
//! `GetStackTrace` would (method and bytecode index per Java frame, leaf
//! first) plus each frame's type, two to three times faster: on javac a
//! median 11–17 µs against 23–37 µs, nearly all of it cache misses, since
//! samples are milliseconds apart and every frame touches cold metadata.
//!
//! Any doubt returns `None`, and the caller uses `GetStackTrace`: a frame it
//! cannot step over or name, a call site without debug information (a frame
//! being deoptimized), a JDK whose nmethod layout is not in its structure
//! table (neither JDK 11–21's nor 25's), or a walk that did not reach the thread's first Java
//! call. `OXPROF_ALLOC_WALK=0` turns the walk off (to compare), and
//! `OXPROF_CHECK_ALLOC_WALK=1` makes the caller run both and count
//! differences (the tests use it).
//!
//! Memory is read directly, not through `safemem`: the walk runs on the
//! thread whose stack it reads, outside any signal handler, and everything it
//! reads belongs to frames on that stack (the nmethods, their debug
//! information, the methods) and so cannot be freed meanwhile. Stack words
//! are bounds-checked by `javastack`, debug information by `hotspot`, and a
//! `Method*` is used only after its `jmethodID` was read back.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::hotspot::frames;
use crate::hotspot::fullwalk::{self, Caller};
use crate::sampling::store::RawFrame;

static ENABLED: AtomicBool = AtomicBool::new(true);
static CHECK: AtomicBool = AtomicBool::new(false);

/// Reads the environment switches. Call before allocation sampling starts.
pub fn configure() -> bool {
    let on = std::env::var_os("OXPROF_ALLOC_WALK").is_none_or(|v| v != "0");
    ENABLED.store(on, Ordering::Relaxed);
    CHECK.store(std::env::var_os("OXPROF_CHECK_ALLOC_WALK").is_some_and(|v| v == "1"), Ordering::Relaxed);
    on
}

/// Whether the caller should also run `GetStackTrace` and compare.
pub fn checking() -> bool {
    CHECK.load(Ordering::Relaxed)
}

/// Walks the current thread's Java frames into `out`, leaf first. `env` is
/// the callback's `JNIEnv`. `None`: use `GetStackTrace`.
pub fn walk(env: usize, out: &mut [RawFrame]) -> Option<usize> {
    if !ENABLED.load(Ordering::Relaxed) {
        return None;
    }
    let l = frames::layout().filter(|l| fullwalk::usable(l))?;
    // No interrupted registers: in a callback the thread is "in native" and
    // the walk starts at its anchor.
    fullwalk::walk(l, l.thread(env), (0, 0, 0), None, Caller::Callback, out)
}
