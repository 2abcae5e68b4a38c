//! signal-safe: oxprof's own Java stack walk, used when AsyncGetCallTrace gives up.
//! Signal-safe.
//!
//! AsyncGetCallTrace refuses while a GC runs, when the thread's last Java
//! frame is not marked walkable (a thread inside the VM), or when the
//! interrupted PC is in code without a complete frame. The physical frames
//! (see `javastack`) are usually still there; this module turns them into
//! stored frames: an interpreted frame gives its method and bytecode index,
//! a compiled frame gives the method it was compiled for, marked compiled,
//! without the methods inlined into it (decoding the compiler's scope data
//! is left out: those samples are attributed to the compiled root). Each
//! `Method*` is turned into its `jmethodID` (see `method_ids`) and checked
//! by reading it back; the walk stops at the first frame it cannot name.
//!
//! A walk that stops before the thread's first Java call (a frame it cannot
//! step over or name) is reported as partial: the caller keeps its frames
//! under the failure's marker, so they are neither lost nor mistaken for a
//! whole stack rooted at the last frame found.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};

use jvmti_sys::asgct::{ticks, BCI_NATIVE_FRAME};

use crate::hotspot::frames::{self, Layout};
use crate::hotspot::gate;
use crate::hotspot::javastack::{self, JavaStack, PhysFrame, Start};
use crate::hotspot::method_ids;
use crate::sampling::store::{JavaFrameType, RawFrame};

/// What the walk found.
#[derive(Debug, PartialEq, Eq)]
pub enum Walked {
    /// `n` frames were written, leaf first: the whole stack, down to the
    /// thread's first Java call (or as many as `out` holds).
    Frames(usize),
    /// `n > 0` frames were written, leaf first, but the walk stopped at a
    /// frame it could not step over or name: the frames below are missing.
    Partial(usize),
    /// The thread is outside Java with no Java frame on its stack.
    NoJavaFrame,
    /// Nothing usable.
    Failed,
}

/// Walks the current thread's Java frames into `out`.
pub fn walk(l: &Layout, thread: usize, regs: (usize, usize, usize), out: &mut [RawFrame]) -> Walked {
    let (start, mut stack) = JavaStack::new(l, thread, regs);
    match start {
        Start::Frames => {}
        Start::NoJavaFrame => return Walked::NoJavaFrame,
        Start::Unknown => return Walked::Failed,
    }
    match name_frames(l, &mut stack, out, 0) {
        (0, _) => Walked::Failed,
        (n, true) => Walked::Frames(n),
        (n, false) => Walked::Partial(n),
    }
}

/// Names the rest of `stack`'s frames into `out[n..]`; returns the new
/// frame count and whether the stack is whole: the walk reached the
/// thread's first Java call or a virtual thread's continuation entry, or
/// filled `out`.
pub fn name_frames(l: &Layout, stack: &mut JavaStack<'_>, out: &mut [RawFrame], mut n: usize) -> (usize, bool) {
    let whole = loop {
        let Some(slot) = out.get_mut(n) else { break true };
        let Some(phys) = stack.next() else { break stack.reached_bottom() };
        let (method, bci, ty) = match phys {
            // A virtual thread's frames end here (see `javastack`).
            PhysFrame::Compiled { blob, .. } if javastack::is_continuation_entry(blob.method) => break true,
            // The interpreter's native-method entry keeps no bytecode pointer.
            PhysFrame::Interpreted { method, bcp: 0 } => (method, BCI_NATIVE_FRAME, JavaFrameType::Interpreted),
            PhysFrame::Interpreted { method, bcp } => (method, l.bci(method, bcp), JavaFrameType::Interpreted),
            PhysFrame::Compiled { blob, .. } => (blob.method, l.compiled_bci(blob.method), JavaFrameType::Compiled),
        };
        let Some(id) = method_ids::get(l, method) else { break false };
        *slot = RawFrame::java(id, bci, ty);
        n += 1;
    };
    (n, whole)
}

/// Off by `OXPROF_DISABLE_JAVA_WALKER=1` (to measure plain AsyncGetCallTrace).
static ENABLED: AtomicBool = AtomicBool::new(true);

// signal-safe: off (read at start)
/// Reads the environment switch. Call off the signal path.
pub fn configure() -> bool {
    let on = std::env::var_os("OXPROF_DISABLE_JAVA_WALKER").is_none_or(|v| v.is_empty() || v == "0");
    ENABLED.store(on, Ordering::Relaxed);
    on
}
// signal-safe: on

/// After AsyncGetCallTrace failed with `code`: walks the stack itself into
/// `out` ([`Walked::Failed`] when the code is not one the physical frames
/// can answer, or the walk is off).
pub fn on_failure(env: usize, ucontext: *mut c_void, out: &mut [RawFrame], code: i32) -> Walked {
    // Only the refusals the physical frames can answer; not a thread that
    // is exiting, not yet started, or being deoptimized.
    let answerable = matches!(code, ticks::GC_ACTIVE | ticks::UNKNOWN_NOT_JAVA | ticks::NOT_WALKABLE_NOT_JAVA | ticks::UNKNOWN_JAVA | ticks::NOT_WALKABLE_JAVA);
    if !answerable || !ENABLED.load(Ordering::Relaxed) || !gate::vmstructs_walk_trusted() {
        return Walked::Failed;
    }
    let (Some(l), Some(regs)) = (frames::layout(), javastack::registers(ucontext)) else { return Walked::Failed };
    walk(l, l.thread(env), regs, out)
}
