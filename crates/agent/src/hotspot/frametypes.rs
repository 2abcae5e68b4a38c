//! signal-safe: Frame types for a successful AsyncGetCallTrace walk. Signal-safe.
//!
//! AsyncGetCallTrace names the Java frames but not how each runs. The
//! physical frames (see `javastack`) say it: an interpreted physical frame is
//! one interpreted Java frame; a compiled physical frame is the compiled
//! method plus the methods inlined into it, which AsyncGetCallTrace lists
//! leaf first before it. So the two lists are aligned by `Method*` (a
//! `jmethodID` points at its method's `Method*` slot): an interpreted frame
//! must match the next Java frame; a compiled frame claims the next frames up
//! to and including the one of its own method, the earlier ones inlined.
//! Where the lists disagree, the remaining frames keep the unknown type.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

use jvmti_sys::asgct::BCI_NATIVE_FRAME;

use crate::hotspot::frames::{self, Blob, Layout};
use crate::hotspot::gate;
use crate::hotspot::javastack::{self, JavaStack, PhysFrame, Start};
use crate::hotspot::javawalk;
use crate::hotspot::method_ids;
use crate::hotspot::scopes::MAX_SCOPES;
use crate::sampling::store::{JavaFrameType, RawFrame};

/// The `Method*` behind a walked frame's `jmethodID`, or 0 for anything
/// that is not a Java frame (native/kernel code addresses are never read).
/// Only where [`gate::jmethodid_is_method_slot`] (checked by
/// [`annotate`], the only caller on the signal path).
fn method_of(f: &RawFrame) -> usize {
    // AsyncGetCallTrace gives a compiled top frame it cannot place inside
    // its method the bci -1: still that method's frame.
    if f.method == 0 || f.is_marker() || f.is_native() || (f.bci < 0 && f.bci != BCI_NATIVE_FRAME && f.bci != -1) {
        return 0;
    }
    // SAFETY: AsyncGetCallTrace only returns jmethodIDs the JVM created; they
    // point at slots in JNI method blocks that are never freed.
    unsafe { (f.method as *const usize).read_volatile() }
}

/// Sets the type of each of AsyncGetCallTrace's `n` frames at the start of
/// `frames` (leaf first) that the physical walk accounts for, and looks
/// below the last one (see [`Below`]); `frames` may hold more than `n`.
pub fn annotate(l: &Layout, thread: usize, regs: (usize, usize, usize), frames: &mut [RawFrame], n: usize) -> Below {
    // From JDK 26 a jmethodID is a table key: `method_of` would fault.
    if !gate::jmethodid_is_method_slot() {
        return Below::Nothing;
    }
    let (start, mut stack) = JavaStack::new(l, thread, regs);
    if start != Start::Frames {
        return Below::Nothing;
    }
    let Some(walked) = frames.get_mut(..n) else { return Below::Nothing };
    // Only when every frame was matched does the next physical frame lie
    // below AsyncGetCallTrace's root; a stack cut by the depth limit stays so.
    let aligned = align(&mut stack, walked, method_of);
    if n >= frames.len() {
        return Below::Nothing;
    }
    if aligned.matched < n {
        return check_root(l, thread, regs, frames, n);
    }
    // The interrupted compiled method itself, which AsyncGetCallTrace left
    // out (JDK 11 does in some half-built frames: the sample went to the
    // caller), goes back on top.
    let mut n = n;
    let mut grown = false;
    if let Some(k) = aligned.dropped_top.and_then(|m| method_ids::lookup(l, m)) {
        RESTORED.fetch_add(1, Ordering::Relaxed);
        frames.copy_within(0..n, 1);
        if let Some(top) = frames.first_mut() {
            *top = RawFrame::java(k.id, k.compiled_bci(), JavaFrameType::Compiled);
            (n, grown) = (n + 1, true);
        }
        if n >= frames.len() {
            return Below::Completed(n);
        }
    }
    match javawalk::name_frames(l, &mut stack, frames, n) {
        // The physical walk could not step below AsyncGetCallTrace's root
        // either: both stopped at the same frame, short of the thread's
        // first Java call.
        (k, false) if k == n && !grown && !stack.ended_at_entry() => Below::Cut(k),
        (k, _) if k == n && !grown => Below::Nothing,
        (k, _) if k == n => Below::Completed(k),
        (k, true) => Below::Completed(k),
        (k, false) => Below::Cut(k),
    }
}

