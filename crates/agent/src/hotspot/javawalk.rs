//! signal-safe: oxprof's own Java stack walk, used when AsyncGetCallTrace gives up.
//! Signal-safe.
//!
//! AsyncGetCallTrace refuses while a GC runs, when the thread's last Java
//! frame is not marked walkable (a thread inside the VM), or when the
//! interrupted PC is in code without a complete frame, and for the whole
//! time a thread is being deoptimized. The physical frames
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
//!
//! A thread running Java whose PC is in native code without a last Java
//! frame (`unknown_Java`: a leaf call into the VM, see [`scan`]; or
//! `not_walkable_Java`: the exception stubs' leaf call to
//! `SharedRuntime::exception_handler_for_return_address`) is walked
//! from its Java caller, found on the stack. Only this walk is used there,
//! never AsyncGetCallTrace with a context made up from the stack: that walk
//! trusts the frame pointer of interpreted frames, and a wrong guess crashed
//! a JVM in `Method::validate_bci_from_bcp`.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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
    named(l, start, &mut stack, out)
}

/// Names a walk that `start`ed into `out`.
fn named(l: &Layout, start: Start, stack: &mut JavaStack<'_>, out: &mut [RawFrame]) -> Walked {
    match start {
        Start::Frames => {}
        Start::NoJavaFrame => return Walked::NoJavaFrame,
        Start::Unknown => return Walked::Failed,
    }
    match name_frames(l, stack, out, 0) {
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
        let Some(phys) = stack.next() else {
            if !stack.reached_frozen_frames() {
                break stack.reached_bottom();
            }
            // A virtual thread's lowest frames are still frozen: the
            // continuation entry is written below the frames found, where
            // the profile marks the gap (as for AsyncGetCallTrace's stacks
            // that jump from the entry to the top frames).
            let entry = javastack::continuation_entry();
            let Some(k) = method_ids::lookup(l, entry) else { break false };
            *slot = RawFrame::java(k.id, k.compiled_bci(), JavaFrameType::Compiled);
            n += 1;
            break true;
        };
        let (method, bcp) = match phys {
            // A virtual thread's frames end here (see `javastack`).
            PhysFrame::Compiled { blob, .. } if javastack::is_continuation_entry(blob.method) => break true,
            PhysFrame::Interpreted { method, bcp } => (method, Some(bcp)),
            PhysFrame::Compiled { blob, .. } => (blob.method, None),
        };
        let Some(k) = method_ids::lookup(l, method) else { break false };
        *slot = match bcp {
            // The interpreter's native-method entry keeps no bytecode pointer.
            Some(0) => RawFrame::java(k.id, BCI_NATIVE_FRAME, JavaFrameType::Interpreted),
            Some(bcp) => RawFrame::java(k.id, k.bci(bcp), JavaFrameType::Interpreted),
            None => RawFrame::java(k.id, k.compiled_bci(), JavaFrameType::Compiled),
        };
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

/// Own walks by AsyncGetCallTrace's failure code (index `-code`, 0..=11).
static BY_CODE: [AtomicU64; 12] = [const { AtomicU64::new(0) }; 12];

// signal-safe: off (the debug log's line, at a dump)
/// The own walks since the process started, as "code:count" pairs of the
/// codes seen, for the debug log.
pub fn walks_by_code() -> String {
    let mut out = String::new();
    for (i, c) in BY_CODE.iter().enumerate() {
        let n = c.load(Ordering::Relaxed);
        if n > 0 {
            out.push_str(&format!(" {}:{n}", -(i as i32)));
        }
    }
    out
}
// signal-safe: on

/// After AsyncGetCallTrace failed with `code`: walks the stack itself into
/// `out` ([`Walked::Failed`] when the code is not one the physical frames
/// can answer, or the walk is off).
pub fn on_failure(env: usize, ucontext: *mut c_void, out: &mut [RawFrame], code: i32) -> Walked {
    // Only the refusals the physical frames can answer; not a thread that
    // is exiting or not yet started.
    let answerable = matches!(
        code,
        ticks::GC_ACTIVE | ticks::UNKNOWN_NOT_JAVA | ticks::NOT_WALKABLE_NOT_JAVA | ticks::UNKNOWN_JAVA | ticks::NOT_WALKABLE_JAVA | ticks::DEOPT
    );
    if !answerable || !ENABLED.load(Ordering::Relaxed) || !gate::vmstructs_walk_trusted() {
        return Walked::Failed;
    }
    let (Some(l), Some(regs)) = (frames::layout(), javastack::registers(ucontext)) else { return Walked::Failed };
    if let Some(c) = code.checked_neg().and_then(|i| BY_CODE.get(i as usize)) {
        c.fetch_add(1, Ordering::Relaxed);
    }
    let thread = l.thread(env);
    let (start, mut stack) = JavaStack::new(l, thread, regs);
    if code == ticks::DEOPT {
        // See `JavaStack::deoptimizing`. Once the skeletal frames are all
        // written (the last part of `unpack_frames`: freeing the
        // deoptimization's data, logging), they are walked as usual.
        if start != Start::Frames || (!l.deopt_frames_whole(thread) && !stack.deoptimizing()) {
            return Walked::Failed;
        }
        return named(l, start, &mut stack, out);
    }
    if let Some(more) = javastack::more_registers(ucontext) {
        stack.with_more_registers(more);
    }
    let walked = named(l, start, &mut stack, out);
    if walked == Walked::Failed && matches!(code, ticks::UNKNOWN_JAVA | ticks::NOT_WALKABLE_JAVA) && scannable(l, regs.0) {
        return scan(l, thread, regs, out);
    }
    walked
}

/// Whether a thread running Java interrupted at `pc` is in code whose
/// caller [`scan`] may find: native code, or a stub without a frame of its
/// own that pushed what it saves (C1's `slow_subtype_check` keeps four
/// registers above its return address), not a compiled method (whose own
/// frame would be lost).
fn scannable(l: &Layout, pc: usize) -> bool {
    !l.in_code_cache(pc) || (!l.in_interpreter(pc) && l.find_blob(pc).is_none_or(|b| b.method == 0))
}

/// The whole stack of a thread running Java, to check another walk's
/// against: the walk from the interrupted registers, or where those are in
/// native code or a frameless stub (a leaf call into the VM), from the Java
/// caller [`scan`] finds on the stack. Only [`Walked::Frames`] reached the
/// thread's first Java call.
pub fn whole(l: &Layout, thread: usize, regs: (usize, usize, usize), out: &mut [RawFrame]) -> Walked {
    let walked = walk(l, thread, regs, out);
    let in_java = matches!(l.thread_state(thread), frames::THREAD_IN_JAVA | frames::THREAD_IN_JAVA_TRANS);
    if walked == Walked::Failed && in_java && scannable(l, regs.0) {
        return scan(l, thread, regs, out);
    }
    walked
}

/// Bytes above the interrupted `sp` searched by [`scan`].
const SCAN_BYTES: usize = 8192;
/// Candidates [`scan`] walks from at most, per sample. The VM's frames
/// between the interrupted `sp` and the Java caller hold return addresses
/// of their own (into the stub that called the VM: C1's `unwind_exception`,
/// whose frame cannot be stepped) and copies of the caller's (the stub
/// pushes one, `exception_handler_for_return_address` keeps its argument);
/// the caller's own comes after them. A candidate that names nothing costs
/// one failed step.
const SCAN_TRIES: usize = 16;
/// Samples whose Java caller [`scan`] found.
static SCAN_FOUND: AtomicU64 = AtomicU64::new(0);

/// How many failed walks [`scan`] turned into Java stacks, since the
/// process started.
pub fn scan_found() -> u64 {
    SCAN_FOUND.load(Ordering::Relaxed)
}

/// Compiled code and the interpreter call some VM functions as leaf calls,
/// without recording a last Java frame (monitor exit's slow path waking a
/// waiter with `pthread_cond_signal`, GC barriers, `System.arraycopy`
/// helpers), and those may call into libc, whose functions keep no frame
/// pointer: the thread runs Java, its PC is in native code, and neither
/// AsyncGetCallTrace nor the frame-pointer chain reaches the Java caller.
/// Its return address is still on the stack: the words above `sp` (the
/// live part of this thread's own stack) are searched for one that points
/// into the code cache just after a call instruction, and the own walk
/// starts there (the caller's `sp` just above that word, its `fp` the word
/// below it, which a frame-pointer prologue pushed). A candidate counts only
/// when the walk names frames from it; at most [`SCAN_TRIES`] are tried.
/// A walk that reaches the thread's first Java call wins over one that
/// stops short: the VM's own frames below `sp` can hold copies of a return
/// address (`exception_handler_for_return_address` keeps its argument), and
/// a walk from a copy starts at the wrong `sp`.
fn scan(l: &Layout, thread: usize, (_, sp, fp): (usize, usize, usize), out: &mut [RawFrame]) -> Walked {
    let (_, hi) = l.stack(thread);
    let here = &hi as *const usize as usize;
    // Only the live stack above this handler's own frame is read.
    if sp <= here || sp >= hi || !sp.is_multiple_of(8) {
        return Walked::Failed;
    }
    let end = sp.saturating_add(SCAN_BYTES).min(hi);
    let mut tries = 0;
    let mut at = sp;
    let mut partial = None;
    while at.saturating_add(8) <= end && tries < SCAN_TRIES {
        // SAFETY: `sp <= at < hi`: the live part of this thread's own stack,
        // above this handler's frame (checked above), 8-byte aligned.
        let word = unsafe { (at as *const usize).read_volatile() };
        if javastack::follows_call(l, word) {
            tries += 1;
            // SAFETY: as above; `at - 8 >= sp`.
            let saved_fp = if at >= sp + 8 { unsafe { ((at - 8) as *const usize).read_volatile() } } else { fp };
            let start = (word, at + 8, saved_fp);
            match walk(l, thread, start, out) {
                Walked::Frames(n) => {
                    SCAN_FOUND.fetch_add(1, Ordering::Relaxed);
                    return Walked::Frames(n);
                }
                Walked::Partial(_) if partial.is_none() => partial = Some(start),
                _ => {}
            }
        }
        at += 8;
    }
    // No whole stack: the first partial one, walked again (the later
    // candidates wrote over it).
    let Some(start) = partial else { return Walked::Failed };
    SCAN_FOUND.fetch_add(1, Ordering::Relaxed);
    walk(l, thread, start, out)
}