/// When the two walks could not be aligned: whether AsyncGetCallTrace's
/// `n` frames end at the root the physical frames lead to. The own walk
/// runs from scratch into the room after them (from the Java caller found
/// on the stack when the thread is in a leaf call into the VM; see
/// `javawalk::whole`); if it reaches the thread's first Java call at
/// another method than AsyncGetCallTrace's root, AsyncGetCallTrace stopped
/// early without saying so (it ends at a sender it judges unsafe and
/// returns what it has: in `SharedRuntime::exception_handler_for_return_address`,
/// called by an exception stub that has no frame, it was seen to give two
/// frames of the throwing method and no root, about once in 100,000
/// samples of exception-heavy code), and the own walk's whole stack
/// replaces its frames. Anything less certain keeps them as they are.
fn check_root(l: &Layout, thread: usize, regs: (usize, usize, usize), frames: &mut [RawFrame], n: usize) -> Below {
    let Some(room) = frames.get_mut(n..) else { return Below::Nothing };
    let javawalk::Walked::Frames(k) = javawalk::whole(l, thread, regs, room) else { return Below::Nothing };
    // A walk that filled the room may have been cut by it.
    if k == 0 || k >= room.len() {
        return Below::Nothing;
    }
    let (Some(own_root), Some(root)) = (frames.get(n + k - 1), frames.get(n - 1)) else { return Below::Nothing };
    if own_root.method == root.method {
        return Below::Nothing;
    }
    REPLACED.fetch_add(1, Ordering::Relaxed);
    frames.copy_within(n..n + k, 0);
    Below::Replaced(k)
}

/// Samples whose AsyncGetCallTrace stack stopped early and was replaced
/// (see [`check_root`]).
static REPLACED: AtomicU64 = AtomicU64::new(0);

/// How many samples' stacks were replaced by the own walk because
/// AsyncGetCallTrace's stopped short, since the process started.
pub fn replaced_stacks() -> u64 {
    REPLACED.load(Ordering::Relaxed)
}

/// Samples whose interrupted method was put back on top (see [`annotate`]).
static RESTORED: AtomicU64 = AtomicU64::new(0);

/// How many samples got their interrupted method back on top, since the
/// process started.
pub fn restored_tops() -> u64 {
    RESTORED.load(Ordering::Relaxed)
}

/// What [`align`] found.
#[derive(Debug, PartialEq, Eq)]
struct Aligned {
    /// How many of the stored frames were matched; when that is all of
    /// them, the physical walk stands at the frame below the last one used.
    matched: usize,
    /// The `Method*` of the interrupted compiled frame, when the stored
    /// frames begin with its caller instead (the top frame was dropped).
    dropped_top: Option<usize>,
}

/// What the physical walk finds below AsyncGetCallTrace's root frame (or
/// on top of its first: see [`annotate`]).
/// AsyncGetCallTrace can end a walk early without saying so (HotSpot stops
/// at a sender it cannot follow, such as the VM calling back into Java to
/// link an invokedynamic call site), which would make a frame in the middle
/// of the stack look like its root.
#[derive(Debug, PartialEq, Eq)]
pub enum Below {
    /// No Java frame found below (or nothing known): the stack is whole.
    Nothing,
    /// More Java frames, named down to the thread's first Java call (or
    /// the interrupted method put back on top): the stack now has this
    /// many frames.
    Completed(usize),
    /// More Java frames, but the physical walk stopped short too: this many
    /// frames, and the stack is known to be cut.
    Cut(usize),
    /// AsyncGetCallTrace's frames ended above the thread's first Java call
    /// and the own walk's whole stack, this many frames, took their place
    /// (see [`check_root`]).
    Replaced(usize),
}

/// The alignment itself, over any physical frames (`method_of` gives a
/// stored frame's `Method*`).
fn align(stack: &mut impl Iterator<Item = PhysFrame>, frames: &mut [RawFrame], method_of: impl Fn(&RawFrame) -> usize) -> Aligned {
    let mut i = 0;
    let mut n = 0;
    let mut dropped_top = None;
    while i < frames.len() {
        let Some(phys) = stack.next() else { break };
        n += 1;
        // The interrupted frame may be half built (a method's entry or exit)
        // and seen differently by AsyncGetCallTrace: at the top only, a
        // physical frame that matches nothing is skipped, and an interpreted
        // one may match the second Java frame, leaving the first unknown.
        let first = n == 1;
        match phys {
            PhysFrame::Interpreted { method, .. } => {
                let at = if frames.get(i).is_some_and(|f| method_of(f) == method) {
                    i
                } else if first && frames.get(i + 1).is_some_and(|f| method_of(f) == method) {
                    i + 1
                } else if first {
                    continue;
                } else {
                    break;
                };
                if let Some(f) = frames.get_mut(at) {
                    f.set_type(JavaFrameType::Interpreted);
                }
                i = at + 1;
            }
            PhysFrame::Compiled { blob: Blob { method, .. }, .. } => {
                let end = frames.len().min(i + MAX_SCOPES);
                let Some(own) = frames.get(i..end).and_then(|w| w.iter().position(|f| method_of(f) == method)) else {
                    if first {
                        if !javastack::is_continuation_entry(method) {
                            dropped_top = Some(method);
                        }
                        continue;
                    }
                    break;
                };
                for (k, f) in frames.iter_mut().enumerate().skip(i).take(own + 1) {
                    f.set_type(if k == i + own { JavaFrameType::Compiled } else { JavaFrameType::Inlined });
                }
                i += own + 1;
            }
        }
    }
    // Dropped only if the next physical frame did match the first stored one.
    Aligned { matched: i, dropped_top: dropped_top.filter(|_| i > 0) }
}

/// After a successful AsyncGetCallTrace walk: types its `n` frames at the
/// start of `frames` in place (leaf first, before any native or kernel
/// frames are added around them) and looks below them; `frames` is the room
/// the walk had.
pub fn on_success(env: usize, ucontext: *mut c_void, frames: &mut [RawFrame], n: usize) -> Below {
    match (frames::layout(), javastack::registers(ucontext)) {
        (Some(l), Some(regs)) => annotate(l, l.thread(env), regs, frames, n),
        _ => Below::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use JavaFrameType::*;

    /// Stored frames with fake jmethodIDs; the fake Method* is id * 10.
    fn frames(ids: &[usize]) -> Vec<RawFrame> {
        ids.iter().map(|&m| RawFrame { bci: 5, method: m }).collect()
    }

    fn types(f: &[RawFrame]) -> Vec<JavaFrameType> {
        f.iter().map(|f| f.java_type()).collect()
    }

    fn run(phys: &[PhysFrame], ids: &[usize]) -> Vec<JavaFrameType> {
        let mut f = frames(ids);
        align(&mut phys.iter().copied(), &mut f, |f| f.method * 10);
        assert!(f.iter().all(|f| f.java_bci() == 5), "bci kept");
        types(&f)
    }

    const fn interp(m: usize) -> PhysFrame {
        PhysFrame::Interpreted { method: m * 10, bcp: 0 }
    }

    const fn comp(m: usize) -> PhysFrame {
        PhysFrame::Compiled { pc: 0, blob: Blob { frame_bytes: 0, frame_complete: 0, code_begin: 0, method: m * 10, start: 0, size: 0 } }
    }

    #[test]
    fn compiled_frames_claim_their_inlined_callees() {
        // leaf first: 1 and 2 inlined into 3 (compiled), 4 interpreted
        assert_eq!(run(&[comp(3), interp(4)], &[1, 2, 3, 4]), [Inlined, Inlined, Compiled, Interpreted]);
        assert_eq!(run(&[interp(1), comp(2), comp(3)], &[1, 2, 3]), [Interpreted, Compiled, Compiled]);
    }

    #[test]
    fn a_mismatch_leaves_the_rest_unknown() {
        assert_eq!(run(&[interp(1), interp(9), interp(3)], &[1, 2, 3]), [Interpreted, Unknown, Unknown]);
        assert_eq!(run(&[interp(1), comp(9)], &[1, 2, 3]), [Interpreted, Unknown, Unknown]);
    }

    #[test]
    fn a_half_built_top_frame_is_skipped() {
        // the top physical frame is not among the Java frames
        assert_eq!(run(&[comp(7), interp(1), comp(2)], &[1, 2]), [Interpreted, Compiled]);
        // the top Java frame has no physical frame yet
        assert_eq!(run(&[interp(2), interp(3)], &[1, 2, 3]), [Unknown, Interpreted, Interpreted]);
    }

    #[test]
    fn code_address_frames_are_never_dereferenced() {
        // A kernel address would fault if read: the guard must skip it.
        assert_eq!(method_of(&RawFrame::kernel_pc(0xffff_ffff_8100_0000)), 0);
        assert_eq!(method_of(&RawFrame::native_pc(8)), 0);
        let method_slot: usize = 0x1234;
        let jmid = &method_slot as *const usize as usize;
        assert_eq!(method_of(&RawFrame::java(jmid, 3, Unknown)), 0x1234);
        assert_eq!(method_of(&RawFrame { bci: BCI_NATIVE_FRAME, method: jmid }), 0x1234);
    }

    /// Once every stored frame is matched, the physical walk stands at the
    /// frame below the stored root (where AsyncGetCallTrace may have stopped
    /// early); a mismatch or a short walk says so.
    #[test]
    fn alignment_stops_below_the_stored_root() {
        let mut f = frames(&[1, 2, 3]);
        let mut phys = [comp(2), interp(3), interp(4), interp(5)].into_iter();
        assert_eq!(align(&mut phys, &mut f, |f| f.method * 10).matched, 3);
        assert_eq!(phys.next(), Some(interp(4)), "the next frame is the one below the root");
        let mut phys = [interp(1), interp(2)].into_iter();
        assert_eq!(align(&mut phys, &mut frames(&[1, 2, 3]), |f| f.method * 10).matched, 2);
        assert_eq!(phys.next(), None);
        let mut phys = [interp(1), interp(9), interp(3)].into_iter();
        assert_eq!(align(&mut phys, &mut frames(&[1, 2, 3]), |f| f.method * 10).matched, 1);
    }

    /// A compiled top frame missing from the stored frames, whose caller
    /// starts them, was dropped by AsyncGetCallTrace; one matching nothing
    /// at all was not.
    #[test]
    fn a_dropped_top_frame_is_told() {
        let mut phys = [comp(7), comp(2), interp(3)].into_iter();
        let a = align(&mut phys, &mut frames(&[1, 2, 3]), |f| f.method * 10);
        assert_eq!(a, Aligned { matched: 3, dropped_top: Some(70) });
        let mut phys = [comp(2), interp(3)].into_iter();
        assert_eq!(align(&mut phys, &mut frames(&[1, 2, 3]), |f| f.method * 10).dropped_top, None, "nothing dropped");
        let mut phys = [comp(7), interp(9)].into_iter();
        assert_eq!(align(&mut phys, &mut frames(&[1, 2, 3]), |f| f.method * 10), Aligned { matched: 0, dropped_top: None });
    }

    #[test]
    fn more_physical_frames_than_stored_ones_stop_cleanly() {
        assert_eq!(run(&[interp(1), interp(2), interp(3)], &[1, 2]), [Interpreted, Interpreted]);
        assert_eq!(run(&[], &[1]), [Unknown]);
    }
}
